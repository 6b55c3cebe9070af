import EvanescoCore
import Foundation

/// The motion model a registration estimates.
public enum MotionModel: String, Sendable, Codable, CaseIterable {
    /// Sub-pixel shift: what VNTranslationalImageRegistrationRequest gives.
    case translation
    /// 3x3 projective warp: what VNHomographicImageRegistrationRequest gives.
    case homography
}

/// Tuning of a registration.
public struct RegistrationOptions: Sendable {
    /// Finest pyramid level refined (0 = full resolution).
    public var finestLevel = 0
    /// Template points kept per level (the strongest gradients, spread over a grid).
    public var maxPoints = 60_000
    /// Iterations per level (coarse levels get twice as many).
    public var iterations = 12
    /// Search radius of the coarse translation search, as a fraction of the coarsest level's size.
    public var searchFraction: Float = 0.2
    /// A frame whose matching texture falls below this fraction of the template is refused.
    public var minimumInlierFraction: Float = 0.3
    public init() {}
}

/// The outcome of registering one frame to the reference.
public struct RegistrationResult: Sendable, Codable {
    /// Maps the frame's pixel coordinates to the reference's (top-left origin, integer centres).
    public var homography: Homography
    public var model: MotionModel
    /// Robust RMS of the photometric residual on matching texture, in 8-bit grey levels.
    public var residual: Double
    /// Fraction of template points inside the frame whose residual is consistent with noise.
    public var inlierFraction: Double
    /// Exposure difference found: frame ~ gain * reference + offset (grey levels).
    public var gain: Double
    public var offset: Double
    public var iterations: Int
}

public enum RegistrationError: Error, CustomStringConvertible, Equatable {
    case sizeMismatch(frame: String, reference: String)
    case tooLittleTexture
    case noOverlap
    case diverged(String)
    case poorMatch(inlierFraction: Double)

    public var description: String {
        switch self {
        case .sizeMismatch(let f, let r): "frame is \(f) but the reference is \(r)"
        case .tooLittleTexture: "the reference has too little texture to align against"
        case .noOverlap: "the frame does not overlap the reference enough"
        case .diverged(let d): "alignment diverged (\(d))"
        case .poorMatch(let f): String(format: "only %.0f%% of the texture matches the reference after alignment", f * 100)
        }
    }
}

/// Template points of one pyramid level: positions, values and gradients.
struct TemplateLevel: Sendable {
    var width: Int, height: Int
    /// Normalisation: xn = (x - cx) / scale.
    var cx: Float, cy: Float, scale: Float
    var x: [Float], y: [Float], t: [Float]
    /// Gradients in normalised units (d T / d xn).
    var gx: [Float], gy: [Float]
    var count: Int { x.count }
}

/// The reference frame, prepared once: its pyramid and template points per level.
/// Register any number of frames against it, from several threads at once.
public final class RegistrationReference: Sendable {
    public let pyramid: GreyPyramid
    let templates: [TemplateLevel]
    public let options: RegistrationOptions
    public var width: Int { pyramid.levels[0].width }
    public var height: Int { pyramid.levels[0].height }

    public convenience init<S: PixelSample>(_ image: Image<S>, options: RegistrationOptions = RegistrationOptions()) {
        self.init(pyramid: GreyPyramid(image), options: options)
    }

    public init(pyramid: GreyPyramid, options: RegistrationOptions = RegistrationOptions()) {
        self.pyramid = pyramid
        self.options = options
        templates = pyramid.levels.enumerated().map { level, img in
            // Coarse levels keep every textured pixel; finer ones the strongest, spread on a grid.
            let cap = level >= 3 ? Int.max : options.maxPoints
            return RegistrationReference.selectPoints(img, cap: cap)
        }
    }

