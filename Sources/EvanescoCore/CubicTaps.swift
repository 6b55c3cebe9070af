import CKernels

/// Cubic weights for taps -1, 0, 1, 2 at phases 0, 1/128, ..., 1: looking them up costs two
/// loads instead of ~25 flops per axis, and the 1/256-px worst-case phase error is far below a
/// registration's accuracy.
@usableFromInline
struct CubicTable: Sendable {
    @usableFromInline static let steps = 128
    /// `weights[k]` holds the four taps' weights at phase k / 128 (k = 0...128). Then, for the
    /// separable warp's AVX2 passes (`evn_warp_pass.lut`), the same weights by tap: tap t's run of
    /// `EVN_CUBIC_LUT_BY_TAP` phases (those past 128 repeating 128's), four floats an element.
    @usableFromInline let weights: [SIMD4<Float>]
    init(a: Float) {
        let rows = (0...CubicTable.steps).map { i in
            let w = Kernels.cubicWeights(Float(i) / Float(CubicTable.steps), a: a)
            return SIMD4(w.0, w.1, w.2, w.3)
        }
        precondition(rows.count == Int(EVN_CUBIC_LUT_ROWS) && Int(EVN_CUBIC_LUT_BY_TAP) % 4 == 0)
        let byTap = (0..<4).flatMap { t in
            (0..<Int(EVN_CUBIC_LUT_BY_TAP)).map { k in rows[min(k, CubicTable.steps)][t] }
        }
        weights = rows + stride(from: 0, to: byTap.count, by: 4).map { SIMD4(byTap[($0)..<($0 + 4)]) }
    }
    @usableFromInline static let catmullRom = CubicTable(a: Interpolation.catmullRom.cubicParameter!)
    @usableFromInline static let keys = CubicTable(a: Interpolation.bicubic.cubicParameter!)
}

/// What the rows that sample in groups of four pixels share (``RowSampler/Cache``,
/// ``RowSampler/rowCubicRGB8TwoPass(_:_:_:_:_:_:_:_:)``, the cached field path and the one-channel
/// bilinear row): the knot spacing of the positions, the extent they take, and the byte
/// conversion. The groups themselves are sampled by CKernels (warp_cubic.c, warp_two_pass.c,
/// bilinear_row.c), whose arithmetic the kernel tests write out.
@usableFromInline
enum Quad {
    /// Pixels between the knots where the fast loops compute a row's source positions exactly
    /// (a straight line between them): a multiple of 4.
    @usableFromInline static let knotSpacing = 64

    /// How far (pixels) a knot interval's middle may be from the straight line between its
    /// ends for the line to stand for its positions.
    @usableFromInline static let lineTolerance: Float = 1e-3

    /// One knot interval from a row's pixel: its length, at most ``knotSpacing`` and `available`
    /// (a multiple of 4), halved down to 8 while the position at its middle is off the line from
    /// `start` to its last pixel's by more than ``lineTolerance`` (a projective map bends the
    /// line), and the position at its last pixel. `position(k)` is the interval's pixel `k`'s.
    /// The caller checks the line again: an 8-pixel interval still off it is sampled pixel by pixel.
    @inlinable @inline(__always)
    static func interval(available: Int, start s0: Float, _ position: (Int) -> Float) -> (n: Int, end: Float) {
        var n = min(knotSpacing, available & ~3)
        var s1 = position(n &- 1)
        while n > 8
            && abs(position((n &- 1) / 2) - (s0 + (s1 - s0) / Float(n &- 1) * Float((n &- 1) / 2))) > lineTolerance
        {
            n = (n / 2) & ~3
            s1 = position(n &- 1)
        }
        return (n, s1)
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
