import CKernels
import EvanescoCore
import Foundation

/// Tuning of ``LocalAligner``.
public struct LocalAlignmentOptions: Sendable, Equatable {
    /// Cell size of the displacement field in full-resolution pixels (0: 16 up to 2 MP, 32 above).
    public var cell = 0
    /// Radius of the window each cell is matched with, in full-resolution pixels (0: the cell
    /// size, at least 12); at coarse levels it never drops under 4 level pixels.
    public var windowRadius = 0
    /// Cell size of the detail pass at the finest level (0: half the cell size; -1: no detail pass).
    public var detailCell = 0
    /// Window radius of the detail pass (0: the detail cell size, so a window spans about two
    /// cells each way). Measured on 30 parallax bursts made with `make_burst.py --disparity
    /// --parallax` (aloe and motorcycle, 4 to 12 px) with 4 iterations, against 1.5 cells and 5:
    /// the gap to the bursts without parallax the same (median 0.699 -> 0.700 dB, worst 0.965 ->
    /// 0.958 dB; the worst single burst -0.02 dB), the whole command 6 % faster (median over the
    /// 30). The smaller windows had lost 0.1-0.3 dB before the burst's fields were made
    /// consistent (``ParallaxConsistency``): that pass now replaces what they mismeasure.
    public var detailWindowRadius = 0
    /// Largest displacement searched, in full-resolution pixels.
    public var searchRadius: Float = 12
    /// The block search at the coarsest level tries whole-pixel shifts up to this many of that
    /// level's pixels from the homography's prediction (and never beyond ``searchRadius``);
    /// Lucas-Kanade then moves each cell up to 2 of a level's pixels at every level. Measured: 1
    /// (9 shifts) aligns motorcycle-parallax and decides auto on every burst here as 3 (49 shifts,
    /// as ``searchRadius`` allowed at level 2) did, in a tenth less alignment time.
    public var blockSearchRadius = 1
    /// A frame counts as having parallax when the median of its textured cells' displacement
    /// lengths, measured coarsely at pyramid level L, reaches this many pixels of level L (so
    /// `threshold * 2^L` full-resolution pixels: a coarse level measures in its own pixels).
    /// Measured at level 2 on the synthetic bursts: at most 0.041 level pixels without parallax,
    /// at least 0.098 with up to 6 px of it; pug-handheld (12 MP, level 3): 0.043 without.
    public var parallaxThreshold: Float = 0.07
    /// Lucas-Kanade iterations per cell at the finest level of the coarse-to-fine pass (coarser
    /// levels take 3; the detail pass refines further).
    public var iterations = 2
    /// Lucas-Kanade iterations per cell of the detail pass. Its small windows often straddle a
    /// depth edge, and each iteration's robust weights push the other depth's pixels further
    /// out: measured on motorcycle-parallax with 1.5-cell windows, 3 -> 5 iterations was +0.10 dB
    /// and a fifth fewer error pixels, 8 another +0.04 dB at 60 % more time; with one-cell windows
    /// (``detailWindowRadius``) and the consistency pass, 5 -> 4 is within 0.01 dB on 30 parallax
    /// bursts, and once the depth sweep took a closer look at the cells few frames measured,
    /// 4 -> 3 was too (the gap's median 0.585 -> 0.586 dB, worst 0.854 -> 0.852, no burst 0.005 dB
    /// worse), paying for part of that look (about 2 % of a small burst's time).
    public var detailIterations = 3
    /// The detail pass skips the fine cells of a coarse cell whose 3 x 3 neighbourhood varies by at
    /// most this (pixels, in x and in y; 0: refine every fine cell): no depth edge there for it to
    /// follow, and they keep the coarse value. Measured on 30 parallax bursts made with
    /// `make_burst.py --disparity --parallax` (aloe and motorcycle, 4 to 12 px): at 0.1 px the
    /// same PSNR (median +0.003 dB, worst -0.002 dB) and 15 % less alignment time; at 0.3 px,
    /// -0.06 dB on one burst; at 0.5 px, -0.56 dB.
    public var detailFlatLimit: Float = 0.1

    public init() {}

    /// The detail pass's cell size for a `width` x `height` frame (0: none).
    public func detailCellSize(width: Int, height: Int) -> Int {
        detailCell < 0 ? 0 : detailCell > 0 ? detailCell : cellSize(width: width, height: height) / 2
    }

