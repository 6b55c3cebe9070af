import CKernels
import CTIFF
import EvanescoCore

/// Owns a TIFF* (and the memory record it reads from).
final class TIFFHandle {
    var io = evn_tiff_io()
    var tif: OpaquePointer?
    let bytes: [UInt8]
    init(bytes: [UInt8]) { self.bytes = bytes }
    deinit { if let tif { TIFFClose(tif) } }
    /// libtiff's message without the "memory: " name of the in-memory stream it prefixes.
    var error: String {
        let m = stringFromCBuffer(io.error)
        return m.hasPrefix("memory: ") ? String(m.dropFirst(8)) : m
    }
}

/// Owns a TIFF* opened for writing; `close()` flushes it, deinit closes it if an error came first.
final class TIFFWriteHandle {
    var io = evn_tiff_io()
    let tif: OpaquePointer
    private var open = true
    init(path: String, reportPath: String) throws {
        guard let t = evn_tiff_open_write(&io, path) else {
            throw ImageIOError.cannotWrite(path: reportPath, reason: stringFromCBuffer(io.error))
        }
        tif = t
    }
    var error: String { stringFromCBuffer(io.error) }
    func close() {
        if open {
            TIFFClose(tif)
            open = false
        }
    }
    deinit { close() }
}

enum TIFFCodec {
    static func classify(_ message: String, path: String) -> ImageIOError {
        let m = message.lowercased()
        if m.contains("read error") || m.contains("unexpected end") || m.contains("short") || m.contains("past end")
            || m.contains("cannot read") || m.contains("seek")
        {
            return .truncated(path: path, format: "TIFF", detail: message.isEmpty ? "data ends early" : message)
        }
        return .corrupt(path: path, format: "TIFF", detail: message.isEmpty ? "libtiff could not read it" : message)
    }

