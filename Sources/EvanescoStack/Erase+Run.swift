import EvanescoCore
import Foundation

/// The rectangles one erase works on: O, the pixels that may change (the mask's bounds grown by
/// the seam band), and R, the pixels whose disagreement the windows over O read (O grown by the
/// window radius), both clipped to the frame.
struct EraseRegion {
    let ox0: Int, oy0: Int, ox1: Int, oy1: Int
    let rx0: Int, ry0: Int, rx1: Int, ry1: Int
    var ow: Int { ox1 - ox0 }
    var oh: Int { oy1 - oy0 }
    var rw: Int { rx1 - rx0 }
    var rh: Int { ry1 - ry0 }

    init(bounds b: (x0: Int, y0: Int, x1: Int, y1: Int), width w: Int, height h: Int, seamBand: Int, radius: Int) {
        (ox0, oy0) = (max(0, b.x0 - seamBand), max(0, b.y0 - seamBand))
        (ox1, oy1) = (min(w, b.x1 + seamBand), min(h, b.y1 + seamBand))
        (rx0, ry0) = (max(0, ox0 - radius), max(0, oy0 - radius))
        (rx1, ry1) = (min(w, ox1 + radius), min(h, oy1 + radius))
    }
}

/// One erase of ``Eraser/apply(_:plain:mask:tolerance:frameIndex:reference:maps:cancellation:bandRows:afterBand:)``:
/// its frames, region and the tallies its bands add to.
struct EraseRun<S: PixelSample> {
    /// Rows `rows` of O, and the rows `verdictRows` of R whose verdicts its windows read.
    struct Band {
        let rows: Range<Int>
        let verdictRows: Range<Int>
        var height: Int { rows.count }
        init(rows: Range<Int>, region r: EraseRegion, radius: Int) {
            self.rows = rows
            verdictRows = max(r.ry0, rows.lowerBound - radius)..<min(r.ry1, rows.upperBound + radius)
        }
    }

    /// What pass 2 adds up over the bands.
    struct Tally {
        var remerged = 0, frameSum = 0
        var filled: [Int]
    }

    /// A pixel pass 2 merged again: where (its index in O), the run of frames that agreed with the
    /// merge, whether it was counted, and its group's frames (`members[start..<start + count]` of
    /// ``Picks``).
    struct Pick {
        var o: Int32, first: Int16, last: Int16, counted: Bool, start: Int32, count: Int16
        /// Whether the reference frame was one of the frames the view behind was taken from.
        var referenceBehind = false
    }

    /// The pixels pass 2 merged again, and their groups' frames.
    struct Picks {
        var entries: [Pick] = [], members: [Int16] = []
    }

    let warpers: [RowSampler<S>]
    let plain: Image<S>
    let mask: EraseMask
    let region: EraseRegion
    let tolerance: Float
    /// The reference frame's index among the warpers, if it is one of them.
    let reference: Int?
    let cancellation: StackCancellation?
    /// Per pixel of O: how much of the re-merged view replaces the plain merge (1 inside the mask,
    /// falling to 0 across the seam band).
    let weight: [Float]
    let tileWidth: Int
    let buffers: ReusePool<BurstStacker.TileBuffers<S>>
    let tally: LockedBox<Tally>
    /// Per pixel of O, when maps are asked for: the frames kept and the frame that dominated.
    let recorded: LockedBox<(kept: [Int32], provenance: [Int32])?>
    /// What pass 2 chose, for the judging pass.
    let picks = LockedBox(Picks())
    var frames: Int { warpers.count }

    init(
        _ warpers: [RowSampler<S>], plain: Image<S>, mask: EraseMask, bounds: (x0: Int, y0: Int, x1: Int, y1: Int),
        tolerance: Float, reference: Int?, recording: Bool, cancellation: StackCancellation?
    ) {
        let n = warpers.count, c = plain.channels
        let r = EraseRegion(
            bounds: bounds, width: plain.width, height: plain.height, seamBand: Eraser.seamBand,
            radius: Eraser.radius)
        (self.warpers, self.plain, self.mask, region, self.tolerance) = (warpers, plain, mask, r, tolerance)
        self.reference = reference
        self.cancellation = cancellation
        weight = Eraser.seamWeights(mask, x0: r.ox0, y0: r.oy0, x1: r.ox1, y1: r.oy1)
        tileWidth = BurstStacker.tileWidth(frames: n, channels: c)
        buffers = BurstStacker.tileBuffers(S.self, frames: n, channels: c, tileWidth: tileWidth)
        tally = LockedBox(Tally(filled: [Int](repeating: 0, count: n)))
        recorded = LockedBox(
            recording
                ? (
                    kept: [Int32](repeating: -1, count: r.ow * r.oh),
                    provenance: [Int32](repeating: -1, count: r.ow * r.oh)
                )
                : nil)
    }

