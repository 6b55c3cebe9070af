import CKernels
import EvanescoCore
import Foundation
import Testing

/// The pairwise Wiener merge's kernel (raw_wiener.c), on one band of two frames made here: HDR+'s
/// published pull against the blend's, which takes the noise's share off each difference first.
struct RawWienerTests {
    static let w = 64, row = w * 4, sigma: Float = 20

    /// A frame's band: 16 rows of `w` cells, four channels, a level of 2000 plus Gaussian noise of
    /// `sigma` (its own seed) plus `extra(x, y)`.
    static func band(seed: UInt64, extra: (Int, Int) -> Float = { _, _ in 0 }) -> [Float] {
        var rng = SplitMix(seed: seed)
        var v = [Float](repeating: 0, count: 16 * row)
        for y in 0..<16 {
            for x in 0..<w {
                for ch in 0..<4 {
                    v[y * row + x * 4 + ch] = 2000 + sigma * rng.gaussian() + extra(x, y)
                }
            }
        }
        return v
    }

    /// The merged band's rows 4 ..< 12 (window-weighted by the one band of tiles over them), for
    /// the reference (frame 0) and `other`, pulled with (c, expected).
    /// `covered`: where the other frame has a sample (weight 1; else 0, and the fill gives it the
    /// reference's value).
    static func merged(
        _ reference: [Float], _ other: [Float], c: Float, expected: Float, covered: (Int) -> Bool = { _ in true }
    ) -> [Float] {
        var values = reference + other
        let weights = [Float](repeating: 1, count: reference.count) + other.indices.map { covered($0) ? 1 : 0 }
        var out = [Float](repeating: 0, count: 8 * row)
        values.withUnsafeMutableBufferPointer { v in
            weights.withUnsafeBufferPointer { wt in
                out.withUnsafeMutableBufferPointer { o in
                    evn_raw_wiener_fill(v.baseAddress!, wt.baseAddress!, 2, 0, 16 * row, 0, 16 * row)
                    var a = evn_raw_wiener_band_args()
                    a.values = UnsafePointer(v.baseAddress!)
                    (a.frames, a.reference, a.width) = (2, 0, Int32(w))
                    (a.c, a.expected) = (c, expected)
                    withUnsafeMutableBytes(of: &a.intercept) { b in
                        for ch in 0..<4 { b.storeBytes(of: sigma * sigma, toByteOffset: 4 * ch, as: Float.self) }
                    }
                    (a.first_row, a.end_row) = (4, 12)
                    a.out = o.baseAddress
                    evn_raw_wiener_band(&a)
                }
            }
        }
        return out
    }

    /// The window over band row r (raised cosine), which the one band's tiles leave on it.
    static func window(_ r: Int) -> Float { 0.5 - 0.5 * cos(2 * Float.pi * (Float(r) + 0.5) / 16) }

    /// The root mean square distance, in noise sigmas, of a merged band's rows 4 ..< 12 at
    /// `columns` from `target` (window-weighted samples divided by the window).
    static func rms(_ out: [Float], from target: [Float], columns: Range<Int>) -> Float {
        var sum: Float = 0, n: Float = 0
        for r in 0..<8 {
            for x in columns {
                for ch in 0..<4 {
                    let e = out[r * row + x * 4 + ch] / window(r + 4) - target[(r + 4) * row + x * 4 + ch]
                    sum += e * e
                    n += 1
                }
            }
        }
        return (sum / n).squareRoot() / sigma
    }

    /// The reference plus Gaussian differences of `spread` noise sigmas (its own seed), plus 25
    /// sigmas from column 40 on when `moved`.
    static func other(_ t: [Float], spread: Float, moved: Bool = false) -> [Float] {
        let d = band(seed: 2)
        return t.indices.map { i in
            t[i] + spread * (d[i] - 2000) + (moved && (i % row) / 4 >= 40 ? 25 * sigma : 0)
        }
    }

