import Testing
import CKernels
import EvanescoCore
@testable import EvanescoAlign

/// Why an AVX2 test did not run.
let avx2Absent: Comment =
    "SKIPPED: this CPU has no AVX2 (or EVANESCO_PORTABLE_KERNELS is set); only the portable path was tested"

/// The C kernel of local alignment's Lucas-Kanade step against the sums written out in Double,
/// and its AVX2 variant against its portable one (the same operations in the same order: equal
/// bit for bit, so a burst stacks to the same bytes on every x86-64 CPU).
@Suite struct LucasKanadeKernel {
    struct Planes {
        let w: Int, h: Int
        var ref: [Float], gx: [Float], gy: [Float], frame: [Float], valid: [UInt8]
        init(w: Int, h: Int, seed: UInt64, invalidFraction: Double) {
            self.w = w
            self.h = h
            var rng = SplitMix(seed: seed)
            ref = (0..<(w * h)).map { _ in Float(rng.unit() * 255) }
            gx = (0..<(w * h)).map { _ in Float(rng.unit() * 40 - 20) }
            gy = (0..<(w * h)).map { _ in Float(rng.unit() * 40 - 20) }
            // The frame near the reference (small residuals, inside Huber's and Tukey's ranges) with
            // some outliers (beyond both: they weigh less or nothing).
            frame = ref.map { v in rng.unit() < 0.1 ? Float(rng.unit() * 255) : v + Float(rng.unit() * 10 - 5) }
            valid = (0..<(w * h)).map { _ in rng.unit() < invalidFraction ? 0 : UInt8(1 + rng.next() % 255) }
        }
    }

    /// The sums written out pixel by pixel in Double.
    static func expected(
        _ p: Planes, x0: Int, x1: Int, y0: Int, y1: Int, rowStep: Int, ox: Int, oy: Int,
        t: (Float, Float), bias: Float, tukey: Bool, masked: Bool
    ) -> [Double] {
        var s = [Double](repeating: 0, count: 11)
        let (tx, ty) = (Double(t.0), Double(t.1))
        let huber = 8.0, c = 12.0
        for y in stride(from: y0, to: y1, by: rowStep) {
            for x in x0..<x1 {
                let j = (y + oy) * p.w + x + ox, i = y * p.w + x
                if masked
                    && (p.valid[j] == 0 || p.valid[j + 1] == 0 || p.valid[j + p.w] == 0 || p.valid[j + p.w + 1] == 0)
                {
                    continue
                }
                let f =
                    (1 - tx) * (1 - ty) * Double(p.frame[j]) + tx * (1 - ty) * Double(p.frame[j + 1])
                    + (1 - tx) * ty * Double(p.frame[j + p.w]) + tx * ty * Double(p.frame[j + p.w + 1])
                let e = f - Double(p.ref[i]) - Double(bias), gx = Double(p.gx[i]), gy = Double(p.gy[i])
                let wt: Double
                if tukey {
                    let u = e / c
                    wt = abs(u) < 1 ? (1 - u * u) * (1 - u * u) : 0
                } else {
                    wt = abs(e) <= huber ? 1 : huber / abs(e)
                }
                let terms = [
                    wt * gx * gx, wt * gx * gy, wt * gx, wt * gy * gy, wt * gy, wt, wt * gx * e, wt * gy * e, wt * e,
                    min(abs(e), 50) * min(abs(e), 50), 1
                ]
                for k in 0..<11 { s[k] += terms[k] }
            }
        }
        return s
    }