    /// The cell size for a `width` x `height` frame.
    public func cellSize(width: Int, height: Int) -> Int {
        cell > 0 ? cell : (width * height > 2_000_000 ? 32 : 16)
    }
}

/// The displacement field's statistics, over the cells with texture (`local` in reports).
public struct LocalFieldStatistics: Sendable, Codable, Equatable {
    /// Cell size in pixels.
    public var cell: Int
    /// Cells in the field.
    public var cells: Int
    /// Cells with enough texture to be measured (the rest take their neighbours' values).
    public var texturedCells: Int
    /// Mean displacement length, pixels.
    public var meanPx: Float
    /// Median displacement length, pixels.
    public var p50Px: Float
    /// 90th percentile of the displacement lengths, pixels.
    public var p90Px: Float
    /// Largest displacement length, pixels.
    public var maxPx: Float
}

/// A frame's local alignment: the field and what it measured.
public struct LocalAlignment: Sendable {
    /// The correction on top of the frame's homography (reference pixels).
    public var field: DisplacementField
    /// Its statistics.
    public var statistics: LocalFieldStatistics
    /// The pyramid level the field was measured down to, and which cells had texture there: what
    /// a finer estimate continues from (its `continuing` argument).
    var level = 0
    var textured: [Bool] = []
    /// Per cell of ``field``: the reference's gradient structure tensor over the cell's window
    /// (means of gx^2, gx gy, gy^2; empty when not known), which says in which directions the
    /// cell's measurement can be trusted (along an edge it cannot).
    public var structure: [SIMD3<Float>] = []
    /// Per cell of ``field``: whether it was measured (false: it took its neighbours' value, or
    /// matched nowhere).
    public var measured: [Bool] { textured }
}

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
        for level in stride(from: start, through: finest, by: -1) {
            let s = 1 / Float(1 << level)
            let ref = reference.levels[level], fr = frame.levels[level]
            guard ref.width >= 8, ref.height >= 8, fr.width == ref.width, fr.height == ref.height else { continue }
            let planes = LevelPlanes(
                reference: prepared.plane(level), frame: fr, homography: homography.rescaled(by: Double(s)))
            let searches = level == coarsest && resume == nil
            if searches { planes.prepareBoxSums() }
            if level == finest { finestPlanes = planes }
            let windowRadius = options.windowRadius > 0 ? options.windowRadius : max(12, cell)
            let radius = max(4, Int((Float(windowRadius) * s).rounded()))
            let search = searches ? min(Int((options.searchRadius * s).rounded(.up)), options.blockSearchRadius) : 0
            // A coarse look's last level takes 4 (the median of its field decides whether a frame
            // has parallax); a full estimate's finest, `options.iterations`; the others 3.
            let iterations = level != finest ? 3 : finestLevel != nil ? 4 : options.iterations
            let cols = field.columns
            let dxIn = field.dx, dyIn = field.dy
            let out = LockedBox(
                (
                    dx: dxIn, dy: dyIn, textured: textured, residual: [Float](repeating: .infinity, count: dxIn.count),
                    confidence: [Float](repeating: 0, count: dxIn.count)
                ))
            let structure = planes.reference.structures(
                cell: cell, scale: s, radius: radius, columns: cols, rows: field.rows)
            let texture = structure.map(Window.texture)
            if level == finest { finestStructure = structure }
            StripExecutor.forEachStrip(rows: field.rows, minimumRows: 1) { rowRange in
                var local: [(Int, Float, Float, Bool, Float, Float)] = []
                for j in rowRange {
                    for i in 0..<cols {
                        let idx = j * cols + i
                        let (cx, cy) = Window.centre(i, j, cell: cell, scale: s)
                        var d = SIMD2(dxIn[idx], dyIn[idx]) * s
                        let win = Window(planes, cx: cx, cy: cy, radius: radius)
                        guard win.count > 0 else {
                            local.append((idx, dxIn[idx], dyIn[idx], false, .infinity, 0))
                            continue
                        }
                        if search > 0 { d = win.blockSearch(around: d, radius: search) }
                        let (refined, ok, residual, confidence) = win.lucasKanade(
                            from: d, iterations: iterations, texture: texture[idx])
                        if ok { d = refined }
                        let limit = options.searchRadius * s + 2
                        if (d * d).sum() > limit * limit { d = d / (d * d).sum().squareRoot() * limit }
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
            let o = out.value
            // Cells this level measured take the new value; cells without texture here keep what
            // the coarser level found. Cells that match nowhere (something moved through them
            // in this frame or in the reference) are not measurements: they take their
            // neighbours' shifts.
            var res = o.residual.enumerated().filter { o.textured[$0.offset] && $0.element.isFinite }.map(\.element)
            let limit = res.isEmpty ? Float.infinity : max(6, 2.5 * Selection.median(&res))
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
        // Detail: a finer grid refined at the finest level with small windows, each starting from
        // the coarse field (and held near it by the prior), so the field follows depth changes
        // that the large windows average out. A cell without texture or coverage keeps the coarse value.
        let fineCell = options.detailCellSize(width: W, height: H)
        guard finestLevel == nil, fineCell > 0, fineCell < cell, let planes = finestPlanes else {
            return LocalAlignment(
                field: field, statistics: statistics(field, textured), level: finest, textured: textured,
                structure: finestStructure)
        }
        let s = 1 / Float(1 << finest)
        var fine = DisplacementField(width: W, height: H, cell: fineCell)
        for j in 0..<fine.rows {
            for i in 0..<fine.columns {
                let v = field.value(
                    atX: Int(((Float(i) + 0.5) * Float(fineCell) - 0.5).rounded()),
                    y: Int(((Float(j) + 0.5) * Float(fineCell) - 0.5).rounded()))
                fine.dx[j * fine.columns + i] = v.x
                fine.dy[j * fine.columns + i] = v.y
            }
        }
        let coarseField = fine
        let radius = max(
            4,
            Int((Float(options.detailWindowRadius > 0 ? options.detailWindowRadius : fineCell) * s).rounded()))
        let cols = fine.columns
        let results = LockedBox([(Int, SIMD2<Float>, Float)]())
        let structure = planes.reference.structures(
            cell: fineCell, scale: s, radius: radius, columns: cols, rows: fine.rows)
        let texture = structure.map(Window.texture)
        // Where the coarse field is flat there is no depth edge to follow: a fine cell in a
        // coarse cell whose neighbourhood is flat keeps the coarse value, measured if the coarse
        // cell was.
        let flat = flatCells(field, limit: options.detailFlatLimit)
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
                    let win = Window(planes, cx: cx, cy: cy, radius: radius)
                    guard win.count > 0 else { continue }
                    let (d, ok, residual, _) = win.lucasKanade(
                        from: SIMD2(coarseField.dx[idx], coarseField.dy[idx]) * s, iterations: options.detailIterations,
                        texture: texture[idx], prior: 0.5)
                    if ok { local.append((idx, d / s, residual)) }
                }
            }
            results.update { $0.append(contentsOf: local) }
            skipped.update { $0.append(contentsOf: skip) }
        }
        // As at the coarse levels, a cell whose window still does not match is no measurement.
        var residuals = results.value.map(\.2).filter(\.isFinite)
        let limit = residuals.isEmpty ? Float.infinity : max(6, 2.5 * Selection.median(&residuals))
        var measured = [Bool](repeating: false, count: fine.dx.count)
        for (idx, d, residual) in results.value where residual <= limit {
            fine.dx[idx] = d.x
            fine.dy[idx] = d.y
            measured[idx] = true
        }
        for idx in skipped.value { measured[idx] = true }
        medianFilter(&fine)
        // The statistics describe the field applied, over the cells the detail pass measured.
        return LocalAlignment(
            field: fine, statistics: statistics(fine, measured), level: finest, textured: measured, structure: structure
        )
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

    static func statistics(_ f: DisplacementField, _ textured: [Bool]) -> LocalFieldStatistics {
        var lengths: [Float] = []
        for i in f.dx.indices where textured[i] { lengths.append((f.dx[i] * f.dx[i] + f.dy[i] * f.dy[i]).squareRoot()) }
        lengths.sort()
        let mean = lengths.isEmpty ? 0 : lengths.reduce(0, +) / Float(lengths.count)
        let p90 = lengths.isEmpty ? 0 : lengths[min(lengths.count - 1, Int(Float(lengths.count) * 0.9))]
        let p50 = lengths.isEmpty ? 0 : lengths[lengths.count / 2]
        func r(_ v: Float) -> Float { (v * 1000).rounded() / 1000 }
        return LocalFieldStatistics(
            cell: f.cell, cells: f.dx.count, texturedCells: lengths.count, meanPx: r(mean), p50Px: r(p50),
            p90Px: r(p90), maxPx: r(lengths.last ?? 0))
    }
}

