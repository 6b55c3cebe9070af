import CKernels
import EvanescoCore
import Foundation

extension Bench {
    /// The raw merge's spatial denoise (`evn_raw_denoise_row`, 2000 x 1500 cells, a 12 MP mosaic's
    /// four planes one after the other) on noisy planes kept by 12 frames, AVX2 beside the portable
    /// build of the same row, one thread. `EvanescoBenchmarks raw` also times it inside the whole
    /// merge (`Benchmarks/raw-stack-vs-anchor.py`, pug-12mp).
    func rawDenoise() {
        let w = 2000, h = 1500
        var rng = SplitMix(seed: 4242)
        let plane = (0..<(w * h)).map { i in 20000 + 8000 * sinf(Float(i % w) * 0.01) + 120 * (rng.uniform() - 0.5) }
        let kept = [UInt16](repeating: 12, count: w)
        var p = evn_raw_denoise_params()
        (p.slope, p.intercept, p.strength, p.texture) = (0.8, 30, 0.5, 9)
        var out = [Float](repeating: 0, count: w)
        typealias Row = (
            UnsafePointer<Float>, UnsafePointer<Float>, UnsafePointer<Float>, UnsafePointer<UInt16>?, Int,
            UnsafePointer<evn_raw_denoise_params>, UnsafeMutablePointer<Float>
        ) -> Void
        func run(_ row: Row) {
            plane.withUnsafeBufferPointer { s in
                kept.withUnsafeBufferPointer { k in
                    out.withUnsafeMutableBufferPointer { o in
                        for _ in 0..<4 {
                            for y in 0..<h {
                                let a = s.baseAddress! + max(0, y - 1) * w, b = s.baseAddress! + y * w
                                let c = s.baseAddress! + min(h - 1, y + 1) * w
                                row(a, b, c, k.baseAddress, w, &p, o.baseAddress!)
                            }
                        }
                    }
                }
            }
        }
        compare(
            "raw denoise 12 M samples", "AVX2, 1 thread", { run(evn_raw_denoise_row_avx2) }, "portable, 1 thread",
            { run(evn_raw_denoise_row_portable) })
    }
}
