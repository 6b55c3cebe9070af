import EvanescoCore
import Foundation

/// Google's depth photos: GDepth (XMP and extended XMP) and Dynamic Depth (container items).
extension DepthReader {
    // MARK: Google

    /// A container item: its semantic, its URI (Dynamic Depth) and its bytes.
    typealias ContainerItem = (semantic: String, uri: String?, bytes: [UInt8])

    /// Where a Google depth map was found and how it is encoded.
    struct GoogleDepth {
        var format: String?, near: Double?, far: Double?, units: String?, data: [UInt8]?, source = ""
        var confidence: [UInt8]?
    }

    /// GDepth (XMP, data in the extended XMP) and Dynamic Depth / GContainer items.
    static func readGoogle(
        bytes: [UInt8], xmp xmpBytes: [UInt8], extended: [UInt8]?, into out: inout DepthPhoto,
        path: String, options: DepthReadOptions, containerStart: Int?
    ) throws {
        let main = try parseXMP(xmpBytes, path: path)
        let ext = try extended.map { try parseXMP($0, path: path + " (extended XMP)") }
        func value(_ ns: String, _ name: String) -> String? { main.value(ns, name) ?? ext?.value(ns, name) }
        let orient: Orientation = options.sensorOrientation ? .up : out.orientation
        let embeddedLimits = options.embeddedLimits(photoWidth: out.width, photoHeight: out.height)
        let (items, containerName) = try containerItems(main, bytes: bytes, path: path, containerStart: containerStart)
        let found = try googleDepth(main, value: value, items: items, extended: extended != nil, path: path)
        if out.depth == nil, found.data != nil {
            try decodeGoogleDepth(
                found, value: value, into: &out, path: path, options: options, limits: embeddedLimits)
        }
        if let confidence = found.confidence,
            let img = try? decodeEmbedded(confidence, path: path, limits: embeddedLimits)
        {
            out.auxiliary.append(
                AuxiliaryImage(
                    kind: .confidence, type: "confidence", image: img.image.firstChannel.map(orient),
                    width: img.image.width, height: img.image.height, source: "GDepth/Dynamic Depth confidence",
                    embeddedBytes: confidence, embeddedFormat: img.format))
        }
        if let b64 = value(XMPNamespace.gImage, "Data"),
            let d = Data(base64Encoded: b64, options: .ignoreUnknownCharacters)
        {
            try readGImage(Array(d), into: &out, path: path, options: options)
        }
        for item in items where !["depth", "primary", "confidence"].contains(item.semantic.lowercased()) {
            let kind = AuxiliaryKind.classify(item.semantic)
            var aux = AuxiliaryImage(
                kind: kind, type: item.semantic, image: .uint8(Image(width: 0, height: 0, channels: 1)),
                width: 0, height: 0, source: "\(containerName) item", embeddedBytes: item.bytes)
            if let hdr = try? ImageCodecs.probe(bytes: item.bytes, path: path) {
                aux.width = hdr.storedWidth
                aux.height = hdr.storedHeight
                aux.embeddedFormat = hdr.format
                if options.decodeAuxiliary.contains(kind) {
                    aux.image = try ImageCodecs.decode(
                        item.bytes, path: path, options: ReadOptions(applyOrientation: false)
                    ).image.map(orient)
                }
            }
            out.auxiliary.append(aux)
        }
    }

