import Foundation
import Testing
import EvanescoCore
@testable import EvanescoIO

@Suite("Depth readers on self-made files")
struct DepthReaderTests {
    let photo = smoothImage(64, 48)

    @Test("Apple MPF: the disparity image is found by its apdi type, mapped with FloatMin/Max, calibration read")
    func appleMPF() throws {
        let disp = DepthFixtures.pattern(32, 24)
        let matte = DepthFixtures.pattern(32, 24)
        // The matte comes first: position must not decide what an image is.
        let bytes = DepthFixtures.appleJPEG(
            primary: photo,
            secondaries: [
                (
                    matte,
                    DepthFixtures.appleDisparityXMP(
                        floatMin: 0, floatMax: 1, type: "depth", subtype: "portraiteffectsmatte")
                ),
                (disp, DepthFixtures.appleDisparityXMP(floatMin: 0.5, floatMax: 3.0))
            ])
        let p = try DepthReader.read(bytes: bytes, path: "apple.jpg")
        let d = try #require(p.depth)
        #expect(d.kind == .disparity && d.source == "JPEG MPF image 3" && d.units == "1/m")
        #expect(d.declaredRange == 0.5...3.0)
        #expect(d.accuracy == .absolute && d.filtered == true && d.quality == "high")
        // Column-major 500 0 0 / 0 510 0 / 320 240 1 becomes row-major fx 0 cx / 0 fy cy / 0 0 1.
        #expect(d.calibration?.intrinsics == [500, 0, 320, 0, 510, 240, 0, 0, 1])
        #expect(d.calibration?.focalLengthPixels(forWidth: 320) == 250)
        // JPEG at quality 100 of an 8-bit pattern: within 2 codes; values follow the formula.
        guard case .uint8(let stored) = d.stored else {
            Issue.record("stored is not 8-bit")
            return
        }
        for i in [0, 17, 200, 767] {
            let expected = Float(0.5 + Double(stored.samples[i]) / 255 * 2.5)
            #expect(abs(d.map.samples[i] - expected) < 1e-5)
            #expect(abs(Int(stored.samples[i]) - Int(disp.samples[i])) <= 2)
        }
        #expect(p.auxiliary.map(\.kind) == [.portrait])
    }

    @Test("Apple MPF: depth and mattes follow the photo's EXIF orientation; --raw keeps sensor orientation")
    func orientation() throws {
        let disp = DepthFixtures.pattern(32, 24)
        let bytes = DepthFixtures.appleJPEG(
            primary: photo, orientation: 6,
            secondaries: [
                (disp, DepthFixtures.appleDisparityXMP(floatMin: 0, floatMax: 1)),
                (
                    disp,
                    DepthFixtures.appleDisparityXMP(
                        floatMin: 0, floatMax: 1, type: "depth", subtype: "portraiteffectsmatte")
                )
            ])
        var o = DepthReadOptions()
        o.decodeAuxiliary = [.portrait]
        let p = try DepthReader.read(bytes: bytes, path: "rot.jpg", options: o)
        let d = try #require(p.depth)
        #expect(p.width == 48 && p.height == 64)
        #expect(d.width == 24 && d.height == 32 && d.orientationApplied == .right)
        // Orientation 6 turns the stored image 90 degrees clockwise: stored (x, y) lands at
        // (H - 1 - y, x); so stored pixel (0, 23) (bottom-left) is the top-left of the result.
        guard case .uint8(let up) = d.stored else {
            Issue.record("not 8-bit")
            return
        }
        var o2 = o
        o2.sensorOrientation = true
        let raw = try DepthReader.read(bytes: bytes, path: "rot.jpg", options: o2)
        guard case .uint8(let stored) = raw.depth!.stored else {
            Issue.record("not 8-bit")
            return
        }
        #expect(raw.depth!.width == 32 && raw.depth!.height == 24)
        #expect(up[0, 0, 0] == stored[0, 23, 0])
        #expect(up[23, 0, 0] == stored[0, 0, 0])
        #expect(up[23, 31, 0] == stored[31, 0, 0])
        let matte = try #require(p.auxiliary(.portrait))
        #expect(matte.image.width == 24 && matte.image.height == 32)
        #expect(matte.image.uint8.samples == up.samples)
    }

