import CKernels
import EvanescoCore
import Foundation

// One level of refinement: robust inverse-compositional Gauss-Newton with an exposure fit, and
// the sums and the solve it is made of.

extension RegistrationReference {
    /// A template point "agrees" with the aligned frame when their grey levels (0...255, after
    /// the gain/offset fit) differ by at most this much: sensor noise and JPEG after the pyramid's
    /// smoothing stay well inside it, a different scene or a misalignment does not.
    static let agreementThreshold: Float = 8
    /// ... plus what a shift of this many pixels makes of the local gradient: on strong texture seen
    /// from another viewpoint, resampling alone moves grey levels by more than 8.
    static let agreementShift: Float = 0.5

    struct LevelOutcome {
        var residual: Double, inlierFraction: Double, overlap: Double, gain: Double, offset: Double, iterations: Int
        /// Zero-mean normalised cross-correlation of template and warped frame at the points.
        var correlation: Double = 0
        /// The regression slope of frame on reference before it is judged plausible as a gain.
        var slope: Double = 1
    }

    /// Bilinear samples of `img` at the template points mapped through `w` (NaN outside; the
    /// padding's entries are left as they are).
    static func sample(
        _ img: Image<Float>, _ tl: TemplateLevel, through w: Homography, into smp: UnsafeMutablePointer<Float>
    ) {
        let m = w.m.map { Float($0) }
        let iw = img.width, maxX = Float(img.width - 1), maxY = Float(img.height - 1)
        img.samples.withUnsafeBufferPointer { src in
            tl.x.withUnsafeBufferPointer { xs in
                tl.y.withUnsafeBufferPointer { ys in
                    let shared = UncheckedSendable((src.baseAddress!, xs.baseAddress!, ys.baseAddress!, smp))
                    // Eight points a step (CKernels: one body, with AVX2 where the CPU has it).
                    StripExecutor.forEachStrip(rows: tl.count, minimumRows: 8192) { range in
                        let (src, xs, ys, smp) = shared.value
                        m.withUnsafeBufferPointer { map in
                            var points = evn_sample_points(
                                image: src, width: iw, max_x: maxX, max_y: maxY, x: xs, y: ys, map: map.baseAddress)
                            evn_sample_points_run(&points, range.lowerBound, range.upperBound, smp)
                        }
                    }
                }
            }
        }
    }

    /// Robust inverse-compositional Gauss-Newton at one level, with a gain/offset fit each step.
    /// `parameters`: 2 (translation), 6 (affine) or 8 (homography).
    func refine(
        _ w: inout Homography, _ tl: TemplateLevel, _ img: Image<Float>, parameters np: Int, iterations: Int,
        tolerance: Double
    ) throws -> LevelOutcome {
        let n = tl.count, padded = tl.padded
        // NaN: the point falls outside the frame (and the padding never has a sample).
        let smp = UnsafeMutablePointer<Float>.allocate(capacity: padded)
        smp.initialize(repeating: .nan, count: padded)
        let wts = UnsafeMutablePointer<Float>.allocate(capacity: padded)
        wts.initialize(repeating: 1, count: padded)
        defer {
            smp.deallocate()
            wts.deallocate()
        }
        var gain: Double = 1, offset: Double = 0, rawSlope: Double = 1
        var outcome = LevelOutcome(
            residual: 0, inlierFraction: 0, overlap: 0, gain: 1, offset: 0, iterations: 0, correlation: 0)
        // N maps level pixels to normalised coordinates.
        let nrm = Homography.affine(
            Double(1 / tl.scale), 0, Double(-tl.cx / tl.scale), 0, Double(1 / tl.scale), Double(-tl.cy / tl.scale))
        let nrmInv = nrm.inverse!
        var absr = [Float]()
        for it in 0..<iterations {
            // 1. Sample the frame at the warped template points (bilinear).
            RegistrationReference.sample(img, tl, through: w, into: smp)
            // 2. Gain and offset by weighted least squares: frame ~ gain * ref + offset.
            let e = tl.t.withUnsafeBufferPointer { Exposure(smp, wts, $0.baseAddress!, padded) }
            guard e.count >= max(12, n / 20), e.sw > 0 else { throw RegistrationError.noOverlap }
            rawSlope = e.fit(gain: &gain, offset: &offset)
            // 3. Robust scale of the residuals (frame mapped back to the reference's exposure):
            // the median of about 1024 of them, evenly spread over the points, is as good a scale
            // (to a few percent) as all of them and saves most of the selection's time.
            let ig = Float(1 / gain), off = Float(offset)
            let sigma = Self.robustScale(tl, smp, offset: off, inverseGain: ig, scratch: &absr)
            // 4. Tukey weights and the normal equations over the steepest-descent rows.
            let s = NormalEquations.sum(
                tl, smp, wts, parameters: np, offset: off, inverseGain: ig, c2: (4.685 * sigma) * (4.685 * sigma))
            guard s.wsumHessian > 0, let dp = solveSymmetric(s.matrix(np, scaledBy: s.wsum / s.wsumHessian), s.b, np)
            else {
                throw RegistrationError.diverged("flat texture")
            }
            guard let dWinv = Self.parameterUpdate(dp, parameters: np).inverse else {
                throw RegistrationError.diverged("singular update")
            }
            let update = nrmInv * dWinv * nrm
            w = w * update
            guard w.m.allSatisfy({ $0.isFinite }) else { throw RegistrationError.diverged("non-finite warp") }
            outcome = LevelOutcome(
                residual: (s.wr2 / max(s.wsum, 1e-9)).squareRoot(),
                inlierFraction: Double(s.inliers) / Double(max(e.count, 1)),
                overlap: Double(e.count) / Double(n), gain: gain, offset: offset, iterations: it + 1,
                correlation: e.correlation, slope: rawSlope)
            // Converged when no corner moves more than `tolerance` pixels.
            if Self.cornerShift(update, width: tl.width, height: tl.height) < tolerance { break }
        }
        return outcome
    }

