import CKernels
import EvanescoCore
import Foundation

/// Tuning of ``LocalAligner``.
public struct LocalAlignmentOptions: Sendable, Equatable {
    /// Cell size of the displacement field in full-resolution pixels (0: 16 up to 2 MP, 32 above).
    public var cell = 0
    /// Radius of the window each cell is matched with, in full-resolution pixels (0: the cell
    /// size, at least 12); at coarse levels it never drops under 4 level pixels. Three quarters
    /// of the cell (12 at 16) was 4 % faster on issue 50's close-range family at the same PSNR
    /// (-0.013..+0.026 dB), but cost a raw burst with six people walking through (pug-people,
    /// aligned on its half-size grey) 1.8 dB and tripled its error pixels (0.131 -> 0.392 %):
    /// small windows let a passer-by drag a cell.
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
    /// A coarse look must also find the frame's displacements beyond what noise alone would
    /// measure: the median of its cells' lengths in units of their noise
    /// (``LocalFieldStatistics/p50Noise``) at least this; 0: no such test (the image path, as it
    /// has been). A noisy frame measures a field of noise whose length in pixels reaches
    /// ``parallaxThreshold``, and a field that follows noise misaligns it (``linear``).
    public var parallaxNoiseRatio: Float = 0
    /// Parallax is the scene's (its depth), not a frame's: once at least this share of a burst's
    /// registered frames (and two of them) found it, the frames the coarse look turned away get a
    /// field too, from a full look (the stack report's `decision` says so). A frame the hand
    /// moved less shows a median below the threshold, yet is off by pixels at depth edges. 0: each
    /// frame decides alone (the image path, as it has been).
    public var burstParallaxShare: Float = 0
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
    /// worse), paying for part of that look (about 2 % of a small burst's time). 3 -> 2 (issue
    /// 50): on the 8 close-range bursts (parallax everywhere) PSNR within 0.005 dB of 3 and pEPs
    /// the same; motorcycle-parallax 39.174 -> 39.173 dB; raw bursts aligned on their half-size
    /// grey, moto-parallax +0.045 dB and pug-people (six passers-by) +0.045 dB, two others the
    /// same to 0.001 dB; 2-4 % less CPU on the 20-frame close-range burst.
    public var detailIterations = 2
    /// The detail pass skips the fine cells of a coarse cell whose 3 x 3 neighbourhood varies by at
    /// most this (pixels, in x and in y; 0: refine every fine cell): no depth edge there for it to
    /// follow, and they keep the coarse value. Measured on 30 parallax bursts made with
    /// `make_burst.py --disparity --parallax` (aloe and motorcycle, 4 to 12 px): at 0.1 px the
    /// same PSNR (median +0.003 dB, worst -0.002 dB) and 15 % less alignment time; at 0.3 px,
    /// -0.06 dB on one burst; at 0.5 px, -0.56 dB.
    public var detailFlatLimit: Float = 0.1
    /// Which cells of a coarse-to-fine level count as measurements (``MismatchLimit``), at the
    /// levels below the block search.
    public var mismatch = MismatchLimit.pictures
    /// The same at the coarsest level, where the block search ran: a cell refused there starts
    /// every finer level from its neighbours' shift, and no finer level searches again.
    public var searchMismatch = MismatchLimit.pictures
    /// The same for the detail pass's cells.
    public var detailMismatch = MismatchLimit.pictures

    public init() {}

    /// The options for frames registered on their linear sensor data (raw bursts' 2x2-binned
    /// grey), where ``MismatchLimit/pictures``' floor refuses nothing (``MismatchLimit/linear``).
    public var linear: LocalAlignmentOptions {
        var o = self
        o.mismatch = .linear
        o.searchMismatch = .linearSearch
        o.parallaxNoiseRatio = Self.linearParallaxNoiseRatio
        o.burstParallaxShare = Self.linearBurstParallaxShare
        return o
    }

