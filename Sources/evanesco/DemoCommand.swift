import ArgumentParser
import EvanescoCore
import EvanescoIO
import Foundation

struct Demo: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the built-in demo on OpenCV's pedestrian video (fetched once from Debian's opencv-doc package).",
        discussion: """
        Needs no network beyond Debian's package mirror: the first run does `apt-get download opencv-doc`
        and keeps vtest.avi in the cache folder ($XDG_CACHE_HOME/evanesco, or ~/.cache/evanesco).
        Pass --video to use another clip.
        """)

    @Option(help: "Folder for the demo's outputs (created if missing).") var out = "evanesco-demo"
    @Option(help: "Video to use instead of OpenCV's vtest.avi.") var video: String?
    @Option(help: "Frames to take from the video, evenly spaced.") var frames = 20
    @Flag(help: "Replace outputs left by an earlier run.") var force = true

    func run() throws {
        try reportingErrors {
            let clip = try video ?? DemoAssets.pedestrianVideo()
            try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
            let info = try VideoIO.probe(clip)
            Diagnostics.progress("demo: \(clip): \(info.width)x\(info.height), \(info.frameCount) frames at \(info.framesPerSecond) fps")
            let start = Date()
            var first: Image<UInt8>?
            let n = try VideoIO.decodeFrames(clip, selection: .evenlySpaced(frames)) { idx, img in
                if first == nil { first = img }
                Diagnostics.progress("demo: decoded frame \(idx)")
            }
            guard let first else { throw ValidationError("\(clip): no frames could be decoded") }
            let png = out + "/frame0.png", jpg = out + "/frame0.jpg", tif = out + "/frame0-16bit.tif"
            try ImageCodecs.write(.uint8(first), to: png, options: WriteOptions(overwrite: force))
            try ImageCodecs.write(.uint8(first), to: jpg, options: WriteOptions(quality: 90, overwrite: force))
            try ImageCodecs.write(.uint8(first), to: tif, options: WriteOptions(bitDepth: 16, overwrite: force))
            Diagnostics.progress(String(format: "demo: %d frames decoded in %.2f s", n, Date().timeIntervalSince(start)))
            print(png); print(jpg); print(tif)
        }
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
        for installed in ["/usr/share/doc/opencv-doc/examples/data/vtest.avi", "/usr/share/opencv4/samples/data/vtest.avi"]
        where FileManager.default.fileExists(atPath: installed) { return installed }
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let work = dir + "/download-\(getpid())"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }
        Diagnostics.progress("demo: fetching OpenCV's sample video from Debian's opencv-doc package (96 MB, once)...")
        try shell("cd '\(work)' && apt-get download opencv-doc >/dev/null 2>&1 || (apt-get update -qq >/dev/null 2>&1 && apt-get download opencv-doc >/dev/null)",
                  failure: "could not download Debian's opencv-doc package; run `apt-get update`, or pass --video FILE")
        try shell("cd '\(work)' && dpkg-deb --fsys-tarfile opencv-doc_*.deb | tar -xO ./usr/share/doc/opencv-doc/examples/data/vtest.avi > vtest.avi && mv vtest.avi '\(target)'",
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
