import EvanescoCore

extension DepthData {
    /// The map scaled to 0...1 over its finite range (holes stay holes), and the range it had; nil
    /// when every value is a hole. A flat map (one value) becomes all 0.
    public func normalizedMap() -> (map: Image<Float>, range: (min: Float, max: Float))? {
        guard let range = finiteRange else { return nil }
        let unit = UnitPosition(range)
        var out = map
        out.samples.withUnsafeMutableBufferPointer { m in for i in 0..<m.count where m[i].isFinite { m[i] = unit(m[i]) }
        }
        return (out, range)
    }
}

/// A depth map as a 16-bit grey PNG that keeps its holes: a finite value v within `min...max`
/// is stored as 1 + round((v - min) / (max - min) * 65534), a hole as 0. Any PNG viewer shows it,
/// and ``values(_:range:)`` (or the report's mapping) turns it back into the map to within
/// (max - min) / 131068.
public enum DepthPNG {
    /// The samples of a map over `range` (usually its finite range).
    ///
    /// - Complexity: O(pixels).
    public static func samples(_ map: Image<Float>, range: (min: Float, max: Float)) -> Image<UInt16> {
        let unit = UnitPosition(range)
        return Image<UInt16>(uninitializedWidth: map.width, height: map.height, channels: 1) { dst in
            map.samples.withUnsafeBufferPointer { s in
                for i in 0..<s.count {
                    // Clamped, so a value outside the range cannot wrap around; holes are 0.
                    dst[i] = s[i].isFinite ? UInt16(1 + (min(max(unit(s[i]), 0), 1) * 65534).rounded()) : 0
                }
            }
        }
    }

    /// The map back from the samples (0 -> NaN).
    public static func values(_ samples: Image<UInt16>, range: (min: Float, max: Float)) -> Image<Float> {
        let span = range.max - range.min
        return Image<Float>(uninitializedWidth: samples.width, height: samples.height, channels: 1) { dst in
            samples.samples.withUnsafeBufferPointer { s in
                for i in 0..<s.count { dst[i] = s[i] == 0 ? .nan : range.min + Float(s[i] - 1) / 65534 * span }
            }
        }
    }

    /// The mapping in words, for a report: "value = MIN + (v - 1) / 65534 * SPAN; v = 0 is a hole".
    public static func mapping(range: (min: Float, max: Float)) -> String {
        "value = \(range.min) + (v - 1) / 65534 * \(range.max - range.min); v = 0 is a hole"
    }

    /// Writes the map as a 16-bit PNG over its finite range.
    ///
    /// - Returns: The range written (for the mapping).
    /// - Throws: ``DepthError/badMetadata(path:detail:)`` when every value is a hole (`source`
    ///   names the depth's photo), or what the write throws.
    @discardableResult
    public static func write(
        _ map: Image<Float>, range: (min: Float, max: Float)?, to path: String, source: String,
        options: WriteOptions = WriteOptions()
    ) throws -> (min: Float, max: Float) {
        guard let range else {
            throw DepthError.badMetadata(
                path: source, detail: "every value of the depth map is a hole; there is nothing to write")
        }
        var o = options
        o.bitDepth = 16
        try ImageCodecs.write(.uint16(samples(map, range: range)), to: path, options: o)
        return range
    }
}

/// Where a value lies in a range, 0 at its minimum and 1 at its maximum (not clamped): in Float,
/// as the depth formats always computed it, and in Double when the range is wider than a Float
/// can hold (-3e38...3e38: its span would be infinite, every quotient 0 or NaN).
struct UnitPosition {
    let lo: Float, span: Float, wideSpan: Double

    init(_ range: (min: Float, max: Float)) {
        lo = range.min
        span = max(range.max - range.min, .leastNormalMagnitude)
        wideSpan = max(Double(range.max) - Double(range.min), Double(Float.leastNormalMagnitude))
    }

    func callAsFunction(_ v: Float) -> Float {
        span.isFinite ? (v - lo) / span : Float((Double(v) - Double(lo)) / wideSpan)
    }
}
