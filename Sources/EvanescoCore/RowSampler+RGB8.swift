import CKernels

// The 8-bit RGB cubic rows that most bursts take: taps from Float rows held in a `Cache`, four
// pixels a step.

extension RowSampler {
    /// 8-bit RGB cubic, reading taps from the source rows the segment touches, converted to
    /// Float in `cache` (once per source row while a segment walks down) so that each tap is one
    /// 4-float load. Returns false (nothing written) when the segment spans too many source rows.
    @inlinable
    func rowCubicRGB8Cached(
        _ src: UnsafePointer<UInt8>, _ m: [Float], _ y: Int, _ x0: Int, _ x1: Int,
        _ out: UnsafeMutablePointer<Float>, _ valid: UnsafeMutablePointer<UInt8>,
        _ cache: Cache
    ) -> Bool {
        let w = width, h = height
        let fy = Float(y), maxX = Float(w - 1), maxY = Float(h - 1), eps: Float = 1e-3
        let (m0, m2, m3, m5, m6, m8) = (m[0], m[1] * fy + m[2], m[3], m[4] * fy + m[5], m[6], m[7] * fy + m[8])
        let projective = m6 != 0 || m[7] != 0
        let (m1, m4, m7) = (m[1], m[4], m[7])
        @inline(__always) func source(_ x: Int) -> (Float, Float) {
            let fx = Float(x)
            var nx = m0 * fx + m2, ny = m3 * fx + m5, d = m6 * fx + m8
            if let f = offsets {
                let o = f.value(atX: x, y: y)
                nx += m0 * o.x + m1 * o.y
                ny += m3 * o.x + m4 * o.y
                d += m6 * o.x + m7 * o.y
            } else if !projective {
                return (nx, ny)
            }
            return d > 1e-12 ? (nx / d, ny / d) : (-1e9, -1e9)
        }
        var (ax, ay) = source(x0), (bx, by) = source(x1 - 1)
        // A segment that leaves the frame's projective half-plane takes the direct path.
        guard ax > -1e8, bx > -1e8 else { return false }
        // With a local correction, every pixel's source position, computed once here (the
        // field along the row in one call) into the cache's scratch row, which this path does
        // not otherwise use, and read back by the loop below.
        let positions: UnsafeMutablePointer<Float>? = offsets == nil ? nil : cache.scratch
        if let f = offsets, let pos = positions {
            guard x1 - x0 <= cache.capacityPixels else { return false }
            // Along a row the field is linear between its cell centres (bilinear between them,
            // constant beyond the outer ones), and the map moves by far less than a thousandth
            // of a pixel from a line over a cell: each run of pixels between two centres takes
            // exact positions at its ends and a line between (the cubic phases are 1/128 px).
            // A local correction bends the segment's source positions: bound them all (the block
            // must hold every tap the loop below reads); on a line the ends bound a run.
            var lo = (min(ax, bx), min(ay, by)), hi = (max(ax, bx), max(ay, by))
            @inline(__always) func exact(_ x: Int) -> (Float, Float)? {
                let o = f.value(atX: x, y: y), fx = Float(x)
                let nx = m0 * fx + m2 + (m0 * o.x + m1 * o.y), ny = m3 * fx + m5 + (m3 * o.x + m4 * o.y)
                let d = m6 * fx + m8 + (m6 * o.x + m7 * o.y)
                guard d > 1e-12 else { return nil }
                return (nx / d, ny / d)
            }
            let cellF = Float(f.cell), lastCentre = f.columns - 1
            var x = x0
            while x < x1 {
                // The run of x: the pixels up to the next cell centre (none past the last one).
                let k = min(max(Int(((Float(x) + 0.5) / cellF - 0.5).rounded(.down)), -1), lastCentre)
                let next = k < lastCentre ? (Float(k + 1) + 0.5) * cellF - 0.5 : Float.infinity
                let end = next.isFinite ? max(x, min(x1 - 1, Int(next.rounded(.up)) - 1)) : x1 - 1
                guard let a = exact(x), let b = exact(end) else { return false }
                let n = end - x, t = n > 0 ? 1 / Float(n) : 0
                let sx = (b.0 - a.0) * t, sy = (b.1 - a.1) * t
                let base = 2 &* (x &- x0)
                for j in 0...n {
                    pos[base &+ 2 &* j] = a.0 + sx * Float(j)
                    pos[base &+ 2 &* j &+ 1] = a.1 + sy * Float(j)
                }
                lo = (min(lo.0, a.0, b.0), min(lo.1, a.1, b.1))
                hi = (max(hi.0, a.0, b.0), max(hi.1, a.1, b.1))
                x = end + 1
            }
            (ax, ay, bx, by) = (lo.0, lo.1, hi.0, hi.1)
        }
        let (rowLo, rowHi) = Self.tapSpan(ay, by, count: h), (colLo, colHi) = Self.tapSpan(ax, bx, count: w)
        guard cache.prepare(src, w: w, lo: colLo, hi: colHi, rowLo: rowLo, rowHi: rowHi) else { return false }
        // Source row r is in slot r & mask, from column cache.colLo.
        let stride = cache.stride, mask = Cache.rows - 1, block = cache.storage
        let colBase = cache.colLo
        let table = interpolation == .catmullRom ? CubicTable.catmullRom : CubicTable.keys
        let steps = Float(CubicTable.steps)
        return table.weights.withUnsafeBufferPointer { lut in
            @inline(__always) func pixel(_ i: Int) {
                let (sx, sy) = positions.map { ($0[2 &* i], $0[2 &* i &+ 1]) } ?? source(x0 &+ i)
                let o = i &* 3
                guard sx >= -eps, sy >= -eps, sx <= maxX + eps, sy <= maxY + eps else {
                    valid[i] = 0
                    out[o] = 0
                    out[o &+ 1] = 0
                    out[o &+ 2] = 0
                    return
                }
                valid[i] = 1
                let cx = min(max(sx, 0), maxX), cy = min(max(sy, 0), maxY)
                let ix = Int(cx), iy = Int(cy)  // cx, cy >= 0: truncation is the floor
                let wx = lut[Int((cx - Float(ix)) * steps + 0.5)], wy = lut[Int((cy - Float(iy)) * steps + 0.5)]
                // Tap positions inside the block (edges clamped to the frame, as in the direct path).
                let c0: Int, c1: Int, c2: Int, c3: Int, r0: Int, r1: Int, r2: Int, r3: Int
                // Wrapping arithmetic: every offset is inside the block converted above (the
                // taps are clamped to the frame, and the block spans the segment's taps).
                if ix >= 1 && ix + 2 < w && iy >= 1 && iy + 2 < h {
                    c0 = (ix &- 1 &- colBase) &* 3
                    c1 = c0 &+ 3
                    c2 = c0 &+ 6
                    c3 = c0 &+ 9
                    r0 = ((iy &- 1) & mask) &* stride
                    r1 = (iy & mask) &* stride
                    r2 = ((iy &+ 1) & mask) &* stride
                    r3 = ((iy &+ 2) & mask) &* stride
                } else {
                    c0 = (max(ix - 1, 0) - colBase) * 3
                    c1 = (ix - colBase) * 3
                    c2 = (min(ix + 1, w - 1) - colBase) * 3
                    c3 = (min(ix + 2, w - 1) - colBase) * 3
                    r0 = (max(iy - 1, 0) & mask) * stride
                    r1 = (iy & mask) * stride
                    r2 = (min(iy + 1, h - 1) & mask) * stride
                    r3 = (min(iy + 2, h - 1) & mask) * stride
                }
                let upper: SIMD4<Float> =
                    wy[0] * Self.tapRow(block + r0, c0, c1, c2, c3, wx) + wy[1]
                    * Self.tapRow(block + r1, c0, c1, c2, c3, wx)
                let lower: SIMD4<Float> =
                    wy[2] * Self.tapRow(block + r2, c0, c1, c2, c3, wx) + wy[3]
                    * Self.tapRow(block + r3, c0, c1, c2, c3, wx)
                let acc = upper + lower
                out[o] = min(max(acc[0], 0), 255)
                out[o &+ 1] = min(max(acc[1], 0), 255)
                out[o &+ 2] = min(max(acc[2], 0), 255)
            }
            var i = 0
            let count = x1 - x0
            // With a local correction, four pixels a step where their source positions share a row
            // of taps and their tap origins are consecutive columns, all inside the frame (most of
            // a frame: the field moves slowly from pixel to pixel): each of the 4 source rows is
            // filtered horizontally as in the two-pass path (3 vector loads a tap, a weight a
            // lane), and the 4 results combined vertically, a weight a lane. The same positions,
            // taps and table weights as `pixel`.
            if let pos = positions, w <= Quad.maxExtent, h <= Quad.maxExtent {
                let zero = SIMD4<Float>(), full = SIMD4<Float>(repeating: 255)
                @inline(__always) func clamped(_ v: SIMD4<Float>) -> SIMD4<Float> {
                    let low = v.replacing(with: zero, where: v .< zero)
                    return low.replacing(with: full, where: low .> full)
                }
                let o = UnsafeMutableRawPointer(out), p = UnsafeRawPointer(pos)
                // Eight pixels a step where the CPU has AVX2 (CKernels: lane by lane the same
                // arithmetic as below, the same bits); a step it cannot take falls to the loop's.
                let eight = evn_cpu_has_avx2() != 0
                var rows = evn_warp_rows(
                    positions: pos, block: block, stride: stride, mask: mask, col_base: colBase, width: w, height: h,
                    lut: UnsafeRawPointer(lut.baseAddress!).assumingMemoryBound(to: Float.self))
                while i &+ 4 <= count {
                    if eight && i &+ 8 <= count {
                        let j = evn_warp_cubic_rgb_field8_avx2(&rows, i, count, out, valid)
                        if j != i {
                            i = j
                            continue
                        }
                    }
                    // x0 y0 x1 y1, x2 y2 x3 y3 -> x0 x1 x2 x3, y0 y1 y2 y3
                    let a = p.loadUnaligned(fromByteOffset: i &* 8, as: SIMD4<Float>.self)
                    let b = p.loadUnaligned(fromByteOffset: i &* 8 &+ 16, as: SIMD4<Float>.self)
                    let qx = Quad.fixed(SIMD4(lowHalf: a.evenHalf, highHalf: b.evenHalf)),
                        qy = Quad.fixed(SIMD4(lowHalf: a.oddHalf, highHalf: b.oddHalf))
                    let cx = qx &>> 7, ry = qy &>> 7
                    let ix = Int(cx[0]), iy = Int(ry[0])
                    guard Quad.allTrue(cx &- SIMD4(repeating: cx[0]) .== SIMD4(0, 1, 2, 3)),
                        Quad.allTrue(ry .== SIMD4(repeating: ry[0])),
                        ix >= 1, ix &+ 5 < w, iy >= 1, iy &+ 2 < h
                    else {
                        pixel(i)
                        pixel(i &+ 1)
                        pixel(i &+ 2)
                        pixel(i &+ 3)
                        i &+= 4
                        continue
                    }
                    let lx = Quad.rows(qx, lut), ly = Quad.rows(qy, lut)
                    @inline(__always) func filtered(_ r: Int) -> (SIMD4<Float>, SIMD4<Float>, SIMD4<Float>) {
                        let q = UnsafeRawPointer(block + (r & mask) &* stride + (ix &- 1 &- colBase) &* 3)
                        let t0 = Quad.taps(q, lx, 0), t1 = Quad.taps(q + 12, lx, 1), t2 = Quad.taps(q + 24, lx, 2),
                            t3 = Quad.taps(q + 36, lx, 3)
                        return (
                            (t0.0 + t1.0) + (t2.0 + t3.0), (t0.1 + t1.1) + (t2.1 + t3.1), (t0.2 + t1.2) + (t2.2 + t3.2)
                        )
                    }
                    let v0 = Quad.weighted(filtered(iy &- 1), ly, 0), v1 = Quad.weighted(filtered(iy), ly, 1)
                    let v2 = Quad.weighted(filtered(iy &+ 1), ly, 2), v3 = Quad.weighted(filtered(iy &+ 2), ly, 3)
                    o.storeBytes(
                        of: clamped((v0.0 + v1.0) + (v2.0 + v3.0)), toByteOffset: i &* 12, as: SIMD4<Float>.self)
                    o.storeBytes(
                        of: clamped((v0.1 + v1.1) + (v2.1 + v3.1)), toByteOffset: i &* 12 &+ 16, as: SIMD4<Float>.self)
                    o.storeBytes(
                        of: clamped((v0.2 + v1.2) + (v2.2 + v3.2)), toByteOffset: i &* 12 &+ 32, as: SIMD4<Float>.self)
                    UnsafeMutableRawPointer(valid + i).storeBytes(of: 0x0101_0101 as UInt32, as: UInt32.self)
                    i &+= 4
                }
            }
            while i < count {
                pixel(i)
                i &+= 1
            }
            return true
        }
    }