    func deallocate() { BurstStacker.deallocate(buffers) }

    /// Samples rows `rows` of columns x0..<x1 of every frame, a tile at a time.
    func walk(
        rows: Range<Int>, x0: Int, x1: Int, _ body: (SampleTile, UnsafeMutablePointer<Float>, Int, Int) -> Void
    ) {
        buffers.borrow { tile, merged, caches in
            for cache in caches { cache.invalidate() }
            var s0 = x0
            while s0 < x1 {
                let s1 = min(x1, s0 + tileWidth)
                for y in rows where cancellation?.isCancelled != true {
                    let t = tile.resized(pixels: s1 - s0)
                    for k in 0..<frames {
                        warpers[k].sampleRow(
                            y: y, x0: s0, x1: s1, into: t.values + k * t.stride, valid: t.valid + k * t.pixels,
                            cache: caches[k])
                    }
                    body(t, merged, y, s0)
                }
                s0 = s1
            }
        }
    }

    /// Pass 1: over the band's verdict rows of R, where each frame disagrees with the merge (1),
    /// agrees (0), or does not reach (2); frame k's rows at `verdict + k rw vh`.
    ///
    /// With `image`, the frames are judged against it instead of the merge: a picture of R's size
    /// (``Eraser/apply(_:plain:mask:tolerance:frameIndex:reference:maps:cancellation:bandRows:afterBand:)``'s
    /// tentative result).
    func markDisagreement(_ band: Band, against image: Image<S>? = nil, into verdict: UnsafeMutablePointer<UInt8>) {
        let n = frames, c = plain.channels, tolerance = tolerance
        let rw = region.rw, rx0 = region.rx0, vy0 = band.verdictRows.lowerBound, vh = band.verdictRows.count
        // Where (x, y) of the picture lies in the one judged against.
        let (w, ox, oy) = image == nil ? (plain.width, 0, 0) : (rw, rx0, region.ry0)
        let v = UncheckedSendable(verdict)
        (image ?? plain).samples.withUnsafeBufferPointer { m in
            let m = UncheckedSendable(m)
            StripExecutor.forEachStrip(rows: vh, minimumRows: 8) { local in
                walk(rows: (local.lowerBound + vy0)..<(local.upperBound + vy0), x0: rx0, x1: region.rx1) {
                    t, _, y, s0 in
                    for k in 0..<n {
                        let row = v.value + k * rw * vh + (y - vy0) * rw + (s0 - rx0)
                        for p in 0..<t.pixels {
                            row[p] = Self.verdict(
                                t, frame: k, pixel: p, against: m.value.baseAddress! + ((y - oy) * w + s0 + p - ox) * c,
                                tolerance)
                        }
                    }
                }
            }
        }
    }

    /// Frame `k`'s verdict at pixel `p` of `t` against the value at `image`: 1 where a channel
    /// differs by more than `tolerance`, 0 where none does, 2 where the frame does not reach.
    @inline(__always)
    static func verdict(
        _ t: SampleTile, frame k: Int, pixel p: Int, against image: UnsafePointer<S>, _ tolerance: Float
    )
        -> UInt8
    {
        guard t.valid[k * t.pixels + p] != 0 else { return 2 }
        var worst: Float = 0
        let sample = t.values + k * t.stride + p * t.channels
        for ch in 0..<t.channels { worst = max(worst, abs(sample[ch] - image[ch].floatValue)) }
        return worst > tolerance ? 1 : 0
    }

    /// Each frame's share of disagreement in the window around each pixel of the band, in
    /// 1/250ths (255: the frame does not reach the pixel); frame k's at `share + k ow bh`.
    func windowShares(_ band: Band, verdict: UnsafeMutablePointer<UInt8>, into share: UnsafeMutablePointer<UInt8>) {
        let r = region, vh = band.verdictRows.count, bh = band.height
        let o = (r.ox0 - r.rx0, band.rows.lowerBound - band.verdictRows.lowerBound, r.ow, bh)
        let v = UncheckedSendable(verdict), sh = UncheckedSendable(share)
        StripExecutor.forEachStrip(rows: frames, minimumRows: 1) { frames in
            var against = [Int32](repeating: 0, count: (r.rw + 1) * (vh + 1)), seen = against
            for k in frames {
                Eraser.windowShares(
                    v.value + k * r.rw * vh, rw: r.rw, rh: vh, into: sh.value + k * r.ow * bh, o: o,
                    against: &against, seen: &seen)
            }
        }
    }

