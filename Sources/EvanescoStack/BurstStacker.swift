import Dispatch
import EvanescoAlign
import EvanescoCore
import EvanescoIO
import Foundation

/// Aligns and merges bursts: the counterpart of the tutorial's Vision registration plus Metal
/// merge kernels, streamed tile by tile so memory stays at the decoded frames.
public enum BurstStacker {
    /// The smallest frame side registration works on (its coarse search needs a few pyramid
    /// levels of texture).
    public static let minimumAlignedSide = RegistrationReference.minimumSide

    /// Aligns `frames` to the reference and merges them. Frames that cannot be aligned are
    /// reported and left out; a burst of one frame returns that frame.
    public static func stack(_ frames: [BurstFrame], options requested: StackOptions = StackOptions()) throws
        -> StackResult
    {
        let shapes = frames.map {
            FrameShape(
                name: $0.name, width: $0.image.width, height: $0.image.height, channels: $0.image.channels,
                bitDepth: $0.image.bitDepth)
        }
        try check(shapes, options: requested)
        let ref = frames[requested.reference]
        let eightBit: Bool = if case .uint8 = ref.image { true } else { false }
        var source = BurstFrameSource(
            names: frames.map(\.name), width: ref.image.width, height: ref.image.height,
            channels: ref.image.channels, eightBit: eightBit, referenceMetadata: ref.metadata,
            memory: frames, spill: nil, slots: [])
        source.notices = depthNotices(shapes, reference: requested.reference)
        return try run(source, options: requested)
    }

    /// Aligns and merges the frames of `source` (validated: one size, one channel count).
    static func run(_ source: BurstFrameSource, options requested: StackOptions) throws -> StackResult {
        let (options, policyNotices) = requested.resolved(frames: source.count, pixels: source.width * source.height)
        var timings = StageTimings()
        let (reports, fields, parallax) = source.aligned ?? timings.measure(\.align) { align(source, options: options) }
        if options.cancellation?.isCancelled == true { throw StackError.cancelled }
        let t1 = Date()
        let used = reports.filter(\.used).map(\.index)
        let homographies: [Homography?] = used.map { reports[$0].homography }
        let offsets: [DisplacementField?] = used.map { fields[$0] }
        let result: (AnyImage, Float?)
        let split = LockedBox((warp: UInt64(0), kernel: UInt64(0)))
        let w = source.width, h = source.height, c = source.channels
        var maps: StackMaps? =
            options.collectMaps
            ? StackMaps(
                kept: Image(width: w, height: h, channels: 1), provenance: Image(width: w, height: h, channels: 1),
                localShift: StackMaps.localShift(fields, width: w, height: h), tolerance: 0, mergedFrames: used.count,
                frames: source.count)
            : nil
        // From a spill file the merge runs in bands of rows, dropping the pages it has read after
        // each, so the resident part of the file stays at one band of every frame.
        let band = source.bandRows(frames: used.count, options: options)
        var eraseSummary: EraseSummary?
        var sampleNoise: [(slope: Float, intercept: Float)]?
        /// Merges at sample type S, then erases the mask's region (``StackOptions/erase``) if one was given.
        func mergeAndErase<S: PixelSample>(as type: S.Type) throws -> (Image<S>, Float?) {
            let warpers = source.samplers(used, homographies, offsets, options.interpolation, as: S.self)
            let r =
                options.rawLayout != nil
                ? try mergeRawPlanes(
                    source, used, homographies, offsets, options, maps: &maps, bandRows: band, noise: &sampleNoise)
                    as! (Image<S>, Float?)
                : merge(
                    warpers, width: w, height: h, channels: c, options: options, threadTime: split, maps: &maps,
                    frameIndex: used,
                    bandRows: band, afterBand: source.spill.map { s in { s.releaseAll() } })
            guard let mask = options.erase else { return r }
            let e = try timings.measure(\.erase) {
                try erase(
                    mask, warpers, r.0, sigma: r.1, maps: &maps, frameIndex: used, reference: options.reference,
                    cancellation: options.cancellation,
                    bandRows: band, afterBand: source.spill.map { s in { s.releaseAll() } })
            }
            eraseSummary = e.1
            return (e.0, r.1)
        }
        if source.eightBit {
            let r = try mergeAndErase(as: UInt8.self)
            result = (.uint8(r.0), r.1)
        } else {
            let r = try mergeAndErase(as: UInt16.self)
            result = (.uint16(r.0), r.1)
        }
        // Warping and merging run fused, tile by tile; their wall time is split by their shares
        // of the threads' time.
        let fused = Date().timeIntervalSince(t1) - (timings.erase ?? 0), (warp, kernel) = split.value
        let warpShare = warp + kernel > 0 ? Double(warp) / Double(warp + kernel) : 0
        timings.warp = fused * warpShare
        timings.merge = fused * (1 - warpShare)
        timings.warpMerge = fused
        if options.cancellation?.isCancelled == true { throw StackError.cancelled }
        var notices: [StackNotice] = []
        for f in reports where !f.used {
            notices.append(.frameLeftOut(source: f.source, reason: f.reason ?? f.status.rawValue))
        }
        for f in reports {
            if let fb = f.fallback { notices.append(.fellBack(source: f.source, reason: fb.description)) }
        }
        var r = StackResult(
            image: result.0, frames: reports, timings: timings, merge: options.merge, align: options.align,
            noiseSigma: result.1, referenceIndex: options.reference, notices: notices + source.notices + policyNotices,
            referenceMetadata: source.referenceMetadata, decodedFrames: options.retainFrames ? source.memory : nil,
            localFields: fields, maps: maps)
        r.spilledBytes = source.spill?.length
        r.spillReleases = source.spill?.releaseCount
        r.sampleNoise = sampleNoise
        r.erase = eraseSummary
        r.parallax = parallax
        return r
    }

