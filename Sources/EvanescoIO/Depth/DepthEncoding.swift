import EvanescoCore

/// How the stored samples of a depth or disparity map turn into float values: the one
/// description used for maps read from photos (Apple's linear quantisation, Google's RangeLinear
/// and RangeInverse) and for raw depth streams (16-bit millimetres, 8-bit disparity, float metres).
///
/// A decoded value has the kind of its map (``DepthKind``): depth for ``millimetres16``,
/// ``disparity8(min:max:)`` and ``identity`` used on a depth stream.
public enum DepthEncoding: Sendable, Equatable {
    /// Apple: `float = floatMin + (v - intMin) / (intMax - intMin) * (floatMax - floatMin)`.
    case linear(floatMin: Double, floatMax: Double, intMin: Double, intMax: Double)
    /// Google RangeLinear: `d = near + n * (far - near)` with `n = v / intMax` (or `1 - v / intMax`
    /// when `nearIsHigh`).
    case rangeLinear(near: Double, far: Double, intMax: Double, nearIsHigh: Bool)
    /// Google RangeInverse: `d = far * near / (far - n * (far - near))`, n as above; an infinite
    /// `far` is the limit `near / (1 - n)`.
    case rangeInverse(near: Double, far: Double, intMax: Double, nearIsHigh: Bool)
    /// Samples are already floats (Float16/Float32 storage), or float metres in a stream.
    case identity

    /// 16-bit depth in millimetres, 0 = unknown (the Kinect and RealSense convention), decoded
    /// to metres.
    public static let millimetres16 = DepthEncoding.linear(floatMin: 0, floatMax: 65.535, intMin: 0, intMax: 65535)

    /// 8-bit disparity stored linearly, `1/m = min + v / 255 * (max - min)` (TrueDepth maps
    /// written as 8 bits), decoded to depth in metres. This is RangeInverse with `near = 1/max`,
    /// `far = 1/min` and high values near.
    ///
    /// - Parameters:
    ///   - min: The disparity of sample 0, in 1/m (0 or more; 0 means infinitely far).
    ///   - max: The disparity of sample 255, in 1/m (more than `min`).
    public static func disparity8(min: Double, max: Double) -> DepthEncoding {
        .rangeInverse(near: 1 / max, far: 1 / min, intMax: 255, nearIsHigh: true)
    }

    /// One line for reports and `depth info`.
    public var summary: String {
        switch self {
        case .linear(let a, let b, let i, let j):
            "linear: FloatMin \(a) + (v - IntMin \(i)) / (IntMax \(j) - IntMin) * (FloatMax \(b) - FloatMin)"
        case .rangeLinear(let n, let f, _, let hi):
            "RangeLinear near \(n) far \(f), \(hi ? "high values near" : "0 = near (spec)")"
        case .rangeInverse(let n, let f, _, let hi):
            "RangeInverse near \(n) far \(f), \(hi ? "high values near" : "0 = near (spec)")"
        case .identity: "stored as float"
        }
    }

    /// Decodes one stored sample.
    ///
    /// - Parameter v: The stored sample as a float (0...255, 0...65535, or the float itself).
    /// - Returns: The value in the map's units; it may be non-finite where the sample means
    ///   "infinitely far" or the encoding divides by zero.
    @inlinable
    public func decode(_ v: Float) -> Float {
        switch self {
        case .linear(let fmin, let fmax, let imin, let imax):
            return Float(fmin + (Double(v) - imin) / (imax - imin) * (fmax - fmin))
        case .rangeLinear(let near, let far, let imax, let hi):
            var n = Double(v) / imax
            if hi { n = 1 - n }
            return Float(near + n * (far - near))
        case .rangeInverse(let near, let far, let imax, let hi):
            var n = Double(v) / imax
            if hi { n = 1 - n }
            return Float(far.isInfinite ? near / (1 - n) : far * near / (far - n * (far - near)))
        case .identity:
            return v
        }
    }

    /// Decodes the first channel of a frame with a lookup table for 8- and 16-bit samples.
    ///
    /// - Parameters:
    ///   - stored: The stored frame.
    ///   - hole: What a decoded value becomes when `isHole` says it is unknown.
    ///   - isHole: Which decoded values are unknown (called once per table entry or float sample).
    /// - Returns: One float channel the size of `stored`.
    public func decode(_ stored: AnyImage, hole: Float, isHole: (Float) -> Bool) -> Image<Float> {
        func value(_ raw: Float) -> Float {
            let v = decode(raw)
            return isHole(v) ? hole : v
        }
        func run<S: PixelSample>(_ img: Image<S>, table: [Float]?) -> Image<Float> {
            let c = img.channels, n = img.width * img.height
            return img.samples.withUnsafeBufferPointer { s in
                Image<Float>(uninitializedWidth: img.width, height: img.height, channels: 1) { d in
                    if let table {
                        table.withUnsafeBufferPointer { t in
                            for i in 0..<n { d[i] = t[Int(s[i &* c].floatValue)] }
                        }
                    } else if self == .identity {
                        for i in 0..<n {
                            let v = s[i &* c].floatValue
                            d[i] = isHole(v) ? hole : v
                        }
                    } else {
                        for i in 0..<n { d[i] = value(s[i &* c].floatValue) }
                    }
                }
            }
        }
        switch stored {
        case .uint8(let i): return run(i, table: (0..<256).map { value(Float($0)) })
        case .uint16(let i):
            // A 65536-entry table pays off once a frame has more samples than it has entries.
            return run(i, table: i.width * i.height > 65536 ? (0..<65536).map { value(Float($0)) } : nil)
        case .float32(let i): return run(i, table: nil)
        }
    }
}

extension DepthEncoding {
    /// Depth in metres of one stream frame (first channel), for encodings that decode to metres
    /// (``millimetres16``, ``disparity8(min:max:)``, ``identity`` on float metres). Unknown,
    /// non-finite and non-positive depths become 0, which the backdrop mask reads as no data.
    public func metres(_ frame: AnyImage) -> Image<Float> {
        decode(frame, hole: 0) { !($0.isFinite && $0 > 0) }
    }
}

extension DepthEncoding: CustomStringConvertible, LosslessStringConvertible {
    /// Parses a stream format: `mm16` (``millimetres16``), `pfm` or `metres` (``identity``, float
    /// metres) or `disparity8:MIN,MAX` (``disparity8(min:max:)``, finite, 0 <= MIN < MAX, in 1/m).
    public init?(_ description: String) {
        switch description {
        case "mm16": self = .millimetres16
        case "pfm", "metres": self = .identity
        default:
            guard description.hasPrefix("disparity8:") else { return nil }
            let p = description.dropFirst(11).split(separator: ",", omittingEmptySubsequences: false).map { Double($0) }
            guard p.count == 2, let lo = p[0], let hi = p[1], lo.isFinite, hi.isFinite, lo >= 0, hi > lo else {
                return nil
            }
            self = .disparity8(min: lo, max: hi)
        }
    }

    /// The stream format's name (`mm16`, `metres`, `disparity8:MIN,MAX`) or the ``summary``.
    public var description: String {
        switch self {
        case .millimetres16: return "mm16"
        case .identity: return "metres"
        case .rangeInverse(let near, let far, 255, true)
        where near > 0 && Self.disparity8(min: 1 / far, max: 1 / near) == self:
            return "disparity8:\(1 / far),\(1 / near)"
        default: return summary
        }
    }
}
