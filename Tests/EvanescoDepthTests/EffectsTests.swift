import Foundation
import Testing
import EvanescoCore
import EvanescoIO
@testable import EvanescoDepth

/// A depth map as DepthData, for the effects.
func depthData(_ map: Image<Float>, kind: DepthKind = .disparity, accuracy: DepthAccuracy? = .absolute) -> DepthData {
    DepthData(
        kind: kind, map: map, stored: .float32(map), storedFormat: "float", encoding: .identity,
        units: kind == .disparity ? "1/m" : "m", accuracy: accuracy, source: "test")
}

@Suite("Focus mask")
struct FocusMaskTests {
    @Test("The tutorial's formula: known answers at s = 4, w = 0.1, focus 0.5")
    func formula() {
        let m = FocusMask(focus: 0.5)
        // filterWidth 0.6: mask0 = clamp(4d - 0.8), mask1 = clamp(3.2 - 4d).
        let cases: [(Float, Float)] = [
            (0.5, 1), (0.2, 0), (0.3, 0.4), (0.45, 1), (0.55, 1), (0.6, 0.8), (0.75, 0.2), (0.8, 0), (1, 0), (0, 0)
        ]
        for (d, expected) in cases { #expect(abs(m.value(d) - expected) < 1e-6, "d = \(d)") }
        // A steeper slope narrows the ramps: s = 10, w = 0.2, focus 0.3 -> fw 0.4: clamp(10d - 1), clamp(5 - 10d).
        let n = FocusMask(focus: 0.3, slope: 10, width: 0.2)
        #expect(
            abs(n.value(0.15) - 0.5) < 1e-6 && abs(n.value(0.45) - 0.5) < 1e-6 && n.value(0.3) == 1 && n.value(0.5) == 0
        )
    }

    @Test(
        """
        Normalisation: disparity min..max to 0..1; depth converted first; holes filled from neighbours, out of the \
        range
        """
    )
    func normalize() throws {
        var map = Image<Float>(width: 4, height: 1, channels: 1, samples: [2, 4, .nan, 6])
        var nd = try NormalizedDisparity(depthData(map))
        #expect(nd.low == 2 && nd.high == 6 && nd.filledHoles == 1)
        #expect(nd.map.samples == [0, 0.5, 0.75, 1])  // the hole is the mean of 0.5 and 1
        map = Image<Float>(width: 3, height: 1, channels: 1, samples: [0.5, 1, 2])  // metres
        nd = try NormalizedDisparity(depthData(map, kind: .depth))
        #expect(nd.low == 0.5 && nd.high == 2)  // 1/m
        #expect(nd.map.samples == [1, 0.5 / 1.5, 0])  // nearest (0.5 m) is 1
        #expect(throws: FocusError.self) {
            try NormalizedDisparity(depthData(Image(width: 2, height: 1, channels: 1, samples: [.nan, .infinity])))
        }
    }

    @Test("Focus point: the median in a window, so one hole or outlier pixel does not decide it")
    func focusPoint() throws {
        var s = ContiguousArray<Float>(repeating: 1, count: 100 * 100)
        for y in 0..<100 { for x in 50..<100 { s[y * 100 + x] = 3 } }
        s[20 * 100 + 20] = 3  // an outlier inside the left half
        let nd = try NormalizedDisparity(depthData(Image(width: 100, height: 100, channels: 1, samples: s)))
        #expect(nd.value(atPhotoPoint: 80, 80, photoWidth: 400, photoHeight: 400) == 0)  // maps to depth (20, 20)
        #expect(nd.value(atPhotoPoint: 300, 80, photoWidth: 400, photoHeight: 400) == 1)
    }

    @Test("Upscaled mask stays within 0...1 and keeps flat regions exact")
    func upscale() {
        var s = ContiguousArray<Float>(repeating: 0, count: 16 * 16)
        for y in 0..<16 { for x in 8..<16 { s[y * 16 + x] = 1 } }
        let up = Image<Float>(width: 16, height: 16, channels: 1, samples: s).upscaledMask(width: 64, height: 64)
        #expect(up.samples.allSatisfy { $0 >= 0 && $0 <= 1 })
        #expect(up[0, 10, 0] == 0 && up[63, 10, 0] == 1)
        // Bicubic overshoot next to the step is clamped rather than kept.
        #expect(up.samples.contains(1) && up.samples.contains(0))
    }
}

