import CKernels
import EvanescoCore
import Foundation

extension RawMerge {
    /// ``wiener(_:params:reference:width:height:progress:release:pull:rows:)`` over `source`'s frames, with
    /// maps that say every frame contributes everywhere (pulled towards the reference).
    static func hdrplus(
        _ frames: [(evn_raw_frame, DisplacementField?)], source: BurstFrameSource, used: [Int],
        params: evn_raw_merge_params, options: StackOptions, maps: inout StackMaps?, release: Release? = nil
    ) -> Image<UInt16> {
        let w = source.width, h = source.height, ref = used.firstIndex(of: options.reference) ?? 0
        maps?.kept = Image(width: w, height: h, channels: 1) { d in d.update(repeating: UInt16(used.count)) }
        maps?.provenance = Image(width: w, height: h, channels: 1) { d in
            d.update(repeating: UInt16(options.reference + 1))
        }
        // A bracket's reference may lack samples it clipped: the frames that saw them vote them
        // in first (and nothing else: no frame is far from a vote of infinite limit).
        var voting = params
        voting.replace_beyond = .infinity
        let scratch = VoteScratch(voting, frames: used.count, segment: 256)
        let fill: BandRows? =
            options.rawExposureGains[source.names[options.reference]] == nil
            ? nil
            : { values, weights, y0, band, ring, _ in
                scratch.buffers.borrow { buffer in
                    for r in band {
                        var x0 = 0
                        while x0 < w {
                            let count = min(256, w - x0), at = bandRow(r, ring: ring) * w * 4 + x0 * 4
                            voteSegment(
                                scratch.params, frames: used.count, count: count, stride: scratch.stride,
                                buffer: buffer, network: scratch.network, kept: nil, best: nil,
                                gathered: (values + at, weights + at, 16 * w * 4))
                            x0 += count
                        }
                    }
                }
            }
        return withFrames(frames, source: source, used: used) { pinned in
            defer { release?.call() }
            return wiener(
                pinned, params: params, reference: ref, width: w, height: h, progress: options.progress,
                release: release, rows: fill)
        }
    }

    /// How the Wiener merge pulls each frame's coefficients towards the reference's
    /// (``evn_raw_wiener_band_args``): HDR+ as published (c = 8, nothing subtracted), or the
    /// robust merge's blend's (``blend``).
    struct WienerPull {
        var c: Float, expected: Float
        static let published = WienerPull(c: 8, expected: 0)
    }

    /// What the Wiener pass hands its gathered rows to: the band's values and weights (frame k's
    /// row r at (16 k + (r + ring) mod 16) x width x 4), its first row y0, which rows, the ring
    /// (0 or 8), and whether they are handed on (``giveEveryRow(_:handed:_:)``). It leaves each
    /// frame's values of weight 0 as the reference's (``evn_raw_wiener_fill``), as the vote with
    /// `replace_beyond` does (``evn_raw_merge_params``).
    typealias BandRows = (
        _ values: UnsafeMutablePointer<Float>, _ weights: UnsafePointer<Float>, _ y0: Int, _ band: Range<Int>,
        _ ring: Int, _ handedOn: Bool
    ) -> Void

    /// Where a band's row r lies among its 16 gathered rows: (r + `ring`) mod 16, as the kernel reads.
    @inline(__always)
    static func bandRow(_ r: Int, ring: Int) -> Int { (r + ring) & 15 }

    /// Every row of a band of 16 not `given` yet, to `body` in runs, before its tiles are merged:
    /// `mine` for the rows `handed` (the strip's, handed on once), else another strip's rows
    /// above or below, given too for what the callee does to the values, not to be handed on.
    static func giveEveryRow(_ given: inout [Bool], handed: Range<Int>, _ body: (Range<Int>, Bool) -> Void) {
        var r = 0
        while r < 16 {
            if given[r] {
                r += 1
                continue
            }
            let mine = handed.contains(r)
            var e = r + 1
            while e < 16, !given[e], handed.contains(e) == mine { e += 1 }
            body(r..<e, mine)
            for i in r..<e { given[i] = true }
            r = e
        }
    }

