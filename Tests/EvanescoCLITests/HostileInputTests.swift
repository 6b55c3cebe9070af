import Foundation
import SubprocessTestSupport
import Testing
import EvanescoCore
import EvanescoIO

/// One test per class of the reliability review: each runs the binary on inputs the test makes
/// itself and asserts a clean outcome: exit 0, or 1/64 with one error line; no crash (132, 134,
/// 139), no hang, nothing overwritten, nothing left behind.
@Suite("Hostile inputs, by class")
struct HostileInputTests {
    /// Runs with a time limit; a hang is recorded as status -1.
    static func run(_ args: [String], seconds: Double = 60) throws -> (status: Int32, err: String) {
        let r = try Subprocess.run(CLI.binary, args, stdout: .discard, seconds: seconds)
        return (r.status, r.stderr)
    }

    static func expectClean(
        _ r: (status: Int32, err: String), _ what: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(
            [0, 1, 64].contains(r.status), "\(what): exit \(r.status) \(r.err.suffix(300))",
            sourceLocation: sourceLocation)
        if r.status != 0 {
            #expect(r.err.lowercased().contains("error"), "\(what): no error line", sourceLocation: sourceLocation)
        }
    }

    @Test("NaN, infinity and out-of-range values of numeric flags are refused before any work")
    func numericFlags() throws {
        let s = Scratch()
        try ImageCodecs.write(.uint8(gradient(64, 48)), to: s.file("a.png"))
        for (args, flag) in [
            (["faces", s.file("a.png"), "--scale-factor", "nan"], "--scale-factor"),
            (["faces", s.file("a.png"), "--scale-factor", "1.0001"], "--scale-factor"),
            (
                [
                    "backdrop", "--color", s.file("a.png"), "--depth", s.file("a.png"), "--depth-format",
                    "disparity8:0,2",
                    "-o", s.file("b.jpg"), "--cutoff-offset", "nan"
                ], "--cutoff-offset"
            ),
            (
                [
                    "backdrop", "--color", s.file("a.png"), "--depth", s.file("a.png"), "--depth-format",
                    "disparity8:0,2",
                    "-o", s.file("b.jpg"), "--fps", "inf"
                ], "--fps"
            )
        ] {
            let r = try Self.run(args, seconds: 20)
            #expect(r.status == 64 && r.err.contains(flag), "\(args): \(r.status) \(r.err)")
        }
        #expect(!FileManager.default.fileExists(atPath: s.file("b.jpg")))
    }

