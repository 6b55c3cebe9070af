import Foundation
import CKernels
import Testing
import EvanescoCore
@testable import EvanescoIO
@testable import EvanescoStack

/// ``RawSampling``: how a raw burst's frames are sampled at the reference's photosites.
@Suite struct RawSamplingTests {
    /// Frames that land between the reference's photosites: sampled by colour differences at full
    /// resolution, their mean is nearer the reference's scene than from each colour's own
    /// samples, on detail finer than a colour plane resolves.
    @Test func colourSamplingIsSharperBetweenSites() throws {
        let shifts: [(Float, Float)] = [(0, 0), (0.5, 0.3), (1.3, -0.6), (-0.7, 0.9), (0.4, -1.2), (-1.1, -0.5)]
        let frames = shifts.map { RawStackTests.mosaic(dx: $0.0, dy: $0.1, fine: 300) }
        let burst = try RawStackTests.Burst(frames)
        let want = RawStackTests.scaled(frames[0])
        var rms: [RawSampling: Double] = [:]
        for sampling in RawSampling.allCases {
            var o = StackOptions()
            o.merge = .mean
            o.rawSampling = sampling
            // The true registrations (frame -> reference photosites), so only the sampling differs.
            o.givenHomographies = shifts.map { Homography.translation(-Double($0.0), -Double($0.1)) }
            let m = try #require(try BurstStacker.stack(contentsOf: burst.files, options: o).raw).mosaic
            var sum = 0.0, n = 0
            for y in 16..<(m.height - 16) {
                for x in 16..<(m.width - 16) {
                    let d = Double(m.samples.samples[y * m.width + x]) - Double(want[y * m.width + x])
                    sum += d * d
                    n += 1
                }
            }
            rms[sampling] = (sum / Double(n)).squareRoot()
        }
        let sites = try #require(rms[.sites]), colour = try #require(rms[.colour])
        #expect(colour < 0.5 * sites, "RMS error (16-bit units): colour \(colour), sites \(sites)")
    }
}
