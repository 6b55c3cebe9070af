import CKernels
import Foundation

/// A merge: reads a tile, writes one value per sample into `out` (same scale).
/// Kernels say *what* is computed for a tile; the stacker decides tiling and threads.
protocol MergeKernel: Sendable {
    func merge(_ t: SampleTile, into out: UnsafeMutablePointer<Float>)
}

/// mean = sum of valid samples / their count (invalid samples hold 0).
struct MeanKernel: MergeKernel {
    func merge(_ t: SampleTile, into out: UnsafeMutablePointer<Float>) {
        for j in 0..<t.length { out[j] = 0 }
        for k in 0..<t.frames {
            let v = t.values + k * t.stride
            for j in 0..<t.length { out[j] += v[j] }
        }
        for j in 0..<t.length { out[j] /= Float(max(1, t.counts[j])) }
    }
}

/// median of the valid samples.
struct MedianKernel: MergeKernel {
    let network: SortingNetwork
    func merge(_ t: SampleTile, into out: UnsafeMutablePointer<Float>) {
        t.copyForSorting(into: t.scratch)
        t.sort(t.scratch, network)
        for j in 0..<t.length { out[j] = t.median(sorted: t.scratch, j) }
    }
}

/// mean of { x : |x - med| <= threshold }, MAD = median |x - med|, threshold
/// kappa * (1.4826 MAD + 1) for sigma-clip (../shared/bench's formula). The robust merge passes
/// `burstNoise`: threshold kappa * sqrt((1.4826 MAD)^2 + burstNoise^2), and keeps a frame at a
/// pixel only if every channel passes (a frame either covers a pixel or it does not).
///
/// Then, for the robust merge, a second look where the frames split (``regroup(_:into:)``).
struct SigmaClipKernel: MergeKernel {
    let network: SortingNetwork
    let kappa: Float
    var burstNoise: Float? = nil
    /// The least noise the second look's groups are measured in (the burst's when larger): a
    /// burst without noise would otherwise make groups of equal values only.
    var noiseFloor: Float = 0

    /// The robust merge's second look (``evn_group_params``), in units of the burst's noise:
    /// frames agree within a window of 2 kappa sqrt(2) (two frames' noise, at kappa), and only
    /// pixels whose median absolute deviation exceeds `spread` noises are looked at again (at 2
    /// noises, the same results on the family, but 12 MP pug-handheld took 1.09x as long; at 4,
    /// 1.01x). A group holds at least `least` frames and `share` of the valid ones, more
    /// than any window `wide` times as wide beside it (a place whose own frames vary more than the
    /// noise, leaves or water, against someone who stood still in a third of the frames:
    /// MergeKernelTests), and twice as many as lie within one width of it (else the frames are one
    /// wide cluster, not two groups); only runs of `run` pixels along a row change. Chosen on the
    /// erase family's seeds 1-3 (Benchmarks/erase-family.sh), where passers-by covered a place in
    /// 10-11 of 20 frames, and on the real bursts of ../shared/data: with the first two tests
    /// alone, 22 of its 24 bursts came to at most 0.01 % error pixels (16 before), but on
    /// lowlight-handheld (8 frames) and highway single pixels came out 18 levels off their
    /// neighbours; with all of them, 20 of 24, no burst worse anywhere, and none of those pixels
    /// (runs of 2 brought back a few).
    static let group = (least: Int32(5), share: Float(0.3), wide: Float(3), spread: Float(4), run: Int32(3))

    func merge(_ t: SampleTile, into out: UnsafeMutablePointer<Float>) {
        mergeClipped(t, into: out)
        if burstNoise != nil { regroup(t, into: out) }
    }