    static func selectPoints(_ img: Image<Float>, cap: Int) -> TemplateLevel {
        let w = img.width, h = img.height
        let cx = Float(w - 1) / 2, cy = Float(h - 1) / 2, scale = Float(max(w, h)) / 2
        var xs: [Float] = [], ys: [Float] = [], ts: [Float] = [], gxs: [Float] = [], gys: [Float] = []
        img.samples.withUnsafeBufferPointer { s in
            // Gradient magnitude per pixel (central differences), 2-pixel border excluded.
            let cells = 8
            let cellW = max(1, (w + cells - 1) / cells), cellH = max(1, (h + cells - 1) / cells)
            let quota = cap == Int.max ? Int.max : max(16, cap / (cells * cells))
            for cyi in 0..<cells {
                for cxi in 0..<cells {
                    var cand: [(g: Float, i: Int)] = []
                    let y0 = max(2, cyi * cellH), y1 = min(h - 2, (cyi + 1) * cellH)
                    let x0 = max(2, cxi * cellW), x1 = min(w - 2, (cxi + 1) * cellW)
                    guard y0 < y1, x0 < x1 else { continue }
                    for y in y0..<y1 {
                        for x in x0..<x1 {
                            let i = y * w + x
                            let gx = 0.5 * (s[i + 1] - s[i - 1]), gy = 0.5 * (s[i + w] - s[i - w])
                            let g = gx * gx + gy * gy
                            if g >= 1.0 { cand.append((g, i)) }   // |grad| >= 1 grey level / px
                        }
                    }
                    if cand.count > quota {
                        cand.sort { $0.g > $1.g }
                        cand.removeLast(cand.count - quota)
                    }
                    for c in cand {
                        let x = c.i % w, y = c.i / w
                        xs.append(Float(x)); ys.append(Float(y)); ts.append(s[c.i])
                        gxs.append(0.5 * (s[c.i + 1] - s[c.i - 1]) * scale)
                        gys.append(0.5 * (s[c.i + w] - s[c.i - w]) * scale)
                    }
                }
            }
        }
        return TemplateLevel(width: w, height: h, cx: cx, cy: cy, scale: scale, x: xs, y: ys, t: ts, gx: gxs, gy: gys)
    }

    /// Registers a frame: returns the homography mapping the frame's pixels to the reference's.
    /// `initial`, when given, is a starting estimate in the same convention (e.g. from features).
    public func register<S: PixelSample>(_ frame: Image<S>, model: MotionModel, initial: Homography? = nil) throws -> RegistrationResult {
        guard frame.width == width, frame.height == height else {
            throw RegistrationError.sizeMismatch(frame: "\(frame.width)x\(frame.height)", reference: "\(width)x\(height)")
        }
        return try register(pyramid: GreyPyramid(frame, minSide: 48, maxLevels: pyramid.levels.count), model: model, initial: initial)
    }

    public func register(pyramid fp: GreyPyramid, model: MotionModel, initial: Homography? = nil) throws -> RegistrationResult {
        let top = min(pyramid.levels.count, fp.levels.count) - 1
        let finest = min(options.finestLevel, top)
        // W maps reference pixels to frame pixels at level 0 (the inverse of the result).
        var w: Homography
        if let initial, let inv = initial.inverse {
            w = inv
        } else {
            let shift = coarseShift(fp.levels[top], pyramid.levels[top])
            w = Homography.translation(Double(shift.dx), Double(shift.dy)).rescaled(by: pow(2.0, Double(top)))
        }
        var last: LevelOutcome?
        var totalIterations = 0
        for level in stride(from: top, through: finest, by: -1) {
            let tl = templates[level]
            guard tl.count >= 12 else { if level == finest { throw RegistrationError.tooLittleTexture }; continue }
            let s = pow(0.5, Double(level))
            var wl = w.rescaled(by: s)
            // The coarsest level settles the shift first; finer levels fit the full model.
            let levelModel: MotionModel = (level == top && initial == nil && top > finest) ? .translation : model
            let iters = level == finest ? options.iterations : options.iterations * 2
            let out = try refine(&wl, tl, fp.levels[level], model: levelModel, iterations: iters)
            totalIterations += out.iterations
            w = wl.rescaled(by: 1 / s)
            last = out
        }
        guard let final = last else { throw RegistrationError.tooLittleTexture }
        guard let h = w.inverse, h.m.allSatisfy({ $0.isFinite }) else { throw RegistrationError.diverged("singular warp") }
        let det = h.m[0] * h.m[4] - h.m[1] * h.m[3]
        guard det > 0.25, det < 4 else { throw RegistrationError.diverged(String(format: "scale change %.2f", det.squareRoot())) }
        guard final.overlap >= 0.2 else { throw RegistrationError.noOverlap }
        guard final.inlierFraction >= Double(options.minimumInlierFraction) else {
            throw RegistrationError.poorMatch(inlierFraction: final.inlierFraction)
        }
        return RegistrationResult(homography: h, model: model, residual: final.residual, inlierFraction: final.inlierFraction,
                                  gain: final.gain, offset: final.offset, iterations: totalIterations)
    }

