import Foundation
import Testing
import EvanescoCore
import EvanescoIO
@testable import EvanescoAlign

/// A textured test scene: smooth blobs plus fine detail, deterministic.
func scene(_ w: Int, _ h: Int, seed: UInt64 = 3) -> Image<UInt8> {
    var s = seed
    func rnd() -> Float { s = s &* 6364136223846793005 &+ 1442695040888963407; return Float(s >> 40) / Float(1 << 24) }
    let blobs = (0..<40).map { _ in (rnd() * Float(w), rnd() * Float(h), 4 + rnd() * Float(min(w, h)) / 8, rnd() * 200 - 100) }
    return Image<UInt8>(width: w, height: h, channels: 3) { d in
        for y in 0..<h { for x in 0..<w {
            var v: Float = 120 + 30 * sinf(Float(x) * 0.05) * cosf(Float(y) * 0.043)
            for (bx, by, r, a) in blobs { let dx = Float(x) - bx, dy = Float(y) - by; v += a * expf(-(dx * dx + dy * dy) / (2 * r * r)) }
            let o = (y * w + x) * 3
            d[o] = UInt8(clampingRounded: v); d[o + 1] = UInt8(clampingRounded: v * 0.9 + 10); d[o + 2] = UInt8(clampingRounded: 255 - v)
        }}
    }
}

/// The frame a camera moved by `h` (reference -> frame coordinates... so frame pixel p shows
/// reference point H p) sees: warp the scene by the inverse of the registration homography.
func frame(of img: Image<UInt8>, registration h: Homography) -> Image<UInt8> {
    img.warped(by: h.inverse!, width: img.width, height: img.height, interpolation: .catmullRom).image
}

/// Mean distance between two homographies' images of a 9x7 grid over the frame (score.py's metric).
func gridError(_ a: Homography, _ b: Homography, _ w: Int, _ h: Int) -> Double {
    var sum = 0.0
    for i in 0..<9 { for j in 0..<7 {
        let x = Double(w - 1) * Double(i) / 8, y = Double(h - 1) * Double(j) / 6
        let p = a.apply(x, y)!, q = b.apply(x, y)!
        sum += ((p.x - q.x) * (p.x - q.x) + (p.y - q.y) * (p.y - q.y)).squareRoot()
    }}
    return sum / 63
}

@Suite struct RegistrationKnownAnswers {
    static let ref = scene(320, 240)
    static let reference = RegistrationReference(ref)

    @Test(arguments: [(5.0, -3.0), (0.25, 0.5), (-7.6, 2.3), (12.0, 9.0)])
    func translations(_ tx: Double, _ ty: Double) throws {
        let truth = Homography.translation(tx, ty)
        let f = frame(of: Self.ref, registration: truth)
        let r = try Self.reference.register(f, model: .translation)
        #expect(abs(r.homography.m[2] - tx) < 0.03 && abs(r.homography.m[5] - ty) < 0.03, "\(r.homography)")
        #expect(r.inlierFraction > 0.8)
        let rh = try Self.reference.register(f, model: .homography)
        #expect(gridError(rh.homography, truth, 320, 240) < 0.05)
    }

    @Test(arguments: [1.5, -3.0])
    func rotationsAndKeystone(_ degrees: Double) throws {
        let truth = Homography.rotation(degrees: degrees, scale: 1.01, about: 150, 130) * Homography([1, 0, 2, 0, 1, -1, 2e-5, -1e-5, 1])
        let f = frame(of: Self.ref, registration: truth)
        let r = try Self.reference.register(f, model: .homography)
        #expect(gridError(r.homography, truth, 320, 240) < 0.05, "\(r.homography) vs \(truth)")
        // Translation-only cannot follow a rotation: its error stays large.
        let t = try? Self.reference.register(f, model: .translation)
        #expect(t == nil || gridError(t!.homography, truth, 320, 240) > 0.5)
    }

    @Test func exposureChangeIsAbsorbed() throws {
        var f = frame(of: Self.ref, registration: .translation(3.3, -1.2))
        for i in f.samples.indices { f.samples[i] = UInt8(clampingRounded: Float(f.samples[i]) * 0.9 + 8) }
        let r = try Self.reference.register(f, model: .homography)
        #expect(gridError(r.homography, .translation(3.3, -1.2), 320, 240) < 0.05)
        #expect(abs(r.gain - 0.9) < 0.03)
    }

    @Test func unrelatedFrameIsRefused() {
        let other = scene(320, 240, seed: 99)
        #expect(throws: RegistrationError.self) { try Self.reference.register(other, model: .homography) }
    }

    @Test func sizeMismatchIsAnError() {
        #expect(throws: RegistrationError.sizeMismatch(frame: "100x100", reference: "320x240")) {
            try Self.reference.register(scene(100, 100), model: .translation)
        }
    }

    @Test func quickMedianMatchesSort() {
        var s: UInt64 = 5
        for n in [1, 2, 3, 10, 101, 1000] {
            var v = (0..<n).map { _ -> Float in s = s &* 6364136223846793005 &+ 1; return Float(s >> 50) }
            let sorted = v.sorted()
            #expect(quickMedian(&v) == sorted[n / 2])
        }
    }
}
