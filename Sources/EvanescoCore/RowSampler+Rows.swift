import CKernels

// The portable per-pixel rows: any sample type, any channel count, any interpolation.

extension RowSampler {
    /// The per-pixel loop; `channels` and `kind` (0 nearest, 1 bilinear, 2 cubic) are constants
    /// at each call site above, so the optimiser specialises this inlined body for them.
    @inlinable @inline(__always)
    func row(
        _ src: UnsafePointer<Sample>, _ m: [Float], _ y: Int, _ x0: Int, _ x1: Int,
        _ out: UnsafeMutablePointer<Float>, _ valid: UnsafeMutablePointer<UInt8>, channels c: Int, kind: Int
    ) {
        let w = width, h = height
        let fy = Float(y), maxX = Float(w - 1), maxY = Float(h - 1), eps: Float = 1e-3
        let a: Float = interpolation.cubicParameter ?? -0.75
        let (m0, m3, m6) = (m[0], m[3], m[6])
        // Numerators and denominator are affine in x: step them instead of recomputing.
        var nx = m0 * Float(x0) + m[1] * fy + m[2], ny = m3 * Float(x0) + m[4] * fy + m[5]
        var dd = m6 * Float(x0) + m[7] * fy + m[8]
        let projective = m6 != 0 || m[7] != 0
        let (m1, m4, m7) = (m[1], m[4], m[7])
        for i in 0..<(x1 - x0) {
            var sx = nx, sy = ny, den = dd
            if let f = offsets {
                // Homography of p + d(p): the numerators and the denominator are affine in p.
                let d = f.value(atX: x0 &+ i, y: y)
                sx += m0 * d.x + m1 * d.y
                sy += m3 * d.x + m4 * d.y
                den += m6 * d.x + m7 * d.y
            }
            if projective || offsets != nil {
                if den > 1e-12 {
                    sx /= den
                    sy /= den
                } else {
                    sx = -1e9
                    sy = -1e9
                }
            }
            nx += m0
            ny += m3
            dd += m6
            let o = i &* c
            guard sx >= -eps, sy >= -eps, sx <= maxX + eps, sy <= maxY + eps else {
                valid[i] = 0
                for ch in 0..<c { out[o &+ ch] = 0 }
                continue
            }
            valid[i] = 1
            let cx = min(max(sx, 0), maxX), cy = min(max(sy, 0), maxY)
            if kind == 0 {
                let p = src + (Int(cy + 0.5) * w + Int(cx + 0.5)) * c
                for ch in 0..<c { out[o &+ ch] = p[ch].floatValue }
                continue
            }
            // cx, cy >= 0: truncation is the floor (and needs no libm call).
            let ix = Int(cx), iy = Int(cy)
            let tx = cx - Float(ix), ty = cy - Float(iy)
            if kind == 1 {
                let ix1 = min(ix + 1, w - 1), iy1 = min(iy + 1, h - 1)
                let p00 = src + (iy * w + ix) * c, p01 = src + (iy * w + ix1) * c
                let p10 = src + (iy1 * w + ix) * c, p11 = src + (iy1 * w + ix1) * c
                for ch in 0..<c {
                    let top = p00[ch].floatValue + (p01[ch].floatValue - p00[ch].floatValue) * tx
                    let bottom = p10[ch].floatValue + (p11[ch].floatValue - p10[ch].floatValue) * tx
                    out[o &+ ch] = top + (bottom - top) * ty
                }
            } else {
                let wx = Kernels.cubicWeights(tx, a: a), wy = Kernels.cubicWeights(ty, a: a)
                let xs = (max(ix - 1, 0), ix, min(ix + 1, w - 1), min(ix + 2, w - 1))
                let rows = (max(iy - 1, 0) * w, iy * w, min(iy + 1, h - 1) * w, min(iy + 2, h - 1) * w)
                for ch in 0..<c {
                    @inline(__always) func line(_ r: Int) -> Float {
                        wx.0 * src[(r + xs.0) * c + ch].floatValue + wx.1 * src[(r + xs.1) * c + ch].floatValue
                            + wx.2 * src[(r + xs.2) * c + ch].floatValue + wx.3 * src[(r + xs.3) * c + ch].floatValue
                    }
                    let v = wy.0 * line(rows.0) + wy.1 * line(rows.1) + wy.2 * line(rows.2) + wy.3 * line(rows.3)
                    out[o &+ ch] = Sample.self == Float.self ? v : min(max(v, 0), Sample.fullScale)
                }
            }
        }
    }