    /// Integer shift (frame minus reference) maximising zero-mean normalised cross-correlation
    /// at the coarsest level.
    func coarseShift(_ frame: Image<Float>, _ ref: Image<Float>) -> (dx: Int, dy: Int, score: Float) {
        let w = ref.width, h = ref.height
        let r = max(2, Int(Float(max(w, h)) * options.searchFraction))
        var best = (dx: 0, dy: 0, score: -Float.infinity)
        ref.samples.withUnsafeBufferPointer { t in
            frame.samples.withUnsafeBufferPointer { f in
                for dy in -r...r {
                    for dx in -r...r {
                        let x0 = max(0, -dx), x1 = min(w, w - dx), y0 = max(0, -dy), y1 = min(h, h - dy)
                        let n = (x1 - x0) * (y1 - y0)
                        guard n >= w * h / 4 else { continue }
                        var st: Float = 0, sf: Float = 0, stt: Float = 0, sff: Float = 0, stf: Float = 0
                        for y in y0..<y1 {
                            let rt = y * w, rf = (y + dy) * w + dx
                            for x in x0..<x1 {
                                let a = t[rt + x], b = f[rf + x]
                                st += a; sf += b; stt += a * a; sff += b * b; stf += a * b
                            }
                        }
                        let fn = Float(n)
                        let cov = stf - st * sf / fn, vt = stt - st * st / fn, vf = sff - sf * sf / fn
                        let score = cov / max(1e-6, (vt * vf).squareRoot())
                        if score > best.score { best = (dx, dy, score) }
                    }
                }
            }
        }
        return best
    }

    struct LevelOutcome { var residual: Double; var inlierFraction: Double; var overlap: Double; var gain: Double; var offset: Double; var iterations: Int }

    /// Robust inverse-compositional Gauss-Newton at one level, with a gain/offset fit each step.
    func refine(_ w: inout Homography, _ tl: TemplateLevel, _ img: Image<Float>, model: MotionModel, iterations: Int) throws -> LevelOutcome {
        let n = tl.count
        let np = model == .homography ? 8 : 2
        let iw = img.width, ih = img.height
        let maxX = Float(iw - 1), maxY = Float(ih - 1)
        var sampled = [Float](repeating: 0, count: n)
        var inside = [Bool](repeating: false, count: n)
        var weights = [Float](repeating: 1, count: n)
        var gain: Double = 1, offset: Double = 0, sigma: Float = 0
        var outcome = LevelOutcome(residual: 0, inlierFraction: 0, overlap: 0, gain: 1, offset: 0, iterations: 0)
        // N maps level pixels to normalised coordinates.
        let nrm = Homography.affine(Double(1 / tl.scale), 0, Double(-tl.cx / tl.scale), 0, Double(1 / tl.scale), Double(-tl.cy / tl.scale))
        let nrmInv = nrm.inverse!
        for it in 0..<iterations {
            let m = w.m.map { Float($0) }
            // 1. Sample the frame at the warped template points.
            img.samples.withUnsafeBufferPointer { s in
                sampled.withUnsafeMutableBufferPointer { smp in inside.withUnsafeMutableBufferPointer { ins in
                    let sb = UncheckedSendable((smp, ins))
                    StripExecutor.forEachStrip(rows: n, minimumRows: 4096) { range in
                        let (smp, ins) = sb.value
                        for i in range {
                            let x = tl.x[i], y = tl.y[i]
                            let d = m[6] * x + m[7] * y + m[8]
                            let qx = (m[0] * x + m[1] * y + m[2]) / d, qy = (m[3] * x + m[4] * y + m[5]) / d
                            guard qx >= 0, qy >= 0, qx < maxX, qy < maxY else { ins[i] = false; continue }
                            let fx = qx.rounded(.down), fy = qy.rounded(.down)
                            let ax = qx - fx, ay = qy - fy
                            let o = Int(fy) * iw + Int(fx)
                            let top = s[o] + (s[o + 1] - s[o]) * ax, bot = s[o + iw] + (s[o + iw + 1] - s[o + iw]) * ax
                            smp[i] = top + (bot - top) * ay
                            ins[i] = true
                        }
                    }
                }}
            }
            // 2. Gain and offset by weighted least squares: frame ~ gain * ref + offset.
            var sw = 0.0, st = 0.0, si = 0.0, stt = 0.0, sti = 0.0, count = 0
            for i in 0..<n where inside[i] {
                let wt = Double(weights[i]), t = Double(tl.t[i]), v = Double(sampled[i])
                sw += wt; st += wt * t; si += wt * v; stt += wt * t * t; sti += wt * t * v; count += 1
            }
            guard count >= max(12, n / 20) else { throw RegistrationError.noOverlap }
            let vt = stt - st * st / sw
            if vt > 1e-9 { gain = (sti - st * si / sw) / vt; offset = (si - gain * st) / sw }
            if !(gain > 0.5 && gain < 2) { gain = 1; offset = (si - st) / sw }
            // 3. Residuals (frame mapped back to the reference's exposure) and a robust scale.
            var absr: [Float] = []
            absr.reserveCapacity(count)
            let ig = Float(1 / gain), off = Float(offset)
            var res = [Float](repeating: 0, count: n)
            for i in 0..<n where inside[i] {
                let r = (sampled[i] - off) * ig - tl.t[i]
                res[i] = r
                absr.append(abs(r))
            }
            sigma = max(0.5, 1.4826 * quickMedian(&absr))
            let c = 4.685 * sigma
            var inliers = 0
            for i in 0..<n {
                guard inside[i] else { weights[i] = 0; continue }
                let u = res[i] / c
                weights[i] = abs(u) < 1 ? (1 - u * u) * (1 - u * u) : 0
                if weights[i] > 0 { inliers += 1 }
            }
            // 4. Normal equations over steepest-descent images.
            var a = [Double](repeating: 0, count: np * np), b = [Double](repeating: 0, count: np)
            var wr2 = 0.0, wsum = 0.0
            for i in 0..<n where weights[i] > 0 {
                let xn = (tl.x[i] - tl.cx) / tl.scale, yn = (tl.y[i] - tl.cy) / tl.scale
                let gx = tl.gx[i], gy = tl.gy[i]
                var sd = [Float](repeating: 0, count: np)
                if np == 2 { sd[0] = gx; sd[1] = gy } else {
                    let proj = gx * xn + gy * yn
                    sd[0] = gx * xn; sd[1] = gx * yn; sd[2] = gx; sd[3] = gy * xn; sd[4] = gy * yn; sd[5] = gy
                    sd[6] = -xn * proj; sd[7] = -yn * proj
                }
                let wt = Double(weights[i]), r = Double(res[i])
                for p in 0..<np {
                    let sp = Double(sd[p]) * wt
                    b[p] += sp * r
                    for q in p..<np { a[p * np + q] += sp * Double(sd[q]) }
                }
                wr2 += wt * r * r; wsum += wt
            }
            for p in 0..<np { for q in 0..<p { a[p * np + q] = a[q * np + p] } }
            guard let dp = solveSymmetric(a, b, np) else { throw RegistrationError.diverged("flat texture") }
            let dW: Homography = np == 2 ? .translation(dp[0], dp[1])
                : Homography([1 + dp[0], dp[1], dp[2], dp[3], 1 + dp[4], dp[5], dp[6], dp[7], 1])
            guard let dWinv = dW.inverse else { throw RegistrationError.diverged("singular update") }
            let step = nrmInv * dWinv * nrm
            w = w * step
            guard w.m.allSatisfy({ $0.isFinite }) else { throw RegistrationError.diverged("non-finite warp") }
            // Converged when no corner moves more than 1/200 px.
            var moved = 0.0
            for (cx, cy) in [(0.0, 0.0), (Double(tl.width - 1), 0.0), (0.0, Double(tl.height - 1)), (Double(tl.width - 1), Double(tl.height - 1))] {
                if let p = step.apply(cx, cy) { moved = max(moved, abs(p.x - cx), abs(p.y - cy)) } else { moved = .infinity }
            }
            outcome = LevelOutcome(residual: (wr2 / max(wsum, 1e-9)).squareRoot(), inlierFraction: Double(inliers) / Double(max(count, 1)),
                                   overlap: Double(count) / Double(n), gain: gain, offset: offset, iterations: it + 1)
            if moved < 0.005 { break }
        }
        return outcome
    }
}

