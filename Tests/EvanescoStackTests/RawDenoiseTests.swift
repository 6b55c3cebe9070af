import CKernels
import EvanescoCore
import Foundation
import Testing
@testable import EvanescoStack

/// The spatial denoise after a raw merge (``StackOptions/rawDenoise``): the kernel against its
/// documented formula, what it leaves alone, and the noise it takes off flat frames.
@Suite struct RawDenoiseTests {
    /// ``evn_raw_denoise_channel`` as its documentation states it, cell by cell in doubles.
    static func documented(
        _ planes: [UInt16], kept: [UInt16]?, width w: Int, height h: Int, channels c: Int, ch: Int,
        _ p: evn_raw_denoise_params
    ) -> [UInt16] {
        func mirror(_ i: Int, _ n: Int) -> Int { n == 1 ? 0 : i < 0 ? -i : i >= n ? 2 * n - 2 - i : i }
        var out = planes
        for y in 0..<h {
            for x in 0..<w {
                var v9: [Double] = []
                for dy in -1...1 {
                    for dx in -1...1 { v9.append(Double(planes[(mirror(y + dy, h) * w + mirror(x + dx, w)) * c + ch])) }
                }
                let m = v9.reduce(0, +) / 9, v = v9.map { ($0 - m) * ($0 - m) }.reduce(0, +) / 9
                let frames = Double(max(1, kept?[y * w + x] ?? 1))
                let n = max(0, Double(p.slope) * m + Double(p.intercept)) / frames
                let x0 = Double(planes[(y * w + x) * c + ch])
                let g = p.texture > 0 && v > Double(p.texture) * n ? 1 : max(0, 1 - Double(p.strength) * n / v)
                out[(y * w + x) * c + ch] = UInt16(min(65535, max(0, (m + g * (x0 - m)).rounded())))
            }
        }
        return out
    }

    /// Planes of `channels` channels around 20000 with noise of variance about `noise`, a step of
    /// 6000 down the middle and a stripe of strong texture, from a fixed seed.
    static func planes(width w: Int, height h: Int, channels c: Int, noise: Float, seed: UInt64) -> [UInt16] {
        var s = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        func uniform() -> Float {
            s = s &* 6364136223846793005 &+ 1442695040888963407
            return Float(s >> 40) / Float(1 << 24)
        }
        let sigma = noise.squareRoot() * 3.46  // a uniform's variance is its width squared over 12
        return (0..<(w * h * c)).map { i in
            let x = (i / c) % w, y = i / c / w
            var v: Float = 20000 + (x >= w / 2 ? 6000 : 0) + (uniform() - 0.5) * sigma
            if y % 7 == 3 { v += (x & 1 == 0 ? 1 : -1) * 4000 }
            return UInt16(clampingRounded: v)
        }
    }

    @Test(arguments: [(1, 1), (1, 7), (9, 1), (2, 2), (5, 3), (64, 37)])
    func kernelIsTheDocumentedFilter(width: Int, height: Int) {
        let c = 4
        var p = evn_raw_denoise_params()
        // Noise of variance 0.01 v + 200, about 440 at 24000: the noise of one frame.
        (p.slope, p.intercept, p.strength, p.texture) = (0.01, 200, 0.5, RawMerge.denoiseTexture)
        let input = Self.planes(width: width, height: height, channels: c, noise: 440, seed: 7)
        let kept = (0..<(width * height)).map { UInt16($0 % 5) }  // 0 counts as 1
        var out = input
        let rows = UnsafeMutablePointer<Float>.allocate(capacity: 4 * width)
        defer { rows.deallocate() }
        out.withUnsafeMutableBufferPointer { o in
            kept.withUnsafeBufferPointer { k in
                for ch in 0..<c {
                    let status = evn_raw_denoise_channel(
                        o.baseAddress!, k.baseAddress!, Int32(width), Int32(height), Int32(c), Int32(ch), &p, rows)
                    #expect(status == 0)
                }
            }
        }
        var want = input
        for ch in 0..<c {
            want = Self.documented(want, kept: kept, width: width, height: height, channels: c, ch: ch, p)
        }
        let worst = zip(out, want).map { abs(Int($0) - Int($1)) }.max() ?? 0
        // Float against double: a rounding apart at most.
        #expect(worst <= 1, "\(width) x \(height): largest difference \(worst)")
        if width * height > 100 {
            // Every branch taken: smoothed fully (g = 0), partly, and left as texture.
            let changed = zip(out, input).filter { $0 != $1 }.count
            #expect(changed > out.count / 4, "only \(changed) of \(out.count) samples changed")
            let stripe = (0..<width).map { out[((3 * width) + $0) * c] == input[((3 * width) + $0) * c] }
            #expect(stripe.allSatisfy { $0 }, "the stripe of texture changed")
        }
    }