    /// A frame whose differences from the reference stay far below what two frames' noise gives
    /// (0.5 sigma): the blend's pull averages the two, to rounding; HDR+'s published pull moves
    /// every coefficient a little towards the reference.
    @Test func differencesTheNoiseExplainsAreAveraged() {
        let t = Self.band(seed: 1), z = Self.other(t, spread: 0.5)
        let mean = zip(t, z).map { ($0 + $1) / 2 }
        let blend = Self.rms(Self.merged(t, z, c: 4, expected: 2), from: mean, columns: 8..<56)
        let published = Self.rms(Self.merged(t, z, c: 8, expected: 0), from: mean, columns: 8..<56)
        #expect(blend < 1e-3, "the blend's pull: \(blend) sigma from the frames' mean")
        #expect(published > 3e-3, "HDR+'s pull: \(published) sigma from the frames' mean")
    }

    /// Differences well beyond the noise (4 sigma, what a gather's softening or a misregistration
    /// makes): the blend's pull keeps more of the reference than HDR+'s; where the other frame
    /// is 25 sigma off (something moved), both keep the reference.
    @Test func largerDifferencesPullHarderAndWhatMovedIsKept() {
        let t = Self.band(seed: 1), z = Self.other(t, spread: 4, moved: true)
        let blend = Self.merged(t, z, c: 4, expected: 2), published = Self.merged(t, z, c: 8, expected: 0)
        let b = Self.rms(blend, from: t, columns: 8..<28), p = Self.rms(published, from: t, columns: 8..<28)
        #expect(b < p, "from the reference: the blend's pull \(b) sigma, HDR+'s \(p)")
        for (name, out) in [("published", published), ("blend", blend)] {
            let off = Self.rms(out, from: t, columns: 48..<60)
            #expect(off < 1, "\(name): \(off) sigma from the reference where the other frame moved")
        }
    }

    /// Where the other frame has no sample (weight 0, from column 32 on), the fill gives it the
    /// reference's values, so the merge there is the reference itself, to rounding, however far
    /// the frame's own (stale) values lie; where it has (tiles that see only such sites), the
    /// merge still averages.
    @Test func sitesAFrameDoesNotCoverSayWhatTheReferenceSays() {
        let covered = { (i: Int) in (i % Self.row) / 4 < 32 }
        let t = Self.band(seed: 1)
        let z = Self.other(t, spread: 0.5).enumerated().map { covered($0) ? $1 : $1 + 40 * Self.sigma }
        let out = Self.merged(t, z, c: 4, expected: 2, covered: covered)
        let kept = Self.rms(out, from: t, columns: 44..<60)
        #expect(kept < 1e-3, "uncovered sites: \(kept) sigma from the reference")
        let mean = zip(t, z).map { ($0 + $1) / 2 }
        let averaged = Self.rms(out, from: mean, columns: 8..<20)
        #expect(averaged < 1e-3, "covered sites: \(averaged) sigma from the frames' mean")
    }

    /// The fill replaces exactly the other frames' values of weight 0 in its range, with the
    /// reference's: the reference's own values, and everything outside the range, stay.
    @Test func theFillReplacesOnlyUncoveredValuesInItsRange() {
        let frame = 12, frames = 3
        var values = (0..<(frames * frame)).map { Float($0) }
        let weights = (0..<(frames * frame)).map { i -> Float in i % 3 == 0 ? 0 : 0.5 }
        let before = values
        values.withUnsafeMutableBufferPointer { v in
            weights.withUnsafeBufferPointer { w in
                evn_raw_wiener_fill(v.baseAddress!, w.baseAddress!, Int32(frames), 1, frame, 4, 6)
            }
        }
        for k in 0..<frames {
            for i in 0..<frame {
                let at = k * frame + i
                let expected = k != 1 && (4..<10).contains(i) && weights[at] == 0 ? before[frame + i] : before[at]
                #expect(values[at] == expected, "frame \(k), value \(i)")
            }
        }
    }
}
