import EvanescoCore
import EvanescoIO
import Foundation
import SubprocessTestSupport
import Testing

/// Writes that do not happen are errors, names of any legal length work, names that are not
/// UTF-8 are refused, inputs that would block are refused, and a failed run leaves nothing.
@Suite("Every write checked, nothing left half-done")
struct WriteFailureTests {
    /// Runs with stdout sent to `stdoutPath` and raw (byte) arguments.
    static func run(raw args: [[UInt8]], stdout stdoutPath: String? = nil, seconds: Double = 30) throws -> (
        status: Int32, err: String
    ) {
        // Foundation passes arguments as C strings: bytes that are not UTF-8 need the shell's help.
        let quoted = args.map { a in "'" + a.map { $0 == 0x27 ? "'\\''" : String(format: "\\%03o", $0) }.joined() + "'"
        }
        let script =
            "exec \"$0\" " + quoted.map { "\"$(printf \($0))\"" }.joined(separator: " ")
            + (stdoutPath.map { " > '\($0)'" } ?? "")
        let r = try Subprocess.run("/bin/bash", ["-c", script, CLI.binary], stdout: .discard, seconds: seconds)
        return (r.status, r.stderr)
    }
    static func run(_ args: [String], stdout: String? = nil, seconds: Double = 30) throws -> (
        status: Int32, err: String
    ) {
        try run(raw: args.map { Array($0.utf8) }, stdout: stdout, seconds: seconds)
    }

    @Test("A result that cannot reach stdout is an error, not an empty file and status 0")
    func stdoutFailures() throws {
        let s = Scratch()
        try ImageCodecs.write(.uint8(gradient(40, 30)), to: s.file("a.png"))
        for args in [
            ["info", s.file("a.png"), "--json"], ["info", s.file("a.png")], ["faces", s.file("a.png"), "--json"],
            ["depth", "info", s.file("a.png"), "--json"]
        ] {
            let r = try Self.run(args, stdout: "/dev/full")
            #expect(r.status == 1, "\(args): \(r.status)")
            #expect(r.err.contains("standard output") && r.err.contains("no space left"), "\(args): \(r.err)")
        }
        // The same commands into a file succeed, so the failure above is the write's.
        let ok = try Self.run(["info", s.file("a.png"), "--json"], stdout: s.file("info.json"))
        #expect(ok.status == 0 && ((try? Data(contentsOf: URL(fileURLWithPath: s.file("info.json"))))?.count ?? 0) > 50)
    }

    @Test("Every writer takes a 255-byte name; a longer one is refused with the reason")
    func longNames() throws {
        let s = Scratch()
        try ImageCodecs.write(.uint8(gradient(40, 30)), to: s.file("a.png"))
        for k in 0..<3 { try ImageCodecs.write(.uint8(gradient(40, 30)), to: s.file("f\(k).png")) }
        for ext in ["png", "jpg", "tif", "json"] {
            let stem = String(repeating: "n", count: 255 - ext.count - 1)
            let out = s.file(stem + "." + ext)
            let r =
                ext == "json"
                ? try Self.run([
                    "stack", s.file("f0.png"), s.file("f1.png"), s.file("f2.png"), "-o", s.file("s.png"), "--report",
                    out, "--quiet", "--force", "--align", "none"
                ])
                : try Self.run(["convert", s.file("a.png"), out])
            #expect(r.status == 0, "\(ext): \(r.err)")
            #expect(FileManager.default.fileExists(atPath: out), "\(ext)")
            let tooLong = s.file("n" + stem + "." + ext)
            let t = try Self.run(["convert", s.file("a.png"), tooLong])
            #expect(t.status == 1 && t.err.contains("name is longer than the file system allows"), "\(ext): \(t.err)")
        }
        // Multi-byte names count bytes, not characters: 127 x "é" (254 bytes) + "x" would be
        // 255; with ".png" the name is over and refused, not cut.
        let accented = s.file(String(repeating: "é", count: 126) + ".png")  // 252 + 4 = 256 bytes
        #expect(try Self.run(["convert", s.file("a.png"), accented]).err.contains("name is longer"))
        #expect(!s.contents.contains { $0.hasPrefix(".") }, "no temporary file left: \(s.contents)")
    }

