import EvanescoCore

/// Just enough of EXIF's TIFF structure to read and reset the orientation tag (0x0112) in IFD0.
/// Every offset is bounds-checked; a malformed block reads as "no orientation".
public enum EXIF {
    static let orientationTag: UInt16 = 0x0112

    /// Offset of the orientation entry's value and the byte order, when present.
    static func orientationEntry(_ e: [UInt8]) -> (valueOffset: Int, littleEndian: Bool)? {
        guard e.count >= 8, (e[0] == 0x49 && e[1] == 0x49) || (e[0] == 0x4D && e[1] == 0x4D) else { return nil }
        let r = TIFFStructureReader(e)
        guard let ifd = r.u32(4), let n = r.u16(ifd), n < 1000 else { return nil }
        for i in 0..<n {
            let entry = ifd + 2 + i * 12
            guard let tag = r.u16(entry), let type = r.u16(entry + 2) else { return nil }
            if tag == orientationTag && type == 3 && entry + 10 <= e.count { return (entry + 8, r.littleEndian) }
        }
        return nil
    }

    /// The orientation recorded in an EXIF block (TIFF header first), or nil.
    public static func orientation(in exif: [UInt8]) -> Orientation? {
        guard let (o, le) = orientationEntry(exif) else { return nil }
        let v = le ? Int(exif[o]) | Int(exif[o + 1]) << 8 : Int(exif[o]) << 8 | Int(exif[o + 1])
        return Orientation(rawValue: v)
    }

    /// A copy with the orientation set to `value` (used after the orientation was applied to the
    /// pixels, so that viewers do not rotate a second time).
    public static func settingOrientation(_ value: Orientation, in exif: [UInt8]) -> [UInt8] {
        guard let (o, le) = orientationEntry(exif) else { return exif }
        var copy = exif
        let v = UInt16(value.rawValue)
        if le {
            copy[o] = UInt8(v & 0xFF)
            copy[o + 1] = UInt8(v >> 8)
        } else {
            copy[o] = UInt8(v >> 8)
            copy[o + 1] = UInt8(v & 0xFF)
        }
        return copy
    }
}
