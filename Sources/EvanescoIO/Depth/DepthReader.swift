import EvanescoCore
import Foundation

/// Why depth could not be read. Every case names the file and says what to do.
public enum DepthError: Error, Equatable, CustomStringConvertible, LocalizedError {
    /// The photo carries no depth or disparity map.
    case noDepth(path: String, found: [String])
    /// The requested auxiliary image is not in the file.
    case auxiliaryNotFound(path: String, kind: String, available: [String])
    /// Depth metadata is missing fields, malformed or hostile.
    case badMetadata(path: String, detail: String)
    /// Embedded data points outside the file or does not decode.
    case damaged(path: String, detail: String)
    case unsupported(path: String, detail: String)

    public var description: String {
        switch self {
        case .noDepth(let p, let f):
            "\(p): this photo has no depth or disparity map\(f.isEmpty ? "" : " (it carries: \(f.joined(separator: ", ")))"). Use a Portrait-mode photo from an iPhone (HEIC or JPEG) or an Android/Google camera (GDepth or Dynamic Depth JPEG)"
        case .auxiliaryNotFound(let p, let k, let a):
            "\(p): no \(k) image in this file; it has: \(a.isEmpty ? "none" : a.joined(separator: ", "))"
        case .badMetadata(let p, let d): "\(p): the depth metadata is unusable (\(d))"
        case .damaged(let p, let d): "\(p): the embedded depth data is damaged (\(d)); re-copy or re-export the photo"
        case .unsupported(let p, let d): "\(p): \(d)"
        }
    }
    public var errorDescription: String? { description }
}

/// Which of Google's two depth polarities to assume for GDepth maps.
public enum GDepthPolarity: String, Sendable, CaseIterable {
    /// The published encoding: a normalised value of 0 is Near, 1 is Far.
    case spec
    /// Inverted: high values are near (maps exported by some editors as a "white is near" image).
    case nearIsHigh = "near-high"
    /// Spec, unless the file's GFocus focal point and distance fit the inverted reading better.
    case auto
}

/// What to read.
public struct DepthReadOptions: Sendable {
    /// Decode the primary image too.
    public var decodePhoto = true
    /// Keep depth and auxiliary images in sensor orientation (as stored) instead of the photo's.
    public var sensorOrientation = false
    /// Auxiliary kinds to decode; the others are only listed with their sizes.
    public var decodeAuxiliary: Set<AuxiliaryKind> = []
    /// How GDepth maps are read.
    public var gdepthPolarity = GDepthPolarity.auto
    /// Require a depth map (throw `DepthError.noDepth` when absent).
    public var requireDepth = true
    /// Size limits for the photo and every embedded image.
    public var limits = DecodeLimits.standard
    /// Decode the photo and require depth; auxiliary images are listed, not decoded.
    public init() {}

    /// Limits for images inside a photo (depth, mattes, GDepth maps): never more pixels than the
    /// photo itself (at least 4 MP), so a small file cannot declare a huge hidden map.
    func embeddedLimits(photoWidth: Int, photoHeight: Int) -> DecodeLimits {
        limits.tightened(toPixels: max(photoWidth * photoHeight, 1 << 22))
    }
}

/// Reads depth, disparity and auxiliary images from iPhone HEIC and JPEG (MPF) photos, Google
/// GDepth JPEGs (XMP and extended XMP) and Android Dynamic Depth JPEGs (container items).
public enum DepthReader {
    /// Reads a portrait photo's depth and auxiliary images (AVDepthData's and
    /// `CGImageSourceCopyAuxiliaryDataInfoAtIndex`'s counterpart).
    ///
    /// - Parameters:
    ///   - path: A HEIC, JPEG, PNG or TIFF file.
    ///   - options: What to decode.
    /// - Returns: The photo, its depth and its auxiliary images, with warnings for damaged parts skipped.
    /// - Throws: ``DepthError`` (no depth when required, bad metadata, damaged embedded data) and `ImageIOError`.
    public static func read(_ path: String, options: DepthReadOptions = DepthReadOptions()) throws -> DepthPhoto {
        let bytes = try InputFile.read(path)
        return try read(bytes: bytes, path: path, options: options)
    }

