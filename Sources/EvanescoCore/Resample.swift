/// How a sample between pixel centres is computed.
public enum Interpolation: String, Sendable, CaseIterable, Codable {
    /// The nearest pixel centre (CISamplerFilterNearest; OpenCV INTER_NEAREST_EXACT).
    case nearest
    /// Linear in x and y over the 4 nearest pixels (CISamplerFilterLinear; OpenCV INTER_LINEAR).
    case bilinear
    /// Keys cubic convolution, a = -0.75, over 16 pixels: CIBicubicScaleTransform with B = 0,
    /// C = 0.75, and OpenCV's INTER_CUBIC. Integer outputs are clamped; Float outputs may
    /// overshoot slightly at edges, as cubic filters do.
    case bicubic
    /// Catmull-Rom cubic (Keys, a = -0.5), 16 pixels: reproduces linear ramps exactly (Keys'
    /// a = -0.75, `bicubic`, misplaces a ramp by up to ~0.05 px at quarter-pixel phases), but
    /// softens detail more: a real photo shifted by a fraction of a pixel and back keeps 1.2-1.6 dB
    /// less than with `bicubic`, and stacks lose 0.2-0.45 dB (see `StackOptions.interpolation`).
    case catmullRom

    /// Keys' cubic parameter `a` of the cubic interpolations (-0.75 for ``bicubic``, -0.5 for
    /// ``catmullRom``); nil for the others. Every cubic sampler takes its weights from here.
    public var cubicParameter: Float? {
        switch self {
        case .bicubic: -0.75
        case .catmullRom: -0.5
        case .nearest, .bilinear: nil
        }
    }
}

/// Interpolation kernels shared by resizing, warps and the stacker's warper.
public enum Kernels {
    /// Keys cubic weights for taps at offsets -1, 0, 1, 2 from `floor(x)`, fraction `t`
    /// (a = -0.75: OpenCV INTER_CUBIC; a = -0.5: Catmull-Rom).
    @inlinable @inline(__always)
    public static func cubicWeights(_ t: Float, a: Float = -0.75) -> (Float, Float, Float, Float) {
        @inline(__always) func near(_ x: Float) -> Float { ((a + 2) * x - (a + 3)) * x * x + 1 }
        @inline(__always) func far(_ x: Float) -> Float { ((a * x - 5 * a) * x + 8 * a) * x - 4 * a }
        return (far(1 + t), near(t), near(1 - t), far(2 - t))
    }
}

extension Image {
    /// Resamples to `newWidth x newHeight`, pixel-centre aligned (source coordinate of output
    /// pixel x is `(x + 0.5) * srcW / dstW - 0.5`), edges clamped.
    /// Core Image counterpart: CIBicubicScaleTransform / CILanczosScaleTransform (with our
    /// top-left origin). Separable: a vertical pass into a row buffer, then a horizontal pass.
    @inlinable
    public func resized(
        width newWidth: Int, height newHeight: Int,
        interpolation: Interpolation = .bilinear
    ) -> Image<Sample> {
        precondition(newWidth > 0 && newHeight > 0, "resize to an empty image")
        if newWidth == width && newHeight == height { return self }
        let c = channels, sw = width, sh = height
        let sx = Float(sw) / Float(newWidth), sy = Float(sh) / Float(newHeight)
        // Taps along one axis: (first index per tap, weights), clamped to the edge.
        func taps(_ n: Int, _ size: Int, _ scale: Float) -> (idx: [Int32], w: [Float], k: Int) {
            let k = interpolation == .nearest ? 1 : interpolation == .bilinear ? 2 : 4
            let a: Float = interpolation.cubicParameter ?? -0.75
            var idx = [Int32](repeating: 0, count: n * k), w = [Float](repeating: 0, count: n * k)
            for o in 0..<n {
                let s = (Float(o) + 0.5) * scale - 0.5
                switch interpolation {
                case .nearest:
                    idx[o] = Int32(min(max(Int((Float(o) + 0.5) * scale), 0), size - 1))
                    w[o] = 1
                case .bilinear:
                    let f = s.rounded(.down), t = s - f, i = Int(f)
                    idx[o * 2] = Int32(min(max(i, 0), size - 1))
                    idx[o * 2 + 1] = Int32(min(max(i + 1, 0), size - 1))
                    w[o * 2] = 1 - t
                    w[o * 2 + 1] = t
                case .bicubic, .catmullRom:
                    let f = s.rounded(.down), t = s - f, i = Int(f)
                    let (w0, w1, w2, w3) = Kernels.cubicWeights(t, a: a)
                    for (j, wt) in [w0, w1, w2, w3].enumerated() {
                        idx[o * 4 + j] = Int32(min(max(i - 1 + j, 0), size - 1))
                        w[o * 4 + j] = wt
                    }
                }
            }
            return (idx, w, k)
        }
        let xt = taps(newWidth, sw, sx), yt = taps(newHeight, sh, sy)
        return samples.withUnsafeBufferPointer { src in
            Image(uninitializedWidth: newWidth, height: newHeight, channels: c) { dst in
                xt.idx.withUnsafeBufferPointer { xi in
                    xt.w.withUnsafeBufferPointer { xw in
                        yt.idx.withUnsafeBufferPointer { yi in
                            yt.w.withUnsafeBufferPointer { yw in
                                StripExecutor.forEachStrip(rows: newHeight, minimumRows: 16) { rows in
                                    var line = [Float](repeating: 0, count: sw * c)
                                    line.withUnsafeMutableBufferPointer { line in
                                        for y in rows {
                                            // Vertical pass: blend the source rows this output row needs.
                                            for i in 0..<(sw * c) { line[i] = 0 }
                                            for j in 0..<yt.k {
                                                let wgt = yw[y * yt.k + j], r = Int(yi[y * yt.k + j]) * sw * c
                                                if wgt == 0 { continue }
                                                for i in 0..<(sw * c) { line[i] += wgt * src[r + i].floatValue }
                                            }
                                            // Horizontal pass.
                                            var o = y * newWidth * c
                                            for x in 0..<newWidth {
                                                for ch in 0..<c {
                                                    var acc: Float = 0
                                                    for j in 0..<xt.k {
                                                        acc += xw[x * xt.k + j] * line[Int(xi[x * xt.k + j]) * c + ch]
                                                    }
                                                    dst[o + ch] = Sample(clampingRounded: acc)
                                                }
                                                o += c
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// ``Image/resized(width:height:interpolation:)`` as an ``ImageTransform``, to resize an
/// ``AnyImage`` whatever its sample type: `image.map(Resize(width: w, height: h))`.
public struct Resize: ImageTransform {
    /// Target width in pixels.
    public var width: Int
    /// Target height in pixels.
    public var height: Int
    /// The resampling filter.
    public var interpolation: Interpolation
    /// - Parameters:
    ///   - width: Target width.
    ///   - height: Target height.
    ///   - interpolation: The resampling filter.
    public init(width: Int, height: Int, interpolation: Interpolation = .bilinear) {
        self.width = width
        self.height = height
        self.interpolation = interpolation
    }
    /// Resizes one image.
    ///
    /// - Parameter image: The image.
    /// - Returns: The image at the target size.
    public func apply<S: PixelSample>(_ image: Image<S>) -> Image<S> {
        image.resized(width: width, height: height, interpolation: interpolation)
    }
}
