import Foundation
import EvanescoCore
#if canImport(Glibc)
    import Glibc
#endif

/// Errors from the ffmpeg bridge.
public enum VideoError: Error, CustomStringConvertible, Equatable {
    case toolMissing(String)
    case probeFailed(path: String, detail: String)
    case noVideoStream(path: String)
    case decodeFailed(path: String, detail: String)
    case encodeFailed(path: String, detail: String)
    case badSelection(String)

    public var description: String {
        switch self {
        case .toolMissing(let t): "\(t) is not installed; install it with: apt-get install ffmpeg"
        case .probeFailed(let p, let d): "\(p): ffprobe cannot read it as a video (\(d))"
        case .noVideoStream(let p): "\(p): the file has no video stream"
        case .decodeFailed(let p, let d): "\(p): ffmpeg failed while decoding (\(d))"
        case .encodeFailed(let p, let d): "\(p): ffmpeg failed while encoding (\(d))"
        case .badSelection(let d): "bad frame selection: \(d)"
        }
    }
}

/// Which frames to take from a video.
public enum FrameSelection: Sendable, Equatable {
    case all
    /// Frames 0, k, 2k, ...
    case everyKth(Int)
    /// N frames evenly spaced from the first to the last.
    case evenlySpaced(Int)
}

/// What ffprobe says about a video's first video stream.
public struct VideoInfo: Sendable, Equatable {
    /// Displayed size (after the rotation ffmpeg applies).
    public var width: Int
    /// Displayed height.
    public var height: Int
    /// Frames in the stream (counted when the container does not say).
    public var frameCount: Int
    /// Average frame rate.
    public var framesPerSecond: Double
    /// Rotation the container declares (0, 90, 180, 270).
    public var rotationDegrees: Int
}

enum Tools {
    static func find(_ name: String) -> String? {
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let p = "\(dir)/\(name)"
            if access(p, X_OK) == 0 { return p }
        }
        return nil
    }

    /// Runs a tool to completion, returning stdout; stderr's last lines go into the error.
    static func run(_ tool: String, _ args: [String]) throws -> (status: Int32, out: Data, err: String) {
        guard let exe = find(tool) else { throw VideoError.toolMissing(tool) }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = args
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        try p.run()
        // Drain stderr concurrently so a chatty tool cannot block on a full pipe.
        let errBox = ErrorCollector()
        let errThread = Thread { errBox.data = err.fileHandleForReading.readDataToEndOfFile() }
        errThread.start()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        while !errBox.done { usleep(1000) }
        return (p.terminationStatus, data, errBox.text)
    }
}

final class ErrorCollector: @unchecked Sendable {
    private let lock = NSLock()
    private var _data: Data?
    var data: Data? {
        get {
            lock.lock()
            defer { lock.unlock() }
            return _data
        }
        set {
            lock.lock()
            _data = newValue
            lock.unlock()
        }
    }
    var done: Bool { data != nil }
    var text: String {
        let s = String(decoding: data ?? Data(), as: UTF8.self)
        return s.split(separator: "\n").suffix(3).joined(separator: " | ")
    }
}

/// Videos through ffmpeg and ffprobe subprocesses: probing, frame extraction, sniffing.
public enum VideoIO {
    /// The file extensions of the video containers read and written through ffmpeg: what a
    /// file panel lists as a video, and the outputs written as one (anything else that is not
    /// an image is a folder of frames).
    public static let fileExtensions: Set<String> = ["mp4", "mkv", "mov", "m4v", "avi", "webm"]

