import EvanescoCore
import EvanescoIO
import Foundation
import EvanescoFaces
import CKernels

/// The TrueDepth background-replacement pipeline ("Enhancing Live Video by Leveraging TrueDepth
/// Camera Data"): subject depth = median of valid depth in the central face box, cutoff =
/// subject + 0.25 m, binary mask (0 < d <= cutoff, holes are background), Gaussian blur (clamped
/// edges), gamma, bicubic upscale to the colour size, blend over the background. Stateful for
/// video: the cutoff and mask are smoothed over time.
public final class BackdropPipeline {
    /// The settings; they may change between frames (the session scales the blur to the depth size).
    public var options: BackdropOptions
    var previousCutoff: Float?
    var previousMask: [Float]?
    var background: Image<UInt8>?
    var gammaTable: (gamma: Float, table: [Float]) = (.nan, [])
    /// Buffers reused from frame to frame (a frame allocates only its returned mask).
    struct Scratch {
        var bin: [UInt8] = [], half: [Float] = [], blurred: [Float] = [], smoothed: [Float] = [], mask: [Float] = []
        var blurSigma: Float = .nan, blurWeights: [Float] = []
    }
    var scratch = Scratch()
    /// Reused output storage (a new frame is allocated only when the caller still holds the last).
    var outputBuffer: Image<UInt8>?
    let backgroundSource: Image<UInt8>?

    /// - Parameters:
    ///   - options: The settings.
    ///   - background: The new background, scaled to fill each frame; nil for black, as the sample.
    public init(options: BackdropOptions = BackdropOptions(), background: Image<UInt8>? = nil) {
        self.options = options
        self.backgroundSource = background.map { $0.withChannels(3) }
    }

    /// Subject depth: the median of valid depth in the central half of the face box (mapped to
    /// depth coordinates), so a hole or an outlier at one pixel cannot decide it.
    public static func faceDepth(_ depth: Image<Float>, box: DetectedBox, colorWidth: Int, colorHeight: Int) -> Float? {
        let sx = Double(depth.width) / Double(colorWidth), sy = Double(depth.height) / Double(colorHeight)
        let x0 = Int((Double(box.x) + 0.25 * Double(box.width)) * sx),
            x1 = Int((Double(box.x) + 0.75 * Double(box.width)) * sx)
        let y0 = Int((Double(box.y) + 0.25 * Double(box.height)) * sy),
            y1 = Int((Double(box.y) + 0.75 * Double(box.height)) * sy)
        // The box clipped to the map; a box wholly outside it has no depth.
        let cx0 = max(0, x0), cx1 = min(depth.width - 1, max(x0, x1)), cy0 = max(0, y0),
            cy1 = min(depth.height - 1, max(y0, y1))
        guard cx0 <= cx1, cy0 <= cy1 else { return nil }
        var vals: [Float] = []
        for y in cy0...cy1 {
            for x in cx0...cx1 {
                let v = depth.samples[y * depth.width + x]
                if v > 0 { vals.append(v) }
            }
        }
        guard vals.count >= 3 else { return nil }
        return Selection.median(&vals)
    }

    /// The nearest large depth region: the nearest 5 cm depth slice from which a 30 cm band holds
    /// at least `minimumFraction` of the valid pixels; its median depth.
    public static func nearestRegionDepth(_ depth: Image<Float>, minimumFraction: Float = 0.05) -> (
        depth: Float, fraction: Float
    )? {
        // 2.5 cm bins up to 10 m, of every other pixel of every other row: a fraction needs no more.
        guard let (counts, valid) = depthHistogram(depth, lo: 0, scale: 40, bins: 400) else { return nil }
        let hist = counts.map { Int($0) }
        guard valid > 0 else { return nil }
        let need = Int(Float(valid) * minimumFraction)
        for start in 0..<388 {
            let band = hist[start..<(start + 12)].reduce(0, +)
            if band >= max(need, 1) && hist[start] > 0 {
                var acc = 0
                for k in start..<(start + 12) {
                    acc += hist[k]
                    if acc * 2 >= band { return ((Float(k) + 0.5) / 40, Float(band) / Float(valid)) }
                }
            }
        }
        return nil
    }

