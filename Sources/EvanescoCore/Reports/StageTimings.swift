import Foundation

/// Wall-clock seconds spent in each stage of a pipeline run.
///
/// One type for every pipeline: a stage that a pipeline does not have stays `nil` and is left
/// out of its report. Encoded with ``ReportJSON`` the keys are snake_case (`warp_merge`).
public struct StageTimings: Sendable, Codable, Equatable {
    /// Reading and decoding the inputs.
    public var decode: Double?
    /// Registering frames to the reference (burst stacking).
    public var align: Double?
    /// Warping frames into the reference (thread time share of the fused warp + merge).
    public var warp: Double?
    /// Merging the warped frames (thread time share of the fused warp + merge).
    public var merge: Double?
    /// Wall time of the fused, tile-by-tile warp and merge.
    public var warpMerge: Double?
    /// Merging the erase mask's region again (`StackOptions.erase` in EvanescoStack).
    public var erase: Double?
    /// Normalising the depth map and choosing the focus (portrait).
    public var normalize: Double?
    /// Building the focus or subject mask.
    public var mask: Double?
    /// Snapping the mask to the photo's or matte's edges (portrait `refine`).
    public var refine: Double?
    /// Rendering the effect (portrait) or the composite (backdrop).
    public var effect: Double?
    /// Face detection (backdrop).
    public var detect: Double?
    /// Encoding and writing the outputs.
    public var encode: Double?
    /// The whole run.
    public var total: Double?

    /// No stage measured yet.
    public init() {}

    /// Runs `body`, adds its wall-clock time to `stage` and returns its result.
    ///
    /// - Parameters:
    ///   - stage: The stage the time is added to.
    ///   - body: The work to time.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws (the time is still added).
    @discardableResult
    public mutating func measure<T>(_ stage: WritableKeyPath<StageTimings, Double?>, _ body: () throws -> T) rethrows
        -> T
    {
        let start = DispatchTime.now().uptimeNanoseconds
        defer {
            self[keyPath: stage] =
                (self[keyPath: stage] ?? 0) + Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        }
        return try body()
    }

    /// These timings rounded to the millisecond, as reports print them.
    public var rounded: StageTimings {
        var r = self
        for k in Self.stages { r[keyPath: k] = self[keyPath: k].map { ($0 * 1000).rounded() / 1000 } }
        return r
    }

    static var stages: [WritableKeyPath<StageTimings, Double?>] {
        [
            \.decode, \.align, \.warp, \.merge, \.warpMerge, \.normalize, \.mask, \.refine, \.effect, \.detect,
            \.encode, \.total
        ]
    }
}

/// The one JSON convention of every report and `--json` output: snake_case keys, sorted,
/// pretty-printed, with a final newline.
public enum ReportJSON {
    /// An encoder set to the report convention.
    public static func encoder() -> JSONEncoder {
        let e = JSONEncoder()
        e.keyEncodingStrategy = .convertToSnakeCase
        e.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        e.nonConformingFloatEncodingStrategy = .convertToString(
            positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return e
    }

    /// `value` as one line of report JSON (the same keys, not pretty-printed, no newline): for
    /// streams that carry one document a line, such as server-sent events.
    ///
    /// - Parameter value: The document.
    /// - Returns: The line.
    /// - Throws: `EncodingError` if a value cannot be encoded.
    public static func line<T: Encodable>(_ value: T) throws -> String {
        let e = encoder()
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try e.encode(value), as: UTF8.self)
    }

    /// A decoder for documents written by ``encoder()``.
    public static func decoder() -> JSONDecoder {
        let d = JSONDecoder()
        d.keyDecodingStrategy = .convertFromSnakeCase
        return d
    }

    /// `value` as report JSON bytes, ending in a newline.
    ///
    /// - Parameter value: The report.
    /// - Returns: UTF-8 JSON.
    /// - Throws: `EncodingError` if a value cannot be encoded.
    public static func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        Array(try encoder().encode(value)) + [10]
    }

    /// `value` as a report JSON string, without the final newline.
    public static func string<T: Encodable>(_ value: T) throws -> String {
        var bytes = try encode(value)
        bytes.removeLast()
        return String(decoding: bytes, as: UTF8.self)
    }
}
