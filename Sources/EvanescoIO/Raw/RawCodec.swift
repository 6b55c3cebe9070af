import CRaw
import EvanescoCore
import Foundation

/// A raw file read: the frame (its samples empty when only the header was read) and what the
/// container said.
public struct RawFile: Sendable {
    /// The frame. After ``RawCodec/probe(_:path:limits:)`` its samples are empty (0x0).
    public var raw: RawMosaic
    /// The visible area's size, as stored.
    public var width: Int
    public var height: Int
    /// The container: "DNG 1.4", or the camera format LibRaw recognised ("NEF", ...).
    public var container: String
}

/// Camera raw files through LibRaw (thread-safe `libraw_r`): DNG (Bayer CFA, uncompressed or
/// lossless JPEG; LinearRaw as three linear colours) and the camera formats LibRaw reads with a
/// Bayer sensor. X-Trans and other non-Bayer sensors are refused with a message that says so.
public enum RawCodec {
    /// Reads the frame and its samples.
    public static func decode(_ bytes: [UInt8], path: String, limits: DecodeLimits = .standard) throws -> RawFile {
        try open(bytes, path: path, limits: limits, samples: true)
    }

    /// Reads what the header says (sizes, CFA, levels, colour, camera), without the samples.
    public static func probe(_ bytes: [UInt8], path: String, limits: DecodeLimits = .standard) throws -> RawFile {
        try open(bytes, path: path, limits: limits, samples: false)
    }

    /// Reads what the header of the file at `path` says, as ``probe(_:path:limits:)`` does: an
    /// uncompressed DNG whose header lies in its first 64 KB without its image data (that head and
    /// the start of each strip), anything else whole.
    public static func probe(path: String, limits: DecodeLimits = .standard) throws -> RawFile {
        guard let header = try RawHeaderBytes.read(path) else {
            return try probe(InputFile.read(path), path: path, limits: limits)
        }
        return try open(header.head, path: path, limits: limits, samples: false, header: header)
    }

    /// Reads a file.
    public static func read(_ path: String, limits: DecodeLimits = .standard) throws -> RawFile {
        try decode(InputFile.read(path), path: path, limits: limits)
    }

    /// Reads a file and hands `body` the frame and its visible samples by row, for whoever turns
    /// them into something else at once (the stacker's planes): straight from the file's bytes
    /// where its strips hold them as they are (an uncompressed DNG in this machine's byte order,
    /// rows at even offsets), and then the frame's samples are empty (0x0); else from the frame's
    /// decoded samples. The rows are valid only while `body` runs.
    public static func read<R>(
        _ path: String, limits: DecodeLimits = .standard, rows body: (RawFile, RawSampleRows) throws -> R
    ) throws -> R {
        try withoutActuallyEscaping(body) { body in
            var result: R?
            let file = try open(InputFile.read(path), path: path, limits: limits, samples: true) { file, rows in
                result = try body(file, rows)
            }
            if let result { return result }
            return try RawSampleRows.of(file.raw.samples) { try body(file, $0) }
        }
    }

