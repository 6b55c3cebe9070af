import CKernels
import EvanescoCore
import Foundation
import Testing
@testable import EvanescoDepth

/// A deterministic pseudo-random sequence (xorshift64*).
struct TestRandom {
    var state: UInt64
    mutating func next() -> UInt64 {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        return state &* 2_685_821_657_736_338_717
    }
    /// Uniform in 0..<1.
    mutating func unit() -> Float { Float(next() >> 40) / Float(1 << 24) }
}

@Suite("Backdrop kernels: known answers, the Swift pipeline's images, portable and AVX2 alike")
struct BackdropKernelTests {
    /// A video shot made here: 203x151 colour, 101x77 depth in metres (odd sizes, so every kernel's
    /// tail runs). A person (1 m, with holes at the edge of the head), a chair back at 1.15 m
    /// beside the shoulder, a wall at 2.8 m; the person moves 3 depth pixels a frame.
    static func shot(frame: Int) -> (color: Image<UInt8>, depth: Image<Float>) {
        let W = 203, H = 151, w = 101, h = 77
        let px = 38 + 3 * frame
        let color = Image<UInt8>(width: W, height: H, channels: 3) { d in
            for y in 0..<H {
                for x in 0..<W {
                    let o = 3 * (y * W + x)
                    d[o] = UInt8((x * 5 + y) % 256)
                    d[o + 1] = UInt8((y * 3 + frame * 17) % 256)
                    d[o + 2] = UInt8((x ^ y) & 0xFF)
                }
            }
        }
        let depth = Image<Float>(width: w, height: h, channels: 1) { d in
            for y in 0..<h {
                for x in 0..<w {
                    let head = (x - px) * (x - px) + (y - 22) * (y - 22)
                    let body = abs(x - px) < 20 && y > 34
                    var v: Float = 2.8
                    if x > px + 24 && x < px + 40 && y > 30 { v = 1.15 }
                    if head < 13 * 13 || body { v = 1.0 + Float(y) * 0.001 }
                    // Holes at the rim of the head and a few unknown pixels in the wall.
                    if head >= 11 * 11 && head < 14 * 14 && (x + 2 * y) % 3 == 0 { v = 0 }
                    if (x * 7 + y * 13) % 97 == 0 { v = 0 }
                    d[y * w + x] = v
                }
            }
        }
        return (color, depth)
    }

