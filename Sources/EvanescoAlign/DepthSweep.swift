import EvanescoCore

extension ParallaxConsistency {
    /// A frame's grey levels at output positions, written into the values (NaN outside the
    /// frame): see ``sweep(_:model:samplers:)``.
    public typealias Sampler = @Sendable (UnsafeBufferPointer<SIMD2<Float>>, UnsafeMutableBufferPointer<Float>) -> Void

    /// What ``sweep(_:model:samplers:)`` did.
    public struct SweepSummary: Sendable, Equatable {
        /// Cells most frames could not measure, where depths were tried.
        public var sweptCells: Int
        /// Of those, cells whose depth changed: the frames agreed clearly better at another.
        public var changedCells: Int
    }

    /// Depths tried across the burst's range before refining around the best.
    static let sweepSteps = 8
    /// Halvings of the step around the best depth.
    static let sweepRefinements = 3
    /// A cell that most frames measured is swept too when their median distance from the model
    /// exceeds this (pixels): the frames measured different things there (a window across a
    /// smooth leaf and the patterned wall behind it matches the wall in some frames, the leaf in
    /// others), so the depth fitted to them is a compromise that the frames' pixels can judge.
    /// Such a cell takes the best depth (the fitted one included) only when it scores clearly
    /// below the typical score of the depths tried, and then in every frame. Measured on the 30
    /// parallax bursts (with the rest of this pass): the gap's median 0.684 -> 0.670 dB, aloe's
    /// 0.561 -> 0.530, motorcycle's 0.701 -> 0.690, no burst worse; limits of 0.08 px and 0.3 px
    /// within 0.01 dB of 0.15, sweeping every cell no better at a fifth more alignment time.
    static let sweepMisfit: Float = 0.15
    /// Frames whose pixels score a depth, spread over the burst (all of them when fewer).
    static let sweepFrames = 8
    /// A frame's grey level counts at most this far from the frames' median (a frame where
    /// something else passes counts little).
    static let sweepCap: Float = 24

