import Foundation
import EvanescoCore

/// One TIFF directory's entries, parsed from the bytes (classic TIFF, either byte order): what a
/// DNG says about its colour and noise, read as the numbers written, and where its data lies.
struct TIFFDirectory {
    struct Entry {
        var type: Int
        var count: Int
        /// Where the values are: inside the entry (4 bytes or fewer) or at the offset it gives.
        var valueOffset: Int
    }

    let bytes: [UInt8]
    let bigEndian: Bool
    var entries: [Int: Entry] = [:]
    /// The next directory's offset (0: none).
    var next = 0
    /// Whether an entry's values were left out for lying past the end of the bytes.
    var valuesBeyondBytes = false

    static let typeSizes = [1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8, 13: 4]

    /// The directory at `offset`, or nil when the bytes do not hold one.
    init?(_ bytes: [UInt8], offset: Int) {
        guard bytes.count >= 8, bytes[0] == bytes[1], bytes[0] == 0x49 || bytes[0] == 0x4D else { return nil }
        self.bytes = bytes
        bigEndian = bytes[0] == 0x4D
        guard offset >= 8, offset + 2 <= bytes.count else { return nil }
        let n = u16(offset)
        guard n > 0, n < 4096, offset + 2 + n * 12 + 4 <= bytes.count else { return nil }
        for i in 0..<n {
            let e = offset + 2 + i * 12
            let type = u16(e + 2), count = u32(e + 4)
            guard let size = TIFFDirectory.typeSizes[type] else { continue }
            let total = size.multipliedReportingOverflow(by: count)
            guard !total.overflow else { continue }
            let at = total.partialValue <= 4 ? e + 8 : u32(e + 8)
            guard at >= 0, at + total.partialValue <= bytes.count else {
                valuesBeyondBytes = true
                continue
            }
            entries[u16(e)] = Entry(type: type, count: count, valueOffset: at)
        }
        next = u32(offset + 2 + n * 12)
    }

    /// IFD0 of a TIFF.
    init?(first bytes: [UInt8]) {
        guard let o = TIFFDirectory.firstOffset(bytes) else { return nil }
        self.init(bytes, offset: o)
    }

    /// Where a TIFF header (the file's first 8 bytes, either byte order) says IFD0 is.
    static func firstOffset(_ b: [UInt8]) -> Int? {
        guard b.count >= 8, b[0] == b[1], b[0] == 0x49 || b[0] == 0x4D else { return nil }
        return TIFFStructureReader(b).u32(4)
    }

    // Offsets are checked against the bytes before they are read (0 past the end, never reached).
    func u16(_ o: Int) -> Int { TIFFStructureReader(bytes, littleEndian: !bigEndian).u16(o) ?? 0 }
    func u32(_ o: Int) -> Int { TIFFStructureReader(bytes, littleEndian: !bigEndian).u32(o) ?? 0 }

    /// A numeric tag's values as doubles (rationals divided: a zero denominator gives NaN).
    func numbers(_ tag: Int) -> [Double]? {
        guard let e = entries[tag] else { return nil }
        return (0..<min(e.count, 1 << 16)).map { i in
            let o = e.valueOffset + i * (TIFFDirectory.typeSizes[e.type] ?? 1)
            switch e.type {
            case 1, 7: return Double(bytes[o])
            case 6: return Double(Int8(bitPattern: bytes[o]))
            case 3: return Double(u16(o))
            case 8: return Double(Int16(truncatingIfNeeded: u16(o)))
            case 4, 13: return Double(u32(o))
            case 9: return Double(Int32(truncatingIfNeeded: u32(o)))
            case 5: return Double(u32(o)) / Double(u32(o + 4))
            case 10: return Double(Int32(truncatingIfNeeded: u32(o))) / Double(Int32(truncatingIfNeeded: u32(o + 4)))
            case 11: return Double(Float(bitPattern: UInt32(u32(o))))
            case 12:
                let hi = UInt64(u32(bigEndian ? o : o + 4)), lo = UInt64(u32(bigEndian ? o + 4 : o))
                return Double(bitPattern: hi << 32 | lo)
            default: return .nan
            }
        }
    }

    /// A tag's values as integers; nil when it is absent or one is not a whole number within
    /// ±2^40 (a rational with a zero denominator, a float where a count goes).
    func ints(_ tag: Int) -> [Int]? {
        guard let v = numbers(tag), v.allSatisfy({ $0.isFinite && abs($0) < 0x100_0000_0000 }) else { return nil }
        return v.map { Int($0) }
    }

    /// The first value of `tag` as an integer, or `fallback` when the tag is absent (nil when
    /// it is there but not a whole number in range).
    func int(_ tag: Int, _ fallback: Int) -> Int? {
        guard entries[tag] != nil else { return fallback }
        return ints(tag)?.first
    }

    /// Where the directory's image data lies: its strips' (or tiles') offsets and byte counts,
    /// empty when it has none.
    var dataPieces: (offsets: [Int], counts: [Int]) {
        (ints(273) ?? ints(324) ?? [], ints(279) ?? ints(325) ?? [])
    }