/// Median by quickselect (reorders `v`).
func quickMedian(_ v: inout [Float]) -> Float {
    guard !v.isEmpty else { return 0 }
    var lo = 0, hi = v.count - 1
    let k = v.count / 2
    while lo < hi {
        let pivot = v[(lo + hi) / 2]
        var i = lo, j = hi
        while i <= j {
            while v[i] < pivot { i += 1 }
            while v[j] > pivot { j -= 1 }
            if i <= j { v.swapAt(i, j); i += 1; j -= 1 }
        }
        if k <= j { hi = j } else if k >= i { lo = i } else { break }
    }
    return v[k]
}

/// Solves a symmetric positive-definite system by Cholesky; nil when singular.
func solveSymmetric(_ a: [Double], _ b: [Double], _ n: Int) -> [Double]? {
    var l = [Double](repeating: 0, count: n * n)
    for i in 0..<n {
        for j in 0...i {
            var s = a[i * n + j]
            for k in 0..<j { s -= l[i * n + k] * l[j * n + k] }
            if i == j {
                guard s > 1e-12 * max(1, abs(a[i * n + i])) else { return nil }
                l[i * n + i] = s.squareRoot()
            } else {
                l[i * n + j] = s / l[j * n + j]
            }
        }
    }
    var y = [Double](repeating: 0, count: n)
    for i in 0..<n { var s = b[i]; for k in 0..<i { s -= l[i * n + k] * y[k] }; y[i] = s / l[i * n + i] }
    var x = [Double](repeating: 0, count: n)
    for i in stride(from: n - 1, through: 0, by: -1) { var s = y[i]; for k in (i + 1)..<n { s -= l[k * n + i] * x[k] }; x[i] = s / l[i * n + i] }
    return x
}
