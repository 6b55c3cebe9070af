import EvanescoCore
import Foundation

/// What ``LensBlur/apply(_:coc:)`` returns.
public struct LensRendering: Sendable {
    /// The rendered photo, same size, channels and sample type as the input (float photos as 16-bit).
    public var image: AnyImage
    /// 1 where the photo stays sharp (blur diameter under 1 px), else 0, at the photo's size.
    public var inFocus: Image<Float>
    /// What the renderer did.
    public var statistics: LensStatistics
}

/// How a lens rendering went (carried in `evanesco portrait --report` as `lens`).
public struct LensStatistics: Sendable, Codable, Equatable {
    /// The photo is rendered on a grid 1/`gridDivisor` of its size (1 = full resolution); the
    /// in-focus layer is always kept at full resolution.
    public var gridDivisor: Int
    /// Depth layers present (of the partition's bins).
    public var layers: Int
    /// Largest blur diameter in the photo, in pixels.
    public var largestDiameter: Float
    /// Fraction of the photo that stays sharp.
    public var fractionInFocus: Double
    /// Layers whose hidden background was filled for partial occlusion.
    public var filledLayers: Int
}

/// A physically based depth-of-field renderer: what a real lens does to a photo focused at one
/// depth, from a per-pixel circle of confusion (the blur diameter of each point).
///
/// - Bright points become the aperture's shape (circle or blades) at their own blur size.
/// - Depth ordering: the photo is split into depth layers by blur diameter (see `LensLayers`), each
///   blurred with its aperture and composited far to near, so a blurred background never spreads
///   over the sharp subject in front of it, while a blurred foreground spreads over what lies
///   behind it and shows it through its soft edge (the hidden background is filled in from around it).
/// - Linear light: blurring happens on linear RGB, and clipped highlights are boosted first
///   (``highlights``), so bokeh balls stay bright instead of turning into grey smudges.
/// - Cost: each layer's gather costs O(diameter) per pixel (one prefix-sum difference per kernel
///   row plus the anti-aliased edge pixels), on a half or quarter grid for photos above
///   ``fullResolutionLimit`` pixels; the in-focus layer keeps every full-resolution pixel.
///
/// Core Image has no counterpart; Apple's Portrait mode and Google's Lens Blur render this effect.
public struct LensBlur: Sendable {
    /// The aperture's shape (circle or blades).
    public var shape = ApertureShape()
    /// Optical vignetting: 0 is off; otherwise, at the photo's corners, the aperture is cut by a
    /// circle shifted by this many radii (0...1), so bokeh toward the corners becomes cat's eyes.
    public var catEye: Float = 0
    /// Gain applied to clipped highlights before the blur (1 = none): an inverse tone curve on
    /// pixels whose brightest channel is within the top 3 % of the scale, multiplying their linear
    /// light by up to this factor at full scale. Flat clipped areas stay white; a clipped point
    /// light spreads into a bright disc instead of a grey one.
    public var highlights: Float = 2
    /// Where the highlight boost starts, as a fraction of full scale.
    static let highlightThreshold: Float = 0.97
    /// Photos with more pixels than this are rendered on a grid halved (or quartered) until they fit.
    public var fullResolutionLimit = 4_200_000

    /// - Parameters:
    ///   - shape: Aperture shape.
    ///   - catEye: Cat-eye strength, 0...1.
    ///   - highlights: Highlight gain, at least 1.
    public init(shape: ApertureShape = ApertureShape(), catEye: Float = 0, highlights: Float = 2) {
        self.shape = shape
        self.catEye = catEye
        self.highlights = highlights
    }

    /// The divisor of the grid the renderer works on for a `width` x `height` photo (1, 2, 4 ...).
    public func gridDivisor(width: Int, height: Int) -> Int {
        var k = 1
        while (width / k) * (height / k) > fullResolutionLimit && k < 64 { k *= 2 }
        return k
    }

    /// Renders `photo` through the lens.
    ///
    /// - Parameters:
    ///   - photo: 8- or 16-bit sRGB (float photos are rendered as 16-bit); 1-4 channels.
    ///   - coc: Signed blur diameter in photo pixels (positive in front of the focus plane), one
    ///     channel, any size (resampled to the photo's grid with its corners aligned); NaN is read as 0.
    /// - Returns: The rendering, its in-focus mask and statistics.
    public func apply(_ photo: AnyImage, coc: Image<Float>) -> LensRendering {
        switch photo {
        case .uint8(let i):
            let r = render(i, coc: coc)
            return LensRendering(image: .uint8(r.0), inFocus: r.1, statistics: r.2)
        case .uint16(let i):
            let r = render(i, coc: coc)
            return LensRendering(image: .uint16(r.0), inFocus: r.1, statistics: r.2)
        case .float32(let i):
            let r = render(i.converted(to: UInt16.self), coc: coc)
            return LensRendering(image: .uint16(r.0), inFocus: r.1, statistics: r.2)
        }
    }

