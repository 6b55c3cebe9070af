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
        self.name = name; self.image = image; self.metadata = metadata
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

    public var description: String {
        switch self {
        case .tooSmallToAlign(let w, let h):
            "the frames are \(w)x\(h) pixels, too small to align (\(BurstStacker.minimumAlignedSide) on each side at least); merge them without alignment"
        case .cancelled: "the stack was cancelled before it finished"
        case .noFrames: "no usable frames; give image files, a folder of images or one video"
        case .noUsableInput(let r): "no input could be used (\(r.joined(separator: "; "))); give image files, a folder of images or one video"
        case .referenceOutOfRange(let r, let n): "reference frame \(r) is out of range: there are \(n) usable frames (0...\(n - 1))"
        case .sizeMismatch(let f, let s, let r, let rs): "\(f) is \(s) but the reference \(r) is \(rs); all frames of a burst must have the same size (crop or resize them first)"
        case .channelMismatch(let f): "\(f) has a different number of colour channels from the reference; convert the burst to one colour type first"
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
    public static func stack(_ frames: [BurstFrame], options requested: StackOptions = StackOptions()) throws -> StackResult {
        guard !frames.isEmpty else { throw StackError.noFrames }
        guard requested.reference >= 0 && requested.reference < frames.count else {
            throw StackError.referenceOutOfRange(requested.reference, count: frames.count)
        }
        let ref = frames[requested.reference]
        for f in frames {
            if f.image.width != ref.image.width || f.image.height != ref.image.height {
                throw StackError.sizeMismatch(frame: f.name, size: "\(f.image.width)x\(f.image.height)",
                                              reference: ref.name, referenceSize: "\(ref.image.width)x\(ref.image.height)")
            }
            if f.image.channels != ref.image.channels { throw StackError.channelMismatch(frame: f.name) }
        }
        if requested.align != .none && frames.count > 1 && min(ref.image.width, ref.image.height) < minimumAlignedSide {
            throw StackError.tooSmallToAlign(width: ref.image.width, height: ref.image.height)
        }
        let (options, policyNotices) = requested.resolved(frames: frames.count, pixels: ref.image.width * ref.image.height)
        var timings = StageTimings()
        let (reports, fields) = timings.measure(\.align) { align(frames, options: options) }
        if options.cancellation?.isCancelled == true { throw StackError.cancelled }
        let t1 = Date()
        let used = reports.filter(\.used).map(\.index)
        let homographies: [Homography?] = used.map { reports[$0].homography }
        let offsets: [DisplacementField?] = used.map { fields[$0] }
        let result: (AnyImage, Float?)
        let split = LockedBox((warp: UInt64(0), kernel: UInt64(0)))
        let w = ref.image.width, h = ref.image.height
        var maps: StackMaps? = options.collectMaps
            ? StackMaps(kept: Image(width: w, height: h, channels: 1), provenance: Image(width: w, height: h, channels: 1),
                        localShift: StackMaps.localShift(fields, width: w, height: h), tolerance: 0, mergedFrames: used.count, frames: frames.count)
            : nil
        switch ref.image {
        case .uint8:
            let r = merge(used.map { frames[$0].image.uint8 }, homographies, offsets, options: options, threadTime: split, maps: &maps, frameIndex: used)
            result = (.uint8(r.0), r.1)
        case .uint16, .float32:
            let r = merge(used.map { frames[$0].image.uint16 }, homographies, offsets, options: options, threadTime: split, maps: &maps, frameIndex: used)
            result = (.uint16(r.0), r.1)
        }
        // Warping and merging run fused, tile by tile; their wall time is split by their shares
        // of the threads' time.
        let fused = Date().timeIntervalSince(t1), (warp, kernel) = split.value
        let warpShare = warp + kernel > 0 ? Double(warp) / Double(warp + kernel) : 0
        timings.warp = fused * warpShare
        timings.merge = fused * (1 - warpShare)
        timings.warpMerge = fused
        if options.cancellation?.isCancelled == true { throw StackError.cancelled }
        var notices: [StackNotice] = []
        for f in reports where !f.used { notices.append(.frameLeftOut(source: f.source, reason: f.reason ?? f.status.rawValue)) }
        for f in reports { if let fb = f.fallback { notices.append(.fellBack(source: f.source, reason: fb.description)) } }
        return StackResult(image: result.0, frames: reports, timings: timings, merge: options.merge, align: options.align,
                           noiseSigma: result.1, referenceIndex: options.reference, notices: notices + policyNotices,
                           referenceMetadata: ref.metadata, decodedFrames: options.retainFrames ? frames : nil, localFields: fields, maps: maps)
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
    public static func stack(contentsOf inputs: [String], options: StackOptions = StackOptions()) throws -> StackResult {
        let start = Date()
        let loaded = try BurstInput.load(inputs, videoFrames: options.videoFrames, progress: options.progress)
        let decode = Date().timeIntervalSince(start)
        guard !loaded.frames.isEmpty else {
            throw loaded.skipped.isEmpty ? StackError.noFrames : StackError.noUsableInput(reasons: loaded.skipped.prefix(5).map { $0.1.hasPrefix($0.0) ? $0.1 : "\($0.0): \($0.1)" })
        }
        var r = try stack(loaded.frames, options: options)
        r.timings.decode = decode
        r.notices.insert(contentsOf: loaded.skipped.map { StackNotice.inputSkipped(input: $0.0, reason: $0.1) }, at: 0)
        return r
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
    public static func aligned(_ frame: BurstFrame, homography: Homography, interpolation: Interpolation, mergedFrames: Int,
                               local: DisplacementField? = nil) -> AnyImage {
        switch frame.image {
        case .uint8(let i): .uint8(aligned(i, homography, interpolation, mergedFrames, local))
        case .uint16, .float32: .uint16(aligned(frame.image.uint16, homography, interpolation, mergedFrames, local))
        }
    }

    static func aligned<S: PixelSample>(_ image: Image<S>, _ h: Homography, _ interpolation: Interpolation, _ n: Int, _ local: DisplacementField?) -> Image<S> {
        let w = image.width, c = image.channels, tileWidth = tileWidth(frames: n, channels: c)
        let warper = RowSampler(frame: image, homography: h, interpolation: interpolation, offsets: local)
        return Image<S>(width: w, height: image.height, channels: c) { dst in
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

    /// Pixels per tile of the fused warp + merge: about 32 K floats per frame-stack tile.
    public static func tileWidth(frames n: Int, channels c: Int) -> Int { max(64, 4096 / max(1, n) / c * 8) }

    // MARK: Alignment

    static func align(_ frames: [BurstFrame], options: StackOptions) -> ([FrameReport], [DisplacementField?]) {
        let none = [DisplacementField?](repeating: nil, count: frames.count)
        let refIndex = options.reference
        var reports = frames.enumerated().map { i, f in
            FrameReport(index: i, source: f.name, homography: i == refIndex ? Homography.identity : nil,
                        used: i == refIndex, status: i == refIndex ? .reference : .pending)
        }
        if let given = options.givenHomographies {
            for i in reports.indices where i != refIndex {
                if i < given.count, let h = given[i] {
                    reports[i].homography = h; reports[i].used = true; reports[i].status = .given
                } else {
                    reports[i].fail("no homography given for this frame")
                }
            }
            return (reports, none)
        }
        if options.align == .none {
            for i in reports.indices where i != refIndex {
                reports[i].homography = .identity; reports[i].used = true; reports[i].status = .asIs
            }
            return (reports, none)
        }
        guard frames.count > 1 else { return (reports, none) }
        let refStart = Date()
        let reference: RegistrationReference
        switch frames[refIndex].image {
        case .uint8(let i): reference = RegistrationReference(i, options: options.registration)
        case .uint16(let i): reference = RegistrationReference(i, options: options.registration)
        case .float32(let i): reference = RegistrationReference(i, options: options.registration)
        }
        reports[refIndex].alignSeconds = (Date().timeIntervalSince(refStart) * 1000).rounded() / 1000
        let others = frames.indices.filter { $0 != refIndex }
        let box = LockedBox(reports)
        let fieldBox = LockedBox(none)
        let start = Date()
        let done = LockedBox(0), next = LockedBox(0)
        // Frames are registered two (one per core) at a time: a small frame's registration runs
        // on one core (its point loops only split above 8192 points), and each frame is
        // independent of the others given the reference. Results land by index, so the order in
        // which frames finish does not matter.
        let workers = max(1, min(StripExecutor.threadCount, others.count))
        DispatchQueue.concurrentPerform(iterations: workers) { _ in
            while true {
                if options.cancellation?.isCancelled == true { break }
                let n = next.update { v -> Int in defer { v += 1 }; return v }
                guard n < others.count else { break }
                let i = others[n]
                let frameStart = Date()
                let pyramid: GreyPyramid
                switch frames[i].image {
                case .uint8(let img): pyramid = reference.framePyramid(img)
                case .uint16(let img): pyramid = reference.framePyramid(img)
                case .float32(let img): pyramid = reference.framePyramid(img)
                }
                var r = FrameReport(index: i, source: frames[i].name)
                let primary: MotionModel = options.align == .translation ? .translation : .homography
                do {
                    r.fill(try reference.register(pyramid: pyramid, model: primary))
                } catch {
                    if options.align == .auto {
                        do {
                            r.fill(try reference.register(pyramid: pyramid, model: .translation))
                            r.fallback = AlignmentFallback(from: .homography, to: .translation, reason: String(describing: error))
                        } catch let e2 {
                            r.fail(String(describing: e2))
                        }
                    } else {
                        r.fail(String(describing: error))
                    }
                }
                var field: DisplacementField? = nil
                if r.used, let h = r.homography, options.align == .local || options.align == .auto {
                    (r.local, field) = localAlignment(reference: reference, frame: pyramid, homography: h, options: options)
                }
                r.alignSeconds = (Date().timeIntervalSince(frameStart) * 1000).rounded() / 1000
                box.update { $0[i] = r }
                fieldBox.update { $0[i] = field }
                // Under the counter's lock, so progress never goes backwards.
                done.update { d in
                    d += 1
                    options.progress?(StackProgress(stage: .align, done: d, total: others.count, elapsed: Date().timeIntervalSince(start)))
                }
            }
        }
        return (box.value, fieldBox.value)
    }

    /// The local alignment of a registered frame: always with ``AlignMode/local``; with `.auto`
    /// only when a coarse field (two pyramid levels above the finest) shows parallax, so bursts
    /// that one homography aligns are merged exactly as before.
    static func localAlignment(reference: RegistrationReference, frame: GreyPyramid, homography h: Homography,
                               options: StackOptions) -> (LocalFrameReport, DisplacementField?) {
        let lo = options.localAlignment
        if options.align == .local {
            let la = LocalAligner.estimate(reference: reference.pyramid, frame: frame, homography: h, options: lo)
            return (LocalFrameReport(used: true, decision: "asked for (--align local)", field: la.statistics, coarse: nil), la.field)
        }
        let coarseLevel = min(reference.pyramid.levels.count - 1, reference.pyramid.baseLevel + 2)
        let coarse = LocalAligner.estimate(reference: reference.pyramid, frame: frame, homography: h, options: lo, finestLevel: coarseLevel)
        let p50 = coarse.statistics.p50Px, threshold = lo.parallaxThreshold * Float(1 << coarseLevel)
        guard p50 >= threshold else {
            return (LocalFrameReport(used: false, decision: "no parallax: coarse field median \(p50) px < \(threshold) px", field: nil, coarse: coarse.statistics), nil)
        }
        let la = LocalAligner.estimate(reference: reference.pyramid, frame: frame, homography: h, options: lo)
        return (LocalFrameReport(used: true, decision: "parallax: coarse field median \(p50) px >= \(threshold) px", field: la.statistics, coarse: coarse.statistics), la.field)
    }

    // MARK: Merge

    /// Streams the merge over tiles: for each row segment every frame is warped into a small
    /// buffer and merged at once, so no warped frame is ever held whole.
    static func merge<S: PixelSample>(_ images: [Image<S>], _ homographies: [Homography?], _ offsets: [DisplacementField?], options: StackOptions,
                                      threadTime: LockedBox<(warp: UInt64, kernel: UInt64)>? = nil) -> (Image<S>, Float?) {
        var none: StackMaps? = nil
        return merge(images, homographies, offsets, options: options, threadTime: threadTime, maps: &none, frameIndex: Array(images.indices))
    }

    /// The merge, also filling `maps` (when given) tile by tile; `frameIndex[k]` is merged frame
    /// k's index in the report.
    static func merge<S: PixelSample>(_ images: [Image<S>], _ homographies: [Homography?], _ offsets: [DisplacementField?], options: StackOptions,
                                      threadTime: LockedBox<(warp: UInt64, kernel: UInt64)>?, maps: inout StackMaps?,
                                      frameIndex: [Int]) -> (Image<S>, Float?) {
        let w = images[0].width, h = images[0].height, c = images[0].channels, n = images.count
        let warpers = images.indices.map { RowSampler(frame: images[$0], homography: homographies[$0], interpolation: options.interpolation,
                                                      offsets: $0 < offsets.count ? offsets[$0] : nil) }
        let network = SortingNetwork(size: n)
        var sigma: Float? = nil
        let kernel: any MergeKernel
        switch options.merge {
        case .mean: kernel = MeanKernel()
        case .median: kernel = MedianKernel(network: network)
        case .sigmaClip: kernel = SigmaClipKernel(network: network, kappa: options.kappa)
        case .winsorized: kernel = WinsorizedKernel(network: network, fraction: options.winsorFraction)
        case .mode: kernel = ModeKernel(network: network, fullScale: S.fullScale)
        case .robust:
            let s = estimateNoise(warpers, width: w, height: h, channels: c, network: network)
            sigma = s
            kernel = SigmaClipKernel(network: network, kappa: options.kappa, burstNoise: s)
        }
        let tileWidth = tileWidth(frames: n, channels: c)
        let start = Date()
        let rowsDone = LockedBox(0)
        // Maps: a frame agrees with the result within 3 x the noise (at least 2 % of full scale).
        let tolerance = maps == nil ? 0 : max(3 * (sigma ?? estimateNoise(warpers, width: w, height: h, channels: c, network: network)), 0.02 * S.fullScale)
        maps?.tolerance = tolerance
        let keptMap = maps.map { _ in UnsafeMutablePointer<UInt16>.allocate(capacity: w * h) }
        let provenanceMap = maps.map { _ in UnsafeMutablePointer<UInt16>.allocate(capacity: w * h) }
        defer { keptMap?.deallocate(); provenanceMap?.deallocate() }
        let km = UncheckedSendable(keptMap), pm = UncheckedSendable(provenanceMap)
        let segments = (w + tileWidth - 1) / tileWidth
        let out = Image<S>(width: w, height: h, channels: c) { dst in
            StripExecutor.forEachStrip(rows: h, minimumRows: 8) { rows in
                let tile = SampleTile.allocate(frames: n, maxPixels: tileWidth, channels: c)
                defer { tile.deallocate() }
                let merged = UnsafeMutablePointer<Float>.allocate(capacity: tileWidth * c)
                defer { merged.deallocate() }
                // One cache of converted source rows per frame: the strip is walked down each
                // column segment in turn, so each source row is converted about once.
                let caches = (0..<n).map { _ in RowSampler<S>.Cache(pixels: tileWidth) }
                var warpNs: UInt64 = 0, kernelNs: UInt64 = 0
                defer { threadTime?.update { $0.warp += warpNs; $0.kernel += kernelNs } }
                var x0 = 0
                while x0 < w {
                    let x1 = min(w, x0 + tileWidth)
                    for y in rows {
                        if options.cancellation?.isCancelled == true { break }
                        let t = tile.resized(pixels: x1 - x0)
                        let c0 = DispatchTime.now().uptimeNanoseconds
                        for k in 0..<n {
                            warpers[k].sampleRow(y: y, x0: x0, x1: x1, into: t.values + k * t.stride, valid: t.valid + k * t.pixels, cache: caches[k])
                        }
                        let c1 = DispatchTime.now().uptimeNanoseconds
                        t.countValid()
                        kernel.merge(t, into: merged)
                        if let kp = km.value, let pp = pm.value {
                            StackMaps.record(t, merged: merged, tolerance: tolerance, frameIndex: frameIndex,
                                             kept: kp + (y * w + x0), provenance: pp + (y * w + x0))
                        }
                        let c2 = DispatchTime.now().uptimeNanoseconds
                        warpNs += c1 - c0; kernelNs += c2 - c1
                        let o = (y * w + x0) * c
                        for j in 0..<t.length { dst[o + j] = S(clampingRounded: merged[j]) }
                        // Progress in rows: a row of every segment is one row of the picture.
                        if let progress = options.progress {
                            let d = rowsDone.update { $0 += 1; return $0 }
                            if d % (64 * segments) == 0 || d == h * segments {
                                progress(StackProgress(stage: .merge, done: d / segments, total: h, elapsed: Date().timeIntervalSince(start)))
                            }
                        }
                    }
                    x0 = x1
                }
            }
        }
        if let kp = keptMap, let pp = provenanceMap {
            maps?.kept = Image<UInt16>(width: w, height: h, channels: 1) { d in for i in 0..<(w * h) { d[i] = kp[i] } }
            maps?.provenance = Image<UInt16>(width: w, height: h, channels: 1) { d in for i in 0..<(w * h) { d[i] = pp[i] } }
        }
        return (out, sigma)
    }

    /// Burst-wide noise sigma (sample units): 1.4826 x the median, over sampled pixels, of each
    /// sample's median absolute deviation across frames. Moving things are a minority of frames
    /// at most pixels, so the median of MADs reflects sensor and compression noise.
    static func estimateNoise<S>(_ warpers: [RowSampler<S>], width w: Int, height h: Int, channels c: Int, network: SortingNetwork) -> Float {
        let n = warpers.count
        guard n >= 3 else { return S.fullScale / 255 * 2 }
        let tile = SampleTile.allocate(frames: n, maxPixels: 256, channels: c)
        defer { tile.deallocate() }
        var mads: [Float] = []
        var dev: [Float] = []
        dev.reserveCapacity(n)
        let stepY = max(1, h / 48)
        for y in stride(from: stepY / 2, to: h, by: stepY) {
            for x0 in stride(from: 0, to: max(1, w - 256), by: max(256, w / 8)) {
                let t = tile.resized(pixels: min(256, w - x0))
                for k in 0..<n { warpers[k].sampleRow(y: y, x0: x0, x1: x0 + t.pixels, into: t.values + k * t.stride, valid: t.valid + k * t.pixels) }
                t.countValid()
                t.copyForSorting(into: t.scratch)
                t.sort(t.scratch, network)
                for j in 0..<t.length where t.counts[j] >= 3 {
                    let m = t.median(sorted: t.scratch, j)
                    dev.removeAll(keepingCapacity: true)
                    for k in 0..<Int(t.counts[j]) { dev.append(abs(t.scratch[k * t.stride + j] - m)) }
                    dev.sort()
                    mads.append(dev[dev.count / 2])
                }
            }
        }
        guard !mads.isEmpty else { return S.fullScale / 255 * 2 }
        mads.sort()
        return max(S.fullScale / 255 * 0.5, 1.4826 * mads[mads.count / 2])
    }
}