    /// `direct`: read uncompressed DNG strips ourselves (false: always through LibRaw's unpack).
    /// `inPlace`, when given, is handed the samples in the file's bytes where they can be read
    /// there (``read(_:limits:rows:)``); the frame returned then has no samples. `header`: the
    /// file read without its image data, `bytes` its head (a probe only).
    static func open(
        _ bytes: [UInt8], path: String, limits: DecodeLimits, samples: Bool, direct: Bool = true,
        inPlace: ((RawFile, RawSampleRows) throws -> Void)? = nil, header sparse: RawHeaderBytes? = nil
    ) throws -> RawFile {
        precondition(sparse == nil || !samples, "a file read without its image data has no samples to decode")
        let fileSize = sparse?.size ?? bytes.count
        var errors = evn_raw_errors()
        // LibRaw's own cap on what it allocates, from the memory budget (MB).
        guard let lr = evn_raw_init(&errors, UInt32(clamping: max(64, limits.maxBytes >> 20))) else {
            throw ImageIOError.unreadable(path: path, reason: "LibRaw could not start (out of memory)")
        }
        defer { libraw_close(lr) }
        let dng = DNGTags.read(bytes)
        if let dng {
            try dng.checkData(fileSize: fileSize, path: path)
        } else {
            try checkDirectory(bytes, path: path)
        }
        let forLibRaw = try LibRawGuard.bytesForLibRaw(bytes, isDNG: dng != nil, path: path)
        // LibRaw reads the buffer only (its API takes a mutable pointer nonetheless).
        return try withLibRawBuffer(forLibRaw, header: sparse, path: path) { buffer, count -> RawFile in
            try check(libraw_open_buffer(lr, buffer, count), errors: errors, path: path)
            var m = evn_raw_meta()
            evn_raw_read_meta(lr, &m)
            let container = dng.map { "DNG \($0.version)" } ?? containerName(bytes)
            let w = Int(m.width), h = Int(m.height)
            try limits.check(
                width: Int(m.raw_width), height: Int(m.raw_height), path: path, bytesPerPixel: 8,
                sourceBytes: fileSize, format: container)
            try checkSensor(m, path: path)
            let layout = try layoutOf(m, path: path)
            let channels = layout == .linearRGB ? 3 : 1
            // The frame without its samples.
            let header = {
                RawFile(
                    raw: try mosaic(
                        m, layout: layout, samples: Image(width: 0, height: 0, channels: channels), dng: dng,
                        path: path, container: container), width: w, height: h, container: container)
            }
            guard samples else { return try header() }
            if direct, let dng,
                let rows = dng.uncompressedRows(
                    rawWidth: Int(m.raw_width), rawHeight: Int(m.raw_height), top: Int(m.top_margin),
                    left: Int(m.left_margin), width: w, height: h, channels: channels)
            {
                if let inPlace, !rows.swap, rows.aligned {
                    let file = try header()
                    try handOn(bytes, rows, of: file, channels: channels, to: inPlace)
                    return file
                }
                let fast = dng.samples(rows, width: w, height: h, channels: channels)
                let raw = try mosaic(m, layout: layout, samples: fast, dng: dng, path: path, container: container)
                return RawFile(raw: raw, width: w, height: h, container: container)
            }
            try check(libraw_unpack(lr), errors: errors, path: path)
            if errors.data_errors > 0 {
                throw ImageIOError.truncated(
                    path: path, format: container,
                    detail: "LibRaw found the sensor data short or damaged at byte \(errors.first_offset)")
            }
            evn_raw_read_meta(lr, &m)
            let image = try unpackedSamples(lr, m, width: w, height: h, channels: channels, path: path)
            return RawFile(
                raw: try mosaic(m, layout: layout, samples: image, dng: dng, path: path, container: container),
                width: w,
                height: h, container: container)
        }
    }

    /// `body` with the bytes LibRaw opens: `bytes`, or the view of a file read without its image
    /// data (`header`) with `bytes` as its head.
    static func withLibRawBuffer<R>(
        _ bytes: [UInt8], header: RawHeaderBytes?, path: String, _ body: (UnsafeMutableRawPointer, Int) throws -> R
    ) throws -> R {
        if let header { return try header.withBuffer(head: bytes, path: path, body) }
        return try bytes.withUnsafeBytes { try body(UnsafeMutableRawPointer(mutating: $0.baseAddress!), $0.count) }
    }

    /// The visible samples LibRaw unpacked (`m` read after its unpack).
    static func unpackedSamples(
        _ lr: UnsafeMutablePointer<libraw_data_t>, _ m: evn_raw_meta, width w: Int, height h: Int, channels: Int,
        path: String
    ) throws -> Image<UInt16> {
        guard m.has_bayer != 0 || m.has_color3 != 0 || m.has_color4 != 0 else {
            throw ImageIOError.unsupportedLayout(
                path: path, detail: "its samples are floating point or in a layout LibRaw does not unpack to 16 bits")
        }
        return Image<UInt16>(uninitializedWidth: w, height: h, channels: channels) { out in
            if m.has_bayer != 0 {
                evn_raw_copy_visible(lr, out.baseAddress)
            } else if m.has_color3 != 0 {
                evn_raw_copy_visible3(lr, out.baseAddress)
            } else {
                evn_raw_copy_visible4(lr, out.baseAddress)
            }
        }
    }

    /// `rows` of `bytes` (samples in this machine's order at even offsets: `aligned`), only read,
    /// to `body` as `file`'s.
    static func handOn(
        _ bytes: [UInt8], _ rows: UncompressedRows, of file: RawFile, channels: Int,
        to body: (RawFile, RawSampleRows) throws -> Void
    ) throws {
        precondition(rows.aligned && !rows.swap, "rows read in place must be aligned, in this machine's order")
        try bytes.withUnsafeBytes { src in
            try body(
                file,
                RawSampleRows(width: file.width, height: file.height, channels: channels) { y in
                    (src.baseAddress! + rows.start(y)).assumingMemoryBound(to: UInt16.self)
                })
        }
    }

