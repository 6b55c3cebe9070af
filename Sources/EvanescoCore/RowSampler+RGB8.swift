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
        let w = width, h = height, map = RowMap(m, y: y)
        @inline(__always) func source(_ x: Int) -> (Float, Float) {
            guard let f = offsets else { return map.source(x) }
            return map.source(x, corrected: f.value(atX: x, y: y))
        }
        var (ax, ay) = source(x0), (bx, by) = source(x1 - 1)
        // A segment that leaves the frame's projective half-plane takes the direct path.
        guard ax > -1e8, bx > -1e8 else { return false }
        // With a local correction, every pixel's source position, computed once here (the
        // field along the row in one call) into the cache's scratch row, which this path does
        // not otherwise use, and read back by the loop below.
        let positions: UnsafeMutablePointer<Float>? = offsets == nil ? nil : cache.scratch
        if let f = offsets, let pos = positions {
            guard x1 - x0 <= cache.capacityPixels,
                let bounds = Self.fieldPositions(f, map: map, y: y, x0: x0, x1: x1, into: pos)
            else { return false }
            (ax, ay, bx, by) = (bounds[0], bounds[1], bounds[2], bounds[3])
        }
        let (rowLo, rowHi) = Self.tapSpan(ay, by, count: h), (colLo, colHi) = Self.tapSpan(ax, bx, count: w)
        guard cache.prepare(src, w: w, lo: colLo, hi: colHi, rowLo: rowLo, rowHi: rowHi) else { return false }
        let table = interpolation == .catmullRom ? CubicTable.catmullRom : CubicTable.keys
        return table.weights.withUnsafeBufferPointer { lut in
            // Source row r is in slot r & mask, from column cache.colLo.
            let taps = BlockTaps(
                block: cache.storage, stride: cache.stride, mask: Cache.rows - 1, colBase: cache.colLo, width: w,
                height: h, lut: lut)
            @inline(__always) func pixel(_ i: Int) {
                let (sx, sy) = positions.map { ($0[2 &* i], $0[2 &* i &+ 1]) } ?? source(x0 &+ i)
                taps.pixel(i, sx, sy, out, valid)
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
                    positions: pos, block: taps.block, stride: taps.stride, mask: taps.mask, col_base: taps.colBase,
                    width: w, height: h, lut: UnsafeRawPointer(lut.baseAddress!).assumingMemoryBound(to: Float.self))
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

    /// Every pixel's exact source position under the local correction `f` (the field bilinear
    /// between its cell centres), eight at a time in CKernels, into `pos` (x, y pairs), and their
    /// bounds (min x, min y, max x, max y): the block must hold every tap the row reads. Nil when
    /// a position is beyond the map's horizon.
    @usableFromInline
    static func fieldPositions(
        _ f: DisplacementField, map: RowMap, y: Int, x0: Int, x1: Int, into pos: UnsafeMutablePointer<Float>
    ) -> SIMD4<Float>? {
        var bounds = SIMD4<Float>.zero
        let ok = f.dx.withUnsafeBufferPointer { dx in
            f.dy.withUnsafeBufferPointer { dy in
                var p = evn_field_positions(
                    dx: dx.baseAddress, dy: dy.baseAddress, columns: f.columns, rows: f.rows, cell: f.cell, y: y,
                    m: (map.m0, map.m1, map.m2, map.m3, map.m4, map.m5, map.m6, map.m7, map.m8))
                return withUnsafeMutablePointer(to: &bounds) {
                    $0.withMemoryRebound(to: Float.self, capacity: 4) {
                        evn_field_positions_row(&p, x0, x1 - x0, pos, $0) != 0
                    }
                }
            }
        }
        return ok ? bounds : nil
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
        let w = width, h = height, map = RowMap(m, y: y)
        let (_, ay) = map.source(x0), (_, by) = map.source(x1 - 1)
        guard ay > -1e8, by > -1e8, ay.isFinite, by.isFinite else { return false }
        let (rowLo, rowHi) = Self.tapSpan(ay, by, count: h)
        let table = interpolation == .catmullRom ? CubicTable.catmullRom : CubicTable.keys
        return table.weights.withUnsafeBufferPointer { lut in
            guard cache.preparePass(src, w: w, h: h, x0: x0, x1: x1, m: m, rowLo: rowLo, rowHi: rowHi, lut: lut) else {
                return false
            }
            let taps = SlotTaps(
                rows: cache.storage, stride: cache.stride, mask: Cache.rows - 1, width: w, height: h, lut: lut)
            let count = x1 - x0
            guard h <= Quad.maxExtent else {
                for i in 0..<count {
                    let (sx, sy) = map.source(x0 &+ i)
                    taps.pixel(i, sx, sy, out, valid)
                }
                return true
            }
            Self.verticalPass(taps, map: map, x0: x0, count: count, rowLo: rowLo, rowHi: rowHi, out, valid)
            return true
        }
    }

    /// The two-pass row's vertical pass over `count` output pixels from `x0`, from the slots
    /// `taps` reads. Along the row the source position moves monotonically (a homography's
    /// denominator is linear, positive where the pixels are valid), so the valid pixels are one
    /// run: found from the ends, with the pixel's own test. Groups of four valid pixels that share
    /// their rows of taps, all inside the frame (a row of a burst frame, but where it crosses a
    /// source row or an edge), go to CKernels (eight a step where two groups qualify): each row is
    /// then 3 vector loads of 4 pixels' interleaved RGB, and the output 3 vector stores. Positions
    /// come from knots every 64 pixels, exact (the arithmetic of the map), and a straight line
    /// between them: along a row a burst frame's homography bends the source row by far less than
    /// a ten-thousandth of a pixel over 64 pixels (checked at each interval's middle; where it
    /// bends more, the interval is sampled pixel by pixel). On a line the positions are
    /// monotonic, so the first and last pixel of 4 tell whether all 4 share their rows, and a
    /// phase. A group that does not qualify takes the pixel path.
    @inlinable
    static func verticalPass(
        _ taps: SlotTaps, map: RowMap, x0: Int, count: Int, rowLo: Int, rowHi: Int,
        _ out: UnsafeMutablePointer<Float>, _ valid: UnsafeMutablePointer<UInt8>
    ) {
        @inline(__always) func pixel(_ i: Int) {
            let (sx, sy) = map.source(x0 &+ i)
            taps.pixel(i, sx, sy, out, valid)
        }
        @inline(__always) func isValid(_ i: Int) -> Bool {
            let (sx, sy) = map.source(x0 &+ i)
            return taps.bounds.contains(sx, sy)
        }
        var i = 0, end = count
        while end > 0 && !isValid(end &- 1) { end &-= 1 }
        while i < end && !isValid(i) {
            pixel(i)
            i &+= 1
        }
        for k in end..<count { pixel(k) }
        var pass = evn_warp_pass(
            source: taps.rows.assumingMemoryBound(to: Float.self),
            stride: taps.stride, mask: taps.mask,
            lut: UnsafeRawPointer(taps.lut.baseAddress!).assumingMemoryBound(to: Float.self),
            out: out, valid: valid, s0: 0, slope: 0, lo: rowLo, hi: rowHi, base: 0)
        while i &+ 4 <= end {
            let s0 = map.source(x0 &+ i).1
            let (n, s1) = Quad.interval(available: end &- i, start: s0) { map.source(x0 &+ i &+ $0).1 }
            let slope = (s1 - s0) / Float(n &- 1), half = (n &- 1) / 2
            guard abs(map.source(x0 &+ i &+ half).1 - (s0 + slope * Float(half))) <= Quad.lineTolerance else {
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
