import EvanescoCore
import EvanescoIO
import Foundation
import EvanescoFaces

/// Everything that decides how a colour + depth stream is cut, policies included.
public struct BackdropSessionOptions: Sendable, DeclaresSettings {
    /// The per-frame pipeline's settings (cutoff offset, gamma, temporal smoothing, ...).
    public var pipeline = BackdropOptions()
    /// Where the subject is.
    public var subject: SubjectSelection = .face
    /// Run face detection every N frames and hold the box in between.
    public var detectEvery = Int(Limits.detectEvery.defaultValue!)
    /// How depth samples become metres; nil picks from the sample type (16-bit:
    /// `DepthEncoding.millimetres16`, float: `.identity` (metres); 8-bit needs a
    /// `.disparity8(min:max:)` with the stream's disparity range).
    public var depthEncoding: DepthEncoding?
    /// Deprecated spelling of the mask blur: sigma in pixels of the depth frame as given. The
    /// blur is one setting, ``BackdropOptions/blurSigmaAt640`` (pixels of a 640-wide map, scaled
    /// with the map's width); when this is set, each frame's blur is `blurRadius x 640 / depth
    /// width` instead. Front ends accept it with ``blurRadiusDeprecation`` and never beside the blur.
    public var blurRadius: Float?
    /// The note a front end shows when the deprecated ``blurRadius`` is given.
    public static let blurRadiusDeprecation =
        "blurRadius (--blur-radius, sigma in pixels of the depth map as given) is deprecated: use blur (--blur, sigma "
        + "in pixels of a 640-wide map, scaled with the map's width: blur = blurRadius x 640 / depth width)"
    /// Faces are searched on the colour frame scaled to this long side.
    public var faceWorkingSize = Int(Limits.faceWorkingSize.defaultValue!)
    /// Smallest face searched, in pixels of that scaled frame.
    public var faceMinSize = Int(Limits.faceMinSize.defaultValue!)

    /// The defaults: a face as subject, detection every 10 frames, the format sniffed.
    public init() {}

    /// Each numeric setting's name, default and allowed values (the pipeline's are
    /// ``BackdropOptions/Limits``).
    public enum Limits {
        public static let detectEvery = NumericSetting(
            "face detection interval", 1...100_000, default: 10, unit: "frames", integer: true,
            typical: 1...60, summary: "Run face detection every N frames, holding the box in between")
        public static let blurRadius = NumericSetting(
            "blur radius", 0...200, default: nil, unit: "depth pixels", typical: 0...30)
        public static let faceWorkingSize = NumericSetting(
            "face search size", 64...8192, default: 480, unit: "pixels", integer: true,
            summary: "Faces are searched on the colour frame scaled to this long side")
        public static let faceMinSize = NumericSetting(
            "smallest face", 8...4096, default: 30, unit: "pixels", integer: true,
            summary: "Smallest face searched, in pixels of that scaled frame")
    }

    /// Every setting a user chooses, declared once: the command line, manifests, the studio
    /// and the documentation take them from here. The deprecated `blurRadius` is not one: front
    /// ends read it with ``blurRadiusDeprecation``.
    public static let settings: [Setting] = [
        Setting(
            "subject", .text(default: "face"), summary: "Where the subject is: face, nearest, or X,Y (colour pixels)"),
        .number("cutoffOffset", BackdropOptions.Limits.cutoffOffset),
        .number("blur", BackdropOptions.Limits.blurSigmaAt640),
        .number("gamma", BackdropOptions.Limits.gamma),
        .number("temporal", BackdropOptions.Limits.temporalWeight),
        Setting(
            "refine", .toggle(default: false),
            summary: "Decide the depth band between the subject and the cutoff by colour too"),
        Setting(
            "gapSnap", .toggle(default: true), summary: "Snap the cutoff to the empty depth gap behind the subject"),
        Setting(
            "fillHoles", .toggle(default: true),
            summary: "Fill unknown depth inside the subject (hair, edges) by a 3x3 majority vote"),
        .number("coreDepth", BackdropOptions.Limits.coreDepth),
        .number("detectEvery", Limits.detectEvery),
        Setting(
            "depthFormat", .text(default: "auto"),
            summary: "How depth samples become metres: auto, mm16, pfm, or disparity8:MIN,MAX"),
        .number("faceWorkingSize", Limits.faceWorkingSize),
        .number("faceMinSize", Limits.faceMinSize)
    ]

