import EvanescoCore
import Foundation
#if canImport(Glibc)
    import Glibc
#endif

/// Why a frame stream failed.
public enum FrameStreamError: Error, Equatable, CustomStringConvertible {
    case cutMidFrame(source: String, completeFrames: Int, bytes: Int, frameBytes: Int)
    case badSize(String)
    case noFrames(source: String)
    case sizeChanged(source: String, frame: Int, expected: String, got: String)
    /// The output is one image, but the stream has several frames.
    case oneImageForSeveralFrames(output: String, source: String)

    public var description: String {
        switch self {
        case .cutMidFrame(let s, let n, let b, let f):
            "\(s): the stream ended in the middle of frame \(n + 1) (\(b) of \(f) bytes); the \(n) complete frames "
                + "before it were processed and kept"
        case .badSize(let s): "cannot read the size \"\(s)\"; write it as WIDTHxHEIGHT, e.g. 1280x720"
        case .oneImageForSeveralFrames(let o, let s):
            "\(o) is one image, but \(s) has several frames; give a folder or a video (.mp4) as the output"
        case .noFrames(let s):
            "\(s): no frames found (a video, a folder of images, an image, or - for raw frames on stdin)"
        case .sizeChanged(let s, let i, let e, let g):
            "\(s): frame \(i + 1) is \(g), the earlier frames are \(e); all frames of a stream must have one size"
        }
    }

    /// Parses "WxH".
    public static func parseSize(_ s: String) throws -> (Int, Int) {
        let p = s.lowercased().split(separator: "x")
        guard p.count == 2, let w = Int(p[0]), let h = Int(p[1]), w > 0, h > 0, w <= 16384, h <= 16384 else {
            throw FrameStreamError.badSize(s)
        }
        return (w, h)
    }
}

/// A source of frames, read one at a time.
public protocol FrameReader: AnyObject {
    /// The next frame, or nil at the end.
    func next() throws -> AnyImage?
    /// Frames in the stream when known in advance (folders, lists, single images).
    var knownCount: Int? { get }
    var name: String { get }
}

extension FrameReader {
    /// The stream's frame rate when it has one (a video that declares it), else nil.
    public var framesPerSecond: Double? {
        (self as? VideoFrameReader).map(\.info.framesPerSecond).flatMap { $0 > 0 ? $0 : nil }
    }
}

/// Frames from image files (a folder's images sorted by name, or given paths). PFM files are read
/// as float maps.
public final class ImageFileReader: FrameReader {
    let paths: [String]
    var index = 0
    public let name: String
    public var knownCount: Int? { paths.count }

    /// - Parameters:
    ///   - paths: The image files, in order.
    ///   - name: A name for messages.
    public init(paths: [String], name: String) {
        self.paths = paths
        self.name = name
    }

    /// A folder (its image files by extension, sorted by name, hidden files ignored) or one file.
    public convenience init(path: String) throws {
        let exts = ImageFormat.fileExtensions.union(["pfm"])
        var files = try InputFile.expand([path])
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDir), isDir.boolValue {
            files = files.filter { exts.contains(URL(fileURLWithPath: $0).pathExtension.lowercased()) }
            guard !files.isEmpty else { throw FrameStreamError.noFrames(source: path) }
        }
        self.init(paths: files, name: path)
    }

    public func next() throws -> AnyImage? {
        guard index < paths.count else { return nil }
        defer { index += 1 }
        let p = paths[index]
        let bytes = try InputFile.read(p)
        if bytes.starts(with: Array("Pf".utf8)) || bytes.starts(with: Array("PF".utf8)) {
            return .float32(try PFM.decode(bytes, path: p))
        }
        return try ImageCodecs.decode(bytes, path: p).image
    }
}

/// Raw frames from a file descriptor (stdin): 8-bit RGB, 8-bit grey or 16-bit little-endian grey.
public final class RawFrameReader: FrameReader {
    /// The raw frame layout.
    public enum Layout: String, Sendable { case rgb24, gray, gray16le }
    let fd: Int32
    let width: Int, height: Int, layout: Layout
    var delivered = 0
    public let name: String
    public var knownCount: Int? { nil }

    /// - Parameters:
    ///   - fd: The file descriptor to read.
    ///   - width: Frame width.
    ///   - height: Frame height.
    ///   - layout: Sample layout.
    ///   - name: A name for messages.
    public init(fd: Int32, width: Int, height: Int, layout: Layout, name: String = "stdin") {
        self.fd = fd
        self.width = width
        self.height = height
        self.layout = layout
        self.name = name
    }

