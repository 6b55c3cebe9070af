import CKernels
import EvanescoCore
import Foundation
import Testing
@testable import EvanescoStack

/// The spatial denoise after a raw merge (``StackOptions/rawDenoise``): the kernel against its
/// documented formula, what it leaves alone, and the noise it takes off flat frames.
@Suite struct RawDenoiseTests {
    /// The 4 x 4 windows of a w x h plane, in doubles: the orthonormal DCT-II, each window's
    /// coefficients, and the windows' estimates averaged.
    struct Windows {
        let w: Int, h: Int
        let dct: [[Double]] = (0..<4).map { u in
            let a: Double = u == 0 ? 0.5 : 1 / 2.0.squareRoot()
            return (0..<4).map { k -> Double in a * cos(Double.pi * Double(2 * k + 1) * Double(u) / 8) }
        }

        func coefficients(_ plane: [Double], _ x0: Int, _ y0: Int) -> [Double] {
            var out = [Double](repeating: 0, count: 16)
            for vu in 0..<16 {
                for i in 0..<4 {
                    for k in 0..<4 {
                        let basis: Double = dct[vu / 4][i] * dct[vu % 4][k]
                        out[vu] += basis * plane[(y0 + i) * w + x0 + k]
                    }
                }
            }
            return out
        }

        /// The windows inside the plane, each `shrink`'s estimate of its coefficients (given the
        /// window's top-left), inverted and averaged at each cell.
        func averaged(_ plane: [Double], _ shrink: (Int, Int, [Double]) -> [Double]) -> [Double] {
            var sum = [Double](repeating: 0, count: w * h), count = sum
            for y0 in 0...(h - 4) {
                for x0 in 0...(w - 4) {
                    let g = shrink(x0, y0, coefficients(plane, x0, y0))
                    for i in 0..<4 {
                        for k in 0..<4 {
                            var v = 0.0
                            for vu in 0..<16 {
                                let basis: Double = dct[vu / 4][i] * dct[vu % 4][k]
                                v += g[vu] * basis
                            }
                            sum[(y0 + i) * w + x0 + k] += v
                            count[(y0 + i) * w + x0 + k] += 1
                        }
                    }
                }
            }
            return zip(sum, count).map { $0 / $1 }
        }
    }

    static let colour: [[Double]] = {
        let r = 1 / 2.0.squareRoot()
        return [[0.5, 0.5, 0.5, 0.5], [0.5, -0.5, -0.5, 0.5], [r, 0, 0, -r], [0, r, -r, 0]]
    }()
    /// The planes' channel of red, green, green and blue.
    static let channel = [0, 1, 3, 2]

    /// The four colours of `planes` and their noise variance, as the kernel's documentation states.
    static func colours(
        _ planes: [UInt16], kept: [UInt16]?, width w: Int, height h: Int, _ p: evn_raw_transform_params
    ) -> (comp: [[Double]], noise: [[Double]]) {
        let slopes: [Float] = withUnsafeBytes(of: p.slope) { Array($0.bindMemory(to: Float.self)) }
        let intercepts: [Float] = withUnsafeBytes(of: p.intercept) { Array($0.bindMemory(to: Float.self)) }
        func sample(_ x: Int, _ y: Int, _ ch: Int) -> Double {
            Double(planes[(min(h - 1, max(0, y)) * w + min(w - 1, max(0, x))) * 4 + ch])
        }
        var comp = [[Double]](repeating: [Double](repeating: 0, count: w * h), count: 4), noise = comp
        for y in 0..<h {
            for x in 0..<w {
                for (j, ch) in channel.enumerated() {
                    var m = 0.0
                    for dy in -1...1 { for dx in -1...1 { m += sample(x + dx, y + dy, ch) } }
                    let level = max(0, Double(slopes[ch]) * m / 9 + Double(intercepts[ch]))
                    let frames: UInt16 = max(1, kept?[y * w + x] ?? 1)
                    let v = level * Double(p.strength) / Double(frames)
                    for k in 0..<4 {
                        comp[k][y * w + x] += colour[k][j] * sample(x, y, ch)
                        noise[k][y * w + x] += colour[k][j] * colour[k][j] * v
                    }
                }
            }
        }
        return (comp, noise)
    }

