import EvanescoCore

/// Metadata that travels with an image.
public struct ImageMetadata: Sendable, Equatable {
    /// The EXIF block in TIFF form (starting "II*\0" or "MM\0*"), without JPEG's "Exif\0\0".
    public var exif: [UInt8]?
    /// The ICC colour profile, if embedded.
    public var icc: [UInt8]?
    /// The raw XMP packet.
    public var xmp: [UInt8]?
    /// The orientation the file asked for (EXIF, PNG eXIf, TIFF tag, or HEIF irot/imir).
    public var orientation: Orientation = .up
    /// Whether the decoder already applied `orientation` to the pixels.
    public var orientationApplied = false

    /// - Parameters:
    ///   - exif: The EXIF block (TIFF structure, without the `Exif\0\0` header).
    ///   - icc: The ICC profile.
    ///   - xmp: The XMP packet.
    ///   - orientation: The orientation the file declares.
    public init(exif: [UInt8]? = nil, icc: [UInt8]? = nil, xmp: [UInt8]? = nil, orientation: Orientation = .up) {
        self.exif = exif
        self.icc = icc
        self.xmp = xmp
        self.orientation = orientation
    }

    /// EXIF to write next to pixels that are already upright: orientation reset to 1.
    public var exifForUprightPixels: [UInt8]? {
        exif.map { EXIF.settingOrientation(.up, in: $0) }
    }
}
