import CKernels
import EvanescoCore
import Foundation

/// Where each channel of a raw burst's planes (``RawPlanes``) sits in its 2x2 cell, for the merge
/// that gathers every frame's samples at the reference's own photosites.
struct RawPlaneLayout: Sendable {
    /// Per channel, its photosite's offset from the cell centre, in plane pixels (±1/4).
    var offsets: [SIMD2<Float>]
    /// Per channel, the channel of the same colour at the cell's other sites (the other green), or -1.
    var partner: [Int]
    /// Per channel, its photosite in its 2 x 2 cell, 2 row + column, as the kernels take it
    /// (`evn_raw_merge_params.site`; LinearRaw's three colours: 0).
    var sites: (Int32, Int32, Int32, Int32)

    /// The layout of a Bayer cell's four channels, or of LinearRaw's three (no offsets).
    init(cfa: CFAPattern?) {
        guard let cfa else {
            offsets = Array(repeating: .zero, count: 3)
            partner = [-1, -1, -1]
            sites = (0, 0, 0, 0)
            return
        }
        let channelOfSite = RawPlanes.channels(of: cfa)
        var offsets = [SIMD2<Float>](repeating: .zero, count: 4), site = [Int32](repeating: 0, count: 4)
        for s in 0..<4 {
            offsets[channelOfSite[s]] = SIMD2(Float(s % 2) - 0.5, Float(s / 2) - 0.5) / 2
            site[channelOfSite[s]] = Int32(s)
        }
        self.offsets = offsets
        sites = (site[0], site[1], site[2], site[3])
        partner = [-1, 3, -1, 1]
    }

    /// Width of the gather kernel of red and blue (Gaussian sigma, plane pixels, cut to vanish at
    /// 1): narrow, so that the frames whose samples land on a site decide it. Set on
    /// make_raw_burst.py's pug burst (12 frames, ISO 800): 0.25, 0.35, 0.5 gave linear PSNR 47.9,
    /// 48.9, 48.8 dB on red.
    static let kernelSigma: Float = 0.35
    /// Green's, cut to vanish at 1/2 (its other plane's samples lie half a pixel away on both
    /// axes): nearly flat inside, since both planes' samples are that close. Green on the same
    /// burst: 0.25, 0.5, 1, 2 gave 46.0, 46.4, 46.4, 46.4 dB.
    static let denseKernelSigma: Float = 1
    /// ``RawSampling/colour``: how far its value is pulled towards the plain gather's where the
    /// two differ by about the noise (the pull keeps d^3 / (d^2 + colourPull x variance) of their
    /// difference d). Set on the raw family's tuned bursts (32): with 0, 1 and 2 their linear
    /// PSNR moved by +0.38, +0.61 and +0.63 dB on average from the plain gather's, the worst by
    /// -0.66, -0.20 and -0.11 dB, and the worst pEPs was 0.061, 0.070 and 0.073 % (0.147 % with
    /// the plain gather): 1 keeps most of both.
    static let colourPull: Float = 1
}

/// The merge of a raw burst's planes: each frame's samples of a colour gathered around each of
/// the reference's photosites of that colour, through the frame's homography and local field
/// and at the site's own position in its cell (no demosaic, no resampling of one plane at
/// another's phase); the gather's weights summed across frames, so the frames whose samples land
/// nearest a site count most; then the frames that disagree with the median by more than the
/// sensor's noise (and the frames' own spread) allow are left out, a cell at a time.
/// What the vote's strips share: the kernels' parameters (one read-only copy: an inout of a
/// captured var would be an access race), the sorting network, and per thread the frames'
/// gathered values and weights, their sorted copies and the merged segment (rows of `stride`
/// floats, 32-byte aligned for the sorting network).
final class VoteScratch: @unchecked Sendable {
    let params: UnsafePointer<evn_raw_merge_params>, network: SortingNetwork, stride: Int
    let buffers: ReusePool<UnsafeMutablePointer<Float>>
    private let owned: UnsafeMutablePointer<evn_raw_merge_params>

