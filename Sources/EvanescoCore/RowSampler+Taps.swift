import CKernels

// What the 8-bit RGB cubic rows share: one output row's map to source positions, and the taps of
// one pixel from a block of converted rows or from the horizontal pass's slots.

/// One output row's map to source positions: the output-to-frame map's entries with the row's y
/// folded in. Output pixel x samples the frame at ((m0 x + m2) / d, (m3 x + m5) / d), d = m6 x + m8.
@usableFromInline
struct RowMap {
    @usableFromInline let m0: Float, m1: Float, m2: Float, m3: Float, m4: Float, m5: Float
    @usableFromInline let m6: Float, m7: Float, m8: Float
    @usableFromInline let projective: Bool

    @inlinable
    init(_ m: [Float], y: Int) {
        let fy = Float(y)
        (m0, m2, m3, m5, m6, m8) = (m[0], m[1] * fy + m[2], m[3], m[4] * fy + m[5], m[6], m[7] * fy + m[8])
        (m1, m4, m7) = (m[1], m[4], m[7])
        projective = m6 != 0 || m[7] != 0
    }

    /// Output column `x`'s source position; (-1e9, -1e9) beyond the map's horizon.
    @inlinable @inline(__always)
    func source(_ x: Int) -> (Float, Float) {
        let fx = Float(x)
        let nx = m0 * fx + m2, ny = m3 * fx + m5
        guard projective else { return (nx, ny) }
        let d = m6 * fx + m8
        return d > 1e-12 ? (nx / d, ny / d) : (-1e9, -1e9)
    }

    /// Output column `x`'s source position with the local correction `o` added to the output point.
    @inlinable @inline(__always)
    func source(_ x: Int, corrected o: SIMD2<Float>) -> (Float, Float) {
        let fx = Float(x)
        var nx = m0 * fx + m2, ny = m3 * fx + m5, d = m6 * fx + m8
        nx += m0 * o.x + m1 * o.y
        ny += m3 * o.x + m4 * o.y
        d += m6 * o.x + m7 * o.y
        return d > 1e-12 ? (nx / d, ny / d) : (-1e9, -1e9)
    }
}

/// Where a source position is sampled: within `eps` of the frame's `width` x `height` pixels.
@usableFromInline
struct SourceBounds {
    @usableFromInline let maxX: Float, maxY: Float
    @usableFromInline static var eps: Float { 1e-3 }

    @inlinable init(width: Int, height: Int) { (maxX, maxY) = (Float(width - 1), Float(height - 1)) }

    @inlinable @inline(__always)
    func contains(_ sx: Float, _ sy: Float) -> Bool {
        sx >= -Self.eps && sy >= -Self.eps && sx <= maxX + Self.eps && sy <= maxY + Self.eps
    }
}

/// Writes an invalid RGB pixel: validity 0 and zero values.
@inlinable @inline(__always)
func writeInvalidRGB(_ i: Int, _ out: UnsafeMutablePointer<Float>, _ valid: UnsafeMutablePointer<UInt8>) {
    let o = i &* 3
    valid[i] = 0
    out[o] = 0
    out[o &+ 1] = 0
    out[o &+ 2] = 0
}

/// Writes a valid RGB pixel, clamped to 0...255.
@inlinable @inline(__always)
func writeRGB(
    _ acc: SIMD4<Float>, _ i: Int, _ out: UnsafeMutablePointer<Float>, _ valid: UnsafeMutablePointer<UInt8>
) {
    let o = i &* 3
    out[o] = min(max(acc[0], 0), 255)
    out[o &+ 1] = min(max(acc[1], 0), 255)
    out[o &+ 2] = min(max(acc[2], 0), 255)
    valid[i] = 1
}

/// The 4 x 4 cubic taps of an 8-bit RGB pixel from a block of rows converted to Float (a
/// ``RowSampler/Cache``'s storage: source row r in slot r & mask, from column colBase), edges
/// clamped to the frame.
@usableFromInline
struct BlockTaps {
    @usableFromInline let block: UnsafeMutablePointer<Float>
    @usableFromInline let stride: Int, mask: Int, colBase: Int, width: Int, height: Int
    @usableFromInline let bounds: SourceBounds
    @usableFromInline let lut: UnsafeBufferPointer<SIMD4<Float>>