    /// What a merge reading frames from a spill file calls after every `rows` rows it has read.
    typealias Release = (rows: Int, call: () -> Void)

    /// HDR+'s pairwise Wiener merge (``MergeMethod/hdrplus``) of a Bayer burst's frames, each
    /// gathered at the reference's photosites as the robust merge gathers them: bands of 16 rows
    /// (tile rows every 8), each thread overlap-adding the tiles' rows that fall in its strip.
    /// `rows`, when given, gets every row of each band before the band's tiles are merged: the
    /// strip's own rows handed on once, and the rows of other strips the band reaches (what it
    /// changes in the values, the tiles read).
    /// `release`, when given, is called each time a thread has gathered that many rows more
    /// (frames read from a spill file: the pages read so far leave the process).
    static func wiener(
        _ frames: [evn_raw_frame], params: evn_raw_merge_params, reference: Int, width w: Int, height h: Int,
        progress: (@Sendable (StackProgress) -> Void)?, release: Release? = nil, pull: WienerPull = .published,
        rows: BandRows? = nil
    ) -> Image<UInt16> {
        let n = frames.count, row = w * 4, start = Date(), done = LockedBox(0)
        // A thread's band buffers serve each strip it merges (made once: 13 MB of fresh pages a
        // strip at 12 x 12 MP).
        let buffers = ReusePool { UnsafeMutablePointer<Float>.allocate(capacity: (2 * n + 1) * 16 * row) }
        defer { for b in buffers.all { b.deallocate() } }
        return Image(uninitializedWidth: w, height: h, channels: 4) { d in
            let out = UncheckedSendable(d.baseAddress!)
            // Two strips a thread: each strip gathers the 8 rows above its first band again, which
            // at four a thread cost 12 x 12 MP 1.4 % of its time more than the balance gained.
            StripExecutor.forEachStrip(rows: h, minimumRows: max(16, h / (2 * StripExecutor.threadCount))) { strip in
                buffers.borrow { buffer in
                    wienerStrip(
                        frames, params: params, reference: reference, width: w, height: h, strip: strip,
                        buffer: buffer, out: out.value, release: release, pull: pull, rows: rows)
                }
                let merged = done.update {
                    $0 += strip.count
                    return $0
                }
                progress?(
                    StackProgress(stage: .merge, done: merged, total: h, elapsed: Date().timeIntervalSince(start)))
            }
        }
    }

