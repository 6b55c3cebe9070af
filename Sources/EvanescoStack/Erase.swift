import EvanescoCore
import EvanescoIO
import Foundation

/// What the erase pass did (``StackResult/erase``).
public struct EraseSummary: Sendable, Codable, Equatable {
    /// Pixels in the mask.
    public var maskedPixels: Int
    /// Masked pixels that changed: merged again from the frames that saw behind what the plain
    /// merge showed, they differ from it by more than twice the agreement tolerance (6 x the
    /// burst's noise, at least 4 % of full scale).
    public var remergedPixels: Int
    /// Masked pixels that stay as the plain merge had them: every frame agreed with it there
    /// (nothing moved: the background around what was erased), or the frames that disagreed
    /// did not agree with one another.
    public var keptPixels: Int { maskedPixels - remergedPixels }
    /// Frames per changed pixel, on average.
    public var meanFrames: Double
    /// The frames (indices in the report) that filled the re-merged pixels, most first, with
    /// how many pixels each filled.
    public var frames: [FrameShare]
    /// Pixels beyond the mask blended into the plain merge, at most this far from it, so that
    /// no seam shows; beyond it the output is the plain merge's, to the bit.
    public var seamBand: Int

    /// One frame's part in the re-merged region.
    public struct FrameShare: Sendable, Codable, Equatable {
        /// The frame's index in the report.
        public var index: Int
        /// Re-merged pixels it was used for (it agreed with the result there).
        public var pixels: Int
    }

    /// A sentence for the user.
    public var description: String {
        let share = maskedPixels > 0 ? 100 * Double(remergedPixels) / Double(maskedPixels) : 0
        var s = String(
            format:
                "erase: %.1f%% of the %d masked pixels changed, merged again from the frames that saw behind (%.1f "
                + "frames each",
            share, maskedPixels, meanFrames)
        s +=
            frames.isEmpty
            ? ")" : ", mostly frames \(frames.prefix(4).map { String($0.index) }.joined(separator: ", ")))"
        if keptPixels > 0 { s += String(format: "; %.1f%% as merged: nothing else was seen there", 100 - share) }
        return s
    }
}

/// The erase pass over a finished merge.
///
/// Inside the mask, each frame is judged over a window of 33 x 33 pixels around each pixel: the
/// share of the window where it disagrees with the plain merge (by more than the maps'
/// tolerance). Frames that saw what the merge shows agree almost everywhere; frames that saw
/// behind it disagree over the object's extent. The two groups are split where the spread of
/// those shares is widest (Otsu's criterion, per pixel, so one stroke may cover things that left
/// at different times). What stood still held its place over one run of frames, so the frames
/// that agree with the merge must span little more than their number (else the merge shows the
/// background, seen between passers-by, and is kept); the frames that saw behind it are the
/// disagreeing ones before that run or after it. The pixel takes the mean of the largest group of
/// those that agree with one another (a passer-by among them is left out); where no such group
/// of two stands out, the merge is kept. Then each frame is judged again, over the same windows,
/// against that tentative result: where the frames taken for the view behind disagree with it at
/// least as much as the frames of the run do, they saw something pass rather than what stood
/// behind (their time alone cannot tell), and the pixel keeps the plain merge; where the
/// reference frame was one of the frames behind and its 5 x 5 means agree with that result's, the
/// value is held within the tolerance of the reference's (``EraseRun/hold(x:y:tentative:reference:into:)``).
/// Frames are taken in the burst's order as its time order. A band of
/// ``seamBand`` pixels around the mask blends into the
/// plain merge.
enum Eraser {
    /// Window half-size (pixels) over which a frame is judged.
    static let radius = 16
    /// Pixels beyond the mask that are blended; the issue allows 16.
    static let seamBand = 12
    /// The least difference between the two groups' mean shares for a split to count.
    static let minimumGap: Float = 0.1

    /// Rows per band of the erase pass for `n` frames over a region `width` pixels wide: the
    /// two per-frame byte buffers within about 64 MB, and at least 128 rows, so the `2 radius`
    /// rows each band's verdicts add cost at most a fifth more (a stroke across a 12 MP frame of
    /// 30 frames took 720 MB of them in one band).
    static func bandRows(frames n: Int, width: Int) -> Int { max(128, (64 << 20) / max(1, 2 * n * width)) }

