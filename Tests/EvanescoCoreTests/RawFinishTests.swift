import Foundation
import Testing
@testable import EvanescoCore

/// A camera whose space is linear sRGB: its XYZ-to-camera matrix is sRGB's XYZ-to-RGB.
let srgbCamera = RGBPrimaries.sRGB.toXYZ.inverse!.m.map(Float.init)

/// A Bayer mosaic of `rgb` (linear, 0...1 per sample, 3 channels) under `cfa`, with levels and
/// the camera's white divided out (so that the finish's gains bring it back).
func mosaic(
    _ rgb: Image<Float>, cfa: CFAPattern, black: Float = 64, white: Float = 4095, neutral: [Float] = [1, 1, 1]
) -> RawMosaic {
    let samples = Image<UInt16>(width: rgb.width, height: rgb.height, channels: 1) { d in
        for y in 0..<rgb.height {
            for x in 0..<rgb.width {
                let c = cfa.color(x: x, y: y)
                let v = rgb.samples[(y * rgb.width + x) * 3 + c] * neutral[c]
                d[y * rgb.width + x] = UInt16((black + v * (white - black)).rounded())
            }
        }
    }
    return RawMosaic(
        samples: samples, layout: .bayer(cfa), blackLevels: [black], whiteLevel: white,
        color: RawColor(colorMatrix: srgbCamera, asShotNeutral: neutral))
}

/// PSNR of two float images over their pixels at least `border` from the edge.
func psnr(_ a: Image<Float>, _ b: Image<Float>, border: Int = 3) -> Double {
    var se = 0.0, n = 0
    for y in border..<(a.height - border) {
        for x in border..<(a.width - border) {
            for c in 0..<3 {
                let d = Double(a.samples[(y * a.width + x) * 3 + c] - b.samples[(y * a.width + x) * 3 + c])
                se += d * d
                n += 1
            }
        }
    }
    return 10 * log10(1 / (se / Double(n)))
}