    /// The Wiener pass over one strip's rows (``wiener(_:params:reference:width:height:progress:release:pull:rows:)``),
    /// into `out` (the merged planes, four channels a cell), in `buffer`: the band's gathered values and
    /// weights (each 16 rows a frame), then its 16 rows of overlap-added tiles (row r: the band's row
    /// r). Once a band is merged its first 8 rows are whole (no later band reaches them): they go out
    /// as they are rounded, and its last 8 move up as the next band's first.
    static func wienerStrip(
        _ frames: [evn_raw_frame], params: evn_raw_merge_params, reference: Int, width w: Int, height h: Int,
        strip: Range<Int>, buffer: UnsafeMutablePointer<Float>, out: UnsafeMutablePointer<UInt16>, release: Release?,
        pull: WienerPull, rows: BandRows?
    ) {
        let n = frames.count, row = w * 4
        let values = buffer, weights = buffer + n * 16 * row, sum = buffer + 2 * n * 16 * row
        sum.initialize(repeating: 0, count: 16 * row)
        var p = params
        var args = evn_raw_wiener_band_args()
        args.frames = Int32(n)
        args.reference = Int32(reference)
        args.width = Int32(w)
        (args.c, args.expected) = (pull.c, pull.expected)
        // The merge's noise lines (a Bayer burst's four channels).
        (args.slope, args.intercept) = (params.slope, params.intercept)
        var y0 = (strip.lowerBound / 8) * 8 - 8, gathered = false, sinceRelease = 0, ring = 0
        var given = [Bool](repeating: false, count: 16)
        while y0 < strip.upperBound {
            if let release, sinceRelease >= release.rows {
                release.call()
                sinceRelease = 0
            }
            let fresh = gathered ? 8 : 0
            // The band before's last 8 rows stay where they are, as this band's first 8.
            if gathered { ring ^= 8 }
            sinceRelease += 16 - fresh
            gatherBand(
                frames, params: &p, values: values, weights: weights, y0: y0, fresh: fresh, ring: ring, width: w,
                height: h, given: &given)
            // Each of the strip's rows, gathered, is handed on once: the band's last 8 rows.
            let from = max(8, strip.lowerBound - y0), handed = from..<max(from, min(16, strip.upperBound - y0))
            if let rows {
                giveEveryRow(&given, handed: handed) { band, mine in rows(values, weights, y0, band, ring, mine) }
            }
            // The rows just gathered (side by side: all 16, or the 8 after the ring's first), the
            // reference's values where a frame has none: by the vote that `rows` runs, as it
            // replaces values (its `replace_beyond`, with this reference), else here.
            if rows == nil || Int(params.reference) != reference {
                evn_raw_wiener_fill(
                    values, weights, Int32(n), Int32(reference), 16 * row, bandRow(fresh, ring: ring) * row,
                    (16 - fresh) * row)
            }
            let first = max(strip.lowerBound, y0), end = min(strip.upperBound, y0 + 16)
            if first < end {
                args.values = UnsafePointer(values)
                args.ring = Int32(ring)
                args.first_row = Int32(first - y0)
                args.end_row = Int32(end - y0)
                args.out = sum + (first - y0) * row
                evn_raw_wiener_band(&args)
            }
            let whole = min(strip.upperBound, y0 + 8)
            if first < whole {
                for i in ((first - y0) * row)..<((whole - y0) * row) {
                    out[y0 * row + i] = UInt16(clampingRounded: sum[i])
                }
            }
            sum.update(from: sum + 8 * row, count: 8 * row)
            (sum + 8 * row).update(repeating: 0, count: 8 * row)
            y0 += 8
            gathered = true
        }
    }

    /// A band of 16 output rows (`width` cells) of every frame's gathered values and weights
    /// (frame k's at k x 16 rows, the band's row r in row (r + `ring`) mod 16 of them) from row
    /// y0: its rows from `fresh` on gathered (and marked not `given`); below `fresh`, the band
    /// before's last 8 rows, left where they are (0 or 8: the first band of a strip gathers all
    /// 16, with `ring` 0). Moving them up instead copied every gathered row once more: 1.5 % of
    /// a 12 x 12 MP merge.
    static func gatherBand(
        _ frames: [evn_raw_frame], params p: inout evn_raw_merge_params, values: UnsafeMutablePointer<Float>,
        weights: UnsafeMutablePointer<Float>, y0: Int, fresh: Int, ring: Int, width w: Int, height h: Int,
        given: inout [Bool]
    ) {
        let n = frames.count, row = w * 4
        if fresh > 0 {
            for r in 0..<8 { given[r] = given[r + 8] }
        }
        for r in fresh..<16 { given[r] = false }
        // A frame's rows together: each column of cells goes down them, its neighbourhood moving
        // a row at a time (evn_raw_gather_rows).
        let ys = (fresh..<16).map { Int32(min(h - 1, max(0, y0 + $0))) }
        for k in 0..<n {
            let at = (fresh..<16).map { k * 16 * row + bandRow($0, ring: ring) * row }
            let v: [UnsafeMutablePointer<Float>?] = at.map { values + $0 }
            let wt: [UnsafeMutablePointer<Float>?] = at.map { weights + $0 }
            withUnsafePointer(to: frames[k]) { f in
                evn_raw_gather_rows(f, &p, ys, Int32(ys.count), 0, Int32(w), v, wt)
            }
        }
    }
}
