import Foundation
import EvanescoCore
@testable import EvanescoIO

/// Builders of depth photos in each container, made by the tests themselves.
enum DepthFixtures {
    /// Inserts a marker segment after the SOI and any APPn segments already there.
    static func insertSegment(_ marker: UInt8, _ payload: [UInt8], into jpeg: [UInt8]) -> [UInt8] {
        var p = 2
        while p + 4 <= jpeg.count, jpeg[p] == 0xFF, (0xE0...0xEF).contains(jpeg[p + 1]) {
            p += 2 + (Int(jpeg[p + 2]) << 8 | Int(jpeg[p + 3]))
        }
        let len = payload.count + 2
        return Array(jpeg[..<p]) + [0xFF, marker, UInt8(len >> 8), UInt8(len & 0xFF)] + payload + Array(jpeg[p...])
    }

    static func xmpSegment(_ xml: String) -> [UInt8] {
        Array("http://ns.adobe.com/xap/1.0/".utf8) + [0] + Array(xml.utf8)
    }

    static func xmpPacket(_ description: String, namespaces: [String: String]) -> String {
        let ns = namespaces.sorted { $0.key < $1.key }.map { " xmlns:\($0.key)=\"\($0.value)\"" }.joined()
        return """
            <x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">\
            <rdf:Description rdf:about=""\(ns)\(description)</rdf:Description></rdf:RDF></x:xmpmeta>
            """
    }

    static func jpeg(_ image: Image<UInt8>, quality: Int = 95) -> [UInt8] {
        try! JPEGCodec.encode(image, quality: quality, path: "fixture.jpg")
    }

    static func png<S: PixelSample>(_ image: Image<S>) -> [UInt8] {
        try! PNGCodec.encode(image, compression: .default, icc: nil, exif: nil, path: "fixture.png")
    }

    /// A disparity plane with a known pattern: v = (x * 7 + y * 3) % 256.
    static func pattern(_ w: Int, _ h: Int) -> Image<UInt8> {
        Image<UInt8>(width: w, height: h, channels: 1) { d in
            for y in 0..<h { for x in 0..<w { d[y * w + x] = UInt8((x * 7 + y * 3) % 256) } }
        }
    }

