import Foundation
import Testing
import EvanescoCore
@testable import EvanescoIO

/// Every kind of bad input gives a typed error naming the file, never a crash, and the input is
/// left as it was.
@Suite struct BadInput {
    func expectTypedError(
        _ path: String, _ check: (ImageIOError) -> Bool = { _ in true },
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let before = bytesOf(path)
        do {
            _ = try ImageCodecs.read(path)
            Issue.record("\(path) decoded without error", sourceLocation: sourceLocation)
        } catch let e as ImageIOError {
            #expect(check(e), "unexpected error \(e)", sourceLocation: sourceLocation)
            #expect(e.description.contains(path), sourceLocation: sourceLocation)
        } catch {
            Issue.record("untyped error \(error)", sourceLocation: sourceLocation)
        }
        #expect(bytesOf(path) == before, "input modified", sourceLocation: sourceLocation)
    }

    @Test func zeroByteFile() throws {
        let t = TempDir()
        FileManager.default.createFile(atPath: t.file("empty.jpg"), contents: Data())
        expectTypedError(t.file("empty.jpg")) { $0 == .emptyFile(path: t.file("empty.jpg")) }
    }

    @Test func missingFileAndDirectory() {
        let t = TempDir()
        expectTypedError(t.file("nope.png")) { $0 == .fileNotFound(path: t.file("nope.png")) }
        expectTypedError(t.path) { $0 == .notAFile(path: t.path) }
    }

    @Test func nonImageFiles() throws {
        let t = TempDir()
        FileManager.default.createFile(atPath: t.file("notes.jpg"), contents: Data("just some text\n".utf8))
        expectTypedError(t.file("notes.jpg")) {
            if case .unrecognizedFormat(_, let d) = $0 { return d.contains("text") }
            return false
        }
        FileManager.default.createFile(atPath: t.file("anim.png"), contents: Data("GIF89a\u{1}\u{0}\u{1}\u{0}".utf8))
        expectTypedError(t.file("anim.png")) { $0 == .unsupportedFormat(path: t.file("anim.png"), format: "GIF") }
        FileManager.default.createFile(atPath: t.file("bin.tif"), contents: Data([0x00, 0x13, 0x37, 0x99, 0x01]))
        expectTypedError(t.file("bin.tif")) {
            if case .unrecognizedFormat = $0 { return true }
            return false
        }
    }

    @Test func wrongExtensionIsReadByContent() throws {
        let t = TempDir()
        let img = noiseImage(9, 7, channels: 3, as: UInt8.self)
        try ImageCodecs.write(.uint8(img), to: t.file("real.png"))
        try FileManager.default.moveItem(atPath: t.file("real.png"), toPath: t.file("fake.jpg"))
        let d = try ImageCodecs.read(t.file("fake.jpg"))
        #expect(d.format == .png && d.image == .uint8(img))
    }

    /// Files cut at several offsets: each a typed truncated/corrupt error.
    @Test(arguments: ["jpg", "png", "tif"])
    func truncatedSelfMadeFiles(_ ext: String) throws {
        let t = TempDir()
        try ImageCodecs.write(.uint8(noiseImage(200, 150, channels: 3, as: UInt8.self)), to: t.file("full.\(ext)"))
        let full = bytesOf(t.file("full.\(ext)"))
        for cut in [1, 3, 8, 20, 100, full.count / 3, full.count / 2, full.count - 40, full.count - 2]
        where cut < full.count {
            let p = t.file("cut\(cut).\(ext)")
            FileManager.default.createFile(atPath: p, contents: Data(full.prefix(cut)))
            expectTypedError(p) { e in
                switch e {
                case .truncated, .corrupt, .unrecognizedFormat: return true
                default: return false
                }
            }
        }
    }

    @Test(.enabled(if: SharedData.available, SharedData.absent))
    func truncatedRealFiles() throws {
        let t = TempDir()
        for rel in [
            "depth/pug-iphone13pro/pug.heic", "depth/truedepth-iphone/jpeg_depth_data.jpg",
            "registration/graffiti/graf1.png"
        ] {
            let full = bytesOf(SharedData.path(rel))
            let ext = (rel as NSString).pathExtension
            // In an Apple JPEG the primary image ends where the MPF secondaries begin: cut inside it.
            let primaryEnd = MPFIndex.entries(full).first?.offset ?? full.count
            for frac in [0.001, 0.05, 0.5, 0.9, 0.999] {
                let p = t.file("cut-\(frac).\(ext)")
                try? FileManager.default.removeItem(atPath: p)
                FileManager.default.createFile(
                    atPath: p, contents: Data(full.prefix(max(1, Int(Double(primaryEnd) * frac)))))
                expectTypedError(p) { e in
                    switch e {
                    case .truncated, .corrupt, .unrecognizedFormat: return true
                    default: return false
                    }
                }
            }
        }
        // Cut after the primary image: it still decodes, and the lost secondaries are flagged.
        let jpeg = bytesOf(SharedData.path("depth/truedepth-iphone/jpeg_depth_data.jpg"))
        let p = t.file("lost-matte.jpg")
        FileManager.default.createFile(atPath: p, contents: Data(jpeg.prefix(jpeg.count - 1000)))
        #expect(try ImageCodecs.read(p).auxiliary == ["disparity", "mpf-image-damaged"])
    }

