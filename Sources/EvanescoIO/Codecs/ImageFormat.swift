/// File formats, recognised from their first bytes (never from the file name).
public enum ImageFormat: String, Sendable, Codable, CaseIterable {
    case jpeg, png, heif, tiff

    /// Display name.
    public var name: String {
        switch self {
        case .jpeg: "JPEG"
        case .png: "PNG"
        case .heif: "HEIF"
        case .tiff: "TIFF"
        }
    }

    /// The file extensions of the image files read (a folder's frames, a file panel's images);
    /// what is read is decided by the bytes, these only pick files out of a folder.
    public static let fileExtensions: Set<String> = ["jpg", "jpeg", "png", "tif", "tiff", "heic", "heif"]

    /// Format for an output path by its extension.
    public static func forOutput(extension ext: String) -> ImageFormat? {
        switch ext.lowercased() {
        case "jpg", "jpeg", "jpe": .jpeg
        case "png": .png
        case "tif", "tiff": .tiff
        case "heic", "heif", "hif": .heif
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