    /// Where most frames could not measure a cell (something covered the reference there, or
    /// the reference has no texture there), its depth came from its neighbours, and every frame
    /// agrees with that guess because every frame made it; where they measured it but disagree
    /// (`sweepMisfit`), the fitted depth is a compromise. The frames' own pixels can tell: at the
    /// right depth, the frames that saw the background there show the same thing. For each such
    /// cell, depths across the range of the well-measured cells are tried (`sweepSteps`, then
    /// `sweepRefinements` halvings of the step around the best). A depth's score is how far the
    /// grey levels of up to `sweepFrames` frames, sampled at 5 points of the cell where the
    /// model puts them in each frame, lie from their median (capped at `sweepCap`). The cell
    /// takes the best depth only when it scores below three quarters of the guess and half a grey
    /// level under it: a cell with no texture behind scores alike at every depth and keeps its own.
    ///
    /// Measured on 30 parallax bursts made with `make_burst.py --disparity --parallax` (aloe and
    /// motorcycle, 4 to 12 px; the gap is the PSNR lost against the same burst without
    /// parallax): every burst gained (+0.06 to +2.7 dB); the gap's median 0.93 -> 0.70 dB and its
    /// worst 3.39 -> 0.97 dB; pEPs median 0.048 -> 0.015 %, worst 0.21 -> 0.06 %.
    ///
    /// - Parameters:
    ///   - fields: The consolidated fields, by frame.
    ///   - model: The model ``consolidated(_:measured:structure:)`` applied to them.
    ///   - samplers: Per frame (as `fields`), its grey levels at output positions `p + d` (the
    ///     stacker's warp: the frame's pixel at `H^-1 (p + d)`).
    /// - Returns: The fields with the changed cells' displacements, and what was done.
    public static func sweep(
        _ fields: [DisplacementField?], model: Model, samplers: [Sampler?]
    ) -> ([DisplacementField?], SweepSummary) {
        let K = model.members.count, C = model.columns * model.rows
        let frames = model.members.map { $0 < samplers.count ? samplers[$0] : nil }
        var summary = SweepSummary(sweptCells: 0, changedCells: 0)
        guard K >= 3, frames.allSatisfy({ $0 != nil }) else { return (fields, summary) }
        let cells = (0..<C).filter { 2 * model.measuredBy[$0] <= K || model.misfit[$0] > sweepMisfit }
        summary.sweptCells = cells.count
        // Candidate depths: the range of the cells most frames measured (1st to 99th percentile).
        var known = (0..<C).filter { 2 * model.measuredBy[$0] > K }.map { model.rho[$0] }
        guard !cells.isEmpty, known.count >= 16 else { return (fields, summary) }
        known.sort()
        let lo = known[known.count / 100], hi = known[known.count - 1 - known.count / 100]
        guard hi > lo else { return (fields, summary) }
        let step = (hi - lo) / Float(sweepSteps - 1)
        let cell = Float(model.cell)
        // The cell's centre and four points a third of a cell from it diagonally (the 3 x 3 grid
        // of points took 40 % longer for the same result on the family).
        let offsets: [SIMD2<Float>] = [SIMD2(0, 0), SIMD2(-1, -1), SIMD2(1, -1), SIMD2(-1, 1), SIMD2(1, 1)].map {
            $0 * cell / 3
        }
        let P = offsets.count
        let scored = (0..<min(K, sweepFrames)).map { $0 * K / min(K, sweepFrames) }, S = scored.count
        let found = LockedBox([(cell: Int, rho: Float)]())
        StripExecutor.forEachStrip(rows: cells.count, minimumRows: 64) { range in
            var local: [(cell: Int, rho: Float)] = []
            let most = 1 + sweepSteps
            var positions = [SIMD2<Float>](repeating: .zero, count: most * P)
            var samples = [Float](repeating: 0, count: S * most * P)
            var column = [Float](repeating: 0, count: S)
            var results = [Float?](repeating: nil, count: most)
            /// For each depth of `rhos`: the mean capped distance of the frames' grey levels from
            /// their median, over the points that at least 3 frames see (nil when fewer than 4
            /// points are seen so). Each frame samples every depth's points in one call.
            func scores(_ c: Int, _ rhos: [Float]) {
                let R = rhos.count
                let centre = SIMD2(
                    (Float(c % model.columns) + 0.5) * cell - 0.5, (Float(c / model.columns) + 0.5) * cell - 0.5)
                samples.withUnsafeMutableBufferPointer { out in
                    for (j, k) in scored.enumerated() {
                        for (r, rho) in rhos.enumerated() {
                            let d = model.displacement(k, c, rho: rho)
                            for i in 0..<P { positions[r * P + i] = centre + offsets[i] + d }
                        }
                        positions.withUnsafeBufferPointer {
                            frames[k]!(
                                UnsafeBufferPointer(rebasing: $0[0..<(R * P)]),
                                UnsafeMutableBufferPointer(rebasing: out[(j * R * P)..<((j + 1) * R * P)]))
                        }
                    }
                }
                samples.withUnsafeBufferPointer { values in
                    column.withUnsafeMutableBufferPointer { b in
                        for r in 0..<R {
                            var total: Float = 0, points = 0
                            for i in 0..<P {
                                // The point's values in order (insertion: at most sweepFrames of them).
                                var n = 0
                                for j in 0..<S {
                                    let v = values[(j &* R &+ r) &* P &+ i]
                                    guard !v.isNaN else { continue }
                                    var at = n
                                    while at > 0 && b[at &- 1] > v {
                                        b[at] = b[at &- 1]
                                        at &-= 1
                                    }
                                    b[at] = v
                                    n &+= 1
                                }
                                guard n >= 3 else { continue }
                                let m = b[n / 2]
                                var spread: Float = 0
                                for j in 0..<n { spread += min(abs(b[j] - m), sweepCap) }
                                total += spread / Float(n)
                                points += 1
                            }
                            results[r] = points >= 4 ? total / Float(points) : nil
                        }
                    }
                }
            }
            let steps = (0..<sweepSteps).map { lo + Float($0) * step }
            for c in cells[range] {
                scores(c, [model.rho[c]] + steps)
                guard let current = results[0] else { continue }
                // A cell most frames measured (swept for their disagreement) takes the best depth,
                // the fitted one included, when it scores clearly below the depths' typical score:
                // then every frame takes it, those that measured something else too.
                let disputed = 2 * model.measuredBy[c] > K
                var typical: Float = 0
                if disputed {
                    var tried = (1...sweepSteps).compactMap { results[$0] }
                    guard tried.count >= sweepSteps / 2 else { continue }
                    typical = Selection.median(&tried)
                } else if current <= 0.5 {
                    // Frames that already agree this well cannot agree clearly better.
                    continue
                }
                var best = (rho: model.rho[c], score: current)
                for i in 0..<sweepSteps {
                    if let s = results[1 + i], s < best.score { best = (steps[i], s) }
                }
                var fine = step / 2
                for _ in 0..<sweepRefinements {
                    let pair = [best.rho - fine, best.rho + fine]
                    scores(c, pair)
                    for i in 0..<2 {
                        if let s = results[i], s < best.score { best = (pair[i], s) }
                    }
                    fine /= 2
                }
                let against = disputed ? typical : current
                if best.score < 0.75 * against && against - best.score > 0.5 { local.append((c, best.rho)) }
            }
            found.update { $0.append(contentsOf: local) }
        }
        var out = fields
        for (k, f) in model.members.enumerated() {
            guard var field = out[f] else { continue }
            for (c, r) in found.value {
                let d = model.displacement(k, c, rho: r)
                field.dx[c] = d.x
                field.dy[c] = d.y
            }
            out[f] = field
        }
        summary.changedCells = found.value.count
        return (out, summary)
    }
}