    @inlinable
    init(
        block: UnsafeMutablePointer<Float>, stride: Int, mask: Int, colBase: Int, width: Int, height: Int,
        lut: UnsafeBufferPointer<SIMD4<Float>>
    ) {
        (self.block, self.stride, self.mask, self.colBase) = (block, stride, mask, colBase)
        (self.width, self.height, self.lut) = (width, height, lut)
        bounds = SourceBounds(width: width, height: height)
    }

    /// Output pixel `i` from source position (`sx`, `sy`).
    @inlinable @inline(__always)
    func pixel(
        _ i: Int, _ sx: Float, _ sy: Float, _ out: UnsafeMutablePointer<Float>, _ valid: UnsafeMutablePointer<UInt8>
    ) {
        guard bounds.contains(sx, sy) else { return writeInvalidRGB(i, out, valid) }
        let w = width, h = height, steps = Float(CubicTable.steps)
        let cx = min(max(sx, 0), bounds.maxX), cy = min(max(sy, 0), bounds.maxY)
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
            wy[0] * RowSampler<UInt8>.tapRow(block + r0, c0, c1, c2, c3, wx) + wy[1]
            * RowSampler<UInt8>.tapRow(block + r1, c0, c1, c2, c3, wx)
        let lower: SIMD4<Float> =
            wy[2] * RowSampler<UInt8>.tapRow(block + r2, c0, c1, c2, c3, wx) + wy[3]
            * RowSampler<UInt8>.tapRow(block + r3, c0, c1, c2, c3, wx)
        writeRGB(upper + lower, i, out, valid)
    }
}

/// The vertical cubic taps of an 8-bit RGB pixel from the horizontal pass's slots (source row r
/// in slot r & mask, output pixel i at float 3 i), rows clamped to the frame.
@usableFromInline
struct SlotTaps {
    @usableFromInline let rows: UnsafeRawPointer
    @usableFromInline let stride: Int, mask: Int, height: Int
    @usableFromInline let bounds: SourceBounds
    @usableFromInline let lut: UnsafeBufferPointer<SIMD4<Float>>

    @inlinable
    init(
        rows: UnsafeMutablePointer<Float>, stride: Int, mask: Int, width: Int, height: Int,
        lut: UnsafeBufferPointer<SIMD4<Float>>
    ) {
        (self.rows, self.stride, self.mask) = (UnsafeRawPointer(rows), stride, mask)
        (self.height, self.lut) = (height, lut)
        bounds = SourceBounds(width: width, height: height)
    }

    @inlinable @inline(__always)
    func slot(_ r: Int) -> UnsafeRawPointer { rows + (r & mask) &* stride &* 4 }

    /// Output pixel `i` from source position (`sx`, `sy`), alone: validity, rows clamped to the
    /// frame (every row read prepared), weights from the table.
    @inlinable @inline(__always)
    func pixel(
        _ i: Int, _ sx: Float, _ sy: Float, _ out: UnsafeMutablePointer<Float>, _ valid: UnsafeMutablePointer<UInt8>
    ) {
        guard bounds.contains(sx, sy) else { return writeInvalidRGB(i, out, valid) }
        let h = height, steps = Float(CubicTable.steps)
        let cy = min(max(sy, 0), bounds.maxY)
        let iy = Int(cy)  // cy >= 0: truncation is the floor
        let wy = lut[Int((cy - Float(iy)) * steps + 0.5)], col = i &* 12
        // (Each load takes the pixel's RGB and one float past it: the slots have room.)
        let v0 = slot(max(iy - 1, 0)).loadUnaligned(fromByteOffset: col, as: SIMD4<Float>.self)
        let v1 = slot(iy).loadUnaligned(fromByteOffset: col, as: SIMD4<Float>.self)
        let v2 = slot(min(iy + 1, h - 1)).loadUnaligned(fromByteOffset: col, as: SIMD4<Float>.self)
        let v3 = slot(min(iy + 2, h - 1)).loadUnaligned(fromByteOffset: col, as: SIMD4<Float>.self)
        writeRGB((wy[0] * v0 + wy[1] * v1) + (wy[2] * v2 + wy[3] * v3), i, out, valid)
    }
}