    /// Where the frames split (some channel's threshold above kappa times the noise and the
    /// ``group`` spread in quadrature), the largest group of frames that agree, if it outnumbers
    /// every other and the clip's result `out` lies outside it (``evn_largest_group``).
    /// `t.scratch` holds the sorted values, `t.perSample` the thresholds.
    /// Fewer frames than a group's least cannot hold one; the kernel's `work` (`t.deviations`,
    /// frames x length floats) holds (channels + 1) floats a pixel only from two frames on.
    func regroup(_ t: SampleTile, into out: UnsafeMutablePointer<Float>) {
        let g = Self.group, noise = max(burstNoise ?? 0, noiseFloor)
        guard t.frames >= Int(g.least) else { return }
        var p = evn_group_params()
        p.width = 2 * kappa * noise * Float(2).squareRoot()
        p.wide = g.wide * p.width
        p.gate = kappa * noise * (1 + g.spread * g.spread).squareRoot()
        (p.min_group, p.min_share, p.min_run) = (g.least, g.share, g.run)
        var clip = evn_clip_tile(
            values: t.values, valid: t.valid, thresholds: t.perSample, stride: t.stride, pixels: t.pixels,
            frames: t.frames)
        let changed = evn_largest_group(&clip, t.channels, t.scratch, t.counts, &p, t.deviations, out)
        precondition(changed >= 0, "\(t.channels) channels")
    }

    private func mergeClipped(_ t: SampleTile, into out: UnsafeMutablePointer<Float>) {
        let len = t.length
        t.copyForSorting(into: t.scratch)
        t.sort(t.scratch, network)
        for j in 0..<len { out[j] = t.median(sorted: t.scratch, j) }  // med
        let deviations = t.sortedDeviations(medians: out, network)  // MAD's samples
        let c = t.channels
        let threshold = t.perSample
        for j in 0..<len {
            let spread = 1.4826 * t.median(sorted: deviations, j)
            threshold[j] = burstNoise.map { kappa * (spread * spread + $0 * $0).squareRoot() } ?? kappa * (spread + 1)
        }
        guard burstNoise != nil else {
            for j in 0..<len {
                var sum: Float = 0, n: Float = 0
                for k in 0..<t.frames where t.valid[k * t.pixels + j / c] != 0 {
                    let x = t.values[k * t.stride + j]
                    if abs(x - out[j]) <= threshold[j] {
                        sum += x
                        n += 1
                    }
                }
                out[j] = n > 0 ? sum / n : out[j]
            }
            return
        }
        // Joint colour: mean of the frames whose every channel is within its threshold.
        guard c == 3 else {
            for p in 0..<t.pixels {
                var sums = [Float](repeating: 0, count: c), n: Float = 0
                for k in 0..<t.frames where t.valid[k * t.pixels + p] != 0 {
                    let o = k * t.stride + p * c
                    var keep = true
                    for ch in 0..<c where abs(t.values[o + ch] - out[p * c + ch]) > threshold[p * c + ch] {
                        keep = false
                    }
                    guard keep else { continue }
                    n += 1
                    for ch in 0..<c { sums[ch] += t.values[o + ch] }
                }
                if n > 0 { for ch in 0..<c { out[p * c + ch] = sums[ch] / n } }
            }
            return
        }
        // Eight pixels a step in CKernels (each pixel's frames added in order, as below: the
        // same bits), the rest here. Offsets wrap: k < frames, p < pixels, so every one lies
        // inside the tile's buffers.
        var clip = evn_clip_tile(
            values: t.values, valid: t.valid, thresholds: threshold, stride: t.stride, pixels: t.pixels,
            frames: t.frames)
        let done = evn_clip_mean_rgb(&clip, out)
        let frameStride = t.stride, pixels = t.pixels
        for p in done..<t.pixels {
            let j = p &* 3
            let (m0, m1, m2) = (out[j], out[j &+ 1], out[j &+ 2])
            let (t0, t1, t2) = (threshold[j], threshold[j &+ 1], threshold[j &+ 2])
            var s0: Float = 0, s1: Float = 0, s2: Float = 0, n: Float = 0
            var v = t.values + j, ok = t.valid + p
            for _ in 0..<t.frames {
                let keep = ok[0] != 0 && abs(v[0] - m0) <= t0 && abs(v[1] - m1) <= t1 && abs(v[2] - m2) <= t2
                if keep {
                    s0 += v[0]
                    s1 += v[1]
                    s2 += v[2]
                    n += 1
                }
                v += frameStride
                ok += pixels
            }
            if n > 0 {
                out[j] = s0 / n
                out[j + 1] = s1 / n
                out[j + 2] = s2 / n
            }
        }
    }
}