@Suite("Effects")
struct EffectsTests {
    /// 48x32: a dark square "subject" (mask 1) over a bright textured background (mask 0).
    static func scene() -> (photo: Image<UInt8>, mask: Image<Float>) {
        let w = 48, h = 32
        let photo = Image<UInt8>(width: w, height: h, channels: 3) { d in
            for y in 0..<h {
                for x in 0..<w {
                    let o = (y * w + x) * 3
                    let inside = x >= 16 && x < 32 && y >= 8 && y < 24
                    d[o] = inside ? 40 : UInt8(200 + (x * 5 + y * 3) % 50)
                    d[o + 1] = inside ? 30 : UInt8(180 + (x * 3) % 60)
                    d[o + 2] = inside ? 20 : UInt8(160 + (y * 7) % 80)
                }
            }
        }
        let mask = Image<Float>(width: w, height: h, channels: 1) { d in
            for y in 0..<h {
                for x in 0..<w {
                    let dx = max(16 - x, x - 31, 0), dy = max(8 - y, y - 23, 0)
                    d[y * w + x] = max(0, 1 - Float(max(dx, dy)) / 4)  // 4-pixel ramp around the square
                }
            }
        }
        return (photo, mask)
    }

    @Test("Tone tables: every 8-bit code survives linear and back")
    func roundTrip() {
        let img = Image<UInt8>(width: 256, height: 1, channels: 3) { d in
            for i in 0..<256 {
                d[i * 3] = UInt8(i)
                d[i * 3 + 1] = UInt8(255 - i)
                d[i * 3 + 2] = UInt8(i / 2)
            }
        }
        let one = Image<Float>(width: 256, height: 1, channels: 1, samples: ContiguousArray(repeating: 1, count: 256))
        #expect(DepthEffects.spotlight(.uint8(img), mask: one).uint8 == img)
        #expect(DepthEffects.colorHighlight(.uint8(img), mask: one).uint8 == img)
    }

    @Test("Spotlight and colour highlight: known answers in linear light")
    func knownAnswers() {
        let white = Image<UInt8>(width: 3, height: 1, channels: 3, samples: [255, 255, 255, 255, 255, 255, 255, 0, 0])
        let m = Image<Float>(width: 3, height: 1, channels: 1, samples: [0, 0.5, 0])
        let spot = DepthEffects.spotlight(.uint8(white), mask: m).uint8
        #expect(Array(spot.samples) == [0, 0, 0, 188, 188, 188, 0, 0, 0])  // half of linear white is sRGB 0.7354
        let color = DepthEffects.colorHighlight(.uint8(white), mask: m).uint8
        // Pure red at mask 0: Rec.709 luminance 0.2126 in linear light, sRGB 0.4984 -> 127.
        #expect(Array(color.samples[6...]) == [127, 127, 127])
        #expect(Array(color.samples[0..<6]) == [255, 255, 255, 255, 255, 255])
        // 16-bit photos go through the same path.
        let w16 = Image<UInt16>(width: 1, height: 1, channels: 3, samples: [65535, 65535, 65535])
        let s16 = DepthEffects.spotlight(.uint16(w16), mask: Image(width: 1, height: 1, channels: 1, samples: [0.5]))
            .uint16
        #expect(abs(Int(s16.samples[0]) - Int((SRGB.fromLinear(0.5) * 65535).rounded())) <= 2)
    }