struct RawFinishTests {
    @Test("A grey mosaic under a coloured white finishes to the grey's sRGB value, through each CFA")
    func greyKnownAnswer() throws {
        let grey = Image<Float>(width: 24, height: 16, channels: 3) { d in for i in 0..<d.count { d[i] = 0.25 } }
        for cfa in [CFAPattern.rggb, .bggr, .grbg, .gbrg] {
            let raw = mosaic(grey, cfa: cfa, neutral: [0.5, 1, 0.625])
            var o = RawFinishOptions(colorSpace: .linearSRGB)
            let linear = try RawFinish.render(raw, options: o, as: Float.self)
            // Quantisation of 0.25 * neutral into 12 bits: within 1 DN of 4031.
            for v in linear.samples { #expect(abs(v - 0.25) < 1.0 / 4031 / 0.5 + 1e-5, "\(cfa): \(v)") }
            o.colorSpace = .sRGB
            o.tone = .none
            let encoded = try RawFinish.render(raw, options: o, as: UInt16.self)
            let expected = Double(SRGB.fromLinear(0.25)) * 65535
            for v in encoded.samples { #expect(abs(Double(v) - expected) < 40, "\(cfa): \(v) vs \(expected)") }
            o.tone = .standard
            let toned = try RawFinish.render(raw, options: o, as: UInt8.self)
            let e = Double(SRGB.fromLinear(0.25))
            for v in toned.samples { #expect(abs(Double(v) - e * e * (3 - 2 * e) * 255) < 1, "\(cfa): \(v)") }
        }
    }

    @Test("Exposure and the baseline exposure scale linear light by 2^EV before the clip")
    func exposure() throws {
        let grey = Image<Float>(width: 16, height: 16, channels: 3) { d in for i in 0..<d.count { d[i] = 0.2 } }
        var raw = mosaic(grey, cfa: .rggb)
        raw.color.baselineExposure = 1
        let o = RawFinishOptions(colorSpace: .linearSRGB, exposure: -0.5)
        let out = try RawFinish.render(raw, options: o, as: Float.self)
        #expect(abs(out.samples[100] - 0.2 * Float(sqrt(2.0))) < 1e-3)
    }

    @Test("The demosaic is over 52 dB on smooth colour, each CFA")
    func demosaicAccuracy() throws {
        let w = 96, h = 64
        let smooth = Image<Float>(width: w, height: h, channels: 3) { d in
            for y in 0..<h {
                for x in 0..<w {
                    let o = (y * w + x) * 3
                    d[o] = 0.5 + 0.3 * sinf(Float(x) / 9)
                    d[o + 1] = 0.4 + 0.3 * cosf(Float(y) / 11)
                    d[o + 2] = 0.5 + 0.2 * sinf(Float(x + y) / 13)
                }
            }
        }
        for cfa in [CFAPattern.rggb, .bggr, .grbg, .gbrg] {
            let raw = mosaic(smooth, cfa: cfa, black: 0, white: 65535)
            let out = try RawFinish.render(raw, options: RawFinishOptions(colorSpace: .linearSRGB), as: Float.self)
            // 54.2 dB measured for each CFA.
            #expect(psnr(out, smooth) > 52, "\(cfa): \(psnr(out, smooth)) dB")
        }
    }

    @Test("On a sharp edge the directional green beats plain bilinear interpolation")
    func directionalEdges() throws {
        let w = 64, h = 64
        // Vertical stripes of period 5: a horizontal interpolation smears them, a vertical one not.
        let stripes = Image<Float>(width: w, height: h, channels: 3) { d in
            for y in 0..<h {
                for x in 0..<w { for c in 0..<3 { d[(y * w + x) * 3 + c] = x % 5 < 2 ? 0.8 : 0.2 } }
            }
        }
        let raw = mosaic(stripes, cfa: .rggb, black: 0, white: 65535)
        let out = try RawFinish.render(raw, options: RawFinishOptions(colorSpace: .linearSRGB), as: Float.self)
        // Bilinear: each colour the mean of its own sites in the 3x3 neighbourhood.
        let bilinear = Image<Float>(width: w, height: h, channels: 3) { d in
            for y in 1..<(h - 1) {
                for x in 1..<(w - 1) {
                    for c in 0..<3 {
                        var sum: Float = 0, n: Float = 0
                        for dy in -1...1 {
                            for dx in -1...1 where CFAPattern.rggb.color(x: x + dx, y: y + dy) == c {
                                sum += Float(raw.samples.samples[(y + dy) * w + x + dx]) / 65535
                                n += 1
                            }
                        }
                        d[(y * w + x) * 3 + c] = sum / n
                    }
                }
            }
        }
        let ours = psnr(out, stripes), plain = psnr(bilinear, stripes)
        // Measured: ours exact (over 150 dB: the vertical estimate alone), bilinear 14.6 dB.
        #expect(ours > 60 && plain < 20, "ours \(ours) dB, bilinear \(plain) dB")
    }

    @Test("Refusals: black at white, a singular matrix, a zero white balance, a tiny frame")
    func refusals() {
        let grey = Image<Float>(width: 16, height: 16, channels: 3) { d in for i in 0..<d.count { d[i] = 0.2 } }
        var raw = mosaic(grey, cfa: .rggb)
        raw.blackLevels = [4095, 0, 0, 0]
        #expect(throws: RawFinishError.self) { try RawFinish.render(raw, as: UInt8.self) }
        raw = mosaic(grey, cfa: .rggb)
        raw.color.colorMatrix = [1, 2, 3, 2, 4, 6, 0, 0, 1]
        #expect(throws: RawFinishError.self) { try RawFinish.render(raw, as: UInt8.self) }
        raw = mosaic(grey, cfa: .rggb)
        raw.color.asShotNeutral = [0, 1, 1]
        #expect(throws: RawFinishError.self) { try RawFinish.render(raw, as: UInt8.self) }
        let tiny = Image<Float>(width: 6, height: 6, channels: 3)
        #expect(throws: RawFinishError.self) { try RawFinish.render(mosaic(tiny, cfa: .rggb), as: UInt8.self) }
    }

    @Test("CFA patterns: names, validity and the pattern seen from an odd offset")
    func cfaPatterns() {
        #expect(CFAPattern(name: "RGGB")?.colors == [0, 1, 1, 2])
        #expect(CFAPattern(name: "RGBG") == nil)
        #expect(CFAPattern(name: "RRGB") == nil)
        #expect(CFAPattern.rggb.shifted(dx: 1, dy: 0) == .grbg)
        #expect(CFAPattern.rggb.shifted(dx: 0, dy: 1) == .gbrg)
        #expect(CFAPattern.rggb.shifted(dx: 1, dy: 1) == .bggr)
    }

    @Test("Colour spaces: sRGB and P3 to XYZ match their published matrices; Bradford D65 to D50")
    func colourMatrices() {
        let s = RGBPrimaries.sRGB.toXYZ.m
        for (a, b) in zip(s, [0.4124, 0.3576, 0.1805, 0.2126, 0.7152, 0.0722, 0.0193, 0.1192, 0.9505]) {
            #expect(abs(a - b) < 2e-4)
        }
        let p = RGBPrimaries.displayP3.toXYZ.m
        for (a, b) in zip(p, [0.4866, 0.2657, 0.1982, 0.2290, 0.6917, 0.0793, 0.0000, 0.0451, 1.0439]) {
            #expect(abs(a - b) < 2e-4)
        }
        let d50 = RGBPrimaries.sRGB.toXYZD50.m
        for (a, b) in zip(d50, [0.4361, 0.3851, 0.1431, 0.2225, 0.7169, 0.0606, 0.0139, 0.0971, 0.7141]) {
            #expect(abs(a - b) < 5e-4)
        }
    }

    @Test("ICC profiles: header, tag table and colorants as written, for each space")
    func iccProfiles() {
        for space in RawFinishOptions.ColorSpace.allCases {
            let p = ICCProfile.profile(for: space)
            func u32(_ o: Int) -> Int { Int(p[o]) << 24 | Int(p[o + 1]) << 16 | Int(p[o + 2]) << 8 | Int(p[o + 3]) }
            #expect(u32(0) == p.count)
            #expect(String(decoding: p[36..<40], as: UTF8.self) == "acsp")
            #expect(String(decoding: p[12..<24], as: UTF8.self) == "mntrRGB XYZ ")
            let tags = u32(128)
            #expect(tags == 9)
            var found: [String: (Int, Int)] = [:]
            for i in 0..<tags {
                let e = 132 + i * 12
                found[String(decoding: p[e..<(e + 4)], as: UTF8.self)] = (u32(e + 4), u32(e + 8))
                #expect(u32(e + 4) + u32(e + 8) <= p.count)
            }
            let (gAt, _) = found["gXYZ"]!
            let gY = Double(Int32(bitPattern: UInt32(u32(gAt + 12)))) / 65536
            #expect(abs(gY - space.primaries.toXYZD50.m[4]) < 1e-4)
            let (trc, _) = found["rTRC"]!
            #expect(u32(trc + 8) == (space.isLinear ? 0 : 1024))
        }
    }
}
