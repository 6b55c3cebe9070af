import CKernels
import EvanescoCore
import Foundation
import Testing

@testable import EvanescoStack

/// The robust vote's test of a cell's channels together (`joint`, ``RawMerge/jointLimit(kappa:channels:)``):
/// its limit's known answers, which frames it keeps where the channels alone would not, and how
/// seldom it turns noise away.
struct RawVoteTests {
    // The chi-square tail against its closed forms (one degree: erfc(sqrt(x / 2)); two: e^-x/2;
    // four: e^-y (1 + y), y = x / 2), and the limit against the quantiles scipy gives
    // (chi2.isf(2 norm.sf(kappa), c) / kappa^2).
    @Test func theJointLimitIsTheChiSquareQuantileOfOneChannelsTail() {
        for x in [0.5, 2, 6.25, 12.7, 30] {
            #expect(abs(RawMerge.chiSquareTail(x, degrees: 1) - erfc((x / 2).squareRoot())) < 1e-12)
            #expect(abs(RawMerge.chiSquareTail(x, degrees: 2) - exp(-x / 2)) < 1e-12)
            #expect(abs(RawMerge.chiSquareTail(x, degrees: 4) - exp(-x / 2) * (1 + x / 2)) < 1e-12)
        }
        let known: [(Float, Int, Float)] = [
            (2.5, 2, 1.40432), (2.5, 3, 1.74006), (2.5, 4, 2.04429), (3, 4, 1.80570), (1.5, 4, 3.13038)
        ]
        for (kappa, c, want) in known {
            let got = RawMerge.jointLimit(kappa: kappa, channels: c)
            #expect(abs(got - want) < 2e-4, "kappa \(kappa), \(c) channels: \(got), want \(want)")
        }
        // One channel: the same test as the channel alone, so none.
        #expect(RawMerge.jointLimit(kappa: 2.5, channels: 1) == 0)
    }

    /// The frames kept per cell by a vote over `n` four-channel frames at 4000 (noise 2 v + 400,
    /// kappa 3: a limit of 275 where the others agree exactly), frame k's channel ch of cell i
    /// moved by `off(k, i, ch)`.
    static func kept(
        joint: Bool, frames n: Int, count: Int, kappa: Float = 3, off: (Int, Int, Int) -> Float
    ) -> [UInt16] {
        var p = RawStackTests.voteParameters(frames: n)
        p.kappa = kappa
        p.joint = joint ? RawMerge.jointLimit(kappa: kappa, channels: 4) : 0
        let scratch = VoteScratch(p, frames: n, segment: count)
        var kept = [UInt16](repeating: 0, count: count)
        scratch.buffers.borrow { buffer in
            RawStackTests.fill(
                buffer, frames: n, count: count, stride: scratch.stride, value: { 4000 + off($0, $1, $2) }
            ) {
                _, _ in 1
            }
            kept.withUnsafeMutableBufferPointer { k in
                RawMerge.voteSegment(
                    scratch.params, frames: n, count: count, stride: scratch.stride, buffer: buffer,
                    network: scratch.network, kept: k.baseAddress, best: nil)
            }
        }
        return kept
    }

    // Four frames agree exactly; the fifth is 1.2 limits (330) off in one channel of cells 0-7,
    // 0.8 limits (220) off in all four of cells 8-15, and at the vote in cells 16-23. One channel
    // by one, the first is turned away (330 > 275) and the second kept (220 < 275 in each);
    // together, 1.2^2 = 1.44 is under the limit of 1.81 and 4 x 0.8^2 = 2.56 over it: a faint
    // difference in every colour (a passer-by of low contrast) is what moved, one channel a
    // little past its limit is what the noise of four channels does.
    @Test(arguments: [false, true])
    func aCellsChannelsAreJudgedTogether(joint: Bool) {
        let kept = Self.kept(joint: joint, frames: 5, count: 24) { k, i, ch in
            guard k == 4 else { return 0 }
            if i < 8 { return ch == 2 ? 330 : 0 }
            if i < 16 { return 220 }
            return 0
        }
        let want: [UInt16] = (0..<24).map { i in
            if i < 8 { return joint ? 5 : 4 }
            if i < 16 { return joint ? 4 : 5 }
            return 5
        }
        #expect(kept == want)
    }

    // Noise alone (Gaussian, the noise line's deviation; 4 frames as on a tripod, 16384 cells,
    // kappa 2.5, the default): judged one channel at a time, 1.3 % of the frames' cells are
    // turned away (5 % of the cells lose a frame, as aloe-tripod4's did), together 0.14 %, under
    // one channel's tail (1.2 % at 2.5 deviations; the vote's limit also counts the frames'
    // spread). Bounds a few times wide of both.
    @Test func noiseIsTurnedAwayAsSeldomAsOneChannelsTail() {
        let n = 4, count = 16384, sd = Float(2 * 4000 + 400).squareRoot()
        var rng = SplitMix(seed: 48)
        var noise = [Float](repeating: 0, count: n * count * 4)
        for i in noise.indices { noise[i] = sd * rng.gaussian() }
        func away(_ joint: Bool) -> Double {
            let kept = Self.kept(joint: joint, frames: n, count: count, kappa: 2.5) { k, i, ch in
                noise[(k * count + i) * 4 + ch]
            }
            return Double(n * count - kept.reduce(0) { $0 + Int($1) }) / Double(n * count)
        }
        let alone = away(false), together = away(true)
        #expect(together > 0.0003 && together < 0.005, "together: \(together)")
        #expect(alone > 0.006 && alone > 4 * together, "alone \(alone), together \(together)")
    }
}