    /// Pass 2: merges each pixel of the band again from the frames that saw behind, and blends it
    /// into `out` by the seam weight.
    ///
    /// With `verdict` (the band's, as ``markDisagreement(_:against:into:)`` left it), each pixel
    /// that changes has its frames' verdicts marked again, against the new value: what marking
    /// them against `out` would give, where no other pixel's verdicts change.
    func remerge(
        _ band: Band, shares: UnsafeMutablePointer<UInt8>, frameIndex: [Int], into out: inout Image<S>,
        verdict: UnsafeMutablePointer<UInt8>? = nil
    ) {
        let n = frames, c = plain.channels, w = plain.width, ow = region.ow, ox0 = region.ox0, oy0 = region.oy0
        let by0 = band.rows.lowerBound, shareStride = ow * band.height
        let sh = UncheckedSendable(shares), v = UncheckedSendable(verdict)
        let vh = band.verdictRows.count, vy0 = band.verdictRows.lowerBound, rw = region.rw, rx0 = region.rx0
        out.samples.withUnsafeMutableBufferPointer { dst in
            let d = UncheckedSendable(dst)
            StripExecutor.forEachStrip(rows: band.height, minimumRows: 8) { local in
                var scratch = Eraser.Scratch()
                var strip = Tally(filled: [Int](repeating: 0, count: n))
                var kept: [(Int, Int32, Int32)] = []
                var picked = Picks()
                walk(rows: (local.lowerBound + by0)..<(local.upperBound + by0), x0: ox0, x1: region.ox1) {
                    t, merged, y, s0 in
                    let oRow = (y - oy0) * ow + (s0 - ox0), bRow = (y - by0) * ow + (s0 - ox0)
                    for p in 0..<t.pixels where weight[oRow + p] > 0 {
                        guard
                            let group = Eraser.viewBehind(
                                t, pixel: p, shares: sh.value + bRow + p, shareStride: shareStride,
                                tolerance: tolerance, into: merged + p * c, scratch: &scratch)
                        else { continue }
                        let a = weight[oRow + p], o = (y * w + s0 + p) * c
                        let pick = Pick(
                            o: Int32(oRow + p), first: Int16(scratch.first), last: Int16(scratch.last),
                            counted: false, start: Int32(picked.members.count), count: Int16(scratch.members.count),
                            referenceBehind: reference.map { scratch.chosen.contains($0) } ?? false)
                        for k in scratch.members { picked.members.append(Int16(k)) }
                        picked.entries.append(pick)
                        var change: Float = 0, moved = false
                        for ch in 0..<c {
                            let m = d.value[o + ch].floatValue
                            change = max(change, abs(merged[p * c + ch] - m))
                            let new = S(clampingRounded: m + a * (merged[p * c + ch] - m))
                            moved = moved || new != d.value[o + ch]
                            d.value[o + ch] = new
                        }
                        if moved, let verdict = v.value {
                            let at = (y - vy0) * rw + (s0 + p - rx0)
                            for k in 0..<n {
                                verdict[k * rw * vh + at] = Self.verdict(
                                    t, frame: k, pixel: p, against: d.value.baseAddress! + o, tolerance)
                            }
                        }
                        // Counted where the view behind differs clearly from what the merge
                        // showed (by twice what agreement allows: resampling a sharp edge at
                        // another sub-pixel phase moves a value by about that much).
                        if mask.masked[y * w + s0 + p] != 0 && change > 2 * tolerance {
                            strip.remerged += 1
                            strip.frameSum += group
                            for k in scratch.members { strip.filled[k] += 1 }
                            kept.append((oRow + p, Int32(group), Int32(frameIndex[scratch.members[0]] + 1)))
                            picked.entries[picked.entries.count - 1].counted = true
                        }
                    }
                }
                add(strip, kept: kept)
                picks.update { all in
                    let base = Int32(all.members.count)
                    all.members += picked.members
                    all.entries += picked.entries.map {
                        var e = $0
                        e.start += base
                        return e
                    }
                }
            }
        }
    }

