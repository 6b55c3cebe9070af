import EvanescoCore
import Foundation

/// A starting homography for large motion (another viewpoint, a strong turn or zoom), from
/// corners matched by oriented patch descriptors and a RANSAC fit. The direct refinement does
/// the precise work; this only has to land within its reach.
enum FeatureStart {
    struct Keypoint {
        var x: Float
        var y: Float
        var angle: Float
    }

    /// Shi-Tomasi corners (smallest eigenvalue of the 5x5 structure tensor), local maxima in a
    /// 7x7 window, spread over an 8x8 grid, at most `maxCount`.
    static func corners(_ img: Image<Float>, maxCount: Int, border: Int) -> [Keypoint] {
        let w = img.width, h = img.height
        guard w > 2 * border + 8, h > 2 * border + 8 else { return [] }
        var response = [Float](repeating: 0, count: w * h)
        img.samples.withUnsafeBufferPointer { s in
            var gxx = [Float](repeating: 0, count: w * h), gyy = gxx, gxy = gxx
            for y in 1..<(h - 1) {
                for x in 1..<(w - 1) {
                    let i = y * w + x
                    let gx = 0.5 * (s[i + 1] - s[i - 1]), gy = 0.5 * (s[i + w] - s[i - w])
                    gxx[i] = gx * gx
                    gyy[i] = gy * gy
                    gxy[i] = gx * gy
                }
            }
            for y in border..<(h - border) {
                for x in border..<(w - border) {
                    var a: Float = 0, b: Float = 0, c: Float = 0
                    for dy in -2...2 {
                        for dx in -2...2 {
                            let j = (y + dy) * w + x + dx
                            a += gxx[j]
                            b += gxy[j]
                            c += gyy[j]
                        }
                    }
                    response[y * w + x] = 0.5 * (a + c) - (0.25 * (a - c) * (a - c) + b * b).squareRoot()
                }
            }
        }
        let cells = 8, quota = max(4, maxCount / (cells * cells))
        var out: [Keypoint] = []
        for cy in 0..<cells {
            for cx in 0..<cells {
                var cand: [(Float, Int, Int)] = []
                let y0 = max(border, cy * h / cells), y1 = min(h - border, (cy + 1) * h / cells)
                let x0 = max(border, cx * w / cells), x1 = min(w - border, (cx + 1) * w / cells)
                guard y0 < y1, x0 < x1 else { continue }
                for y in y0..<y1 {
                    for x in x0..<x1 {
                        let r = response[y * w + x]
                        guard r > 1 else { continue }
                        var peak = true
                        outer: for dy in -3...3 {
                            for dx in -3...3 where dx != 0 || dy != 0 {
                                let yy = y + dy, xx = x + dx
                                if yy >= 0, yy < h, xx >= 0, xx < w, response[yy * w + xx] > r {
                                    peak = false
                                    break outer
                                }
                            }
                        }
                        if peak { cand.append((r, x, y)) }
                    }
                }
                cand.sort { $0.0 > $1.0 }
                for c in cand.prefix(quota) {
                    out.append(Keypoint(x: Float(c.1), y: Float(c.2), angle: orientation(img, c.1, c.2)))
                }
            }
        }
        return out
    }

    /// Direction of the intensity centroid within radius 9 (as ORB).
    static func orientation(_ img: Image<Float>, _ x: Int, _ y: Int) -> Float {
        var m10: Float = 0, m01: Float = 0
        for dy in -9...9 {
            for dx in -9...9 where dx * dx + dy * dy <= 81 {
                let xx = min(max(x + dx, 0), img.width - 1), yy = min(max(y + dy, 0), img.height - 1)
                let v = img.samples[yy * img.width + xx]
                m10 += Float(dx) * v
                m01 += Float(dy) * v
            }
        }
        return atan2f(m01, m10)
    }

    /// 64 samples on a rotated 8x8 grid (spacing 2.5 px x scale), zero mean and unit norm.
    static func descriptor(_ img: Image<Float>, _ k: Keypoint, scale: Float) -> [Float]? {
        let c = cosf(k.angle), s = sinf(k.angle), step = 2.5 * scale
        var d = [Float](repeating: 0, count: 64)
        let maxX = Float(img.width - 1), maxY = Float(img.height - 1)
        for j in 0..<8 {
            for i in 0..<8 {
                let u = (Float(i) - 3.5) * step, v = (Float(j) - 3.5) * step
                let px = k.x + c * u - s * v, py = k.y + s * u + c * v
                guard px >= 0, py >= 0, px < maxX, py < maxY else { return nil }
                let fx = px.rounded(.down), fy = py.rounded(.down), ax = px - fx, ay = py - fy
                let o = Int(fy) * img.width + Int(fx)
                let p = img.samples
                let top = p[o] + (p[o + 1] - p[o]) * ax,
                    bottom = p[o + img.width] + (p[o + img.width + 1] - p[o + img.width]) * ax
                d[j * 8 + i] = top + (bottom - top) * ay
            }
        }
        let mean = d.reduce(0, +) / 64
        var norm: Float = 0
        for i in 0..<64 {
            d[i] -= mean
            norm += d[i] * d[i]
        }
        guard norm > 64 else { return nil }  // flat patch
        let inv = 1 / norm.squareRoot()
        return d.map { $0 * inv }
    }

