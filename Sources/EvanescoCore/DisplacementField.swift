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
    @inlinable
    func cellCoordinate(_ v: Float, _ count: Int) -> (Int, Int, Float) {
        let f = min(max((v + 0.5) / Float(cell) - 0.5, 0), Float(count - 1))
        let i = Int(f)
        return (i, min(i + 1, count - 1), f - Float(i))
    }

    /// The displacement at output pixel (x, y).
    @inlinable
    public func value(atX x: Int, y: Int) -> SIMD2<Float> {
        let (c0, c1, tx) = cellCoordinate(Float(x), columns), (r0, r1, ty) = cellCoordinate(Float(y), rows)
        return dx.withUnsafeBufferPointer { px in dy.withUnsafeBufferPointer { py in
            @inline(__always) func at(_ p: UnsafeBufferPointer<Float>) -> Float {
                let top = p[r0 * columns + c0] + (p[r0 * columns + c1] - p[r0 * columns + c0]) * tx
                let bottom = p[r1 * columns + c0] + (p[r1 * columns + c1] - p[r1 * columns + c0]) * tx
                return top + (bottom - top) * ty
            }
            return SIMD2(at(px), at(py))
        }}
    }

    /// The largest displacement length in the field.
    public var maxMagnitude: Float {
        var m: Float = 0
        for i in dx.indices { m = max(m, (dx[i] * dx[i] + dy[i] * dy[i]).squareRoot()) }
        return m
    }
}
