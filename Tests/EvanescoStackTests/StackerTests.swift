import Foundation
import Testing
import EvanescoAlign
import EvanescoCore
@testable import EvanescoStack

/// A scene with texture everywhere, and bursts made from it with known camera motion and a
/// moving square occluder.
func texturedScene(_ w: Int, _ h: Int) -> Image<UInt8> {
    Image<UInt8>(width: w, height: h, channels: 3) { d in
        for y in 0..<h {
            for x in 0..<w {
                let v = 128 + 50 * sinf(Float(x) * 0.11) * cosf(Float(y) * 0.07) + 30 * sinf(Float(x + 2 * y) * 0.031)
                let o = (y * w + x) * 3
                d[o] = UInt8(clampingRounded: v)
                d[o + 1] = UInt8(clampingRounded: 255 - v)
                d[o + 2] = UInt8(clampingRounded: v * 0.5 + 40)
            }
        }
    }
}

func burst(_ scene: Image<UInt8>, shifts: [(Double, Double)], occluder: Bool = true) -> [BurstFrame] {
    shifts.enumerated().map { k, s in
        // registration homography = translation(s): frame pixel p shows scene point p + s.
        var f = scene.warped(
            by: Homography.translation(-s.0, -s.1), width: scene.width, height: scene.height, interpolation: .catmullRom
        ).image
        if occluder {
            // A textured patch from elsewhere in the scene, moving right (as make_burst.py's
            // cut-outs do), with a bright edge tint so it clearly differs.
            let x0 = 10 + k * 12
            for y in 20..<50 {
                for x in x0..<(x0 + 25) where x < f.width {
                    for c in 0..<3 {
                        f[x, y, c] = UInt8(
                            clampingRounded: Float(
                                scene[(x * 3 + 40) % scene.width, (y * 2 + 50) % scene.height, (c + 1) % 3]) * 0.8 + 40)
                    }
                }
            }
        }
        return BurstFrame(name: "f\(k)", image: .uint8(f))
    }
}

@Suite struct Stacker {
    static let scene = texturedScene(320, 240)
    static let shifts: [(Double, Double)] = [(0, 0), (1.5, -0.5), (-2.25, 1), (0.5, 2), (3, 0.75), (-1, -1.5), (2, 2)]

    /// (Winsorizing 20 % cannot remove an object present in ~30 % of frames: not tested here.)
    @Test(arguments: [MergeMethod.median, .sigmaClip, .robust])
    func movingOccluderVanishes(_ merge: MergeMethod) throws {
        var o = StackOptions()
        o.merge = merge
        let r = try BurstStacker.stack(burst(Self.scene, shifts: Self.shifts), options: o)
        #expect(r.usedFrames == 7)
        for f in r.frames.dropFirst() {
            let h = try #require(f.homography)
            let truth = Homography.translation(Self.shifts[f.index].0, Self.shifts[f.index].1)
            // Mean displacement error over a 9x7 grid spanning the frame (score.py's measure).
            var err = 0.0
            for i in 0..<9 {
                for j in 0..<7 {
                    let x = 319.0 * Double(i) / 8, y = 239.0 * Double(j) / 6
                    let p = try #require(h.apply(x, y)), q = try #require(truth.apply(x, y))
                    err += ((p.x - q.x) * (p.x - q.x) + (p.y - q.y) * (p.y - q.y)).squareRoot() / 63
                }
            }
            #expect(err < 0.1, "\(f.source): \(h)")
        }
        // Inside the margin every pixel is covered by all frames: compare with the clean scene.
        let out = r.image.uint8
        var worst = 0
        for y in 8..<232 {
            for x in 8..<312 {
                for c in 0..<3 { worst = max(worst, abs(Int(out[x, y, c]) - Int(Self.scene[x, y, c]))) }
            }
        }
        #expect(worst <= 12, "\(merge): worst difference \(worst)")
    }

