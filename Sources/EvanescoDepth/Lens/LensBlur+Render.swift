import EvanescoCore
import Foundation

/// The working grid of one lens rendering (the photo's size over `divisor`) and the buffers its
/// passes share.
final class LensGrid: @unchecked Sendable {
    let width: Int, height: Int, divisor: Int
    var count: Int { width * height }
    /// Linear premultiplied colour, box-averaged from the photo.
    let base: UnsafeMutablePointer<SIMD4<Float>>
    /// The in-focus fraction of each working pixel.
    let sharp: UnsafeMutablePointer<Float>
    /// Split grids only (divisor above 1): what lay behind the in-focus layer, Q = S.a * G0 - S,
    /// and the transmission of the layers in front of it. Zeroed (the transmission 1): the
    /// full-resolution pass samples them bilinearly, one pixel past a detail tile.
    let behindSharp: UnsafeMutablePointer<SIMD4<Float>>?
    let q: UnsafeMutablePointer<SIMD4<Float>>?
    let transmission: UnsafeMutablePointer<Float>?

    init(photoWidth: Int, photoHeight: Int, divisor k: Int) {
        width = (photoWidth + k - 1) / k
        height = (photoHeight + k - 1) / k
        divisor = k
        let n = width * height
        base = .allocate(capacity: n)
        sharp = .allocate(capacity: n)
        behindSharp = k > 1 ? .allocate(capacity: n) : nil
        q = k > 1 ? .allocate(capacity: n) : nil
        transmission = k > 1 ? .allocate(capacity: n) : nil
        behindSharp?.initialize(repeating: .zero, count: n)
        q?.initialize(repeating: .zero, count: n)
        transmission?.initialize(repeating: 1, count: n)
    }

    deinit {
        base.deallocate()
        sharp.deallocate()
        behindSharp?.deallocate()
        q?.deallocate()
        transmission?.deallocate()
    }
}

/// The depth layers of one rendering: the partition, each working pixel's layer, the diameter each
/// layer is blurred at and the tiles each is present in.
struct LensLayerPlan {
    let part: LensLayers.Partition
    /// Largest blur diameter, in working pixels.
    let largest: Float
    let layerOf: [Int32]
    /// Per tile and layer (`t * count + l`): the layer has pixels in the tile.
    let present: [Bool]
    private let sumD: [Double], weight: [Double]

    var count: Int { part.count }

    init(diameters cw: Image<Float>, grid: LensGrid, compositor comp: LensLayers.Compositor) {
        var largest: Float = 0
        cw.samples.withUnsafeBufferPointer { p in for v in p { largest = max(largest, abs(v)) } }
        let part = LensLayers.Partition(maxDiameter: largest)
        let L = part.count, N = grid.count, sharp = grid.sharp
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
        let T = comp.tile, tx = comp.tilesX, ty = comp.tilesY, Ws = grid.width
        var present = [Bool](repeating: false, count: tx * ty * L)
        for y in 0..<grid.height {
            for x in 0..<Ws {
                let t = (y / T) * tx + x / T, i = y * Ws + x
                if sharp[i] > 0 { present[t * L + part.sharp] = true }
                if sharp[i] < 1 { present[t * L + Int(layerOf[i])] = true }
            }
        }
        (self.part, self.largest, self.layerOf, self.present) = (part, largest, layerOf, present)
        (self.sumD, self.weight) = (sumD, weight)
    }

    /// The diameter layer `l` is blurred at (0 for the in-focus layer).
    func diameter(ofLayer l: Int) -> Float {
        l == part.sharp ? 0 : weight[l] > 0 ? Float(sumD[l] / weight[l]) : part.diameter(ofLayer: l)
    }
}

