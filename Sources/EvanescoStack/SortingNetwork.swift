import CKernels
/// Batcher's odd-even merge sort as a list of compare-exchange pairs, for `n` inputs (pairs that
/// would touch padding beyond `n` are dropped, which is valid when padding holds +infinity).
/// Applied to a tile it sorts every sample position at once: each comparator is a vectorisable
/// min/max over a whole row segment, which beats per-sample `sort()` by far.
public struct SortingNetwork: Sendable {
    /// Number of values sorted.
    public let size: Int
    /// Compare-exchange pairs (i, j), i < j, in the order they run.
    public let pairs: [(Int, Int)]
    /// The pairs that bring the middle one or two of `size` absolute deviations from the median
    /// into place when they come as two ascending runs (see `SampleTile.deviationRuns(sorted:medians:into:)`):
    /// this network with every comparator removed that never exchanges on two sorted runs (by the
    /// 0-1 principle, simulating every pair of 0-1 runs), then every one the middle outputs do
    /// not depend on. 20 values: 38 comparators instead of 103; 51: 109 instead of 415.
    public let deviationPairs: [(Int, Int)]
    /// ``pairs`` and ``deviationPairs`` flattened (i, j, i, j, ...), for the AVX2 kernel.
    let flatPairs: [Int32], flatDeviationPairs: [Int32]

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
        deviationPairs = SortingNetwork.middleOfTwoRuns(out, size: n, firstRun: (n - 1) / 2 + 1)
        flatPairs = pairs.flatMap { [Int32($0.0), Int32($0.1)] }
        flatDeviationPairs = deviationPairs.flatMap { [Int32($0.0), Int32($0.1)] }
    }

    /// `network`'s comparators that matter for the middle outputs when its first `la` inputs
    /// are one ascending run and the rest another.
    static func middleOfTwoRuns(_ network: [(Int, Int)], size n: Int, firstRun la: Int) -> [(Int, Int)] {
        let lb = n - la
        // Every pair of 0-1 runs (0s then 1s in each), as bit columns: input x * (lb + 1) + y is
        // bit (x * (lb + 1) + y) of every wire's words.
        let inputs = (la + 1) * (lb + 1), words = (inputs + 63) / 64
        var state = [UInt64](repeating: 0, count: n * words)
        for x in 0...la {
            for y in 0...lb {
                let bit = x * (lb + 1) + y
                for w in 0..<n where (w < la && w >= x) || (w >= la && w - la >= y) {
                    state[w * words + bit / 64] |= 1 << UInt64(bit % 64)
                }
            }
        }
        // Keep a comparator only if it exchanges on some input (a 1 on its lower wire and a 0 on
        // its upper), given the comparators kept before it.
        var kept: [(Int, Int)] = []
        for (a, b) in network {
            var acts = false
            for q in 0..<words where state[a * words + q] & ~state[b * words + q] != 0 {
                acts = true
                break
            }
            guard acts else { continue }
            kept.append((a, b))
            for q in 0..<words {
                let lo = state[a * words + q] & state[b * words + q], hi = state[a * words + q] | state[b * words + q]
                state[a * words + q] = lo
                state[b * words + q] = hi
            }
        }
        // Then only those the middle outputs depend on.
        var needed: Set<Int> = n % 2 == 1 ? [n / 2] : [n / 2 - 1, n / 2]
        var middle: [(Int, Int)] = []
        for (a, b) in kept.reversed() where needed.contains(a) || needed.contains(b) {
            middle.append((a, b))
            needed.insert(a)
            needed.insert(b)
        }
        return middle.reversed()
    }

    /// Sorts, independently for every j in 0..<length, the values `base[k * stride + j]` over k.
    /// `stride` must be a multiple of 8 and `base` 32-byte aligned: each comparator runs as
    /// 8-wide vector min/max.
    @inline(__always)
    public func sort(_ base: UnsafeMutablePointer<Float>, length: Int, stride: Int) {
        SortingNetwork.run(pairs, flatPairs, size: size, base, length: length, stride: stride)
    }

    /// Brings the middle one or two of every sample position's `size` deviations in `base`
    /// (laid out as ``sort(_:length:stride:)`` takes them, as two ascending runs) into place.
    @inline(__always)
    public func sortDeviations(_ base: UnsafeMutablePointer<Float>, length: Int, stride: Int) {
        SortingNetwork.run(deviationPairs, flatDeviationPairs, size: size, base, length: length, stride: stride)
    }

    @inline(__always)
    static func run(
        _ pairs: [(Int, Int)], _ flat: [Int32], size: Int, _ base: UnsafeMutablePointer<Float>, length: Int, stride: Int
    ) {
        // Eight lanes a step (CKernels: one body, with AVX2 where the CPU has it).
        flat.withUnsafeBufferPointer { evn_sort_network($0.baseAddress, pairs.count, base, (length + 7) / 8, stride) }
    }
}