    /// One channel, bilinear, without a local correction (the luma planes local alignment
    /// matches): the validity test and taps of ``row(_:_:_:_:_:_:_:channels:kind:)``, each
    /// pixel's source position exact (its own division), four pixels a step.
    @inlinable
    func rowBilinear1(
        _ src: UnsafePointer<Sample>, _ m: [Float], _ y: Int, _ x0: Int, _ x1: Int,
        _ out: UnsafeMutablePointer<Float>, _ valid: UnsafeMutablePointer<UInt8>
    ) {
        let w = width, h = height, map = RowMap(m, y: y), bounds = SourceBounds(width: w, height: h)
        let (maxX, maxY) = (bounds.maxX, bounds.maxY)
        let (m0, m2, m3, m5, m6, m8) = (map.m0, map.m2, map.m3, map.m5, map.m6, map.m8)
        @inline(__always) func pixel(_ i: Int, _ sx: Float, _ sy: Float) {
            guard bounds.contains(sx, sy) else {
                valid[i] = 0
                out[i] = 0
                return
            }
            valid[i] = 1
            let cx = min(max(sx, 0), maxX), cy = min(max(sy, 0), maxY)
            let ix = Int(cx), iy = Int(cy)  // cx, cy >= 0: truncation is the floor
            let tx = cx - Float(ix), ty = cy - Float(iy)
            let o = iy &* w &+ ix
            let dx = ix &+ 1 < w ? 1 : 0, dy = iy &+ 1 < h ? w : 0
            let top = src[o].floatValue + (src[o &+ dx].floatValue - src[o].floatValue) * tx
            let bottom = src[o &+ dy].floatValue + (src[o &+ dy &+ dx].floatValue - src[o &+ dy].floatValue) * tx
            out[i] = top + (bottom - top) * ty
        }
        // Pixel i alone, from its own position (none beyond the map's horizon).
        @inline(__always) func alone(_ i: Int) {
            let fx = Float(x0 &+ i), d = m6 * fx + m8
            if d > 1e-12 {
                pixel(i, (m0 * fx + m2) / d, (m3 * fx + m5) / d)
            } else {
                valid[i] = 0
                out[i] = 0
            }
        }
        // The map's arithmetic per lane is the scalar one (the same operations in the same
        // order), so every position is what a pixel alone computes.
        let lanes = SIMD4<Float>(0, 1, 2, 3), tiny = SIMD4<Float>(repeating: 1e-12)
        let count = x1 - x0
        var i = 0
        // Float planes: groups of four that read consecutive columns of one pair of rows, all
        // inside (a map near a translation: most of a row), go to CKernels (eight a step where two
        // groups qualify): 4 vector loads instead of 16 scalar ones, and the arithmetic of `pixel`.
        // A group that does not qualify, and every group of an integer plane, is sampled here.
        var row = evn_bilinear_row(
            plane: UnsafeRawPointer(src).assumingMemoryBound(to: Float.self), width: w, height: h, x0: x0,
            m0: m0, m2: m2, m3: m3, m5: m5, m6: m6, m8: m8)
        while i &+ 4 <= count {
            if Sample.self == Float.self {
                i = evn_bilinear_row_run(&row, i, count, out, valid)
                guard i &+ 4 <= count else { break }
            }
            let fx = SIMD4<Float>(repeating: Float(x0 &+ i)) + lanes
            let d = m6 * fx + m8
            guard Quad.allTrue(d .> tiny) else {
                alone(i)
                alone(i &+ 1)
                alone(i &+ 2)
                alone(i &+ 3)
                i &+= 4
                continue
            }
            let px = (m0 * fx + m2) / d, py = (m3 * fx + m5) / d
            pixel(i, px[0], py[0])
            pixel(i &+ 1, px[1], py[1])
            pixel(i &+ 2, px[2], py[2])
            pixel(i &+ 3, px[3], py[3])
            i &+= 4
        }
        while i < count {
            alone(i)
            i &+= 1
        }
    }
}
