import EvanescoCore
import Foundation

/// The write settings a user chooses, declared once (the C interface lists them, the Python
/// package takes them as keyword arguments), and read from JSON under the same keys: `quality`,
/// `bitDepth` (`"keep"`, 8, 16 or 32), `compression` and `overwrite`. The format follows the
/// path's extension; metadata is the caller's to pass in code.
extension WriteOptions: DeclaresSettings, Decodable {
    public static let settings: [Setting] = [
        .number("quality", JPEGQuality.setting),
        Setting(
            "bitDepth", .choice(values: ["keep", "8", "16", "32"], default: "keep"),
            summary: "Bits per sample: keep the image's where the format allows, or 8, 16 or 32 (float, TIFF only)"),
        .choice(
            "compression", LosslessCompression.self, default: Self().compression,
            summary: "PNG/TIFF compression: the pixels are the same whatever the choice"),
        Setting("overwrite", .toggle(default: false), summary: "Replace an existing file")
    ]

    enum Key: String, CodingKey, CaseIterable {
        case quality, bitDepth, compression, overwrite
    }

    public init(from decoder: any Decoder) throws {
        self.init()
        try SettingsCoding.rejectUnknownKeys(decoder, known: Key.allCases.map(\.rawValue))
        let c = try decoder.container(keyedBy: Key.self)
        if let q = try c.decodeWholeNumberIfPresent(forKey: .quality) {
            do { try JPEGQuality.setting.check(q) } catch { throw SettingsCoding.invalid(error, in: decoder) }
            quality = q
        }
        if c.contains(.bitDepth), try !c.decodeNil(forKey: .bitDepth) {
            let text =
                (try? c.decode(String.self, forKey: .bitDepth))
                ?? (try? c.decode(Int.self, forKey: .bitDepth)).map(String.init)
            switch text {
            case "keep": bitDepth = nil
            case "8", "16", "32": bitDepth = Int(text!)
            default:
                throw DecodingError.dataCorruptedError(
                    forKey: .bitDepth, in: c, debugDescription: "must be one of keep, 8, 16, 32")
            }
        }
        compression = try c.decodeChoiceIfPresent(LosslessCompression.self, forKey: .compression) ?? compression
        overwrite = try c.decodeIfPresent(Bool.self, forKey: .overwrite) ?? overwrite
    }
}
