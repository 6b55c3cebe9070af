import Foundation
import Testing
import EvanescoCore
@testable import EvanescoIO

@Suite struct FormatSniffing {
    @Test func knownSignatures() {
        #expect(FormatSniffer.sniff([0xFF, 0xD8, 0xFF, 0xE0]) == .image(.jpeg))
        #expect(FormatSniffer.sniff([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) == .image(.png))
        #expect(FormatSniffer.sniff(Array("II*\0".utf8)) == .image(.tiff))
        #expect(FormatSniffer.sniff(Array("MM\0*".utf8)) == .image(.tiff))
        #expect(FormatSniffer.sniff([0, 0, 0, 24] + Array("ftypheic".utf8)) == .image(.heif))
        #expect(FormatSniffer.sniff(Array("GIF89a".utf8)) == .other("GIF"))
        #expect(FormatSniffer.sniff(Array("RIFF\0\0\0\0WEBP".utf8)) == .other("WebP"))
        #expect(FormatSniffer.sniff(Array("hello world".utf8)) == .unknown)
    }
}

@Suite struct RoundTrips {
    @Test(arguments: [1, 3, 4])
    func png8IsLossless(_ channels: Int) throws {
        let t = TempDir()
        let img = noiseImage(61, 37, channels: channels, as: UInt8.self)
        try ImageCodecs.write(.uint8(img), to: t.file("a.png"))
        let back = try ImageCodecs.read(t.file("a.png"))
        #expect(back.format == .png && back.image == .uint8(img))
    }

    @Test(arguments: [1, 3, 4])
    func png16IsLossless(_ channels: Int) throws {
        let t = TempDir()
        let img = noiseImage(41, 29, channels: channels, as: UInt16.self)
        try ImageCodecs.write(.uint16(img), to: t.file("a.png"))
        #expect(try ImageCodecs.read(t.file("a.png")).image == .uint16(img))
    }

