import CKernels
import EvanescoCore
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
        (p.wide_radius, p.wide_guard, p.wide_contrast) = (2, 3, 9)
        return p
    }

    /// Channel `ch`'s guard of `reference` against the robust merge `r` under `p`.
    static func guarded(_ r: [UInt16], _ reference: [UInt16], ch: Int, _ p: evn_raw_blend_params) -> [UInt8] {
        var p = p
        var m = [UInt8](repeating: 0, count: w * h)
        #expect(evn_raw_blend_guard(r, reference, Int32(w), Int32(h), Int32(ch), &p, &m) == 0)
        return m
    }

    /// A passer-by 2.5 noise deviations from the background in one colour, in a reference with
    /// noise of the model's deviation: the 4 x 4 test finds little of it, the wide one (5 x 5
    /// blocks of 2 x 2 cells) all of it but the 2 cells along its edge, and nothing 4 cells beyond
    /// it; noise alone fires neither.
    @Test func theWideGuardFindsAFaintPasserByAndNotTheNoise() {
        let r = Self.planes { _, _, _ in 4000 }
        let sd = (2.0 * 4000 + 400).squareRoot()
        var rng = SplitMix(seed: 17)
        let noise = (0..<(w * h * 4)).map { _ in Double(rng.gaussian()) * sd }
        let patch = { (x: Int, y: Int) in (16..<30).contains(x) && (12..<26).contains(y) }
        let faint = Self.planes { x, y, ch in
            4000 + noise[(y * w + x) * 4 + ch] + (patch(x, y) && ch == 1 ? 2.5 * sd : 0)
        }
        let plain = Self.planes { x, y, ch in 4000 + noise[(y * w + x) * 4 + ch] }
        var narrow = Self.settings()
        narrow.wide_guard = 0
        let found = Self.guarded(r, faint, ch: 1, narrow).enumerated().filter { $0.element == 1 }.map(\.offset)
        #expect(found.count < 14 * 14 / 2 && found.allSatisfy { patch($0 % w, $0 / w) })
        let wide = Self.guarded(r, faint, ch: 1, Self.settings())
        for y in 0..<h {
            for x in 0..<w {
                // Cells' distance outside the patch (0 inside), and inside it from its edge.
                let outside = max(16 - x, x - 29, 12 - y, y - 25, 0)
                let inside = min(x - 16, 29 - x, y - 12, 25 - y)
                if inside >= 2 { #expect(wide[y * w + x] == 1, "(\(x), \(y)) in the passer-by") }
                if outside >= 4 { #expect(wide[y * w + x] == 0, "(\(x), \(y)) beyond it") }
            }
        }
        for ch in 0..<4 { #expect(Self.guarded(r, plain, ch: ch, Self.settings()).allSatisfy { $0 == 0 }) }
    }

    /// The vote's guard: a region where the reference lies 2 deviations off the vote (4 units)
    /// counts as moving, all but its edge; a one-cell line 10 deviations off (a depth edge) does
    /// not, as the cap holds it, though uncapped it would; noise alone (1 unit on average) does not.
    @Test func theVoteGuardFindsARegionOffTheVoteAndNotAThinEdge() {
        let region = { (x: Int, y: Int) in (8..<22).contains(x) && (10..<24).contains(y) }
        let deviation = (0..<(w * h)).map { i -> Float in
            let x = i % w, y = i / w
            if region(x, y) { return 4 }
            if x == 36 { return 100 }
            return (x + y) % 2 == 0 ? 0.5 : 1.5
        }
        func guarded(cap: Float) -> [UInt8] {
            var m = [UInt8](repeating: 0, count: w * h)
            #expect(evn_raw_blend_vote_guard(deviation, Int32(w), Int32(h), 4, cap, 2, &m) == 0)
            return m
        }
        let capped = guarded(cap: 4)
        for y in 0..<h {
            for x in 0..<w {
                let inside = min(x - 8, 21 - x, y - 10, 23 - y), outside = max(8 - x, x - 21, 10 - y, y - 23, 0)
                if inside >= 1 { #expect(capped[y * w + x] == 1, "(\(x), \(y)) in the region") }
                if outside >= 4 { #expect(capped[y * w + x] == 0, "(\(x), \(y)) beyond it") }
            }
        }
        let uncapped = guarded(cap: .infinity)
        #expect(uncapped[20 * w + 36] == 1 && uncapped[20 * w + 40] == 1)
        // A mask already set stays set.
        var m = [UInt8](repeating: 1, count: w * h)
        #expect(evn_raw_blend_vote_guard(deviation, Int32(w), Int32(h), 4, 4, 2, &m) == 0)
        #expect(m.allSatisfy { $0 == 1 })
    }

    /// The offset guard: where the frames disagree (parallax, texture at high ISO), each cell's
    /// signed distance of the reference swings to both sides (here +-0.7 units, a checkerboard);
    /// a passer-by there adds 0.8 to one side over a region, which the vote's guard, on the
    /// squares (about 1.1 units), lets through, and the offset guard finds but for its 3-cell edge
    /// (which the blend's growth covers). A
    /// one-cell line 4 units off to one side (a depth edge) is not found; the checkerboard alone
    /// is not; in one channel of four, a region 2 units off is, at its centre.
    @Test func theOffsetGuardFindsWhatLiesToOneSide() {
        let region = { (x: Int, y: Int) in (8..<22).contains(x) && (10..<24).contains(y) }
        let spot = { (x: Int, y: Int) in (28..<34).contains(x) && (26..<36).contains(y) }
        let scale = Float(127) / Float(EVN_RAW_OFFSET_RANGE)
        func distance(_ x: Int, _ y: Int, _ ch: Int) -> Float {
            if x == 42 { return 4 }
            if spot(x, y) { return ch == 2 ? 2 : 0 }
            return ((x + y) % 2 == 0 ? 0.7 : -0.7) + (region(x, y) ? 0.8 : 0)
        }
        var offset = [Int8](repeating: 0, count: w * h * 4)
        var squares = [Float](repeating: 0, count: w * h)
        for y in 0..<h {
            for x in 0..<w {
                for ch in 0..<4 {
                    let d = distance(x, y, ch)
                    offset[(y * w + x) * 4 + ch] = Int8((d * scale).rounded())
                    squares[y * w + x] += d * d / 4
                }
            }
        }
        var m = [UInt8](repeating: 0, count: w * h)
        #expect(evn_raw_blend_offset_guard(offset, Int32(w), Int32(h), 4, 4, 25, &m) == 0)
        for y in 0..<h {
            for x in 0..<w {
                let inside = min(x - 8, 21 - x, y - 10, 23 - y), outside = max(8 - x, x - 21, 10 - y, y - 23, 0)
                if inside >= 3 { #expect(m[y * w + x] == 1, "(\(x), \(y)) in the region") }
                let nearSpot = max(28 - x, x - 33, 26 - y, y - 35, 0)
                if outside >= 2 && nearSpot >= 2 { #expect(m[y * w + x] == 0, "(\(x), \(y)) beyond it") }
            }
        }
        #expect(m[30 * w + 30] == 1 && m[31 * w + 31] == 1)
        var vote = [UInt8](repeating: 0, count: w * h)
        #expect(evn_raw_blend_vote_guard(squares, Int32(w), Int32(h), 4, 4, 2, &vote) == 0)
        #expect(vote.allSatisfy { $0 == 0 })
        // A mask already set stays set.
        var all = [UInt8](repeating: 1, count: w * h)
        #expect(evn_raw_blend_offset_guard(offset, Int32(w), Int32(h), 4, 4, 25, &all) == 0)
        #expect(all.allSatisfy { $0 == 1 })
    }

    /// A reference half a cell off a strong texture (a gather's softening, a slight
    /// misregistration) lies several noise variances from the robust merge over any window: the
    /// wide test's gradient term keeps it from counting as moving, and without that term it would.
    @Test func theWideGuardLeavesTextureAlone() {
        let texture = { (x: Double, y: Double) in 4000 + 900 * sin(x * 0.9) * cos(y * 0.7) }
        let r = Self.planes { x, y, _ in texture(Double(x), Double(y)) }
        let shifted = Self.planes { x, y, _ in texture(Double(x) + 0.5, Double(y)) }
        let kept = Self.guarded(r, shifted, ch: 0, Self.settings()).filter { $0 == 1 }.count
        #expect(kept == 0)
        var bare = Self.settings()
        bare.wide_contrast = 0
        let flagged = Self.guarded(r, shifted, ch: 0, bare).filter { $0 == 1 }.count
        #expect(flagged > w * h / 4)
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
    @Test func theVoteGuardsMeansAreTheirWindowsCountedCellByCell() {
        // The box means keep only the rows their window spans (a ring): sizes not a multiple of
        // their four-row groups, shorter than the ring and taller, against each window's mean.
        var g = SplitMix(seed: 7)
        for (w, h, radius) in [(37, 23, 4), (9, 3, 2), (30, 41, 1), (12, 50, 6)] {
            let deviation = (0..<(w * h)).map { _ in Float(g.next() % 1000) / 100 }
            var m = [UInt8](repeating: 0, count: w * h)
            #expect(evn_raw_blend_vote_guard(deviation, Int32(w), Int32(h), Int32(radius), 100, 5, &m) == 0)
            var wrong = 0
            for y in 0..<h {
                for x in 0..<w {
                    var sum = 0.0, n = 0.0
                    for yy in max(0, y - radius)...min(h - 1, y + radius) {
                        for xx in max(0, x - radius)...min(w - 1, x + radius) {
                            sum += Double(deviation[yy * w + xx])
                            n += 1
                        }
                    }
                    if abs(sum / n - 5) > 1e-4, (m[y * w + x] != 0) != (sum / n > 5) { wrong += 1 }
                }
            }
            #expect(wrong == 0, "\(w) x \(h), radius \(radius)")
            #expect(m.contains(0) && m.contains(1), "\(w) x \(h): the test must split the cells")
        }
    }

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
        // The guard's wide window (5 x 5 blocks of 2 x 2 cells; it holds the 4 x 4 one's) reaches
        // the patch (blocks 10...12, 8...10) from x 16...29, y 12...25; grown by 5 cells; then
        // where that square fills more than 0.3 of a 21 x 21 window.
        let square = (0..<(w * h)).map { i in (11...34).contains(i % w) && (7...30).contains(i / w) ? UInt8(1) : 0 }
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