    /// Decodes `inputs` (image files, folders of images sorted by name, or one video of which
    /// ``StackOptions/videoFrames`` evenly spaced frames are taken), then stacks them as
    /// ``stack(_:options:)`` does. Inputs that cannot be decoded are skipped and reported in
    /// ``StackResult/notices``.
    ///
    /// - Parameters:
    ///   - inputs: Paths of image files, folders or one video.
    ///   - options: How to align and merge; ``StackOptions/progress`` also hears the decode stage.
    /// - Returns: The merged image, per-frame reports (indices among the decoded frames) and timings with `decode`.
    /// - Throws: `ImageIOError` when an input does not exist, ``StackError/noFrames`` when none decodes,
    ///   and what ``stack(_:options:)`` throws.
    public static func stack(contentsOf inputs: [String], options: StackOptions = StackOptions()) throws -> StackResult
    {
        let start = Date()
        let files = try InputFile.expand(inputs)
        if BurstInput.isRawBurst(files) {
            try BurstInput.checkOneKind(files)
            return try stackRaw(files, options: options)
        }
        if options.merge == .hdrplus { throw StackError.hdrplusNeedsBayerRaw }
        return try decodeAndStack(inputs, decoder: .pictures, options: options, start: start)
    }

    /// `inputs` decoded by `decoder` (into a spill file when they exceed the memory limit) and
    /// stacked, with the decode's time and the inputs skipped.
    static func decodeAndStack(_ inputs: [String], decoder: FrameDecoder, options: StackOptions, start: Date) throws
        -> StackResult
    {
        if let r = try stackSpilled(inputs, options: options, decoder: decoder) { return r }
        let loaded = try BurstInput.load(
            inputs, videoFrames: options.videoFrames, progress: options.progress, decoder: decoder)
        let decode = Date().timeIntervalSince(start)
        guard !loaded.frames.isEmpty else { throw nothingDecoded(loaded.skipped) }
        var r = try stack(loaded.frames, options: options)
        r.timings.decode = decode
        r.notices.insert(contentsOf: loaded.skipped.map { StackNotice.inputSkipped(input: $0.0, reason: $0.1) }, at: 0)
        return r
    }

    /// A frame's name, size, channels and bit depth (8, 16, 32 for float), for the checks every
    /// burst passes.
    struct FrameShape: Sendable {
        var name: String
        var width: Int
        var height: Int
        var channels: Int
        var bitDepth: Int
    }

    /// A burst is merged at its reference's depth (float frames as 16-bit): a notice for each
    /// frame that is converted to it from another depth than the reference's.
    static func depthNotices(_ frames: [FrameShape], reference: Int) -> [StackNotice] {
        let refDepth = frames[reference].bitDepth, mergeDepth = refDepth == 8 ? 8 : 16
        return frames.filter { $0.bitDepth != refDepth && $0.bitDepth != mergeDepth }
            .map { .depthConverted(source: $0.name, from: $0.bitDepth, to: mergeDepth) }
    }

