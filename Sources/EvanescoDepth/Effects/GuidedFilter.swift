import EvanescoCore

/// Edge-aware refinement of an upscaled mask: the fast guided filter (He and Sun, 2015). Within
/// each window the output is a linear function of the guide, `q = a * I + b`, fitted to the mask
/// in the least-squares sense, so mask edges snap to edges of the guide (the photo's luma, or the
/// portrait matte). The coefficients are computed at 1/`subsample` resolution and upsampled,
/// which keeps the cost a few passes over a low-resolution image.
public struct GuidedFilter: Sendable {
    /// Window radius in full-resolution pixels.
    public var radius: Int
    /// Regularisation (guide values in 0...1): larger keeps the mask smoother.
    public var epsilon: Float
    /// The mask and guide are filtered at 1/subsample of their size (the fast guided filter).
    public var subsample: Int

    /// - Parameters:
    ///   - radius: Window radius in full-resolution pixels (at least 1).
    ///   - epsilon: Regularisation.
    ///   - subsample: Subsampling factor (at least 1).
    public init(radius: Int, epsilon: Float = 1e-3, subsample: Int = 2) {
        self.radius = max(1, radius)
        self.epsilon = epsilon
        self.subsample = max(1, subsample)
    }

    /// `guide` and `mask`: one channel each, same size; guide in 0...1.
    public func apply(mask: Image<Float>, guide: Image<Float>) -> Image<Float> {
        precondition(
            mask.width == guide.width && mask.height == guide.height && mask.channels == 1 && guide.channels == 1)
        let W = mask.width, H = mask.height, s = subsample
        let w = (W + s - 1) / s, h = (H + s - 1) / s
        let I = Self.boxDown(guide, s), p = Self.boxDown(mask, s)
        let r = max(1, radius / s)
        let n = w * h
        var Ip = [Float](repeating: 0, count: n), II = [Float](repeating: 0, count: n)
        for i in 0..<n {
            Ip[i] = I[i] * p[i]
            II[i] = I[i] * I[i]
        }
        let mI = Self.boxMean(I, w, h, r), mp = Self.boxMean(p, w, h, r)
        let mIp = Self.boxMean(Ip, w, h, r), mII = Self.boxMean(II, w, h, r)
        var a = [Float](repeating: 0, count: n), b = [Float](repeating: 0, count: n)
        for i in 0..<n {
            let v = mII[i] - mI[i] * mI[i], c = mIp[i] - mI[i] * mp[i]
            a[i] = c / (v + epsilon)
            b[i] = mp[i] - a[i] * mI[i]
        }
        let ma = Self.boxMean(a, w, h, r), mb = Self.boxMean(b, w, h, r)
        // q = A * I + B with A, B bilinearly upsampled (sample centres aligned).
        return guide.samples.withUnsafeBufferPointer { g in
            ma.withUnsafeBufferPointer { ma in
                mb.withUnsafeBufferPointer { mb in
                    Image<Float>(uninitializedWidth: W, height: H, channels: 1) { out in
                        StripExecutor.forEachStrip(rows: H, minimumRows: 32) { rows in
                            for y in rows {
                                let sy = min(max((Float(y) + 0.5) / Float(s) - 0.5, 0), Float(h - 1))
                                let y0 = Int(sy), y1 = min(y0 + 1, h - 1), ty = sy - Float(y0)
                                for x in 0..<W {
                                    let sx = min(max((Float(x) + 0.5) / Float(s) - 0.5, 0), Float(w - 1))
                                    let x0 = Int(sx), x1 = min(x0 + 1, w - 1), tx = sx - Float(x0)
                                    @inline(__always) func bl(_ m: UnsafeBufferPointer<Float>) -> Float {
                                        let top = m[y0 * w + x0] + (m[y0 * w + x1] - m[y0 * w + x0]) * tx
                                        let bot = m[y1 * w + x0] + (m[y1 * w + x1] - m[y1 * w + x0]) * tx
                                        return top + (bot - top) * ty
                                    }
                                    let q = bl(ma) * g[y * W + x] + bl(mb)
                                    out[y * W + x] = min(max(q, 0), 1)
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Mean over s x s blocks (edge blocks average what they cover).
    static func boxDown(_ img: Image<Float>, _ s: Int) -> [Float] {
        let W = img.width, H = img.height, w = (W + s - 1) / s, h = (H + s - 1) / s
        if s == 1 { return Array(img.samples) }
        var out = [Float](repeating: 0, count: w * h), count = [Float](repeating: 0, count: w * h)
        img.samples.withUnsafeBufferPointer { src in
            for y in 0..<H {
                let oy = (y / s) * w
                for x in 0..<W {
                    out[oy + x / s] += src[y * W + x]
                    count[oy + x / s] += 1
                }
            }
        }
        for i in 0..<out.count { out[i] /= count[i] }
        return out
    }

    /// Mean over a (2r+1)^2 window clipped at the edges (running sums, O(1) per sample).
    static func boxMean(_ v: [Float], _ w: Int, _ h: Int, _ r: Int) -> [Float] {
        var tmp = [Float](repeating: 0, count: w * h), out = [Float](repeating: 0, count: w * h)
        // Horizontal.
        for y in 0..<h {
            let o = y * w
            var acc: Float = 0
            for x in 0...min(r, w - 1) { acc += v[o + x] }
            for x in 0..<w {
                let lo = max(0, x - r), hi = min(w - 1, x + r)
                tmp[o + x] = acc / Float(hi - lo + 1)
                if x + r + 1 < w { acc += v[o + x + r + 1] }
                if x - r >= 0 { acc -= v[o + x - r] }
            }
        }
        // Vertical, a row of accumulators at a time.
        var acc = [Float](repeating: 0, count: w)
        for y in 0...min(r, h - 1) { for x in 0..<w { acc[x] += tmp[y * w + x] } }
        for y in 0..<h {
            let lo = max(0, y - r), hi = min(h - 1, y + r)
            let inv = 1 / Float(hi - lo + 1)
            for x in 0..<w { out[y * w + x] = acc[x] * inv }
            if y + r + 1 < h { for x in 0..<w { acc[x] += tmp[(y + r + 1) * w + x] } }
            if y - r >= 0 { for x in 0..<w { acc[x] -= tmp[(y - r) * w + x] } }
        }
        return out
    }
}