    static func run(
        _ p: Planes, x0: Int, x1: Int, y0: Int, y1: Int, rowStep: Int, ox: Int, oy: Int,
        t: (Float, Float), bias: Float, tukey: Bool, masked: Bool, residual: Bool,
        _ kernel: (UnsafePointer<evn_lk_window>, UnsafeMutablePointer<evn_lk_sums>) -> Void
    ) -> evn_lk_sums {
        p.ref.withUnsafeBufferPointer { r in
            p.gx.withUnsafeBufferPointer { gx in
                p.gy.withUnsafeBufferPointer { gy in
                    p.frame.withUnsafeBufferPointer { f in
                        p.valid.withUnsafeBufferPointer { v in
                            var win = evn_lk_window(
                                ref: r.baseAddress, gx: gx.baseAddress, gy: gy.baseAddress, frame: f.baseAddress,
                                stride: p.w, frame_offset: oy * p.w + ox, valid: masked ? v.baseAddress : nil,
                                x0: x0, x1: x1, y0: y0, y1: y1, row_step: rowStep,
                                w00: (1 - t.0) * (1 - t.1), w01: t.0 * (1 - t.1), w10: (1 - t.0) * t.1, w11: t.0 * t.1,
                                bias: bias, tukey: tukey ? 1 : 0, huber: 8, inverse_tukey_c: 1 / 12,
                                residual: residual ? 1 : 0)
                            var out = evn_lk_sums()
                            kernel(&win, &out)
                            return out
                        }
                    }
                }
            }
        }
    }

    static func values(_ s: evn_lk_sums) -> [Float] {
        [s.a00, s.a01, s.a02, s.a11, s.a12, s.a22, s.b0, s.b1, s.b2, s.squared_residual]
    }

    @Test(
        """
        Sums match Double arithmetic, with and without validity, for every weight kind, window width (tails of 0-7) \
        and row step
        """,
        arguments: [(9, 1), (17, 2), (25, 2), (30, 3), (33, 2), (40, 1)])
    func matchesDouble(width: Int, rowStep: Int) {
        let p = Planes(w: 80, h: 60, seed: UInt64(width * 31 + rowStep), invalidFraction: 0.05)
        for (tukey, masked, residual) in [
            (false, false, true), (true, false, true), (true, false, false), (false, true, true), (true, true, false)
        ] {
            let (x0, y0, ox, oy) = (5, 7, 3, -2), t: (Float, Float) = (0.3, 0.85), bias: Float = 1.5
            let got = Self.run(
                p, x0: x0, x1: x0 + width, y0: y0, y1: y0 + 21, rowStep: rowStep, ox: ox, oy: oy, t: t, bias: bias,
                tukey: tukey, masked: masked, residual: residual
            ) { evn_lk_sums_window_portable($0, $1) }
            let want = Self.expected(
                p, x0: x0, x1: x0 + width, y0: y0, y1: y0 + 21, rowStep: rowStep, ox: ox, oy: oy, t: t, bias: bias,
                tukey: tukey, masked: masked)
            let g = Self.values(got)
            // Scale of each sum: the same terms in absolute value would bound its rounding.
            for k in 0..<9 {
                #expect(
                    abs(Double(g[k]) - want[k]) <= 2e-4 * max(1, abs(want[k])) + 1e-2,
                    "sum \(k) tukey \(tukey) masked \(masked): \(g[k]) vs \(want[k])")
            }
            if residual {
                #expect(abs(Double(g[9]) - want[9]) <= 2e-4 * want[9] + 1e-2, "residual: \(g[9]) vs \(want[9])")
            } else {
                #expect(g[9] == 0)
            }
            #expect(got.used == Int(want[10]), "used \(got.used) vs \(want[10])")
            if masked {
                #expect(got.used < (width * ((21 + rowStep - 1) / rowStep)), "the invalid pixels were left out")
            }
        }
    }

    @Test(
        "The AVX2 variant gives the portable variant's sums bit for bit (skipped where the CPU has no AVX2)",
        .enabled(if: evn_cpu_has_avx2() != 0, avx2Absent))
    func avx2EqualsPortable() throws {
        let p = Planes(w: 96, h: 64, seed: 7, invalidFraction: 0.03)
        for width in [8, 13, 25, 33, 47] {
            for (tukey, masked) in [(false, false), (true, false), (false, true), (true, true)] {
                let a = Self.run(
                    p, x0: 4, x1: 4 + width, y0: 3, y1: 40, rowStep: 2, ox: 2, oy: 5, t: (0.61, 0.07), bias: -2,
                    tukey: tukey, masked: masked, residual: true
                ) { evn_lk_sums_window_portable($0, $1) }
                let b = Self.run(
                    p, x0: 4, x1: 4 + width, y0: 3, y1: 40, rowStep: 2, ox: 2, oy: 5, t: (0.61, 0.07), bias: -2,
                    tukey: tukey, masked: masked, residual: true
                ) { evn_lk_sums_window_avx2($0, $1) }
                #expect(
                    Self.values(a).map(\.bitPattern) == Self.values(b).map(\.bitPattern) && a.used == b.used,
                    "width \(width) tukey \(tukey) masked \(masked)")
            }
        }
    }
}