    @Test(
        """
        Golden: five frames of a self-made shot (cut, holes, blur, temporal smoothing, gamma, upscale, blend), \
        frames and masks as the Swift pipeline made them
        """
    )
    func golden() throws {
        let bg = Image<UInt8>(width: 64, height: 48, channels: 3) { d in
            for i in 0..<d.count { d[i] = UInt8((i * 11) % 256) }
        }
        let pipe = BackdropPipeline(background: bg)
        pipe.options.blurSigmaAt640 = 16  // a blur of a few pixels at this small size
        var renders: [(name: String, image: Image<UInt8>)] = []
        for f in 0..<5 {
            let s = Self.shot(frame: f)
            let r = try pipe.process(
                color: s.color, depth: s.depth, face: nil, subject: .point(x: 2 * (38 + 3 * f) + 2, y: 44),
                keepMask: true)
            if f == 0 || f == 4 {
                renders.append(("backdrop-frame\(f)", r.frame))
                renders.append(("backdrop-mask\(f)", try #require(r.mask)))
            }
        }
        try checkGolden(renders)
    }

    @Test("Depth cut: 1 in (0, cutoff], 2 for no depth (0, negative), 0 beyond and for NaN; the holes counted")
    func cut() {
        let d: [Float] = [0, -1, .nan, 0.5, 1.0, 1.0001, .infinity, 0.2, 3, 1, 0, 0.9]
        var bin = [UInt8](repeating: 9, count: d.count)
        let holes = evn_depth_cut(d, d.count, 1.0, &bin)
        #expect(bin == [2, 2, 0, 1, 1, 0, 0, 1, 0, 1, 2, 1])
        #expect(holes == 3)
    }

    @Test("Half coverage: 2x2 means; a hole takes the majority of its known 3x3 neighbours, 0 on a tie or without fill")
    func halfCoverage() {
        // 4x3: the hole at (1, 1) sees 1, 1, 0 / 1, _, 1 / 0, 0, 1 in its 3x3 (5 of 8 known are 1).
        let bin: [UInt8] = [
            1, 1, 0, 0,
            1, 2, 1, 0,
            0, 0, 1, 1
        ]
        var half = [Float](repeating: -1, count: 4)
        evn_half_coverage(bin, 4, 3, 1, 0, 2, &half)
        #expect(half == [1.0, 0.25, 0.0, 1.0])
        evn_half_coverage(bin, 4, 3, 0, 0, 2, &half)
        #expect(half == [0.75, 0.25, 0.0, 1.0])
        // A tie (two known: one 1, one 0) is 0.
        let tie: [UInt8] = [1, 2, 0]
        var one = [Float](repeating: -1, count: 2)
        evn_half_coverage(tie, 3, 1, 1, 0, 1, &one)
        #expect(one == [0.5, 0.0])
    }

    @Test("Depth histogram: every other sample of every other row, bin (int)((v - lo) * scale) in -1 < t < bins")
    func histogram() {
        // 4x3; rows 0 and 2, columns 0 and 2 are sampled.
        let d: [Float] = [
            0.10, 9, 0.27, 9,
            9, 9, 9, 9,
            0.39, 9, 0, 9
        ]
        var counts = [UInt32](repeating: 0, count: 4)
        let n = evn_depth_histogram(d, 4, 3, 2, 0.05, 10, 4, &counts)
        // t = 0.5, 2.2, 3.4; the 0 is not depth.
        #expect(n == 3)
        #expect(counts == [1, 0, 1, 1])
    }

    @Test("The blur kernels equal GaussianBlur.apply bit for bit, edges clamped, on odd sizes")
    func blurMatchesSwift() {
        var rng = TestRandom(state: 0x9E37_79B9_7F4A_7C15)
        for (w, h, sigma) in [(45, 33, Float(2.6)), (7, 5, 1.1), (101, 3, 4.0)] {
            let plane = (0..<(w * h)).map { _ in rng.unit() }
            let g = GaussianBlur.kernel(sigma: sigma, truncate: 3)
            var tmp = [Float](repeating: 0, count: w * h), out = tmp
            var blur = evn_blur(weights: nil, taps: g.count, width: w, height: h)
            g.withUnsafeBufferPointer { G in
                blur.weights = G.baseAddress
                evn_blur_rows(&blur, plane, 0, h, &tmp)
                evn_blur_columns(&blur, tmp, 0, h, &out)
            }
            #expect(out == GaussianBlur.apply(plane, width: w, height: h, sigma: sigma), "\(w)x\(h) sigma \(sigma)")
        }
    }

    static let avx2Absent: Comment =
        "SKIPPED: this CPU has no AVX2 (or EVANESCO_PORTABLE_KERNELS is set); only the portable kernels ran"

    @Test(
        "Portable and AVX2 mask kernels give the same bits: cut, coverage, blur",
        .enabled(if: evn_cpu_has_avx2() != 0, avx2Absent))
    func portableEqualsAVX2() {
        var rng = TestRandom(state: 42)
        let w = 131, h = 29
        let depth = (0..<(w * h)).map { i -> Float in i % 17 == 0 ? 0 : rng.unit() * 3 }
        var b1 = [UInt8](repeating: 0, count: w * h), b2 = b1
        #expect(evn_depth_cut_portable(depth, w * h, 1.3, &b1) == evn_depth_cut_avx2(depth, w * h, 1.3, &b2))
        #expect(b1 == b2)
        let hw = (w + 1) / 2, hh = (h + 1) / 2
        var h1 = [Float](repeating: 0, count: hw * hh), h2 = h1
        evn_half_coverage_portable(b1, w, h, 1, 0, hh, &h1)
        evn_half_coverage_avx2(b1, w, h, 1, 0, hh, &h2)
        #expect(h1 == h2)
        let g = GaussianBlur.kernel(sigma: 2.2, truncate: 3)
        var t1 = h1, t2 = h1, o1 = h1, o2 = h1
        g.withUnsafeBufferPointer { G in
            var blur = evn_blur(weights: G.baseAddress, taps: G.count, width: hw, height: hh)
            evn_blur_rows_portable(&blur, h1, 0, hh, &t1)
            evn_blur_rows_avx2(&blur, h1, 0, hh, &t2)
            evn_blur_columns_portable(&blur, t1, 0, hh, &o1)
            evn_blur_columns_avx2(&blur, t1, 0, hh, &o2)
        }
        #expect(t1 == t2)
        #expect(o1 == o2)
    }

    @Test(
        "Portable and AVX2 composite rows give the same bits, over flat and blended stretches",
        .enabled(if: evn_cpu_has_avx2() != 0, avx2Absent))
    func rowBlendPortableEqualsAVX2() {
        // One composite row over a mask with flat 0, flat 1 and transition stretches.
        let mw = 53, W = 211
        let taps = BackdropPipeline.ColumnTaps(width: W, maskWidth: mw)
        #expect(taps.windows == (taps.first.firstIndex { $0 >= W } ?? taps.first.count))
        let rows = (0..<4).map { r in (0..<mw).map { i -> Float in i < 12 ? 0 : (i > 40 ? 1 : Float((i + r) % 7) / 6) }
        }
        let src = (0..<(W * 3)).map { UInt8(truncatingIfNeeded: $0 &* 31) },
            bg = (0..<(W * 3)).map { UInt8(truncatingIfNeeded: $0 &* 17 &+ 5) }
        func run(_ f: (UnsafePointer<evn_backdrop_row>) -> Void) -> ([UInt8], [UInt8]) {
            // The row's outputs and scratch, allocated here so that no pointer outlives its array.
            let dst = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: W * 3),
                mout = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: W)
            let line = UnsafeMutableBufferPointer<Float>.allocate(capacity: mw)
            let flag = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: mw),
                window = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: mw + 1)
            defer {
                dst.deallocate()
                mout.deallocate()
                line.deallocate()
                flag.deallocate()
                window.deallocate()
            }
            dst.initialize(repeating: 0)
            mout.initialize(repeating: 0)
            rows[0].withUnsafeBufferPointer { r0 in
                rows[1].withUnsafeBufferPointer { r1 in
                    rows[2].withUnsafeBufferPointer { r2 in
                        rows[3].withUnsafeBufferPointer { r3 in
                            taps.taps.withUnsafeBufferPointer { t in
                                taps.weights.withUnsafeBufferPointer { tw in
                                    taps.first.withUnsafeBufferPointer { first in
                                        src.withUnsafeBufferPointer { s in
                                            bg.withUnsafeBufferPointer { b in
                                                var row = evn_backdrop_row()
                                                row.rows = (
                                                    r0.baseAddress, r1.baseAddress, r2.baseAddress, r3.baseAddress
                                                )
                                                row.weights = (-0.05, 0.6, 0.5, -0.05)
                                                row.mask_width = mw
                                                row.width = W
                                                row.taps = t.baseAddress
                                                row.tap_weights = tw.baseAddress
                                                row.first = first.baseAddress
                                                row.windows = taps.windows
                                                row.src = s.baseAddress
                                                row.background = b.baseAddress
                                                row.dst = dst.baseAddress
                                                row.mask_out = mout.baseAddress
                                                row.line = line.baseAddress
                                                row.flag = flag.baseAddress
                                                row.window = window.baseAddress
                                                withUnsafePointer(to: row) { f($0) }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            return (Array(dst), Array(mout))
        }
        let p = run { evn_backdrop_row_blend_portable($0) }, a = run { evn_backdrop_row_blend_avx2($0) }
        #expect(p.0 == a.0)
        #expect(p.1 == a.1)
        // Not trivially equal: the row holds background, colour and blends.
        #expect(p.1.contains(0) && p.1.contains(255) && p.1.contains { $0 > 0 && $0 < 255 })
    }
}
