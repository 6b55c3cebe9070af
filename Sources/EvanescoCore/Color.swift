import Foundation

/// sRGB transfer function and luma, as Core Image's working-space conversions do
/// (CIFilter kCIInputColorSpace / CILinearToSRGBToneCurve and CISRGBToneCurveToLinear).
public enum SRGB {
    /// sRGB-encoded value (0...1) to linear light (IEC 61966-2-1).
    @inlinable
    public static func toLinear(_ v: Float) -> Float {
        v <= 0.04045 ? v / 12.92 : powf((v + 0.055) / 1.055, 2.4)
    }
    /// Linear light (0...1) to the sRGB encoding.
    @inlinable
    public static func fromLinear(_ v: Float) -> Float {
        v <= 0.0031308 ? v * 12.92 : 1.055 * powf(v, 1 / 2.4) - 0.055
    }
    /// `toLinear` for every 8-bit code, for table look-up.
    public static let linearTable8: [Float] = (0..<256).map { toLinear(Float($0) / 255) }
}

/// Luma weights.
public enum LumaWeights: Sendable {
    /// Rec.601 (0.299, 0.587, 0.114): OpenCV's RGB2GRAY and the usual "mono" look.
    case rec601
    /// Rec.709 / sRGB primaries (0.2126, 0.7152, 0.0722): relative luminance of linear RGB.
    case rec709

    /// The (red, green, blue) weights, summing to 1.
    public var weights: (Float, Float, Float) {
        switch self {
        case .rec601: (0.299, 0.587, 0.114)
        case .rec709: (0.2126, 0.7152, 0.0722)
        }
    }
}

extension Image {
    /// Converts sRGB-encoded samples to linear-light Float samples (alpha is passed through).
    /// Core Image counterpart: CISRGBToneCurveToLinear.
    public func linearized() -> Image<Float> {
        let c = channels, scale = 1 / Sample.fullScale
        let table = Sample.self == UInt8.self ? SRGB.linearTable8 : nil
        return samples.withUnsafeBufferPointer { s in
            Image<Float>(uninitializedWidth: width, height: height, channels: c) { d in
                let rowLen = rowLength
                StripExecutor.forEachStrip(rows: height, minimumRows: 32) { rows in
                    for i in (rows.lowerBound * rowLen)..<(rows.upperBound * rowLen) {
                        if c == 4 && i % 4 == 3 {
                            d[i] = s[i].floatValue * scale
                            continue
                        }
                        if let table {
                            d[i] = table[Int(s[i].floatValue)]
                        } else {
                            d[i] = SRGB.toLinear(s[i].floatValue * scale)
                        }
                    }
                }
            }
        }
    }

    /// Luma plane (1 channel, same sample type). Core Image counterpart: the luminance step of
    /// CIPhotoEffectMono / CIColorControls(saturation: 0).
    public func luma(_ weights: LumaWeights = .rec601) -> Image<Sample> {
        if channels == 1 { return self }
        let (wr, wg, wb) = weights.weights
        let c = channels
        return samples.withUnsafeBufferPointer { s in
            Image(uninitializedWidth: width, height: height, channels: 1) { d in
                let w = width
                StripExecutor.forEachStrip(rows: height, minimumRows: 32) { rows in
                    for i in (rows.lowerBound * w)..<(rows.upperBound * w) {
                        let o = i * c
                        d[i] = Sample(
                            clampingRounded: wr * s[o].floatValue + wg * s[o + 1].floatValue + wb * s[o + 2].floatValue)
                    }
                }
            }
        }
    }
}

extension Image where Sample == Float {
    /// Linear-light Float samples to sRGB-encoded samples of type `T` (alpha passed through).
    /// Core Image counterpart: CILinearToSRGBToneCurve.
    public func sRGBEncoded<T: PixelSample>(as: T.Type) -> Image<T> {
        let c = channels
        return samples.withUnsafeBufferPointer { s in
            Image<T>(uninitializedWidth: width, height: height, channels: c) { d in
                let rowLen = rowLength
                StripExecutor.forEachStrip(rows: height, minimumRows: 32) { rows in
                    for i in (rows.lowerBound * rowLen)..<(rows.upperBound * rowLen) {
                        let v = min(max(s[i], 0), 1)
                        d[i] = T(clampingRounded: (c == 4 && i % 4 == 3 ? v : SRGB.fromLinear(v)) * T.fullScale)
                    }
                }
            }
        }
    }
}
