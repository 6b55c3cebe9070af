import ArgumentParser
import EvanescoCore
import EvanescoIO
import Foundation

/// `depth extract --report`.
struct ExtractReport: Encodable {
    var input: String
    var output: String
    var auxiliary: DepthSummary.Auxiliary?
    var stored: String?
    var kind: DepthKind?
    var units: String?
    var range: [Float]?
    var normalized: Bool?
    var holes: Int?
    var png16Mapping: String?
    var width: Int?
    var height: Int?
    var source: String?
    var orientationApplied: Int?
}
