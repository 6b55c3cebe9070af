import CRaw
import EvanescoCore

/// Tells a TIFF-structured raw file (DNG, NEF, ARW, PEF, SRW...) from a TIFF picture by its
/// tags: a DNGVersion, or a camera maker's name in IFD0 that LibRaw recognises as a raw.
enum RawSniffer {
    /// Makers whose TIFF-based files are raws.
    static let makers = [
        "NIKON", "SONY", "PENTAX", "RICOH", "SAMSUNG", "OLYMPUS", "OM DIGITAL", "PANASONIC", "LEICA", "HASSELBLAD",
        "PHASE ONE", "MAMIYA", "LEAF", "KODAK", "CANON", "SIGMA", "EPSON", "MINOLTA", "KONICA"
    ]

    static func isRaw(_ bytes: [UInt8]) -> Bool {
        guard let ifd0 = TIFFDirectory(first: bytes) else { return false }
        if ifd0.numbers(50706) != nil { return true }
        guard let make = ifd0.string(271)?.uppercased(), makers.contains(where: { make.hasPrefix($0) }) else {
            return false
        }
        var errors = evn_raw_errors()
        guard let lr = evn_raw_init(&errors, 64) else { return false }
        defer { libraw_close(lr) }
        var copy = bytes
        return copy.withUnsafeMutableBytes { libraw_open_buffer(lr, $0.baseAddress, $0.count) == 0 }
    }
}

extension RawCodec {
    /// A raw file as a picture: finished with the default ``RawFinishOptions`` into 16-bit sRGB
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

    /// ``RawFinish/render(_:options:as:)`` with its refusal as an `ImageIOError` naming the file.
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