    @Test("Names that are not UTF-8 are refused, never written under another name")
    func nonUTF8Names() throws {
        let s = Scratch()
        try ImageCodecs.write(.uint8(gradient(40, 30)), to: s.file("a.png"))
        let before = s.contents
        let r = try Self.run(raw: [
            Array("convert".utf8), Array(s.file("a.png").utf8),
            Array(s.file("out-").utf8) + [0xFF, 0x2E, 0x70, 0x6E, 0x67]
        ])
        #expect(r.status == 64 && r.err.contains("not valid UTF-8"), "\(r.err)")
        #expect(s.contents == before, "\(s.contents)")
    }

    @Test("FIFOs and devices are refused at once, never waited on")
    func fifosAndDevices() throws {
        let s = Scratch()
        try ImageCodecs.write(.uint8(gradient(40, 30)), to: s.file("a.png"))
        for n in ["in.mp4", "in.png", "in.json"] { #expect(mkfifo(s.file(n), 0o644) == 0) }
        for args in [
            ["stack", s.file("in.mp4"), "-o", s.file("o.jpg")],
            ["backdrop", "--color", s.file("in.mp4"), "--depth", s.file("a.png"), "-o", s.file("o.mp4")],
            ["convert", s.file("in.png"), s.file("o.png")], ["info", s.file("in.mp4")],
            ["stack", s.file("a.png"), s.file("a.png"), "-o", s.file("o.png"), "--homographies", s.file("in.json")],
            ["stack", "/dev/zero", "-o", s.file("z.jpg")], ["info", "/dev/urandom"]
        ] {
            let start = Date()
            let r = try Self.run(args, seconds: 20)
            #expect(r.status == 1 || r.status == 64, "\(args): \(r.status) \(r.err)")
            #expect(Date().timeIntervalSince(start) < 10, "\(args) took \(Date().timeIntervalSince(start)) s")
            #expect(
                r.err.contains("not a regular file") || r.err.contains("no input could be used"), "\(args): \(r.err)")
        }
        #expect(
            !FileManager.default.fileExists(atPath: s.file("o.jpg"))
                && !FileManager.default.fileExists(atPath: s.file("o.mp4")))
    }

    /// A disk with room for the checks but not for the saved frames (a 1 MB tmpfs, 300 KB free):
    /// the main output is placed first, the frames then fail, and the run takes its output back.
    @Test(
        "A run that fails after its main output was written takes it back",
        .enabled(
            if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/bin/mount"),
            "SKIPPED: needs root to mount a small tmpfs"))
    func failedRunsLeaveNothing() throws {
        let s = Scratch()
        // Noise: its PNGs do not compress, so the saved frames cannot fit in 300 KB.
        var g = SystemRandomNumberGenerator()
        let wide = Image<UInt8>(width: 500, height: 400, channels: 3) { d in
            for i in 0..<d.count { d[i] = UInt8.random(in: 0...255, using: &g) }
        }
        for k in 0..<2 { try ImageCodecs.write(.uint8(wide), to: s.file("f\(k).png")) }
        try FileManager.default.createDirectory(atPath: s.file("small"), withIntermediateDirectories: true)
        let mount = try Subprocess.run(
            "/bin/mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", s.file("small")], seconds: 30)
        try #require(mount.status == 0, "tmpfs could not be mounted: \(mount.stderr)")
        defer { _ = try? Subprocess.run("/bin/umount", [s.file("small")], seconds: 30) }
        _ = FileManager.default.createFile(atPath: s.file("small/fill"), contents: Data(count: 700_000))
        let r = try Self.run([
            "stack", s.file("f0.png"), s.file("f1.png"), "-o", s.file("o.png"), "--save-frames", s.file("small"),
            "--quiet", "--align", "none"
        ])
        #expect(r.status == 1 && r.err.contains("no space left"), "\(r.err)")
        #expect(!FileManager.default.fileExists(atPath: s.file("o.png")), "the main output of a failed run was left")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: s.file("small")) == ["fill"],
            "the frames' folder was left")
        #expect(!r.err.contains("Error Domain"), "\(r.err)")
        // With room, the same run succeeds (so the failure above was the disk's).
        try FileManager.default.removeItem(atPath: s.file("small/fill"))
        let ok = try Self.run([
            "stack", s.file("f0.png"), s.file("f1.png"), "-o", s.file("o.png"), "--quiet", "--align", "none"
        ])
        #expect(ok.status == 0 && FileManager.default.fileExists(atPath: s.file("o.png")), "\(ok.err)")
    }

    @Test("A side output of the wrong type is refused before the main output is written")
    func sideOutputTypes() throws {
        let s = Scratch()
        try ImageCodecs.write(.uint8(gradient(64, 48)), to: s.file("a.png"))
        let r = try Self.run([
            "portrait", s.file("a.png"), "--depth-map", s.file("a.png"), "-o", s.file("new.jpg"), "--save-mask",
            s.file("m.txt")
        ])
        #expect(r.status == 1 && r.err.contains("m.txt"), "\(r.err)")
        #expect(!FileManager.default.fileExists(atPath: s.file("new.jpg")))
    }

    @Test("A user's number too large for an integer is an error, not a trap")
    func hugeNumbers() throws {
        let s = Scratch()
        try ImageCodecs.write(.uint8(gradient(64, 48)), to: s.file("a.png"))
        for v in ["1e308,1", "9.3e18,0", "1,1e300"] {
            let r = try Self.run([
                "portrait", s.file("a.png"), "--depth-map", s.file("a.png"), "-o", s.file("p.jpg"), "--focus-point", v
            ])
            #expect(r.status == 1 && r.err.contains("outside the 64x48 photo"), "\(v): \(r.status) \(r.err)")
        }
    }

    /// The form that trapped: an integer conversion inside a message (`"\(Int(x))"`), where the
    /// number is whatever the user typed. Messages format with `Int(saturating:)` or `%g`.
    @Test("Lint: no integer conversion is interpolated into a string")
    func noTrappingConversionInMessages() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
            .appendingPathComponent("Sources")
        let files =
            FileManager.default.enumerator(atPath: sources.path)?.compactMap { $0 as? String }.filter {
                $0.hasSuffix(".swift")
            } ?? []
        #expect(files.count > 50, "found \(files.count) source files under \(sources.path)")
        let pattern = try NSRegularExpression(
            pattern: #"\\\((U?Int(8|16|32|64)?)\((?!saturating:|clamping:|truncatingIfNeeded:)"#)
        var found: [String] = []
        for f in files {
            let text = try String(contentsOfFile: sources.path + "/" + f, encoding: .utf8)
            for (n, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let l = String(line)
                if pattern.firstMatch(in: l, range: NSRange(l.startIndex..., in: l)) != nil {
                    found.append("\(f):\(n + 1): \(l.trimmingCharacters(in: .whitespaces))")
                }
            }
        }
        #expect(found.isEmpty, "\(found.joined(separator: "\n"))")
        // And the lint finds the form it looks for.
        let sample = #"let m = "point \(Int(x)),\(Int(y))""#
        #expect(pattern.firstMatch(in: sample, range: NSRange(sample.startIndex..., in: sample)) != nil)
    }
}

