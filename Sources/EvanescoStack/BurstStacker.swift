import Dispatch
import EvanescoAlign
import EvanescoCore
import EvanescoIO
import Foundation

/// One frame of a burst, decoded.
public struct BurstFrame: Sendable {
    /// A name for reports and messages (usually the file name).
    public var name: String
    /// The decoded pixels, upright.
    public var image: AnyImage
    /// EXIF, ICC and XMP of the file, kept for the output when this is the reference.
    public var metadata: ImageMetadata
    /// - Parameters:
    ///   - name: A name for reports.
    ///   - image: The decoded pixels.
    ///   - metadata: The file's metadata.
    public init(name: String, image: AnyImage, metadata: ImageMetadata = ImageMetadata()) {
        self.name = name
        self.image = image
        self.metadata = metadata
    }
}

/// Why a burst cannot be stacked. Every case says what to do.
public enum StackError: Error, CustomStringConvertible, Equatable {
    case noFrames
    /// Every input was left out; each with its reason.
    case noUsableInput(reasons: [String])
    case referenceOutOfRange(Int, count: Int)
    case sizeMismatch(frame: String, size: String, reference: String, referenceSize: String)
    case channelMismatch(frame: String)
    /// Frames smaller than ``BurstStacker/minimumAlignedSide`` on a side cannot be registered.
    case tooSmallToAlign(width: Int, height: Int)
    /// ``StackOptions/cancellation`` was cancelled; nothing was produced.
    case cancelled
    /// The decoded frames exceed ``StackOptions/memoryLimit`` and the temporary file that holds
    /// them instead could not be made or written.
    case spillFailed(directory: String, reason: String)
    /// ``StackOptions/erase`` is not the reference frame's size.
    case eraseMaskSize(mask: String, reference: String)
    /// ``StackOptions/erase`` masks no pixel.
    case eraseMaskEmpty
    /// Every frame agreed with the merge inside ``StackOptions/erase``: nothing saw behind it.
    case nothingBehindMask(maskedPixels: Int)

    public var description: String {
        switch self {
        case .tooSmallToAlign(let w, let h):
            "the frames are \(w)x\(h) pixels, too small to align (\(BurstStacker.minimumAlignedSide) on each side at least); merge them without alignment"
        case .cancelled: "the stack was cancelled before it finished"
        case .eraseMaskSize(let m, let r):
            "the erase mask is \(m) but the result is \(r): paint the mask over the result (the reference frame's pixels), at its size"
        case .eraseMaskEmpty:
            "the erase mask marks no pixel: paint white (opaque) where the result must not keep what it shows"
        case .nothingBehindMask(let n):
            "no frame saw behind what the merge shows inside the erase mask (\(n) pixels): every frame agrees with the merge there, so there is nothing to fill it from; mask only what stayed for part of the burst, or add frames in which that place is clear"
        case .spillFailed(let d, let r):
            "the decoded frames do not fit in the memory limit and cannot be kept in a temporary file in \(d): \(r); free space there, choose another spill directory or raise the memory limit"
        case .noFrames: "no usable frames; give image files, a folder of images or one video"
        case .noUsableInput(let r):
            "no input could be used (\(r.joined(separator: "; "))); give image files, a folder of images or one video"
        case .referenceOutOfRange(let r, let n):
            "reference frame \(r) is out of range: there are \(n) usable frames (0...\(n - 1))"
        case .sizeMismatch(let f, let s, let r, let rs):
            "\(f) is \(s) but the reference \(r) is \(rs); all frames of a burst must have the same size (crop or resize them first)"
        case .channelMismatch(let f):
            "\(f) has a different number of colour channels from the reference; convert the burst to one colour type first"
        }
    }
}

