import CKernels
import EvanescoCore
import Foundation

extension Bench {
    /// The raw merge's spatial denoise (`evn_raw_denoise_transform`, 2000 x 1500 cells of four
    /// colours: a 12 MP mosaic's planes) on noisy planes kept by 12 frames, AVX2 beside the
    /// portable build, one thread. `EvanescoBenchmarks raw` also times it inside the whole merge
    /// (`Benchmarks/raw-stack-vs-anchor.py`, pug-12mp).
    func rawDenoise() {
        let w = 2000, h = 1500
        var rng = SplitMix(seed: 4242)
        let planes = (0..<(w * h * 4)).map { i in
            UInt16(clampingRounded: 20000 + 8000 * sinf(Float((i / 4) % w) * 0.01) + 120 * (rng.uniform() - 0.5))
        }
        let kept = [UInt16](repeating: 12, count: w * h)
        var p = evn_raw_transform_params()
        p.slope = (0.8, 0.8, 0.8, 0.8)
        p.intercept = (30, 30, 30, 30)
        (p.strength, p.threshold, p.guide) = (1, 2.7, 1)
        var out = [UInt16](repeating: 0, count: w * h * 4)
        typealias Kernel = (
            UnsafePointer<UInt16>?, UnsafePointer<UInt16>?, Int32, Int32, UnsafePointer<evn_raw_transform_params>?,
            Int32, Int32, UnsafeMutablePointer<UInt16>?
        ) -> Int32
        func run(_ kernel: Kernel) {
            planes.withUnsafeBufferPointer { s in
                kept.withUnsafeBufferPointer { k in
                    out.withUnsafeMutableBufferPointer { o in
                        // In strips of 188 rows, as the merge splits it on two threads (8 strips).
                        var y = 0
                        while y < h {
                            let y1 = min(h, y + 188)
                            precondition(
                                kernel(
                                    s.baseAddress, k.baseAddress, Int32(w), Int32(h), &p, Int32(y), Int32(y1),
                                    o.baseAddress) == 0)
                            y = y1
                        }
                    }
                }
            }
        }
        compare(
            "raw denoise 12 M samples", "AVX2, 1 thread", { run(evn_raw_denoise_transform_avx2) },
            "portable, 1 thread", { run(evn_raw_denoise_transform_portable) })
    }
}
