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
                    if i <= j {
                        let t = v[i]
                        v[i] = v[j]
                        v[j] = t
                        i += 1
                        j -= 1
                    }
                }
                if k <= j { hi = j } else if k >= i { lo = i } else { break }
            }
            return v[k]
        }
    }

    /// The upper median (0 for an empty array; reorders `v`).
    @inlinable
    public static func median(_ v: inout [Float]) -> Float { v.isEmpty ? 0 : kth(&v, v.count / 2) }

    /// ``kth(_:_:)`` for values that are all 0 or more (magnitudes: residuals, distances), by
    /// their bits (which order such floats as their values do), a byte at a time from the top:
    /// count each byte's values, keep those of the byte where the k-th falls, on to the next
    /// byte. No comparisons to mispredict: about 5 times quickselect's speed on the 1,024
    /// residuals of a registration step. The same value as ``kth(_:_:)``; a negative or NaN
    /// value makes it fall back to that. Reorders `v`.
    @inlinable
    public static func kthOfMagnitudes(_ v: inout [Float], _ k: Int) -> Float {
        precondition(k >= 0 && k < v.count, "Selection.kthOfMagnitudes: k out of range")
        let found: Float? = v.withUnsafeMutableBufferPointer { b in
            b.withMemoryRebound(to: UInt32.self) { keys in
                withUnsafeTemporaryAllocation(of: Int.self, capacity: 256) { h in
                    let c = keys.baseAddress!, hist = h.baseAddress!
                    var count = keys.count, rank = k
                    for shift in stride(from: 24, through: 0, by: -8) {
                        hist.update(repeating: 0, count: 256)
                        var bad: UInt32 = 0
                        for i in 0..<count {
                            let key = c[i]
                            bad |= key >> 31 | (key > 0x7F80_0000 ? 1 : 0)  // negative, or NaN
                            hist[Int(truncatingIfNeeded: key >> UInt32(shift)) & 255] &+= 1
                        }
                        // (Only the first pass can find one, before anything moved: the
                        // others see the values it kept.)
                        if bad != 0 { return nil }
                        var byte = 0
                        while rank >= hist[byte] {
                            rank -= hist[byte]
                            byte += 1
                        }
                        // The values with that byte (and the higher bytes kept so far) to the front.
                        var kept = 0
                        for i in 0..<count where Int(truncatingIfNeeded: c[i] >> UInt32(shift)) & 255 == byte {
                            c[kept] = c[i]
                            kept += 1
                        }
                        count = kept
                        if count == 1 { break }
                    }
                    // Every value left has the k-th's bits.
                    return Float(bitPattern: c[0])
                }
            }
        }
        return found ?? kth(&v, k)
    }
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
    public static func apply<T: BlurSample>(_ src: [T], width w: Int, height h: Int, sigma: Float, truncate: Float = 3)
        -> [T]
    {
        let g = kernel(sigma: sigma, truncate: truncate), k = g.count / 2
        var tmp = [T](repeating: .zero, count: w * h), out = [T](repeating: .zero, count: w * h)
        src.withUnsafeBufferPointer { S in
            tmp.withUnsafeMutableBufferPointer { TP in
                g.withUnsafeBufferPointer { G in
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
                }
            }
        }
        tmp.withUnsafeBufferPointer { TB in
            out.withUnsafeMutableBufferPointer { O in
                g.withUnsafeBufferPointer { G in
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
                }
            }
        }
        return out
    }
}
