/// A warped image plus where it is valid.
public struct WarpResult<Sample: PixelSample>: Sendable {
    /// The warped image (0 where invalid).
    public var image: Image<Sample>
    /// 255 where every interpolation tap of the output pixel fell inside the source frame, 0
    /// elsewhere (OpenCV's "warp an all-255 image and keep == 255"). Merges honour it, so frame
    /// borders never darken a stack.
    public var validity: Image<UInt8>

    /// - Parameters:
    ///   - image: The warped image.
    ///   - validity: 255 where the image is valid, 0 elsewhere.
    @inlinable
    public init(image: Image<Sample>, validity: Image<UInt8>) {
        self.image = image
        self.validity = validity
    }
}

extension Image {
    /// Warps this frame into the reference frame: `homography` maps *this* image's pixel
    /// coordinates to the output's (the registration convention), so output pixel `p` samples
    /// this image at `H^-1 p`. Output pixels whose source falls outside `[0, w-1] x [0, h-1]` are
    /// 0 and invalid. Integer translations are pixel-exact with every interpolation. The pixels
    /// are those of ``RowSampler``, the sampler the burst stacker merges, rounded to the sample type.
    ///
    /// Core Image counterpart: `CIImage.transformed(by:)` / CIPerspectiveTransform (with the
    /// origin and pixel-centre conventions converted, see ``Homography``).
    ///
    /// - Parameters:
    ///   - homography: Maps this image's pixels to the output's.
    ///   - outW: Output width.
    ///   - outH: Output height.
    ///   - interpolation: The sampler.
    /// - Returns: The warped image and its validity mask (255 valid, 0 not).
    @inlinable
    public func warped(
        by homography: Homography, width outW: Int, height outH: Int,
        interpolation: Interpolation = .bilinear
    ) -> WarpResult<Sample> {
        let sampler = RowSampler(frame: self, homography: homography, interpolation: interpolation)
        let c = channels
        var mask = Image<UInt8>(uninitializedWidth: outW, height: outH, channels: 1) { _ in }
        let out: Image<Sample> = mask.samples.withUnsafeMutableBufferPointer { maskBuf in
            let mb = UncheckedSendable(maskBuf)
            return Image(uninitializedWidth: outW, height: outH, channels: c) { dst in
                StripExecutor.forEachStrip(rows: outH, minimumRows: 8) { rows in
                    let mk = mb.value.baseAddress!, d = dst.baseAddress!
                    let row = UnsafeMutablePointer<Float>.allocate(capacity: outW * c)
                    defer { row.deallocate() }
                    // Segments of at most 512 pixels, each with its own cache of converted source
                    // rows, kept as the strip walks down (the 8-bit RGB cubic path reads it).
                    let cached = Sample.self == UInt8.self && c == 3 && interpolation.cubicParameter != nil
                    let caches =
                        cached ? (0..<((outW + 511) / 512)).map { _ in RowSampler<Sample>.Cache(pixels: 512) } : []
                    for y in rows {
                        var x0 = 0
                        while x0 < outW {
                            let x1 = min(outW, x0 + 512)
                            sampler.sampleRow(
                                y: y, x0: x0, x1: x1, into: row + x0 * c, valid: mk + y * outW + x0,
                                cache: cached ? caches[x0 / 512] : nil)
                            x0 = x1
                        }
                        let o = y * outW * c
                        for j in 0..<(outW * c) { d[o &+ j] = Sample(clampingRounded: row[j]) }
                        for x in 0..<outW { mk[y &* outW &+ x] &*= 255 }
                    }
                }
            }
        }
        return WarpResult(image: out, validity: mask)
    }
}
