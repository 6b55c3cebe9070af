import Foundation

/// A small seeded generator (SplitMix64, Steele, Lea and Flood 2014) for data that must be the
/// same on every run: the tests' and benchmarks' synthetic frames and noise. Its outputs are
/// white; a linear congruential generator's consecutive outputs, turned into Gaussian noise by
/// Box-Muller, left a 3 x 3 Lee filter a quarter more of the noise than white noise would
/// (RawDenoiseTests).
public struct SplitMix: RandomNumberGenerator, Sendable {
    /// The generator's state: the seed, advanced by a constant at each output.
    public var state: UInt64

    /// A generator that starts from `seed`.
    public init(seed: UInt64) { state = seed }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform sample in [0, 1), from the top 24 bits.
    public mutating func uniform() -> Float { Float(next() >> 40) / Float(1 << 24) }

    /// A standard normal sample (Box-Muller, one sample from each pair of uniforms).
    public mutating func gaussian() -> Float {
        let u1 = max(1e-7, uniform()), u2 = uniform()
        return (-2 * logf(u1)).squareRoot() * cosf(2 * .pi * u2)
    }
}
