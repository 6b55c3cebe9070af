import Foundation
import SharedTestData
import Testing
import EvanescoCore
import EvanescoIO

/// A GDepth JPEG (depth PNG in the main XMP): the photo is a gradient; the depth is near (255
/// means Far in RangeLinear, so 0 = 1 m) on the left half, far (4 m) on the right half.
func gdepthPhoto(_ s: Scratch, name: String = "portrait.jpg") throws -> String {
    let w = 96, h = 64
    let depth = Image<UInt8>(width: 48, height: 32, channels: 1) { d in
        for y in 0..<32 { for x in 0..<48 { d[y * 48 + x] = x < 24 ? 0 : 255 } }
    }
    try ImageCodecs.write(.uint8(depth), to: s.file("depthsrc.png"))
    let b64 = Data(bytesOf(s.file("depthsrc.png"))).base64EncodedString()
    let xmp = """
        <x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">\
        <rdf:Description xmlns:GDepth="http://ns.google.com/photos/1.0/depthmap/" GDepth:Format="RangeLinear" \
        GDepth:Near="1" GDepth:Far="4" GDepth:Mime="image/png" GDepth:Data="\(b64)"/></rdf:RDF></x:xmpmeta>
        """
    try ImageCodecs.write(.uint8(gradient(w, h)), to: s.file("plain.jpg"), options: WriteOptions(quality: 95))
    let jpeg = bytesOf(s.file("plain.jpg"))
    let payload = Array("http://ns.adobe.com/xap/1.0/".utf8) + [0] + Array(xmp.utf8)
    let len = payload.count + 2
    let out = Array(jpeg[0..<2]) + [0xFF, 0xE1, UInt8(len >> 8), UInt8(len & 0xFF)] + payload + Array(jpeg[2...])
    FileManager.default.createFile(atPath: s.file(name), contents: Data(out))
    return s.file(name)
}

func bytesOf(_ path: String) -> [UInt8] { [UInt8](FileManager.default.contents(atPath: path) ?? Data()) }

