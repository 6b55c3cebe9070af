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
        for k in 0..<t.frames { let v = t.values + k * t.stride; for j in 0..<t.length { out[j] += v[j] } }
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

/// mean of { x : |x - med| <= kappa * (1.4826 * MAD + 1) }, MAD = median |x - med|.
struct SigmaClipKernel: MergeKernel {
    let network: SortingNetwork
    let kappa: Float
    func merge(_ t: SampleTile, into out: UnsafeMutablePointer<Float>) {
        let len = t.length
        t.copyForSorting(into: t.scratch)
        t.sort(t.scratch, network)
        for j in 0..<len { out[j] = t.median(sorted: t.scratch, j) }          // med
        for k in 0..<t.frames {                                               // |x - med|, invalid last
            let s = t.scratch + k * t.stride
            for j in 0..<len { s[j] = abs(s[j] - out[j]) }
        }
        t.sort(t.scratch, network)
        let c = t.channels
        for j in 0..<len {
            let threshold = kappa * (1.4826 * t.median(sorted: t.scratch, j) + 1)
            var sum: Float = 0, n: Float = 0
            for k in 0..<t.frames where t.valid[k * t.pixels + j / c] != 0 {
                let x = t.values[k * t.stride + j]
                if abs(x - out[j]) <= threshold { sum += x; n += 1 }
            }
            out[j] = n > 0 ? sum / n : out[j]
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
            guard n > 0 else { out[j] = 0; continue }
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
        MedianKernel(network: network).merge(t, into: out)     // the fallback, everywhere first
        guard t.channels >= 3 else { return }
        let c = t.channels, len = t.length
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
                sums[bin * 3] += t.values[o]; sums[bin * 3 + 1] += t.values[o + 1]; sums[bin * 3 + 2] += t.values[o + 2]
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

/// Joint-colour Tukey M-estimate around the median with a burst-wide noise scale; see
/// MergeMethod.robust. `rejectWeights` (per frame and pixel) come from the stacker's first pass
/// when neighbourhood rejection is on; nil means decide per pixel.
struct RobustKernel: MergeKernel {
    let network: SortingNetwork
    /// Noise standard deviation per channel, in sample units.
    let sigma: Float
    /// Tukey cut-off in units of sigma (RMS over channels).
    let cutoff: Float
    let iterations: Int

    func merge(_ t: SampleTile, into out: UnsafeMutablePointer<Float>) {
        MedianKernel(network: network).merge(t, into: out)
        estimate(t, seed: out, into: out, useGivenWeights: false)
    }

    /// Per-pixel Tukey weights of every frame against `centre` (the squared RMS deviation over
    /// channels, scaled by cutoff * sigma).
    func weights(_ t: SampleTile, centre: UnsafePointer<Float>, into w: UnsafeMutablePointer<Float>) {
        let c = t.channels, len = t.length
        let inv = 1 / (cutoff * sigma * cutoff * sigma * Float(c))
        for k in 0..<t.frames {
            let v = t.values + k * t.stride, ok = t.valid + k * t.pixels, wk = w + k * t.pixels
            for p in 0..<t.pixels {
                var d2: Float = 0
                for ch in 0..<c { let e = v[p * c + ch] - centre[p * c + ch]; d2 += e * e }
                let u2 = d2 * inv
                wk[p] = ok[p] != 0 && u2 < 1 ? (1 - u2) * (1 - u2) : 0
            }
        }
    }

    /// Iteratively reweighted mean starting from `seed`. With `useGivenWeights`, t.weights holds
    /// weights to multiply in (the neighbourhood rejection mask).
    func estimate(_ t: SampleTile, seed: UnsafePointer<Float>, into out: UnsafeMutablePointer<Float>, useGivenWeights: Bool) {
        let c = t.channels, len = t.length
        let centre = t.scratch2
        for j in 0..<len { centre[j] = seed[j] }
        let w = t.scratch   // frames * pixels weights
        for _ in 0..<iterations {
            weights(t, centre: centre, into: w)
            if useGivenWeights { for i in 0..<(t.frames * t.pixels) { w[i] *= t.weights[i] } }
            for p in 0..<t.pixels {
                var sw: Float = 0
                var acc = (Float(0), Float(0), Float(0), Float(0))
                for k in 0..<t.frames {
                    let wk = w[k * t.pixels + p]
                    if wk == 0 { continue }
                    sw += wk
                    let o = k * t.stride + p * c
                    acc.0 += wk * t.values[o]
                    if c > 1 { acc.1 += wk * t.values[o + 1]; acc.2 += wk * t.values[o + 2] }
                    if c > 3 { acc.3 += wk * t.values[o + 3] }
                }
                guard sw > 0 else { continue }
                centre[p * c] = acc.0 / sw
                if c > 1 { centre[p * c + 1] = acc.1 / sw; centre[p * c + 2] = acc.2 / sw }
                if c > 3 { centre[p * c + 3] = acc.3 / sw }
            }
        }
        for j in 0..<len { out[j] = centre[j] }
    }
}