/// The merged picture and everything measured on the way.
public struct StackResult: Sendable {
    /// The merged picture, in the frames' sample type.
    public var image: AnyImage
    /// One entry per decoded frame, in input order.
    public var frames: [FrameReport]
    /// Seconds per stage. ``BurstStacker/stack(_:options:)`` fills align, warp, merge and their
    /// fused wall time `warpMerge` (warp and merge run tile by tile together; their wall time is
    /// split by their shares of thread time); ``BurstStacker/stack(contentsOf:options:)`` adds decode.
    public var timings: StageTimings
    /// The merge actually used (see ``StackOptions/meanForTwoFrames``).
    public var merge: MergeMethod
    /// The alignment mode that was asked for.
    public var align: AlignMode
    /// Burst-wide noise estimate (sample units) used by the robust merge.
    public var noiseSigma: Float?
    /// Index (in ``frames``) of the frame the others were aligned to.
    public var referenceIndex: Int
    /// Decisions and problems to tell the user about, in order: skipped inputs, frames left out,
    /// fallbacks, policy changes.
    public var notices: [StackNotice]
    /// Metadata of the reference frame (EXIF, ICC), for the output.
    public var referenceMetadata: ImageMetadata
    /// The decoded frames, when ``StackOptions/retainFrames`` is set.
    public var decodedFrames: [BurstFrame]?
    /// Each frame's local alignment (in ``frames`` order; nil where none was applied).
    public var localFields: [DisplacementField?] = []
    /// The per-pixel maps, when ``StackOptions/collectMaps`` is set.
    public var maps: StackMaps?
    /// What the erase pass did, when ``StackOptions/erase`` was given.
    public var erase: EraseSummary?
    /// What the burst-wide parallax passes did to ``localFields`` (nil when fewer than 3 frames had one).
    public var parallax: ParallaxSummary?
    /// Bytes of the temporary file the decoded frames were kept in, when they exceeded
    /// ``StackOptions/memoryLimit``; nil when they were held in memory.
    public var spilledBytes: Int?
    /// Inputs that could not be decoded (see ``notices``).
    public var skippedInputs: Int { notices.filter { if case .inputSkipped = $0 { true } else { false } }.count }
    /// Frames merged.
    public var usedFrames: Int { frames.filter(\.used).count }
}

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
        let band = source.bandRows(frames: used.count, limit: options.memoryLimit)
        var eraseSummary: EraseSummary?
        /// Merges at sample type S, then erases the mask's region (``StackOptions/erase``) if one was given.
        func mergeAndErase<S: PixelSample>(as type: S.Type) throws -> (Image<S>, Float?) {
            let warpers = source.samplers(used, homographies, offsets, options.interpolation, as: S.self)
            let r = merge(
                warpers, width: w, height: h, channels: c, options: options, threadTime: split, maps: &maps,
                frameIndex: used,
                bandRows: band, afterBand: source.spill.map { s in { s.releaseAll() } })
            guard let mask = options.erase else { return r }
            let e = try timings.measure(\.erase) {
                try erase(
                    mask, warpers, r.0, sigma: r.1, maps: &maps, frameIndex: used, cancellation: options.cancellation,
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
        if let r = try stackSpilled(inputs, options: options) { return r }
        let loaded = try BurstInput.load(inputs, videoFrames: options.videoFrames, progress: options.progress)
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
                        "the local field given for this frame (\(field.columns)x\(field.rows) cells of \(field.cell) px) "
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
        let consistent = consistentFields(fieldBox.value, frames: frames, reports: box.value)
        return (box.value, consistent.fields, consistent.parallax)
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

    /// The reference frame's pyramid and features, which every other frame is registered to.
    static func registrationReference(_ image: AnyImage, options: StackOptions) -> RegistrationReference {
        switch image {
        case .uint8(let i): RegistrationReference(i, options: options.registration)
        case .uint16(let i): RegistrationReference(i, options: options.registration)
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
        let pyramid: GreyPyramid
        switch image {
        case .uint8(let img): pyramid = reference.framePyramid(img)
        case .uint16(let img): pyramid = reference.framePyramid(img)
        case .float32(let img): pyramid = reference.framePyramid(img)
        }
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
        guard p50 >= threshold else {
            return (
                LocalFrameReport(
                    used: false, decision: "no parallax: coarse field median \(p50) px < \(threshold) px", field: nil,
                    coarse: coarse.statistics), nil
            )
        }
        let la = LocalAligner.estimate(
            reference: reference.local, frame: frame, homography: h, options: lo, continuing: coarse)
        return (
            LocalFrameReport(
                used: true, decision: "parallax: coarse field median \(p50) px >= \(threshold) px",
                field: la.statistics, coarse: coarse.statistics), la
        )
    }

    // MARK: Merge

    /// Streams the merge over tiles: for each row segment every frame is warped into a small
    /// buffer and merged at once, so no warped frame is ever held whole.
    static func merge<S: PixelSample>(
        _ images: [Image<S>], _ homographies: [Homography?], _ offsets: [DisplacementField?], options: StackOptions,
        threadTime: LockedBox<(warp: UInt64, kernel: UInt64)>? = nil
    ) -> (Image<S>, Float?) {
        var none: StackMaps? = nil
        let warpers = images.indices.map {
            RowSampler(
                frame: images[$0], homography: homographies[$0], interpolation: options.interpolation,
                offsets: $0 < offsets.count ? offsets[$0] : nil)
        }
        return merge(
            warpers, width: images[0].width, height: images[0].height, channels: images[0].channels, options: options,
            threadTime: threadTime, maps: &none, frameIndex: Array(images.indices), bandRows: nil, afterBand: nil)
    }

    /// The merge, also filling `maps` (when given) tile by tile; `frameIndex[k]` is merged frame
    /// k's index in the report. With `bandRows` the picture is merged in bands of that many rows,
    /// one after the other (each band split among the threads), and `afterBand` runs after each.
    static func merge<S: PixelSample>(
        _ warpers: [RowSampler<S>], width w: Int, height h: Int, channels c: Int, options: StackOptions,
        threadTime: LockedBox<(warp: UInt64, kernel: UInt64)>?, maps: inout StackMaps?,
        frameIndex: [Int], bandRows: Int?, afterBand: (() -> Void)?
    ) -> (Image<S>, Float?) {
        let n = warpers.count
        let (kernel, sigma) = makeKernel(
            warpers, width: w, height: h, channels: c, options: options, afterBand: afterBand)
        let tileWidth = tileWidth(frames: n, channels: c)
        let start = Date()
        let rowsDone = LockedBox(0)
        // Maps: a frame agrees with the result within 3 x the noise (at least 2 % of full scale).
        let tolerance =
            maps == nil
            ? 0
            : agreement(
                S.self,
                noise: sigma
                    ?? estimateNoise(
                        warpers, width: w, height: h, channels: c,
                        network: SortingNetwork(size: n), afterRow: afterBand))
        maps?.tolerance = tolerance
        let keptMap = maps.map { _ in UnsafeMutablePointer<UInt16>.allocate(capacity: w * h) }
        let provenanceMap = maps.map { _ in UnsafeMutablePointer<UInt16>.allocate(capacity: w * h) }
        defer {
            keptMap?.deallocate()
            provenanceMap?.deallocate()
        }
        let km = UncheckedSendable(keptMap), pm = UncheckedSendable(provenanceMap)
        let segments = (w + tileWidth - 1) / tileWidth
        // A tile, its merged values and a row cache per frame for each thread, reused strip
        // after strip (each strip starts its caches afresh).
        let buffers = Self.tileBuffers(S.self, frames: n, channels: c, tileWidth: tileWidth)
        defer { Self.deallocate(buffers) }
        afterBand?()
        let band = min(h, max(1, bandRows ?? h))
        let out = Image<S>(uninitializedWidth: w, height: h, channels: c) { dst in
            var y0 = 0
            while y0 < h {
                let y1 = min(h, y0 + band)
                // A band splits into two strips per thread (each strip's first rows cost its caches more).
                let minimumRows = bandRows == nil ? 8 : max(8, (y1 - y0) / (2 * StripExecutor.threadCount))
                StripExecutor.forEachStrip(rows: y1 - y0, minimumRows: minimumRows) { local in
                    buffers.borrow { tile, merged, caches in
                        let rows = (local.lowerBound + y0)..<(local.upperBound + y0)
                        // One cache of converted source rows per frame: the strip is walked down each
                        // column segment in turn, so each source row is converted about once.
                        for cache in caches { cache.invalidate() }
                        var warpNs: UInt64 = 0, kernelNs: UInt64 = 0
                        defer {
                            threadTime?.update {
                                $0.warp += warpNs
                                $0.kernel += kernelNs
                            }
                        }
                        var x0 = 0
                        while x0 < w {
                            let x1 = min(w, x0 + tileWidth)
                            for y in rows {
                                if options.cancellation?.isCancelled == true { break }
                                let t = tile.resized(pixels: x1 - x0)
                                let c0 = DispatchTime.now().uptimeNanoseconds
                                for k in 0..<n {
                                    warpers[k].sampleRow(
                                        y: y, x0: x0, x1: x1, into: t.values + k * t.stride,
                                        valid: t.valid + k * t.pixels, cache: caches[k])
                                }
                                let c1 = DispatchTime.now().uptimeNanoseconds
                                t.countValid()
                                kernel.merge(t, into: merged)
                                if let kp = km.value, let pp = pm.value {
                                    StackMaps.record(
                                        t, merged: merged, tolerance: tolerance, frameIndex: frameIndex,
                                        kept: kp + (y * w + x0), provenance: pp + (y * w + x0))
                                }
                                let c2 = DispatchTime.now().uptimeNanoseconds
                                warpNs += c1 - c0
                                kernelNs += c2 - c1
                                let o = (y * w + x0) * c
                                for j in 0..<t.length { dst[o + j] = S(clampingRounded: merged[j]) }
                                // Progress in rows: a row of every segment is one row of the picture.
                                if let progress = options.progress {
                                    let d = rowsDone.update {
                                        $0 += 1
                                        return $0
                                    }
                                    if d % (64 * segments) == 0 || d == h * segments {
                                        progress(
                                            StackProgress(
                                                stage: .merge, done: d / segments, total: h,
                                                elapsed: Date().timeIntervalSince(start)))
                                    }
                                }
                            }
                            x0 = x1
                        }
                    }
                }
                afterBand?()
                if options.cancellation?.isCancelled == true { break }
                y0 = y1
            }
        }
        if let kp = keptMap, let pp = provenanceMap {
            maps?.kept = Image<UInt16>(uninitializedWidth: w, height: h, channels: 1) { d in
                for i in 0..<(w * h) { d[i] = kp[i] }
            }
            maps?.provenance = Image<UInt16>(uninitializedWidth: w, height: h, channels: 1) { d in
                for i in 0..<(w * h) { d[i] = pp[i] }
            }
        }
        return (out, sigma)
    }

    /// The merge kernel `options` ask for, and the burst's noise when the robust merge measured it.
    static func makeKernel<S>(
        _ warpers: [RowSampler<S>], width w: Int, height h: Int, channels c: Int, options: StackOptions,
        afterBand: (() -> Void)?
    ) -> (any MergeKernel, Float?) {
        let network = SortingNetwork(size: warpers.count)
        switch options.merge {
        case .mean: return (MeanKernel(), nil)
        case .median: return (MedianKernel(network: network), nil)
        case .sigmaClip: return (SigmaClipKernel(network: network, kappa: options.kappa), nil)
        case .winsorized: return (WinsorizedKernel(network: network, fraction: options.winsorFraction), nil)
        case .mode: return (ModeKernel(network: network, fullScale: S.fullScale), nil)
        case .robust:
            let s = estimateNoise(warpers, width: w, height: h, channels: c, network: network, afterRow: afterBand)
            return (SigmaClipKernel(network: network, kappa: options.kappa, burstNoise: s), s)
        }
    }

    /// How far a frame may be from the result and still agree with it: 3 x the burst's noise, at
    /// least 2 % of full scale (the maps' kept count and the erase pass both judge by it).
    static func agreement<S: PixelSample>(_: S.Type, noise: Float) -> Float { max(3 * noise, 0.02 * S.fullScale) }

    /// The erase pass (``StackOptions/erase``) over a finished merge of `warpers`, judging
    /// agreement as the maps do (with the merge's noise estimate, or a new one when the merge
    /// made none). From a spill file, `bandRows` and `afterBand` are the merge's: the pass works
    /// through bands no taller, dropping the pages it read after each.
    static func erase<S>(
        _ mask: EraseMask, _ warpers: [RowSampler<S>], _ plain: Image<S>, sigma: Float?, maps: inout StackMaps?,
        frameIndex: [Int], cancellation: StackCancellation?, bandRows: Int? = nil, afterBand: (() -> Void)? = nil
    ) throws -> (Image<S>, EraseSummary) {
        let noise =
            sigma
            ?? estimateNoise(
                warpers, width: plain.width, height: plain.height, channels: plain.channels,
                network: SortingNetwork(size: warpers.count), afterRow: afterBand)
        return try Eraser.apply(
            warpers, plain: plain, mask: mask, tolerance: agreement(S.self, noise: noise),
            frameIndex: frameIndex, maps: &maps, cancellation: cancellation, bandRows: bandRows, afterBand: afterBand)
    }

    /// Burst-wide noise sigma (sample units): 1.4826 x the median, over sampled pixels, of each
    /// sample's median absolute deviation across frames. Moving things are a minority of frames
    /// at most pixels, so the median of MADs reflects sensor and compression noise.
    ///
    /// The pixels: 12 bands of 4 rows spread over the height, in segments of up to 256 pixels
    /// across the width, sampled as the merge samples them (the same sampler, walking each
    /// segment down its band through per-frame row caches), and sorted by the merge's sorting
    /// network, twice (values, then deviations from their median). Bands run on all cores, but
    /// one at a time from a temporary file of frames, whose read pages `afterRow` drops after
    /// each band.
    static func estimateNoise<S>(
        _ warpers: [RowSampler<S>], width w: Int, height h: Int, channels c: Int, network: SortingNetwork,
        afterRow: (() -> Void)? = nil
    ) -> Float {
        let n = warpers.count
        guard n >= 3, w > 0, h > 0 else { return S.fullScale / 255 * 2 }
        let bandRows = min(4, h), bands = min(12, max(1, h / bandRows))
        let segment = 256, xStep = max(segment, w / 8)
        let starts = Array(stride(from: 0, to: max(1, w - segment), by: xStep))
        let mads = LockedBox([Float]())
        // A tile and a row cache per frame for each thread, reused band after band.
        let buffers = ReusePool {
            (
                SampleTile.allocate(frames: n, maxPixels: segment, channels: c),
                (0..<n).map { _ in RowSampler<S>.Cache(pixels: segment) }
            )
        }
        defer { for (tile, _) in buffers.all { tile.deallocate() } }
        func band(_ b: Int) {
            buffers.borrow { tile, caches in
                let y0 = min(h - bandRows, (2 * b + 1) * h / (2 * bands) - bandRows / 2)
                for cache in caches { cache.invalidate() }
                var local: [Float] = []
                for x0 in starts {
                    for y in max(0, y0)..<min(h, max(0, y0) + bandRows) {
                        let t = tile.resized(pixels: min(segment, w - x0))
                        for k in 0..<n {
                            warpers[k].sampleRow(
                                y: y, x0: x0, x1: x0 + t.pixels, into: t.values + k * t.stride,
                                valid: t.valid + k * t.pixels, cache: caches[k])
                        }
                        t.countValid()
                        t.copyForSorting(into: t.scratch)
                        t.sort(t.scratch, network)
                        let med = t.perSample
                        for j in 0..<t.length { med[j] = t.median(sorted: t.scratch, j) }
                        let deviations = t.sortedDeviations(medians: med, network)  // as the merge takes them
                        // The upper median of the deviations (of an even count, the larger middle one).
                        for j in 0..<t.length where t.counts[j] >= 3 {
                            local.append(deviations[Int(t.counts[j] / 2) * t.stride + j])
                        }
                    }
                }
                mads.update { $0.append(contentsOf: local) }
            }
        }
        if let afterRow {
            for b in 0..<bands {
                band(b)
                afterRow()
            }
        } else {
            StripExecutor.forEachStrip(rows: bands, minimumRows: 1) { range in for b in range { band(b) } }
        }
        var all = mads.value
        guard !all.isEmpty else { return S.fullScale / 255 * 2 }
        return max(S.fullScale / 255 * 0.5, 1.4826 * Selection.median(&all))
    }
}

extension BurstStacker {
    /// What one thread warps and merges a tile with: the tile of samples, its merged values and a
    /// row cache per frame. The merge and the erase pass borrow them from one pool per run,
    /// strip after strip; ``deallocate(_:)`` frees them.
    typealias TileBuffers<S: PixelSample> = (SampleTile, UnsafeMutablePointer<Float>, [RowSampler<S>.Cache])

    /// A pool of ``TileBuffers`` for `frames` frames of `channels` channels, tiles up to
    /// `tileWidth` pixels wide.
    static func tileBuffers<S: PixelSample>(
        _: S.Type, frames n: Int, channels c: Int, tileWidth: Int
    ) -> ReusePool<TileBuffers<S>> {
        ReusePool {
            (
                SampleTile.allocate(frames: n, maxPixels: tileWidth, channels: c),
                UnsafeMutablePointer<Float>.allocate(capacity: tileWidth * c),
                (0..<n).map { _ in RowSampler<S>.Cache(pixels: tileWidth) }
            )
        }
    }

    /// Frees every tile and merged row a pool from ``tileBuffers(_:frames:channels:tileWidth:)`` made.
    static func deallocate<S: PixelSample>(_ pool: ReusePool<TileBuffers<S>>) {
        for (tile, merged, _) in pool.all {
            tile.deallocate()
            merged.deallocate()
        }
    }
}