/// Winsorized mean: with n valid samples sorted s[0..<n] and g = floor(fraction * n),
/// mean of s with s[i < g] -> s[g] and s[i >= n - g] -> s[n - 1 - g].
struct WinsorizedKernel: MergeKernel {
    let network: SortingNetwork
    let fraction: Float
    func merge(_ t: SampleTile, into out: UnsafeMutablePointer<Float>) {
        let len = t.length
        t.copyForSorting(into: t.scratch)
        t.sort(t.scratch, network)
        for j in 0..<len {
            let n = Int(t.counts[j])
            guard n > 0 else {
                out[j] = 0
                continue
            }
            let g = Int(fraction * Float(n))
            let lo = t.scratch[g * t.stride + j], hi = t.scratch[(n - 1 - g) * t.stride + j]
            var sum = Float(g) * (lo + hi)
            for i in g..<(n - g) { sum += t.scratch[i * t.stride + j] }
            out[j] = sum / Float(n)
        }
    }
}

/// The tutorial's hue mode, with a median fallback for unsaturated pixels (see MergeMethod.mode).
struct ModeKernel: MergeKernel {
    let network: SortingNetwork
    let fullScale: Float
    static let bins = 24
    func merge(_ t: SampleTile, into out: UnsafeMutablePointer<Float>) {
        MedianKernel(network: network).merge(t, into: out)  // the fallback, everywhere first
        guard t.channels >= 3 else { return }
        let c = t.channels
        var count = [Int](repeating: 0, count: Self.bins)
        var sums = [Float](repeating: 0, count: Self.bins * 3)
        for p in 0..<t.pixels {
            for b in 0..<Self.bins { count[b] = 0 }
            for b in 0..<(Self.bins * 3) { sums[b] = 0 }
            var valid = 0
            for k in 0..<t.frames where t.valid[k * t.pixels + p] != 0 {
                valid += 1
                let o = k * t.stride + p * c
                let r = t.values[o] / fullScale, g = t.values[o + 1] / fullScale, b = t.values[o + 2] / fullScale
                guard let hue = ModeKernel.hslHue(r, g, b) else { continue }
                let bin = min(Self.bins - 1, Int(hue * Float(Self.bins)))
                count[bin] += 1
                sums[bin * 3] += t.values[o]
                sums[bin * 3 + 1] += t.values[o + 1]
                sums[bin * 3 + 2] += t.values[o + 2]
            }
            // Votes over a circular window of 3 bins (45 degrees), so that a colour whose frames
            // straddle a bin edge is not outvoted by a minority that happens to share one bin.
            let nb = Self.bins
            @inline(__always) func window(_ b: Int) -> Int { count[(b + nb - 1) % nb] + count[b] + count[(b + 1) % nb] }
            var best = 0
            for b in 1..<nb where window(b) > window(best) { best = b }
            let votes = window(best)
            // Hue decides only where most frames are saturated and one hue clearly dominates.
            guard votes * 2 > valid, votes >= 2 else { continue }
            for ch in 0..<3 {
                let sum = sums[((best + nb - 1) % nb) * 3 + ch] + sums[best * 3 + ch] + sums[((best + 1) % nb) * 3 + ch]
                out[p * c + ch] = sum / Float(votes)
            }
        }
    }

    /// HSL hue in 0..<1, or nil where HSL saturation is below 0.12 (hue is noise there).
    static func hslHue(_ r: Float, _ g: Float, _ b: Float) -> Float? {
        let mx = max(r, g, b), mn = min(r, g, b), d = mx - mn
        let l = (mx + mn) / 2
        guard d > 1e-6 else { return nil }
        let s = l < 0.5 ? d / (mx + mn) : d / (2 - mx - mn)
        guard s >= 0.12 else { return nil }
        var h: Float
        if mx == r { h = (g - b) / d } else if mx == g { h = (b - r) / d + 2 } else { h = (r - g) / d + 4 }
        h /= 6
        if h < 0 { h += 1 }
        return h
    }
}
