import CKernels
import EvanescoCore
import Foundation
import Testing
@testable import EvanescoStack

/// The raw denoise's second pass (``evn_raw_denoise_differences``): red and blue taken again as
/// differences from green at their own sites. The kernel against its documented formula for two
/// CFA layouts, the same bits however the rows are split, a smooth difference given back, and
/// what it leaves alone.
@Suite struct RawDenoiseDifferencesTests {
    /// Each channel's site (2 row + column) for RGGB and GBRG (channels: red, green, blue, green).
    static let layouts: [[Int32]] = [[0, 1, 3, 2], [2, 0, 1, 3]]

    static func params(sites: [Int32]) -> evn_raw_transform_params {
        var p = RawDenoiseTests.params
        p.difference_threshold = RawMerge.differenceThreshold
        p.site = (sites[0], sites[1], sites[2], sites[3])
        return p
    }

    /// ``evn_raw_denoise_differences`` as its documentation states it, in doubles.
    static func documented(
        merged: [UInt16], filtered: [UInt16], kept: [UInt16]?, width w: Int, height h: Int,
        _ p: evn_raw_transform_params
    ) -> [UInt16] {
        let sites: [Int] = withUnsafeBytes(of: p.site) { $0.bindMemory(to: Int32.self).map(Int.init) }
        let slopes: [Float] = withUnsafeBytes(of: p.slope) { Array($0.bindMemory(to: Float.self)) }
        let intercepts: [Float] = withUnsafeBytes(of: p.intercept) { Array($0.bindMemory(to: Float.self)) }
        var channelOf = [0, 0, 0, 0]
        for ch in 0..<4 { channelOf[sites[ch]] = ch }
        let windows = RawDenoiseTests.Windows(w: w, h: h), t2 = Double(p.difference_threshold * p.difference_threshold)
        var result = filtered
        for ch in [0, 2] {
            let sy = sites[ch] / 2, sx = sites[ch] % 2
            var green = [Double](repeating: 0, count: w * h), diff = green, noise = green
            func sample(_ x: Int, _ y: Int) -> Double {
                Double(merged[(min(h - 1, max(0, y)) * w + min(w - 1, max(0, x))) * 4 + ch])
            }
            for y in 0..<h {
                for x in 0..<w {
                    let (my, mx) = (2 * y + sy, 2 * x + sx)
                    var sum = 0.0, n = 0.0
                    for (ny, nx) in [(my, mx - 1), (my, mx + 1), (my - 1, mx), (my + 1, mx)]
                    where ny >= 0 && ny < 2 * h && nx >= 0 && nx < 2 * w {
                        sum += Double(filtered[((ny / 2) * w + nx / 2) * 4 + channelOf[(ny % 2) * 2 + nx % 2]])
                        n += 1
                    }
                    var m = 0.0
                    for dy in -1...1 { for dx in -1...1 { m += sample(x + dx, y + dy) } }
                    let level = max(0, Double(slopes[ch]) * m / 9 + Double(intercepts[ch]))
                    let i = y * w + x
                    green[i] = sum / n
                    diff[i] = sample(x, y) - green[i]
                    noise[i] = level * Double(p.strength) / Double(max(1, kept?[i] ?? 1))
                }
            }
            func windowNoise(_ x0: Int, _ y0: Int) -> Double {
                var s = 0.0
                for i in 0..<4 { for j in 0..<4 { s += noise[(y0 + i) * w + x0 + j] } }
                return s / 16
            }
            let pilot = windows.averaged(diff) { x0, y0, c in
                let n = windowNoise(x0, y0)
                return c.enumerated().map { $0.offset == 0 || $0.element * $0.element > t2 * n ? $0.element : 0 }
            }
            let out = windows.averaged(diff) { x0, y0, c in
                let n = windowNoise(x0, y0), q = windows.coefficients(pilot, x0, y0)
                return c.enumerated().map { vu, v in vu == 0 ? v : v * q[vu] * q[vu] / (q[vu] * q[vu] + n) }
            }
            for i in 0..<(w * h) { result[i * 4 + ch] = UInt16(min(65535, max(0, (green[i] + out[i]).rounded()))) }
        }
        return result
    }