    /// Erases the masked region of `plain` (merged from `warpers`).
    ///
    /// - Parameters:
    ///   - bandRows: At most this many rows of the region are worked through at a time (and at
    ///     most ``bandRows(frames:width:)``); the result is the same for any value.
    ///   - afterBand: Runs after each band of each pass (the stacker drops a spill file's pages
    ///     there).
    /// - Complexity: O(n x A) time, for n frames and A pixels of the mask's bounding box grown by
    ///   ``radius`` + ``seamBand`` (each frame is sampled there twice, and the `2 radius` rows
    ///   around each band once more, in one band; where the region takes several, each frame is
    ///   sampled a third time for the judging pass, and those rows once more); 2 n x W x B bytes for
    ///   its width W and B rows a band, a copy of the result over that region, and about 20 bytes
    ///   plus 2 per frame of its group for each pixel merged again.
    static func apply<S: PixelSample>(
        _ warpers: [RowSampler<S>], plain: Image<S>, mask: EraseMask, tolerance: Float,
        frameIndex: [Int], reference: Int?, maps: inout StackMaps?,
        cancellation: StackCancellation?, bandRows: Int? = nil, afterBand: (() -> Void)? = nil
    ) throws -> (Image<S>, EraseSummary) {
        guard let b = mask.bounds else { throw StackError.eraseMaskEmpty }
        let run = EraseRun(
            warpers, plain: plain, mask: mask, bounds: b, tolerance: tolerance,
            reference: reference.flatMap { frameIndex.firstIndex(of: $0) }, recording: maps != nil,
            cancellation: cancellation)
        defer { run.deallocate() }
        var out = plain
        // The region is worked through in bands of rows, so the per-frame buffers (a byte per
        // frame and pixel, twice) stay at one band's whatever the mask covers: each band's
        // verdicts take its rows and `radius` rows either side (the windows its shares read),
        // which is what the whole region's verdicts would give there, so the result does not
        // depend on the band height.
        let r = run.region
        let bandHeight = max(1, min(r.oh, Self.bandRows(frames: warpers.count, width: r.rw), bandRows ?? .max))
        let verdict = UnsafeMutablePointer<UInt8>.allocate(
            capacity: warpers.count * r.rw * min(r.rh, bandHeight + 2 * radius))
        defer { verdict.deallocate() }
        let share = UnsafeMutablePointer<UInt8>.allocate(capacity: warpers.count * r.ow * bandHeight)
        defer { share.deallocate() }
        /// Runs `body` on each band of the region, then `afterBand`.
        func eachBand(_ body: (EraseRun<S>.Band) throws -> Void) throws {
            for by0 in stride(from: r.oy0, to: r.oy1, by: bandHeight) {
                try body(EraseRun<S>.Band(rows: by0..<min(r.oy1, by0 + bandHeight), region: r, radius: radius))
                afterBand?()
            }
        }
        // One band: the re-merge marks the verdicts of the pixels it changes again, and the
        // judging pass reads them without sampling the frames again.
        let oneBand = bandHeight >= r.oh
        try eachBand { band in
            run.markDisagreement(band, into: verdict)
            if cancellation?.isCancelled == true { throw StackError.cancelled }
            run.windowShares(band, verdict: verdict, into: share)
            run.remerge(band, shares: share, frameIndex: frameIndex, into: &out, verdict: oneBand ? verdict : nil)
        }
        try run.requireViewBehind()
        // The judging pass: each frame's disagreement again, now with the erased picture (over R).
        let tentative = out.cropped(x: r.rx0, y: r.ry0, width: r.rw, height: r.rh), picks = run.sortedPicks()
        var reverted: [EraseRun<S>.Pick] = []
        try eachBand { band in
            if !oneBand { run.markDisagreement(band, against: tentative, into: verdict) }
            if cancellation?.isCancelled == true { throw StackError.cancelled }
            run.windowShares(band, verdict: verdict, into: share)
            reverted += run.judge(
                band, shares: share, picks: picks, tentative: tentative, reference: run.referenceRows(around: band),
                into: &out)
        }
        run.revert(reverted, members: picks.members)
        if cancellation?.isCancelled == true { throw StackError.cancelled }
        return (out, try run.summary(frameIndex: frameIndex, maps: &maps))
    }

