import CKernels
import EvanescoCore

/// Makes a burst's local fields agree with one scene. Parallax is one depth map seen from several
/// camera positions: a camera that moved by `t_k` sees a point of relative inverse depth `rho`
/// shifted by about `rho * t_k`, on top of an affine error of its homography (which registered
/// its own idea of the dominant plane). So every frame's field is, cell by cell,
/// `d_k(c) = rho(c) t_k + A_k (x_c, y_c, 1)`: one number per cell for the whole burst, a few per
/// frame.
///
/// Each frame's field is measured against the reference alone, so where something covers the
/// reference no frame can be measured, and where something covers a frame that frame cannot:
/// those cells take their neighbours' values or match the wrong thing. Measured on bursts made
/// with `make_burst.py --disparity --parallax`, 95-100 % of what our alignment lost against the
/// true fields lay where the reference was covered. Fitted jointly (alternating least squares with
/// Cauchy weights), the model tells a measurement that fits the burst from one that does not:
/// - a cell where most frames disagree with the model (the reference is covered there, or the
///   scene moved) takes `rho` from its consistent neighbours, and every frame the model's value;
/// - a frame whose cell disagrees where the others agree (something covers that frame, so it
///   could not measure the cell, or it matched something that moved) takes the model's value
///   there;
/// - everything else moves toward the model by how close it already is (`blendScale`): small
///   differences are each frame's noise, which the model, fitted to the whole burst, averages out.
///
/// The model's terms per frame are its motion and a quadratic in the position (`basis(rho:x:y:)`),
/// fitted with each cell's gradient structure as the metric (`metricFloor`).
///
/// When the model does not explain the fields (a scene that deforms, or a burst too short to tell),
/// the fields are returned as they were.
public enum ParallaxConsistency {
    /// What the pass did.
    public struct Summary: Sendable, Equatable {
        /// Frames whose fields took part.
        public var frames: Int
        /// Cells per field.
        public var cells: Int
        /// Cells where most frames disagreed with the model (taken from their neighbours).
        public var inconsistentCells: Int
        /// Single frame cells replaced by the model's value (in consistent cells).
        public var replacedFrameCells: Int
        /// The median distance between a measurement and the model, pixels.
        public var medianResidualPx: Float
        /// Whether the model was applied (false: it did not explain the fields, nothing changed).
        public var applied: Bool
    }

    /// Cauchy scale of the fit's weights, pixels.
    static let scale: Float = 0.3
    /// A cell whose frames' median distance to the model is above this is inconsistent, pixels.
    static let cellLimit: Float = 0.5
    /// A frame's cell further than this from the model (in a consistent cell) is replaced, pixels.
    static let frameLimit: Float = 1.0
    /// The model is used only when the median distance of all measurements to it is below this.
    static let modelLimit: Float = 0.35
    /// A measurement at distance r from the model keeps r^2 / (r^2 + blendScale^2) of its
    /// difference from it (pixels): at 0.1 px a fifth, at 0.4 px four fifths. Each frame measures a
    /// cell with its own noise (a median 0.10 px from the true field on motorcycle-12-1's textured
    /// cells), the model pools the burst (0.06 px). Measured on the 30 parallax bursts: every
    /// burst gained (+0.007 to +0.10 dB; the gap's median 0.721 -> 0.689 dB); 0.1 and 0.4 px gained
    /// less, the model alone (0) lost up to 0.2 dB on aloe, whose cells straddle depths.
    static let blendScale: Float = 0.2
    /// The depth fit weighs each frame's measurement by the reference's structure tensor over the
    /// cell (scaled to trace 2) with this much of every direction kept: along an edge a window
    /// measures only across it. Measured on the 30 parallax bursts: the gap's median 0.689 ->
    /// 0.683 dB, every burst the same or better (0.3: the same to 0.003 dB).
    static let metricFloor: Float = 0.1

