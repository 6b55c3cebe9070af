import EvanescoCore
import EvanescoIO
import Foundation
import EvanescoFaces

/// Where the subject is.
public enum SubjectSelection: Sendable, Equatable {
    /// A face from the cascade (the sample's choice); falls back to the nearest large region.
    case face
    /// The nearest large depth region.
    case nearest
    /// Whatever is at this point of the colour frame.
    case point(x: Int, y: Int)
}

/// Settings of the background replacement.
public struct BackdropOptions: Sendable {
    /// cutoff = subject depth + this (metres).
    public var cutoffOffset: Float = 0.25
    /// Gaussian sigma of the mask, in depth pixels of a 640-wide map (scaled with the depth width).
    public var blurSigmaAt640: Float = 5.3
    /// Gamma applied to the blurred mask (CIGammaAdjust's `inputPower`); below 1 widens the subject.
    public var gamma: Float = 0.55
    /// Temporal smoothing: weight of the newest cutoff and mask (1 = none).
    public var temporalWeight: Float = 0.5
    /// Move the cutoff nearer, into the emptiest depth gap between the subject and subject +
    /// offset, when there is a clear one (a chair or wall just behind the person is then cut off).
    public var snapCutoffToGap = true
    /// Fill unknown depth inside the subject (holes at hair and edges) by a 3x3 majority vote.
    public var fillHoles = true
    /// Decide the pixels between the subject's own depth and the cutoff (a chair back at shoulder
    /// depth, say) by colour: each frame, colour histograms of the sure subject (within
    /// `coreDepth` of its depth) and of the sure background (beyond the cutoff) vote on them.
    public var refineWithColor = false
    /// Depth beyond the subject's that is subject for sure (metres).
    public var coreDepth: Float = 0.08
    /// The sample's settings, plus gap snapping and hole filling.
    public init() {}
}

/// Why the subject was not taken from a face.
public enum SubjectFallback: String, Sendable, Codable {
    /// No face was found in the frame (or none was held).
    case noFace = "no_face"
    /// A face was found but its box holds no valid depth.
    case noDepthInFaceBox = "no_depth_in_face_box"
    /// No face cascade could be loaded.
    case noCascade = "no_cascade"
}

/// What one frame's subject depth was taken from.
public enum SubjectSource: Sendable, Equatable, Codable, CustomStringConvertible {
    /// The median depth in the face box.
    case face
    /// The median depth around a point of the colour frame.
    case point(x: Int, y: Int)
    /// The nearest depth region holding `percent` % of the valid depth; `fallback` says why a
    /// face was not used when one was asked for.
    case nearestRegion(percent: Int, fallback: SubjectFallback?)

    public var description: String {
        switch self {
        case .face: "face"
        case .point(let x, let y): "point \(x),\(y)"
        case .nearestRegion(let p, let fb):
            (fb.map { "\($0 == .noCascade ? "no face cascade" : $0 == .noFace ? "no face found" : "no valid depth in the face box"); fell back to " } ?? "")
                + "the nearest large depth region (\(p) % of the valid depth)"
        }
    }
}

/// What one frame's cut was based on.
public struct BackdropFrameInfo: Sendable, Codable {
    /// Face box in colour pixels (when a face was used).
    public var face: DetectedBox?
    /// Where the subject depth came from.
    public var subject: SubjectSource
    /// The subject's depth in metres.
    public var subjectDepth: Float
    /// Depths beyond this (metres) were replaced.
    public var cutoff: Float
    /// Milliseconds: mask (depth to blurred mask) and composite (upscale + blend).
    public var maskMilliseconds: Double
    /// Milliseconds of the composite (upscale + blend).
    public var compositeMilliseconds: Double
}