/// One level of the reference prepared for the cell searches: its pixels and central-difference
/// gradients (0 on the one-pixel border), computed once for every frame matched against it.
final class ReferencePlane: @unchecked Sendable {
    let width: Int, height: Int
    let ref: UnsafeMutablePointer<Float>, gx: UnsafeMutablePointer<Float>, gy: UnsafeMutablePointer<Float>

    init(_ image: Image<Float>) {
        precondition(image.channels == 1)
        let w = image.width, h = image.height, n = w * h
        width = w
        height = h
        ref = .allocate(capacity: max(1, n))
        gx = .allocate(capacity: max(1, n))
        gy = .allocate(capacity: max(1, n))
        ref.initialize(repeating: 0, count: max(1, n))
        image.samples.withUnsafeBufferPointer { if n > 0 { ref.update(from: $0.baseAddress!, count: n) } }
        gx.initialize(repeating: 0, count: max(1, n))
        gy.initialize(repeating: 0, count: max(1, n))
        if w >= 3 && h >= 3 {
            for y in 1..<(h - 1) {
                for x in 1..<(w - 1) {
                    let i = y &* w &+ x
                    gx[i] = 0.5 * (ref[i &+ 1] - ref[i &- 1])
                    gy[i] = 0.5 * (ref[i &+ w] - ref[i &- w])
                }
            }
        }
    }
    deinit {
        ref.deallocate()
        gx.deallocate()
        gy.deallocate()
    }

