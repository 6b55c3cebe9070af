import CKernels
import EvanescoCore
import Testing

@testable import EvanescoAlign

/// The depth fit's kernels (parallax_fit.c) against the arithmetic written out here, and their
/// AVX2 variants against the portable ones, bit for bit.
@Suite struct ParallaxKernel {
    /// A burst's cells: centres over [-1, 1] x [-0.7, 0.7], depths, and per frame a field, weights
    /// and the basis coefficients (16 floats: x's eight, then y's).
    struct Cells {
        let K: Int, C: Int
        var x: [Float], y: [Float], rho: [Float], dx: [Float], dy: [Float], weight: [Float]
        var coefficients: [Float]
        var metric: [Float]

        init(frames K: Int, cells C: Int, seed: UInt64, noise: Float) {
            self.K = K
            self.C = C
            var rng = SplitMix(seed: seed)
            func uniform(_ a: Float, _ b: Float) -> Float { a + (b - a) * Float(rng.unit()) }
            x = (0..<C).map { _ in uniform(-1, 1) }
            y = (0..<C).map { _ in uniform(-0.7, 0.7) }
            rho = (0..<C).map { _ in uniform(0.2, 2) }
            coefficients = (0..<(16 * K)).map { i in
                let lane = i % 8
                return lane == 7 ? 0 : lane == 0 ? uniform(-6, 6) : uniform(-0.5, 0.5)
            }
            weight = (0..<(K * C)).map { _ in uniform(0.05, 1) }
            metric = (0..<C).flatMap { _ -> [Float] in
                let a = uniform(0.1, 1.9), b = uniform(-0.3, 0.3)
                return [a, b, 2 - a, 0]
            }
            dx = [Float](repeating: 0, count: K * C)
            dy = dx
            for k in 0..<K {
                for c in 0..<C {
                    let m = Self.model(coefficients, k, rho[c], x[c], y[c])
                    dx[k * C + c] = Float(m.x) + uniform(-noise, noise)
                    dy[k * C + c] = Float(m.y) + uniform(-noise, noise)
                }
            }
        }

        /// The model's displacement in Double: sum of coefficient times basis term.
        static func model(_ q: [Float], _ k: Int, _ r: Float, _ x: Float, _ y: Float) -> (x: Double, y: Double) {
            let v = [Double(r), 1, Double(x), Double(y), Double(x * x), Double(x * y), Double(y * y)]
            var mx = 0.0, my = 0.0
            for i in 0..<7 {
                mx += Double(q[16 * k + i]) * v[i]
                my += Double(q[16 * k + 8 + i]) * v[i]
            }
            return (mx, my)
        }