/// Registration's samples of a frame at its template points, with and without the AVX2 kernel.
@Suite struct RegistrationSampleKernel {
    typealias Kernel = (UnsafePointer<evn_sample_points>?, Int, Int, UnsafeMutablePointer<Float>?) -> Void

    /// A 120x90 frame of noise and `count` template points, some mapped outside it.
    struct Case {
        let w = 120, h = 90
        let img: Image<Float>
        let xs: [Float], ys: [Float]
        let map = Homography([1.02, 0.01, -1.5, -0.02, 0.99, 2.25, 1e-4, -5e-5, 1])
        var count: Int { xs.count }

        init(count: Int, rng: inout SplitMix) {
            let (w, h) = (120, 90)
            var r = rng
            img = Image<Float>(width: w, height: h, channels: 1) { d in
                for i in 0..<(w * h) { d[i] = Float(r.unit() * 255) }
            }
            xs = (0..<count).map { _ in Float(r.unit() * 130 - 5) }
            ys = (0..<count).map { _ in Float(r.unit() * 100 - 5) }
            rng = r
        }

        /// The kernel's samples, as bit patterns.
        func run(_ kernel: Kernel) -> [UInt32] {
            let m = map.m.map { Float($0) }
            var out = [Float](repeating: -7, count: count)
            // Every pointer lives for the whole call (an array passed to the struct's initialiser
            // would be a temporary one, dangling by the time the kernel reads it).
            img.samples.withUnsafeBufferPointer { src in
                m.withUnsafeBufferPointer { mp in
                    xs.withUnsafeBufferPointer { px in
                        ys.withUnsafeBufferPointer { py in
                            var p = evn_sample_points(
                                image: src.baseAddress, width: w, max_x: Float(w - 1), max_y: Float(h - 1),
                                x: px.baseAddress, y: py.baseAddress, map: mp.baseAddress)
                            out.withUnsafeMutableBufferPointer { kernel(&p, 0, count, $0.baseAddress) }
                        }
                    }
                }
            }
            return out.map(\.bitPattern)
        }
    }

    /// Every count's tail: a multiple of eight, a few past one, one group, many.
    static let counts = [8, 13, 100, 1003]

