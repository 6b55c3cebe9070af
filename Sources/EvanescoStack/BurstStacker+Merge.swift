import Dispatch
import EvanescoAlign
import EvanescoCore
import EvanescoIO
import Foundation

/// The merge: tile by tile, each pixel from the frames that agree, and the erase pass.
extension BurstStacker {
    // MARK: Merge

    /// Streams the merge over tiles: for each row segment every frame is warped into a small
    /// buffer and merged at once, so no warped frame is ever held whole.
    static func merge<S: PixelSample>(
        _ images: [Image<S>], _ homographies: [Homography?], _ offsets: [DisplacementField?], options: StackOptions,
        threadTime: LockedBox<(warp: UInt64, kernel: UInt64)>? = nil
    ) -> (Image<S>, Float?) {
        var none: StackMaps? = nil
        let warpers = images.indices.map {
            RowSampler(
                frame: images[$0], homography: homographies[$0], interpolation: options.interpolation,
                offsets: $0 < offsets.count ? offsets[$0] : nil)
        }
        return merge(
            warpers, width: images[0].width, height: images[0].height, channels: images[0].channels, options: options,
            threadTime: threadTime, maps: &none, frameIndex: Array(images.indices), bandRows: nil, afterBand: nil)
    }

    /// The merge, also filling `maps` (when given) tile by tile; `frameIndex[k]` is merged frame
    /// k's index in the report. With `bandRows` the picture is merged in bands of that many rows,
    /// one after the other (each band split among the threads), and `afterBand` runs after each.
    static func merge<S: PixelSample>(
        _ warpers: [RowSampler<S>], width w: Int, height h: Int, channels c: Int, options: StackOptions,
        threadTime: LockedBox<(warp: UInt64, kernel: UInt64)>?, maps: inout StackMaps?,
        frameIndex: [Int], bandRows: Int?, afterBand: (() -> Void)?
    ) -> (Image<S>, Float?) {
        let n = warpers.count
        let (kernel, sigma) = makeKernel(
            warpers, width: w, height: h, channels: c, options: options, afterBand: afterBand)
        let tileWidth = tileWidth(frames: n, channels: c)
        // Maps: a frame agrees with the result within 3 x the noise (at least 2 % of full scale).
        let tolerance =
            maps == nil
            ? 0
            : agreement(
                S.self,
                noise: sigma
                    ?? estimateNoise(
                        warpers, width: w, height: h, channels: c,
                        network: SortingNetwork(size: n), afterRow: afterBand))
        maps?.tolerance = tolerance
        let keptMap = maps.map { _ in UnsafeMutablePointer<UInt16>.allocate(capacity: w * h) }
        let provenanceMap = maps.map { _ in UnsafeMutablePointer<UInt16>.allocate(capacity: w * h) }
        defer {
            keptMap?.deallocate()
            provenanceMap?.deallocate()
        }
        // A tile, its merged values and a row cache per frame for each thread, reused strip
        // after strip (each strip starts its caches afresh).
        let buffers = Self.tileBuffers(S.self, frames: n, channels: c, tileWidth: tileWidth)
        defer { Self.deallocate(buffers) }
        let pass = MergePass(
            warpers: warpers, kernel: kernel, width: w, height: h, channels: c, tileWidth: tileWidth,
            options: options, tolerance: tolerance, frameIndex: frameIndex, kept: UncheckedSendable(keptMap),
            provenance: UncheckedSendable(provenanceMap), threadTime: threadTime)
        afterBand?()
        let band = min(h, max(1, bandRows ?? h))
        let out = Image<S>(uninitializedWidth: w, height: h, channels: c) { dst in
            var y0 = 0
            while y0 < h {
                let y1 = min(h, y0 + band)
                // A band splits into two strips per thread (each strip's first rows cost its caches more).
                let minimumRows = bandRows == nil ? 8 : max(8, (y1 - y0) / (2 * StripExecutor.threadCount))
                StripExecutor.forEachStrip(rows: y1 - y0, minimumRows: minimumRows) { local in
                    buffers.borrow { buffers in
                        pass.strip(rows: (local.lowerBound + y0)..<(local.upperBound + y0), buffers, into: dst)
                    }
                }
                afterBand?()
                if options.cancellation?.isCancelled == true { break }
                y0 = y1
            }
        }
        if let kp = keptMap, let pp = provenanceMap {
            maps?.kept = Image<UInt16>(uninitializedWidth: w, height: h, channels: 1) { d in
                for i in 0..<(w * h) { d[i] = kp[i] }
            }
            maps?.provenance = Image<UInt16>(uninitializedWidth: w, height: h, channels: 1) { d in
                for i in 0..<(w * h) { d[i] = pp[i] }
            }
        }
        return (out, sigma)
    }

