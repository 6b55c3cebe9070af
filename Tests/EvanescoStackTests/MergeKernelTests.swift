import CKernels
import Foundation
import Testing
import EvanescoCore
@testable import EvanescoStack

/// Random tiles checked against straightforward per-sample reference implementations.
struct RandomTile {
    let tile: SampleTile
    /// A tile made elsewhere (which the caller deallocates).
    init(wrapping tile: SampleTile) { self.tile = tile }
    init(frames: Int, pixels: Int, channels: Int, seed: UInt64, invalidRate: Double = 0.2) {
        tile = SampleTile.allocate(frames: frames, maxPixels: pixels, channels: channels)
        var s = seed
        func rnd() -> Double {
            s = s &* 6364136223846793005 &+ 1442695040888963407
            return Double(s >> 11) / Double(1 << 53)
        }
        for k in 0..<frames {
            for p in 0..<pixels {
                // Frame 0 (the reference) always covers every pixel.
                let ok = k == 0 || rnd() >= invalidRate
                tile.valid[k * pixels + p] = ok ? 1 : 0
                // Mostly a common value plus noise; in a quarter of (frame, pixel) pairs something
                // else covers the pixel, in every channel (as a moving object does).
                let covered = rnd() < 0.25
                for c in 0..<channels {
                    let base = 100 + 20 * Double(c) + Double(p % 7)
                    let v = covered ? rnd() * 255 : base + (rnd() - 0.5) * 6
                    tile.values[k * tile.stride + p * channels + c] = ok ? Float(v.rounded()) : 0
                }
            }
        }
        tile.countValid()
    }
    /// The valid values of sample j.
    func samples(_ j: Int) -> [Float] {
        (0..<tile.frames).filter { tile.valid[$0 * tile.pixels + j / tile.channels] != 0 }.map {
            tile.values[$0 * tile.stride + j]
        }
    }
    func run(_ k: any MergeKernel) -> [Float] {
        let out = UnsafeMutablePointer<Float>.allocate(capacity: tile.length)
        defer { out.deallocate() }
        k.merge(tile, into: out)
        return Array(UnsafeBufferPointer(start: out, count: tile.length))
    }
}

func referenceMedian(_ v: [Float]) -> Float {
    let s = v.sorted(), n = s.count
    return n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2
}

@Suite struct SortingNetworks {
    /// Every column sorted, by the portable kernel and by the AVX2 one (where the CPU has it),
    /// each called directly, and by the network's own sort (whichever this CPU takes).
    @Test(arguments: Array(1...33))
    func sortsEverything(_ n: Int) {
        let net = SortingNetwork(size: n)
        let len = 24
        let buf = UnsafeMutableRawPointer.allocate(byteCount: n * len * 4, alignment: 64).bindMemory(
            to: Float.self, capacity: n * len)
        defer { UnsafeMutableRawPointer(buf).deallocate() }
        typealias Kernel = (UnsafePointer<Int32>?, Int, UnsafeMutablePointer<Float>?, Int, Int) -> Void
        var variants: [(String, (UnsafeMutablePointer<Float>) -> Void)] = [
            ("sort()", { net.sort($0, length: len, stride: len) })
        ]
        var kernels: [(String, Kernel)] = [("portable", evn_sort_network_portable)]
        if evn_cpu_has_avx2() != 0 { kernels.append(("avx2", evn_sort_network_avx2)) }
        for (name, kernel) in kernels {
            variants.append(
                (
                    name,
                    { b in net.flatPairs.withUnsafeBufferPointer { kernel($0.baseAddress, net.pairs.count, b, 3, len) }
                    }
                ))
        }
        for (name, sort) in variants {
            var s: UInt64 = UInt64(n)
            for i in 0..<(n * len) {
                s = s &* 6364136223846793005 &+ 1
                buf[i] = Float(s >> 54)
            }
            let expected: [[Float]] = (0..<len).map { j in (0..<n).map { buf[$0 * len + j] }.sorted() }
            sort(buf)
            for j in 0..<len { #expect((0..<n).map { buf[$0 * len + j] } == expected[j], "\(name)") }
        }
    }
}

@Suite struct DeviationNetworks {
    /// With every frame valid, the deviations read off the sorted values as two runs and put
    /// through the pruned network have the middle of |x - median| in place: the same values as
    /// sorting the deviations, for every frame count up to 33 and 51, ties included.
    @Test(arguments: Array(1...33) + [51])
    func middleDeviationsComeOutInPlace(_ n: Int) {
        let r = RandomTile(frames: n, pixels: 40, channels: 3, seed: UInt64(n), invalidRate: 0)
        defer { r.tile.deallocate() }
        let t = r.tile, net = SortingNetwork(size: n)
        #expect(t.allValid())
        t.copyForSorting(into: t.scratch)
        t.sort(t.scratch, net)
        let med = t.perSample
        for j in 0..<t.length { med[j] = t.median(sorted: t.scratch, j) }
        t.deviationRuns(sorted: t.scratch, medians: med, into: t.deviations)
        net.sortDeviations(t.deviations, length: t.length, stride: t.stride)
        for j in 0..<t.length {
            let devs = r.samples(j).map { abs($0 - med[j]) }.sorted()
            #expect(t.median(sorted: t.deviations, j) == referenceMedian(devs), "sample \(j) of \(n) frames")
            #expect(t.deviations[(n / 2) * t.stride + j] == devs[n / 2])
        }
        #expect(net.deviationPairs.count <= net.pairs.count)
    }
}

@Suite struct MergeKernels {
    static let seeds: [UInt64] = [1, 2, 3]

