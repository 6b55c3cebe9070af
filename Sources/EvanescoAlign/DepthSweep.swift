import CKernels
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
    /// Frames whose pixels score a depth, spread over the burst (all of them when fewer; at most
    /// 16, as the scores' kernel reads no more, and so `polishFrames`).
    static let sweepFrames = 8
    /// A frame's grey level counts at most this far from the frames' median (a frame where
    /// something else passes counts little).
    static let sweepCap: Float = 24
    /// Points of a cell that the closer look at a cell most frames could not measure scores, a
    /// side: a 4 x 4 grid, two pixels apart in a cell of 8. The sweep's 5 points in 8 frames find
    /// the depth, but only to about a fifth of a pixel at 12 px of parallax, and its score is
    /// too noisy to trust over the neighbours' guess (started from the sweep's best instead of the
    /// better of the two, one burst of the family lost 0.9 dB). A 3 x 3 grid: one burst -0.08 dB.
    static let polishPoints = 4
    /// Frames that the closer look scores: those that moved furthest (the depth shifts them
    /// most). Measured on the 30 parallax bursts against every frame: the gap's median the same
    /// (0.585 dB), at most 0.017 dB lost on a burst, at a fraction of the time; 8 frames spread
    /// over the burst instead: the median 0.600, one burst -0.14 dB; 12 spread: 0.587.
    static let polishFrames = 8
    /// The closer look's depths: the better start and one step of `polishStep` of the sweep's
    /// step each side; the best of them, at the start placed on a parabola through its
    /// neighbours. Measured on the 30 parallax bursts (every frame scored): such cells' median
    /// field error 0.14-0.19 -> 0.06-0.07 px on motorcycle-12-3 and -4; the gap's median 0.670 ->
    /// 0.585 dB. Steps of a quarter (two each side): 0.593, of an eighth: 0.602; leaving out the
    /// sweep's halvings before it: 0.608. Two steps each side (with `polishFrames`): the same
    /// median, but motorcycle-8-5 lost 0.045 dB; in twice the grain of the known-answer test a
    /// start more than a step off then comes within 0.07 px, and with one stays 0.24 px off.
    static let polishStep: Float = 0.5

    /// Where most frames could not measure a cell (something covered the reference there, or
    /// the reference has no texture there), its depth came from its neighbours, and every frame
    /// agrees with that guess because every frame made it; where they measured it but disagree
    /// (`sweepMisfit`), the fitted depth is a compromise. The frames' own pixels can tell: at the
    /// right depth, the frames that saw the background there show the same thing. For each such
    /// cell, depths across the range of the well-measured cells are tried (`sweepSteps`, then
    /// `sweepRefinements` halvings of the step around the best). A depth's score is how far the
    /// grey levels of up to `sweepFrames` frames, sampled at 5 points of the cell where the
    /// model puts them in each frame, lie from their median (capped at `sweepCap`). A cell the
    /// frames measured but disagree on takes the best depth only when it scores below three
    /// quarters of the depths' typical score and half a grey level under it. A cell most frames
    /// could not measure then takes a closer look (`polishPoints`, `polishFrames`, `polishStep`):
    /// the grey levels of the frames that moved most, at a grid of points across the cell, judge
    /// the guess against the sweep's best, and depths around the better one, to a few hundredths
    /// of a pixel. A cell with no texture behind scores alike at every depth and keeps its guess.
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
        let plan = SweepPlan(model: model, frames: frames.map { $0! }, lo: lo, hi: hi)
        let found = LockedBox([(cell: Int, rho: Float)]())
        StripExecutor.forEachStrip(rows: cells.count, minimumRows: 64) { range in
            var scratch = SweepScratch(plan)
            let local = cells[range].compactMap { c in plan.depth(ofCell: c, &scratch).map { (cell: c, rho: $0) } }
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

    /// What every cell's sweep shares: the model, the frames' samplers, the depths tried, the
    /// points and the frames that score a depth.
    struct SweepPlan {
        let model: Model
        let frames: [Sampler]
        /// The sweep's depths, `step` apart across the range of the well-measured cells.
        let steps: [Float], step: Float
        /// The cell's centre and four points a third of a cell from it diagonally (the 3 x 3 grid
        /// of points took 40 % longer for the same result on the family), and the closer look's
        /// `polishPoints`^2 grid.
        let offsets: [SIMD2<Float>], polishOffsets: [SIMD2<Float>]
        /// The sweep's frames, spread over the burst, and the closer look's: those that moved most.
        let sweepScored: [Int], polishScored: [Int]

        init(model: Model, frames: [Sampler], lo: Float, hi: Float) {
            let K = model.members.count, cell = Float(model.cell), side = polishPoints
            step = (hi - lo) / Float(sweepSteps - 1)
            steps = (0..<sweepSteps).map { [step] in lo + Float($0) * step }
            offsets = [SIMD2(0, 0), SIMD2(-1, -1), SIMD2(1, -1), SIMD2(-1, 1), SIMD2(1, 1)].map { $0 * cell / 3 }
            polishOffsets = (0..<(side * side)).map { (q: Int) -> SIMD2<Float> in
                (SIMD2(Float(q % side), Float(q / side)) - Float(side - 1) / 2) * (cell / Float(side))
            }
            sweepScored = (0..<min(K, sweepFrames)).map { $0 * K / min(K, sweepFrames) }
            let motion = model.affine.map { a in
                let t = ParallaxConsistency.motion(a)
                return (t * t).sum()
            }
            polishScored = Array((0..<K).sorted { motion[$0] > motion[$1] }.prefix(polishFrames)).sorted()
            (self.model, self.frames) = (model, frames)
        }
    }

    /// One strip's scratch: what a cell's scores are taken in.
    struct SweepScratch {
        var positions: [SIMD2<Float>], samples: [Float], depthScores: [Float]
        /// The last ``SweepPlan/scores(_:_:polish:_:)``: per depth its score, nil when too few
        /// points were seen.
        var results: [Float?]

        init(_ plan: SweepPlan) {
            let most = 1 + sweepSteps, points = max(plan.offsets.count, plan.polishOffsets.count)
            let framesScored = max(plan.sweepScored.count, plan.polishScored.count)
            positions = [SIMD2<Float>](repeating: .zero, count: most * points)
            samples = [Float](repeating: 0, count: framesScored * most * points)
            depthScores = [Float](repeating: 0, count: most)
            results = [Float?](repeating: nil, count: most)
        }
    }
}