    private let lock = NSLock()
    private var structures: [SIMD2<Int>: [SIMD3<Float>]] = [:]

    /// The gradient structure tensor (``Window/structure(_:x0:y0:x1:y1:)``) of every cell's
    /// window of a grid of `cell` full-resolution pixels (`columns` x `rows` cells) at this level
    /// (scale `s`) with `radius`: it depends on the reference alone, so the first frame matched
    /// computes it and the burst's others reuse it.
    func structures(cell: Int, scale s: Float, radius: Int, columns: Int, rows: Int) -> [SIMD3<Float>] {
        lock.lock()
        defer { lock.unlock() }
        let key = SIMD2(cell, radius)
        if let t = structures[key], t.count == columns * rows { return t }
        var t = [SIMD3<Float>](repeating: .zero, count: columns * rows)
        for j in 0..<rows {
            for i in 0..<columns {
                let (cx, cy) = Window.centre(i, j, cell: cell, scale: s)
                let (x0, y0, x1, y1) = Window.bounds(width: width, height: height, cx: cx, cy: cy, radius: radius)
                t[j * columns + i] = Window.structure(self, x0: x0, y0: y0, x1: x1, y1: y1)
            }
        }
        structures[key] = t
        return t
    }
}

/// One pyramid level prepared for the cell searches: the reference, its central-difference
/// gradients (computed once, not once per window and iteration), the frame warped into it, and a
/// summed table of the warped frame's invalid pixels, so a window can tell at once that every tap
/// it reads is valid and take the vectorised path.
final class LevelPlanes: @unchecked Sendable {
    let width: Int, height: Int
    /// The reference level and its gradients (shared by every frame's planes at this level).
    let reference: ReferencePlane
    /// Reference, its x and y gradients (0 on the border), and the warped frame: width x height.
    let ref: UnsafeMutablePointer<Float>, gx: UnsafeMutablePointer<Float>, gy: UnsafeMutablePointer<Float>
    let frame: UnsafeMutablePointer<Float>
    /// The warped frame's validity (non-zero: valid).
    let valid: UnsafeMutablePointer<UInt8>
    /// invalid[(y * (width + 1)) + x]: invalid pixels in rows < y, columns < x.
    let invalid: UnsafeMutablePointer<Int32>

