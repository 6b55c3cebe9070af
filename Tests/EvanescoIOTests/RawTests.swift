import Foundation
import Testing
import EvanescoCore
@testable import EvanescoIO

/// A raw frame with every field set: a gradient mosaic with a per-site pattern (so a shifted or
/// swapped plane shows), two calibrations, forward matrices, noise, capture settings.
func sampleRaw(width: Int = 64, height: Int = 48, cfa: CFAPattern = .rggb, orientation: Orientation = .up) -> RawMosaic
{
    let samples = Image<UInt16>(width: width, height: height, channels: 1) { d in
        for y in 0..<height {
            for x in 0..<width { d[y * width + x] = UInt16(200 + (x * 37 + y * 11) % 3000 + (x & 1) * 7 + (y & 1) * 3) }
        }
    }
    var color = RawColor(
        colorMatrix: [0.7, -0.2, -0.1, -0.45, 1.25, 0.15, -0.08, 0.16, 0.53], illuminant: 21,
        asShotNeutral: [0.45, 1, 0.66], baselineExposure: 0.25)
    color.colorMatrix2 = [0.8, -0.25, -0.05, -0.4, 1.2, 0.2, -0.1, 0.2, 0.6]
    color.illuminant2 = 17
    color.forwardMatrix = [0.6, 0.25, 0.1, 0.25, 0.8, -0.05, 0.02, -0.1, 0.9]
    color.forwardMatrix2 = [0.62, 0.22, 0.12, 0.24, 0.82, -0.06, 0.03, -0.12, 0.91]
    var capture = RawCapture()
    capture.make = "Evanesco"
    capture.model = "Test Camera"
    capture.uniqueCameraModel = "Evanesco Test Camera"
    capture.iso = 800
    capture.exposureTime = 0.02
    capture.aperture = 2.8
    capture.focalLength = 26
    return RawMosaic(
        samples: samples, layout: .bayer(cfa), blackLevels: [256, 257, 258, 259], whiteLevel: 4095, color: color,
        noise: NoiseModel(planes: [NoiseModelPlane(scale: 2e-4, offset: 3e-6)]), capture: capture,
        orientation: orientation)
}

/// A LinearRaw frame (three linear colours a pixel, as ProRAW) with a pattern in its samples.
func sampleLinearRaw(width: Int = 40, height: Int = 30) -> RawMosaic {
    var linear = RawMosaic(
        samples: Image(width: width, height: height, channels: 3) { d in
            for i in 0..<d.count { d[i] = UInt16(100 + (i * 29) % 900) }
        }, layout: .linearRGB, blackLevels: [64], whiteLevel: 1023,
        color: RawColor(colorMatrix: sampleRaw().color.colorMatrix, asShotNeutral: [0.5, 1, 0.7]))
    linear.capture.make = "Evanesco"
    return linear
}

func expectClose(_ a: [Float]?, _ b: [Float]?, _ tolerance: Float = 1e-5, _ what: String) {
    guard let a, let b else {
        #expect(a == nil && b == nil, "\(what): one is missing")
        return
    }
    #expect(a.count == b.count && zip(a, b).allSatisfy { abs($0 - $1) <= tolerance }, "\(what): \(a) vs \(b)")
}

struct RawTests {
    @Test("A DNG we write reads back through LibRaw with the same samples and metadata, for each CFA")
    func dngRoundTrip() throws {
        let dir = TempDir()
        for (i, cfa) in [CFAPattern.rggb, .bggr, .grbg, .gbrg].enumerated() {
            let raw = sampleRaw(cfa: cfa, orientation: i == 1 ? .right : .up)
            let path = dir.file("f\(i).dng")
            try DNGWriter.write(raw, to: path)
            for direct in [true, false] {
                let back = try RawCodec.open(
                    InputFile.read(path), path: path, limits: .standard, samples: true, direct: direct)
                #expect(back.container == "DNG 1.4.0.0")
                #expect(back.raw.samples.samples == raw.samples.samples, "\(cfa) direct \(direct)")
                #expect(back.raw.cfa == cfa)
                #expect(back.raw.blackLevels == raw.blackLevels)
                #expect(back.raw.whiteLevel == raw.whiteLevel)
                #expect(back.raw.orientation == raw.orientation)
                expectClose(back.raw.color.colorMatrix, raw.color.colorMatrix, 1e-6, "ColorMatrix1")
                expectClose(back.raw.color.colorMatrix2, raw.color.colorMatrix2, 1e-6, "ColorMatrix2")
                expectClose(back.raw.color.forwardMatrix, raw.color.forwardMatrix, 1e-6, "ForwardMatrix1")
                expectClose(back.raw.color.forwardMatrix2, raw.color.forwardMatrix2, 1e-6, "ForwardMatrix2")
                expectClose(back.raw.color.asShotNeutral, raw.color.asShotNeutral, 1e-6, "AsShotNeutral")
                #expect(back.raw.color.illuminant == 21 && back.raw.color.illuminant2 == 17)
                #expect(abs(back.raw.color.baselineExposure - 0.25) < 1e-6)
                #expect(back.raw.noise == raw.noise)
                #expect(back.raw.capture.make == "Evanesco" && back.raw.capture.model == "Test Camera")
                #expect(back.raw.capture.uniqueCameraModel == "Evanesco Test Camera")
                #expect(back.raw.capture.iso == 800)
                #expect(abs(back.raw.capture.exposureTime - 0.02) < 1e-6)
                #expect(abs(back.raw.capture.aperture - 2.8) < 1e-5)
            }
        }
    }

