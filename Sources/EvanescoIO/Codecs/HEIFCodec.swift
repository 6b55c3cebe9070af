import CHeif
import EvanescoCore

/// Owns a heif_context.
final class HeifContext {
    let ctx: OpaquePointer
    /// The file bytes: libheif reads them in place, so they live as long as the context.
    let bytes: [UInt8]
    init(bytes: [UInt8], path: String) throws {
        guard evn_heif_available() != 0 else {
            throw ImageIOError.unsupportedFormat(
                path: path, format: "HEIF (libheif.so.1 could not be loaded: install libheif1)")
        }
        guard let c = evn_heif_context_alloc() else {
            throw ImageIOError.corrupt(path: path, format: "HEIF", detail: "cannot allocate a decoder")
        }
        ctx = c
        self.bytes = bytes
        let err = self.bytes.withUnsafeBytes {
            evn_heif_context_read_from_memory_without_copy(c, $0.baseAddress, $0.count, nil)
        }
        if err.code != heif_error_Ok { throw HEIFCodec.error(err, path: path) }
    }
    deinit { evn_heif_context_free(ctx) }

    func primaryHandle(path: String) throws -> HeifImageHandle {
        var h: OpaquePointer? = nil
        let err = evn_heif_context_get_primary_image_handle(ctx, &h)
        guard err.code == heif_error_Ok, let h else { throw HEIFCodec.error(err, path: path) }
        return HeifImageHandle(h, owner: self)
    }
}

/// Owns a heif_image_handle (keeps its context alive).
final class HeifImageHandle {
    let handle: OpaquePointer
    let owner: HeifContext
    init(_ h: OpaquePointer, owner: HeifContext) {
        handle = h
        self.owner = owner
    }
    deinit { evn_heif_image_handle_release(handle) }

    var width: Int { Int(evn_heif_image_handle_get_width(handle)) }
    var height: Int { Int(evn_heif_image_handle_get_height(handle)) }
    var hasAlpha: Bool { evn_heif_image_handle_has_alpha_channel(handle) != 0 }
    var lumaBits: Int { Int(evn_heif_image_handle_get_luma_bits_per_pixel(handle)) }

    /// Metadata blocks of a type ("Exif", "mime" for XMP).
    func metadata(type: String) -> [[UInt8]] {
        let n = Int(evn_heif_image_handle_get_number_of_metadata_blocks(handle, type))
        guard n > 0 else { return [] }
        var ids = [heif_item_id](repeating: 0, count: n)
        let got = Int(evn_heif_image_handle_get_list_of_metadata_block_IDs(handle, type, &ids, Int32(n)))
        return ids.prefix(got).compactMap { id in
            let size = evn_heif_image_handle_get_metadata_size(handle, id)
            guard size > 0, size < 64 << 20 else { return nil }
            var buf = [UInt8](repeating: 0, count: size)
            let err = evn_heif_image_handle_get_metadata(handle, id, &buf)
            return err.code == heif_error_Ok ? buf : nil
        }
    }

    var iccProfile: [UInt8]? {
        let size = evn_heif_image_handle_get_raw_color_profile_size(handle)
        guard size > 0, size < 16 << 20 else { return nil }
        var buf = [UInt8](repeating: 0, count: size)
        return evn_heif_image_handle_get_raw_color_profile(handle, &buf).code == heif_error_Ok ? buf : nil
    }

    /// Types of auxiliary images (depth first, then alpha-less aux items such as Apple's mattes).
    var auxiliaryTypes: [String] {
        var types: [String] = []
        let nDepth = Int(evn_heif_image_handle_get_number_of_depth_images(handle))
        types += Array(repeating: "depth", count: nDepth)
        let filter = Int32(LIBHEIF_AUX_IMAGE_FILTER_OMIT_ALPHA | LIBHEIF_AUX_IMAGE_FILTER_OMIT_DEPTH)
        let n = Int(evn_heif_image_handle_get_number_of_auxiliary_images(handle, filter))
        if n > 0 {
            var ids = [heif_item_id](repeating: 0, count: n)
            let got = Int(evn_heif_image_handle_get_list_of_auxiliary_image_IDs(handle, filter, &ids, Int32(n)))
            for id in ids.prefix(got) {
                var aux: OpaquePointer? = nil
                guard evn_heif_image_handle_get_auxiliary_image_handle(handle, id, &aux).code == heif_error_Ok, let aux
                else { continue }
                defer { evn_heif_image_handle_release(aux) }
                var type: UnsafePointer<CChar>? = nil
                if evn_heif_image_handle_get_auxiliary_type(aux, &type).code == heif_error_Ok, let t = type {
                    types.append(String(cString: t))
                    evn_heif_image_handle_free_auxiliary_types(aux, &type)
                }
            }
        }
        return types
    }
}