extension LensBlur {
    func render<S: PixelSample>(_ photo: Image<S>, coc: Image<Float>) -> (Image<S>, Image<Float>, LensStatistics) {
        let W = photo.width, H = photo.height
        let k = gridDivisor(width: W, height: H)
        let grid = LensGrid(photoWidth: W, photoHeight: H, divisor: k)
        let tables = ToneTables(S.self)

        // Blur diameter on the working grid, in working pixels (corner-aligned resampling).
        var cw = Self.resample(coc, width: grid.width, height: grid.height)
        cw.samples.withUnsafeMutableBufferPointer { p in
            for i in 0..<p.count { p[i] = p[i].isFinite ? p[i] / Float(k) : 0 }
        }
        let (inFocus, inFocusCount) = averageOntoGrid(photo, diameters: cw, grid: grid, tables: tables)

        let comp = LensLayers.Compositor(width: grid.width, height: grid.height)
        let plan = LensLayerPlan(diameters: cw, grid: grid, compositor: comp)
        // Split grids: tiles (dilated by one) that hold in-focus pixels get the full-resolution detail.
        var detail = [Bool](repeating: false, count: comp.tilesX * comp.tilesY)
        if k > 1 {
            detail = comp.dilate((0..<detail.count).map { plan.present[$0 * plan.count + plan.part.sharp] }, by: 1)
        }
        let layersPresent = composite(plan, grid: grid, compositor: comp, detail: detail)
        // On the full grid the colour is normalised here; on a split grid after the full-resolution
        // detail is added (its alpha counts too).
        if k == 1 { comp.normalize() }
        let out = finish(photo, inFocus: inFocus, grid: grid, compositor: comp, detail: detail, tables: tables)
        let stats = LensStatistics(
            gridDivisor: k, layers: layersPresent, largestDiameter: plan.largest * Float(k),
            fractionInFocus: Double(inFocusCount) / Double(max(1, W * H)), filledLayers: comp.filledLayers)
        return (out, inFocus, stats)
    }