        /// Calls `body` with the kernels' view of these cells (rho and weight writable).
        mutating func withKernelCells<R>(
            metric useMetric: Bool, scale: Float, _ body: (inout evn_parallax_cells) -> R
        ) -> R {
            let (K, C) = (self.K, self.C)
            return dx.withUnsafeBufferPointer { DX in
                dy.withUnsafeBufferPointer { DY in
                    weight.withUnsafeMutableBufferPointer { W in
                        rho.withUnsafeMutableBufferPointer { R in
                            x.withUnsafeBufferPointer { X in
                                y.withUnsafeBufferPointer { Y in
                                    metric.withUnsafeBufferPointer { M in
                                        coefficients.withUnsafeBufferPointer { Q in
                                            var p = evn_parallax_cells(
                                                dx: DX.baseAddress, dy: DY.baseAddress, weight: W.baseAddress,
                                                rho: R.baseAddress, x: X.baseAddress, y: Y.baseAddress,
                                                metric: useMetric ? M.baseAddress : nil, coefficients: Q.baseAddress,
                                                frames: K, cells: C, inverse_scale: 1 / scale)
                                            return body(&p)
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

    static var variants: [String] { evn_cpu_has_avx2() != 0 ? ["portable", "avx2"] : ["portable"] }

    @Test(
        """
        A frame's normal equations: the weighted sums of the basis' products written out in double, to a \
        ten-millionth of the largest; both halves of the matrix; cells past a step of eight and a block of 256 \
        counted once
        """
    )
    func normalEquations() {
        for C in [5, 8, 261, 1003] {
            var cells = Cells(frames: 3, cells: C, seed: UInt64(C), noise: 0.3)
            let k = 1
            var want = [Double](repeating: 0, count: 49 + 14)
            for c in 0..<C {
                let (x, y) = (cells.x[c], cells.y[c])
                let v = [cells.rho[c], 1, x, y, x * x, x * y, y * y].map(Double.init)
                let w = Double(cells.weight[k * C + c])
                for i in 0..<7 {
                    for j in 0..<7 { want[i * 7 + j] += w * v[i] * v[j] }
                    want[49 + i] += w * v[i] * Double(cells.dx[k * C + c])
                    want[56 + i] += w * v[i] * Double(cells.dy[k * C + c])
                }
            }
            let largest = want.map(abs).max()!
            var results: [[Double]] = []
            for name in Self.variants {
                var normal = [Double](repeating: .nan, count: 49), rhs = [Double](repeating: .nan, count: 14)
                cells.withKernelCells(metric: false, scale: 1) { p in
                    var f = evn_parallax_frame(
                        dx: p.dx + k * C, dy: p.dy + k * C, weight: p.weight + k * C, rho: p.rho, x: p.x, y: p.y,
                        cells: C)
                    if name == "avx2" {
                        evn_parallax_normal_avx2(&f, &normal, &rhs)
                    } else {
                        evn_parallax_normal_portable(&f, &normal, &rhs)
                    }
                }
                let got = normal + rhs
                let worst = zip(got, want).map { abs($0 - $1) }.max()!
                #expect(worst <= 1e-7 * largest, "\(name), \(C) cells: off by \(worst) (largest sum \(largest))")
                var symmetric = true
                for i in 0..<7 { for j in 0..<7 where normal[i * 7 + j] != normal[j * 7 + i] { symmetric = false } }
                #expect(symmetric, "\(name): the matrix's halves differ")
                results.append(got)
            }
            if results.count == 2 {
                #expect(results[0].map(\.bitPattern) == results[1].map(\.bitPattern), "\(C) cells: variants differ")
            }
        }
    }

    @Test(
        """
        The depth step: fields the model made give each cell its depth back and every measurement full weight; a \
        measurement moved off the model by r weighs 1 / (1 + (r / scale)^2); with a metric as without; the variants \
        agree bit for bit
        """
    )
    func depthStep() {
        let scale: Float = 0.3
        for useMetric in [false, true] {
            var outputs: [[Float]] = []
            for name in Self.variants {
                var cells = Cells(frames: 9, cells: 203, seed: 7, noise: 0)
                let truth = cells.rho
                // Frame 4's cell 10 moved by (0.3, 0.4): 0.5 px off the model.
                cells.dx[4 * cells.C + 10] += 0.3
                cells.dy[4 * cells.C + 10] += 0.4
                // Start from wrong depths and weights: the step must not depend on them (but for
                // cell 10's frame 4, which the step weighs as given: 1 / 1000 of the others).
                cells.rho = cells.rho.map { $0 + 0.37 }
                cells.weight = cells.weight.indices.map { $0 == 4 * cells.C + 10 ? 0.001 : 1 }
                cells.withKernelCells(metric: useMetric, scale: scale) { p in
                    if name == "avx2" {
                        evn_parallax_depths_avx2(&p, 0, 100)
                        evn_parallax_depths_avx2(&p, 100, p.cells)
                    } else {
                        evn_parallax_depths_portable(&p, 0, 100)
                        evn_parallax_depths_portable(&p, 100, p.cells)
                    }
                }
                let depthError = zip(cells.rho, truth).map { abs($0 - $1) }.max()!
                #expect(depthError < 2e-4, "\(name), metric \(useMetric): depths off by \(depthError)")
                let others = cells.weight.indices.filter { $0 != 4 * cells.C + 10 }.map { cells.weight[$0] }
                #expect(others.min()! > 0.9995, "\(name): a measurement on the model weighs \(others.min()!)")
                let moved = cells.weight[4 * cells.C + 10], want = 1 / (1 + (0.5 / scale) * (0.5 / scale))
                #expect(abs(moved - want) < 2e-3, "\(name): the moved measurement weighs \(moved), not \(want)")
                outputs.append(cells.rho + cells.weight)
            }
            if outputs.count == 2 {
                #expect(outputs[0].map(\.bitPattern) == outputs[1].map(\.bitPattern), "variants differ")
            }
        }
    }

    @Test(
        """
        A frame's model field: the displacement ParallaxConsistency's formula gives at every cell (to a millionth of \
        a pixel per pixel of it), by both variants bit for bit
        """
    )
    func modelField() {
        var cells = Cells(frames: 4, cells: 45, seed: 3, noise: 0)
        var fields: [[Float]] = []
        for name in Self.variants {
            var mx = [Float](repeating: .nan, count: cells.C), my = mx
            cells.withKernelCells(metric: false, scale: 1) { p in
                if name == "avx2" {
                    evn_parallax_model_avx2(&p, 2, 0, p.cells, &mx, &my)
                } else {
                    evn_parallax_model_portable(&p, 2, 0, p.cells, &mx, &my)
                }
            }
            let q = cells.coefficients
            let a = (SIMD8<Float>((0..<8).map { q[32 + $0] }), SIMD8<Float>((0..<8).map { q[40 + $0] }))
            for c in 0..<cells.C {
                let want = ParallaxConsistency.displacement(a, rho: cells.rho[c], x: cells.x[c], y: cells.y[c])
                let size = max(1, abs(want.x) + abs(want.y))
                #expect(
                    abs(mx[c] - want.x) <= 1e-6 * size && abs(my[c] - want.y) <= 1e-6 * size,
                    "\(name) cell \(c): (\(mx[c]), \(my[c])) vs \(want)")
            }
            fields.append(mx + my)
        }
        if fields.count == 2 { #expect(fields[0].map(\.bitPattern) == fields[1].map(\.bitPattern)) }
    }
    /// The sweep's score written out one point at a time (the loop the kernel replaced): each
    /// point's levels sorted by insertion, the median, the mean capped distance; the mean over
    /// the points at least 3 frames see, nil under 4 such points.
    static func scoresWrittenOut(_ values: [Float], frames S: Int, depths R: Int, points P: Int, cap: Float) -> [Float?]
    {
        (0..<R).map { r in
            var total: Float = 0, seen = 0
            for i in 0..<P {
                var b: [Float] = []
                for j in 0..<S {
                    let v = values[(j * R + r) * P + i]
                    guard !v.isNaN else { continue }
                    var at = b.count
                    b.append(v)
                    while at > 0 && b[at - 1] > v {
                        b[at] = b[at - 1]
                        at -= 1
                    }
                    b[at] = v
                }
                guard b.count >= 3 else { continue }
                let m = b[b.count / 2]
                var spread: Float = 0
                for v in b { spread += min(abs(v - m), cap) }
                total += spread / Float(b.count)
                seen += 1
            }
            return seen >= 4 ? total / Float(seen) : nil
        }
    }

    @Test(
        """
        The sweep's scores: per point the frames' levels sorted, their median and mean capped distance, per depth \
        the mean over the points at least 3 frames see, as the loop written out gives them bit for bit (frames that \
        do not see a point, points too few, 1 to 8 frames, 5 and 16 points); the variants agree
        """
    )
    func sweepScores() {
        var rng = SplitMix(seed: 11)
        for (S, P) in [(8, 5), (8, 16), (3, 5), (5, 16), (1, 5), (7, 21)] {
            let R = 9
            var values = (0..<(S * R * P)).map { _ in Float(rng.unit() * 255).rounded() / 4 }
            // Some frames miss some points; for depth 2 most points are seen by at most 2 frames.
            for idx in values.indices {
                let j = idx / (R * P), r = (idx / P) % R
                if rng.unit() < 0.15 || (r == 2 && j >= 2 && idx % P != 0) { values[idx] = .nan }
            }
            // Capped distances: one outlier per depth.
            for r in 0..<R where S > 2 { values[(2 * R + r) * P] = 1000 }
            let want = Self.scoresWrittenOut(values, frames: S, depths: R, points: P, cap: 24)
            for name in Self.variants {
                var got = [Float](repeating: -1, count: R)
                if name == "avx2" {
                    evn_sweep_scores_avx2(values, S, R, P, 24, &got)
                } else {
                    evn_sweep_scores_portable(values, S, R, P, 24, &got)
                }
                let expected = want.map { $0 ?? .nan }
                #expect(
                    zip(got, expected).allSatisfy { $0.bitPattern == $1.bitPattern || ($0.isNaN && $1.isNaN) },
                    "\(name), \(S) frames, \(P) points: \(got) vs \(expected)")
            }
            if S >= 3 { #expect(want[2] == nil && want.contains { $0 != nil }, "the test's misses: \(want)") }
        }
    }
}
