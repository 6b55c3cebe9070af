import Foundation
import EvanescoCore

/// Focal blur: a masked variable blur whose radius is `radius * (1 - mask)` (the tutorial's
/// CIMaskedVariableBlur), rendered in linear light.
///
/// How: the blur is a per-pixel blend between `levels` blur levels at radii 0, R/(levels-1), ...,
/// R (Gaussian sigma = level radius). Level 0 is the sharp photo; the others are computed on a
/// 2x2-box pyramid of the photo at the coarsest scale that keeps sigma >= 1.5 pyramid pixels, then
/// sampled bilinearly, so the cost barely depends on the radius.
///
/// Without dark halos: with `protectSubject`, each level gathers colour with weights `1 - mask`
/// (normalised convolution), so the sharp subject does not bleed into the blurred background
/// around it; the darker or brighter fringe that a plain blur leaves beside the subject's edge is
/// gone. In-focus pixels (mask 1) are returned unchanged.
public struct FocalBlur: Sendable {
    /// Largest blur radius in pixels (where the mask is 0).
    public var radius: Float = 15
    /// Blur levels blended per pixel (at least 2).
    public var levels = 5
    /// Gather background colour only, so the sharp subject does not bleed into the blur.
    public var protectSubject = true
    /// Weight of in-focus pixels in the gather when `protectSubject` (they still contribute a
    /// little, so a region with no background at all stays defined).
    public var subjectWeight: Float = 0.02

    /// - Parameters:
    ///   - radius: Largest blur radius in pixels.
    ///   - levels: Blur levels blended per pixel.
    ///   - protectSubject: Keep the subject's colour out of the blur.
    public init(radius: Float = 15, levels: Int = 5, protectSubject: Bool = true) {
        self.radius = radius
        self.levels = max(2, levels)
        self.protectSubject = protectSubject
    }

    /// Blurs an 8- or 16-bit photo (float photos are rendered as 16-bit).
    public func apply(_ photo: AnyImage, mask: Image<Float>) -> AnyImage {
        switch photo {
        case .uint8(let i): .uint8(apply(i, mask: mask))
        case .uint16(let i): .uint16(apply(i, mask: mask))
        case .float32(let i): .uint16(apply(i.converted(to: UInt16.self), mask: mask))
        }
    }

    /// The blur levels at radius r_j = radius x j / (levels - 1), j = 1..<levels: each blurred on
    /// the coarsest pyramid scale that keeps sigma >= 1.5 of its pixels, with that scale's factor.
    func blurLevels<S: PixelSample>(
        _ photo: Image<S>, mask: Image<Float>, tables: ToneTables
    ) -> [(plane: Plane4, factor: Int)] {
        let W = photo.width, H = photo.height
        // Pyramid level 1 (half size): premultiplied linear RGB and the weight, from the photo.
        var pyramid: [Plane4] = [
            Plane4.halved(
                photo, mask: mask, tables: tables,
                weight: protectSubject ? subjectWeight : 1, weighted: protectSubject)
        ]
        var blurred: [(plane: Plane4, factor: Int)] = []
        for j in 1..<levels {
            let r = radius * Float(j) / Float(levels - 1)
            // Coarsest pyramid scale keeping sigma >= 1.5 of its pixels (at least half size).
            var k = 1
            while r / Float(1 << (k + 1)) >= 1.5 && (W >> (k + 1)) >= 8 && (H >> (k + 1)) >= 8 { k += 1 }
            while pyramid.count < k { pyramid.append(pyramid.last!.halved()) }
            let f = 1 << k
            // Box averaging and bilinear upsampling already spread ~0.5 pyramid pixels.
            // max(0, ...) first: a small radius would take the root of a negative (NaN, which max() keeps).
            let sigma = max(max(0, (r / Float(f)) * (r / Float(f)) - 0.25).squareRoot(), 0.3)
            var b = pyramid[k - 1].gaussian(sigma: sigma)
            b.normalize()
            blurred.append((b, f))
        }
        return blurred
    }