    /// The picks of pass 2, in the order of their pixels in O (strips add theirs in any order).
    func sortedPicks() -> Picks {
        var p = picks.value
        p.entries.sort { $0.o < $1.o }
        return p
    }

    /// The judging pass over the band, from each frame's disagreement with the erased picture
    /// over the window around each pixel (`shares`, as ``windowShares(_:verdict:into:)`` gives
    /// them): where the frames pass 2 took for the view behind disagree with it on average at
    /// least as much as the frames of the run that agreed with the merge (every frame from its
    /// first to its last), they saw something pass in front of what the merge showed, not what
    /// stood behind it; the pixel goes back to the plain merge in `out`. A masked pixel that stays,
    /// where the reference was one of the frames behind, is held near it
    /// (``hold(x:y:tentative:reference:into:)``, `tentative` being the result before the judging
    /// over R, from `reference`'s rows around the band; after
    /// the judging: held, the picture would lean towards the reference, which would then seem to
    /// agree with it). On
    /// `Benchmarks/erase-family.sh`'s aloe-1 a dark passer-by in frames 0-2 above the lingering
    /// occluder, inside a mask grown by 16 px, had been taken for the view behind: 85 pixels off
    /// by more than 20 grey levels, none now (docs/benchmarks.md).
    ///
    /// - Returns: The picks that went back.
    func judge(
        _ band: Band, shares: UnsafeMutablePointer<UInt8>, picks: Picks, tentative: Image<S>, reference: ReferenceRows?,
        into out: inout Image<S>
    ) -> [Pick] {
        let c = plain.channels, w = plain.width, ow = region.ow, ox0 = region.ox0, oy0 = region.oy0
        let stride = ow * band.height, entries = picks.entries
        func firstPick(from o: Int) -> Int {
            var (a, b) = (0, entries.count)
            while a < b {
                let m = (a + b) / 2
                if Int(entries[m].o) < o { a = m + 1 } else { b = m }
            }
            return a
        }
        var reverted: [Pick] = []
        let lo = firstPick(from: (band.rows.lowerBound - oy0) * ow),
            hi = firstPick(from: (band.rows.upperBound - oy0) * ow)
        for e in entries[lo..<hi] {
            let y = oy0 + Int(e.o) / ow, x = ox0 + Int(e.o) % ow, at = (y - band.rows.lowerBound) * ow + (x - ox0)
            /// Frames `ks`' summed shares and how many reach the pixel.
            func sum(_ ks: some Sequence<Int>) -> (Int, Int) {
                var total = 0, count = 0
                for k in ks where shares[k * stride + at] != 255 {
                    total += Int(shares[k * stride + at])
                    count += 1
                }
                return (total, count)
            }
            let behind = sum((0..<Int(e.count)).lazy.map { Int(picks.members[Int(e.start) + $0]) })
            let run = sum(Int(e.first)...Int(e.last))
            let o = (y * w + x) * c
            guard behind.1 > 0, run.1 > 0, behind.0 * run.1 >= run.0 * behind.1 else {
                if e.referenceBehind, let reference, mask.masked[y * w + x] != 0 {
                    hold(x: x, y: y, tentative: tentative, reference: reference, into: &out)
                }
                continue
            }
            for ch in 0..<c { out.samples[o + ch] = plain.samples[o + ch] }
            reverted.append(e)
        }
        return reverted
    }

    /// Takes the reverted picks out of the tallies and maps.
    func revert(_ reverted: [Pick], members: [Int16]) {
        tally.update { t in
            for e in reverted where e.counted {
                t.remerged -= 1
                t.frameSum -= Int(e.count)
                for i in 0..<Int(e.count) { t.filled[Int(members[Int(e.start) + i])] -= 1 }
            }
        }
        recorded.update { r in
            for e in reverted where e.counted {
                r?.kept[Int(e.o)] = -1
                r?.provenance[Int(e.o)] = -1
            }
        }
    }

    /// Adds one strip's counts and recorded pixels to the run's.
    private func add(_ strip: Tally, kept: [(Int, Int32, Int32)]) {
        tally.update {
            $0.remerged += strip.remerged
            $0.frameSum += strip.frameSum
            for k in 0..<frames { $0.filled[k] += strip.filled[k] }
        }
        if !kept.isEmpty {
            recorded.update { r in
                for (i, s, f) in kept {
                    r?.kept[i] = s
                    r?.provenance[i] = f
                }
            }
        }
    }