    /// Rows `strips` of the pass over `merged` and `filtered` through `kernel` into a copy.
    static func run(
        merged: [UInt16], filtered: [UInt16], kept: [UInt16]?, width w: Int, height h: Int,
        _ p: evn_raw_transform_params, strips: [Range<Int>],
        kernel:
            @escaping (
                UnsafePointer<UInt16>?, UnsafePointer<UInt16>?, UnsafePointer<UInt16>?, Int32, Int32,
                UnsafePointer<evn_raw_transform_params>?, Int32, Int32, UnsafeMutablePointer<UInt16>?
            ) -> Int32 = evn_raw_denoise_differences
    ) -> [UInt16] {
        var p = p
        return merged.withUnsafeBufferPointer { m in
            filtered.withUnsafeBufferPointer { f in
                RawDenoiseTests.bystrips(count: merged.count, kept: kept, strips: strips) { k, r, o in
                    kernel(
                        m.baseAddress, f.baseAddress, k, Int32(w), Int32(h), &p, Int32(r.lowerBound),
                        Int32(r.upperBound), o)
                }
            }
        }
    }

    @Test(arguments: [(4, 4), (5, 9), (11, 6), (17, 13)], [0, 1])
    func kernelIsTheDocumentedPass(size: (Int, Int), layout: Int) {
        let (w, h) = size
        let merged = RawDenoiseTests.planes(width: w, height: h, noise: 440, seed: 11)
        let filtered = RawDenoiseTests.planes(width: w, height: h, noise: 40, seed: 12)
        let kept = (0..<(w * h)).map { UInt16($0 % 5) }  // 0 counts as 1
        let p = Self.params(sites: Self.layouts[layout])
        let out = Self.run(merged: merged, filtered: filtered, kept: kept, width: w, height: h, p, strips: [0..<h])
        let want = Self.documented(merged: merged, filtered: filtered, kept: kept, width: w, height: h, p)
        let worst = zip(out, want).map { abs(Int($0) - Int($1)) }.max() ?? 0
        #expect(worst <= 1, "\(w) x \(h), layout \(layout): largest difference \(worst)")
        // The greens are the filtered ones; red and blue are not.
        for i in 0..<(w * h) {
            #expect(out[i * 4 + 1] == filtered[i * 4 + 1] && out[i * 4 + 3] == filtered[i * 4 + 3])
        }
        #expect(zip(out, filtered).filter { $0 != $1 }.count > w * h)
    }

    @Test func stripsAndVariantsGiveTheSameBits() {
        let w = 37, h = 29
        let merged = RawDenoiseTests.planes(width: w, height: h, noise: 440, seed: 21)
        let filtered = RawDenoiseTests.planes(width: w, height: h, noise: 40, seed: 22)
        let kept = (0..<(w * h)).map { UInt16(1 + $0 % 7) }, p = Self.params(sites: Self.layouts[0])
        let whole = Self.run(merged: merged, filtered: filtered, kept: kept, width: w, height: h, p, strips: [0..<h])
        for strips in [[0..<1, 1..<2, 2..<29], [0..<5, 5..<12, 12..<13, 13..<29], (0..<29).map { $0..<($0 + 1) }] {
            let split = Self.run(merged: merged, filtered: filtered, kept: kept, width: w, height: h, p, strips: strips)
            #expect(split == whole, "strips \(strips.map(\.count))")
        }
        let portable = Self.run(
            merged: merged, filtered: filtered, kept: kept, width: w, height: h, p, strips: [0..<h],
            kernel: evn_raw_denoise_differences_portable)
        #expect(portable == whole)
        if evn_cpu_has_avx2() != 0 {
            let avx2 = Self.run(
                merged: merged, filtered: filtered, kept: kept, width: w, height: h, p, strips: [0..<h],
                kernel: evn_raw_denoise_differences_avx2)
            #expect(avx2 == whole)
        }
    }

    /// A mosaic whose green is a plane (a ramp across the cells) and whose red and blue are green
    /// plus a constant, with noise on red and blue only: inside the image (where a site has its
    /// four green neighbours, whose mean is green there) the noise goes and the constant stays.
    @Test func aSmoothDifferenceStaysAndItsNoiseGoes() {
        let w = 48, h = 40, sites = Self.layouts[0]
        var s: UInt64 = 0x2545_F491_4F6C_DD1D
        func noise() -> Double {
            s = s &* 6364136223846793005 &+ 1442695040888963407
            return (Double(s >> 40) / Double(1 << 24) - 0.5) * 3.46 * 21  // variance about 440
        }
        var filtered = [UInt16](repeating: 0, count: w * h * 4), merged = filtered, clean = filtered
        for y in 0..<h {
            for x in 0..<w {
                for ch in 0..<4 {
                    let my = 2 * y + Int(sites[ch]) / 2, mx = 2 * x + Int(sites[ch]) % 2
                    let g = 20000 + 40 * Double(mx) + 25 * Double(my)
                    let v = ch == 0 ? g + 3000 : ch == 2 ? g - 2000 : g
                    let i = (y * w + x) * 4 + ch
                    clean[i] = UInt16(v)
                    filtered[i] = UInt16(v)
                    merged[i] = ch % 2 == 1 ? UInt16(v) : UInt16((v + noise()).rounded())
                }
            }
        }
        let out = Self.run(
            merged: merged, filtered: filtered, kept: nil, width: w, height: h, Self.params(sites: sites),
            strips: [0..<h])
        for ch in [0, 2] {
            var before = 0.0, after = 0.0, bias = 0.0, n = 0.0
            for y in 1..<(h - 1) {
                for x in 1..<(w - 1) {
                    let i = (y * w + x) * 4 + ch
                    before += pow(Double(merged[i]) - Double(clean[i]), 2)
                    after += pow(Double(out[i]) - Double(clean[i]), 2)
                    bias += Double(out[i]) - Double(clean[i])
                    n += 1
                }
            }
            #expect(after < 0.1 * before, "channel \(ch): squared error \(before / n) -> \(after / n)")
            #expect(abs(bias / n) < 1, "channel \(ch): mean error \(bias / n)")
        }
    }