    @Test("Focal blur: in-focus pixels unchanged, flat areas stay flat, the blur is as wide as the radius says")
    func blurInvariants() {
        let (photo, mask) = Self.scene()
        let out = FocalBlur(radius: 6).apply(.uint8(photo), mask: mask).uint8
        for y in 8..<24 { for x in 16..<32 { for c in 0..<3 { #expect(out[x, y, c] == photo[x, y, c]) } } }
        let flat = Image<UInt8>(
            width: 40, height: 40, channels: 3, samples: ContiguousArray(repeating: 123, count: 4800))
        let zero = Image<Float>(width: 40, height: 40, channels: 1)
        #expect(
            FocalBlur(radius: 9).apply(.uint8(flat), mask: zero).uint8.samples.allSatisfy { abs(Int($0) - 123) <= 1 })
        // A step edge in the background: 10-90 % width of a Gaussian of sigma R is 2.56 R.
        let step = Image<UInt8>(width: 200, height: 8, channels: 1) { d in
            for y in 0..<8 { for x in 0..<200 { d[y * 200 + x] = x < 100 ? 0 : 255 } }
        }
        let r: Float = 8
        let blurred = FocalBlur(radius: r).apply(.uint8(step), mask: Image<Float>(width: 200, height: 8, channels: 1))
            .uint8
        let lin = (0..<200).map { SRGB.toLinear(Float(blurred[$0, 4, 0]) / 255) }
        let x10 = lin.firstIndex { $0 >= 0.1 }!, x90 = lin.firstIndex { $0 >= 0.9 }!
        let width = Float(x90 - x10)
        #expect(width > 2.56 * r * 0.7 && width < 2.56 * r * 1.3, "10-90 % width \(width)")
    }

    @Test(
        "Focal blur with a small radius (a preview's scaled radius): no NaN sigma, a flat area stays flat",
        arguments: [Float(0.5), 0.9, 1.9, 3.8])
    func smallRadius(r: Float) {
        let flat = Image<UInt8>(
            width: 64, height: 48, channels: 3, samples: ContiguousArray(repeating: 77, count: 64 * 48 * 3))
        let out = FocalBlur(radius: r, levels: 5).apply(
            .uint8(flat), mask: Image<Float>(width: 64, height: 48, channels: 1)
        ).uint8
        #expect(out.samples.allSatisfy { abs(Int($0) - 77) <= 1 })
    }

    @Test("Focal blur protects the subject: no dark fringe around a dark subject, unlike the plain blur")
    func noHalo() {
        let (photo, mask) = Self.scene()
        let protected = FocalBlur(radius: 10).apply(.uint8(photo), mask: mask).uint8
        let plain = FocalBlur(radius: 10, protectSubject: false).apply(.uint8(photo), mask: mask).uint8
        // Background pixels 5 px left of the square (mask 0 there): the plain blur pulls in the dark subject.
        // Mean red over the column 5 px left of the square, where the mask is 0.
        func mean(_ img: Image<UInt8>) -> Double { Double((8..<24).map { Int(img[11, $0, 0]) }.reduce(0, +)) / 16 }
        var sum = 0
        for y in 8..<24 { sum += 200 + (55 + y * 3) % 50 }
        let background = Double(sum) / 16
        #expect(abs(mean(protected) - background) < 6, "protected blur: \(mean(protected)) vs background \(background)")
        #expect(mean(plain) < background - 15, "plain blur: \(mean(plain)) vs background \(background)")
    }

    @Test("Guided refinement moves a soft mask edge onto the guide's edge")
    func guided() {
        let w = 64, h = 16
        let guide = Image<Float>(width: w, height: h, channels: 1) { d in
            for y in 0..<h { for x in 0..<w { d[y * w + x] = x < 30 ? 0.1 : 0.9 } }
        }
        // The mask's ramp is centred at x = 34, four pixels off the guide's edge at 29.5.
        let soft = Image<Float>(width: w, height: h, channels: 1) { d in
            for y in 0..<h { for x in 0..<w { d[y * w + x] = min(max((Float(x) - 26) / 16, 0), 1) } }
        }
        let q = GuidedFilter(radius: 8, epsilon: 1e-4, subsample: 1).apply(mask: soft, guide: guide)
        #expect(q[28, 8, 0] < soft[28, 8, 0] && q[31, 8, 0] > soft[31, 8, 0])
        // The step across the guide's edge (29 -> 30) is several times the input's.
        #expect(q[30, 8, 0] - q[29, 8, 0] > 3 * (soft[30, 8, 0] - soft[29, 8, 0]))
    }

    @Test("Golden images of each effect on the self-made scene (regenerate with EVANESCO_UPDATE_GOLDEN=1)")
    func golden() throws {
        let (photo, mask) = Self.scene()
        try checkGolden([
            ("spotlight", DepthEffects.spotlight(.uint8(photo), mask: mask).uint8),
            ("color", DepthEffects.colorHighlight(.uint8(photo), mask: mask).uint8),
            ("blur", FocalBlur(radius: 6).apply(.uint8(photo), mask: mask).uint8),
            ("blur-plain", FocalBlur(radius: 6, protectSubject: false).apply(.uint8(photo), mask: mask).uint8),
            ("mask", DepthEffects.grey(mask, as: UInt8.self))
        ])
    }
}