    /// ``evn_raw_denoise_transform`` as its documentation states it, in doubles: the colours
    /// decorrelated, every 4 x 4 window inside the image transformed, thresholded for a pilot,
    /// shrunk by the pilot's (and luma's pilot's) energy, the windows averaged.
    static func documented(
        _ planes: [UInt16], kept: [UInt16]?, width w: Int, height h: Int, _ p: evn_raw_transform_params
    ) -> [UInt16] {
        let (comp, noise) = colours(planes, kept: kept, width: w, height: h, p)
        let windows = Windows(w: w, h: h)
        func windowNoise(_ k: Int, _ x0: Int, _ y0: Int) -> Double {
            var s = 0.0
            for i in 0..<4 { for j in 0..<4 { s += noise[k][(y0 + i) * w + x0 + j] } }
            return s / 16
        }
        let t2 = Double(p.threshold * p.threshold)
        let pilots = (0..<4).map { k in
            windows.averaged(comp[k]) { x0, y0, c in
                let n = windowNoise(k, x0, y0)
                return c.enumerated().map { $0.offset == 0 || $0.element * $0.element > t2 * n ? $0.element : 0 }
            }
        }
        let out = (0..<4).map { k in
            windows.averaged(comp[k]) { x0, y0, c in
                let n = windowNoise(k, x0, y0), q = windows.coefficients(pilots[k], x0, y0)
                let l = windows.coefficients(pilots[0], x0, y0)
                return c.enumerated().map { vu, v in
                    if vu == 0 { return v }
                    let e = q[vu] * q[vu] + (k > 0 ? Double(p.guide) * l[vu] * l[vu] : 0)
                    return v * e / (e + n)
                }
            }
        }
        var result = planes
        for i in 0..<(w * h) {
            for (j, ch) in channel.enumerated() {
                var v = 0.0
                for k in 0..<4 { v += colour[k][j] * out[k][i] }
                result[i * 4 + ch] = UInt16(min(65535.0, max(0.0, v.rounded())))
            }
        }
        return result
    }

    /// Planes of 4 channels around 20000 with noise of variance about `noise`, a step of
    /// 6000 down the middle and a stripe of strong texture, from a fixed seed.
    static func planes(width w: Int, height h: Int, noise: Float, seed: UInt64) -> [UInt16] {
        var s = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        func uniform() -> Float {
            s = s &* 6364136223846793005 &+ 1442695040888963407
            return Float(s >> 40) / Float(1 << 24)
        }
        let sigma = noise.squareRoot() * 3.46  // a uniform's variance is its width squared over 12
        return (0..<(w * h * 4)).map { i in
            let x = (i / 4) % w, y = i / 4 / w
            var v: Float = 20000 + (x >= w / 2 ? 6000 : 0) + (uniform() - 0.5) * sigma
            if y % 7 == 3 { v += (x & 1 == 0 ? 1 : -1) * 4000 }
            return UInt16(clampingRounded: v)
        }
    }

    /// The settings the merge uses, with noise of variance 0.01 v + 200 in one frame (about 440
    /// at 24000) in every channel.
    static var params: evn_raw_transform_params {
        var p = evn_raw_transform_params()
        p.slope = (0.01, 0.01, 0.01, 0.01)
        p.intercept = (200, 200, 200, 200)
        (p.strength, p.threshold, p.guide) = (1, RawMerge.transform.threshold, RawMerge.transform.guide)
        return p
    }

    /// Rows [y0, y1) of `planes` through `kernel` (the dispatched one by default) into a copy.
    static func run(
        _ planes: [UInt16], kept: [UInt16]?, width w: Int, height h: Int, _ p: evn_raw_transform_params,
        strips: [Range<Int>],
        kernel:
            @escaping (
                UnsafePointer<UInt16>?, UnsafePointer<UInt16>?, Int32, Int32, UnsafePointer<evn_raw_transform_params>?,
                Int32, Int32, UnsafeMutablePointer<UInt16>?
            ) -> Int32 = evn_raw_denoise_transform
    ) -> [UInt16] {
        var p = p
        return planes.withUnsafeBufferPointer { s in
            bystrips(count: planes.count, kept: kept, strips: strips) { k, r, o in
                kernel(s.baseAddress, k, Int32(w), Int32(h), &p, Int32(r.lowerBound), Int32(r.upperBound), o)
            }
        }
    }

