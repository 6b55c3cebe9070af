import CKernels
import EvanescoCore

/// A luma pyramid for registration: level 0 is the input's luma (0...255 scale, Float), each
/// further level halves the size by 2x2 averaging. Every level is lightly smoothed with a 5x5
/// binomial filter (1 4 6 4 1 each way), which tames sensor noise and JPEG blocking before gradients are taken.
/// Levels below `baseLevel` are not built (they hold empty images): level 1 is then made from
/// the pixels in one pass, which saves the full-resolution passes for large frames.
public struct GreyPyramid: Sendable {
    /// The levels, finest first; levels below ``baseLevel`` are empty images.
    public let levels: [Image<Float>]
    /// The finest level actually built (0, or 1 for large frames).
    public let baseLevel: Int
    /// Size of the image the pyramid was built from.
    public let width: Int
    /// Height of the image the pyramid was built from.
    public let height: Int

    /// Builds levels until the longer side would drop below `minSide`.
    @_specialize(exported:true,where S == UInt8)
    @_specialize(exported:true,where S == UInt16)
    @_specialize(exported:true,where S == Float)
    public init<S: PixelSample>(_ image: Image<S>, minSide: Int = 48, maxLevels: Int = 10, baseLevel: Int = 0) {
        let base = baseLevel >= 1 && image.width >= 4 * minSide && image.height >= 32 ? 1 : 0
        self.baseLevel = base
        width = image.width
        height = image.height
        var raw = base == 1 ? GreyPyramid.lumaHalf255(image) : GreyPyramid.luma255(image)
        var lv: [Image<Float>] =
            base == 1
            ? [Image<Float>(width: 0, height: 0, channels: 1), GreyPyramid.smooth(raw)]
            : [GreyPyramid.smooth(raw)]
        while lv.count < maxLevels, max(raw.width, raw.height) / 2 >= minSide, min(raw.width, raw.height) / 2 >= 8 {
            raw = GreyPyramid.halve(raw)
            lv.append(GreyPyramid.smooth(raw))
        }
        levels = lv
    }

    /// Rec.601 luma on a 0...255 scale, whatever the sample type.
    @_specialize(exported:true,where S == UInt8)
    @_specialize(exported:true,where S == UInt16)
    @_specialize(exported:true,where S == Float)
    public static func luma255<S: PixelSample>(_ img: Image<S>) -> Image<Float> {
        // Called from generic code (a pyramid of any sample type), the specialisations above
        // are not reached: 8-bit frames, the common case, take a concrete copy of the loop
        // instead of a witness call per sample; so do 16-bit ones (a raw burst's binned grey,
        // where the witness calls were 9 % of a 12 MP raw stack's time).
        if let bytes = img as? Image<UInt8> { return luma255Body(bytes) }
        if let words = img as? Image<UInt16> { return luma255Body(words) }
        return luma255Body(img)
    }

    @inline(__always)
    static func luma255Body<S: PixelSample>(_ img: Image<S>) -> Image<Float> {
        let c = img.channels, n = img.pixelCount, k = 255 / S.fullScale, w = img.width
        let (wr, wg, wb) = LumaWeights.rec601.weights
        return img.samples.withUnsafeBufferPointer { s in
            Image<Float>(uninitializedWidth: img.width, height: img.height, channels: 1) { d in
                StripExecutor.forEachStrip(rows: img.height, minimumRows: 64) { rows in
                    let lo = rows.lowerBound * w, hi = min(n, rows.upperBound * w)
                    if c == 1 {
                        for i in lo..<hi { d[i] = s[i].floatValue * k }
                    } else if S.self == UInt8.self, c >= 3 {
                        // 8-bit RGB (most frames): CKernels, the same arithmetic vectorised.
                        let bytes = UnsafeRawPointer(s.baseAddress!).assumingMemoryBound(to: UInt8.self)
                        evn_luma_rgb8(bytes + lo * c, c, hi - lo, k, d.baseAddress! + lo)
                    } else {
                        for i in lo..<hi {
                            let o = i * c
                            d[i] =
                                (wr * s[o].floatValue + wg * s[o + 1].floatValue + wb * s[o + 2].floatValue)
                                * k
                        }
                    }
                }
            }
        }
    }

    /// Luma of 2x2 blocks (level 1) straight from the pixels.
    @_specialize(exported:true,where S == UInt8)
    @_specialize(exported:true,where S == UInt16)
    @_specialize(exported:true,where S == Float)
    public static func lumaHalf255<S: PixelSample>(_ img: Image<S>) -> Image<Float> {
        if let rgb8 = img as? Image<UInt8>, rgb8.channels >= 3 { return lumaHalf255(rgb8: rgb8) }
        let c = img.channels, sw = img.width, w = img.width / 2, h = img.height / 2
        let k = 0.25 * 255 / S.fullScale
        let (wr, wg, wb): (Float, Float, Float) = c == 1 ? (1, 0, 0) : LumaWeights.rec601.weights
        return img.samples.withUnsafeBufferPointer { s in
            Image<Float>(uninitializedWidth: w, height: h, channels: 1) { d in
                StripExecutor.forEachStrip(rows: h, minimumRows: 32) { rows in
                    for y in rows {
                        let r0 = 2 * y * sw * c, r1 = r0 + sw * c
                        for x in 0..<w {
                            let a = r0 + 2 * x * c, b = r1 + 2 * x * c
                            var acc =
                                wr * (s[a].floatValue + s[a + c].floatValue + s[b].floatValue + s[b + c].floatValue)
                            if c >= 3 {
                                acc +=
                                    wg
                                    * (s[a + 1].floatValue + s[a + c + 1].floatValue + s[b + 1].floatValue
                                        + s[b + c + 1].floatValue)
                                acc +=
                                    wb
                                    * (s[a + 2].floatValue + s[a + c + 2].floatValue + s[b + 2].floatValue
                                        + s[b + c + 2].floatValue)
                            }
                            d[y * w + x] = acc * k
                        }
                    }
                }
            }
        }
    }

