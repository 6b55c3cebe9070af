import EvanescoCore

/// One tile of the aligned burst: a row segment of `pixels` pixels seen through every frame.
/// `values[k * length + j]` is sample j (pixel j / channels, channel j % channels) of frame k,
/// in the input's own scale (0...255 or 0...65535), 0 where frame k does not cover the pixel;
/// `valid[k * pixels + p]` is 1 where it does. The reference frame always covers every pixel.
/// Frame k's samples start at `k * stride` (stride: a multiple of 8, so vectors align).
public struct SampleTile {
    /// Frames in the tile.
    public let frames: Int
    /// Pixels in the segment.
    public let pixels: Int
    /// Channels per pixel.
    public let channels: Int
    /// Floats between the starts of two frames' samples (a multiple of 8).
    public let stride: Int
    /// Samples per frame: `pixels * channels`.
    public var length: Int { pixels * channels }
    /// Frame k's samples start at `values + k * stride`.
    public let values: UnsafeMutablePointer<Float>
    /// `valid[k * pixels + p]` is 1 where frame k covers pixel p.
    public let valid: UnsafeMutablePointer<UInt8>
    /// Valid frames per sample (length entries).
    public let counts: UnsafeMutablePointer<Int32>
    /// Work space for the kernels: `frames * stride` floats, and one value per sample.
    public let scratch: UnsafeMutablePointer<Float>
    /// One float per sample, for a kernel's intermediate results.
    public let perSample: UnsafeMutablePointer<Float>
    /// Work space for absolute deviations: `frames * stride` floats.
    public let deviations: UnsafeMutablePointer<Float>

    /// Allocates a tile able to hold `maxPixels` pixels.
    static func allocate(frames: Int, maxPixels: Int, channels: Int) -> SampleTile {
        let stride = (maxPixels * channels + 7) / 8 * 8
        func floats(_ n: Int) -> UnsafeMutablePointer<Float> {
            let p = UnsafeMutableRawPointer.allocate(byteCount: n * 4, alignment: 64).bindMemory(
                to: Float.self, capacity: n)
            p.initialize(repeating: 0, count: n)
            return p
        }
        return SampleTile(
            frames: frames, pixels: maxPixels, channels: channels, stride: stride,
            values: floats(frames * stride), valid: .allocate(capacity: frames * maxPixels),
            counts: .allocate(capacity: stride), scratch: floats(frames * stride),
            perSample: floats(stride), deviations: floats(frames * stride))
    }

    func resized(pixels p: Int) -> SampleTile {
        SampleTile(
            frames: frames, pixels: p, channels: channels, stride: stride, values: values, valid: valid, counts: counts,
            scratch: scratch, perSample: perSample, deviations: deviations)
    }

    /// Sorts every sample position's frame values in `buffer` (frames x stride).
    func sort(_ buffer: UnsafeMutablePointer<Float>, _ network: SortingNetwork) {
        network.sort(buffer, length: length, stride: stride)
    }

    func deallocate() {
        for p in [values, scratch, perSample, deviations] { UnsafeMutableRawPointer(p).deallocate() }
        valid.deallocate()
        counts.deallocate()
    }

    /// Fills `counts` from `valid`.
    func countValid() {
        let c = channels
        for p in 0..<pixels {
            var n: Int32 = 0
            var v = valid + p
            for _ in 0..<frames {
                n &+= Int32(v[0])
                v += pixels
            }
            for ch in 0..<c { counts[p &* c &+ ch] = n }
        }
    }

    /// Copies the values into `dst` with invalid samples set to +infinity (they sort last).
    func copyForSorting(into dst: UnsafeMutablePointer<Float>) {
        let c = channels
        for k in 0..<frames {
            let v = values + k * stride, d = dst + k * stride, ok = valid + k * pixels
            if c == 3 {
                for p in 0..<pixels {
                    let inf: Float = ok[p] != 0 ? 0 : .infinity, o = p &* 3
                    d[o] = v[o] + inf
                    d[o &+ 1] = v[o &+ 1] + inf
                    d[o &+ 2] = v[o &+ 2] + inf
                }
            } else {
                for p in 0..<pixels {
                    let inf: Float = ok[p] != 0 ? 0 : .infinity
                    for ch in 0..<c { d[p &* c &+ ch] = v[p &* c &+ ch] + inf }
                }
            }
        }
    }

    /// Whether every frame covers every pixel of the tile (most tiles of a burst).
    func allValid() -> Bool {
        let n = Int32(frames)
        for j in 0..<length where counts[j] != n { return false }
        return true
    }

    /// After sorting, when every sample has all `frames` values (``allValid()``): writes each
    /// sample's absolute deviations from its median (`medians`) into `d` as two ascending runs,
    /// the values at and below the middle read downwards (`m - x`), then those above it read
    /// upwards (`x - m`): what ``SortingNetwork/sortDeviations(_:length:stride:)`` takes. The same
    /// deviations `|x - m|` as from the unsorted values.
    func deviationRuns(
        sorted s: UnsafeMutablePointer<Float>, medians m: UnsafePointer<Float>, into d: UnsafeMutablePointer<Float>
    ) {
        let n = frames, p = (n - 1) / 2, len = length
        for k in 0..<n {
            let below = k <= p
            let src = s + (below ? p - k : k) * stride, dst = d + k * stride
            if below {
                for j in 0..<len { dst[j] = m[j] - src[j] }
            } else {
                for j in 0..<len { dst[j] = src[j] - m[j] }
            }
        }
    }

    /// After ``sort(_:_:)`` of `scratch` and with each sample's median in `medians`: the absolute
    /// deviations `|x - median|`, sorted as ``median(sorted:_:)`` reads them, and the buffer that
    /// holds them. Where every frame covers the tile (most tiles), from the sorted values' two runs
    /// of deviations (``deviationRuns(sorted:medians:into:)``) and the network's comparators for
    /// their middle; elsewhere sorted whole, invalid samples (+infinity) last. Either way into
    /// `deviations`: `scratch` keeps the sorted values.
    func sortedDeviations(medians m: UnsafePointer<Float>, _ network: SortingNetwork) -> UnsafeMutablePointer<Float> {
        if allValid() {
            deviationRuns(sorted: scratch, medians: m, into: deviations)
            network.sortDeviations(deviations, length: length, stride: stride)
            return deviations
        }
        for k in 0..<frames {
            let s = scratch + k * stride, d = deviations + k * stride
            for j in 0..<length { d[j] = abs(s[j] - m[j]) }
        }
        sort(deviations, network)
        return deviations
    }

    /// After sorting: the median of each sample's `counts[j]` valid values.
    @inline(__always)
    func median(sorted s: UnsafeMutablePointer<Float>, _ j: Int) -> Float {
        let n = Int(counts[j])
        guard n > 0 else { return 0 }
        // n <= frames, so every offset lies inside the sorted tile.
        let h = n &>> 1
        return n & 1 == 1 ? s[h &* stride &+ j] : 0.5 * (s[(h &- 1) &* stride &+ j] + s[h &* stride &+ j])
    }
}
