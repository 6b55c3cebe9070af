import ArgumentParser
import EvanescoCore
import EvanescoDepth
import EvanescoIO
import Foundation

struct Backdrop: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Replace the background behind a person in colour + depth frames (TrueDepth style).",
        discussion: """
        SRC: a video (ffmpeg), a folder of images or one image, or - for raw frames on stdin (give
        --size/--pixel-format for colour, --depth-size for depth; raw depth is gray16le for mm16,
        else gray). OUT: a video (.mp4, .mkv, .mov), a folder (frames as PNG), an image (one frame),
        or - for raw rgb24 frames on stdout:
          evanesco backdrop --color cam.mp4 --depth depth.mkv -o - | ffmpeg -f rawvideo -pix_fmt rgb24 -s 1280x720 -i - -f v4l2 /dev/video4
        Depth formats: mm16 (16-bit millimetres, 0 = unknown), disparity8:MIN,MAX (8-bit disparity
        in 1/m from MIN to MAX), pfm (float metres); auto picks mm16 for 16-bit and pfm for float.
        The pipeline is Apple's sample: face -> median depth in the face box -> cutoff = +0.25 m
        -> mask -> blur -> gamma -> upscale -> blend. Beyond it: the cutoff snaps to the empty depth
        gap just behind the subject (--no-gap-snap turns that off), cutoff and mask are smoothed
        over time, holes are voted by their neighbours, and without a face the nearest large depth
        region is used (the report says so). Faces: OpenCV cascades (apt-get install opencv-data).
        """)

    @Option(help: "Colour frames (video, folder, image, or -).") var color: String?
    @Option(help: "Depth frames (video, folder, image, or -).") var depth: String?
    @Option(help: "A portrait photo with depth: colour and depth from one file.") var portrait: String?
    @Option(help: "Background image (scaled to fill). Default: black, as the sample.") var background: String?
    @Option(name: .shortAndLong, help: "Output: video, folder, image, or - (raw rgb24 on stdout).") var output: String
    @Option(help: "face, nearest, or X,Y (colour pixels).") var subject: String = "face"
    @Option(help: "Cutoff = subject depth + this, metres.") var cutoffOffset: Float = 0.25
    @Option(help: "Mask blur sigma in depth pixels (default 5.3 at 640-wide depth, scaled).") var blurRadius: Float?
    @Option(help: "Mask gamma.") var gamma: Float = 0.55
    @Option(help: "auto, mm16, disparity8:MIN,MAX, pfm.") var depthFormat: String = "auto"
    @Option(help: "Raw colour frame size on stdin, WxH.") var size: String?
    @Option(help: "Raw colour pixel format on stdin (rgb24).") var pixelFormat: String = "rgb24"
    @Option(help: "Raw depth frame size on stdin, WxH.") var depthSize: String?
    @Option(help: "Frame rate of a video output (default: the colour video's, else 30).") var fps: Double?
    @Option(help: "Face cascade XML (default: opencv-data's haarcascade_frontalface_default.xml).") var cascade: String?
    @Option(help: "Run face detection every N frames, holding the box in between.") var detectEvery: Int = 10
    @Option(help: "Temporal smoothing weight of the newest frame (1 = none).") var temporal: Float = 0.5
    @Flag(help: "Decide the depth band between subject and cutoff by colour too.") var refine = false
    @Flag(help: "Keep the sample's fixed cutoff (no snapping to the depth gap).") var noGapSnap = false
    @Option(help: "Write a JSON report: per frame face box, subject depth, cutoff, timings; overall fps.") var report: String?
    @Flag(help: "Overwrite existing outputs.") var force = false
    @Flag(help: "No progress on stderr.") var quiet = false

    func validate() throws {
        if portrait == nil && (color == nil || depth == nil) { throw ValidationError("give --color and --depth, or --portrait PHOTO") }
        if portrait != nil && (color != nil || depth != nil) { throw ValidationError("--portrait replaces --color and --depth; give one or the other") }
        if color == "-" && depth == "-" { throw ValidationError("only one of --color and --depth can read stdin") }
        if color == "-" && size == nil { throw ValidationError("--color - needs --size WxH") }
        if depth == "-" && depthSize == nil { throw ValidationError("--depth - needs --depth-size WxH") }
        if pixelFormat != "rgb24" { throw ValidationError("--pixel-format: only rgb24 is read from stdin") }
        if !(cutoffOffset >= 0 && cutoffOffset < 10) { throw ValidationError("--cutoff-offset must be within 0...10 metres") }
        if !(gamma > 0 && gamma < 10) { throw ValidationError("--gamma must be positive") }
        if let b = blurRadius, !(b >= 0 && b < 200) { throw ValidationError("--blur-radius must be within 0...200") }
        if detectEvery < 1 { throw ValidationError("--detect-every must be >= 1") }
        if !(temporal > 0 && temporal <= 1) { throw ValidationError("--temporal must be within (0, 1]") }
        _ = try Self.parseDepthFormat(depthFormat)
        _ = try Self.parseSubject(subject)
    }

    static func parseDepthFormat(_ s: String) throws -> DepthFormat? {
        switch s {
        case "auto": return nil
        case "mm16": return .mm16
        case "pfm": return .metres
        default:
            if s.hasPrefix("disparity8:") {
                let p = s.dropFirst(11).split(separator: ",").compactMap { Float($0) }
                if p.count == 2, p[0] >= 0, p[1] > p[0] { return .disparity8(min: p[0], max: p[1]) }
            }
            throw ValidationError("--depth-format must be auto, mm16, pfm or disparity8:MIN,MAX (with 0 <= MIN < MAX, in 1/m)")
        }
    }

    static func parseSubject(_ s: String) throws -> SubjectSelection {
        switch s {
        case "face": return .face
        case "nearest": return .nearest
        default:
            let p = s.split(separator: ",").compactMap { Int($0) }
            guard p.count == 2, p[0] >= 0, p[1] >= 0 else { throw ValidationError("--subject must be face, nearest or X,Y") }
            return .point(x: p[0], y: p[1])
        }
    }

    func reader(_ src: String, isDepth: Bool, format: DepthFormat?) throws -> FrameReader {
        // Raw and video depth: 16-bit unless the format says 8-bit disparity.
        let layout: RawFrameReader.Layout = !isDepth ? .rgb24 : (format == .mm16 || format == nil ? .gray16le : .gray)
        if src == "-" {
            let (w, h) = try FrameStreamError.parseSize(isDepth ? depthSize! : size!)
            return RawFrameReader(fd: 0, width: w, height: h, layout: layout)
        }
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: src, isDirectory: &isDir) else { throw ImageIOError.fileNotFound(path: src) }
        let ext = URL(fileURLWithPath: src).pathExtension
        // A video by its bytes, or any file whose name is not an image's.
        if !isDir.boolValue && (VideoIO.isVideo(src) || (ImageFormat.forOutput(extension: ext) == nil && ext.lowercased() != "pfm")) {
            return try VideoFrameReader(path: src, layout: layout)
        }
        return try ImageFileReader(path: src)
    }

    func writer(frameRate: Double) throws -> FrameWriter {
        if output == "-" { return RawFrameWriter(fd: 1) }
        let ext = URL(fileURLWithPath: output).pathExtension.lowercased()
        if ["mp4", "mkv", "mov", "m4v", "avi", "webm"].contains(ext) { return try VideoFrameWriter(path: output, framesPerSecond: frameRate, overwrite: force) }
        if ImageFormat.forOutput(extension: ext) != nil { return ImageFrameWriter(path: output, overwrite: force) }
        return try DirectoryFrameWriter(dir: output, overwrite: force)
    }

    func run() throws {
        if quiet { Diagnostics.quiet = true }
        try reportingErrors {
            var options = BackdropOptions()
            options.cutoffOffset = cutoffOffset; options.gamma = gamma; options.refineWithColor = refine
            options.snapCutoffToGap = !noGapSnap; options.temporalWeight = temporal
            let bg = try background.map { try ImageCodecs.read($0).image.uint8 }
            let pipeline = BackdropPipeline(options: options, background: bg)
            let subjectSel = try Self.parseSubject(subject)
            var finder: FaceFinder?
            if subjectSel == .face {
                do { finder = FaceFinder(cascade: try CascadeClassifier.load(cascade)) } catch let e as CascadeError {
                    if cascade != nil { throw e }
                    Diagnostics.warning("\(e.description); using the nearest large depth region instead of a face")
                }
            }
            var format = try Self.parseDepthFormat(depthFormat)

            // Sources.
            let colorReader: FrameReader, depthReader: FrameReader
            var frameRate = fps ?? 30
            if let portrait {
                let p = try DepthReader.read(portrait)
                guard let photo = p.photo, let d = p.depth else { throw DepthError.noDepth(path: portrait, found: []) }
                let metres = d.converted(to: .depth)
                colorReader = PreloadedReader(frames: [photo.image], name: portrait)
                depthReader = PreloadedReader(frames: [.float32(metres.map)], name: portrait + " (depth)")
                format = .metres
                if d.accuracy == .relative {
                    Diagnostics.warning("\(portrait): the depth has relative accuracy; the 0.25 m cutoff offset is approximate")
                }
            } else {
                colorReader = try reader(color!, isDepth: false, format: nil)
                depthReader = try reader(depth!, isDepth: true, format: format)
                if fps == nil, let v = colorReader as? VideoFrameReader, v.info.framesPerSecond > 0 { frameRate = v.info.framesPerSecond }
                if let a = colorReader.knownCount, let b = depthReader.knownCount, a != b {
                    throw ValidationError("--color has \(a) frames but --depth has \(b); the streams must be synchronised frame for frame")
                }
            }
            let out = try writer(frameRate: frameRate)

            var frames: [[String: Any]] = []
            var pipelineMs: [Double] = []
            var heldFace: DetectedBox?, heldFrom = -1
            let start = Date()
            var lastProgress = Date()
            var index = 0
            var failure: Error?
            do {
                while true {
                    let t0 = Date()
                    let c = try colorReader.next()
                    let dRaw = try depthReader.next()
                    if c == nil && dRaw == nil { break }
                    guard let c, let dRaw else {
                        throw ValidationError("\(c == nil ? "--color" : "--depth") ended after \(index) frames while \(c == nil ? "--depth" : "--color") goes on; the streams must have the same number of frames (the \(index) complete frames were kept)")
                    }
                    if format == nil {
                        switch dRaw {
                        case .uint16: format = .mm16
                        case .float32: format = .metres
                        case .uint8:
                            throw ValidationError("\(depthReader.name): 8-bit depth needs --depth-format disparity8:MIN,MAX (its disparity range in 1/m)")
                        }
                    }
                    let depthMetres = format!.metres(dRaw)
                    let colour = c.uint8.withChannels(3)
                    if blurRadius != nil { pipeline.options.blurSigmaAt640 = blurRadius! * 640 / Float(depthMetres.width) }
                    let decodeMs = Date().timeIntervalSince(t0) * 1000
                    var detectMs = 0.0
                    if let finder, index - heldFrom >= detectEvery || heldFrom < 0 {
                        let td = Date()
                        var f = finder
                        f.workingSize = min(480, max(colour.width, colour.height)); f.minSize = 30
                        heldFace = f.find(in: .uint8(colour)).first
                        heldFrom = index
                        detectMs = Date().timeIntervalSince(td) * 1000
                    }
                    let r = try pipeline.process(color: colour, depth: depthMetres, face: finder == nil ? nil : heldFace,
                                                 subject: finder == nil && subjectSel == .face ? .nearest : subjectSel)
                    let te = Date()
                    try out.write(r.frame)
                    let encodeMs = Date().timeIntervalSince(te) * 1000
                    var info: [String: Any] = ["frame": index, "subject": r.info.subjectSource, "subjectDepth": Double(r.info.subjectDepth),
                                               "cutoff": Double(r.info.cutoff), "maskMs": r.info.maskMilliseconds,
                                               "compositeMs": r.info.compositeMilliseconds, "decodeMs": decodeMs, "detectMs": detectMs, "encodeMs": encodeMs]
                    if let f = r.info.face {
                        info["face"] = ["x": f.x, "y": f.y, "width": f.width, "height": f.height]
                        if heldFrom != index { info["faceHeldFromFrame"] = heldFrom }
                    }
                    if finder == nil && subjectSel == .face { info["subject"] = "no face cascade; " + r.info.subjectSource }
                    frames.append(info)
                    pipelineMs.append(r.info.maskMilliseconds + r.info.compositeMilliseconds)
                    index += 1
                    if Date().timeIntervalSince(lastProgress) > 1 {
                        lastProgress = Date()
                        let el = Date().timeIntervalSince(start)
                        Diagnostics.progress(String(format: "backdrop: %d frames, %.1f fps", index, Double(index) / el))
                    }
                }
            } catch { failure = error }
            // Keep every complete frame: finish the output even when a stream failed.
            do { try out.finish() } catch { if failure == nil { failure = error } }
            let wall = Date().timeIntervalSince(start)
            if let report {
                let sorted = pipelineMs.sorted()
                let med = sorted.isEmpty ? 0 : sorted[sorted.count / 2]
                let obj: [String: Any] = ["output": output, "frames": frames, "framesWritten": out.written,
                                          "pipelineMsMedian": med, "pipelineFps": med > 0 ? 1000 / med : 0,
                                          "endToEndFps": wall > 0 ? Double(out.written) / wall : 0, "seconds": wall,
                                          "depthFormat": format?.description ?? "unknown", "error": failure.map { String(describing: $0) } ?? NSNull()]
                let data = try JSONSerialization.data(withJSONObject: obj, options: [.prettyPrinted, .sortedKeys])
                try AtomicOutput.write(Array(data) + [10], to: report, overwrite: true)
            }
            if let failure { throw failure }
            guard out.written > 0 else { throw FrameStreamError.noFrames(source: color ?? portrait ?? "input") }
            Diagnostics.progress(String(format: "backdrop: %d frames to %@ in %.2f s (%.1f fps end to end)", out.written, output, wall, Double(out.written) / max(wall, 1e-9)))
        }
    }
}

/// Frames already in memory (a portrait photo's colour and depth).
final class PreloadedReader: FrameReader {
    var frames: [AnyImage]
    let name: String
    var knownCount: Int? { frames.count }
    init(frames: [AnyImage], name: String) { self.frames = frames; self.name = name }
    func next() throws -> AnyImage? { frames.isEmpty ? nil : frames.removeFirst() }
}
