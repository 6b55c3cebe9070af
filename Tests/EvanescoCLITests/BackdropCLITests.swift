import Foundation
import SubprocessTestSupport
import Testing
import EvanescoCore
import EvanescoIO

/// Runs the binary with bytes on stdin.
func runWithInput(_ args: [String], input: [UInt8]) throws -> (status: Int32, out: [UInt8], err: String) {
    let r = try Subprocess.run(CLI.binary, args, stdin: input, seconds: 600)
    return (r.status, r.out, r.stderr)
}

@Suite struct BackdropCommands {
    /// Colour 64x48 (uniform orange), depth 32x24 mm16: a 10 px disc at 1 m over a 3 m wall.
    func writeFrames(_ s: Scratch, count: Int, depthCount: Int? = nil) throws -> (String, String) {
        let c = s.file("color"), d = s.file("depth")
        try FileManager.default.createDirectory(atPath: c, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        let color = Image<UInt8>(width: 64, height: 48, channels: 3) { p in
            for i in 0..<(64 * 48) {
                p[3 * i] = 250
                p[3 * i + 1] = 120
                p[3 * i + 2] = 10
            }
        }
        for k in 0..<count { try ImageCodecs.write(.uint8(color), to: c + String(format: "/c%03d.png", k)) }
        for k in 0..<(depthCount ?? count) {
            let depth = Image<UInt16>(width: 32, height: 24, channels: 1) { p in
                for y in 0..<24 {
                    for x in 0..<32 {
                        p[y * 32 + x] = (x - 10 - k) * (x - 10 - k) + (y - 12) * (y - 12) < 49 ? 1000 : 3000
                    }
                }
            }
            try ImageCodecs.write(.uint16(depth), to: d + String(format: "/d%03d.png", k))
        }
        return (c, d)
    }

    @Test func foldersInFolderOutWithReport() throws {
        let s = Scratch()
        let (c, d) = try writeFrames(s, count: 4)
        let r = try CLI.run([
            "backdrop", "--color", c, "--depth", d, "-o", s.file("out"), "--subject", "nearest", "--report",
            s.file("r.json")
        ])
        #expect(r.status == 0, "\(r.err)")
        let outs = try FileManager.default.contentsOfDirectory(atPath: s.file("out")).sorted()
        #expect(outs == ["frame00001.png", "frame00002.png", "frame00003.png", "frame00004.png"])
        let f0 = try ImageCodecs.read(s.file("out/frame00001.png")).image.uint8
        #expect(f0[20, 24, 0] == 250 && f0[60, 5, 0] == 0)  // person kept, wall black (no background given)
        let rep = try JSONSerialization.jsonObject(with: Data(bytesOf(s.file("r.json")))) as! [String: Any]
        let frames = rep["frames"] as! [[String: Any]]
        #expect(frames.count == 4 && abs((frames[0]["subject_depth"] as! Double) - 1) < 0.03)
        #expect(rep["depth_format"] as? String == "mm16" && (rep["pipeline_fps"] as! Double) > 0)
    }

    @Test func mismatchedCountsAndBadSizes() throws {
        let s = Scratch()
        let (c, d) = try writeFrames(s, count: 3, depthCount: 2)
        let r = try CLI.run(["backdrop", "--color", c, "--depth", d, "-o", s.file("out"), "--subject", "nearest"])
        #expect(r.status != 0 && r.err.contains("3 frames") && r.err.contains("2"))
        let size = try CLI.run(["backdrop", "--color", "-", "--size", "12x", "--depth", d, "-o", s.file("o2")])
        #expect(size.status != 0 && size.err.contains("WIDTHxHEIGHT"))
        let bg = try CLI.run([
            "backdrop", "--color", c, "--depth", d, "--background", s.file("missing.jpg"), "-o", s.file("o3")
        ])
        #expect(bg.status != 0 && bg.err.contains("missing.jpg") && bg.err.contains("no such file"))
        let fmt = try CLI.run([
            "backdrop", "--color", c, "--depth", d, "--depth-format", "disparity8:3,1", "-o", s.file("o4")
        ])
        #expect(fmt.status != 0 && fmt.err.contains("disparity8:MIN,MAX"))
        // 8-bit depth without its range: refused at the first frame, and no output folder is left.
        let d8 = s.file("depth8")
        try FileManager.default.createDirectory(atPath: d8, withIntermediateDirectories: true)
        for k in 0..<3 {
            try ImageCodecs.write(.uint8(Image(width: 32, height: 24, channels: 1)), to: d8 + "/d\(k).png")
        }
        let r8 = try CLI.run(["backdrop", "--color", c, "--depth", d8, "-o", s.file("o5"), "--subject", "nearest"])
        #expect(r8.status != 0 && r8.err.contains("8-bit depth needs --depth-format disparity8:MIN,MAX"), "\(r8.err)")
        #expect(!FileManager.default.fileExists(atPath: s.file("o5")))
    }

    @Test func stdinCutMidFrameKeepsCompleteFrames() throws {
        let s = Scratch()
        let (_, d) = try writeFrames(s, count: 3)
        // Two and a half 64x48 rgb24 frames on stdin.
        var raw = [UInt8]()
        for _ in 0..<2 { for _ in 0..<(64 * 48) { raw += [250, 120, 10] } }
        raw += [UInt8](repeating: 7, count: 64 * 48 * 3 / 2)
        let r = try runWithInput(
            ["backdrop", "--color", "-", "--size", "64x48", "--depth", d, "-o", s.file("out"), "--subject", "nearest"],
            input: raw)
        #expect(r.status != 0 && r.err.contains("ended in the middle of frame 3"), "\(r.err)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: s.file("out")).count == 2)
    }

    @Test func rawStdoutFrames() throws {
        let s = Scratch()
        let (c, d) = try writeFrames(s, count: 2)
        let r = try runWithInput(
            ["backdrop", "--color", c, "--depth", d, "-o", "-", "--subject", "nearest", "--quiet"], input: [])
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out.count == 2 * 64 * 48 * 3)
        #expect(r.out[(24 * 64 + 20) * 3] == 250 && r.out[(5 * 64 + 60) * 3] == 0)
    }
}

