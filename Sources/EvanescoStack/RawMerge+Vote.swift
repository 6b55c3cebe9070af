import Foundation

extension RawMerge {
    /// The robust vote's limit on a cell's channels together (``evn_raw_merge_params``' `joint`)
    /// for `kappa` and `channels`: the sum of the channels' squared distances from the median, in
    /// units of their limits (kappa deviations), that noise alone exceeds as seldom as one
    /// channel's exceeds kappa deviations. With c channels judged one by one, a frame was turned
    /// away c times as often as one channel's tail says: on a four-frame tripod burst 5 % of the
    /// cells lost a frame to noise alone (aloe-tripod4: 0.12 dB of the 0.19 its merge stood under
    /// the plain mean; docs/benchmarks.md).
    /// The sum of c squared deviations of noise is chi-square with c degrees of freedom, so the
    /// limit is its quantile at the one-channel tail erfc(kappa / sqrt 2), over kappa^2. 0 (each
    /// channel alone, as before) for one channel, where the two are the same test.
    static func jointLimit(kappa: Float, channels c: Int) -> Float {
        guard c > 1, kappa > 0, kappa.isFinite else { return 0 }
        let k = Double(kappa), tail = erfc(k / 2.0.squareRoot())
        guard tail > 0 else { return 0 }
        // Bisection on the quantile: the tail falls as x grows.
        var lo = 0.0, hi = k * k * Double(c) + 100
        for _ in 0..<200 {
            let mid = (lo + hi) / 2
            if chiSquareTail(mid, degrees: c) > tail { lo = mid } else { hi = mid }
        }
        return Float((lo + hi) / 2 / (k * k))
    }

    /// P(X > x) for X chi-square with `degrees` degrees of freedom: the upper regularised gamma
    /// Q(degrees / 2, x / 2), from Q(1, y) = e^-y or Q(1/2, y) = erfc(sqrt y) up by
    /// Q(a + 1, y) = Q(a, y) + y^a e^-y / Gamma(a + 1).
    static func chiSquareTail(_ x: Double, degrees: Int) -> Double {
        let y = max(0, x / 2), half = Double(degrees) / 2
        var a = degrees % 2 == 0 ? 1.0 : 0.5
        var q = degrees % 2 == 0 ? exp(-y) : erfc(y.squareRoot())
        var term = degrees % 2 == 0 ? y * exp(-y) : y.squareRoot() * exp(-y) / tgamma(1.5)
        while a < half {
            q += term
            a += 1
            term *= y / a
        }
        return min(1, q)
    }
}
