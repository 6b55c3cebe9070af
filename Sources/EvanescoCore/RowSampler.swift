import CKernels
/// Cubic weights for taps -1, 0, 1, 2 at phases 0, 1/128, ..., 1: looking them up costs two
/// loads instead of ~25 flops per axis, and the 1/256-px worst-case phase error is far below a
/// registration's accuracy.
@usableFromInline
struct CubicTable: Sendable {
    @usableFromInline static let steps = 128
    @usableFromInline let weights: [SIMD4<Float>]
    init(a: Float) {
        weights = (0...CubicTable.steps).map { i in
            let w = Kernels.cubicWeights(Float(i) / Float(CubicTable.steps), a: a)
            return SIMD4(w.0, w.1, w.2, w.3)
        }
    }
    @usableFromInline static let catmullRom = CubicTable(a: Interpolation.catmullRom.cubicParameter!)
    @usableFromInline static let keys = CubicTable(a: Interpolation.bicubic.cubicParameter!)
}

/// Four pixels at a time: the 8-bit RGB cubic warp's inner loops (``RowSampler/Cache`` and
/// ``RowSampler/rowCubicRGB8TwoPass(_:_:_:_:_:_:_:_:)``) take 4 consecutive output pixels per
/// step, their RGB interleaved in 3 vectors of 4 floats (`RGBR GBRG BRGB`), as the rows they read
/// and the output they write are laid out.
@usableFromInline
enum Quad {
    /// `round(v * 128)` for |v| < 16384, as integers: the source position in 1/128 px, so that
    /// `q >> 7` is the tap origin and `q & 127` the row of ``CubicTable`` (the table's phase,
    /// rounded to nearest; a phase that rounds up to 1 is phase 0 of the next pixel, the same
    /// weights). By the float-to-integer bit trick: no checked conversions.
    @inlinable @inline(__always)
    static func fixed(_ v: SIMD4<Float>) -> SIMD4<Int32> {
        let magic = SIMD4<Float>(repeating: 12_582_912)   // 1.5 * 2^23: the sum's low mantissa bits are the integer
        return unsafeBitCast(v * 128 + magic, to: SIMD4<Int32>.self) &- 0x4B40_0000
    }

    /// ``fixed(_:)`` of one value (the same rounding).
    @inlinable @inline(__always)
    static func fixed(_ v: Float) -> Int32 {
        Int32(bitPattern: (v * 128 + 12_582_912).bitPattern) &- 0x4B40_0000
    }

    /// Pixels between the knots where the fast loops compute a row's source positions exactly
    /// (a straight line between them): a multiple of 4.
    @usableFromInline static let knotSpacing = 64

    /// The table's weights for the phases `q & 127` of 4 pixels, as ``taps(_:_:_:_:_:)`` takes them.
    @inlinable @inline(__always)
    static func rows(_ q: SIMD4<Int32>, _ lut: UnsafeBufferPointer<SIMD4<Float>>) -> (SIMD4<Float>, SIMD4<Float>, SIMD4<Float>, SIMD4<Float>) {
        let ph = q & 127
        return (lut[Int(ph[0])], lut[Int(ph[1])], lut[Int(ph[2])], lut[Int(ph[3])])
    }

    /// 4 pixels' interleaved RGB at `p` (12 floats), weighted by tap `t` of each pixel's weights
    /// (`l0...l3`, rows of ``CubicTable``).
    @inlinable @inline(__always)
    static func taps(_ p: UnsafeRawPointer, _ l: (SIMD4<Float>, SIMD4<Float>, SIMD4<Float>, SIMD4<Float>), _ t: Int)
        -> (SIMD4<Float>, SIMD4<Float>, SIMD4<Float>) {
        (p.loadUnaligned(as: SIMD4<Float>.self) * SIMD4(l.0[t], l.0[t], l.0[t], l.1[t]),
         p.loadUnaligned(fromByteOffset: 16, as: SIMD4<Float>.self) * SIMD4(l.1[t], l.1[t], l.2[t], l.2[t]),
         p.loadUnaligned(fromByteOffset: 32, as: SIMD4<Float>.self) * SIMD4(l.2[t], l.3[t], l.3[t], l.3[t]))
    }

    /// 4 pixels' interleaved RGB (`v`, 3 vectors), weighted by tap `t` of each pixel's weights.
    @inlinable @inline(__always)
    static func weighted(_ v: (SIMD4<Float>, SIMD4<Float>, SIMD4<Float>), _ l: (SIMD4<Float>, SIMD4<Float>, SIMD4<Float>, SIMD4<Float>), _ t: Int)
        -> (SIMD4<Float>, SIMD4<Float>, SIMD4<Float>) {
        (v.0 * SIMD4(l.0[t], l.0[t], l.0[t], l.1[t]), v.1 * SIMD4(l.1[t], l.1[t], l.2[t], l.2[t]), v.2 * SIMD4(l.2[t], l.3[t], l.3[t], l.3[t]))
    }

    /// True when every lane is (the mask's 128 bits tested in two halves; the standard library's
    /// `all(_:)` reduces the lanes one by one).
    @inlinable @inline(__always)
    static func allTrue(_ m: SIMDMask<SIMD4<Int32>>) -> Bool {
        let bits = unsafeBitCast(m, to: (UInt64, UInt64).self)
        return bits.0 & bits.1 == .max
    }

