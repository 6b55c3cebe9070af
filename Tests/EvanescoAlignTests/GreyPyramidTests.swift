import CKernels
import EvanescoCore
import Testing

@testable import EvanescoAlign

/// The pyramid's base: the luma of 8-bit RGB (and RGBA) frames comes from CKernels, of other
/// samples from the Swift loop; both are the same formula.
@Suite struct GreyPyramidLuma {
    @Test(
        """
        8-bit luma (3 and 4 channels, odd sizes, strips over the cores): 0.299 r + 0.587 g + 0.114 b in that order, \
        bit for bit, and the same as the same levels as Float samples scaled to 0...1; both kernel variants agree
        """
    )
    func lumaOfEightBit() {
        for (c, w, h) in [(3, 37, 131), (4, 19, 70), (3, 1, 1)] {
            let levels = (0..<(w * h * c)).map { (i: Int) -> UInt8 in UInt8((i * 97 + i / 5 * 13) % 256) }
            let luma = GreyPyramid.luma255(
                Image<UInt8>(width: w, height: h, channels: c, samples: ContiguousArray(levels)))
            #expect(luma.width == w && luma.height == h && luma.channels == 1)
            var written = [Float](repeating: 0, count: w * h)
            for i in 0..<(w * h) {
                let (r, g, b) = (Float(levels[i * c]), Float(levels[i * c + 1]), Float(levels[i * c + 2]))
                let sum: Float = 0.299 * r + 0.587 * g + 0.114 * b
                written[i] = sum * 1
            }
            #expect(Array(luma.samples).map(\.bitPattern) == written.map(\.bitPattern), "\(c) channels, \(w)x\(h)")
            let float = GreyPyramid.luma255(
                Image<Float>(width: w, height: h, channels: c, samples: ContiguousArray(levels.map { Float($0) / 255 }))
            )
            let worst = zip(luma.samples, float.samples).map { abs($0 - $1) }.max() ?? 0
            #expect(worst < 1e-4, "\(c) channels: 8-bit and Float luma differ by \(worst)")
            if evn_cpu_has_avx2() != 0 {
                var portable = [Float](repeating: 0, count: w * h), avx2 = portable
                evn_luma_rgb8_portable(levels, c, w * h, 1, &portable)
                evn_luma_rgb8_avx2(levels, c, w * h, 1, &avx2)
                #expect(portable.map(\.bitPattern) == avx2.map(\.bitPattern))
            }
        }
    }
}
