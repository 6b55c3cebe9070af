import Foundation
import Testing
import EvanescoCore
@testable import EvanescoIO

/// PNGs built here byte by byte (chunks with their CRCs; the image data filtered row by row with
/// the filter asked for, by an encoder written for these tests, and stored in a zlib stream of
/// uncompressed blocks), so each filter, layout and fault is exactly the one meant.
enum HandPNG {
    static func be32(_ v: UInt32) -> [UInt8] {
        [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)]
    }

    static func chunk(_ type: String, _ body: [UInt8]) -> [UInt8] {
        let t = Array(type.utf8)
        return be32(UInt32(body.count)) + t + body + be32(crc32(t + body))
    }

    static func ihdr(_ w: Int, _ h: Int, depth: Int, colour: Int, interlace: UInt8 = 0) -> [UInt8] {
        chunk("IHDR", be32(UInt32(w)) + be32(UInt32(h)) + [UInt8(depth), UInt8(colour), 0, 0, interlace])
    }

    static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// A zlib stream of stored blocks (at most 65,535 bytes each) and its Adler-32.
    static func zlibStored(_ data: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x78, 0x01], i = 0
        repeat {
            let n = min(65_535, data.count - i), last: UInt8 = i + n == data.count ? 1 : 0
            out += [last, UInt8(n & 0xFF), UInt8(n >> 8), UInt8(~n & 0xFF), UInt8(~n >> 8 & 0xFF)] + data[i..<(i + n)]
            i += n
        } while i < data.count
        var a: UInt32 = 1, b: UInt32 = 0
        for v in data {
            a = (a + UInt32(v)) % 65_521
            b = (b + a) % 65_521
        }
        return out + be32(b << 16 | a)
    }

    /// The rows of `bytes` (`rowBytes` each, `bpp` bytes a pixel) filtered, row y with
    /// `filters[y % filters.count]`, each behind its filter byte.
    static func filtered(_ bytes: [UInt8], rowBytes: Int, bpp: Int, filters: [UInt8]) -> [UInt8] {
        let h = bytes.count / rowBytes
        var out: [UInt8] = []
        for y in 0..<h {
            let f = filters[y % filters.count]
            out.append(f)
            func at(_ x: Int, _ row: Int) -> Int { x < 0 || row < 0 ? 0 : Int(bytes[row * rowBytes + x]) }
            for x in 0..<rowBytes {
                let a = at(x - bpp, y), b = at(x, y - 1), c = at(x - bpp, y - 1)
                let predictor: Int
                switch f {
                case 0: predictor = 0
                case 1: predictor = a
                case 2: predictor = b
                case 3: predictor = (a + b) / 2
                default:
                    let p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c)
                    predictor = pa <= pb && pa <= pc ? a : pb <= pc ? b : c
                }
                out.append(UInt8(truncatingIfNeeded: at(x, y) - predictor))
            }
        }
        return out
    }

    /// A whole file: IHDR, `before` (chunks), the stream cut into `pieces` IDATs, IEND.
    static func file(
        _ w: Int, _ h: Int, depth: Int, colour: Int, stream: [UInt8], pieces: Int = 1, before: [UInt8] = []
    ) -> [UInt8] {
        var idats: [UInt8] = []
        for k in 0..<pieces {
            idats += chunk("IDAT", Array(stream[(stream.count * k / pieces)..<(stream.count * (k + 1) / pieces)]))
        }
        return signature + ihdr(w, h, depth: depth, colour: colour) + before + idats + chunk("IEND", [])
    }

    /// An image's samples as PNG stores them (16-bit big-endian).
    static func bytes(_ image: AnyImage) -> [UInt8] {
        switch image {
        case .uint8(let i): Array(i.samples)
        case .uint16(let i): i.samples.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
        case .float32: []
        }
    }
}

@Suite struct PNGFastPath {
    static let limits = DecodeLimits()

    func libpng(_ bytes: [UInt8]) -> Result<AnyImage, ImageIOError> {
        Result { try PNGCodec.decode(bytes, path: "f.png", limits: Self.limits, fastPath: false).image }.mapError {
            $0 as! ImageIOError
        }
    }
    func either(_ bytes: [UInt8]) -> Result<AnyImage, ImageIOError> {
        Result { try PNGCodec.decode(bytes, path: "f.png", limits: Self.limits).image }.mapError { $0 as! ImageIOError }
    }
    func fast(_ bytes: [UInt8]) -> AnyImage? { PNGCodec.fastDecode(bytes, path: "f.png", limits: Self.limits) }

    static func image(_ w: Int, _ h: Int, channels: Int, depth: Int, seed: UInt64) -> AnyImage {
        depth == 8
            ? .uint8(noiseImage(w, h, channels: channels, as: UInt8.self, seed: seed))
            : .uint16(noiseImage(w, h, channels: channels, as: UInt16.self, seed: seed))
    }

