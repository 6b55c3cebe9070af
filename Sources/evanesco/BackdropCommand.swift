import ArgumentParser
import EvanescoCore
import EvanescoDepth
import EvanescoIO
import Foundation
import EvanescoFaces

struct Backdrop: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backdrop",
        abstract: "Replace the background behind a person in colour + depth frames (TrueDepth style).",
        discussion: """
            SRC is a video (read through ffmpeg), a folder of images, one image, or - for raw frames \
            on stdin (give --size for colour, --depth-size for depth; raw depth is gray16le for mm16, \
            else gray). OUT is a video (.mp4, .mkv, .mov), a folder (frames as PNG), an image (one \
            frame), or - for raw rgb24 frames on stdout, e.g. to feed a virtual webcam through ffmpeg \
            (-o - | ffmpeg -f rawvideo -pix_fmt rgb24 -s WxH -i - -f v4l2 /dev/videoN).

            Depth formats: mm16 (16-bit millimetres, 0 = unknown), disparity8:MIN,MAX (8-bit \
            disparity in 1/m from MIN to MAX), pfm (float metres); auto picks mm16 for 16-bit and \
            pfm for float frames.

            The pipeline is Apple's sample: face, median depth in the face box, cutoff 0.25 m behind \
            it, mask, blur, gamma, upscale, blend. Beyond it: the cutoff snaps to the empty depth gap \
            just behind the subject (--no-gap-snap turns that off), cutoff and mask are smoothed over \
            time, holes are voted by their neighbours, and without a face the nearest large depth \
            region is used (the report says so). Faces use OpenCV cascades (apt-get install opencv-data).

            EXAMPLES:
              evanesco backdrop --color cam.mp4 --depth d.mkv --background sea.jpg -o o.mp4
              evanesco backdrop --portrait IMG_0001.HEIC --background beach.jpg -o out.jpg
              evanesco backdrop --color cam.mp4 --depth d.mkv --subject nearest -o frames/
            """)

    @Option(help: "Colour frames (video, folder, image, or -).") var color: String?
    @Option(help: "Depth frames (video, folder, image, or -).") var depth: String?
    @Option(help: "A portrait photo with depth: colour and depth from one file.") var portrait: String?
    @Option(help: "Background image (scaled to fill). Default: black, as the sample.") var background: String?
    @Option(name: .shortAndLong, help: "Output: video, folder, image, or - (raw rgb24 on stdout).") var output: String
    @Option(help: .backdrop("subject")) var subject = BackdropSessionOptions().subject
    @Option(help: .backdrop("cutoffOffset")) var cutoffOffset = BackdropOptions().cutoffOffset
    @Option(help: .backdrop("blur")) var blur = BackdropOptions().blurSigmaAt640
    @Option(help: .hidden) var blurRadius: Float?
    @Option(help: .backdrop("gamma")) var gamma = BackdropOptions().gamma
    @Option(help: .backdrop("depthFormat")) var depthFormat: DepthFormatArgument = .auto
    @Option(help: ArgumentHelp("Raw colour frame size on stdin.", valueName: "WIDTHxHEIGHT")) var size: FrameSize?
    @Option(help: "Raw colour pixel format on stdin (rgb24).") var pixelFormat: String = "rgb24"
    @Option(help: ArgumentHelp("Raw depth frame size on stdin.", valueName: "WIDTHxHEIGHT")) var depthSize: FrameSize?
    @Option(help: "Frame rate of a video output (default: the colour video's, else 30).") var fps: Double?
    @Option(help: "Face cascade XML (default: opencv-data's haarcascade_frontalface_default.xml).") var cascade: String?
    @Option(help: .backdrop("detectEvery")) var detectEvery = BackdropSessionOptions().detectEvery
    @Option(help: .backdrop("temporal")) var temporal = BackdropOptions().temporalWeight
    @Flag(inversion: .prefixedNo, help: .backdrop("refine")) var refine = BackdropOptions().refineWithColor
    @Flag(inversion: .prefixedNo, help: .backdrop("gapSnap")) var gapSnap = BackdropOptions().snapCutoffToGap
    @Flag(inversion: .prefixedNo, help: .backdrop("fillHoles")) var fillHoles = BackdropOptions().fillHoles
    @Option(help: .backdrop("coreDepth")) var coreDepth = BackdropOptions().coreDepth
    @Option(help: .backdrop("faceWorkingSize")) var faceWorkingSize = BackdropSessionOptions().faceWorkingSize
    @Option(help: .backdrop("faceMinSize")) var faceMinSize = BackdropSessionOptions().faceMinSize
    @Option(help: ArgumentHelp(JPEGQuality.help)) var quality = JPEGQuality.rendered
    @Option(help: "Write a JSON report (face box, subject depth, cutoff, timings; fps).") var report: String?
    @Flag(help: "Overwrite existing outputs.") var force = false
    @Flag(help: "No progress on stderr.") var quiet = false

    func validate() throws {
        if portrait == nil && (color == nil || depth == nil) {
            throw ValidationError("give --color and --depth, or --portrait PHOTO")
        }
        if portrait != nil && (color != nil || depth != nil) {
            throw ValidationError("--portrait replaces --color and --depth; give one or the other")
        }
        if color == "-" && depth == "-" { throw ValidationError("only one of --color and --depth can read stdin") }
        if color == "-" && size == nil { throw ValidationError("--color - needs --size WxH") }
        if depth == "-" && depthSize == nil { throw ValidationError("--depth - needs --depth-size WxH") }
        if pixelFormat != "rgb24" { throw ValidationError("--pixel-format: only rgb24 is read from stdin") }
        try validateSettings(Self.flags) { () throws(SettingError) in try options().validate() }
        if let f = fps, !(f > 0 && f <= 1000) { throw ValidationError("--fps must be within (0, 1000]") }
        try checkQuality(quality)
        if blurRadius != nil && blur != BackdropOptions().blurSigmaAt640 {
            throw ValidationError("give --blur, or the deprecated --blur-radius, not both")
        }
    }

    /// The flag of each setting the library names (its declared key in kebab-case).
    static let flags = BackdropSessionOptions.flagsByName.merging(
        ["subject point": "--subject", "blur radius": "--blur-radius"]) { a, _ in a }

    /// The library's settings from the flags (a portrait's depth encoding is added by run()).
    func options() -> BackdropSessionOptions {
        var options = BackdropSessionOptions()
        options.pipeline.cutoffOffset = cutoffOffset
        options.pipeline.gamma = gamma
        options.pipeline.refineWithColor = refine
        options.pipeline.snapCutoffToGap = gapSnap
        options.pipeline.temporalWeight = temporal
        options.pipeline.fillHoles = fillHoles
        options.pipeline.coreDepth = coreDepth
        options.faceWorkingSize = faceWorkingSize
        options.faceMinSize = faceMinSize
        options.subject = subject
        options.detectEvery = detectEvery
        options.depthEncoding = depthFormat.format
        options.pipeline.blurSigmaAt640 = blur
        options.blurRadius = blurRadius
        return options
    }

    /// Stdout, one image, a video or a folder of frames, by the name (the library's rule).
    var outputKind: FrameOutputKind { FrameOutputKind(output) }

    func run() throws {
        try reportingErrors {
            let inputs = [color, depth, portrait, background, cascade].compactMap { $0 }.filter { $0 != "-" }
            try AtomicOutput.check(
                files: [outputKind == .folder ? nil : output, report],
                directories: [outputKind == .folder ? output : nil],
                inputs: inputs, overwrite: force)
            var options = options()
            if blurRadius != nil { Diagnostics.warning(BackdropSessionOptions.blurRadiusDeprecation) }
            let bg = try background.map { try ImageCodecs.read($0).image.uint8 }
            let (classifier, fallback) = try BackdropSession.cascade(for: subject, path: cascade)
            if let fallback { Diagnostics.warning(fallback) }
            let streams =
                try portrait.map { try BackdropInputs(portrait: $0) }
                ?? BackdropInputs(
                    color: color!, depth: depth!, depthEncoding: options.depthEncoding,
                    colorSize: size.map { ($0.width, $0.height) }, depthSize: depthSize.map { ($0.width, $0.height) })
            let colorReader = streams.color, depthReader = streams.depth
            options.depthEncoding = streams.depthEncoding
            if streams.relativeAccuracy {
                Diagnostics.warning(
                    "\(portrait ?? ""): the depth is relative; the cutoff offset in metres is approximate")
            }
            try outputKind.check(frames: colorReader.knownCount, of: colorReader.name, output: output)
            let session = BackdropSession(options: options, background: bg, cascade: classifier)
            let rate = fps ?? colorReader.framesPerSecond ?? 30
            let out = try outputKind.writer(at: output, frameRate: rate, overwrite: force, quality: quality)
            let progress = ProgressDisplay(quiet: quiet)
            var lastShown = 0.0
            var result = session.run(color: colorReader, depth: depthReader, to: out) { n, elapsed in
                guard elapsed - lastShown > 1 else { return }
                lastShown = elapsed
                progress.message(String(format: "backdrop: %d frames, %.1f fps", n, Double(n) / elapsed))
            }
            result.output = output
            if let report { try ReportFile.write(result, settings: options, to: report, overwrite: force) }
            if case BackdropSessionError.depthFormatNeeded(let bits)? = session.failure {
                throw ValidationError(
                    "\(depthReader.name): \(bits)-bit depth needs --depth-format disparity8:MIN,MAX (disparity in 1/m)")
            }
            if let e = session.failure {
                // A live stream that stopped mid-frame: the complete frames before it are a valid
                // result, and the message says they were kept.
                if case FrameStreamError.cutMidFrame = e { Cleanup.keepPlaced() }
                throw e
            }
            guard result.framesWritten > 0 else {
                throw FrameStreamError.noFrames(source: color ?? portrait ?? "input")
            }
            progress.message(
                String(
                    format: "backdrop: %d frames to %@ in %.2f s (%.1f fps end to end)", result.framesWritten, output,
                    result.seconds, result.endToEndFps))
        }
    }
}
