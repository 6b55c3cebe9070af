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
            // Every pixel's exact position (the field bilinear between its cell centres), eight
            // at a time in CKernels, and their bounds: the block must hold every tap the loop
            // below reads.
            var bounds = SIMD4<Float>.zero
            let ok = f.dx.withUnsafeBufferPointer { dx in
                f.dy.withUnsafeBufferPointer { dy in
                    var map = evn_field_positions(
                        dx: dx.baseAddress, dy: dy.baseAddress, columns: f.columns, rows: f.rows, cell: f.cell, y: y,
                        m: (m0, m1, m2, m3, m4, m5, m6, m7, m8))
                    return withUnsafeMutablePointer(to: &bounds) {
                        $0.withMemoryRebound(to: Float.self, capacity: 4) {
                            evn_field_positions_row(&map, x0, x1 - x0, pos, $0) != 0
                        }
                    }
                }
            }
            guard ok else { return false }
            (ax, ay, bx, by) = (bounds[0], bounds[1], bounds[2], bounds[3])
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
            // With a local correction, the pixels go to CKernels: groups of four whose source
            // positions share a row of taps and whose tap origins are consecutive columns, all
            // inside the frame (most of a frame: the field moves slowly from pixel to pixel), eight
            // a step where two groups qualify, each of the 4 source rows filtered horizontally, a
            // weight a lane, and the 4 results combined vertically; a group where the field bends
            // (rows or columns differ; an eighth of the groups on the 12 px parallax bursts),
            // pixel by pixel, with the same arithmetic. The same taps and table weights as
            // `pixel`, which takes a group of four whose taps reach past the frame's edge.
            if let pos = positions, w <= Quad.maxExtent, h <= Quad.maxExtent {
                var rows = evn_warp_rows(
                    positions: pos, block: block, stride: stride, mask: mask, col_base: colBase, width: w, height: h,
                    lut: UnsafeRawPointer(lut.baseAddress!).assumingMemoryBound(to: Float.self))
                while i &+ 4 <= count {
                    i = evn_warp_cubic_rgb_field(&rows, i, count, out, valid)
                    guard i &+ 4 <= count else { break }
                    pixel(i)
                    pixel(i &+ 1)
                    pixel(i &+ 2)
                    pixel(i &+ 3)
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
                // Groups of four valid pixels that share their rows of taps, all inside the frame
                // (a row of a burst frame, but where it crosses a source row or an edge), go to
                // CKernels (eight a step where two groups qualify): each row is then 3 vector loads
                // of 4 pixels' interleaved RGB, and the output 3 vector stores. Positions come
                // from knots every 64 pixels, exact (the arithmetic of `source`), and a straight
                // line between them: along a row a burst frame's homography bends the source row
                // by far less than a ten-thousandth of a pixel over 64 pixels (checked at each
                // interval's middle; where it bends more, the interval is sampled pixel by pixel).
                // On a line the positions are monotonic, so the first and last pixel of 4 tell
                // whether all 4 share their rows, and a phase. A group that does not qualify
                // takes `pixel`.
                var pass = evn_warp_pass(
                    source: cache.storage, stride: stride, mask: mask,
                    lut: UnsafeRawPointer(lut.baseAddress!).assumingMemoryBound(to: Float.self),
                    out: out, valid: valid, s0: 0, slope: 0, lo: rowLo, hi: rowHi, base: 0)
                while i &+ 4 <= end {
                    let s0 = source(x0 &+ i).1
                    let (n, s1) = Quad.interval(available: end &- i, start: s0) { source(x0 &+ i &+ $0).1 }
                    let slope = (s1 - s0) / Float(n &- 1), half = (n &- 1) / 2
                    guard abs(source(x0 &+ i &+ half).1 - (s0 + slope * Float(half))) <= Quad.lineTolerance else {
                        for k in i..<(i &+ n) { pixel(k) }
                        i &+= n
                        continue
                    }
                    pass.s0 = s0
                    pass.slope = slope
                    pass.base = i
                    var g = evn_warp_vertical_pass(&pass, 0, n)
                    while g < n {
                        for k in (i &+ g)..<(i &+ g &+ 4) { pixel(k) }
                        g = evn_warp_vertical_pass(&pass, g &+ 4, n)
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
