import CKernels
import EvanescoCore
import Foundation

/// Local alignment after the global registration (HDR+-style coarse-to-fine tiles): the frame is
/// warped into the reference by its homography, and for every cell of a grid a residual shift is
/// found, coarse to fine over the luma pyramid, by a zero-mean block search at the coarsest level
/// and robust Lucas-Kanade (shift plus brightness offset, Huber weights) at the finer ones. Cells
/// without texture take their neighbours' shifts, and a median over each cell's neighbours after
/// every level removes outliers (a moving object cannot drag its cell far from the others).
public enum LocalAligner {
    /// A reference pyramid prepared for local alignment: each level's gradients are computed the
    /// first time a frame is matched at that level and kept for the burst's other frames. Safe to
    /// share between threads.
    public final class Reference: @unchecked Sendable {
        /// The reference's luma pyramid.
        public let pyramid: GreyPyramid
        private let lock = NSLock()
        private var planes: [Int: ReferencePlane] = [:]

        /// - Parameter pyramid: The reference's pyramid.
        public init(_ pyramid: GreyPyramid) { self.pyramid = pyramid }

        func plane(_ level: Int) -> ReferencePlane {
            lock.lock()
            defer { lock.unlock() }
            if let p = planes[level] { return p }
            let p = ReferencePlane(pyramid.levels[level])
            planes[level] = p
            return p
        }
    }

    /// Estimates the field of `frame` against a reference pyramid used once (see ``Reference``
    /// for a reference that many frames are matched against).
    public static func estimate(
        reference: GreyPyramid, frame: GreyPyramid, homography: Homography,
        options: LocalAlignmentOptions = LocalAlignmentOptions(), finestLevel: Int? = nil,
        continuing: LocalAlignment? = nil
    ) -> LocalAlignment {
        estimate(
            reference: Reference(reference), frame: frame, homography: homography, options: options,
            finestLevel: finestLevel,
            continuing: continuing)
    }

    /// Estimates the field of `frame` against `reference` given its homography, coarse to fine
    /// down to `finestLevel` (the whole pyramid when nil).
    ///
    /// - Parameters:
    ///   - prepared: The reference (its pyramid, and the gradients of each level the burst's
    ///     frames have been matched at).
    ///   - frame: The frame's pyramid (the same levels).
    ///   - homography: Frame pixels to reference pixels.
    ///   - options: Tuning.
    ///   - finestLevel: Stop at this pyramid level (a coarse look for parallax), or go to the finest.
    ///   - continuing: A coarser estimate of this frame with these options (a coarse look) to
    ///     continue from, at the level below it, instead of starting again at the coarsest.
    /// - Returns: The field in full-resolution reference pixels and its statistics.
    public static func estimate(
        reference prepared: Reference, frame: GreyPyramid, homography: Homography,
        options: LocalAlignmentOptions = LocalAlignmentOptions(), finestLevel: Int? = nil,
        continuing: LocalAlignment? = nil
    ) -> LocalAlignment {
        let reference = prepared.pyramid
        let W = reference.width, H = reference.height
        let cell = options.cellSize(width: W, height: H)
        let finest = max(reference.baseLevel, min(finestLevel ?? 0, reference.levels.count - 1))
        var coarsest = finest
        while coarsest + 1 < min(reference.levels.count, frame.levels.count)
            && options.searchRadius / Float(1 << coarsest) > 3
        { coarsest += 1 }
        // A continued estimate goes on from where it stopped (its field already holds the block
        // search's answer, at whatever level that ran).
        let resume = continuing.flatMap { c in
            c.field.cell == cell && c.level > finest && c.textured.count == c.field.dx.count ? c : nil
        }
        var field = resume?.field ?? DisplacementField(width: W, height: H, cell: cell)
        var textured = resume?.textured ?? [Bool](repeating: false, count: field.dx.count)
        let start = resume.map { $0.level - 1 } ?? coarsest
        var finestPlanes: LevelPlanes? = nil
        var finestStructure: [SIMD3<Float>] = []
        var noiseRatio: Float? = nil
        for level in stride(from: start, through: finest, by: -1) {
            let s = 1 / Float(1 << level)
            let ref = reference.levels[level], fr = frame.levels[level]
            guard ref.width >= 8, ref.height >= 8, fr.width == ref.width, fr.height == ref.height else { continue }
            let planes = LevelPlanes(
                reference: prepared.plane(level), frame: fr, homography: homography.rescaled(by: Double(s)))
            let searches = level == coarsest && resume == nil
            if searches { planes.prepareBoxSums() }
            let windowRadius = options.windowRadius > 0 ? options.windowRadius : max(12, cell)
            // A coarse look's last level takes 4 (the median of its field decides whether a frame
            // has parallax); a full estimate's finest, `options.iterations`; the others 3.
            let step = LevelStep(
                scale: s, radius: max(4, Int((Float(windowRadius) * s).rounded())),
                search: searches ? min(Int((options.searchRadius * s).rounded(.up)), options.blockSearchRadius) : 0,
                iterations: level != finest ? 3 : finestLevel != nil ? 4 : options.iterations,
                limit: options.searchRadius * s + 2)
            let structure = planes.reference.structures(
                cell: cell, scale: s, radius: step.radius, columns: field.columns, rows: field.rows)
            if level == finest { (finestPlanes, finestStructure) = (planes, structure) }
            let texture = structure.map(Window.texture)
            let o = measure(field, planes: planes, step: step, texture: texture)
            accept(o, into: &field, textured: &textured, mismatch: searches ? options.searchMismatch : options.mismatch)
            if level == finest, finestLevel != nil {
                noiseRatio = noiseUnits(field, textured: textured, measured: o, texture: texture, step: step)
            }
        }
        let fineCell = options.detailCellSize(width: W, height: H)
        guard finestLevel == nil, fineCell > 0, fineCell < cell, let planes = finestPlanes else {
            return LocalAlignment(
                field: field, statistics: statistics(field, textured, noiseUnits: noiseRatio), level: finest,
                textured: textured, structure: finestStructure)
        }
        var fine = DisplacementField(width: W, height: H, cell: fineCell)
        return detail(field, textured: textured, planes: planes, level: finest, into: &fine, options: options)
    }

