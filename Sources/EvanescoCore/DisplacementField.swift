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

    /// Whether this is a well-formed field for a `width` x `height` output: the grid
    /// ``init(width:height:cell:)`` makes for it, every displacement finite. A field from
    /// elsewhere (a caller, a file) is checked with this before any pixel is warped through it.
    public func covers(width: Int, height: Int) -> Bool {
        cell >= 1 && columns == (max(1, width) - 1) / cell + 1 && rows == (max(1, height) - 1) / cell + 1
            && dx.count == columns * rows && dy.count == dx.count && dx.allSatisfy(\.isFinite)
            && dy.allSatisfy(\.isFinite)
    }

    /// Cell coordinate of output coordinate `v` (fractional, clamped to the grid).
    @inlinable @inline(__always)
    func cellCoordinate(_ v: Float, _ count: Int) -> (Int, Int, Float) {
        let f = min(max((v + 0.5) / Float(cell) - 0.5, 0), Float(count - 1))
        let i = Int(f)
        return (i, min(i + 1, count - 1), f - Float(i))
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