    /// The items of a Dynamic Depth container (or the older GContainer): they follow the primary
    /// image back to back, the last one ending at the end of the file. Embedded formats come from
    /// their bytes, never from the declared Mime.
    static func containerItems(
        _ main: XMPDocument, bytes: [UInt8], path: String, containerStart: Int?
    ) throws -> (items: [ContainerItem], name: String) {
        var items: [ContainerItem] = []
        let dd = main.elements(XMPNamespace.ddContainer, "Item").map {
            (
                semantic: $0.deepProperty(XMPNamespace.ddItem, "Semantic"),
                length: $0.deepProperty(XMPNamespace.ddItem, "Length"),
                uri: $0.deepProperty(XMPNamespace.ddItem, "DataURI")
            )
        }
        let gc = main.elements(XMPNamespace.gContainer, "Item").map {
            (
                semantic: $0.deepProperty(XMPNamespace.gContainerItem, "Semantic"),
                length: $0.deepProperty(XMPNamespace.gContainerItem, "Length"), uri: String?.none
            )
        }
        let directory = dd.isEmpty ? gc : dd
        let containerName = dd.isEmpty ? "GContainer" : "Dynamic Depth container"
        if directory.count > 1 {
            // Items follow the primary image back to back; the last one ends at the end of the file.
            let lengths = try directory.dropFirst().map { item -> Int in
                guard let n = FileNumber.int(item.length, in: 0...Int(Int32.max)) else {
                    throw DepthError.badMetadata(
                        path: path, detail: "\(containerName) item \(item.semantic ?? "?") has no valid Length")
                }
                return n
            }
            let primaryEnd = max(containerStart ?? 0, MPFIndex.primaryEnd(bytes) ?? 2)
            guard let total = FileNumber.sum(lengths), total <= bytes.count - primaryEnd else {
                let total = FileNumber.sum(lengths).map(String.init) ?? "more than \(Int.max)"
                throw DepthError.damaged(
                    path: path,
                    detail:
                        "the \(containerName) items need \(total) bytes after the primary image, which ends at byte "
                        + "\(primaryEnd) of \(bytes.count) (truncated?)"
                )
            }
            var at = bytes.count - total
            for (item, n) in zip(directory.dropFirst(), lengths) {
                items.append((item.semantic ?? "", item.uri, Array(bytes[at..<(at + n)])))
                at += n
            }
        }

        return (items, containerName)
    }

    /// The depth map's encoding and bytes: a Dynamic Depth DepthMap element, else GDepth
    /// properties with the data in the XMP or in a container item.
    static func googleDepth(
        _ main: XMPDocument, value: (String, String) -> String?, items: [ContainerItem], extended: Bool,
        path: String
    ) throws -> GoogleDepth {
        var g = GoogleDepth()
        if let dm = main.elements(XMPNamespace.ddCamera, "DepthMap").first
            ?? main.elements(XMPNamespace.ddDepthMap, "DepthMap").first
        {
            func p(_ n: String) -> String? { dm.deepProperty(XMPNamespace.ddDepthMap, n) }
            g.format = p("Format")
            g.near = FileNumber.double(p("Near"))
            g.far = FileNumber.double(p("Far"))
            g.units = p("Units")
            let uri = p("DepthURI")
            let item =
                items.first { uri != nil && $0.uri == uri } ?? items.first { $0.semantic.lowercased() == "depth" }
            g.data = item?.bytes
            g.source = "Dynamic Depth item \(uri ?? item?.semantic ?? "")"
            if let curi = p("ConfidenceURI") { g.confidence = items.first { $0.uri == curi }?.bytes }
            if g.data == nil {
                throw DepthError.damaged(
                    path: path,
                    detail: "the Dynamic Depth DepthMap refers to item \(uri ?? "?"), which is not in the container")
            }
        } else if value(XMPNamespace.gDepth, "Format") != nil || value(XMPNamespace.gDepth, "Data") != nil {
            g.format = value(XMPNamespace.gDepth, "Format")
            g.near = FileNumber.double(value(XMPNamespace.gDepth, "Near"))
            g.far = FileNumber.double(value(XMPNamespace.gDepth, "Far"))
            g.units = value(XMPNamespace.gDepth, "Units")
            if let b64 = value(XMPNamespace.gDepth, "Data") {
                guard let d = Data(base64Encoded: b64, options: .ignoreUnknownCharacters), !d.isEmpty else {
                    throw DepthError.damaged(path: path, detail: "GDepth:Data is not valid base64")
                }
                g.data = Array(d)
                g.source =
                    extended && main.value(XMPNamespace.gDepth, "Data") == nil
                    ? "GDepth (extended XMP)" : "GDepth (XMP)"
            } else if let item = items.first(where: { $0.semantic.lowercased() == "depth" }) {
                g.data = item.bytes
                g.source = "GContainer item Depth"
            }
            if let c = value(XMPNamespace.gDepth, "Confidence") {
                g.confidence = Data(base64Encoded: c, options: .ignoreUnknownCharacters).map(Array.init)
            }
        }
        return g
    }