    /// Reads a portrait photo already in memory.
    ///
    /// - Parameters:
    ///   - bytes: The file's bytes.
    ///   - path: A name for messages and ``DepthPhoto/path``.
    ///   - options: What to decode.
    /// - Returns: The photo, its depth and its auxiliary images.
    /// - Throws: ``DepthError`` and `ImageIOError`, as ``read(_:options:)``.
    public static func read(bytes: [UInt8], path: String, options: DepthReadOptions = DepthReadOptions()) throws
        -> DepthPhoto
    {
        var result: DepthPhoto
        switch try ImageCodecs.format(of: bytes, path: path) {
        case .heif: result = try readHEIF(bytes, path: path, options: options)
        case .jpeg: result = try readJPEG(bytes, path: path, options: options)
        case .png, .tiff:
            let photo: DecodedImage
            (result, photo) = try primary(bytes, path: path, options: options)
            if let xmp = photo.metadata.xmp {
                try readGoogle(
                    bytes: bytes, xmp: xmp, extended: nil, into: &result, path: path, options: options,
                    containerStart: nil)
            }
        }
        if options.requireDepth && result.depth == nil {
            throw DepthError.noDepth(path: path, found: result.auxiliary.map { $0.type })
        }
        return result
    }

    /// The primary image of a JPEG, PNG or TIFF (upright, through `ImageCodecs.decode`), or only
    /// its header, as an empty `DepthPhoto` to fill.
    static func primary(_ bytes: [UInt8], path: String, options: DepthReadOptions) throws -> (DepthPhoto, DecodedImage)
    {
        let read = ReadOptions(limits: options.limits)
        let photo =
            options.decodePhoto
            ? try ImageCodecs.decode(bytes, path: path, options: read)
            : try ImageCodecs.probe(bytes: bytes, path: path, limits: options.limits)
        let o = photo.metadata.orientation
        let (w, h) = o.swapsAxes ? (photo.storedHeight, photo.storedWidth) : (photo.storedWidth, photo.storedHeight)
        return (
            DepthPhoto(
                path: path, format: photo.format, photo: options.decodePhoto ? photo : nil, width: w, height: h,
                orientation: o, depth: nil, auxiliary: [], warnings: []), photo
        )
    }

    // MARK: HEIF

