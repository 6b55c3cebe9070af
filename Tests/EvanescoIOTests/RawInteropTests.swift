import Foundation
import SubprocessTestSupport
import Testing
import EvanescoCore
@testable import EvanescoIO

/// Others read the DNGs we write: dcraw, exiftool's validation, rawpy (LibRaw's Python binding,
/// its own newer LibRaw) and RawTherapee, a raw editor people use. scripts/install-deps.sh
/// installs them; where one is missing the test says which, and fails when
/// EVANESCO_REQUIRE_RAW_TOOLS=1 (CI sets it), so that CI cannot pass without them.
struct RawInteropTests {
    static let required = ProcessInfo.processInfo.environment["EVANESCO_REQUIRE_RAW_TOOLS"] == "1"

    static func tool(_ name: String) -> String? {
        for dir in ["/usr/bin", "/usr/local/bin"] where FileManager.default.isExecutableFile(atPath: "\(dir)/\(name)") {
            return "\(dir)/\(name)"
        }
        return nil
    }

    /// The tool's path, or nil after recording why it did not run (an issue when required).
    static func need(_ name: String, _ path: String?) -> String? {
        if let path { return path }
        if required {
            Issue.record("\(name) is not installed (scripts/install-deps.sh installs it)")
        } else {
            print("RawInteropTests: \(name) is not installed; that check did not run (scripts/install-deps.sh)")
        }
        return nil
    }

    /// A written DNG of each CFA, with its samples.
    static func written(_ dir: TempDir) throws -> [(String, RawMosaic)] {
        try [CFAPattern.rggb, .bggr, .grbg, .gbrg].enumerated().map { i, cfa in
            let raw = sampleRaw(width: 96, height: 64, cfa: cfa)
            let path = dir.file("interop\(i).dng")
            try DNGWriter.write(raw, to: path)
            return (path, raw)
        }
    }

    @Test("dcraw -D -4 reads the samples we wrote")
    func dcraw() throws {
        guard let dcraw = Self.need("dcraw", Self.tool("dcraw")) else { return }
        let dir = TempDir()
        for (path, raw) in try Self.written(dir) {
            let r = try Subprocess.run(dcraw, ["-D", "-4", "-c", path], seconds: 60)
            #expect(r.status == 0, "\(r.stderr)")
            // A binary PGM: "P5\n96 64\n65535\n" then big-endian samples.
            let header = "P5\n96 64\n65535\n"
            #expect(r.out.starts(with: Array(header.utf8)))
            let body = r.out.dropFirst(header.utf8.count)
            let samples = stride(from: body.startIndex, to: body.endIndex - 1, by: 2).map {
                UInt16(body[$0]) << 8 | UInt16(body[$0 + 1])
            }
            #expect(Array(samples) == Array(raw.samples.samples), "\(path)")
        }
    }

    @Test("exiftool -validate finds no error and no warning")
    func exiftool() throws {
        guard let exiftool = Self.need("exiftool", Self.tool("exiftool")) else { return }
        let dir = TempDir()
        for (path, _) in try Self.written(dir) {
            let r = try Subprocess.run(exiftool, ["-validate", "-warning", "-error", "-a", path], seconds: 60)
            #expect(r.status == 0)
            #expect(r.stdout.contains("Validate                        : OK"), "\(r.stdout)")
            #expect(!r.stdout.contains("Warning") && !r.stdout.contains("Error"), "\(r.stdout)")
        }
    }

    @Test("rawpy (LibRaw 0.22 in its wheel) reads the samples, CFA, levels and white balance")
    func rawpy() throws {
        let venv = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(".build/raw-venv/bin/python").path
        guard
            let python = Self.need(
                "rawpy (.build/raw-venv, scripts/raw-venv.sh)",
                FileManager.default.isExecutableFile(atPath: venv) ? venv : nil)
        else { return }
        let dir = TempDir()
        for (path, raw) in try Self.written(dir) {
            let script = """
                import sys, json, rawpy, numpy as np
                r = rawpy.imread(sys.argv[1])
                v = r.raw_image_visible
                print(json.dumps({"sum": int(v.astype(np.uint64).sum()), "width": v.shape[1], "height": v.shape[0],
                    "cfa": "".join("RGBG"[c] for c in r.raw_pattern.flatten()),
                    "black": sorted(int(b) for b in r.black_level_per_channel), "white": int(r.white_level),
                    "wb": [float(x) for x in r.camera_whitebalance[:3]]}))
                """
            let r = try Subprocess.run(python, ["-c", script, path], seconds: 120)
            #expect(r.status == 0, "\(r.stderr)")
            let j = try JSONSerialization.jsonObject(with: Data(r.out)) as? [String: Any] ?? [:]
            #expect(j["sum"] as? Int == raw.samples.samples.reduce(0) { $0 + Int($1) })
            #expect(j["width"] as? Int == 96 && j["height"] as? Int == 64)
            #expect(j["cfa"] as? String == raw.cfa!.description)
            #expect(j["black"] as? [Int] == [256, 257, 258, 259])
            #expect(j["white"] as? Int == 4095)
            let wb = j["wb"] as? [Double] ?? []
            let expected = raw.color.asShotNeutral.map { 1 / Double($0) }
            #expect(wb.count == 3 && zip(wb, expected).allSatisfy { abs($0 - $1) < 1e-4 }, "\(wb) vs \(expected)")
        }
    }

    @Test("RawTherapee renders our DNG headless into a picture of its size")
    func rawTherapee() throws {
        guard let cli = Self.need("rawtherapee-cli", Self.tool("rawtherapee-cli")) else { return }
        let dir = TempDir()
        // RawTherapee 5.9 refuses frames much smaller than this ("Error loading file", make_raw_burst.py's too).
        let path = dir.file("rt.dng")
        try DNGWriter.write(sampleRaw(width: 400, height: 300, cfa: .gbrg), to: path)
        let out = dir.file("rt.png")
        let r = try Subprocess.run(
            cli, ["-Y", "-o", out, "-n", "-c", path], environment: ["HOME": dir.path, "PATH": "/usr/bin:/bin"],
            seconds: 120)
        #expect(r.status == 0, "\(r.stdout) \(r.stderr)")
        let d = try ImageCodecs.read(out)
        // RawTherapee crops a few border pixels of its own (its demosaic's margin).
        #expect(d.image.width >= 392 && d.image.width <= 400 && d.image.height >= 292 && d.image.height <= 300)
    }
}
