import Foundation
import Testing
import CKernels
@testable import EvanescoCore

/// Why an AVX2 test did not run.
let avx2Absent: Comment =
    "SKIPPED: this CPU has no AVX2 (or EVANESCO_PORTABLE_KERNELS is set); only the portable path was tested"

/// A kernel over groups of four pixels, as the C functions take it: the first group it did not
/// sample, from `start` on.
typealias GroupKernel<Input> = (UnsafePointer<Input>, Int, Int) -> Int

/// The cubic warp kernels (through a local field, and the two passes of the separable warp) and the
/// one-channel bilinear row: each variant against the arithmetic written out here, and the
/// portable and AVX2 variants against each other, bit for bit, called directly (no process-wide
/// switch). The whole sampling paths they serve are checked against the direct path in
/// DisplacementFieldTests and GeometryTests.
@Suite struct WarpKernel {
    static let lut = CubicTable.catmullRom.weights

    /// The variants this CPU runs, by name.
    static func variants<Input>(
        portable: @escaping GroupKernel<Input>, avx2: @escaping GroupKernel<Input>
    ) -> [(String, GroupKernel<Input>)] {
        evn_cpu_has_avx2() != 0 ? [("portable", portable), ("avx2", avx2)] : [("portable", portable)]
    }

    /// Walks `count` pixels as RowSampler does: the kernel samples what qualifies, the caller
    /// skips a group of four it leaves (here: leaves it untouched). Returns the groups left.
    static func walk<Input>(_ kernel: GroupKernel<Input>, _ input: inout Input, count: Int) -> [Int] {
        var left: [Int] = []
        var g = withUnsafePointer(to: &input) { kernel($0, 0, count) }
        while g + 4 <= count {
            left.append(g)
            g = withUnsafePointer(to: &input) { kernel($0, g + 4, count) }
        }
        return left
    }

    /// The kernels' fixed-point position (cubic_taps.h): round(v * 128), `>> 7` the tap origin,
    /// `& 127` the table's row, here by plain rounding (the kernels' float trick rounds half to even).
    static func fixed(_ v: Float) -> Int32 { Int32((v * 128).rounded(.toNearestOrEven)) }

    /// The weight of tap t at a position (the table row of its fixed-point phase).
    static func weight(_ position: Float, _ t: Int) -> Float { lut[Int(Self.fixed(position) & 127)][t] }

