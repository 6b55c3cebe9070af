import Foundation
import Testing
import EvanescoCore
import EvanescoIO
import SubprocessTestSupport

/// Runs the built `evanesco` binary (it sits beside the test bundle in the build folder).
struct CLI {
    static let binary: String = {
        if let b = ProcessInfo.processInfo.environment["EVANESCO_BIN"] { return b }
        let exe =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
        while dir.path != "/" {
            let candidate = dir.appendingPathComponent("evanesco").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return "evanesco"
    }()

    /// Runs it to its end (at most `seconds`: a hang is status -1, its stderr saying so).
    static func run(_ args: [String], seconds: Double = 600) throws -> (status: Int32, out: String, err: String) {
        let r = try Subprocess.run(binary, args, seconds: seconds)
        return (r.status, r.stdout, r.stderr)
    }
}

final class Scratch {
    let path = NSTemporaryDirectory() + "evanesco-cli-\(UUID().uuidString)"
    init() { try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }
    deinit { try? FileManager.default.removeItem(atPath: path) }
    func file(_ n: String) -> String { path + "/" + n }
    var contents: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted() }
}

func gradient(_ w: Int, _ h: Int) -> Image<UInt8> {
    Image<UInt8>(width: w, height: h, channels: 3) { d in
        for y in 0..<h {
            for x in 0..<w {
                let o = (y * w + x) * 3
                d[o] = UInt8(x % 256)
                d[o + 1] = UInt8(y % 256)
                d[o + 2] = 77
            }
        }
    }
}

@Suite struct CLICommands {
    @Test func infoReportsFormatSizeAndDepth() throws {
        let s = Scratch()
        try ImageCodecs.write(.uint16(gradient(40, 30).converted(to: UInt16.self)), to: s.file("a.png"))
        let r = try CLI.run(["info", s.file("a.png")])
        #expect(r.status == 0)
        #expect(
            r.out.contains("format: PNG") && r.out.contains("width: 40") && r.out.contains("height: 30")
                && r.out.contains("bit depth: 16"))
        let j = try CLI.run(["info", s.file("a.png"), "--json"])
        let obj = try #require(try JSONSerialization.jsonObject(with: Data(j.out.utf8)) as? [String: Any])
        #expect(obj["width"] as? Int == 40 && obj["has_depth"] as? Bool == false && obj["format"] as? String == "PNG")
    }

    @Test func convertRoundTripAndNoOverwrite() throws {
        let s = Scratch()
        let img = gradient(64, 48)
        try ImageCodecs.write(.uint8(img), to: s.file("in.png"))
        let before = FileManager.default.contents(atPath: s.file("in.png"))
        var r = try CLI.run(["convert", s.file("in.png"), s.file("out.tif"), "--bit-depth", "16"])
        #expect(r.status == 0 && r.out.contains("64x48"))
        #expect(try ImageCodecs.read(s.file("out.tif")).image == .uint16(img.converted(to: UInt16.self)))
        // Existing output: refused, one line on stderr, file untouched.
        r = try CLI.run(["convert", s.file("in.png"), s.file("out.tif")])
        #expect(r.status != 0)
        #expect(r.err.contains("already exists") && r.err.contains("--force"))
        #expect(r.err.split(separator: "\n").count == 1)
        r = try CLI.run(["convert", s.file("in.png"), s.file("out.tif"), "--force"])
        #expect(r.status == 0)
        #expect(try ImageCodecs.read(s.file("out.tif")).image == .uint8(img))
        #expect(FileManager.default.contents(atPath: s.file("in.png")) == before, "input untouched")
    }

    @Test func badInputFailsWithOneLineAndNoOutput() throws {
        let s = Scratch()
        FileManager.default.createFile(atPath: s.file("empty.jpg"), contents: Data())
        FileManager.default.createFile(atPath: s.file("text.png"), contents: Data("not an image".utf8))
        for (input, phrase) in [("empty.jpg", "empty"), ("text.png", "not an image"), ("missing.heic", "no such file")]
        {
            let r = try CLI.run(["convert", s.file(input), s.file("out.png")])
            #expect(r.status == 1, "\(input)")
            #expect(r.err.contains(phrase) && r.err.contains(input), "\(input): \(r.err)")
            #expect(r.out.isEmpty)
        }
        let r = try CLI.run(["convert", s.file("empty.jpg"), s.file("out.png"), "--quality", "500"])
        #expect(r.status != 0 && r.err.contains("--quality"))
        #expect(s.contents == ["empty.jpg", "text.png"], "no output or temp files: \(s.contents)")
    }
}