    /// The AVX2 row gives the portable one's bits (the same operations in the same order), with
    /// and without kept counts, at widths that leave a partial vector.
    @Test(
        .enabled(
            if: evn_cpu_has_avx2() != 0,
            "SKIPPED: this CPU has no AVX2 (or EVANESCO_PORTABLE_KERNELS is set); only the portable row ran"),
        arguments: [1, 2, 9, 37, 64])
    func rowVariantsAgree(width w: Int) {
        var p = evn_raw_denoise_params()
        (p.slope, p.intercept, p.strength, p.texture) = (0.01, 200, 0.5, RawMerge.denoiseTexture)
        let rows = (0..<3).map { Self.planes(width: w, height: 1, channels: 1, noise: 440, seed: UInt64(11 + $0)) }
            .map { $0.map(Float.init) }
        let kept = (0..<w).map { UInt16($0 % 6) }
        for withKept in [true, false] {
            var a = [Float](repeating: 0, count: w), b = a
            kept.withUnsafeBufferPointer { k in
                let k = withKept ? k.baseAddress : nil
                evn_raw_denoise_row_portable(rows[0], rows[1], rows[2], k, w, &p, &a)
                evn_raw_denoise_row_avx2(rows[0], rows[1], rows[2], k, w, &p, &b)
            }
            #expect(a.map(\.bitPattern) == b.map(\.bitPattern), "width \(w), kept \(withKept)")
            // (At 2 the planes' step between their halves is texture: nothing changes there.)
            if w != 2 { #expect(a != rows[1], "width \(w): nothing filtered") }
        }
    }

    @Test func nothingChangesAtStrengthZeroOrOnAChannelOutside() {
        let w = 40, h = 30, c = 4
        let input = Self.planes(width: w, height: h, channels: c, noise: 440, seed: 3)
        var out = input
        var p = evn_raw_denoise_params()
        (p.slope, p.intercept, p.strength, p.texture) = (0.01, 200, 0, 9)
        let rows = UnsafeMutablePointer<Float>.allocate(capacity: 4 * w)
        defer { rows.deallocate() }
        out.withUnsafeMutableBufferPointer { o in
            #expect(evn_raw_denoise_channel(o.baseAddress!, nil, Int32(w), Int32(h), Int32(c), 1, &p, rows) == 0)
            p.strength = 0.5
            #expect(evn_raw_denoise_channel(o.baseAddress!, nil, Int32(w), Int32(h), Int32(c), 4, &p, rows) == -1)
            #expect(evn_raw_denoise_channel(o.baseAddress!, nil, Int32(w), Int32(h), Int32(c), -1, &p, rows) == -1)
        }
        #expect(out == input)
    }

    /// Flat frames with the model's noise, merged by their mean (at their own samples: white
    /// noise of the line's variance over N) and denoised: the filter's two passes at strength s
    /// leave a known share of white noise's variance (0.19 at 0.5 and 0.066 at 1, over 2 million
    /// samples in numpy with the same window, passes and texture guard). The NoiseProfile stays the
    /// merge's (1/N), and the report says the planes were denoised.
    @Test(arguments: [(Float(0.5), 0.19), (1, 0.066)])
    func flatNoiseFallsToTheFiltersShare(strength: Float, share: Double) throws {
        let n = 8
        let single = RawStackTests.variance(RawStackTests.flat(1), scaled: true)
        let burst = try RawStackTests.Burst((0..<n).map { RawStackTests.flat(UInt64($0 + 1)) })
        var o = StackOptions()
        o.align = .none
        o.merge = .mean
        o.rawDenoise = 0
        let plain = try #require(try BurstStacker.stack(contentsOf: burst.files, options: o).raw)
        let merged = RawStackTests.variance(plain.mosaic) * Double(n) / single
        o.rawDenoise = strength
        let r = try BurstStacker.stack(contentsOf: burst.files, options: o)
        let m = try #require(r.raw)
        let ratio = RawStackTests.variance(m.mosaic) * Double(n) / single
        #expect(
            abs(ratio - share * merged) < 0.02,
            "strength \(strength): variance x N / one frame's = \(ratio), \(merged) before the denoise")
        let p = try #require(m.mosaic.noise).plane(1)
        #expect(abs(p.scale - RawStackTests.noiseScale / Double(n)) < 1e-9)
        #expect(m.denoise == strength)
        #expect(StackReport(r, inputs: burst.files, output: nil).raw?.denoise == strength)
    }

    /// What the denoise does not touch: one frame (given back as it is), and the hdrplus merge.
    @Test func oneFrameAndHdrplusAreNotDenoised() throws {
        let frame = RawStackTests.flat(5)
        let one = try RawStackTests.Burst([frame])
        let r = try BurstStacker.stack(contentsOf: one.files, options: StackOptions())
        let m = try #require(r.raw)
        #expect(m.mosaic.samples.samples == ContiguousArray(RawStackTests.scaled(frame)))
        #expect(m.denoise == nil)
        let four = try RawStackTests.Burst([frame, frame, frame, frame])
        var o = StackOptions()
        o.merge = .hdrplus
        o.align = .none
        let h = try #require(try BurstStacker.stack(contentsOf: four.files, options: o).raw)
        #expect(h.denoise == nil)
        // hdrplus gives identical frames back within a unit (RawStackTests); denoised, a flat
        // frame's noise would fall by half.
        let worst = zip(h.mosaic.samples.samples, RawStackTests.scaled(frame)).map { abs(Int($0) - Int($1)) }.max()
        #expect((worst ?? .max) <= 1)
    }
}
