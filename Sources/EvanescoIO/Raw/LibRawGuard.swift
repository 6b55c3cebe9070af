/// What LibRaw 0.20 (Debian 12's) must not see. Its Hasselblad model parser (`parseHassyModel`,
/// run while it identifies any file whose maker it takes for Hasselblad) appends to a fixed
/// buffer and aborts the process (glibc's buffer-overflow check) on a crafted or long model name;
/// FuzzDNG found it. A DNG carries its colour in its own tags, so LibRaw is handed a copy whose
/// first directory's texts do not name Hasselblad; a Hasselblad camera format (3FR, FFF), which
/// LibRaw would read by its maker, is refused.
enum LibRawGuard {
    /// A prefix of the maker's name: LibRaw takes a make cut short ("Hasselbla") for it too.
    static let hazard = Array("hasselbl".utf8)

    /// Whether `bytes[at..<at+count]` holds "hasselblad" in any case.
    static func mentions(_ bytes: [UInt8], at: Int, count: Int) -> Bool {
        guard count >= hazard.count else { return false }
        return (at...(at + count - hazard.count)).contains { o in
            hazard.indices.allSatisfy { bytes[o + $0] | 0x20 == hazard[$0] }
        }
    }

    /// The bytes LibRaw may read: `bytes` itself, or a copy with the texts of the first
    /// directory that name Hasselblad overwritten (a DNG); throws for a Hasselblad camera format.
    static func bytesForLibRaw(_ bytes: [UInt8], isDNG: Bool, path: String) throws -> [UInt8] {
        guard let ifd = TIFFDirectory(first: bytes) else {
            if mentions(bytes, at: 0, count: min(bytes.count, 1 << 16)) { throw refusal(path) }
            return bytes
        }
        var copy: [UInt8]? = nil
        for e in ifd.entries.values where e.type == 2 && mentions(bytes, at: e.valueOffset, count: e.count) {
            guard isDNG else { throw refusal(path) }
            if copy == nil { copy = bytes }
            for k in 0..<e.count { copy![e.valueOffset + k] = k + 1 < e.count ? 0x2D : 0 }
        }
        return copy ?? bytes
    }

    static func refusal(_ path: String) -> ImageIOError {
        .unsupportedLayout(
            path: path,
            detail: "Hasselblad camera files are not read: LibRaw 0.20 can crash on them (a bug fixed in later "
                + "LibRaw); convert it to DNG first")
    }
}