    func string(_ tag: Int) -> String? {
        guard let e = entries[tag], e.type == 2 || e.type == 1 else { return nil }
        let raw = bytes[e.valueOffset..<(e.valueOffset + e.count)].prefix { $0 != 0 }
        return String(decoding: raw, as: UTF8.self).trimmingCharacters(in: .whitespaces)
    }
}

/// What a DNG's own tags say: its version, colour calibration, noise profile, and where the raw
/// image's data lies (checked against the file's size before LibRaw reads it).
struct DNGTags {
    var version: String
    var raw: TIFFDirectory
    var first: TIFFDirectory

    /// The DNG's tags, or nil when the bytes are not a DNG (no DNGVersion in IFD0).
    static func read(_ bytes: [UInt8]) -> DNGTags? {
        guard let ifd0 = TIFFDirectory(first: bytes), let v = ifd0.ints(50706), v.count == 4 else { return nil }
        var raw = ifd0
        if ifd0.int(254, 0) != 0, let subs = ifd0.ints(330) {
            for o in subs {
                if let d = TIFFDirectory(bytes, offset: o), d.int(254, 0) == 0 {
                    raw = d
                    break
                }
            }
        }
        return DNGTags(version: v.map(String.init).joined(separator: "."), raw: raw, first: ifd0)
    }

    /// Refuses a raw image whose data runs past the end of the file, or (uncompressed) whose
    /// strips or tiles hold fewer bytes than its size needs.
    func checkData(fileSize: Int, path: String) throws {
        let (offsets, counts) = raw.dataPieces
        let w = raw.int(256, 0) ?? 0, h = raw.int(257, 0) ?? 0
        guard !offsets.isEmpty, offsets.count == counts.count, w > 0, h > 0 else {
            throw ImageIOError.corrupt(
                path: path, format: "DNG", detail: "its raw image has no data (no strips or tiles, or no size)")
        }
        for (o, c) in zip(offsets, counts) where o < 0 || c < 0 || o + c > fileSize {
            throw ImageIOError.truncated(
                path: path, format: "DNG",
                detail: "its raw data runs to byte \(o + c) but the file has \(fileSize) bytes")
        }
        if raw.int(262, 0) == 32803 {
            let dim = raw.ints(33421) ?? [], pattern = raw.ints(33422) ?? []
            guard dim == [2, 2], pattern.count == 4, CFAPattern(colors: pattern.map { UInt8(clamping: $0) }) != nil
            else {
                throw ImageIOError.unsupportedLayout(
                    path: path,
                    detail: "its colour filter (CFARepeatPatternDim \(dim), CFAPattern \(pattern)) is not a 2x2 Bayer "
                        + "pattern of red, green and blue; only Bayer and linear raws are read")
            }
        }
        let bits = raw.int(258, 16) ?? 16, spp = raw.int(277, 1) ?? 1
        let needed = Double(w) * Double(h) * Double(spp) * Double(bits) / 8
        let stored = counts.reduce(0, +)
        if raw.int(259, 1) == 1, raw.entries[324] == nil, Double(stored) < needed {
            throw ImageIOError.truncated(
                path: path, format: "DNG",
                detail:
                    "its header declares \(w)x\(h) samples (\(String(format: "%.0f", needed)) bytes) but its strips "
                    + "hold \(stored)")
        }
    }

    func matrix(_ tag: Int) -> [Float]? {
        guard let v = first.numbers(tag), v.count >= 9 else { return nil }
        return v.prefix(9).map(Float.init)
    }

    /// The colour the DNG declares, checked: finite, invertible matrices and a positive neutral.
    func color(path: String) throws -> RawColor? {
        guard let m1 = matrix(50721) else { return nil }
        let i1 = first.int(50778, 21) ?? 21
        let m2 = matrix(50722), i2 = first.ints(50779)?.first
        // The calibration under D65 when there is one (the finish's daylight), else the first.
        let useSecond = m2 != nil && i2 == 21 && i1 != 21
        var c = RawColor(colorMatrix: useSecond ? m2! : m1, illuminant: useSecond ? 21 : i1, asShotNeutral: [1, 1, 1])
        c.colorMatrix2 = useSecond ? m1 : m2
        c.illuminant2 = useSecond ? i1 : i2
        c.forwardMatrix = matrix(useSecond ? 50965 : 50964)
        c.forwardMatrix2 = matrix(useSecond ? 50964 : 50965)
        for m in [c.colorMatrix, c.colorMatrix2, c.forwardMatrix].compactMap({ $0 }) {
            guard m.allSatisfy(\.isFinite), Matrix3(m).inverse != nil else {
                throw ImageIOError.corrupt(
                    path: path, format: "DNG", detail: "its colour matrix \(m) is not finite or not invertible")
            }
        }
        if let n = first.numbers(50728) {
            guard n.count >= 3, n.prefix(3).allSatisfy({ $0.isFinite && $0 > 0 }) else {
                throw ImageIOError.corrupt(
                    path: path, format: "DNG", detail: "its AsShotNeutral \(n) is not three positive numbers")
            }
            c.asShotNeutral = n.prefix(3).map { Float($0 / n[1]) }
        } else {
            c.asShotNeutral = c.daylightNeutral.map(Float.init)
        }
        let be = first.numbers(50730)?.first ?? 0
        guard be.isFinite, abs(be) <= 16 else {
            throw ImageIOError.corrupt(path: path, format: "DNG", detail: "its BaselineExposure \(be) is not a number")
        }
        c.baselineExposure = Float(be)
        return c
    }

