import EvanescoCore

/// The slow, exact lens renderer the fast one is tested against (package access: for the tests
/// and the benchmarks, not for users).
///
/// Every pixel is scattered as its own aperture shape at its own blur diameter (not its layer's)
/// into its layer and, as the continuation of the surface behind it, into the layer behind,
/// with the exact covered length of 8 lines per pixel row, at full resolution; each depth layer's
/// scattered light is then composited far to near exactly as ``LensBlur`` composites (the same
/// partition and `LensLayers.Compositor`). What differs from the fast renderer is only how a
/// layer is blurred: one kernel per layer gathered on a grid, or each pixel's own disc.
/// Cost: O(pixels x diameter x 8) per image; use it on small images.
package enum ReferenceLensBlur {
    /// Renders an 8-bit photo with the signed blur-diameter map `coc` (the photo's size, photo pixels).
    package static func render(_ photo: Image<UInt8>, coc: Image<Float>, lens: LensBlur) -> Image<UInt8> {
        precondition(photo.width == coc.width && photo.height == coc.height, "coc must have the photo's size")
        let W = photo.width, H = photo.height, N = W * H
        let base = linear(photo, lens: lens)
        var largest: Float = 0
        for v in coc.samples where v.isFinite { largest = max(largest, abs(v)) }
        let part = LensLayers.Partition(maxDiameter: largest)
        let comp = LensLayers.Compositor(width: W, height: H)
        let every = [Bool](repeating: true, count: comp.tilesX * comp.tilesY)
        let band = Int(largest / 2) + 2
        var layer = [SIMD4<Float>](repeating: .zero, count: N)
        var diff = [SIMD4<Float>](repeating: .zero, count: (W + 1) * H)
        let sub = 8
        for l in 0..<part.count {
            var any = false
            for i in 0..<N { layer[i] = .zero }
            for i in 0..<diff.count { diff[i] = .zero }
            for i in 0..<N {
                let c = coc.samples[i].isFinite ? coc.samples[i] : 0
                let inFocus = abs(c) < 1
                let own = inFocus ? part.sharp : part.layer(c)
                // A layer's own pixels, and the layer in front of it as its continuation.
                guard own == l || own == l + 1 else { continue }
                any = true
                let x = i % W, y = i / W, v = base[i]
                let d = abs(c)
                if own == part.sharp || d < 1 {
                    layer[i] += v
                    continue
                }
                let r = d / 2
                let eye =
                    lens.catEye > 0
                    ? KernelSet.eye(
                        x: (Float(x) + 0.5) / Float(W), y: (Float(y) + 0.5) / Float(H), width: W, height: H,
                        strength: lens.catEye) * r
                    : SIMD2<Float>.zero
                let (spans, total) = Self.spans(lens.shape, radius: r, eye: eye, lines: sub)
                guard total > 0 else {
                    layer[i] += v
                    continue
                }
                let w = v / (total * Float(sub))
                for sp in spans {
                    let row = y + sp.row
                    guard row >= 0, row < H else { continue }
                    let a = Float(x) + sp.lo, b = Float(x) + sp.hi
                    let ia = Int((a + 0.5).rounded(.down)), ib = Int((b + 0.5).rounded(.down))
                    func add(_ col: Int, _ amount: Float) {
                        if col >= 0 && col < W { layer[row * W + col] += w * amount }
                    }
                    if ia == ib {
                        add(ia, b - a)
                        continue
                    }
                    add(ia, Float(ia) + 0.5 - a)
                    add(ib, b - (Float(ib) - 0.5))
                    let f0 = max(ia + 1, 0), f1 = min(ib - 1, W - 1)
                    if f0 <= f1 {
                        diff[row * (W + 1) + f0] += w
                        diff[row * (W + 1) + f1 + 1] -= w
                    }
                }
            }
            guard any else { continue }
            for y in 0..<H {
                var run = SIMD4<Float>.zero
                for x in 0..<W {
                    run += diff[y * (W + 1) + x]
                    layer[y * W + x] += run
                }
            }
            layer.withUnsafeBufferPointer { comp.lay($0.baseAddress!, footprint: every, band: band) }
        }
        comp.normalize()
        return encode(comp.acc, like: photo)
    }

    /// The photo in linear light, its highlights boosted as ``LensBlur`` boosts them.
    static func linear(_ photo: Image<UInt8>, lens: LensBlur) -> [SIMD4<Float>] {
        let C = photo.channels, N = photo.pixelCount
        var base = [SIMD4<Float>](repeating: .zero, count: N)
        photo.samples.withUnsafeBufferPointer { src in
            SRGB.linearTable8.withUnsafeBufferPointer { l in
                for i in 0..<N {
                    base[i] = LensBlur.linear(
                        src, i * C, C, l, boostFrom: LensBlur.highlightThreshold * 255, gain: max(1, lens.highlights))
                }
            }
        }
        return base
    }

    /// The aperture shape's covered span on each of `lines` lines per pixel row (offsets from the
    /// pixel), and its area on this grid.
    static func spans(
        _ shape: ApertureShape, radius r: Float, eye: SIMD2<Float>, lines sub: Int
    ) -> (spans: [(row: Int, lo: Float, hi: Float)], total: Float) {
        var spans: [(row: Int, lo: Float, hi: Float)] = []
        var total: Float = 0
        let reach = Int((r + 0.5).rounded(.up)) + 1
        for j in -reach...reach {
            for s in 0..<sub {
                let yy = Float(j) - 0.5 + (Float(s) + 0.5) / Float(sub)
                let (lo, hi) = shape.span(y: yy, radius: r, eye: eye)
                guard lo < hi else { continue }
                spans.append((j, lo, hi))
                total += (hi - lo) / Float(sub)
            }
        }
        return (spans, total)
    }

    /// The composited linear light back to 8-bit samples (alpha kept; grey from Rec.709 luma).
    static func encode(_ acc: UnsafeMutablePointer<SIMD4<Float>>, like photo: Image<UInt8>) -> Image<UInt8> {
        let (wr, wg, wb) = LumaWeights.rec709.weights
        let W = photo.width, H = photo.height, C = photo.channels, N = W * H
        return ToneTables.fromLinear.withUnsafeBufferPointer { enc in
            ToneTables.encode8.withUnsafeBufferPointer { enc8 in
                Image<UInt8>(uninitializedWidth: W, height: H, channels: C) { dst in
                    for i in 0..<N {
                        let v = acc[i], o = i * C
                        if C >= 3 {
                            dst[o] = ToneTables.output(v.x, enc, enc8, as: UInt8.self)
                            dst[o + 1] = ToneTables.output(v.y, enc, enc8, as: UInt8.self)
                            dst[o + 2] = ToneTables.output(v.z, enc, enc8, as: UInt8.self)
                            if C == 4 { dst[o + 3] = photo.samples[o + 3] }
                        } else {
                            dst[o] = ToneTables.output(
                                wr * v.x + wg * v.y + wb * v.z, enc, enc8, as: UInt8.self)
                            if C == 2 { dst[o + 1] = photo.samples[o + 1] }
                        }
                    }
                }
            }
        }
    }
}