/// A HEIC whose HEVC parameters are damaged: libde265 prints "SPS error: ..." on stderr itself.
/// The user sees one line of ours with the decoder's words in it, nothing before it.
@Suite(
    .enabled(
        if: FileManager.default.fileExists(atPath: sharedDepth + "/pug-iphone13pro/pug.heic"),
        "SKIPPED: ../shared/data/depth/pug-iphone13pro/pug.heic is absent"))
struct DecoderStderrTests {
    @Test func theDecodersOwnLinesAreFoldedIntoOneError() throws {
        let s = Scratch()
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: sharedDepth + "/pug-iphone13pro/pug.heic")))
        let hvcC = try #require(Data(bytes).range(of: Data("hvcC".utf8))?.lowerBound)
        bytes[hvcC + 80] ^= 0x5A  // inside the SPS: "CB alignment"
        try Data(bytes).write(to: URL(fileURLWithPath: s.file("sps.heic")))
        let r = try CLI.run(["convert", s.file("sps.heic"), s.file("o.png")])
        #expect(r.status == 1)
        let lines = r.err.split(separator: "\n")
        #expect(
            lines.count == 1 && lines[0].hasPrefix("evanesco: error: ") && lines[0].contains("SPS error"), "\(r.err)")
        #expect(!FileManager.default.fileExists(atPath: s.file("o.png")))
    }
}