    /// Every filter (alone, and all five in turn row by row) at every layout the path reads,
    /// the data in one to three IDATs: the fast path gives the pixels back exactly, and so does
    /// libpng (which shows the hand-made files are right).
    @Test(arguments: [1, 3, 4])
    func everyFilterAndLayout(_ channels: Int) {
        let colour = channels == 1 ? 0 : channels == 3 ? 2 : 6
        for depth in [8, 16] {
            for (w, h) in [(1, 1), (2, 3), (17, 9), (40, 12)] {
                for filters in [[0], [1], [2], [3], [4], [0, 1, 2, 3, 4], [4, 3, 2, 1]] as [[UInt8]] {
                    var img = Self.image(
                        w, h, channels: channels, depth: depth, seed: UInt64(w * 31 + depth + channels))
                    // The widest in values 0-3 only: Paeth's ties (left against above against upper left) abound.
                    if w == 40, case .uint8(var i) = img {
                        for k in i.samples.indices { i.samples[k] &= 3 }
                        img = .uint8(i)
                    }
                    let bpp = channels * depth / 8
                    let stream = HandPNG.zlibStored(
                        HandPNG.filtered(HandPNG.bytes(img), rowBytes: w * bpp, bpp: bpp, filters: filters))
                    for pieces in [1, 3] {
                        let file = HandPNG.file(w, h, depth: depth, colour: colour, stream: stream, pieces: pieces)
                        let what = "\(w)x\(h)x\(channels) \(depth)-bit, filters \(filters), \(pieces) IDAT"
                        let fastSame = fast(file) == img, libpngSame = (try? libpng(file).get()) == img
                        #expect(fastSame, "fast path: \(what)")
                        #expect(libpngSame, "libpng: \(what)")
                    }
                }
            }
        }
    }

    /// The files Evanesco writes (pieces joined into one stream in several IDATs, with one
    /// filter throughout or a choice per row) take the fast path, with the pixels written.
    @Test func writtenFilesTakeIt() throws {
        let t = TempDir()
        for (w, h) in [(700, 400), (61, 37)] {
            for channels in [1, 3, 4] {
                for depth in [8, 16] {
                    for level in LosslessCompression.allCases {
                        // Smooth with noise: libpng's filter choice then varies between rows.
                        let noise = Self.image(w, h, channels: channels, depth: depth, seed: 3)
                        let img: AnyImage
                        switch noise {
                        case .uint8(let n):
                            img = .uint8(
                                Image(width: w, height: h, channels: channels) { d in
                                    for i in 0..<d.count {
                                        d[i] = UInt8(
                                            truncatingIfNeeded: (i / channels) % w / 3 + (i / channels / w) / 2
                                                + Int(n.samples[i] >> 5))
                                    }
                                })
                        default: img = noise
                        }
                        let f = t.file("\(w)-\(channels)-\(depth)-\(level).png")
                        try ImageCodecs.write(img, to: f, options: WriteOptions(compression: level))
                        let same = fast(bytesOf(f)) == img
                        #expect(same, "\(w)x\(h)x\(channels) \(depth)-bit at level \(level)")
                    }
                }
            }
        }
    }