    /// The median over the textured cells of `field`'s displacement length over what noise alone
    /// would give the cell's measurement at this level: the match's residual (RMS grey, both
    /// frames' noise) over the root of the window's pixels times its texture (the structure
    /// tensor's smaller eigenvalue, per pixel), the Lucas-Kanade shift's deviation in its weakest
    /// direction. Nil without a textured cell.
    static func noiseUnits(
        _ field: DisplacementField, textured: [Bool], measured o: LevelMeasurement, texture: [Float], step: LevelStep
    ) -> Float? {
        let side = Float(2 * step.radius + 1), pixels = side * side / Float(Window.rowStep)
        var ratios: [Float] = []
        for i in field.dx.indices where textured[i] && o.residual[i].isFinite && texture[i] > 0 {
            let noise = o.residual[i] / (texture[i] * pixels).squareRoot() / step.scale
            let length = (field.dx[i] * field.dx[i] + field.dy[i] * field.dy[i]).squareRoot()
            if noise > 0 { ratios.append(length / noise) }
        }
        return ratios.isEmpty ? nil : Selection.median(&ratios)
    }

    /// How one pyramid level is measured: its scale, window radius, block-search radius (0: none),
    /// Lucas-Kanade iterations and the largest shift allowed, all in that level's pixels.
    struct LevelStep {
        let scale: Float, radius: Int, search: Int, iterations: Int, limit: Float
    }

    /// One level's measurement of every cell: its shift (full-resolution pixels), whether it
    /// matched, its residual and confidence.
    struct LevelMeasurement {
        var dx: [Float], dy: [Float], textured: [Bool], residual: [Float], confidence: [Float]
    }