    /// Among `frames` at `pixel` of `t`: the frame with the most others within `tolerance` x
    /// sqrt(2) of it (two noisy samples differ by sqrt(2) times one's noise), ties going to the
    /// tighter group; its group is then taken again around the group's mean. Writes the group's
    /// frames, the one nearest the mean first, to `members` (what they show is
    /// ``viewValue(_:_:pixel:tolerance:into:values:)``'s business).
    ///
    /// - Returns: The group's size.
    /// - Complexity: O(m^2 c) for m frames and c channels.
    static func largestAgreeingGroup(
        _ frames: [Int], _ t: SampleTile, pixel p: Int, tolerance: Float, members: inout [Int]
    ) -> Int {
        let c = t.channels, pairTolerance = tolerance * Float(2).squareRoot()
        @inline(__always) func sample(_ k: Int) -> UnsafeMutablePointer<Float> { t.values + k * t.stride + p * c }
        var bestCount = 0, bestSpread = Float.infinity, centre = -1
        for i in frames {
            var count = 0, spread: Float = 0
            for j in frames {
                var worst: Float = 0
                for ch in 0..<c { worst = max(worst, abs(sample(i)[ch] - sample(j)[ch])) }
                if worst <= pairTolerance {
                    count += 1
                    spread += worst
                }
            }
            if count > bestCount || (count == bestCount && spread < bestSpread) {
                bestCount = count
                bestSpread = spread
                centre = i
            }
        }
        guard centre >= 0 else { return 0 }
        // The group around the centre frame, then around the group's mean.
        var mean = [Float](repeating: 0, count: c)
        for pass in 0..<2 {
            var sum = [Float](repeating: 0, count: c), n = 0
            for j in frames {
                var worst: Float = 0
                for ch in 0..<c { worst = max(worst, abs(sample(j)[ch] - (pass == 0 ? sample(centre)[ch] : mean[ch]))) }
                guard worst <= (pass == 0 ? pairTolerance : tolerance) else { continue }
                for ch in 0..<c { sum[ch] += sample(j)[ch] }
                n += 1
            }
            guard n > 0 else { break }
            for ch in 0..<c { mean[ch] = sum[ch] / Float(n) }
        }
        members.removeAll(keepingCapacity: true)
        var nearest = Float.infinity
        for j in frames {
            var worst: Float = 0, dist: Float = 0
            for ch in 0..<c {
                let e = abs(sample(j)[ch] - mean[ch])
                worst = max(worst, e)
                dist += e * e
            }
            guard worst <= tolerance else { continue }
            members.append(j)
            if dist < nearest {
                nearest = dist
                members.swapAt(0, members.count - 1)
            }
        }
        return members.count
    }

    /// What the frames behind show at `pixel` of `t`: the mean of `frames` whose every channel lies
    /// within `tolerance` of the frames' median, channel by channel (the median where none does).
    /// The group's own mean let a minority through at colour edges, where few frames saw behind
    /// and their compression left each a little off: the motorcycle bursts of
    /// `Benchmarks/erase-family.sh` kept 0.203 % of the mask's pixels visibly off
    /// (motorcycle-3), 0.073 % this way; the median alone, 0.069 %, cost the aloe bursts up to 0.4 dB
    /// in the mask, this 0.05 dB at most (docs/benchmarks.md).
    static func viewValue(
        _ frames: [Int], _ t: SampleTile, pixel p: Int, tolerance: Float, into out: UnsafeMutablePointer<Float>,
        values: inout [Float]
    ) {
        let c = t.channels, m = frames.count
        @inline(__always) func sample(_ k: Int) -> UnsafeMutablePointer<Float> { t.values + k * t.stride + p * c }
        for ch in 0..<c {
            values.removeAll(keepingCapacity: true)
            for k in frames { values.append(sample(k)[ch]) }
            values.sort()
            out[ch] = m % 2 == 1 ? values[m / 2] : (values[m / 2 - 1] + values[m / 2]) / 2
        }
        var sum = [Float](repeating: 0, count: c), n = 0
        for k in frames {
            var worst: Float = 0
            for ch in 0..<c { worst = max(worst, abs(sample(k)[ch] - out[ch])) }
            guard worst <= tolerance else { continue }
            for ch in 0..<c { sum[ch] += sample(k)[ch] }
            n += 1
        }
        if n > 0 { for ch in 0..<c { out[ch] = sum[ch] / Float(n) } }
    }

