import Foundation
import Testing
import CKernels
@testable import EvanescoCore

/// Why an AVX2 test did not run.
let avx2Absent: Comment =
    "SKIPPED: this CPU has no AVX2 (or EVANESCO_PORTABLE_KERNELS is set); only the portable path was tested"

/// The AVX2 kernel of the cubic warp through a local field (eight pixels a step) against the
/// arithmetic it stands in for, and the whole cached path with and without it.
@Suite struct WarpKernel {
    /// Rows of interleaved RGB floats as the cache holds them, a tap table, and positions.
    @Test(
        "Eight pixels whose taps start on consecutive columns of one row: the Swift loop's arithmetic, bit for bit; a group that does not qualify is left to the caller",
        .enabled(if: evn_cpu_has_avx2() != 0, avx2Absent))
    func matchesTheQuadArithmetic() {
        let w = 64, h = 16, stride = w * 3 + 8, mask = 15
        var block = [Float](repeating: 0, count: 16 * stride + 8)
        for r in 0..<h { for j in 0..<(w * 3) { block[r * stride + j] = Float((r * 37 + j * 11) % 251) + 0.25 } }
        let lut = CubicTable.catmullRom.weights
        // 24 pixels at x = 5.3 + k * 1.004 (consecutive tap columns), y = 6.6, then 8 that jump.
        var pos = [Float](repeating: 0, count: 64)
        for k in 0..<24 {
            pos[2 * k] = 5.3 + Float(k) * 1.004
            pos[2 * k + 1] = 6.6
        }
        for k in 24..<32 {
            pos[2 * k] = 5.3 + Float(k) * 1.5
            pos[2 * k + 1] = 6.6
        }
        var out = [Float](repeating: -1, count: 32 * 3), valid = [UInt8](repeating: 0, count: 32)
        let stopped = pos.withUnsafeBufferPointer { p in
            block.withUnsafeBufferPointer { b in
                lut.withUnsafeBufferPointer { l in
                    var rows = evn_warp_rows(
                        positions: p.baseAddress, block: b.baseAddress, stride: stride, mask: mask, col_base: 0,
                        width: w, height: h,
                        lut: UnsafeRawPointer(l.baseAddress!).assumingMemoryBound(to: Float.self))
                    return evn_warp_cubic_rgb_field8_avx2(&rows, 0, 32, &out, &valid)
                }
            }
        }
        #expect(stopped == 24, "stopped at \(stopped)")
        #expect(
            valid[0..<24].allSatisfy { $0 == 1 } && valid[24...].allSatisfy { $0 == 0 }
                && out[72...].allSatisfy { $0 == -1 })
        // The Swift loop's order: each row's four taps summed in pairs, weighted by the row's
        // weight, the four rows summed in pairs, clamped.
        for k in 0..<24 {
            let qx = Quad.fixed(pos[2 * k]), qy = Quad.fixed(pos[2 * k + 1])
            let ix = Int(qx >> 7), iy = Int(qy >> 7), lx = lut[Int(qx & 127)], ly = lut[Int(qy & 127)]
            for c in 0..<3 {
                var v = [Float](repeating: 0, count: 4)
                for r in 0..<4 {
                    let row = ((iy - 1 + r) & mask) * stride
                    var t = [Float](repeating: 0, count: 4)
                    for tap in 0..<4 { t[tap] = block[row + (ix - 1 + tap) * 3 + c] * lx[tap] }
                    v[r] = ((t[0] + t[1]) + (t[2] + t[3])) * ly[r]
                }
                let want = min(max((v[0] + v[1]) + (v[2] + v[3]), 0), 255)
                #expect(
                    out[k * 3 + c].bitPattern == want.bitPattern,
                    "pixel \(k) channel \(c): \(out[k * 3 + c]) vs \(want)")
            }
        }
    }

    @Test(
        "The cached path through a varying field gives the same bits with the AVX2 kernel as without",
        .enabled(if: evn_cpu_has_avx2() != 0, avx2Absent))
    func sameBitsWithAndWithoutAVX2() {
        let w = 200, h = 150
        let img = DisplacementFieldTests.textured(w, h)
        var f = DisplacementField(width: w, height: h, cell: 8)
        for j in 0..<f.rows {
            for i in 0..<f.columns {
                f.dx[j * f.columns + i] = 2 * sinf(Float(i) * 0.4)
                f.dy[j * f.columns + i] = 1.5 * cosf(Float(j) * 0.5 + Float(i) * 0.2)
            }
        }
        let map = Homography([1.002, 0.003, 2.5, -0.003, 0.998, -1.5, 2e-5, -1e-5, 1])
        let sampler = RowSampler(frame: img, homography: map, interpolation: .catmullRom, offsets: f)
        func run(portable: Bool) -> ([Float], [UInt8]) {
            evn_set_portable_kernels(portable ? 1 : 0)
            defer { evn_set_portable_kernels(0) }
            let cache = RowSampler<UInt8>.Cache(pixels: w)
            var out = [Float](repeating: 0, count: w * h * 3), valid = [UInt8](repeating: 0, count: w * h)
            out.withUnsafeMutableBufferPointer { o in
                valid.withUnsafeMutableBufferPointer { v in
                    for y in 0..<h {
                        sampler.sampleRow(
                            y: y, x0: 0, x1: w, into: o.baseAddress! + y * w * 3, valid: v.baseAddress! + y * w,
                            cache: cache)
                    }
                }
            }
            return (out, valid)
        }
        let a = run(portable: true), b = run(portable: false)
        #expect(a.1 == b.1 && a.1.filter { $0 != 0 }.count > w * h * 3 / 4)
        #expect(a.0.map(\.bitPattern) == b.0.map(\.bitPattern))
    }

    @Test(
        "The two-pass cubic warp (horizontal pass into the cache, vertical pass out) gives the same bits with the AVX2 kernels as without: near-translations, rotations whose groups change row or origin, scales whose phases drift, projective maps, frame edges, segments of every length mod 8",
        .enabled(if: evn_cpu_has_avx2() != 0, avx2Absent))
    func twoPassSameBits() {
        let w = 203, h = 121
        let img = Image<UInt8>(width: w, height: h, channels: 3) { d in
            for y in 0..<h {
                for x in 0..<w {
                    for c in 0..<3 {
                        d[(y * w + x) * 3 + c] = UInt8(
                            truncatingIfNeeded: Int(
                                127 + 120 * sinf(Float(x) * 0.31 + Float(c)) * cosf(Float(y) * 0.27))
                                ^ ((x * 7 + y * 3) & 15))
                    }
                }
            }
        }
        let maps = [
            Homography.translation(0.37, -0.21),
            Homography([0.99998, -5e-6, 0.001, -5e-6, 0.99998, 0.0005, -7e-9, -6e-8, 1]),
            Homography([1.004, 0.002, -2.6, -0.003, 0.997, 1.3, 0, 0, 1]),
            Homography.rotation(degrees: 1.5, scale: 1.01, about: 100, 60),
            Homography([1.002, 0.003, 2.5, -0.003, 0.998, -1.5, 2e-5, -1e-5, 1])
        ]
        for (n, map) in maps.enumerated() {
            for interpolation in [Interpolation.catmullRom, .bicubic] {
                let sampler = RowSampler(frame: img, homography: map, interpolation: interpolation)
                func run(portable: Bool) -> ([Float], [UInt8]) {
                    evn_set_portable_kernels(portable ? 1 : 0)
                    defer { evn_set_portable_kernels(0) }
                    var out = [Float](repeating: 0, count: w * h * 3), valid = [UInt8](repeating: 0, count: w * h)
                    out.withUnsafeMutableBufferPointer { o in
                        valid.withUnsafeMutableBufferPointer { v in
                            // Segments walked down the frame, as the merge walks its tiles.
                            for (x0, x1) in [(0, 64), (64, 133), (133, w), (7, 18)] {
                                let cache = RowSampler<UInt8>.Cache(pixels: 128)
                                for y in 0..<h {
                                    sampler.sampleRow(
                                        y: y, x0: x0, x1: x1, into: o.baseAddress! + (y * w + x0) * 3,
                                        valid: v.baseAddress! + y * w + x0, cache: cache)
                                }
                            }
                        }
                    }
                    return (out, valid)
                }
                let a = run(portable: true), b = run(portable: false)
                #expect(a.1 == b.1 && a.1.filter { $0 != 0 }.count > w * h / 2, "map \(n) \(interpolation)")
                #expect(a.0.map(\.bitPattern) == b.0.map(\.bitPattern), "map \(n) \(interpolation)")
            }
        }
    }

    @Test(
        "The one-channel bilinear warp of a Float plane gives the same bits with the AVX2 kernel as without, under projective maps",
        .enabled(if: evn_cpu_has_avx2() != 0, avx2Absent))
    func bilinearPlaneSameBits() {
        let w = 161, h = 97
        let plane = Image<Float>(width: w, height: h, channels: 1) { d in
            for y in 0..<h {
                for x in 0..<w { d[y * w + x] = 100 + 60 * sinf(Float(x) * 0.23) * cosf(Float(y) * 0.19) }
            }
        }
        for map in [
            Homography([1.01, 0.004, 2.3, -0.003, 0.995, -1.7, 3e-5, -2e-5, 1]), Homography.translation(-3.25, 1.5),
            Homography([0.9, 0.1, -4, -0.05, 1.1, 6, 4e-4, 1e-4, 1])
        ] {
            let sampler = RowSampler(frame: plane, homography: map, interpolation: .bilinear)
            func run(portable: Bool) -> ([Float], [UInt8]) {
                evn_set_portable_kernels(portable ? 1 : 0)
                defer { evn_set_portable_kernels(0) }
                var out = [Float](repeating: 0, count: w * h), valid = [UInt8](repeating: 0, count: w * h)
                out.withUnsafeMutableBufferPointer { o in
                    valid.withUnsafeMutableBufferPointer { v in
                        for y in 0..<h {
                            for (x0, x1) in [(0, w), (5, 77)] {
                                sampler.sampleRow(
                                    y: y, x0: x0, x1: x1, into: o.baseAddress! + y * w + x0,
                                    valid: v.baseAddress! + y * w + x0)
                            }
                        }
                    }
                }
                return (out, valid)
            }
            let a = run(portable: true), b = run(portable: false)
            #expect(a.1 == b.1 && a.1.filter { $0 != 0 }.count > w * h / 2, "\(map)")
            #expect(a.0.map(\.bitPattern) == b.0.map(\.bitPattern), "\(map)")
        }
    }
}