    /// The fields made consistent (nil entries stay nil; fields on another grid are left alone).
    ///
    /// - Parameters:
    ///   - fields: Each frame's field (nil: none).
    ///   - measured: Per frame, which of its cells were measured (``LocalAlignment/measured``).
    ///     Given, a cell that most frames measured is never taken from its neighbours: a cell that
    ///     holds two depths (a leaf before a wall) is measured well by every frame and still fits
    ///     one depth badly; where the reference is covered, most frames could not measure.
    /// - Complexity: O(iterations x frames x cells), a few milliseconds for 20 frames of 6000 cells.
    public static func consolidate(
        _ fields: [DisplacementField?], measured: [[Bool]?]? = nil
    ) -> ([DisplacementField?], Summary?) {
        let r = consolidated(fields, measured: measured)
        return (r.fields, r.summary)
    }

    /// The fitted scene, for ``sweep(_:model:samplers:)``.
    public struct Model: Sendable {
        /// The frames (indices into the fields) the model describes.
        public let members: [Int]
        /// The grid: cells of `cell` pixels, `columns` x `rows` of them.
        public let cell: Int, columns: Int, rows: Int
        /// Relative inverse depth per cell (cells few frames measured: from their neighbours).
        public var rho: [Float]
        /// Per cell, how many of the members measured it.
        public let measuredBy: [Int]
        /// Per cell, the median distance of the members' fields from the model, pixels.
        public let misfit: [Float]
        let affine: [(SIMD8<Float>, SIMD8<Float>)]
        let px: [Float], py: [Float]

        /// Member `k`'s displacement at cell `c` for a depth `r`.
        @inline(__always) func displacement(_ k: Int, _ c: Int, rho r: Float) -> SIMD2<Float> {
            ParallaxConsistency.displacement(affine[k], rho: r, x: px[c], y: py[c])
        }
    }

    /// A frame's displacement at a cell centre (`x`, `y`, scaled as the fit's columns) for a
    /// depth `rho`, from the frame's coefficients of `basis(rho:x:y:)`: the model's one
    /// formula, used by the fit, its residuals and the sweep alike.
    @inline(__always) static func displacement(
        _ a: (SIMD8<Float>, SIMD8<Float>), rho: Float, x: Float, y: Float
    ) -> SIMD2<Float> {
        let v = basis(rho: rho, x: x, y: y)
        return SIMD2((a.0 * v).sum(), (a.1 * v).sum())
    }

    /// A frame's motion: the displacement one unit of depth adds (the coefficients of depth in
    /// `basis(rho:x:y:)`).
    @inline(__always) static func motion(_ a: (SIMD8<Float>, SIMD8<Float>)) -> SIMD2<Float> {
        SIMD2(a.0[0], a.1[0])
    }

    /// The model's terms at a cell: depth, then the frame's homography error as a quadratic in
    /// the position (1, x, y, x^2, xy, y^2; the eighth lane is 0). A homography's error is not
    /// affine: its perspective terms bend the field by x^2 and xy. Measured on motorcycle-12-1
    /// (textured cells off depth edges, against the true fields): an affine model missed the truth
    /// by a median 0.150 px, more than each frame's own measurements (0.098 px); of that error,
    /// a per-frame quadratic explains all but 0.076 px.
    @inline(__always) static func basis(rho: Float, x: Float, y: Float) -> SIMD8<Float> {
        SIMD8(rho, 1, x, y, x * x, x * y, y * y, 0)
    }

    /// Terms of the basis besides depth.
    static let terms = 7