    /// Decodes a Google depth map into `out.depth`, its encoding from Near/Far/Format and, when
    /// the polarity is `auto`, from GFocus's focal distance.
    static func decodeGoogleDepth(
        _ g: GoogleDepth, value: (String, String) -> String?, into out: inout DepthPhoto, path: String,
        options: DepthReadOptions, limits embeddedLimits: DecodeLimits
    ) throws {
        guard let data = g.data else { return }
        let (format, source, units) = (g.format, g.source, g.units)
        let orient: Orientation = options.sensorOrientation ? .up : out.orientation
        guard let near = g.near, let far = g.far, near > 0, far > 0, near.isFinite, far.isFinite else {
            throw DepthError.badMetadata(path: path, detail: "\(source): Near/Far missing or not positive")
        }
        let decoded = try decodeEmbedded(data, path: "\(path) (\(source))", limits: embeddedLimits)
        let stored = decoded.image.firstChannel
        let intMax = decoded.image.bitDepth == 16 ? 65535.0 : 255.0
        let linear = (format ?? "RangeInverse").lowercased() == "rangelinear"
        let isFloat: Bool = if case .float32 = stored { true } else { false }
        func enc(_ hi: Bool) -> DepthEncoding {
            // Float storage (Float16/Float32 TIFF) holds the values themselves.
            isFloat
                ? .identity
                : linear
                    ? .rangeLinear(near: near, far: far, intMax: intMax, nearIsHigh: hi)
                    : .rangeInverse(near: near, far: far, intMax: intMax, nearIsHigh: hi)
        }
        var nearIsHigh = options.gdepthPolarity == .nearIsHigh
        var notes = ["range from Near \(near) / Far \(far) (\(format ?? "RangeInverse"))"]
        if options.gdepthPolarity == .auto {
            // GFocus (Lens Blur) gives the focal point and its distance: pick the polarity that
            // puts that distance at that point.
            // A focal point outside the image or a distance that is not a positive finite
            // number is ignored (the spec polarity is then used).
            if let fx = FileNumber.double(value(XMPNamespace.gFocus, "FocalPointX"), in: 0...1),
                let fy = FileNumber.double(value(XMPNamespace.gFocus, "FocalPointY"), in: 0...1),
                let fd = FileNumber.double(value(XMPNamespace.gFocus, "FocalDistance"), in: 1e-6...1e9)
            {
                let x = min(max(Int(fx * Double(stored.width)), 0), stored.width - 1)
                let y = min(max(Int(fy * Double(stored.height)), 0), stored.height - 1)
                let v: Float =
                    switch stored {
                    case .uint8(let i): i[x, y, 0].floatValue
                    case .uint16(let i): i[x, y, 0].floatValue
                    case .float32(let i): i[x, y, 0]
                    }
                let spec = Double(enc(false).decode(v)), inv = Double(enc(true).decode(v))
                nearIsHigh = abs(log(inv / fd)) < abs(log(spec / fd))
                notes.append(
                    "polarity \(nearIsHigh ? "high = near" : "spec (0 = near)") chosen: GFocus FocalDistance "
                        + "\(fd) at the focal point reads \(String(format: "%.3g", spec)) with the spec's "
                        + "polarity, \(String(format: "%.3g", inv)) inverted"
                )
            } else {
                notes.append("polarity: spec (0 = near); the file has no GFocus focal point to check it against")
            }
        }
        let u = units ?? "m"
        let isDiopters = u.lowercased().hasPrefix("diopter")
        let kind: DepthKind = isDiopters ? .disparity : .depth
        var d = makeDepth(
            stored: stored, bits: decoded.image.bitDepth, encoding: enc(nearIsHigh), kind: kind,
            units: isDiopters ? "1/m" : (u == "Meters" ? "m" : u), source: source, orientation: orient)
        d.declaredRange = min(near, far)...max(near, far)
        d.rangeNotes = notes
        d.embeddedBytes = data
        d.embeddedFormat = decoded.format
        out.depth = d
    }