    /// Measures every cell of `field` at one level: from the field's shift, a block search (at the
    /// coarsest level) and robust Lucas-Kanade; a cell whose window has no pixel keeps its shift.
    static func measure(
        _ field: DisplacementField, planes: LevelPlanes, step: LevelStep, texture: [Float]
    ) -> LevelMeasurement {
        let cols = field.columns, cell = field.cell, s = step.scale
        let dxIn = field.dx, dyIn = field.dy
        let out = LockedBox(
            LevelMeasurement(
                dx: dxIn, dy: dyIn, textured: [Bool](repeating: false, count: dxIn.count),
                residual: [Float](repeating: .infinity, count: dxIn.count),
                confidence: [Float](repeating: 0, count: dxIn.count)))
        StripExecutor.forEachStrip(rows: field.rows, minimumRows: 1) { rowRange in
            var local: [(Int, Float, Float, Bool, Float, Float)] = []
            for j in rowRange {
                for i in 0..<cols {
                    let idx = j * cols + i
                    let (cx, cy) = Window.centre(i, j, cell: cell, scale: s)
                    var d = SIMD2(dxIn[idx], dyIn[idx]) * s
                    let win = Window(planes, cx: cx, cy: cy, radius: step.radius)
                    guard win.count > 0 else {
                        local.append((idx, dxIn[idx], dyIn[idx], false, .infinity, 0))
                        continue
                    }
                    if step.search > 0 { d = win.blockSearch(around: d, radius: step.search) }
                    let (refined, ok, residual, confidence) = win.lucasKanade(
                        from: d, iterations: step.iterations, texture: texture[idx])
                    if ok { d = refined }
                    if (d * d).sum() > step.limit * step.limit { d = d / (d * d).sum().squareRoot() * step.limit }
                    local.append((idx, d.x / s, d.y / s, ok, residual, confidence))
                }
            }
            out.update { o in
                for (idx, x, y, ok, res, conf) in local {
                    o.dx[idx] = x
                    o.dy[idx] = y
                    o.textured[idx] = ok
                    o.residual[idx] = res
                    o.confidence[idx] = conf
                }
            }
        }
        return out.value
    }

    /// Takes one level's measurement into the field: cells this level measured take the new value;
    /// cells without texture here keep what the coarser level found. Cells that match nowhere
    /// (something moved through them in this frame or in the reference) are not measurements:
    /// they take their neighbours' shifts. Then the field is smoothed by confidence and median-filtered.
    static func accept(
        _ o: LevelMeasurement, into field: inout DisplacementField, textured: inout [Bool], mismatch: MismatchLimit
    ) {
        let limit = mismatch.limit(o.residual.indices.filter { o.textured[$0] }.map { o.residual[$0] })
        for i in field.dx.indices {
            if o.textured[i] {
                field.dx[i] = o.dx[i]
                field.dy[i] = o.dy[i]
                textured[i] = o.residual[i] <= limit
            }
        }
        fillUntextured(&field, textured)
        smoothByConfidence(&field, confidence: textured.indices.map { textured[$0] ? o.confidence[$0] : 0 })
        medianFilter(&field)
    }

    /// Detail: a finer grid refined at the finest level with small windows, each starting from
    /// the coarse field (and held near it by the prior), so the field follows depth changes
    /// that the large windows average out. A cell without texture or coverage keeps the coarse value.
    /// `fine` is the finer grid (zero), filled from the coarse field and then refined.
    static func detail(
        _ field: DisplacementField, textured: [Bool], planes: LevelPlanes, level finest: Int,
        into fine: inout DisplacementField, options: LocalAlignmentOptions
    ) -> LocalAlignment {
        let s = 1 / Float(1 << finest), fineCell = fine.cell
        for j in 0..<fine.rows {
            for i in 0..<fine.columns {
                let v = field.value(
                    atX: Int(((Float(i) + 0.5) * Float(fineCell) - 0.5).rounded()),
                    y: Int(((Float(j) + 0.5) * Float(fineCell) - 0.5).rounded()))
                fine.dx[j * fine.columns + i] = v.x
                fine.dy[j * fine.columns + i] = v.y
            }
        }
        let radius = max(
            4,
            Int((Float(options.detailWindowRadius > 0 ? options.detailWindowRadius : fineCell) * s).rounded()))
        let structure = planes.reference.structures(
            cell: fineCell, scale: s, radius: radius, columns: fine.columns, rows: fine.rows)
        let (results, skipped) = measureDetail(
            fine, coarse: field, textured: textured, planes: planes,
            step: LevelStep(scale: s, radius: radius, search: 0, iterations: options.detailIterations, limit: 0),
            texture: structure.map(Window.texture), flatLimit: options.detailFlatLimit)
        // As at the coarse levels, a cell whose window still does not match is no measurement.
        let limit = options.detailMismatch.limit(results.map(\.2))
        var measured = [Bool](repeating: false, count: fine.dx.count)
        for (idx, d, residual) in results where residual <= limit {
            fine.dx[idx] = d.x
            fine.dy[idx] = d.y
            measured[idx] = true
        }
        for idx in skipped { measured[idx] = true }
        medianFilter(&fine)
        // The statistics describe the field applied, over the cells the detail pass measured.
        return LocalAlignment(
            field: fine, statistics: statistics(fine, measured), level: finest, textured: measured, structure: structure
        )
    }

