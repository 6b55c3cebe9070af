import ArgumentParser
import EvanescoCore
import EvanescoIO
import EvanescoStack
import Foundation

struct Demo: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract:
            "Make the pedestrians vanish from OpenCV's sample video (fetched once from Debian's opencv-doc package).",
        discussion: """
            Needs no network beyond Debian's package mirror: the first run does `apt-get download \
            opencv-doc` and keeps vtest.avi in the cache folder ($XDG_CACHE_HOME/evanesco, or \
            ~/.cache/evanesco). Takes 20 evenly spaced frames, aligns and merges them exactly as \
            `evanesco stack` does, and writes the clean photo, a before/after sheet and the JSON \
            report. Without --out, each run writes into a new folder (evanesco-demo, evanesco-demo-2, ...).

            EXAMPLES:
              evanesco demo
              evanesco demo --out /tmp/demo --merge median --force
              evanesco demo --video street.mp4 --frames 30
            """)

    @Option(help: "Folder for the demo's outputs (created if missing; default: a new evanesco-demo folder).") var out:
        String?
    @Option(help: "Video to use instead of OpenCV's vtest.avi.") var video: String?
    @Option(help: "Frames to take from the video, evenly spaced (2...500 for the demo).")
    var frames = StackOptions().videoFrames
    @Option(help: .stack("merge")) var merge = StackOptions().merge
    @Flag(help: "Replace the demo's files if --out already holds them.") var force = false

    func validate() throws {
        if !(2...500).contains(frames) { throw ValidationError("--frames must be within 2...500") }
    }

    /// The output folder: --out, or the first of evanesco-demo, evanesco-demo-2, ... that does not exist.
    func folder() -> String {
        if let out { return out }
        var n = 1
        while true {
            let name = n == 1 ? "evanesco-demo" : "evanesco-demo-\(n)"
            if !FileManager.default.fileExists(atPath: name) { return name }
            n += 1
        }
    }

    func run() throws {
        try reportingErrors {
            let dir = folder()
            let clean = dir + "/clean.jpg", sheet = dir + "/before-after.jpg", report = dir + "/report.json"
            var isDir: ObjCBool = false
            if FileManager.default.fileExists(atPath: dir, isDirectory: &isDir) {
                guard isDir.boolValue else { throw ValidationError("--out \(dir) is a file; give a folder") }
                try AtomicOutput.check(
                    files: [clean, sheet, report], inputs: [video].compactMap { $0 }, overwrite: force)
            } else {
                try AtomicOutput.check(directories: [dir], inputs: [video].compactMap { $0 }, overwrite: force)
            }
            let clip = try video ?? DemoAssets.pedestrianVideo()
            try AtomicOutput.makeFolder(dir)
            let info = try VideoIO.probe(clip)
            let progress = ProgressDisplay(quiet: false)
            progress.message(
                "demo: \(clip): \(info.width)x\(info.height), \(info.frameCount) frames at \(info.framesPerSecond) "
                    + "fps; taking \(frames)"
            )
            var options = StackOptions()
            options.merge = merge
            options.videoFrames = frames
            options.progress = progress.stackCallback
            options.retainFrames = true
            let start = Date()
            var result = try BurstStacker.stack(contentsOf: [clip], options: options)
            progress.finish()
            for n in result.notices { Diagnostics.warning(n.description) }
            try result.timings.measure(\.encode) {
                try ImageCodecs.write(
                    result.image, to: clean, options: WriteOptions(quality: JPEGQuality.master, overwrite: force))
                let before = result.decodedFrames![result.referenceIndex].image.uint8, after = result.image.uint8
                try ImageCodecs.write(
                    .uint8(DemoSheet.sideBySide(before, after)), to: sheet,
                    options: WriteOptions(quality: JPEGQuality.rendered, overwrite: force))
            }
            result.timings.total = Date().timeIntervalSince(start)
            try ReportFile.write(StackReport(result, inputs: [clip], output: clean), to: report, overwrite: force)
            progress.message(
                String(
                    format: "demo: %d of %d frames merged (%@) in %.2f s", result.usedFrames, result.frames.count,
                    result.merge.rawValue, result.timings.total ?? 0))
            try StandardOutput.line("clean photo:  \(clean)")
            try StandardOutput.line("before/after: \(sheet)")
            try StandardOutput.line("report:       \(report)")
        }
    }
}

enum DemoSheet {
    /// `a` and `b` side by side with an 8-pixel white gutter.
    static func sideBySide(_ a: Image<UInt8>, _ b: Image<UInt8>) -> Image<UInt8> {
        let a3 = a.withChannels(3), b3 = b.withChannels(3)
        let gap = 8, w = a3.width + gap + b3.width, h = max(a3.height, b3.height)
        var sheet = Image<UInt8>(width: w, height: h, channels: 3)
        for i in sheet.samples.indices { sheet.samples[i] = 255 }
        for (img, x0) in [(a3, 0), (b3, a3.width + gap)] {
            for y in 0..<img.height { for x in 0..<img.width { for c in 0..<3 { sheet[x0 + x, y, c] = img[x, y, c] } } }
        }
        return sheet
    }
}

/// Sample data for the demo, taken from Debian packages and cached.
enum DemoAssets {
    static var cacheDirectory: String {
        let env = ProcessInfo.processInfo.environment
        if let x = env["XDG_CACHE_HOME"], !x.isEmpty { return x + "/evanesco" }
        return (env["HOME"] ?? NSTemporaryDirectory()) + "/.cache/evanesco"
    }

    /// OpenCV's vtest.avi (768x576, 795 frames, pedestrians in front of a fixed camera).
    static func pedestrianVideo() throws -> String {
        let dir = cacheDirectory
        let target = dir + "/vtest.avi"
        if FileManager.default.fileExists(atPath: target) { return target }
        for installed in [
            "/usr/share/doc/opencv-doc/examples/data/vtest.avi", "/usr/share/opencv4/samples/data/vtest.avi"
        ]
        where FileManager.default.fileExists(atPath: installed) { return installed }
        let work = dir + "/download-\(getpid())"
        do { try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true) } catch {
            throw ValidationError(
                "cannot make the cache folder \(dir); set XDG_CACHE_HOME to a folder you can write to, or pass "
                    + "--video FILE"
            )
        }
        defer { try? FileManager.default.removeItem(atPath: work) }
        FileHandle.standardError.write(
            Data("demo: fetching OpenCV's sample video from Debian's opencv-doc package (96 MB, once)...\n".utf8))
        try shell(
            "cd '\(work)' && apt-get download opencv-doc >/dev/null 2>&1 || (apt-get update -qq >/dev/null 2>&1 && "
                + "apt-get download opencv-doc >/dev/null)",
            failure: "could not download Debian's opencv-doc package; run `apt-get update`, or pass --video FILE")
        try shell(
            "cd '\(work)' && dpkg-deb --fsys-tarfile opencv-doc_*.deb | tar -xO "
                + "./usr/share/doc/opencv-doc/examples/data/vtest.avi > vtest.avi && mv vtest.avi '\(target)'",
            failure: "could not extract vtest.avi from opencv-doc")
        return target
    }

    static func shell(_ command: String, failure: String) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-c", command]
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw ValidationError(failure) }
    }
}
