import Dispatch
import EvanescoAlign
import EvanescoCore
import EvanescoIO
import Foundation

extension BurstStacker {
    /// Inputs whose decoded frames would exceed ``StackOptions/memoryLimit``: image files, decoded
    /// two at a time, or one video, its frames read in order from ffmpeg while the previous ones
    /// are registered; either way each frame goes into a ``FrameSpill`` and leaves memory as soon
    /// as it is written (and, with the first frame as reference, registered), and the burst is
    /// merged from the file in bands. nil when the frames fit (or are to be retained): the caller
    /// holds them in memory.
    static func stackSpilled(_ inputs: [String], options: StackOptions, decoder: FrameDecoder = .pictures) throws
        -> StackResult?
    {
        guard let limit = options.memoryLimit, !options.retainFrames else { return nil }
        let files = try InputFile.expand(inputs)
        if files.count == 1, VideoIO.isVideo(files[0]) {
            return try stackSpilledVideo(files[0], limit: limit, options: options)
        }
        guard files.count > 1 else { return nil }
        try BurstInput.checkOneKind(files)
        // The first readable header tells whether the frames would exceed the limit (a burst has
        // one size; a frame of another is refused below, as in memory).
        guard let total = BurstInput.estimatedDecodedBytes(files, decoder: decoder, sampling: options.rawSampling),
            total > limit
        else { return nil }
        let start = Date()
        // The first frame that decodes sets the slots' shape and sample type.
        var firstIndex = 0
        var first: DecodedImage? = nil, failed: [(Int, Error)] = []
        while first == nil && firstIndex < files.count {
            do { first = try decoder.read(files[firstIndex]) } catch {
                failed.append((firstIndex, error))
                firstIndex += 1
            }
        }
        guard let first else { throw nothingDecoded(failed.map { (files[$0.0], String(describing: $0.1)) }) }
        let sink = try SpillSink(
            names: files, options: options, first: first.image, firstIndex: firstIndex, start: start)
        for (i, e) in failed { sink.delivered(i, .failure(e)) }
        sink.delivered(firstIndex, .success(sink.keep(first.image, metadata: first.metadata, firstIndex)))
        StripExecutor.forEachIndex(
            in: (firstIndex + 1)..<files.count, workers: 2,
            until: { sink.fatal.value != nil || options.cancellation?.isCancelled == true }
        ) { i in
            let t0 = Date()
            let r = Result { try decoder.read(files[i]) }
            sink.threadTime.update { $0.decode += Date().timeIntervalSince(t0) }
            sink.delivered(i, r.map { sink.keep($0.image, metadata: $0.metadata, i) })
        }
        return try sink.finish()
    }

    /// ``stackSpilled(_:options:)`` for a video: nil when its ``StackOptions/videoFrames`` frames
    /// fit in the limit.
    static func stackSpilledVideo(_ path: String, limit: Int, options: StackOptions) throws -> StackResult? {
        let info = try VideoIO.probe(path)
        let selection = FrameSelection.evenlySpaced(options.videoFrames)
        let wanted = try VideoIO.indices(selection, count: info.frameCount)
        let (pixels, o1) = info.width.multipliedReportingOverflow(by: info.height)
        let (frameBytes, o2) = pixels.multipliedReportingOverflow(by: 3)
        let (total, o3) = frameBytes.multipliedReportingOverflow(by: wanted.count)
        guard wanted.count > 1, o1 || o2 || o3 || total > limit else { return nil }
        let start = Date()
        let name = (path as NSString).lastPathComponent
        let names = wanted.map { "\(name)#\($0)" }
        let reader = try VideoIO.frameReader(path, selection: selection, info: info)
        guard let first = try reader.next() else { throw StackError.noFrames }
        let sink = try SpillSink(names: names, options: options, first: first, firstIndex: 0, start: start)
        sink.delivered(0, .success(sink.keep(first, metadata: ImageMetadata(), 0)))
        // ffmpeg decodes in its own process; this thread reads its frames in order while up to
        // two at a time are written and registered on others.
        let group = DispatchGroup(), inFlight = DispatchSemaphore(value: 2)
        defer { group.wait() }  // (also when a read throws: no frame is still being kept)
        var next = 1
        while next < wanted.count, sink.fatal.value == nil, options.cancellation?.isCancelled != true {
            let t0 = Date()
            guard let frame = try reader.next() else { break }
            sink.threadTime.update { $0.decode += Date().timeIntervalSince(t0) }
            let i = next
            inFlight.wait()
            group.enter()
            DispatchQueue.global().async {
                defer {
                    inFlight.signal()
                    group.leave()
                }
                StripExecutor.asItem { sink.delivered(i, .success(sink.keep(frame, metadata: ImageMetadata(), i))) }
            }
            next += 1
        }
        group.wait()
        return try sink.finish()
    }
}

