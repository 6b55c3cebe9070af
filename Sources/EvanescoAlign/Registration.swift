import CKernels
import EvanescoCore
import Foundation

/// The reference frame, prepared once: its pyramid and template points per level.
/// Register any number of frames against it, from several threads at once.
public final class RegistrationReference: Sendable {
    /// The smallest image side registration works on.
    public static let minimumSide = 16
    /// The reference's luma pyramid.
    public let pyramid: GreyPyramid
    /// The same pyramid prepared for local alignment (``LocalAligner``), shared by every frame.
    public let local: LocalAligner.Reference
    let templates: [TemplateLevel]
    /// The options every registration against this reference uses.
    public let options: RegistrationOptions
    /// The reference's width in pixels.
    public var width: Int { pyramid.width }
    /// The reference's height in pixels.
    public var height: Int { pyramid.height }

    /// Prepares `image` as the reference.
    ///
    /// - Parameters:
    ///   - image: The reference frame.
    ///   - options: Registration tuning.
    public convenience init<S: PixelSample>(_ image: Image<S>, options: RegistrationOptions = RegistrationOptions()) {
        self.init(pyramid: GreyPyramid(image, baseLevel: options.finestLevel), options: options)
    }

    /// The pyramid a frame needs to be registered against this reference.
    public func framePyramid<S: PixelSample>(_ frame: Image<S>) -> GreyPyramid {
        GreyPyramid(frame, minSide: 48, maxLevels: pyramid.levels.count, baseLevel: pyramid.baseLevel)
    }

    /// Prepares a reference from a pyramid already built (its template points per level).
    ///
    /// - Parameters:
    ///   - pyramid: The reference's pyramid.
    ///   - options: Registration tuning.
    public init(pyramid: GreyPyramid, options: RegistrationOptions = RegistrationOptions()) {
        self.pyramid = pyramid
        self.options = options
        local = LocalAligner.Reference(pyramid)
        templates = pyramid.levels.enumerated().map { level, img in
            // The finest level keeps the most points; coarser levels only steer.
            let most = level == options.finestLevel ? options.maxPoints : options.maxPoints / 3
            let cap = min(most, max(options.minPoints, img.width * img.height / max(1, options.pixelsPerPoint)))
            return RegistrationReference.selectPoints(img, cap: cap)
        }
    }

    /// Registers a frame: returns the homography mapping the frame's pixels to the reference's.
    /// `initial`, when given, is a starting estimate in the same convention (e.g. from features).
    @_specialize(exported:true,where S == UInt8)
    @_specialize(exported:true,where S == UInt16)
    public func register<S: PixelSample>(_ frame: Image<S>, model: MotionModel, initial: Homography? = nil) throws
        -> RegistrationResult
    {
        guard frame.width == width, frame.height == height else {
            throw RegistrationError.sizeMismatch(
                frame: "\(frame.width)x\(frame.height)", reference: "\(width)x\(height)")
        }
        return try register(pyramid: framePyramid(frame), model: model, initial: initial)
    }

