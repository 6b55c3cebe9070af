import EvanescoCore

/// The pixels a layer is made of, read on the fly from the working grid: a pixel's colour goes to
/// the in-focus layer by its in-focus fraction and to its own layer by the rest. A layer also
/// takes the pixels of the layer just in front of it (`LensLayers.Partition.continuation`), so
/// that where one surface crosses from one layer to the next, what lies behind the nearer
/// layer's soft edge is the surface itself, blurred evenly, and no seam shows.
struct LayerSource: @unchecked Sendable {
    let base: UnsafeMutablePointer<SIMD4<Float>>
    let sharp: UnsafeMutablePointer<Float>
    let layerOf: UnsafePointer<Int32>
    let sharpLayer: Int32
    let width: Int, height: Int

    @inline(__always)
    func value(_ i: Int, layer: Int32) -> SIMD4<Float> {
        let s = sharp[i]
        let own = layerOf[i]
        var f: Float = 0
        if layer == sharpLayer { f = s } else if own == layer { f = 1 - s }
        // The continuation: the next nearer layer's share of this pixel.
        let next = layer + 1
        if next == sharpLayer { f += s } else if own == next { f += 1 - s }
        return f > 0 ? base[i] * f : .zero
    }
}

/// The kernels of one layer: one, or one per zone of the photo with cat-eye vignetting.
struct KernelSet: Sendable {
    static let zones = 6
    let kernels: [LensKernel]
    let reach: Int
    let width: Int, height: Int

    init(diameter: Float, shape: ApertureShape, catEye: Float, width: Int, height: Int) {
        self.width = width
        self.height = height
        if catEye > 0 && diameter >= 1 {
            var ks: [LensKernel] = []
            let n = Self.zones
            for zy in 0..<n {
                for zx in 0..<n {
                    ks.append(
                        LensKernel(
                            diameter: diameter, shape: shape,
                            eye: Self.eye(
                                x: (Float(zx) + 0.5) / Float(n), y: (Float(zy) + 0.5) / Float(n),
                                width: width, height: height, strength: catEye)))
                }
            }
            kernels = ks
        } else {
            kernels = [LensKernel(diameter: diameter, shape: shape)]
        }
        reach = kernels.map(\.reach).max() ?? 0
    }

    /// The cat-eye circle's centre (in radii) at the point (fx, fy) given as fractions of the photo:
    /// shifted toward the photo's centre by `strength` times the point's distance from it
    /// (1 at the corners), so the shape is cut on its outer side.
    static func eye(x fx: Float, y fy: Float, width: Int, height: Int, strength: Float) -> SIMD2<Float> {
        let dx = (fx - 0.5) * Float(width), dy = (fy - 0.5) * Float(height)
        let half = 0.5 * (Float(width * width + height * height)).squareRoot()
        guard half > 0 else { return .zero }
        return SIMD2(-dx, -dy) / half * strength
    }

    func kernel(atX x: Int, y: Int) -> LensKernel {
        guard kernels.count > 1 else { return kernels[0] }
        let n = Self.zones
        let zx = min(n - 1, x * n / max(1, width)), zy = min(n - 1, y * n / max(1, height))
        return kernels[zy * n + zx]
    }
}

