import Dispatch
import EvanescoCore
import EvanescoIO
import Foundation

/// Turns command-line inputs into decoded frames: image files, folders of images (sorted by
/// name), or one video file (N evenly spaced frames through ffmpeg). Files that cannot be decoded
/// are reported and skipped.
public enum BurstInput {
    /// The frames that decoded and the inputs that did not.
    public struct Loaded: Sendable {
        /// Decoded frames, in input order.
        public var frames: [BurstFrame]
        /// (input, reason) for every input left out.
        public var skipped: [(String, String)]
    }

    /// The bytes image files take decoded (8-bit samples as bytes, deeper ones as 16 bits), from
    /// the first header that reads: a burst has one size. `Int.max` when the product overflows;
    /// nil when no header reads.
    public static func estimatedDecodedBytes(_ files: [String], decoder: FrameDecoder = .pictures) -> Int? {
        estimatedDecodedBytes(files, decoder: decoder, sampling: .sites)
    }

    /// ``estimatedDecodedBytes(_:decoder:)`` with what `sampling` adds to camera raws' planes.
    static func estimatedDecodedBytes(_ files: [String], decoder: FrameDecoder, sampling: RawSampling) -> Int? {
        guard let probe = firstHeader(files) else { return nil }
        let bytes =
            decoder.bytesPerStoredPixel.map {
                probe.storedWidth * probe.storedHeight * ($0 + sampling.extraBytesPerPhotosite)
            }
            ?? probe.storedWidth * probe.storedHeight * probe.image.channels * (probe.image.bitDepth == 8 ? 1 : 2)
        let (total, overflow) = bytes.multipliedReportingOverflow(by: files.count)
        return overflow ? Int.max : total
    }

    /// Refuses a burst that mixes camera raws and finished pictures (which would be finished and
    /// stacked with the pictures, a different thing from what either kind asks for). Reads a
    /// few bytes of each file (a file that cannot be read is left to the decoder to report).
    public static func checkOneKind(_ files: [String]) throws {
        var raw: String?, picture: String?
        for f in files {
            guard let isRaw = RawSniffer.isRawFile(f) else { continue }
            if isRaw { raw = raw ?? f } else { picture = picture ?? f }
            if let raw, let picture { throw StackError.mixedRawAndPictures(raw: raw, picture: picture) }
        }
    }

    /// The first header of `files` that reads: a burst has one size.
    static func firstHeader(_ files: [String]) -> DecodedImage? {
        files.lazy.compactMap({ try? ImageCodecs.probe($0) }).first
    }

    /// The upright size of the burst's frames, from the first header that reads (a video's own
    /// size for one video), without decoding a pixel; nil when no header reads.
    public static func frameSize(_ inputs: [String]) -> (width: Int, height: Int)? {
        let files = InputFile.expandedQuietly(inputs)
        if files.count == 1, VideoIO.isVideo(files[0]) {
            return (try? VideoIO.probe(files[0])).map { ($0.width, $0.height) }
        }
        guard let p = firstHeader(files) else { return nil }
        let swap = p.metadata.orientation.swapsAxes
        return swap ? (p.storedHeight, p.storedWidth) : (p.storedWidth, p.storedHeight)
    }

    /// Decodes `inputs`: image files, folders of images (sorted by name) or one video.
    ///
    /// - Parameters:
    ///   - inputs: Paths; folders are expanded, a single video is sampled.
    ///   - videoFrames: Frames to take from a video, evenly spaced.
    ///   - progress: Called after each frame is decoded (stage `.decode`).
    ///   - decoder: How each file becomes a frame: pictures (the default) or a raw's colour planes.
    /// - Returns: The decoded frames and the skipped inputs with their reasons.
    /// - Throws: `ImageIOError` when an input does not exist or nothing can be listed; a file that
    ///   exists but does not decode is skipped, not thrown.
    public static func load(
        _ inputs: [String], videoFrames: Int = 20, progress: (@Sendable (StackProgress) -> Void)? = nil,
        decoder: FrameDecoder = .pictures
    ) throws -> Loaded {
        let files = try InputFile.expand(inputs)
        if files.count == 1, VideoIO.isVideo(files[0]) {
            var frames: [BurstFrame] = []
            let start = Date()
            let info = try VideoIO.probe(files[0])
            let total = min(videoFrames, info.frameCount)
            try VideoIO.decodeFrames(files[0], selection: .evenlySpaced(videoFrames)) { index, img in
                frames.append(
                    BurstFrame(name: "\((files[0] as NSString).lastPathComponent)#\(index)", image: .uint8(img)))
                progress?(
                    StackProgress(
                        stage: .decode, done: frames.count, total: total, elapsed: Date().timeIntervalSince(start)))
            }
            return Loaded(frames: frames, skipped: [])
        }
        try checkOneKind(files)
        let results = LockedBox([Result<DecodedImage, Error>?](repeating: nil, count: files.count))
        let start = Date()
        let done = LockedBox(0)
        // Two decoders at a time: TurboJPEG is single-threaded, and more would only add memory.
        StripExecutor.forEachIndex(in: 0..<files.count, workers: 2) { i in
            let r = Result { try decoder.read(files[i]) }
            results.update { $0[i] = r }
            let d = done.update {
                $0 += 1
                return $0
            }
            progress?(
                StackProgress(stage: .decode, done: d, total: files.count, elapsed: Date().timeIntervalSince(start)))
        }
        var frames: [BurstFrame] = [], skipped: [(String, String)] = []
        for (i, r) in results.value.enumerated() {
            switch r! {
            case .success(let d): frames.append(BurstFrame(name: files[i], image: d.image, metadata: d.metadata))
            case .failure(let e): skipped.append((files[i], String(describing: e)))
            }
        }
        return Loaded(frames: frames, skipped: skipped)
    }
}

/// How a burst's files become frames: pictures decoded as they are shown, camera raws as their
/// colour planes (``RawPlanes``), which the stacker merges before any demosaic.
public struct FrameDecoder: Sendable {
    /// Decodes one file.
    public let read: @Sendable (String) throws -> DecodedImage
    /// Bytes the decoded frame takes per stored pixel of its header, when not the picture's.
    let bytesPerStoredPixel: Int?

    /// Pictures as `ImageCodecs` (EvanescoIO) decodes them.
    public static let pictures = FrameDecoder(read: { try ImageCodecs.read($0) }, bytesPerStoredPixel: nil)

    /// Camera raws as their 16-bit colour planes, as stored (not turned upright: the merged mosaic
    /// keeps the reference's orientation tag).
    public static let rawPlanes = rawPlanes(gains: [:])

    /// ``rawPlanes``, each file in `gains` scaled by its factor to the reference's exposure
    /// (``RawPlanes/planes(_:gain:)``).
    public static func rawPlanes(gains: [String: Float]) -> FrameDecoder {
        FrameDecoder(
            read: { path in
                // The planes straight from the file's bytes where they can be (no copy of its samples).
                try RawCodec.read(path) { file, rows in
                    DecodedImage(
                        image: .uint16(RawPlanes.planes(file.raw, rows: rows, gain: gains[path] ?? 1)), format: .raw,
                        storedWidth: file.width, storedHeight: file.height)
                }
            }, bytesPerStoredPixel: 2)
    }
}