    /// ``consolidate(_:measured:)`` with the model it applied (nil when it applied none).
    public static func consolidated(
        _ fields: [DisplacementField?], measured: [[Bool]?]? = nil, structure: [SIMD3<Float>]? = nil
    ) -> (fields: [DisplacementField?], summary: Summary?, model: Model?) {
        guard let first = fields.compactMap({ $0 }).first else { return (fields, nil, nil) }
        let members = fields.indices.filter {
            fields[$0].map { $0.cell == first.cell && $0.columns == first.columns && $0.rows == first.rows } ?? false
        }
        guard members.count >= 3, var scene = Scene(fields, members: members, structure: structure) else {
            return (fields, nil, nil)
        }
        let C = scene.cells, K = members.count
        let residuals = scene.residuals()
        var all = residuals
        let medianResidual = Selection.kthOfMagnitudes(&all, all.count / 2)
        var summary = Summary(
            frames: K, cells: C, inconsistentCells: 0, replacedFrameCells: 0, medianResidualPx: medianResidual,
            applied: false)
        guard medianResidual <= modelLimit else { return (fields, summary, nil) }

        // Cells most frames disagree on take rho from consistent neighbours (growing outwards).
        let flags = members.map { f in
            measured.flatMap { f < $0.count ? $0[f] : nil }.flatMap { $0.count == C ? $0 : nil }
        }
        let verdict = cellVerdicts(residuals, flags: flags, frames: K, cells: C)
        summary.inconsistentCells = verdict.consistent.filter { !$0 }.count
        guard summary.inconsistentCells < C else { return (fields, summary, nil) }
        LocalAligner.fillFromNeighbours(
            &scene.rho, known: verdict.consistent, columns: scene.columns, rows: scene.rows)
        var out = fields
        let rhoRange = scene.rhoRange(consistent: verdict.consistent)
        for (k, f) in members.enumerated() {
            out[f] = scene.apply(
                to: fields[f]!, frame: k, residuals: residuals, consistent: verdict.consistent, measured: flags[k],
                rhoRange: rhoRange, replaced: &summary.replacedFrameCells)
        }
        summary.applied = true
        return (
            out, summary,
            Model(
                members: members, cell: first.cell, columns: scene.columns, rows: scene.rows, rho: scene.rho,
                measuredBy: verdict.measuredBy, misfit: verdict.misfit, affine: scene.affine, px: scene.px,
                py: scene.py)
        )
    }

    /// Per cell: the median of the frames' residuals (`misfit`), how many frames measured it, and
    /// whether it is consistent (misfit within ``cellLimit``, or measured by most frames).
    static func cellVerdicts(
        _ residuals: [Float], flags: [[Bool]?], frames K: Int, cells C: Int
    ) -> (consistent: [Bool], measuredBy: [Int], misfit: [Float]) {
        var consistent = [Bool](repeating: true, count: C)
        var measuredBy = [Int](repeating: 0, count: C)
        var misfit = [Float](repeating: 0, count: C)
        misfit.withUnsafeMutableBufferPointer { fit in
            consistent.withUnsafeMutableBufferPointer { out in
                measuredBy.withUnsafeMutableBufferPointer { counts in
                    StripExecutor.forEachStrip(rows: C, minimumRows: Scene.cellStrip) { cells in
                        var r = [Float](repeating: 0, count: K)
                        for c in cells {
                            for k in 0..<K { r[k] = residuals[k * C + c] }
                            var measuredBy = 0
                            for f in flags where f?[c] ?? false { measuredBy += 1 }
                            fit[c] = Selection.median(&r)
                            out[c] = fit[c] <= cellLimit || 2 * measuredBy > K
                            counts[c] = measuredBy
                        }
                    }
                }
            }
        }
        return (consistent, measuredBy, misfit)
    }

    /// The members' fields fitted by one depth per cell and a quadratic per frame.
    struct Scene {
        /// Cells per strip of the cell loops: a strip is worth a thread's wake-up.
        static let cellStrip = 512
        let columns: Int, rows: Int, frames: Int
        var cells: Int { columns * rows }
        /// Every frame's field in one flat array per component (frame k's cells at k * C).
        let dxAll: [Float], dyAll: [Float]
        /// Cell centres, scaled to about [-1, 1] (the affine terms' columns).
        let px: [Float], py: [Float]
        /// Relative inverse depth per cell.
        var rho: [Float]
        /// Per frame, the coefficients of `basis(rho:x:y:)` in its field's x and y components.
        let affine: [(SIMD8<Float>, SIMD8<Float>)]

