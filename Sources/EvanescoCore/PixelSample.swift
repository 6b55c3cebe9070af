/// A sample type an ``Image`` can hold: `UInt8`, `UInt16` or `Float` (Float32).
///
/// Integer samples use their full range (0...255, 0...65535); `Float` samples are normalised so
/// that 1.0 is full scale (values outside 0...1 are allowed, e.g. HDR or depth in metres).
public protocol PixelSample: BitwiseCopyable, Sendable, Equatable, Comparable {
    /// The value that means "full scale": 255, 65535 or 1.
    static var fullScale: Float { get }
    /// Bits per sample as stored in files: 8, 16 or 32.
    static var bitDepth: Int { get }
    /// Converts a value in this type's own scale, rounding to nearest and clamping for integers.
    init(clampingRounded value: Float)
    /// The sample as a Float in its own scale (no normalisation).
    var floatValue: Float { get }
    static var zero: Self { get }
}

extension UInt8: PixelSample {
    @inlinable public static var fullScale: Float { 255 }
    @inlinable public static var bitDepth: Int { 8 }
    @inlinable public init(clampingRounded value: Float) {
        // `value >= 0` is false for NaN, which therefore maps to 0.
        let v = value >= 0 ? Swift.min(value, 255) : 0
        self = UInt8(truncatingIfNeeded: Int32(v + 0.5))
    }
    @inlinable public var floatValue: Float { Float(self) }
}

extension UInt16: PixelSample {
    @inlinable public static var fullScale: Float { 65535 }
    @inlinable public static var bitDepth: Int { 16 }
    @inlinable public init(clampingRounded value: Float) {
        let v = value >= 0 ? Swift.min(value, 65535) : 0
        self = UInt16(truncatingIfNeeded: Int32(v + 0.5))
    }
    @inlinable public var floatValue: Float { Float(self) }
}

extension Float: PixelSample {
    @inlinable public static var fullScale: Float { 1 }
    @inlinable public static var bitDepth: Int { 32 }
    @inlinable public init(clampingRounded value: Float) { self = value }
    @inlinable public var floatValue: Float { self }
}