    static func readHEIF(_ bytes: [UInt8], path: String, options: DepthReadOptions) throws -> DepthPhoto {
        let ctx = try HeifContext(bytes: bytes, path: path)
        let primary = try ctx.primaryHandle(path: path)
        let photo = try HEIFCodec.decode(primary, path: path, limits: options.limits, headerOnly: !options.decodePhoto)
        let o = photo.metadata.orientation
        // libheif reports the size after the item's irot/imir, i.e. the upright size.
        let (w, h) = (primary.width, primary.height)
        var out = DepthPhoto(
            path: path, format: .heif, photo: options.decodePhoto ? photo : nil, width: w, height: h,
            orientation: o, depth: nil, auxiliary: [], warnings: [])
        let orient: Orientation = options.sensorOrientation ? .up : o
        let embeddedLimits = options.embeddedLimits(photoWidth: w, photoHeight: h)

        if let id = primary.depthImageIDs.first {
            let dh = try primary.depthHandle(id, path: path)
            let (stored, bits) = try dh.decodeMonochrome(
                path: path, limits: embeddedLimits, ignoreTransformations: true)
            let intMax = Double((1 << bits) - 1)
            let xmpBytes = dh.metadata(type: "mime").first
            let xmp = try xmpBytes.map { try parseXMP($0, path: path) }
            let sei = primary.depthRepresentation(id)
            var notes: [String] = []
            var kind: DepthKind = .disparity
            var encoding: DepthEncoding
            let xmpRange = xmp.flatMap { x -> (Double, Double, Double, Double)? in
                guard let a = x.double(XMPNamespace.apdi, "FloatMinValue"),
                    let b = x.double(XMPNamespace.apdi, "FloatMaxValue")
                else { return nil }
                return (
                    a, b, x.double(XMPNamespace.apdi, "IntMinValue") ?? 0,
                    x.double(XMPNamespace.apdi, "IntMaxValue") ?? intMax
                )
            }
            if let sei, let dmin = sei.dMin, let dmax = sei.dMax {
                switch sei.type {
                case 0, 1: kind = .disparity
                case 2: kind = .depth
                default:
                    throw DepthError.unsupported(
                        path: path,
                        detail: "the depth item uses a non-uniform disparity representation, which is not supported")
                }
                encoding = .linear(floatMin: dmin, floatMax: dmax, intMin: 0, intMax: intMax)
                if let r = xmpRange {
                    let agree =
                        abs(r.0 - dmin) <= 1e-4 * max(1, abs(dmin)) && abs(r.1 - dmax) <= 1e-4 * max(1, abs(dmax))
                    notes.append(
                        agree
                            ? "SEI d_min/d_max \(dmin)...\(dmax) and apdi FloatMinValue/FloatMaxValue agree"
                            : "SEI d_min/d_max \(dmin)...\(dmax) and apdi \(r.0)...\(r.1) disagree; the SEI is used")
                    if !agree { out.warnings.append(notes.last!) }
                } else {
                    notes.append("range from the SEI d_min/d_max (the item has no apdi range)")
                }
            } else if let r = xmpRange {
                encoding = .linear(floatMin: r.0, floatMax: r.1, intMin: r.2, intMax: r.3)
                notes.append("range from apdi FloatMinValue/FloatMaxValue (no depth representation SEI)")
            } else {
                throw DepthError.badMetadata(
                    path: path,
                    detail: "the depth item has neither a depth representation SEI nor apdi FloatMin/FloatMax values")
            }
            if let t = xmp?.value(XMPNamespace.apdi, "AuxiliaryImageType").map(AuxiliaryKind.classify) {
                let xmpKind: DepthKind = t == .depth ? .depth : .disparity
                if sei?.type != nil && xmpKind != kind {
                    out.warnings.append(
                        "the SEI says \(kind.rawValue) but apdi says \(xmpKind.rawValue); the SEI is used")
                }
                if sei == nil { kind = xmpKind }
            }
            var d = makeDepth(
                stored: stored, bits: bits, encoding: encoding, kind: kind, units: kind == .disparity ? "1/m" : "m",
                source: "HEIF depth item \(id)", orientation: orient)
            if case .linear(let a, let b, _, _) = encoding { d.declaredRange = min(a, b)...max(a, b) }
            d.rangeNotes = notes
            if let xmp { applyApple(xmp, to: &d) }
            out.depth = d
        }
        for (type, handle) in primary.auxiliaryHandles() {
            let kind = AuxiliaryKind.classify(type)
            var aux = AuxiliaryImage(
                kind: kind, type: type, image: .uint8(Image(width: 0, height: 0, channels: 1)),
                width: handle.width, height: handle.height, source: "HEIF auxiliary item")
            if orient.swapsAxes { swap(&aux.width, &aux.height) }
            if options.decodeAuxiliary.contains(kind) {
                let (img, _) = try handle.decodeMonochrome(
                    path: path, limits: embeddedLimits, ignoreTransformations: true)
                aux.image = img.map(orient)
            }
            out.auxiliary.append(aux)
        }
        return out
    }

    // MARK: JPEG

