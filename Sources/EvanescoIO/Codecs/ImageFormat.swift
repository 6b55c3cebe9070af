/// File formats, recognised from their first bytes (never from the file name).
public enum ImageFormat: String, Sendable, Codable, CaseIterable {
    case jpeg, png, heif, tiff
    /// A camera raw file (DNG, CR2, CR3, NEF, ARW, ORF, RW2, PEF, RAF...), read through LibRaw;
    /// as an image it is finished (`RawFinish`), as a raw frame it is read by ``RawCodec``.
    case raw

    /// Display name.
    public var name: String {
        switch self {
        case .jpeg: "JPEG"
        case .png: "PNG"
        case .heif: "HEIF"
        case .tiff: "TIFF"
        case .raw: "camera raw"
        }
    }

    /// The file extensions of the image files read (a folder's frames, a file panel's images);
    /// what is read is decided by the bytes, these only pick files out of a folder.
    public static let fileExtensions = Set<String>(["jpg", "jpeg", "png", "tif", "tiff", "heic", "heif"])
        .union(rawExtensions)

    /// The file extensions of camera raw files.
    public static let rawExtensions: Set<String> = [
        "dng", "cr2", "cr3", "nef", "nrw", "arw", "srf", "sr2", "orf", "rw2", "rwl", "pef", "raf", "srw", "3fr", "iiq",
        "erf", "mef", "mos", "kdc", "dcr"
    ]

    /// Format for an output path by its extension.
    public static func forOutput(extension ext: String) -> ImageFormat? {
        switch ext.lowercased() {
        case "jpg", "jpeg", "jpe": .jpeg
        case "png": .png
        case "tif", "tiff": .tiff
        case "heic", "heif", "hif": .heif
        case "dng": .raw
        default: nil
        }
    }
}

/// What the first bytes say.
package enum SniffResult: Equatable, Sendable {
    case image(ImageFormat)
    /// A format we recognise but do not decode (named).
    case other(String)
    case unknown
}

package enum FormatSniffer {
    /// Identifies the format from the leading bytes (at least 12 are needed for HEIF).
    package static func sniff<C: Collection>(_ b: C) -> SniffResult where C.Element == UInt8, C.Index == Int {
        let a = Array(b.prefix(32))
        func starts(_ p: [UInt8], at o: Int = 0) -> Bool { a.count >= o + p.count && Array(a[o..<(o + p.count)]) == p }
        // Raw formats with a signature of their own (ORF, RW2, CR2, CR3, RAF), before TIFF and ISO
        // media, which they resemble; a DNG or a TIFF-based raw is told by its tags (RawSniffer).
        if starts([0x49, 0x49, 0x52, 0x4F]) || starts([0x49, 0x49, 0x52, 0x53]) || starts([0x4D, 0x4D, 0x4F, 0x52])
            || starts([0x49, 0x49, 0x55, 0x00]) || starts(Array("FUJIFILMCCD-RAW".utf8))
            || (starts([0x49, 0x49, 0x2A, 0x00]) && starts(Array("CR".utf8), at: 8))
            || starts(Array("ftypcrx ".utf8), at: 4)
        {
            return .image(.raw)
        }
        if starts([0xFF, 0xD8, 0xFF]) { return .image(.jpeg) }
        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .image(.png) }
        if starts([0x49, 0x49, 0x2A, 0x00]) || starts([0x4D, 0x4D, 0x00, 0x2A]) || starts([0x49, 0x49, 0x2B, 0x00])
            || starts([0x4D, 0x4D, 0x00, 0x2B])
        {
            return .image(.tiff)
        }
        if starts(Array("ftyp".utf8), at: 4), a.count >= 12 {
            let brand = String(decoding: a[8..<12], as: UTF8.self)
            switch brand {
            case "heic", "heix", "hevc", "hevx", "heim", "heis", "hevm", "hevs", "mif1", "msf1", "mif2":
                return .image(.heif)
            case "avif", "avis": return .other("AVIF")
            case "qt  ": return .other("QuickTime video")
            default: return .other("ISO media (brand '\(brand.trimmingCharacters(in: .whitespaces))', video?)")
            }
        }
        if starts(Array("GIF8".utf8)) { return .other("GIF") }
        if starts(Array("RIFF".utf8)) && starts(Array("WEBP".utf8), at: 8) { return .other("WebP") }
        if starts(Array("RIFF".utf8)) && starts(Array("AVI ".utf8), at: 8) { return .other("AVI video") }
        if starts(Array("BM".utf8)) && a.count >= 14 { return .other("BMP") }
        if starts(Array("%PDF".utf8)) { return .other("PDF") }
        if starts([0x1A, 0x45, 0xDF, 0xA3]) { return .other("Matroska/WebM video") }
        if starts(Array("8BPS".utf8)) { return .other("Photoshop PSD") }
        if starts([0x00, 0x00, 0x00, 0x0C, 0x6A, 0x50, 0x20, 0x20]) { return .other("JPEG 2000") }
        if starts(Array("PF\n".utf8)) || starts(Array("Pf\n".utf8)) { return .other("PFM") }
        return .unknown
    }
}