    /// Registers a frame from its pyramid (see ``framePyramid(_:)``), so the pyramid can be built once
    /// and reused.
    ///
    /// - Parameters:
    ///   - fp: The frame's pyramid.
    ///   - model: The motion model to estimate.
    ///   - initial: A starting estimate (frame to reference), e.g. from features.
    ///   - finestLevel: Stop at this pyramid level instead of ``RegistrationOptions/finestLevel``
    ///     (never finer): for a caller that may refine further with something else, and otherwise
    ///     continues with ``refineToFinest(_:pyramid:)``.
    /// - Returns: The homography mapping the frame's pixels to the reference's, with its confidence.
    /// - Throws: ``RegistrationError`` when the sizes differ, the frame does not overlap, the
    ///   estimate diverges or too little texture agrees.
    public func register(
        pyramid fp: GreyPyramid, model: MotionModel, initial: Homography? = nil,
        finestLevel: Int? = nil
    ) throws -> RegistrationResult {
        guard fp.width == width, fp.height == height else {
            throw RegistrationError.sizeMismatch(frame: "\(fp.width)x\(fp.height)", reference: "\(width)x\(height)")
        }
        guard min(width, height) >= Self.minimumSide, !pyramid.levels.isEmpty, !fp.levels.isEmpty else {
            throw RegistrationError.tooSmall(width: width, height: height)
        }
        let top = topLevel(fp), finest = self.finestLevel(fp)
        // The levels above `stop` are refined as always (the finest level decides which
        // parameters and tolerances each gets); the finest ones below it are left to refineToFinest.
        let stop = min(max(finestLevel ?? finest, finest), top)
        // W maps reference pixels to frame pixels at level 0 (the inverse of the result).
        // Without a starting estimate, the best few peaks of the coarse search are tried in
        // turn: a high-contrast moving object or a repetitive pattern can win the coarse
        // correlation, and only the refined result shows which start was right.
        var starts: [Homography] = []
        if let initial, let inv = initial.inverse {
            starts = [inv]
        } else {
            starts = coarseShifts(fp.levels[top], pyramid.levels[top], count: 3).map {
                Homography.translation(Double($0.dx), Double($0.dy)).rescaled(by: pow(2.0, Double(top)))
            }
        }
        var best: RegistrationResult?
        var firstError: Error?
        // Each start refined at the coarsest level first, and the finer levels from the one that
        // agrees best there: a repetitive texture or a high-contrast moving object can make a
        // wrong shift the first peak, and refined through every level such a start can end up
        // just above the acceptance line while the right one is never tried. At the coarsest
        // level (a few thousand points) the right start agrees by far the most.
        // A start that agrees at 0.8 or more there is taken without trying the others (the wrong
        // period of that texture agreed at 0.3-0.5, the right one at 0.9).
        var candidates: [Candidate] = []
        for start in starts {
            do {
                let c = try refineTop(start, fp, top: top, finest: finest, model: model, hasInitial: initial != nil)
                candidates.append(c)
                if (c.outcome?.inlierFraction ?? 0) >= 0.8 { break }
            } catch { if firstError == nil { firstError = error } }
        }
        // (Stable: near-equal agreement keeps the coarse search's order, smaller shifts first.)
        func agreement(_ c: Candidate) -> Double { c.outcome?.inlierFraction ?? 0 }
        let order = candidates.indices.sorted { a, b in
            let fa = agreement(candidates[a]), fb = agreement(candidates[b])
            return abs(fa - fb) > 0.02 ? fa > fb : a < b
        }
        let ranked = order.map { candidates[$0] }
        for c in ranked {
            do {
                var r = try refineRest(
                    c, fp, top: top, finest: finest, model: model, hasInitial: initial != nil, through: stop)
                r.start = initial != nil ? .given : .coarseShift
                if best == nil || r.inlierFraction > best!.inlierFraction { best = r }
                if r.inlierFraction >= 0.5 { break }
            } catch {
                if firstError == nil { firstError = error }
            }
        }
        if let best { return best }
        // Large motion (a turned or zoomed camera, another viewpoint): search rotation, scale and
        // shift at the coarsest level, then refine the best hypotheses with the full model.
        if initial == nil && model == .homography && options.largeMotionSearch,
            let r = largeMotion(fp, top: top, finest: finest, through: stop)
        {
            return r
        }
        throw firstError ?? RegistrationError.tooLittleTexture
    }