    /// The noise lines a DNG's NoiseProfile may give (any finite value from 0 up), on a mosaic
    /// whose greens are flat (so green at every site is exactly theirs) and whose red and blue are
    /// noisy: no noise gives red and blue back as they were merged (within a rounding); a noise past
    /// any sample's energy (the largest float) leaves each difference window its mean, so red and
    /// blue stay within their range (no NaN, no overflow on the way) and are smoothed.
    @Test func noNoiseAndHugeNoiseStayFinite() {
        let w = 23, h = 17
        let noisy = RawDenoiseTests.planes(width: w, height: h, noise: 440, seed: 41)
        let merged = noisy.indices.map { i in i % 2 == 1 ? UInt16(9000) : noisy[i] }  // channels 1 and 3: green
        var p = Self.params(sites: Self.layouts[0])
        p.slope = (0, 0, 0, 0)
        p.intercept = (0, 0, 0, 0)
        let same = Self.run(merged: merged, filtered: merged, kept: nil, width: w, height: h, p, strips: [0..<h])
        #expect(zip(same, merged).allSatisfy { abs(Int($0) - Int($1)) <= 1 })
        let huge = Float.greatestFiniteMagnitude
        p.slope = (huge, huge, huge, huge)
        p.intercept = (huge, huge, huge, huge)
        let flat = Self.run(merged: merged, filtered: merged, kept: nil, width: w, height: h, p, strips: [0..<h])
        for ch in 0..<4 {
            let a = stride(from: ch, to: merged.count, by: 4).map { merged[$0] }
            let b = stride(from: ch, to: flat.count, by: 4).map { flat[$0] }
            if ch % 2 == 1 {
                #expect(b == a, "green \(ch) is the filtered one's")
                continue
            }
            #expect(b.allSatisfy { $0 >= a.min()! && $0 <= a.max()! }, "channel \(ch)")
            #expect(b != a, "channel \(ch): nothing smoothed")
        }
    }

    @Test func nothingChangesWithoutStrengthOrThresholdOnSmallImagesAndBadRowsAreRefused() {
        let merged = RawDenoiseTests.planes(width: 40, height: 30, noise: 440, seed: 31)
        let filtered = RawDenoiseTests.planes(width: 40, height: 30, noise: 40, seed: 32)
        var p = Self.params(sites: Self.layouts[0])
        p.strength = 0
        #expect(
            Self.run(merged: merged, filtered: filtered, kept: nil, width: 40, height: 30, p, strips: [0..<30])
                == filtered)
        p = Self.params(sites: Self.layouts[0])
        p.difference_threshold = 0
        #expect(
            Self.run(merged: merged, filtered: filtered, kept: nil, width: 40, height: 30, p, strips: [0..<30])
                == filtered)
        let small = RawDenoiseTests.planes(width: 3, height: 9, noise: 440, seed: 3)
        let smallFiltered = RawDenoiseTests.planes(width: 3, height: 9, noise: 40, seed: 4)
        #expect(
            Self.run(
                merged: small, filtered: smallFiltered, kept: nil, width: 3, height: 9,
                Self.params(sites: Self.layouts[0]),
                strips: [0..<9]) == smallFiltered)
        var out = filtered, q = Self.params(sites: Self.layouts[0])
        merged.withUnsafeBufferPointer { m in
            filtered.withUnsafeBufferPointer { f in
                out.withUnsafeMutableBufferPointer { o in
                    for (y0, y1) in [(0, 31), (5, 4), (-1, 4)] {
                        #expect(
                            evn_raw_denoise_differences(
                                m.baseAddress, f.baseAddress, nil, 40, 30, &q, Int32(y0), Int32(y1), o.baseAddress)
                                == -2)
                    }
                }
            }
        }
        #expect(out == filtered)
    }
}