    /// The merge kernel `options` ask for, and the burst's noise when the robust merge measured it.
    static func makeKernel<S>(
        _ warpers: [RowSampler<S>], width w: Int, height h: Int, channels c: Int, options: StackOptions,
        afterBand: (() -> Void)?
    ) -> (any MergeKernel, Float?) {
        let network = SortingNetwork(size: warpers.count)
        switch options.merge {
        case .mean: return (MeanKernel(), nil)
        case .median: return (MedianKernel(network: network), nil)
        case .sigmaClip: return (SigmaClipKernel(network: network, kappa: options.kappa), nil)
        case .winsorized: return (WinsorizedKernel(network: network, fraction: options.winsorFraction), nil)
        case .mode: return (ModeKernel(network: network, fullScale: S.fullScale), nil)
        case .robust, .hdrplus:
            // (hdrplus is refused before this for anything but a Bayer raw burst.)
            let s = estimateNoise(warpers, width: w, height: h, channels: c, network: network, afterRow: afterBand)
            let kernel = SigmaClipKernel(
                network: network, kappa: options.kappa, burstNoise: s, noiseFloor: S.fullScale / 510)
            return (kernel, s)
        }
    }

    /// How far a frame may be from the result and still agree with it: 3 x the burst's noise, at
    /// least 2 % of full scale (the maps' kept count and the erase pass both judge by it).
    static func agreement<S: PixelSample>(_: S.Type, noise: Float) -> Float { max(3 * noise, 0.02 * S.fullScale) }

    /// The erase pass (``StackOptions/erase``) over a finished merge of `warpers`, judging
    /// agreement as the maps do (with the merge's noise estimate, or a new one when the merge
    /// made none). From a spill file, `bandRows` and `afterBand` are the merge's: the pass works
    /// through bands no taller, dropping the pages it read after each. `reference`: the reference
    /// frame's index in the report (`frameIndex`' terms), which the view behind stays near.
    static func erase<S>(
        _ mask: EraseMask, _ warpers: [RowSampler<S>], _ plain: Image<S>, sigma: Float?, maps: inout StackMaps?,
        frameIndex: [Int], reference: Int?, cancellation: StackCancellation?, bandRows: Int? = nil,
        afterBand: (() -> Void)? = nil
    ) throws -> (Image<S>, EraseSummary) {
        let noise =
            sigma
            ?? estimateNoise(
                warpers, width: plain.width, height: plain.height, channels: plain.channels,
                network: SortingNetwork(size: warpers.count), afterRow: afterBand)
        return try Eraser.apply(
            warpers, plain: plain, mask: mask, tolerance: agreement(S.self, noise: noise),
            frameIndex: frameIndex, reference: reference, maps: &maps, cancellation: cancellation, bandRows: bandRows,
            afterBand: afterBand)
    }