    /// The histogram of every other depth sample of every other row (evn_depth_histogram): bin
    /// Int((v - lo) * scale) for valid depth v landing in 0..<bins, and the samples counted.
    static func depthHistogram(_ depth: Image<Float>, lo: Float, scale: Float, bins: Int) -> (
        counts: [UInt32], counted: Int
    )? {
        let w = depth.width, pairs = (depth.height + 1) / 2
        guard !depth.samples.isEmpty else { return nil }
        let total = LockedBox((counts: [UInt32](repeating: 0, count: bins), counted: 0, failed: false))
        depth.samples.withUnsafeBufferPointer { d in
            let base = UncheckedSendable(d)
            // Strips of row pairs: each strip starts at an even row, so the rows sampled are those
            // of the whole map.
            StripExecutor.forEachStrip(rows: pairs, minimumRows: 64) { rows in
                let y0 = 2 * rows.lowerBound, y1 = min(2 * rows.upperBound, depth.height)
                var counts = [UInt32](repeating: 0, count: bins)
                let counted = counts.withUnsafeMutableBufferPointer { c in
                    evn_depth_histogram(
                        base.value.baseAddress! + y0 * w, w, y1 - y0, 2, lo, scale, bins, c.baseAddress!)
                }
                total.update { t in
                    if counted < 0 {
                        t.failed = true
                        return
                    }
                    for b in 0..<bins { t.counts[b] &+= counts[b] }
                    t.counted += counted
                }
            }
        }
        let t = total.value
        return t.failed ? nil : (t.counts, t.counted)
    }

    /// The cutoff snapped to a depth gap: with 1 cm bins of the valid depth, the emptiest bin
    /// (3-bin average) between subject + 5 cm and `cutoff`, if it holds under a tenth of the
    /// subject's own density (the mean of the bins within 5 cm of it); else `cutoff` unchanged.
    public static func gapCutoff(_ depth: Image<Float>, subject: Float, cutoff: Float) -> Float {
        let lo = subject - 0.05, span = ((cutoff + 0.02) - lo) * 100
        // NaN and infinity fail the range test before Int() could trap on them.
        guard span > 11, span < 1999 else { return cutoff }
        let n = Int(span) + 1
        guard let (counts, _) = depthHistogram(depth, lo: lo, scale: 100, bins: n) else { return cutoff }
        let hist = counts.map { Float($0) }
        let peak = hist[0..<11].reduce(0, +) / 11
        guard peak > 0 else { return cutoff }
        var best = -1, bestV = Float.infinity
        for b in 10..<(n - 3) {
            let v = (hist[b - 1] + hist[b] + hist[b + 1]) / 3
            if v < bestV {
                bestV = v
                best = b
            }
        }
        return best >= 0 && bestV < 0.1 * peak ? lo + (Float(best) + 0.5) / 100 : cutoff
    }

    /// Cutoff for this frame from the subject depth, smoothed over time (a jump of more than
    /// 0.5 m resets the smoothing: a new subject).
    func cutoff(subject: Float, depth: Image<Float>? = nil) -> Float {
        var raw = subject + options.cutoffOffset
        if options.snapCutoffToGap, let depth { raw = Self.gapCutoff(depth, subject: subject, cutoff: raw) }
        guard let p = previousCutoff, abs(p - raw) < 0.5 else {
            previousCutoff = raw
            return raw
        }
        let c = options.temporalWeight * raw + (1 - options.temporalWeight) * p
        previousCutoff = c
        return c
    }

    /// Resets the temporal state (a new shot).
    public func reset() {
        previousCutoff = nil
        previousMask = nil
    }