    /// The checks every burst passes before alignment: frames, a reference among them, one
    /// size, one channel count, and big enough to align.
    static func check(_ frames: [FrameShape], options: StackOptions) throws {
        guard !frames.isEmpty else { throw StackError.noFrames }
        if options.merge == .hdrplus && options.rawLayout?.partner.contains(where: { $0 >= 0 }) != true {
            throw StackError.hdrplusNeedsBayerRaw
        }
        guard options.reference >= 0 && options.reference < frames.count else {
            throw StackError.referenceOutOfRange(options.reference, count: frames.count)
        }
        let ref = frames[options.reference]
        if let mask = options.erase, mask.width != ref.width || mask.height != ref.height {
            throw StackError.eraseMaskSize(
                mask: "\(mask.width)x\(mask.height)", reference: "\(ref.width)x\(ref.height)")
        }
        for f in frames {
            if f.width != ref.width || f.height != ref.height {
                throw StackError.sizeMismatch(
                    frame: f.name, size: "\(f.width)x\(f.height)", reference: ref.name,
                    referenceSize: "\(ref.width)x\(ref.height)")
            }
            if f.channels != ref.channels { throw StackError.channelMismatch(frame: f.name) }
        }
        if options.align != .none && frames.count > 1 && min(ref.width, ref.height) < minimumAlignedSide {
            throw StackError.tooSmallToAlign(width: ref.width, height: ref.height)
        }
    }

    /// The error when no input decoded.
    static func nothingDecoded(_ skipped: [(String, String)]) -> StackError {
        skipped.isEmpty
            ? .noFrames
            : .noUsableInput(reasons: skipped.prefix(5).map { $0.1.hasPrefix($0.0) ? $0.1 : "\($0.0): \($0.1)" })
    }

    /// `frame` warped into the reference's coordinates exactly as the merge samples it (the same
    /// sampler, interpolation and clamping), with 0 where the frame does not cover the reference.
    ///
    /// - Parameters:
    ///   - frame: A decoded frame.
    ///   - homography: Frame pixels to reference pixels (``FrameReport/homography``).
    ///   - interpolation: The merge's interpolation.
    ///   - mergedFrames: How many frames the merge had (it sets the tile width, and so which
    ///     sampling path a tile takes).
    ///   - local: The frame's local alignment (``StackResult/localFields``), if any.
    /// - Returns: The aligned frame, in the frame's sample type (16-bit for float frames).
    public static func aligned(
        _ frame: BurstFrame, homography: Homography, interpolation: Interpolation, mergedFrames: Int,
        local: DisplacementField? = nil
    ) -> AnyImage {
        switch frame.image {
        case .uint8(let i): .uint8(aligned(i, homography, interpolation, mergedFrames, local))
        case .uint16, .float32: .uint16(aligned(frame.image.uint16, homography, interpolation, mergedFrames, local))
        }
    }

    static func aligned<S: PixelSample>(
        _ image: Image<S>, _ h: Homography, _ interpolation: Interpolation, _ n: Int, _ local: DisplacementField?
    ) -> Image<S> {
        let w = image.width, c = image.channels, tileWidth = tileWidth(frames: n, channels: c)
        let warper = RowSampler(frame: image, homography: h, interpolation: interpolation, offsets: local)
        return Image<S>(uninitializedWidth: w, height: image.height, channels: c) { dst in
            StripExecutor.forEachStrip(rows: image.height, minimumRows: 8) { rows in
                let tile = SampleTile.allocate(frames: 1, maxPixels: tileWidth, channels: c)
                defer { tile.deallocate() }
                let cache = RowSampler<S>.Cache(pixels: tileWidth)
                // Down each column segment of the strip, so converted source rows are reused.
                var x0 = 0
                while x0 < w {
                    let x1 = min(w, x0 + tileWidth)
                    for y in rows {
                        warper.sampleRow(y: y, x0: x0, x1: x1, into: tile.values, valid: tile.valid, cache: cache)
                        let o = (y * w + x0) * c
                        for j in 0..<((x1 - x0) * c) { dst[o + j] = S(clampingRounded: tile.values[j]) }
                    }
                    x0 = x1
                }
            }
        }
    }

    /// Pixels per tile of the fused warp + merge: about 32 K floats per frame-stack tile, and at
    /// most 512: a wider segment of a rotated frame (or one with a local correction) spans more
    /// source rows than the warp's row cache holds (16), and every such segment took the
    /// per-pixel path (lowlight-handheld's 8 frames had 1,360-pixel tiles: its warp 0.051 ->
    /// 0.038 s with the cap).
    public static func tileWidth(frames n: Int, channels c: Int) -> Int { min(512, max(64, 4096 / max(1, n) / c * 8)) }