    /// The large-motion search: features on the finest level of at most ~500 px, then the
    /// rotation-and-scale search at the coarsest level, each start refined with a homography.
    /// The best result (the first that agrees at 0.5 or more), or nil when none converged.
    func largeMotion(_ fp: GreyPyramid, top: Int, finest: Int, through stop: Int) -> RegistrationResult? {
        var best: RegistrationResult?
        var featureLevel = top
        while featureLevel > finest
            && max(pyramid.levels[featureLevel].width, pyramid.levels[featureLevel].height) < 320
        { featureLevel -= 1 }
        if let h = FeatureStart.estimate(frame: fp.levels[featureLevel], reference: pyramid.levels[featureLevel]),
            let start = h.rescaled(by: pow(2.0, Double(featureLevel))).inverse,
            var r = try? refineFrom(
                start, fp, top: top, finest: finest, model: .homography, hasInitial: true, largeMotion: true,
                through: stop)
        {
            r.start = .features
            best = r
            if r.inlierFraction >= 0.5 { return r }
        }
        for start in similarityStarts(fp.levels[top], pyramid.levels[top], level: top) {
            if var r = try? refineFrom(
                start, fp, top: top, finest: finest, model: .homography, hasInitial: true, largeMotion: true,
                through: stop)
            {
                r.start = .rotationSearch
                if best == nil || r.inlierFraction > best!.inlierFraction { best = r }
                if r.inlierFraction >= 0.5 { break }
            }
        }
        return best
    }

    /// The finest level a frame with pyramid `fp` is registered at: ``RegistrationOptions/finestLevel``,
    /// or the pyramids' base level if that is coarser, within the pyramids.
    public func finestLevel(_ fp: GreyPyramid) -> Int {
        min(max(options.finestLevel, pyramid.baseLevel, fp.baseLevel), topLevel(fp))
    }

    /// The coarsest level both pyramids have.
    func topLevel(_ fp: GreyPyramid) -> Int { min(pyramid.levels.count, fp.levels.count) - 1 }

    /// A registration stopped above the finest level (`finestLevel` in
    /// ``register(pyramid:model:initial:finestLevel:)``) refined on down to it, as a registration
    /// without the stop would have been; one already there is returned as it is.
    ///
    /// - Parameters:
    ///   - r: The registration to continue.
    ///   - fp: The frame's pyramid it was made from.
    /// - Returns: The registration at the finest level (its `iterations` count both parts).
    /// - Throws: ``RegistrationError`` as ``register(pyramid:model:initial:finestLevel:)`` does.
    public func refineToFinest(_ r: RegistrationResult, pyramid fp: GreyPyramid) throws -> RegistrationResult {
        let finest = finestLevel(fp), top = topLevel(fp)
        guard r.level > finest else { return r }
        guard let w = r.homography.inverse else { throw RegistrationError.diverged("singular warp") }
        let c = try refineLevels(
            Candidate(w: w, outcome: nil, iterations: r.iterations, level: r.level), fp, from: r.level - 1, top: top,
            finest: finest, model: r.model, hasInitial: true, largeMotion: false, through: finest)
        var out = try judged(c, model: r.model)
        out.start = r.start
        return out
    }

    /// A start refined at some of the levels: the warp (reference to frame, level-0 pixels), the
    /// last level's outcome, and the iterations so far.
    struct Candidate {
        var w: Homography
        var outcome: LevelOutcome?
        var iterations: Int
        var level = Int.max
    }

    func refineFrom(
        _ start: Homography, _ fp: GreyPyramid, top: Int, finest: Int, model: MotionModel, hasInitial: Bool,
        largeMotion: Bool = false, through stop: Int? = nil
    ) throws -> RegistrationResult {
        let c = try refineTop(
            start, fp, top: top, finest: finest, model: model, hasInitial: hasInitial, largeMotion: largeMotion)
        return try refineRest(
            c, fp, top: top, finest: finest, model: model, hasInitial: hasInitial, largeMotion: largeMotion,
            through: stop)
    }

    /// `start` refined at the coarsest level.
    func refineTop(
        _ start: Homography, _ fp: GreyPyramid, top: Int, finest: Int, model: MotionModel, hasInitial: Bool,
        largeMotion: Bool = false
    ) throws -> Candidate {
        try refineLevels(
            Candidate(w: start, outcome: nil, iterations: 0), fp, from: top, top: top, finest: finest, model: model,
            hasInitial: hasInitial, largeMotion: largeMotion, through: top)
    }