    /// Pass 1: linear premultiplied colour and the in-focus fraction, box-averaged onto the grid;
    /// the full-resolution in-focus mask (returned, and read by the output pass) and its pixel count
    /// on the way.
    func averageOntoGrid<S: PixelSample>(
        _ photo: Image<S>, diameters cw: Image<Float>, grid: LensGrid, tables: ToneTables
    ) -> (Image<Float>, Int) {
        let W = photo.width, H = photo.height, C = photo.channels
        let k = grid.divisor, Ws = grid.width, Hs = grid.height
        let boostFrom = Self.highlightThreshold * S.fullScale, gain = max(1, highlights)
        var inFocus = Image<Float>(width: W, height: H, channels: 1)
        let counter = LockedBox(0)
        photo.samples.withUnsafeBufferPointer { src in
            tables.toLinear.withUnsafeBufferPointer { lin in
                cw.samples.withUnsafeBufferPointer { cws in
                    inFocus.samples.withUnsafeMutableBufferPointer { maskBuf in
                        let mk = UncheckedSendable(maskBuf)
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
                                    grid.base[ys * Ws + xs] = acc / n
                                    grid.sharp[ys * Ws + xs] = inFocus / n
                                    sharpHere += Int(inFocus)
                                }
                            }
                            counter.update { $0 += sharpHere }
                        }
                    }
                }
            }
        }
        return (inFocus, counter.value)
    }

    /// Blurs every layer present with its aperture and lays it into the compositor, far to near;
    /// on a split grid, keeps what the full-resolution pass needs. Returns the layers present.
    func composite(
        _ plan: LensLayerPlan, grid: LensGrid, compositor comp: LensLayers.Compositor, detail: [Bool]
    ) -> Int {
        let tilesCount = comp.tilesX * comp.tilesY, L = plan.count, sharpLayer = plan.part.sharp
        // Written tile by tile before it is read (only a layer's footprint tiles are read).
        let blurred = UnsafeMutablePointer<SIMD4<Float>>.allocate(capacity: grid.count)
        defer { blurred.deallocate() }
        // Holes are filled as far from a layer as the largest blur can reveal.
        let band = Int(plan.largest / 2) + 2
        let split = grid.divisor > 1
        var layersPresent = 0
        plan.layerOf.withUnsafeBufferPointer { layerOfP in
            let ctx = LayerSource(
                base: grid.base, sharp: grid.sharp, layerOf: layerOfP.baseAddress!, sharpLayer: Int32(sharpLayer),
                width: grid.width, height: grid.height)
            for l in 0..<L {
                let here = (0..<tilesCount).map { plan.present[$0 * L + l] }
                guard here.contains(true) else { continue }
                layersPresent += 1
                let kernels = KernelSet(
                    diameter: plan.diameter(ofLayer: l), shape: shape, catEye: catEye, width: grid.width,
                    height: grid.height)
                let foot = comp.dilate(here, by: (kernels.reach + comp.tile - 1) / comp.tile)
                let tiles = (0..<foot.count).filter { foot[$0] }
                Self.blurLayer(ctx, layer: l, kernels: kernels, tiles: tiles, compositor: comp, into: blurred)
                if split, l == sharpLayer { keepBehindSharp(grid, compositor: comp, detail: detail, footprint: foot) }
                if split, l > sharpLayer, let tv = grid.transmission {
                    for t in tiles { forEachPixel(ofTile: t, comp) { i in tv[i] *= max(0, 1 - blurred[i].w) } }
                }
                comp.lay(
                    blurred, footprint: foot, band: band, behind: split && l == sharpLayer ? grid.behindSharp : nil)
                if split, l == sharpLayer, let g = grid.behindSharp, let qv = grid.q {
                    // Q = S.a * G0 - S, for the full-resolution pass.
                    for t in 0..<tilesCount where detail[t] {
                        forEachPixel(ofTile: t, comp) { i in
                            let s = foot[t] ? blurred[i] : .zero
                            qv[i] = g[i] * s.w - s
                        }
                    }
                }
            }
        }
        return layersPresent
    }

    /// Gathers layer `l` over the footprint's tiles into `blurred`, tiles spread over the cores.
    static func blurLayer(
        _ ctx: LayerSource, layer l: Int, kernels: KernelSet, tiles: [Int], compositor comp: LensLayers.Compositor,
        into blurred: UnsafeMutablePointer<SIMD4<Float>>
    ) {
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
    }

    /// What lies behind the in-focus layer, in the detail tiles outside its footprint (the
    /// footprint's is written by the compositor's `lay`).
    private func keepBehindSharp(
        _ grid: LensGrid, compositor comp: LensLayers.Compositor, detail: [Bool], footprint foot: [Bool]
    ) {
        guard let g = grid.behindSharp else { return }
        let Ws = grid.width
        for t in 0..<(comp.tilesX * comp.tilesY) where detail[t] && !foot[t] {
            let r = comp.rect(t)
            for y in r.y0..<r.y1 {
                (g + y * Ws + r.x0).update(from: comp.acc + y * Ws + r.x0, count: r.x1 - r.x0)
            }
        }
    }

    /// Calls `body` with the index of every working pixel of tile `t`, row by row.
    private func forEachPixel(ofTile t: Int, _ comp: LensLayers.Compositor, _ body: (Int) -> Void) {
        let r = comp.rect(t)
        for y in r.y0..<r.y1 {
            for i in (y * comp.width + r.x0)..<(y * comp.width + r.x1) { body(i) }
        }
    }

    /// The output pass at full resolution: the composite sampled from the grid (with the
    /// full-resolution detail on a split grid), encoded to the photo's sample type.
    func finish<S: PixelSample>(
        _ photo: Image<S>, inFocus: Image<Float>, grid: LensGrid, compositor comp: LensLayers.Compositor,
        detail: [Bool], tables: ToneTables
    ) -> Image<S> {
        let W = photo.width, H = photo.height, C = photo.channels
        let k = grid.divisor, Ws = grid.width, Hs = grid.height, T = comp.tile, tx = comp.tilesX
        let (wr, wg, wb) = LumaWeights.rec709.weights
        let boostFrom = Self.highlightThreshold * S.fullScale, gain = max(1, highlights)
        return inFocus.samples.withUnsafeBufferPointer { mask in
            Image<S>(uninitializedWidth: W, height: H, channels: C) { dst in
                photo.samples.withUnsafeBufferPointer { src in
                    tables.toLinear.withUnsafeBufferPointer { lin in
                        ToneTables.fromLinear.withUnsafeBufferPointer { enc in
                            ToneTables.encode8.withUnsafeBufferPointer { enc8 in
                                detail.withUnsafeBufferPointer { det in
                                    let a = UncheckedSendable(comp.acc)
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
                                                    if det[t], let gb = grid.behindSharp, let qb = grid.q,
                                                        let tb = grid.transmission
                                                    {
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
                                                        wr * v.x + wg * v.y + wb * v.z, enc, enc8, as: S.self)
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
    }
}