    /// Splits `values` (sorted here) into a low and a high group where the between-group spread
    /// is widest; the index of the first high value, or nil when the groups' means are less
    /// than ``minimumGap`` apart (nobody saw anything else) or either group is empty.
    static func otsuSplit(_ values: inout [(UInt8, Int)]) -> Int? {
        let m = values.count
        guard m >= 2 else { return nil }
        values.sort { $0.0 < $1.0 }
        var total = 0
        for (s, _) in values { total += Int(s) }
        var below = 0, best: Double = -1, at = 0
        for i in 1..<m {
            below += Int(values[i - 1].0)
            guard values[i].0 != values[i - 1].0 else { continue }
            let m0 = Double(below) / Double(i), m1 = Double(total - below) / Double(m - i)
            let spread = Double(i) * Double(m - i) * (m1 - m0) * (m1 - m0)
            if spread > best {
                best = spread
                at = i
            }
        }
        guard at > 0 else { return nil }
        below = 0
        for i in 0..<at { below += Int(values[i].0) }
        let gap = (Double(total - below) / Double(m - at) - Double(below) / Double(at)) / 250
        return gap >= Double(minimumGap) ? at : nil
    }

    /// One frame's disagreement share in the (2 ``radius`` + 1)-pixel window around each pixel
    /// of the rectangle `o` (in R's coordinates), clipped to R, from summed-area tables.
    static func windowShares(
        _ verdict: UnsafePointer<UInt8>, rw: Int, rh: Int, into share: UnsafeMutablePointer<UInt8>,
        o: (x: Int, y: Int, w: Int, h: Int), against: inout [Int32], seen: inout [Int32]
    ) {
        let stride = rw + 1
        for y in 0..<rh {
            var a: Int32 = 0, s: Int32 = 0
            for x in 0..<rw {
                let v = verdict[y * rw + x]
                a += v == 1 ? 1 : 0
                s += v != 2 ? 1 : 0
                against[(y + 1) * stride + x + 1] = against[y * stride + x + 1] + a
                seen[(y + 1) * stride + x + 1] = seen[y * stride + x + 1] + s
            }
        }
        for y in 0..<o.h {
            let ry = o.y + y, y0 = max(0, ry - radius), y1 = min(rh, ry + radius + 1)
            for x in 0..<o.w {
                let rx = o.x + x
                guard verdict[ry * rw + rx] != 2 else {
                    share[y * o.w + x] = 255
                    continue
                }
                let x0 = max(0, rx - radius), x1 = min(rw, rx + radius + 1)
                func box(_ t: [Int32]) -> Int32 {
                    t[y1 * stride + x1] - t[y0 * stride + x1] - t[y1 * stride + x0] + t[y0 * stride + x0]
                }
                let n = box(seen)
                share[y * o.w + x] = n > 0 ? UInt8((250 * Int(box(against)) + Int(n) / 2) / Int(n)) : 0
            }
        }
    }

    /// 1 on the mask, falling smoothly to 0 at ``seamBand`` pixels from it (chamfer distance,
    /// never shorter than the Euclidean one, so that no pixel farther than ``seamBand`` from the
    /// mask takes any weight: the band promised in ``EraseSummary/seamBand``; it used to reach 0
    /// only at one pixel more, and 1-4 pixels of a burst changed by a grey level there), over the
    /// rectangle x0..<x1, y0..<y1.
    static func seamWeights(_ mask: EraseMask, x0: Int, y0: Int, x1: Int, y1: Int) -> [Float] {
        let ow = x1 - x0, oh = y1 - y0, far = Float(seamBand)
        var d = [Float](repeating: .infinity, count: ow * oh)
        for y in 0..<oh { for x in 0..<ow where mask.masked[(y + y0) * mask.width + x + x0] != 0 { d[y * ow + x] = 0 } }
        let diagonal = Float(2).squareRoot()
        for y in 0..<oh {
            for x in 0..<ow {
                var v = d[y * ow + x]
                if x > 0 { v = min(v, d[y * ow + x - 1] + 1) }
                if y > 0 {
                    v = min(v, d[(y - 1) * ow + x] + 1)
                    if x > 0 { v = min(v, d[(y - 1) * ow + x - 1] + diagonal) }
                    if x + 1 < ow { v = min(v, d[(y - 1) * ow + x + 1] + diagonal) }
                }
                d[y * ow + x] = v
            }
        }
        for y in stride(from: oh - 1, through: 0, by: -1) {
            for x in stride(from: ow - 1, through: 0, by: -1) {
                var v = d[y * ow + x]
                if x + 1 < ow { v = min(v, d[y * ow + x + 1] + 1) }
                if y + 1 < oh {
                    v = min(v, d[(y + 1) * ow + x] + 1)
                    if x + 1 < ow { v = min(v, d[(y + 1) * ow + x + 1] + diagonal) }
                    if x > 0 { v = min(v, d[(y + 1) * ow + x - 1] + diagonal) }
                }
                d[y * ow + x] = v
            }
        }
        return d.map { dist in
            guard dist < far else { return 0 }
            let t = 1 - dist / far
            return t * t * (3 - 2 * t)
        }
    }
}

