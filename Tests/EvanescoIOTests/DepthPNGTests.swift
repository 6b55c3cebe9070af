import EvanescoCore
import Foundation
import Testing
@testable import EvanescoIO

@Suite("DepthPNG: a depth map as a hole-coded 16-bit PNG")
struct DepthPNGTests {
    @Test("Known samples: the range's ends are 1 and 65535, holes 0, values outside the range clamped")
    func samples() {
        let map = Image<Float>(width: 6, height: 1, channels: 1, samples: [0.5, 2.5, 1.5, .nan, -.infinity, 9])
        let q = DepthPNG.samples(map, range: (min: 0.5, max: 2.5))
        #expect(Array(q.samples) == [1, 65535, 32768, 0, 0, 65535])
    }

    @Test("A range wider than Float holds (a hostile map from -3e38 to 3e38) neither traps nor turns values into holes")
    func hugeRange() throws {
        let map = Image<Float>(width: 4, height: 1, channels: 1, samples: [-3e38, 3e38, 0, .nan])
        let q = DepthPNG.samples(map, range: (min: -3e38, max: 3e38))
        #expect(Array(q.samples) == [1, 65535, 32768, 0])
        let d = DepthData(floatMap: map, kind: .depth, units: "m", source: "test")
        let n = try #require(d.normalizedMap())
        #expect(n.map.samples[0] == 0 && n.map.samples[1] == 1 && n.map.samples[2] == 0.5 && n.map.samples[3].isNaN)
    }

    @Test("Written and read back: the values to within span / 131068, holes kept, a 16-bit grey PNG")
    func roundTrip() throws {
        let w = 37, h = 11
        let map = Image<Float>(width: w, height: h, channels: 1) { d in
            for i in 0..<(w * h) { d[i] = i % 13 == 0 ? .nan : 0.4 + Float(i * 7919 % 1000) / 250 }
        }
        let depth = DepthData(floatMap: map, kind: .depth, units: "m", source: "test")
        let range = try #require(depth.finiteRange)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
            "evanesco-depthpng-\(UUID().uuidString)"
        ).path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/d.png"
        let written = try DepthPNG.write(map, range: range, to: path, source: "test")
        #expect(written.min == range.min && written.max == range.max)
        let read = try ImageCodecs.read(path).image
        guard case .uint16(let q) = read else {
            Issue.record("not 16-bit: \(read)")
            return
        }
        #expect(q.channels == 1)
        let back = DepthPNG.values(q, range: range)
        let tolerance = (range.max - range.min) / 131068 * 1.01
        for i in 0..<(w * h) {
            if map.samples[i].isNaN {
                #expect(back.samples[i].isNaN)
            } else {
                #expect(abs(back.samples[i] - map.samples[i]) <= tolerance)
            }
        }
        #expect(DepthPNG.mapping(range: range).hasSuffix("v = 0 is a hole"))
    }

    @Test("A map of holes only is refused, naming the photo; normalising scales to 0...1 and keeps holes")
    func holesAndNormalising() throws {
        let holes = Image<Float>(width: 2, height: 2, channels: 1, samples: [.nan, .nan, .nan, .infinity])
        #expect(throws: DepthError.self) {
            try DepthPNG.write(holes, range: nil, to: "/nonexistent/x.png", source: "photo.jpg")
        }
        let d = DepthData(
            floatMap: Image<Float>(width: 3, height: 1, channels: 1, samples: [2, .nan, 4]), kind: .disparity,
            units: "1/m", source: "test")
        let n = try #require(d.normalizedMap())
        #expect(n.range.min == 2 && n.range.max == 4)
        #expect(n.map.samples[0] == 0 && n.map.samples[1].isNaN && n.map.samples[2] == 1)
    }
}
