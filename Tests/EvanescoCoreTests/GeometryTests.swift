import Testing
import Foundation
@testable import EvanescoCore

/// A float plane holding f(x, y) = a x + b y + c.
func ramp(_ w: Int, _ h: Int, a: Float = 0.01, b: Float = 0.02, c: Float = 0.1) -> Image<Float> {
    Image<Float>(width: w, height: h, channels: 1) { d in
        for y in 0..<h { for x in 0..<w { d[y * w + x] = a * Float(x) + b * Float(y) + c } }
    }
}

/// Deterministic pseudo-random 8-bit RGB image.
func noise(_ w: Int, _ h: Int, channels: Int = 3, seed: UInt64 = 1) -> Image<UInt8> {
    var s = seed &* 6364136223846793005 &+ 1442695040888963407
    return Image<UInt8>(width: w, height: h, channels: channels) { d in
        for i in 0..<d.count {
            s = s &* 6364136223846793005 &+ 1442695040888963407
            d[i] = UInt8(truncatingIfNeeded: s >> 56)
        }
    }
}

@Suite struct HomographyTests {
    @Test func inverseAndComposition() throws {
        let h = Homography([1.02, 0.01, 5, -0.02, 0.99, -3, 1e-5, -2e-5, 1])
        let inv = try #require(h.inverse)
        let id = h * inv
        for (a, b) in zip(id.m, Homography.identity.m) { #expect(abs(a - b) < 1e-12) }
        let p = try #require(h.apply(100, 50)), q = try #require(inv.apply(p.x, p.y))
        #expect(abs(q.x - 100) < 1e-9 && abs(q.y - 50) < 1e-9)
        #expect(Homography([1, 2, 3, 2, 4, 6, 0, 0, 0]).inverse == nil)
    }

    @Test func halfPixelConversionKnownAnswer() {
        // A 2x scale about the origin in integer-centre space is, at +0.5 centres,
        // x' + 0.5 = 2 (x - 0.5 + ... ): x_half' = 2 x_half - 0.5.
        let s = Homography.affine(2, 0, 0, 0, 2, 0).convertedToHalfPixelCentres()
        #expect(s.m == [2, 0, -0.5, 0, 2, -0.5, 0, 0, 1])
        #expect(s.convertedFromHalfPixelCentres().m == [2, 0, 0, 0, 2, 0, 0, 0, 1])
        #expect(Homography.translation(3, 4).convertedToHalfPixelCentres() == .translation(3, 4))
    }

    @Test func rescaledIsPixelCentreCorrect() throws {
        // Identity stays identity; a translation of t pixels at full size is t/4 at quarter size.
        #expect(Homography.identity.rescaled(by: 0.25) == .identity)
        let t = Homography.translation(8, -4).rescaled(by: 0.25)
        #expect(abs(t.m[2] - 2) < 1e-12 && abs(t.m[5] + 1) < 1e-12)
        // A rotation maps corresponding points: p_small = 0.25 (p + 0.5) - 0.5.
        let r = Homography.rotation(degrees: 3, about: 100, 80)
        let rs = r.rescaled(by: 0.25)
        let p = try #require(r.apply(10, 20)), ps = try #require(rs.apply(0.25 * 10.5 - 0.5, 0.25 * 20.5 - 0.5))
        #expect(abs(ps.x - (0.25 * (p.x + 0.5) - 0.5)) < 1e-9 && abs(ps.y - (0.25 * (p.y + 0.5) - 0.5)) < 1e-9)
    }
}

@Suite struct WarpTests {
    @Test(arguments: Interpolation.allCases)
    func integerShiftsArePixelExact(_ interp: Interpolation) {
        let img = noise(37, 23)
        for (tx, ty) in [(3, 2), (-5, 1), (0, -4), (0, 0)] {
            let r = img.warped(by: .translation(Double(tx), Double(ty)), width: 37, height: 23, interpolation: interp)
            for y in 0..<23 {
                for x in 0..<37 {
                    let sx = x - tx, sy = y - ty
                    let inside = sx >= 0 && sy >= 0 && sx < 37 && sy < 23
                    #expect(r.validity[x, y, 0] == (inside ? 255 : 0))
                    for c in 0..<3 { #expect(r.image[x, y, c] == (inside ? img[sx, sy, c] : 0)) }
                }
            }
        }
    }

    @Test(arguments: [Interpolation.bilinear, .catmullRom])
    func subPixelShiftOnLinearRampIsExact(_ interp: Interpolation) {
        let src = ramp(64, 48)
        for (tx, ty) in [(0.3, 0.7), (-1.25, 2.5), (0.01, -0.99)] {
            let r = src.warped(by: .translation(tx, ty), width: 64, height: 48, interpolation: interp)
            var checked = 0
            // Pixels whose 4x4 cubic support lies inside the source (edge taps are clamped).
            for y in 0..<48 {
                for x in 0..<64 where r.validity[x, y, 0] == 255 {
                    let sx = Double(x) - tx, sy = Double(y) - ty
                    guard sx >= 1, sy >= 1, sx <= 61, sy <= 45 else { continue }
                    let expected = 0.01 * (Float(x) - Float(tx)) + 0.02 * (Float(y) - Float(ty)) + 0.1
                    #expect(abs(r.image[x, y, 0] - expected) < 1e-3)
                    checked += 1
                }
            }
            #expect(checked > 55 * 38)
        }
    }

    @Test func homographyWarpSamplesInverseMappedPoint() throws {
        // Bilinear reproduces a linear function, so the warped ramp equals f(H^-1 p) wherever valid.
        let src = ramp(80, 60)
        let h = Homography([0.98, 0.05, 3, -0.04, 1.01, -2, 2e-4, -1e-4, 1])
        let inv = try #require(h.inverse)
        let r = src.warped(by: h, width: 80, height: 60, interpolation: .bilinear)
        var valid = 0
        for y in 0..<60 {
            for x in 0..<80 {
                let q = try #require(inv.apply(Double(x), Double(y)))
                let inside = q.x >= -1e-3 && q.y >= -1e-3 && q.x <= 79.001 && q.y <= 59.001
                if abs(q.x) > 0.01 && abs(q.y) > 0.01 && abs(q.x - 79) > 0.01 && abs(q.y - 59) > 0.01 {
                    #expect((r.validity[x, y, 0] == 255) == inside)
                }
                if r.validity[x, y, 0] == 255 {
                    valid += 1
                    #expect(abs(r.image[x, y, 0] - (0.01 * Float(q.x) + 0.02 * Float(q.y) + 0.1)) < 1e-3)
                } else {
                    #expect(r.image[x, y, 0] == 0)
                }
            }
        }
        #expect(valid > 80 * 60 / 2)
    }

    /// One-channel bilinear takes its own path (four pixels a step, each position its own
    /// division). On a textured plane under burst-like maps and a strong perspective it matches
    /// bilinear sampling at the exact (double precision) source position to a few thousandths of
    /// a grey level, and is valid where the position is inside.
    @Test func oneChannelBilinearPathMatchesExactSampling() throws {
        let w = 300, h = 200
        func f(_ x: Int, _ y: Int) -> Float {
            128 + 60 * sinf(Float(x) * 0.21) * cosf(Float(y) * 0.17) + 40 * sinf(Float(x + 2 * y) * 0.05)
        }
        let one = Image<Float>(width: w, height: h, channels: 1) { d in
            for y in 0..<h { for x in 0..<w { d[y * w + x] = f(x, y) } }
        }
        var worst = 0.0, compared = 0, disagreements = 0
        for m in [
            Homography([1.001, 0.004, 3.3, -0.004, 0.999, -2.1, 1e-6, -2e-6, 1]), .translation(-4.25, 7.5),
            Homography([0.98, 0.05, 3, -0.04, 1.01, -2, 2e-4, -1e-4, 1])
        ] {
            let a = one.warped(by: m, width: w, height: h, interpolation: .bilinear)
            let inv = try #require(m.inverse)
            for y in 0..<h {
                for x in 0..<w {
                    let q = try #require(inv.apply(Double(x), Double(y)))
                    // Well inside or well outside: right on the edge the two may round either way.
                    let margin = min(q.x, q.y, Double(w - 1) - q.x, Double(h - 1) - q.y)
                    guard abs(margin) > 1e-3 else { continue }
                    if (a.validity[x, y, 0] != 0) != (margin > 0) {
                        disagreements += 1
                        continue
                    }
                    guard margin > 0 else { continue }
                    let ix = Int(q.x), iy = Int(q.y), tx = q.x - Double(ix), ty = q.y - Double(iy)
                    let x1 = min(ix + 1, w - 1), y1 = min(iy + 1, h - 1)
                    let top = Double(f(ix, iy)) * (1 - tx) + Double(f(x1, iy)) * tx,
                        bottom = Double(f(ix, y1)) * (1 - tx) + Double(f(x1, y1)) * tx
                    worst = max(worst, abs(Double(a.image[x, y, 0]) - (top * (1 - ty) + bottom * ty)))
                    compared += 1
                }
            }
        }
        #expect(compared > 100_000 && worst < 3e-3, "worst \(worst) over \(compared) pixels")
        #expect(disagreements == 0)
    }

    @Test func rotationRoundTripRestoresInterior() throws {
        let img = ramp(60, 60)
        let h = Homography.rotation(degrees: 10, about: 30, 30)
        let there = img.warped(by: h, width: 60, height: 60, interpolation: .bicubic)
        let back = there.image.warped(by: try #require(h.inverse), width: 60, height: 60, interpolation: .bicubic)
        for y in 20..<40 { for x in 20..<40 { #expect(abs(back.image[x, y, 0] - img[x, y, 0]) < 2e-3) } }
    }
}

@Suite struct ResizeTests {
    @Test func downsampleByTwoKnownAnswer() {
        let img = Image<Float>(width: 4, height: 1, channels: 1, samples: [0, 2, 4, 6])
        #expect(img.resized(width: 2, height: 1, interpolation: .bilinear).samples == [1, 5])
        #expect(img.resized(width: 2, height: 1, interpolation: .nearest).samples == [2, 6])
    }

    @Test func nearestUpsampleDuplicates() {
        let up = small.resized(width: 6, height: 4, interpolation: .nearest)
        #expect(rows(up) == [[1, 1, 2, 2, 3, 3], [1, 1, 2, 2, 3, 3], [4, 4, 5, 5, 6, 6], [4, 4, 5, 5, 6, 6]])
    }

    /// Bilinear reproduces a linear ramp exactly. Keys' cubic with a = -0.75 (OpenCV's
    /// INTER_CUBIC, CIBicubicScaleTransform's default) does not (only a = -0.5 would); it stays
    /// within a small fraction of one source step (0.02 here).
    @Test(arguments: [(Interpolation.bilinear, Float(1e-4)), (.catmullRom, 1e-4), (.bicubic, 1.5e-3)])
    func upsampleFollowsRampInInterior(_ interp: Interpolation, _ tolerance: Float) {
        let src = ramp(20, 16)
        let up = src.resized(width: 80, height: 64, interpolation: interp)
        for y in 8..<56 {
            for x in 8..<72 {
                let sx = (Float(x) + 0.5) / 4 - 0.5, sy = (Float(y) + 0.5) / 4 - 0.5
                #expect(abs(up[x, y, 0] - (0.01 * sx + 0.02 * sy + 0.1)) < tolerance)
            }
        }
    }

    @Test func cubicWeightsKnownAnswer() {
        let w = Kernels.cubicWeights(0.5)
        #expect(w.0 == -0.09375 && w.1 == 0.59375 && w.2 == 0.59375 && w.3 == -0.09375)
        let z = Kernels.cubicWeights(0)
        #expect(z.0 == 0 && z.1 == 1 && z.2 == 0 && z.3 == 0)
        // Keys a = -0.75 interpolates f(x) = x at phase 0.25 as 0.296875 (a 0.047 px shift);
        // Catmull-Rom gives exactly 0.25.
        func firstMoment(_ w: (Float, Float, Float, Float)) -> Float { -w.0 + w.2 + 2 * w.3 }
        #expect(abs(firstMoment(Kernels.cubicWeights(0.25)) - 0.296875) < 1e-6)
        #expect(abs(firstMoment(Kernels.cubicWeights(0.25, a: -0.5)) - 0.25) < 1e-6)
    }

    @Test func bicubicKeepsConstantsAndClampsIntegers() {
        let flat = Image<UInt8>(width: 5, height: 5, channels: 3, samples: ContiguousArray(repeating: 200, count: 75))
        #expect(flat.resized(width: 13, height: 7, interpolation: .bicubic).samples.allSatisfy { $0 == 200 })
        let edge = Image<UInt8>(width: 4, height: 1, channels: 1, samples: [0, 0, 255, 255])
        let up = edge.resized(width: 16, height: 1, interpolation: .bicubic)
        #expect(up.samples.first == 0 && up.samples.last == 255)
    }
}