extension LensBlur {
    /// Blurs one layer inside the tile `x0..<x1, y0..<y1` of the working grid into `out`: for
    /// every output pixel, the sum over the kernel's rows of a prefix-sum difference (the full run)
    /// plus the edge pixels. The kernel is the point-spread function, so the gather reads it
    /// point-reflected (it matters for odd blade counts and cat's eyes).
    static func gather(
        _ src: LayerSource, layer: Int, kernel: LensKernel, reach: Int,
        x0: Int, y0: Int, x1: Int, y1: Int, into out: UnsafeMutablePointer<SIMD4<Float>>
    ) {
        let W = src.width, H = src.height
        let tw = x1 - x0, th = y1 - y0
        let wx0 = x0 - reach, wy0 = y0 - reach
        let ww = tw + 2 * reach, wh = th + 2 * reach
        let l32 = Int32(layer)
        // Window of the layer's pixels (zero outside the photo) and its row prefix sums.
        let win = UnsafeMutablePointer<SIMD4<Float>>.allocate(capacity: ww * wh)
        let pre = UnsafeMutablePointer<SIMD4<Float>>.allocate(capacity: (ww + 1) * wh)
        defer {
            win.deallocate()
            pre.deallocate()
        }
        var anyPixel = false
        for j in 0..<wh {
            let y = wy0 + j
            let row = win + j * ww, prow = pre + j * (ww + 1)
            var run = SIMD4<Float>.zero
            prow[0] = .zero
            if y < 0 || y >= H {
                for i in 0..<ww {
                    row[i] = .zero
                    prow[i + 1] = .zero
                }
                continue
            }
            for i in 0..<ww {
                let x = wx0 + i
                let v = x >= 0 && x < W ? src.value(y * W + x, layer: l32) : .zero
                if v.w != 0 { anyPixel = true }
                row[i] = v
                run += v
                prow[i + 1] = run
            }
        }
        if !anyPixel {
            for y in y0..<y1 { for x in x0..<x1 { out[y * W + x] = .zero } }
            return
        }
        let acc = UnsafeMutablePointer<SIMD4<Float>>.allocate(capacity: tw)
        defer { acc.deallocate() }
        for yy in 0..<th {
            for i in 0..<tw { acc[i] = .zero }
            let wy = yy + reach
            for r in kernel.rows {
                // The source row of PSF row dy is y - dy.
                let j = wy - r.dy
                let prow = pre + j * (ww + 1), row = win + j * ww
                if r.runLo <= r.runHi {
                    // Columns x - runHi ... x - runLo: prefix[x - runLo + 1] - prefix[x - runHi].
                    let hiOff = reach - r.runLo + 1, loOff = reach - r.runHi
                    let w = r.runWeight
                    for i in 0..<tw { acc[i] += (prow[i + hiOff] - prow[i + loOff]) * w }
                }
                for tap in r.taps {
                    let off = reach - tap.dx
                    let w = tap.w
                    for i in 0..<tw { acc[i] += row[i + off] * w }
                }
            }
            let o = (y0 + yy) * W + x0
            for i in 0..<tw { out[o + i] = acc[i] }
        }
    }

    /// `map` resampled to `width` x `height` by bilinear interpolation with pixel centres aligned.
    static func resample(_ map: Image<Float>, width: Int, height: Int) -> Image<Float> {
        if map.width == width && map.height == height { return map }
        let sw = map.width, sh = map.height
        let sx = Float(sw) / Float(width), sy = Float(sh) / Float(height)
        return map.samples.withUnsafeBufferPointer { s in
            Image<Float>(uninitializedWidth: width, height: height, channels: 1) { d in
                for y in 0..<height {
                    let fy = min(max((Float(y) + 0.5) * sy - 0.5, 0), Float(sh - 1))
                    let y0 = Int(fy), y1 = min(y0 + 1, sh - 1), ty = fy - Float(y0)
                    for x in 0..<width {
                        let fx = min(max((Float(x) + 0.5) * sx - 0.5, 0), Float(sw - 1))
                        let x0 = Int(fx), x1 = min(x0 + 1, sw - 1), tx = fx - Float(x0)
                        func v(_ i: Int) -> Float {
                            let a = s[i]
                            return a.isFinite ? a : 0
                        }
                        let top = v(y0 * sw + x0) + (v(y0 * sw + x1) - v(y0 * sw + x0)) * tx
                        let bot = v(y1 * sw + x0) + (v(y1 * sw + x1) - v(y1 * sw + x0)) * tx
                        d[y * width + x] = top + (bot - top) * ty
                    }
                }
            }
        }
    }
}

/// The four working-grid pixels and weights of a bilinear sample at full-resolution pixel (x, y)
/// (grid divisor k, pixel centres aligned), computed once and used on every plane of the grid.
struct GridTaps {
    let i00: Int, i01: Int, i10: Int, i11: Int
    let tx: Float, ty: Float

    @inline(__always)
    init(x: Int, y: Int, divisor k: Int, width w: Int, height h: Int) {
        let fx = min(max((Float(x) + 0.5) / Float(k) - 0.5, 0), Float(w - 1))
        let fy = min(max((Float(y) + 0.5) / Float(k) - 0.5, 0), Float(h - 1))
        let x0 = Int(fx), y0 = Int(fy), x1 = min(x0 + 1, w - 1), y1 = min(y0 + 1, h - 1)
        i00 = y0 * w + x0
        i01 = y0 * w + x1
        i10 = y1 * w + x0
        i11 = y1 * w + x1
        tx = fx - Float(x0)
        ty = fy - Float(y0)
    }

    @inline(__always)
    func sample(_ p: UnsafePointer<Float>) -> Float {
        let top = p[i00] + (p[i01] - p[i00]) * tx, bot = p[i10] + (p[i11] - p[i10]) * tx
        return top + (bot - top) * ty
    }

    @inline(__always)
    func sample(_ p: UnsafePointer<SIMD4<Float>>) -> SIMD4<Float> {
        let top = p[i00] + (p[i01] - p[i00]) * tx, bot = p[i10] + (p[i11] - p[i10]) * tx
        return top + (bot - top) * ty
    }
}
