/// How hard PNG and TIFF writes compress: the same pixels whatever the choice, only time and
/// size differ. Every setting writes files that libpng, libtiff, OpenCV and browsers read.
///
/// The image data is compressed in pieces of rows on every core (PNG: joined into one zlib
/// stream; TIFF: one stream a strip, as TIFF has it). On a 2-core machine a 12 MP 8-bit RGB photo
/// takes about 0.15 s as PNG by default, at 1.07-1.15x the size of libpng's level 6 and 0.7-0.8x
/// OpenCV's default file; docs/benchmarks.md has the table.
public enum LosslessCompression: String, Sendable, Codable, CaseIterable {
    /// The quickest write: PNG's Up filter, libdeflate level 1; TIFF as `default`.
    case fast
    /// Quick and compact: 8-bit PNG with the Paeth filter (16-bit with Up, which suits its byte
    /// pairs better and is faster), libdeflate level 1; TIFF's horizontal predictor, level 1.
    case `default`
    /// The smallest file, 20-30 times slower: libpng's choice of filter for each row and
    /// libdeflate level 9 (about a tenth smaller than `default`).
    case best

    /// PNG filter type (CKernels' EVN_PNG_*) and libdeflate level for PNG's image data.
    func png(sixteenBit: Bool) -> (filter: Int32, level: Int32) {
        switch self {
        case .fast: return (2, 1)
        case .default: return (sixteenBit ? 2 : 4, 1)
        case .best: return (5, 9)
        }
    }

    /// libdeflate level for TIFF's Deflate strips.
    var tiffLevel: Int32 { self == .best ? 9 : 1 }
}
