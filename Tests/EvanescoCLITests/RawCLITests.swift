import Foundation
import Testing
import EvanescoCore
@testable import EvanescoIO
import SubprocessTestSupport

/// A 96x64 raw frame of a smooth scene under an RGGB filter, stored on its side (orientation 6).
func cliRaw() -> RawMosaic {
    let w = 96, h = 64
    let samples = Image<UInt16>(width: w, height: h, channels: 1) { d in
        for y in 0..<h {
            for x in 0..<w {
                let c = CFAPattern.rggb.color(x: x, y: y)
                d[y * w + x] = UInt16(256 + (c == 1 ? 1500 : 700) + x * 10 + y * 5)
            }
        }
    }
    var raw = RawMosaic(
        samples: samples, layout: .bayer(.rggb), blackLevels: [256], whiteLevel: 4095,
        color: RawColor(
            colorMatrix: [0.7, -0.2, -0.1, -0.45, 1.25, 0.15, -0.08, 0.16, 0.53], asShotNeutral: [0.45, 1, 0.66]),
        orientation: .right)
    raw.capture.make = "Evanesco"
    raw.capture.model = "CLI"
    return raw
}

@Suite struct RawCLITests {
    @Test("convert finishes a raw upright into 16-bit TIFF with the chosen space's profile, JPEG and PNG too")
    func convertFinishes() throws {
        let dir = Scratch()
        let dng = dir.file("photo.dng")
        try DNGWriter.write(cliRaw(), to: dng)
        var r = try CLI.run(["convert", dng, dir.file("p3.tif"), "--bit-depth", "16", "--color-space", "display-p3"])
        #expect(r.status == 0, "\(r.err)")
        let tif = try ImageCodecs.read(dir.file("p3.tif"))
        #expect(tif.image.bitDepth == 16 && tif.image.width == 64 && tif.image.height == 96)
        #expect(tif.metadata.icc == ICCProfile.profile(for: .displayP3))
        r = try CLI.run(["convert", dng, dir.file("out.jpg")])
        #expect(r.status == 0, "\(r.err)")
        let jpg = try ImageCodecs.read(dir.file("out.jpg"))
        #expect(jpg.image.width == 64 && jpg.metadata.icc == ICCProfile.profile(for: .sRGB))
        r = try CLI.run(["convert", dng, dir.file("lin.tif"), "--bit-depth", "32", "--color-space", "linear-srgb"])
        #expect(r.status == 0, "\(r.err)")
        #expect(try ImageCodecs.read(dir.file("lin.tif")).image.bitDepth == 32)
        // The same finish through the library, as stored and turned upright.
        let lib = try RawFinish.render(cliRaw(), options: RawFinishOptions(colorSpace: .displayP3), as: UInt16.self)
        #expect(tif.image.uint16.samples == lib.oriented(.right).samples)
    }

    @Test("convert to .dng rewrites the mosaic; never onto its input, not with --force")
    func convertToDNG() throws {
        let dir = Scratch()
        let dng = dir.file("photo.dng")
        try DNGWriter.write(cliRaw(), to: dng)
        let before = try InputFile.read(dng)
        var r = try CLI.run(["convert", dng, dir.file("copy.dng")])
        #expect(r.status == 0, "\(r.err)")
        #expect(try RawCodec.read(dir.file("copy.dng")).raw.samples == cliRaw().samples)
        r = try CLI.run(["convert", dng, dng, "--force"])
        #expect(r.status == 1 && r.err.contains("input"), "\(r.err)")
        #expect(try InputFile.read(dng) == before)
        r = try CLI.run(["convert", dir.file("copy.jpg.missing"), dir.file("x.dng")])
        #expect(r.status == 1)
        // A finished picture cannot become a DNG.
        try ImageCodecs.write(.uint8(Image(width: 8, height: 8, channels: 3)), to: dir.file("p.png"))
        r = try CLI.run(["convert", dir.file("p.png"), dir.file("p.dng")])
        #expect(r.status == 1 && r.err.contains("raw mosaic"), "\(r.err)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("p.dng")))
    }