    /// Checks every value, NaN and infinity included.
    ///
    /// - Throws: `SettingError` naming the setting.
    public func validate() throws(SettingError) {
        try pipeline.validate()
        try Limits.detectEvery.check(detectEvery)
        if let blurRadius { try Limits.blurRadius.check(blurRadius) }
        try Limits.faceWorkingSize.check(faceWorkingSize)
        try Limits.faceMinSize.check(faceMinSize)
        guard faceMinSize <= faceWorkingSize else {
            throw SettingError(
                setting: Limits.faceMinSize.name, detail: "must be at most the face search size (\(faceWorkingSize))")
        }
        if case .point(let x, let y) = subject, x < 0 || y < 0 {
            throw SettingError(setting: "subject point", detail: "must be X,Y with X, Y >= 0 (colour pixels)")
        }
    }
}

/// One composited frame and its account.
public struct BackdropFrame {
    /// The composite, RGB, the colour frame's size.
    public var image: Image<UInt8>
    /// The full-size mask, when asked for.
    public var mask: Image<UInt8>?
    /// What the cut was based on and what it cost.
    public var report: BackdropFrameReport
}

/// What one frame's cut was based on and what it cost.
public struct BackdropFrameReport: Sendable, Codable, Equatable {
    /// The frame's index in the stream, from 0.
    public var frame: Int
    /// Where the subject depth came from.
    public var subject: SubjectSource
    /// The subject's depth in metres.
    public var subjectDepth: Float
    /// Depths beyond this (metres) were replaced.
    public var cutoff: Float
    /// Face box in colour pixels, when a face was used.
    public var face: DetectedBox?
    /// The frame the face box was detected in, when it was held from an earlier one.
    public var faceHeldFromFrame: Int?
    /// Seconds: decode (the caller's), detect, mask, effect (upscale + blend), encode (the caller's).
    public var times: StageTimings

    enum CodingKeys: String, CodingKey {
        case frame, subject, subjectDepth, cutoff, face, faceHeldFromFrame
        case times = "timesS"  // `times_s` through ReportJSON, which both writes and reads it
    }
}

/// The account of a whole stream (`evanesco backdrop --report`).
public struct BackdropReport: Sendable, Codable, Equatable {
    /// The output as given (file, folder, video or `-`).
    public var output: String?
    /// One report per frame written.
    public var frames: [BackdropFrameReport]
    /// Frames written.
    public var framesWritten: Int
    /// Median per-frame pipeline time (mask + composite), milliseconds, and its rate.
    public var pipelineMsMedian: Double
    /// Frames per second the pipeline alone could sustain (1000 / ``pipelineMsMedian``).
    public var pipelineFps: Double
    /// Frames written per second of wall clock, decode and encode included.
    public var endToEndFps: Double
    /// Wall-clock seconds of the whole stream.
    public var seconds: Double
    /// The depth encoding used (given or sniffed), e.g. `mm16`.
    public var depthFormat: String?
    /// Why the stream stopped early, if it did (the complete frames before it were kept).
    public var error: String?
}

/// The TrueDepth background-replacement sample as one object that owns a stream's state: the
/// face-detection cadence and the held face box, the depth format (sniffed from the first frame
/// when not given), the blur radius for the depth size, and the pipeline's temporal smoothing.
/// Not thread-safe: one session per stream, fed from one thread.
///
/// ```swift
/// var options = BackdropSessionOptions()
/// options.depthEncoding = .millimetres16
/// let session = BackdropSession(options: options, background: beach, cascade: try CascadeClassifier.load())
/// let frame = try session.process(color: colourFrame, depth: depthFrame)
/// ```
public final class BackdropSession {
    /// The options the session was made with.
    public let options: BackdropSessionOptions
    /// The depth frames' encoding, given or decided on the first frame.
    public private(set) var depthEncoding: DepthEncoding?
    /// Frames processed so far.
    public private(set) var frameIndex = 0
    /// Why the last ``run(color:depth:to:progress:isCancelled:)`` stopped early, if it did.
    public private(set) var failure: Error?
    let pipeline: BackdropPipeline
    let finder: FaceFinder?
    var heldFace: DetectedBox?
    var heldFrom = -1

