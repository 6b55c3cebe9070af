import Foundation
import Testing
import EvanescoCore
@testable import EvanescoIO
@testable import EvanescoStack

/// A raw frame's planes (``RawPlanes``): from its samples and back, and from its file's bytes.
struct RawPlanesTests {
    @Test func planesRoundTripAtOddSizes() {
        for cfa in [CFAPattern.rggb, .bggr, .grbg, .gbrg] {
            let raw = RawStackTests.mosaic(width: 37, height: 23, cfa: cfa)
            let planes = RawPlanes.planes(raw)
            #expect(planes.width == 18 && planes.height == 11 && planes.channels == 4)
            let back = RawPlanes.mosaic(planes, like: raw, noise: nil)
            #expect(back.samples.samples == ContiguousArray(RawStackTests.scaled(raw)), "\(cfa)")
            // Channels: red, green, blue, green, whatever the pattern.
            let map = RawPlanes.channels(of: cfa)
            #expect(Set(map) == [0, 1, 2, 3])
            for site in 0..<4 { #expect([0, 1, 2, 1][map[site]] == Int(cfa.colors[site])) }
        }
    }

    @Test func planesFromAFilesBytesAreThePlanesOfItsDecodedSamples() throws {
        // The stacker reads a DNG's planes straight from its bytes (no copy of its samples): the
        // same planes as from the samples decoded, at an odd size, with a gain and without.
        for cfa in [CFAPattern.rggb, .gbrg] {
            let raw = RawStackTests.mosaic(width: 37, height: 23, cfa: cfa)
            let burst = try RawStackTests.Burst([raw]), path = burst.files[0]
            let decoded = try RawCodec.read(path).raw
            for gain: Float in [1, 1.7] {
                let inPlace = try RawCodec.read(path) { file, rows in
                    #expect(file.raw.samples.width == 0, "the samples were copied")
                    #expect(file.width == 37 && file.height == 23 && rows.width == 37 && rows.height == 23)
                    return RawPlanes.planes(file.raw, rows: rows, gain: gain)
                }
                #expect(inPlace.samples == RawPlanes.planes(decoded, gain: gain).samples, "\(cfa) gain \(gain)")
                #expect(inPlace.width == 18 && inPlace.height == 11)
            }
        }
    }
}
