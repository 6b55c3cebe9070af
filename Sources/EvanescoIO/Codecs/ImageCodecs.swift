import Foundation
import EvanescoCore

/// A decoded image and what came with it.
public struct DecodedImage: Sendable {
    /// Pixels, upright when `metadata.orientationApplied`.
    public var image: AnyImage
    /// The format the bytes were in.
    public var format: ImageFormat
    /// EXIF, ICC, XMP and the orientation.
    public var metadata: ImageMetadata
    /// Size as stored in the file (before orientation).
    public var storedWidth: Int
    /// Height as stored in the file (before orientation).
    public var storedHeight: Int
    /// Auxiliary images found (HEIF aux types such as "depth" or Apple matte URNs).
    public var auxiliary: [String] = []

    /// An image already upright in memory, as if decoded (for building a ``DepthPhoto`` from your own data).
    public init(
        image: AnyImage, format: ImageFormat, metadata: ImageMetadata = ImageMetadata(),
        storedWidth: Int? = nil, storedHeight: Int? = nil, auxiliary: [String] = []
    ) {
        self.image = image
        self.format = format
        self.metadata = metadata
        self.storedWidth = storedWidth ?? image.width
        self.storedHeight = storedHeight ?? image.height
        self.auxiliary = auxiliary
    }
}

/// How to read.
public struct ReadOptions: Sendable {
    /// Apply the EXIF/TIFF orientation so pixels come back upright (default true).
    public var applyOrientation = true
    /// Size limits checked before any pixel is decoded.
    public var limits = DecodeLimits.standard
    /// - Parameters:
    ///   - applyOrientation: Return pixels upright.
    ///   - limits: Size limits.
    public init(applyOrientation: Bool = true, limits: DecodeLimits = .standard) {
        self.applyOrientation = applyOrientation
        self.limits = limits
    }
}

/// JPEG quality: its one declaration (range, and the default of each kind of output), from
/// which every command's `--quality`, the manifest's `quality` and the studio's downloads are
/// made. 4:4:4 chroma from 95 up, else 4:2:0.
public enum JPEGQuality {
    /// 1...100; the default is ``rendered``.
    public static let setting = NumericSetting("quality", 1...100, default: 92, unit: "", integer: true)
    /// A picture made from another (a conversion, a portrait effect, a backdrop frame): 92.
    public static let rendered = Int(setting.defaultValue!)
    /// A stack's result, the master a photographer keeps: 95, with full-resolution chroma.
    public static let master = 95
    /// The studio's previews on the page (never saved): 85; thumbnails 80.
    public static let preview = 85
    public static let thumbnail = 80

    /// The help line of a `--quality` option (its default is shown beside it).
    public static let help = "JPEG quality, \(setting.span)."
}

/// How to write.
public struct WriteOptions: Sendable {
    /// Format; nil picks it from the path's extension.
    public var format: ImageFormat?
    /// JPEG quality (``JPEGQuality/setting``; 4:4:4 chroma from 95 up, else 4:2:0).
    public var quality: Int
    /// 8, 16 or 32 (32 = float, TIFF only); nil keeps the image's own depth where the format allows.
    public var bitDepth: Int?
    /// EXIF and ICC to carry (EXIF orientation is reset to 1, since pixels are written upright).
    public var metadata: ImageMetadata?
    /// Replace an existing file.
    public var overwrite: Bool
    /// How hard PNG and TIFF compress (the pixels are the same whatever the setting).
    public var compression: LosslessCompression

    /// - Parameters:
    ///   - format: Format; nil picks it from the extension.
    ///   - quality: JPEG quality 1...100.
    ///   - bitDepth: 8, 16 or 32; nil keeps the image's.
    ///   - metadata: EXIF and ICC to carry.
    ///   - overwrite: Replace an existing file.
    ///   - compression: How hard PNG and TIFF compress.
    public init(
        format: ImageFormat? = nil, quality: Int = JPEGQuality.rendered, bitDepth: Int? = nil,
        metadata: ImageMetadata? = nil,
        overwrite: Bool = false, compression: LosslessCompression = .default
    ) {
        self.format = format
        self.quality = quality
        self.bitDepth = bitDepth
        self.metadata = metadata
        self.overwrite = overwrite
        self.compression = compression
    }
}