    /// An Apple-style JPEG: primary (with optional EXIF orientation), then MPF secondary images,
    /// each a JPEG carrying its own apdi XMP.
    static func appleJPEG(
        primary: Image<UInt8>, orientation: Int? = nil,
        secondaries: [(image: Image<UInt8>, xmp: String)]
    ) -> [UInt8] {
        var main = jpeg(primary)
        if let o = orientation { main = JPEGSegments.inserting(exif: exifBlock(orientation: o), icc: nil, into: main) }
        let subs = secondaries.map { insertSegment(0xE1, xmpSegment($0.xmp), into: jpeg($0.image, quality: 100)) }
        // MPF APP2: "MPF\0", then a big-endian TIFF header, an IFD of 3 entries, the MP entries.
        let n = subs.count + 1
        func be32(_ v: Int) -> [UInt8] {
            [UInt8(v >> 24 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)]
        }
        func be16(_ v: Int) -> [UInt8] { [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        let entriesOffset = 8 + 2 + 3 * 12 + 4
        func mpf(_ offsets: [Int], _ sizes: [Int]) -> [UInt8] {
            var t: [UInt8] = [0x4D, 0x4D, 0x00, 0x2A] + be32(8) + be16(3)
            t += be16(0xB000) + be16(7) + be32(4) + Array("0100".utf8)
            t += be16(0xB001) + be16(4) + be32(1) + be32(n)
            t += be16(0xB002) + be16(7) + be32(16 * n) + be32(entriesOffset)
            t += be32(0)
            for k in 0..<n {
                t += be32(k == 0 ? 0x20030000 : 0x00000000) + be32(sizes[k]) + be32(offsets[k]) + be16(0) + be16(0)
            }
            return Array("MPF".utf8) + [0] + t
        }
        let placeholder = insertSegment(
            0xE2, mpf(Array(repeating: 0, count: n), Array(repeating: 0, count: n)), into: main)
        // Offsets are relative to the TIFF header inside the MPF segment.
        let mpfSig = Array("MPF".utf8) + [0]
        var base = 0
        for i in 0..<(placeholder.count - 4) where Array(placeholder[i..<(i + 4)]) == mpfSig {
            base = i + 4
            break
        }
        var offsets = [0], sizes = [placeholder.count]
        var at = placeholder.count
        for s in subs {
            offsets.append(at - base)
            sizes.append(s.count)
            at += s.count
        }
        let final = insertSegment(0xE2, mpf(offsets, sizes), into: main)
        precondition(final.count == placeholder.count)
        return final + subs.flatMap { $0 }
    }

    static func appleDisparityXMP(
        floatMin: Double, floatMax: Double, type: String = "disparity", subtype: String? = nil
    ) -> String {
        xmpPacket(
            """
             apdi:AuxiliaryImageType="\(type)"\(subtype.map { " apdi:AuxiliaryImageSubType=\"\($0)\"" } ?? "") \
            apdi:FloatMinValue="\(floatMin)" apdi:FloatMaxValue="\(floatMax)" apdi:IntMinValue="0" \
            apdi:IntMaxValue="255" depthData:Accuracy="absolute" depthData:Filtered="true" depthData:Quality="high" \
            depthData:PixelSize="0.001" depthData:IntrinsicMatrixReferenceWidth="640" \
            depthData:IntrinsicMatrixReferenceHeight="480">\
            <depthData:IntrinsicMatrix><rdf:Seq><rdf:li>500</rdf:li>\
            <rdf:li>0</rdf:li><rdf:li>0</rdf:li><rdf:li>0</rdf:li><rdf:li>510</rdf:li>\
            <rdf:li>0</rdf:li><rdf:li>320</rdf:li>\
            <rdf:li>240</rdf:li><rdf:li>1</rdf:li></rdf:Seq></depthData:IntrinsicMatrix>
            """, namespaces: ["apdi": XMPNamespace.apdi, "depthData": XMPNamespace.depthData])
    }

    /// A GDepth JPEG whose depth PNG lives in the extended XMP, split into `chunks` APP1 segments.
    static func gdepthJPEG(
        primary: Image<UInt8>, depth: Image<UInt8>, format: String, near: Double, far: Double,
        chunks: Int = 3, guid: String = "0123456789ABCDEF0123456789ABCDEF", declaredGUID: String? = nil,
        dropLastChunk: Bool = false
    ) -> [UInt8] {
        let data = Data(png(depth)).base64EncodedString()
        let ext = xmpPacket(" GDepth:Data=\"\(data)\">", namespaces: ["GDepth": XMPNamespace.gDepth])
        let main = xmpPacket(
            " GDepth:Format=\"\(format)\" GDepth:Near=\"\(near)\" GDepth:Far=\"\(far)\" GDepth:Mime=\"image/png\" "
                + "xmpNote:HasExtendedXMP=\"\(declaredGUID ?? guid)\">",
            namespaces: ["GDepth": XMPNamespace.gDepth, "xmpNote": XMPNamespace.xmpNote])
        var out = insertSegment(0xE1, xmpSegment(main), into: jpeg(primary))
        let bytes = Array(ext.utf8)
        let size = (bytes.count + chunks - 1) / chunks
        var parts: [[UInt8]] = []
        for k in 0..<chunks {
            let lo = k * size, hi = min(bytes.count, lo + size)
            guard lo < hi else { break }
            let sig = Array("http://ns.adobe.com/xmp/extension/".utf8) + [0] + Array(guid.utf8)
            let total = [
                UInt8(bytes.count >> 24 & 0xFF), UInt8(bytes.count >> 16 & 0xFF), UInt8(bytes.count >> 8 & 0xFF),
                UInt8(bytes.count & 0xFF)
            ]
            let off = [UInt8(lo >> 24 & 0xFF), UInt8(lo >> 16 & 0xFF), UInt8(lo >> 8 & 0xFF), UInt8(lo & 0xFF)]
            parts.append(sig + total + off + Array(bytes[lo..<hi]))
        }
        if dropLastChunk { parts.removeLast() }
        // Insert in reverse so they end up in order after the main XMP.
        for p in parts.reversed() { out = insertSegment(0xE1, p, into: out) }
        return out
    }

    /// A Dynamic Depth JPEG: primary + container items appended (depth, optional confidence).
    static func dynamicDepthJPEG(
        primary: Image<UInt8>, depthItem: [UInt8], depthMime: String, format: String,
        near: Double, far: Double, units: String = "Meters",
        extraItems: [(mime: String, semantic: String, bytes: [UInt8])] = []
    ) -> [UInt8] {
        var items = """
            <rdf:li rdf:parseType="Resource"><Container:Item Item:Mime="image/jpeg" Item:Semantic="Primary"/></rdf:li>\
            <rdf:li rdf:parseType="Resource"><Container:Item Item:Mime="\(depthMime)" Item:Semantic="Depth" \
            Item:Length="\(depthItem.count)" Item:DataURI="android/depthmap"/></rdf:li>
            """
        for e in extraItems {
            items +=
                "<rdf:li rdf:parseType=\"Resource\"><Container:Item Item:Mime=\"\(e.mime)\" "
                + "Item:Semantic=\"\(e.semantic)\" Item:Length=\"\(e.bytes.count)\"/></rdf:li>"
        }
        let desc = """
            >
            <Device:Container><rdf:Description><Container:Directory><rdf:Seq>\(items)\
            </rdf:Seq></Container:Directory></rdf:Description></Device:Container>
            <Device:Cameras><rdf:Seq><rdf:li rdf:parseType="Resource"><Device:Camera><rdf:Description>\
            <Camera:DepthMap><rdf:Description DepthMap:Format="\(format)" DepthMap:Near="\(near)" \
            DepthMap:Far="\(far)" DepthMap:Units="\(units)" DepthMap:DepthURI="android/depthmap" \
            DepthMap:ItemSemantic="Depth"/></Camera:DepthMap>\
            </rdf:Description></Device:Camera></rdf:li></rdf:Seq></Device:Cameras>
            """
        let xmp = xmpPacket(
            desc,
            namespaces: [
                "Device": XMPNamespace.ddDevice, "Container": XMPNamespace.ddContainer,
                "Item": XMPNamespace.ddItem, "Camera": XMPNamespace.ddCamera, "DepthMap": XMPNamespace.ddDepthMap
            ])
        return insertSegment(0xE1, xmpSegment(xmp), into: jpeg(primary)) + depthItem + extraItems.flatMap { $0.bytes }
    }

    /// A minimal uncompressed little-endian TIFF of Float16 samples (one strip, one channel).
    static func float16TIFF(_ values: [Float], width: Int, height: Int) -> [UInt8] {
        var b: [UInt8] = [0x49, 0x49, 0x2A, 0x00]
        func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF)] }
        func le32(_ v: Int) -> [UInt8] { le16(v & 0xFFFF) + le16(v >> 16) }
        let dataOffset = 8
        let data = values.flatMap { le16(Int(Float16($0).bitPattern)) }
        let ifdOffset = dataOffset + data.count
        b += le32(ifdOffset) + data
        let tags: [(Int, Int, Int)] = [
            (256, 3, width), (257, 3, height), (258, 3, 16), (259, 3, 1), (262, 3, 1),
            (273, 4, dataOffset), (277, 3, 1), (278, 3, height), (279, 4, data.count), (339, 3, 3)
        ]
        b += le16(tags.count)
        for (tag, type, value) in tags {
            b += le16(tag) + le16(type) + le32(1) + (type == 3 ? le16(value) + [0, 0] : le32(value))
        }
        b += le32(0)
        return b
    }
}