/// Owns a decoded heif_image.
final class HeifDecodedImage {
    let image: OpaquePointer
    init(_ i: OpaquePointer) { image = i }
    deinit { evn_heif_image_release(image) }
}

enum HEIFCodec {
    /// The decoder's own lines, said once as ours when the decode still succeeded.
    static func warn(_ said: [String], path: String) {
        guard !said.isEmpty else { return }
        let line = "evanesco: warning: \(path): the HEVC decoder reported: \(said.prefix(3).joined(separator: "; "))\n"
        _ = WriteFailure.writeAll(Array(line.utf8), to: 2)
    }

    static func error(_ e: heif_error, path: String, decoderSaid: [String] = []) -> ImageIOError {
        var msg = (e.message.map { String(cString: $0) } ?? "libheif error \(e.code.rawValue)")
            .split(whereSeparator: \.isNewline).joined(separator: " ").trimmingWhitespace
        if !decoderSaid.isEmpty { msg += "; the HEVC decoder said: " + decoderSaid.prefix(3).joined(separator: "; ") }
        if e.code == heif_error_Invalid_input && (e.subcode == heif_suberror_End_of_data) {
            return .truncated(path: path, format: "HEIF", detail: msg)
        }
        if e.code == heif_error_Memory_allocation_error || e.subcode == heif_suberror_Security_limit_exceeded {
            // libheif's own limits refused a declared size before decoding; it gives no numbers we
            // could check ourselves, so its message is passed on.
            return .corrupt(
                path: path, format: "HEIF",
                detail: "it declares an image beyond libheif's security limits (\(msg)); the file is damaged or hostile"
            )
        }
        let lower = msg.lowercased()
        if lower.contains("end of data") || lower.contains("truncat") || lower.contains("premature") {
            return .truncated(path: path, format: "HEIF", detail: msg)
        }
        return .corrupt(path: path, format: "HEIF", detail: msg)
    }

    /// Reads metadata of the primary image (orientation comes from EXIF; libheif applies the
    /// container's irot/imir itself, so the pixels it returns are already upright).
    static func metadata(_ h: HeifImageHandle) -> ImageMetadata {
        var meta = ImageMetadata()
        if let block = h.metadata(type: "Exif").first, block.count > 4 {
            // HEIF's Exif item starts with a 4-byte offset to the TIFF header.
            let off = 4 + (Int(block[0]) << 24 | Int(block[1]) << 16 | Int(block[2]) << 8 | Int(block[3]))
            if off < block.count { meta.exif = Array(block[off...]) }
        }
        meta.xmp = h.metadata(type: "mime").first
        meta.icc = h.iccProfile
        if let exif = meta.exif { meta.orientation = EXIF.orientation(in: exif) ?? .up }
        meta.orientationApplied = true
        return meta
    }

    static func decode(_ bytes: [UInt8], path: String, limits: DecodeLimits, headerOnly: Bool = false) throws
        -> DecodedImage
    {
        let ctx = try HeifContext(bytes: bytes, path: path)
        return try decode(ctx.primaryHandle(path: path), path: path, limits: limits, headerOnly: headerOnly)
    }