    @Test("GDepth: extended XMP reassembled from chunks, RangeInverse and RangeLinear decoded with the spec's polarity")
    func gdepth() throws {
        let depth = DepthFixtures.pattern(40, 30)
        for format in ["RangeInverse", "RangeLinear"] {
            let bytes = DepthFixtures.gdepthJPEG(primary: photo, depth: depth, format: format, near: 1.5, far: 6)
            var o = DepthReadOptions()
            o.gdepthPolarity = .spec
            let p = try DepthReader.read(bytes: bytes, path: "g.jpg", options: o)
            let d = try #require(p.depth)
            #expect(d.kind == .depth && d.source == "GDepth (extended XMP)" && d.embeddedFormat == .png)
            for i in [0, 5, 333, 1199] {
                let n = Double(depth.samples[i]) / 255
                let expected = format == "RangeLinear" ? 1.5 + n * 4.5 : 6 * 1.5 / (6 - n * 4.5)
                #expect(abs(Double(d.map.samples[i]) - expected) < 1e-4, "\(format) sample \(i)")
            }
            #expect(d.map.samples[0] == 1.5)  // v = 0 is Near in the published encoding
            o.gdepthPolarity = .nearIsHigh
            let inv = try DepthReader.read(bytes: bytes, path: "g.jpg", options: o)
            #expect(abs(Double(inv.depth!.map.samples[0]) - 6) < 1e-5)
        }
    }

    @Test(
        "GDepth: a GUID that does not match HasExtendedXMP is accepted with a warning; a missing chunk is a typed error"
    )
    func gdepthGUID() throws {
        let depth = DepthFixtures.pattern(16, 12)
        let mismatch = DepthFixtures.gdepthJPEG(
            primary: photo, depth: depth, format: "RangeLinear", near: 1, far: 2,
            declaredGUID: "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF")
        let p = try DepthReader.read(bytes: mismatch, path: "m.jpg")
        #expect(p.depth != nil)
        #expect(p.warnings.contains { $0.contains("does not match") })
        let cut = DepthFixtures.gdepthJPEG(
            primary: photo, depth: depth, format: "RangeLinear", near: 1, far: 2, dropLastChunk: true)
        #expect(throws: DepthError.self) { try DepthReader.read(bytes: cut, path: "cut.jpg") }
        do { _ = try DepthReader.read(bytes: cut, path: "cut.jpg") } catch let e as DepthError {
            guard case .damaged = e else {
                Issue.record("expected .damaged, got \(e)")
                return
            }
            #expect(e.description.contains("cut.jpg"))
        }
    }

    @Test("Dynamic Depth: the depth item after the primary image, 16-bit PNG, RangeLinear, confidence listed")
    func dynamicDepth() throws {
        let w = 20, h = 10
        let depth16 = Image<UInt16>(width: w, height: h, channels: 1) { d in
            for i in 0..<(w * h) { d[i] = UInt16(i * 300) }
        }
        let conf = DepthFixtures.png(DepthFixtures.pattern(w, h))
        let bytes = DepthFixtures.dynamicDepthJPEG(
            primary: photo, depthItem: DepthFixtures.png(depth16), depthMime: "image/png",
            format: "RangeLinear", near: 0.5, far: 4,
            extraItems: [("image/png", "GainMap", conf)])
        let p = try DepthReader.read(bytes: bytes, path: "dd.jpg")
        let d = try #require(p.depth)
        #expect(d.kind == .depth && d.storedFormat == "16-bit" && d.units == "m")
        for i in [0, 1, 57, 199] {
            let expected = 0.5 + Double(i * 300) / 65535 * 3.5
            #expect(abs(Double(d.map.samples[i]) - expected) < 1e-5)
        }
        #expect(p.auxiliary.contains { $0.kind == .gainmap && $0.width == w })
    }

    @Test("Dynamic Depth with Float16 TIFF storage: values as stored, NaN kept out of the range as a hole")
    func float16() throws {
        var values = (0..<12).map { Float($0) * 0.25 + 1 }
        values[5] = .nan
        let tiff = DepthFixtures.float16TIFF(values, width: 4, height: 3)
        let bytes = DepthFixtures.dynamicDepthJPEG(
            primary: photo, depthItem: tiff, depthMime: "image/tiff",
            format: "RangeLinear", near: 1, far: 4)
        let d = try #require(try DepthReader.read(bytes: bytes, path: "f16.jpg").depth)
        #expect(d.storedFormat == "float" && d.encoding == .identity)
        #expect(d.holeCount == 1)
        #expect(d.finiteRange?.min == 1 && d.finiteRange?.max == 3.75)
        #expect(d.map.samples[3] == 1.75)
        #expect(d.converted(to: .disparity).map.samples[3] == 1 / 1.75)
    }