    @Test(
        """
        Through a local field: groups whose taps start on consecutive columns of one row are sampled eight a step or \
        four, groups whose rows or columns differ pixel by pixel, all with the arithmetic written out (taps in \
        pairs, rows in pairs, clamped); a pixel whose taps reach past the frame stops the kernel
        """
    )
    func fieldKernelKnownAnswer() {
        let w = 64, h = 16, stride = w * 3 + 8, mask = 15
        var block = [Float](repeating: 0, count: 16 * stride + 8)
        for r in 0..<h { for j in 0..<(w * 3) { block[r * stride + j] = Float((r * 37 + j * 11) % 251) + 0.25 } }
        // 24 pixels at x = 5.3 + k * 1.004 (consecutive tap columns), y = 6.6; 4 more from a new
        // origin (a group of four that qualifies alone); then 8 whose columns jump, 4 whose rows
        // differ, 2 inside and 2 whose last taps would lie past the frame's right edge.
        let count = 44, sampled = 42
        func position(_ k: Int) -> [Float] {
            switch k {
            case ..<24: [5.3 + Float(k) * 1.004, 6.6]
            case ..<28: [40.2 + Float(k - 24), 9.2]
            case ..<36: [5.3 + Float(k) * 1.5, 9.2]
            case ..<40: [20.4 + Float(k - 36), 4.3 + 0.6 * Float(k - 36)]
            case ..<42: [30.7, 7.5]
            default: [62.6, 7.5]
            }
        }
        let pos = (0..<count).flatMap(position)
        for name in evn_cpu_has_avx2() != 0 ? ["portable", "avx2"] : ["portable"] {
            var out = [Float](repeating: -1, count: count * 3), valid = [UInt8](repeating: 0, count: count)
            let stopped = pos.withUnsafeBufferPointer { p in
                block.withUnsafeBufferPointer { b in
                    Self.lut.withUnsafeBufferPointer { l in
                        var rows = evn_warp_rows(
                            positions: p.baseAddress, block: b.baseAddress, stride: stride, mask: mask, col_base: 0,
                            width: w, height: h,
                            lut: UnsafeRawPointer(l.baseAddress!).assumingMemoryBound(to: Float.self))
                        return name == "avx2"
                            ? evn_warp_cubic_rgb_field_avx2(&rows, 0, count, &out, &valid)
                            : evn_warp_cubic_rgb_field_portable(&rows, 0, count, &out, &valid)
                    }
                }
            }
            #expect(stopped == sampled, "\(name) stopped at \(stopped)")
            #expect(valid[0..<sampled].allSatisfy { $0 == 1 } && valid[sampled...].allSatisfy { $0 == 0 }, "\(name)")
            #expect(out[(3 * sampled)...].allSatisfy { $0 == -1 }, "\(name) wrote past the pixel at the edge")
            for k in 0..<sampled {
                let qx = WarpKernel.fixed(pos[2 * k]), qy = WarpKernel.fixed(pos[2 * k + 1])
                let ix = Int(qx >> 7), iy = Int(qy >> 7)
                for c in 0..<3 {
                    var v = [Float](repeating: 0, count: 4)
                    for r in 0..<4 {
                        let row = ((iy - 1 + r) & mask) * stride
                        var t = [Float](repeating: 0, count: 4)
                        for tap in 0..<4 { t[tap] = block[row + (ix - 1 + tap) * 3 + c] * Self.weight(pos[2 * k], tap) }
                        v[r] = ((t[0] + t[1]) + (t[2] + t[3])) * Self.weight(pos[2 * k + 1], r)
                    }
                    let want = min(max((v[0] + v[1]) + (v[2] + v[3]), 0), 255)
                    #expect(
                        out[k * 3 + c].bitPattern == want.bitPattern,
                        "\(name) pixel \(k) channel \(c): \(out[k * 3 + c]) vs \(want)")
                }
            }
        }
    }

    /// A horizontal pass over a source row (columns lo...hi present) and a vertical pass over rows
    /// held in 16 slots, each with the expected value of output pixel k written out, or nil where
    /// its group does not qualify.
    struct Passes {
        let row: [Float], rows: [Float]
        let lo: Int, hi: Int, rowLo: Int, rowHi: Int, stride: Int, base: Int, n: Int

        init(n: Int) {
            self.n = n
            base = 3
            lo = 2
            hi = 72
            rowLo = 2
            rowHi = 13
            stride = 3 * (base + n) + 8
            row = (0..<((hi - lo + 1) * 3 + 8)).map { (i: Int) -> Float in Float((i * 29 + 7) % 256) }
            // Values past both ends of 0...255 every so often, for the vertical pass's clamp.
            rows = (0..<(16 * stride + 8)).map { (i: Int) -> Float in
                let v = Float((i * 53 + 11) % 256)
                return i % 97 == 0 ? v - 300 : i % 89 == 0 ? v + 300 : v
            }
        }

        /// Horizontal: output pixel g at source column s0 + (drift + 1) g.
        func horizontal(_ s0: Float, _ drift: Float, g: Int) -> [Float]? {
            let e0 = WarpKernel.fixed(s0 + drift * Float(g)), e3 = WarpKernel.fixed(s0 + drift * Float(g + 3))
            let first = Int(e0 >> 7) + g - 1
            guard e3 >> 7 == e0 >> 7, first >= lo, first + 6 <= hi else { return nil }
            return (0..<4).flatMap { lane in
                let position = s0 + drift * Float(g + lane)
                return (0..<3).map { c in
                    let p = (0..<4).map { t in row[(first - lo + lane + t) * 3 + c] * WarpKernel.weight(position, t) }
                    return (p[0] + p[1]) + (p[2] + p[3])
                }
            }
        }

        /// Vertical: output pixel g at source row s0 + slope g, clamped to 0...255.
        func vertical(_ s0: Float, _ slope: Float, g: Int) -> [Float]? {
            let q0 = WarpKernel.fixed(s0 + slope * Float(g)), q3 = WarpKernel.fixed(s0 + slope * Float(g + 3))
            let r = Int(q0 >> 7)
            guard q3 >> 7 == q0 >> 7, r - 1 >= rowLo, r + 2 <= rowHi else { return nil }
            return (0..<4).flatMap { lane in
                let position = s0 + slope * Float(g + lane)
                return (0..<3).map { c in
                    let p = (0..<4).map { k in
                        rows[((r - 1 + k) & 15) * stride + 3 * (base + g + lane) + c] * WarpKernel.weight(position, k)
                    }
                    return min(max((p[0] + p[1]) + (p[2] + p[3]), 0), 255)
                }
            }
        }

        /// Runs one pass's kernel over the interval; the output and the groups it left.
        func run(vertical: Bool, _ s0: Float, _ slope: Float, _ kernel: GroupKernel<evn_warp_pass>) -> (
            [Float], [UInt8], [Int]
        ) {
            var out = [Float](repeating: -1, count: 3 * (base + n) + 8)
            var valid = [UInt8](repeating: 0, count: base + n)
            let source = vertical ? rows : row
            let left = source.withUnsafeBufferPointer { s in
                WarpKernel.lut.withUnsafeBufferPointer { l in
                    out.withUnsafeMutableBufferPointer { o in
                        valid.withUnsafeMutableBufferPointer { v in
                            var pass = evn_warp_pass(
                                source: s.baseAddress, stride: stride, mask: 15,
                                lut: UnsafeRawPointer(l.baseAddress!).assumingMemoryBound(to: Float.self),
                                out: o.baseAddress, valid: vertical ? v.baseAddress : nil, s0: s0, slope: slope,
                                lo: vertical ? rowLo : lo, hi: vertical ? rowHi : hi, base: base)
                            return WarpKernel.walk(kernel, &pass, count: n)
                        }
                    }
                }
            }
            return (out, valid, left)
        }
    }

    /// Starts and slopes that make groups of eight, groups of four alone (an origin or a row
    /// changing mid-eight), phases shared and drifting, and groups past either end.
    ///
    /// The slopes near 0.0078 put a group of eight's phases 7 apart (the AVX2 variant permutes their
    /// weights) or 8 (it loads them one by one); (5.95, 0.005) reaches phase 126, whose run of
    /// eight in the table's by-tap half ends in its padding.
    static let passCases: [(Float, Float)] = [
        (5.37, 0), (5.37, 0.0008), (4.9, -0.002), (6.2, 0.011), (7.7, -0.05), (-0.4, 0.003), (3.0, 0.09), (9.6, 0.02),
        (6.3, 1e-4), (6.3, -0.07), (5.5, 0.0078), (5.5, -0.0085), (5.95, 0.005), (4.02, 0.0071)
    ]

    @Test("The cubic tables' by-tap half holds the weights of their rows, the phases past 128 those of 128")
    func tablesByTap() {
        for table in [CubicTable.catmullRom, CubicTable.keys] {
            let rows = Int(EVN_CUBIC_LUT_ROWS), run = Int(EVN_CUBIC_LUT_BY_TAP)
            #expect(table.weights.count == rows + run)
            let byTap = table.weights[rows...].flatMap { [$0[0], $0[1], $0[2], $0[3]] }
            for t in 0..<4 {
                for k in 0..<run {
                    #expect(byTap[t * run + k] == table.weights[min(k, rows - 1)][t], "tap \(t) phase \(k)")
                }
            }
        }
    }

    @Test(
        """
        The two passes of the separable cubic warp: every group that qualifies is sampled with the arithmetic \
        written out, every other group is left untouched, in each variant
        """,
        arguments: [4, 8, 12, 60, 64])
    func passesKnownAnswer(n: Int) {
        let passes = Passes(n: n)
        for vertical in [false, true] {
            let variants =
                vertical
                ? Self.variants(portable: evn_warp_vertical_pass_portable, avx2: evn_warp_vertical_pass_avx2)
                : Self.variants(portable: evn_warp_horizontal_pass_portable, avx2: evn_warp_horizontal_pass_avx2)
            for (s0, slope) in Self.passCases {
                for (name, kernel) in variants {
                    let label = "\(vertical ? "vertical" : "horizontal") \(name) s0 \(s0) slope \(slope) n \(n)"
                    let (out, valid, left) = passes.run(vertical: vertical, s0, slope, kernel)
                    for g in stride(from: 0, to: n, by: 4) {
                        let want = vertical ? passes.vertical(s0, slope, g: g) : passes.horizontal(s0, slope, g: g)
                        let got = Array(out[(3 * (passes.base + g))..<(3 * (passes.base + g + 4))])
                        if let want {
                            #expect(!left.contains(g), "\(label): group \(g) qualifies but was left")
                            #expect(got.map(\.bitPattern) == want.map(\.bitPattern), "\(label): group \(g)")
                            if vertical {
                                #expect(valid[(passes.base + g)..<(passes.base + g + 4)].allSatisfy { $0 == 1 })
                            }
                        } else {
                            #expect(left.contains(g), "\(label): group \(g) does not qualify but was not left")
                            #expect(got.allSatisfy { $0 == -1 }, "\(label): group \(g) written")
                        }
                    }
                }
            }
        }
    }

    @Test(
        "The separable passes' portable and AVX2 variants give the same bits, on a thousand random intervals",
        .enabled(if: evn_cpu_has_avx2() != 0, avx2Absent))
    func passesPortableEqualsAVX2() {
        var rng = SystemRandomNumberGenerator()
        for trial in 0..<1000 {
            let n = 4 * Int.random(in: 1...16, using: &rng)
            let passes = Passes(n: n)
            let vertical = trial % 2 == 1
            let s0 = Float.random(in: -1...12, using: &rng)
            let slope = Float.random(in: -0.1...0.1, using: &rng) * (trial % 3 == 0 ? 0.01 : 1)
            let a =
                vertical
                ? passes.run(vertical: true, s0, slope, evn_warp_vertical_pass_portable)
                : passes.run(vertical: false, s0, slope, evn_warp_horizontal_pass_portable)
            let b =
                vertical
                ? passes.run(vertical: true, s0, slope, evn_warp_vertical_pass_avx2)
                : passes.run(vertical: false, s0, slope, evn_warp_horizontal_pass_avx2)
            #expect(a.2 == b.2 && a.1 == b.1, "trial \(trial): s0 \(s0) slope \(slope) n \(n)")
            #expect(a.0.map(\.bitPattern) == b.0.map(\.bitPattern), "trial \(trial): s0 \(s0) slope \(slope) n \(n)")
        }
    }

    /// A Float plane and a row of a map onto it (output pixel x0 + i at the map of (x0 + i, y)).
    struct BilinearRow {
        static let w = 161, h = 97
        static let plane: [Float] = (0..<(w * h)).map { i in
            100 + 60 * sinf(Float(i % w) * 0.23) * cosf(Float(i / w) * 0.19)
        }
        let m: [Float], y: Int, x0: Int, count: Int

        /// The kernel's output, validity and the groups it left (those untouched).
        func run(avx2: Bool) -> ([Float], [UInt8], [Int]) {
            var out = [Float](repeating: -1, count: count), valid = [UInt8](repeating: 0, count: count)
            let fy = Float(y)
            let left = Self.plane.withUnsafeBufferPointer { p in
                out.withUnsafeMutableBufferPointer { o in
                    valid.withUnsafeMutableBufferPointer { v in
                        var row = evn_bilinear_row(
                            plane: p.baseAddress, width: Self.w, height: Self.h, x0: x0, m0: m[0],
                            m2: m[1] * fy + m[2], m3: m[3], m5: m[4] * fy + m[5], m6: m[6], m8: m[7] * fy + m[8])
                        let kernel: GroupKernel<evn_bilinear_row> = { r, start, count in
                            avx2
                                ? evn_bilinear_row_avx2(r, start, count, o.baseAddress, v.baseAddress)
                                : evn_bilinear_row_portable(r, start, count, o.baseAddress, v.baseAddress)
                        }
                        return WarpKernel.walk(kernel, &row, count: count)
                    }
                }
            }
            return (out, valid, left)
        }

        /// Output pixel i as RowSampler samples a pixel alone, if its group of four qualifies:
        /// consecutive columns of one pair of rows, all inside, the map's denominator positive.
        func expected(group g: Int) -> [Float]? {
            let fy = Float(y),
                (m0, m2, m3, m5, m6, m8) = (m[0], m[1] * fy + m[2], m[3], m[4] * fy + m[5], m[6], m[7] * fy + m[8])
            var values: [Float] = [], firstColumn: Float = 0, firstRow: Float = 0
            for lane in 0..<4 {
                let fx = Float(x0 + g + lane), d = m6 * fx + m8
                guard d > 1e-12 else { return nil }
                let px = (m0 * fx + m2) / d, py = (m3 * fx + m5) / d
                let cx = px.rounded(.down), cy = py.rounded(.down)
                if lane == 0 {
                    (firstColumn, firstRow) = (cx, cy)
                    guard cx >= 0, cy >= 0, cx + 4 < Float(Self.w), cy + 1 < Float(Self.h) else { return nil }
                }
                guard cx == firstColumn + Float(lane), cy == firstRow else { return nil }
                let tx = px - cx, ty = py - cy, o = Int(cy) * Self.w + Int(cx), p = Self.plane
                let top = p[o] + (p[o + 1] - p[o]) * tx,
                    bottom = p[o + Self.w] + (p[o + Self.w + 1] - p[o + Self.w]) * tx
                values.append(top + (bottom - top) * ty)
            }
            return values
        }
    }

    static let bilinearRows: [BilinearRow] = [
        Homography([1.01, 0.004, 2.3, -0.003, 0.995, -1.7, 3e-5, -2e-5, 1]), Homography.translation(-3.25, 1.5),
        Homography([0.9, 0.1, -4, -0.05, 1.1, 6, 4e-4, 1e-4, 1]), Homography.translation(0.5, 0.25),
        Homography([1, 0, 0, 0, 1, 0, -0.004, 0, 1])
    ].flatMap { map in
        [(0, 0, 161), (40, 5, 77), (96, 0, 161), (50, 150, 161), (12, 3, 10)].map { (y, x0, x1) in
            BilinearRow(m: map.m.map { Float($0) }, y: y, x0: x0, count: x1 - x0)
        }
    }

    @Test(
        """
        The one-channel bilinear row: every group of four that reads consecutive columns of one pair of rows is the \
        per-pixel arithmetic bit for bit, every other group is left untouched, in each variant, under projective \
        maps, at the plane's edges and past the map's horizon
        """
    )
    func bilinearKnownAnswer() {
        var sampled = 0, leftOver = 0
        for (n, row) in Self.bilinearRows.enumerated() {
            for avx2 in evn_cpu_has_avx2() != 0 ? [false, true] : [false] {
                let (out, valid, left) = row.run(avx2: avx2)
                leftOver += left.count
                for g in stride(from: 0, to: row.count - 3, by: 4) {
                    let got = Array(out[g..<(g + 4)])
                    if let want = row.expected(group: g) {
                        sampled += 1
                        #expect(!left.contains(g), "row \(n) avx2 \(avx2): group \(g) qualifies but was left")
                        #expect(got.map(\.bitPattern) == want.map(\.bitPattern), "row \(n) avx2 \(avx2): group \(g)")
                        #expect(valid[g..<(g + 4)].allSatisfy { $0 == 1 })
                    } else {
                        #expect(left.contains(g), "row \(n) avx2 \(avx2): group \(g) does not qualify but was not left")
                        #expect(got.allSatisfy { $0 == -1 } && valid[g..<(g + 4)].allSatisfy { $0 == 0 })
                    }
                }
            }
        }
        // Both kinds of group, many of each.
        #expect(sampled >= 200 && leftOver >= 50, "groups sampled \(sampled), left \(leftOver)")
    }

    /// Positions of `count` pixels from `x0` on row `y` through the field and the map (rows of 3,
    /// y folded in as the kernel takes it), with the bounds, by one variant (nil: it refused).
    static func fieldPositions(
        _ f: DisplacementField, _ m: [Float], y: Int, x0: Int, count: Int, avx2: Bool
    ) -> (pos: [Float], bounds: [Float])? {
        let fy = Float(y)
        var pos = [Float](repeating: .nan, count: 2 * count + 16), bounds = [Float](repeating: .nan, count: 4)
        let ok = f.dx.withUnsafeBufferPointer { dx in
            f.dy.withUnsafeBufferPointer { dy in
                var map = evn_field_positions(
                    dx: dx.baseAddress, dy: dy.baseAddress, columns: f.columns, rows: f.rows, cell: f.cell, y: y,
                    m: (m[0], m[1], m[1] * fy + m[2], m[3], m[4], m[4] * fy + m[5], m[6], m[7], m[7] * fy + m[8]))
                return avx2
                    ? evn_field_positions_row_avx2(&map, x0, count, &pos, &bounds)
                    : evn_field_positions_row_portable(&map, x0, count, &pos, &bounds)
            }
        }
        return ok != 0 ? (Array(pos[0..<(2 * count)]), bounds) : nil
    }

    @Test(
        """
        Field positions: every pixel at H^-1 (p + d(p)) with d the field's bilinear value (odd and even cells, \
        segments that start anywhere, projective maps), the bounds their extremes, portable and AVX2 bit for bit; a \
        map whose horizon the segment crosses is refused
        """
    )
    func fieldPositionsKnownAnswer() {
        // A fixed sequence (a linear congruential generator), so that a failure repeats.
        var state: UInt64 = 11
        func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state >> 33
        }
        var checked = 0
        for trial in 0..<60 {
            let cell = [1, 3, 7, 8, 16, 32][trial % 6]
            let width = 50 + Int(next() % 300), height = 20 + Int(next() % 100)
            var f = DisplacementField(width: width, height: height, cell: cell)
            for i in f.dx.indices {
                f.dx[i] = Float(Int(next() % 2001) - 1000) / 100
                f.dy[i] = Float(Int(next() % 2001) - 1000) / 100
            }
            let projective = trial % 2 == 1
            let m: [Float] = [1.01, 0.02, 3.5, -0.015, 0.99, -2.25, projective ? 2e-5 : 0, projective ? -3e-5 : 0, 1]
            let y = Int(next() % UInt64(height)), x0 = Int(next() % UInt64(width))
            let count = 1 + Int(next() % UInt64(width - x0))
            guard let p = Self.fieldPositions(f, m, y: y, x0: x0, count: count, avx2: false) else {
                Issue.record("trial \(trial): refused a map with no horizon in sight")
                continue
            }
            var lo = SIMD2<Float>(repeating: .infinity), hi = -lo
            for i in 0..<count {
                let x = x0 + i, d = f.value(atX: x, y: y)
                let px = Float(x) + d.x, py = Float(y) + d.y
                let w = m[6] * px + m[7] * py + m[8]
                let want = SIMD2((m[0] * px + m[1] * py + m[2]) / w, (m[3] * px + m[4] * py + m[5]) / w)
                let got = SIMD2(p.pos[2 * i], p.pos[2 * i + 1])
                // The kernel interpolates down the field's columns first: the same value to rounding.
                #expect(
                    ((got - want) * (got - want)).max() <= 4e-8, "trial \(trial) pixel \(x): \(got) vs \(want)")
                lo = pointwiseMin(lo, got)
                hi = pointwiseMax(hi, got)
                checked += 1
            }
            #expect(p.bounds == [lo.x, lo.y, hi.x, hi.y], "trial \(trial): bounds \(p.bounds) vs \(lo) \(hi)")
            if evn_cpu_has_avx2() != 0, let a = Self.fieldPositions(f, m, y: y, x0: x0, count: count, avx2: true) {
                #expect(a.pos.map(\.bitPattern) == p.pos.map(\.bitPattern), "trial \(trial): AVX2 differs")
                #expect(a.bounds.map(\.bitPattern) == p.bounds.map(\.bitPattern), "trial \(trial)")
            } else if evn_cpu_has_avx2() != 0 {
                Issue.record("trial \(trial): the AVX2 variant refused what the portable one took")
            }
        }
        #expect(checked > 1000)
        // A horizon at x = 100 (the denominator 1 - x / 100): pixels 0..<90 are before it, 0..<120 cross it.
        let f = DisplacementField(width: 200, height: 10, cell: 8)
        let m: [Float] = [1, 0, 0, 0, 1, 0, -0.01, 0, 1]
        for avx2 in evn_cpu_has_avx2() != 0 ? [false, true] : [false] {
            #expect(Self.fieldPositions(f, m, y: 3, x0: 0, count: 90, avx2: avx2) != nil)
            #expect(Self.fieldPositions(f, m, y: 3, x0: 0, count: 120, avx2: avx2) == nil, "avx2 \(avx2)")
        }
    }
}