    @Test("Rows handed on from a DNG's bytes are its samples, for each CFA and for LinearRaw, not copied")
    func rowsInPlace() throws {
        let dir = TempDir()
        for (i, raw) in [sampleRaw(width: 66, height: 50), sampleRaw(cfa: .gbrg), sampleLinearRaw()].enumerated() {
            let path = dir.file("r\(i).dng")
            try DNGWriter.write(raw, to: path)
            let rows = try RawCodec.read(path) { file, rows -> [UInt16] in
                #expect(file.raw.samples.width == 0 && file.raw.layout == raw.layout, "\(i): copied")
                #expect(file.width == raw.width && rows.width == raw.width && rows.height == raw.height)
                #expect(rows.channels == raw.samples.channels && file.raw.blackLevels == raw.blackLevels)
                return (0..<rows.height).flatMap {
                    UnsafeBufferPointer(start: rows.row($0), count: rows.width * rows.channels)
                }
            }
            #expect(rows == Array(raw.samples.samples), "\(i)")
        }
        // Rows of samples already decoded are theirs.
        let image = sampleRaw(width: 10, height: 6).samples
        let back = RawSampleRows.of(image) { rows in
            (0..<rows.height).flatMap { UnsafeBufferPointer(start: rows.row($0), count: rows.width) }
        }
        #expect(back == Array(image.samples))
    }

    @Test("A raw reads as an image: finished, upright, with its sRGB profile; probe reads no samples")
    func rawAsImage() throws {
        let dir = TempDir()
        let path = dir.file("r.dng")
        try DNGWriter.write(sampleRaw(orientation: .right), to: path)
        #expect(try ImageCodecs.format(of: InputFile.read(path), path: path) == .raw)
        let d = try ImageCodecs.read(path)
        #expect(d.format == .raw && d.image.width == 48 && d.image.height == 64 && d.image.bitDepth == 16)
        #expect(d.metadata.icc == ICCProfile.profile(for: .sRGB))
        let p = try ImageCodecs.probe(path)
        #expect(p.storedWidth == 64 && p.storedHeight == 48 && p.image.width == 0)
        // A plain 16-bit grey TIFF stays a TIFF.
        try ImageCodecs.write(.uint16(sampleRaw().samples), to: dir.file("g.tif"))
        #expect(try ImageCodecs.read(dir.file("g.tif")).format == .tiff)
    }

    /// A good DNG with one tag's values replaced in place (same type and count).
    func patched(_ bytes: [UInt8], tag: Int, _ edit: (inout [UInt8], TIFFDirectory.Entry) -> Void) -> [UInt8] {
        var b = bytes
        let ifd = TIFFDirectory(first: bytes)!
        edit(&b, ifd.entries[tag]!)
        return b
    }