extension BurstStacker {
    /// Erases `mask` from a finished stack without merging the burst again: only the mask's
    /// region (grown by the seam band and the judging window) is sampled, so a brush stroke is
    /// answered in a fraction of the stack's time. What ``StackOptions/erase`` does during a stack.
    ///
    /// - Parameters:
    ///   - mask: Where the result must not keep what the plain merge shows, at the result's size.
    ///   - plain: The stack to erase from, as ``stack(_:options:)`` returned it for `frames`
    ///     (with no mask: erasing twice is erasing the union of the masks once).
    ///   - frames: The frames that were stacked, in the same order.
    ///   - interpolation: The interpolation the stack used (``StackOptions/interpolation``).
    /// - Returns: `plain` with the erased image, ``StackResult/erase`` and its maps updated.
    /// - Throws: ``StackError/eraseMaskSize(mask:reference:)``, ``StackError/eraseMaskEmpty``,
    ///   ``StackError/nothingBehindMask(maskedPixels:)``;
    ///   ``StackError/sizeMismatch(frame:size:reference:referenceSize:)``,
    ///   ``StackError/channelMismatch(frame:)`` or ``StackError/noUsableInput(reasons:)`` when `frames` are not
    ///   the frames of `plain`.
    public static func erase(
        _ mask: EraseMask, from plain: StackResult, frames: [BurstFrame],
        interpolation: Interpolation = StackOptions().interpolation
    ) throws -> StackResult {
        let w = plain.image.width, h = plain.image.height
        guard mask.width == w, mask.height == h else {
            throw StackError.eraseMaskSize(mask: "\(mask.width)x\(mask.height)", reference: "\(w)x\(h)")
        }
        guard frames.count == plain.frames.count else {
            throw StackError.noUsableInput(reasons: ["the frames given are not the frames that were stacked"])
        }
        for f in frames {
            if f.image.width != w || f.image.height != h {
                throw StackError.sizeMismatch(
                    frame: f.name, size: "\(f.image.width)x\(f.image.height)", reference: "the result",
                    referenceSize: "\(w)x\(h)")
            }
            if f.image.channels != plain.image.channels { throw StackError.channelMismatch(frame: f.name) }
        }
        let start = Date()
        let used = plain.frames.filter(\.used).map(\.index)
        let eightBit: Bool = if case .uint8 = plain.image { true } else { false }
        let source = BurstFrameSource(
            names: frames.map(\.name), width: w, height: h, channels: plain.image.channels, eightBit: eightBit,
            referenceMetadata: plain.referenceMetadata, memory: frames, spill: nil, slots: [])
        var r = plain
        let homographies = used.map { plain.frames[$0].homography }
        let fields = used.map { $0 < plain.localFields.count ? plain.localFields[$0] : nil }
        /// Erases at sample type S, from the frames as the stack sampled them.
        func erase<S: PixelSample>(_ image: Image<S>) throws -> Image<S> {
            let e = try BurstStacker.erase(
                mask, source.samplers(used, homographies, fields, interpolation, as: S.self), image,
                sigma: plain.noiseSigma, maps: &r.maps, frameIndex: used,
                reference: plain.frames.first { $0.status == .reference }?.index, cancellation: nil)
            r.erase = e.1
            return e.0
        }
        r.image = eightBit ? .uint8(try erase(plain.image.uint8)) : .uint16(try erase(plain.image.uint16))
        r.timings.erase = Date().timeIntervalSince(start)
        return r
    }
}