    /// 8-bit RGB cubic in two separable passes (see ``Cache``): the horizontal pass of the
    /// source rows this output row needs comes from `cache` (computed once per source row while
    /// a segment walks down), then one vertical 4-tap pass per pixel. Validity is decided on the
    /// exact source position, as on the other paths. Returns false (nothing written) when the
    /// segment spans too many source rows or leaves the map's half-plane.
    @inlinable
    func rowCubicRGB8TwoPass(
        _ src: UnsafePointer<UInt8>, _ m: [Float], _ y: Int, _ x0: Int, _ x1: Int,
        _ out: UnsafeMutablePointer<Float>, _ valid: UnsafeMutablePointer<UInt8>,
        _ cache: Cache
    ) -> Bool {
        let w = width, h = height
        let fy = Float(y), maxX = Float(w - 1), maxY = Float(h - 1), eps: Float = 1e-3
        let (m0, m2, m3, m5, m6, m8) = (m[0], m[1] * fy + m[2], m[3], m[4] * fy + m[5], m[6], m[7] * fy + m[8])
        let projective = m6 != 0 || m[7] != 0
        @inline(__always) func source(_ x: Int) -> (Float, Float) {
            let fx = Float(x)
            let nx = m0 * fx + m2, ny = m3 * fx + m5
            guard projective else { return (nx, ny) }
            let d = m6 * fx + m8
            return d > 1e-12 ? (nx / d, ny / d) : (-1e9, -1e9)
        }
        let (_, ay) = source(x0), (_, by) = source(x1 - 1)
        guard ay > -1e8, by > -1e8, ay.isFinite, by.isFinite else { return false }
        let (rowLo, rowHi) = Self.tapSpan(ay, by, count: h)
        let table = interpolation == .catmullRom ? CubicTable.catmullRom : CubicTable.keys
        return table.weights.withUnsafeBufferPointer { lut in
            guard cache.preparePass(src, w: w, h: h, x0: x0, x1: x1, m: m, rowLo: rowLo, rowHi: rowHi, lut: lut) else {
                return false
            }
            let stride = cache.stride, mask = Cache.rows - 1
            let rows = UnsafeRawPointer(cache.storage)
            let steps = Float(CubicTable.steps)
            @inline(__always) func slot(_ r: Int) -> UnsafeRawPointer { rows + (r & mask) &* stride &* 4 }
            // Output pixel i, alone: validity, rows clamped to the frame (every row read is in
            // rowLo...rowHi, the taps of sy clamped, prepared above), weights from the table.
            @inline(__always) func pixel(_ i: Int) {
                let (sx, sy) = source(x0 &+ i)
                let o = i &* 3
                guard sx >= -eps, sy >= -eps, sx <= maxX + eps, sy <= maxY + eps else {
                    valid[i] = 0
                    out[o] = 0
                    out[o &+ 1] = 0
                    out[o &+ 2] = 0
                    return
                }
                let cy = min(max(sy, 0), maxY)
                let iy = Int(cy)  // cy >= 0: truncation is the floor
                let wy = lut[Int((cy - Float(iy)) * steps + 0.5)], col = i &* 12
                // (Each load takes the pixel's RGB and one float past it: the slots have room.)
                let v0 = slot(max(iy - 1, 0)).loadUnaligned(fromByteOffset: col, as: SIMD4<Float>.self)
                let v1 = slot(iy).loadUnaligned(fromByteOffset: col, as: SIMD4<Float>.self)
                let v2 = slot(min(iy + 1, h - 1)).loadUnaligned(fromByteOffset: col, as: SIMD4<Float>.self)
                let v3 = slot(min(iy + 2, h - 1)).loadUnaligned(fromByteOffset: col, as: SIMD4<Float>.self)
                let acc: SIMD4<Float> = (wy[0] * v0 + wy[1] * v1) + (wy[2] * v2 + wy[3] * v3)
                out[o] = min(max(acc[0], 0), 255)
                out[o &+ 1] = min(max(acc[1], 0), 255)
                out[o &+ 2] = min(max(acc[2], 0), 255)
                valid[i] = 1
            }
            let count = x1 - x0
            var i = 0
            if h <= Quad.maxExtent {
                // Along the row the source position moves monotonically (a homography's
                // denominator is linear, positive where the pixels are valid), so the valid pixels
                // are one run: found from the ends, with `pixel`'s own test.
                @inline(__always) func isValid(_ i: Int) -> Bool {
                    let (sx, sy) = source(x0 &+ i)
                    return sx >= -eps && sy >= -eps && sx <= maxX + eps && sy <= maxY + eps
                }
                var end = count
                while end > 0 && !isValid(end &- 1) { end &-= 1 }
                while i < end && !isValid(i) {
                    pixel(i)
                    i &+= 1
                }
                for k in end..<count { pixel(k) }
                // Four valid pixels a step where they share their rows of taps, all inside the
                // frame (a row of a burst frame, but where it crosses a source row or an edge):
                // each row is then 3 vector loads of 4 pixels' interleaved RGB, and the output 3
                // vector stores. Positions come from knots every 64 pixels, exact (the arithmetic
                // of `source`), and a straight line between them: along a row a burst frame's
                // homography bends the source row by far less than a ten-thousandth of a pixel
                // over 64 pixels (checked at each interval's middle; where it bends more, the
                // interval is sampled pixel by pixel). On a line the positions are monotonic, so
                // the first and last pixel of 4 tell whether all 4 share their rows, and a phase.
                let zero = SIMD4<Float>(), full = SIMD4<Float>(repeating: 255)
                let o = UnsafeMutableRawPointer(out)
                // Whether the 4 usually share a phase (see preparePass): along an output row the
                // source row moves by the map's rotation, so only for a map with almost none.
                let shared = abs(by - ay) / Float(max(1, count &- 1)) * 384 < 0.1
                @inline(__always) func clamped(_ v: SIMD4<Float>) -> SIMD4<Float> {
                    let low = v.replacing(with: zero, where: v .< zero)
                    return low.replacing(with: full, where: low .> full)
                }
                let lanes = SIMD4<Float>(0, 1, 2, 3)
                // Eight pixels a step where the CPU has AVX2, as in the horizontal pass.
                let eight = evn_cpu_has_avx2() != 0
                var pass = evn_warp_pass(
                    source: cache.storage, stride: stride, mask: mask,
                    lut: UnsafeRawPointer(lut.baseAddress!).assumingMemoryBound(to: Float.self),
                    out: out, valid: valid, s0: 0, slope: 0, lo: rowLo, hi: rowHi, base: 0)
                while i &+ 4 <= end {
                    let n = min(Quad.knotSpacing, (end &- i) & ~3)
                    let s0 = source(x0 &+ i).1, s1 = source(x0 &+ i &+ n &- 1).1
                    let slope = (s1 - s0) / Float(n &- 1), half = (n &- 1) / 2
                    guard abs(source(x0 &+ i &+ half).1 - (s0 + slope * Float(half))) <= 1e-3 else {
                        for k in i..<(i &+ n) { pixel(k) }
                        i &+= n
                        continue
                    }
                    pass.s0 = s0
                    pass.slope = slope
                    pass.base = i
                    var g = 0
                    while g < n {
                        if eight {
                            g = evn_warp_vertical_pass_avx2(&pass, g, n)
                            if g >= n { break }
                        }
                        let first = s0 + slope * Float(g), last = s0 + slope * Float(g &+ 3)
                        let q0 = Quad.fixed(first), q3 = Quad.fixed(last)
                        let r = Int(q0 &>> 7)
                        let k = i &+ g
                        g &+= 4
                        guard q3 &>> 7 == q0 &>> 7, r &- 1 >= rowLo, r &+ 2 <= rowHi else {
                            pixel(k)
                            pixel(k &+ 1)
                            pixel(k &+ 2)
                            pixel(k &+ 3)
                            continue
                        }
                        let col = k &* 12
                        let p0 = slot(r &- 1) + col, p1 = slot(r) + col, p2 = slot(r &+ 1) + col,
                            p3 = slot(r &+ 2) + col
                        if shared && q0 == q3 {
                            // One phase (a map without rotation, or a run of one): its weights.
                            let wy = lut[Int(q0 & 127)]
                            let w0 = SIMD4(repeating: wy[0]), w1 = SIMD4(repeating: wy[1]),
                                w2 = SIMD4(repeating: wy[2]), w3 = SIMD4(repeating: wy[3])
                            @inline(__always) func part(_ k: Int) -> SIMD4<Float> {
                                clamped(
                                    (w0 * p0.loadUnaligned(fromByteOffset: k, as: SIMD4<Float>.self) + w1
                                        * p1.loadUnaligned(fromByteOffset: k, as: SIMD4<Float>.self))
                                        + (w2 * p2.loadUnaligned(fromByteOffset: k, as: SIMD4<Float>.self) + w3
                                            * p3.loadUnaligned(fromByteOffset: k, as: SIMD4<Float>.self)))
                            }
                            o.storeBytes(of: part(0), toByteOffset: col, as: SIMD4<Float>.self)
                            o.storeBytes(of: part(16), toByteOffset: col &+ 16, as: SIMD4<Float>.self)
                            o.storeBytes(of: part(32), toByteOffset: col &+ 32, as: SIMD4<Float>.self)
                        } else {
                            let q = Quad.fixed(SIMD4(repeating: s0) + slope * (SIMD4(repeating: Float(g &- 4)) + lanes))
                            let l = Quad.rows(q, lut)
                            let t0 = Quad.taps(p0, l, 0), t1 = Quad.taps(p1, l, 1), t2 = Quad.taps(p2, l, 2),
                                t3 = Quad.taps(p3, l, 3)
                            o.storeBytes(
                                of: clamped((t0.0 + t1.0) + (t2.0 + t3.0)), toByteOffset: col, as: SIMD4<Float>.self)
                            o.storeBytes(
                                of: clamped((t0.1 + t1.1) + (t2.1 + t3.1)), toByteOffset: col &+ 16,
                                as: SIMD4<Float>.self)
                            o.storeBytes(
                                of: clamped((t0.2 + t1.2) + (t2.2 + t3.2)), toByteOffset: col &+ 32,
                                as: SIMD4<Float>.self)
                        }
                        UnsafeMutableRawPointer(valid + k).storeBytes(of: 0x0101_0101 as UInt32, as: UInt32.self)
                    }
                    i &+= n
                }
                while i < end {
                    pixel(i)
                    i &+= 1
                }
                return true
            }
            while i < count {
                pixel(i)
                i &+= 1
            }
            return true
        }
    }

    /// Four RGB taps of a Float row, weighted (each tap one unaligned 4-float load).
    @inlinable @inline(__always)
    static func tapRow(_ q: UnsafePointer<Float>, _ c0: Int, _ c1: Int, _ c2: Int, _ c3: Int, _ w: SIMD4<Float>)
        -> SIMD4<Float>
    {
        let raw = UnsafeRawPointer(q)
        let p0 = raw.loadUnaligned(fromByteOffset: c0 &* 4, as: SIMD4<Float>.self)
        let p1 = raw.loadUnaligned(fromByteOffset: c1 &* 4, as: SIMD4<Float>.self)
        let p2 = raw.loadUnaligned(fromByteOffset: c2 &* 4, as: SIMD4<Float>.self)
        let p3 = raw.loadUnaligned(fromByteOffset: c3 &* 4, as: SIMD4<Float>.self)
        let left: SIMD4<Float> = w[0] * p0 + w[1] * p1
        let right: SIMD4<Float> = w[2] * p2 + w[3] * p3
        return left + right
    }
}