    // MARK: Alignment

    static func align(_ frames: BurstFrameSource, options: StackOptions) -> (
        [FrameReport], [DisplacementField?], ParallaxSummary?
    ) {
        let none = [DisplacementField?](repeating: nil, count: frames.count)
        let noAlignments = [LocalAlignment?](repeating: nil, count: frames.count)
        let refIndex = options.reference
        var reports = frames.names.enumerated().map { i, name in
            FrameReport(
                index: i, source: name, homography: i == refIndex ? Homography.identity : nil,
                used: i == refIndex, status: i == refIndex ? .reference : .pending)
        }
        if let given = options.givenHomographies {
            var fields = none
            for i in reports.indices where i != refIndex {
                let field = i < (options.givenFields?.count ?? 0) ? options.givenFields?[i] : nil
                if let field, !field.covers(width: frames.width, height: frames.height) {
                    reports[i].fail(
                        "the local field given for this frame (\(field.columns)x\(field.rows) cells of \(field.cell) "
                            + "px) "
                            + "does not cover its \(frames.width)x\(frames.height) pixels")
                } else if i < given.count, let h = given[i] {
                    reports[i].homography = h
                    reports[i].used = true
                    reports[i].status = .given
                    fields[i] = field
                } else {
                    reports[i].fail("no homography given for this frame")
                }
            }
            return (reports, fields, nil)
        }
        if options.align == .none {
            for i in reports.indices where i != refIndex {
                reports[i].homography = .identity
                reports[i].used = true
                reports[i].status = .asIs
            }
            return (reports, none, nil)
        }
        guard frames.count > 1 else { return (reports, none, nil) }
        // Alignment has started: say so at once (0 of N), since preparing the reference and the
        // first frames can take seconds on a large burst before the first one is done.
        options.progress?(StackProgress(stage: .align, done: 0, total: frames.count - 1, elapsed: 0))
        let refStart = Date()
        let reference = registrationReference(frames.image(refIndex), options: options)
        frames.doneAligning(refIndex)
        reports[refIndex].alignSeconds = (Date().timeIntervalSince(refStart) * 1000).rounded() / 1000
        let others = (0..<frames.count).filter { $0 != refIndex }
        let box = LockedBox(reports)
        let fieldBox = LockedBox(noAlignments)
        let start = Date()
        let done = LockedBox(0)
        // Frames are registered two (one per core) at a time: a small frame's registration runs
        // on one core (its point loops only split above 8192 points), and each frame is
        // independent of the others given the reference. Results land by index, so the order in
        // which frames finish does not matter.
        StripExecutor.forEachIndex(
            in: others.indices, workers: StripExecutor.threadCount,
            until: { options.cancellation?.isCancelled == true }
        ) { n in
            let i = others[n]
            let (r, field) = register(frames.image(i), index: i, name: frames.names[i], to: reference, options: options)
            {
                frames.doneAligning(i)
            }
            box.update { $0[i] = r }
            fieldBox.update { $0[i] = field }
            // Under the counter's lock, so progress never goes backwards.
            done.update { d in
                d += 1
                options.progress?(
                    StackProgress(stage: .align, done: d, total: others.count, elapsed: Date().timeIntervalSince(start))
                )
            }
        }
        var registered = box.value, alignments = fieldBox.value
        fieldsForTheRest(&alignments, reports: &registered, frames: frames, reference: reference, options: options)
        let consistent = consistentFields(alignments, frames: frames, reports: registered)
        return (registered, consistent.fields, consistent.parallax)
    }