    /// `image` (a level of a frame's pyramid) warped by `homography` (that level's) onto the
    /// reference level, and its validity, written straight into the planes.
    init(reference: ReferencePlane, frame image: Image<Float>, homography: Homography) {
        precondition(image.channels == 1)
        let w = reference.width, h = reference.height, n = w * h
        width = w
        height = h
        self.reference = reference
        ref = reference.ref
        gx = reference.gx
        gy = reference.gy
        frame = .allocate(capacity: n)
        valid = .allocate(capacity: n)
        invalid = .allocate(capacity: (w + 1) * (h + 1))
        let sampler = RowSampler(frame: image, homography: homography, interpolation: .bilinear)
        let shared = UncheckedSendable((frame, valid))
        StripExecutor.forEachStrip(rows: h, minimumRows: 16) { rows in
            let (frame, valid) = shared.value
            for y in rows { sampler.sampleRow(y: y, x0: 0, x1: w, into: frame + y * w, valid: valid + y * w) }
        }
        let W = w + 1
        invalid.initialize(repeating: 0, count: W * (h + 1))
        for y in 0..<h {
            var row: Int32 = 0
            for x in 0..<w {
                row &+= valid[y &* w &+ x] == 0 ? 1 : 0
                invalid[(y &+ 1) &* W &+ x &+ 1] = invalid[y &* W &+ x &+ 1] &+ row
            }
        }
    }

    /// Summed tables of the warped frame and its square ((width + 1) x (height + 1), Double), for
    /// the block search's window sums; made by ``prepareBoxSums()`` on the level that searches.
    private(set) var frameSums: UnsafeMutablePointer<Double>? = nil, squareSums: UnsafeMutablePointer<Double>? = nil

    deinit {
        frame.deallocate()
        valid.deallocate()
        invalid.deallocate()
        frameSums?.deallocate()
        squareSums?.deallocate()
    }

    /// Makes ``frameSums`` and ``squareSums`` (call before sharing the planes between threads).
    func prepareBoxSums() {
        guard frameSums == nil else { return }
        let W = width + 1, n = W * (height + 1)
        let s1 = UnsafeMutablePointer<Double>.allocate(capacity: n),
            s2 = UnsafeMutablePointer<Double>.allocate(capacity: n)
        s1.initialize(repeating: 0, count: n)
        s2.initialize(repeating: 0, count: n)
        for y in 0..<height {
            var r1 = 0.0, r2 = 0.0
            for x in 0..<width {
                let v = Double(frame[y * width + x])
                r1 += v
                r2 += v * v
                s1[(y + 1) * W + x + 1] = s1[y * W + x + 1] + r1
                s2[(y + 1) * W + x + 1] = s2[y * W + x + 1] + r2
            }
        }
        frameSums = s1
        squareSums = s2
    }

    /// The warped frame's sum and sum of squares over columns x0..<x1, rows y0..<y1 (inside);
    /// ``prepareBoxSums()`` must have run.
    @inline(__always) func boxSums(x0: Int, y0: Int, x1: Int, y1: Int) -> (Float, Float) {
        guard let s1 = frameSums, let s2 = squareSums else {
            preconditionFailure("LevelPlanes.boxSums before prepareBoxSums()")
        }
        let W = width + 1
        let a = y0 * W + x0, b = y0 * W + x1, c = y1 * W + x0, d = y1 * W + x1
        return (Float(s1[d] - s1[b] - s1[c] + s1[a]), Float(s2[d] - s2[b] - s2[c] + s2[a]))
    }

    /// Whether every warped-frame pixel in columns x0..<x1, rows y0..<y1 is inside and valid.
    func allValid(x0: Int, y0: Int, x1: Int, y1: Int) -> Bool {
        guard x0 >= 0, y0 >= 0, x1 <= width, y1 <= height, x0 < x1, y0 < y1 else { return false }
        let W = width + 1
        return invalid[y1 * W + x1] - invalid[y0 * W + x1] - invalid[y1 * W + x0] + invalid[y0 * W + x0] == 0
    }
}