/// Why a frame could not be cut.
public enum BackdropError: Error, Equatable, CustomStringConvertible {
    case noSubject(detail: String)
    public var description: String {
        switch self { case .noSubject(let d): "no subject found: \(d)" }
    }
}

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
        let x0 = Int((Double(box.x) + 0.25 * Double(box.width)) * sx), x1 = Int((Double(box.x) + 0.75 * Double(box.width)) * sx)
        let y0 = Int((Double(box.y) + 0.25 * Double(box.height)) * sy), y1 = Int((Double(box.y) + 0.75 * Double(box.height)) * sy)
        // The box clipped to the map; a box wholly outside it has no depth.
        let cx0 = max(0, x0), cx1 = min(depth.width - 1, max(x0, x1)), cy0 = max(0, y0), cy1 = min(depth.height - 1, max(y0, y1))
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
    public static func nearestRegionDepth(_ depth: Image<Float>, minimumFraction: Float = 0.05) -> (depth: Float, fraction: Float)? {
        var hist = [Int](repeating: 0, count: 400)   // 2.5 cm bins up to 10 m
        var valid = 0
        // Every other pixel of every other row: a fraction needs no more.
        depth.samples.withUnsafeBufferPointer { d in hist.withUnsafeMutableBufferPointer { hist in
            for y in stride(from: 0, to: depth.height, by: 2) {
                for x in stride(from: 0, to: depth.width, by: 2) {
                    let v = d[y &* depth.width &+ x]
                    if v > 0 && v < 10 { hist[Int(v * 40)] += 1; valid += 1 }   // bins 0..<400
                }
            }
        }}
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

    /// The cutoff snapped to a depth gap: with 1 cm bins of the valid depth, the emptiest bin
    /// (3-bin average) between subject + 5 cm and `cutoff`, if it holds under a tenth of the
    /// subject's own density (the mean of the bins within 5 cm of it); else `cutoff` unchanged.
    public static func gapCutoff(_ depth: Image<Float>, subject: Float, cutoff: Float) -> Float {
        let lo = subject - 0.05, n = Int(((cutoff + 0.02) - lo) * 100) + 1
        guard n > 12, n < 2000 else { return cutoff }
        var hist = [Float](repeating: 0, count: n)
        let bins = Float(n)
        depth.samples.withUnsafeBufferPointer { d in hist.withUnsafeMutableBufferPointer { hist in
            for y in stride(from: 0, to: depth.height, by: 2) { for x in stride(from: 0, to: depth.width, by: 2) {
                let v = d[y &* depth.width &+ x]
                // Truncation toward zero: t in (-1, n) is bin 0..<n (NaN fails both tests).
                if v > 0 { let t = (v - lo) * 100; if t > -1 && t < bins { hist[Int(t)] += 1 } }
            }}
        }}
        let peak = hist[0..<11].reduce(0, +) / 11
        guard peak > 0 else { return cutoff }
        var best = -1, bestV = Float.infinity
        for b in 10..<(n - 3) {
            let v = (hist[b - 1] + hist[b] + hist[b + 1]) / 3
            if v < bestV { bestV = v; best = b }
        }
        return best >= 0 && bestV < 0.1 * peak ? lo + (Float(best) + 0.5) / 100 : cutoff
    }

    /// Cutoff for this frame from the subject depth, smoothed over time (a jump of more than
    /// 0.5 m resets the smoothing: a new subject).
    func cutoff(subject: Float, depth: Image<Float>? = nil) -> Float {
        var raw = subject + options.cutoffOffset
        if options.snapCutoffToGap, let depth { raw = Self.gapCutoff(depth, subject: subject, cutoff: raw) }
        guard let p = previousCutoff, abs(p - raw) < 0.5 else { previousCutoff = raw; return raw }
        let c = options.temporalWeight * raw + (1 - options.temporalWeight) * p
        previousCutoff = c
        return c
    }

    /// Resets the temporal state (a new shot).
    public func reset() { previousCutoff = nil; previousMask = nil }

    /// The blurred, gamma-corrected mask at half the depth resolution (0...1), with its size.
    public func mask(depth: Image<Float>, cutoff: Float, subject: Float? = nil, color: Image<UInt8>? = nil) -> (mask: [Float], width: Int, height: Int) {
        let w = depth.width, h = depth.height
        let hw = (w + 1) / 2, hh = (h + 1) / 2
        // Binary cut (1 = subject), holes marked 2, then holes decided by their known neighbours,
        // then 2x2 box averages into the half-resolution plane.
        var bin = [UInt8](repeating: 0, count: w * h)
        depth.samples.withUnsafeBufferPointer { d in bin.withUnsafeMutableBufferPointer { bp in
            let b = UncheckedSendable(bp)
            StripExecutor.forEachStrip(rows: h, minimumRows: 32) { rows in
                for i in (rows.lowerBound * w)..<(rows.upperBound * w) {
                    let v = d[i]
                    b.value[i] = v <= 0 ? 2 : (v <= cutoff ? 1 : 0)
                }
            }
        }}
        let holes = options.fillHoles ? bin.withUnsafeBufferPointer { b in var n = 0; for v in b where v == 2 { n &+= 1 }; return n } : 0
        if options.refineWithColor, let color, let subject {
            Self.colorVote(&bin, depth: depth, color: color, core: subject + options.coreDepth, cutoff: cutoff)
        }
        if holes > 0 {
            // Each hole takes the majority of its known 3x3 neighbours (ties and no neighbours: 0).
            let src = bin
            src.withUnsafeBufferPointer { sb in bin.withUnsafeMutableBufferPointer { bb in
                let s = sb.baseAddress!, b = bb.baseAddress!
                for y in 0..<h {
                    let ylo = max(0, y - 1), yhi = min(h - 1, y + 1), row = y &* w
                    for x in 0..<w where s[row &+ x] == 2 {
                        let xlo = max(0, x - 1), xhi = min(w - 1, x + 1)
                        var f = 0, k = 0
                        // ylo...yhi and xlo...xhi are inside the plane: wrapping offsets cannot overflow.
                        for yy in ylo...yhi {
                            let r = yy &* w
                            for xx in xlo...xhi {
                                let u = Int(s[r &+ xx])
                                if u != 2 { k &+= 1; f &+= u }
                            }
                        }
                        b[row &+ x] = k > 0 && f &* 2 > k ? 1 : 0
                    }
                }
            }}
        } else if !options.fillHoles {
            bin.withUnsafeMutableBufferPointer { b in for i in 0..<b.count where b[i] == 2 { b[i] = 0 } }
        }
        var half = [Float](repeating: 0, count: hw * hh)
        bin.withUnsafeBufferPointer { B in half.withUnsafeMutableBufferPointer { half in
            for hy in 0..<hh {
                let y0 = 2 * hy, y1 = min(2 * hy + 1, h - 1)
                for hx in 0..<hw {
                    let x0 = 2 * hx, x1 = min(2 * hx + 1, w - 1)
                    // y0, y1 < h and x0, x1 < w: the offsets lie inside the w x h plane.
                    let a = y0 &* w, b = y1 &* w
                    half[hy &* hw &+ hx] = Float(Int(B[a &+ x0]) &+ Int(B[a &+ x1]) &+ Int(B[b &+ x0]) &+ Int(B[b &+ x1])) * 0.25
                }
            }
        }}
        // Gaussian blur at half resolution: sigma/2, less the spread the 2x2 average already adds.
        let sigma = options.blurSigmaAt640 * Float(w) / 640 / 2
        let sigmaLeft = max(sigma * sigma - 0.25, 0).squareRoot()
        var m = sigmaLeft > 0.3 ? GaussianBlur.apply(half, width: hw, height: hh, sigma: sigmaLeft) : half
        // Temporal smoothing of the mask.
        if let p = previousMask, p.count == m.count, options.temporalWeight < 1 {
            let a = options.temporalWeight
            m.withUnsafeMutableBufferPointer { m in p.withUnsafeBufferPointer { p in
                for i in 0..<m.count { m[i] = a * m[i] + (1 - a) * p[i] }
            }}
        }
        previousMask = m
        // Gamma (CIGammaAdjust) through a table of 1025 entries; the index is clamped to it.
        let g = options.gamma
        if gammaTable.gamma != g { gammaTable = (g, (0...1024).map { powf(Float($0) / 1024, g) }) }
        gammaTable.table.withUnsafeBufferPointer { table in m.withUnsafeMutableBufferPointer { m in
            for i in 0..<m.count { m[i] = table[Int(min(max(m[i], 0), 1) * 1024 + 0.5)] }
        }}
        return (m, hw, hh)
    }

    /// Colour vote on the depth band (core, cutoff]: 512-bin RGB histograms (3 bits a channel) of
    /// the sure subject (0 < d <= core) and the sure background (d > cutoff); a band pixel stays
    /// subject when its colour is likelier under the subject's histogram.
    static func colorVote(_ bin: inout [UInt8], depth: Image<Float>, color: Image<UInt8>, core: Float, cutoff: Float) {
        let w = depth.width, h = depth.height, W = color.width, H = color.height, c = color.channels
        var codes = [UInt16](repeating: 0, count: w * h)
        var fg = [Float](repeating: 1, count: 512), bg = [Float](repeating: 1, count: 512)
        color.samples.withUnsafeBufferPointer { s in depth.samples.withUnsafeBufferPointer { d in
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
        }}
    }


    /// The background scaled to fill the frame (cover, centre crop), cached per size.
    func backgroundFor(width: Int, height: Int) -> Image<UInt8>? {
        guard let src = backgroundSource else { return nil }
        if let b = background, b.width == width, b.height == height { return b }
        let s = max(Double(width) / Double(src.width), Double(height) / Double(src.height))
        let cw = min(src.width, Int((Double(width) / s).rounded())), ch = min(src.height, Int((Double(height) / s).rounded()))
        let crop = src.cropped(x: (src.width - cw) / 2, y: (src.height - ch) / 2, width: cw, height: ch)
        let b = crop.resized(width: width, height: height, interpolation: .bilinear)
        background = b
        return b
    }

    /// Reused output storage (a new frame is allocated only when the caller still holds the last).
    var outputBuffer: Image<UInt8>?

    /// Bicubic upscale of the mask to the colour size fused with the blend: out = colour * m +
    /// background * (1 - m) (black without a background), 8-bit fixed point. Per row: the mask row
    /// at the colour width (4-tap cubic, taps precomputed per column), then a vectorisable blend.
    public func composite(color: Image<UInt8>, mask: [Float], width mw: Int, height mh: Int, keepMask: Bool = false) -> (frame: Image<UInt8>, mask: Image<UInt8>?) {
        let src3 = color.channels == 3 ? color : color.withChannels(3)
        let W = src3.width, H = src3.height
        let bg = backgroundFor(width: W, height: H)
        let sx = Float(mw) / Float(W), sy = Float(mh) / Float(H)
        var xi = [Int32](repeating: 0, count: W * 4), xw = [Float](repeating: 0, count: W * 4)
        // Each output column's first tap, as a window index i = floor + 1 in 0...mw; xFirst[i] is the
        // first output column whose window index is i or more (the index only grows with x), so a
        // run of equal windows in mask space is a run of output columns.
        var xFirst = [Int](repeating: W, count: mw + 2)
        var next = 0
        for x in 0..<W {
            let s = (Float(x) + 0.5) * sx - 0.5, f = s.rounded(.down), t = s - f
            let (a, b, cc, d) = Kernels.cubicWeights(t)
            let base = Int(f)
            for j in 0..<4 { xi[x * 4 + j] = Int32(min(max(base - 1 + j, 0), mw - 1)) }
            xw[x * 4] = a; xw[x * 4 + 1] = b; xw[x * 4 + 2] = cc; xw[x * 4 + 3] = d
            let i = min(max(Int(f), -1), mw - 1) + 1
            while next <= i { xFirst[next] = x; next += 1 }
        }
        var out = outputBuffer.flatMap { $0.width == W && $0.height == H && $0.channels == 3 ? $0 : nil } ?? Image<UInt8>(width: W, height: H, channels: 3)
        outputBuffer = nil
        var full: Image<UInt8>? = keepMask ? Image<UInt8>(width: W, height: H, channels: 1) : nil
        let blackBackground = [UInt8](repeating: 0, count: bg == nil ? W * 3 : 0)
        src3.samples.withUnsafeBufferPointer { src in
            mask.withUnsafeBufferPointer { M in xi.withUnsafeBufferPointer { XI in xw.withUnsafeBufferPointer { XW in xFirst.withUnsafeBufferPointer { XF in
            out.samples.withUnsafeMutableBufferPointer { dstBuf in
                let dst = UncheckedSendable(dstBuf)
                let bgs = bg.map { b in b.samples.withUnsafeBufferPointer { UncheckedSendable($0) } }
                let black = blackBackground.withUnsafeBufferPointer { UncheckedSendable($0) }
                let fm = UncheckedSendable(full?.samples.withUnsafeMutableBufferPointer { $0.baseAddress })
                StripExecutor.forEachStrip(rows: H, minimumRows: 16) { rows in
                    // Per-strip scratch rows, as raw pointers: the inner loops index them per pixel.
                    let line = UnsafeMutablePointer<Float>.allocate(capacity: mw)
                    let m3 = UnsafeMutablePointer<UInt16>.allocate(capacity: W * 3)
                    let flag = UnsafeMutablePointer<UInt8>.allocate(capacity: mw)
                    let window = UnsafeMutablePointer<UInt8>.allocate(capacity: mw + 1)
                    defer { line.deallocate(); m3.deallocate(); flag.deallocate(); window.deallocate() }
                    let xf = XF.baseAddress!
                    for y in rows {
                        let s = (Float(y) + 0.5) * sy - 0.5, f = s.rounded(.down), t = s - f
                        let (a, b, cc, d) = Kernels.cubicWeights(t)
                        let r0 = min(max(Int(f) - 1, 0), mh - 1) * mw, r1 = min(max(Int(f), 0), mh - 1) * mw
                        let r2 = min(max(Int(f) + 1, 0), mh - 1) * mw, r3 = min(max(Int(f) + 2, 0), mh - 1) * mw
                        let mp = M.baseAddress!
                        for i in 0..<mw { line[i] = a * mp[r0 &+ i] + b * mp[r1 &+ i] + cc * mp[r2 &+ i] + d * mp[r3 &+ i] }
                        // Where all four taps are 0 (or 1) the pixel is background (or subject): copy
                        // runs of those; blend only the transition.
                        for j in 0..<mw { flag[j] = line[j] <= 0.001 ? 0 : (line[j] >= 0.999 ? 1 : 2) }
                        // window[i]: the class of the four taps starting at column i - 1 (clamped).
                        for i in 0...mw {
                            let p = flag[max(i &- 2, 0)], q = flag[max(i &- 1, 0)], r = flag[min(i, mw &- 1)], u = flag[min(i &+ 1, mw &- 1)]
                            window[i] = p == q && q == r && r == u ? p : 2
                        }
                        let o = y &* W &* 3
                        let bgRow = bgs.map { $0.value.baseAddress! + o } ?? black.value.baseAddress!
                        var i = 0
                        while xf[i] < W {
                            let kind = window[i]
                            var k = i &+ 1
                            while xf[k] < W && window[k] == kind { k &+= 1 }
                            let x = xf[i], e = xf[k]
                            i = k
                            guard e > x else { continue }
                            let lo = o &+ x &* 3, n = (e &- x) &* 3
                            switch kind {
                            case 0:
                                (dst.value.baseAddress! + lo).update(from: bgRow + (x &* 3), count: n)
                                if let p = fm.value { (p + (y &* W &+ x)).update(repeating: 0, count: e &- x) }
                            case 1:
                                (dst.value.baseAddress! + lo).update(from: src.baseAddress! + lo, count: n)
                                if let p = fm.value { (p + (y &* W &+ x)).update(repeating: 255, count: e &- x) }
                            default:
                                for xx in x..<e {
                                    let k = xx &* 4
                                    let v = XW[k] * line[Int(XI[k])] + XW[k &+ 1] * line[Int(XI[k &+ 1])]
                                        + XW[k &+ 2] * line[Int(XI[k &+ 2])] + XW[k &+ 3] * line[Int(XI[k &+ 3])]
                                    let mi = UInt16(min(max(v, 0), 1) * 256 + 0.5)
                                    let q = (xx &- x) &* 3
                                    m3[q] = mi; m3[q &+ 1] = mi; m3[q &+ 2] = mi
                                    if let p = fm.value { p[y &* W &+ xx] = UInt8(truncatingIfNeeded: (Int(mi) &* 255 &+ 128) >> 8) }
                                }
                                let bgp = bgRow + (x &* 3)
                                let sp = src.baseAddress! + lo, dp = dst.value.baseAddress! + lo
                                for i in 0..<n {
                                    let fg = UInt16(sp[i]), bk = UInt16(bgp[i]), mm = m3[i]
                                    dp[i] = UInt8(truncatingIfNeeded: (fg &* mm &+ bk &* (256 &- mm) &+ 128) >> 8)
                                }
                            }
                        }
                    }
                }
            }}}}}
        }
        outputBuffer = out
        return (out, full)
    }

    /// One frame: subject depth (face box, or the fallback), cutoff, mask, composite.
    public func process(color: Image<UInt8>, depth: Image<Float>, face: DetectedBox?, subject: SubjectSelection,
                        keepMask: Bool = false) throws -> (frame: Image<UInt8>, mask: Image<UInt8>?, info: BackdropFrameInfo) {
        var source: SubjectSource
        var subjectDepth: Float
        switch subject {
        case .point(let x, let y):
            guard x < color.width, y < color.height else {
                throw BackdropError.noSubject(detail: "the point \(x),\(y) is outside the \(color.width)x\(color.height) colour frame")
            }
            let r = max(1, color.width / 40)
            let box = DetectedBox(x: x - r, y: y - r, width: 2 * r, height: 2 * r)
            guard let d = Self.faceDepth(depth, box: box, colorWidth: color.width, colorHeight: color.height) else {
                throw BackdropError.noSubject(detail: "no valid depth around the point \(x),\(y)")
            }
            subjectDepth = d; source = .point(x: x, y: y)
        case .face, .nearest:
            if subject == .face, let face, let d = Self.faceDepth(depth, box: face, colorWidth: color.width, colorHeight: color.height) {
                subjectDepth = d; source = .face
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
        let info = BackdropFrameInfo(face: source == .face ? face : nil, subject: source, subjectDepth: subjectDepth, cutoff: cut,
                                     maskMilliseconds: Double(t1 - t0) / 1e6, compositeMilliseconds: Double(t2 - t1) / 1e6)
        return (out.frame, out.mask, info)
    }
}