    /// - Parameters:
    ///   - options: Subject, cadence, depth format, blur.
    ///   - background: The new background (scaled to fill); nil for black, as the sample.
    ///   - cascade: A face cascade; nil to use the nearest large depth region (the reports say so).
    public init(
        options: BackdropSessionOptions = BackdropSessionOptions(), background: Image<UInt8>? = nil,
        cascade: CascadeClassifier?
    ) {
        self.options = options
        self.depthEncoding = options.depthEncoding
        pipeline = BackdropPipeline(options: options.pipeline, background: background)
        finder =
            options.subject == .face
            ? cascade.map { c in
                var f = FaceFinder(cascade: c)
                f.workingSize = options.faceWorkingSize
                f.minSize = options.faceMinSize
                return f
            } : nil
    }

    /// Depth in metres of a raw depth frame, deciding the format on the first frame.
    ///
    /// - Throws: ``BackdropSessionError/depthFormatNeeded(bits:)`` for 8-bit depth without a format.
    public func metres(_ depth: AnyImage) throws -> Image<Float> {
        let encoding: DepthEncoding
        switch (depthEncoding, depth) {
        case (let e?, _): encoding = e
        case (nil, .uint16): encoding = .millimetres16
        case (nil, .float32): encoding = .identity
        case (nil, .uint8): throw BackdropSessionError.depthFormatNeeded(bits: 8)
        }
        depthEncoding = encoding
        return encoding.metres(depth)
    }

    /// Cuts the subject out of one frame and composites it.
    ///
    /// - Parameters:
    ///   - color: The colour frame (any channel count; composited as RGB).
    ///   - depth: The depth frame, raw (in ``depthEncoding``) or already in metres as `.float32`.
    ///   - keepMask: Also return the full-size mask.
    /// - Returns: The composite, the mask if asked, and the frame's report.
    /// - Throws: ``BackdropSessionError`` (a depth format that cannot be guessed, frames of
    ///   different shapes), and `BackdropError.noSubject` when no subject can be found.
    public func process(color: AnyImage, depth: AnyImage, keepMask: Bool = false) throws -> BackdropFrame {
        var times = StageTimings()
        // The depth may be smaller than the colour, but it must cover the same view: a cut made
        // on a map of another shape would be silently wrong.
        let (cw, ch, dw, dh) = (Double(color.width), Double(color.height), Double(depth.width), Double(depth.height))
        guard cw > 0, ch > 0, dw > 0, dh > 0, abs(cw / ch - dw / dh) <= 0.02 * cw / ch else {
            throw BackdropSessionError.shapesDiffer(
                color: "\(color.width)x\(color.height)", depth: "\(depth.width)x\(depth.height)")
        }
        let metres = try metres(depth)
        let colour = color.uint8.withChannels(3)
        if let b = options.blurRadius { pipeline.options.blurSigmaAt640 = b * 640 / Float(metres.width) }
        var held: Int?
        if let finder {
            if heldFrom < 0 || frameIndex - heldFrom >= options.detectEvery {
                heldFace = times.measure(\.detect) { finder.find(in: .uint8(colour)).first }
                heldFrom = frameIndex
            } else {
                held = heldFrom
            }
        }
        let selection: SubjectSelection = options.subject == .face && finder == nil ? .nearest : options.subject
        let r = try pipeline.process(
            color: colour, depth: metres, face: heldFace, subject: selection, keepMask: keepMask)
        var subject = r.info.subject
        if options.subject == .face && finder == nil, case .nearestRegion(let p, _) = subject {
            subject = .nearestRegion(percent: p, fallback: .noCascade)
        }
        times.mask = r.info.maskMilliseconds / 1000
        times.effect = r.info.compositeMilliseconds / 1000
        let report = BackdropFrameReport(
            frame: frameIndex, subject: subject, subjectDepth: r.info.subjectDepth, cutoff: r.info.cutoff,
            face: r.info.face, faceHeldFromFrame: r.info.face == nil ? nil : held, times: times)
        frameIndex += 1
        return BackdropFrame(image: r.frame, mask: r.mask, report: report)
    }

