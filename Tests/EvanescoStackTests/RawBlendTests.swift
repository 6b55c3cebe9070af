import CKernels
import Foundation
import Testing

/// The blend of the robust raw merge with the Wiener merge (raw_blend.c), on planes made here.
struct RawBlendTests {
    static let w = 48, h = 40
    var w: Int { Self.w }
    var h: Int { Self.h }

    /// Four-channel planes from `value(x, y, ch)`.
    static func planes(_ value: (Int, Int, Int) -> Double) -> [UInt16] {
        var p = [UInt16](repeating: 0, count: w * h * 4)
        for y in 0..<h {
            for x in 0..<w {
                for ch in 0..<4 { p[(y * w + x) * 4 + ch] = UInt16(clamping: Int(value(x, y, ch).rounded())) }
            }
        }
        return p
    }

    static func settings(slope: Float = 2, intercept: Float = 400) -> evn_raw_blend_params {
        var p = evn_raw_blend_params()
        withUnsafeMutableBytes(of: &p.slope) { b in
            for ch in 0..<4 { b.storeBytes(of: slope, toByteOffset: 4 * ch, as: Float.self) }
        }
        withUnsafeMutableBytes(of: &p.intercept) { b in
            for ch in 0..<4 { b.storeBytes(of: intercept, toByteOffset: 4 * ch, as: Float.self) }
        }
        (p.beta, p.guard, p.contrast) = (0.25, 9, 1)
        return p
    }

    /// Guard, union over channels, dilation by `radius`, blend: as RawMerge.blended runs them
    /// (`reference`: the reference's planes, the robust merge's when nil).
    static func blend(
        robust r: [UInt16], wiener: [UInt16], reference: [UInt16]? = nil, radius: Int32 = 5
    ) -> (out: [UInt16], moving: [UInt8]) {
        var p = settings()
        var masks = [UInt8](repeating: 0, count: 4 * w * h)
        for ch in 0..<4 {
            masks.withUnsafeMutableBufferPointer { m in
                #expect(
                    evn_raw_blend_guard(
                        r, reference ?? r, Int32(w), Int32(h), Int32(ch), &p, m.baseAddress! + ch * w * h) == 0
                )
            }
        }
        var moving = (0..<(w * h)).map { i in masks[i] | masks[w * h + i] | masks[2 * w * h + i] | masks[3 * w * h + i]
        }
        #expect(evn_raw_blend_dilate(&moving, Int32(w), Int32(h), radius) == 0)
        #expect(evn_raw_blend_fill_dense(&moving, Int32(w), Int32(h), 10, 0.3) == 0)
        var out = [UInt16](repeating: 0, count: w * h * 4)
        for ch in 0..<4 {
            #expect(evn_raw_blend_channel(r, wiener, moving, Int32(w), Int32(h), Int32(ch), &p, &out) == 0)
        }
        return (out, moving)
    }

    /// `mask` with every cell set where more than `fraction` of its clamped (2 radius + 1)^2
    /// window is set: evn_raw_blend_fill_dense's answer, counted cell by cell.
    static func filledDense(_ mask: [UInt8], radius r: Int, fraction: Double) -> [UInt8] {
        (0..<(w * h)).map { i in
            let x = i % w, y = i / w
            let x0 = max(0, x - r), x1 = min(w - 1, x + r), y0 = max(0, y - r), y1 = min(h - 1, y + r)
            var n = 0
            for yy in y0...y1 { for xx in x0...x1 { n += Int(mask[yy * w + xx]) } }
            return mask[i] == 1 || Double(n) > fraction * Double((x1 - x0 + 1) * (y1 - y0 + 1)) ? 1 : 0
        }
    }

    /// The dense parts of a mask filled in: a blob guarded in patches (every other cell) is
    /// whole, a thin line (a parallax edge's trace) stays as it was, and every cell is as the
    /// count over its window says.
    @Test func denseRegionsAreFilledAndThinTracesAreNot() {
        var mask = [UInt8](repeating: 0, count: w * h)
        for y in 8..<20 { for x in 6..<22 where (x + y) % 2 == 0 { mask[y * w + x] = 1 } }
        for y in 2..<38 { mask[y * w + 40] = 1 }
        let before = mask
        #expect(evn_raw_blend_fill_dense(&mask, Int32(w), Int32(h), 3, 0.3) == 0)
        for y in 10..<18 { for x in 9..<19 { #expect(mask[y * w + x] == 1, "(\(x), \(y)) inside the blob") } }
        for y in 0..<h { for x in 30..<w { #expect(mask[y * w + x] == before[y * w + x], "(\(x), \(y)) by the line") } }
        #expect(mask == Self.filledDense(before, radius: 3, fraction: 0.3))
    }

    @Test func equalMergesGiveTheSame() {
        let r = Self.planes { x, y, ch in 3000 + 900 * sin(Double(x) * 0.9) * cos(Double(y) * 0.7) + Double(ch) * 50 }
        let b = Self.blend(robust: r, wiener: r)
        #expect(b.out == r)
        #expect(b.moving.allSatisfy { $0 == 0 })
    }

    @Test func textureComesFromTheWienerMergeAndFlatFromTheRobust() {
        // Left half: the Wiener merge differs from the robust one by far more than the noise
        // (texture the robust gather softened); right half by a tenth of the noise's deviation.
        let r = Self.planes { _, _, _ in 4000 }
        let sd = (2.0 * 4000 + 400).squareRoot()
        let wiener = Self.planes { x, y, _ in
            x < w / 2 ? 4000 + 20 * sd * (((x + y) % 2 == 0) ? 1 : -1) : 4000 + sd / 10
        }
        let b = Self.blend(robust: r, wiener: wiener)
        for y in 0..<h {
            // 8 x 8 blocks wholly inside each half.
            let left = (y * w + 4) * 4, right = (y * w + w - 5) * 4
            #expect(abs(Int(b.out[left]) - Int(wiener[left])) <= Int(sd / 50) + 1)
            #expect(abs(Int(b.out[right]) - 4000) <= 1)
        }
    }

    @Test func whereTheReferenceMovedTheRobustMergeStaysWithItsEdges() {
        // A 6 x 6 cell patch where the reference lies 3000 units from the robust merge in one
        // colour (a car in it): the Wiener merge, which keeps it, is not used there nor within 5
        // cells.
        let r = Self.planes { _, _, _ in 4000 }
        let patch = { (x: Int, y: Int) in (20..<26).contains(x) && (16..<22).contains(y) }
        let wiener = Self.planes { x, y, _ in patch(x, y) ? 4600 : 4000 }
        let reference = Self.planes { x, y, ch in patch(x, y) && ch == 2 ? 7000 : 4000 }
        let b = Self.blend(robust: r, wiener: wiener, reference: reference)
        // The guard's 4 x 4 window (offsets -2...1) reaches the patch from x 19...27, y 15...23;
        // grown by 5 cells; then where that square fills more than 0.3 of a 21 x 21 window.
        let square = (0..<(w * h)).map { i in (14...32).contains(i % w) && (10...28).contains(i / w) ? UInt8(1) : 0 }
        let expected = Self.filledDense(square, radius: 10, fraction: 0.3)
        #expect(expected != square && expected[5 * w + 40] == 0)
        for y in 0..<h {
            for x in 0..<w {
                #expect(b.moving[y * w + x] == expected[y * w + x], "cell \(x), \(y)")
                if expected[y * w + x] == 1 { #expect(b.out[(y * w + x) * 4] == 4000) }
            }
        }
    }
}