/// Reading and writing images: the format comes from the bytes on read and from the extension
/// (or `WriteOptions.format`) on write.
public enum ImageCodecs {
    /// Reads and decodes a file.
    public static func read(_ path: String, options: ReadOptions = ReadOptions()) throws -> DecodedImage {
        try decode(InputFile.read(path), path: path, options: options)
    }

    /// Identifies the format of bytes, with a typed error for anything else.
    public static func format(of bytes: [UInt8], path: String) throws -> ImageFormat {
        guard !bytes.isEmpty else { throw ImageIOError.emptyFile(path: path) }
        switch FormatSniffer.sniff(bytes) {
        case .image(.tiff): return RawSniffer.isRaw(bytes) ? .raw : .tiff
        case .image(let f): return f
        case .other(let name): throw ImageIOError.unsupportedFormat(path: path, format: name)
        case .unknown:
            let printable = bytes.prefix(64).allSatisfy { $0 == 9 || $0 == 10 || $0 == 13 || (32..<127).contains($0) }
            throw ImageIOError.unrecognizedFormat(
                path: path,
                detail: printable
                    ? "it looks like text"
                    : "unknown leading bytes "
                        + "\(bytes.prefix(4).map { String(format: "%02x", $0) }.joined(separator: " "))"
            )
        }
    }

    /// Decodes bytes held in memory. `path` is only used in error messages.
    public static func decode(_ bytes: [UInt8], path: String, options: ReadOptions = ReadOptions()) throws
        -> DecodedImage
    {
        var d = try decodeStored(bytes, path: path, options: options, headerOnly: false)
        if options.applyOrientation && !d.metadata.orientationApplied && d.metadata.orientation != .up {
            d.image = d.image.map(d.metadata.orientation)
            d.metadata.orientationApplied = true
        }
        return d
    }

    /// Reads only what the header says (size, depth, channels, metadata, auxiliary images).
    public static func probe(_ path: String, limits: DecodeLimits = .standard) throws -> DecodedImage {
        try decodeStored(InputFile.read(path), path: path, options: ReadOptions(limits: limits), headerOnly: true)
    }

    static func decodeStored(_ bytes: [UInt8], path: String, options: ReadOptions, headerOnly: Bool) throws
        -> DecodedImage
    {
        switch try format(of: bytes, path: path) {
        case .jpeg:
            if headerOnly {
                let d = try TurboJPEGDecompressor()
                let h = try JPEGCodec.header(d, bytes, path: path)
                try options.limits.check(width: h.width, height: h.height, path: path)
                var meta = ImageMetadata()
                if let segs = try? JPEGSegments(bytes) {
                    let m = segs.metadata(in: bytes)
                    meta.exif = m.exif
                    meta.xmp = m.xmp
                    meta.icc = m.icc
                    if let e = m.exif { meta.orientation = EXIF.orientation(in: e) ?? .up }
                }
                let ch = h.colorspace == 2 ? 1 : 3
                return DecodedImage(
                    image: .uint8(Image(width: 0, height: 0, channels: ch)), format: .jpeg, metadata: meta,
                    storedWidth: h.width, storedHeight: h.height,
                    auxiliary: DepthReader.auxiliaryNames(jpeg: bytes, xmp: meta.xmp))
            }
            var d = try JPEGCodec.decode(bytes, path: path, limits: options.limits)
            d.auxiliary = DepthReader.auxiliaryNames(jpeg: bytes, xmp: d.metadata.xmp)
            return d
        case .png: return try PNGCodec.decode(bytes, path: path, limits: options.limits, headerOnly: headerOnly)
        case .heif: return try HEIFCodec.decode(bytes, path: path, limits: options.limits, headerOnly: headerOnly)
        case .tiff: return try TIFFCodec.decode(bytes, path: path, limits: options.limits, headerOnly: headerOnly)
        case .raw: return try RawCodec.decodeImage(bytes, path: path, limits: options.limits, headerOnly: headerOnly)
        }
    }