    /// A crowd: in 11 of 20 frames someone else stands on the same place, each in other colours.
    /// The median lands among them; the robust merge's second look finds the nine frames that
    /// saw the place, which agree. (Frames without noise: the groups' half-level floor.)
    @Test func aCrowdOverMostOfTheFramesVanishesWhereEachPasserByDiffers() throws {
        let frames = (0..<20).map { k -> BurstFrame in
            var f = Self.scene
            if k % 20 >= 9 {
                // 30 to 110 levels from the place, 8 apart, all on one side: the median is theirs.
                let offset = 30 + 8 * (k - 9)
                for y in 80..<140 {
                    for x in 100..<160 {
                        for c in 0..<3 {
                            let v = Int(Self.scene[x, y, c])
                            f[x, y, c] = UInt8(v < 128 ? v + offset : v - offset)
                        }
                    }
                }
            }
            return BurstFrame(name: "f\(k)", image: .uint8(f))
        }
        func worst(_ merge: MergeMethod) throws -> Int {
            var o = StackOptions()
            (o.merge, o.align) = (merge, .none)
            let out = try BurstStacker.stack(frames, options: o).image.uint8
            var worst = 0
            for y in 80..<140 {
                for x in 100..<160 {
                    for c in 0..<3 { worst = max(worst, abs(Int(out[x, y, c]) - Int(Self.scene[x, y, c]))) }
                }
            }
            return worst
        }
        let robust = try worst(.robust), clipped = try worst(.sigmaClip)
        #expect(robust <= 1, "worst difference \(robust)")
        #expect(clipped > 20, "the test's premise: clipping around the median keeps the crowd (\(clipped))")
    }

    /// Alignment says it has started before any frame is done (0 of N), then counts every frame
    /// once, never going backwards; the merge then counts rows.
    @Test func progressStartsAtZeroAndCountsEveryFrame() throws {
        let events = LockedBox([StackProgress]())
        var o = StackOptions()
        o.progress = { p in events.update { $0.append(p) } }
        _ = try BurstStacker.stack(burst(Self.scene, shifts: Self.shifts), options: o)
        let align = events.value.filter { $0.stage == .align }
        #expect(align.map(\.done) == Array(0...6) && align.allSatisfy { $0.total == 6 }, "\(align.map(\.done))")
        #expect(events.value.first?.stage == .align && events.value.last?.stage == .merge)
    }

    /// Hue says nothing of lightness, so the tutorial's mode is weaker than the median; it must
    /// still remove most of what the mean leaves where the occluder passed.
    @Test func modeRemovesMostOfTheGhost() throws {
        func error(_ m: MergeMethod) throws -> Double {
            var o = StackOptions()
            o.merge = m
            let out = try BurstStacker.stack(burst(Self.scene, shifts: Self.shifts), options: o).image.uint8
            var sum = 0
            for y in 20..<50 {
                for x in 10..<100 { for c in 0..<3 { sum += abs(Int(out[x, y, c]) - Int(Self.scene[x, y, c])) } }
            }
            return Double(sum) / Double(30 * 90 * 3)
        }
        let mode = try error(.mode), mean = try error(.mean)
        #expect(mode < mean / 3, "mode \(mode), mean \(mean)")
    }

    @Test func meanKeepsGhosts() throws {
        var o = StackOptions()
        o.merge = .mean
        let out = try BurstStacker.stack(burst(Self.scene, shifts: Self.shifts), options: o).image.uint8
        var worst = 0
        for y in 20..<50 { for x in 10..<100 { worst = max(worst, abs(Int(out[x, y, 0]) - Int(Self.scene[x, y, 0]))) } }
        #expect(worst > 20)
    }

    @Test func unalignableFrameIsReportedAndSkipped() throws {
        var frames = burst(Self.scene, shifts: Self.shifts, occluder: false)
        frames[3] = BurstFrame(
            name: "junk",
            image: .uint8(
                Image<UInt8>(width: 320, height: 240, channels: 3) { d in
                    var s: UInt64 = 9
                    for i in 0..<d.count {
                        s = s &* 6364136223846793005 &+ 1
                        d[i] = UInt8(truncatingIfNeeded: s >> 56)
                    }
                }))
        let r = try BurstStacker.stack(frames, options: StackOptions())
        #expect(r.usedFrames == 6)
        let junk = r.frames[3]
        #expect(!junk.used && junk.status == .failed && junk.homography == nil && junk.reason != nil)
        #expect(r.notices.contains { if case .frameLeftOut(source: "junk", _) = $0 { true } else { false } })
    }

