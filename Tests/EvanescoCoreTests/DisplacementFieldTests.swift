import Foundation
import Testing
@testable import EvanescoCore

/// The cached row path against the direct one: the largest difference over pixels valid on
/// both, how many those were, and how many were valid on one path only.
struct PathComparison {
    var worst: Float = 0, compared = 0, disagreements = 0
    let cache: RowSampler<UInt8>.Cache
    var a: [Float], b: [Float], va: [UInt8], vb: [UInt8]

    init(pixels: Int, cache: RowSampler<UInt8>.Cache) {
        self.cache = cache
        a = [Float](repeating: 0, count: pixels * 3)
        b = a
        va = [UInt8](repeating: 0, count: pixels)
        vb = va
    }

    /// Samples row `y`, columns `x0..<x1`, through `sampler` both ways and counts.
    mutating func row(_ sampler: RowSampler<UInt8>, y: Int, x0: Int, x1: Int) {
        sampler.sampleRow(y: y, x0: x0, x1: x1, into: &a, valid: &va, cache: cache)
        sampler.sampleRow(y: y, x0: x0, x1: x1, into: &b, valid: &vb, cache: nil)
        for x in 0..<(x1 - x0) {
            if va[x] != vb[x] {
                disagreements += 1
                continue
            }
            guard va[x] != 0 else { continue }
            compared += 1
            for c in 0..<3 { worst = max(worst, abs(a[x * 3 + c] - b[x * 3 + c])) }
        }
    }
}

@Suite struct DisplacementFieldTests {
    static func textured(_ w: Int, _ h: Int) -> Image<UInt8> {
        Image<UInt8>(width: w, height: h, channels: 3) { d in
            for y in 0..<h {
                for x in 0..<w {
                    let v =
                        128 + 60 * sinf(Float(x) * 0.21) * cosf(Float(y) * 0.17) + 40 * sinf(Float(x + 2 * y) * 0.05)
                    for c in 0..<3 { d[(y * w + x) * 3 + c] = UInt8(clampingRounded: v + Float(c) * 10) }
                }
            }
        }
    }

    @Test(
        "A constant field is a translation: the sampler gives the same pixels as the shifted homography, on every path",
        arguments: [8, 12, 16, 20])
    func constantFieldIsATranslation(cell: Int) {
        let img = Self.textured(200, 150)
        var f = DisplacementField(width: 200, height: 150, cell: cell)
        for i in f.dx.indices {
            f.dx[i] = 2.5
            f.dy[i] = -1.25
        }
        // Output p samples H^-1 (p + d): with H = T(3, 1), that is p + (2.5, -1.25) - (3, 1).
        let h = Homography.translation(3, 1)
        for interp in [Interpolation.bilinear, .catmullRom] {
            let a = RowSampler(frame: img, homography: h, interpolation: interp, offsets: f)
            let b = RowSampler(frame: img, homography: .translation(0.5, 2.25), interpolation: interp)
            let cacheA = RowSampler<UInt8>.Cache(pixels: 200), cacheB = RowSampler<UInt8>.Cache(pixels: 200)
            var outA = [Float](repeating: 0, count: 600), outB = outA
            var vA = [UInt8](repeating: 0, count: 200), vB = vA
            var worst: Float = 0
            for y in 0..<150 {
                a.sampleRow(y: y, x0: 0, x1: 200, into: &outA, valid: &vA, cache: cacheA)
                b.sampleRow(y: y, x0: 0, x1: 200, into: &outB, valid: &vB, cache: cacheB)
                for x in 0..<200 where vA[x] != 0 || vB[x] != 0 {
                    #expect(vA[x] == vB[x])
                    for c in 0..<3 { worst = max(worst, abs(outA[x * 3 + c] - outB[x * 3 + c])) }
                }
            }
            #expect(worst < 0.01, "cell \(cell), \(interp): \(worst)")
        }
    }