/// The frames of a spilled burst (``BurstStacker/stackSpilled(_:options:)``) as they arrive:
/// each written to its slot of the temporary file by one writer thread and, with the first frame
/// as the reference (the default), registered from its decoded pixels, so nothing is copied back
/// out of the file and registration runs while the pages are written out to disk.
final class SpillSink: @unchecked Sendable {
    /// A frame as it was kept.
    struct Kept: Sendable {
        var shape: BurstStacker.FrameShape
        var metadata: ImageMetadata
        var aligned: (report: FrameReport, field: LocalAlignment?)? = nil
    }

    let names: [String]
    let options: StackOptions, alignOptions: StackOptions
    let spill: FrameSpill
    let eightBit: Bool, width: Int, height: Int, channels: Int
    /// The frame the slots' shape came from, the reference when registration is fused.
    let firstIndex: Int
    let reference: RegistrationReference?
    let referenceSeconds: Double
    let start: Date
    /// The first error that stops the stack (a write that failed).
    let fatal = LockedBox<Error?>(nil)
    /// Seconds the threads spent decoding and registering.
    let threadTime = LockedBox((decode: 0.0, align: 0.0))
    private let results: LockedBox<[Result<Kept, Error>?]>
    private let done = LockedBox(0)
    private let writer = DispatchQueue(label: "evanesco.spill-writer"), writes = DispatchSemaphore(value: 2)