    /// The detail pass's measurements: each fine cell's refined shift and residual where its window
    /// matched, and the fine cells that keep their coarse cell's measured value. Where the coarse
    /// field is flat there is no depth edge to follow: a fine cell in a coarse cell whose
    /// neighbourhood is flat keeps the coarse value, measured if the coarse cell was.
    static func measureDetail(
        _ fine: DisplacementField, coarse field: DisplacementField, textured: [Bool], planes: LevelPlanes,
        step: LevelStep, texture: [Float], flatLimit: Float
    ) -> (results: [(Int, SIMD2<Float>, Float)], skipped: [Int]) {
        let cols = fine.columns, fineCell = fine.cell, cell = field.cell, s = step.scale
        let results = LockedBox([(Int, SIMD2<Float>, Float)]())
        let flat = flatCells(field, limit: flatLimit)
        let skipped = LockedBox([Int]())
        StripExecutor.forEachStrip(rows: fine.rows, minimumRows: 1) { rowRange in
            var local: [(Int, SIMD2<Float>, Float)] = []
            var skip: [Int] = []
            for j in rowRange {
                for i in 0..<cols {
                    let idx = j * cols + i
                    let ci = min(field.columns - 1, i * fineCell / cell), cj = min(field.rows - 1, j * fineCell / cell)
                    if flat[cj * field.columns + ci] {
                        if textured[cj * field.columns + ci] { skip.append(idx) }
                        continue
                    }
                    let (cx, cy) = Window.centre(i, j, cell: fineCell, scale: s)
                    let win = Window(planes, cx: cx, cy: cy, radius: step.radius)
                    guard win.count > 0 else { continue }
                    let (d, ok, residual, _) = win.lucasKanade(
                        from: SIMD2(fine.dx[idx], fine.dy[idx]) * s, iterations: step.iterations,
                        texture: texture[idx], prior: 0.5)
                    if ok { local.append((idx, d / s, residual)) }
                }
            }
            results.update { $0.append(contentsOf: local) }
            skipped.update { $0.append(contentsOf: skip) }
        }
        return (results.value, skipped.value)
    }

    /// Per cell, whether the field varies by at most `limit` pixels (in x and in y) over the
    /// cell's 3 x 3 neighbourhood (all false when `limit` is not above 0).
    static func flatCells(_ f: DisplacementField, limit: Float) -> [Bool] {
        var flat = [Bool](repeating: false, count: f.dx.count)
        guard limit > 0 else { return flat }
        for j in 0..<f.rows {
            for i in 0..<f.columns {
                var lo = SIMD2<Float>(repeating: .infinity), hi = -lo
                for y in max(0, j - 1)...min(f.rows - 1, j + 1) {
                    for x in max(0, i - 1)...min(f.columns - 1, i + 1) {
                        let v = SIMD2(f.dx[y * f.columns + x], f.dy[y * f.columns + x])
                        lo = pointwiseMin(lo, v)
                        hi = pointwiseMax(hi, v)
                    }
                }
                flat[j * f.columns + i] = (hi - lo).max() <= limit
            }
        }
        return flat
    }

    /// Untextured cells take the median of their textured neighbours, growing outwards.
    static func fillUntextured(_ f: inout DisplacementField, _ textured: [Bool]) {
        if !textured.contains(true) {
            f.dx = f.dx.map { _ in 0 }
            f.dy = f.dy.map { _ in 0 }
            return
        }
        fillFromNeighbours(&f.dx, known: textured, columns: f.columns, rows: f.rows)
        fillFromNeighbours(&f.dy, known: textured, columns: f.columns, rows: f.rows)
    }