@inline(__always) private func load4(_ p: UnsafePointer<Float>) -> SIMD4<Float> {
    UnsafeRawPointer(p).loadUnaligned(as: SIMD4<Float>.self)
}
@inline(__always) private func load4(_ p: UnsafeMutablePointer<Float>) -> SIMD4<Float> {
    UnsafeRawPointer(p).loadUnaligned(as: SIMD4<Float>.self)
}
@inline(__always) private func store4(_ v: SIMD4<Float>, _ p: UnsafeMutablePointer<Float>) {
    UnsafeMutableRawPointer(p).storeBytes(of: v, as: SIMD4<Float>.self)
}
// The standard library's pointwiseMin/Max are generic calls here, not one instruction each.
@inline(__always) private func vmin(_ a: SIMD4<Float>, _ b: SIMD4<Float>) -> SIMD4<Float> {
    a.replacing(with: b, where: b .< a)
}
@inline(__always) private func vmax(_ a: SIMD4<Float>, _ b: SIMD4<Float>) -> SIMD4<Float> {
    a.replacing(with: b, where: b .> a)
}

/// One cell's window: reference pixels, their gradients, and the warped frame to match.
struct Window {
    let L: LevelPlanes
    let x0: Int, y0: Int, x1: Int, y1: Int
    var count: Int { (x1 - x0) * (y1 - y0) }

    /// The pixels within `radius` of the (possibly half-integer) centre, symmetric about it, so
    /// that a shift varying across the window is measured at the cell's centre. The one-pixel
    /// border, where the gradients are not defined, is left out.
    init(_ L: LevelPlanes, cx: Float, cy: Float, radius: Int) {
        self.L = L
        (x0, y0, x1, y1) = Window.bounds(width: L.width, height: L.height, cx: cx, cy: cy, radius: radius)
    }

    /// The window's columns x0..<x1 and rows y0..<y1 in a `width` x `height` level.
    static func bounds(width: Int, height: Int, cx: Float, cy: Float, radius: Int) -> (Int, Int, Int, Int) {
        let r = Float(radius)
        let x0 = max(1, Int((cx - r).rounded(.up))), y0 = max(1, Int((cy - r).rounded(.up)))
        return (
            x0, y0, max(x0, min(width - 1, Int((cx + r).rounded(.down)) + 1)),
            max(y0, min(height - 1, Int((cy + r).rounded(.down)) + 1))
        )
    }

    /// The centre of cell (`i`, `j`) of a grid of `cell` full-resolution pixels, in the pixels
    /// of a level at scale `s`.
    @inline(__always) static func centre(_ i: Int, _ j: Int, cell: Int, scale s: Float) -> (Float, Float) {
        ((Float(i) + 0.5) * Float(cell) * s - 0.5, (Float(j) + 0.5) * Float(cell) * s - 0.5)
    }

    /// The reference's gradient structure tensor over the window's rows the sums visit, per
    /// pixel: the means of gx^2, gx gy and gy^2 (0 for an empty window).
    static func structure(_ ref: ReferencePlane, x0: Int, y0: Int, x1: Int, y1: Int) -> SIMD3<Float> {
        guard x1 > x0, y1 > y0 else { return .zero }
        let w = ref.width
        var xx4 = SIMD4<Float>(), xy4 = SIMD4<Float>(), yy4 = SIMD4<Float>()
        var sxx: Float = 0, sxy: Float = 0, syy: Float = 0
        for y in stride(from: y0, to: y1, by: Window.rowStep) {
            let gxr = ref.gx + y * w, gyr = ref.gy + y * w
            var x = x0
            while x + 4 <= x1 {
                let gx = load4(gxr + x), gy = load4(gyr + x)
                xx4 += gx * gx
                xy4 += gx * gy
                yy4 += gy * gy
                x += 4
            }
            while x < x1 {
                let gx = gxr[x], gy = gyr[x]
                sxx += gx * gx
                sxy += gx * gy
                syy += gy * gy
                x += 1
            }
        }
        sxx += xx4.sum()
        sxy += xy4.sum()
        syy += yy4.sum()
        let n = Float((x1 - x0) * Window.rows(y0, y1))
        return SIMD3(sxx, sxy, syy) / n
    }

    /// The smaller eigenvalue of a structure tensor (``structure(_:x0:y0:x1:y1:)``): the window's
    /// texture.
    static func texture(_ s: SIMD3<Float>) -> Float {
        let tr = s.x + s.z, det = s.x * s.z - s.y * s.y
        return tr / 2 - max(0, tr * tr / 4 - det).squareRoot()
    }

