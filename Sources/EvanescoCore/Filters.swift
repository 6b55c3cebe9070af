import Foundation

/// Order statistics and separable filters shared by the pipelines.
public enum Selection {
    /// The k-th smallest element by quickselect (linear time on average; reorders `v`).
    @inlinable
    public static func kth(_ v: inout [Float], _ k: Int) -> Float {
        precondition(k >= 0 && k < v.count, "Selection.kth: k out of range")
        // Through the buffer: the array's bounds and uniqueness checks would run on every step.
        return v.withUnsafeMutableBufferPointer { b in
            let v = b.baseAddress!
            var lo = 0, hi = b.count - 1
            while lo < hi {
                let pivot = v[(lo + hi) / 2]
                var i = lo, j = hi
                // The pivot stops both scans, so i and j stay within lo...hi.
                while i <= j {
                    while v[i] < pivot { i += 1 }
                    while v[j] > pivot { j -= 1 }
                    if i <= j { let t = v[i]; v[i] = v[j]; v[j] = t; i += 1; j -= 1 }
                }
                if k <= j { hi = j } else if k >= i { lo = i } else { break }
            }
            return v[k]
        }
    }

    /// The upper median (0 for an empty array; reorders `v`).
    @inlinable
    public static func median(_ v: inout [Float]) -> Float { v.isEmpty ? 0 : kth(&v, v.count / 2) }
}

/// A sample a Gaussian can blur: Float planes and SIMD4 pixels.
public protocol BlurSample {
    static var zero: Self { get }
    static func + (a: Self, b: Self) -> Self
    static func * (a: Self, s: Float) -> Self
}
extension Float: BlurSample {}
extension SIMD4: BlurSample where Scalar == Float {}

/// Separable Gaussian blur of float planes (CIGaussianBlur's counterpart), edges clamped, run in
/// strips on all cores.
public enum GaussianBlur {
    /// Normalised weights for offsets -r...r, r = ceil(truncate * sigma).
    @inlinable
    public static func kernel(sigma: Float, truncate: Float) -> [Float] {
        let k = max(1, Int((truncate * sigma).rounded(.up)))
        let d = 2 * sigma * sigma
        let g: [Float] = (-k...k).map { (i: Int) -> Float in expf(-Float(i * i) / d) }
        let s = g.reduce(0, +)
        return g.map { $0 / s }
    }

    /// Separable Gaussian over a width x height grid of samples, edges clamped; rows in strips.
    @inlinable
    public static func apply<T: BlurSample>(_ src: [T], width w: Int, height h: Int, sigma: Float, truncate: Float = 3) -> [T] {
        let g = kernel(sigma: sigma, truncate: truncate), k = g.count / 2
        var tmp = [T](repeating: .zero, count: w * h), out = [T](repeating: .zero, count: w * h)
        src.withUnsafeBufferPointer { S in tmp.withUnsafeMutableBufferPointer { TP in g.withUnsafeBufferPointer { G in
            let t = UncheckedSendable(TP)
            StripExecutor.forEachStrip(rows: h, minimumRows: 8) { rows in
                let taps = 2 * k + 1, gp = G.baseAddress!
                for y in rows {
                    let row = y * w, sp = S.baseAddress! + row, tp = t.value.baseAddress! + row
                    for x in 0..<w {
                        var acc = T.zero
                        if x >= k && x + k < w {
                            let p = sp + (x - k)
                            for j in 0..<taps { acc = acc + p[j] * gp[j] }
                        } else {
                            for j in 0..<taps { acc = acc + sp[min(max(x - k + j, 0), w - 1)] * gp[j] }
                        }
                        tp[x] = acc
                    }
                }
            }
        }}}
        tmp.withUnsafeBufferPointer { TB in out.withUnsafeMutableBufferPointer { O in g.withUnsafeBufferPointer { G in
            let o = UncheckedSendable(O)
            StripExecutor.forEachStrip(rows: h, minimumRows: 8) { rows in
                for y in rows {
                    let op = o.value.baseAddress! + y * w
                    for j in 0...(2 * k) {
                        let yy = min(max(y - k + j, 0), h - 1), gw = G[j], ip = TB.baseAddress! + yy * w
                        for x in 0..<w { op[x] = op[x] + ip[x] * gw }
                    }
                }
            }
        }}}
        return out
    }
}