    /// The 8-bit colour case in integers: 2x2 sums per channel, Rec.601 weights in 1/1024.
    static func lumaHalf255(rgb8 img: Image<UInt8>) -> Image<Float> {
        let c = img.channels, sw = img.width, w = img.width / 2, h = img.height / 2
        return img.samples.withUnsafeBufferPointer { s in
            Image<Float>(uninitializedWidth: w, height: h, channels: 1) { d in
                StripExecutor.forEachStrip(rows: h, minimumRows: 32) { rows in
                    for y in rows {
                        let r0 = s.baseAddress! + 2 * y * sw * c, r1 = r0 + sw * c
                        let out = d.baseAddress! + y * w
                        for x in 0..<w {
                            let a = r0 + 2 * x * c, b = r1 + 2 * x * c
                            let red = Int32(a[0]) + Int32(a[c]) + Int32(b[0]) + Int32(b[c])
                            let green = Int32(a[1]) + Int32(a[c + 1]) + Int32(b[1]) + Int32(b[c + 1])
                            let blue = Int32(a[2]) + Int32(a[c + 2]) + Int32(b[2]) + Int32(b[c + 2])
                            out[x] = Float(306 * red + 601 * green + 117 * blue) * (1 / 4096)
                        }
                    }
                }
            }
        }
    }

    /// 2x2 box average (odd last row/column dropped).
    static func halve(_ img: Image<Float>) -> Image<Float> {
        let w = img.width / 2, h = img.height / 2, sw = img.width
        return img.samples.withUnsafeBufferPointer { s in
            Image<Float>(uninitializedWidth: w, height: h, channels: 1) { d in
                StripExecutor.forEachStrip(rows: h, minimumRows: 32) { rows in
                    for y in rows {
                        let r0 = 2 * y * sw, r1 = r0 + sw
                        for x in 0..<w {
                            d[y * w + x] =
                                0.25 * (s[r0 + 2 * x] + s[r0 + 2 * x + 1] + s[r1 + 2 * x] + s[r1 + 2 * x + 1])
                        }
                    }
                }
            }
        }
    }

    /// Separable [1 4 6 4 1] / 16 smoothing (a Gaussian of sigma ~1 px), edges clamped.
    /// Without it the bilinear sampling in the registration blurs the frame differently at each
    /// sub-pixel phase, and Gauss-Newton steps come out about half as long as they should.
    static func smooth(_ img: Image<Float>) -> Image<Float> {
        let w = img.width, h = img.height
        guard w >= 5, h >= 5 else { return img }
        // Raw pointers and wrapping offsets: every offset below is clamped into the w x h plane.
        let horizontal: Image<Float> = img.samples.withUnsafeBufferPointer { sb in
            Image<Float>(uninitializedWidth: w, height: h, channels: 1) { db in
                let s = sb.baseAddress!, d = UncheckedSendable(db.baseAddress!)
                StripExecutor.forEachStrip(rows: h, minimumRows: 64) { rows in
                    let d = d.value
                    for y in rows {
                        let r = y &* w
                        @inline(__always) func at(_ x: Int) -> Float { s[r &+ min(max(x, 0), w - 1)] }
                        for x in [0, 1, w - 2, w - 1] {
                            d[r &+ x] = (at(x - 2) + 4 * at(x - 1) + 6 * at(x) + 4 * at(x + 1) + at(x + 2)) * (1 / 16)
                        }
                        let p = s + r, q = d + r
                        for x in 2..<(w - 2) {
                            q[x] = (p[x &- 2] + 4 * p[x &- 1] + 6 * p[x] + 4 * p[x &+ 1] + p[x &+ 2]) * (1 / 16)
                        }
                    }
                }
            }
        }
        return horizontal.samples.withUnsafeBufferPointer { sb in
            Image<Float>(uninitializedWidth: w, height: h, channels: 1) { db in
                let s = sb.baseAddress!, d = UncheckedSendable(db.baseAddress!)
                StripExecutor.forEachStrip(rows: h, minimumRows: 64) { rows in
                    let d = d.value
                    for y in rows {
                        let r0 = s + max(y - 2, 0) * w, r1 = s + max(y - 1, 0) * w, r2 = s + y * w
                        let r3 = s + min(y + 1, h - 1) * w, r4 = s + min(y + 2, h - 1) * w, q = d + y * w
                        for x in 0..<w {
                            q[x] = (r0[x] + 4 * r1[x] + 6 * r2[x] + 4 * r3[x] + r4[x]) * (1 / 16)
                        }
                    }
                }
            }
        }
    }
}