    init(_ params: evn_raw_merge_params, frames n: Int, segment: Int) {
        owned = .allocate(capacity: 1)
        owned.initialize(to: params)
        self.params = UnsafePointer(owned)
        network = SortingNetwork(size: max(1, n))
        let stride = segment * Int(params.channels)
        self.stride = stride
        buffers = ReusePool {
            UnsafeMutableRawPointer.allocate(byteCount: (4 * n + 3) * stride * 4, alignment: 32)
                .bindMemory(to: Float.self, capacity: (4 * n + 3) * stride)
        }
    }

    deinit {
        for p in buffers.all { p.deallocate() }
        owned.deallocate()
    }
}

/// The vote's per-cell outputs a merge asks for (frames kept, the closest frame), uninitialised,
/// freed with it; the strips write disjoint cells. `kept` also for the denoise alone.
final class CellOutputs: @unchecked Sendable {
    let kept: UnsafeMutablePointer<UInt16>?, best: UnsafeMutablePointer<Int16>?
    /// The reference's distance from the vote per cell, and its signed distance per cell and
    /// channel (``evn_raw_merge_cells``' `reference_deviation` and `reference_offset`), when asked.
    let deviation: UnsafeMutablePointer<Float>?, offset: UnsafeMutablePointer<Int8>?

    init(cells: Int, maps: Bool, kept counts: Bool = false, distances: Bool = false) {
        kept = maps || counts ? .allocate(capacity: cells) : nil
        best = maps ? .allocate(capacity: cells) : nil
        deviation = distances ? .allocate(capacity: cells) : nil
        offset = distances ? .allocate(capacity: 4 * cells) : nil
        if let deviation, let offset {
            StripExecutor.initialize(deviation, repeating: 0, count: cells)
            StripExecutor.initialize(offset, repeating: 0, count: 4 * cells)
        }
    }

    deinit {
        kept?.deallocate()
        best?.deallocate()
        deviation?.deallocate()
        offset?.deallocate()
    }
}

enum RawMerge {
    /// Merges `source`'s frames `used` (homographies: frame -> reference plane pixels) into the
    /// reference's planes; fills `maps` (kept frames per cell, closest frame) when asked.
    static func merge(
        _ source: BurstFrameSource, used: [Int], homographies: [Homography?], fields: [DisplacementField?],
        layout: RawPlaneLayout, noise: [(slope: Float, intercept: Float)], options: StackOptions,
        maps: inout StackMaps?, bandRows: Int?, afterBand: (() -> Void)?
    ) throws -> Image<UInt16> {
        let w = source.width, h = source.height, c = source.channels, n = used.count
        var params = Self.parameters(frames: n, channels: c, layout: layout, noise: noise, options: options)
        params.reference = Int32(used.firstIndex(of: options.reference) ?? -1)
        params.colour_pull = RawPlaneLayout.colourPull
        // Where every frame clipped (a bracket's shortest too), the merge is white.
        params.uncovered = options.rawExposureGains.isEmpty ? 0 : 65535
        var frames = used.indices.map { k in
            frame(
                source, used[k], homographies[k] ?? .identity, field: k < fields.count ? fields[k] : nil,
                layout: layout, width: w, height: h,
                gain: options.rawExposureGains[source.names[used[k]]])
        }
        // Kept to the end of the merge: the frames' descriptions point into it.
        let greens = options.rawSampling == .colour && c == 4 ? try GreenSites(frames, source: source, used: used) : nil
        if let greens {
            for k in frames.indices { frames[k].0.green = greens.pointer(k) }
        }
        let afterBand = afterBand.map { release in
            {
                release()
                greens?.spill?.releaseAll()
            }
        }
        let segment = 256
        // The Wiener pass's threads each go through their own rows: together, one band's worth.
        let release = afterBand.map { (rows: max(16, (bandRows ?? h) / StripExecutor.threadCount), call: $0) }
        if options.merge == .hdrplus {
            return hdrplus(
                frames, source: source, used: used, params: params, options: options, maps: &maps, release: release)
        }
        if blends(options, channels: c, frames: n) {
            return try voteAndBlend(
                frames, source: source, used: used, params: params, options: options, maps: &maps, release: release)
        }
        let denoising = denoises(options, channels: c, frames: n)
        let outputs = CellOutputs(cells: w * h, maps: maps != nil, kept: denoising)
        let scratch = VoteScratch(params, frames: n, segment: segment)
        let band = min(h, max(1, bandRows ?? h))
        let start = Date()
        let done = LockedBox(0)
        var out = Image<UInt16>(uninitializedWidth: w, height: h, channels: c) { dst in
            withFrames(frames, source: source, used: used) { frames in
                var y0 = 0
                while y0 < h {
                    let y1 = min(h, y0 + band)
                    StripExecutor.forEachStrip(rows: y1 - y0, minimumRows: 8) { local in
                        scratch.buffers.borrow { buffer in
                            for y in (local.lowerBound + y0)..<(local.upperBound + y0) {
                                mergeRow(
                                    frames, scratch, y: y, width: w, segment: segment, buffer: buffer,
                                    outputs: outputs, into: dst)
                            }
                            let d = done.update {
                                $0 += local.count
                                return $0
                            }
                            options.progress?(
                                StackProgress(
                                    stage: .merge, done: d, total: h, elapsed: Date().timeIntervalSince(start)))
                        }
                    }
                    afterBand?()
                    y0 = y1
                }
            }
        }
        if let k = outputs.kept, let b = outputs.best { fill(&maps, kept: k, best: b, used: used, width: w, height: h) }
        if denoising, let k = outputs.kept {
            try denoise(&out, kept: k, params: params, options: options)
        }
        return out
    }