    /// A denoise kernel's output (`count` samples, zeroed first) from `call` for each strip of
    /// rows, handed `kept` (nil when not given), the strip and the output; each call must return 0.
    static func bystrips(
        count: Int, kept: [UInt16]?, strips: [Range<Int>],
        _ call: (UnsafePointer<UInt16>?, Range<Int>, UnsafeMutablePointer<UInt16>?) -> Int32
    ) -> [UInt16] {
        var out = [UInt16](repeating: 0, count: count)
        let keptOrEmpty = kept ?? []
        keptOrEmpty.withUnsafeBufferPointer { k in
            out.withUnsafeMutableBufferPointer { o in
                for r in strips { #expect(call(kept == nil ? nil : k.baseAddress, r, o.baseAddress) == 0) }
            }
        }
        return out
    }

    @Test(arguments: [(4, 4), (5, 9), (11, 6), (17, 13)])
    func kernelIsTheDocumentedFilter(width: Int, height: Int) {
        let input = Self.planes(width: width, height: height, noise: 440, seed: 7)
        let kept = (0..<(width * height)).map { UInt16($0 % 5) }  // 0 counts as 1
        let out = Self.run(input, kept: kept, width: width, height: height, Self.params, strips: [0..<height])
        let want = Self.documented(input, kept: kept, width: width, height: height, Self.params)
        let worst = zip(out, want).map { abs(Int($0) - Int($1)) }.max() ?? 0
        // Float against double: a rounding apart at most.
        #expect(worst <= 1, "\(width) x \(height): largest difference \(worst)")
        let changed = zip(out, input).filter { $0 != $1 }.count
        #expect(changed > out.count / 2, "only \(changed) of \(out.count) samples changed")
    }

    /// However the rows are split into strips, and with the AVX2 or the portable build, the same
    /// bits: a strip reads the rows its windows need from the whole image.
    @Test func stripsAndVariantsGiveTheSameBits() {
        let w = 37, h = 29
        let input = Self.planes(width: w, height: h, noise: 440, seed: 9)
        let kept = (0..<(w * h)).map { UInt16(1 + $0 % 7) }
        let whole = Self.run(input, kept: kept, width: w, height: h, Self.params, strips: [0..<h])
        for strips in [[0..<1, 1..<2, 2..<29], [0..<5, 5..<12, 12..<13, 13..<29], (0..<29).map { $0..<($0 + 1) }] {
            let split = Self.run(input, kept: kept, width: w, height: h, Self.params, strips: strips)
            #expect(split == whole, "strips \(strips.map(\.count))")
        }
        let portable = Self.run(
            input, kept: kept, width: w, height: h, Self.params, strips: [0..<h],
            kernel: evn_raw_denoise_transform_portable)
        #expect(portable == whole)
        if evn_cpu_has_avx2() != 0 {
            let avx2 = Self.run(
                input, kept: kept, width: w, height: h, Self.params, strips: [0..<h],
                kernel: evn_raw_denoise_transform_avx2)
            #expect(avx2 == whole)
        }
        #expect(whole != input)
    }

    /// An edge and a stripe of texture far above the noise stay; the flat sides lose most of their
    /// noise; the colours' means stay.
    @Test func edgesStayAndFlatNoiseGoes() {
        let w = 64, h = 48
        let input = Self.planes(width: w, height: h, noise: 440, seed: 5)
        let out = Self.run(input, kept: nil, width: w, height: h, Self.params, strips: [0..<h])
        func stats(_ a: [UInt16], _ ch: Int, _ xs: Range<Int>) -> (mean: Double, variance: Double) {
            var v: [Double] = []
            for y in 0..<h where ![2, 3, 4].contains(y % 7) {
                for x in xs { v.append(Double(a[(y * w + x) * 4 + ch])) }
            }
            let m = v.reduce(0, +) / Double(v.count)
            var s = 0.0
            for e in v { s += (e - m) * (e - m) }
            return (m, s / Double(v.count))
        }
        for ch in 0..<4 {
            let before = stats(input, ch, 4..<(w / 2 - 4)), after = stats(out, ch, 4..<(w / 2 - 4))
            #expect(after.variance < 0.35 * before.variance, "channel \(ch): \(before) -> \(after)")
            #expect(abs(after.mean - before.mean) < 10, "channel \(ch): \(before) -> \(after)")
            // The step of 6000 between the halves, two cells from it on each side.
            let left = stats(out, ch, (w / 2 - 3)..<(w / 2 - 2)).mean,
                right = stats(out, ch, (w / 2 + 2)..<(w / 2 + 3)).mean
            #expect(abs(right - left - 6000) < 60, "channel \(ch): step \(right - left)")
        }
        // The stripe's alternation of +-4000 along row 3 keeps nine tenths of its swing.
        for ch in 0..<4 {
            let swing = (8..<24).map { x in abs(Int(out[(3 * w + x) * 4 + ch]) - Int(out[(3 * w + x + 1) * 4 + ch])) }
            #expect(swing.allSatisfy { $0 > 7200 }, "channel \(ch): \(swing)")
        }
    }

    /// The noise lines a DNG's NoiseProfile may give (any finite value from 0 up): no noise gives
    /// the planes back within a rounding; a noise past any sample's energy (the largest float)
    /// leaves each window its mean, so every sample stays within its channel's range (no NaN, no
    /// overflow on the way).
    @Test func noNoiseAndHugeNoiseStayFinite() {
        let w = 23, h = 17
        let input = Self.planes(width: w, height: h, noise: 440, seed: 13)
        var p = Self.params
        p.slope = (0, 0, 0, 0)
        p.intercept = (0, 0, 0, 0)
        let same = Self.run(input, kept: nil, width: w, height: h, p, strips: [0..<h])
        #expect(zip(same, input).allSatisfy { abs(Int($0) - Int($1)) <= 1 })
        let huge = Float.greatestFiniteMagnitude
        p.slope = (huge, huge, huge, huge)
        p.intercept = (huge, huge, huge, huge)
        let flat = Self.run(input, kept: nil, width: w, height: h, p, strips: [0..<h])
        for ch in 0..<4 {
            let a = stride(from: ch, to: input.count, by: 4).map { input[$0] }
            let b = stride(from: ch, to: flat.count, by: 4).map { flat[$0] }
            #expect(b.allSatisfy { $0 >= a.min()! && $0 <= a.max()! }, "channel \(ch)")
            #expect(b != a, "channel \(ch): nothing smoothed")
        }
    }

    @Test func nothingChangesAtStrengthZeroOnSmallImagesAndBadRowsAreRefused() {
        var p = Self.params
        p.strength = 0
        let input = Self.planes(width: 40, height: 30, noise: 440, seed: 3)
        #expect(Self.run(input, kept: nil, width: 40, height: 30, p, strips: [0..<30]) == input)
        let small = Self.planes(width: 3, height: 9, noise: 440, seed: 3)
        #expect(Self.run(small, kept: nil, width: 3, height: 9, Self.params, strips: [0..<9]) == small)
        var out = input
        var q = Self.params
        input.withUnsafeBufferPointer { s in
            out.withUnsafeMutableBufferPointer { o in
                #expect(evn_raw_denoise_transform(s.baseAddress, nil, 40, 30, &q, 0, 31, o.baseAddress) == -2)
                #expect(evn_raw_denoise_transform(s.baseAddress, nil, 40, 30, &q, 5, 4, o.baseAddress) == -2)
                #expect(evn_raw_denoise_transform(s.baseAddress, nil, 40, 30, &q, -1, 4, o.baseAddress) == -2)
            }
        }
        #expect(out == input)
    }

    /// Flat frames with the model's noise, merged by their mean (at their own samples: white
    /// noise of the line's variance over N) and denoised: the filter and its second pass over red
    /// and blue at strength s leave a known share of white noise's variance (0.197 at 0.5 and
    /// 0.047 at 1 over the mosaic, 1.4 million samples in numpy with the same windows and stages,
    /// away from the edges, `Benchmarks/raw-denoise-study.py`'s `transform` and `differences`; the
    /// filter alone left 0.237 and 0.050; this small burst's edges, where fewer windows are
    /// averaged, leave 2-4 % more). The NoiseProfile stays the merge's (1/N), and the report says
    /// the planes were denoised.
    @Test(arguments: [(Float(0.5), 0.197), (1, 0.047)])
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
            abs(ratio - share * merged) < 0.06 * share * merged,
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