    /// The frames' fields, each measured against the reference alone, made to agree with one scene
    /// (``ParallaxConsistency``): cells that the reference's own moving things hid take the
    /// burst's answer, and where most frames could not measure, the depth at which the frames'
    /// own pixels agree best (``ParallaxConsistency/sweep(_:model:samplers:)``).
    static func consistentFields(
        _ alignments: [LocalAlignment?], frames: BurstFrameSource, reports: [FrameReport]
    ) -> (fields: [DisplacementField?], parallax: ParallaxSummary?) {
        let r = ParallaxConsistency.consolidated(
            alignments.map { $0?.field }, measured: alignments.map { $0?.measured },
            structure: alignments.lazy.compactMap { $0?.structure }.first)
        guard let model = r.model else { return (r.fields, ParallaxSummary(r.summary, sweep: nil)) }
        let samplers: [ParallaxConsistency.Sampler?] = alignments.indices.map { i in
            guard alignments[i] != nil, i < reports.count, let h = reports[i].homography else { return nil }
            if frames.eightBit {
                let s = frames.samplers([i], [h], [], .bilinear, as: UInt8.self)[0]
                return { s.grey(at: $0, into: $1) }
            }
            let s = frames.samplers([i], [h], [], .bilinear, as: UInt16.self)[0]
            return { points, values in
                s.grey(at: points, into: values)
                for i in values.indices { values[i] /= 257 }
            }
        }
        let swept = ParallaxConsistency.sweep(r.fields, model: model, samplers: samplers)
        return (swept.0, ParallaxSummary(r.summary, sweep: swept.1))
    }

    /// Where enough of the burst's frames found parallax (``LocalAlignmentOptions/burstParallaxShare``,
    /// with ``AlignMode/auto``), a field for each registered frame the coarse look turned away,
    /// once every frame is registered, two frames at a time (one a core). Its report keeps the
    /// coarse look and says why.
    static func fieldsForTheRest(
        _ alignments: inout [LocalAlignment?], reports: inout [FrameReport], frames: BurstFrameSource,
        reference: RegistrationReference, options: StackOptions
    ) {
        let lo = options.localAlignment
        guard options.align == .auto, lo.burstParallaxShare > 0 else { return }
        let registered = reports.indices.filter {
            reports[$0].used && reports[$0].status != .reference && reports[$0].homography != nil
                && $0 < alignments.count
        }
        let found = registered.filter { alignments[$0] != nil }.count
        let rest = registered.filter { alignments[$0] == nil && reports[$0].local?.used == false }
        guard found >= 2, Float(found) >= lo.burstParallaxShare * Float(registered.count), !rest.isEmpty else {
            return
        }
        let results = LockedBox([Int: (LocalAlignment, seconds: Double)]())
        let homographies = rest.map { reports[$0].homography! }
        StripExecutor.forEachIndex(
            in: rest.indices, workers: StripExecutor.threadCount,
            until: { options.cancellation?.isCancelled == true }
        ) { n in
            let i = rest[n], start = Date()
            let pyramid = reference.framePyramid(frames.image(i), ceiling: options.alignCeiling)
            frames.doneAligning(i)
            let la = LocalAligner.estimate(
                reference: reference.local, frame: pyramid, homography: homographies[n], options: lo)
            results.update { $0[i] = (la, Date().timeIntervalSince(start)) }
        }
        for (i, (la, seconds)) in results.value {
            alignments[i] = la
            reports[i].local = LocalFrameReport(
                used: true,
                decision: "parallax in \(found) of the burst's \(registered.count) frames (this frame's coarse look: "
                    + "\(reports[i].local?.decision ?? "none"))",
                field: la.statistics, coarse: reports[i].local?.coarse)
            // The frame's alignment time counts its field too.
            reports[i].alignSeconds = (((reports[i].alignSeconds ?? 0) + seconds) * 1000).rounded() / 1000
        }
    }

    /// The reference frame's pyramid and features, which every other frame is registered to.
    static func registrationReference(_ image: AnyImage, options: StackOptions) -> RegistrationReference {
        switch image {
        case .uint8(let i): RegistrationReference(i, options: options.registration)
        case .uint16(let i): RegistrationReference(i.cut(at: options.alignCeiling), options: options.registration)
        case .float32(let i): RegistrationReference(i, options: options.registration)
        }
    }