    /// Homography through 4 or more correspondences (frame -> reference), least squares with
    /// h33 = 1 on centred coordinates; nil when degenerate.
    static func fit(_ pairs: [(Float, Float, Float, Float)]) -> Homography? {
        guard pairs.count >= 4 else { return nil }
        let n = Double(pairs.count)
        let mx = pairs.reduce(0.0) { $0 + Double($1.0) } / n, my = pairs.reduce(0.0) { $0 + Double($1.1) } / n
        let mu = pairs.reduce(0.0) { $0 + Double($1.2) } / n, mv = pairs.reduce(0.0) { $0 + Double($1.3) } / n
        let sp = 100.0
        var a = [Double](repeating: 0, count: 64), b = [Double](repeating: 0, count: 8)
        for (x0, y0, u0, v0) in pairs {
            let x = (Double(x0) - mx) / sp, y = (Double(y0) - my) / sp, u = (Double(u0) - mu) / sp,
                v = (Double(v0) - mv) / sp
            for (row, rhs) in [([x, y, 1, 0, 0, 0, -u * x, -u * y], u), ([0, 0, 0, x, y, 1, -v * x, -v * y], v)] {
                for p in 0..<8 {
                    b[p] += row[p] * rhs
                    for q in 0..<8 { a[p * 8 + q] += row[p] * row[q] }
                }
            }
        }
        guard let h = solveSymmetric(a, b, 8) else { return nil }
        let hn = Homography([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], 1])
        let tFrame = Homography.affine(1 / sp, 0, -mx / sp, 0, 1 / sp, -my / sp)
        let tRef = Homography.affine(sp, 0, mu, 0, sp, mv)
        let hm = tRef * hn * tFrame
        return hm.m.allSatisfy({ $0.isFinite }) ? hm : nil
    }

    /// Frame -> reference homography at `level` of the two pyramids, or nil.
    static func estimate(frame: Image<Float>, reference: Image<Float>) -> Homography? {
        let smoothedRef = GreyPyramid.smooth(reference), smoothedFrame = GreyPyramid.smooth(frame)
        let refKeys = corners(reference, maxCount: 640, border: 16)
        let frameKeys = corners(frame, maxCount: 640, border: 16)
        var refDesc: [(Int, [Float])] = []
        for (i, k) in refKeys.enumerated() {
            if let d = descriptor(smoothedRef, k, scale: 1) { refDesc.append((i, d)) }
        }
        var frameDesc: [(Int, [Float])] = []
        for (i, k) in frameKeys.enumerated() {
            for scale: Float in [0.6, 0.8, 1.0, 1.25, 1.6] {
                if let d = descriptor(smoothedFrame, k, scale: scale) { frameDesc.append((i, d)) }
            }
        }
        guard refDesc.count >= 8, frameDesc.count >= 8 else { return nil }
        // Each reference descriptor's best frame match, kept when clearly better than the
        // best match at another keypoint (ratio test on distances).
        var pairs: [(Float, Float, Float, Float)] = []
        for (ri, rd) in refDesc {
            var best: Float = -2, second: Float = -2, bestKey = -1
            for (fi, fd) in frameDesc {
                var dot: Float = 0
                for t in 0..<64 { dot += rd[t] * fd[t] }
                if dot > best {
                    if fi != bestKey { second = best }
                    best = dot
                    bestKey = fi
                } else if dot > second && fi != bestKey {
                    second = dot
                }
            }
            guard bestKey >= 0 else { continue }
            let dBest = 2 - 2 * best, dSecond = 2 - 2 * second
            if dBest < 0.8 * 0.8 * dSecond {
                pairs.append((frameKeys[bestKey].x, frameKeys[bestKey].y, refKeys[ri].x, refKeys[ri].y))
            }
        }
        guard pairs.count >= 8 else { return nil }
        // RANSAC with a fixed seed (repeatable), 3 px threshold.
        var seed: UInt64 = 0x9E3779B97F4A7C15
        func next(_ n: Int) -> Int {
            seed = seed &* 6364136223846793005 &+ 1442695040888963407
            return Int(seed >> 33) % n
        }
        var bestInliers: [Int] = []
        for _ in 0..<4000 {
            var idx = Set<Int>()
            while idx.count < 4 { idx.insert(next(pairs.count)) }
            guard let h = fit(idx.map { pairs[$0] }) else { continue }
            var inl: [Int] = []
            for (k, p) in pairs.enumerated() {
                if let q = h.apply(Double(p.0), Double(p.1)),
                    (q.x - Double(p.2)) * (q.x - Double(p.2)) + (q.y - Double(p.3)) * (q.y - Double(p.3)) < 9
                {
                    inl.append(k)
                }
            }
            if inl.count > bestInliers.count { bestInliers = inl }
        }
        guard bestInliers.count >= 10 else { return nil }
        return fit(bestInliers.map { pairs[$0] })
    }
}