// The plan's methods read it in place and write only the scratch: a method that mutated a value
// holding both would copy the model (a retain and release of each of its arrays) on every call.
extension ParallaxConsistency.SweepPlan {
    typealias Scratch = ParallaxConsistency.SweepScratch

    /// The depth cell `c` takes, or nil where it keeps the model's.
    func depth(ofCell c: Int, _ scratch: inout Scratch) -> Float? {
        let K = model.members.count, rho = model.rho[c]
        scores(c, [rho] + steps, &scratch)
        guard let current = scratch.results[0] else { return nil }
        // A cell most frames measured (swept for their disagreement) takes the best depth,
        // the fitted one included, when it scores clearly below the depths' typical score:
        // then every frame takes it, those that measured something else too.
        var typical: Float? = nil
        if 2 * model.measuredBy[c] > K {
            var tried = (1...ParallaxConsistency.sweepSteps).compactMap { scratch.results[$0] }
            guard tried.count >= ParallaxConsistency.sweepSteps / 2 else { return nil }
            typical = Selection.median(&tried)
        }
        var best = (rho: rho, score: current)
        for i in 0..<ParallaxConsistency.sweepSteps {
            if let s = scratch.results[1 + i], s < best.score { best = (steps[i], s) }
        }
        var fine = step / 2
        for _ in 0..<ParallaxConsistency.sweepRefinements {
            let pair = [best.rho - fine, best.rho + fine]
            scores(c, pair, &scratch)
            for i in 0..<2 {
                if let s = scratch.results[i], s < best.score { best = (pair[i], s) }
            }
            fine /= 2
        }
        if let typical {
            return best.score < 0.75 * typical && typical - best.score > 0.5 ? best.rho : nil
        }
        guard let polished = polish(c, best.rho, &scratch), polished != rho else { return nil }
        return polished
    }

    /// For each depth of `rhos`: the mean capped distance of the scored frames' grey levels from
    /// their median, over the points (offsets from the cell's centre) that at least 3 frames see
    /// (nil when fewer than 4 points are seen so), into the scratch's results. Each frame samples
    /// every depth's points in one call.
    func scores(_ c: Int, _ rhos: [Float], polish: Bool = false, _ scratch: inout Scratch) {
        let offsets = polish ? polishOffsets : self.offsets, scored = polish ? polishScored : sweepScored
        let R = rhos.count, P = offsets.count, S = scored.count, cell = Float(model.cell)
        let centre = SIMD2(
            (Float(c % model.columns) + 0.5) * cell - 0.5, (Float(c / model.columns) + 0.5) * cell - 0.5)
        scratch.positions.withUnsafeMutableBufferPointer { pos in
            scratch.samples.withUnsafeMutableBufferPointer { out in
                for (j, k) in scored.enumerated() {
                    for (r, rho) in rhos.enumerated() {
                        let d = model.displacement(k, c, rho: rho)
                        for i in 0..<P { pos[r * P + i] = centre + offsets[i] + d }
                    }
                    frames[k](
                        UnsafeBufferPointer(rebasing: pos[0..<(R * P)]),
                        UnsafeMutableBufferPointer(rebasing: out[(j * R * P)..<((j + 1) * R * P)]))
                }
            }
        }
        // CKernels: per point the frames' levels sorted, their median and capped mean
        // distance from it; per depth the mean over the points (NaN: too few seen).
        evn_sweep_scores(scratch.samples, S, R, P, ParallaxConsistency.sweepCap, &scratch.depthScores)
        for r in 0..<R { scratch.results[r] = scratch.depthScores[r].isNaN ? nil : scratch.depthScores[r] }
    }

    /// A cell most frames could not measure: the depth where the frames that moved most agree
    /// best at `polishPoints`^2 points, near the neighbours' guess or the sweep's best, whichever
    /// they agree on better (nil when too few points are seen).
    func polish(_ c: Int, _ found: Float, _ scratch: inout Scratch) -> Float? {
        var start = model.rho[c]
        if found != start {
            scores(c, [start, found], polish: true, &scratch)
            guard let a = scratch.results[0], let b = scratch.results[1] else { return nil }
            if b < a { start = found }
        }
        let d = step * ParallaxConsistency.polishStep
        scores(c, [start - d, start, start + d], polish: true, &scratch)
        guard let below = scratch.results[0], let at = scratch.results[1], let above = scratch.results[2] else {
            return nil
        }
        // The start unless a depth scores strictly better (a flat cell scores alike at all);
        // at the start, the parabola's minimum (within half a step).
        if below < at && below <= above { return start - d }
        if above < at { return start + d }
        let curvature = below - 2 * at + above
        return curvature > 0 ? start + 0.5 * (below - above) / curvature * d : start
    }
}
