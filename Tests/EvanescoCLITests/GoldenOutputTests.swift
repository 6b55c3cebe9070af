import EvanescoCore
import EvanescoIO
import Foundation
import Testing

/// The command line's outputs on inputs the tests make, pinned pixel for pixel: the stack, the
/// portrait effects, the lens blur, the backdrop and depth extraction each against a golden PNG in
/// `Golden/` beside this file. Made before the settings were re-declared (issue 46), so that any
/// change in what a setting does shows up as a changed picture, not as a passing test.
/// EVANESCO_UPDATE_GOLDEN=1 rewrites the goldens (then say why in the commit).
@Suite struct GoldenOutputTests {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Golden")
        .path

    /// Runs `args` (writing `output`), then compares the picture with `Golden/name.png`.
    func check(_ name: String, _ args: [String], output: String) throws {
        let r = try CLI.run(args)
        try #require(r.status == 0, "\(args.joined(separator: " ")): \(r.err)")
        try compare(name, output)
    }

    /// Compares the picture at `output` with `Golden/name.png` (or rewrites the golden).
    func compare(_ name: String, _ output: String) throws {
        let made = try ImageCodecs.read(output).image
        let path = Self.folder + "/\(name).png"
        if ProcessInfo.processInfo.environment["EVANESCO_UPDATE_GOLDEN"] == "1" {
            try FileManager.default.createDirectory(atPath: Self.folder, withIntermediateDirectories: true)
            try ImageCodecs.write(made, to: path, options: WriteOptions(overwrite: true))
            return
        }
        let golden = try ImageCodecs.read(path).image
        #expect(
            golden.width == made.width && golden.height == made.height && golden.channels == made.channels
                && golden.bitDepth == made.bitDepth, "\(name): \(made.width)x\(made.height)")
        let a = golden.uint16.samples, b = made.uint16.samples
        let differing = zip(a, b).filter { $0 != $1 }.count
        #expect(a.count == b.count && differing == 0, "\(name): \(differing) samples differ from the golden picture")
    }

    @Test func stackOutputsMatchTheirGoldens() throws {
        let s = Scratch()
        // Seven frames of a moving square with noise of their own (a fixed pseudo-random
        // sequence), and from frame 3 on a shift of a pixel, so the merges and the alignments differ.
        let burst = s.file("burst")
        try FileManager.default.createDirectory(atPath: burst, withIntermediateDirectories: true)
        var state: UInt32 = 12_345
        for f in 0..<7 {
            let clean = BatchFixtures.frame(97, 80, seed: 5, squareAt: 10 + f * 9)
            let shift = f < 3 ? 0 : 1
            let noisy = Image<UInt8>(width: 96, height: 80, channels: 3) { d in
                for y in 0..<80 {
                    for x in 0..<96 {
                        for c in 0..<3 {
                            state = state &* 1_103_515_245 &+ 12_345
                            let noise = Int((state >> 16) % 13) - 6
                            d[(y * 96 + x) * 3 + c] = UInt8(clamping: Int(clean[x + shift, y, c]) + noise)
                        }
                    }
                }
            }
            try ImageCodecs.write(.uint8(noisy), to: burst + "/f\(f).png")
        }
        for (merge, align) in [
            ("median", "none"), ("mean", "translation"), ("robust", "auto"), ("sigma-clip", "homography")
        ] {
            try check(
                "stack-\(merge)-\(align)",
                ["stack", burst, "--merge", merge, "--align", align, "-o", s.file("\(merge).png"), "--quiet"],
                output: s.file("\(merge).png"))
        }
        // What stands still in four frames of seven (a square at x 20, then at x 60) is erased.
        let stayed = s.file("stayed")
        try FileManager.default.createDirectory(atPath: stayed, withIntermediateDirectories: true)
        for f in 0..<7 {
            try ImageCodecs.write(
                .uint8(BatchFixtures.frame(96, 80, seed: 6, squareAt: f < 4 ? 20 : 60)), to: stayed + "/f\(f).png")
        }
        let mask = Image<UInt8>(width: 96, height: 80, channels: 1) { d in
            for y in 16..<37 { for x in 16..<36 { d[y * 96 + x] = 255 } }
        }
        try ImageCodecs.write(.uint8(mask), to: s.file("mask.png"))
        try check(
            "stack-erase",
            ["stack", stayed, "--align", "none", "--erase", s.file("mask.png"), "-o", s.file("erased.png"), "--quiet"],
            output: s.file("erased.png"))
    }

    @Test func portraitAndLensOutputsMatchTheirGoldens() throws {
        let s = Scratch()
        let (photo, depth) = try BatchFixtures.portrait(in: s.path, "p", seed: 4)
        for effect in ["blur", "spotlight", "mask", "color", "depth"] {
            try check(
                "portrait-\(effect)",
                [
                    "portrait", photo, "--depth-map", depth, "--effect", effect, "--focus", "0.6", "-o",
                    s.file("\(effect).png")
                ],
                output: s.file("\(effect).png"))
        }
        let gdepth = try gdepthPhoto(s)
        try check(
            "lens-blades6",
            ["portrait", gdepth, "--effect", "lens", "--aperture", "9", "--blades", "6", "-o", s.file("lens.png")],
            output: s.file("lens.png"))
        try check(
            "depth-extract", ["depth", "extract", gdepth, "-o", s.file("d.png")], output: s.file("d.png"))
    }

    @Test func backdropOutputsMatchTheirGoldens() throws {
        let s = Scratch()
        let (color, depth) = try BackdropCommands().writeFrames(s, count: 3)
        try ImageCodecs.write(.uint8(gradient(64, 48)), to: s.file("sea.png"))
        for (name, extra) in [("backdrop", [String]()), ("backdrop-blur", ["--blur-radius", "3", "--gamma", "0.8"])] {
            let r = try CLI.run(
                [
                    "backdrop", "--color", color, "--depth", depth, "--background", s.file("sea.png"), "-o",
                    s.file(name), "--subject", "nearest", "--quiet"
                ] + extra)
            try #require(r.status == 0, "\(r.err)")
            for frame in ["frame00001", "frame00003"] {
                try compare("\(name)-\(frame)", s.file("\(name)/\(frame).png"))
            }
        }
    }
}