    @Test(
        """
        Samples at mapped points (some outside, NaN): bilinear values written out in Double, and registration's own \
        call takes the same path, for every count's tail
        """
    )
    func portableIsBilinear() {
        var rng = SplitMix(seed: 11)
        for count in Self.counts {
            let c = Case(count: count, rng: &rng)
            let tl = TemplateLevel(width: c.w, height: c.h, x: c.xs, y: c.ys, t: c.xs, gx: c.xs, gy: c.ys)
            var viaRegistration = [Float](repeating: -7, count: tl.padded)
            viaRegistration.withUnsafeMutableBufferPointer {
                RegistrationReference.sample(c.img, tl, through: c.map, into: $0.baseAddress!)
            }
            #expect(Array(viaRegistration.prefix(count).map(\.bitPattern)) == c.run(evn_sample_points_run))
            let portable = c.run(evn_sample_points_portable)
            #expect(
                portable.contains(Float.nan.bitPattern) && portable.contains { !Float(bitPattern: $0).isNaN },
                "some points inside, some out")
            for (i, v) in portable.enumerated() {
                let x = Double(c.xs[i]), y = Double(c.ys[i]), mm = c.map.m
                let r = 1 / (mm[6] * x + mm[7] * y + mm[8])
                let qx = (mm[0] * x + mm[1] * y + mm[2]) * r, qy = (mm[3] * x + mm[4] * y + mm[5]) * r
                let value = Float(bitPattern: v)
                let (w, h) = (c.w, c.h)
                // A point within a thousandth of a pixel of the edge may fall either side in Float.
                guard qx > 0.001, qy > 0.001, qx < Double(w - 1) - 0.001, qy < Double(h - 1) - 0.001 else {
                    if qx < -0.001 || qy < -0.001 || qx > Double(w - 1) + 0.001 || qy > Double(h - 1) + 0.001 {
                        #expect(value.isNaN, "point \(i) is outside")
                    }
                    continue
                }
                let ix = Int(qx), iy = Int(qy), ax = qx - Double(ix), ay = qy - Double(iy)
                func at(_ x: Int, _ y: Int) -> Double { Double(c.img.samples[y * w + x]) }
                let top = at(ix, iy) + (at(ix + 1, iy) - at(ix, iy)) * ax
                let bottom = at(ix, iy + 1) + (at(ix + 1, iy + 1) - at(ix, iy + 1)) * ax
                #expect(abs(Double(value) - (top + (bottom - top) * ay)) < 0.05, "point \(i)")
            }
        }
    }

    @Test(
        """
        The AVX2 variant gives the portable variant's samples bit for bit, NaN outside included (skipped where the \
        CPU has no AVX2)
        """,
        .enabled(if: evn_cpu_has_avx2() != 0, avx2Absent))
    func avx2EqualsPortable() {
        var rng = SplitMix(seed: 11)
        for count in Self.counts {
            let c = Case(count: count, rng: &rng)
            #expect(c.run(evn_sample_points_portable) == c.run(evn_sample_points_avx2), "\(count) points")
        }
    }
}

extension SplitMix {
    /// A uniform value in [0, 1).
    mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
}

/// The C kernel of registration's normal equations against the sums written out in Double, and
/// its AVX2 variant against its portable one.
@Suite struct NormalEquationsKernel {
    /// A template level of `count` random points and samples near their values (a tenth far
    /// off, some missing).
    static func level(_ count: Int, seed: UInt64) -> (TemplateLevel, [Float]) {
        var rng = SplitMix(seed: seed)
        let w = 200, h = 150
        let xs = (0..<count).map { _ in Float(rng.unit() * 199) }, ys = (0..<count).map { _ in Float(rng.unit() * 149) }
        let t = (0..<count).map { _ in Float(rng.unit() * 255) }
        let gx = (0..<count).map { _ in Float(rng.unit() * 40 - 20) },
            gy = (0..<count).map { _ in Float(rng.unit() * 40 - 20) }
        let tl = TemplateLevel(width: w, height: h, x: xs, y: ys, t: t, gx: gx, gy: gy)
        let samples = (0..<tl.padded).map { i -> Float in
            guard i < count, rng.unit() > 0.05 else { return .nan }
            return rng.unit() < 0.1 ? Float(rng.unit() * 255) : tl.t[i] * 1.1 + 3 + Float(rng.unit() * 8 - 4)
        }
        return (tl, samples)
    }

    /// The sums written out point by point in Double: the residual of the frame mapped back to
    /// the reference's exposure, Tukey's weight, and the terms.
    static func expected(_ tl: TemplateLevel, _ smp: [Float], np: Int, offset: Float, inverseGain: Float, c2: Float)
        -> NormalEquations
    {
        var s = NormalEquations()
        for i in 0..<tl.padded where !smp[i].isNaN {
            let r = (Double(smp[i]) - Double(offset)) * Double(inverseGain) - Double(tl.t[i])
            let u2 = r * r / Double(c2), wt = u2 < 1 ? (1 - u2) * (1 - u2) : 0
            let js = (0..<np).map { Double(tl.jacobian[TemplateLevel.component($0, of: np) * tl.padded + i]) }
            s.wr2 += wt * r * r
            s.wsum += wt
            if abs(r) <= Double(tl.agreement[i]) { s.inliers += 1 }
            for q in 0..<np { s.b[q] += wt * r * js[q] }
            if i < tl.hessianCount {
                s.wsumHessian += wt
                var idx = 0
                for q in 0..<np {
                    for u in q..<np {
                        s.a[idx] += wt * js[q] * js[u]
                        idx += 1
                    }
                }
            }
        }
        return s
    }