    public func next() throws -> AnyImage? {
        let samples = width * height * (layout == .rgb24 ? 3 : 1)
        let bytes = samples * (layout == .gray16le ? 2 : 1)
        var buf = [UInt8](repeating: 0, count: bytes)
        var got = 0
        try buf.withUnsafeMutableBytes { raw in
            while got < bytes {
                let n = read(fd, raw.baseAddress! + got, bytes - got)
                if n < 0 && errno == EINTR { continue }
                if n < 0 { throw ImageIOError.unreadable(path: name, reason: String(cString: strerror(errno))) }
                if n == 0 { break }
                got += n
            }
        }
        if got == 0 { return nil }
        if got < bytes {
            throw FrameStreamError.cutMidFrame(source: name, completeFrames: delivered, bytes: got, frameBytes: bytes)
        }
        delivered += 1
        switch layout {
        case .rgb24: return .uint8(Image(width: width, height: height, channels: 3, samples: ContiguousArray(buf)))
        case .gray: return .uint8(Image(width: width, height: height, channels: 1, samples: ContiguousArray(buf)))
        case .gray16le:
            return .uint16(
                Image<UInt16>(uninitializedWidth: width, height: height, channels: 1) { d in
                    for i in 0..<samples { d[i] = UInt16(buf[2 * i]) | UInt16(buf[2 * i + 1]) << 8 }
                })
        }
    }
}

/// Frames of a video through an ffmpeg subprocess, pulled one at a time.
public final class VideoFrameReader: FrameReader {
    let raw: RawFrameReader
    let process: Process
    let pipe: Pipe
    let errBox = ErrorCollector()
    /// What ffprobe says about the video.
    public let info: VideoInfo
    public var name: String { raw.name }
    public var knownCount: Int? { nil }

    /// `filterArguments` go between the input and the output (e.g. a `-vf select=...`); `info`
    /// saves a second ffprobe when the caller has probed already.
    public init(path: String, layout: RawFrameReader.Layout, filterArguments: [String] = [], info: VideoInfo? = nil)
        throws
    {
        self.info = try info ?? VideoIO.probe(path)
        guard let exe = Tools.find("ffmpeg") else { throw VideoError.toolMissing("ffmpeg") }
        process = Process()
        process.executableURL = URL(fileURLWithPath: exe)
        process.arguments =
            ["-v", "error", "-nostdin", "-i", path, "-map", "0:v:0"] + filterArguments
            + ["-f", "rawvideo", "-pix_fmt", layout.rawValue, "pipe:1"]
        pipe = Pipe()
        let err = Pipe()
        process.standardOutput = pipe
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try Cleanup.start(process)
        let box = errBox
        Thread { box.data = err.fileHandleForReading.readDataToEndOfFile() }.start()
        raw = RawFrameReader(
            fd: pipe.fileHandleForReading.fileDescriptor, width: self.info.width, height: self.info.height,
            layout: layout, name: path)
    }

    deinit {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        Cleanup.remove(child: process.processIdentifier)
    }

    public func next() throws -> AnyImage? {
        do {
            if let f = try raw.next() { return f }
        } catch let e as FrameStreamError {
            // A frame cut short: ffmpeg's own failure, if it failed, is the better message.
            try finishProcess()
            throw e
        }
        try finishProcess()
        return nil
    }

    /// Waits for ffmpeg and turns a failed exit into `VideoError.decodeFailed`.
    func finishProcess() throws {
        process.waitUntilExit()
        while !errBox.done { usleep(1000) }
        if process.terminationStatus != 0 {
            throw VideoError.decodeFailed(
                path: name, detail: errBox.text.isEmpty ? "exit \(process.terminationStatus)" : errBox.text)
        }
    }
}

/// A sink of frames.
public protocol FrameWriter: AnyObject {
    func write(_ frame: Image<UInt8>) throws
    /// Completes the output (a video is moved into place); call it on errors too, to keep the
    /// frames written so far.
    func finish() throws
    var written: Int { get }
}

/// What a name given as a stream's output writes, decided by the name alone (so a command can
/// check its outputs before any work, and a batch job can write to a staging path beside it):
/// `-` is raw rgb24 on stdout, an image extension one image, a video extension a video through
/// ffmpeg, anything else a folder of numbered PNG frames.
public enum FrameOutputKind: Sendable, Equatable {
    /// `-`: raw rgb24 frames on stdout.
    case standardOutput
    /// `.jpg`, `.png`, `.tif`...: one frame.
    case image
    /// `.mp4`, `.mkv`, `.mov`... (``VideoIO/fileExtensions``).
    case video
    /// Anything else: a folder of frame00001.png, ...
    case folder