    static func decode(_ bytes: [UInt8], path: String, limits: DecodeLimits, headerOnly: Bool = false) throws
        -> DecodedImage
    {
        let t = TIFFHandle(bytes: bytes)
        t.tif = t.bytes.withUnsafeBufferPointer { evn_tiff_open_memory(&t.io, $0.baseAddress, $0.count) }
        guard let tif = t.tif else { throw classify(t.error, path: path) }
        var w: UInt32 = 0, h: UInt32 = 0, spp: UInt16 = 1, bps: UInt16 = 1, fmt: UInt16 = 1, photo: UInt16 = 0,
            planar: UInt16 = 1, orient: UInt16 = 1
        _ = evn_tiff_get_u32(tif, UInt32(TIFFTAG_IMAGEWIDTH), &w)
        _ = evn_tiff_get_u32(tif, UInt32(TIFFTAG_IMAGELENGTH), &h)
        _ = evn_tiff_get_u16_defaulted(tif, UInt32(TIFFTAG_SAMPLESPERPIXEL), &spp)
        _ = evn_tiff_get_u16_defaulted(tif, UInt32(TIFFTAG_BITSPERSAMPLE), &bps)
        _ = evn_tiff_get_u16_defaulted(tif, UInt32(TIFFTAG_SAMPLEFORMAT), &fmt)
        _ = evn_tiff_get_u16_defaulted(tif, UInt32(TIFFTAG_PLANARCONFIG), &planar)
        _ = evn_tiff_get_u16_defaulted(tif, UInt32(TIFFTAG_ORIENTATION), &orient)
        if evn_tiff_get_u16(tif, UInt32(TIFFTAG_PHOTOMETRIC), &photo) == 0 {
            photo = spp >= 3 ? UInt16(PHOTOMETRIC_RGB) : UInt16(PHOTOMETRIC_MINISBLACK)
        }
        let width = Int(w), height = Int(h)
        try limits.check(
            width: width, height: height, path: path, bytesPerPixel: max(1, Int(spp)) * max(1, Int(bps) / 8),
            sourceBytes: headerOnly ? nil : bytes.count, format: "TIFF")
        var meta = ImageMetadata()
        meta.orientation = Orientation(rawValue: Int(orient)) ?? .up
        var count: UInt32 = 0, data: UnsafeMutableRawPointer? = nil
        if evn_tiff_get_bytes(tif, UInt32(TIFFTAG_ICCPROFILE), &count, &data) != 0, let data, count > 0 {
            meta.icc = Array(UnsafeRawBufferPointer(start: data, count: Int(count)))
        }
        if evn_tiff_get_bytes(tif, UInt32(TIFFTAG_XMLPACKET), &count, &data) != 0, let data, count > 0 {
            meta.xmp = Array(UnsafeRawBufferPointer(start: data, count: Int(count)))
        }
        let isHalf = fmt == UInt16(SAMPLEFORMAT_IEEEFP) && bps == 16
        let isFloat = fmt == UInt16(SAMPLEFORMAT_IEEEFP) && (bps == 32 || isHalf)
        let isInt = (fmt == UInt16(SAMPLEFORMAT_UINT) || fmt == 0) && (bps == 8 || bps == 16)
        let colourOK =
            photo == UInt16(PHOTOMETRIC_MINISBLACK) || photo == UInt16(PHOTOMETRIC_RGB)
            || photo == UInt16(PHOTOMETRIC_MINISWHITE)
        // Channels we keep: grey (+alpha becomes RGBA), RGB, RGBA.
        let direct = (isFloat || isInt) && colourOK && [1, 2, 3, 4].contains(Int(spp))
        let outChannels = !direct ? 4 : spp == 2 ? 4 : Int(spp)
        if headerOnly {
            let img: AnyImage =
                !direct || bps == 8
                ? .uint8(Image(width: 0, height: 0, channels: outChannels))
                : isFloat
                    ? .float32(Image(width: 0, height: 0, channels: outChannels))
                    : .uint16(Image(width: 0, height: 0, channels: outChannels))
            return DecodedImage(image: img, format: .tiff, metadata: meta, storedWidth: width, storedHeight: height)
        }
        let image: AnyImage
        if !direct {
            // Palette, CMYK, YCbCr, 1/2/4-bit and the like: libtiff's RGBA reader handles them.
            var rgba = Image<UInt8>(width: width, height: height, channels: 4)
            let ok = rgba.samples.withUnsafeMutableBytes {
                TIFFReadRGBAImageOriented(
                    tif, w, h, $0.baseAddress!.assumingMemoryBound(to: UInt32.self), Int32(ORIENTATION_TOPLEFT), 0)
            }
            guard ok != 0 else { throw classify(t.error, path: path) }
            image = .uint8(rgba)
        } else if isHalf {
            // Float16 samples (depth maps): read as 16-bit patterns, widened to Float.
            let bits = try readPixels(UInt16.self, t, tif, width, height, Int(spp), planar: planar, path: path)
            image = .float32(
                Image<Float>(uninitializedWidth: width, height: height, channels: bits.channels) { dst in
                    bits.samples.withUnsafeBufferPointer { src in
                        for i in 0..<src.count { dst[i] = Float(Float16(bitPattern: src[i])) }
                    }
                })
        } else if isFloat {
            image = .float32(try readPixels(Float.self, t, tif, width, height, Int(spp), planar: planar, path: path))
        } else if bps == 16 {
            image = .uint16(try readPixels(UInt16.self, t, tif, width, height, Int(spp), planar: planar, path: path))
        } else {
            image = .uint8(try readPixels(UInt8.self, t, tif, width, height, Int(spp), planar: planar, path: path))
        }
        var result = image
        if photo == UInt16(PHOTOMETRIC_MINISWHITE), direct { result = invert(result) }
        return DecodedImage(image: result, format: .tiff, metadata: meta, storedWidth: width, storedHeight: height)
    }