    /// ``parallaxNoiseRatio`` for raw bursts (issue 48). Frames without parallax measured medians
    /// of 0.69-1.33 noise units on the raw family's 26 bursts, frames with it 1.03-2.48 (the
    /// lowest where a frame barely moved). Above ISO 1600 the pixel threshold alone gave fields
    /// to frames with none: lens-iso6400-people took fields for all 11 frames and kept 0.199 %
    /// error pixels, 0.006 % (+1.36 dB) without them; nightcars-iso6400-people 0.242 -> 0.070 %
    /// (+1.07 dB); lens-iso3200-strong-people 0.031 -> 0.000 % (+0.68 dB). 1.3 changed no
    /// parallax burst; 1.4 cost aloe-parallax-people 0.09 dB and moto-parallax-strong-people 0.11.
    public static let linearParallaxNoiseRatio: Float = 1.3

    /// ``burstParallaxShare`` for raw bursts (issue 48). On the raw family's ten parallax bursts
    /// the coarse look found parallax in 4-10 of 9-13 frames (a third to nine tenths); on its 39
    /// without, in at most 1 of 11. The frames it turned away there had medians of 0.16-0.31 px
    /// but up to 11 px at depth edges, where a noise field's median is 0.21 px.
    public static let linearBurstParallaxShare: Float = 0.25

    /// The detail pass's cell size for a `width` x `height` frame (0: none).
    public func detailCellSize(width: Int, height: Int) -> Int {
        detailCell < 0 ? 0 : detailCell > 0 ? detailCell : cellSize(width: width, height: height) / 2
    }

    /// The cell size for a `width` x `height` frame.
    public func cellSize(width: Int, height: Int) -> Int {
        cell > 0 ? cell : (width * height > 2_000_000 ? 32 : 16)
    }
}

/// When a cell's window matched nothing: its residual (RMS grey levels at its shift) exceeds
/// `max(floor, factor x the median over the level's textured cells)`. Something moved through
/// it, in this frame or in the reference, and the cell takes its neighbours' shift instead.
public struct MismatchLimit: Sendable, Equatable {
    /// The least limit, in grey levels.
    public var floor: Float
    /// The limit in medians of the level's residuals.
    public var factor: Float

    public init(floor: Float, factor: Float) {
        self.floor = floor
        self.factor = factor
    }

    /// Pictures' grey (8-bit levels, gamma-encoded): a residual within 6 levels is a match
    /// whatever the median. The image path's limit, as it has been.
    public static let pictures = MismatchLimit(floor: 6, factor: 2.5)
    /// Linear sensor grey, whose scale follows the exposure: only the frame's own residuals set
    /// the limit. Pictures' floor of 6 was at or above 2.5 medians at every level of every burst
    /// of the raw family (issue 48: medians 0.1-2.4 levels): it set every limit, up to 60
    /// medians, and passers-by in the reference dragged the cells under them in every frame: on
    /// pug-people (six passers-by) 0.120 % error pixels, 0.0003 % with this limit. A factor of
    /// 2.5 instead of 2 left 0.23 % on a parallax burst with four passers-by (seed 23, 0.02 %).
    public static let linear = MismatchLimit(floor: 0, factor: 2)
    /// Linear grey at the block search's level: a parallax cell refused there is not found again
    /// below (moto-parallax 47.9 dB with 4 to 6, 47.0 with 2.5 or 3.5; no limit there, 48.2
    /// dB, let passers-by through again: pug-people 0.021 %).
    public static let linearSearch = MismatchLimit(floor: 0, factor: 4)

    /// The limit over a level's residuals (infinite ones, of cells without coverage, left out).
    func limit(_ residuals: [Float]) -> Float {
        var r = residuals.filter(\.isFinite)
        return r.isEmpty ? .infinity : max(floor, factor * Selection.median(&r))
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
    /// Median over the textured cells of the displacement length in units of what noise alone
    /// would give the cell's measurement (its match's residual over the root of its window's
    /// texture and size): about 1 or less where the field only follows noise. Given by a coarse
    /// look (``LocalAligner``'s estimate with a finest level).
    public var p50Noise: Float? = nil
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