    /// Throws ``StackError/nothingBehindMask(maskedPixels:)`` where too little changed so far: a
    /// few changed pixels (resampling at sharp edges, a passer-by's edge) are no view at all, and
    /// what is erased covers far more of a brush stroke than 5 %. (The judging pass only takes
    /// pixels back, so it is asked before that pass too.)
    func requireViewBehind() throws {
        let t = tally.value
        guard t.remerged > 0, t.remerged * 20 >= mask.count else {
            throw StackError.nothingBehindMask(maskedPixels: mask.count)
        }
    }

    /// The summary of the bands' tallies; the recorded pixels written into `maps`.
    ///
    /// - Throws: ``StackError/nothingBehindMask(maskedPixels:)`` where too little changed.
    func summary(frameIndex: [Int], maps: inout StackMaps?) throws -> EraseSummary {
        try requireViewBehind()
        let masked = mask.count, t = tally.value, w = plain.width, r = region
        if let rec = recorded.value, var m = maps {
            var keptMap = m.kept, provenanceMap = m.provenance
            for i in 0..<(r.ow * r.oh) where rec.kept[i] >= 0 {
                let x = r.ox0 + i % r.ow, y = r.oy0 + i / r.ow
                keptMap.samples[y * w + x] = UInt16(rec.kept[i])
                provenanceMap.samples[y * w + x] = UInt16(rec.provenance[i])
            }
            m.kept = keptMap
            m.provenance = provenanceMap
            maps = m
        }
        let shares = (0..<frames).filter { t.filled[$0] > 0 }.map {
            EraseSummary.FrameShare(index: frameIndex[$0], pixels: t.filled[$0])
        }
        .sorted { ($0.pixels, -$0.index) > ($1.pixels, -$1.index) }
        return EraseSummary(
            maskedPixels: masked, remergedPixels: t.remerged, meanFrames: Double(t.frameSum) / Double(t.remerged),
            frames: shares, seamBand: Eraser.seamBand)
    }
}

extension Eraser {
    /// Pass 2's per-strip scratch.
    struct Scratch {
        var order = [(UInt8, Int)](), chosen = [Int](), members = [Int](), values = [Float]()
        /// The run of frames that agreed with the merge, from the last ``Eraser/viewBehind``.
        var first = 0, last = 0
    }

    /// The view behind what stayed at pixel `p` of `t`, from the frames' disagreement shares
    /// (frame k's at `shares[k shareStride]`, 255 where it does not reach): the frames split by
    /// their shares; if the agreeing ones held one run of frames, the largest agreeing group of
    /// the disagreeing frames outside that run. Writes what they show to `out`, its frames to
    /// `scratch.members` (and the disagreeing frames outside the run to `scratch.chosen`).
    ///
    /// - Returns: The group's size, or nil where the merge stays.
    @inline(__always)
    static func viewBehind(
        _ t: SampleTile, pixel p: Int, shares: UnsafeMutablePointer<UInt8>, shareStride: Int, tolerance: Float,
        into out: UnsafeMutablePointer<Float>, scratch: inout Scratch
    ) -> Int? {
        let n = t.frames, minimumSupport = n < 5 ? 1 : 2
        scratch.order.removeAll(keepingCapacity: true)
        for k in 0..<n where shares[k * shareStride] != 255 && t.valid[k * t.pixels + p] != 0 {
            scratch.order.append((shares[k * shareStride], k))
        }
        guard let split = otsuSplit(&scratch.order) else { return nil }
        // What stayed and then left (or came and stayed) held its place over one run of frames:
        // the frames that agree with the merge span little more than their number. Behind it:
        // the disagreeing frames before or after that run (those within it saw someone passing
        // in front).
        var first = n, last = -1
        for (_, k) in scratch.order[..<split] {
            first = min(first, k)
            last = max(last, k)
        }
        guard split * 4 >= (last - first + 1) * 3 else { return nil }
        (scratch.first, scratch.last) = (first, last)
        scratch.chosen.removeAll(keepingCapacity: true)
        for (_, k) in scratch.order[split...] where k < first || k > last { scratch.chosen.append(k) }
        // What is behind: the largest group of the chosen frames that agree with one another.
        let group = largestAgreeingGroup(scratch.chosen, t, pixel: p, tolerance: tolerance, members: &scratch.members)
        guard group >= minimumSupport else { return nil }
        viewValue(scratch.chosen, t, pixel: p, tolerance: tolerance, into: out, values: &scratch.values)
        return group
    }
}