    /// Runs a whole stream: reads frame pairs until both streams end, writes every composite,
    /// and finishes the output even when a stream fails, so every complete frame is kept.
    ///
    /// - Parameters:
    ///   - color: Colour frames.
    ///   - depth: Depth frames, synchronised with `color` frame for frame.
    ///   - output: Where composites go; `FrameWriter.finish()` is called in every case.
    ///   - progress: Called after each frame with the frames done and the seconds elapsed.
    ///   - isCancelled: Asked before each frame: true stops the stream there
    ///     (``BackdropSessionError/cancelled(after:)``), e.g. when a batch job's time limit passed.
    /// - Returns: The report; its `error` holds why the stream stopped early, if it did.
    public func run(
        color: FrameReader, depth: FrameReader, to output: FrameWriter,
        progress: ((_ frames: Int, _ elapsed: Double) -> Void)? = nil, isCancelled: (() -> Bool)? = nil
    ) -> BackdropReport {
        var frames: [BackdropFrameReport] = []
        let start = Date()
        var failure: Error?
        do {
            if let a = color.knownCount, let b = depth.knownCount, a != b {
                throw BackdropSessionError.frameCountsDiffer(color: a, depth: b)
            }
            while true {
                if isCancelled?() == true { throw BackdropSessionError.cancelled(after: frames.count) }
                var times = StageTimings()
                let pair = try times.measure(\.decode) { (try color.next(), try depth.next()) }
                if pair.0 == nil && pair.1 == nil { break }
                guard let c = pair.0, let d = pair.1 else {
                    throw BackdropSessionError.streamEnded(which: pair.0 == nil ? "colour" : "depth", after: frameIndex)
                }
                var f = try process(color: c, depth: d)
                try times.measure(\.encode) { try output.write(f.image) }
                f.report.times.decode = times.decode
                f.report.times.encode = times.encode
                frames.append(f.report)
                progress?(frames.count, Date().timeIntervalSince(start))
            }
        } catch { failure = error }
        do { try output.finish() } catch { if failure == nil { failure = error } }
        self.failure = failure
        let wall = Date().timeIntervalSince(start)
        let pipeline = frames.map { (($0.times.mask ?? 0) + ($0.times.effect ?? 0)) * 1000 }.sorted()
        let median = pipeline.isEmpty ? 0 : pipeline[pipeline.count / 2]
        return BackdropReport(
            output: nil, frames: frames, framesWritten: output.written, pipelineMsMedian: median,
            pipelineFps: median > 0 ? 1000 / median : 0, endToEndFps: wall > 0 ? Double(output.written) / wall : 0,
            seconds: wall, depthFormat: depthEncoding?.description, error: failure.map { String(describing: $0) })
    }
}

/// Why a backdrop stream cannot go on.
public enum BackdropSessionError: Error, Equatable, CustomStringConvertible {
    case depthFormatNeeded(bits: Int)
    case frameCountsDiffer(color: Int, depth: Int)
    case streamEnded(which: String, after: Int)
    /// Stopped before its end by the caller (a batch job past its time limit).
    case cancelled(after: Int)
    /// The colour and depth frames do not show the same field of view (their shapes differ).
    case shapesDiffer(color: String, depth: String)

    public var description: String {
        switch self {
        case .shapesDiffer(let c, let d):
            "the colour frames are \(c) but the depth frames are \(d): they must have the same shape (the depth may "
                + "be smaller); crop or rotate them alike"
        case .depthFormatNeeded(let b):
            "\(b)-bit depth needs its format: disparity8 with the disparity range in 1/m (it cannot be guessed)"
        case .frameCountsDiffer(let c, let d):
            "the colour stream has \(c) frames but the depth stream has \(d); the streams must be synchronised frame "
                + "for frame"
        case .cancelled(let n): "cancelled after \(n) frames"
        case .streamEnded(let which, let n):
            "the \(which) stream ended after \(n) frames while the other goes on; the streams must have the same "
                + "number of frames (the \(n) complete frames were kept)"
        }
    }
}

extension SubjectSelection: LosslessStringConvertible {
    /// Parses `face`, `nearest` or `X,Y` (colour pixels, non-negative).
    public init?(_ description: String) {
        switch description {
        case "face": self = .face
        case "nearest": self = .nearest
        default:
            let p = description.split(separator: ",", omittingEmptySubsequences: false).map {
                Int($0.trimmingCharacters(in: .whitespaces))
            }
            guard p.count == 2, let x = p[0], let y = p[1], x >= 0, y >= 0, x < 1 << 20, y < 1 << 20 else { return nil }
            self = .point(x: x, y: y)
        }
    }

    public var description: String {
        switch self {
        case .face: "face"
        case .nearest: "nearest"
        case .point(let x, let y): "\(x),\(y)"
        }
    }
}