    /// The robust scale of the residuals (the frame mapped back to the reference's exposure): the
    /// median of about 1024 of them, evenly spread over the points, is as good a scale (to a few
    /// percent) as all of them and saves most of the selection's time. Capped: when most points
    /// disagree (a wrong start locked onto a moving object), a scale grown from the same
    /// residuals would call everything an inlier.
    static func robustScale(
        _ tl: TemplateLevel, _ smp: UnsafeMutablePointer<Float>, offset off: Float, inverseGain ig: Float,
        scratch absr: inout [Float]
    ) -> Float {
        let n = tl.count, step = max(1, n / 1024)
        absr.removeAll(keepingCapacity: true)
        tl.t.withUnsafeBufferPointer { t in
            var i = 0
            while i < n {
                if !smp[i].isNaN { absr.append(abs((smp[i] - off) * ig - t[i])) }
                i &+= step
            }
        }
        return min(4, max(0.5, 1.4826 * (absr.isEmpty ? 0 : Selection.kthOfMagnitudes(&absr, absr.count / 2))))
    }

    /// The warp of the parameter step `dp` (normalised coordinates): a translation, an affine map
    /// or a homography for 2, 6 or 8 parameters.
    static func parameterUpdate(_ dp: [Double], parameters np: Int) -> Homography {
        np == 2
            ? .translation(dp[0], dp[1])
            : np == 6
                ? .affine(1 + dp[0], dp[1], dp[2], dp[3], 1 + dp[4], dp[5])
                : Homography([1 + dp[0], dp[1], dp[2], dp[3], 1 + dp[4], dp[5], dp[6], dp[7], 1])
    }

    /// How far `update` moves the corners of a `width` x `height` level, at most (pixels).
    static func cornerShift(_ update: Homography, width: Int, height: Int) -> Double {
        var moved = 0.0
        for (cx, cy) in [
            (0.0, 0.0), (Double(width - 1), 0.0), (0.0, Double(height - 1)), (Double(width - 1), Double(height - 1))
        ] {
            guard let p = update.apply(cx, cy) else { return .infinity }
            moved = max(moved, abs(p.x - cx), abs(p.y - cy))
        }
        return moved
    }
}

/// The weighted sums of an exposure fit (frame = gain x reference + offset) over the points
/// that have a sample, with the previous iteration's weights.
struct Exposure {
    var sw = 0.0, st = 0.0, si = 0.0, stt = 0.0, sti = 0.0, sii = 0.0
    /// Points with a sample.
    var count = 0

    /// The weighted (robust) correlation of frame and reference, reported for information.
    var correlation: Double {
        sw > 0 ? (sti - st * si / sw) / max(1e-9, ((stt - st * st / sw) * (sii - si * si / sw)).squareRoot()) : 0
    }

    /// Gain and offset by weighted least squares (frame ~ gain * reference + offset); kept as they
    /// were when the reference is flat, and the gain reset to 1 (only the offset fitted) when it
    /// falls outside 0.5...2. Returns the fitted slope before that reset.
    func fit(gain: inout Double, offset: inout Double) -> Double {
        let vt = stt - st * st / sw
        if vt > 1e-9 {
            gain = (sti - st * si / sw) / vt
            offset = (si - gain * st) / sw
        }
        let slope = gain
        if !(gain > 0.5 && gain < 2) {
            gain = 1
            offset = (si - st) / sw
        }
        return slope
    }

    init(_ smp: UnsafePointer<Float>, _ wts: UnsafePointer<Float>, _ t: UnsafePointer<Float>, _ padded: Int) {
        // 4 points a step in Float, added to the Double totals every 1024 points.
        var i = 0
        while i < padded {
            let end = min(padded, i &+ 1024)
            var a = SIMD4<Float>(), b = a, c = a, d = a, e = a, f = a
            var valid = SIMD4<Int32>()
            while i < end {
                let v = UnsafeRawPointer(smp + i).loadUnaligned(as: SIMD4<Float>.self)
                let ok = v .== v
                let wt = UnsafeRawPointer(wts + i).loadUnaligned(as: SIMD4<Float>.self).replacing(with: 0, where: .!ok)
                let x = v.replacing(with: 0, where: .!ok),
                    tt = UnsafeRawPointer(t + i).loadUnaligned(as: SIMD4<Float>.self)
                let wtt = wt * tt, wx = wt * x
                a += wt
                b += wtt
                c += wx
                d += wtt * tt
                e += wtt * x
                f += wx * x
                valid &-= unsafeBitCast(ok, to: SIMD4<Int32>.self)  // a true lane is -1
                i &+= 4
            }
            sw += Double(a.sum())
            st += Double(b.sum())
            si += Double(c.sum())
            stt += Double(d.sum())
            sti += Double(e.sum())
            sii += Double(f.sum())
            count &+= Int(valid.wrappedSum())
        }
    }
}