    /// Row `y` of the vote's pass, a segment at a time, into `dst` (four or three channels a
    /// cell), with the cells' kept counts, closest frames and farthest distances in `outputs` when
    /// asked (each at the cell's index, times the channels for the distances).
    static func mergeRow(
        _ frames: [evn_raw_frame], _ scratch: VoteScratch, y: Int, width w: Int, segment: Int,
        buffer: UnsafeMutablePointer<Float>, outputs: CellOutputs, into dst: UnsafeMutableBufferPointer<UInt16>
    ) {
        let n = frames.count, params = scratch.params, network = scratch.network
        let c = Int(params.pointee.channels), stride = scratch.stride
        var x0 = 0
        while x0 < w {
            let count = min(segment, w - x0), o = y * w + x0
            mergeSegment(
                frames, params, y: y, x0: x0, count: count, stride: stride, buffer: buffer, network: network,
                kept: outputs.kept.map { $0 + o }, best: outputs.best.map { $0 + o })
            let merged = buffer + 4 * n * stride
            for j in 0..<(count * c) { dst[o * c + j] = UInt16(clampingRounded: merged[j]) }
            x0 += count
        }
    }

    /// The maps of the vote's pass: frames kept per cell, and the frame closest to the result.
    static func fill(
        _ maps: inout StackMaps?, kept k: UnsafeMutablePointer<UInt16>, best b: UnsafeMutablePointer<Int16>,
        used: [Int], width w: Int, height h: Int
    ) {
        maps?.kept = Image(uninitializedWidth: w, height: h, channels: 1) { d in
            for i in 0..<(w * h) { d[i] = k[i] }
        }
        maps?.provenance = Image(uninitializedWidth: w, height: h, channels: 1) { d in
            for i in 0..<(w * h) { d[i] = b[i] < 0 ? 0 : UInt16(used[Int(b[i])] + 1) }
        }
    }