    @Test(
        """
        Sums match Double arithmetic for 2, 6 and 8 parameters, over levels whose matrix subset is all, or part, of \
        the points and ends off a step of eight
        """,
        arguments: [(13, 2), (333, 6), (5_000, 8), (9_001, 8), (20_003, 2)])
    func matchesDouble(count: Int, np: Int) {
        let (tl, smp) = Self.level(count, seed: UInt64(count))
        var wts = [Float](repeating: -1, count: tl.padded)
        let got = smp.withUnsafeBufferPointer { s in
            wts.withUnsafeMutableBufferPointer { w in
                NormalEquations.sum(
                    tl, s.baseAddress!, w.baseAddress!, parameters: np, offset: 3, inverseGain: 1 / 1.1, c2: 36)
            }
        }
        let want = Self.expected(tl, smp, np: np, offset: 3, inverseGain: 1 / 1.1, c2: 36)
        func close(_ a: Double, _ b: Double, _ what: String) {
            #expect(abs(a - b) <= 1e-4 * max(1, abs(b)), "\(what): \(a) vs \(b) (\(count) points, \(np) parameters)")
        }
        for k in 0..<(np * (np + 1) / 2) { close(got.a[k], want.a[k], "matrix \(k)") }
        for q in 0..<np { close(got.b[q], want.b[q], "gradient \(q)") }
        close(got.wr2, want.wr2, "w r^2")
        close(got.wsum, want.wsum, "w")
        close(got.wsumHessian, want.wsumHessian, "w (matrix)")
        #expect(got.inliers == want.inliers)
        #expect(tl.hessianCount < tl.padded || count < 4096, "the larger levels sum the matrix over a subset")
        // Weights: Tukey's where a point has a sample, 0 where it has none.
        for i in 0..<tl.padded where smp[i].isNaN { #expect(wts[i] == 0) }
        #expect(wts.contains { $0 > 0.9 } && wts.contains { $0 == 0 } && !wts.contains(-1))
    }

    @Test(
        "The AVX2 variant gives the portable variant's sums bit for bit (skipped where the CPU has no AVX2)",
        .enabled(if: evn_cpu_has_avx2() != 0, avx2Absent))
    func avx2EqualsPortable() {
        for (count, np) in [(999, 8), (4_097, 6), (12_345, 8), (70, 2)] {
            let (tl, smp) = Self.level(count, seed: 99)
            func run(
                _ f: (UnsafePointer<evn_normal_points>, Int, Int, Int32, Int32, UnsafeMutablePointer<evn_normal_sums>)
                    -> Void
            ) -> [UInt64] {
                var wts = [Float](repeating: 0, count: tl.padded), sums = evn_normal_sums()
                tl.t.withUnsafeBufferPointer { t in
                    tl.agreement.withUnsafeBufferPointer { a in
                        tl.jacobian.withUnsafeBufferPointer { j in
                            smp.withUnsafeBufferPointer { s in
                                wts.withUnsafeMutableBufferPointer { w in
                                    var p = evn_normal_points(
                                        t: t.baseAddress, agreement: a.baseAddress, jacobian: j.baseAddress,
                                        samples: s.baseAddress,
                                        weights: w.baseAddress, padded: tl.padded, offset: 2, inverse_gain: 0.9,
                                        inv_c2: 1 / 49.0)
                                    f(&p, 0, tl.hessianCount, Int32(np), 1, &sums)
                                    f(&p, tl.hessianCount, tl.padded, Int32(np), 0, &sums)
                                }
                            }
                        }
                    }
                }
                let s = NormalEquations(sums)
                return (s.a + s.b + [s.wr2, s.wsum, s.wsumHessian, Double(s.inliers)]).map(\.bitPattern)
                    + wts.map { UInt64($0.bitPattern) }
            }
            #expect(
                run { evn_normal_sums_portable($0, $1, $2, $3, $4, $5) }
                    == run { evn_normal_sums_avx2($0, $1, $2, $3, $4, $5) }, "\(count) points, \(np) parameters")
        }
    }
}