    /// The integer shift within `radius` of `d` (rounded) that best matches, zero-mean SSD
    /// (the level's ``LevelPlanes/prepareBoxSums()`` must have run).
    func blockSearch(around d: SIMD2<Float>, radius: Int) -> SIMD2<Float> {
        let w = L.width, r = L.ref, p = L.frame, v = L.valid
        let bx = Int(d.x.rounded()), by = Int(d.y.rounded())
        var best = Float.infinity, bestShift = d
        let n = Float(count)
        var refMean: Float = 0
        for y in y0..<y1 { for x in x0..<x1 { refMean += r[y * w + x] } }
        refMean /= n
        let mean4 = SIMD4<Float>(repeating: refMean)
        for sy in (by - radius)...(by + radius) {
            for sx in (bx - radius)...(bx + radius) {
                // Every index below stays inside the window's rows and columns of both images.
                guard y0 + sy >= 0, y1 - 1 + sy < L.height, x0 + sx >= 0, x1 - 1 + sx < w else { continue }
                var sum: Float = 0, sum2: Float = 0, cross: Float = 0, valid = 0
                if L.allValid(x0: x0 + sx, y0: y0 + sy, x1: x1 + sx, y1: y1 + sy) {
                    // Every pixel valid: the frame's sums come from the level's summed tables,
                    // and only the cross term is summed here.
                    var c4 = SIMD4<Float>()
                    (sum, sum2) = L.boxSums(x0: x0 + sx, y0: y0 + sy, x1: x1 + sx, y1: y1 + sy)
                    for y in y0..<y1 {
                        let ro = r + y * w, fo = p + (y + sy) * w + sx
                        var x = x0
                        while x + 4 <= x1 {
                            c4 += load4(fo + x) * (load4(ro + x) - mean4)
                            x += 4
                        }
                        while x < x1 {
                            cross += fo[x] * (ro[x] - refMean)
                            x += 1
                        }
                    }
                    cross += c4.sum()
                    valid = count
                } else {
                    for y in y0..<y1 {
                        let ro = y * w, fo = (y + sy) * w + sx
                        for x in x0..<x1 where v[fo + x] != 0 {
                            let f = p[fo + x], g = r[ro + x] - refMean
                            sum += f
                            sum2 += f * f
                            cross += f * g
                            valid += 1
                        }
                    }
                }
                guard Float(valid) > 0.6 * n else { continue }
                // Zero-mean SSD up to terms that do not depend on the shift, per valid pixel.
                let fm = sum / Float(valid)
                let cost =
                    (sum2 - fm * sum - 2 * cross) / Float(valid) + 0.5
                    * Float((sx - bx) * (sx - bx) + (sy - by) * (sy - by))
                if cost < best {
                    best = cost
                    bestShift = SIMD2(Float(sx), Float(sy))
                }
            }
        }
        return bestShift
    }