    /// The robust merge on tiles every frame covers (the path that reads the MAD off the sorted
    /// values) against the straightforward reference, for several frame counts.
    @Test(arguments: [3, 8, 20, 51])
    func robustOnFullyCoveredTiles(_ frames: Int) {
        let r = RandomTile(frames: frames, pixels: 40, channels: 3, seed: 9, invalidRate: 0)
        defer { r.tile.deallocate() }
        let out = r.run(SigmaClipKernel(network: SortingNetwork(size: frames), kappa: 2.5, burstNoise: 1.7))
        for p in 0..<r.tile.pixels {
            let thresholds: [(Float, Float)] = (0..<3).map { ch in
                let v = r.samples(p * 3 + ch), m = referenceMedian(v)
                let spread = 1.4826 * referenceMedian(v.map { abs($0 - m) })
                return (m, 2.5 * (spread * spread + 1.7 * 1.7).squareRoot())
            }
            let kept = (0..<frames).filter { k in
                (0..<3).allSatisfy {
                    abs(r.tile.values[k * r.tile.stride + p * 3 + $0] - thresholds[$0].0) <= thresholds[$0].1
                }
            }
            for ch in 0..<3 {
                let mean = kept.map { r.tile.values[$0 * r.tile.stride + p * 3 + ch] }.reduce(0, +) / Float(kept.count)
                #expect(abs(out[p * 3 + ch] - mean) < 1e-3)
            }
        }
    }

    @Test(arguments: seeds)
    func mean(_ seed: UInt64) {
        let r = RandomTile(frames: 13, pixels: 40, channels: 3, seed: seed)
        defer { r.tile.deallocate() }
        let out = r.run(MeanKernel())
        for j in 0..<r.tile.length {
            let v = r.samples(j)
            #expect(abs(out[j] - v.reduce(0, +) / Float(v.count)) < 1e-3)
        }
    }