/// The robust normal equations of one Gauss-Newton step, summed 8 points a step in Float over
/// the template's steepest-descent rows and added to Double totals every 256 points (CKernels):
/// the gradient `b` over every point, the matrix over the template's Hessian subset (see
/// ``TemplateLevel/hessianCount``).
struct NormalEquations {
    /// The upper triangle of the matrix over the Hessian subset, row by row (36 values for 8
    /// parameters).
    var a = [Double](repeating: 0, count: 36)
    /// The gradient, one value per parameter.
    var b = [Double](repeating: 0, count: 8)
    /// Sums of w r^2 and w over every point, and of w over the Hessian subset.
    var wr2 = 0.0, wsum = 0.0, wsumHessian = 0.0
    /// Points whose residual is within their agreement threshold.
    var inliers = 0

    /// The full `np x np` matrix, scaled.
    func matrix(_ np: Int, scaledBy k: Double) -> [Double] {
        var m = [Double](repeating: 0, count: np * np)
        var idx = 0
        for q in 0..<np {
            for u in q..<np {
                m[q * np + u] = a[idx] * k
                m[u * np + q] = a[idx] * k
                idx += 1
            }
        }
        return m
    }

    mutating func add(_ o: NormalEquations) {
        for i in a.indices { a[i] += o.a[i] }
        for i in b.indices { b[i] += o.b[i] }
        wr2 += o.wr2
        wsum += o.wsum
        wsumHessian += o.wsumHessian
        inliers += o.inliers
    }

    /// Residuals `(smp - offset) * inverseGain - t`, Tukey weights with squared scale `c2`
    /// (written to `wts`, 0 where a point has no sample), and the sums, for `np` parameters (2,
    /// 6 or 8), by CKernels' evn_normal_sums_add (eight points a step; AVX2 where the CPU has
    /// it, the same sums without). Large levels are split between the threads, in pieces of
    /// 8192 points whatever the cores and whichever thread runs them, summed in order: the same
    /// sums every run.
    static func sum(
        _ tl: TemplateLevel, _ smp: UnsafePointer<Float>, _ wts: UnsafeMutablePointer<Float>, parameters np: Int,
        offset: Float, inverseGain: Float, c2: Float
    ) -> NormalEquations {
        let piece = 8192, pieces = max(1, (tl.padded + piece - 1) / piece)
        let parts = LockedBox([NormalEquations](repeating: NormalEquations(), count: pieces))
        tl.t.withUnsafeBufferPointer { t in
            tl.agreement.withUnsafeBufferPointer { agr in
                tl.jacobian.withUnsafeBufferPointer { jac in
                    let points = UncheckedSendable(
                        evn_normal_points(
                            t: t.baseAddress, agreement: agr.baseAddress, jacobian: jac.baseAddress,
                            samples: smp, weights: wts, padded: tl.padded, offset: offset,
                            inverse_gain: inverseGain, inv_c2: 1 / c2))
                    StripExecutor.forEachStrip(rows: pieces, minimumRows: 1) { strip in
                        var points = points.value
                        for p in strip {
                            let start = p * piece, end = min(tl.padded, (p + 1) * piece)
                            let split = min(max(start, tl.hessianCount), end)
                            var part = evn_normal_sums()
                            evn_normal_sums_add(&points, start, split, Int32(np), 1, &part)
                            evn_normal_sums_add(&points, split, end, Int32(np), 0, &part)
                            parts.update { $0[p] = NormalEquations(part) }
                        }
                    }
                }
            }
        }
        var total = NormalEquations()
        for part in parts.value { total.add(part) }
        return total
    }
}

extension NormalEquations {
    /// The sums CKernels made.
    init(_ s: evn_normal_sums) {
        self.init()
        withUnsafeBytes(of: s.a) { a = Array($0.bindMemory(to: Double.self)) }
        withUnsafeBytes(of: s.b) { b = Array($0.bindMemory(to: Double.self)) }
        wr2 = s.wr2
        wsum = s.wsum
        wsumHessian = s.wsum_hessian
        inliers = Int(s.inliers)
    }
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
    for i in 0..<n {
        var s = b[i]
        for k in 0..<i { s -= l[i * n + k] * y[k] }
        y[i] = s / l[i * n + i]
    }
    var x = [Double](repeating: 0, count: n)
    for i in stride(from: n - 1, through: 0, by: -1) {
        var s = y[i]
        for k in (i + 1)..<n { s -= l[k * n + i] * x[k] }
        x[i] = s / l[i * n + i]
    }
    return x
}