    static func decode(_ h: HeifImageHandle, path: String, limits: DecodeLimits, headerOnly: Bool = false) throws
        -> DecodedImage
    {
        let w = h.width, ht = h.height
        try limits.check(width: w, height: ht, path: path)
        let meta = metadata(h)
        let alpha = h.hasAlpha, deep = h.lumaBits > 8
        let channels = alpha ? 4 : 3
        if headerOnly {
            let img: AnyImage =
                deep
                ? .uint16(Image(width: 0, height: 0, channels: channels))
                : .uint8(Image(width: 0, height: 0, channels: channels))
            return DecodedImage(
                image: img, format: .heif, metadata: meta, storedWidth: w, storedHeight: ht, auxiliary: h.auxiliaryTypes
            )
        }
        let chroma =
            deep
            ? (alpha ? heif_chroma_interleaved_RRGGBBAA_LE : heif_chroma_interleaved_RRGGBB_LE)
            : (alpha ? heif_chroma_interleaved_RGBA : heif_chroma_interleaved_RGB)
        var out: OpaquePointer? = nil
        let (err, said) = LibraryStderr.capture {
            evn_heif_decode_image(h.handle, &out, heif_colorspace_RGB, chroma, nil)
        }
        guard err.code == heif_error_Ok, let out else { throw error(err, path: path, decoderSaid: said) }
        warn(said, path: path)
        let decoded = HeifDecodedImage(out)
        let dw = Int(evn_heif_image_get_width(decoded.image, heif_channel_interleaved))
        let dh = Int(evn_heif_image_get_height(decoded.image, heif_channel_interleaved))
        var stride: Int32 = 0
        guard let plane = evn_heif_image_get_plane_readonly(decoded.image, heif_channel_interleaved, &stride), dw > 0,
            dh > 0
        else {
            throw ImageIOError.corrupt(path: path, format: "HEIF", detail: "decoder returned no pixels")
        }
        func copy<S: PixelSample>(_: S.Type, scale: Float?) -> Image<S> {
            Image<S>(uninitializedWidth: dw, height: dh, channels: channels) { dst in
                let rowBytes = dw * channels * MemoryLayout<S>.size
                let dstRaw = UnsafeMutableRawPointer(dst.baseAddress!)
                let st = Int(stride)
                StripExecutor.forEachStrip(rows: dh, minimumRows: 64) { rows in
                    for y in rows { (dstRaw + y * rowBytes).copyMemory(from: plane + y * st, byteCount: rowBytes) }
                    if let scale {
                        // 10/12-bit samples to the full 16-bit range.
                        let p = dstRaw.assumingMemoryBound(to: UInt16.self)
                        for i in (rows.lowerBound * dw * channels)..<(rows.upperBound * dw * channels) {
                            p[i] = UInt16(min(65535, Float(p[i]) * scale + 0.5))
                        }
                    }
                }
            }
        }
        let image: AnyImage
        if deep {
            let bits = Int(evn_heif_image_get_bits_per_pixel_range(decoded.image, heif_channel_interleaved))
            image = .uint16(copy(UInt16.self, scale: bits < 16 ? 65535 / Float((1 << max(bits, 1)) - 1) : nil))
        } else {
            image = .uint8(copy(UInt8.self, scale: nil))
        }
        return DecodedImage(
            image: image, format: .heif, metadata: meta, storedWidth: w, storedHeight: ht, auxiliary: h.auxiliaryTypes)
    }
}

/// Depth and auxiliary items of a HEIF image.
extension HeifImageHandle {
    struct DepthRepresentation {
        var type: Int  // heif_depth_representation_type
        var dMin: Double?, dMax: Double?, zNear: Double?, zFar: Double?
    }

    var depthImageIDs: [heif_item_id] {
        let n = Int(evn_heif_image_handle_get_number_of_depth_images(handle))
        guard n > 0 else { return [] }
        var ids = [heif_item_id](repeating: 0, count: n)
        let got = Int(evn_heif_image_handle_get_list_of_depth_image_IDs(handle, &ids, Int32(n)))
        return Array(ids.prefix(got))
    }

    func depthHandle(_ id: heif_item_id, path: String) throws -> HeifImageHandle {
        var d: OpaquePointer? = nil
        let err = evn_heif_image_handle_get_depth_image_handle(handle, id, &d)
        guard err.code == heif_error_Ok, let d else { throw HEIFCodec.error(err, path: path) }
        return HeifImageHandle(d, owner: owner)
    }

    /// The depth representation SEI (ISO/IEC 23008-2 depth_representation_info), if present.
    func depthRepresentation(_ id: heif_item_id) -> DepthRepresentation? {
        var info: UnsafePointer<heif_depth_representation_info>? = nil
        guard evn_heif_image_handle_get_depth_image_representation_info(handle, id, &info) != 0, let info else {
            return nil
        }
        defer { evn_heif_depth_representation_info_free(info) }
        let i = info.pointee
        return DepthRepresentation(
            type: Int(i.depth_representation_type.rawValue),
            dMin: i.has_d_min != 0 ? i.d_min : nil, dMax: i.has_d_max != 0 ? i.d_max : nil,
            zNear: i.has_z_near != 0 ? i.z_near : nil, zFar: i.has_z_far != 0 ? i.z_far : nil)
    }