    @Test("Tiny frames: 1x1 and 2x1 bursts are refused for alignment and merge without it; no hang")
    func tinyFrames() throws {
        let s = Scratch()
        for k in 0..<3 {
            try ImageCodecs.write(
                .uint8(
                    Image(
                        width: 2, height: 1, channels: 3,
                        samples: ContiguousArray(repeating: UInt8(k * 40), count: 6))),
                to: s.file("f\(k).png"))
        }
        let frames = (0..<3).map { s.file("f\($0).png") }
        let aligned = try Self.run(["stack"] + frames + ["-o", s.file("o.png"), "--quiet"], seconds: 30)
        #expect(
            aligned.status == 1 && aligned.err.contains("too small to align") && aligned.err.contains("--align none"))
        let plain = try Self.run(
            ["stack"] + frames + ["-o", s.file("o.png"), "--align", "none", "--quiet"], seconds: 30)
        #expect(plain.status == 0 && FileManager.default.fileExists(atPath: s.file("o.png")))
    }

    @Test(
        """
        Hostile cascades (out-of-range indices, NaN, a node pointing to itself) are typed errors, never a crash or \
        hang
        """
    )
    func cascades() throws {
        let s = Scratch()
        try ImageCodecs.write(.uint8(gradient(64, 48)), to: s.file("a.png"))
        func cascade(_ nodes: String, rect: String = "0 0 2 4 -1.") -> String {
            """
            <?xml version="1.0"?><opencv_storage><cascade><stageType>BOOST</stageType><featureType>HAAR</featureType>
            <height>4</height><width>4</width>\
            <stages><_><maxWeakCount>1</maxWeakCount><stageThreshold>-0.5</stageThreshold>
            <weakClassifiers><_><internalNodes>\(nodes)</internalNodes><leafValues>-1 \
            1</leafValues></_></weakClassifiers></_></stages>
            <features><_><rects><_>\(rect)</_><_>2 0 2 4 \
            1.</_></rects><tilted>0</tilted></_></features></cascade></opencv_storage>
            """
        }
        for (k, xml) in [
            cascade("0 -1 7 0.01"), cascade("0 -9 0 0.01"), cascade("1 -1 0 0.01"), cascade("0 -1 0 nan"),
            cascade("0 -1 1e20 0.01"), cascade("0 -1 0 0.01", rect: "0 0 99999 4 -1.")
        ].enumerated() {
            try xml.write(toFile: s.file("c\(k).xml"), atomically: true, encoding: .utf8)
            let r = try Self.run(["faces", s.file("a.png"), "--cascade", s.file("c\(k).xml")], seconds: 20)
            #expect(
                r.status == 1 && r.err.contains("not a usable OpenCV cascade"), "cascade \(k): \(r.status) \(r.err)")
        }
        let missing = try Self.run(["faces", s.file("a.png"), "--cascade", s.file("nope.xml")])
        #expect(missing.status == 1 && missing.err.contains("no such cascade file") && !missing.err.contains("apt-get"))
    }

    @Test("Data loss: a report, mask or output naming an input is refused even with --force; the input is untouched")
    func outputsNeverReplaceInputs() throws {
        let s = Scratch()
        try ImageCodecs.write(.uint8(gradient(64, 48)), to: s.file("a.png"))
        let before = try Data(contentsOf: URL(fileURLWithPath: s.file("a.png")))
        for args in [
            ["convert", s.file("a.png"), s.file("a.png"), "--force"],
            [
                "stack", s.file("a.png"), s.file("a.png"), s.file("a.png"), "-o", s.file("o.png"), "--report",
                s.file("a.png"), "--force", "--align", "none"
            ]
        ] {
            let r = try Self.run(args)
            #expect(r.status == 1 && r.err.contains("is also an input"), "\(args): \(r.err)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: s.file("a.png"))) == before)
        #expect(!FileManager.default.fileExists(atPath: s.file("o.png")))
    }

    @Test("Partial output: a side output that cannot be written is refused before the main output exists")
    func sideOutputsFirst() throws {
        let s = Scratch()
        for k in 0..<3 { try ImageCodecs.write(.uint8(gradient(40, 30)), to: s.file("f\(k).png")) }
        try "x".write(toFile: s.file("taken.txt"), atomically: true, encoding: .utf8)
        let frames = (0..<3).map { s.file("f\($0).png") }
        for side in [
            ["--report", s.file("taken.txt")], ["--save-frames", s.file("taken.txt")],
            ["--report", s.file("missing-dir/r.json")]
        ] {
            let r = try Self.run(["stack"] + frames + ["-o", s.file("o.png"), "--quiet"] + side)
            #expect(r.status == 1, "\(side): \(r.err)")
            #expect(!FileManager.default.fileExists(atPath: s.file("o.png")), "\(side): the main output was written")
        }
        #expect(s.contents == ["f0.png", "f1.png", "f2.png", "taken.txt"])
    }

    @Test("Sizes that lie: a 3 KB JPEG claiming 20000x20000 is 'truncated' before any large allocation")
    func lyingSizes() throws {
        let s = Scratch()
        try ImageCodecs.write(.uint8(gradient(64, 48)), to: s.file("a.jpg"))
        var b = try [UInt8](Data(contentsOf: URL(fileURLWithPath: s.file("a.jpg"))))
        var i = 2
        while i + 9 < b.count {
            let marker = b[i + 1], length = Int(b[i + 2]) << 8 | Int(b[i + 3])
            if marker == 0xC0 || marker == 0xC2 {
                b[i + 5] = 0x4E
                b[i + 6] = 0x20
                b[i + 7] = 0x4E
                b[i + 8] = 0x20
                break
            }
            i += 2 + length
        }
        try Data(b.prefix(3000)).write(to: URL(fileURLWithPath: s.file("liar.jpg")))
        let r = try Self.run(["convert", s.file("liar.jpg"), s.file("o.png")])
        #expect(r.status == 1 && r.err.contains("truncated") && r.err.contains("20000x20000"), "\(r.err)")
        // Cut before the frame header: truncated, not "a size of 0x0".
        try Data(b.prefix(20)).write(to: URL(fileURLWithPath: s.file("cut.jpg")))
        let c = try Self.run(["convert", s.file("cut.jpg"), s.file("o.png")])
        #expect(c.status == 1 && c.err.contains("truncated") && !c.err.contains("0x0"), "\(c.err)")
    }

    /// The handler removes the temporary file while the writer may still be writing it; the
    /// writer then fails ("cannot be written"), and its error path once raced the handler: the
    /// process exited 1 with a false error in 3 runs of 12 under load. Signals land across the
    /// whole conversion (from before decoding to after the rename), twice each.
    @Test("A signal while writing leaves no temporary file and exits 128 + signal")
    func signalsCleanUp() throws {
        let s = Scratch()
        // Noise does not compress: a TIFF write of tenths of a second, long enough to land in.
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        let noise = Image<UInt8>(width: 3000, height: 2000, channels: 3) { d in
            for i in 0..<d.count {
                state ^= state << 13
                state ^= state >> 7
                state ^= state << 17
                d[i] = UInt8(truncatingIfNeeded: state)
            }
        }
        try ImageCodecs.write(.uint8(noise), to: s.file("big.png"), options: WriteOptions(compression: .fast))
        let start = Date()
        #expect(try CLI.run(["convert", s.file("big.png"), s.file("o.tif"), "--force"]).status == 0)
        let whole = Date().timeIntervalSince(start)
        try FileManager.default.removeItem(atPath: s.file("o.tif"))
        for step in 0..<10 {
            for sig in [SIGINT, SIGTERM] {
                let p = try Subprocess(
                    CLI.binary, ["convert", s.file("big.png"), s.file("o.tif"), "--force"], stdout: .discard)
                usleep(useconds_t(whole * Double(step + 1) / 10 * 1e6))
                p.send(sig)
                let r = p.finish(within: 60)
                #expect(
                    r.status == 0 || r.status == 128 + sig,
                    "signal \(sig) at \(step + 1)/10: status \(r.status): \(r.stderr)")
                if r.status == 128 + sig { #expect(!r.stderr.contains("error"), "a false error: \(r.stderr)") }
                #expect(s.contents.allSatisfy { !$0.hasPrefix(".") }, "left \(s.contents)")
                try? FileManager.default.removeItem(atPath: s.file("o.tif"))
            }
        }
    }
}