    /// The unblurred original of a Lens Blur photo (its GImage): an auxiliary image and, as Lens
    /// Blur's primary image is Google's blurred render, the photo every effect starts from.
    static func readGImage(_ bytes: [UInt8], into out: inout DepthPhoto, path: String, options: DepthReadOptions) throws
    {
        let orient: Orientation = options.sensorOrientation ? .up : out.orientation
        var aux = AuxiliaryImage(
            kind: .original, type: "GImage original", image: .uint8(Image(width: 0, height: 0, channels: 3)),
            width: 0, height: 0, source: "GImage (XMP)", embeddedBytes: bytes, embeddedFormat: .jpeg)
        if let hdr = try? ImageCodecs.probe(bytes: bytes, path: path) {
            aux.width = hdr.storedWidth
            aux.height = hdr.storedHeight
        }
        if options.decodeAuxiliary.contains(.original) || options.decodePhoto {
            aux.image = try ImageCodecs.decode(bytes, path: path + " (GImage)").image
        }
        // Lens Blur's primary image is Google's blurred render; the depth belongs to the
        // original, so the photo every effect starts from is the original.
        if options.decodePhoto, var shown = out.photo {
            var original = aux.image
            if (original.width, original.height) != (out.width, out.height), orient != .up {
                original = original.map(orient)
            }
            if (original.width, original.height) == (out.width, out.height) {
                shown.image = original
                out.photo = shown
                out.photoSource = "the GImage original (the primary image is Google's Lens Blur render)"
            } else {
                out.warnings.append(
                    "the GImage original is \(original.width)x\(original.height), the photo "
                        + "\(out.width)x\(out.height): effects use the primary image, Google's blurred render"
                )
            }
        }
        out.auxiliary.append(aux)
    }

    /// Reassembles the extended XMP (Adobe XMP part 3: APP1 "http://ns.adobe.com/xmp/extension/"
    /// chunks keyed by a 32-character GUID, each with the full length and its offset). The chunks
    /// whose GUID the main XMP names are used; if none match, the one complete set is accepted
    /// with a warning (editors rewrite the main packet without updating the GUID).
    static func extendedXMP(_ bytes: [UInt8], segments: JPEGSegments, path: String, warnings: inout [String]) throws
        -> [UInt8]?
    {
        let sig = Array("http://ns.adobe.com/xmp/extension/".utf8) + [0]
        let chunks = segments.payloads(app: 1, signature: sig, in: bytes)
        guard !chunks.isEmpty else { return nil }
        var groups: [String: (total: Int, parts: [(Int, ArraySlice<UInt8>)])] = [:]
        var order: [String] = []
        for c in chunks {
            guard c.count >= 40 else {
                throw DepthError.damaged(path: path, detail: "an extended-XMP chunk is shorter than its header")
            }
            let s = c.startIndex
            let guid = String(decoding: c[s..<(s + 32)], as: UTF8.self)
            let total = Int(c[s + 32]) << 24 | Int(c[s + 33]) << 16 | Int(c[s + 34]) << 8 | Int(c[s + 35])
            let offset = Int(c[s + 36]) << 24 | Int(c[s + 37]) << 16 | Int(c[s + 38]) << 8 | Int(c[s + 39])
            if groups[guid] == nil {
                order.append(guid)
                groups[guid] = (total, [])
            }
            groups[guid]!.parts.append((offset, c[(s + 40)...]))
        }
        let mainXMP = segments.metadata(in: bytes).xmp.flatMap { try? XMPDocument($0) }
        let wanted = mainXMP?.value(XMPNamespace.xmpNote, "HasExtendedXMP")
        var guid = wanted.flatMap { groups[$0] != nil ? $0 : nil }
        if guid == nil {
            guid = order.max { (groups[$0]!.parts.count) < (groups[$1]!.parts.count) }
            warnings.append(
                "extended XMP GUID \(guid ?? "?") does not match HasExtendedXMP \(wanted ?? "(absent)"); accepted")
        }
        guard let guid, let g = groups[guid] else { return nil }
        let limit = XMPDocument.Limits().maxBytes
        guard g.total > 0, g.total <= limit else {
            throw DepthError.badMetadata(
                path: path, detail: "the extended XMP declares \(g.total) bytes (limit \(limit))")
        }
        var buf = [UInt8](repeating: 0, count: g.total)
        var covered = 0
        for (off, part) in g.parts.sorted(by: { $0.0 < $1.0 }) {
            guard off >= 0, off + part.count <= g.total else {
                throw DepthError.damaged(
                    path: path,
                    detail: "an extended-XMP chunk at offset \(off) runs past the declared length \(g.total)")
            }
            buf.replaceSubrange(off..<(off + part.count), with: part)
            covered += part.count
        }
        guard covered >= g.total else {
            throw DepthError.damaged(
                path: path, detail: "the extended XMP has \(covered) of its \(g.total) bytes (truncated file?)")
        }
        return buf
    }
}