        /// Fits the members' fields, or nil when the fit fails. The loops are split over the
        /// cores: by frame where a frame's sums are taken, by cell where a cell's are. Each sum runs
        /// in the same order whichever core takes it, so the result does not depend on the number
        /// of threads.
        init?(_ fields: [DisplacementField?], members: [Int], structure: [SIMD3<Float>]?) {
            let first = fields[members[0]]!
            let cols = first.columns, rows = first.rows, C = cols * rows, K = members.count
            var dxAll = [Float](repeating: 0, count: K * C), dyAll = dxAll
            for (k, f) in members.enumerated() {
                dxAll.replaceSubrange((k * C)..<((k + 1) * C), with: fields[f]!.dx)
                dyAll.replaceSubrange((k * C)..<((k + 1) * C), with: fields[f]!.dy)
            }
            let half = Float(max(cols, rows)) / 2
            let px = (0..<C).map { (Float($0 % cols) + 0.5 - Float(cols) / 2) / half }
            let py = (0..<C).map { (Float($0 / cols) + 0.5 - Float(rows) / 2) / half }
            // Start: rho from the fields' first singular vector (power iterations), no affine part.
            var rho = [Float](repeating: 1, count: C)
            var affine = [(SIMD8<Float>, SIMD8<Float>)](repeating: (.zero, .zero), count: K)
            var weight = [Float](repeating: 1, count: K * C)
            let metric = Self.metric(structure, cells: C)
            let fitted: Bool = dxAll.withUnsafeBufferPointer { DX in
                dyAll.withUnsafeBufferPointer { DY in
                    rho.withUnsafeMutableBufferPointer { R in
                        affine.withUnsafeMutableBufferPointer { A in
                            weight.withUnsafeMutableBufferPointer { W in
                                Fit(
                                    dx: DX, dy: DY, px: px, py: py, rho: R, affine: A, weight: W, K: K, C: C,
                                    cellStrip: Self.cellStrip, metric: metric
                                ).run()
                            }
                        }
                    }
                }
            }
            guard fitted else { return nil }
            (columns, self.rows, frames, self.dxAll, self.dyAll) = (cols, rows, K, dxAll, dyAll)
            (self.px, self.py, self.rho, self.affine) = (px, py, rho, affine)
        }

        /// Each cell's structure tensor scaled to trace 2 (the plain distance for a window with
        /// the same texture every way), with ``metricFloor`` of every direction kept; empty
        /// without a structure for every cell.
        static func metric(_ structure: [SIMD3<Float>]?, cells C: Int) -> [SIMD3<Float>] {
            structure.flatMap { s in
                s.count == C
                    ? s.map { v in
                        let tr = v.x + v.z
                        guard tr > 0, tr.isFinite else { return SIMD3(1, 0, 1) }
                        return v * (2 / tr) * (1 - metricFloor) + SIMD3(metricFloor, 0, metricFloor)
                    } : nil
            } ?? []
        }

        /// Each frame's distance from the model at each cell, pixels (frame k's cells at k * C).
        func residuals() -> [Float] {
            let C = cells
            var all = [Float](repeating: 0, count: frames * C)
            all.withUnsafeMutableBufferPointer { out in
                StripExecutor.forEachStrip(rows: frames, minimumRows: 1) { frames in
                    for k in frames {
                        let m = modelField(affine, k, rho: rho, px: px, py: py)
                        for c in 0..<C {
                            let ex = dxAll[k * C + c] - m.x[c], ey = dyAll[k * C + c] - m.y[c]
                            out[k * C + c] = (ex * ex + ey * ey).squareRoot()
                        }
                    }
                }
            }
            return all
        }

        /// The range of the consistent cells' depths (1st to 99th percentile).
        func rhoRange(consistent: [Bool]) -> Float {
            var consistentRho = (0..<cells).filter { consistent[$0] }.map { rho[$0] }
            consistentRho.sort()
            return consistentRho.isEmpty
                ? 0 : consistentRho[consistentRho.count * 99 / 100] - consistentRho[consistentRho.count / 100]
        }

