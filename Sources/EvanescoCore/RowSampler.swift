import CKernels

/// The one warp sampler: samples a frame along row segments of an output grid through the
/// inverse of a homography. ``Image/warped(by:width:height:interpolation:)`` runs it row by row;
/// the burst stacker runs it tile by tile, so the pixels a merge samples and the pixels
/// `--save-frames` writes are the same.
///
/// An output pixel is valid when its source position lies inside `[0, w-1] x [0, h-1]` (to
/// 1/1000 px); taps beyond the edge are clamped. Values are floats on the sample's own scale;
/// cubic overshoot is clamped to 0...255 and 0...65535 for integer samples, never for float
/// samples (depth maps and linear light are not bounded by 1).
public struct RowSampler<Sample: PixelSample>: @unchecked Sendable {
    /// The sampled frame's size and channels.
    public let width: Int, height: Int, channels: Int
    /// Where the samples are: an image (held here, so its storage stays alive) or memory held
    /// elsewhere (a memory-mapped spill file), kept alive by `owner`.
    @usableFromInline let image: Image<Sample>?
    @usableFromInline let external: UnsafePointer<Sample>?
    @usableFromInline let owner: AnyObject?
    /// Output -> frame, row-major; nil when the frame is the output grid (identity).
    @usableFromInline let m: [Float]?
    public let interpolation: Interpolation
    /// A local correction on top of the homography (local alignment), or nil.
    public let offsets: DisplacementField?

    /// The rows (or columns) the cubic taps of source positions between `a` and `b` read, on an
    /// axis of `count` samples: the taps' span with one sample of margin on each side, clamped to
    /// the axis. (Between a segment's end points the positions can dip an ulp past an end
    /// point's, since a projective division is not monotonic in floating point, and across an
    /// integer that is one more row or column of taps.) `a` and `b` must not be NaN.
    @inlinable @inline(__always)
    static func tapSpan(_ a: Float, _ b: Float, count: Int) -> (lo: Int, hi: Int) {
        let last = Float(count - 1)
        return (max(0, Int(min(max(min(a, b), 0), last)) - 2), min(count - 1, Int(min(max(max(a, b), 0), last)) + 3))
    }

    /// - Parameters:
    ///   - frame: The frame to sample.
    ///   - homography: Maps the frame's pixels to the output's (the registration convention);
    ///     nil or identity samples the frame as it is. A singular homography samples nothing.
    ///   - interpolation: The sampler.
    ///   - offsets: A local correction: output pixel `p` samples the frame at `H^-1 (p + d(p))`.
    @inlinable
    public init(
        frame: Image<Sample>, homography: Homography?, interpolation: Interpolation, offsets: DisplacementField? = nil
    ) {
        self.init(
            image: frame, external: nil, owner: nil, width: frame.width, height: frame.height, channels: frame.channels,
            homography: homography, interpolation: interpolation, offsets: offsets)
    }

    /// A sampler over samples held outside an ``Image`` (rows of a memory-mapped file, say),
    /// interleaved and row-major, `width * height * channels` of them.
    ///
    /// - Parameters:
    ///   - samples: The first sample; it must stay valid while `owner` lives.
    ///   - width: Pixels per row.
    ///   - height: Rows.
    ///   - channels: Samples per pixel.
    ///   - owner: Whatever keeps `samples` valid; the sampler holds it.
    ///   - homography: As in ``init(frame:homography:interpolation:offsets:)``.
    ///   - interpolation: The sampler.
    ///   - offsets: A local correction, or nil.
    public init(
        samples: UnsafePointer<Sample>, width: Int, height: Int, channels: Int, owner: AnyObject,
        homography: Homography?, interpolation: Interpolation, offsets: DisplacementField? = nil
    ) {
        self.init(
            image: nil, external: samples, owner: owner, width: width, height: height, channels: channels,
            homography: homography, interpolation: interpolation, offsets: offsets)
    }

    @usableFromInline
    init(
        image: Image<Sample>?, external: UnsafePointer<Sample>?, owner: AnyObject?, width: Int, height: Int,
        channels: Int,
        homography: Homography?, interpolation: Interpolation, offsets: DisplacementField?
    ) {
        self.image = image
        self.external = external
        self.owner = owner
        self.width = width
        self.height = height
        self.channels = channels
        self.interpolation = interpolation
        self.offsets = offsets
        if let h = homography, h != .identity {
            m = h.inverse.map { $0.m.map { Float($0) } } ?? [0, 0, -1e9, 0, 0, -1e9, 0, 0, 1]
        } else {
            m = offsets == nil ? nil : [1, 0, 0, 0, 1, 0, 0, 0, 1]
        }
    }