    /// Makes the temporary file for `names.count` frames shaped like `first`, and the reference
    /// from it when registration is fused.
    init(names: [String], options: StackOptions, first: AnyImage, firstIndex: Int, start: Date) throws {
        self.names = names
        self.options = options
        self.firstIndex = firstIndex
        self.start = start
        eightBit = first.bitDepth == 8
        channels = first.channels
        width = first.width
        height = first.height
        let frameBytes = width * height * channels * (eightBit ? 1 : 2)
        let directory =
            options.spillDirectory ?? ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 }
            ?? "/tmp"
        spill = try FrameSpill(directory: directory, frameBytes: frameBytes, slots: names.count)
        alignOptions = options.resolved(frames: names.count, pixels: width * height).options
        let fuse =
            options.reference == 0 && options.align != .none && options.givenHomographies == nil
            && min(width, height) >= BurstStacker.minimumAlignedSide
        let t = Date()
        reference = fuse ? BurstStacker.registrationReference(first, options: alignOptions) : nil
        referenceSeconds = Date().timeIntervalSince(t)
        results = LockedBox([Result<Kept, Error>?](repeating: nil, count: names.count))
    }

    /// Frame `i` decoded (or not): recorded, and counted in the progress.
    func delivered(_ i: Int, _ r: Result<Kept, Error>) {
        results.update { $0[i] = r }
        let d = done.update {
            $0 += 1
            return $0
        }
        options.progress?(
            StackProgress(stage: .decode, done: d, total: names.count, elapsed: Date().timeIntervalSince(start)))
    }

    /// Writes a decoded frame to slot `i` if it has the slots' shape (one that has not is not
    /// written: ``finish()``'s size check names it), and registers it when fused.
    func keep(_ image: AnyImage, metadata: ImageMetadata, _ i: Int) -> Kept {
        let shape = BurstStacker.FrameShape(
            name: names[i], width: image.width, height: image.height, channels: image.channels,
            bitDepth: image.bitDepth)
        var k = Kept(shape: shape, metadata: metadata)
        guard shape.width == width && shape.height == height && shape.channels == channels else {
            // With the first frame as the reference (the default), a frame of another size or
            // colour type stops the stack now, not after every other frame is decoded (with
            // another reference, ``finish()``'s check names it).
            if options.reference == 0 {
                let e =
                    shape.channels != channels
                    ? StackError.channelMismatch(frame: shape.name)
                    : StackError.sizeMismatch(
                        frame: shape.name, size: "\(shape.width)x\(shape.height)", reference: names[firstIndex],
                        referenceSize: "\(width)x\(height)")
                fatal.update { $0 = $0 ?? e }
            }
            return k
        }
        // Written by one writer thread, at most two frames queued: while it waits on the disk,
        // the decoders and registration keep both cores busy.
        let t0 = Date()
        writes.wait()
        writer.async { [self] in
            defer { writes.signal() }
            do {
                if eightBit { try spill.write(image.uint8, slot: i) } else { try spill.write(image.uint16, slot: i) }
            } catch { fatal.update { $0 = $0 ?? error } }
        }
        let t1 = Date()
        if let reference, i != firstIndex {
            k.aligned = BurstStacker.register(image, index: i, name: names[i], to: reference, options: alignOptions)
        }
        let t2 = Date()
        threadTime.update {
            $0.decode += t1.timeIntervalSince(t0)
            $0.align += t2.timeIntervalSince(t1)
        }
        return k
    }

    /// Once every frame is in: checks the burst, merges it from the file, and splits the time
    /// decoding and registration shared by their threads' shares.
    func finish() throws -> StackResult {
        writer.sync {}  // every queued frame written
        if let e = fatal.value { throw e }
        if options.cancellation?.isCancelled == true { throw StackError.cancelled }
        let phaseSeconds = Date().timeIntervalSince(start)
        var used: [Int] = [], skipped: [(String, String)] = []
        var kept: [Kept] = []
        // (A frame never delivered: the video held fewer than its header counted.)
        for (i, r) in results.value.enumerated() {
            switch r {
            case .success(let k):
                used.append(i)
                kept.append(k)
            case .failure(let e): skipped.append((names[i], String(describing: e)))
            case nil: break
            }
        }
        guard !used.isEmpty else { throw BurstStacker.nothingDecoded(skipped) }
        try BurstStacker.check(kept.map(\.shape), options: options)
        let ref = kept[options.reference]
        var source = BurstFrameSource(
            names: kept.map(\.shape.name), width: ref.shape.width, height: ref.shape.height,
            channels: channels, eightBit: eightBit, referenceMetadata: ref.metadata,
            memory: nil, spill: spill, slots: used)
        // The slots hold every frame at the depth of the one they were shaped by.
        source.notices = BurstStacker.depthNotices(kept.map(\.shape), reference: used.firstIndex(of: firstIndex) ?? 0)
        var burstAlignSeconds = 0.0
        if let reference {
            // Reports by position among the decoded frames, as align() makes them.
            var reports: [FrameReport] = [], fields: [LocalAlignment?] = []
            for (p, k) in kept.enumerated() {
                if p == 0 {
                    var r = FrameReport(
                        index: 0, source: k.shape.name, homography: .identity, used: true, status: .reference)
                    r.alignSeconds = (referenceSeconds * 1000).rounded() / 1000
                    reports.append(r)
                    fields.append(nil)
                } else if let a = k.aligned {
                    var r = a.report
                    r.index = p
                    reports.append(r)
                    fields.append(a.field)
                } else {
                    var r = FrameReport(index: p, source: k.shape.name)
                    r.fail("not registered")
                    reports.append(r)
                    fields.append(nil)
                }
            }
            let afterFrames = Date()
            BurstStacker.fieldsForTheRest(
                &fields, reports: &reports, frames: source, reference: reference, options: alignOptions)
            let consistent = BurstStacker.consistentFields(fields, frames: source, reports: reports)
            source.aligned = (reports, consistent.fields, consistent.parallax)
            burstAlignSeconds = Date().timeIntervalSince(afterFrames)
        }
        var r = try BurstStacker.run(source, options: options)
        // Decoding and (fused) registration ran together: their wall time is split by their
        // shares of the threads' time, the reference's registration counted as alignment.
        let (dt, at) = threadTime.value
        let alignShare = dt + at > 0 ? at / (dt + at) : 0
        r.timings.decode = (phaseSeconds - referenceSeconds) * (1 - alignShare)
        // The burst's own alignment passes (fields for the rest, their consistency) ran after
        // every frame was in, alone: they are alignment whole, as align() counts them in memory.
        if reference != nil {
            r.timings.align = (phaseSeconds - referenceSeconds) * alignShare + referenceSeconds + burstAlignSeconds
        }
        r.notices.insert(contentsOf: skipped.map { StackNotice.inputSkipped(input: $0.0, reason: $0.1) }, at: 0)
        return r
    }
}