        /// Frame `k`'s field made consistent: cells replaced by the model where the cell is
        /// inconsistent or the frame's measurement is implausibly far from it, else pulled toward
        /// it by how close it is. Adds the replaced consistent cells to `replaced`.
        func apply(
            to field: DisplacementField, frame k: Int, residuals: [Float], consistent: [Bool], measured: [Bool]?,
            rhoRange: Float, replaced: inout Int
        ) -> DisplacementField {
            let C = cells
            var field = field
            // No parallax moves a frame's cell further from the model than its motion times the
            // burst's range of depths: a measurement further than that matched something that
            // moved (a person crossing in that frame), measured or not.
            let motion = ParallaxConsistency.motion(affine[k])
            let bound = frameLimit + rhoRange * (motion * motion).sum().squareRoot()
            let model = modelField(affine, k, rho: rho, px: px, py: py)
            for c in 0..<C {
                let m = SIMD2(model.x[c], model.y[c]), r = residuals[k * C + c]
                if !consistent[c] || (r > frameLimit && (!(measured?[c] ?? false) || r > bound)) {
                    field.dx[c] = m.x
                    field.dy[c] = m.y
                    if consistent[c] { replaced += 1 }
                } else {
                    // Measurements near the model are mostly noise about it: the closer, the
                    // more of the model's value (which the burst's frames measured together).
                    let r2 = r * r, keep = r2 / (r2 + blendScale * blendScale)
                    field.dx[c] = m.x + keep * (field.dx[c] - m.x)
                    field.dy[c] = m.y + keep * (field.dy[c] - m.y)
                }
            }
            return field
        }
    }

    /// Frame `k`'s displacement by the model at every cell (depths `rho`, centres `px`, `py`).
    static func modelField(
        _ affine: [(SIMD8<Float>, SIMD8<Float>)], _ k: Int, rho: [Float], px: [Float], py: [Float]
    ) -> (x: [Float], y: [Float]) {
        let C = rho.count
        var mx = [Float](repeating: 0, count: C), my = mx
        affine.withUnsafeBytes { A in
            rho.withUnsafeBufferPointer { R in
                px.withUnsafeBufferPointer { X in
                    py.withUnsafeBufferPointer { Y in
                        // Only the depths, centres and coefficients are read.
                        var p = evn_parallax_cells(
                            dx: nil, dy: nil, weight: nil, rho: UnsafeMutablePointer(mutating: R.baseAddress),
                            x: X.baseAddress, y: Y.baseAddress, metric: nil,
                            coefficients: A.baseAddress?.assumingMemoryBound(to: Float.self), frames: affine.count,
                            cells: C, inverse_scale: 1)
                        evn_parallax_model(&p, k, 0, C, &mx, &my)
                    }
                }
            }
        }
        return (mx, my)
    }

    /// The alternating least squares of ``consolidate(_:measured:)`` on flat buffers: frame `k`'s
    /// cell `c` at `k * C + c`. Each frame's normal equations and each cell's depth and weights are
    /// CKernels' (`evn_parallax_normal`, `evn_parallax_depths`: eight cells a step; in Swift they
    /// took 26 of the 85 ms the pass took on a 20-frame 741x500 burst, now 4).
    struct Fit {
        let dx: UnsafeBufferPointer<Float>, dy: UnsafeBufferPointer<Float>
        let px: [Float], py: [Float]
        let rho: UnsafeMutableBufferPointer<Float>
        let affine: UnsafeMutableBufferPointer<(SIMD8<Float>, SIMD8<Float>)>
        let weight: UnsafeMutableBufferPointer<Float>
        let K: Int, C: Int, cellStrip: Int
        /// Per cell, the metric a displacement's depth part is measured in (xx, xy, yy), or empty
        /// (the plain distance).
        let metric: [SIMD3<Float>]

        /// Fits rho, each frame's motion and affine part. False when the fields are all zero or a
        /// frame's system is singular.
        func run() -> Bool { startRho() && alternate() }