    /// The kernels' parameters: method, kappa, the gather kernels and the noise lines.
    static func parameters(
        frames n: Int, channels c: Int, layout: RawPlaneLayout, noise: [(slope: Float, intercept: Float)],
        options: StackOptions
    ) -> evn_raw_merge_params {
        var params = evn_raw_merge_params()
        (params.frames, params.channels, params.site) = (Int32(n), Int32(c), layout.sites)
        params.kappa = options.kappa
        params.joint = jointLimit(kappa: options.kappa, channels: c)
        params.method =
            switch options.merge {
            case .mean: 0
            case .median: 2
            case .sigmaClip, .winsorized, .mode: 3
            case .robust, .hdrplus: 1
            }
        withUnsafeMutableBytes(of: &params.partner) { p in
            let b = p.bindMemory(to: Int32.self)
            for ch in 0..<4 { b[ch] = ch < c ? Int32(layout.partner[ch]) : -1 }
        }
        // Gaussians cut to vanish at their radius (1 plane pixel for red and blue, 1/2 for green,
        // whose two planes' samples lie half a pixel apart on each axis): a frame that lands on
        // the reference's grid gives its own samples back, and nothing else.
        func fill(_ lut: UnsafeMutableRawBufferPointer, sigma s: Float, radius r: Float) {
            let b = lut.bindMemory(to: Float.self), g = { (t: Float) in exp(-t * t / (2 * s * s)) }
            for j in 0..<66 {
                let t = Float(j) / 64
                b[j] = t >= r ? 0 : (g(t) - g(r)) / (1 - g(r))
            }
        }
        withUnsafeMutableBytes(of: &params.lut) { fill($0, sigma: RawPlaneLayout.kernelSigma, radius: 1) }
        withUnsafeMutableBytes(of: &params.lut_dense) {
            fill($0, sigma: RawPlaneLayout.denseKernelSigma, radius: layout.partner.contains { $0 >= 0 } ? 0.5 : 1)
        }
        withUnsafeMutableBytes(of: &params.slope) { p in
            let b = p.bindMemory(to: Float.self)
            for ch in 0..<4 { b[ch] = ch < noise.count ? noise[ch].slope : 0 }
        }
        withUnsafeMutableBytes(of: &params.intercept) { p in
            let b = p.bindMemory(to: Float.self)
            for ch in 0..<4 { b[ch] = ch < noise.count ? noise[ch].intercept : 0 }
        }
        return params
    }

    /// One segment of a row: every frame gathered, then
    /// ``voteSegment(_:frames:count:stride:buffer:network:kept:best:gathered:)``.
    static func mergeSegment(
        _ frames: [evn_raw_frame], _ params: UnsafePointer<evn_raw_merge_params>, y: Int, x0: Int, count: Int,
        stride: Int,
        buffer: UnsafeMutablePointer<Float>, network: SortingNetwork, kept: UnsafeMutablePointer<UInt16>?,
        best: UnsafeMutablePointer<Int16>?
    ) {
        let n = frames.count
        for k in 0..<n {
            withUnsafePointer(to: frames[k]) { f in
                evn_raw_gather_row(
                    f, params, Int32(y), Int32(x0), Int32(count), buffer + k * stride, buffer + (n + k) * stride)
            }
        }
        voteSegment(
            params, frames: n, count: count, stride: stride, buffer: buffer, network: network, kept: kept, best: best)
    }

    /// The vote over one segment's gathered frames: its sorts, then the merge into the buffer's
    /// row 4n (values, weights, sorted values, sorted deviations: n rows of `stride` each; then
    /// merged, counts, medians). The frames' values and weights are the buffer's first 2n rows,
    /// or, given `gathered`, read where they were gathered (frame k's at k x its stride); with
    /// `replace_beyond`, the values of frames far from the vote are replaced there.
    static func voteSegment(
        _ params: UnsafePointer<evn_raw_merge_params>, frames n: Int, count: Int, stride: Int,
        buffer: UnsafeMutablePointer<Float>, network: SortingNetwork, kept: UnsafeMutablePointer<UInt16>?,
        best: UnsafeMutablePointer<Int16>?,
        gathered: (values: UnsafeMutablePointer<Float>, weights: UnsafePointer<Float>, stride: Int)? = nil,
        deviation: UnsafeMutablePointer<Float>? = nil, offset: UnsafeMutablePointer<Int8>? = nil
    ) {
        let length = count * Int(params.pointee.channels)
        let values = gathered?.values ?? buffer
        let weights = gathered?.weights ?? UnsafePointer(buffer + n * stride), frameStride = gathered?.stride ?? stride
        let sorted = buffer + 2 * n * stride
        let dev = buffer + 3 * n * stride, merged = buffer + 4 * n * stride
        let counts = buffer + (4 * n + 1) * stride, medians = buffer + (4 * n + 2) * stride
        let needsSort = params.pointee.method != 0, needsSpread = needsSort && params.pointee.method != 2
        if needsSort {
            evn_raw_vote_prepare(values, weights, frameStride, Int32(n), length, stride, sorted, counts)
            network.sort(sorted, length: length, stride: stride)
            evn_raw_vote_medians(sorted, counts, length, stride, medians)
        }
        if needsSpread {
            evn_raw_vote_deviations(values, weights, frameStride, medians, Int32(n), length, stride, dev)
            network.sort(dev, length: length, stride: stride)
        }
        evn_raw_merge_cells(
            values, weights, frameStride, needsSort ? counts : nil, needsSort ? medians : nil,
            needsSpread ? dev : nil, params, Int32(count), stride, merged, kept, best, deviation, offset)
    }

