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
        let magic = SIMD4<Float>(repeating: 12_582_912)  // 1.5 * 2^23: the sum's low mantissa bits are the integer
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
    static func rows(_ q: SIMD4<Int32>, _ lut: UnsafeBufferPointer<SIMD4<Float>>) -> (
        SIMD4<Float>, SIMD4<Float>, SIMD4<Float>, SIMD4<Float>
    ) {
        let ph = q & 127
        return (lut[Int(ph[0])], lut[Int(ph[1])], lut[Int(ph[2])], lut[Int(ph[3])])
    }

    /// 4 pixels' interleaved RGB at `p` (12 floats), weighted by tap `t` of each pixel's weights
    /// (`l0...l3`, rows of ``CubicTable``).
    @inlinable @inline(__always)
    static func taps(_ p: UnsafeRawPointer, _ l: (SIMD4<Float>, SIMD4<Float>, SIMD4<Float>, SIMD4<Float>), _ t: Int)
        -> (SIMD4<Float>, SIMD4<Float>, SIMD4<Float>)
    {
        (
            p.loadUnaligned(as: SIMD4<Float>.self) * SIMD4(l.0[t], l.0[t], l.0[t], l.1[t]),
            p.loadUnaligned(fromByteOffset: 16, as: SIMD4<Float>.self) * SIMD4(l.1[t], l.1[t], l.2[t], l.2[t]),
            p.loadUnaligned(fromByteOffset: 32, as: SIMD4<Float>.self) * SIMD4(l.2[t], l.3[t], l.3[t], l.3[t])
        )
    }

    /// 4 pixels' interleaved RGB (`v`, 3 vectors), weighted by tap `t` of each pixel's weights.
    @inlinable @inline(__always)
    static func weighted(
        _ v: (SIMD4<Float>, SIMD4<Float>, SIMD4<Float>), _ l: (SIMD4<Float>, SIMD4<Float>, SIMD4<Float>, SIMD4<Float>),
        _ t: Int
    )
        -> (SIMD4<Float>, SIMD4<Float>, SIMD4<Float>)
    {
        (
            v.0 * SIMD4(l.0[t], l.0[t], l.0[t], l.1[t]), v.1 * SIMD4(l.1[t], l.1[t], l.2[t], l.2[t]),
            v.2 * SIMD4(l.2[t], l.3[t], l.3[t], l.3[t])
        )
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
        while j < n {
            d[j] = Float(s[j])
            j &+= 1
        }
    }

    /// The widest or tallest frame these loops take (``fixed(_:)``'s range, with room): a
    /// position beyond it comes out as an origin outside the frame, and the pixel takes the
    /// per-pixel path.
    @usableFromInline static let maxExtent = 16_000
}