    /// A TIFF-structured file whose first directory lies past its end was cut short.
    static func checkDirectory(_ b: [UInt8], path: String) throws {
        guard let at = TIFFDirectory.firstOffset(b), TIFFDirectory(first: b) == nil else { return }
        if at + 2 > b.count {
            throw ImageIOError.truncated(
                path: path, format: "raw", detail: "its first directory is at byte \(at) but the file has \(b.count)")
        }
    }

    /// A LibRaw status as a typed error.
    static func check(_ status: Int32, errors: evn_raw_errors, path: String) throws {
        guard status != 0 else { return }
        let message = String(cString: libraw_strerror(status))
        switch status {
        case LIBRAW_FILE_UNSUPPORTED.rawValue:
            throw ImageIOError.corrupt(
                path: path, format: "raw",
                detail: "LibRaw does not read it as a camera raw (\(message)): the file is damaged, or from a camera "
                    + "LibRaw \(String(cString: libraw_version())) does not know")
        case LIBRAW_TOO_BIG.rawValue, LIBRAW_UNSUFFICIENT_MEMORY.rawValue, LIBRAW_MEMPOOL_OVERFLOW.rawValue:
            throw ImageIOError.corrupt(
                path: path, format: "raw", detail: "its sizes would need more memory than allowed (\(message))")
        case LIBRAW_IO_ERROR.rawValue:
            throw ImageIOError.truncated(path: path, format: "raw", detail: message)
        default:
            throw ImageIOError.corrupt(path: path, format: "raw", detail: message)
        }
    }

    /// Bayer and linear sensors are read; Foveon, X-Trans and other mosaics are refused.
    static func checkSensor(_ m: evn_raw_meta, path: String) throws {
        if m.is_foveon != 0 {
            throw ImageIOError.unsupportedLayout(
                path: path, detail: "a Foveon (Sigma) sensor has no Bayer mosaic; only Bayer and linear raws are read")
        }
        if m.filters == 9 {
            throw ImageIOError.unsupportedLayout(
                path: path,
                detail: "an X-Trans (Fujifilm) sensor's 6x6 mosaic is not supported yet; only Bayer (2x2) and linear "
                    + "raws are read (convert it to a linear DNG with Adobe DNG Converter first)")
        }
    }

    /// The layout LibRaw's `filters` and colours describe.
    static func layoutOf(_ m: evn_raw_meta, path: String) throws -> RawMosaic.Layout {
        if m.filters == 0 {
            guard m.colors == 3 else {
                throw ImageIOError.unsupportedLayout(
                    path: path, detail: "a linear raw with \(m.colors) colours; only three are read")
            }
            return .linearRGB
        }
        let colors = (0..<4).map { p in UInt8(evn_raw_fc(m.filters, Int32(p >> 1), Int32(p & 1)) & 3) }.map {
            $0 == 3 ? UInt8(1) : $0
        }
        // A 2x2 pattern repeats down LibRaw's 8-row description; anything else is another mosaic.
        let repeats = (0..<16).allSatisfy { i in
            let v = evn_raw_fc(m.filters, Int32(i >> 1), Int32(i & 1)) & 3
            return UInt8(v == 3 ? 1 : v) == colors[(i >> 1 & 1) * 2 + (i & 1)]
        }
        guard m.colors == 3, repeats, let cfa = CFAPattern(colors: colors) else {
            throw ImageIOError.unsupportedLayout(
                path: path,
                detail: "its colour filter is not a 2x2 Bayer pattern of red, green and blue (\(m.colors) colours, "
                    + "pattern \(String(m.filters, radix: 16))); only Bayer and linear raws are read")
        }
        return .bayer(cfa)
    }

    static func containerName(_ b: [UInt8]) -> String {
        if b.count > 12, b[8] == 0x43, b[9] == 0x52 { return "CR2" }
        if b.count > 12, String(decoding: b[4..<12], as: UTF8.self).hasPrefix("ftypcrx") { return "CR3" }
        if b.starts(with: Array("FUJIFILM".utf8)) { return "RAF" }
        if b.starts(with: [0x49, 0x49, 0x52, 0x4F]) || b.starts(with: [0x4D, 0x4D, 0x4F, 0x52]) { return "ORF" }
        if b.starts(with: [0x49, 0x49, 0x55, 0x00]) { return "RW2" }
        return "camera raw"
    }
}
