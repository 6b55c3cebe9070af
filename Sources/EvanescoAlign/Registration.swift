import CKernels
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
    /// Template points kept at the finest level (the strongest gradients, spread over a grid);
    /// coarser levels keep a third as many. A level also keeps at most one point in
    /// ``pixelsPerPoint`` pixels, but never fewer than ``minPoints`` because of it.
    public var maxPoints = 40_000
    /// See ``maxPoints``: on a small frame (320 x 240, say) half its pixels qualify, and every
    /// Gauss-Newton iteration visits each point. Measured on motorcycle-handheld (741 x 500: 23,000
    /// points instead of 40,000): alignment error 0.0072 px against 0.0066 px mean, the same PSNR
    /// to 0.001 dB, 4 % less time for the whole stack.
    public var pixelsPerPoint = 16
    /// See ``maxPoints``.
    public var minPoints = 16_000
    /// Iterations per level (coarse levels get twice as many).
    public var iterations = 12
    /// Search radius of the coarse translation search, as a fraction of the coarsest level's size.
    public var searchFraction: Float = 0.12
    /// When the usual starts fail, search rotations and scales too (slower; for large motion).
    public var largeMotionSearch = true
    /// A frame whose matching texture falls below this fraction of the template is refused.
    /// Measured: real frames agree at 0.58 (the 12 MP pug burst, heavy occlusion) to 0.95;
    /// a frame of noise reached 0.36 after fitting 8 parameters and a gain.
    public var minimumInlierFraction: Float = 0.45
    /// The defaults, tuned on the real and synthetic bursts (see the README).
    public init() {}
}

/// Where a registration's refinement started from.
public enum RegistrationStart: String, Sendable, Codable, CaseIterable {
    /// The caller's estimate.
    case given
    /// A peak of the coarse shift search (the usual start).
    case coarseShift = "coarse_shift"
    /// Matched corner features (the slow path, for frames the shift starts cannot register).
    case features
    /// The rotation-and-scale search (the slowest path).
    case rotationSearch = "rotation_search"
}

/// The outcome of registering one frame to the reference.
public struct RegistrationResult: Sendable, Codable {
    /// Maps the frame's pixel coordinates to the reference's (top-left origin, integer centres).
    public var homography: Homography
    /// The model of ``homography`` (a translation falls back from a failed homography).
    public var model: MotionModel
    /// Robust RMS of the photometric residual on matching texture, in 8-bit grey levels.
    public var residual: Double
    /// Fraction of the template points inside the frame that agree with it after alignment
    /// (grey levels within 8 of each other): the registration's confidence.
    public var inlierFraction: Double
    /// Exposure difference found: frame ~ gain * reference + offset (grey levels).
    public var gain: Double
    /// The exposure offset, in grey levels (see ``gain``).
    public var offset: Double
    /// Gauss-Newton iterations run over all levels.
    public var iterations: Int
    /// Robustly weighted correlation of reference and aligned frame on the template points.
    public var correlation: Double
    /// Where the refinement that was kept started.
    public var start: RegistrationStart = .coarseShift
    /// The pyramid level it was refined down to (see `finestLevel` in
    /// ``RegistrationReference/register(pyramid:model:initial:finestLevel:)``).
    public var level = 0

    enum CodingKeys: String, CodingKey { case homography, model, residual, inlierFraction, gain, offset, iterations, correlation, start }
}

/// Why a frame could not be registered; the stacker reports it and leaves the frame out.
public enum RegistrationError: Error, CustomStringConvertible, Equatable {
    case sizeMismatch(frame: String, reference: String)
    case tooLittleTexture
    case noOverlap
    case diverged(String)
    case poorMatch(inlierFraction: Double)
    case structureless(slope: Double)
    /// The images are smaller than ``RegistrationReference/minimumSide`` on a side.
    case tooSmall(width: Int, height: Int)