    /// `n` bytes to floats, 16 a step.
    @inlinable @inline(__always)
    static func convert(_ s: UnsafePointer<UInt8>, _ n: Int, into d: UnsafeMutablePointer<Float>) {
        var j = 0
        let raw = UnsafeRawPointer(s), out = UnsafeMutableRawPointer(d)
        while j &+ 16 <= n {
            let v = raw.loadUnaligned(fromByteOffset: j, as: SIMD16<UInt8>.self)
            out.storeBytes(of: SIMD16<Float>(v), toByteOffset: j &* 4, as: SIMD16<Float>.self)
            j &+= 16
        }
        while j < n { d[j] = Float(s[j]); j &+= 1 }
    }

    /// The widest or tallest frame these loops take (``fixed(_:)``'s range, with room): a
    /// position beyond it comes out as an origin outside the frame, and the pixel takes the
    /// per-pixel path.
    @usableFromInline static let maxExtent = 16_000
}

/// The one warp sampler: samples a frame along row segments of an output grid through the
/// inverse of a homography. ``Image/warped(by:width:height:interpolation:)`` runs it row by row;
/// the burst stacker runs it tile by tile, so the pixels a merge samples and the pixels
/// `--save-frames` writes are the same.
///
/// An output pixel is valid when its source position lies inside `[0, w-1] x [0, h-1]` (to
/// 1/1000 px); taps beyond the edge are clamped. Values are floats on the sample's own scale;
/// cubic overshoot is clamped to 0...255 and 0...65535 for integer samples, never for float
/// samples (depth maps and linear light are not bounded by 1).
public struct RowSampler<Sample: PixelSample>: @unchecked Sendable {
    /// The sampled frame's size and channels.
    public let width: Int, height: Int, channels: Int
    /// Where the samples are: an image (held here, so its storage stays alive) or memory held
    /// elsewhere (a memory-mapped spill file), kept alive by `owner`.
    @usableFromInline let image: Image<Sample>?
    @usableFromInline let external: UnsafePointer<Sample>?
    @usableFromInline let owner: AnyObject?
    /// Output -> frame, row-major; nil when the frame is the output grid (identity).
    @usableFromInline let m: [Float]?
    public let interpolation: Interpolation
    /// A local correction on top of the homography (local alignment), or nil.
    public let offsets: DisplacementField?

