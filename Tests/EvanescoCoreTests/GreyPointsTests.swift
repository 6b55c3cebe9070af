import CKernels
import Testing

@testable import EvanescoCore

/// RowSampler's grey levels at points (what the depth sweep scores): 8-bit frames go through
/// CKernels (grey_points.c), other samples through the Swift loop; the two must agree.
@Suite struct GreyPointsKernel {
    /// Points inside, on the last column and row (the last pixel's word would reach past the
    /// frame), just outside each edge, and far outside.
    static func points(_ w: Int, _ h: Int) -> [SIMD2<Float>] {
        var p: [SIMD2<Float>] = []
        for i in 0..<61 { p.append(SIMD2(Float(i) * 0.377 + 0.11, Float(i % 13) * 0.91 + 0.05)) }
        let (mx, my) = (Float(w - 1), Float(h - 1))
        p += [
            SIMD2(mx, my), SIMD2(mx, 0), SIMD2(0, my), SIMD2(mx - 0.5, my), SIMD2(mx, my - 0.25), SIMD2(0, 0),
            SIMD2(-0.01, 3), SIMD2(3, -0.01), SIMD2(mx + 0.01, 2), SIMD2(2, my + 0.01), SIMD2(-400, 9), SIMD2(1e6, 1e6)
        ]
        return p
    }

    @Test(
        """
        8-bit frames (1, 3, 4 channels; identity, shift and perspective maps) give, bit for bit, the grey levels the \
        same levels in 16 bits give through the Swift loop: NaN outside, the last row and column included, any count \
        of points
        """
    )
    func eightBitMatchesSixteen() {
        let w = 23, h = 11
        let maps: [Homography?] = [
            nil, Homography([1, 0, 2.5, 0, 1, -1.25, 0, 0, 1]),
            Homography([1.02, 0.03, 1.5, -0.02, 0.99, 0.7, 0.0011, -0.0007, 1])
        ]
        for channels in [1, 3, 4] {
            let levels = (0..<(w * h * channels)).map { (i: Int) -> UInt8 in UInt8((i * 73 + i / 7 * 31) % 256) }
            let eight = Image<UInt8>(width: w, height: h, channels: channels, samples: ContiguousArray(levels))
            let sixteen = Image<UInt16>(
                width: w, height: h, channels: channels, samples: ContiguousArray(levels.map { UInt16($0) }))
            for (n, map) in maps.enumerated() {
                let a = RowSampler<UInt8>(frame: eight, homography: map, interpolation: .bilinear)
                let b = RowSampler<UInt16>(frame: sixteen, homography: map, interpolation: .bilinear)
                for count in [Self.points(w, h).count, 7, 1] {
                    let points = Array(Self.points(w, h).prefix(count))
                    var x = [Float](repeating: -1, count: count), y = x
                    points.withUnsafeBufferPointer { p in
                        x.withUnsafeMutableBufferPointer { a.grey(at: p, into: $0) }
                        y.withUnsafeMutableBufferPointer { b.grey(at: p, into: $0) }
                    }
                    #expect(
                        x.map(\.bitPattern) == y.map(\.bitPattern),
                        "\(channels) channels, map \(n), \(count) points: \(x) vs \(y)")
                    if count == Self.points(w, h).count {
                        #expect(x[61..<67].allSatisfy { !$0.isNaN } || n > 0, "the corners are inside")
                        #expect(x.suffix(6).allSatisfy(\.isNaN) || n > 0, "outside is NaN")
                    }
                }
            }
        }
    }

    @Test(
        """
        The grey levels written out (bilinear per channel, the channels' mean) at points inside; the portable and \
        AVX2 variants agree bit for bit
        """
    )
    func knownAnswerAndVariants() {
        let w = 9, h = 6, c = 3
        let levels = (0..<(w * h * c)).map { (i: Int) -> UInt8 in UInt8((i * 41 + 5) % 256) }
        let points: [Float] = [0.25, 0.5, 3.75, 2.125, 8, 5, 7.5, 4.5, 1, 1, 4.1, 0.9, 2.2, 3.3, 6.6, 1.1, 5.5, 5]
        let identity: [Float] = [1, 0, 0, 0, 1, 0, 0, 0, 1]
        var portable = [Float](repeating: 0, count: 9), avx2 = portable
        levels.withUnsafeBufferPointer { image in
            identity.withUnsafeBufferPointer { map in
                var frame = evn_grey_points(
                    image: image.baseAddress, width: w, height: h, channels: c, map: map.baseAddress)
                evn_grey_points_portable(&frame, points, 9, &portable)
                if evn_cpu_has_avx2() != 0 { evn_grey_points_avx2(&frame, points, 9, &avx2) } else { avx2 = portable }
            }
        }
        #expect(portable.map(\.bitPattern) == avx2.map(\.bitPattern))
        for i in 0..<9 {
            let (sx, sy) = (Double(points[2 * i]), Double(points[2 * i + 1]))
            let (x0, y0) = (Int(sx), Int(sy)), (x1, y1) = (min(Int(sx) + 1, w - 1), min(Int(sy) + 1, h - 1))
            let (tx, ty) = (sx - Double(x0), sy - Double(y0))
            var sum = 0.0
            for k in 0..<c {
                func v(_ x: Int, _ y: Int) -> Double { Double(levels[(y * w + x) * c + k]) }
                sum += (v(x0, y0) * (1 - tx) + v(x1, y0) * tx) * (1 - ty) + (v(x0, y1) * (1 - tx) + v(x1, y1) * tx) * ty
            }
            #expect(abs(Double(portable[i]) - sum / 3) < 1e-4, "point \(i): \(portable[i]) vs \(sum / 3)")
        }
    }
}