    /// True when the file's bytes say video container rather than an image.
    public static func isVideo(_ path: String) -> Bool {
        // A FIFO or a device would block the read below (a FIFO until a writer comes): only
        // regular files are sniffed; the reader then refuses the rest with its error.
        guard InputFile.isRegular(path), let h = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? h.close() }
        let head = [UInt8](h.readData(ofLength: 32))
        if case .other(let name) = FormatSniffer.sniff(head) {
            return name.contains("video") || name.contains("ISO media") || name.contains("Matroska")
        }
        return false
    }

    /// Size, frame count (counted, not estimated), rate and rotation of the first video stream.
    /// A file probed before, unchanged since (same size and modification time), is not probed
    /// again: ffprobe reads the whole file to count its frames, and a stack asks two or three
    /// times (memory estimate, decoding, the reader).
    public static func probe(_ path: String) throws -> VideoInfo {
        try InputFile.requireRegular(path)
        let attributes = try? FileManager.default.attributesOfItem(atPath: path)
        let key = attributes.map {
            let size = ($0[.size] as? NSNumber)?.int64Value ?? -1
            return "\(path)\u{0}\(size)\u{0}\(($0[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0)"
        }
        if let key, let known = probed.value[key] { return known }
        let info = try probeWithTool(path)
        if let key { probed.update { $0[key] = info } }
        return info
    }

    /// Probes already made, by path, size and modification time.
    private static let probed = LockedBox([String: VideoInfo]())

    static func probeWithTool(_ path: String) throws -> VideoInfo {
        let r = try Tools.run(
            "ffprobe",
            [
                "-v", "error", "-select_streams", "v:0", "-count_packets",
                "-show_entries", "stream=width,height,nb_read_packets,r_frame_rate:stream_side_data=rotation",
                "-of", "json", path
            ])
        guard r.status == 0 else {
            throw VideoError.probeFailed(path: path, detail: r.err.isEmpty ? "exit \(r.status)" : r.err)
        }
        guard let json = try? JSONSerialization.jsonObject(with: r.out) as? [String: Any],
            let streams = json["streams"] as? [[String: Any]], let s = streams.first,
            let w = s["width"] as? Int, let h = s["height"] as? Int
        else { throw VideoError.noVideoStream(path: path) }
        let count = Int(s["nb_read_packets"] as? String ?? "") ?? 0
        var fps = 25.0
        if let rate = s["r_frame_rate"] as? String {
            let parts = rate.split(separator: "/").compactMap { Double($0) }
            if parts.count == 2, parts[1] > 0, parts[0] > 0 { fps = parts[0] / parts[1] }
        }
        var rotation = 0
        if let side = s["side_data_list"] as? [[String: Any]] {
            for d in side { if let r = d["rotation"] as? Int { rotation = r } }
        }
        let swap = abs(rotation) % 180 == 90
        return VideoInfo(
            width: swap ? h : w, height: swap ? w : h, frameCount: count, framesPerSecond: fps,
            rotationDegrees: rotation)
    }

    /// Frame indices a selection picks from `count` frames.
    public static func indices(_ selection: FrameSelection, count: Int) throws -> [Int] {
        switch selection {
        case .all: return Array(0..<count)
        case .everyKth(let k):
            guard k >= 1 else { throw VideoError.badSelection("every k-th frame needs k >= 1 (got \(k))") }
            return Array(stride(from: 0, to: count, by: k))
        case .evenlySpaced(let n):
            guard n >= 1 else { throw VideoError.badSelection("the number of frames must be at least 1 (got \(n))") }
            if n >= count { return Array(0..<count) }
            if n == 1 { return [0] }
            return (0..<n).map { Int((Double($0) * Double(count - 1) / Double(n - 1)).rounded()) }
        }
    }

    /// Decodes the selected frames as 8-bit RGB, calling `body` for each as it arrives (so only
    /// one frame is held at a time). Returns the number of frames delivered.
    @discardableResult
    public static func decodeFrames(
        _ path: String, selection: FrameSelection,
        _ body: (_ frameIndex: Int, _ image: Image<UInt8>) throws -> Void
    ) throws -> Int {
        let info = try probe(path)
        let wanted = try indices(selection, count: info.frameCount)
        guard !wanted.isEmpty else { return 0 }
        // The reader stops ffmpeg when it is released (after the last wanted frame, or an error).
        let reader = try frameReader(path, selection: selection, info: info)
        var delivered = 0
        while delivered < wanted.count, let frame = try reader.next() {
            try body(wanted[delivered], frame.uint8)
            delivered += 1
        }
        return delivered
    }

    /// A reader of the selected frames as 8-bit RGB, in order (its ``VideoFrameReader/next()`` gives nil
    /// after the last; the file may hold fewer frames than its header counted). Releasing it stops
    /// ffmpeg.
    ///
    /// - Parameters:
    ///   - path: The video.
    ///   - selection: Which frames.
    ///   - known: The video's ``probe(_:)``, when already made.
    public static func frameReader(_ path: String, selection: FrameSelection, info known: VideoInfo? = nil) throws
        -> VideoFrameReader
    {
        let info = try known ?? probe(path)
        let wanted = try indices(selection, count: info.frameCount)
        guard !wanted.isEmpty else { throw VideoError.decodeFailed(path: path, detail: "the video has no frames") }
        var filter: [String] = []
        switch selection {
        case .all: break
        case .everyKth(let k):
            filter = ["-vf", "select='not(mod(n\\,\(k)))'", "-fps_mode", "passthrough"]
        case .evenlySpaced:
            filter = ["-vf", "select='\(evenlySpacedExpression(count: info.frameCount, wanted: wanted.count))'"]
            filter += ["-fps_mode", "passthrough"]
        }
        return try VideoFrameReader(path: path, layout: .rgb24, filterArguments: filter, info: info)
    }

    /// ffmpeg's `select` expression for ``indices(_:count:)``'s evenly spaced `wanted` of `count`
    /// frames, of a length that does not grow with them (a term per frame made ffmpeg fail with
    /// "Cannot allocate memory" at 300 of 500). Frame `n` is wanted when the nearest wanted
    /// position, `i = round(n (w - 1) / (c - 1))`, maps back to it: `round(i (c - 1) / (w - 1)) = n`,
    /// the arithmetic of ``indices(_:count:)`` (the same double operations, the same rounding, half
    /// away from zero). Exact: wanted frames are more than one apart in position, so `n` lies within
    /// less than half a step of its own `i`.
    static func evenlySpacedExpression(count c: Int, wanted w: Int) -> String {
        guard w > 1, w < c else { return w >= c ? "lt(n\\,\(c))" : "eq(n\\,0)" }
        return "lt(n\\,\(c))*eq(n\\,round(round(n*\(w - 1)/\(c - 1))*\(c - 1)/\(w - 1)))"
    }

    /// Convenience: all selected frames in memory.
    public static func readFrames(_ path: String, selection: FrameSelection) throws -> [(
        index: Int, image: Image<UInt8>
    )] {
        var frames: [(Int, Image<UInt8>)] = []
        try decodeFrames(path, selection: selection) { frames.append(($0, $1)) }
        return frames
    }
}

