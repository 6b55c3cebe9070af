import Foundation

/// ICC profiles of the spaces a raw finish writes (ICC.1:2001-04, version 2.1, matrix/TRC
/// display profiles): the colorants adapted to D50 with Bradford, D50 media white, and the
/// space's curve (the sRGB curve as a 1024-entry table, or linear).
public enum ICCProfile {
    /// The profile of a raw finish's colour space.
    public static func profile(for space: RawFinishOptions.ColorSpace) -> [UInt8] {
        switch space {
        case .sRGB: matrixTRC(.sRGB, linear: false, description: "sRGB IEC61966-2.1 (Evanesco)")
        case .displayP3: matrixTRC(.displayP3, linear: false, description: "Display P3 (Evanesco)")
        case .linearSRGB: matrixTRC(.sRGB, linear: true, description: "Linear sRGB (Evanesco)")
        case .linearProPhoto: matrixTRC(.proPhoto, linear: true, description: "Linear ProPhoto RGB (Evanesco)")
        }
    }

    /// A matrix/TRC RGB display profile.
    public static func matrixTRC(_ primaries: RGBPrimaries, linear: Bool, description: String) -> [UInt8] {
        let m = primaries.toXYZD50
        let column = { (c: Int) in [m.m[c], m.m[3 + c], m.m[6 + c]] }
        let curve: [UInt8] =
            linear
            ? tagType("curv") + be32(0)
            : tagType("curv") + be32(1024)
                + (0..<1024).flatMap { i in
                    be16(UInt16((SRGB.toLinear(Float(i) / 1023) * 65535).rounded()))
                }
        let ascii = Array(description.utf8.prefix(200))
        let desc =
            tagType("desc") + be32(UInt32(ascii.count + 1)) + ascii + [0] + be32(0) + be32(0) + [0, 0, 0]
            + [UInt8](repeating: 0, count: 67)
        let cprt = tagType("text") + Array("No copyright, use freely".utf8) + [0]
        let d50 = RGBPrimaries.xyz(RGBPrimaries.d50)
        // Tags in order; the three curves share one block of data.
        let tags: [(String, [UInt8])] = [
            ("desc", desc), ("cprt", cprt), ("wtpt", xyz(d50)), ("rXYZ", xyz(column(0))), ("gXYZ", xyz(column(1))),
            ("bXYZ", xyz(column(2))), ("rTRC", curve)
        ]
        var table: [UInt8] = be32(UInt32(tags.count + 2))
        var data: [UInt8] = []
        var offset = 128 + 4 + (tags.count + 2) * 12
        var curveAt = 0
        for (sig, body) in tags {
            table += Array(sig.utf8) + be32(UInt32(offset)) + be32(UInt32(body.count))
            if sig == "rTRC" { curveAt = offset }
            let padded = body + [UInt8](repeating: 0, count: (4 - body.count % 4) % 4)
            data += padded
            offset += padded.count
        }
        for sig in ["gTRC", "bTRC"] { table += Array(sig.utf8) + be32(UInt32(curveAt)) + be32(UInt32(curve.count)) }
        let size = 128 + table.count + data.count
        var header = be32(UInt32(size)) + Array("none".utf8) + [2, 0x10, 0, 0] + Array("mntrRGB XYZ ".utf8)
        header += [UInt8](repeating: 0, count: 12) + Array("acspAPPL".utf8) + be32(0) + be32(0) + be32(0)
        header += [UInt8](repeating: 0, count: 8) + be32(0)
        header += s15(d50[0]) + s15(d50[1]) + s15(d50[2]) + Array("none".utf8)
        header += [UInt8](repeating: 0, count: 128 - header.count)
        return header + table + data
    }

    static func tagType(_ s: String) -> [UInt8] { Array(s.utf8) + [0, 0, 0, 0] }
    static func be32(_ v: UInt32) -> [UInt8] {
        [UInt8(v >> 24), UInt8(v >> 16 & 255), UInt8(v >> 8 & 255), UInt8(v & 255)]
    }
    static func be16(_ v: UInt16) -> [UInt8] { [UInt8(v >> 8), UInt8(v & 255)] }
    static func s15(_ v: Double) -> [UInt8] { be32(UInt32(bitPattern: Int32((v * 65536).rounded()))) }
    static func xyz(_ v: [Double]) -> [UInt8] { tagType("XYZ ") + s15(v[0]) + s15(v[1]) + s15(v[2]) }
}
