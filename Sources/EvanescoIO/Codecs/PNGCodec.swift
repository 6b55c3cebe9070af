import CPNG
import EvanescoCore

/// Owns one libpng read struct (through the shim's io record), destroyed in deinit.
final class PNGReader {
    var io = evn_png_io()
    deinit { evn_png_read_end(&io) }
    var error: String { stringFromCBuffer(io.error) }
}

enum PNGCodec {
    static func classify(_ message: String, path: String) -> ImageIOError {
        let m = message.lowercased()
        if m.contains("truncated") || m.contains("unexpected end") || m.contains("not enough image data") || m.contains("read error") {
            return .truncated(path: path, format: "PNG", detail: message)
        }
        return .corrupt(path: path, format: "PNG", detail: message)
    }

    static func decode(_ bytes: [UInt8], path: String, limits: DecodeLimits, headerOnly: Bool = false) throws -> DecodedImage {
        // Check the IHDR's claimed size before libpng allocates or reads further.
        if bytes.count >= 24, bytes[12..<16].elementsEqual(Array("IHDR".utf8)) {
            let w = bytes[16..<20].reduce(0) { $0 << 8 | Int($1) }, h = bytes[20..<24].reduce(0) { $0 << 8 | Int($1) }
            try limits.check(width: w, height: h, path: path)
        }
        let r = PNGReader()
        return try bytes.withUnsafeBufferPointer { buf in
            guard evn_png_read_begin(&r.io, buf.baseAddress, buf.count) == 0 else { throw classify(r.error, path: path) }
            let w = Int(png_get_image_width(r.io.png, r.io.info)), h = Int(png_get_image_height(r.io.png, r.io.info))
            try limits.check(width: w, height: h, path: path, bytesPerPixel: 8, sourceBytes: headerOnly ? nil : bytes.count, format: "PNG")
            let channels = Int(png_get_channels(r.io.png, r.io.info))
            let depth = Int(png_get_bit_depth(r.io.png, r.io.info))
            guard [1, 3, 4].contains(channels), depth == 8 || depth == 16 else {
                throw ImageIOError.unsupportedLayout(path: path, detail: "PNG with \(channels) channels of \(depth) bits is not supported")
            }
            var meta = ImageMetadata()
            var name: png_charp? = nil, compression: Int32 = 0, profile: png_bytep? = nil, len: png_uint_32 = 0
            if png_get_iCCP(r.io.png, r.io.info, &name, &compression, &profile, &len) != 0, let profile {
                meta.icc = Array(UnsafeBufferPointer(start: profile, count: Int(len)))
            }
            func readExif() {
                var n: png_uint_32 = 0, exif: png_bytep? = nil
                if png_get_eXIf_1(r.io.png, r.io.info, &n, &exif) != 0, let exif, n > 0 {
                    meta.exif = Array(UnsafeBufferPointer(start: exif, count: Int(n)))
                    meta.orientation = EXIF.orientation(in: meta.exif!) ?? .up
                }
            }
            if headerOnly {
                readExif()
                let img = depth == 16 ? AnyImage.uint16(Image(width: 0, height: 0, channels: channels))
                                      : AnyImage.uint8(Image(width: 0, height: 0, channels: channels))
                return DecodedImage(image: img, format: .png, metadata: meta, storedWidth: w, storedHeight: h)
            }
            func rows<S: PixelSample>(_ type: S.Type) throws -> Image<S> {
                var failed = false
                let img = Image<S>(width: w, height: h, channels: channels) { dst in
                    let rowBytes = w * channels * MemoryLayout<S>.size
                    let base = UnsafeMutableRawPointer(dst.baseAddress!).assumingMemoryBound(to: UInt8.self)
                    var ptrs: [UnsafeMutablePointer<UInt8>?] = (0..<h).map { base + $0 * rowBytes }
                    failed = ptrs.withUnsafeMutableBufferPointer { evn_png_read_rows(&r.io, $0.baseAddress) } != 0
                }
                if failed { throw classify(r.error, path: path) }
                return img
            }
            let image: AnyImage = depth == 16 ? .uint16(try rows(UInt16.self)) : .uint8(try rows(UInt8.self))
            readExif()
            return DecodedImage(image: image, format: .png, metadata: meta, storedWidth: w, storedHeight: h)
        }
    }

    static func encode<S: PixelSample>(_ image: Image<S>, level: Int, icc: [UInt8]?, exif: [UInt8]?, path: String) throws -> [UInt8] {
        precondition(S.self == UInt8.self || S.self == UInt16.self)
        var io = evn_png_io()
        let rowBytes = image.rowLength * MemoryLayout<S>.size
        let icc = icc ?? [], exif = exif ?? []
        let r = image.samples.withUnsafeBufferPointer { src in
            let base = UnsafeMutableRawPointer(mutating: src.baseAddress!).assumingMemoryBound(to: UInt8.self)
            var ptrs: [UnsafeMutablePointer<UInt8>?] = (0..<image.height).map { base + $0 * rowBytes }
            return icc.withUnsafeBufferPointer { iccBuf in
                exif.withUnsafeBufferPointer { exifBuf in
                    ptrs.withUnsafeMutableBufferPointer {
                        evn_png_write(&io, $0.baseAddress, UInt32(image.width), UInt32(image.height), Int32(image.channels),
                                      Int32(S.bitDepth), Int32(level), iccBuf.baseAddress, UInt32(icc.count),
                                      exifBuf.baseAddress, UInt32(exif.count))
                    }
                }
            }
        }
        guard r == 0, let out = io.out else {
            let msg = stringFromCBuffer(io.error)
            throw ImageIOError.encodeFailed(path: path, format: "PNG", detail: msg)
        }
        defer { free(out) }
        return Array(UnsafeBufferPointer(start: out, count: io.out_size))
    }
}
