import EvanescoCore

extension Image where Sample == UInt8 {
    /// Paints an RGB colour over the pixels at `x` x `y` (a block standing still, a moving square).
    public mutating func paint(x: Range<Int>, y: Range<Int>, _ rgb: (UInt8, UInt8, UInt8)) {
        for row in y {
            for col in x {
                self[col, row, 0] = rgb.0
                self[col, row, 1] = rgb.1
                self[col, row, 2] = rgb.2
            }
        }
    }
}