    public var description: String {
        switch self {
        case .tooSmall(let w, let h): "\(w)x\(h) pixels is too small to register (\(RegistrationReference.minimumSide) on each side at least)"
        case .sizeMismatch(let f, let r): "frame is \(f) but the reference is \(r)"
        case .tooLittleTexture: "the reference has too little texture to align against"
        case .noOverlap: "the frame does not overlap the reference enough"
        case .diverged(let d): "alignment diverged (\(d))"
        case .poorMatch(let f): String(format: "only %.0f%% of the texture matches the reference after alignment (a different scene, or too much moving)", f * 100)
        case .structureless(let g): String(format: "at coarse scale the frame does not follow the reference's structure (slope %.2f): noise, a blank or a different scene", g)
        }
    }
}

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

    static func selectPoints(_ img: Image<Float>, cap: Int) -> TemplateLevel {
        let w = img.width, h = img.height
        // Gradient magnitude per pixel (central differences), 2-pixel border excluded, chosen
        // cell by cell of an 8 x 8 grid; the grid's rows at once on all cores (the reference's
        // points are made before any frame can be registered), joined in order.
        let cells = 8
        let cellW = max(1, (w + cells - 1) / cells), cellH = max(1, (h + cells - 1) / cells)
        let quota = cap == Int.max ? Int.max : max(16, cap / (cells * cells))
        let rows = LockedBox([PointRow?](repeating: nil, count: cells))
        img.samples.withUnsafeBufferPointer { buffer in
            let s = UncheckedSendable(buffer)
            StripExecutor.forEachStrip(rows: cells, minimumRows: 1) { range in
                for cyi in range {
                    let row = selectPoints(s.value, width: w, height: h, y0: max(2, cyi * cellH), y1: min(h - 2, (cyi + 1) * cellH),
                                           cells: cells, cellWidth: cellW, quota: quota)
                    rows.update { $0[cyi] = row }
                }
            }
        }
        var px: [Float] = [], py: [Float] = [], pt: [Float] = [], pgx: [Float] = [], pgy: [Float] = []
        for case let r? in rows.value {
            px += r.x; py += r.y; pt += r.value; pgx += r.gx; pgy += r.gy
        }
        return TemplateLevel(width: w, height: h, x: px, y: py, t: pt, gx: pgx, gy: pgy)
    }

    /// `quota` of a cell's candidates (squared gradient, index), preferring strong gradients but
    /// capping their rank at 4x the cell's median magnitude: otherwise the hard edges of a moving
    /// object (a car, a person against the sky) take every point of their cells and drag the
    /// estimate. Ties at the cap are spread evenly.
    private static func strongest(_ cand: [(g: Float, i: Int)], quota: Int) -> [(g: Float, i: Int)] {
        var g = cand.map(\.g)
        let cap = 16 * Selection.kth(&g, g.count / 2)
        var keys = cand.map { min($0.g, cap) }
        let kth = Selection.kth(&keys, keys.count - quota)
        var kept = cand.filter { min($0.g, cap) > kth }
        let tied = cand.filter { min($0.g, cap) == kth }
        let need = quota - kept.count
        if need > 0 && !tied.isEmpty {
            let step = Double(tied.count) / Double(need)
            for k in 0..<min(need, tied.count) { kept.append(tied[Int(Double(k) * step)]) }
        }
        return kept
    }

    /// Points of one row of the grid: positions, values and gradients.
    private struct PointRow: Sendable { var x: [Float] = [], y: [Float] = [], value: [Float] = [], gx: [Float] = [], gy: [Float] = [] }

    /// The points of one row of ``selectPoints(_:cap:)``'s grid (rows y0..<y1), cell by cell.
    private static func selectPoints(_ s: UnsafeBufferPointer<Float>, width w: Int, height h: Int, y0: Int, y1: Int,
                                     cells: Int, cellWidth cellW: Int, quota: Int) -> PointRow {
        var r = PointRow()
        var cand: [(g: Float, i: Int)] = []
        guard y0 < y1 else { return r }
        for cxi in 0..<cells {
            cand.removeAll(keepingCapacity: true)
            let x0 = max(2, cxi * cellW), x1 = min(w - 2, (cxi + 1) * cellW)
            guard x0 < x1 else { continue }
            for y in y0..<y1 {
                for x in x0..<x1 {
                    let i = y * w + x
                    let gx = 0.5 * (s[i + 1] - s[i - 1]), gy = 0.5 * (s[i + w] - s[i - w])
                    let g = gx * gx + gy * gy
                    if g >= 1.0 { cand.append((g, i)) }   // |grad| >= 1 grey level / px
                }
            }
            for c in cand.count > quota ? strongest(cand, quota: quota) : cand {
                r.x.append(Float(c.i % w)); r.y.append(Float(c.i / w)); r.value.append(s[c.i])
                r.gx.append(0.5 * (s[c.i + 1] - s[c.i - 1])); r.gy.append(0.5 * (s[c.i + w] - s[c.i - w]))
            }
        }
        return r
    }

    /// Registers a frame: returns the homography mapping the frame's pixels to the reference's.
    /// `initial`, when given, is a starting estimate in the same convention (e.g. from features).
    @_specialize(exported: true, where S == UInt8)
    @_specialize(exported: true, where S == UInt16)
    public func register<S: PixelSample>(_ frame: Image<S>, model: MotionModel, initial: Homography? = nil) throws -> RegistrationResult {
        guard frame.width == width, frame.height == height else {
            throw RegistrationError.sizeMismatch(frame: "\(frame.width)x\(frame.height)", reference: "\(width)x\(height)")
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
    public func register(pyramid fp: GreyPyramid, model: MotionModel, initial: Homography? = nil,
                         finestLevel: Int? = nil) throws -> RegistrationResult {
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
                var r = try refineRest(c, fp, top: top, finest: finest, model: model, hasInitial: initial != nil, through: stop)
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
        if initial == nil && model == .homography && options.largeMotionSearch {
            // Features on the finest level of at most ~500 px, then the rotation-and-scale search.
            var featureLevel = top
            while featureLevel > finest && max(pyramid.levels[featureLevel].width, pyramid.levels[featureLevel].height) < 320 { featureLevel -= 1 }
            if let h = FeatureStart.estimate(frame: fp.levels[featureLevel], reference: pyramid.levels[featureLevel]),
               let start = h.rescaled(by: pow(2.0, Double(featureLevel))).inverse,
               var r = try? refineFrom(start, fp, top: top, finest: finest, model: model, hasInitial: true, largeMotion: true, through: stop) {
                r.start = .features
                best = r
                if r.inlierFraction >= 0.5 { return r }
            }
            for start in similarityStarts(fp.levels[top], pyramid.levels[top], level: top) {
                if var r = try? refineFrom(start, fp, top: top, finest: finest, model: model, hasInitial: true, largeMotion: true, through: stop) {
                    r.start = .rotationSearch
                    if best == nil || r.inlierFraction > best!.inlierFraction { best = r }
                    if r.inlierFraction >= 0.5 { break }
                }
            }
            if let best { return best }
        }
        throw firstError ?? RegistrationError.tooLittleTexture
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
        let c = try refineLevels(Candidate(w: w, outcome: nil, iterations: r.iterations, level: r.level), fp, from: r.level - 1, top: top,
                                 finest: finest, model: r.model, hasInitial: true, largeMotion: false, through: finest)
        var out = try judged(c, model: r.model)
        out.start = r.start
        return out
    }

    /// Starting warps (reference -> frame, level-0 pixels) from an exhaustive search over
    /// rotations (every 5 degrees to +-45), scales (0.7 to 1.4) and shifts at the coarsest level,
    /// best three by correlation.
    func similarityStarts(_ frame: Image<Float>, _ ref: Image<Float>, level: Int) -> [Homography] {
        let cx = Double(ref.width - 1) / 2, cy = Double(ref.height - 1) / 2
        var hypotheses: [(score: Float, w: Homography)] = []
        for degrees in stride(from: -45.0, through: 45.0, by: 5.0) {
            for scale in [0.7, 0.8, 0.9, 1.0, 1.12, 1.25, 1.4] {
                // Reference -> frame at the coarse level: rotation and scale about the centre.
                let wTop = Homography.rotation(degrees: degrees, scale: scale, about: cx, cy)
                // The frame resampled into the reference's geometry under wTop.
                let resampled = frame.warped(by: wTop.inverse!, width: ref.width, height: ref.height, interpolation: .bilinear).image
                guard let best = coarseShifts(resampled, ref, count: 1).first else { continue }
                let w = wTop * Homography.translation(Double(best.dx), Double(best.dy))
                hypotheses.append((best.score, w.rescaled(by: pow(2.0, Double(level)))))
            }
        }
        return hypotheses.sorted { $0.score > $1.score }.prefix(3).map(\.w)
    }

    /// A start refined at some of the levels: the warp (reference to frame, level-0 pixels), the
    /// last level's outcome, and the iterations so far.
    struct Candidate { var w: Homography; var outcome: LevelOutcome?; var iterations: Int; var level = Int.max }

    func refineFrom(_ start: Homography, _ fp: GreyPyramid, top: Int, finest: Int, model: MotionModel, hasInitial: Bool,
                    largeMotion: Bool = false, through stop: Int? = nil) throws -> RegistrationResult {
        let c = try refineTop(start, fp, top: top, finest: finest, model: model, hasInitial: hasInitial, largeMotion: largeMotion)
        return try refineRest(c, fp, top: top, finest: finest, model: model, hasInitial: hasInitial, largeMotion: largeMotion, through: stop)
    }

    /// `start` refined at the coarsest level.
    func refineTop(_ start: Homography, _ fp: GreyPyramid, top: Int, finest: Int, model: MotionModel, hasInitial: Bool,
                   largeMotion: Bool = false) throws -> Candidate {
        try refineLevels(Candidate(w: start, outcome: nil, iterations: 0), fp, from: top, top: top, finest: finest, model: model,
                         hasInitial: hasInitial, largeMotion: largeMotion, through: top)
    }

    /// A candidate refined at the coarsest level, refined at the others down to `stop` (the
    /// finest when nil) and judged.
    func refineRest(_ c: Candidate, _ fp: GreyPyramid, top: Int, finest: Int, model: MotionModel, hasInitial: Bool,
                    largeMotion: Bool = false, through stop: Int? = nil) throws -> RegistrationResult {
        let through = stop ?? finest
        let r = top > through ? try refineLevels(c, fp, from: top - 1, top: top, finest: finest, model: model, hasInitial: hasInitial,
                                                  largeMotion: largeMotion, through: through) : c
        return try judged(r, model: model)
    }

    /// Refines `c` at levels `from` down to `through`.
    func refineLevels(_ c: Candidate, _ fp: GreyPyramid, from: Int, top: Int, finest: Int, model: MotionModel, hasInitial: Bool,
                      largeMotion: Bool, through: Int) throws -> Candidate {
        var w = c.w
        var last = c.outcome
        var totalIterations = c.iterations
        var reached = c.level
        for level in stride(from: from, through: through, by: -1) {
            let tl = templates[level]
            guard tl.count >= 12 else { if level == finest { throw RegistrationError.tooLittleTexture }; continue }
            let s = pow(0.5, Double(level))
            var wl = w.rescaled(by: s)
            // The coarsest level settles the shift, intermediate levels an affine warp; perspective
            // is only fitted on the two finest levels, where enough points constrain it.
            let parameters: Int
            if model == .translation || (level == top && !hasInitial && top > finest) { parameters = 2 }
            else if level > finest + 1 && !(largeMotion && level < top) { parameters = 6 } else { parameters = 8 }
            // Coarse levels only need to hand the next level a good start.
            let out = try refine(&wl, tl, fp.levels[level], parameters: parameters, iterations: options.iterations,
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
        guard let h = w.inverse, h.m.allSatisfy({ $0.isFinite }) else { throw RegistrationError.diverged("singular warp") }
        let det = h.m[0] * h.m[4] - h.m[1] * h.m[3]
        guard det > 0.25, det < 4 else { throw RegistrationError.diverged(String(format: "scale change %.2f", det.squareRoot())) }
        guard final.overlap >= 0.2 else { throw RegistrationError.noOverlap }
        // Agreement is absolute (grey levels), so a frame of something else, or a start that
        // locked onto a moving object, cannot pass by scaling its own residuals.
        guard final.inlierFraction >= Double(options.minimumInlierFraction) else {
            throw RegistrationError.poorMatch(inlierFraction: final.inlierFraction)
        }
        return RegistrationResult(homography: h, model: model, residual: final.residual, inlierFraction: final.inlierFraction,
                                  gain: final.gain, offset: final.offset, iterations: totalIterations, correlation: final.correlation,
                                  level: c.level)
    }

    /// The `count` best integer shifts (frame minus reference) by zero-mean normalised
    /// cross-correlation at the coarsest level, at least 2 pixels apart, best first.
    ///
    /// Coarse to fine when the search is wide: every shift of half-size copies (a quarter of the
    /// pixels, a quarter of the shifts), then the shifts within a pixel of the best few of them,
    /// and of zero, at this level. (A start only has to land in the refinement's reach, a pixel
    /// or two here; its agreement after refinement ranks it.)
    func coarseShifts(_ frame: Image<Float>, _ ref: Image<Float>, count: Int) -> [(dx: Int, dy: Int, score: Float)] {
        let w = ref.width, h = ref.height
        let r = max(2, Int(Float(max(w, h)) * options.searchFraction))
        var scores: [(dx: Int, dy: Int, score: Float)]
        if r >= 6 && w >= 32 && h >= 32 {
            let half = RegistrationReference.shiftScores(GreyPyramid.halve(frame), GreyPyramid.halve(ref), shifts: RegistrationReference.square((r + 1) / 2))
                .sorted { $0.score > $1.score }
            var centres: [(Int, Int)] = [(0, 0)]
            for c in half where centres.count < count + 4 {
                if centres.allSatisfy({ abs($0.0 - 2 * c.dx) > 3 || abs($0.1 - 2 * c.dy) > 3 }) { centres.append((2 * c.dx, 2 * c.dy)) }
            }
            var wanted = Set<Int>(), shifts: [(Int, Int)] = []
            for (cx, cy) in centres { for dy in (cy - 1)...(cy + 1) { for dx in (cx - 1)...(cx + 1) where abs(dx) <= r && abs(dy) <= r {
                if wanted.insert((dy + r) * (2 * r + 1) + dx + r).inserted { shifts.append((dx, dy)) }
            }}}
            scores = RegistrationReference.shiftScores(frame, ref, shifts: shifts)
        } else {
            scores = RegistrationReference.shiftScores(frame, ref, shifts: RegistrationReference.square(r))
        }
        scores.sort { $0.score > $1.score }
        var picked: [(dx: Int, dy: Int, score: Float)] = []
        for c in scores where picked.count < count {
            if picked.allSatisfy({ abs($0.dx - c.dx) > 3 || abs($0.dy - c.dy) > 3 }) { picked.append(c) }
        }
        // A burst barely moves: the zero shift is always worth a try, even when a moving object
        // wins the coarse correlation.
        if !picked.contains(where: { abs($0.dx) <= 1 && abs($0.dy) <= 1 }), let zero = scores.first(where: { $0.dx == 0 && $0.dy == 0 }) {
            picked.append(zero)
        }
        guard let top = picked.first else { return [(0, 0, 0)] }
        // Peaks within 0.03 of the best are near-ties (a repetitive pattern aliases): a burst
        // moves little between frames, so the smaller shift goes first.
        let ties = picked.filter { $0.score >= top.score - 0.03 }.sorted { $0.dx * $0.dx + $0.dy * $0.dy < $1.dx * $1.dx + $1.dy * $1.dy }
        return ties + picked.filter { $0.score < top.score - 0.03 }
    }


    /// Every shift within `r` of zero on each axis.
    static func square(_ r: Int) -> [(Int, Int)] { (-r...r).flatMap { dy in (-r...r).map { dx in (dx, dy) } } }

    /// The zero-mean normalised cross-correlation of `ref` and `frame` shifted by each of
    /// `shifts` (frame minus reference), over their overlap; shifts whose overlap is under a
    /// quarter of the image are left out.
    static func shiftScores(_ frame: Image<Float>, _ ref: Image<Float>, shifts: [(Int, Int)]) -> [(dx: Int, dy: Int, score: Float)] {
        let w = ref.width, h = ref.height
        var scores: [(dx: Int, dy: Int, score: Float)] = []
        scores.reserveCapacity(shifts.count)
        ref.samples.withUnsafeBufferPointer { t in
            frame.samples.withUnsafeBufferPointer { f in
                for (dx, dy) in shifts {
                    let x0 = max(0, -dx), x1 = min(w, w - dx), y0 = max(0, -dy), y1 = min(h, h - dy)
                    let n = (x1 - x0) * (y1 - y0)
                    guard x1 > x0, y1 > y0, n >= w * h / 4 else { continue }
                    // Four columns at a time (the overlap is inside both images by construction).
                    var st4 = SIMD4<Float>(), sf4 = SIMD4<Float>(), stt4 = SIMD4<Float>(), sff4 = SIMD4<Float>(), stf4 = SIMD4<Float>()
                    var st: Float = 0, sf: Float = 0, stt: Float = 0, sff: Float = 0, stf: Float = 0
                    let tp = t.baseAddress!, fp = f.baseAddress!
                    for y in y0..<y1 {
                        let rt = tp + y * w, rf = fp + ((y + dy) * w + dx)
                        var x = x0
                        while x + 4 <= x1 {
                            let a = UnsafeRawPointer(rt + x).loadUnaligned(as: SIMD4<Float>.self)
                            let b = UnsafeRawPointer(rf + x).loadUnaligned(as: SIMD4<Float>.self)
                            st4 += a; sf4 += b; stt4 += a * a; sff4 += b * b; stf4 += a * b
                            x += 4
                        }
                        while x < x1 {
                            let a = rt[x], b = rf[x]
                            st += a; sf += b; stt += a * a; sff += b * b; stf += a * b
                            x += 1
                        }
                    }
                    st += st4.sum(); sf += sf4.sum(); stt += stt4.sum(); sff += sff4.sum(); stf += stf4.sum()
                    let fn = Float(n)
                    let cov = stf - st * sf / fn, vt = stt - st * st / fn, vf = sff - sf * sf / fn
                    scores.append((dx, dy, cov / max(1e-6, (vt * vf).squareRoot())))
                }
            }
        }
        return scores
    }

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
    static func sample(_ img: Image<Float>, _ tl: TemplateLevel, through w: Homography, into smp: UnsafeMutablePointer<Float>) {
        let m = w.m.map { Float($0) }
        let (m0, m1, m2, m3, m4, m5, m6, m7, m8) = (m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8])
        let iw = img.width, maxX = Float(img.width - 1), maxY = Float(img.height - 1)
        img.samples.withUnsafeBufferPointer { src in
        tl.x.withUnsafeBufferPointer { xs in
        tl.y.withUnsafeBufferPointer { ys in
            let shared = UncheckedSendable((src.baseAddress!, xs.baseAddress!, ys.baseAddress!, smp))
            // Eight points a step where the CPU has AVX2 (CKernels, the same values); the rest here.
            let eight = evn_cpu_has_avx2() != 0
            StripExecutor.forEachStrip(rows: tl.count, minimumRows: 8192) { range in
                let (src, xs, ys, smp) = shared.value
                var first = range.lowerBound
                if eight {
                    m.withUnsafeBufferPointer { map in
                        var points = evn_sample_points(image: src, width: iw, max_x: maxX, max_y: maxY, x: xs, y: ys, map: map.baseAddress)
                        evn_sample_points_avx2(&points, range.lowerBound, range.upperBound, smp)
                    }
                    first = range.upperBound - (range.upperBound - range.lowerBound) % 8
                }
                for i in first..<range.upperBound {
                    let x = xs[i], y = ys[i]
                    let r = 1 / (m6 * x + m7 * y + m8)
                    let qx = (m0 * x + m1 * y + m2) * r, qy = (m3 * x + m4 * y + m5) * r
                    guard qx >= 0, qy >= 0, qx < maxX, qy < maxY else { smp[i] = .nan; continue }
                    // Non-negative and inside the frame: truncation is the floor, and the four taps
                    // (o, o + 1, o + iw, o + iw + 1) lie inside the image.
                    let ix = Int(qx), iy = Int(qy)
                    let ax = qx - Float(ix), ay = qy - Float(iy)
                    let o = iy &* iw &+ ix
                    let top = src[o] + (src[o &+ 1] - src[o]) * ax, bot = src[o &+ iw] + (src[o &+ iw &+ 1] - src[o &+ iw]) * ax
                    smp[i] = top + (bot - top) * ay
                }
            }
        }}}
    }

    /// Robust inverse-compositional Gauss-Newton at one level, with a gain/offset fit each step.
    /// `parameters`: 2 (translation), 6 (affine) or 8 (homography).
    func refine(_ w: inout Homography, _ tl: TemplateLevel, _ img: Image<Float>, parameters np: Int, iterations: Int,
                tolerance: Double) throws -> LevelOutcome {
        let n = tl.count, padded = tl.padded
        // NaN: the point falls outside the frame (and the padding never has a sample).
        let smp = UnsafeMutablePointer<Float>.allocate(capacity: padded)
        smp.initialize(repeating: .nan, count: padded)
        let wts = UnsafeMutablePointer<Float>.allocate(capacity: padded)
        wts.initialize(repeating: 1, count: padded)
        defer { smp.deallocate(); wts.deallocate() }
        var gain: Double = 1, offset: Double = 0, rawSlope: Double = 1
        var outcome = LevelOutcome(residual: 0, inlierFraction: 0, overlap: 0, gain: 1, offset: 0, iterations: 0, correlation: 0)
        // N maps level pixels to normalised coordinates.
        let nrm = Homography.affine(Double(1 / tl.scale), 0, Double(-tl.cx / tl.scale), 0, Double(1 / tl.scale), Double(-tl.cy / tl.scale))
        let nrmInv = nrm.inverse!
        var absr = [Float]()
        for it in 0..<iterations {
            // 1. Sample the frame at the warped template points (bilinear).
            RegistrationReference.sample(img, tl, through: w, into: smp)
            // 2. Gain and offset by weighted least squares: frame ~ gain * ref + offset.
            let e = tl.t.withUnsafeBufferPointer { Exposure(smp, wts, $0.baseAddress!, padded) }
            // Weighted (robust) correlation, reported for information.
            let sw = e.sw, st = e.st, si = e.si
            let correlation = sw > 0 ? (e.sti - st * si / sw) / max(1e-9, ((e.stt - st * st / sw) * (e.sii - si * si / sw)).squareRoot()) : 0
            guard e.count >= max(12, n / 20), sw > 0 else { throw RegistrationError.noOverlap }
            let vt = e.stt - st * st / sw
            if vt > 1e-9 { gain = (e.sti - st * si / sw) / vt; offset = (si - gain * st) / sw }
            rawSlope = gain
            if !(gain > 0.5 && gain < 2) { gain = 1; offset = (si - st) / sw }
            // 3. Robust scale of the residuals (frame mapped back to the reference's exposure):
            // the median of about 1024 of them, evenly spread over the points, is as good a scale
            // (to a few percent) as all of them and saves most of the selection's time.
            let ig = Float(1 / gain), off = Float(offset)
            let step = max(1, n / 1024)
            absr.removeAll(keepingCapacity: true)
            tl.t.withUnsafeBufferPointer { t in
                var i = 0
                while i < n { if !smp[i].isNaN { absr.append(abs((smp[i] - off) * ig - t[i])) }; i &+= step }
            }
            // Capped: when most points disagree (a wrong start locked onto a moving object),
            // a scale grown from the same residuals would call everything an inlier.
            let sigma = min(4, max(0.5, 1.4826 * (absr.isEmpty ? 0 : Selection.kthOfMagnitudes(&absr, absr.count / 2))))
            // 4. Tukey weights and the normal equations over the steepest-descent rows.
            let s = NormalEquations.sum(tl, smp, wts, parameters: np, offset: off, inverseGain: ig, c2: (4.685 * sigma) * (4.685 * sigma))
            guard s.wsumHessian > 0, let dp = solveSymmetric(s.matrix(np, scaledBy: s.wsum / s.wsumHessian), s.b, np) else {
                throw RegistrationError.diverged("flat texture")
            }
            let dW: Homography = np == 2 ? .translation(dp[0], dp[1])
                : np == 6 ? .affine(1 + dp[0], dp[1], dp[2], dp[3], 1 + dp[4], dp[5])
                : Homography([1 + dp[0], dp[1], dp[2], dp[3], 1 + dp[4], dp[5], dp[6], dp[7], 1])
            guard let dWinv = dW.inverse else { throw RegistrationError.diverged("singular update") }
            let update = nrmInv * dWinv * nrm
            w = w * update
            guard w.m.allSatisfy({ $0.isFinite }) else { throw RegistrationError.diverged("non-finite warp") }
            // Converged when no corner moves more than `tolerance` pixels.
            var moved = 0.0
            for (cx, cy) in [(0.0, 0.0), (Double(tl.width - 1), 0.0), (0.0, Double(tl.height - 1)), (Double(tl.width - 1), Double(tl.height - 1))] {
                if let p = update.apply(cx, cy) { moved = max(moved, abs(p.x - cx), abs(p.y - cy)) } else { moved = .infinity }
            }
            outcome = LevelOutcome(residual: (s.wr2 / max(s.wsum, 1e-9)).squareRoot(), inlierFraction: Double(s.inliers) / Double(max(e.count, 1)),
                                   overlap: Double(e.count) / Double(n), gain: gain, offset: offset, iterations: it + 1,
                                   correlation: correlation, slope: rawSlope)
            if moved < tolerance { break }
        }
        return outcome
    }
}

/// The weighted sums of an exposure fit (frame = gain x reference + offset) over the points
/// that have a sample, with the previous iteration's weights.
struct Exposure {
    var sw = 0.0, st = 0.0, si = 0.0, stt = 0.0, sti = 0.0, sii = 0.0
    /// Points with a sample.
    var count = 0

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
                let x = v.replacing(with: 0, where: .!ok), tt = UnsafeRawPointer(t + i).loadUnaligned(as: SIMD4<Float>.self)
                let wtt = wt * tt, wx = wt * x
                a += wt; b += wtt; c += wx; d += wtt * tt; e += wtt * x; f += wx * x
                valid &-= unsafeBitCast(ok, to: SIMD4<Int32>.self)   // a true lane is -1
                i &+= 4
            }
            sw += Double(a.sum()); st += Double(b.sum()); si += Double(c.sum())
            stt += Double(d.sum()); sti += Double(e.sum()); sii += Double(f.sum())
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
        for q in 0..<np { for u in q..<np { m[q * np + u] = a[idx] * k; m[u * np + q] = a[idx] * k; idx += 1 } }
        return m
    }

    mutating func add(_ o: NormalEquations) {
        for i in a.indices { a[i] += o.a[i] }
        for i in b.indices { b[i] += o.b[i] }
        wr2 += o.wr2; wsum += o.wsum; wsumHessian += o.wsumHessian; inliers += o.inliers
    }

    /// Residuals `(smp - offset) * inverseGain - t`, Tukey weights with squared scale `c2`
    /// (written to `wts`, 0 where a point has no sample), and the sums, for `np` parameters (2,
    /// 6 or 8), by CKernels' evn_normal_sums_add (eight points a step; AVX2 where the CPU has
    /// it, the same sums without). Large levels are split between the threads, in pieces of
    /// 8192 points whatever the cores and whichever thread runs them, summed in order: the same
    /// sums every run.
    static func sum(_ tl: TemplateLevel, _ smp: UnsafePointer<Float>, _ wts: UnsafeMutablePointer<Float>, parameters np: Int,
                    offset: Float, inverseGain: Float, c2: Float) -> NormalEquations {
        let piece = 8192, pieces = max(1, (tl.padded + piece - 1) / piece)
        let parts = LockedBox([NormalEquations](repeating: NormalEquations(), count: pieces))
        tl.t.withUnsafeBufferPointer { t in
        tl.agreement.withUnsafeBufferPointer { agr in
        tl.jacobian.withUnsafeBufferPointer { jac in
            let points = UncheckedSendable(evn_normal_points(t: t.baseAddress, agreement: agr.baseAddress, jacobian: jac.baseAddress,
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
        }}}
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
        wr2 = s.wr2; wsum = s.wsum; wsumHessian = s.wsum_hessian; inliers = Int(s.inliers)
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
    for i in 0..<n { var s = b[i]; for k in 0..<i { s -= l[i * n + k] * y[k] }; y[i] = s / l[i * n + i] }
    var x = [Double](repeating: 0, count: n)
    for i in stride(from: n - 1, through: 0, by: -1) { var s = y[i]; for k in (i + 1)..<n { s -= l[k * n + i] * x[k] }; x[i] = s / l[i * n + i] }
    return x
}
