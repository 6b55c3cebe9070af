import Foundation
import Testing
import EvanescoCore
@testable import EvanescoIO

/// A DNG of ours (little-endian; libtiff writes its strips first, then its directories and their
/// values) laid out as most cameras' are, header first: everything after the strips moved before
/// them, every offset to it or into the strips changed to match.
func headerFirst(_ b: [UInt8]) -> [UInt8] {
    precondition(b[0] == 0x49, "a little-endian TIFF")
    func u16(_ o: Int) -> Int { Int(b[o]) | Int(b[o + 1]) << 8 }
    func u32(_ o: Int) -> Int { u16(o) | u16(o + 2) << 16 }
    let sizes = [1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8, 13: 4]
    typealias Entry = (at: Int, tag: Int, size: Int, count: Int)
    func entries(_ o: Int) -> [Entry] {
        (0..<u16(o)).map { i in
            let e = o + 2 + 12 * i
            return (e, u16(e), sizes[u16(e + 2), default: 1], u32(e + 4))
        }
    }
    /// Where an entry's values lie, and its i-th (SHORT or LONG).
    func values(_ e: Entry) -> Int { e.size * e.count > 4 ? u32(e.at + 8) : e.at + 8 }
    func value(_ e: Entry, _ i: Int) -> Int { e.size == 2 ? u16(values(e) + 2 * i) : u32(values(e) + 4 * i) }
    let ifd0 = u32(4), first = entries(ifd0)
    let strips = first.first { $0.tag == 273 }!, counts = first.first { $0.tag == 279 }!
    let dataEnd = (0..<strips.count).map { value(strips, $0) + value(counts, $0) }.max()!
    let tail = b.count - dataEnd
    func moved(_ x: Int) -> Int { x >= dataEnd ? x - dataEnd + 8 : x + tail }
    var out = Array(b[0..<8]) + Array(b[dataEnd...]) + Array(b[8..<dataEnd])
    func put(_ o: Int, _ v: Int, bytes: Int = 4) {
        precondition(bytes == 4 || v < 1 << 16, "an offset past a SHORT's range")
        for k in 0..<bytes { out[o + k] = UInt8((v >> (8 * k)) & 255) }
    }
    put(4, moved(ifd0))
    let exif = first.first { $0.tag == 34665 }.map { u32($0.at + 8) }
    for dir in [ifd0] + (exif.map { [$0] } ?? []) {
        for e in entries(dir) {
            if e.size * e.count > 4 || e.tag == 34665 { put(moved(e.at + 8), moved(u32(e.at + 8))) }
            if e.tag == 273 {
                for i in 0..<e.count { put(moved(values(e) + e.size * i), moved(value(e, i)), bytes: e.size) }
            }
        }
        let next = dir + 2 + 12 * u16(dir)
        if u32(next) != 0 { put(moved(next), moved(u32(next))) }
    }
    return out
}

struct RawHeaderBytesTests {
    /// Probes `path` both ways and expects the same frame, container and size.
    func expectSameProbe(_ path: String, _ what: String) throws -> RawFile {
        let alone = try RawCodec.probe(path: path), whole = try RawCodec.probe(InputFile.read(path), path: path)
        #expect(alone.raw == whole.raw, "\(what): the header alone says something else")
        #expect(alone.width == whole.width && alone.height == whole.height && alone.container == whole.container)
        return alone
    }

    @Test("A DNG's header read without its image data says what the whole file says: each CFA, LinearRaw, Hasselblad")
    func headerAlone() throws {
        let dir = TempDir()
        let linear = sampleLinearRaw(width: 220, height: 200)
        var hasselblad = sampleRaw(width: 320, height: 240)
        hasselblad.capture.make = "Hasselblad"
        hasselblad.capture.model = String(repeating: "H", count: 63)
        let bayer = [CFAPattern.rggb, .bggr, .grbg, .gbrg].map { sampleRaw(width: 320, height: 240, cfa: $0) }
        for (i, raw) in (bayer + [linear, hasselblad]).enumerated() {
            let path = dir.file("h\(i).dng"), written = dir.file("w\(i).dng")
            try DNGWriter.write(raw, to: written)
            // Ours as written (its directories at the end) is read whole; the same header first is not.
            #expect(try RawHeaderBytes.read(written) == nil)
            let bytes = try headerFirst(InputFile.read(written)), size = bytes.count
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            #expect(try RawCodec.read(path).raw.samples == raw.samples, "\(i): the moved file reads back")
            let header = try #require(try RawHeaderBytes.read(path), "\(i): read whole")
            // The head, and the first 4 KB of each strip of 64 rows.
            #expect(header.size == size && header.head.count == RawHeaderBytes.headBytes)
            #expect(header.pieces.count == (raw.height + 63) / 64)
            #expect(header.pieces.allSatisfy { $0.bytes.count == RawHeaderBytes.pieceBytes })
            let probed = try expectSameProbe(path, "\(i)")
            #expect(probed.raw.samples.width == 0 && probed.raw.layout == raw.layout)
            #expect(probed.width == raw.width && probed.raw.capture.make == raw.capture.make)
        }
    }

    @Test("A DNG whose header reaches past the head, or too small to gain, is read whole; a short one is refused")
    func wholeWhenNeeded() throws {
        let dir = TempDir()
        let small = dir.file("small.dng"), large = dir.file("large.dng"), written = dir.file("written.dng")
        try DNGWriter.write(sampleRaw(), to: written)
        try Data(headerFirst(InputFile.read(written))).write(to: URL(fileURLWithPath: small))
        try DNGWriter.write(sampleRaw(width: 400, height: 300), to: written, overwrite: true)
        try Data(headerFirst(InputFile.read(written))).write(to: URL(fileURLWithPath: large))
        #expect(try RawHeaderBytes.read(small) == nil)
        _ = try expectSameProbe(small, "small")
        // A head of 64 bytes holds the first directory's start only.
        #expect(try RawHeaderBytes.read(large, head: 64) == nil)
        #expect(try RawHeaderBytes.read(large) != nil)
        // Cut to 180 KB of its 240: the header is whole, the strip runs past the end.
        let bytes = try InputFile.read(large)
        let short = dir.file("short.dng")
        try Data(bytes.prefix(180_000)).write(to: URL(fileURLWithPath: short))
        #expect(try RawHeaderBytes.read(short) != nil)
        #expect(throws: ImageIOError.self) { try RawCodec.probe(path: short) }
        #expect(throws: ImageIOError.self) { try RawCodec.probe(InputFile.read(short), path: short) }
        #expect(throws: ImageIOError.fileNotFound(path: dir.file("none.dng"))) {
            try RawCodec.probe(path: dir.file("none.dng"))
        }
    }
}