/// One blur setting and one JPEG quality (issue 46): `--blur` and the deprecated
/// `--blur-radius` give the same frames, never together; `--quality` reaches a JPEG output, on
/// the command line and in a batch job alike.
@Suite struct BackdropSettingsTests {
    @Test func theBlurHasOneUnitAndTheOldSpellingStillWorks() throws {
        let s = Scratch()
        let (c, d) = try BackdropCommands().writeFrames(s, count: 2)
        // The depth is 32 wide: a sigma of 3 of its pixels is 3 x 640 / 32 = 60 at 640 wide.
        let base = ["backdrop", "--color", c, "--depth", d, "--subject", "nearest", "--quiet"]
        let new = try CLI.run(base + ["--blur", "60", "-o", s.file("new")])
        let old = try CLI.run(base + ["--blur-radius", "3", "-o", s.file("old")])
        #expect(new.status == 0 && old.status == 0, "\(new.err)\(old.err)")
        #expect(old.err.contains("deprecated") && old.err.contains("--blur,") && !new.err.contains("deprecated"))
        for f in ["frame00001.png", "frame00002.png"] {
            #expect(bytesOf(s.file("new/" + f)) == bytesOf(s.file("old/" + f)), "\(f)")
        }
        let plain = try CLI.run(base + ["-o", s.file("plain")])
        #expect(plain.status == 0 && bytesOf(s.file("plain/frame00001.png")) != bytesOf(s.file("new/frame00001.png")))
        let both = try CLI.run(base + ["--blur", "30", "--blur-radius", "3", "-o", s.file("both")])
        #expect(both.status == 64 && both.err.contains("not both"), "\(both.err)")
    }

    @Test func aJPEGOutputHasTheQualityAskedForHereAndInABatch() throws {
        let s = Scratch()
        let (c, d) = try BackdropCommands().writeFrames(s, count: 1)
        try ImageCodecs.write(.uint8(gradient(64, 48)), to: s.file("sea.png"))
        func run(_ out: String, _ extra: [String]) throws {
            let r = try CLI.run(
                ["backdrop", "--color", c, "--depth", d, "--subject", "nearest", "--background", s.file("sea.png")]
                    + ["-o", s.file(out), "--quiet"] + extra)
            #expect(r.status == 0, "\(r.err)")
        }
        try run("q92.jpg", [])
        try run("q40.jpg", ["--quality", "40"])
        #expect(bytesOf(s.file("q40.jpg")).count < bytesOf(s.file("q92.jpg")).count)
        #expect(
            try CLI.run(["backdrop", "--color", c, "--depth", d, "-o", s.file("x.jpg"), "--quality", "0"]).status == 64)
        try FileManager.default.createDirectory(atPath: s.file("out"), withIntermediateDirectories: true)
        let line: [String: Any] = [
            "id": "q", "kind": "backdrop", "inputs": [c, d], "output": s.file("out/q40.jpg"), "quality": 40,
            "background": s.file("sea.png"), "options": ["subject": "nearest"]
        ]
        let data = try JSONSerialization.data(withJSONObject: line)
        FileManager.default.createFile(atPath: s.file("jobs.jsonl"), contents: data + Data("\n".utf8))
        let r = try CLI.run(["batch", "run", s.file("jobs.jsonl"), "--quiet"])
        #expect(r.status == 0, "\(r.err)")
        #expect(bytesOf(s.file("out/q40.jpg")) == bytesOf(s.file("q40.jpg")), "the job's quality was not used")
    }
}