    /// Reads strips or tiles of a contiguous or separate-planes image; grey+alpha comes back RGBA.
    static func readPixels<S: PixelSample>(
        _: S.Type, _ t: TIFFHandle, _ tif: OpaquePointer, _ w: Int, _ h: Int, _ spp: Int,
        planar: UInt16, path: String
    ) throws -> Image<S> {
        let bpsBytes = MemoryLayout<S>.size
        var raw = [S](repeating: .zero, count: w * h * spp)
        let separate = planar == UInt16(PLANARCONFIG_SEPARATE) && spp > 1
        let planes = separate ? spp : 1
        let sppIn = separate ? 1 : spp
        var planeBuf = [S](repeating: .zero, count: separate ? w * h : 0)
        for plane in 0..<planes {
            var target = [S](repeating: .zero, count: w * h * sppIn)
            try target.withUnsafeMutableBytes { dst in
                if TIFFIsTiled(tif) != 0 {
                    try readTiles(
                        t, tif, into: dst, width: w, height: h, pixelBytes: sppIn * bpsBytes, plane: plane, path: path)
                } else {
                    let nStrips = Int(TIFFNumberOfStrips(tif)) / planes
                    var rowsPerStrip: UInt32 = 0
                    if evn_tiff_get_u32(tif, UInt32(TIFFTAG_ROWSPERSTRIP), &rowsPerStrip) == 0 || rowsPerStrip == 0
                        || Int(rowsPerStrip) > h
                    {
                        rowsPerStrip = UInt32(h)
                    }
                    let rowBytes = w * sppIn * bpsBytes
                    for s in 0..<nStrips {
                        let y0 = s * Int(rowsPerStrip)
                        guard y0 < h else { break }
                        let want = min(Int(rowsPerStrip), h - y0) * rowBytes
                        let n = TIFFReadEncodedStrip(
                            tif, UInt32(plane * nStrips + s), dst.baseAddress! + y0 * rowBytes, tmsize_t(want))
                        guard n >= 0 else { throw classify(t.error, path: path) }
                        if n < want && t.io.error.0 != 0 { throw classify(t.error, path: path) }
                    }
                }
            }
            if separate {
                planeBuf = target
                for i in 0..<(w * h) { raw[i * spp + plane] = planeBuf[i] }
            } else {
                raw = target
            }
        }
        if t.io.error.0 != 0 { throw classify(t.error, path: path) }
        if spp == 2 {
            // grey + alpha -> RGBA
            let ga = raw
            return Image<S>(uninitializedWidth: w, height: h, channels: 4) { d in
                for i in 0..<(w * h) {
                    d[i * 4] = ga[i * 2]
                    d[i * 4 + 1] = ga[i * 2]
                    d[i * 4 + 2] = ga[i * 2]
                    d[i * 4 + 3] = ga[i * 2 + 1]
                }
            }
        }
        return Image(width: w, height: h, channels: spp, samples: ContiguousArray(raw))
    }

    /// Reads a tiled image's tiles of one plane into `dst` (rows of `width` pixels of
    /// `pixelBytes`), each clipped to the image.
    static func readTiles(
        _ t: TIFFHandle, _ tif: OpaquePointer, into dst: UnsafeMutableRawBufferPointer, width w: Int, height h: Int,
        pixelBytes: Int, plane: Int, path: String
    ) throws {
        var tw: UInt32 = 0, th: UInt32 = 0
        _ = evn_tiff_get_u32(tif, UInt32(TIFFTAG_TILEWIDTH), &tw)
        _ = evn_tiff_get_u32(tif, UInt32(TIFFTAG_TILELENGTH), &th)
        guard tw > 0, th > 0, Int(tw) * Int(th) <= 1 << 26 else {
            throw ImageIOError.corrupt(path: path, format: "TIFF", detail: "bad tile size")
        }
        let tileBytes = Int(TIFFTileSize(tif))
        var tile = [UInt8](repeating: 0, count: tileBytes)
        for ty in stride(from: 0, to: h, by: Int(th)) {
            for tx in stride(from: 0, to: w, by: Int(tw)) {
                let n = tile.withUnsafeMutableBytes {
                    TIFFReadTile(tif, $0.baseAddress, UInt32(tx), UInt32(ty), 0, UInt16(plane))
                }
                guard n >= 0 else { throw classify(t.error, path: path) }
                let cw = min(Int(tw), w - tx), ch = min(Int(th), h - ty)
                tile.withUnsafeBytes { src in
                    for r in 0..<ch {
                        (dst.baseAddress! + ((ty + r) * w + tx) * pixelBytes)
                            .copyMemory(
                                from: src.baseAddress! + r * Int(tw) * pixelBytes, byteCount: cw * pixelBytes)
                    }
                }
            }
        }
    }

