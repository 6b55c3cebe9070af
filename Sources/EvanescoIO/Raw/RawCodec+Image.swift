import CRaw
import EvanescoCore
import Foundation

/// Tells a TIFF-structured raw file (DNG, NEF, ARW, PEF, SRW...) from a TIFF picture by its
/// tags: a DNGVersion, or a camera maker's name in IFD0 that LibRaw recognises as a raw.
public enum RawSniffer {
    /// Makers whose TIFF-based files are raws.
    static let makers = [
        "NIKON", "SONY", "PENTAX", "RICOH", "SAMSUNG", "OLYMPUS", "OM DIGITAL", "PANASONIC", "LEICA", "PHASE ONE",
        "MAMIYA", "LEAF", "KODAK", "CANON", "SIGMA", "EPSON", "MINOLTA", "KONICA"
    ]

    /// Whether the file at `path` is a camera raw, from its signature or its first directory
    /// (read where it lies, not the whole file, unless a maker's TIFF needs LibRaw's word); nil
    /// when it cannot be read, is not a regular file or is no image.
    public static func isRawFile(_ path: String) -> Bool? {
        // Regular files only: a FIFO or a device would block the read (the decoder refuses them).
        var st = stat()
        guard stat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG, let h = FileHandle(forReadingAtPath: path) else {
            return nil
        }
        defer { try? h.close() }
        guard let head = try? h.read(upToCount: 64 << 10).map({ [UInt8]($0) }), head.count >= 16 else { return nil }
        switch FormatSniffer.sniff(head) {
        case .image(.raw): return true
        case .image(.tiff): break
        case .image: return false
        default: return nil
        }
        guard let at = TIFFDirectory.firstOffset(head), (try? h.seek(toOffset: UInt64(at))) != nil,
            let data = try? h.read(upToCount: 2 + 4096 * 12), data.count >= 2
        else { return nil }
        // IFD0 read on its own, in the header's byte order: its entries' tags.
        let ifd = TIFFStructureReader([UInt8](data), littleEndian: head[0] == 0x49)
        let tags = Set((0..<(ifd.u16(0) ?? 0)).compactMap { ifd.u16(2 + $0 * 12) })
        if tags.contains(50706) { return true }
        guard tags.contains(271), let all = try? InputFile.read(path) else { return false }
        return isRaw(all)
    }

    static func isRaw(_ bytes: [UInt8]) -> Bool {
        guard let ifd0 = TIFFDirectory(first: bytes) else { return false }
        if ifd0.numbers(50706) != nil { return true }
        guard let make = ifd0.string(271)?.uppercased(), makers.contains(where: { make.hasPrefix($0) }) else {
            return false
        }
        var errors = evn_raw_errors()
        guard let safe = try? LibRawGuard.bytesForLibRaw(bytes, isDNG: false, path: ""),
            let lr = evn_raw_init(&errors, 64)
        else { return false }
        defer { libraw_close(lr) }
        return safe.withUnsafeBytes {
            libraw_open_buffer(lr, UnsafeMutableRawPointer(mutating: $0.baseAddress), $0.count) == 0
        }
    }
}

extension RawCodec {
    /// A raw file as a picture: finished with the default `RawFinishOptions` into 16-bit sRGB
    /// (its ICC profile attached), as stored, with the orientation to apply.
    static func decodeImage(_ bytes: [UInt8], path: String, limits: DecodeLimits, headerOnly: Bool) throws
        -> DecodedImage
    {
        let file = try headerOnly ? probe(bytes, path: path, limits: limits) : decode(bytes, path: path, limits: limits)
        let options = RawFinishOptions()
        let meta = ImageMetadata(icc: ICCProfile.profile(for: options.colorSpace), orientation: file.raw.orientation)
        let image: AnyImage =
            headerOnly
            ? .uint16(Image(width: 0, height: 0, channels: 3))
            : .uint16(try finished(file.raw, options: options, as: UInt16.self, path: path))
        return DecodedImage(
            image: image, format: .raw, metadata: meta, storedWidth: file.width, storedHeight: file.height)
    }

    /// `RawFinish.render(_:options:as:)` with its refusal as an `ImageIOError` naming the file.
    public static func finished<T: PixelSample>(
        _ raw: RawMosaic, options: RawFinishOptions, as type: T.Type, path: String
    ) throws -> Image<T> {
        do {
            return try RawFinish.render(raw, options: options, as: type)
        } catch {
            throw ImageIOError.corrupt(path: path, format: "raw", detail: error.detail)
        }
    }
}
