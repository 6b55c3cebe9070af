import CKernels
import CPNG
import EvanescoCore
import Glibc

/// Owns one libpng read struct (through the shim's io record), destroyed in deinit.
final class PNGReader {
    var io = evn_png_io()
    deinit { evn_png_read_end(&io) }
    var error: String { stringFromCBuffer(io.error) }
}

enum PNGCodec {
    static func classify(_ message: String, path: String) -> ImageIOError {
        let m = message.lowercased()
        if m.contains("truncated") || m.contains("unexpected end") || m.contains("not enough image data")
            || m.contains("read error")
        {
            return .truncated(path: path, format: "PNG", detail: message)
        }
        return .corrupt(path: path, format: "PNG", detail: message)
    }

    /// - Parameter fastPath: Whether plain files take ``fastDecode(_:path:limits:)`` (tests turn
    ///   it off to compare with libpng).
    static func decode(
        _ bytes: [UInt8], path: String, limits: DecodeLimits, headerOnly: Bool = false, fastPath: Bool = true
    ) throws -> DecodedImage {
        // Check the IHDR's claimed size before libpng allocates or reads further.
        if let (w, h) = headerSize(bytes) { try limits.check(width: w, height: h, path: path) }
        if !headerOnly, fastPath, let image = fastDecode(bytes, path: path, limits: limits) {
            return DecodedImage(
                image: image, format: .png, metadata: ImageMetadata(), storedWidth: image.width,
                storedHeight: image.height)
        }
        let r = PNGReader()
        return try bytes.withUnsafeBufferPointer { buf in
            guard evn_png_read_begin(&r.io, buf.baseAddress, buf.count) == 0 else {
                throw classify(r.error, path: path)
            }
            let w = Int(png_get_image_width(r.io.png, r.io.info)), h = Int(png_get_image_height(r.io.png, r.io.info))
            try limits.check(
                width: w, height: h, path: path, bytesPerPixel: 8, sourceBytes: headerOnly ? nil : bytes.count,
                format: "PNG")
            let channels = Int(png_get_channels(r.io.png, r.io.info))
            let depth = Int(png_get_bit_depth(r.io.png, r.io.info))
            guard [1, 3, 4].contains(channels), depth == 8 || depth == 16 else {
                throw ImageIOError.unsupportedLayout(
                    path: path, detail: "PNG with \(channels) channels of \(depth) bits is not supported")
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
                let img =
                    depth == 16
                    ? AnyImage.uint16(Image(width: 0, height: 0, channels: channels))
                    : AnyImage.uint8(Image(width: 0, height: 0, channels: channels))
                return DecodedImage(image: img, format: .png, metadata: meta, storedWidth: w, storedHeight: h)
            }
            func rows<S: PixelSample>(_ type: S.Type) throws -> Image<S> {
                var failed = false
                let img = Image<S>(uninitializedWidth: w, height: h, channels: channels) { dst in
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

    /// The width and height the IHDR chunk claims, when the file starts with one.
    static func headerSize(_ bytes: [UInt8]) -> (width: Int, height: Int)? {
        guard bytes.count >= 24, bytes[12..<16].elementsEqual("IHDR".utf8) else { return nil }
        return (bytes[16..<20].reduce(0) { $0 << 8 | Int($1) }, bytes[20..<24].reduce(0) { $0 << 8 | Int($1) })
    }

    /// The plain PNGs of a burst (8- or 16-bit grey, RGB or RGBA, not interlaced, no
    /// transparency, colour profile or EXIF chunk) decoded without libpng, by the shim's
    /// evn_png_fast_read: libdeflate inflates the image data in one call, about twice as fast.
    /// nil for any other file, and for one it finds fault with, the limits included: libpng
    /// reads those, and says what is wrong (the same checks, in the same order as before).
    static func fastDecode(_ bytes: [UInt8], path: String, limits: DecodeLimits) -> AnyImage? {
        guard bytes.count >= 33, let (w, h) = headerSize(bytes) else { return nil }
        let depth = Int(bytes[24]), colour = bytes[25]
        let channels = colour == 0 ? 1 : colour == 2 ? 3 : colour == 6 ? 4 : 0
        guard channels > 0, depth == 8 || depth == 16, bytes[28] == 0,
            (try? limits.check(
                width: w, height: h, path: path, bytesPerPixel: 8, sourceBytes: bytes.count, format: "PNG")) != nil
        else { return nil }
        func read<S: PixelSample>(_ type: S.Type) -> Image<S>? {
            var status: Int32 = 1
            let image = Image<S>(uninitializedWidth: w, height: h, channels: channels) { dst in
                let out = UnsafeMutableRawPointer(dst.baseAddress!).assumingMemoryBound(to: UInt8.self)
                status = bytes.withUnsafeBufferPointer {
                    evn_png_fast_read($0.baseAddress, $0.count, out, w, h, Int32(channels), Int32(depth))
                }
            }
            return status == 0 ? image : nil
        }
        return depth == 16 ? read(UInt16.self).map { .uint16($0) } : read(UInt8.self).map { .uint8($0) }
    }

    /// Encodes 8- or 16-bit samples (1-4 channels) as a PNG in memory: the header and metadata
    /// chunks through libpng, the image data in pieces of rows filtered and deflated at once on
    /// every core (``pieces(height:filteredRowBytes:)``), one IDAT chunk a piece, one zlib stream.
    /// The bytes depend on the pixels and `compression` only, not on the machine's cores.
    static func encode<S: PixelSample>(
        _ image: Image<S>, compression: LosslessCompression, icc: [UInt8]?, exif: [UInt8]?,
        path: String
    ) throws -> [UInt8] {
        precondition(S.self == UInt8.self || S.self == UInt16.self)
        func failed(_ detail: String) -> ImageIOError { .encodeFailed(path: path, format: "PNG", detail: detail) }
        let (filter, level) = compression.png(sixteenBit: S.self == UInt16.self)
        let w = image.width, h = image.height, channels = image.channels, sampleBytes = MemoryLayout<S>.size
        let rowBytes = w * channels * sampleBytes
        let count = pieces(height: h, filteredRowBytes: rowBytes + 1)
        let pieces = UnsafeMutablePointer<evn_png_piece>.allocate(capacity: count)
        pieces.initialize(repeating: evn_png_piece(data: nil, length: -1, adler: 1, filtered: 0), count: count)
        defer {
            for k in 0..<count { free(pieces[k].data) }
            pieces.deallocate()
        }
        image.samples.withUnsafeBufferPointer { src in
            let shared = UncheckedSendable(
                (UnsafeRawPointer(src.baseAddress!).assumingMemoryBound(to: UInt8.self), pieces))
            StripExecutor.forEachStrip(rows: count, minimumRows: 1) { range in
                let (base, pieces) = shared.value
                for k in range {
                    _ = evn_png_encode_piece(
                        base, rowBytes, channels * sampleBytes, sampleBytes == 2 ? 1 : 0,
                        h * k / count, h * (k + 1) / count, filter, level, k == count - 1 ? 1 : 0, pieces + k)
                }
            }
        }
        guard (0..<count).allSatisfy({ pieces[$0].length >= 0 }) else {
            throw failed("out of memory while compressing the image data")
        }
        // A chunk holds at most 2^31 - 1 bytes (a piece of a picture of over 100 GB could not).
        guard (0..<count).allSatisfy({ pieces[$0].length <= Int(Int32.max) - 6 }) else {
            throw failed("the picture is too large for PNG's chunks; write .tif")
        }
        var io = evn_png_io()
        let icc = icc ?? [], exif = exif ?? []
        let head = icc.withUnsafeBufferPointer { i in
            exif.withUnsafeBufferPointer { e in
                evn_png_write_head(
                    &io, UInt32(w), UInt32(h), Int32(channels), Int32(S.bitDepth), i.baseAddress, UInt32(icc.count),
                    e.baseAddress, UInt32(exif.count))
            }
        }
        guard head == 0, let headBytes = io.out else { throw failed(stringFromCBuffer(io.error)) }
        evn_png_write_done(&io)
        defer { free(headBytes) }
        let headCount = io.out_size, idatCount = evn_png_idat_size(pieces, count)
        let iend: [UInt8] = [0, 0, 0, 0, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82]
        return [UInt8](unsafeUninitializedCapacity: headCount + idatCount + iend.count) { out, initialized in
            let base = out.baseAddress!
            base.update(from: headBytes, count: headCount)
            let written = evn_png_write_idat(pieces, count, level, base + headCount)
            (base + headCount + written).update(from: iend, count: iend.count)
            initialized = headCount + written + iend.count
        }
    }

    /// Rows of the image data per compressed piece: whole rows, about 256 KB of filtered bytes a
    /// piece, at most 64 pieces. It depends on the image alone, so the file's bytes do not
    /// depend on the machine's cores.
    static func pieces(height: Int, filteredRowBytes: Int) -> Int {
        max(1, min(64, height, height * filteredRowBytes / (256 * 1024)))
    }
}
