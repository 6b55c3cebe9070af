import EvanescoCore
import Foundation

/// One merge over a burst's warped frames: what every strip shares, and the merge of a strip.
struct MergePass<S: PixelSample>: @unchecked Sendable {
    let warpers: [RowSampler<S>]
    let kernel: any MergeKernel
    let width: Int, height: Int, channels: Int, tileWidth: Int
    let options: StackOptions
    /// Maps only: how far a frame may be from the result and still agree with it.
    let tolerance: Float
    let frameIndex: [Int]
    /// Maps only: the frames kept and the frame that dominated, per pixel.
    let kept: UncheckedSendable<UnsafeMutablePointer<UInt16>?>
    let provenance: UncheckedSendable<UnsafeMutablePointer<UInt16>?>
    let threadTime: LockedBox<(warp: UInt64, kernel: UInt64)>?
    let start = Date()
    /// Rows done, counted a row of a column segment at a time.
    let rowsDone = LockedBox(0)
    var segments: Int { (width + tileWidth - 1) / tileWidth }

    /// Merges rows `rows` into `dst` with one thread's buffers. One cache of converted source
    /// rows per frame: the strip is walked down each column segment in turn, so each source row is
    /// converted about once.
    func strip(
        rows: Range<Int>, _ buffers: BurstStacker.TileBuffers<S>, into dst: UnsafeMutableBufferPointer<S>
    ) {
        let (tile, merged, caches) = buffers
        let n = warpers.count, w = width
        for cache in caches { cache.invalidate() }
        var warpNs: UInt64 = 0, kernelNs: UInt64 = 0
        defer {
            threadTime?.update {
                $0.warp += warpNs
                $0.kernel += kernelNs
            }
        }
        var x0 = 0
        while x0 < w {
            let x1 = min(w, x0 + tileWidth)
            for y in rows {
                if options.cancellation?.isCancelled == true { break }
                let t = tile.resized(pixels: x1 - x0)
                let c0 = DispatchTime.now().uptimeNanoseconds
                for k in 0..<n {
                    warpers[k].sampleRow(
                        y: y, x0: x0, x1: x1, into: t.values + k * t.stride, valid: t.valid + k * t.pixels,
                        cache: caches[k])
                }
                let c1 = DispatchTime.now().uptimeNanoseconds
                t.countValid()
                kernel.merge(t, into: merged)
                if let kp = kept.value, let pp = provenance.value {
                    StackMaps.record(
                        t, merged: merged, tolerance: tolerance, frameIndex: frameIndex, kept: kp + (y * w + x0),
                        provenance: pp + (y * w + x0))
                }
                let c2 = DispatchTime.now().uptimeNanoseconds
                warpNs += c1 - c0
                kernelNs += c2 - c1
                let o = (y * w + x0) * channels
                for j in 0..<t.length { dst[o + j] = S(clampingRounded: merged[j]) }
                rowDone()
            }
            x0 = x1
        }
    }

    /// Counts a row of a segment and reports progress in rows (a row of every segment is one row
    /// of the picture), every 64 rows and at the end.
    private func rowDone() {
        guard let progress = options.progress else { return }
        let d = rowsDone.update {
            $0 += 1
            return $0
        }
        if d % (64 * segments) == 0 || d == height * segments {
            progress(
                StackProgress(
                    stage: .merge, done: d / segments, total: height, elapsed: Date().timeIntervalSince(start)))
        }
    }
}
