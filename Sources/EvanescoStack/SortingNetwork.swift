/// Batcher's odd-even merge sort as a list of compare-exchange pairs, for `n` inputs (pairs that
/// would touch padding beyond `n` are dropped, which is valid when padding holds +infinity).
/// Applied to a tile it sorts every sample position at once: each comparator is a vectorisable
/// min/max over a whole row segment, which beats per-sample `sort()` by far.
public struct SortingNetwork: Sendable {
    /// Number of values sorted.
    public let size: Int
    /// Compare-exchange pairs (i, j), i < j, in the order they run.
    public let pairs: [(Int, Int)]

    /// Builds Batcher's odd-even merge network for `n` values.
    ///
    /// - Parameter n: Values per sort (frames in a burst).
    public init(size n: Int) {
        precondition(n >= 1)
        size = n
        var p = 1
        while p < n { p *= 2 }
        var out: [(Int, Int)] = []
        var k = 1
        while k < p {
            var j = k
            while j >= 1 {
                var i = j % k
                while i + j < p {
                    for l in 0..<j {
                        let a = i + l, b = i + l + j
                        if a / (2 * k) == b / (2 * k), b < n { out.append((a, b)) }
                    }
                    i += 2 * j
                }
                j /= 2
            }
            k *= 2
        }
        pairs = out
    }

    /// Sorts, independently for every j in 0..<length, the values `base[k * stride + j]` over k.
    /// `stride` must be a multiple of 8 and `base` 32-byte aligned: each comparator runs as
    /// 8-wide vector min/max.
    @inline(__always)
    public func sort(_ base: UnsafeMutablePointer<Float>, length: Int, stride: Int) {
        let vectors = (length + 7) / 8
        base.withMemoryRebound(to: SIMD8<Float>.self, capacity: pairs.count == 0 ? 0 : size * stride / 8) { v in
            let vs = stride / 8
            for (a, b) in pairs {
                let pa = v + a * vs, pb = v + b * vs
                for j in 0..<vectors {
                    // (`pointwiseMin/Max` and `x < y ? x : y` do not vectorise; this does.)
                    let x = pa[j], y = pb[j], less = x .< y
                    pa[j] = y.replacing(with: x, where: less)
                    pb[j] = x.replacing(with: y, where: less)
                }
            }
        }
    }
}
