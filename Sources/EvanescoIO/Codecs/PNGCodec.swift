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

    /// - Parameter fastPath: Whether plain files take ``fastDecode(_:path:limits:)`` (tests turn
    ///   it off to compare with libpng).
    static func decode(_ bytes: [UInt8], path: String, limits: DecodeLimits, headerOnly: Bool = false, fastPath: Bool = true) throws -> DecodedImage {
        // Check the IHDR's claimed size before libpng allocates or reads further.
        if let (w, h) = headerSize(bytes) { try limits.check(width: w, height: h, path: path) }
        if !headerOnly, fastPath, let image = fastDecode(bytes, path: path, limits: limits) {
            return DecodedImage(image: image, format: .png, metadata: ImageMetadata(), storedWidth: image.width, storedHeight: image.height)
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
              (try? limits.check(width: w, height: h, path: path, bytesPerPixel: 8, sourceBytes: bytes.count, format: "PNG")) != nil
        else { return nil }
        func read<S: PixelSample>(_ type: S.Type) -> Image<S>? {
            var status: Int32 = 1
            let image = Image<S>(width: w, height: h, channels: channels) { dst in
                let out = UnsafeMutableRawPointer(dst.baseAddress!).assumingMemoryBound(to: UInt8.self)
                status = bytes.withUnsafeBufferPointer { evn_png_fast_read($0.baseAddress, $0.count, out, w, h, Int32(channels), Int32(depth)) }
            }
            return status == 0 ? image : nil
        }
        return depth == 16 ? read(UInt16.self).map { .uint16($0) } : read(UInt8.self).map { .uint8($0) }
    }

    static func encode<S: PixelSample>(_ image: Image<S>, level: Int, icc: [UInt8]?, exif: [UInt8]?, path: String) throws -> [UInt8] {
        precondition(S.self == UInt8.self || S.self == UInt16.self)
        if level <= 2 { return try encodeInPieces(image, level: max(0, level), icc: icc, exif: exif, path: path) }
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

    /// Rows of the image data per compressed piece: whole rows, about 256 KB of filtered bytes a
    /// piece, at most 64 pieces. It depends on the image alone, so the file's bytes do not
    /// depend on the machine's cores.
    static func pieces(height: Int, filteredRowBytes: Int) -> Int {
        max(1, min(64, height, height * filteredRowBytes / (256 * 1024)))
    }

    /// The fast levels (0-2: the SUB filter on every row, and at 0-1 zlib's run-length strategy,
    /// as libpng is told for them on the other path), with the image data compressed in pieces
    /// at once: each piece of rows is filtered and deflated on its own (ending on a sync flush,
    /// so the pieces concatenate into one zlib stream, joined by their combined Adler-32) and
    /// becomes one IDAT chunk. The header and metadata chunks come from libpng.
    static func encodeInPieces<S: PixelSample>(_ image: Image<S>, level: Int, icc: [UInt8]?, exif: [UInt8]?, path: String) throws -> [UInt8] {
        let w = image.width, h = image.height, channels = image.channels, sampleBytes = MemoryLayout<S>.size
        let bpp = channels * sampleBytes, rowBytes = w * bpp, filtered = rowBytes + 1
        let count = pieces(height: h, filteredRowBytes: filtered)
        func rows(_ k: Int) -> Range<Int> { (h * k / count)..<(h * (k + 1) / count) }
        func failed(_ detail: String) -> ImageIOError { .encodeFailed(path: path, format: "PNG", detail: detail) }
        // Piece k: rows(k); its output leaves room for the zlib header
        // in front of the first and the check value after the last.
        let outputs = UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>.allocate(capacity: count)
        outputs.initialize(repeating: nil, count: count)
        let lengths = UnsafeMutablePointer<Int>.allocate(capacity: count), checks = UnsafeMutablePointer<UInt>.allocate(capacity: count)
        lengths.initialize(repeating: -1, count: count); checks.initialize(repeating: 1, count: count)
        defer {
            for k in 0..<count { outputs[k]?.deallocate() }
            outputs.deallocate(); lengths.deallocate(); checks.deallocate()
        }
        let rle: Int32 = level <= 1 ? 1 : 0
        image.samples.withUnsafeBufferPointer { src in
            let shared = UncheckedSendable((UnsafeRawPointer(src.baseAddress!).assumingMemoryBound(to: UInt8.self), outputs, lengths, checks))
            StripExecutor.forEachStrip(rows: count, minimumRows: 1) { range in
                let (base, outputs, lengths, checks) = shared.value
                for k in range {
                    let (y0, y1) = (rows(k).lowerBound, rows(k).upperBound)
                    let n = (y1 - y0) * filtered
                    let raw = UnsafeMutablePointer<UInt8>.allocate(capacity: max(1, n))
                    defer { raw.deallocate() }
                    for y in y0..<y1 {
                        let o = raw + (y - y0) * filtered, row = base + y * rowBytes
                        o[0] = 1   // SUB: each byte minus the one a pixel before
                        let d = o + 1
                        if S.self == UInt16.self {
                            // PNG's samples are big-endian.
                            for i in stride(from: 0, to: rowBytes, by: 2) { d[i] = row[i + 1]; d[i + 1] = row[i] }
                            var i = rowBytes - 1
                            while i >= bpp { d[i] = d[i] &- d[i - bpp]; i -= 1 }
                        } else {
                            for i in 0..<min(bpp, rowBytes) { d[i] = row[i] }
                            for i in bpp..<max(bpp, rowBytes) { d[i] = row[i] &- row[i - bpp] }
                        }
                    }
                    let cap = evn_deflate_bound(n)
                    let out = UnsafeMutablePointer<UInt8>.allocate(capacity: cap + 6)
                    outputs[k] = out
                    checks[k] = UInt(evn_adler32(1, raw, n))
                    lengths[k] = evn_deflate_raw(raw, n, out + 2, cap, Int32(level), rle, k == count - 1 ? 1 : 0)
                }
            }
        }
        guard (0..<count).allSatisfy({ lengths[$0] >= 0 }) else { throw failed("zlib could not compress the image data") }
        // One zlib stream: header (deflate, 32 KB window; FLEVEL 0, fastest, or 1, fast), the
        // pieces, and the Adler-32 of all the filtered bytes, combined from the pieces'.
        var adler = checks[0]
        for k in 1..<count { adler = UInt(evn_adler32_combine(adler, checks[k], rows(k).count * filtered)) }
        outputs[0]![0] = 0x78; outputs[0]![1] = level <= 1 ? 0x01 : 0x5E
        let tail = outputs[count - 1]! + 2 + lengths[count - 1]
        tail[0] = UInt8(truncatingIfNeeded: adler >> 24); tail[1] = UInt8(truncatingIfNeeded: adler >> 16)
        tail[2] = UInt8(truncatingIfNeeded: adler >> 8); tail[3] = UInt8(truncatingIfNeeded: adler)
        var io = evn_png_io()
        let icc = icc ?? [], exif = exif ?? []
        let head = icc.withUnsafeBufferPointer { i in exif.withUnsafeBufferPointer { e in
            evn_png_write_head(&io, UInt32(w), UInt32(h), Int32(channels), Int32(S.bitDepth), i.baseAddress, UInt32(icc.count),
                               e.baseAddress, UInt32(exif.count))
        }}
        guard head == 0 else { throw failed(stringFromCBuffer(io.error)) }
        for k in 0..<count {
            let start = k == 0 ? outputs[k]! : outputs[k]! + 2
            let length = lengths[k] + (k == 0 ? 2 : 0) + (k == count - 1 ? 4 : 0)
            guard evn_png_write_chunk(&io, "IDAT", start, length) == 0 else { throw failed(stringFromCBuffer(io.error)) }
        }
        guard evn_png_write_chunk(&io, "IEND", nil, 0) == 0 else { throw failed(stringFromCBuffer(io.error)) }
        evn_png_write_done(&io)
        guard let out = io.out else { throw failed("no output") }
        defer { free(out) }
        return Array(UnsafeBufferPointer(start: out, count: io.out_size))
    }
}