    static func invert(_ img: AnyImage) -> AnyImage {
        func inv<S: PixelSample>(_ i: Image<S>) -> Image<S> {
            var o = i
            for k in o.samples.indices { o.samples[k] = S(clampingRounded: S.fullScale - o.samples[k].floatValue) }
            return o
        }
        switch img {
        case .uint8(let i): return .uint8(inv(i))
        case .uint16(let i): return .uint16(inv(i))
        case .float32(let i): return .float32(inv(i))
        }
    }

    /// Writes 8/16-bit integer or 32-bit float samples, Deflate-compressed with a predictor
    /// (horizontal for integers, floating-point for float). Integer strips (about 256 KB each)
    /// are predicted and compressed on every core, each its own zlib stream as TIFF wants, and
    /// handed to libtiff as they are; float strips go through libtiff's own predictor.
    static func write<S: PixelSample>(
        _ image: Image<S>, to file: String, icc: [UInt8]?, orientation: Orientation = .up,
        compression: LosslessCompression = .default, reportPath: String
    ) throws {
        let handle = try TIFFWriteHandle(path: file, reportPath: reportPath)
        let tif = handle.tif
        let isFloat = S.self == Float.self
        _ = evn_tiff_set_u32(tif, UInt32(TIFFTAG_IMAGEWIDTH), UInt32(image.width))
        _ = evn_tiff_set_u32(tif, UInt32(TIFFTAG_IMAGELENGTH), UInt32(image.height))
        _ = evn_tiff_set_u16(tif, UInt32(TIFFTAG_SAMPLESPERPIXEL), UInt16(image.channels))
        _ = evn_tiff_set_u16(tif, UInt32(TIFFTAG_BITSPERSAMPLE), UInt16(S.bitDepth))
        _ = evn_tiff_set_u16(
            tif, UInt32(TIFFTAG_SAMPLEFORMAT), UInt16(isFloat ? SAMPLEFORMAT_IEEEFP : SAMPLEFORMAT_UINT))
        _ = evn_tiff_set_u16(
            tif, UInt32(TIFFTAG_PHOTOMETRIC), UInt16(image.channels >= 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK))
        _ = evn_tiff_set_u16(tif, UInt32(TIFFTAG_PLANARCONFIG), UInt16(PLANARCONFIG_CONTIG))
        _ = evn_tiff_set_u16(tif, UInt32(TIFFTAG_ORIENTATION), UInt16(orientation.rawValue))
        _ = evn_tiff_set_u16(tif, UInt32(TIFFTAG_COMPRESSION), UInt16(COMPRESSION_ADOBE_DEFLATE))
        _ = evn_tiff_set_u16(
            tif, UInt32(TIFFTAG_PREDICTOR), UInt16(isFloat ? PREDICTOR_FLOATINGPOINT : PREDICTOR_HORIZONTAL))
        _ = evn_tiff_set_u32(tif, UInt32(TIFFTAG_ZIPQUALITY), UInt32(compression.tiffLevel))
        if image.channels == 4 { _ = evn_tiff_set_extra_alpha(tif) }
        let rowBytes = image.rowLength * MemoryLayout<S>.size
        let rowsPerStrip = max(1, (256 * 1024) / max(1, rowBytes))
        _ = evn_tiff_set_u32(tif, UInt32(TIFFTAG_ROWSPERSTRIP), UInt32(rowsPerStrip))
        if let icc, !icc.isEmpty {
            _ = icc.withUnsafeBytes {
                evn_tiff_set_bytes(tif, UInt32(TIFFTAG_ICCPROFILE), UInt32(icc.count), $0.baseAddress)
            }
        }
        func failed() -> ImageIOError { .encodeFailed(path: reportPath, format: "TIFF", detail: handle.error) }
        let strips = (image.height + rowsPerStrip - 1) / rowsPerStrip
        try image.samples.withUnsafeBytes { src in
            if isFloat {
                for s in 0..<strips {
                    let y = s * rowsPerStrip, n = min(rowsPerStrip, image.height - y)
                    // libtiff's predictor works in place, so hand it a scratch copy of the strip.
                    var strip = [UInt8](UnsafeRawBufferPointer(rebasing: src[(y * rowBytes)..<((y + n) * rowBytes)]))
                    let r = strip.withUnsafeMutableBytes {
                        TIFFWriteEncodedStrip(tif, UInt32(s), $0.baseAddress, tmsize_t(n * rowBytes))
                    }
                    guard r >= 0 else { throw failed() }
                }
                return
            }
            try compressedStrips(
                src, rowBytes: rowBytes, rows: image.height, rowsPerStrip: rowsPerStrip, channels: image.channels,
                bits: S.bitDepth, level: compression.tiffLevel, reportPath: reportPath
            ) { s, bytes, count in
                guard TIFFWriteRawStrip(tif, UInt32(s), UnsafeMutableRawPointer(mutating: bytes), tmsize_t(count)) >= 0
                else { throw failed() }
            }
        }
        handle.close()
        if handle.io.error.0 != 0 { throw failed() }
    }

