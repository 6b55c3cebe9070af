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
    public var maxPoints = 40_000
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

/// One template point: position (level pixels and normalised), value, gradient in normalised
/// units (d T / d xn).
struct TemplatePoint: Sendable {
    var x: Float, y: Float, xn: Float, yn: Float, t: Float, gx: Float, gy: Float
    /// The largest residual at which the point agrees (grey levels): a fixed threshold plus
    /// what a fraction of a pixel's misalignment makes of its gradient, in level pixels.
    var agreement: Float

    init(x: Float, y: Float, xn: Float, yn: Float, t: Float, gx: Float, gy: Float, scale: Float) {
        self.x = x; self.y = y; self.xn = xn; self.yn = yn; self.t = t; self.gx = gx; self.gy = gy
        // gx, gy are per normalised unit (`scale` level pixels).
        let gradient = (gx * gx + gy * gy).squareRoot() / scale
        agreement = RegistrationReference.agreementThreshold + RegistrationReference.agreementShift * gradient
    }
}

/// Template points of one pyramid level.
struct TemplateLevel: Sendable {
    var width: Int, height: Int
    /// Normalisation: xn = (x - cx) / scale.
    var cx: Float, cy: Float, scale: Float
    var points: ContiguousArray<TemplatePoint>
    var count: Int { points.count }
}