    /// What the path leaves to libpng: metadata it would have to read (a colour profile, EXIF),
    /// transparency, palettes, grey with alpha, interlacing, low bit depths, an unknown
    /// critical chunk, IDATs not in one run. Where libpng reads the file, reading it with the
    /// path on gives libpng's result.
    @Test func othersAreLibpngs() throws {
        let t = TempDir()
        let rgb = Self.image(9, 5, channels: 3, depth: 8, seed: 5)
        let f = t.file("meta.png")
        try ImageCodecs.write(
            rgb, to: f,
            options: WriteOptions(
                metadata: ImageMetadata(exif: exifBlock(orientation: 1), icc: iccProfile(size: 1_000))))
        let stream = HandPNG.zlibStored(HandPNG.filtered(HandPNG.bytes(rgb), rowBytes: 27, bpp: 3, filters: [1]))
        let grey = HandPNG.zlibStored(
            HandPNG.filtered(Array(repeating: 7, count: 10), rowBytes: 2, bpp: 1, filters: [0]))
        let cases: [(String, [UInt8])] = [
            ("ICC and EXIF", bytesOf(f)),
            (
                "tRNS",
                HandPNG.file(
                    9, 5, depth: 8, colour: 2, stream: stream, before: HandPNG.chunk("tRNS", [0, 1, 0, 2, 0, 3]))
            ),
            (
                "palette",
                HandPNG.signature + HandPNG.ihdr(2, 5, depth: 8, colour: 3)
                    + HandPNG.chunk("PLTE", Array(repeating: 9, count: 24))
                    + HandPNG.chunk("IDAT", grey) + HandPNG.chunk("IEND", [])
            ),
            (
                "grey + alpha",
                HandPNG.signature + HandPNG.ihdr(1, 5, depth: 8, colour: 4) + HandPNG.chunk("IDAT", grey)
                    + HandPNG.chunk("IEND", [])
            ),
            (
                "interlaced",
                HandPNG.signature + HandPNG.ihdr(9, 5, depth: 8, colour: 2, interlace: 1)
                    + HandPNG.chunk("IDAT", stream) + HandPNG.chunk("IEND", [])
            ),
            (
                "4-bit grey",
                HandPNG.signature + HandPNG.ihdr(4, 5, depth: 4, colour: 0) + HandPNG.chunk("IDAT", grey)
                    + HandPNG.chunk("IEND", [])
            ),
            (
                "unknown critical chunk",
                HandPNG.file(9, 5, depth: 8, colour: 2, stream: stream, before: HandPNG.chunk("ZZZZ", [1]))
            ),
            (
                "IDATs split",
                HandPNG.signature + HandPNG.ihdr(9, 5, depth: 8, colour: 2)
                    + HandPNG.chunk("IDAT", Array(stream[..<20]))
                    + HandPNG.chunk("tEXt", Array("a\0b".utf8)) + HandPNG.chunk("IDAT", Array(stream[20...]))
                    + HandPNG.chunk("IEND", [])
            )
        ]
        for (name, file) in cases {
            #expect(fast(file) == nil, "\(name): left to libpng")
            #expect(String(describing: either(file)) == String(describing: libpng(file)), "\(name): libpng's result")
        }
        // What the path reads and skips: a suggested palette in an RGB file, unknown ancillary chunks.
        let extra =
            HandPNG.chunk("PLTE", Array(repeating: 1, count: 6)) + HandPNG.chunk("zzZz", [1, 2, 3])
            + HandPNG.chunk("gAMA", HandPNG.be32(45_455))
        let read = fast(HandPNG.file(9, 5, depth: 8, colour: 2, stream: stream, before: extra)) == rgb
        #expect(read, "a suggested palette and ancillary chunks are skipped")
    }

    /// Hostile files: every cut of a small file, every byte of it changed in turn (the CRCs then
    /// disagree), and damage behind valid CRCs (an unknown filter, a stream short of a row, one
    /// with a byte too many, a wrong Adler-32, a size that disagrees with the data). Reading
    /// with the path on gives exactly libpng's outcome every time: the same pixels or the same
    /// error.
    @Test func faultsGetLibpngsAnswer() {
        let img = Self.image(6, 4, channels: 3, depth: 8, seed: 11)
        let rows = HandPNG.filtered(HandPNG.bytes(img), rowBytes: 18, bpp: 3, filters: [0, 1, 2, 3, 4])
        let good = HandPNG.file(6, 4, depth: 8, colour: 2, stream: HandPNG.zlibStored(rows), pieces: 2)
        let readsGood = fast(good) == img
        #expect(readsGood)
        var variants: [(String, [UInt8])] = []
        for n in 0..<good.count { variants.append(("cut at \(n)", Array(good[..<n]))) }
        for i in 0..<good.count {
            var v = good
            v[i] ^= 0x5A
            variants.append(("byte \(i) changed", v))
        }
        var badFilter = rows
        badFilter[19] = 5
        var badAdler = HandPNG.zlibStored(rows)
        badAdler[badAdler.count - 1] ^= 1
        variants += [
            ("filter 5", HandPNG.file(6, 4, depth: 8, colour: 2, stream: HandPNG.zlibStored(badFilter))),
            (
                "a row short",
                HandPNG.file(6, 4, depth: 8, colour: 2, stream: HandPNG.zlibStored(Array(rows.dropLast(19))))
            ),
            ("a byte too many", HandPNG.file(6, 4, depth: 8, colour: 2, stream: HandPNG.zlibStored(rows + [0]))),
            ("wrong Adler-32", HandPNG.file(6, 4, depth: 8, colour: 2, stream: badAdler)),
            ("taller than its data", HandPNG.file(6, 5, depth: 8, colour: 2, stream: HandPNG.zlibStored(rows))),
            ("no IEND", Array(good.dropLast(12))),
            ("no IDAT", HandPNG.signature + HandPNG.ihdr(6, 4, depth: 8, colour: 2) + HandPNG.chunk("IEND", []))
        ]
        // A size far beyond the bytes present, with the header's CRC wrong too: which of the two
        // faults is named is libpng's choice (the limits come after its header read).
        var huge = HandPNG.file(15_000, 15_000, depth: 8, colour: 2, stream: HandPNG.zlibStored(rows))
        huge[29] ^= 1
        variants.append(("huge, header CRC wrong", huge))
        for (name, v) in variants {
            let a = either(v), b = libpng(v)
            #expect(String(describing: a) == String(describing: b), "\(name)")
            if let f = fast(v) {
                let same = (try? b.get()) == f
                #expect(same, "\(name): the fast path's pixels are libpng's")
            }
        }
    }
}