    func apply<S: PixelSample>(_ photo: Image<S>, mask: Image<Float>) -> Image<S> {
        precondition(photo.width == mask.width && photo.height == mask.height, "mask and photo sizes differ")
        guard radius > 0 else { return photo }
        let tables = ToneTables(S.self)
        let W = photo.width, H = photo.height, c = photo.channels

        let blurred = blurLevels(photo, mask: mask, tables: tables)

        // Raw views of the levels for the per-pixel loop (no array traffic per pixel).
        let refs = blurred.map { b -> LevelRef in
            let p = UnsafeMutablePointer<SIMD4<Float>>.allocate(capacity: b.plane.px.count)
            p.initialize(from: b.plane.px, count: b.plane.px.count)
            return LevelRef(
                px: p, width: b.plane.width, height: b.plane.height, scale: 1 / Float(b.factor), fullWidth: W)
        }
        defer { for r in refs { r.release() } }
        return photo.samples.withUnsafeBufferPointer { src in
            mask.samples.withUnsafeBufferPointer { m in
                tables.toLinear.withUnsafeBufferPointer { lin in
                    ToneTables.fromLinear.withUnsafeBufferPointer { enc in
                        ToneTables.encode8.withUnsafeBufferPointer { enc8 in
                            refs.withUnsafeBufferPointer { lv in
                                Image<S>(uninitializedWidth: W, height: H, channels: c) { dst in
                                    let top = Float(levels - 1), last = levels - 1
                                    StripExecutor.forEachStrip(rows: H, minimumRows: 16) { rows in
                                        for y in rows {
                                            var rowsAt = [(Int, Int, Float)]()
                                            for l in lv { rowsAt.append(l.row(y)) }
                                            for x in 0..<W {
                                                let i = y * W + x, o = i * c
                                                let t = (1 - min(max(m[i], 0), 1)) * top
                                                if t == 0 {
                                                    // In focus: the stored samples, exactly.
                                                    for ch in 0..<c { dst[o + ch] = src[o + ch] }
                                                    continue
                                                }
                                                let j0 = min(Int(t), last), a = t - Float(j0)
                                                var vr: Float, vg: Float, vb: Float
                                                if j0 == 0 {
                                                    let r = lin[Int(src[o].floatValue)]
                                                    let g = c >= 3 ? lin[Int(src[o + 1].floatValue)] : r
                                                    let b = c >= 3 ? lin[Int(src[o + 2].floatValue)] : r
                                                    let (br, bg, bb) = lv[0].sample(x, rowsAt[0])
                                                    vr = r + (br - r) * a
                                                    vg = g + (bg - g) * a
                                                    vb = b + (bb - b) * a
                                                } else {
                                                    (vr, vg, vb) = lv[j0 - 1].sample(x, rowsAt[j0 - 1])
                                                    if j0 < last && a > 0 {
                                                        let (nr, ng, nb) = lv[j0].sample(x, rowsAt[j0])
                                                        vr += (nr - vr) * a
                                                        vg += (ng - vg) * a
                                                        vb += (nb - vb) * a
                                                    }
                                                }
                                                if c >= 3 {
                                                    dst[o] = ToneTables.output(vr, enc, enc8, as: S.self)
                                                    dst[o + 1] = ToneTables.output(vg, enc, enc8, as: S.self)
                                                    dst[o + 2] = ToneTables.output(vb, enc, enc8, as: S.self)
                                                } else {
                                                    dst[o] = ToneTables.output(vr, enc, enc8, as: S.self)
                                                }
                                                if c == 2 { dst[o + 1] = src[o + 1] }
                                                if c == 4 { dst[o + 3] = src[o + 3] }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A blurred level for the per-pixel loop, with its bilinear column taps precomputed.
struct LevelRef: @unchecked Sendable {
    let px: UnsafeMutablePointer<SIMD4<Float>>
    let width: Int, height: Int
    let scale: Float
    /// Per full-resolution column: left tap offset (in floats), right tap offset, right weight.
    let col0: UnsafeMutablePointer<Int>, col1: UnsafeMutablePointer<Int>, colT: UnsafeMutablePointer<Float>

    init(px: UnsafeMutablePointer<SIMD4<Float>>, width: Int, height: Int, scale: Float, fullWidth: Int) {
        self.px = px
        self.width = width
        self.height = height
        self.scale = scale
        col0 = .allocate(capacity: fullWidth)
        col1 = .allocate(capacity: fullWidth)
        colT = .allocate(capacity: fullWidth)
        for x in 0..<fullWidth {
            let fx = min(max((Float(x) + 0.5) * scale - 0.5, 0), Float(width - 1))
            let x0 = Int(fx)
            col0[x] = 4 * x0
            col1[x] = 4 * min(x0 + 1, width - 1)
            colT[x] = fx - Float(x0)
        }
    }

    func release() {
        px.deallocate()
        col0.deallocate()
        col1.deallocate()
        colT.deallocate()
    }

    /// Row taps for full-resolution row y: offsets (in floats) of the two rows and the lower weight.
    func row(_ y: Int) -> (Int, Int, Float) {
        let fy = min(max((Float(y) + 0.5) * scale - 0.5, 0), Float(height - 1))
        let y0 = Int(fy)
        return (4 * y0 * width, 4 * min(y0 + 1, height - 1) * width, fy - Float(y0))
    }

    /// Bilinear sample (r, g, b) at full-resolution column x of the row `r`.
    @inline(__always)
    func sample(_ x: Int, _ r: (Int, Int, Float)) -> (Float, Float, Float) {
        let p = UnsafeRawPointer(px).assumingMemoryBound(to: Float.self)
        let tx = colT[x], ty = r.2
        let a = r.0 + col0[x], b = r.0 + col1[x], c = r.1 + col0[x], d = r.1 + col1[x]
        let w00 = (1 - tx) * (1 - ty), w01 = tx * (1 - ty), w10 = (1 - tx) * ty, w11 = tx * ty
        return (
            p[a] * w00 + p[b] * w01 + p[c] * w10 + p[d] * w11,
            p[a + 1] * w00 + p[b + 1] * w01 + p[c + 1] * w10 + p[d + 1] * w11,
            p[a + 2] * w00 + p[b + 2] * w01 + p[c + 2] * w10 + p[d + 2] * w11
        )
    }
}

/// A plane of SIMD4 pixels: premultiplied linear RGB in xyz, weight in w.
struct Plane4: @unchecked Sendable {
    var width: Int, height: Int
    var px: [SIMD4<Float>]

    /// Half-size plane from a photo: each 2x2 block's mean of (w * linear RGB, w), where w is
    /// `1 - mask` (floored at `weight`) when `weighted`, else 1.
    static func halved<S: PixelSample>(
        _ photo: Image<S>, mask: Image<Float>, tables: ToneTables, weight floor: Float, weighted: Bool
    ) -> Plane4 {
        let W = photo.width, H = photo.height, c = photo.channels
        let w = (W + 1) / 2, h = (H + 1) / 2
        var out = [SIMD4<Float>](repeating: .zero, count: w * h)
        photo.samples.withUnsafeBufferPointer { src in
            mask.samples.withUnsafeBufferPointer { m in
                tables.toLinear.withUnsafeBufferPointer { lin in
                    out.withUnsafeMutableBufferPointer { dst in
                        let d = UncheckedSendable(dst)
                        StripExecutor.forEachStrip(rows: h, minimumRows: 16) { rows in
                            for y in rows {
                                for x in 0..<w {
                                    var acc = SIMD4<Float>.zero, n: Float = 0
                                    for yy in (2 * y)..<min(2 * y + 2, H) {
                                        for xx in (2 * x)..<min(2 * x + 2, W) {
                                            let i = yy * W + xx, o = i * c
                                            let wt = weighted ? max(1 - m[i], floor) : 1
                                            let r = lin[Int(src[o].floatValue)]
                                            let p =
                                                c >= 3
                                                ? SIMD4(
                                                    r, lin[Int(src[o + 1].floatValue)], lin[Int(src[o + 2].floatValue)],
                                                    1)
                                                : SIMD4(r, r, r, 1)
                                            acc += p * wt
                                            n += 1
                                        }
                                    }
                                    d.value[y * w + x] = acc / n
                                }
                            }
                        }
                    }
                }
            }
        }
        return Plane4(width: w, height: h, px: out)
    }

    func halved() -> Plane4 {
        let w = (width + 1) / 2, h = (height + 1) / 2
        var out = [SIMD4<Float>](repeating: .zero, count: w * h)
        for y in 0..<h {
            for x in 0..<w {
                var acc = SIMD4<Float>.zero, n: Float = 0
                for yy in (2 * y)..<min(2 * y + 2, height) {
                    for xx in (2 * x)..<min(2 * x + 2, width) {
                        acc += px[yy * width + xx]
                        n += 1
                    }
                }
                out[y * w + x] = acc / n
            }
        }
        return Plane4(width: w, height: h, px: out)
    }

    /// Separable Gaussian, edges clamped, truncated at 2.5 sigma (98.8 % of the mass; renormalised).
    func gaussian(sigma: Float) -> Plane4 {
        Plane4(
            width: width, height: height,
            px: GaussianBlur.apply(px, width: width, height: height, sigma: sigma, truncate: 2.5))
    }

    /// Divides the premultiplied colour by its weight.
    mutating func normalize() {
        for i in 0..<px.count {
            let p = px[i]
            px[i] = p.w > 0 ? SIMD4(p.x / p.w, p.y / p.w, p.z / p.w, 1) : SIMD4(0, 0, 0, 1)
        }
    }

}
