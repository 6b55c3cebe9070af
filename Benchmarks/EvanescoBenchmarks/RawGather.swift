import CKernels
import EvanescoCore
import Foundation

extension Bench {
    /// The raw merge's gather of one frame at every output cell (`evn_raw_gather_row`, 2000 x 1500
    /// cells: a 12 MP mosaic), sampled by colour differences (the default, ``RawSampling/colour``)
    /// beside each colour's own samples (``RawSampling/sites``), on random samples through a
    /// hand-held frame's homography (half a degree, 0.2 % scale, a fraction of a cell), one thread.
    func rawGather() {
        let w = 2000, h = 1500
        var rng = SplitMix(seed: 12345)
        func next() -> UInt16 { UInt16(truncatingIfNeeded: rng.next() >> 40) % 60000 }
        let planes = (0..<(w * h * 4)).map { _ in next() }, green = (0..<(w * h * 2)).map { _ in next() }
        var params = evn_raw_merge_params()
        params.frames = 1
        params.channels = 4
        params.partner = (-1, 3, -1, 1)
        withUnsafeMutableBytes(of: &params.lut) { b in
            for j in 0..<66 {
                let t = Float(j) / 64
                b.storeBytes(of: t >= 1 ? 0 : exp(-t * t / (2 * 0.35 * 0.35)), toByteOffset: 4 * j, as: Float.self)
            }
        }
        withUnsafeMutableBytes(of: &params.lut_dense) { b in
            for j in 0..<66 {
                let t = Float(j) / 64
                b.storeBytes(of: t >= 0.5 ? 0 : exp(-t * t / 2), toByteOffset: 4 * j, as: Float.self)
            }
        }
        params.slope = (0.8, 0.8, 0.8, 0.8)
        params.intercept = (30, 30, 30, 30)
        params.colour_pull = 1
        let a = Float(0.5 * Double.pi / 180), s: Float = 1.002
        let offsets: [Float] = [-0.25, -0.25, 0.25, -0.25, 0.25, 0.25, -0.25, 0.25]
        var values = [Float](repeating: 0, count: 8 * 256)
        planes.withUnsafeBufferPointer { pp in
            green.withUnsafeBufferPointer { gp in
                var f = evn_raw_frame()
                f.planes = pp.baseAddress
                f.width = Int32(w)
                f.height = Int32(h)
                f.weight_scale = 1
                f.m = (s * cos(a), -sin(a), 1.37, sin(a), s * cos(a), -0.8, 0, 0, 1)
                withUnsafeMutableBytes(of: &f.site) { b in
                    for (j, o) in offsets.enumerated() { b.storeBytes(of: o, toByteOffset: 4 * j, as: Float.self) }
                }
                f.offset = f.site
                func gather(_ f: evn_raw_frame) {
                    var f = f
                    values.withUnsafeMutableBufferPointer { v in
                        for y in 0..<h {
                            for x in stride(from: 0, to: w, by: 256) {
                                evn_raw_gather_row(
                                    &f, &params, Int32(y), Int32(x), Int32(min(256, w - x)), v.baseAddress,
                                    v.baseAddress! + 4 * 256)
                            }
                        }
                    }
                }
                var colour = f
                colour.green = gp.baseAddress
                compare(
                    "raw gather 3 M cells, 1 thread", "colour differences (default)", { gather(colour) },
                    "each colour's own samples (sites)", { gather(f) })
            }
        }
    }
}
