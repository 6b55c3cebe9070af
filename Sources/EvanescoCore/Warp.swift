/// A warped image plus where it is valid.
public struct WarpResult<Sample: PixelSample>: Sendable {
    /// The warped image (0 where invalid).
    public var image: Image<Sample>
    /// 255 where every interpolation tap of the output pixel fell inside the source frame, 0
    /// elsewhere (OpenCV's "warp an all-255 image and keep == 255"). Merges honour it, so frame
    /// borders never darken a stack.
    public var validity: Image<UInt8>

    @inlinable
    public init(image: Image<Sample>, validity: Image<UInt8>) {
        self.image = image; self.validity = validity
    }
}

extension Image {
    /// Warps this frame into the reference frame: `homography` maps *this* image's pixel
    /// coordinates to the output's (the registration convention), so output pixel `p` samples
    /// this image at `H^-1 p`. Output pixels whose source falls outside `[0, w-1] x [0, h-1]` are
    /// 0 and invalid. Integer translations are pixel-exact with every interpolation.
    ///
    /// Core Image counterpart: `CIImage.transformed(by:)` / CIPerspectiveTransform (with the
    /// origin and pixel-centre conventions converted, see ``Homography``).
    @inlinable
    public func warped(by homography: Homography, width outW: Int, height outH: Int,
                       interpolation: Interpolation = .bilinear) -> WarpResult<Sample> {
        guard let inv = homography.inverse else {
            return WarpResult(image: Image(width: outW, height: outH, channels: channels),
                              validity: Image<UInt8>(width: outW, height: outH, channels: 1))
        }
        let m = inv.m.map { Float($0) }
        let (m0, m1, m2, m3, m4, m5, m6, m7, m8) = (m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8])
        let affine = inv.isAffine
        let c = channels, sw = width, sh = height
        let maxX = Float(sw - 1), maxY = Float(sh - 1), eps: Float = 1e-3
        var mask = Image<UInt8>(width: outW, height: outH, channels: 1, unsafeUninitialized: { _ in })
        let out: Image<Sample> = samples.withUnsafeBufferPointer { src in
            mask.samples.withUnsafeMutableBufferPointer { maskBuf in
                let mb = UncheckedSendable(maskBuf)
                return Image(width: outW, height: outH, channels: c) { dst in
                    StripExecutor.forEachStrip(rows: outH, minimumRows: 8) { rows in
                        let mk = mb.value
                        for y in rows {
                            let fy = Float(y)
                            for x in 0..<outW {
                                let fx = Float(x)
                                var sx = m0 * fx + m1 * fy + m2, sy = m3 * fx + m4 * fy + m5
                                if !affine {
                                    let w = m6 * fx + m7 * fy + m8
                                    if w <= 1e-12 { sx = -1e9; sy = -1e9 } else { sx /= w; sy /= w }
                                }
                                let o = (y * outW + x) * c
                                guard sx >= -eps, sy >= -eps, sx <= maxX + eps, sy <= maxY + eps else {
                                    for ch in 0..<c { dst[o + ch] = .zero }
                                    mk[y * outW + x] = 0
                                    continue
                                }
                                mk[y * outW + x] = 255
                                Image.sample(src, sw, sh, c, sx, sy, interpolation, into: dst, at: o)
                            }
                        }
                    }
                }
            }
        }
        return WarpResult(image: out, validity: mask)
    }

    /// Interpolates the source at (sx, sy) (edges clamped) into `dst[o ..< o + c]`.
    @inlinable @inline(__always)
    static func sample(_ src: UnsafeBufferPointer<Sample>, _ sw: Int, _ sh: Int, _ c: Int,
                       _ sx: Float, _ sy: Float, _ interpolation: Interpolation,
                       into dst: UnsafeMutableBufferPointer<Sample>, at o: Int) {
        switch interpolation {
        case .nearest:
            let ix = min(max(Int(sx + 0.5), 0), sw - 1), iy = min(max(Int(sy + 0.5), 0), sh - 1)
            let s = (iy * sw + ix) * c
            for ch in 0..<c { dst[o + ch] = src[s + ch] }
        case .bilinear:
            let fx = sx.rounded(.down), fy = sy.rounded(.down)
            let tx = sx - fx, ty = sy - fy
            let x0 = min(max(Int(fx), 0), sw - 1), y0 = min(max(Int(fy), 0), sh - 1)
            let x1 = min(x0 + 1, sw - 1), y1 = min(y0 + 1, sh - 1)
            let r0 = y0 * sw, r1 = y1 * sw
            for ch in 0..<c {
                let a = src[(r0 + x0) * c + ch].floatValue, b = src[(r0 + x1) * c + ch].floatValue
                let d = src[(r1 + x0) * c + ch].floatValue, e = src[(r1 + x1) * c + ch].floatValue
                let top = a + (b - a) * tx, bottom = d + (e - d) * tx
                dst[o + ch] = Sample(clampingRounded: top + (bottom - top) * ty)
            }
        case .bicubic, .catmullRom:
            let fx = sx.rounded(.down), fy = sy.rounded(.down)
            let a: Float = interpolation.cubicParameter ?? -0.75
            let wx = Kernels.cubicWeights(sx - fx, a: a), wy = Kernels.cubicWeights(sy - fy, a: a)
            let ix = Int(fx), iy = Int(fy)
            let xs = (min(max(ix - 1, 0), sw - 1), min(max(ix, 0), sw - 1), min(max(ix + 1, 0), sw - 1), min(max(ix + 2, 0), sw - 1))
            let ys = (min(max(iy - 1, 0), sh - 1), min(max(iy, 0), sh - 1), min(max(iy + 1, 0), sh - 1), min(max(iy + 2, 0), sh - 1))
            for ch in 0..<c {
                @inline(__always) func row(_ r: Int) -> Float {
                    let b = r * sw
                    return wx.0 * src[(b + xs.0) * c + ch].floatValue + wx.1 * src[(b + xs.1) * c + ch].floatValue
                         + wx.2 * src[(b + xs.2) * c + ch].floatValue + wx.3 * src[(b + xs.3) * c + ch].floatValue
                }
                let v = wy.0 * row(ys.0) + wy.1 * row(ys.1) + wy.2 * row(ys.2) + wy.3 * row(ys.3)
                dst[o + ch] = Sample(clampingRounded: v)
            }
        }
    }
}