    /// Frame i's description for the kernels (its planes pointer is set by ``withFrames``);
    /// `gain` for a frame scaled to the reference's exposure (``RawPlanes/missing``).
    static func frame(
        _ source: BurstFrameSource, _ i: Int, _ h: Homography, field: DisplacementField?, layout: RawPlaneLayout,
        width: Int, height: Int, gain: Float? = nil
    ) -> (evn_raw_frame, DisplacementField?) {
        var f = evn_raw_frame()
        f.clipped_is_missing = gain != nil ? 1 : 0
        // Scaled by the gain, a frame's shot noise variance goes with it: it weighs 1 / gain.
        f.weight_scale = gain.map { 1 / $0 } ?? 1
        f.width = Int32(width)
        f.height = Int32(height)
        let m = (h.inverse ?? .identity).m
        withUnsafeMutableBytes(of: &f.m) { p in
            let b = p.bindMemory(to: Float.self)
            for j in 0..<9 { b[j] = Float(m[j] / m[8]) }
        }
        // The homography's Jacobian at the frame's centre carries each site's offset from its cell
        // centre into the frame (it varies across a hand-held frame by far less than a photosite).
        let cx = Double(width) / 2, cy = Double(height) / 2
        let d = (m[6] * cx + m[7] * cy + m[8])
        let sx = (m[0] * cx + m[1] * cy + m[2]) / d, sy = (m[3] * cx + m[4] * cy + m[5]) / d
        let j00 = Float((m[0] - m[6] * sx) / d), j01 = Float((m[1] - m[7] * sx) / d)
        let j10 = Float((m[3] - m[6] * sy) / d), j11 = Float((m[4] - m[7] * sy) / d)
        withUnsafeMutableBytes(of: &f.site) { p in
            let b = p.bindMemory(to: Float.self)
            for (ch, o) in layout.offsets.enumerated() {
                b[2 * ch] = j00 * o.x + j01 * o.y
                b[2 * ch + 1] = j10 * o.x + j11 * o.y
            }
        }
        withUnsafeMutableBytes(of: &f.offset) { p in
            let b = p.bindMemory(to: Float.self)
            for (ch, o) in layout.offsets.enumerated() {
                b[2 * ch] = o.x
                b[2 * ch + 1] = o.y
            }
        }
        if let field {
            f.field_cell = Int32(field.cell)
            f.field_columns = Int32(field.columns)
            f.field_rows = Int32(field.rows)
        }
        return (f, field)
    }

    /// Runs `body` with every frame's description pointing at its planes and field (valid for the call).
    static func withFrames<R>(
        _ frames: [(evn_raw_frame, DisplacementField?)], source: BurstFrameSource, used: [Int],
        _ body: ([evn_raw_frame]) -> R
    ) -> R {
        var pinned: [evn_raw_frame] = []
        func nest(_ k: Int) -> R {
            guard k < frames.count else { return body(pinned) }
            var f = frames[k].0
            func withField(_ inner: () -> R) -> R {
                guard let field = frames[k].1 else { return inner() }
                return field.dx.withUnsafeBufferPointer { dx in
                    field.dy.withUnsafeBufferPointer { dy in
                        f.field_dx = dx.baseAddress
                        f.field_dy = dy.baseAddress
                        return inner()
                    }
                }
            }
            return withField {
                if let spill = source.spill {
                    f.planes = spill.samples(source.slots[used[k]], as: UInt16.self)
                    pinned.append(f)
                    return nest(k + 1)
                }
                return source.memory![used[k]].image.uint16.samples.withUnsafeBufferPointer { s in
                    f.planes = s.baseAddress
                    pinned.append(f)
                    return nest(k + 1)
                }
            }
        }
        return nest(0)
    }
}