    @Test func oneAndTwoFrames() throws {
        let one = try BurstStacker.stack([BurstFrame(name: "only", image: .uint8(Self.scene))])
        #expect(one.image == .uint8(Self.scene) && one.usedFrames == 1)
        #expect(one.notices == [.singleFrame])
        // Two frames cannot outvote anything: the policy merges them by their mean, and says so.
        let two = try BurstStacker.stack(burst(Self.scene, shifts: [(0, 0), (1, 1)], occluder: false))
        #expect(two.usedFrames == 2 && two.merge == .mean)
        #expect(two.notices == [.twoFramesMergedByMean(requested: .robust)])
        var keep = StackOptions()
        keep.merge = .median
        keep.meanForTwoFrames = false
        let kept = try BurstStacker.stack(burst(Self.scene, shifts: [(0, 0), (1, 1)], occluder: false), options: keep)
        #expect(kept.merge == .median && kept.notices.isEmpty)
    }

    @Test("Policies: half-resolution alignment above 8 MP unless a level is given")
    func alignLevelPolicy() {
        let o = StackOptions()
        #expect(o.resolved(frames: 5, pixels: 12_000_000).options.registration.finestLevel == 1)
        #expect(o.resolved(frames: 5, pixels: 640 * 480).options.registration.finestLevel == 0)
        var given = StackOptions()
        given.alignLevel = 0
        #expect(given.resolved(frames: 5, pixels: 12_000_000).options.registration.finestLevel == 0)
        #expect(o.resolved(frames: 5, pixels: 100).options.merge == .robust)
    }