/// Encodes frames into a video file through ffmpeg (H.264 in MP4/MKV/MOV by extension, or
/// whatever the extension's default codec is), written atomically: the file appears only after
/// `finish()` succeeds.
public final class VideoWriter {
    let process: Process
    let input: Pipe
    let errBox = ErrorCollector()
    /// Frame size in pixels.
    public let width: Int, height: Int
    let finalPath: String, tempPath: String, overwrite: Bool
    var finished = false

    /// Starts an encoder writing H.264 to a temporary file renamed on ``finish()``.
    ///
    /// - Parameters:
    ///   - path: The output video.
    ///   - width: Frame width.
    ///   - height: Frame height.
    ///   - framesPerSecond: Frame rate.
    ///   - overwrite: Replace an existing file.
    ///   - crf: x264 quality (lower is better).
    /// - Throws: `VideoError.toolMissing` without ffmpeg, `ImageIOError.outputExists`.
    public init(path: String, width: Int, height: Int, framesPerSecond: Double, overwrite: Bool = false, crf: Int = 18)
        throws
    {
        guard let exe = Tools.find("ffmpeg") else { throw VideoError.toolMissing("ffmpeg") }
        let url = URL(fileURLWithPath: path)
        if FileManager.default.fileExists(atPath: path) && !overwrite { throw ImageIOError.outputExists(path: path) }
        let dir = url.deletingLastPathComponent().path
        guard FileManager.default.fileExists(atPath: dir) else {
            throw ImageIOError.cannotWrite(path: path, reason: "folder \(dir) does not exist")
        }
        self.width = width
        self.height = height
        self.finalPath = path
        self.overwrite = overwrite
        let ext = url.pathExtension.isEmpty ? "mp4" : url.pathExtension
        tempPath = AtomicOutput.temporaryName(for: "x." + ext, in: dir)
        signal(SIGPIPE, SIG_IGN)
        process = Process()
        process.executableURL = URL(fileURLWithPath: exe)
        var args = [
            "-v", "error", "-nostdin", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", "\(width)x\(height)",
            "-r", String(framesPerSecond), "-i", "pipe:0"
        ]
        if ["mp4", "mkv", "mov", "m4v"].contains(ext.lowercased()) {
            args += [
                "-c:v", "libx264", "-crf", String(crf), "-pix_fmt", "yuv420p", "-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2"
            ]
        }
        args.append(tempPath)
        process.arguments = args
        input = Pipe()
        let err = Pipe()
        process.standardInput = input
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        try Cleanup.start(process, writing: tempPath)
        let box = errBox
        Thread { box.data = err.fileHandleForReading.readDataToEndOfFile() }.start()
    }

    deinit {
        if !finished {
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
            unlink(tempPath)
        }
        Cleanup.remove(child: process.processIdentifier)
        Cleanup.remove(file: tempPath)
    }

    /// Appends one frame (converted to 8-bit RGB).
    public func append(_ frame: Image<UInt8>) throws {
        guard frame.width == width, frame.height == height else {
            throw VideoError.encodeFailed(
                path: finalPath, detail: "frame is \(frame.width)x\(frame.height), the video is \(width)x\(height)")
        }
        let rgb = frame.withChannels(3)
        let fd = input.fileHandleForWriting.fileDescriptor
        guard WriteFailure.writeAll(rgb.samples, to: fd) == 0 else {
            process.waitUntilExit()
            while !errBox.done { usleep(1000) }
            throw VideoError.encodeFailed(
                path: finalPath, detail: errBox.text.isEmpty ? "ffmpeg stopped reading" : errBox.text)
        }
    }

    /// Closes the stream, waits for ffmpeg and moves the file into place.
    public func finish() throws {
        finished = true
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
        while !errBox.done { usleep(1000) }
        defer { unlink(tempPath) }
        guard process.terminationStatus == 0 else {
            throw VideoError.encodeFailed(
                path: finalPath, detail: errBox.text.isEmpty ? "exit \(process.terminationStatus)" : errBox.text)
        }
        try AtomicOutput.write(to: finalPath, overwrite: overwrite) { temp in
            guard rename(tempPath, temp) == 0 else {
                throw ImageIOError.cannotWrite(path: finalPath, reason: String(cString: strerror(errno)))
            }
        }
    }
}
