import Foundation

/// A memory size as people write it, read the same way on the command line, in a manifest and in
/// the studio: a whole number of mebibytes (`512`), or a number with a binary unit (`512M`,
/// `2G`, `1.5G`, `64K`, `1T`, `1048576B`; `MB`, `MiB`, `GB`, `GiB`... are read alike, case
/// aside). The library's settings hold bytes; this is the one unit every front end shows.
public enum MemorySize {
    /// The unit a bare number is in.
    public static let bareUnit = "MB"
    /// How the sizes are written, for help and errors.
    public static let spellings = "a number of MB, or a size such as 512M or 2G"

    /// The help of a memory-limit setting, after what the memory is for: its spellings and that
    /// 0 means no limit.
    public static func help(_ what: String, zeroIsNone: Bool = true) -> String {
        "\(what): \(spellings)" + (zeroIsNone ? " (0: no limit)." : ".")
    }

    /// Bytes of `text`, or nil when it is not a size (negative, not a number, an unknown unit,
    /// or past `Int.max`).
    ///
    /// - Parameter text: `512`, `512M`, `2G`...
    /// - Returns: Bytes.
    public static func bytes(_ text: String) -> Int? {
        let t = text.trimmingCharacters(in: .whitespaces).uppercased()
        let digits = t.prefix { $0.isNumber || $0 == "." }
        guard !digits.isEmpty, digits.filter({ $0 == "." }).count <= 1, let value = Double(digits) else { return nil }
        var unit = String(t.dropFirst(digits.count)).trimmingCharacters(in: .whitespaces)
        if unit.hasSuffix("IB") {
            unit = String(unit.dropLast(2))
        } else if unit.count == 2 && unit.hasSuffix("B") {
            unit = String(unit.dropLast())
        }
        let shift: Int
        switch unit {
        case "": shift = 20
        case "B": shift = 0
        case "K": shift = 10
        case "M": shift = 20
        case "G": shift = 30
        case "T": shift = 40
        default: return nil
        }
        let bytes = value * Double(1 << shift)
        guard bytes.isFinite, bytes < 9.2e18, bytes.rounded() == bytes || shift > 0 else { return nil }
        return Int(bytes.rounded())
    }

    /// `bytes` as the shortest exact size: `2G`, `512M`, `1536K`, `1000B`.
    ///
    /// - Parameter bytes: A size in bytes, at least 0.
    /// - Returns: The size written with the largest unit that divides it.
    public static func describe(_ bytes: Int) -> String {
        for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] where bytes > 0 && bytes % (1 << shift) == 0 {
            return "\(bytes >> shift)\(unit)"
        }
        return "\(bytes)B"
    }
}