    func expectRefused(_ bytes: [UInt8], _ words: String, sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            _ = try RawCodec.decode(bytes, path: "bad.dng")
            Issue.record("decoded without error", sourceLocation: sourceLocation)
        } catch let e as ImageIOError {
            #expect(e.description.contains(words), "\(e.description)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("untyped error \(error)", sourceLocation: sourceLocation)
        }
    }

    @Test("DNGs whose data or tags lie are refused with one clear error")
    func lyingDNGs() throws {
        let dir = TempDir()
        let path = dir.file("good.dng")
        try DNGWriter.write(sampleRaw(), to: path)
        let good = try InputFile.read(path)
        expectRefused(Array(good.prefix(good.count / 2)), "truncated")
        // Black above white: WhiteLevel 100 (a LONG in the entry itself).
        expectRefused(
            patched(good, tag: 50717) { b, e in
                b[e.valueOffset] = 100
                b[e.valueOffset + 1] = 0
            }, "black level")
        // AsShotNeutral's red numerator zero.
        expectRefused(
            patched(good, tag: 50728) { b, e in for k in 0..<4 { b[e.valueOffset + k] = 0 } }, "AsShotNeutral")
        // A ColorMatrix1 denominator of zero: not a number.
        expectRefused(
            patched(good, tag: 50721) { b, e in for k in 4..<8 { b[e.valueOffset + k] = 0 } }, "colour matrix")
        // A 3x3 CFA repeat (the pattern tag keeps its 4 values): not a Bayer 2x2 mosaic.
        expectRefused(
            patched(good, tag: 33421) { b, e in
                b[e.valueOffset] = 3
                b[e.valueOffset + 2] = 3
            }, "2x2 Bayer")
        // A height of 60000 rows over 6 KB of strips: the data is not there.
        expectRefused(
            patched(good, tag: 257) { b, e in
                b[e.valueOffset] = 0x60
                b[e.valueOffset + 1] = 0xEA
            }, "truncated")
    }
}

struct LibRawGuardTests {
    @Test("A Hasselblad DNG with a 63-character model is read (LibRaw 0.20 alone aborts on it), names intact")
    func hasselbladModel() throws {
        var raw = sampleRaw()
        raw.capture.make = "Hasselblad"
        raw.capture.model = String(repeating: "H", count: 63)
        raw.capture.uniqueCameraModel = "Hasselblad " + raw.capture.model
        let dir = TempDir()
        try DNGWriter.write(raw, to: dir.file("h.dng"))
        let back = try RawCodec.read(dir.file("h.dng"))
        #expect(back.raw.samples == raw.samples)
        #expect(back.raw.capture.make == "Hasselblad" && back.raw.capture.model == raw.capture.model)
        // The copy LibRaw sees names no Hasselblad; the original is untouched.
        let bytes = try InputFile.read(dir.file("h.dng"))
        let masked = try LibRawGuard.bytesForLibRaw(bytes, isDNG: true, path: "h.dng")
        let changed = masked != bytes, sameSize = masked.count == bytes.count
        #expect(changed && sameSize)
        let names = [271, 272, 50708].compactMap { TIFFDirectory(first: masked)?.string($0) }
        #expect(names.count == 3 && names.allSatisfy { !$0.lowercased().contains("hasselbl") }, "\(names)")
        #expect(throws: ImageIOError.self) { try LibRawGuard.bytesForLibRaw(bytes, isDNG: false, path: "h.3fr") }
    }
}

struct LinearRawTests {
    @Test("A LinearRaw DNG (three colours a pixel, as ProRAW) round-trips through both read paths and finishes")
    func linearRoundTrip() throws {
        let w = 40, h = 30
        let samples = Image<UInt16>(width: w, height: h, channels: 3) { d in
            for i in 0..<(w * h) {
                d[3 * i] = UInt16(100 + i % 900)
                d[3 * i + 1] = UInt16(200 + i % 700)
                d[3 * i + 2] = UInt16(300 + i % 500)
            }
        }
        var raw = RawMosaic(
            samples: samples, layout: .linearRGB, blackLevels: [64, 64, 64, 64], whiteLevel: 1023,
            color: RawColor(colorMatrix: sampleRaw().color.colorMatrix, asShotNeutral: [0.5, 1, 0.7]))
        raw.capture.make = "Evanesco"
        let dir = TempDir()
        try DNGWriter.write(raw, to: dir.file("linear.dng"))
        for direct in [true, false] {
            let path = dir.file("linear.dng")
            let back = try RawCodec.open(
                InputFile.read(path), path: path, limits: .standard, samples: true, direct: direct)
            #expect(back.raw.layout == .linearRGB)
            #expect(back.raw.samples.samples == samples.samples, "direct \(direct)")
            #expect(back.raw.whiteLevel == 1023 && back.raw.blackLevels.prefix(3).allSatisfy { $0 == 64 })
        }
        let finished = try ImageCodecs.read(dir.file("linear.dng"))
        #expect(finished.image.width == w && finished.image.channels == 3)
    }
}