    /// NoiseProfile (DNG 1.3): a (scale, offset) pair per plane, or one for all.
    var noise: NoiseModel? {
        guard let v = raw.numbers(51041) ?? first.numbers(51041), v.count >= 2, v.count % 2 == 0,
            v.allSatisfy({ $0.isFinite && $0 >= 0 })
        else { return nil }
        return NoiseModel(
            planes: stride(from: 0, to: v.count, by: 2).map { NoiseModelPlane(scale: v[$0], offset: v[$0 + 1]) })
    }
}

/// Where an uncompressed DNG's visible rows lie in its bytes
/// (``DNGTags/uncompressedRows(rawWidth:rawHeight:top:left:width:height:channels:)``).
struct UncompressedRows {
    let offsets: [Int], rowsPerStrip: Int, rowBytes: Int, top: Int, leftBytes: Int
    /// Whether the samples are stored in the other byte order than this machine's.
    let swap: Bool

    /// The byte at which visible row y's first sample starts.
    func start(_ y: Int) -> Int {
        let sy = y + top
        return offsets[sy / rowsPerStrip] + (sy % rowsPerStrip) * rowBytes + leftBytes
    }

    /// Whether every row starts at an even byte, so that its samples can be read in place.
    var aligned: Bool { rowBytes % 2 == 0 && leftBytes % 2 == 0 && offsets.allSatisfy { $0 % 2 == 0 } }
}

extension DNGTags {
    /// Where the visible area's rows lie in the raw image's strips, when they are uncompressed
    /// 16-bit samples with no linearization table (DNGs from converters, and ours): LibRaw's
    /// unpack takes them one sample at a time, several times slower. Nil otherwise (or when the
    /// sizes do not match LibRaw's), and LibRaw reads them.
    func uncompressedRows(
        rawWidth: Int, rawHeight: Int, top: Int, left: Int, width: Int, height: Int, channels: Int
    ) -> UncompressedRows? {
        let r = raw
        guard r.int(259, 1) == 1, r.ints(258)?.allSatisfy({ $0 == 16 }) ?? false,
            r.int(277, 1) == channels, r.int(284, 1) == 1, r.entries[50712] == nil,
            r.int(256, 0) == rawWidth, r.int(257, 0) == rawHeight,
            let offsets = r.ints(273), let counts = r.ints(279), offsets.count == counts.count,
            top >= 0, left >= 0, top + height <= rawHeight, left + width <= rawWidth, let rps = r.int(278, rawHeight)
        else { return nil }
        let rowsPerStrip = max(1, min(rps, rawHeight))
        let rowBytes = rawWidth * channels * 2
        guard offsets.count == (rawHeight + rowsPerStrip - 1) / rowsPerStrip,
            zip(offsets, counts).allSatisfy({ $0.1 >= 0 && $0.0 >= 0 && $0.0 + $0.1 <= r.bytes.count }),
            (0..<offsets.count).allSatisfy({
                counts[$0] >= min(rowsPerStrip, rawHeight - $0 * rowsPerStrip) * rowBytes
            })
        else { return nil }
        return UncompressedRows(
            offsets: offsets, rowsPerStrip: rowsPerStrip, rowBytes: rowBytes, top: top, leftBytes: left * channels * 2,
            swap: r.bigEndian != (UInt16(1).bigEndian == 1))
    }

    /// The visible area's samples, copied out of `rows` (in this machine's byte order).
    func samples(_ rows: UncompressedRows, width: Int, height: Int, channels: Int) -> Image<UInt16> {
        let n = width * channels
        return raw.bytes.withUnsafeBytes { src in
            Image<UInt16>(uninitializedWidth: width, height: height, channels: channels) { dst in
                StripExecutor.forEachStrip(rows: height, minimumRows: 64) { strip in
                    for y in strip {
                        let at = rows.start(y)
                        let out = UnsafeMutableRawBufferPointer(
                            rebasing: UnsafeMutableRawBufferPointer(dst)[(y * n * 2)...])
                        out.copyMemory(from: UnsafeRawBufferPointer(rebasing: src[at..<(at + n * 2)]))
                        if rows.swap {
                            let v = dst.baseAddress! + y * n
                            for i in 0..<n { v[i] = v[i].byteSwapped }
                        }
                    }
                }
            }
        }
    }
}