    /// Each unknown cell of a `columns` x `rows` grid takes the median of its known 3x3
    /// neighbours, ring by ring outwards from the known cells (a cell filled in one ring counts as
    /// known from the next); cells no known cell reaches keep their value.
    static func fillFromNeighbours(_ values: inout [Float], known: [Bool], columns: Int, rows: Int) {
        var known = known
        var pending = (0..<known.count).filter { !known[$0] }
        while !pending.isEmpty {
            var next: [Int] = [], updates: [(Int, Float)] = []
            for idx in pending {
                let i = idx % columns, j = idx / columns
                var near: [Float] = []
                for jj in max(0, j - 1)...min(rows - 1, j + 1) {
                    for ii in max(0, i - 1)...min(columns - 1, i + 1) where known[jj * columns + ii] {
                        near.append(values[jj * columns + ii])
                    }
                }
                if near.isEmpty { next.append(idx) } else { updates.append((idx, Selection.median(&near))) }
            }
            if updates.isEmpty { break }
            for (idx, v) in updates {
                values[idx] = v
                known[idx] = true
            }
            pending = next
        }
    }

    /// Each cell becomes the confidence-weighted mean of itself (weighted 4x) and its 8
    /// neighbours: a cell with little texture follows its textured neighbours, a textured cell
    /// mostly keeps its own measurement.
    static func smoothByConfidence(_ f: inout DisplacementField, confidence: [Float]) {
        let c = f.columns, r = f.rows
        var dx = f.dx, dy = f.dy
        for j in 0..<r {
            for i in 0..<c {
                var sx: Float = 0, sy: Float = 0, sw: Float = 0
                for jj in max(0, j - 1)...min(r - 1, j + 1) {
                    for ii in max(0, i - 1)...min(c - 1, i + 1) {
                        let k = jj * c + ii
                        let w = min(confidence[k], 50) * (k == j * c + i ? 4 : 1) + 1e-3
                        sx += w * f.dx[k]
                        sy += w * f.dy[k]
                        sw += w
                    }
                }
                dx[j * c + i] = sx / sw
                dy[j * c + i] = sy / sw
            }
        }
        f.dx = dx
        f.dy = dy
    }

    /// Median of each component over each cell's 3x3 neighbourhood (on the grid's edges, over
    /// the neighbours it has: the upper median of 4 or 6).
    static func medianFilter(_ f: inout DisplacementField) {
        guard f.columns * f.rows > 1 else { return }
        f.dx = median3x3(f.dx, columns: f.columns, rows: f.rows)
        f.dy = median3x3(f.dy, columns: f.columns, rows: f.rows)
    }