    /// A candidate refined at the coarsest level, refined at the others down to `stop` (the
    /// finest when nil) and judged.
    func refineRest(
        _ c: Candidate, _ fp: GreyPyramid, top: Int, finest: Int, model: MotionModel, hasInitial: Bool,
        largeMotion: Bool = false, through stop: Int? = nil
    ) throws -> RegistrationResult {
        let through = stop ?? finest
        let r =
            top > through
            ? try refineLevels(
                c, fp, from: top - 1, top: top, finest: finest, model: model, hasInitial: hasInitial,
                largeMotion: largeMotion, through: through) : c
        return try judged(r, model: model)
    }

    /// Refines `c` at levels `from` down to `through`.
    func refineLevels(
        _ c: Candidate, _ fp: GreyPyramid, from: Int, top: Int, finest: Int, model: MotionModel, hasInitial: Bool,
        largeMotion: Bool, through: Int
    ) throws -> Candidate {
        var w = c.w
        var last = c.outcome
        var totalIterations = c.iterations
        var reached = c.level
        for level in stride(from: from, through: through, by: -1) {
            let tl = templates[level]
            guard tl.count >= 12 else {
                if level == finest { throw RegistrationError.tooLittleTexture }
                continue
            }
            let s = pow(0.5, Double(level))
            var wl = w.rescaled(by: s)
            // The coarsest level settles the shift, intermediate levels an affine warp; perspective
            // is only fitted on the two finest levels, where enough points constrain it.
            let parameters: Int
            if model == .translation || (level == top && !hasInitial && top > finest) {
                parameters = 2
            } else if level > finest + 1 && !(largeMotion && level < top) {
                parameters = 6
            } else {
                parameters = 8
            }
            // Coarse levels only need to hand the next level a good start.
            let out = try refine(
                &wl, tl, fp.levels[level], parameters: parameters, iterations: options.iterations,
                tolerance: level == finest ? 0.005 : 0.02)
            totalIterations += out.iterations
            w = wl.rescaled(by: 1 / s)
            last = out
            reached = level
            // Exposure changes keep the slope near the gain (0.5 to 2); smoothed noise or a blank
            // frame flattens to nothing at coarse scale.
            if level == top && out.slope < 0.25 { throw RegistrationError.structureless(slope: out.slope) }
        }
        return Candidate(w: w, outcome: last, iterations: totalIterations, level: reached)
    }

    /// The result of a candidate refined down to the finest level, if it passes.
    func judged(_ c: Candidate, model: MotionModel) throws -> RegistrationResult {
        let w = c.w, totalIterations = c.iterations
        guard let final = c.outcome else { throw RegistrationError.tooLittleTexture }
        guard let h = w.inverse, h.m.allSatisfy({ $0.isFinite }) else {
            throw RegistrationError.diverged("singular warp")
        }
        let det = h.m[0] * h.m[4] - h.m[1] * h.m[3]
        guard det > 0.25, det < 4 else {
            throw RegistrationError.diverged(String(format: "scale change %.2f", det.squareRoot()))
        }
        guard final.overlap >= 0.2 else { throw RegistrationError.noOverlap }
        // Agreement is absolute (grey levels), so a frame of something else, or a start that
        // locked onto a moving object, cannot pass by scaling its own residuals.
        guard final.inlierFraction >= Double(options.minimumInlierFraction) else {
            throw RegistrationError.poorMatch(inlierFraction: final.inlierFraction)
        }
        return RegistrationResult(
            homography: h, model: model, residual: final.residual, inlierFraction: final.inlierFraction,
            gain: final.gain, offset: final.offset, iterations: totalIterations, correlation: final.correlation,
            level: c.level)
    }

}
