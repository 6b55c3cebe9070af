import CKernels

extension RowSampler {
    /// Rows kept between calls for 8-bit RGB cubic sampling, walking a column segment down
    /// consecutive output rows.
    ///
    /// Without a local correction it holds each source row already interpolated horizontally
    /// at the segment's output columns (the first of two separable passes: for a homography,
    /// the output points that land on source row r form a line, so the source column for
    /// output column x on row r is exact); an output row is then one vertical 4-tap pass over
    /// these rows, 4 loads a pixel instead of 16. With a local correction it holds the source
    /// rows converted to Float, and every tap is one 4-float load.
    ///
    /// Any call order is correct (rows are keyed by source row, frame, segment and map, and the
    /// window moves when a segment leaves it); the walk down a segment is what makes it fast.
    /// One cache per thread; it may serve several frames in turn, but each frame walking its own
    /// cache is the point.
    public final class Cache: @unchecked Sendable {
        /// Ring slots (a power of two): rows one segment may span. A segment that spans more
        /// takes the per-pixel path, several times slower: with 16, a 512-pixel segment of a
        /// frame rolled by 1.2 degrees (a hand-held burst's) plus its field's parallax did, and
        /// that path was 13 % of a 20-frame close-range stack's time; with 32 it is gone (the
        /// ring's memory doubles, to 256 KB a frame and thread at 512 pixels).
        public static var rows: Int { 32 }
        let capacityColumns: Int
        @usableFromInline let stride: Int
        @usableFromInline let storage: UnsafeMutablePointer<Float>
        /// The source row held in each slot, or -1.
        var held: [Int]
        /// The first source column held, and how many.
        @usableFromInline var colLo = 0
        var cols = 0
        /// The frame whose rows are held (its samples' address and size).
        var source: UnsafeRawPointer? = nil
        var sourceWidth = 0
        /// What the slots hold: 0 nothing, 1 converted source rows, 2 horizontal-pass rows (for
        /// `segment` and `map`).
        var mode = 0
        var segment = 0..<0
        var map: [Float] = []
        @usableFromInline let capacityPixels: Int
        /// One source row's columns converted to Float, for the horizontal pass (or, on the
        /// locally corrected path, the segment's source positions).
        @usableFromInline let scratch: UnsafeMutablePointer<Float>

        /// - Parameter pixels: The longest output segment sampled through it.
        public init(pixels: Int) {
            capacityPixels = max(1, pixels)
            capacityColumns = max(1, pixels) + 80 + 64
            stride = max(capacityColumns * 3 + 1, capacityPixels * 4)
            storage = .allocate(capacity: Self.rows * stride + 8)
            storage.initialize(repeating: 0, count: Self.rows * stride + 8)
            scratch = .allocate(capacity: capacityColumns * 3 + 8)
            scratch.initialize(repeating: 0, count: capacityColumns * 3 + 8)
            held = Array(repeating: -1, count: Self.rows)
        }
        deinit {
            storage.deallocate()
            scratch.deallocate()
        }

        /// Forgets every row held: call it when a frame the cache served may have been freed
        /// (another could be allocated at its address).
        public func invalidate() { source = nil }

        /// Makes columns `lo...hi` of rows `rowLo...rowHi` of `src` (8-bit RGB, `w` x `h`) present.
        /// False when the columns do not fit (the caller takes the direct path).
        @usableFromInline
        func prepare(_ src: UnsafePointer<UInt8>, w: Int, lo: Int, hi: Int, rowLo: Int, rowHi: Int) -> Bool {
            guard hi - lo + 1 <= capacityColumns, rowHi - rowLo + 1 <= Self.rows else { return false }
            let raw = UnsafeRawPointer(src)
            if mode != 1 || raw != source || w != sourceWidth || lo < colLo || hi >= colLo + cols {
                // A new window: half the slack on each side, so a segment drifting with a
                // rotation stays inside for many rows.
                source = raw
                sourceWidth = w
                mode = 1
                colLo = max(0, lo - (capacityColumns - (hi - lo + 1)) / 2)
                cols = min(w, colLo + capacityColumns) - colLo
                if hi >= colLo + cols {
                    colLo = max(0, hi + 1 - capacityColumns)
                    cols = min(w, colLo + capacityColumns) - colLo
                }
                for i in held.indices { held[i] = -1 }
            }
            let n = cols * 3
            let storage = self.storage
            for r in rowLo...rowHi where held[r & (Self.rows - 1)] != r {
                let slot = r & (Self.rows - 1)
                Quad.convert(src + (r * w + colLo) * 3, n, into: storage + slot * stride)
                storage[slot * stride + n] = 0
                held[slot] = r
            }
            return true
        }