    /// The kind of output `name` is.
    ///
    /// - Parameter name: The output as given.
    public init(_ name: String) {
        let ext = (name as NSString).pathExtension.lowercased()
        if name == "-" {
            self = .standardOutput
        } else if ImageFormat.forOutput(extension: ext) != nil {
            self = .image
        } else if VideoIO.fileExtensions.contains(ext) {
            self = .video
        } else {
            self = .folder
        }
    }

    /// Refuses, before the first frame is written, to write several frames into one image.
    ///
    /// - Parameters:
    ///   - frames: The number of frames coming, nil when unknown (then more than one is assumed).
    ///   - source: The stream's name, for the message.
    ///   - output: The output as given.
    /// - Throws: ``FrameStreamError/oneImageForSeveralFrames(output:source:)``.
    public func check(frames: Int?, of source: String, output: String) throws(FrameStreamError) {
        if self == .image && (frames ?? 2) > 1 { throw .oneImageForSeveralFrames(output: output, source: source) }
    }

    /// A writer of this kind at `path`.
    ///
    /// - Parameters:
    ///   - path: Where to write (the name itself, or a staging path standing in for it); ignored
    ///     for stdout.
    ///   - frameRate: Frames per second of a video.
    ///   - overwrite: Replace an existing file or frames.
    ///   - quality: JPEG quality of a `.jpg` image output (``JPEGQuality``).
    /// - Returns: The writer.
    /// - Throws: ``VideoError`` or ``ImageIOError`` when the output cannot be opened.
    public func writer(
        at path: String, frameRate: Double, overwrite: Bool, quality: Int = JPEGQuality.rendered
    ) throws -> FrameWriter {
        switch self {
        case .standardOutput: return RawFrameWriter(fd: 1)
        case .image: return ImageFrameWriter(path: path, overwrite: overwrite, quality: quality)
        case .video: return try VideoFrameWriter(path: path, framesPerSecond: frameRate, overwrite: overwrite)
        case .folder: return try DirectoryFrameWriter(dir: path, overwrite: overwrite)
        }
    }
}

/// Writes frames as numbered images in a folder: frame00001.png, ... The folder is created with
/// the first frame, so a job that fails before any frame leaves nothing behind.
public final class DirectoryFrameWriter: FrameWriter {
    let dir: String, ext: String, overwrite: Bool
    public private(set) var written = 0
    /// - Parameters:
    ///   - dir: The folder (created if missing).
    ///   - ext: Image extension of the frames.
    ///   - overwrite: Replace frames already there.
    /// - Throws: `ImageIOError` when the folder cannot be made or holds frames and `overwrite` is false.
    public init(dir: String, ext: String = "png", overwrite: Bool) throws {
        self.dir = dir
        self.ext = ext
        self.overwrite = overwrite
    }
    public func write(_ frame: Image<UInt8>) throws {
        if written == 0 {
            try AtomicOutput.makeFolder(dir)
        }
        written += 1
        try ImageCodecs.write(
            .uint8(frame), to: dir + String(format: "/frame%05d.", written) + ext,
            options: WriteOptions(overwrite: overwrite))
    }
    public func finish() throws {}
}

/// Writes one image (a single-frame job).
public final class ImageFrameWriter: FrameWriter {
    let path: String, overwrite: Bool, quality: Int
    public private(set) var written = 0
    /// - Parameters:
    ///   - path: The image file.
    ///   - overwrite: Replace an existing file.
    ///   - quality: JPEG quality, for a `.jpg` file.
    public init(path: String, overwrite: Bool, quality: Int = JPEGQuality.rendered) {
        self.path = path
        self.overwrite = overwrite
        self.quality = quality
    }
    public func write(_ frame: Image<UInt8>) throws {
        guard written == 0 else {
            throw ImageIOError.cannotWrite(
                path: path, reason: "the input has more than one frame; name a video (.mp4) or a folder as the output")
        }
        try ImageCodecs.write(.uint8(frame), to: path, options: WriteOptions(quality: quality, overwrite: overwrite))
        written = 1
    }
    public func finish() throws {}
}

