/// A smooth per-pixel correction to a homography, given on a grid of cells: where the output
/// pixel `p` would sample its frame at `H^-1 p`, it samples at `H^-1 (p + d(p))`, with `d`
/// bilinearly interpolated between the cells' centres (clamped at the border). This is how local
/// alignment undoes parallax, which no single homography can.
///
/// Cell `(i, j)` has its centre at output pixel `((i + 0.5) * cell - 0.5, (j + 0.5) * cell - 0.5)`.
public struct DisplacementField: Sendable, Equatable, Codable {
    /// Cell size in output pixels.
    public let cell: Int
    /// Cells across.
    public let columns: Int
    /// Cells down.
    public let rows: Int
    /// Horizontal displacement per cell, row-major (output pixels).
    public var dx: [Float]
    /// Vertical displacement per cell, row-major (output pixels).
    public var dy: [Float]

    /// A zero field covering a `width` x `height` output with cells of `cell` pixels.
    public init(width: Int, height: Int, cell: Int) {
        self.cell = max(1, cell)
        columns = max(1, (width + self.cell - 1) / self.cell)
        rows = max(1, (height + self.cell - 1) / self.cell)
        dx = [Float](repeating: 0, count: columns * rows)
        dy = dx
    }

    /// Cell coordinate of output coordinate `v` (fractional, clamped to the grid).
    @inlinable @inline(__always)
    func cellCoordinate(_ v: Float, _ count: Int) -> (Int, Int, Float) {
        let f = min(max((v + 0.5) / Float(cell) - 0.5, 0), Float(count - 1))
        let i = Int(f)
        return (i, min(i + 1, count - 1), f - Float(i))
    }

    /// The displacements at output pixels `x0..<x0 + count` of row `y`, exactly as
    /// ``value(atX:y:)`` gives them, written to `out` (x then y per pixel: `2 * count` floats).
    @inlinable
    public func values(y: Int, x0: Int, count: Int, into out: UnsafeMutablePointer<Float>) {
        let (r0, r1, ty) = cellCoordinate(Float(y), rows)
        dx.withUnsafeBufferPointer { X in dy.withUnsafeBufferPointer { Y in
            // The cell indices are clamped to the grid (cellCoordinate), so every read is inside.
            let X = X.baseAddress!, Y = Y.baseAddress!, a = r0 * columns, b = r1 * columns
            for i in 0..<count {
                let (c0, c1, tx) = cellCoordinate(Float(x0 &+ i), columns)
                let top = SIMD2(X[a + c0], Y[a + c0]) + (SIMD2(X[a + c1], Y[a + c1]) - SIMD2(X[a + c0], Y[a + c0])) * tx
                let bottom = SIMD2(X[b + c0], Y[b + c0]) + (SIMD2(X[b + c1], Y[b + c1]) - SIMD2(X[b + c0], Y[b + c0])) * tx
                let v = top + (bottom - top) * ty
                out[2 &* i] = v.x; out[2 &* i &+ 1] = v.y
            }
        }}
    }

    /// The displacement at output pixel (x, y).
    @inlinable @inline(__always)
    public func value(atX x: Int, y: Int) -> SIMD2<Float> {
        let (c0, c1, tx) = cellCoordinate(Float(x), columns), (r0, r1, ty) = cellCoordinate(Float(y), rows)
        let i00 = r0 * columns + c0, i01 = r0 * columns + c1, i10 = r1 * columns + c0, i11 = r1 * columns + c1
        let top = SIMD2(dx[i00], dy[i00]) + (SIMD2(dx[i01], dy[i01]) - SIMD2(dx[i00], dy[i00])) * tx
        let bottom = SIMD2(dx[i10], dy[i10]) + (SIMD2(dx[i11], dy[i11]) - SIMD2(dx[i10], dy[i10])) * tx
        return top + (bottom - top) * ty
    }
}
