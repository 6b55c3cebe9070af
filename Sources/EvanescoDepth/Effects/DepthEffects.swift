import EvanescoCore

/// Colour tables shared by the effects: sRGB decode per stored code, encode from linear light.
@usableFromInline
struct ToneTables: Sendable {
    /// Linear value of every code of the sample type (256 or 65536 entries).
    let toLinear: [Float]
    /// sRGB-encoded value (0...1) of linear light at 1/4096 steps (plus one guard entry), read with
    /// linear interpolation: small enough for L1, within 0.01 of an 8-bit step of the exact curve.
    static let fromLinear: [Float] = (0...4097).map { SRGB.fromLinear(min(Float($0) / 4096, 1)) }

    /// 8-bit sRGB code of linear light at 1/65535 steps (64 KB): one look-up, within 0.05 of a
    /// code step of the exact curve.
    static let encode8: [UInt8] = (0...65535).map { UInt8((SRGB.fromLinear(Float($0) / 65535) * 255).rounded()) }

    /// Output sample of linear light `v`: the 8-bit table for 8-bit output, else the curve table.
    @inline(__always)
    static func output<S: PixelSample>(
        _ v: Float, _ table: UnsafeBufferPointer<Float>, _ table8: UnsafeBufferPointer<UInt8>, as: S.Type
    ) -> S {
        if S.self == UInt8.self {
            return table8[Int(min(max(v, 0), 1) * 65535 + 0.5)] as! S
        }
        return S(clampingRounded: encode(v, table) * S.fullScale)
    }

    /// sRGB encoding of linear light `v` (clamped to 0...1) through `fromLinear`.
    @inline(__always)
    static func encode(_ v: Float, _ table: UnsafeBufferPointer<Float>) -> Float {
        let x = min(max(v, 0), 1) * 4096
        let i = Int(x), f = x - Float(i)
        return table[i] + (table[i + 1] - table[i]) * f
    }

    init<S: PixelSample>(_: S.Type) {
        if S.self == UInt8.self {
            toLinear = SRGB.linearTable8
        } else {
            toLinear = (0...65535).map { SRGB.toLinear(Float($0) / 65535) }
        }
    }
}

/// The tutorial's effects (spotlight, colour highlight, focal blur), rendered in linear light as
/// Core Image renders in its linear working space. Photos are 8- or 16-bit sRGB, RGB or RGBA;
/// masks are one channel, 0...1, at the photo's size.
public enum DepthEffects {
    /// Spotlight: the photo over black through the mask (CIBlendWithMask with a black background).
    public static func spotlight(_ photo: AnyImage, mask: Image<Float>) -> AnyImage {
        switch photo {
        case .uint8(let i): .uint8(blend(i, mask: mask, mono: false))
        case .uint16(let i): .uint16(blend(i, mask: mask, mono: false))
        case .float32(let i): .uint16(blend(i.converted(to: UInt16.self), mask: mask, mono: false))
        }
    }

    /// Colour highlight: the photo over its monochrome version through the mask. The mono image is
    /// the Rec.709 luminance of the linear colour (CIPhotoEffectMono's neutral grey).
    public static func colorHighlight(_ photo: AnyImage, mask: Image<Float>) -> AnyImage {
        switch photo {
        case .uint8(let i): .uint8(blend(i, mask: mask, mono: true))
        case .uint16(let i): .uint16(blend(i, mask: mask, mono: true))
        case .float32(let i): .uint16(blend(i.converted(to: UInt16.self), mask: mask, mono: true))
        }
    }

    /// A map rendered as a grey image at the photo's size (1 = white), for --effect depth/mask.
    public static func grey<S: PixelSample>(_ plane: Image<Float>, as: S.Type) -> Image<S> {
        Image<S>(uninitializedWidth: plane.width, height: plane.height, channels: 1) { d in
            plane.samples.withUnsafeBufferPointer { s in
                for i in 0..<s.count { d[i] = S(clampingRounded: min(max(s[i], 0), 1) * S.fullScale) }
            }
        }
    }

    /// out = photo * m + other * (1 - m) in linear light, other = black or the photo's luminance.
    static func blend<S: PixelSample>(_ photo: Image<S>, mask: Image<Float>, mono: Bool) -> Image<S> {
        precondition(photo.width == mask.width && photo.height == mask.height, "mask and photo sizes differ")
        let tables = ToneTables(S.self)
        let (wr, wg, wb) = LumaWeights.rec709.weights
        let c = photo.channels, W = photo.width
        return photo.samples.withUnsafeBufferPointer { src in
            mask.samples.withUnsafeBufferPointer { m in
                tables.toLinear.withUnsafeBufferPointer { lin in
                    ToneTables.fromLinear.withUnsafeBufferPointer { enc in
                        Image<S>(uninitializedWidth: W, height: photo.height, channels: c) { dst in
                            StripExecutor.forEachStrip(rows: photo.height, minimumRows: 32) { rows in
                                for i in (rows.lowerBound * W)..<(rows.upperBound * W) {
                                    let o = i * c
                                    let r = lin[Int(src[o].floatValue)]
                                    let g = c >= 3 ? lin[Int(src[o + 1].floatValue)] : r
                                    let b = c >= 3 ? lin[Int(src[o + 2].floatValue)] : r
                                    let px = SIMD4<Float>(r, g, b, 0)
                                    let k = m[i]
                                    let y = mono ? wr * r + wg * g + wb * b : 0
                                    let v = px * k + SIMD4<Float>(repeating: y) * (1 - k)
                                    for ch in 0..<min(c, 3) {
                                        dst[o + ch] = S(clampingRounded: ToneTables.encode(v[ch], enc) * S.fullScale)
                                    }
                                    if c == 4 { dst[o + 3] = src[o + 3] }
                                    if c == 2 { dst[o + 1] = src[o + 1] }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