        /// Makes the horizontal pass of rows `rowLo...rowHi` of `src` (8-bit RGB, `w` x `h`)
        /// present for output columns `x0..<x1` under the output-to-frame map `m`: slot r holds,
        /// from output column x0 on, the RGB (3 floats a pixel) interpolated along source row r at
        /// the source column of the output point on row r, with the weights of `lut`. False when a row's line is
        /// degenerate or the
        /// rows do not fit (the caller takes another path).
        @usableFromInline
        func preparePass(
            _ src: UnsafePointer<UInt8>, w: Int, h: Int, x0: Int, x1: Int, m: [Float],
            rowLo: Int, rowHi: Int, lut: UnsafeBufferPointer<SIMD4<Float>>
        ) -> Bool {
            guard x1 - x0 <= capacityPixels, rowHi - rowLo + 1 <= Self.rows else { return false }
            let raw = UnsafeRawPointer(src)
            if mode != 2 || raw != source || w != sourceWidth || segment != x0..<x1 || map != m {
                source = raw
                sourceWidth = w
                mode = 2
                segment = x0..<x1
                map = m
                for i in held.indices { held[i] = -1 }
            }
            var converted: (lo: Int, hi: Int)? = nil
            defer {
                // The row below the last converted one, which a segment walking down its strip
                // converts next: its bytes are fetched while the other frames' rows are sampled.
                if let (lo, hi) = converted, rowHi + 1 < h {
                    evn_prefetch(src + ((rowHi + 1) * w + lo) * 3, (hi - lo + 1) * 3)
                }
            }
            for r in rowLo...rowHi where held[r & (Self.rows - 1)] != r {
                held[r & (Self.rows - 1)] = -1
                // Output points on source row r, and the source column of each.
                guard let line = SourceRowLine(m, row: r) else { return false }
                // The columns this row's taps read (one of margin: see rowCubicRGB8Cached),
                // converted to Float once (a vectorised loop), so each tap is one 4-float load.
                let (lo, hi) = RowSampler.tapSpan(line.sourceX(x0), line.sourceX(x1 - 1), count: w)
                guard hi - lo + 1 <= capacityColumns else { return false }
                let n = (hi - lo + 1) * 3
                converted = (lo, hi)
                // Through a local pointer: read from the class on every step, it would have to be
                // reloaded after each store, and the loop would not vectorise.
                let scratch = self.scratch
                Quad.convert(src + (r * w + lo) * 3, n, into: scratch)
                scratch[n] = 0
                Self.horizontalPass(
                    line, row: scratch, lo: lo, hi: hi, width: w, x0: x0, count: x1 - x0, lut: lut,
                    into: storage + (r & (Self.rows - 1)) * stride)
                held[r & (Self.rows - 1)] = r
            }
            return true
        }