    /// Encodes to bytes in memory, JPEG or PNG (a server's previews and downloads): the same
    /// encoders, metadata and bit-depth rules as ``write(_:to:options:)``.
    ///
    /// - Parameters:
    ///   - image: The pixels.
    ///   - format: `.jpeg` or `.png`.
    ///   - options: Quality, bit depth, metadata, compression (`overwrite` is not used).
    ///   - path: A name for error messages.
    /// - Throws: `ImageIOError.encodeFailed` for an empty image, a bit depth the format cannot
    ///   hold, or another format.
    public static func encode(
        _ image: AnyImage, format: ImageFormat, options: WriteOptions = WriteOptions(), path: String = "image"
    ) throws -> [UInt8] {
        guard image.width > 0, image.height > 0 else {
            throw ImageIOError.encodeFailed(path: path, format: format.name, detail: "the image is empty")
        }
        switch format {
        case .jpeg:
            if let b = options.bitDepth, b != 8 {
                throw ImageIOError.encodeFailed(
                    path: path, format: "JPEG", detail: "JPEG holds 8-bit samples only; write PNG or TIFF for \(b)-bit")
            }
            let bytes = try JPEGCodec.encode(image.uint8, quality: options.quality, path: path)
            let meta = options.metadata
            return JPEGSegments.inserting(exif: meta?.exifForUprightPixels, icc: meta?.icc, into: bytes)
        case .png:
            let depth = options.bitDepth ?? (image.bitDepth == 8 ? 8 : 16)
            if depth == 32 {
                throw ImageIOError.encodeFailed(
                    path: path, format: "PNG", detail: "PNG cannot hold 32-bit float samples; write .tif for float")
            }
            return depth == 8
                ? try PNGCodec.encode(
                    image.uint8, compression: options.compression, icc: options.metadata?.icc,
                    exif: options.metadata?.exifForUprightPixels, path: path)
                : try PNGCodec.encode(
                    image.uint16, compression: options.compression, icc: options.metadata?.icc,
                    exif: options.metadata?.exifForUprightPixels, path: path)
        default:
            throw ImageIOError.encodeFailed(
                path: path, format: format.name, detail: "only JPEG and PNG are encoded in memory; write TIFF to a file"
            )
        }
    }

    /// Encodes and writes atomically (temporary file + rename); never overwrites an existing file
    /// unless `options.overwrite`.
    public static func write(_ image: AnyImage, to path: String, options: WriteOptions = WriteOptions()) throws {
        let ext = URL(fileURLWithPath: path).pathExtension
        guard let format = options.format ?? ImageFormat.forOutput(extension: ext) else {
            throw ImageIOError.unknownOutputExtension(path: path)
        }
        guard image.width > 0, image.height > 0 else {
            throw ImageIOError.encodeFailed(path: path, format: format.name, detail: "the image is empty")
        }
        if let b = options.bitDepth, ![8, 16, 32].contains(b) {
            throw ImageIOError.encodeFailed(
                path: path, format: format.name, detail: "bit depth \(b) is not 8, 16 or 32")
        }
        switch format {
        case .jpeg, .png:
            try AtomicOutput.write(
                try encode(image, format: format, options: options, path: path), to: path, overwrite: options.overwrite)
        case .tiff:
            let depth = options.bitDepth ?? image.bitDepth
            try AtomicOutput.write(to: path, overwrite: options.overwrite) { temp in
                switch depth {
                case 8:
                    try TIFFCodec.write(
                        image.uint8, to: temp, icc: options.metadata?.icc, compression: options.compression,
                        reportPath: path)
                case 16:
                    try TIFFCodec.write(
                        image.uint16, to: temp, icc: options.metadata?.icc, compression: options.compression,
                        reportPath: path)
                default:
                    try TIFFCodec.write(
                        image.float32, to: temp, icc: options.metadata?.icc, compression: options.compression,
                        reportPath: path)
                }
            }
        case .heif:
            throw ImageIOError.encodeFailed(
                path: path, format: "HEIF", detail: "writing HEIC is not supported yet; write .jpg, .png or .tif")
        case .raw:
            throw ImageIOError.encodeFailed(
                path: path, format: "DNG",
                detail: "a DNG holds a camera's raw mosaic, not a finished picture; write .jpg, .png or .tif (a raw "
                    + "input converts to DNG)")
        }
    }
}