/// Raw 8-bit RGB frames to a file descriptor (stdout), e.g. for `ffmpeg -f rawvideo ... -f v4l2`.
public final class RawFrameWriter: FrameWriter {
    let fd: Int32
    public private(set) var written = 0
    /// - Parameter fd: The file descriptor to write (SIGPIPE is ignored so a closed reader is an error, not a kill).
    public init(fd: Int32) {
        self.fd = fd
        signal(SIGPIPE, SIG_IGN)
    }
    public func write(_ frame: Image<UInt8>) throws {
        let rgb = frame.withChannels(3)
        guard WriteFailure.writeAll(rgb.samples, to: fd) == 0 else {
            throw ImageIOError.cannotWrite(path: "stdout", reason: "the reader closed the pipe")
        }
        written += 1
    }
    public func finish() throws {}
}

/// A video file through ffmpeg.
public final class VideoFrameWriter: FrameWriter {
    /// The output extensions written as a video (``VideoIO/fileExtensions``).
    public static let extensions = VideoIO.fileExtensions
    let path: String, fps: Double, overwrite: Bool
    var writer: VideoWriter?
    public private(set) var written = 0
    /// - Parameters:
    ///   - path: The video file (its extension picks the container).
    ///   - framesPerSecond: Frame rate.
    ///   - overwrite: Replace an existing file.
    /// - Throws: `VideoError.toolMissing` without ffmpeg, `ImageIOError.outputExists`.
    public init(path: String, framesPerSecond: Double, overwrite: Bool) throws {
        self.path = path
        fps = framesPerSecond
        self.overwrite = overwrite
        if FileManager.default.fileExists(atPath: path) && !overwrite { throw ImageIOError.outputExists(path: path) }
    }
    public func write(_ frame: Image<UInt8>) throws {
        if writer == nil {
            writer = try VideoWriter(
                path: path, width: frame.width, height: frame.height, framesPerSecond: fps, overwrite: overwrite)
        }
        try writer!.append(frame)
        written += 1
    }
    public func finish() throws {
        try writer?.finish()
        writer = nil
    }
}

/// Frames already in memory (a still photo as a one-frame stream, frames made by code).
public final class MemoryFrameReader: FrameReader {
    var frames: ArraySlice<AnyImage>
    public let name: String
    public var knownCount: Int? { frames.count }

    /// - Parameters:
    ///   - frames: The frames, in order.
    ///   - name: A name for messages.
    public init(frames: [AnyImage], name: String) {
        self.frames = frames[...]
        self.name = name
    }
    public func next() throws -> AnyImage? { frames.popFirst() }
}

/// What a stream of frames holds: colour, or depth in an encoding (nil: not known yet, sniffed
/// from the samples later).
public enum FrameRole: Sendable, Equatable {
    case color
    case depth(DepthEncoding?)

    /// How raw and video frames of this role are read: colour as 8-bit RGB; depth as 16-bit grey
    /// (millimetres, or not known yet), else 8-bit grey (disparity8, and float maps, which only
    /// image files can carry).
    public var rawLayout: RawFrameReader.Layout {
        switch self {
        case .color: .rgb24
        case .depth(let e): e == nil || e == .millimetres16 ? .gray16le : .gray
        }
    }
}

/// The one way a stream of frames is opened (the CLI, the studio and batch jobs all come here),
/// so that a path means the same thing everywhere.
public enum FrameSources {
    /// Opens `source`:
    /// - `-`: raw frames on `stdin` (`rawSize` is needed), laid out as ``FrameRole/rawLayout``;
    /// - a folder (its images, sorted by name) or an image file (`.jpg`, `.png`, `.tif`, `.heic`,
    ///   `.pfm`);
    /// - a video: a file ffprobe recognises by its bytes, or any file whose name is not an image's
    ///   (read through ffmpeg).
    ///
    /// - Throws: ``ImageIOError/fileNotFound(path:)``, ``FrameStreamError/badSize(_:)`` for `-`
    ///   without a size, or what opening the video throws.
    public static func open(
        _ source: String, role: FrameRole, rawSize: (width: Int, height: Int)? = nil,
        stdin fd: Int32 = 0
    ) throws -> FrameReader {
        if source == "-" {
            guard let rawSize else { throw FrameStreamError.badSize("- (raw frames need WIDTHxHEIGHT)") }
            return RawFrameReader(fd: fd, width: rawSize.width, height: rawSize.height, layout: role.rawLayout)
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: source, isDirectory: &isDirectory) else {
            throw ImageIOError.fileNotFound(path: source)
        }
        let ext = URL(fileURLWithPath: source).pathExtension
        if !isDirectory.boolValue
            && (VideoIO.isVideo(source) || (ImageFormat.forOutput(extension: ext) == nil && ext.lowercased() != "pfm"))
        {
            return try VideoFrameReader(path: source, layout: role.rawLayout)
        }
        return try ImageFileReader(path: source)
    }
}