    /// The blurred, gamma-corrected mask at half the depth resolution (0...1), with its size.
    /// Binary cut (1 = subject, holes 2), the colour vote when asked for, each hole decided by its
    /// known neighbours, 2x2 box averages into the half-resolution plane, Gaussian blur, temporal
    /// smoothing and gamma: the C kernels of evanesco_backdrop.h, in strips of rows.
    /// - Complexity: O(depth pixels + half-resolution pixels x blur taps), two passes over the
    ///   depth and three over the half-resolution plane.
    public func mask(depth: Image<Float>, cutoff: Float, subject: Float? = nil, color: Image<UInt8>? = nil) -> (
        mask: [Float], width: Int, height: Int
    ) {
        let w = depth.width, h = depth.height
        let hw = (w + 1) / 2, hh = (h + 1) / 2
        var bin = scratch.bin
        scratch.bin = []
        if bin.count != w * h { bin = [UInt8](repeating: 0, count: w * h) }
        depth.samples.withUnsafeBufferPointer { d in
            bin.withUnsafeMutableBufferPointer { bp in
                let b = UncheckedSendable(bp)
                StripExecutor.forEachStrip(rows: h, minimumRows: 32) { rows in
                    let lo = rows.lowerBound * w
                    _ = evn_depth_cut(d.baseAddress! + lo, rows.count * w, cutoff, b.value.baseAddress! + lo)
                }
            }
        }
        if options.refineWithColor, let color, let subject {
            Self.colorVote(&bin, depth: depth, color: color, core: subject + options.coreDepth, cutoff: cutoff)
        }
        // Gaussian blur at half resolution: sigma/2, less the spread the 2x2 average already adds.
        let sigma = options.blurSigmaAt640 * Float(w) / 640 / 2
        let sigmaLeft = max(sigma * sigma - 0.25, 0).squareRoot()
        let weights = sigmaLeft > 0.3 ? blurWeights(sigma: sigmaLeft) : []
        let n = hw * hh
        // Taken out of the scratch while written (a copy still held there would be copied on write).
        var half = scratch.half, blurred = scratch.blurred, smoothed = scratch.smoothed, m = scratch.mask
        (scratch.half, scratch.blurred, scratch.smoothed, scratch.mask) = ([], [], [], [])
        if half.count != n { half = [Float](repeating: 0, count: n) }
        if blurred.count != n { blurred = [Float](repeating: 0, count: n) }
        if smoothed.count != n { smoothed = [Float](repeating: 0, count: n) }
        if m.count != n { m = [Float](repeating: 0, count: n) }
        let g = options.gamma
        if gammaTable.gamma != g { gammaTable = (g, (0...1024).map { powf(Float($0) / 1024, g) }) }
        let previous = previousMask.flatMap { $0.count == n && options.temporalWeight < 1 ? $0 : nil } ?? []
        let fill: Int32 = options.fillHoles ? 1 : 0, a = options.temporalWeight
        bin.withUnsafeBufferPointer { B in
            half.withUnsafeMutableBufferPointer { H in
                blurred.withUnsafeMutableBufferPointer { T in
                    weights.withUnsafeBufferPointer { G in
                        previous.withUnsafeBufferPointer { P in
                            gammaTable.table.withUnsafeBufferPointer { table in
                                smoothed.withUnsafeMutableBufferPointer { S in
                                    m.withUnsafeMutableBufferPointer { M in
                                        Self.halfResolution(
                                            bin: B, width: w, height: h, fill: fill, weights: G, previous: P,
                                            temporalWeight: a, gamma: table, half: H, blurred: T, smoothed: S,
                                            mask: M)
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        (scratch.bin, scratch.half, scratch.blurred) = (bin, half, blurred)
        // The returned mask is reused by the next frame unless the caller still holds it.
        scratch.mask = m
        // The smoothed mask is the next frame's previous; the old previous becomes the spare.
        scratch.smoothed = previousMask ?? []
        previousMask = smoothed
        return (m, hw, hh)
    }

    /// The half-resolution planes of one frame's mask from its binary cut: 2x2 coverage with the
    /// holes filled, the Gaussian blur (rows, then columns), temporal smoothing against
    /// `previous` (empty: none) and the gamma table, in strips of rows.
    static func halfResolution(
        bin B: UnsafeBufferPointer<UInt8>, width w: Int, height h: Int, fill: Int32,
        weights G: UnsafeBufferPointer<Float>, previous P: UnsafeBufferPointer<Float>, temporalWeight a: Float,
        gamma table: UnsafeBufferPointer<Float>, half H: UnsafeMutableBufferPointer<Float>,
        blurred T: UnsafeMutableBufferPointer<Float>, smoothed S: UnsafeMutableBufferPointer<Float>,
        mask M: UnsafeMutableBufferPointer<Float>
    ) {
        let hp = UncheckedSendable(H), tp = UncheckedSendable(T),
            sp = UncheckedSendable(S), mp = UncheckedSendable(M)
        let hw = (w + 1) / 2, hh = (h + 1) / 2
        let blur = evn_blur(weights: G.baseAddress, taps: G.count, width: hw, height: hh)
        // Coverage rows and their horizontal blur (a row needs no other rows), then the vertical
        // blur back into the coverage plane, temporal smoothing (kept for the next frame) and gamma.
        StripExecutor.forEachStrip(rows: hh, minimumRows: 16) { rows in
            evn_half_coverage(
                B.baseAddress!, w, h, fill, rows.lowerBound, rows.upperBound,
                hp.value.baseAddress!)
            guard !G.isEmpty else { return }
            withUnsafePointer(to: blur) {
                evn_blur_rows(
                    $0, hp.value.baseAddress!, rows.lowerBound, rows.upperBound,
                    tp.value.baseAddress!)
            }
        }
        StripExecutor.forEachStrip(rows: hh, minimumRows: 16) { rows in
            if !G.isEmpty {
                withUnsafePointer(to: blur) {
                    evn_blur_columns(
                        $0, tp.value.baseAddress!, rows.lowerBound, rows.upperBound,
                        hp.value.baseAddress!)
                }
            }
            evn_mask_finish(
                hp.value.baseAddress!, P.isEmpty ? nil : P.baseAddress, a,
                table.baseAddress!,
                rows.lowerBound * hw, rows.upperBound * hw, sp.value.baseAddress!,
                mp.value.baseAddress!)
        }
    }

    /// The Gaussian's weights for the mask blur, kept while sigma does not change.
    func blurWeights(sigma: Float) -> [Float] {
        if scratch.blurSigma != sigma {
            scratch.blurSigma = sigma
            scratch.blurWeights = GaussianBlur.kernel(sigma: sigma, truncate: 3)
        }
        return scratch.blurWeights
    }

    /// Colour vote on the depth band (core, cutoff]: 512-bin RGB histograms (3 bits a channel) of
    /// the sure subject (0 < d <= core) and the sure background (d > cutoff); a band pixel stays
    /// subject when its colour is likelier under the subject's histogram.
    static func colorVote(_ bin: inout [UInt8], depth: Image<Float>, color: Image<UInt8>, core: Float, cutoff: Float) {
        let w = depth.width, h = depth.height, W = color.width, H = color.height, c = color.channels
        var codes = [UInt16](repeating: 0, count: w * h)
        var fg = [Float](repeating: 1, count: 512), bg = [Float](repeating: 1, count: 512)
        color.samples.withUnsafeBufferPointer { s in
            depth.samples.withUnsafeBufferPointer { d in
                for y in 0..<h {
                    let sy = min(H - 1, (2 * y + 1) * H / (2 * h))
                    for x in 0..<w {
                        let sx = min(W - 1, (2 * x + 1) * W / (2 * w))
                        let o = (sy * W + sx) * c
                        let r = Int(s[o]) >> 5, g = Int(s[o + min(1, c - 1)]) >> 5, b = Int(s[o + min(2, c - 1)]) >> 5
                        let code = UInt16(r << 6 | g << 3 | b)
                        codes[y * w + x] = code
                        let v = d[y * w + x]
                        if v > 0 && v <= core { fg[Int(code)] += 1 } else if v > cutoff { bg[Int(code)] += 1 }
                    }
                }
                let nf = fg.reduce(0, +), nb = bg.reduce(0, +)
                for i in 0..<(w * h) where bin[i] == 1 && d[i] > core {
                    let k = Int(codes[i])
                    if fg[k] / nf < bg[k] / nb { bin[i] = 0 }
                }
            }
        }
    }

    /// The background scaled to fill the frame (cover, centre crop), cached per size.
    func backgroundFor(width: Int, height: Int) -> Image<UInt8>? {
        guard let src = backgroundSource else { return nil }
        if let b = background, b.width == width, b.height == height { return b }
        let s = max(Double(width) / Double(src.width), Double(height) / Double(src.height))
        let cw = min(src.width, Int((Double(width) / s).rounded())),
            ch = min(src.height, Int((Double(height) / s).rounded()))
        let crop = src.cropped(x: (src.width - cw) / 2, y: (src.height - ch) / 2, width: cw, height: ch)
        let b = crop.resized(width: width, height: height, interpolation: .bilinear)
        background = b
        return b
    }

    /// Per output column of a `width`-wide row its four mask columns and weights (tap j of column x
    /// at j * width + x) and, per window index i (first tap + 1, clamped to 0...maskWidth), the
    /// first column with that index or more (the index only grows with x): a run of equal windows
    /// in mask space is a run of output columns.
    struct ColumnTaps {
        var width = 0, maskWidth = 0
        var taps: [Int32] = [], weights: [Float] = [], first: [Int] = []
        /// The windows that start inside the row: the first i with first[i] = width.
        var windows = 0
        init() {}
        init(width W: Int, maskWidth mw: Int) {
            width = W
            maskWidth = mw
            taps = [Int32](repeating: 0, count: W * 4)
            weights = [Float](repeating: 0, count: W * 4)
            first = [Int](repeating: W, count: mw + 2)
            let sx = Float(mw) / Float(W)
            var next = 0
            for x in 0..<W {
                let s = (Float(x) + 0.5) * sx - 0.5, f = s.rounded(.down)
                let (a, b, c, d) = Kernels.cubicWeights(s - f)
                let base = Int(f)
                for j in 0..<4 { taps[j * W + x] = Int32(min(max(base - 1 + j, 0), mw - 1)) }
                weights[x] = a
                weights[W + x] = b
                weights[2 * W + x] = c
                weights[3 * W + x] = d
                let i = min(max(Int(f), -1), mw - 1) + 1
                while next <= i {
                    first[next] = x
                    next += 1
                }
            }
            windows = next
        }
    }
    var columnTaps = ColumnTaps()

    /// Bicubic upscale of the mask to the colour size fused with the blend: out = colour * m +
    /// background * (1 - m) (black without a background), 8-bit fixed point. Per row
    /// (evn_backdrop_row_blend): the mask row at the colour width, copies where the four taps are
    /// all 0 or all 1, a vectorised upscale and blend in between.
    /// - Complexity: O(colour pixels); the upscale only where the mask is neither 0 nor 1.
    public func composite(color: Image<UInt8>, mask: [Float], width mw: Int, height mh: Int, keepMask: Bool = false)
        -> (frame: Image<UInt8>, mask: Image<UInt8>?)
    {
        let src3 = color.channels == 3 ? color : color.withChannels(3)
        let W = src3.width, H = src3.height
        let bg = backgroundFor(width: W, height: H)
        let sy = Float(mh) / Float(H)
        if columnTaps.width != W || columnTaps.maskWidth != mw { columnTaps = ColumnTaps(width: W, maskWidth: mw) }
        var out =
            outputBuffer.flatMap { $0.width == W && $0.height == H && $0.channels == 3 ? $0 : nil }
            ?? Image<UInt8>(width: W, height: H, channels: 3)
        outputBuffer = nil
        var full: Image<UInt8>? = keepMask ? Image<UInt8>(width: W, height: H, channels: 1) : nil
        let blackBackground = [UInt8](repeating: 0, count: bg == nil ? W * 3 : 0)
        let ct = columnTaps
        src3.samples.withUnsafeBufferPointer { src in
            mask.withUnsafeBufferPointer { M in
                ct.taps.withUnsafeBufferPointer { XI in
                    ct.weights.withUnsafeBufferPointer { XW in
                        ct.first.withUnsafeBufferPointer { XF in
                            out.samples.withUnsafeMutableBufferPointer { dstBuf in
                                let dst = UncheckedSendable(dstBuf)
                                let bgs = bg.map { b in b.samples.withUnsafeBufferPointer { UncheckedSendable($0) } }
                                let black = blackBackground.withUnsafeBufferPointer { UncheckedSendable($0) }
                                let fm = UncheckedSendable(
                                    full?.samples.withUnsafeMutableBufferPointer { $0.baseAddress })
                                StripExecutor.forEachStrip(rows: H, minimumRows: 16) { rows in
                                    // Per-strip scratch rows.
                                    let line = UnsafeMutablePointer<Float>.allocate(capacity: mw)
                                    let flag = UnsafeMutablePointer<UInt8>.allocate(capacity: mw)
                                    let window = UnsafeMutablePointer<UInt8>.allocate(capacity: mw + 1)
                                    defer {
                                        line.deallocate()
                                        flag.deallocate()
                                        window.deallocate()
                                    }
                                    let mp = M.baseAddress!
                                    var row = evn_backdrop_row()
                                    row.mask_width = mw
                                    row.width = W
                                    row.taps = XI.baseAddress
                                    row.tap_weights = XW.baseAddress
                                    row.first = XF.baseAddress
                                    row.windows = ct.windows
                                    row.line = line
                                    row.flag = flag
                                    row.window = window
                                    for y in rows {
                                        let s = (Float(y) + 0.5) * sy - 0.5, f = s.rounded(.down)
                                        let (a, b, c, d) = Kernels.cubicWeights(s - f)
                                        let r = Int(f)
                                        row.rows = (
                                            mp + min(max(r - 1, 0), mh - 1) * mw, mp + min(max(r, 0), mh - 1) * mw,
                                            mp + min(max(r + 1, 0), mh - 1) * mw, mp + min(max(r + 2, 0), mh - 1) * mw
                                        )
                                        row.weights = (a, b, c, d)
                                        let o = y * W * 3
                                        row.src = UnsafePointer(src.baseAddress! + o)
                                        row.background = UnsafePointer(
                                            bgs.map { $0.value.baseAddress! + o } ?? black.value.baseAddress!)
                                        row.dst = dst.value.baseAddress! + o
                                        row.mask_out = fm.value.map { $0 + y * W }
                                        // Two rows on, while they are this strip's.
                                        row.prefetch_offset = y + 2 < rows.upperBound ? 2 * W * 3 : 0
                                        evn_backdrop_row_blend(&row)
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        outputBuffer = out
        return (out, full)
    }

    /// One frame: subject depth (face box, or the fallback), cutoff, mask, composite.
    public func process(
        color: Image<UInt8>, depth: Image<Float>, face: DetectedBox?, subject: SubjectSelection,
        keepMask: Bool = false
    ) throws -> (frame: Image<UInt8>, mask: Image<UInt8>?, info: BackdropFrameInfo) {
        var source: SubjectSource
        var subjectDepth: Float
        switch subject {
        case .point(let x, let y):
            guard x < color.width, y < color.height else {
                throw BackdropError.noSubject(
                    detail: "the point \(x),\(y) is outside the \(color.width)x\(color.height) colour frame")
            }
            let r = max(1, color.width / 40)
            let box = DetectedBox(x: x - r, y: y - r, width: 2 * r, height: 2 * r)
            guard let d = Self.faceDepth(depth, box: box, colorWidth: color.width, colorHeight: color.height) else {
                throw BackdropError.noSubject(detail: "no valid depth around the point \(x),\(y)")
            }
            subjectDepth = d
            source = .point(x: x, y: y)
        case .face, .nearest:
            if subject == .face, let face,
                let d = Self.faceDepth(depth, box: face, colorWidth: color.width, colorHeight: color.height)
            {
                subjectDepth = d
                source = .face
            } else if let r = Self.nearestRegionDepth(depth) {
                subjectDepth = r.depth
                let fallback: SubjectFallback? = subject == .face ? (face == nil ? .noFace : .noDepthInFaceBox) : nil
                source = .nearestRegion(percent: Int(r.fraction * 100), fallback: fallback)
            } else {
                throw BackdropError.noSubject(detail: "the depth frame has no valid values")
            }
        }
        let t0 = DispatchTime.now().uptimeNanoseconds
        let cut = cutoff(subject: subjectDepth, depth: depth)
        let m = mask(depth: depth, cutoff: cut, subject: subjectDepth, color: color)
        let t1 = DispatchTime.now().uptimeNanoseconds
        let out = composite(color: color, mask: m.mask, width: m.width, height: m.height, keepMask: keepMask)
        let t2 = DispatchTime.now().uptimeNanoseconds
        let info = BackdropFrameInfo(
            face: source == .face ? face : nil, subject: source, subjectDepth: subjectDepth, cutoff: cut,
            maskMilliseconds: Double(t1 - t0) / 1e6, compositeMilliseconds: Double(t2 - t1) / 1e6)
        return (out.frame, out.mask, info)
    }
}
