import EvanescoCore
import Foundation

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
        case .png, .tiff, .raw:
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
            let read = try heifEncoding(sei: sei, xmp: xmp, intMax: intMax, path: path, warnings: &out.warnings)
            var kind = read.kind
            let encoding = read.encoding, notes = read.notes
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

    /// How a HEIF depth item's samples become values: from the depth representation SEI
    /// (d_min/d_max, checked against the apdi XMP range when both are there), else from the XMP.
    static func heifEncoding(
        sei: HeifImageHandle.DepthRepresentation?, xmp: XMPDocument?, intMax: Double, path: String,
        warnings: inout [String]
    ) throws -> (kind: DepthKind, encoding: DepthEncoding, notes: [String]) {
        var notes: [String] = []
        var kind: DepthKind = .disparity
        let encoding: DepthEncoding
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
                if !agree { warnings.append(notes.last!) }
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
        return (kind, encoding, notes)
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
    /// What a separate map holds when the caller does not say: disparity, as most depth models
    /// and stereo matchers give (the command line's `--depth-kind`, the C interface's NULL).
    public static let separateMapKind = DepthKind.disparity

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
        photo path: String, depthMap mapPath: String, kind: DepthKind = separateMapKind,
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
        return try pair(photo: photo, path: path, map: stored, mapName: mapPath, kind: kind)
    }

    /// A decoded photo and a map in memory as one ``DepthPhoto``, read as
    /// ``read(photo:depthMap:kind:limits:)`` reads the two files (the C interface passes arrays).
    ///
    /// - Parameters:
    ///   - photo: The photo, upright.
    ///   - path: The photo's name in errors and reports.
    ///   - stored: The map's samples (the first channel is used): 8 and 16-bit as relative values,
    ///     float as they are.
    ///   - mapPath: The map's name in errors and reports.
    ///   - kind: Disparity (larger is nearer) or depth.
    /// - Returns: The photo with the map as its depth.
    /// - Throws: ``DepthError/unsupported(path:detail:)`` when the map's shape differs from the
    ///   photo's or the map has no usable value.
    public static func pair(
        photo: DecodedImage, path: String, map stored: AnyImage, mapName mapPath: String, kind: DepthKind
    ) throws -> DepthPhoto {
        let stored = stored.firstChannel
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
                    "the depth map is \(mw)x\(mh) but the photo is \(pw)x\(ph); give a map of the photo's shape "
                    + "(rotated or cropped the same way)"
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