    @Test("info shows the sensor's data, in text and JSON; a bad exposure is a usage error naming its flag")
    func infoAndFlags() throws {
        let dir = Scratch()
        let dng = dir.file("photo.dng")
        try DNGWriter.write(cliRaw(), to: dng)
        var r = try CLI.run(["info", dng])
        #expect(r.status == 0)
        #expect(r.out.contains("sensor: Bayer, CFA RGGB") && r.out.contains("white level: 4095"), "\(r.out)")
        r = try CLI.run(["info", dng, "--json"])
        let j = try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any]
        let raw = j?["raw"] as? [String: Any]
        #expect(raw?["cfa"] as? String == "RGGB" && (raw?["black_levels"] as? [Double])?.count == 4)
        #expect(j?["width"] as? Int == 64 && j?["height"] as? Int == 96)
        // A negative EV given as its own word is a value, not a flag.
        r = try CLI.run(["convert", dng, dir.file("dark.jpg"), "--exposure", "-1.5"])
        #expect(r.status == 0, "\(r.err)")
        r = try CLI.run(["convert", dng, dir.file("o.jpg"), "--exposure", "9"])
        #expect(r.status == 64 && r.err.contains("--exposure"), "\(r.err)")
    }

    @Test("a stack of raws and a JPEG is refused, naming both, before anything is written")
    func mixedBurst() throws {
        let dir = Scratch()
        try DNGWriter.write(cliRaw(), to: dir.file("a.dng"))
        try ImageCodecs.write(.uint8(Image(width: 64, height: 96, channels: 3)), to: dir.file("b.jpg"))
        let r = try CLI.run(["stack", dir.file("a.dng"), dir.file("b.jpg"), "-o", dir.file("o.jpg")])
        #expect(r.status == 1 && r.err.contains("camera raw") && r.err.contains("b.jpg"), "\(r.err)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("o.jpg")))
    }

    @Test("stack merges raws on their planes into a DNG or a finished picture; a batch job too")
    func stackRawBurst() throws {
        let dir = Scratch()
        var files: [String] = []
        for k in 0..<3 {
            var raw = cliRaw()
            raw.samples = Image(width: raw.width, height: raw.height, channels: 1) { d in
                for i in 0..<d.count { d[i] = cliRaw().samples.samples[i] &+ UInt16(k) }
            }
            files.append(dir.file("f\(k).dng"))
            try DNGWriter.write(raw, to: files.last!)
        }
        var r = try CLI.run(["stack"] + files + ["-o", dir.file("m.dng"), "--align", "none", "--merge", "mean"])
        #expect(r.status == 0, "\(r.err)")
        let merged = try RawCodec.read(dir.file("m.dng")).raw
        #expect(merged.cfa == .rggb && merged.width == 96 && merged.height == 64 && merged.orientation == .right)
        // The mean of the three frames (+0, +1, +2 DN), at 16 bits.
        let want = Double(cliRaw().samples.samples[10 * 96 + 20]) + 1
        #expect(abs(Double(merged.samples.samples[10 * 96 + 20]) - want * 65535 / 4095) <= 1)
        r = try CLI.run(["stack"] + files + ["-o", dir.file("m.jpg"), "--align", "none", "--color-space", "display-p3"])
        #expect(r.status == 0, "\(r.err)")
        let jpg = try ImageCodecs.read(dir.file("m.jpg"))
        #expect(jpg.image.width == 64 && jpg.image.height == 96, "finished upright")
        #expect(jpg.metadata.icc == ICCProfile.profile(for: .displayP3))
        // A .dng output for pictures is refused before any work.
        try ImageCodecs.write(.uint8(Image(width: 8, height: 8, channels: 3)), to: dir.file("p.png"))
        r = try CLI.run(["stack", dir.file("p.png"), dir.file("p.png"), "-o", dir.file("p.dng")])
        #expect(r.status != 0 && r.err.contains("not camera raws"))
        // A batch stack job with a .dng output.
        let line: [String: Any] = [
            "id": "raw", "kind": "stack", "inputs": files, "output": dir.file("b.dng"),
            "options": ["align": "none", "merge": "mean"]
        ]
        let data = try JSONSerialization.data(withJSONObject: line)
        FileManager.default.createFile(atPath: dir.file("jobs.jsonl"), contents: data + Data("\n".utf8))
        r = try CLI.run(["batch", "run", dir.file("jobs.jsonl"), "--quiet"])
        #expect(r.status == 0, "\(r.err)")
        #expect(try RawCodec.read(dir.file("b.dng")).raw.samples == merged.samples)
    }

    /// A textured 256 x 192 GRBG frame, the scene moved by (dx, dy) photosites, with a bright
    /// square at `square` (what the vote must leave out).
    static func textured(dx: Float, dy: Float, square: Int) -> RawMosaic {
        let w = 256, h = 192
        var raw = cliRaw()
        raw.samples = Image<UInt16>(width: w, height: h, channels: 1) { d in
            for y in 0..<h {
                for x in 0..<w {
                    let u = Float(x) - dx, v = Float(y) - dy
                    var s = 1200 + 500 * sinf(u * 0.21) * cosf(v * 0.17) + 400 * sinf((u + 2 * v) * 0.043)
                    s += Float(CFAPattern.grbg.color(x: x, y: y)) * 150 + Float((x * 7 + y * 13) % 23)
                    if (square..<(square + 20)).contains(x), (80..<100).contains(y) { s = 3900 }
                    d[y * w + x] = UInt16(clampingRounded: s)
                }
            }
        }
        raw.layout = .bayer(.grbg)
        raw.orientation = .up
        return raw
    }

    /// `count` ``textured(dx:dy:square:)`` frames written as DNGs in `dir`, frame k moved by k `step`
    /// and its square 35 k further right.
    static func texturedBurst(_ count: Int, step: (Float, Float), in dir: Scratch) throws -> [String] {
        try (0..<count).map { k in
            let file = dir.file("f\(k).dng")
            try DNGWriter.write(
                textured(dx: step.0 * Float(k), dy: step.1 * Float(k), square: 30 + 35 * k), to: file)
            return file
        }
    }

    @Test("the raw merge's portable kernels give the AVX2 ones' bytes: robust, hdrplus, median")
    func portableKernelsMatch() throws {
        let dir = Scratch()
        let files = try Self.texturedBurst(6, step: (1.3, -0.7), in: dir)
        let portable = ProcessInfo.processInfo.environment.merging(["EVANESCO_PORTABLE_KERNELS": "1"]) { $1 }
        for merge in ["robust", "hdrplus", "median"] {
            var merged: [ContiguousArray<UInt16>] = []
            for (name, env) in [("native", ProcessInfo.processInfo.environment), ("portable", portable)] {
                let out = dir.file("\(merge)-\(name).dng")
                let r = try Subprocess.run(
                    CLI.binary, ["stack"] + files + ["-o", out, "--merge", merge, "--quiet"], environment: env,
                    seconds: 300)
                #expect(r.status == 0, "\(merge) \(name): \(r.stderr)")
                merged.append(try RawCodec.read(out).raw.samples.samples)
            }
            #expect(merged[0].count == 256 * 192 && merged[0] == merged[1], "\(merge): the variants differ")
        }
    }

    @Test("a raw merge whose denoise or blend cannot have its memory stops with what to pass, and writes nothing")
    func scratchMemoryRunsOut() throws {
        let dir = Scratch()
        let files = try Self.texturedBurst(4, step: (0.6, -0.4), in: dir)
        let out = dir.file("merged.dng")
        // An output already there (--force) stays as it was when the stack fails.
        try Data("before".utf8).write(to: URL(fileURLWithPath: out))
        for (step, flag, without) in [
            ("denoise", "--raw-denoise 0", ["--raw-denoise", "0"]),
            // The second pass (red and blue as differences from green) on its own scratch.
            ("denoise-differences", "--raw-denoise 0", ["--raw-denoise", "0"]),
            ("blend", "--merge mean", ["--merge", "mean"])
        ] {
            let env = ProcessInfo.processInfo.environment.merging(["EVANESCO_TEST_FAIL_SCRATCH": step]) { $1 }
            var r = try Subprocess.run(
                CLI.binary, ["stack"] + files + ["-o", out, "--force", "--quiet"], environment: env, seconds: 300)
            #expect(r.status != 0, "\(step): the stack should have stopped")
            #expect(r.stderr.contains("not enough memory") && r.stderr.contains(flag), "\(step): \(r.stderr)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: out)) == Data("before".utf8), "\(step)")
            // Without the step it needs none, and merges.
            let other = dir.file("without-\(step).dng")
            r = try Subprocess.run(
                CLI.binary, ["stack"] + files + ["-o", other, "--quiet"] + without, environment: env, seconds: 300)
            #expect(r.status == 0, "\(step) left out: \(r.stderr)")
            #expect(try RawCodec.read(other).raw.samples.width == 256)
        }
    }
}