    /// Gauss-Newton on shift + brightness offset with Huber then Tukey weights, reference
    /// gradients (the inverse-compositional approximation), held near `start` by a prior.
    /// Returns whether the window had texture and coverage, the match's residual (RMS grey
    /// levels) and the texture `minEig` it was given (the
    /// window's ``texture(_:x0:y0:x1:y1:)``, the same for every frame: the reference's).
    func lucasKanade(
        from start: SIMD2<Float>, iterations: Int, texture minEig: Float, prior priorWeight: Float = 0.05
    ) -> (SIMD2<Float>, Bool, Float, Float) {
        guard count > 0 else { return (start, false, .infinity, 0) }
        let n = Float((x1 - x0) * Window.rows(y0, y1))
        guard minEig > 0.05 else { return (start, false, .infinity, 0) }
        // A prior toward the start (the coarser level's answer): a window with little texture in
        // one direction moves little in it, instead of wandering.
        let prior: Float = priorWeight * n
        var d = start, bias: Float = 0
        // The residual of the last iteration's accumulation (at the shift it started from: the
        // steps have converged to a small fraction of a pixel by then).
        var lastResidual: Float = .infinity
        for it in 0..<iterations {
            // Huber weights first, then Tukey's: once the window is nearly aligned, pixels of
            // something that moved carry no weight at all.
            var a = accumulate(d, bias, tukey: it >= 1, residual: true)
            guard Float(a.used) > 0.6 * n else { return (start, false, .infinity, 0) }
            lastResidual = (a.squared_residual / Float(a.used)).squareRoot()
            // The prior adds prior * |d + step - start|^2.
            a.a00 += prior
            a.a11 += prior
            a.b0 += prior * (d.x - start.x)
            a.b1 += prior * (d.y - start.y)
            // Solve the 3x3 system (symmetric) by Cramer's rule; the step is minus the solution.
            let c00 = a.a11 * a.a22 - a.a12 * a.a12, c01 = a.a02 * a.a12 - a.a01 * a.a22,
                c02 = a.a01 * a.a12 - a.a02 * a.a11
            let det3 = a.a00 * c00 + a.a01 * c01 + a.a02 * c02
            guard abs(det3) > 1e-9 else { return (start, false, .infinity, 0) }
            let c11 = a.a00 * a.a22 - a.a02 * a.a02, c12 = a.a01 * a.a02 - a.a00 * a.a12,
                c22 = a.a00 * a.a11 - a.a01 * a.a01
            let sx = (c00 * a.b0 + c01 * a.b1 + c02 * a.b2) / det3
            let sy = (c01 * a.b0 + c11 * a.b1 + c12 * a.b2) / det3
            let sb = (c02 * a.b0 + c12 * a.b1 + c22 * a.b2) / det3
            d -= SIMD2(sx, sy)
            bias += sb
            // One level refines by little: the coarser level had it within a pixel or so.
            let moved = d - start
            if (moved * moved).sum() > 4 { d = start + moved / (moved * moved).sum().squareRoot() * 2 }
            if sx * sx + sy * sy < 1e-4 { break }
        }
        guard d.x.isFinite, d.y.isFinite else { return (start, false, .infinity, 0) }
        return (d, true, lastResidual, minEig)
    }

    static let huber: Float = 8, tukeyC: Float = 12

    /// Lucas-Kanade sums every other row of a window: a 33 x 33 window still has 561 pixels,
    /// plenty for a shift and an offset, at half the cost per iteration (measured on
    /// motorcycle-parallax with the detail pass's 5 iterations: the same PSNR to 0.02 dB).
    static let rowStep = 2

    /// The rows of `y0..<y1` the sums visit.
    @inline(__always) static func rows(_ y0: Int, _ y1: Int) -> Int { y1 > y0 ? (y1 - y0 + rowStep - 1) / rowStep : 0 }

    /// The weighted normal equations of shift + offset at shift `d` over the window's pixels
    /// whose four bilinear taps are valid, and the sum of squared (capped) residuals (zero unless
    /// `residual`). The shift is the same for the whole window: one set of bilinear weights, one
    /// offset.
    func accumulate(_ d: SIMD2<Float>, _ bias: Float, tukey: Bool, residual: Bool = true) -> evn_lk_sums {
        let w = L.width, h = L.height
        let fx = d.x.rounded(.down), fy = d.y.rounded(.down)
        guard fx.magnitude < 1e6, fy.magnitude < 1e6 else { return evn_lk_sums() }
        let ox = Int(fx), oy = Int(fy), tx = d.x - fx, ty = d.y - fy
        // The window's rows and columns whose four taps are inside the level.
        let ya = max(y0, -oy), yb = min(y1, h - 1 - oy), xa = max(x0, -ox), xb = min(x1, w - 1 - ox)
        guard ya < yb, xa < xb else { return evn_lk_sums() }
        // Eight pixels at a time (CKernels, with AVX2 where the CPU has it); the validity test
        // only where some tap is invalid.
        let allValid = L.allValid(x0: xa + ox, y0: ya + oy, x1: xb + ox + 1, y1: yb + oy + 1)
        var window = evn_lk_window(
            ref: L.ref, gx: L.gx, gy: L.gy, frame: L.frame, stride: w, frame_offset: oy * w + ox,
            valid: allValid ? nil : UnsafePointer(L.valid),
            x0: xa, x1: xb, y0: ya, y1: yb, row_step: Window.rowStep,
            w00: (1 - tx) * (1 - ty), w01: tx * (1 - ty), w10: (1 - tx) * ty, w11: tx * ty,
            bias: bias, tukey: tukey ? 1 : 0, huber: Window.huber, inverse_tukey_c: 1 / Window.tukeyC,
            residual: residual ? 1 : 0)
        var s = evn_lk_sums()
        evn_lk_sums_window(&window, &s)
        return s
    }
}