        /// Interpolates `count` output pixels from `x0` along one source row, converted to Float
        /// (`row`, from column `lo`; `hi` its last), into `out` (3 floats a pixel, a fourth past the
        /// last that the slot has room for). Groups of four pixels whose tap origins are
        /// consecutive columns (a map near a translation, the burst's case), every tap inside the
        /// row, go to CKernels (eight a step where two groups qualify): each tap is then 3 vector
        /// loads of 4 pixels' interleaved RGB, weighted a lane each, or by one phase's weights
        /// where the group shares it (along a source row the phase changes slowly, by the map's
        /// scale and shear). Positions as in rowCubicRGB8TwoPass: exact at knots every 64 pixels, a
        /// line between, kept as the offset from the output column, e = sx - t, which is monotonic
        /// along the line: the first and last of 4 pixels tell whether their origins are
        /// consecutive (equal offsets' origins), and whether they share a phase. A group that does
        /// not qualify takes the pixel path.
        static func horizontalPass(
            _ line: SourceRowLine, row scratch: UnsafeMutablePointer<Float>, lo: Int, hi: Int, width w: Int, x0: Int,
            count: Int, lut: UnsafeBufferPointer<SIMD4<Float>>, into d: UnsafeMutablePointer<Float>
        ) {
            let steps = Float(CubicTable.steps)
            let row = UnsafeRawPointer(scratch), out = UnsafeMutableRawPointer(d)
            @inline(__always) func tap(_ col: Int) -> SIMD4<Float> {
                row.loadUnaligned(fromByteOffset: (col &- lo) &* 12, as: SIMD4<Float>.self)
            }
            // One pixel, taps clamped to the frame (its RGB, and a fourth float that the next
            // pixel overwrites: pixels are written in order, and the slot has room past the last).
            @inline(__always) func pixel(_ i: Int) {
                let cx = min(max(line.sourceX(x0 &+ i), Float(lo)), Float(hi))
                let ix = Int(cx)
                let wx = lut[Int((cx - Float(ix)) * steps + 0.5)]
                let v: SIMD4<Float>
                if ix >= 1 && ix + 2 < w {
                    v = (wx[0] * tap(ix &- 1) + wx[1] * tap(ix)) + (wx[2] * tap(ix &+ 1) + wx[3] * tap(ix &+ 2))
                } else {
                    v =
                        (wx[0] * tap(max(ix - 1, 0)) + wx[1] * tap(ix))
                        + (wx[2] * tap(min(ix + 1, w - 1)) + wx[3] * tap(min(ix + 2, w - 1)))
                }
                out.storeBytes(of: v, toByteOffset: i &* 12, as: SIMD4<Float>.self)
            }
            var i = 0
            if w <= Quad.maxExtent {
                var pass = evn_warp_pass(
                    source: scratch, stride: 0, mask: 0,
                    lut: UnsafeRawPointer(lut.baseAddress!).assumingMemoryBound(to: Float.self),
                    out: d, valid: nil, s0: 0, slope: 0, lo: lo, hi: hi, base: 0)
                while i &+ 4 <= count {
                    let s0 = line.sourceX(x0 &+ i)
                    let (n, s1) = Quad.interval(available: count &- i, start: s0) { line.sourceX(x0 &+ i &+ $0) }
                    let drift = (s1 - s0) / Float(n &- 1) - 1, half = (n &- 1) / 2
                    guard s0 > -1, s1 > -1,
                        abs(line.sourceX(x0 &+ i &+ half) - (s0 + (drift + 1) * Float(half))) <= Quad.lineTolerance
                    else {
                        for k in i..<(i &+ n) { pixel(k) }
                        i &+= n
                        continue
                    }
                    pass.s0 = s0
                    pass.slope = drift
                    pass.base = i
                    var g = evn_warp_horizontal_pass(&pass, 0, n)
                    while g < n {
                        for k in (i &+ g)..<(i &+ g &+ 4) { pixel(k) }
                        g = evn_warp_horizontal_pass(&pass, g &+ 4, n)
                    }
                    i &+= n
                }
            }
            while i < count {
                pixel(i)
                i &+= 1
            }
        }
    }
}

/// The output points that fall on one source row r (y = a + b x, sy = r solved for y) and the
/// source column of each: (al x + be) / (ga x + de).
struct SourceRowLine {
    let al: Float, be: Float, ga: Float, de: Float
    let projective: Bool

    /// Nil when the row's line is degenerate.
    init?(_ m: [Float], row r: Int) {
        let (m0, m1, m2, m3, m4, m5, m6, m7, m8) = (m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8])
        let fr = Float(r)
        let den = m4 - fr * m7
        guard abs(den) > 1e-6 else { return nil }
        let b = (fr * m6 - m3) / den, a = (fr * m8 - m5) / den
        (al, be, ga, de) = (m0 + m1 * b, m1 * a + m2, m6 + m7 * b, m7 * a + m8)
        projective = m6 != 0 || m7 != 0
    }

    /// The source column of output column `xi`; -1 beyond the map's horizon.
    @inline(__always)
    func sourceX(_ xi: Int) -> Float {
        let x = Float(xi)
        guard projective else { return al * x + be }
        let q = ga * x + de
        return q > 1e-12 ? (al * x + be) / q : -1
    }
}