/// A portrait photo as a one-frame colour + depth stream (`evanesco backdrop --portrait`): the
/// upright photo, and its depth converted to metres (disparity inverted) at the map's size.
///
/// ```swift
/// let still = try PortraitFrames(DepthReader.read("IMG_0001.HEIC"))
/// var options = BackdropSessionOptions()
/// options.depthEncoding = still.depthEncoding
/// let report = BackdropSession(options: options, cascade: nil).run(color: still.color, depth: still.depth, to: writer)
/// ```
public struct PortraitFrames {
    /// The photo, one frame.
    public let color: MemoryFrameReader
    /// Its depth in float metres, one frame.
    public let depth: MemoryFrameReader
    /// How ``depth``'s samples read: float metres.
    public let depthEncoding = DepthEncoding.identity
    /// The photo's depth has relative accuracy: its metres are a guess, so metric settings such as
    /// the cutoff offset are approximate.
    public let relativeAccuracy: Bool

    /// - Parameter photo: A photo read with its pixels and depth.
    /// - Throws: `DepthError.noDepth` when the photo has no depth, `PortraitError.noPhoto` when its
    ///   pixels were not decoded.
    public init(_ photo: DepthPhoto) throws {
        guard let decoded = photo.photo else { throw PortraitError.noPhoto(path: photo.path) }
        guard let d = photo.depth else {
            throw DepthError.noDepth(path: photo.path, found: photo.auxiliary.map(\.type))
        }
        color = MemoryFrameReader(frames: [decoded.image], name: photo.path)
        depth = MemoryFrameReader(frames: [.float32(d.converted(to: .depth).map)], name: photo.path + " (depth)")
        relativeAccuracy = d.accuracy == .relative
    }
}

/// The colour and depth streams a background replacement reads: a portrait photo's (one frame),
/// or two sources opened by `FrameSources` (a folder, a file, a video or raw frames on stdin).
/// The command line and batch jobs open them here, so a path means the same to both.
public struct BackdropInputs {
    public let color: FrameReader
    public let depth: FrameReader
    /// How the depth's samples read: the photo's float metres, else the encoding asked for.
    public let depthEncoding: DepthEncoding?
    /// A photo whose depth has relative accuracy (its metres are a guess).
    public let relativeAccuracy: Bool

    /// Opens a portrait photo's colour and depth.
    ///
    /// - Parameter portrait: A photo with a depth map.
    /// - Throws: What reading the photo throws; see ``PortraitFrames/init(_:)``.
    public init(portrait: String) throws {
        let still = try PortraitFrames(DepthReader.read(portrait))
        color = still.color
        depth = still.depth
        depthEncoding = still.depthEncoding
        relativeAccuracy = still.relativeAccuracy
    }

    /// Opens a colour and a depth source.
    ///
    /// - Parameters:
    ///   - color: The colour frames' source (`-` for raw frames on stdin).
    ///   - depth: The depth frames' source.
    ///   - depthEncoding: How depth samples become metres; nil picks from the sample type.
    ///   - colorSize: The size of raw colour frames on stdin.
    ///   - depthSize: The size of raw depth frames on stdin.
    /// - Throws: What `FrameSources.open(_:role:rawSize:stdin:)` throws.
    public init(
        color: String, depth: String, depthEncoding: DepthEncoding?, colorSize: (width: Int, height: Int)? = nil,
        depthSize: (width: Int, height: Int)? = nil
    ) throws {
        self.color = try FrameSources.open(color, role: .color, rawSize: colorSize)
        self.depth = try FrameSources.open(depth, role: .depth(depthEncoding), rawSize: depthSize)
        self.depthEncoding = depthEncoding
        relativeAccuracy = false
    }
}

extension BackdropSession {
    /// The face cascade a session whose subject is `subject` needs: none unless it is the face;
    /// `path`, whose problems are errors; else opencv-data's default, and when that is missing no
    /// cascade and the note that the nearest large depth region stands in for the face.
    ///
    /// - Parameters:
    ///   - subject: Where the subject is.
    ///   - path: A cascade file given by the user, if any.
    /// - Returns: The cascade, and the note to show when the default could not be loaded.
    /// - Throws: `CascadeError` for a `path` that cannot be loaded.
    public static func cascade(for subject: SubjectSelection, path: String?) throws -> (
        CascadeClassifier?, fallback: String?
    ) {
        guard subject == .face else { return (nil, nil) }
        do { return (try CascadeClassifier.load(path), nil) } catch let e as CascadeError where path == nil {
            return (nil, "\(e.description); using the nearest large depth region instead of a face")
        }
    }
}