    /// The rows (or columns) the cubic taps of source positions between `a` and `b` read, on an
    /// axis of `count` samples: the taps' span with one sample of margin on each side, clamped to
    /// the axis. (Between a segment's end points the positions can dip an ulp past an end
    /// point's, since a projective division is not monotonic in floating point, and across an
    /// integer that is one more row or column of taps.) `a` and `b` must not be NaN.
    @inlinable @inline(__always)
    static func tapSpan(_ a: Float, _ b: Float, count: Int) -> (lo: Int, hi: Int) {
        let last = Float(count - 1)
        return (max(0, Int(min(max(min(a, b), 0), last)) - 2), min(count - 1, Int(min(max(max(a, b), 0), last)) + 3))
    }

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
        /// Ring slots (a power of two): rows one segment may span.
        public static var rows: Int { 16 }
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
        deinit { storage.deallocate(); scratch.deallocate() }

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
                source = raw; sourceWidth = w; mode = 1
                colLo = max(0, lo - (capacityColumns - (hi - lo + 1)) / 2)
                cols = min(w, colLo + capacityColumns) - colLo
                if hi >= colLo + cols { colLo = max(0, hi + 1 - capacityColumns); cols = min(w, colLo + capacityColumns) - colLo }
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
        /// the source column of the output point on row r, with the weights of `lut`. False when a row's line is degenerate or the
        /// rows do not fit (the caller takes another path).
        @usableFromInline
        func preparePass(_ src: UnsafePointer<UInt8>, w: Int, h: Int, x0: Int, x1: Int, m: [Float],
                         rowLo: Int, rowHi: Int, lut: UnsafeBufferPointer<SIMD4<Float>>) -> Bool {
            guard x1 - x0 <= capacityPixels, rowHi - rowLo + 1 <= Self.rows else { return false }
            let raw = UnsafeRawPointer(src)
            if mode != 2 || raw != source || w != sourceWidth || segment != x0..<x1 || map != m {
                source = raw; sourceWidth = w; mode = 2; segment = x0..<x1; map = m
                for i in held.indices { held[i] = -1 }
            }
            let (m0, m1, m2, m3, m4, m5, m6, m7, m8) = (m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8])
            let projective = m6 != 0 || m7 != 0
            let steps = Float(CubicTable.steps)
            var converted: (lo: Int, hi: Int)? = nil
            defer {
                // The row below the last converted one, which a segment walking down its strip
                // converts next: its bytes are fetched while the other frames' rows are sampled.
                if let (lo, hi) = converted, rowHi + 1 < h { evn_prefetch(src + ((rowHi + 1) * w + lo) * 3, (hi - lo + 1) * 3) }
            }
            for r in rowLo...rowHi where held[r & (Self.rows - 1)] != r {
                let fr = Float(r)
                // Output points on source row r: y = a + b x (sy = r solved for y).
                let den = m4 - fr * m7
                guard abs(den) > 1e-6 else { held[r & (Self.rows - 1)] = -1; return false }
                let b = (fr * m6 - m3) / den, a = (fr * m8 - m5) / den
                let d = storage + (r & (Self.rows - 1)) * stride
                // The source column of output column x on this row: (al x + be) / (ga x + de).
                let al = m0 + m1 * b, be = m1 * a + m2, ga = m6 + m7 * b, de = m7 * a + m8
                @inline(__always) func sourceX(_ xi: Int) -> Float {
                    let x = Float(xi)
                    guard projective else { return al * x + be }
                    let q = ga * x + de
                    return q > 1e-12 ? (al * x + be) / q : -1
                }
                // The columns this row's taps read (one of margin: see rowCubicRGB8Cached),
                // converted to Float once (a vectorised loop), so each tap is one 4-float load.
                let (lo, hi) = RowSampler.tapSpan(sourceX(x0), sourceX(x1 - 1), count: w)
                guard hi - lo + 1 <= capacityColumns else { held[r & (Self.rows - 1)] = -1; return false }
                let n = (hi - lo + 1) * 3
                let s = src + (r * w + lo) * 3
                converted = (lo, hi)
                // Through a local pointer: read from the class on every step, it would have to be
                // reloaded after each store, and the loop would not vectorise.
                let scratch = self.scratch
                Quad.convert(s, n, into: scratch)
                scratch[n] = 0
                let row = UnsafeRawPointer(scratch), out = UnsafeMutableRawPointer(d)
                @inline(__always) func tap(_ col: Int) -> SIMD4<Float> {
                    row.loadUnaligned(fromByteOffset: (col &- lo) &* 12, as: SIMD4<Float>.self)
                }
                // One pixel, taps clamped to the frame (its RGB, and a fourth float that the next
                // pixel overwrites: pixels are written in order, and the slot has room past the last).
                @inline(__always) func pixel(_ i: Int) {
                    let cx = min(max(sourceX(x0 &+ i), Float(lo)), Float(hi))
                    let ix = Int(cx)
                    let wx = lut[Int((cx - Float(ix)) * steps + 0.5)]
                    let v: SIMD4<Float>
                    if ix >= 1 && ix + 2 < w {
                        v = (wx[0] * tap(ix &- 1) + wx[1] * tap(ix)) + (wx[2] * tap(ix &+ 1) + wx[3] * tap(ix &+ 2))
                    } else {
                        v = (wx[0] * tap(max(ix - 1, 0)) + wx[1] * tap(ix)) + (wx[2] * tap(min(ix + 1, w - 1)) + wx[3] * tap(min(ix + 2, w - 1)))
                    }
                    out.storeBytes(of: v, toByteOffset: i &* 12, as: SIMD4<Float>.self)
                }
                let count = x1 - x0
                var i = 0
                if w <= Quad.maxExtent {
                    // Four pixels a step where their tap origins are consecutive columns (a map near
                    // a translation, the burst's case) and every tap is inside the row: each tap is
                    // then 3 vector loads of 4 pixels' interleaved RGB. Along a source row the phase
                    // changes slowly (by the map's scale and shear, a few thousandths of a pixel per
                    // pixel), so most often the 4 share it, and its weights. Positions as in
                    // rowCubicRGB8TwoPass: exact at knots every 64 pixels, a line between. Kept as
                    // the offset from the output column, e = sx - t, which is monotonic along the
                    // line: the first and last of 4 pixels tell whether their origins are
                    // consecutive (equal offsets' origins), and whether they share a phase.
                    let row = row.assumingMemoryBound(to: Float.self)
                    // Whether the 4 share a phase often enough to test for it: up to a phase drift
                    // of 1.5 table steps over 4 pixels (a 0.4 % scale) the test pays for its
                    // mispredictions (measured: 5.2 against 5.5 ns a pixel at a 0.1 % scale, the
                    // same at 0.8 %); beyond, every step takes the per-lane weights.
                    let slope = (sourceX(x1 &- 1) - sourceX(x0)) / Float(max(1, count &- 1))
                    let shared = abs(slope - 1) * 384 < 1.5
                    let lanes = SIMD4<Float>(0, 1, 2, 3)
                    // Where the CPU has AVX2, CKernels takes the groups that qualify, eight pixels
                    // a step (the same decisions and arithmetic: the same bits); the loop below
                    // takes the others.
                    let eight = evn_cpu_has_avx2() != 0
                    var pass = evn_warp_pass(source: row, stride: 0, mask: 0, lut: UnsafeRawPointer(lut.baseAddress!).assumingMemoryBound(to: Float.self),
                                             out: d, valid: nil, s0: 0, slope: 0, lo: lo, hi: hi, base: 0)
                    while i &+ 4 <= count {
                        let n = min(Quad.knotSpacing, (count &- i) & ~3)
                        let s0 = sourceX(x0 &+ i), s1 = sourceX(x0 &+ i &+ n &- 1)
                        let drift = (s1 - s0) / Float(n &- 1) - 1, half = (n &- 1) / 2
                        guard s0 > -1, s1 > -1, abs(sourceX(x0 &+ i &+ half) - (s0 + (drift + 1) * Float(half))) <= 1e-3 else {
                            for k in i..<(i &+ n) { pixel(k) }
                            i &+= n
                            continue
                        }
                        pass.s0 = s0; pass.slope = drift; pass.base = i
                        var g = 0
                        while g < n {
                            if eight {
                                g = evn_warp_horizontal_pass_avx2(&pass, g, n)
                                if g >= n { break }
                            }
                            let e0 = Quad.fixed(s0 + drift * Float(g)), e3 = Quad.fixed(s0 + drift * Float(g &+ 3))
                            let first = Int(e0 &>> 7) &+ g &- 1
                            let k = i &+ g
                            g &+= 4
                            guard e3 &>> 7 == e0 &>> 7, first >= lo, first &+ 6 <= hi else {
                                pixel(k); pixel(k &+ 1); pixel(k &+ 2); pixel(k &+ 3)
                                continue
                            }
                            let p = UnsafeRawPointer(row + (first &- lo) &* 3)
                            if shared && e0 == e3 {
                                // One phase: its weights, each the same for every lane.
                                let wx = lut[Int(e0 & 127)]
                                let w0 = SIMD4(repeating: wx[0]), w1 = SIMD4(repeating: wx[1])
                                let w2 = SIMD4(repeating: wx[2]), w3 = SIMD4(repeating: wx[3])
                                @inline(__always) func part(_ k: Int) -> SIMD4<Float> {
                                    (w0 * p.loadUnaligned(fromByteOffset: k, as: SIMD4<Float>.self) + w1 * p.loadUnaligned(fromByteOffset: k &+ 12, as: SIMD4<Float>.self))
                                        + (w2 * p.loadUnaligned(fromByteOffset: k &+ 24, as: SIMD4<Float>.self) + w3 * p.loadUnaligned(fromByteOffset: k &+ 36, as: SIMD4<Float>.self))
                                }
                                out.storeBytes(of: part(0), toByteOffset: k &* 12, as: SIMD4<Float>.self)
                                out.storeBytes(of: part(16), toByteOffset: k &* 12 &+ 16, as: SIMD4<Float>.self)
                                out.storeBytes(of: part(32), toByteOffset: k &* 12 &+ 32, as: SIMD4<Float>.self)
                            } else {
                                // Consecutive origins, phases of their own: weights a lane each.
                                let l = Quad.rows(Quad.fixed(SIMD4(repeating: s0) + drift * (SIMD4(repeating: Float(g &- 4)) + lanes)), lut)
                                let t0 = Quad.taps(p, l, 0), t1 = Quad.taps(p + 12, l, 1), t2 = Quad.taps(p + 24, l, 2), t3 = Quad.taps(p + 36, l, 3)
                                out.storeBytes(of: (t0.0 + t1.0) + (t2.0 + t3.0), toByteOffset: k &* 12, as: SIMD4<Float>.self)
                                out.storeBytes(of: (t0.1 + t1.1) + (t2.1 + t3.1), toByteOffset: k &* 12 &+ 16, as: SIMD4<Float>.self)
                                out.storeBytes(of: (t0.2 + t1.2) + (t2.2 + t3.2), toByteOffset: k &* 12 &+ 32, as: SIMD4<Float>.self)
                            }
                        }
                        i &+= n
                    }
                }
                while i < count { pixel(i); i &+= 1 }
                held[r & (Self.rows - 1)] = r
            }
            return true
        }
    }

    /// - Parameters:
    ///   - frame: The frame to sample.
    ///   - homography: Maps the frame's pixels to the output's (the registration convention);
    ///     nil or identity samples the frame as it is. A singular homography samples nothing.
    ///   - interpolation: The sampler.
    ///   - offsets: A local correction: output pixel `p` samples the frame at `H^-1 (p + d(p))`.
    @inlinable
    public init(frame: Image<Sample>, homography: Homography?, interpolation: Interpolation, offsets: DisplacementField? = nil) {
        self.init(image: frame, external: nil, owner: nil, width: frame.width, height: frame.height, channels: frame.channels,
                  homography: homography, interpolation: interpolation, offsets: offsets)
    }

    /// A sampler over samples held outside an ``Image`` (rows of a memory-mapped file, say),
    /// interleaved and row-major, `width * height * channels` of them.
    ///
    /// - Parameters:
    ///   - samples: The first sample; it must stay valid while `owner` lives.
    ///   - width: Pixels per row.
    ///   - height: Rows.
    ///   - channels: Samples per pixel.
    ///   - owner: Whatever keeps `samples` valid; the sampler holds it.
    ///   - homography: As in ``init(frame:homography:interpolation:offsets:)``.
    ///   - interpolation: The sampler.
    ///   - offsets: A local correction, or nil.
    public init(samples: UnsafePointer<Sample>, width: Int, height: Int, channels: Int, owner: AnyObject,
                homography: Homography?, interpolation: Interpolation, offsets: DisplacementField? = nil) {
        self.init(image: nil, external: samples, owner: owner, width: width, height: height, channels: channels,
                  homography: homography, interpolation: interpolation, offsets: offsets)
    }

    @usableFromInline
    init(image: Image<Sample>?, external: UnsafePointer<Sample>?, owner: AnyObject?, width: Int, height: Int, channels: Int,
         homography: Homography?, interpolation: Interpolation, offsets: DisplacementField?) {
        self.image = image; self.external = external; self.owner = owner
        self.width = width; self.height = height; self.channels = channels
        self.interpolation = interpolation
        self.offsets = offsets
        if let h = homography, h != .identity {
            m = h.inverse.map { $0.m.map { Float($0) } } ?? [0, 0, -1e9, 0, 0, -1e9, 0, 0, 1]
        } else {
            m = offsets == nil ? nil : [1, 0, 0, 0, 1, 0, 0, 0, 1]
        }
    }

    /// Writes pixels `x0..<x1` of output row `y` into `out` (channels interleaved) and 1 or 0
    /// into `valid`, one per pixel.
    ///
    /// - Parameters:
    ///   - y: The output row.
    ///   - x0: The segment's first output column.
    ///   - x1: One past its last column.
    ///   - out: Room for `(x1 - x0) * channels` floats.
    ///   - valid: Room for `x1 - x0` bytes.
    ///   - cache: Optional converted source rows (see ``Cache``), made for segments of at
    ///     least `x1 - x0` pixels; 8-bit RGB cubic sampling reads its taps from there.
    @inlinable
    public func sampleRow(y: Int, x0: Int, x1: Int, into out: UnsafeMutablePointer<Float>, valid: UnsafeMutablePointer<UInt8>,
                          cache: Cache? = nil) {
        let c = channels, w = width
        guard w > 0 && height > 0 else {
            for j in 0..<((x1 - x0) * c) { out[j] = 0 }
            for i in 0..<(x1 - x0) { valid[i] = 0 }
            return
        }
        withSamples { p in
            guard let m else {
                let base = (y * w + x0) * c
                for j in 0..<((x1 - x0) * c) { out[j] = p[base + j].floatValue }
                for i in 0..<(x1 - x0) { valid[i] = 1 }
                return
            }
            if Sample.self == UInt8.self && c == 3 && (interpolation == .catmullRom || interpolation == .bicubic) {
                let bytes = UnsafeRawPointer(p).assumingMemoryBound(to: UInt8.self)
                if let cache, offsets == nil, rowCubicRGB8TwoPass(bytes, m, y, x0, x1, out, valid, cache) { return }
                if let cache, rowCubicRGB8Cached(bytes, m, y, x0, x1, out, valid, cache) { return }
                // (A segment spanning too many source rows falls through to the general path.)
            }
            switch (c, interpolation) {
            case (3, .nearest): row(p, m, y, x0, x1, out, valid, channels: 3, kind: 0)
            case (3, .bilinear): row(p, m, y, x0, x1, out, valid, channels: 3, kind: 1)
            case (3, _): row(p, m, y, x0, x1, out, valid, channels: 3, kind: 2)
            case (1, .bilinear) where offsets == nil: rowBilinear1(p, m, y, x0, x1, out, valid)
            case (_, .nearest): row(p, m, y, x0, x1, out, valid, channels: c, kind: 0)
            case (_, .bilinear): row(p, m, y, x0, x1, out, valid, channels: c, kind: 1)
            default: row(p, m, y, x0, x1, out, valid, channels: c, kind: 2)
            }
        }
    }

    /// Calls `body` with the frame's first sample (valid for the call).
    @inlinable @inline(__always)
    func withSamples<R>(_ body: (UnsafePointer<Sample>) -> R) -> R {
        if let external { return body(external) }
        return image!.samples.withUnsafeBufferPointer { body($0.baseAddress!) }
    }

    /// The per-pixel loop; `channels` and `kind` (0 nearest, 1 bilinear, 2 cubic) are constants
    /// at each call site above, so the optimiser specialises this inlined body for them.
    @inlinable @inline(__always)
    func row(_ src: UnsafePointer<Sample>, _ m: [Float], _ y: Int, _ x0: Int, _ x1: Int,
             _ out: UnsafeMutablePointer<Float>, _ valid: UnsafeMutablePointer<UInt8>, channels c: Int, kind: Int) {
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
                sx += m0 * d.x + m1 * d.y; sy += m3 * d.x + m4 * d.y; den += m6 * d.x + m7 * d.y
            }
            if projective || offsets != nil { if den > 1e-12 { sx /= den; sy /= den } else { sx = -1e9; sy = -1e9 } }
            nx += m0; ny += m3; dd += m6
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
    func rowBilinear1(_ src: UnsafePointer<Sample>, _ m: [Float], _ y: Int, _ x0: Int, _ x1: Int,
                      _ out: UnsafeMutablePointer<Float>, _ valid: UnsafeMutablePointer<UInt8>) {
        let w = width, h = height
        let fy = Float(y), maxX = Float(w - 1), maxY = Float(h - 1), eps: Float = 1e-3
        let (m0, m2, m3, m5, m6, m8) = (m[0], m[1] * fy + m[2], m[3], m[4] * fy + m[5], m[6], m[7] * fy + m[8])
        @inline(__always) func pixel(_ i: Int, _ sx: Float, _ sy: Float) {
            guard sx >= -eps, sy >= -eps, sx <= maxX + eps, sy <= maxY + eps else { valid[i] = 0; out[i] = 0; return }
            valid[i] = 1
            let cx = min(max(sx, 0), maxX), cy = min(max(sy, 0), maxY)
            let ix = Int(cx), iy = Int(cy)   // cx, cy >= 0: truncation is the floor
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
            if d > 1e-12 { pixel(i, (m0 * fx + m2) / d, (m3 * fx + m5) / d) } else { valid[i] = 0; out[i] = 0 }
        }
        // The map's arithmetic per lane is the scalar one (the same operations in the same
        // order), so every position is what a pixel alone computes.
        let lanes = SIMD4<Float>(0, 1, 2, 3), tiny = SIMD4<Float>(repeating: 1e-12)
        let count = x1 - x0
        var i = 0
        // Float planes: eight pixels a step where the CPU has AVX2 (CKernels, lane by lane the
        // arithmetic below); a step it cannot take falls to this loop's.
        let eight = Sample.self == Float.self && evn_cpu_has_avx2() != 0
        var row = evn_bilinear_row(plane: UnsafeRawPointer(src).assumingMemoryBound(to: Float.self), width: w, height: h, x0: x0,
                                   m0: m0, m2: m2, m3: m3, m5: m5, m6: m6, m8: m8)
        while i &+ 4 <= count {
            if eight && i &+ 8 <= count {
                let j = evn_bilinear_row_avx2(&row, i, count, out, valid)
                if j != i { i = j; continue }
            }
            let fx = SIMD4<Float>(repeating: Float(x0 &+ i)) + lanes
            let d = m6 * fx + m8
            guard Quad.allTrue(d .> tiny) else {
                alone(i); alone(i &+ 1); alone(i &+ 2); alone(i &+ 3)
                i &+= 4
                continue
            }
            let px = (m0 * fx + m2) / d, py = (m3 * fx + m5) / d
            if Sample.self == Float.self {
                // Float planes, where the 4 read consecutive columns of one pair of rows, all
                // inside (a map near a translation: most of a row): 4 vector loads instead of 16
                // scalar ones, and the arithmetic of `pixel`.
                let fx0 = px[0].rounded(.down), fy0 = py[0].rounded(.down)
                if fx0 >= 0, fy0 >= 0, fx0 + 4 < Float(w), fy0 + 1 < Float(h) {
                    let tx = px - (SIMD4<Float>(repeating: fx0) + lanes), ty = py - SIMD4<Float>(repeating: fy0)
                    let inside: SIMDMask<SIMD4<Int32>> = (tx .>= 0) .& (tx .< 1) .& (ty .>= 0) .& (ty .< 1)
                    if Quad.allTrue(inside) {
                        let p = UnsafeRawPointer(src)
                        let o = (Int(fy0) &* w &+ Int(fx0)) &* 4, below = o &+ w &* 4
                        let t0 = p.loadUnaligned(fromByteOffset: o, as: SIMD4<Float>.self), t1 = p.loadUnaligned(fromByteOffset: o &+ 4, as: SIMD4<Float>.self)
                        let b0 = p.loadUnaligned(fromByteOffset: below, as: SIMD4<Float>.self), b1 = p.loadUnaligned(fromByteOffset: below &+ 4, as: SIMD4<Float>.self)
                        let top = t0 + (t1 - t0) * tx, bottom = b0 + (b1 - b0) * tx
                        let value: SIMD4<Float> = top + (bottom - top) * ty
                        UnsafeMutableRawPointer(out + i).storeBytes(of: value, as: SIMD4<Float>.self)
                        UnsafeMutableRawPointer(valid + i).storeBytes(of: 0x0101_0101 as UInt32, as: UInt32.self)
                        i &+= 4
                        continue
                    }
                }
            }
            pixel(i, px[0], py[0]); pixel(i &+ 1, px[1], py[1]); pixel(i &+ 2, px[2], py[2]); pixel(i &+ 3, px[3], py[3])
            i &+= 4
        }
        while i < count { alone(i); i &+= 1 }
    }

    /// 8-bit RGB cubic, reading taps from the source rows the segment touches, converted to
    /// Float in `cache` (once per source row while a segment walks down) so that each tap is one
    /// 4-float load. Returns false (nothing written) when the segment spans too many source rows.
    @inlinable
    func rowCubicRGB8Cached(_ src: UnsafePointer<UInt8>, _ m: [Float], _ y: Int, _ x0: Int, _ x1: Int,
                            _ out: UnsafeMutablePointer<Float>, _ valid: UnsafeMutablePointer<UInt8>,
                            _ cache: Cache) -> Bool {
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
                nx += m0 * o.x + m1 * o.y; ny += m3 * o.x + m4 * o.y; d += m6 * o.x + m7 * o.y
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
                    pos[base &+ 2 &* j] = a.0 + sx * Float(j); pos[base &+ 2 &* j &+ 1] = a.1 + sy * Float(j)
                }
                lo = (min(lo.0, a.0, b.0), min(lo.1, a.1, b.1)); hi = (max(hi.0, a.0, b.0), max(hi.1, a.1, b.1))
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
                    valid[i] = 0; out[o] = 0; out[o &+ 1] = 0; out[o &+ 2] = 0
                    return
                }
                valid[i] = 1
                let cx = min(max(sx, 0), maxX), cy = min(max(sy, 0), maxY)
                let ix = Int(cx), iy = Int(cy)   // cx, cy >= 0: truncation is the floor
                let wx = lut[Int((cx - Float(ix)) * steps + 0.5)], wy = lut[Int((cy - Float(iy)) * steps + 0.5)]
                // Tap positions inside the block (edges clamped to the frame, as in the direct path).
                let c0: Int, c1: Int, c2: Int, c3: Int, r0: Int, r1: Int, r2: Int, r3: Int
                // Wrapping arithmetic: every offset is inside the block converted above (the
                // taps are clamped to the frame, and the block spans the segment's taps).
                if ix >= 1 && ix + 2 < w && iy >= 1 && iy + 2 < h {
                    c0 = (ix &- 1 &- colBase) &* 3; c1 = c0 &+ 3; c2 = c0 &+ 6; c3 = c0 &+ 9
                    r0 = ((iy &- 1) & mask) &* stride; r1 = (iy & mask) &* stride
                    r2 = ((iy &+ 1) & mask) &* stride; r3 = ((iy &+ 2) & mask) &* stride
                } else {
                    c0 = (max(ix - 1, 0) - colBase) * 3; c1 = (ix - colBase) * 3
                    c2 = (min(ix + 1, w - 1) - colBase) * 3; c3 = (min(ix + 2, w - 1) - colBase) * 3
                    r0 = (max(iy - 1, 0) & mask) * stride; r1 = (iy & mask) * stride
                    r2 = (min(iy + 1, h - 1) & mask) * stride; r3 = (min(iy + 2, h - 1) & mask) * stride
                }
                let upper: SIMD4<Float> = wy[0] * Self.tapRow(block + r0, c0, c1, c2, c3, wx) + wy[1] * Self.tapRow(block + r1, c0, c1, c2, c3, wx)
                let lower: SIMD4<Float> = wy[2] * Self.tapRow(block + r2, c0, c1, c2, c3, wx) + wy[3] * Self.tapRow(block + r3, c0, c1, c2, c3, wx)
                let acc = upper + lower
                out[o] = min(max(acc[0], 0), 255); out[o &+ 1] = min(max(acc[1], 0), 255); out[o &+ 2] = min(max(acc[2], 0), 255)
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
                var rows = evn_warp_rows(positions: pos, block: block, stride: stride, mask: mask, col_base: colBase, width: w, height: h,
                                         lut: UnsafeRawPointer(lut.baseAddress!).assumingMemoryBound(to: Float.self))
                while i &+ 4 <= count {
                    if eight && i &+ 8 <= count {
                        let j = evn_warp_cubic_rgb_field8_avx2(&rows, i, count, out, valid)
                        if j != i { i = j; continue }
                    }
                    // x0 y0 x1 y1, x2 y2 x3 y3 -> x0 x1 x2 x3, y0 y1 y2 y3
                    let a = p.loadUnaligned(fromByteOffset: i &* 8, as: SIMD4<Float>.self)
                    let b = p.loadUnaligned(fromByteOffset: i &* 8 &+ 16, as: SIMD4<Float>.self)
                    let qx = Quad.fixed(SIMD4(lowHalf: a.evenHalf, highHalf: b.evenHalf)), qy = Quad.fixed(SIMD4(lowHalf: a.oddHalf, highHalf: b.oddHalf))
                    let cx = qx &>> 7, ry = qy &>> 7
                    let ix = Int(cx[0]), iy = Int(ry[0])
                    guard Quad.allTrue(cx &- SIMD4(repeating: cx[0]) .== SIMD4(0, 1, 2, 3)), Quad.allTrue(ry .== SIMD4(repeating: ry[0])),
                          ix >= 1, ix &+ 5 < w, iy >= 1, iy &+ 2 < h else {
                        pixel(i); pixel(i &+ 1); pixel(i &+ 2); pixel(i &+ 3)
                        i &+= 4
                        continue
                    }
                    let lx = Quad.rows(qx, lut), ly = Quad.rows(qy, lut)
                    @inline(__always) func filtered(_ r: Int) -> (SIMD4<Float>, SIMD4<Float>, SIMD4<Float>) {
                        let q = UnsafeRawPointer(block + (r & mask) &* stride + (ix &- 1 &- colBase) &* 3)
                        let t0 = Quad.taps(q, lx, 0), t1 = Quad.taps(q + 12, lx, 1), t2 = Quad.taps(q + 24, lx, 2), t3 = Quad.taps(q + 36, lx, 3)
                        return ((t0.0 + t1.0) + (t2.0 + t3.0), (t0.1 + t1.1) + (t2.1 + t3.1), (t0.2 + t1.2) + (t2.2 + t3.2))
                    }
                    let v0 = Quad.weighted(filtered(iy &- 1), ly, 0), v1 = Quad.weighted(filtered(iy), ly, 1)
                    let v2 = Quad.weighted(filtered(iy &+ 1), ly, 2), v3 = Quad.weighted(filtered(iy &+ 2), ly, 3)
                    o.storeBytes(of: clamped((v0.0 + v1.0) + (v2.0 + v3.0)), toByteOffset: i &* 12, as: SIMD4<Float>.self)
                    o.storeBytes(of: clamped((v0.1 + v1.1) + (v2.1 + v3.1)), toByteOffset: i &* 12 &+ 16, as: SIMD4<Float>.self)
                    o.storeBytes(of: clamped((v0.2 + v1.2) + (v2.2 + v3.2)), toByteOffset: i &* 12 &+ 32, as: SIMD4<Float>.self)
                    UnsafeMutableRawPointer(valid + i).storeBytes(of: 0x0101_0101 as UInt32, as: UInt32.self)
                    i &+= 4
                }
            }
            while i < count { pixel(i); i &+= 1 }
            return true
        }
    }

    /// 8-bit RGB cubic in two separable passes (see ``Cache``): the horizontal pass of the
    /// source rows this output row needs comes from `cache` (computed once per source row while
    /// a segment walks down), then one vertical 4-tap pass per pixel. Validity is decided on the
    /// exact source position, as on the other paths. Returns false (nothing written) when the
    /// segment spans too many source rows or leaves the map's half-plane.
    @inlinable
    func rowCubicRGB8TwoPass(_ src: UnsafePointer<UInt8>, _ m: [Float], _ y: Int, _ x0: Int, _ x1: Int,
                             _ out: UnsafeMutablePointer<Float>, _ valid: UnsafeMutablePointer<UInt8>,
                             _ cache: Cache) -> Bool {
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
            guard cache.preparePass(src, w: w, h: h, x0: x0, x1: x1, m: m, rowLo: rowLo, rowHi: rowHi, lut: lut) else { return false }
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
                    valid[i] = 0; out[o] = 0; out[o &+ 1] = 0; out[o &+ 2] = 0
                    return
                }
                let cy = min(max(sy, 0), maxY)
                let iy = Int(cy)   // cy >= 0: truncation is the floor
                let wy = lut[Int((cy - Float(iy)) * steps + 0.5)], col = i &* 12
                // (Each load takes the pixel's RGB and one float past it: the slots have room.)
                let v0 = slot(max(iy - 1, 0)).loadUnaligned(fromByteOffset: col, as: SIMD4<Float>.self)
                let v1 = slot(iy).loadUnaligned(fromByteOffset: col, as: SIMD4<Float>.self)
                let v2 = slot(min(iy + 1, h - 1)).loadUnaligned(fromByteOffset: col, as: SIMD4<Float>.self)
                let v3 = slot(min(iy + 2, h - 1)).loadUnaligned(fromByteOffset: col, as: SIMD4<Float>.self)
                let acc: SIMD4<Float> = (wy[0] * v0 + wy[1] * v1) + (wy[2] * v2 + wy[3] * v3)
                out[o] = min(max(acc[0], 0), 255); out[o &+ 1] = min(max(acc[1], 0), 255); out[o &+ 2] = min(max(acc[2], 0), 255)
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
                while i < end && !isValid(i) { pixel(i); i &+= 1 }
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
                var pass = evn_warp_pass(source: cache.storage, stride: stride, mask: mask, lut: UnsafeRawPointer(lut.baseAddress!).assumingMemoryBound(to: Float.self),
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
                    pass.s0 = s0; pass.slope = slope; pass.base = i
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
                            pixel(k); pixel(k &+ 1); pixel(k &+ 2); pixel(k &+ 3)
                            continue
                        }
                        let col = k &* 12
                        let p0 = slot(r &- 1) + col, p1 = slot(r) + col, p2 = slot(r &+ 1) + col, p3 = slot(r &+ 2) + col
                        if shared && q0 == q3 {
                            // One phase (a map without rotation, or a run of one): its weights.
                            let wy = lut[Int(q0 & 127)]
                            let w0 = SIMD4(repeating: wy[0]), w1 = SIMD4(repeating: wy[1]), w2 = SIMD4(repeating: wy[2]), w3 = SIMD4(repeating: wy[3])
                            @inline(__always) func part(_ k: Int) -> SIMD4<Float> {
                                clamped((w0 * p0.loadUnaligned(fromByteOffset: k, as: SIMD4<Float>.self) + w1 * p1.loadUnaligned(fromByteOffset: k, as: SIMD4<Float>.self))
                                    + (w2 * p2.loadUnaligned(fromByteOffset: k, as: SIMD4<Float>.self) + w3 * p3.loadUnaligned(fromByteOffset: k, as: SIMD4<Float>.self)))
                            }
                            o.storeBytes(of: part(0), toByteOffset: col, as: SIMD4<Float>.self)
                            o.storeBytes(of: part(16), toByteOffset: col &+ 16, as: SIMD4<Float>.self)
                            o.storeBytes(of: part(32), toByteOffset: col &+ 32, as: SIMD4<Float>.self)
                        } else {
                            let q = Quad.fixed(SIMD4(repeating: s0) + slope * (SIMD4(repeating: Float(g &- 4)) + lanes))
                            let l = Quad.rows(q, lut)
                            let t0 = Quad.taps(p0, l, 0), t1 = Quad.taps(p1, l, 1), t2 = Quad.taps(p2, l, 2), t3 = Quad.taps(p3, l, 3)
                            o.storeBytes(of: clamped((t0.0 + t1.0) + (t2.0 + t3.0)), toByteOffset: col, as: SIMD4<Float>.self)
                            o.storeBytes(of: clamped((t0.1 + t1.1) + (t2.1 + t3.1)), toByteOffset: col &+ 16, as: SIMD4<Float>.self)
                            o.storeBytes(of: clamped((t0.2 + t1.2) + (t2.2 + t3.2)), toByteOffset: col &+ 32, as: SIMD4<Float>.self)
                        }
                        UnsafeMutableRawPointer(valid + k).storeBytes(of: 0x0101_0101 as UInt32, as: UInt32.self)
                    }
                    i &+= n
                }
                while i < end { pixel(i); i &+= 1 }
                return true
            }
            while i < count { pixel(i); i &+= 1 }
            return true
        }
    }

    /// Four RGB taps of a Float row, weighted (each tap one unaligned 4-float load).
    @inlinable @inline(__always)
    static func tapRow(_ q: UnsafePointer<Float>, _ c0: Int, _ c1: Int, _ c2: Int, _ c3: Int, _ w: SIMD4<Float>) -> SIMD4<Float> {
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