        /// Each frame's motion while rho starts as the first singular vector (from then on the
        /// frames' coefficients carry it). False when the fields are all zero.
        func startRho() -> Bool {
            var motion = [SIMD2<Float>](repeating: .zero, count: K)
            return motion.withUnsafeMutableBufferPointer { t in
                for _ in 0..<12 {
                    StripExecutor.forEachStrip(rows: K, minimumRows: 1) { frames in
                        for k in frames {
                            var s = SIMD2<Float>.zero
                            for c in 0..<C { s += rho[c] * SIMD2(dx[k * C + c], dy[k * C + c]) }
                            t[k] = s
                        }
                    }
                    // rho is read by every frame above and written here: the two loops run one after the other.
                    var next = [Float](repeating: 0, count: C)
                    next.withUnsafeMutableBufferPointer { out in
                        StripExecutor.forEachStrip(rows: C, minimumRows: cellStrip) { cells in
                            for c in cells {
                                var s: Float = 0
                                for k in 0..<K { s += (t[k] * SIMD2(dx[k * C + c], dy[k * C + c])).sum() }
                                out[c] = s
                            }
                        }
                    }
                    var norm: Float = 0
                    for c in 0..<C {
                        rho[c] = next[c]
                        norm += next[c] * next[c]
                    }
                    norm = norm.squareRoot()
                    guard norm > 0 else { return false }
                    for c in 0..<C { rho[c] /= norm / Float(C).squareRoot() }
                }
                return true
            }
        }

        /// Ten rounds of: each frame's motion and affine part given rho, then rho and the weights
        /// given the frames. False when a frame's system is singular.
        func alternate() -> Bool {
            let singular = LockedBox(false)
            // The kernels read each frame's coefficients as 16 floats and each cell's metric as 4.
            precondition(MemoryLayout<(SIMD8<Float>, SIMD8<Float>)>.stride == 16 * MemoryLayout<Float>.stride)
            precondition(MemoryLayout<SIMD3<Float>>.stride == 4 * MemoryLayout<Float>.stride)
            let coefficients = UnsafeRawPointer(affine.baseAddress!).assumingMemoryBound(to: Float.self)
            return px.withUnsafeBufferPointer { X in
                py.withUnsafeBufferPointer { Y in
                    metric.withUnsafeBytes { M in
                        for _ in 0..<10 {
                            // Each frame: t_k and its affine part, by weighted least squares given rho.
                            StripExecutor.forEachStrip(rows: K, minimumRows: 1) { frames in
                                let n = ParallaxConsistency.terms
                                var normal = [Double](repeating: 0, count: n * n)
                                var rhs = [Double](repeating: 0, count: 2 * n)
                                for k in frames {
                                    var frame = evn_parallax_frame(
                                        dx: dx.baseAddress! + k * C, dy: dy.baseAddress! + k * C,
                                        weight: UnsafePointer(weight.baseAddress! + k * C),
                                        rho: UnsafePointer(rho.baseAddress!), x: X.baseAddress, y: Y.baseAddress,
                                        cells: C)
                                    evn_parallax_normal(&frame, &normal, &rhs)
                                    guard let sx = solveSymmetric(normal, Array(rhs[0..<n]), n),
                                        let sy = solveSymmetric(normal, Array(rhs[n...]), n)
                                    else {
                                        singular.update { $0 = true }
                                        continue
                                    }
                                    var ax = SIMD8<Float>.zero, ay = ax
                                    for i in 0..<n {
                                        ax[i] = Float(sx[i])
                                        ay[i] = Float(sy[i])
                                    }
                                    affine[k] = (ax, ay)
                                }
                            }
                            if singular.value { return false }
                            // Each cell: rho given the frames; then every measurement's weight.
                            StripExecutor.forEachStrip(rows: C, minimumRows: cellStrip) { cells in
                                var p = evn_parallax_cells(
                                    dx: dx.baseAddress, dy: dy.baseAddress, weight: weight.baseAddress,
                                    rho: rho.baseAddress, x: X.baseAddress, y: Y.baseAddress,
                                    metric: metric.isEmpty ? nil : M.baseAddress?.assumingMemoryBound(to: Float.self),
                                    coefficients: coefficients, frames: K, cells: C,
                                    inverse_scale: 1 / ParallaxConsistency.scale)
                                evn_parallax_depths(&p, cells.lowerBound, cells.upperBound)
                            }
                        }
                        return true
                    }
                }
            }
        }
    }
}