    /// Registers one decoded frame to the reference: its pyramid, the homography (falling back to
    /// a translation under ``AlignMode/auto``), and the local alignment where it applies.
    /// `pyramidMade` runs once the frame's pixels are no longer needed.
    static func register(
        _ image: AnyImage, index i: Int, name: String, to reference: RegistrationReference, options: StackOptions,
        pyramidMade: () -> Void = {}
    ) -> (FrameReport, LocalAlignment?) {
        let frameStart = Date()
        let pyramid = reference.framePyramid(image, ceiling: options.alignCeiling)
        pyramidMade()
        var r = FrameReport(index: i, source: name)
        let primary: MotionModel = options.align == .translation ? .translation : .homography
        var field: LocalAlignment? = nil
        // Where a local field may follow (`local`; `auto` when the coarse look finds parallax),
        // registration first stops a level above the finest: a frame with parallax converges
        // slowly there (no homography fits it: 12 iterations over the finest level's 16-40k
        // points, half of its registration, on motorcycle-parallax), and its field takes over
        // from the level above. A frame without parallax is then refined on down, to what a
        // registration without the stop gives; if that fails, it is registered as before.
        if options.align == .local || options.align == .auto,
            let stopped = try? reference.register(
                pyramid: pyramid, model: primary, finestLevel: reference.finestLevel(pyramid) + 1)
        {
            r.fill(stopped)
            (r.local, field) = localAlignment(
                reference: reference, frame: pyramid, homography: stopped.homography, options: options)
            if field != nil { return (r.timed(since: frameStart), field) }
            if let full = try? reference.refineToFinest(stopped, pyramid: pyramid) {
                r.fill(full)
                return (r.timed(since: frameStart), nil)
            }
            r = FrameReport(index: i, source: name)
        }
        do {
            r.fill(try reference.register(pyramid: pyramid, model: primary))
        } catch {
            if options.align == .auto {
                do {
                    r.fill(try reference.register(pyramid: pyramid, model: .translation))
                    r.fallback = AlignmentFallback(
                        from: .homography, to: .translation, reason: String(describing: error))
                } catch let e2 {
                    r.fail(String(describing: e2))
                }
            } else {
                r.fail(String(describing: error))
            }
        }
        if r.used, let h = r.homography, options.align == .local || options.align == .auto {
            (r.local, field) = localAlignment(reference: reference, frame: pyramid, homography: h, options: options)
        }
        return (r.timed(since: frameStart), field)
    }

    /// The local alignment of a registered frame: always with ``AlignMode/local``; with `.auto`
    /// only when a coarse field (two pyramid levels above the finest) shows parallax, so bursts
    /// that one homography aligns are merged exactly as before.
    static func localAlignment(
        reference: RegistrationReference, frame: GreyPyramid, homography h: Homography,
        options: StackOptions
    ) -> (LocalFrameReport, LocalAlignment?) {
        let lo = options.localAlignment
        if options.align == .local {
            let la = LocalAligner.estimate(reference: reference.local, frame: frame, homography: h, options: lo)
            return (
                LocalFrameReport(used: true, decision: "asked for (align: local)", field: la.statistics, coarse: nil),
                la
            )
        }
        let coarseLevel = min(reference.pyramid.levels.count - 1, reference.pyramid.baseLevel + 2)
        let coarse = LocalAligner.estimate(
            reference: reference.local, frame: frame, homography: h, options: lo, finestLevel: coarseLevel)
        let p50 = coarse.statistics.p50Px, threshold = lo.parallaxThreshold * Float(1 << coarseLevel)
        let units = coarse.statistics.p50Noise
        var refusal: String? = nil
        if p50 < threshold {
            refusal = "no parallax: coarse field median \(p50) px < \(threshold) px"
        } else if let units, units < lo.parallaxNoiseRatio {
            refusal = "no parallax: coarse field median \(units) noise units < \(lo.parallaxNoiseRatio)"
        }
        if let refusal {
            return (LocalFrameReport(used: false, decision: refusal, field: nil, coarse: coarse.statistics), nil)
        }
        let la = LocalAligner.estimate(
            reference: reference.local, frame: frame, homography: h, options: lo, continuing: coarse)
        return (
            LocalFrameReport(
                used: true,
                decision: "parallax: coarse field median \(p50) px >= \(threshold) px"
                    + (units.map { ", \($0) noise units" } ?? ""),
                field: la.statistics, coarse: coarse.statistics), la
        )
    }
}

extension RegistrationReference {
    /// A frame's pyramid, its 16-bit samples above `ceiling` lowered to it first.
    func framePyramid(_ image: AnyImage, ceiling: UInt16?) -> GreyPyramid {
        switch image {
        case .uint8(let img): framePyramid(img)
        case .uint16(let img): framePyramid(img.cut(at: ceiling))
        case .float32(let img): framePyramid(img)
        }
    }
}

extension Image<UInt16> {
    /// The image with every sample above `ceiling` lowered to it (itself without one).
    func cut(at ceiling: UInt16?) -> Image<UInt16> {
        guard let ceiling else { return self }
        var out = self
        out.samples.withUnsafeMutableBufferPointer { s in for i in s.indices where s[i] > ceiling { s[i] = ceiling } }
        return out
    }
}