    /// The 3x3 median filter of a `columns` x `rows` grid. Inside, each column's three values
    /// (rows j-1...j+1) are sorted once, and a cell's median is the median of the largest of its
    /// three columns' minima, the median of their middles and the smallest of their maxima (the
    /// median of 9 in 10 comparisons once the columns are sorted, 4 cells at a time, the last
    /// few one at a time); the edges select among the neighbours they have.
    static func median3x3(_ v: [Float], columns c: Int, rows r: Int) -> [Float] {
        var out = v
        var xs: [Float] = []
        func edge(_ i: Int, _ j: Int) {
            xs.removeAll(keepingCapacity: true)
            for jj in max(0, j - 1)...min(r - 1, j + 1) {
                for ii in max(0, i - 1)...min(c - 1, i + 1) { xs.append(v[jj * c + ii]) }
            }
            out[j * c + i] = Selection.median(&xs)
        }
        guard c >= 3, r >= 3 else {
            for j in 0..<r { for i in 0..<c { edge(i, j) } }
            return out
        }
        for i in 0..<c {
            edge(i, 0)
            edge(i, r - 1)
        }
        for j in 1..<(r - 1) {
            edge(0, j)
            edge(c - 1, j)
        }
        var lo = [Float](repeating: 0, count: c), mid = lo, hi = lo
        v.withUnsafeBufferPointer { vp in
            out.withUnsafeMutableBufferPointer { op in
                lo.withUnsafeMutableBufferPointer { lp in
                    mid.withUnsafeMutableBufferPointer { mp in
                        hi.withUnsafeMutableBufferPointer { hp in
                            let v = vp.baseAddress!, o = op.baseAddress!, l = lp.baseAddress!, m = mp.baseAddress!,
                                h = hp.baseAddress!
                            for j in 1..<(r - 1) {
                                let a = v + (j - 1) * c, b = a + c, d = b + c
                                var i = 0
                                while i + 4 <= c {
                                    let (x, y, z) = sort3(load4(a + i), load4(b + i), load4(d + i))
                                    store4(x, l + i)
                                    store4(y, m + i)
                                    store4(z, h + i)
                                    i += 4
                                }
                                while i < c {
                                    let (x, y, z) = sort3(
                                        SIMD4(repeating: a[i]), SIMD4(repeating: b[i]), SIMD4(repeating: d[i]))
                                    l[i] = x[0]
                                    m[i] = y[0]
                                    h[i] = z[0]
                                    i += 1
                                }
                                let row = o + j * c
                                i = 1
                                while i + 4 <= c - 1 {
                                    let low = vmax(vmax(load4(l + i - 1), load4(l + i)), load4(l + i + 1))
                                    let high = vmin(vmin(load4(h + i - 1), load4(h + i)), load4(h + i + 1))
                                    store4(
                                        median3(low, median3(load4(m + i - 1), load4(m + i), load4(m + i + 1)), high),
                                        row + i)
                                    i += 4
                                }
                                while i < c - 1 {
                                    let low = max(max(l[i - 1], l[i]), l[i + 1]),
                                        high = min(min(h[i - 1], h[i]), h[i + 1])
                                    row[i] = median3(low, median3(m[i - 1], m[i], m[i + 1]), high)
                                    i += 1
                                }
                            }
                        }
                    }
                }
            }
        }
        return out
    }

    @inline(__always) private static func sort3(_ a: SIMD4<Float>, _ b: SIMD4<Float>, _ c: SIMD4<Float>) -> (
        SIMD4<Float>, SIMD4<Float>, SIMD4<Float>
    ) {
        let a1 = vmin(a, b), b1 = vmax(a, b)
        let b2 = vmin(b1, c), c2 = vmax(b1, c)
        return (vmin(a1, b2), vmax(a1, b2), c2)
    }

    @inline(__always) private static func median3(_ a: SIMD4<Float>, _ b: SIMD4<Float>, _ c: SIMD4<Float>) -> SIMD4<
        Float
    > {
        vmax(vmin(a, b), vmin(vmax(a, b), c))
    }

    @inline(__always) private static func median3(_ a: Float, _ b: Float, _ c: Float) -> Float {
        max(min(a, b), min(max(a, b), c))
    }

    /// The field's statistics over its textured cells; `noiseUnits`, a coarse look's median in
    /// noise units (``noiseUnits(_:textured:measured:texture:step:)``), when known.
    static func statistics(_ f: DisplacementField, _ textured: [Bool], noiseUnits: Float? = nil) -> LocalFieldStatistics
    {
        var lengths: [Float] = []
        for i in f.dx.indices where textured[i] { lengths.append((f.dx[i] * f.dx[i] + f.dy[i] * f.dy[i]).squareRoot()) }
        lengths.sort()
        let mean = lengths.isEmpty ? 0 : lengths.reduce(0, +) / Float(lengths.count)
        let p90 = lengths.isEmpty ? 0 : lengths[min(lengths.count - 1, Int(Float(lengths.count) * 0.9))]
        let p50 = lengths.isEmpty ? 0 : lengths[lengths.count / 2]
        func r(_ v: Float) -> Float { (v * 1000).rounded() / 1000 }
        return LocalFieldStatistics(
            cell: f.cell, cells: f.dx.count, texturedCells: lengths.count, meanPx: r(mean), p50Px: r(p50),
            p90Px: r(p90), maxPx: r(lengths.last ?? 0), p50Noise: noiseUnits.map(r))
    }
}
