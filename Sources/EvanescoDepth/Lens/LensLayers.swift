import EvanescoCore

/// The depth layers of the lens renderer, and how they are composited.
///
/// Every pixel belongs to one layer, chosen by its signed circle of confusion `c` (blur diameter
/// in pixels, positive in front of the focus plane): the in-focus layer for |c| < 1 (at full
/// resolution), then bins of 1 px up to 8 px and of 12.5 % beyond, on each side. Layers are
/// composited far to near with "over", so a layer spreads over everything behind it and under
/// everything in front of it. Before a layer is laid down, the holes that nearer layers left in
/// what lies behind it are filled (pull-push) where the layer's soft edge will reveal them: a
/// blurred foreground shows the background through its edge (partial occlusion).
///
/// The fast renderer and the exact reference share this partition and this compositing; they
/// differ only in how a layer is blurred (one kernel per layer on a grid, or each pixel scattered
/// as its own disc).
package enum LensLayers {
    /// Bin edges on |c| (pixels): 0, 1, ..., 8, then x1.125 up to at least `maxDiameter`.
    package static func edges(maxDiameter: Float) -> [Float] {
        var e: [Float] = Array(0...8).map(Float.init)
        while e.last! <= maxDiameter { e.append(e.last! * 1.125) }
        return e
    }

    /// The partition for a map whose |c| stays below `maxDiameter`: layer indices run far to near.
    package struct Partition: Sendable {
        /// Bin edges on |c|.
        package let edges: [Float]
        /// Index of the in-focus layer (the far bins come before it, the near bins after).
        package var sharp: Int { edges.count - 1 }
        /// Number of layers: the far bins, the in-focus layer, the near bins.
        package var count: Int { 2 * (edges.count - 1) + 1 }

        package init(maxDiameter: Float) { edges = LensLayers.edges(maxDiameter: maxDiameter) }

        /// Layer of a pixel with signed blur diameter `c` (in the working grid's pixels) that is
        /// not part of the in-focus layer.
        package func layer(_ c: Float) -> Int {
            let a = abs(c)
            var k = 0
            // Linear bins first (most pixels of a photo are near focus or far behind it).
            if a < 8 {
                k = Int(a)
            } else {
                k = 8
                while k + 1 < edges.count - 1 && a >= edges[k + 1] { k += 1 }
            }
            k = min(k, edges.count - 2)
            return c < 0 ? sharp - 1 - k : sharp + 1 + k
        }

        /// The blur diameter a layer is rendered with: its bin's midpoint (0 for the in-focus layer).
        package func diameter(ofLayer l: Int) -> Float {
            if l == sharp { return 0 }
            let k = l < sharp ? sharp - 1 - l : l - sharp - 1
            return (edges[k] + edges[k + 1]) / 2
        }
    }

    /// The far-to-near composite on a tiled grid: the accumulator of premultiplied linear RGB and
    /// alpha, and the hole filling between layers.
    package final class Compositor: @unchecked Sendable {
        package let width: Int, height: Int
        package let tile: Int, tilesX: Int, tilesY: Int
        /// Premultiplied linear RGB + alpha of everything laid down so far.
        package let acc: UnsafeMutablePointer<SIMD4<Float>>
        let fill: UnsafeMutablePointer<SIMD4<Float>>
        /// Layers after which holes were filled.
        package private(set) var filledLayers = 0

        package init(width: Int, height: Int, tile: Int = 64) {
            self.width = width
            self.height = height
            self.tile = tile
            tilesX = (width + tile - 1) / tile
            tilesY = (height + tile - 1) / tile
            acc = .allocate(capacity: width * height)
            acc.initialize(repeating: .zero, count: width * height)
            fill = .allocate(capacity: width * height)
            fill.initialize(repeating: .zero, count: width * height)
        }
        deinit {
            acc.deallocate()
            fill.deallocate()
        }

        /// Pixel rectangle of tile `t`.
        package func rect(_ t: Int) -> (x0: Int, y0: Int, x1: Int, y1: Int) {
            let x0 = (t % tilesX) * tile, y0 = (t / tilesX) * tile
            return (x0, y0, min(x0 + tile, width), min(y0 + tile, height))
        }

        /// Tiles within `by` tiles of a flagged one.
        package func dilate(_ flags: [Bool], by n: Int) -> [Bool] {
            guard n > 0 else { return flags }
            var out = [Bool](repeating: false, count: flags.count)
            for t in 0..<flags.count where flags[t] {
                let cx = t % tilesX, cy = t / tilesX
                for yy in max(0, cy - n)...min(tilesY - 1, cy + n) {
                    for xx in max(0, cx - n)...min(tilesX - 1, cx + n) { out[yy * tilesX + xx] = true }
                }
            }
            return out
        }

        /// Lays one blurred layer (valid in the tiles `footprint`) over everything so far. Where
        /// the layer's soft edge lies over a hole that nearer layers left in what is behind it, the
        /// hole is first completed with the colour pulled in from the farther content within
        /// `band` pixels (partial occlusion: a blurred edge shows what lies behind it). Where no
        /// farther content is that close, the hole stays open and the final normalisation lets the
        /// layers around it close it (a continuous surface split between layers shows no seam).
        ///
        /// - Parameter behind: When given, receives for every pixel of the footprint what lay
        ///   behind the layer there (the accumulator, completed where it was filled).
        package func lay(
            _ layer: UnsafePointer<SIMD4<Float>>, footprint: [Bool], band: Int,
            behind: UnsafeMutablePointer<SIMD4<Float>>? = nil
        ) {
            let tiles = (0..<footprint.count).filter { footprint[$0] }
            let a = UncheckedSendable(acc), tl = UncheckedSendable(tiles), W = width, H = height,
                bh = UncheckedSendable(behind)
            let filled = LockedBox(0)
            StripExecutor.forEachStrip(rows: tiles.count, minimumRows: 1) { range in
                var tilesFilled = 0
                for ti in range {
                    let r = self.rect(tl.value[ti])
                    var hole = false
                    for y in r.y0..<r.y1 where !hole {
                        for i in (y * W + r.x0)..<(y * W + r.x1) where layer[i].w > 1e-6 && a.value[i].w < 0.999 {
                            hole = true
                            break
                        }
                    }
                    // Fill this tile's holes from a window around it. Reads of the accumulator
                    // outside the tile race with neighbouring tiles only where those tiles change
                    // pixels this tile's fill would take, so the fill reads a snapshot first.
                    var fillWindow: (px: [SIMD4<Float>], x0: Int, y0: Int, w: Int)? = nil
                    if hole {
                        let m = band + 2
                        let box = (
                            x0: max(0, r.x0 - m), y0: max(0, r.y0 - m), x1: min(W, r.x1 + m), y1: min(H, r.y1 + m)
                        )
                        let bw = box.x1 - box.x0, bh = box.y1 - box.y0
                        var win = [SIMD4<Float>](repeating: .zero, count: bw * bh)
                        var known = false
                        for y in 0..<bh {
                            for x in 0..<bw {
                                let v = self.snapshot(y: box.y0 + y, x: box.x0 + x)
                                if v.w > 1e-4 { known = true }
                                win[y * bw + x] = v
                            }
                        }
                        if known {
                            win.withUnsafeMutableBufferPointer {
                                LensLayers.pullPush($0.baseAddress!, width: bw, height: bh, reach: band)
                            }
                            fillWindow = (win, box.x0, box.y0, bw)
                            tilesFilled += 1
                        }
                    }
                    for y in r.y0..<r.y1 {
                        for x in r.x0..<r.x1 {
                            let i = y * W + x
                            let l = layer[i]
                            var b = a.value[i]
                            if l.w <= 1e-6 {
                                bh.value?[i] = b
                                continue
                            }
                            if let fw = fillWindow, b.w < 0.999 {
                                let c = fw.px[(y - fw.y0) * fw.w + (x - fw.x0)]
                                if c.w > 0 { b += c * max(0, 1 - b.w) }
                            }
                            bh.value?[i] = b
                            a.value[i] = l + b * max(0, 1 - l.w)
                        }
                    }
                }
                if tilesFilled > 0 { filled.update { $0 += tilesFilled } }
            }
            // Snapshot for the next layer's fills.
            swapSnapshot(tiles: tiles)
            if filled.value > 0 { filledLayers += 1 }
        }

        /// The accumulator as it was before the current layer (fills must not see a neighbouring
        /// tile's half-laid pixels, which would make the result depend on thread timing).
        @inline(__always)
        func snapshot(y: Int, x: Int) -> SIMD4<Float> { fill[y * width + x] }

        /// Copies the tiles just laid into the snapshot.
        func swapSnapshot(tiles: [Int]) {
            let tl = UncheckedSendable(tiles), W = width, a = UncheckedSendable(acc), f = UncheckedSendable(fill)
            StripExecutor.forEachStrip(rows: tiles.count, minimumRows: 4) { range in
                for ti in range {
                    let r = self.rect(tl.value[ti])
                    for y in r.y0..<r.y1 {
                        (f.value + y * W + r.x0).update(from: a.value + y * W + r.x0, count: r.x1 - r.x0)
                    }
                }
            }
        }

        /// Divides the colour by alpha (the photo's border and any gap nothing reached).
        package func normalize() {
            for i in 0..<(width * height) {
                let p = acc[i]
                acc[i] = p.w > 1e-6 ? SIMD4(p.x / p.w, p.y / p.w, p.z / p.w, 1) : .zero
            }
        }
    }

    /// Pull-push hole filling (Gortler et al.) of a premultiplied `width` x `height` window, in
    /// place: every pixel becomes an opaque colour interpolated from the nearest known pixels, or
    /// zero where nothing is known within about `reach` pixels.
    package static func pullPush(_ px: UnsafeMutablePointer<SIMD4<Float>>, width bw: Int, height bh: Int, reach: Int) {
        guard bw > 0, bh > 0 else { return }
        for i in 0..<(bw * bh) where px[i].w > 1 { px[i] /= px[i].w }
        // Only as many levels as it takes to reach `reach` pixels into a hole: deeper pixels stay
        // unknown rather than take colours from far away.
        var maxLevels = 1
        while (1 << (maxLevels - 1)) < max(1, reach) { maxLevels += 1 }
        var levels: [(w: Int, h: Int, px: UnsafeMutablePointer<SIMD4<Float>>)] = [(bw, bh, px)]
        defer { for l in levels.dropFirst() { l.px.deallocate() } }
        // Pull: 2x2 sums, renormalised so a pixel's weight never exceeds 1.
        while (levels.last!.w > 1 || levels.last!.h > 1) && levels.count <= maxLevels {
            let prev = levels.last!
            let w = (prev.w + 1) / 2, h = (prev.h + 1) / 2
            let out = UnsafeMutablePointer<SIMD4<Float>>.allocate(capacity: w * h)
            for y in 0..<h {
                for x in 0..<w {
                    var s = SIMD4<Float>.zero
                    for yy in (2 * y)..<min(2 * y + 2, prev.h) {
                        for xx in (2 * x)..<min(2 * x + 2, prev.w) { s += prev.px[yy * prev.w + xx] }
                    }
                    if s.w > 1 { s /= s.w }
                    out[y * w + x] = s
                }
            }
            levels.append((w, h, out))
        }
        // Push: each level's holes take the (filled) coarser level's colour, bilinearly.
        for k in stride(from: levels.count - 2, through: 0, by: -1) {
            let coarse = levels[k + 1], fine = levels[k]
            for y in 0..<fine.h {
                for x in 0..<fine.w {
                    let p = fine.px[y * fine.w + x]
                    guard p.w < 1 else { continue }
                    let fx = min(max((Float(x) + 0.5) / 2 - 0.5, 0), Float(coarse.w - 1))
                    let fy = min(max((Float(y) + 0.5) / 2 - 0.5, 0), Float(coarse.h - 1))
                    let cx0 = Int(fx), cy0 = Int(fy), tx = fx - Float(cx0), ty = fy - Float(cy0)
                    let cx1 = min(cx0 + 1, coarse.w - 1), cy1 = min(cy0 + 1, coarse.h - 1)
                    var c = SIMD4<Float>.zero, wsum: Float = 0
                    @inline(__always) func add(_ xx: Int, _ yy: Int, _ wt: Float) {
                        let q = coarse.px[yy * coarse.w + xx]
                        if q.w > 0 && wt > 0 {
                            c += q * (wt / q.w)
                            wsum += wt
                        }
                    }
                    add(cx0, cy0, (1 - tx) * (1 - ty))
                    add(cx1, cy0, tx * (1 - ty))
                    add(cx0, cy1, (1 - tx) * ty)
                    add(cx1, cy1, tx * ty)
                    guard wsum > 0 else { continue }
                    fine.px[y * fine.w + x] = p + (c / wsum) * (1 - p.w)
                }
            }
        }
        for i in 0..<(bw * bh) {
            let p = px[i]
            px[i] = p.w > 0.5 ? p / p.w : .zero
        }
    }
}