    @Test("Dynamic Depth: item lengths beyond the file are a typed error")
    func ddTruncated() throws {
        let item = DepthFixtures.png(DepthFixtures.pattern(8, 8))
        let bytes = DepthFixtures.dynamicDepthJPEG(
            primary: photo, depthItem: item, depthMime: "image/png", format: "RangeLinear", near: 1, far: 2)
        // Cut inside the item: the declared lengths reach back into the primary image.
        let cut = Array(bytes.prefix(bytes.count - 5))
        #expect(throws: DepthError.self) { try DepthReader.read(bytes: cut, path: "cut.jpg") }
        do { _ = try DepthReader.read(bytes: cut, path: "cut.jpg") } catch let e as DepthError {
            guard case .damaged = e else {
                Issue.record("expected .damaged, got \(e)")
                return
            }
        }
    }

    @Test("A photo without depth: DepthError.noDepth with a message that says so")
    func noDepth() throws {
        let bytes = DepthFixtures.jpeg(photo)
        #expect(throws: DepthError.noDepth(path: "plain.jpg", found: [])) {
            try DepthReader.read(bytes: bytes, path: "plain.jpg")
        }
        #expect(DepthError.noDepth(path: "plain.jpg", found: []).description.contains("has no depth"))
        let png = DepthFixtures.png(photo)
        #expect(throws: DepthError.self) { try DepthReader.read(bytes: png, path: "plain.png") }
    }

    @Test("Truncated MPF: the secondary images past the end are reported, never read out of bounds")
    func truncatedMPF() throws {
        let bytes = DepthFixtures.appleJPEG(
            primary: photo,
            secondaries: [(DepthFixtures.pattern(32, 24), DepthFixtures.appleDisparityXMP(floatMin: 0, floatMax: 1))])
        for cut in [bytes.count - 10, bytes.count - 300, bytes.count / 2 + 1000] where cut < bytes.count {
            let t = Array(bytes.prefix(cut))
            do {
                _ = try DepthReader.read(bytes: t, path: "t.jpg")
                Issue.record("a cut at \(cut) was accepted")
            } catch let e as DepthError {
                #expect(e.description.contains("t.jpg"))
            } catch let e as ImageIOError {
                #expect(e.path == "t.jpg")
            }
        }
        var o = DepthReadOptions()
        o.requireDepth = false
        o.decodePhoto = false
        let listed = try DepthReader.read(bytes: Array(bytes.prefix(bytes.count - 10)), path: "t.jpg", options: o)
        #expect(listed.warnings.contains { $0.contains("outside the file") })
    }

    @Test("Hostile XMP in a depth photo gives DepthError.badMetadata, not a crash or a hang")
    func hostileXMP() throws {
        let bomb = """
            <?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>\
            <x:xmpmeta xmlns:x="adobe:ns:meta/">&b;</x:xmpmeta>
            """
        let deep = String(repeating: "<a>", count: 5000) + String(repeating: "</a>", count: 5000)
        for xmp in [bomb, deep, "<x:xmpmeta><rdf:RDF", "<a b=\"<\"/>", "<a>&undefined;</a>"] {
            let bytes = DepthFixtures.insertSegment(
                0xE1, DepthFixtures.xmpSegment(xmp), into: DepthFixtures.jpeg(photo))
            #expect(throws: DepthError.self) { try DepthReader.read(bytes: bytes, path: "x.jpg") }
            do { _ = try DepthReader.read(bytes: bytes, path: "x.jpg") } catch let e as DepthError {
                guard case .badMetadata = e else {
                    Issue.record("expected badMetadata for \(xmp.prefix(20)), got \(e)")
                    continue
                }
            }
        }
    }
}