    /// Predicts and compresses every strip (on every core), then hands them to `emit` in order.
    private static func compressedStrips(
        _ src: UnsafeRawBufferPointer, rowBytes: Int, rows: Int, rowsPerStrip: Int, channels: Int,
        bits: Int, level: Int32, reportPath: String,
        emit: (Int, UnsafePointer<UInt8>, Int) throws -> Void
    ) throws {
        let strips = (rows + rowsPerStrip - 1) / rowsPerStrip
        let outputs = UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>.allocate(capacity: strips)
        let lengths = UnsafeMutablePointer<Int>.allocate(capacity: strips)
        outputs.initialize(repeating: nil, count: strips)
        lengths.initialize(repeating: -1, count: strips)
        defer {
            for s in 0..<strips { outputs[s]?.deallocate() }
            outputs.deallocate()
            lengths.deallocate()
        }
        let shared = UncheckedSendable((src.baseAddress!, outputs, lengths))
        StripExecutor.forEachStrip(rows: strips, minimumRows: 1) { range in
            let (base, outputs, lengths) = shared.value
            for s in range {
                let y = s * rowsPerStrip, n = min(rowsPerStrip, rows - y), bytes = n * rowBytes
                let predicted = UnsafeMutablePointer<UInt8>.allocate(capacity: bytes)
                defer { predicted.deallocate() }
                evn_tiff_predict_rows(base + y * rowBytes, rowBytes * 8 / bits, channels, Int32(bits), n, predicted)
                let cap = evn_zlib_bound(bytes)
                let out = UnsafeMutablePointer<UInt8>.allocate(capacity: cap)
                outputs[s] = out
                lengths[s] = evn_zlib_compress(predicted, bytes, out, cap, level)
            }
        }
        for s in 0..<strips {
            guard lengths[s] >= 0, let out = outputs[s] else {
                throw ImageIOError.encodeFailed(
                    path: reportPath, format: "TIFF", detail: "out of memory while compressing strip \(s)")
            }
            try emit(s, out, lengths[s])
        }
    }
}