    /// Burst-wide noise sigma (sample units): 1.4826 x the median, over sampled pixels, of each
    /// sample's median absolute deviation across frames. Moving things are a minority of frames
    /// at most pixels, so the median of MADs reflects sensor and compression noise.
    ///
    /// The pixels: 12 bands of 4 rows spread over the height, in segments of up to 256 pixels
    /// across the width, sampled as the merge samples them (the same sampler, walking each
    /// segment down its band through per-frame row caches), and sorted by the merge's sorting
    /// network, twice (values, then deviations from their median). Bands run on all cores, but
    /// one at a time from a temporary file of frames, whose read pages `afterRow` drops after
    /// each band.
    static func estimateNoise<S>(
        _ warpers: [RowSampler<S>], width w: Int, height h: Int, channels c: Int, network: SortingNetwork,
        afterRow: (() -> Void)? = nil
    ) -> Float {
        let n = warpers.count
        guard n >= 3, w > 0, h > 0 else { return S.fullScale / 255 * 2 }
        let bandRows = min(4, h), bands = min(12, max(1, h / bandRows))
        let segment = 256, xStep = max(segment, w / 8)
        let starts = Array(stride(from: 0, to: max(1, w - segment), by: xStep))
        let mads = LockedBox([Float]())
        // A tile and a row cache per frame for each thread, reused band after band.
        let buffers = ReusePool {
            (
                SampleTile.allocate(frames: n, maxPixels: segment, channels: c),
                (0..<n).map { _ in RowSampler<S>.Cache(pixels: segment) }
            )
        }
        defer { for (tile, _) in buffers.all { tile.deallocate() } }
        func band(_ b: Int) {
            buffers.borrow { tile, caches in
                let y0 = min(h - bandRows, (2 * b + 1) * h / (2 * bands) - bandRows / 2)
                for cache in caches { cache.invalidate() }
                var local: [Float] = []
                for x0 in starts {
                    for y in max(0, y0)..<min(h, max(0, y0) + bandRows) {
                        let t = tile.resized(pixels: min(segment, w - x0))
                        for k in 0..<n {
                            warpers[k].sampleRow(
                                y: y, x0: x0, x1: x0 + t.pixels, into: t.values + k * t.stride,
                                valid: t.valid + k * t.pixels, cache: caches[k])
                        }
                        t.countValid()
                        t.copyForSorting(into: t.scratch)
                        t.sort(t.scratch, network)
                        let med = t.perSample
                        for j in 0..<t.length { med[j] = t.median(sorted: t.scratch, j) }
                        let deviations = t.sortedDeviations(medians: med, network)  // as the merge takes them
                        // The upper median of the deviations (of an even count, the larger middle one).
                        for j in 0..<t.length where t.counts[j] >= 3 {
                            local.append(deviations[Int(t.counts[j] / 2) * t.stride + j])
                        }
                    }
                }
                mads.update { $0.append(contentsOf: local) }
            }
        }
        if let afterRow {
            for b in 0..<bands {
                band(b)
                afterRow()
            }
        } else {
            StripExecutor.forEachStrip(rows: bands, minimumRows: 1) { range in for b in range { band(b) } }
        }
        var all = mads.value
        guard !all.isEmpty else { return S.fullScale / 255 * 2 }
        return max(S.fullScale / 255 * 0.5, 1.4826 * Selection.median(&all))
    }
}

extension BurstStacker {
    /// What one thread warps and merges a tile with: the tile of samples, its merged values and a
    /// row cache per frame. The merge and the erase pass borrow them from one pool per run,
    /// strip after strip; ``deallocate(_:)`` frees them.
    typealias TileBuffers<S: PixelSample> = (SampleTile, UnsafeMutablePointer<Float>, [RowSampler<S>.Cache])

    /// A pool of ``TileBuffers`` for `frames` frames of `channels` channels, tiles up to
    /// `tileWidth` pixels wide.
    static func tileBuffers<S: PixelSample>(
        _: S.Type, frames n: Int, channels c: Int, tileWidth: Int
    ) -> ReusePool<TileBuffers<S>> {
        ReusePool {
            (
                SampleTile.allocate(frames: n, maxPixels: tileWidth, channels: c),
                UnsafeMutablePointer<Float>.allocate(capacity: tileWidth * c),
                (0..<n).map { _ in RowSampler<S>.Cache(pixels: tileWidth) }
            )
        }
    }

    /// Frees every tile and merged row a pool from ``tileBuffers(_:frames:channels:tileWidth:)`` made.
    static func deallocate<S: PixelSample>(_ pool: ReusePool<TileBuffers<S>>) {
        for (tile, merged, _) in pool.all {
            tile.deallocate()
            merged.deallocate()
        }
    }
}