    static func readJPEG(_ bytes: [UInt8], path: String, options: DepthReadOptions) throws -> DepthPhoto {
        var (out, photo) = try primary(bytes, path: path, options: options)
        let orient: Orientation = options.sensorOrientation ? .up : out.orientation
        let embeddedLimits = options.embeddedLimits(photoWidth: out.width, photoHeight: out.height)

        // Apple: MPF secondary images, each identified by its own XMP.
        let index = MPFIndex.read(bytes)
        if index.damaged > 0 {
            out.warnings.append(
                "\(index.damaged) MPF image(s) point outside the file (truncated or damaged) and were skipped")
        }
        var mpfEnd = 0
        for (n, e) in index.entries.enumerated() {
            mpfEnd = max(mpfEnd, e.offset + e.size)
            let sub = Array(bytes[e.offset..<(e.offset + e.size)])
            let subPath = "\(path) (MPF image \(n + 2))"
            guard let segs = try? JPEGSegments(sub) else {
                out.warnings.append("MPF image \(n + 2) is not a JPEG; skipped")
                continue
            }
            let (xmp, typeName, kind) = try mpfImageType(sub, segments: segs, path: subPath)
            if (kind == .disparity || kind == .depth) && out.depth == nil, let xmp {
                guard let fmin = xmp.double(XMPNamespace.apdi, "FloatMinValue"),
                    let fmax = xmp.double(XMPNamespace.apdi, "FloatMaxValue")
                else {
                    throw DepthError.badMetadata(path: subPath, detail: "apdi:FloatMinValue/FloatMaxValue missing")
                }
                let imin = xmp.double(XMPNamespace.apdi, "IntMinValue") ?? 0,
                    imax = xmp.double(XMPNamespace.apdi, "IntMaxValue") ?? 255
                guard imax != imin else {
                    throw DepthError.badMetadata(path: subPath, detail: "apdi:IntMinValue equals IntMaxValue")
                }
                let decoded = try decodeEmbedded(sub, path: subPath, limits: embeddedLimits)
                let k: DepthKind = kind == .depth ? .depth : .disparity
                var d = makeDepth(
                    stored: decoded.image.firstChannel, bits: decoded.image.bitDepth,
                    encoding: .linear(floatMin: fmin, floatMax: fmax, intMin: imin, intMax: imax), kind: k,
                    units: k == .disparity ? "1/m" : "m", source: "JPEG MPF image \(n + 2)", orientation: orient)
                d.declaredRange = min(fmin, fmax)...max(fmin, fmax)
                d.rangeNotes = ["range from the MPF image's apdi FloatMinValue/FloatMaxValue, IntMinValue/IntMaxValue"]
                d.embeddedBytes = sub
                d.embeddedFormat = .jpeg
                applyApple(xmp, to: &d)
                out.depth = d
                continue
            }
            var aux = AuxiliaryImage(
                kind: kind, type: typeName, image: .uint8(Image(width: 0, height: 0, channels: 1)),
                width: 0, height: 0, source: "JPEG MPF image \(n + 2)", embeddedBytes: sub, embeddedFormat: .jpeg)
            if let hdr = try? ImageCodecs.decodeStored(
                sub, path: subPath, options: ReadOptions(limits: embeddedLimits), headerOnly: true)
            {
                (aux.width, aux.height) =
                    orient.swapsAxes ? (hdr.storedHeight, hdr.storedWidth) : (hdr.storedWidth, hdr.storedHeight)
            }
            if options.decodeAuxiliary.contains(kind) {
                aux.image = try decodeEmbedded(sub, path: subPath, limits: embeddedLimits).image.firstChannel.map(
                    orient)
            }
            out.auxiliary.append(aux)
        }
        if let xmp = photo.metadata.xmp {
            let segs = try? JPEGSegments(bytes)
            let extended = try segs.flatMap {
                try extendedXMP(bytes, segments: $0, path: path, warnings: &out.warnings)
            }
            try readGoogle(
                bytes: bytes, xmp: xmp, extended: extended, into: &out, path: path, options: options,
                containerStart: max(mpfEnd, 0))
        }
        return out
    }

    /// What an MPF image's own XMP says it is: `apdi:AuxiliaryImageSubType` when present (Apple
    /// files the portrait matte as type "depth" with sub-type "portraiteffectsmatte"), else
    /// `apdi:AuxiliaryImageType` ("disparity", "depth", a matte URN), else "mpf-image".
    static func mpfImageType(_ sub: [UInt8], segments: JPEGSegments, path: String) throws -> (
        xmp: XMPDocument?, type: String, kind: AuxiliaryKind
    ) {
        let xmp = try segments.metadata(in: sub).xmp.map { try parseXMP($0, path: path) }
        let type = xmp?.value(XMPNamespace.apdi, "AuxiliaryImageType")
        let subtype = xmp?.value(XMPNamespace.apdi, "AuxiliaryImageSubType")
        return (xmp, subtype ?? type ?? "mpf-image", AuxiliaryKind.classify(subtype ?? type ?? "other"))
    }