    @Test func absurdDimensionsInHeaders() throws {
        let t = TempDir()
        // PNG: a valid IHDR claiming 100000 x 100000.
        var ihdr = Array("IHDR".utf8)
        ihdr += [0x00, 0x01, 0x86, 0xA0, 0x00, 0x01, 0x86, 0xA0, 8, 2, 0, 0, 0]
        let crc = crc32(ihdr)
        let png: [UInt8] =
            [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13] + ihdr
            + [UInt8(crc >> 24), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc & 0xFF)]
        FileManager.default.createFile(atPath: t.file("huge.png"), contents: Data(png))
        expectTypedError(t.file("huge.png")) {
            if case .dimensionsTooLarge(_, 100000, 100000, _) = $0 { return true }
            return false
        }
        // JPEG: a real file whose SOF0 is patched to 60000 x 60000.
        var jpeg = try JPEGCodec.encode(smoothImage(16, 16), quality: 80, path: "x")
        let sof = try #require((0..<(jpeg.count - 1)).first { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0xC0 })
        jpeg[sof + 5] = 0xEA
        jpeg[sof + 6] = 0x60
        jpeg[sof + 7] = 0xEA
        jpeg[sof + 8] = 0x60
        FileManager.default.createFile(atPath: t.file("huge.jpg"), contents: Data(jpeg))
        expectTypedError(t.file("huge.jpg")) {
            if case .dimensionsTooLarge(_, 60000, 60000, _) = $0 { return true }
            return false
        }
    }

    @Test(arguments: ["jpg", "png", "tif"])
    func limitsApplyToEveryFormat(_ ext: String) throws {
        let t = TempDir()
        try ImageCodecs.write(.uint8(smoothImage(64, 48)), to: t.file("a.\(ext)"))
        #expect(throws: ImageIOError.dimensionsTooLarge(path: t.file("a.\(ext)"), width: 64, height: 48, limit: 1000)) {
            try ImageCodecs.read(t.file("a.\(ext)"), options: ReadOptions(limits: DecodeLimits(maxPixels: 1000)))
        }
    }
}

@Suite struct Outputs {
    @Test func existingOutputIsNotOverwrittenWithoutForce() throws {
        let t = TempDir()
        let p = t.file("out.png")
        FileManager.default.createFile(atPath: p, contents: Data("precious".utf8))
        #expect(throws: ImageIOError.outputExists(path: p)) {
            try ImageCodecs.write(.uint8(smoothImage(8, 8)), to: p)
        }
        #expect(bytesOf(p) == Array("precious".utf8))
        try ImageCodecs.write(.uint8(smoothImage(8, 8)), to: p, options: WriteOptions(overwrite: true))
        #expect(try ImageCodecs.read(p).image.width == 8)
        #expect(t.contents == ["out.png"], "no temporary files left")
    }

    @Test func failedWritesLeaveNothingBehind() throws {
        let t = TempDir()
        #expect(throws: ImageIOError.self) {
            try ImageCodecs.write(
                .uint16(noiseImage(8, 8, channels: 3, as: UInt16.self)), to: t.file("deep.jpg"),
                options: WriteOptions(bitDepth: 16))
        }
        #expect(throws: ImageIOError.unknownOutputExtension(path: t.file("x.bmp"))) {
            try ImageCodecs.write(.uint8(smoothImage(8, 8)), to: t.file("x.bmp"))
        }
        #expect(throws: ImageIOError.self) {
            try ImageCodecs.write(.uint8(smoothImage(8, 8)), to: t.file("missing-folder/x.png"))
        }
        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try AtomicOutput.write(to: t.file("half.bin"), overwrite: false) { temp in
                _ = FileManager.default.createFile(atPath: temp, contents: Data([1, 2, 3]))
                throw Boom()
            }
        }
        #expect(t.contents.isEmpty, "left: \(t.contents)")
    }
}