    @Test("The report round-trips its homographies in the bench schema (rows, snake_case)")
    func reportRoundTrip() throws {
        let r = try BurstStacker.stack(burst(Self.scene, shifts: Array(Self.shifts.prefix(4))))
        let bytes = try ReportJSON.encode(StackReport(r, inputs: ["a"], output: "o.png"))
        let obj = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
        #expect(obj["frames_used"] as? Int == 4 && (obj["times_s"] as? [String: Double])?["warp_merge"] != nil)
        let frame1 = try #require((obj["frames"] as? [[String: Any]])?[1])
        #expect((frame1["homography"] as? [[Double]])?.count == 3 && frame1["status"] as? String == "aligned")
        // Read back whole with the report decoder: the same report (times_s included).
        #expect(
            try ReportJSON.decoder().decode(StackReport.self, from: Data(bytes))
                == StackReport(r, inputs: ["a"], output: "o.png"))
        let back = try StackReport.homographies(from: bytes, name: "report")
        #expect(back.count == 4)
        for i in 0..<4 { #expect(back[i] == r.frames[i].homography) }
        // Given back, they stack to the same picture without aligning.
        var o = StackOptions()
        o.givenHomographies = back
        #expect(
            try BurstStacker.stack(burst(Self.scene, shifts: Array(Self.shifts.prefix(4))), options: o).image == r.image
        )
        #expect(throws: StackReportError.self) {
            try StackReport.homographies(
                from: Array(#"{"frames":[{"index":0,"homography":[[1,0],[0,1]]}]}"#.utf8), name: "x")
        }
        #expect(throws: StackReportError.self) {
            try StackReport.homographies(from: Array(#"{"frames":[{"index":-3,"homography":null}]}"#.utf8), name: "x")
        }
    }

    @Test("Given local fields move each frame: a constant field is the translation it stands for")
    func givenFieldsAreWarpedThrough() throws {
        let frames = burst(Self.scene, shifts: Array(Self.shifts.prefix(5)))
        var o = StackOptions()
        o.givenHomographies = Self.shifts.prefix(5).map { Homography.translation($0.0, $0.1) }
        let byHomography = try BurstStacker.stack(frames, options: o).image.uint8
        // The frame's shift given as a field over identity: it samples at p + d = p - shift.
        o.givenHomographies = Array(repeating: .identity, count: 5)
        o.givenFields = Self.shifts.prefix(5).enumerated().map { k, s in
            guard k > 0 else { return nil }
            var f = DisplacementField(width: 320, height: 240, cell: 16)
            f.dx = f.dx.map { _ in Float(-s.0) }
            f.dy = f.dy.map { _ in Float(-s.1) }
            return f
        }
        let r = try BurstStacker.stack(frames, options: o)
        let byField = r.image.uint8
        var worst = 0
        for y in 8..<232 {
            for x in 8..<312 {
                for c in 0..<3 { worst = max(worst, abs(Int(byField[x, y, c]) - Int(byHomography[x, y, c]))) }
            }
        }
        #expect(worst <= 2, "worst difference \(worst) levels")
        #expect(r.localFields[1] == o.givenFields?[1] && r.localFields[0] == nil)
        // A field that does not fit its frame, or holds a NaN, leaves that frame out and says why.
        var bad = o.givenFields!
        bad[2] = DisplacementField(width: 100, height: 240, cell: 16)
        bad[3]?.dx[7] = .nan
        o.givenFields = bad
        let left = try BurstStacker.stack(frames, options: o)
        #expect(left.frames.map(\.used) == [true, true, false, false, true])
        #expect(left.frames[2].reason?.contains("does not cover its 320x240 pixels") == true, "\(left.frames[2])")
    }

    @Test("aligned() gives the pixels the merge sampled: a one-frame-plus-reference mean is their average")
    func alignedMatchesMerge() throws {
        let frames = burst(Self.scene, shifts: [(0, 0), (2.5, -1.25)], occluder: false)
        var o = StackOptions()
        o.givenHomographies = [.identity, .translation(2.5, -1.25)]
        let r = try BurstStacker.stack(frames, options: o)
        let a = BurstStacker.aligned(
            frames[1], homography: .translation(2.5, -1.25), interpolation: .catmullRom, mergedFrames: 2
        ).uint8
        let ref = Self.scene, out = r.image.uint8
        var worst = 0
        for y in 10..<230 {
            for x in 10..<310 {
                for c in 0..<3 {
                    let mean = (Int(ref[x, y, c]) + Int(a[x, y, c]))
                    worst = max(worst, abs(2 * Int(out[x, y, c]) - mean))
                }
            }
        }
        #expect(worst <= 2, "worst \(worst)")  // rounding of the 8-bit aligned frame only
    }

    @Test func mismatchedSizesAndBadReference() {
        let frames = [
            BurstFrame(name: "a", image: .uint8(Self.scene)),
            BurstFrame(name: "b", image: .uint8(texturedScene(100, 120)))
        ]
        #expect(throws: StackError.sizeMismatch(frame: "b", size: "100x120", reference: "a", referenceSize: "320x240"))
        {
            try BurstStacker.stack(frames)
        }
        var o = StackOptions()
        o.reference = 5
        #expect(throws: StackError.referenceOutOfRange(5, count: 1)) { try BurstStacker.stack([frames[0]], options: o) }
        #expect(throws: StackError.noFrames) { try BurstStacker.stack([]) }
    }

    @Test func sixteenBitBurstStaysSixteenBit() throws {
        let frames = burst(Self.scene, shifts: Array(Self.shifts.prefix(4))).map {
            BurstFrame(name: $0.name, image: .uint16($0.image.uint16))
        }
        let r = try BurstStacker.stack(frames)
        #expect(r.image.bitDepth == 16)
    }

    /// A burst is merged at its reference's depth: a frame of another depth is converted and
    /// said so (16 -> 8 loses its finer levels), not silently; frames of the reference's depth,
    /// and float frames under a float reference (merged as 16-bit by rule), say nothing.
    @Test func framesOfAnotherDepthAreNoticed() throws {
        let frames = burst(Self.scene, shifts: Array(Self.shifts.prefix(4)))
        var mixed = frames
        mixed[2] = BurstFrame(name: mixed[2].name, image: .uint16(mixed[2].image.uint16))
        let r8 = try BurstStacker.stack(mixed)
        #expect(r8.image.bitDepth == 8)
        #expect(r8.notices == [.depthConverted(source: mixed[2].name, from: 16, to: 8)], "\(r8.notices)")
        // In words, not a flag: the studio shows it too (the CLI adds its flag).
        let said = r8.notices.first?.description ?? ""
        #expect(said.contains("make a frame of that depth the reference frame") && !said.contains("--"), "\(said)")
        var o = StackOptions()
        o.reference = 2
        let r16 = try BurstStacker.stack(mixed, options: o)
        #expect(r16.image.bitDepth == 16)
        #expect(
            r16.notices == [0, 1, 3].map { StackNotice.depthConverted(source: mixed[$0].name, from: 8, to: 16) },
            "\(r16.notices)")
        let floats = frames.map { BurstFrame(name: $0.name, image: .float32($0.image.float32)) }
        #expect(try BurstStacker.stack(floats).notices.isEmpty)
        #expect(try BurstStacker.stack(frames).notices.isEmpty)
    }
}