/// The reference frame, prepared once: its pyramid and template points per level.
/// Register any number of frames against it, from several threads at once.
public final class RegistrationReference: Sendable {
    /// The smallest image side registration works on.
    public static let minimumSide = 16
    /// The reference's luma pyramid.
    public let pyramid: GreyPyramid
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
        templates = pyramid.levels.enumerated().map { level, img in
            // The finest level keeps the most points; coarser levels only steer.
            let cap = level == options.finestLevel ? options.maxPoints : options.maxPoints / 3
            return RegistrationReference.selectPoints(img, cap: cap)
        }
    }

    static func selectPoints(_ img: Image<Float>, cap: Int) -> TemplateLevel {
        let w = img.width, h = img.height
        let cx = Float(w - 1) / 2, cy = Float(h - 1) / 2, scale = Float(max(w, h)) / 2
        var points = ContiguousArray<TemplatePoint>()
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
                        // Keep `quota` points, preferring strong gradients but capping their rank
                        // at 4x the cell's median magnitude: otherwise the hard edges of a moving
                        // object (a car, a person against the sky) take every point of their
                        // cells and drag the estimate. Ties at the cap are spread evenly.
                        var g = cand.map(\.g)
                        let cap = 16 * Selection.kth(&g, g.count / 2)
                        var keys = cand.map { min($0.g, cap) }
                        let kth = Selection.kth(&keys, keys.count - quota)
                        let above = cand.filter { min($0.g, cap) > kth }
                        let tied = cand.filter { min($0.g, cap) == kth }
                        let need = quota - above.count
                        cand = above
                        if need > 0 && !tied.isEmpty {
                            let step = Double(tied.count) / Double(need)
                            for k in 0..<min(need, tied.count) { cand.append(tied[Int(Double(k) * step)]) }
                        }
                    }
                    for c in cand {
                        let x = Float(c.i % w), y = Float(c.i / w)
                        points.append(TemplatePoint(x: x, y: y, xn: (x - cx) / scale, yn: (y - cy) / scale, t: s[c.i],
                                                    gx: 0.5 * (s[c.i + 1] - s[c.i - 1]) * scale,
                                                    gy: 0.5 * (s[c.i + w] - s[c.i - w]) * scale, scale: scale))
                    }
                }
            }
        }
        return TemplateLevel(width: w, height: h, cx: cx, cy: cy, scale: scale, points: points)
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
    /// - Returns: The homography mapping the frame's pixels to the reference's, with its confidence.
    /// - Throws: ``RegistrationError`` when the sizes differ, the frame does not overlap, the
    ///   estimate diverges or too little texture agrees.
    public func register(pyramid fp: GreyPyramid, model: MotionModel, initial: Homography? = nil) throws -> RegistrationResult {
        guard fp.width == width, fp.height == height else {
            throw RegistrationError.sizeMismatch(frame: "\(fp.width)x\(fp.height)", reference: "\(width)x\(height)")
        }
        guard min(width, height) >= Self.minimumSide, !pyramid.levels.isEmpty, !fp.levels.isEmpty else {
            throw RegistrationError.tooSmall(width: width, height: height)
        }
        let top = min(pyramid.levels.count, fp.levels.count) - 1
        let finest = min(max(options.finestLevel, pyramid.baseLevel, fp.baseLevel), top)
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
        for start in starts {
            do {
                var r = try refineFrom(start, fp, top: top, finest: finest, model: model, hasInitial: initial != nil)
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
               var r = try? refineFrom(start, fp, top: top, finest: finest, model: model, hasInitial: true, largeMotion: true) {
                r.start = .features
                best = r
                if r.inlierFraction >= 0.5 { return r }
            }
            for start in similarityStarts(fp.levels[top], pyramid.levels[top], level: top) {
                if var r = try? refineFrom(start, fp, top: top, finest: finest, model: model, hasInitial: true, largeMotion: true) {
                    r.start = .rotationSearch
                    if best == nil || r.inlierFraction > best!.inlierFraction { best = r }
                    if r.inlierFraction >= 0.5 { break }
                }
            }
            if let best { return best }
        }
        throw firstError ?? RegistrationError.tooLittleTexture
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

    func refineFrom(_ start: Homography, _ fp: GreyPyramid, top: Int, finest: Int, model: MotionModel, hasInitial: Bool,
                    largeMotion: Bool = false) throws -> RegistrationResult {
        var w = start
        var last: LevelOutcome?
        var totalIterations = 0
        for level in stride(from: top, through: finest, by: -1) {
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
            // Exposure changes keep the slope near the gain (0.5 to 2); smoothed noise or a blank
            // frame flattens to nothing at coarse scale.
            if level == top && out.slope < 0.25 { throw RegistrationError.structureless(slope: out.slope) }
        }
        guard let final = last else { throw RegistrationError.tooLittleTexture }
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
                                  gain: final.gain, offset: final.offset, iterations: totalIterations, correlation: final.correlation)
    }

    /// The `count` best integer shifts (frame minus reference) by zero-mean normalised
    /// cross-correlation at the coarsest level, at least 2 pixels apart, best first.
    func coarseShifts(_ frame: Image<Float>, _ ref: Image<Float>, count: Int) -> [(dx: Int, dy: Int, score: Float)] {
        let w = ref.width, h = ref.height
        let r = max(2, Int(Float(max(w, h)) * options.searchFraction))
        var scores: [(dx: Int, dy: Int, score: Float)] = []
        ref.samples.withUnsafeBufferPointer { t in
            frame.samples.withUnsafeBufferPointer { f in
                for dy in -r...r {
                    for dx in -r...r {
                        let x0 = max(0, -dx), x1 = min(w, w - dx), y0 = max(0, -dy), y1 = min(h, h - dy)
                        let n = (x1 - x0) * (y1 - y0)
                        guard n >= w * h / 4 else { continue }
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

    /// Bilinear samples of `img` at the template points mapped through `w` (NaN outside).
    static func sample(_ img: Image<Float>, at pts: UnsafeBufferPointer<TemplatePoint>, through w: Homography,
                       into smp: UnsafeMutableBufferPointer<Float>) {
        let m = w.m.map { Float($0) }
        let (m0, m1, m2, m3, m4, m5, m6, m7, m8) = (m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8])
        let iw = img.width, maxX = Float(img.width - 1), maxY = Float(img.height - 1)
        img.samples.withUnsafeBufferPointer { src in
            let shared = UncheckedSendable((pts, src, smp))
            StripExecutor.forEachStrip(rows: pts.count, minimumRows: 8192) { range in
                let (pts, src, smp) = shared.value
                for i in range {
                    let x = pts[i].x, y = pts[i].y
                    let d = m6 * x + m7 * y + m8
                    let qx = (m0 * x + m1 * y + m2) / d, qy = (m3 * x + m4 * y + m5) / d
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
        }
    }

    /// Robust inverse-compositional Gauss-Newton at one level, with a gain/offset fit each step.
    /// `parameters`: 2 (translation), 6 (affine) or 8 (homography).
    func refine(_ w: inout Homography, _ tl: TemplateLevel, _ img: Image<Float>, parameters np: Int, iterations: Int,
                tolerance: Double) throws -> LevelOutcome {
        let n = tl.count
        var sampled = [Float](repeating: .nan, count: n)   // NaN: the point falls outside the frame
        var weights = [Float](repeating: 1, count: n)
        var gain: Double = 1, offset: Double = 0, rawSlope: Double = 1
        var outcome = LevelOutcome(residual: 0, inlierFraction: 0, overlap: 0, gain: 1, offset: 0, iterations: 0, correlation: 0)
        // N maps level pixels to normalised coordinates.
        let nrm = Homography.affine(Double(1 / tl.scale), 0, Double(-tl.cx / tl.scale), 0, Double(1 / tl.scale), Double(-tl.cy / tl.scale))
        let nrmInv = nrm.inverse!
        try tl.points.withUnsafeBufferPointer { pts in
        try img.samples.withUnsafeBufferPointer { src in
        try sampled.withUnsafeMutableBufferPointer { smp in
        try weights.withUnsafeMutableBufferPointer { wts in
            let shared = UncheckedSendable((pts, src, smp, wts))
            _ = src
            for it in 0..<iterations {
                // 1. Sample the frame at the warped template points (bilinear).
                RegistrationReference.sample(img, at: pts, through: w, into: smp)
                // 2. Gain and offset by weighted least squares: frame ~ gain * ref + offset.
                var sw = 0.0, st = 0.0, si = 0.0, stt = 0.0, sti = 0.0, count = 0
                var sii = 0.0
                for i in 0..<n where !smp[i].isNaN {
                    let wt = Double(wts[i]), t = Double(pts[i].t), v = Double(smp[i])
                    sw += wt; st += wt * t; si += wt * v; stt += wt * t * t; sti += wt * t * v; sii += wt * v * v; count += 1
                }
                // Weighted (robust) correlation, reported for information.
                let correlation = sw > 0 ? (sti - st * si / sw) / max(1e-9, ((stt - st * st / sw) * (sii - si * si / sw)).squareRoot()) : 0
                guard count >= max(12, n / 20), sw > 0 else { throw RegistrationError.noOverlap }
                let vt = stt - st * st / sw
                if vt > 1e-9 { gain = (sti - st * si / sw) / vt; offset = (si - gain * st) / sw }
                rawSlope = gain
                if !(gain > 0.5 && gain < 2) { gain = 1; offset = (si - st) / sw }
                // 3. Robust scale of the residuals (frame mapped back to the reference's exposure).
                let ig = Float(1 / gain), off = Float(offset)
                // The median of at most ~4096 of them, evenly spread over the points, is as good
                // a scale and saves most of the selection's time on a 40,000-point level.
                let stride = max(1, count / 4096)
                var absr = [Float]()
                absr.reserveCapacity(count / stride + 1)
                var seen = 0
                for i in 0..<n where !smp[i].isNaN {
                    if seen % stride == 0 { absr.append(abs((smp[i] - off) * ig - pts[i].t)) }
                    seen &+= 1
                }
                // Capped: when most points disagree (a wrong start locked onto a moving object),
                // a scale grown from the same residuals would call everything an inlier.
                let sigma = min(4, max(0.5, 1.4826 * Selection.median(&absr)))
                let c2 = (4.685 * sigma) * (4.685 * sigma)
                // 4. Tukey weights and normal equations over steepest-descent images, in one pass.
                let partial = LockedAccumulator()
                StripExecutor.forEachStrip(rows: n, minimumRows: 8192) { range in
                    let (pts, _, smp, wts) = shared.value
                    var a = [Double](repeating: 0, count: 36 + 8), b = [Double](repeating: 0, count: 8)
                    var wr2 = 0.0, wsum = 0.0, inl = 0
                    var normal = NormalEquations()
                    defer { normal.deallocate() }
                    // The Double totals through raw pointers (NormalEquations adds to them after
                    // each block of points).
                    a.withUnsafeMutableBufferPointer { ab in b.withUnsafeMutableBufferPointer { bb in
                    let a = ab.baseAddress!, b = bb.baseAddress!
                    for i in range {
                        guard !smp[i].isNaN else { wts[i] = 0; continue }
                        let r = (smp[i] - off) * ig - pts[i].t
                        if abs(r) <= pts[i].agreement { inl &+= 1 }
                        let u2 = r * r / c2
                        guard u2 < 1 else { wts[i] = 0; continue }
                        let wt = (1 - u2) * (1 - u2)
                        wts[i] = wt
                        let p = pts[i]
                        if np == 2 {
                            normal.add(p.gx, p.gy, 0, 0, 0, 0, 0, 0, weight: wt, residual: r, n: 2)
                        } else {
                            let proj = p.gx * p.xn + p.gy * p.yn
                            normal.add(p.gx * p.xn, p.gx * p.yn, p.gx, p.gy * p.xn, p.gy * p.yn, p.gy, -p.xn * proj, -p.yn * proj,
                                       weight: wt, residual: r, n: 8)
                        }
                        if normal.pending == NormalEquations.block { normal.flush(into: a, b) }
                        wr2 += Double(wt * r * r); wsum += Double(wt)
                    }
                    normal.flush(into: a, b)
                    }}
                    partial.add(a, b, wr2, wsum, inl)
                }
                let (packed, b, wr2, wsum, inliers) = partial.totals
                // Unpack the upper triangle into a full matrix.
                var a = [Double](repeating: 0, count: np * np)
                var k = 0
                for q in 0..<8 { for u in q..<8 {
                    if q < np && u < np { a[q * np + u] = packed[k]; a[u * np + q] = packed[k] }
                    k += 1
                } }
                guard let dp = solveSymmetric(a, Array(b.prefix(np)), np) else { throw RegistrationError.diverged("flat texture") }
                let dW: Homography = np == 2 ? .translation(dp[0], dp[1])
                    : np == 6 ? .affine(1 + dp[0], dp[1], dp[2], dp[3], 1 + dp[4], dp[5])
                    : Homography([1 + dp[0], dp[1], dp[2], dp[3], 1 + dp[4], dp[5], dp[6], dp[7], 1])
                guard let dWinv = dW.inverse else { throw RegistrationError.diverged("singular update") }
                let step = nrmInv * dWinv * nrm
                w = w * step
                guard w.m.allSatisfy({ $0.isFinite }) else { throw RegistrationError.diverged("non-finite warp") }
                // Converged when no corner moves more than `tolerance` pixels.
                var moved = 0.0
                for (cx, cy) in [(0.0, 0.0), (Double(tl.width - 1), 0.0), (0.0, Double(tl.height - 1)), (Double(tl.width - 1), Double(tl.height - 1))] {
                    if let p = step.apply(cx, cy) { moved = max(moved, abs(p.x - cx), abs(p.y - cy)) } else { moved = .infinity }
                }
                outcome = LevelOutcome(residual: (wr2 / max(wsum, 1e-9)).squareRoot(), inlierFraction: Double(inliers) / Double(max(count, 1)),
                                       overlap: Double(count) / Double(n), gain: gain, offset: offset, iterations: it + 1,
                                       correlation: correlation, slope: rawSlope)
                if moved < tolerance { break }
            }
        }}}}
        return outcome
    }
}

/// The normal equations of up to 8 parameters, summed a block of points at a time in Float
/// (the outer product over the model's parameters, written as element-wise updates of contiguous
/// rows, which the optimiser vectorises and a debug build still runs quickly) and added to the
/// Double totals after each block, so the totals keep Double precision over many points.
struct NormalEquations {
    static let block = 256
    /// 64 floats of matrix (row-major), 8 of right-hand side, 8 for the point being added.
    let sums: UnsafeMutablePointer<Float>
    var pending = 0

    init() {
        sums = .allocate(capacity: 80)
        sums.initialize(repeating: 0, count: 80)
    }

    func deallocate() { sums.deallocate() }

    /// Adds `weight * v v^T` and `weight * residual * v` for `v = (v0, ..., v7)`, over its first
    /// `n` components (2 for a shift: the rest stay 0).
    @inline(__always) mutating func add(_ v0: Float, _ v1: Float, _ v2: Float, _ v3: Float, _ v4: Float, _ v5: Float,
                                        _ v6: Float, _ v7: Float, weight: Float, residual: Float, n: Int) {
        let a = sums, b = sums + 64, v = sums + 72
        v[0] = v0; v[1] = v1; v[2] = v2; v[3] = v3; v[4] = v4; v[5] = v5; v[6] = v6; v[7] = v7
        // (while loops: a debug build's range iterators would cost more than the arithmetic)
        var q = 0
        while q < n {
            let wq = weight * v[q]
            let row = a + q &* 8
            var u = 0
            while u < n { row[u] += wq * v[u]; u &+= 1 }
            b[q] += residual * wq
            q &+= 1
        }
        pending &+= 1
    }

    /// Adds the block to `a` (the upper triangle, row by row: 36 values) and `b` (8), and clears it.
    mutating func flush(into a: UnsafeMutablePointer<Double>, _ b: UnsafeMutablePointer<Double>) {
        guard pending > 0 else { return }
        var k = 0
        for q in 0..<8 {
            for u in q..<8 { a[k] += Double(sums[q * 8 + u]); k &+= 1 }
            b[q] += Double(sums[64 + q])
        }
        sums.update(repeating: 0, count: 72)
        pending = 0
    }
}

/// Sums per-strip normal equations under a lock.
final class LockedAccumulator: @unchecked Sendable {
    private let lock = NSLock()
    private var a = [Double](repeating: 0, count: 44), b = [Double](repeating: 0, count: 8), wr2 = 0.0, wsum = 0.0, inliers = 0
    func add(_ pa: [Double], _ pb: [Double], _ r2: Double, _ w: Double, _ n: Int) {
        lock.lock(); defer { lock.unlock() }
        for i in a.indices { a[i] += pa[i] }
        for i in b.indices { b[i] += pb[i] }
        wr2 += r2; wsum += w; inliers += n
    }
    var totals: ([Double], [Double], Double, Double, Int) { lock.lock(); defer { lock.unlock() }; return (a, b, wr2, wsum, inliers) }
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
