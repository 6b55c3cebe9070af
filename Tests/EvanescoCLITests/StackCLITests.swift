import Foundation
import Testing
import EvanescoCore
import EvanescoIO
import TestScenes

@Suite struct StackCommand {
    /// A small burst on disk: a textured scene shifted by whole pixels, with a moving block.
    func writeBurst(_ s: Scratch, count: Int = 5) throws -> String {
        let dir = s.file("burst")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let scene = TestScenes.periodic()
        for k in 0..<count {
            let f = TestScenes.periodicFrame(k, scene: scene)
            try ImageCodecs.write(.uint8(f), to: dir + "/frame\(k).png")
        }
        return dir
    }

    @Test func stacksAFolderAndWritesTheReport() throws {
        let s = Scratch()
        let dir = try writeBurst(s)
        FileManager.default.createFile(atPath: dir + "/notes.txt", contents: Data("not a frame".utf8))
        let r = try CLI.run(["stack", dir, "-o", s.file("clean.png"), "--report", s.file("r.json")])
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out.contains("5 of 5 frames merged") && r.out.contains("1 input skipped"), "\(r.out)")
        #expect(r.err.contains("skipped") && r.err.contains("notes.txt"))
        #expect(r.err.contains("align:") && r.err.contains("merge:"), "progress on stderr")
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: s.file("r.json"))))
                as? [String: Any])
        let frames = try #require(report["frames"] as? [[String: Any]])
        #expect(frames.count == 5 && report["merge"] as? String == "robust")
        let h = try #require(frames[2]["homography"] as? [[Double]])
        #expect(abs(h[0][2] - -2) < 0.1 && abs(h[1][2] - 1) < 0.1, "frame 2 maps to the reference by (-2, +1): \(h)")
        #expect((report["times_s"] as? [String: Double])?["merge"] != nil)
        let out = try ImageCodecs.read(s.file("clean.png")).image.uint8
        #expect(out.width == 200 && out[100, 75, 0] < 250, "the moving white block is gone")
    }

    @Test func copiesTheReferenceFramesEXIF() throws {
        let s = Scratch()
        let dir = try writeBurst(s, count: 3)
        // Give the reference (first) frame EXIF: a minimal block with orientation 1.
        let exif: [UInt8] = [
            0x49, 0x49, 0x2A, 0x00, 0x08, 0x00, 0x00, 0x00, 0x01, 0x00,
            0x12, 0x01, 0x03, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00
        ]
        let first = try ImageCodecs.read(dir + "/frame0.png")
        try ImageCodecs.write(
            first.image, to: dir + "/frame0.png",
            options: WriteOptions(metadata: ImageMetadata(exif: exif), overwrite: true))
        let r = try CLI.run(["stack", dir, "-o", s.file("c.jpg"), "--quiet"])
        #expect(r.status == 0, "\(r.err)")
        #expect(try ImageCodecs.read(s.file("c.jpg")).metadata.exif == exif)
    }

    @Test func savesDecodedAndAlignedFrames() throws {
        let s = Scratch()
        let dir = try writeBurst(s, count: 3)
        let r = try CLI.run(["stack", dir, "-o", s.file("c.jpg"), "--save-frames", s.file("saved"), "--quiet"])
        #expect(r.status == 0, "\(r.err)")
        let runs = try FileManager.default.contentsOfDirectory(atPath: s.file("saved"))
        #expect(runs.count == 1 && UUID(uuidString: runs[0]) != nil, "one new DIR/<UUID>/: \(runs)")
        let files = try FileManager.default.contentsOfDirectory(atPath: s.file("saved") + "/" + runs[0]).sorted()
        #expect(
            files == [
                "aligned_000.png", "aligned_001.png", "aligned_002.png", "decoded_000.png", "decoded_001.png",
                "decoded_002.png"
            ])
        #expect(r.out.contains("frames saved in"))
    }

    @Test(
        """
        --save-maps writes the maps and their legend: the moving block's path keeps fewer frames; existing maps are \
        refused first
        """
    )
    func savesMaps() throws {
        let s = Scratch()
        let dir = try writeBurst(s)
        let r = try CLI.run(["stack", dir, "-o", s.file("clean.png"), "--save-maps", s.file("maps")])
        #expect(r.status == 0 && r.out.contains("maps saved in"), "\(r.err)")
        let files = Set((try? FileManager.default.contentsOfDirectory(atPath: s.file("maps"))) ?? [])
        #expect(
            files == [
                "kept.png", "kept-16.png", "provenance.png", "provenance-16.png", "provenance-legend.png",
                "local-shift.png", "local-shift-16.png", "maps.json"
            ])
        let kept = try ImageCodecs.read(s.file("maps/kept-16.png")).image.uint16
        // The block crosses x 20...165 on rows 60...89 in one frame each: 4 of 5 frames are kept
        // there; away from it (and the frames' edges) all 5.
        #expect(kept[100, 75, 0] == 4 && kept[100, 120, 0] == 5, "\(kept[100, 75, 0]), \(kept[100, 120, 0])")
        let prov = try ImageCodecs.read(s.file("maps/provenance-16.png")).image.uint16
        #expect((1...5).contains(Int(prov[100, 75, 0])))
        let legend =
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: s.file("maps/maps.json"))))
            as! [String: Any]
        #expect((legend["frames"] as? [[String: Any]])?.count == 5 && legend["merged_frames"] as? Int == 5)
        let shift = try ImageCodecs.read(s.file("maps/local-shift-16.png")).image.uint16
        #expect(shift.samples.allSatisfy { $0 == 0 }, "no parallax, no local alignment")
        // A second run into the same folder is refused before any work (the main output is new).
        let again = try CLI.run(["stack", dir, "-o", s.file("clean2.png"), "--save-maps", s.file("maps")])
        #expect(
            again.status != 0 && again.err.contains("already exists")
                && !FileManager.default.fileExists(atPath: s.file("clean2.png")), "\(again.err)")
    }

    @Test func refusesMismatchedSizesAndExistingOutput() throws {
        let s = Scratch()
        let dir = try writeBurst(s, count: 3)
        try ImageCodecs.write(.uint8(Image<UInt8>(width: 10, height: 10, channels: 3)), to: dir + "/small.png")
        var r = try CLI.run(["stack", dir, "-o", s.file("o.png")])
        #expect(r.status == 1 && r.err.contains("same size"))
        #expect(!FileManager.default.fileExists(atPath: s.file("o.png")))
        FileManager.default.createFile(atPath: s.file("taken.jpg"), contents: Data("x".utf8))
        r = try CLI.run(["stack", dir + "/frame0.png", dir + "/frame1.png", "-o", s.file("taken.jpg")])
        #expect(r.status == 1 && r.err.contains("--force"))
        r = try CLI.run(["stack", dir, "-o", s.file("o.bmp")])
        #expect(r.status != 0 && r.err.contains(".jpg, .png or .tif"))
    }

    @Test(
        """
        --erase: a block that stood in 3 of 5 frames is kept by the merge and erased under the mask; a mask of \
        another size is refused
        """
    )
    func erasesUnderTheMask() throws {
        let s = Scratch()
        let dir = try writeBurst(s)
        // Paint a red block into frames 1...3, the same place in the scene (frame k is the scene shifted by (-k, k/2)).
        for k in 1...3 {
            var f = try ImageCodecs.read(dir + "/frame\(k).png").image.uint8
            for y in 100..<130 {
                for x in 120..<160 {
                    f[x - k, y + k / 2, 0] = 230
                    f[x - k, y + k / 2, 1] = 30
                    f[x - k, y + k / 2, 2] = 30
                }
            }
            try ImageCodecs.write(.uint8(f), to: dir + "/frame\(k).png", options: WriteOptions(overwrite: true))
        }
        let mask = Image<UInt8>(width: 200, height: 150, channels: 1) { d in
            for y in 0..<150 {
                for x in 0..<200 { d[y * 200 + x] = (92..<138).contains(y) && (112..<168).contains(x) ? 255 : 0 }
            }
        }
        try ImageCodecs.write(.uint8(mask), to: s.file("mask.png"))
        var r = try CLI.run(["stack", dir, "-o", s.file("plain.png"), "--quiet"])
        #expect(r.status == 0, "\(r.err)")
        r = try CLI.run([
            "stack", dir, "-o", s.file("erased.png"), "--erase", s.file("mask.png"), "--report", s.file("r.json"),
            "--quiet"
        ])
        #expect(r.status == 0 && r.out.contains("erase:") && r.out.contains("changed"), "\(r.out) \(r.err)")
        let plain = try ImageCodecs.read(s.file("plain.png")).image.uint8,
            erased = try ImageCodecs.read(s.file("erased.png")).image.uint8
        #expect(
            plain[140, 115, 0] > 200 && plain[140, 115, 1] < 60, "the merge keeps the block: it is the majority there")
        #expect(
            abs(Int(erased[140, 115, 1]) - Int(erased[140, 115, 0]) / 2 - 60) < 12,
            "the scene shows again (green = 60 + red / 2 in it)")
        #expect(
            erased[10, 10, 0] == plain[10, 10, 0] && erased[190, 20, 2] == plain[190, 20, 2],
            "far from the mask nothing changed")
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: s.file("r.json"))))
                as? [String: Any])
        let erase = try #require(report["erase"] as? [String: Any])
        #expect(
            (erase["remerged_pixels"] as? Int ?? 0) > 1000 && erase["masked_pixels"] as? Int == 46 * 56
                && erase["seam_band"] as? Int == 12, "\(erase)")
        // A mask of another size: refused, nothing written.
        try ImageCodecs.write(.uint8(Image<UInt8>(width: 20, height: 20, channels: 1)), to: s.file("small.png"))
        r = try CLI.run(["stack", dir, "-o", s.file("bad.png"), "--erase", s.file("small.png")])
        #expect(r.status == 1 && r.err.contains("erase mask is 20x20 but the result is 200x150"), "\(r.err)")
        #expect(!FileManager.default.fileExists(atPath: s.file("bad.png")))
        r = try CLI.run(["stack", dir, "-o", s.file("mask.png"), "--erase", s.file("mask.png"), "--force"])
        #expect(r.status != 0, "the output may not overwrite the mask")
    }
}
