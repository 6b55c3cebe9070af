import ArgumentParser
import EvanescoAlign
import EvanescoCore
import EvanescoIO
import EvanescoStack
import Foundation

extension AlignMode: ExpressibleByArgument {}
extension MergeMethod: ExpressibleByArgument {}
extension Interpolation: ExpressibleByArgument {}

struct Stack: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Align a burst and merge it so that whatever moves vanishes.",
        discussion: """
        INPUT is image files, a folder of images (sorted by name) or one video file.
        Frames that cannot be decoded or aligned are reported on stderr and left out.
        Examples:
          evanesco stack burst/*.jpg -o clean.jpg
          evanesco stack street.mp4 --frames 30 -o clean.png --report report.json
          evanesco stack tripod/ --align none --merge median -o clean.tif --bit-depth 16
        """)

    @Argument(help: "Image files, a folder of images, or one video.") var inputs: [String]
    @Option(name: .shortAndLong, help: "Output image (.jpg, .png, .tif).") var output: String
    @Option(help: "auto (homography, falling back to translation), none, translation or homography.") var align: AlignMode = .auto
    @Option(help: "mean, mode, median, sigma-clip, winsorized or robust.") var merge: MergeMethod = .robust
    @Option(help: "Index of the reference frame among the usable inputs.") var reference = 0
    @Option(help: "Frames taken from a video, evenly spaced.") var frames = 20
    @Option(help: "Finest pyramid level alignment is refined at: 0 = full resolution, 1 = half (default: 1 above 8 MP, else 0).")
    var alignLevel: Int?
    @Option(help: "Warp interpolation: catmullRom, bilinear, bicubic or nearest.") var interpolation: Interpolation = .catmullRom
    @Option(help: "Sigma-clip kappa.") var kappa: Float = 2.5
    @Option(help: "Output bits per sample (8 or 16; default: the inputs').") var bitDepth: Int?
    @Option(help: "JPEG quality of the output.") var quality = 95
    @Option(help: "Use these registrations instead of aligning: a JSON report (frames[].index, frames[].homography) from --report or ../shared/bench.")
    var homographies: String?
    @Option(help: "Write the decoded and the aligned frames into a new DIR/<UUID>/.") var saveFrames: String?
    @Option(help: "Write a JSON report (per-frame homographies, residuals, timings).") var report: String?
    @Flag(help: "Overwrite the output and report if they exist.") var force = false
    @Flag(help: "No progress on stderr.") var quiet = false

    func validate() throws {
        if frames < 1 { throw ValidationError("--frames must be at least 1") }
        if let b = bitDepth, b != 8 && b != 16 { throw ValidationError("--bit-depth must be 8 or 16") }
        if !(kappa > 0) { throw ValidationError("--kappa must be positive") }
        if ImageFormat.forOutput(extension: (output as NSString).pathExtension) == nil || (output as NSString).pathExtension.lowercased().hasPrefix("hei") {
            throw ValidationError("\(output): name the output .jpg, .png or .tif")
        }
    }

    func run() throws {
        Diagnostics.quiet = quiet
        try reportingErrors {
            // Refuse early, before any work, if outputs would be clobbered.
            for p in [output, report].compactMap({ $0 }) where FileManager.default.fileExists(atPath: p) && !force {
                throw ImageIOError.outputExists(path: p)
            }
            let progress = ProgressPrinter(quiet: quiet)
            let t0 = Date()
            let loaded = try BurstInput.load(inputs, videoFrames: frames, progress: progress.callback)
            let decodeTime = Date().timeIntervalSince(t0)
            for (file, why) in loaded.skipped { Diagnostics.warning("skipped \(file): \(why)") }
            guard !loaded.frames.isEmpty else { throw StackError.noFrames }
            if loaded.frames.count == 1 { Diagnostics.warning("only one usable frame: the output is that frame, nothing can be removed") }
            if loaded.frames.count == 2 && merge != .mean { Diagnostics.warning("two frames cannot outvote a moving object; use 3 or more (merging them by their mean)") }

            var options = StackOptions()
            options.align = align; options.merge = loaded.frames.count == 2 ? .mean : merge
            options.reference = reference; options.interpolation = interpolation; options.kappa = kappa
            options.progress = progress.callback
            if let path = homographies { options.givenHomographies = try GivenHomographies.read(path, count: loaded.frames.count) }
            let pixels = loaded.frames[0].image.width * loaded.frames[0].image.height
            options.registration.finestLevel = alignLevel ?? (pixels > 8_000_000 ? 1 : 0)
            let result = try BurstStacker.stack(loaded.frames, options: options)
            for f in result.frames where !f.used { Diagnostics.warning("left out \(f.source): \(f.status)") }
            for f in result.frames where f.fallback != nil { Diagnostics.warning("\(f.source): \(f.fallback!)") }

            let t2 = Date()
            var image = result.image
            if let b = bitDepth { image = b == 8 ? .uint8(image.uint8) : .uint16(image.uint16) }
            let refMeta = loaded.frames[options.reference].metadata
            // zlib level 1 for PNG/TIFF: 12 MP at level 6 took 3.6 s, more than the whole merge.
            try ImageCodecs.write(image, to: output, options: WriteOptions(quality: quality, metadata: refMeta, overwrite: force, pngCompression: 1))
            let encodeTime = Date().timeIntervalSince(t2)

            var saved: String?
            if let dir = saveFrames { saved = try FrameSaver.save(loaded.frames, result, to: dir, interpolation: interpolation) }

            var timings = result.timings
            timings["decode"] = decodeTime; timings["encode"] = encodeTime; timings["total"] = Date().timeIntervalSince(t0)
            if let report {
                try StackReport.write(result, timings: timings, skipped: loaded.skipped, inputs: inputs, output: output, to: report, overwrite: force)
            }
            let summary = String(format: "%@: %dx%d, %d of %d frames merged (%@, align %@) in %.2f s",
                                 output, image.width, image.height, result.usedFrames, loaded.frames.count + loaded.skipped.count,
                                 result.merge.rawValue, result.align.rawValue, timings["total"]!)
            print(summary)
            if let saved { print("frames saved in \(saved)") }
        }
    }
}

/// Progress lines on stderr: stage, count, and time left.
final class ProgressPrinter: @unchecked Sendable {
    let quiet: Bool
    private let lock = NSLock()
    private var lastStage = ""
    private var lastPrint = Date.distantPast
    init(quiet: Bool) { self.quiet = quiet }

    var callback: (@Sendable (StackProgress) -> Void)? {
        if quiet { return nil }
        let printer = self
        return { @Sendable p in printer.show(p) }
    }

    func show(_ p: StackProgress) {
        lock.lock(); defer { lock.unlock() }
        let now = Date()
        guard p.stage != lastStage || p.done == p.total || now.timeIntervalSince(lastPrint) > 0.5 else { return }
        lastStage = p.stage; lastPrint = now
        let unit = p.stage == "merge" ? "rows" : "frames"
        var line = "\(p.stage): \(p.done)/\(p.total) \(unit)"
        if let r = p.remaining { line += String(format: ", about %.1f s left", r) }
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

}