@Suite("A photo with a separate depth map")
struct DepthMapPairTests {
    @Test("8-bit disparity maps read as v/255 with 0 as a hole; 16-bit and PFM depth; shapes must match")
    func pairs() throws {
        let dir = TempDir()
        try ImageCodecs.write(.uint8(smoothImage(80, 60)), to: dir.file("photo.png"))
        let map8 = Image<UInt8>(width: 40, height: 30, channels: 1) { d in
            for i in 0..<d.count { d[i] = UInt8(i % 256) }
        }
        try ImageCodecs.write(.uint8(map8), to: dir.file("disp.png"))
        let p = try DepthReader.read(photo: dir.file("photo.png"), depthMap: dir.file("disp.png"))
        let d = try #require(p.depth)
        #expect(
            d.kind == .disparity && d.accuracy == .relative && d.units == "relative" && p.width == 80 && p.height == 60)
        #expect(d.map.width == 40 && d.map.height == 30)
        #expect(d.map.samples[0].isNaN && d.map.samples[51] == Float(51.0 / 255) && d.map.samples[255] == 1)
        // 16-bit depth: v / 65535, 0 is a hole (depth <= 0).
        let map16 = Image<UInt16>(width: 80, height: 60, channels: 1) { d in
            for i in 0..<d.count { d[i] = UInt16(i * 13) }
        }
        try ImageCodecs.write(.uint16(map16), to: dir.file("depth16.png"))
        let q = try #require(
            try DepthReader.read(photo: dir.file("photo.png"), depthMap: dir.file("depth16.png"), kind: .depth).depth)
        #expect(q.kind == .depth && q.map.samples[0].isNaN && q.map.samples[100] == Float(1300.0 / 65535))
        // Float metres from a PFM are absolute.
        let metres = Image<Float>(
            width: 8, height: 6, channels: 1, samples: ContiguousArray((0..<48).map { 1 + Float($0) / 10 }))
        try Data(PFM.encode(metres)).write(to: URL(fileURLWithPath: dir.file("depth.pfm")))
        let f = try #require(
            try DepthReader.read(photo: dir.file("photo.png"), depthMap: dir.file("depth.pfm"), kind: .depth).depth)
        #expect(f.accuracy == .absolute && f.units == "m" && f.map.samples == metres.samples)
        // A map of another shape, and a map without any value, are refused with what to do.
        try ImageCodecs.write(.uint8(Image(width: 30, height: 30, channels: 1)), to: dir.file("square.png"))
        #expect(throws: DepthError.self) {
            try DepthReader.read(photo: dir.file("photo.png"), depthMap: dir.file("square.png"))
        }
        try ImageCodecs.write(.uint8(Image(width: 40, height: 30, channels: 1)), to: dir.file("zero.png"))
        #expect(throws: DepthError.self) {
            try DepthReader.read(photo: dir.file("photo.png"), depthMap: dir.file("zero.png"))
        }
    }
}

@Suite("XMP parser")
struct XMPTests {
    @Test("Namespaces resolve by URI, not prefix; attributes, elements and rdf:Seq lists read")
    func properties() throws {
        let doc = try XMPDocument(
            """
            <x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">
            <rdf:Description xmlns:g="http://ns.google.com/photos/1.0/depthmap/" g:Near="1.5" g:Note="a &amp; b &#x41;">
            <g:Far>6</g:Far><g:List><rdf:Seq><rdf:li>1</rdf:li><rdf:li>2.5</rdf:li></rdf:Seq></g:List>
            <![CDATA[<not a tag>]]></rdf:Description></rdf:RDF></x:xmpmeta>
            """)
        #expect(doc.double(XMPNamespace.gDepth, "Near") == 1.5)
        #expect(doc.double(XMPNamespace.gDepth, "Far") == 6)
        #expect(doc.value(XMPNamespace.gDepth, "Note") == "a & b A")
        #expect(doc.doubles(XMPNamespace.gDepth, "List") == [1, 2.5])
        #expect(doc.value(XMPNamespace.apdi, "Near") == nil)
    }

    @Test("Limits: size, depth, element count; DOCTYPE refused")
    func limits() throws {
        var l = XMPDocument.Limits()
        l.maxBytes = 100
        #expect(throws: XMPError.tooLarge(bytes: 200, limit: 100)) {
            try XMPDocument(String(repeating: " ", count: 200), limits: l)
        }
        #expect(throws: XMPError.tooDeep(limit: 64)) { try XMPDocument(String(repeating: "<a>", count: 65)) }
        var l2 = XMPDocument.Limits()
        l2.maxElements = 10
        #expect(throws: XMPError.tooManyElements(limit: 10)) {
            try XMPDocument("<r>" + String(repeating: "<a/>", count: 20) + "</r>", limits: l2)
        }
        #expect(throws: XMPError.declarationRefused) {
            try XMPDocument("<!DOCTYPE a [<!ENTITY x SYSTEM \"file:///etc/passwd\">]><a>&x;</a>")
        }
        #expect(throws: XMPError.undefinedEntity("x")) { try XMPDocument("<a>&x;</a>") }
    }
}