    /// What a JPEG carries besides its primary image, from headers only (nothing is decoded): each
    /// MPF image by its own XMP type, damaged MPF entries, and in the main XMP a GDepth map
    /// (`gdepth`), a GImage (`gimage`) or a Dynamic Depth or GContainer directory
    /// (`dynamic-depth-container`). The same parse ``read(bytes:path:options:)`` uses; an XMP
    /// packet that does not parse lists as `unreadable-xmp` instead of failing the read.
    static func auxiliaryNames(jpeg bytes: [UInt8], xmp: [UInt8]?) -> [String] {
        let index = MPFIndex.read(bytes)
        var out: [String] = index.entries.enumerated().map { n, e in
            let sub = Array(bytes[e.offset..<(e.offset + e.size)])
            guard let segs = try? JPEGSegments(sub) else { return "mpf-image" }
            return (try? mpfImageType(sub, segments: segs, path: "MPF image \(n + 2)").type) ?? "unreadable-xmp"
        }
        out += Array(repeating: "mpf-image-damaged", count: index.damaged)
        if let xmp {
            guard let main = try? parseXMP(xmp, path: "") else { return out + ["unreadable-xmp"] }
            if main.value(XMPNamespace.gDepth, "Format") != nil || main.value(XMPNamespace.gDepth, "Mime") != nil {
                out.append("gdepth")
            }
            if main.value(XMPNamespace.gImage, "Mime") != nil { out.append("gimage") }
            if !main.elements(XMPNamespace.ddContainer, "Item").isEmpty
                || !main.elements(XMPNamespace.gContainer, "Item").isEmpty
            {
                out.append("dynamic-depth-container")
            }
        }
        return out
    }

    // MARK: Google

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