    /// Every setting compresses the image data in pieces of rows joined into one zlib stream:
    /// lossless at every depth and channel count, from one piece (a 1 x 1 image) to many (the
    /// 700 x 400 ones: 3 pieces at 8-bit RGB, 8 at 16-bit RGBA), with the metadata chunks kept.
    /// libpng checks every chunk's CRC and zlib the stream's Adler-32 on the way back.
    @Test(arguments: LosslessCompression.allCases)
    func pngIsLosslessInPieces(_ level: LosslessCompression) throws {
        let t = TempDir()
        let icc = iccProfile(size: 3_000), exif = exifBlock(orientation: 1)
        for (w, h) in [(1, 1), (5, 3), (61, 37), (700, 400)] {
            for channels in [1, 3, 4] {
                let a = noiseImage(w, h, channels: channels, as: UInt8.self, seed: UInt64(w + channels))
                let b = noiseImage(w, h, channels: channels, as: UInt16.self, seed: UInt64(h + channels))
                for (name, img) in [("8", AnyImage.uint8(a)), ("16", .uint16(b))] {
                    let f = t.file("\(w)x\(h)x\(channels)-\(name).png")
                    // (An RGB profile goes with colour pictures only: libpng drops it from a grey one.)
                    let meta = ImageMetadata(exif: exif, icc: channels >= 3 ? icc : nil)
                    try ImageCodecs.write(img, to: f, options: WriteOptions(metadata: meta, compression: level))
                    let back = try ImageCodecs.read(f)
                    let same = back.image == img
                    // And through libpng alone (the file has metadata, so the reader above took
                    // libpng too; this pins it).
                    let libpng = try PNGCodec.decode(InputFile.read(f), path: f, limits: .standard, fastPath: false)
                    #expect(libpng.image == img, "\(w)x\(h)x\(channels) \(name)-bit at \(level): libpng")
                    #expect(same, "\(w)x\(h)x\(channels) \(name)-bit at level \(level)")
                    #expect(
                        back.metadata.icc == meta.icc && back.metadata.exif == exif,
                        "\(w)x\(h)x\(channels) \(name)-bit at level \(level): metadata")
                }
            }
        }
        #expect(
            PNGCodec.pieces(height: 400, filteredRowBytes: 700 * 3 + 1) == 3
                && PNGCodec.pieces(height: 400, filteredRowBytes: 700 * 8 + 1) == 8)
    }

    /// Deflate with the horizontal (integers) or floating-point predictor, read back by libtiff:
    /// one strip (53 x 31) and several (700 x 400: 3 strips at 8-bit RGB, 7 at 16-bit RGB, each
    /// compressed on its own core), at every compression setting.
    @Test(arguments: [1, 3, 4])
    func tiffAllDepthsAreLossless(_ channels: Int) throws {
        let t = TempDir()
        for (w, h) in [(53, 31), (700, 400)] {
            for compression in LosslessCompression.allCases {
                let a = noiseImage(w, h, channels: channels, as: UInt8.self)
                let b = noiseImage(w, h, channels: channels, as: UInt16.self)
                var f = noiseImage(w, h, channels: channels, as: Float.self)
                f.samples[0] = -3.5
                f.samples[1] = 1e6  // floats keep any value, e.g. depth in metres
                let options = WriteOptions(overwrite: true, compression: compression)
                try ImageCodecs.write(.uint8(a), to: t.file("8.tif"), options: options)
                try ImageCodecs.write(.uint16(b), to: t.file("16.tif"), options: options)
                try ImageCodecs.write(.float32(f), to: t.file("32.tif"), options: options)
                #expect(try ImageCodecs.read(t.file("8.tif")).image == .uint8(a), "\(w)x\(h) \(compression)")
                #expect(try ImageCodecs.read(t.file("16.tif")).image == .uint16(b), "\(w)x\(h) \(compression)")
                #expect(try ImageCodecs.read(t.file("32.tif")).image == .float32(f), "\(w)x\(h) \(compression)")
            }
        }
    }

    @Test func jpegWithinTolerance() throws {
        let t = TempDir()
        let img = smoothImage(160, 120)
        try ImageCodecs.write(.uint8(img), to: t.file("a.jpg"), options: WriteOptions(quality: 95))
        let back = try ImageCodecs.read(t.file("a.jpg")).image.uint8
        #expect(back.width == 160 && back.height == 120 && back.channels == 3)
        var sum = 0.0, maxErr = 0
        for (a, b) in zip(img.samples, back.samples) {
            let e = abs(Int(a) - Int(b))
            sum += Double(e)
            maxErr = max(maxErr, e)
        }
        let mean = sum / Double(img.samples.count)
        #expect(mean < 1.0, "mean abs error \(mean)")
        #expect(maxErr <= 8, "max abs error \(maxErr)")
        // Grey JPEG stays one channel.
        try ImageCodecs.write(.uint8(img.withChannels(1)), to: t.file("g.jpg"))
        #expect(try ImageCodecs.read(t.file("g.jpg")).image.channels == 1)
    }

    @Test func sixteenBitAndFloatConvertOnWrite() throws {
        let t = TempDir()
        let img = noiseImage(20, 10, channels: 3, as: UInt16.self)
        try ImageCodecs.write(.uint16(img), to: t.file("a.png"), options: WriteOptions(bitDepth: 8))
        #expect(try ImageCodecs.read(t.file("a.png")).image == .uint8(img.converted(to: UInt8.self)))
        try ImageCodecs.write(.uint16(img), to: t.file("f.tif"), options: WriteOptions(bitDepth: 32))
        #expect(try ImageCodecs.read(t.file("f.tif")).image.uint16 == img)
    }

    @Test func metadataIsCarriedWhenAskedWithOrientationReset() throws {
        let t = TempDir()
        let icc = iccProfile(size: 70_000)  // spans two JPEG APP2 chunks
        let meta = ImageMetadata(exif: exifBlock(orientation: 6), icc: icc, orientation: .right)
        let img = smoothImage(32, 16)
        for name in ["m.jpg", "m.png"] {
            try ImageCodecs.write(.uint8(img), to: t.file(name), options: WriteOptions(metadata: meta))
            let back = try ImageCodecs.read(t.file(name))
            #expect(back.metadata.icc == icc, "\(name)")
            #expect(back.metadata.exif.flatMap(EXIF.orientation) == .up, "\(name): pixels are upright, so EXIF says 1")
            #expect(back.image.width == 32, "\(name): not rotated again")
        }
        try ImageCodecs.write(.uint8(img), to: t.file("m.tif"), options: WriteOptions(metadata: meta))
        #expect(try ImageCodecs.read(t.file("m.tif")).metadata.icc == icc)
        try ImageCodecs.write(.uint8(img), to: t.file("plain.jpg"))
        #expect(try ImageCodecs.read(t.file("plain.jpg")).metadata.icc == nil)
    }
}