@Suite struct DepthCommands {
    @Test func infoListsTheMapAsJSON() throws {
        let s = Scratch()
        let photo = try gdepthPhoto(s)
        let r = try CLI.run(["depth", "info", photo, "--json"])
        #expect(r.status == 0, "\(r.err)")
        let obj = try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as! [String: Any]
        let depth = obj["depth"] as! [String: Any]
        #expect(
            depth["kind"] as? String == "depth" && depth["width"] as? Int == 48
                && depth["source"] as? String == "GDepth (XMP)")
        #expect(depth["range"] as? [Double] == [1, 4])
        #expect(obj["has_depth"] as? Bool == true)
    }

    @Test func extractWritesPFMTiffAndPNG() throws {
        let s = Scratch()
        let photo = try gdepthPhoto(s)
        #expect(try CLI.run(["depth", "extract", photo, "-o", s.file("d.pfm"), "--as", "disparity"]).status == 0)
        let pfm = try PFM.decode(bytesOf(s.file("d.pfm")), path: "d.pfm")
        #expect(pfm.width == 48 && pfm[0, 0, 0] == 1 && pfm[47, 31, 0] == 0.25)
        #expect(try CLI.run(["depth", "extract", photo, "-o", s.file("d.tif"), "--normalize"]).status == 0)
        let tif = try ImageCodecs.read(s.file("d.tif")).image.float32
        #expect(tif[0, 0, 0] == 0 && tif[47, 0, 0] == 1)
        let r = try CLI.run(["depth", "extract", photo, "-o", s.file("d.png"), "--force", "--report", s.file("r.json")])
        #expect(r.status == 0, "\(r.err)")
        let png = try ImageCodecs.read(s.file("d.png")).image.uint16
        #expect(png[0, 0, 0] == 1 && png[47, 0, 0] == 65535)
        #expect(try CLI.run(["depth", "extract", photo, "-o", s.file("raw.png"), "--raw"]).status == 0)
        // --raw with the stored encoding's extension: the embedded PNG, byte for byte.
        #expect(bytesOf(s.file("raw.png")) == bytesOf(s.file("depthsrc.png")))
        // Existing outputs are not overwritten without --force.
        let again = try CLI.run(["depth", "extract", photo, "-o", s.file("d.pfm")])
        #expect(again.status != 0 && again.err.contains("already exists"))
    }

    @Test func portraitRendersEveryEffectAndReports() throws {
        let s = Scratch()
        let photo = try gdepthPhoto(s)
        for effect in ["depth", "mask", "spotlight", "color", "blur"] {
            let r = try CLI.run([
                "portrait", photo, "-o", s.file("\(effect).png"), "--effect", effect, "--focus-distance", "1",
                "--report", s.file("\(effect).json")
            ])
            #expect(r.status == 0, "\(effect): \(r.err)")
            let img = try ImageCodecs.read(s.file("\(effect).png")).image
            #expect(img.width == 96 && img.height == 64)
        }
        // Focus at 1 m is the left half: spotlight keeps it, blacks out the right half.
        let spot = try ImageCodecs.read(s.file("spotlight.png")).image.uint8
        let original = try ImageCodecs.read(s.file("plain.jpg")).image.uint8
        for x in [2, 20, 40] { for c in 0..<3 { #expect(spot[x, 30, c] == original[x, 30, c]) } }
        #expect(spot[90, 30, 0] == 0 && spot[90, 30, 2] == 0)
        let rep = try JSONSerialization.jsonObject(with: Data(bytesOf(s.file("blur.json")))) as! [String: Any]
        #expect(rep["focus"] as? Double == 1)
        #expect((rep["times_s"] as? [String: Double])?["total"] != nil)
        // Focus by point: the right half.
        let r = try CLI.run(["portrait", photo, "-o", s.file("p.png"), "--effect", "mask", "--focus-point", "80,30"])
        #expect(r.status == 0 && r.err.contains("focus 0.000"), "\(r.err)")
    }

    @Test(
        """
        portrait --effect lens: the near half stays sharp, the far half blurs, the report names the lens; bad lens \
        values are refused
        """
    )
    func portraitLens() throws {
        let s = Scratch()
        let photo = try gdepthPhoto(s)
        let r = try CLI.run([
            "portrait", photo, "-o", s.file("lens.png"), "--effect", "lens", "--focus-distance", "1", "--aperture",
            "30",
            "--blades", "6", "--blade-rotation", "10", "--cat-eye", "--highlights", "3", "--report", s.file("lens.json")
        ])
        #expect(r.status == 0, "\(r.err)")
        let out = try ImageCodecs.read(s.file("lens.png")).image.uint8,
            original = try ImageCodecs.read(s.file("plain.jpg")).image.uint8
        // Left half (1 m, in focus) unchanged away from the edge; the right half (4 m) is blurred.
        for x in [2, 20] { for c in 0..<3 { #expect(out[x, 30, c] == original[x, 30, c]) } }
        var changed = 0
        for x in 60..<96 {
            if out[x, 30, 0] != original[x, 30, 0] || out[x, 30, 1] != original[x, 30, 1] { changed += 1 }
        }
        #expect(changed > 20, "\(changed) of 36 pixels of the far half changed")
        let rep = try JSONSerialization.jsonObject(with: Data(bytesOf(s.file("lens.json")))) as! [String: Any]
        let lens = try #require(rep["lens"] as? [String: Any])
        #expect(
            lens["aperture_pixels"] as? Double == 30 && lens["aperture_from"] as? String == "aperture")
        // `--cat-eye` without a number, the spelling before it took a strength, still reads as 0.6, with a note.
        #expect(abs((lens["cat_eye"] as? Double ?? 0) - 0.6) < 1e-6)
        #expect(r.err.contains("--cat-eye without a number is deprecated"), "\(r.err)")
        // The report echoes the settings under their declared keys.
        let echoed = try #require(rep["settings"] as? [String: Any])
        #expect(echoed["blades"] as? Int == 6 && echoed["effect"] as? String == "lens", "\(echoed)")
        #expect((lens["shape"] as? [String: Any])?["blades"] as? Int == 6)
        #expect(rep["effect"] as? String == "lens")
        for bad in [
            ["--blades", "2"], ["--aperture", "0"], ["--aperture", "10", "--f-number", "2"], ["--highlights", "0.5"],
            ["--aperture", "nan"]
        ] {
            let b = try CLI.run(["portrait", photo, "-o", s.file("bad.png"), "--effect", "lens"] + bad)
            #expect(b.status != 0 && b.err.hasPrefix("Error: --\(bad[0].dropFirst(2))"), "\(bad): \(b.err)")
            #expect(!FileManager.default.fileExists(atPath: s.file("bad.png")))
        }
        // An f-number needs the camera's calibration, which this photo lacks: said, nothing written.
        let f = try CLI.run(["portrait", photo, "-o", s.file("f.png"), "--effect", "lens", "--f-number", "2.8"])
        #expect(f.status != 0 && f.err.contains("f-number needs") && f.err.contains("calibration"), "\(f.err)")
        #expect(!FileManager.default.fileExists(atPath: s.file("f.png")))
    }

    @Test func clearErrors() throws {
        let s = Scratch()
        try ImageCodecs.write(.uint8(gradient(32, 32)), to: s.file("nodepth.jpg"))
        let r = try CLI.run(["portrait", s.file("nodepth.jpg"), "-o", s.file("o.jpg")])
        #expect(r.status != 0 && r.err.contains("has no depth"))
        #expect(!FileManager.default.fileExists(atPath: s.file("o.jpg")))
        let photo = try gdepthPhoto(s)
        let far = try CLI.run(["portrait", photo, "-o", s.file("o.jpg"), "--focus-distance", "40"])
        #expect(far.status != 0 && far.err.contains("outside the map's range"))
        let aux = try CLI.run(["depth", "extract", photo, "-o", s.file("m.png"), "--aux", "portrait"])
        #expect(aux.status != 0 && aux.err.contains("no portrait image"))
        // An existing --save-mask file is refused before the main output is written.
        FileManager.default.createFile(atPath: s.file("taken.png"), contents: Data([1, 2, 3]))
        let taken = try CLI.run(["portrait", photo, "-o", s.file("fresh.jpg"), "--save-mask", s.file("taken.png")])
        #expect(taken.status != 0 && taken.err.contains("already exists"))
        #expect(
            !FileManager.default.fileExists(atPath: s.file("fresh.jpg")) && bytesOf(s.file("taken.png")) == [1, 2, 3])
        let info = try CLI.run(["depth", "info", s.file("nodepth.jpg")])
        #expect(info.status != 0 && info.out.contains("depth: none"))
    }
}

/// The real portrait photos of ../shared/data, end to end.
@Suite(
    .enabled(
        if: FileManager.default.fileExists(atPath: sharedDepth + "/pug-iphone13pro/pug.heic"),
        "SKIPPED: ../shared/data is absent; real depth photos were not run through the CLI"))
struct RealDepthCommands {
    @Test func pugSpotlightAndRelativeAccuracyRefusal() throws {
        let s = Scratch()
        let pug = sharedDepth + "/pug-iphone13pro/pug.heic"
        // (Spotlight: the blur's cost in a debug test build is not worth it here; Benchmarks time it.)
        let r = try CLI.run([
            "portrait", pug, "-o", s.file("b.jpg"), "--effect", "spotlight", "--focus-point", "0.5,0.6"
        ])
        #expect(r.status == 0, "\(r.err)")
        let out = try ImageCodecs.read(s.file("b.jpg"))
        #expect(out.image.width == 4032 && out.metadata.icc?.count == 536)
        let rel = try CLI.run(["portrait", pug, "-o", s.file("c.jpg"), "--focus-distance", "0.5"])
        #expect(rel.status != 0 && rel.err.contains("relative accuracy"))
        let matte = try CLI.run([
            "portrait", sharedDepth + "/truedepth-iphone/jpeg_depth_data.jpg", "-o", s.file("m.png"),
            "--effect", "mask", "--refine", "matte", "--focus", "0.9"
        ])
        #expect(matte.status == 0, "\(matte.err)")
    }
}

let sharedDepth = SharedTestData.path("depth")