        // Container items (Dynamic Depth, or the older GContainer).
        // Embedded formats come from their bytes, never from the declared Mime.
        var items: [(semantic: String, uri: String?, bytes: [UInt8])] = []
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
                        "the \(containerName) items need \(total) bytes after the primary image, which ends at byte \(primaryEnd) of \(bytes.count) (truncated?)"
                )
            }
            var at = bytes.count - total
            for (item, n) in zip(directory.dropFirst(), lengths) {
                items.append((item.semantic ?? "", item.uri, Array(bytes[at..<(at + n)])))
                at += n
            }
        }

        // Depth: Dynamic Depth DepthMap element, else GDepth properties with data in XMP or an item.
        var format: String?, near: Double?, far: Double?, units: String?, data: [UInt8]?, source = ""
        var confidence: [UInt8]?
        if let dm = main.elements(XMPNamespace.ddCamera, "DepthMap").first
            ?? main.elements(XMPNamespace.ddDepthMap, "DepthMap").first
        {
            func p(_ n: String) -> String? { dm.deepProperty(XMPNamespace.ddDepthMap, n) }
            format = p("Format")
            near = FileNumber.double(p("Near"))
            far = FileNumber.double(p("Far"))
            units = p("Units")
            let uri = p("DepthURI")
            let item =
                items.first { uri != nil && $0.uri == uri } ?? items.first { $0.semantic.lowercased() == "depth" }
            data = item?.bytes
            source = "Dynamic Depth item \(uri ?? item?.semantic ?? "")"
            if let curi = p("ConfidenceURI") { confidence = items.first { $0.uri == curi }?.bytes }
            if data == nil {
                throw DepthError.damaged(
                    path: path,
                    detail: "the Dynamic Depth DepthMap refers to item \(uri ?? "?"), which is not in the container")
            }
        } else if value(XMPNamespace.gDepth, "Format") != nil || value(XMPNamespace.gDepth, "Data") != nil {
            format = value(XMPNamespace.gDepth, "Format")
            near = FileNumber.double(value(XMPNamespace.gDepth, "Near"))
            far = FileNumber.double(value(XMPNamespace.gDepth, "Far"))
            units = value(XMPNamespace.gDepth, "Units")
            if let b64 = value(XMPNamespace.gDepth, "Data") {
                guard let d = Data(base64Encoded: b64, options: .ignoreUnknownCharacters), !d.isEmpty else {
                    throw DepthError.damaged(path: path, detail: "GDepth:Data is not valid base64")
                }
                data = Array(d)
                source =
                    extended != nil && main.value(XMPNamespace.gDepth, "Data") == nil
                    ? "GDepth (extended XMP)" : "GDepth (XMP)"
            } else if let item = items.first(where: { $0.semantic.lowercased() == "depth" }) {
                data = item.bytes
                source = "GContainer item Depth"
            }
            if let c = value(XMPNamespace.gDepth, "Confidence") {
                confidence = Data(base64Encoded: c, options: .ignoreUnknownCharacters).map(Array.init)
            }
        }
        if out.depth == nil, let data {
            guard let near, let far, near > 0, far > 0, near.isFinite, far.isFinite else {
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
                        "polarity \(nearIsHigh ? "high = near" : "spec (0 = near)") chosen: GFocus FocalDistance \(fd) at the focal point reads \(String(format: "%.3g", spec)) with the spec's polarity, \(String(format: "%.3g", inv)) inverted"
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
        if let confidence, let img = try? decodeEmbedded(confidence, path: path, limits: embeddedLimits) {
            out.auxiliary.append(
                AuxiliaryImage(
                    kind: .confidence, type: "confidence", image: img.image.firstChannel.map(orient),
                    width: img.image.width, height: img.image.height, source: "GDepth/Dynamic Depth confidence",
                    embeddedBytes: confidence, embeddedFormat: img.format))
        }
        // The unblurred original (Lens Blur's GImage) and other container items.
        if let b64 = value(XMPNamespace.gImage, "Data"),
            let d = Data(base64Encoded: b64, options: .ignoreUnknownCharacters)
        {
            let bytes = Array(d)
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
                        "the GImage original is \(original.width)x\(original.height), the photo \(out.width)x\(out.height): effects use the primary image, Google's blurred render"
                    )
                }
            }
            out.auxiliary.append(aux)
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

    // MARK: helpers

    static func parseXMP(_ bytes: [UInt8], path: String) throws -> XMPDocument {
        do { return try XMPDocument(bytes) } catch {
            throw DepthError.badMetadata(path: path, detail: error.description)
        }
    }

    static func decodeEmbedded(_ bytes: [UInt8], path: String, limits: DecodeLimits) throws -> DecodedImage {
        do {
            return try ImageCodecs.decodeStored(
                bytes, path: path, options: ReadOptions(applyOrientation: false, limits: limits), headerOnly: false)
        } catch let e as ImageIOError {
            throw DepthError.damaged(path: path, detail: e.description)
        }
    }

    static func makeDepth(
        stored raw: AnyImage, bits: Int, encoding: DepthEncoding, kind: DepthKind, units: String,
        source: String, orientation: Orientation
    ) -> DepthData {
        let stored = raw.map(orientation)
        let format: String
        switch stored {
        case .uint8: format = "8-bit"
        case .uint16: format = bits < 16 ? "\(bits)-bit" : "16-bit"
        case .float32: format = "float"
        }
        return DepthData(
            kind: kind, map: DepthData.decodeMap(stored, encoding: encoding, kind: kind), stored: stored,
            storedFormat: format, encoding: encoding, units: units, source: source, orientationApplied: orientation)
    }

    /// Apple's apdi/depthData fields: accuracy, filtering, quality and calibration.
    static func applyApple(_ x: XMPDocument, to d: inout DepthData) {
        let ns = XMPNamespace.depthData
        d.accuracy = x.value(ns, "Accuracy").flatMap { DepthAccuracy(rawValue: $0.lowercased()) }
        d.filtered = x.value(ns, "Filtered").map { $0.lowercased() == "true" || $0 == "1" }
        d.quality = x.value(ns, "Quality")
        var c = CameraCalibration()
        if let k = x.doubles(ns, "IntrinsicMatrix"), k.count == 9 {
            // Stored column-major (simd_float3x3 columns): transpose to row-major.
            c.intrinsics = [k[0], k[3], k[6], k[1], k[4], k[7], k[2], k[5], k[8]]
        }
        c.referenceWidth = FileNumber.int(exactly: x.double(ns, "IntrinsicMatrixReferenceWidth"), in: 1...1_000_000)
        c.referenceHeight = FileNumber.int(exactly: x.double(ns, "IntrinsicMatrixReferenceHeight"), in: 1...1_000_000)
        c.pixelSize = x.double(ns, "PixelSize")
        c.lensDistortion = x.doubles(ns, "LensDistortionCoefficients")
        c.inverseLensDistortion = x.doubles(ns, "InverseLensDistortionCoefficients")
        if let cx = x.double(ns, "LensDistortionCenterOffsetX"), let cy = x.double(ns, "LensDistortionCenterOffsetY") {
            c.lensDistortionCenter = [cx, cy]
        }
        c.extrinsics = x.doubles(ns, "ExtrinsicMatrix")
        if c != CameraCalibration() { d.calibration = c }
    }
}