    /// Writes pixels `x0..<x1` of output row `y` into `out` (channels interleaved) and 1 or 0
    /// into `valid`, one per pixel.
    ///
    /// - Parameters:
    ///   - y: The output row.
    ///   - x0: The segment's first output column.
    ///   - x1: One past its last column.
    ///   - out: Room for `(x1 - x0) * channels` floats.
    ///   - valid: Room for `x1 - x0` bytes.
    ///   - cache: Optional converted source rows (see ``Cache``), made for segments of at
    ///     least `x1 - x0` pixels; 8-bit RGB cubic sampling reads its taps from there.
    @inlinable
    public func sampleRow(
        y: Int, x0: Int, x1: Int, into out: UnsafeMutablePointer<Float>, valid: UnsafeMutablePointer<UInt8>,
        cache: Cache? = nil
    ) {
        let c = channels, w = width
        guard w > 0 && height > 0 else {
            for j in 0..<((x1 - x0) * c) { out[j] = 0 }
            for i in 0..<(x1 - x0) { valid[i] = 0 }
            return
        }
        withSamples { p in
            guard let m else {
                let base = (y * w + x0) * c
                for j in 0..<((x1 - x0) * c) { out[j] = p[base + j].floatValue }
                for i in 0..<(x1 - x0) { valid[i] = 1 }
                return
            }
            if Sample.self == UInt8.self && c == 3 && (interpolation == .catmullRom || interpolation == .bicubic) {
                let bytes = UnsafeRawPointer(p).assumingMemoryBound(to: UInt8.self)
                if let cache, offsets == nil, rowCubicRGB8TwoPass(bytes, m, y, x0, x1, out, valid, cache) { return }
                if let cache, rowCubicRGB8Cached(bytes, m, y, x0, x1, out, valid, cache) { return }
                // (A segment spanning too many source rows falls through to the general path.)
            }
            switch (c, interpolation) {
            case (3, .nearest): row(p, m, y, x0, x1, out, valid, channels: 3, kind: 0)
            case (3, .bilinear): row(p, m, y, x0, x1, out, valid, channels: 3, kind: 1)
            case (3, _): row(p, m, y, x0, x1, out, valid, channels: 3, kind: 2)
            case (1, .bilinear) where offsets == nil: rowBilinear1(p, m, y, x0, x1, out, valid)
            case (_, .nearest): row(p, m, y, x0, x1, out, valid, channels: c, kind: 0)
            case (_, .bilinear): row(p, m, y, x0, x1, out, valid, channels: c, kind: 1)
            default: row(p, m, y, x0, x1, out, valid, channels: c, kind: 2)
            }
        }
    }

    /// The frame's grey levels (the mean of its channels, bilinear) at output positions
    /// `points`, through the homography only (``offsets`` are not applied: add them to the
    /// points), into `values`: NaN where the source position is outside the frame.
    @inlinable
    public func grey(at points: UnsafeBufferPointer<SIMD2<Float>>, into values: UnsafeMutableBufferPointer<Float>) {
        let w = width, h = height, c = channels, maxX = Float(w - 1), maxY = Float(h - 1)
        let mm = m ?? [1, 0, 0, 0, 1, 0, 0, 0, 1]
        let (m0, m1, m2, m3, m4, m5, m6, m7, m8) = (mm[0], mm[1], mm[2], mm[3], mm[4], mm[5], mm[6], mm[7], mm[8])
        let scale = 1 / Float(c)
        let count = min(points.count, values.count)
        // 8-bit frames (most bursts; the depth sweep's every point): CKernels, eight points a
        // step, the same arithmetic.
        if Sample.self == UInt8.self, (1...4).contains(c), count > 0 {
            withSamples { q in
                mm.withUnsafeBufferPointer { map in
                    var frame = evn_grey_points(
                        image: UnsafeRawPointer(q).assumingMemoryBound(to: UInt8.self), width: w, height: h,
                        channels: c,
                        map: map.baseAddress)
                    UnsafeRawPointer(points.baseAddress!).withMemoryRebound(to: Float.self, capacity: 2 * count) {
                        evn_grey_points_run(&frame, $0, count, values.baseAddress)
                    }
                }
            }
            return
        }
        withSamples { q in
            for i in 0..<count {
                let p = points[i]
                let d = m6 * p.x + m7 * p.y + m8
                let sx = (m0 * p.x + m1 * p.y + m2) / d, sy = (m3 * p.x + m4 * p.y + m5) / d
                guard d > 1e-12, sx >= 0, sy >= 0, sx <= maxX, sy <= maxY else {
                    values[i] = .nan
                    continue
                }
                let x0 = Int(sx), y0 = Int(sy), x1 = Swift.min(x0 + 1, w - 1), y1 = Swift.min(y0 + 1, h - 1)
                let tx = sx - Float(x0), ty = sy - Float(y0)
                let r0 = y0 &* w, r1 = y1 &* w
                var sum: Float = 0
                for k in 0..<c {
                    let a = q[(r0 &+ x0) &* c &+ k].floatValue, b = q[(r0 &+ x1) &* c &+ k].floatValue
                    let e = q[(r1 &+ x0) &* c &+ k].floatValue, f = q[(r1 &+ x1) &* c &+ k].floatValue
                    sum += (a + (b - a) * tx) * (1 - ty) + (e + (f - e) * tx) * ty
                }
                values[i] = sum * scale
            }
        }
    }

    /// Calls `body` with the frame's first sample (valid for the call).
    @inlinable @inline(__always)
    func withSamples<R>(_ body: (UnsafePointer<Sample>) -> R) -> R {
        if let external { return body(external) }
        return image!.samples.withUnsafeBufferPointer { body($0.baseAddress!) }
    }

}
