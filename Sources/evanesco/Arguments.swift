import ArgumentParser
import EvanescoAlign
import EvanescoCore
import EvanescoDepth
import EvanescoIO
import EvanescoStack
import Foundation

// How the command line spells the library's values and the CLI's own argument types.

extension AlignMode: ExpressibleByArgument {}
extension MergeMethod: ExpressibleByArgument {}
/// On the command line in kebab-case, as every value is (`catmull-rom`); the old spelling
/// `catmullRom` is still accepted.
extension Interpolation: ExpressibleByArgument {
    public init?(argument: String) {
        guard let v = Self.allCases.first(where: { $0.argument == argument || $0.rawValue == argument }) else {
            return nil
        }
        self = v
    }
    /// The value in kebab-case: each capital becomes a dash and its lower case.
    var argument: String {
        rawValue.reduce(into: "") { s, c in s += c.isUppercase ? "-" + c.lowercased() : String(c) }
    }
    public static var allValueStrings: [String] { allCases.map(\.argument) }
    public var defaultValueDescription: String { argument }
}

extension SubjectSelection: ExpressibleByArgument {}

/// `--depth-format`: auto, or a stream ``DepthEncoding`` (mm16, metres/pfm, disparity8:MIN,MAX).
enum DepthFormatArgument: ExpressibleByArgument, Equatable {
    case auto
    case format(DepthEncoding)
    init?(argument: String) {
        if argument == "auto" {
            self = .auto
        } else if let f = DepthEncoding(argument) {
            self = .format(f)
        } else {
            return nil
        }
    }
    var format: DepthEncoding? { if case .format(let f) = self { f } else { nil } }
    var defaultValueDescription: String { "auto" }
}

/// `WIDTHxHEIGHT`.
struct FrameSize: ExpressibleByArgument {
    var width: Int, height: Int
    init?(argument: String) {
        guard let (w, h) = try? FrameStreamError.parseSize(argument) else { return nil }
        width = w
        height = h
    }
}

extension GDepthPolarity: ExpressibleByArgument {}
extension DepthKind: ExpressibleByArgument {}

/// `--memory-limit` (megabytes, 0 for none) as the library's bytes, checked.
func memoryLimitBytes(_ megabytes: Int) throws -> Int? {
    guard (0...(1 << 24)).contains(megabytes) else {
        throw ValidationError("--memory-limit must be within 0...16777216 (megabytes; 0 for no limit)")
    }
    return megabytes == 0 ? nil : megabytes << 20
}