extension ImageCodecs {
    /// Header-only read of bytes in memory.
    public static func probe(bytes: [UInt8], path: String, limits: DecodeLimits = .standard) throws -> DecodedImage {
        try decodeStored(bytes, path: path, options: ReadOptions(limits: limits), headerOnly: true)
    }
}

extension DepthReader {
    /// A photo and a separate depth or disparity map (a depth camera's frame, a depth-estimation
    /// model's output, a stereo disparity map), read as one ``DepthPhoto`` so that everything built
    /// for portrait photos works on the pair.
    ///
    /// 8- and 16-bit maps are read as relative values in 0...1 (sample / 255 or / 65535); PFM and
    /// float TIFF maps as they are. Disparity 0 and depth <= 0 are holes. The map may be smaller
    /// than the photo (it is scaled with the mask), but it must have the photo's shape.
    ///
    /// - Parameters:
    ///   - path: The photo (JPEG, PNG, TIFF or HEIC), read upright.
    ///   - mapPath: The map (PNG, JPEG, TIFF or PFM; the first channel is used), upright like the photo.
    ///   - kind: Whether larger values are nearer (``DepthKind/disparity``, as most depth-model
    ///     and stereo outputs) or farther (``DepthKind/depth``).
    ///   - limits: Decode limits for both files.
    /// - Returns: The photo with the map as its depth (relative accuracy, unless the map is float depth).
    /// - Throws: `ImageIOError` for unreadable files, ``DepthError/unsupported(path:detail:)`` when
    ///   the map's shape differs from the photo's or the map has no usable value.
    public static func read(
        photo path: String, depthMap mapPath: String, kind: DepthKind = .disparity,
        limits: DecodeLimits = .standard
    ) throws -> DepthPhoto {
        let photo = try ImageCodecs.read(path, options: ReadOptions(limits: limits))
        let mapBytes = try InputFile.read(mapPath)
        let stored: AnyImage
        if mapPath.lowercased().hasSuffix(".pfm") {
            stored = .float32(try PFM.decode(mapBytes, path: mapPath, limits: limits))
        } else {
            stored = try ImageCodecs.decode(mapBytes, path: mapPath, options: ReadOptions(limits: limits)).image
                .firstChannel
        }
        let encoding: DepthEncoding
        switch stored {
        case .uint8: encoding = .linear(floatMin: 0, floatMax: 1, intMin: 0, intMax: 255)
        case .uint16: encoding = .linear(floatMin: 0, floatMax: 1, intMin: 0, intMax: 65535)
        case .float32: encoding = .identity
        }
        var map = DepthData.decodeMap(stored, encoding: encoding, kind: kind)
        if kind == .disparity {
            // Disparity 0 is "infinitely far or unknown": a hole, as in stereo ground truth.
            map.samples.withUnsafeMutableBufferPointer { m in for i in m.indices where !(m[i] > 0) { m[i] = .nan } }
        }
        let (pw, ph) = (photo.image.width, photo.image.height), (mw, mh) = (map.width, map.height)
        guard abs(Double(pw) / Double(ph) - Double(mw) / Double(mh)) <= 0.02 * Double(pw) / Double(ph) else {
            throw DepthError.unsupported(
                path: mapPath,
                detail:
                    "the depth map is \(mw)x\(mh) but the photo is \(pw)x\(ph); give a map of the photo's shape (rotated or cropped the same way)"
            )
        }
        guard map.samples.contains(where: { $0.isFinite }) else {
            throw DepthError.unsupported(
                path: mapPath, detail: "the depth map has no usable value (all zero or unknown)")
        }
        let relative = stored.bitDepth <= 16
        let depth = DepthData(
            kind: kind, map: map, stored: stored,
            storedFormat: stored.bitDepth == 32 ? "float" : "\(stored.bitDepth)-bit",
            encoding: encoding, units: relative ? "relative" : (kind == .depth ? "m" : "1/m"),
            accuracy: relative ? .relative : .absolute, source: mapPath)
        return DepthPhoto(
            path: path, format: photo.format, photo: photo, width: pw, height: ph,
            orientation: photo.metadata.orientation,
            depth: depth, auxiliary: [], warnings: [])
    }
}
