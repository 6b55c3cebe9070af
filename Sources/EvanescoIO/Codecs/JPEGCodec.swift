import CTurboJPEG
import EvanescoCore

/// Owns one TurboJPEG decompressor handle.
final class TurboJPEGDecompressor {
    let handle: tjhandle
    init() throws {
        guard let h = tjInitDecompress() else {
            throw ImageIOError.corrupt(path: "", format: "JPEG", detail: "cannot create a TurboJPEG decoder")
        }
        handle = h
    }
    deinit { tjDestroy(handle) }
    var lastError: String { String(cString: tjGetErrorStr2(handle)) }
    var lastErrorIsWarning: Bool { tjGetErrorCode(handle) == Int32(TJERR_WARNING.rawValue) }
}

/// Owns one TurboJPEG compressor handle.
final class TurboJPEGCompressor {
    let handle: tjhandle
    init() throws {
        guard let h = tjInitCompress() else {
            throw ImageIOError.encodeFailed(path: "", format: "JPEG", detail: "cannot create a TurboJPEG encoder")
        }
        handle = h
    }
    deinit { tjDestroy(handle) }
    var lastError: String { String(cString: tjGetErrorStr2(handle)) }
}

enum JPEGCodec {
    struct Header {
        var width: Int
        var height: Int
        var subsampling: Int32
        var colorspace: Int32
    }

    static func header(_ d: TurboJPEGDecompressor, _ bytes: [UInt8], path: String) throws -> Header {
        var w: Int32 = 0, h: Int32 = 0, ss: Int32 = 0, cs: Int32 = 0
        let r = bytes.withUnsafeBufferPointer {
            tjDecompressHeader3(d.handle, $0.baseAddress, UInt($0.count), &w, &h, &ss, &cs)
        }
        guard r == 0 else { throw classify(d.lastError, path: path) }
        // libjpeg-turbo reports 0x0 when the data ends before the frame header (SOF).
        guard w > 0, h > 0 else {
            throw ImageIOError.truncated(
                path: path, format: "JPEG", detail: "the file ends before its frame header (SOF)")
        }
        return Header(width: Int(w), height: Int(h), subsampling: ss, colorspace: cs)
    }

    static func classify(_ message: String, path: String) -> ImageIOError {
        let m = message.lowercased()
        if m.contains("premature end") || m.contains("truncated") || m.contains("unexpected end") {
            return .truncated(path: path, format: "JPEG", detail: message)
        }
        return .corrupt(path: path, format: "JPEG", detail: message)
    }

    static func decode(_ bytes: [UInt8], path: String, limits: DecodeLimits) throws -> DecodedImage {
        let d = try TurboJPEGDecompressor()
        let hdr = try header(d, bytes, path: path)
        try limits.check(
            width: hdr.width, height: hdr.height, path: path, bytesPerPixel: 4, sourceBytes: bytes.count, format: "JPEG"
        )
        let isGray = hdr.colorspace == Int32(TJCS_GRAY.rawValue)
        let isCMYK = hdr.colorspace == Int32(TJCS_CMYK.rawValue) || hdr.colorspace == Int32(TJCS_YCCK.rawValue)
        let channels = isGray ? 1 : isCMYK ? 4 : 3
        let pf = isGray ? TJPF_GRAY : isCMYK ? TJPF_CMYK : TJPF_RGB
        var failure: ImageIOError?
        var image = Image<UInt8>(uninitializedWidth: hdr.width, height: hdr.height, channels: channels) { dst in
            let r = bytes.withUnsafeBufferPointer { src in
                tjDecompress2(
                    d.handle, src.baseAddress, UInt(src.count), dst.baseAddress, Int32(hdr.width),
                    Int32(hdr.width * channels), Int32(hdr.height), Int32(pf.rawValue), 0)
            }
            // TurboJPEG fills what it could not decode; a warning other than truncation (e.g.
            // extraneous bytes before a marker) leaves a complete image and is accepted.
            if r != 0 {
                let msg = d.lastError
                let err = classify(msg, path: path)
                if !d.lastErrorIsWarning { failure = err } else if case .truncated = err { failure = err }
            }
        }
        if let failure { throw failure }
        if isCMYK { image = cmykToRGB(image) }
        let segs = try? JPEGSegments(bytes)
        var meta = ImageMetadata()
        if let segs {
            let m = segs.metadata(in: bytes)
            meta.exif = m.exif
            meta.xmp = m.xmp
            meta.icc = m.icc
            if let exif = m.exif, let o = EXIF.orientation(in: exif) { meta.orientation = o }
        }
        return DecodedImage(
            image: .uint8(image), format: .jpeg, metadata: meta, storedWidth: hdr.width, storedHeight: hdr.height)
    }

    /// Adobe-style (inverted) CMYK as libjpeg delivers it, to RGB.
    static func cmykToRGB(_ img: Image<UInt8>) -> Image<UInt8> {
        img.samples.withUnsafeBufferPointer { s in
            Image<UInt8>(uninitializedWidth: img.width, height: img.height, channels: 3) { d in
                for i in 0..<img.pixelCount {
                    let k = UInt32(s[i * 4 + 3])
                    for c in 0..<3 { d[i * 3 + c] = UInt8((UInt32(s[i * 4 + c]) * k + 127) / 255) }
                }
            }
        }
    }

    static func encode(_ image: Image<UInt8>, quality: Int, path: String) throws -> [UInt8] {
        let c = try TurboJPEGCompressor()
        let pf: TJPF = image.channels == 1 ? TJPF_GRAY : image.channels == 3 ? TJPF_RGB : TJPF_RGBX
        let samp: TJSAMP = image.channels == 1 ? TJSAMP_GRAY : quality >= 95 ? TJSAMP_444 : TJSAMP_420
        var out: UnsafeMutablePointer<UInt8>? = nil
        var size: UInt = 0
        let r = image.samples.withUnsafeBufferPointer { src in
            tjCompress2(
                c.handle, src.baseAddress, Int32(image.width), Int32(image.rowLength), Int32(image.height),
                Int32(pf.rawValue), &out, &size, Int32(samp.rawValue), Int32(min(max(quality, 1), 100)), 0)
        }
        defer { if let out { tjFree(out) } }
        guard r == 0, let out else { throw ImageIOError.encodeFailed(path: path, format: "JPEG", detail: c.lastError) }
        return Array(UnsafeBufferPointer(start: out, count: Int(size)))
    }
}