/// The 3x2 pattern of the core tests, drawn as 16-px blocks of grey `40 * v`, written with an
/// orientation tag, must read back as the EXIF definition of that tag (each written out by hand).
@Suite struct OrientationOnRead {
    static let expected: [Int: [[Int]]] = [
        1: [[1, 2, 3], [4, 5, 6]], 2: [[3, 2, 1], [6, 5, 4]], 3: [[6, 5, 4], [3, 2, 1]], 4: [[4, 5, 6], [1, 2, 3]],
        5: [[1, 4], [2, 5], [3, 6]], 6: [[4, 1], [5, 2], [6, 3]], 7: [[6, 3], [5, 2], [4, 1]],
        8: [[3, 6], [2, 5], [1, 4]]
    ]
    static let blocks = Image<UInt8>(width: 48, height: 32, channels: 3) { d in
        for y in 0..<32 {
            for x in 0..<48 { for c in 0..<3 { d[(y * 48 + x) * 3 + c] = UInt8(40 * (1 + x / 16 + 3 * (y / 16))) } }
        }
    }
    static func readBlocks(_ img: Image<UInt8>) -> [[Int]] {
        (0..<(img.height / 16)).map { by in
            (0..<(img.width / 16)).map { bx in
                Int((Float(img[bx * 16 + 8, by * 16 + 8, 0]) / 40).rounded())
            }
        }
    }

    @Test(arguments: 1...8)
    func jpegExifOrientation(_ o: Int) throws {
        let t = TempDir()
        let jpeg = try JPEGCodec.encode(Self.blocks, quality: 98, path: "x")
        try AtomicOutput.write(
            JPEGSegments.inserting(exif: exifBlock(orientation: o), icc: nil, into: jpeg), to: t.file("o.jpg"),
            overwrite: false)
        let d = try ImageCodecs.read(t.file("o.jpg"))
        #expect(d.metadata.orientation.rawValue == o)
        #expect(Self.readBlocks(d.image.uint8) == Self.expected[o])
        let stored = try ImageCodecs.read(t.file("o.jpg"), options: ReadOptions(applyOrientation: false))
        #expect(Self.readBlocks(stored.image.uint8) == Self.expected[1])
    }

    @Test(arguments: 1...8)
    func pngExifChunkOrientation(_ o: Int) throws {
        let t = TempDir()
        let png = try PNGCodec.encode(
            Self.blocks, compression: .fast, icc: nil, exif: exifBlock(orientation: o), path: "x")
        try AtomicOutput.write(png, to: t.file("o.png"), overwrite: false)
        let d = try ImageCodecs.read(t.file("o.png"))
        #expect(Self.readBlocks(d.image.uint8) == Self.expected[o])
        #expect(d.image.uint8 == Self.blocks.oriented(Orientation(rawValue: o)!))
    }

    @Test(arguments: 1...8)
    func tiffOrientationTag(_ o: Int) throws {
        let t = TempDir()
        try TIFFCodec.write(
            Self.blocks, to: t.file("o.tif"), icc: nil, orientation: Orientation(rawValue: o)!, reportPath: "x")
        let d = try ImageCodecs.read(t.file("o.tif"))
        #expect(Self.readBlocks(d.image.uint8) == Self.expected[o])
    }
}

/// The PNG specification allows one eXIf chunk, before the image data; libpng warns
/// "eXIf: duplicate" on a second. Every writer path writes exactly one, and reads it back.
@Suite struct PNGChunkTests {
    /// The chunk types of a PNG, in order.
    static func chunkTypes(_ png: [UInt8]) -> [String] {
        var types: [String] = [], i = 8
        while i + 8 <= png.count {
            let length = Int(png[i]) << 24 | Int(png[i + 1]) << 16 | Int(png[i + 2]) << 8 | Int(png[i + 3])
            types.append(String(decoding: png[(i + 4)..<(i + 8)], as: UTF8.self))
            i += 12 + length
        }
        return types
    }

    @Test(arguments: LosslessCompression.allCases)
    func oneExifChunkAtEveryLevel(level: LosslessCompression) throws {
        // A minimal big-endian EXIF block: orientation 6.
        let exif: [UInt8] = [0x4D, 0x4D, 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 6, 0, 0, 0, 0, 0, 0]
        let image = Image<UInt8>(width: 64, height: 40, channels: 3) { d in
            for i in 0..<d.count { d[i] = UInt8(i % 251) }
        }
        let png = try ImageCodecs.encode(
            .uint8(image), format: .png, options: WriteOptions(metadata: ImageMetadata(exif: exif), compression: level))
        let types = Self.chunkTypes(png)
        #expect(types.filter { $0 == "eXIf" }.count == 1, "level \(level): \(types)")
        #expect(types.firstIndex(of: "eXIf")! < types.firstIndex(of: "IDAT")!, "\(types)")
        #expect(types.last == "IEND")
        let back = try ImageCodecs.decode(png, path: "x.png", options: ReadOptions(applyOrientation: false))
        // The EXIF is kept (its orientation rewritten for upright pixels), the pixels exact.
        #expect(back.metadata.exif?.count == exif.count && back.image.uint8.samples == image.samples)
    }
}