    /// Linear light of one pixel with the highlight boost (a = 1).
    @inline(__always)
    static func linear<S: PixelSample>(
        _ src: UnsafeBufferPointer<S>, _ o: Int, _ c: Int, _ lin: UnsafeBufferPointer<Float>,
        boostFrom: Float, gain: Float
    ) -> SIMD4<Float> {
        let r = src[o].floatValue, g = c >= 3 ? src[o + 1].floatValue : r, b = c >= 3 ? src[o + 2].floatValue : r
        var p = SIMD4<Float>(lin[Int(r)], lin[Int(g)], lin[Int(b)], 1)
        if gain != 1 {
            let m = max(r, g, b)
            if m > boostFrom {
                let t = min((m - boostFrom) / (S.fullScale - boostFrom), 1)
                let k = 1 + (gain - 1) * t * t * (3 - 2 * t)
                p = SIMD4(p.x * k, p.y * k, p.z * k, 1)
            }
        }
        return p
    }

    func render<S: PixelSample>(_ photo: Image<S>, coc: Image<Float>) -> (Image<S>, Image<Float>, LensStatistics) {
        let W = photo.width, H = photo.height, C = photo.channels
        let (wr, wg, wb) = LumaWeights.rec709.weights
        let k = gridDivisor(width: W, height: H)
        let Ws = (W + k - 1) / k, Hs = (H + k - 1) / k, N = Ws * Hs
        let tables = ToneTables(S.self)
        let boostFrom = Self.highlightThreshold * S.fullScale, gain = max(1, highlights)

        // Blur diameter on the working grid, in working pixels (corner-aligned resampling).
        var cw = Self.resample(coc, width: Ws, height: Hs)
        cw.samples.withUnsafeMutableBufferPointer { p in
            for i in 0..<p.count { p[i] = p[i].isFinite ? p[i] / Float(k) : 0 }
        }

        let base = UnsafeMutablePointer<SIMD4<Float>>.allocate(capacity: N)
        let sharp = UnsafeMutablePointer<Float>.allocate(capacity: N)
        defer {
            base.deallocate()
            sharp.deallocate()
        }
        // Pass 1: linear premultiplied colour and the in-focus fraction, box-averaged onto the grid;
        // the full-resolution in-focus mask (returned, and read by the output pass) on the way.
        var inFocus = Image<Float>(width: W, height: H, channels: 1)
        let counter = LockedBox(0)
        photo.samples.withUnsafeBufferPointer { src in
            tables.toLinear.withUnsafeBufferPointer { lin in
                cw.samples.withUnsafeBufferPointer { cws in
                    inFocus.samples.withUnsafeMutableBufferPointer { maskBuf in
                        let b = UncheckedSendable(base), sh = UncheckedSendable(sharp), mk = UncheckedSendable(maskBuf)
                        StripExecutor.forEachStrip(rows: Hs, minimumRows: 8) { rows in
                            var sharpHere = 0
                            for ys in rows {
                                for xs in 0..<Ws {
                                    var acc = SIMD4<Float>.zero, inFocus: Float = 0, n: Float = 0
                                    for y in (ys * k)..<min(ys * k + k, H) {
                                        for x in (xs * k)..<min(xs * k + k, W) {
                                            acc += Self.linear(
                                                src, (y * W + x) * C, C, lin, boostFrom: boostFrom, gain: gain)
                                            let c =
                                                k == 1
                                                ? cws[y * Ws + x]
                                                : GridTaps(x: x, y: y, divisor: k, width: Ws, height: Hs).sample(
                                                    cws.baseAddress!) * Float(k)
                                            let f: Float = abs(c) < 1 ? 1 : 0
                                            mk.value[y * W + x] = f
                                            inFocus += f
                                            n += 1
                                        }
                                    }
                                    b.value[ys * Ws + xs] = acc / n
                                    sh.value[ys * Ws + xs] = inFocus / n
                                    sharpHere += Int(inFocus)
                                }
                            }
                            counter.update { $0 += sharpHere }
                        }
                    }
                }
            }
        }

        // The partition and each pixel's layer.
        var largest: Float = 0
        cw.samples.withUnsafeBufferPointer { p in for v in p { largest = max(largest, abs(v)) } }
        let part = LensLayers.Partition(maxDiameter: largest)
        let L = part.count
        var layerOf = [Int32](repeating: 0, count: N)
        // Each layer is blurred at the mean diameter of its pixels (exact for a flat layer).
        var sumD = [Double](repeating: 0, count: L), weight = [Double](repeating: 0, count: L)
        cw.samples.withUnsafeBufferPointer { p in
            for i in 0..<N {
                let l = part.layer(p[i])
                layerOf[i] = Int32(l)
                let w = Double(1 - sharp[i])
                sumD[l] += w * Double(abs(p[i]))
                weight[l] += w
            }
        }

        // Tiles and the layers present in each.
        let comp = LensLayers.Compositor(width: Ws, height: Hs)
        let T = comp.tile, tx = comp.tilesX, ty = comp.tilesY
        var present = [Bool](repeating: false, count: tx * ty * L)
        for y in 0..<Hs {
            for x in 0..<Ws {
                let t = (y / T) * tx + x / T, i = y * Ws + x
                if sharp[i] > 0 { present[t * L + part.sharp] = true }
                if sharp[i] < 1 { present[t * L + Int(layerOf[i])] = true }
            }
        }

        let acc = comp.acc
        // Written tile by tile before it is read (only a layer's footprint tiles are read).
        let blurred = UnsafeMutablePointer<SIMD4<Float>>.allocate(capacity: N)
        defer { blurred.deallocate() }
        // Split grids only: what lay behind the in-focus layer, Q = S.a * G0 - S, and the
        // transmission of the layers in front of it.
        let behindSharp: UnsafeMutablePointer<SIMD4<Float>>? = k > 1 ? .allocate(capacity: N) : nil
        let q: UnsafeMutablePointer<SIMD4<Float>>? = k > 1 ? .allocate(capacity: N) : nil
        let transmission: UnsafeMutablePointer<Float>? = k > 1 ? .allocate(capacity: N) : nil
        // Zeroed: the full-resolution pass samples them bilinearly, one pixel past a detail tile.
        behindSharp?.initialize(repeating: .zero, count: N)
        q?.initialize(repeating: .zero, count: N)
        transmission?.initialize(repeating: 1, count: N)
        defer {
            behindSharp?.deallocate()
            q?.deallocate()
            transmission?.deallocate()
        }
        // Split grids: tiles (dilated by one) that hold in-focus pixels get the full-resolution detail.
        var detail = [Bool](repeating: false, count: tx * ty)
        if k > 1 { detail = comp.dilate((0..<(tx * ty)).map { present[$0 * L + part.sharp] }, by: 1) }

        // Holes are filled as far from a layer as the largest blur can reveal.
        let band = Int(largest / 2) + 2

        var layersPresent = 0
        layerOf.withUnsafeBufferPointer { layerOfP in
            let ctx = LayerSource(
                base: base, sharp: sharp, layerOf: layerOfP.baseAddress!, sharpLayer: Int32(part.sharp), width: Ws,
                height: Hs)
            for l in 0..<L {
                var here = [Bool](repeating: false, count: tx * ty)
                var any = false
                for t in 0..<(tx * ty) where present[t * L + l] {
                    here[t] = true
                    any = true
                }
                guard any else { continue }
                layersPresent += 1
                let diameter =
                    l == part.sharp ? 0 : weight[l] > 0 ? Float(sumD[l] / weight[l]) : part.diameter(ofLayer: l)
                let kernels = KernelSet(diameter: diameter, shape: shape, catEye: catEye, width: Ws, height: Hs)
                let foot = comp.dilate(here, by: (kernels.reach + T - 1) / T)
                let tiles = (0..<foot.count).filter { foot[$0] }
                let tl = UncheckedSendable(tiles), bl = UncheckedSendable(blurred)
                StripExecutor.forEachStrip(rows: tiles.count, minimumRows: 1) { range in
                    for ti in range {
                        let r = comp.rect(tl.value[ti])
                        let kernel = kernels.kernel(atX: (r.x0 + r.x1) / 2, y: (r.y0 + r.y1) / 2)
                        Self.gather(
                            ctx, layer: l, kernel: kernel, reach: kernels.reach,
                            x0: r.x0, y0: r.y0, x1: r.x1, y1: r.y1, into: bl.value)
                    }
                }
                if k > 1, l == part.sharp, let g = behindSharp {
                    // What lays behind the in-focus layer (the footprint's is written by `lay`).
                    for t in 0..<(tx * ty) where detail[t] && !foot[t] {
                        let r = comp.rect(t)
                        for y in r.y0..<r.y1 {
                            (g + y * Ws + r.x0).update(from: acc + y * Ws + r.x0, count: r.x1 - r.x0)
                        }
                    }
                }
                if k > 1, l > part.sharp, let tv = transmission {
                    for t in tiles {
                        let r = comp.rect(t)
                        for y in r.y0..<r.y1 {
                            for i in (y * Ws + r.x0)..<(y * Ws + r.x1) { tv[i] *= max(0, 1 - blurred[i].w) }
                        }
                    }
                }
                comp.lay(blurred, footprint: foot, band: band, behind: k > 1 && l == part.sharp ? behindSharp : nil)
                if k > 1, l == part.sharp, let g = behindSharp, let qv = q {
                    // Q = S.a * G0 - S, for the full-resolution pass.
                    for t in 0..<(tx * ty) where detail[t] {
                        let r = comp.rect(t)
                        for y in r.y0..<r.y1 {
                            for i in (y * Ws + r.x0)..<(y * Ws + r.x1) {
                                let s = foot[t] ? blurred[i] : .zero
                                qv[i] = g[i] * s.w - s
                            }
                        }
                    }
                }
            }
        }
        let filledLayers = comp.filledLayers
        // On the full grid the colour is normalised here; on a split grid after the full-resolution
        // detail is added (its alpha counts too).
        if k == 1 { comp.normalize() }

        // Output pass at full resolution.
        let out: Image<S> = inFocus.samples.withUnsafeBufferPointer { mask in
            Image<S>(uninitializedWidth: W, height: H, channels: C) { dst in
                photo.samples.withUnsafeBufferPointer { src in
                    tables.toLinear.withUnsafeBufferPointer { lin in
                        ToneTables.fromLinear.withUnsafeBufferPointer { enc in
                            ToneTables.encode8.withUnsafeBufferPointer { enc8 in
                                detail.withUnsafeBufferPointer { det in
                                    let a = UncheckedSendable(acc), g = UncheckedSendable(behindSharp),
                                        qv = UncheckedSendable(q), tr = UncheckedSendable(transmission)
                                    StripExecutor.forEachStrip(rows: H, minimumRows: 16) { rows in
                                        for y in rows {
                                            for x in 0..<W {
                                                let i = y * W + x, o = i * C
                                                var v: SIMD4<Float>
                                                if k == 1 {
                                                    v = a.value[i]
                                                } else {
                                                    let taps = GridTaps(x: x, y: y, divisor: k, width: Ws, height: Hs)
                                                    v = taps.sample(a.value)
                                                    let t = (y / k / T) * tx + (x / k) / T
                                                    // (Pixels in focus lie in detail tiles only: their working pixel
                                                    // is in focus in part.)
                                                    if det[t], let gb = g.value, let qb = qv.value, let tb = tr.value {
                                                        let trans = taps.sample(tb)
                                                        var d = taps.sample(qb)
                                                        if mask[i] > 0 {
                                                            let p = Self.linear(
                                                                src, o, C, lin, boostFrom: boostFrom, gain: gain)
                                                            d += p - taps.sample(gb)
                                                        }
                                                        v += d * trans
                                                    }
                                                    v = v.w > 1e-6 ? v / v.w : .zero
                                                }
                                                if C >= 3 {
                                                    dst[o] = ToneTables.output(v.x, enc, enc8, as: S.self)
                                                    dst[o + 1] = ToneTables.output(v.y, enc, enc8, as: S.self)
                                                    dst[o + 2] = ToneTables.output(v.z, enc, enc8, as: S.self)
                                                    if C == 4 { dst[o + 3] = src[o + 3] }
                                                } else {
                                                    dst[o] = ToneTables.output(
                                                        wr * v.x + wg * v.y + wb * v.z, enc, enc8,
                                                        as: S.self)
                                                    if C == 2 { dst[o + 1] = src[o + 1] }
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        let inFocusCount = counter.value
        let stats = LensStatistics(
            gridDivisor: k, layers: layersPresent, largestDiameter: largest * Float(k),
            fractionInFocus: Double(inFocusCount) / Double(max(1, W * H)), filledLayers: filledLayers)
        return (out, inFocus, stats)
    }
}