    /// The cached path takes a field's positions exactly at the cell centres and on a line
    /// between (the field is linear there): against the direct path, which computes every
    /// pixel's, on a field varying up to 3 px (and by 1.5 px between neighbouring cells, as at a
    /// depth edge) under a projective map, for several cell sizes and segment starts.
    @Test(arguments: [5, 8, 16, 32])
    func cachedPathFollowsAVaryingField(cell: Int) {
        let w = 200, h = 150
        let img = Self.textured(w, h)
        var f = DisplacementField(width: w, height: h, cell: cell)
        for j in 0..<f.rows {
            for i in 0..<f.columns {
                f.dx[j * f.columns + i] = 3 * sinf(Float(i) * 0.9) + (i % 3 == 0 ? 1.5 : 0)
                f.dy[j * f.columns + i] = 2 * cosf(Float(j) * 0.7 + Float(i) * 0.3)
            }
        }
        let map = Homography([1.002, 0.003, 2.5, -0.003, 0.998, -1.5, 2e-5, -1e-5, 1])
        let sampler = RowSampler(frame: img, homography: map, interpolation: .catmullRom, offsets: f)
        var t = PathComparison(pixels: w, cache: RowSampler<UInt8>.Cache(pixels: w))
        for (x0, x1) in [(0, w), (3, 117), (117, w)] { for y in 0..<h { t.row(sampler, y: y, x0: x0, x1: x1) } }
        #expect(
            t.compared > 50_000 && t.worst < 0.25, "cell \(cell): worst difference \(t.worst) over \(t.compared) pixels"
        )
        #expect(t.disagreements * 2000 < t.compared, "cell \(cell): \(t.disagreements) pixels valid on one path only")
    }

    @Test(
        """
        The cubic cached-row path reads only its rows and agrees with the direct path on near-identity projective \
        maps (where source rows can dip an ulp across an integer: run it under ASan), walked down segments or across \
        rows, one frame or two, one map or two sharing a cache
        """
    )
    func cachedPathEqualsDirectPath() {
        let w = 192, h = 128
        let img = Self.textured(w, h)
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> Double {  // deterministic: xorshift, uniform in -1...1
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return Double(state % 2_000_001) / 1_000_000 - 1
        }
        // A second frame (the first moved up a row, its last row repeated): a cache serving both
        // in turn must never hand one frame's rows to the other.
        let other = Image<UInt8>(width: w, height: h, channels: 3) { d in
            for i in 0..<(w * h * 3) { d[i] = img.samples[min(i + w * 3, (h - 1) * w * 3 + i % (w * 3))] }
        }
        // Exactly the capacity the stacker allocates, so a read past it is a read past the rows.
        var t = PathComparison(pixels: 96, cache: RowSampler<UInt8>.Cache(pixels: 96))
        for trial in 0..<80 {
            // Every fourth map a pure shift (where the 4-pixel steps share one phase, and so one
            // set of weights, in both passes), the rest near-identity projective maps.
            let hm =
                trial % 4 == 3
                ? Homography.translation(3 * next(), 3 * next())
                : Homography([
                    1 + 0.002 * next(), 0.002 * next(), 3 * next(),
                    0.002 * next(), 1 + 0.002 * next(), 3 * next(),
                    2e-5 * next(), 2e-5 * next(), 1
                ])
            let samplers = [
                RowSampler(frame: img, homography: hm, interpolation: .catmullRom),
                trial % 3 == 1
                    ? RowSampler(
                        frame: img, homography: Homography.translation(0.7, -1.3) * hm, interpolation: .catmullRom)
                    : RowSampler(frame: other, homography: hm, interpolation: .catmullRom)
            ]
            // Down each segment (the stacker's walk), across rows (the window moves every call),
            // alternating two maps of one frame, and alternating frames.
            let order: [(Int, Int)] =
                trial % 3 == 0
                ? [0, 96].flatMap { x0 in (0..<h).map { (x0, $0) } }
                : (0..<h).flatMap { y in [0, 96].map { ($0, y) } }
            for (x0, y) in order {
                for sampler in trial % 3 == 0 ? [samplers[0]] : samplers { t.row(sampler, y: y, x0: x0, x1: x0 + 96) }
            }
        }
        // The two paths round the source position differently (Float here, per-pixel there): a
        // few hundredths of a level, and validity can differ for a pixel right on the frame's edge.
        // A tap read from outside the block would be garbage, far beyond this.
        #expect(t.compared > 1_000_000 && t.worst < 0.25, "worst difference \(t.worst) over \(t.compared) pixels")
        #expect(t.disagreements * 2000 < t.compared, "\(t.disagreements) pixels valid on one path only")
    }

    @Test("The field is bilinear between cell centres and clamped beyond them")
    func bilinearBetweenCentres() {
        // 4 x 2 cells, centres at x 4.5, 14.5, 24.5, 34.5; y 4.5, 14.5
        var f = DisplacementField(width: 40, height: 20, cell: 10)
        for j in 0..<2 {
            for i in 0..<4 {
                f.dx[j * 4 + i] = Float(i)
                f.dy[j * 4 + i] = Float(j) * 2
            }
        }
        #expect(f.value(atX: 0, y: 0) == SIMD2(0, 0))
        #expect(f.value(atX: 39, y: 19) == SIMD2(3, 2))
        let m = f.value(atX: 19, y: 9)  // a quarter of the way... x: (19.5 / 10 - 0.5) = 1.45; y: 0.45
        #expect(abs(m.x - 1.45) < 1e-5 && abs(m.y - 0.9) < 1e-5)
    }
}