    /// Auxiliary items other than alpha and depth, with their auxC type (Apple's matte URNs, gain map).
    func auxiliaryHandles() -> [(type: String, handle: HeifImageHandle)] {
        let filter = Int32(LIBHEIF_AUX_IMAGE_FILTER_OMIT_ALPHA | LIBHEIF_AUX_IMAGE_FILTER_OMIT_DEPTH)
        let n = Int(evn_heif_image_handle_get_number_of_auxiliary_images(handle, filter))
        guard n > 0 else { return [] }
        var ids = [heif_item_id](repeating: 0, count: n)
        let got = Int(evn_heif_image_handle_get_list_of_auxiliary_image_IDs(handle, filter, &ids, Int32(n)))
        var out: [(String, HeifImageHandle)] = []
        for id in ids.prefix(got) {
            var aux: OpaquePointer? = nil
            guard evn_heif_image_handle_get_auxiliary_image_handle(handle, id, &aux).code == heif_error_Ok, let aux
            else { continue }
            let h = HeifImageHandle(aux, owner: owner)
            var type: UnsafePointer<CChar>? = nil
            if evn_heif_image_handle_get_auxiliary_type(aux, &type).code == heif_error_Ok, let t = type {
                out.append((String(cString: t), h))
                evn_heif_image_handle_free_auxiliary_types(aux, &type)
            }
        }
        return out
    }

    /// Decodes a single-channel item as stored: 8-bit samples, or 9..16-bit samples unscaled
    /// (the caller maps them with IntMax = 2^bits - 1). `ignoreTransformations` keeps sensor
    /// orientation (no irot/imir/clap).
    func decodeMonochrome(path: String, limits: DecodeLimits, ignoreTransformations: Bool) throws -> (
        image: AnyImage, bits: Int
    ) {
        try limits.check(width: width, height: height, path: path)
        guard let options = evn_heif_decoding_options_alloc() else {
            throw ImageIOError.corrupt(path: path, format: "HEIF", detail: "cannot allocate decoding options")
        }
        defer { evn_heif_decoding_options_free(options) }
        options.pointee.ignore_transformations = ignoreTransformations ? 1 : 0
        var out: OpaquePointer? = nil
        let (err, said) = LibraryStderr.capture {
            evn_heif_decode_image(handle, &out, heif_colorspace_monochrome, heif_chroma_monochrome, options)
        }
        guard err.code == heif_error_Ok, let out else { throw HEIFCodec.error(err, path: path, decoderSaid: said) }
        HEIFCodec.warn(said, path: path)
        let decoded = HeifDecodedImage(out)
        let w = Int(evn_heif_image_get_width(decoded.image, heif_channel_Y))
        let h = Int(evn_heif_image_get_height(decoded.image, heif_channel_Y))
        let bits = Int(evn_heif_image_get_bits_per_pixel_range(decoded.image, heif_channel_Y))
        var stride: Int32 = 0
        guard w > 0, h > 0, let plane = evn_heif_image_get_plane_readonly(decoded.image, heif_channel_Y, &stride) else {
            throw ImageIOError.corrupt(path: path, format: "HEIF", detail: "the auxiliary image decoded to no pixels")
        }
        let st = Int(stride)
        if bits <= 8 {
            return (
                .uint8(
                    Image<UInt8>(uninitializedWidth: w, height: h, channels: 1) { d in
                        for y in 0..<h { for x in 0..<w { d[y * w + x] = plane[y * st + x] } }
                    }), 8
            )
        }
        let raw = UnsafeRawPointer(plane)
        return (
            .uint16(
                Image<UInt16>(uninitializedWidth: w, height: h, channels: 1) { d in
                    for y in 0..<h {
                        for x in 0..<w {
                            d[y * w + x] = raw.loadUnaligned(fromByteOffset: y * st + 2 * x, as: UInt16.self)
                        }
                    }
                }), bits
        )
    }
}