    @Test(arguments: seeds)
    func median(_ seed: UInt64) {
        for frames in [1, 2, 5, 20] {
            let r = RandomTile(frames: frames, pixels: 40, channels: 3, seed: seed)
            defer { r.tile.deallocate() }
            let out = r.run(MedianKernel(network: SortingNetwork(size: frames)))
            for j in 0..<r.tile.length { #expect(out[j] == referenceMedian(r.samples(j))) }
        }
    }

    @Test(arguments: seeds)
    func sigmaClip(_ seed: UInt64) {
        let r = RandomTile(frames: 20, pixels: 40, channels: 3, seed: seed)
        defer { r.tile.deallocate() }
        let out = r.run(SigmaClipKernel(network: SortingNetwork(size: 20), kappa: 2.5))
        for j in 0..<r.tile.length {
            let v = r.samples(j), m = referenceMedian(v)
            let mad = referenceMedian(v.map { abs($0 - m) })
            let kept = v.filter { abs($0 - m) <= 2.5 * (1.4826 * mad + 1) }
            #expect(abs(out[j] - kept.reduce(0, +) / Float(kept.count)) < 1e-3)
        }
    }

    @Test(arguments: seeds)
    func winsorized(_ seed: UInt64) {
        let r = RandomTile(frames: 17, pixels: 40, channels: 1, seed: seed)
        defer { r.tile.deallocate() }
        let out = r.run(WinsorizedKernel(network: SortingNetwork(size: 17), fraction: 0.2))
        for j in 0..<r.tile.length {
            let s = r.samples(j).sorted(), n = s.count, g = Int(0.2 * Float(n))
            let clamped = s.map { min(max($0, s[g]), s[n - 1 - g]) }
            #expect(abs(out[j] - clamped.reduce(0, +) / Float(n)) < 1e-3)
        }
    }

    @Test(arguments: seeds)
    func robustAgainstReference(_ seed: UInt64) {
        let r = RandomTile(frames: 20, pixels: 40, channels: 3, seed: seed)
        defer { r.tile.deallocate() }
        let out = r.run(SigmaClipKernel(network: SortingNetwork(size: 20), kappa: 2.5, burstNoise: 1.7))
        for p in 0..<r.tile.pixels {
            // Straightforward reference: per-channel median and MAD threshold; frames kept where
            // all three channels pass; their mean.
            let thresholds: [(Float, Float)] = (0..<3).map { ch in
                let v = r.samples(p * 3 + ch), m = referenceMedian(v)
                let spread = 1.4826 * referenceMedian(v.map { abs($0 - m) })
                return (m, 2.5 * (spread * spread + 1.7 * 1.7).squareRoot())
            }
            let kept = (0..<20).filter { k in
                r.tile.valid[k * r.tile.pixels + p] != 0
                    && (0..<3).allSatisfy {
                        abs(r.tile.values[k * r.tile.stride + p * 3 + $0] - thresholds[$0].0) <= thresholds[$0].1
                    }
            }
            for ch in 0..<3 {
                let mean = kept.map { r.tile.values[$0 * r.tile.stride + p * 3 + ch] }.reduce(0, +) / Float(kept.count)
                #expect(abs(out[p * 3 + ch] - mean) < 1e-3)
            }
        }
    }

    @Test(arguments: seeds)
    func robustIgnoresMinorityOutliers(_ seed: UInt64) {
        let r = RandomTile(frames: 20, pixels: 60, channels: 3, seed: seed)
        defer { r.tile.deallocate() }
        let out = r.run(SigmaClipKernel(network: SortingNetwork(size: 20), kappa: 2.5, burstNoise: 1.7))
        for p in 0..<r.tile.pixels {
            // About 11 clean frames with uniform noise of sd 1.7 (plus rounding): their mean is
            // within 3 sd (1.6) of the true value; covered frames must not pull it further.
            let truth = (0..<3).map { 100 + 20 * Float($0) + Float(p % 7) }
            for c in 0..<3 { #expect(abs(out[p * 3 + c] - truth[c]) < 1.8, "pixel \(p) channel \(c)") }
        }
    }

    @Test func modePicksTheDominantHueAndFallsBackOnGrey() {
        let t = SampleTile.allocate(frames: 5, maxPixels: 2, channels: 3)
        defer { t.deallocate() }
        // Pixel 0: three red frames, two blue ones. Pixel 1: grey everywhere (hue meaningless).
        let reds: [[Float]] = [[200, 20, 20], [210, 30, 25], [190, 25, 15]],
            blues: [[Float]] = [[20, 30, 220], [25, 35, 200]]
        for (k, v) in (reds + blues).enumerated() { for c in 0..<3 { t.values[k * t.stride + c] = v[c] } }
        for k in 0..<5 { for c in 0..<3 { t.values[k * t.stride + 3 + c] = Float(100 + k) } }
        for i in 0..<10 { t.valid[i] = 1 }
        t.countValid()
        let out = UnsafeMutablePointer<Float>.allocate(capacity: 6)
        defer { out.deallocate() }
        ModeKernel(network: SortingNetwork(size: 5), fullScale: 255).merge(t, into: out)
        #expect(out[0] == 200 && out[1] == 25 && out[2] == 20)  // the red frames' mean
        #expect(out[3] == 102 && out[4] == 102 && out[5] == 102)  // grey: the median
    }
}

/// The robust merge's joint-colour clip and mean in CKernels (eight pixels a step) against the
/// scalar loop it stands in for, bit for bit, and its AVX2 variant against its portable one.
@Suite struct ClipMeanKernel {
    @Test(
        """
        Eight pixels a step give the scalar loop's bits: valid and invalid frames, outliers, pixels the kernel \
        leaves to the caller
        """,
        arguments: [(7, 13), (20, 29), (51, 40)])
    func matchesTheScalarLoop(frames: Int, pixels: Int) {
        let r = RandomTile(frames: frames, pixels: pixels, channels: 3, seed: UInt64(frames * 7 + pixels))
        defer { r.tile.deallocate() }
        let t = r.tile, n = t.length
        // Medians and thresholds of some spread: some frames in, some out, a pixel with none in.
        let medians = (0..<n).map { j in t.values[j] + Float(j % 5) - 2 }
        var thresholds = (0..<n).map { j in Float(3 + (j * 7) % 11) }
        thresholds[3] = -1
        thresholds[4] = -1
        thresholds[5] = -1  // pixel 1: no frame is kept
        var want = medians
        for p in 0..<t.pixels {
            var s0: Float = 0, s1: Float = 0, s2: Float = 0, count: Float = 0
            for k in 0..<t.frames where t.valid[k * t.pixels + p] != 0 {
                let v = (0..<3).map { t.values[k * t.stride + p * 3 + $0] }
                if (0..<3).allSatisfy({ abs(v[$0] - medians[p * 3 + $0]) <= thresholds[p * 3 + $0] }) {
                    s0 += v[0]
                    s1 += v[1]
                    s2 += v[2]
                    count += 1
                }
            }
            if count > 0 {
                want[p * 3] = s0 / count
                want[p * 3 + 1] = s1 / count
                want[p * 3 + 2] = s2 / count
            }
        }
        var results: [[UInt32]] = []
        for variant in 0..<(evn_cpu_has_avx2() != 0 ? 2 : 1) {
            var out = medians
            let done = thresholds.withUnsafeBufferPointer { th in
                out.withUnsafeMutableBufferPointer { o in
                    var clip = evn_clip_tile(
                        values: t.values, valid: t.valid, thresholds: th.baseAddress, stride: t.stride,
                        pixels: t.pixels, frames: t.frames)
                    return variant == 0
                        ? evn_clip_mean_rgb_portable(&clip, o.baseAddress)
                        : evn_clip_mean_rgb_avx2(&clip, o.baseAddress)
                }
            }
            #expect(done == pixels / 8 * 8)
            #expect(out[(done * 3)...] == medians[(done * 3)...], "the pixels left to the caller are untouched")
            let same = (0..<(done * 3)).allSatisfy { out[$0].bitPattern == want[$0].bitPattern }
            #expect(same, "variant \(variant)")
            #expect(out[3] == medians[3], "a pixel no frame agrees with keeps its median")
            results.append(out.map(\.bitPattern))
        }
        if results.count == 2 { #expect(results[0] == results[1]) }
    }
}

/// The robust merge's second look (``SigmaClipKernel/regroup(_:into:)``, `evn_largest_group`):
/// where a crowd covers a place in more than half the frames, the frames that saw the place.
@Suite struct LargestGroup {
    static let noise: Float = 1.2
    /// A tile of `pixels` pixels over 20 frames: `background` frames show `place(p)` within
    /// +-2 levels; the others show `other(k, p, channel)`. With `dropped`, the last two frames do
    /// not cover the odd pixels.
    static func tile(
        channels: Int, pixels: Int, background: Int, dropped: Bool = false, place: (Int, Int) -> Float,
        other: (Int, Int, Int) -> Float
    ) -> SampleTile {
        let t = SampleTile.allocate(frames: 20, maxPixels: pixels, channels: channels)
        for k in 0..<20 {
            for p in 0..<pixels {
                let ok = !(dropped && p % 2 == 1 && k >= 18)
                t.valid[k * pixels + p] = ok ? 1 : 0
                for c in 0..<channels {
                    let v = k < background ? place(p, c) + Float((k * 7 + p * 3 + c) % 5) - 2 : other(k, p, c)
                    t.values[k * t.stride + p * channels + c] = ok ? v : 0
                }
            }
        }
        t.countValid()
        return t
    }

    /// The median-centred clip alone (as `robustAgainstReference` computes it) at pixel p.
    static func clipOnly(_ t: SampleTile, _ p: Int) -> [Float] {
        let c = t.channels
        let valid = (0..<t.frames).filter { t.valid[$0 * t.pixels + p] != 0 }
        let centre: [(Float, Float)] = (0..<c).map { ch in
            let v = valid.map { t.values[$0 * t.stride + p * c + ch] }, m = referenceMedian(v)
            let spread = 1.4826 * referenceMedian(v.map { abs($0 - m) })
            return (m, 2.5 * (spread * spread + noise * noise).squareRoot())
        }
        let kept = valid.filter { k in
            (0..<c).allSatisfy { abs(t.values[k * t.stride + p * c + $0] - centre[$0].0) <= centre[$0].1 }
        }
        return (0..<c).map { ch in kept.map { t.values[$0 * t.stride + p * c + ch] }.reduce(0, +) / Float(kept.count) }
    }

    static func mean(_ t: SampleTile, _ p: Int, frames: Range<Int>) -> [Float] {
        (0..<t.channels).map { ch in
            frames.map { t.values[$0 * t.stride + p * t.channels + ch] }.reduce(0, +) / Float(frames.count)
        }
    }

    static func kernel() -> SigmaClipKernel {
        SigmaClipKernel(network: SortingNetwork(size: 20), kappa: 2.5, burstNoise: noise, noiseFloor: 0.5)
    }

    @Test(
        "Nine frames saw the place, eleven passers-by covered it, each in another colour: the place wins",
        arguments: [1, 3])
    func aCrowdThatCoversAPlaceMostOfTheTimeStillVanishes(channels: Int) {
        // Passers-by brighter than the place, 10 levels apart: no two within a window, at most
        // three within one three times as wide.
        let t = Self.tile(
            channels: channels, pixels: 12, background: 9, dropped: true,
            place: { p, c in 60 + Float(2 * p + 10 * c) },
            other: { k, p, c in 130 + Float(10 * (k - 9) + (p + c) % 3) })
        defer { t.deallocate() }
        let out = RandomTile(wrapping: t).run(Self.kernel())
        var premise = 0
        for p in 0..<t.pixels {
            let place = Self.mean(t, p, frames: 0..<9), clip = Self.clipOnly(t, p)
            for ch in 0..<channels {
                #expect(abs(out[p * channels + ch] - place[ch]) < 1e-3, "pixel \(p) channel \(ch)")
            }
            if (0..<channels).contains(where: { abs(clip[$0] - place[$0]) > 5 }) { premise += 1 }
        }
        // The clip alone is pulled off the place by the crowd at most pixels (the test's premise).
        #expect(premise >= t.pixels / 2, "\(premise) of \(t.pixels)")
    }

    @Test func someoneWhoStoodStillInAThirdOfTheFramesDoesNotWinOverAPlaceThatVaries() {
        // Seven frames of someone standing still, thirteen of a place that varies by +-20 levels
        // (leaves, water): the seven agree more tightly, but the place's frames, judged a little
        // more loosely, are more.
        let t = Self.tile(
            channels: 3, pixels: 8, background: 7, place: { _, c in [200, 60, 60][c] },
            other: { k, p, c in 80 + Float(((k - 7) * 40 / 12 + p * 3) % 41) + Float(10 * c) })
        defer { t.deallocate() }
        let out = RandomTile(wrapping: t).run(Self.kernel())
        for p in 0..<t.pixels {
            let clip = Self.clipOnly(t, p)
            for ch in 0..<3 { #expect(abs(out[p * 3 + ch] - clip[ch]) < 1e-3, "pixel \(p) channel \(ch)") }
            #expect(abs(out[p * 3] - 200) > 50, "pixel \(p): the place, not the one who stood there")
        }
        // Without the looser windows (other groups judged as tightly as this one), the one who
        // stood still would win: the guard is what keeps the place.
        var copy = out
        let thresholds = t.perSample  // the clip's, from the merge above
        let width = 2 * 2.5 * Self.noise * Float(2).squareRoot()
        var params = evn_group_params()
        (params.width, params.wide, params.min_group, params.min_share, params.min_run) = (width, width, 5, 0.3, 3)
        var clip = evn_clip_tile(
            values: t.values, valid: t.valid, thresholds: thresholds, stride: t.stride, pixels: t.pixels,
            frames: t.frames)
        let changed = copy.withUnsafeMutableBufferPointer {
            evn_largest_group(&clip, 3, t.scratch, t.counts, &params, t.deviations, $0.baseAddress)
        }
        #expect(changed == t.pixels)
        let person = Self.mean(t, 0, frames: 0..<7)
        #expect(abs(copy[0] - person[0]) < 1e-3)
    }

    @Test("Frames that vary four times the noise are one wide cluster, not a group and the rest")
    func aWideClusterKeepsTheClipsResult() {
        // Twenty draws of a normal distribution of sd 4.8 levels, where the noise is 1.2: twelve
        // lie within one window, the closest other window holds eight, and seven lie within a
        // window's width of it.
        let values: [Float] = [93, 94, 94, 97, 107, 92, 105, 106, 98, 97, 102, 106, 110, 104, 108, 98, 96, 92, 94, 98]
        let t = Self.tile(channels: 1, pixels: 6, background: 0, place: { _, _ in 0 }, other: { k, _, _ in values[k] })
        defer { t.deallocate() }
        let out = RandomTile(wrapping: t).run(Self.kernel())
        for p in 0..<t.pixels { #expect(abs(out[p] - Self.clipOnly(t, p)[0]) < 1e-3, "pixel \(p)") }
    }

    @Test("Only runs of three pixels or more change: a crowd on pixels 1-3 goes, one on pixel 5 alone stays")
    func aLonePixelKeepsTheClipsResult() {
        let crowd: Set<Int> = [1, 2, 3, 5]
        let place: (Int, Int) -> Float = { p, c in 60 + Float(2 * p + 10 * c) }
        let t = Self.tile(
            channels: 3, pixels: 7, background: 9, place: place,
            other: { k, p, c in crowd.contains(p) ? 130 + Float(10 * (k - 9) + (p + c) % 3) : place(p, c) })
        defer { t.deallocate() }
        let out = RandomTile(wrapping: t).run(Self.kernel())
        for p in 0..<t.pixels {
            let want = [1, 2, 3].contains(p) ? Self.mean(t, p, frames: 0..<9) : Self.clipOnly(t, p)
            for ch in 0..<3 { #expect(abs(out[p * 3 + ch] - want[ch]) < 1e-3, "pixel \(p) channel \(ch)") }
        }
        #expect(abs(Self.clipOnly(t, 5)[0] - Self.mean(t, 5, frames: 0..<9)[0]) > 5, "the premise: pixel 5 had a crowd")
    }

    @Test func channelCountsOutOfRangeAreRefused() {
        let t = SampleTile.allocate(frames: 3, maxPixels: 1, channels: 3)
        defer { t.deallocate() }
        var params = evn_group_params()
        (params.width, params.wide, params.min_group, params.min_share, params.min_run) = (1, 3, 5, 0.3, 3)
        var clip = evn_clip_tile(
            values: t.values, valid: t.valid, thresholds: t.perSample, stride: t.stride, pixels: 1, frames: 3)
        var out: [Float] = [0, 0, 0]
        for c in [0, 5] { #expect(evn_largest_group(&clip, c, t.scratch, t.counts, &params, t.deviations, &out) == -1) }
    }
}
