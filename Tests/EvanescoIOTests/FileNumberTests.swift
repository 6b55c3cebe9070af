import Foundation
import Testing
import EvanescoCore
@testable import EvanescoIO

@Suite("Numbers read from files")
struct FileNumberTests {
    @Test("Only finite, in-range, whole-where-needed numbers pass; sums that overflow are refused")
    func validation() {
        #expect(
            FileNumber.double(" 1.5 ") == 1.5 && FileNumber.double("nan") == nil && FileNumber.double("inf") == nil
                && FileNumber.double("-1.0e+300") == -1e300 && FileNumber.double("1e309") == nil
                && FileNumber.double("x") == nil)
        #expect(FileNumber.double("-1.0e+300", in: 0...1) == nil && FileNumber.double("0.25", in: 0...1) == 0.25)
        #expect(
            FileNumber.int("640", in: 1...1000) == 640 && FileNumber.int("640.0", in: 1...1000) == 640
                && FileNumber.int("640.5", in: 1...1000) == nil && FileNumber.int("1e30", in: 0...Int(Int32.max)) == nil
                && FileNumber.int("-5", in: 0...10) == nil)
        #expect(
            FileNumber.int(exactly: .nan, in: 0...10) == nil
                && FileNumber.int(exactly: .infinity, in: 0...Int.max) == nil)
        #expect(FileNumber.sum([Int.max, 1]) == nil && FileNumber.sum([3, 4]) == 7 && FileNumber.sum([-1]) == nil)
    }

    @Test("XMP lists with a non-finite item are absent, not shifted")
    func lists() throws {
        let doc = try XMPDocument(
            DepthFixtures.xmpPacket(" d:M=\"1, nan, 3\" d:N=\"1 2 3\">", namespaces: ["d": XMPNamespace.depthData]))
        #expect(
            doc.doubles(XMPNamespace.depthData, "M") == nil && doc.doubles(XMPNamespace.depthData, "N") == [1, 2, 3])
        #expect(doc.double(XMPNamespace.depthData, "M") == nil)
    }

    /// A GDepth JPEG with the depth PNG inline in the main XMP and the given GFocus values.
    static func gdepth(near: String = "1", far: String = "10", focus: (String, String, String) = ("0.5", "0.5", "3"))
        -> [UInt8]
    {
        let data = Data(DepthFixtures.png(DepthFixtures.pattern(16, 12))).base64EncodedString()
        let xmp = DepthFixtures.xmpPacket(
            """
             GDepth:Format="RangeInverse" GDepth:Near="\(near)" GDepth:Far="\(far)" GDepth:Mime="image/png" \
            GDepth:Data="\(data)" \
            GFocus:FocalPointX="\(focus.0)" GFocus:FocalPointY="\(focus.1)" GFocus:FocalDistance="\(focus.2)">
            """, namespaces: ["GDepth": XMPNamespace.gDepth, "GFocus": XMPNamespace.gFocus])
        return DepthFixtures.insertSegment(
            0xE1, DepthFixtures.xmpSegment(xmp), into: DepthFixtures.jpeg(DepthFixtures.pattern(32, 24)))
    }

    @Test("Hostile GFocus values are ignored; NaN or infinite Near/Far are typed errors")
    func gdepthNumbers() throws {
        let plain = try DepthReader.read(bytes: Self.gdepth(), path: "g.jpg")
        #expect(plain.depth?.width == 16)
        for focus in [
            ("-1.0e+300", "0.5", "3"), ("nan", "0.5", "3"), ("0.5", "inf", "3"), ("0.5", "0.5", "nan"),
            ("0.5", "0.5", "-0")
        ] {
            let p = try DepthReader.read(bytes: Self.gdepth(focus: focus), path: "g.jpg")
            #expect(p.depth?.width == 16, "\(focus)")
        }
        for (near, far) in [("nan", "10"), ("1", "inf"), ("0", "10"), ("1e400", "1")] {
            #expect(throws: DepthError.self, "\(near) \(far)") {
                try DepthReader.read(bytes: Self.gdepth(near: near, far: far), path: "g.jpg")
            }
        }
    }

    @Test("Apple: a NaN range is a typed error; NaN calibration sizes are dropped, not converted")
    func appleNumbers() throws {
        let disp = DepthFixtures.pattern(32, 24)
        let nanRange = DepthFixtures.appleJPEG(
            primary: DepthFixtures.pattern(64, 48),
            secondaries: [
                (disp, DepthFixtures.appleDisparityXMP(floatMin: .nan, floatMax: 3))
            ])
        #expect(throws: DepthError.self) { try DepthReader.read(bytes: nanRange, path: "a.jpg") }
        let xmp = DepthFixtures.appleDisparityXMP(floatMin: 0.5, floatMax: 3).replacingOccurrences(
            of: "IntrinsicMatrixReferenceWidth=\"640\"", with: "IntrinsicMatrixReferenceWidth=\"nan\"")
        let p = try DepthReader.read(
            bytes: DepthFixtures.appleJPEG(primary: DepthFixtures.pattern(64, 48), secondaries: [(disp, xmp)]),
            path: "a.jpg")
        #expect(p.depth?.calibration?.referenceWidth == nil && p.depth?.calibration?.referenceHeight == 480)
    }

    @Test("Dynamic Depth item lengths whose sum overflows are a typed error")
    func containerLengths() throws {
        let item = DepthFixtures.png(DepthFixtures.pattern(16, 12))
        let good = DepthFixtures.dynamicDepthJPEG(
            primary: DepthFixtures.pattern(32, 24), depthItem: item, depthMime: "image/png",
            format: "RangeInverse", near: 1, far: 10,
            extraItems: [(mime: "image/png", semantic: "Confidence", bytes: item)])
        #expect(try DepthReader.read(bytes: good, path: "d.jpg").depth?.width == 16)
        // Two lengths whose sum overflows Int.
        let huge = "9223372036854775807"
        let items = ["Primary", "Depth", "Confidence"].map { sem in
            "<rdf:li rdf:parseType=\"Resource\"><Container:Item Item:Mime=\"image/png\" "
                + "Item:Semantic=\"\(sem)\"\(sem == "Primary" ? "" : " Item:Length=\"\(huge)\"")/></rdf:li>"
        }.joined()
        let xmp = DepthFixtures.xmpPacket(
            "><Device:Container><rdf:Description><Container:Directory><rdf:Seq>\(items)</rdf:Seq>"
                + "</Container:Directory></rdf:Description></Device:Container>",
            namespaces: [
                "Device": XMPNamespace.ddDevice, "Container": XMPNamespace.ddContainer, "Item": XMPNamespace.ddItem
            ])
        let bad =
            DepthFixtures.insertSegment(
                0xE1, DepthFixtures.xmpSegment(xmp), into: DepthFixtures.jpeg(DepthFixtures.pattern(32, 24))) + item
            + item
        #expect(throws: DepthError.self) { try DepthReader.read(bytes: bad, path: "d.jpg") }
    }
}
