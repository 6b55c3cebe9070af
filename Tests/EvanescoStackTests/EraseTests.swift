import Foundation
import Testing
import EvanescoAlign
import EvanescoCore
@testable import EvanescoStack

/// The erase brush on bursts made here: a textured scene, a block that stands still in 6 of
/// 10 frames (the majority at its place, which every merge keeps), a moving occluder, and noise.
@Suite struct Erase {
    static let scene = texturedScene(320, 240)
    static let shifts: [(Double, Double)] = [
        (0, 0), (1.5, -0.5), (-2.25, 1), (0.5, 2), (3, 0.75), (-1, -1.5), (2, 2), (-0.5, 1.25), (1, -2), (-1.5, 0.5)
    ]
    /// The lingering block, in scene (reference) pixels, and the frames it is in.
    static let block = (x: 150..<210, y: 120..<170), present = 2...7

    /// The burst: the block is painted in scene coordinates before each frame's shift.
    /// A dark block passing just above the lingering one, in frames 0 and 1 only (two places,
    /// overlapping at x 175..<185), over rows 84..<112: its lower 8 rows lie inside a mask grown by 16.
    static let passer = (x: [140..<185, 175..<220], y: 84..<112)

    static func frames(blockEverywhere: Bool = false, passerAbove: Bool = false) -> [BurstFrame] {
        var rng = SplitMix(seed: 7)
        return shifts.enumerated().map { k, s in
            var scene = Self.scene
            if passerAbove && k < 2 {
                for y in passer.y { for x in passer.x[k] { for c in 0..<3 { scene[x, y, c] = UInt8(30 + 10 * c) } } }
            }
            if blockEverywhere || present.contains(k) {
                for y in block.y {
                    for x in block.x {
                        for c in 0..<3 { scene[x, y, c] = UInt8((x * 5 + y * 3 + c * 60) % 80 + (c == 0 ? 170 : 20)) }
                    }
                }
            }
            var f = scene.warped(
                by: Homography.translation(-s.0, -s.1), width: scene.width, height: scene.height,
                interpolation: .catmullRom
            ).image
            // A block crossing the top of the picture, and Gaussian noise of 3 levels.
            let x0 = 10 + k * 25
            for y in 20..<50 {
                for x in x0..<(x0 + 25) where x < f.width { for c in 0..<3 { f[x, y, c] = UInt8(40 + 60 * c) } }
            }
            for i in f.samples.indices {
                f.samples[i] = UInt8(clampingRounded: Float(f.samples[i]) + 3 * rng.gaussian())
            }
            return BurstFrame(name: "f\(k)", image: .uint8(f))
        }
    }

    static func options(mask: EraseMask?) -> StackOptions {
        var o = StackOptions()
        o.givenHomographies = shifts.map { Homography.translation($0.0, $0.1) }
        o.collectMaps = true
        o.erase = mask
        return o
    }

    /// The block grown by `margin` pixels.
    static func blockMask(margin: Int) -> EraseMask {
        EraseMask(
            width: 320, height: 240,
            masked: (0..<(320 * 240)).map { i in
                let x = i % 320, y = i / 320
                return x >= block.x.lowerBound - margin && x < block.x.upperBound + margin
                    && y >= block.y.lowerBound - margin && y < block.y.upperBound + margin
            })
    }

    static func psnr(_ a: Image<UInt8>, _ b: Image<UInt8>, where inside: (Int, Int) -> Bool) -> Double {
        var sum = 0.0, n = 0
        for y in 0..<a.height {
            for x in 0..<a.width where inside(x, y) {
                for c in 0..<3 {
                    let d = Double(a[x, y, c]) - Double(b[x, y, c])
                    sum += d * d
                    n += 1
                }
            }
        }
        return 10 * log10(255 * 255 / max(sum / Double(n), 1e-9))
    }

    /// The seam band's promise on any shape (a disc and a thin diagonal line, whose diagonal
    /// distances the chamfer metric only approximates): no pixel farther than ``Eraser/seamBand``
    /// from the mask (Euclidean) takes any weight, and every pixel within seamBand - 2 of it
    /// (the chamfer metric overestimates by at most 8 %) takes some.
    @Test func seamWeightsStayWithinTheBand() {
        let w = 120, h = 100, band = Eraser.seamBand
        var flags = [Bool](repeating: false, count: w * h)
        for y in 0..<h {
            for x in 0..<w {
                let dx = x - 35, dy = y - 40
                flags[y * w + x] = dx * dx + dy * dy <= 100 || (x >= 60 && x < 110 && abs(y - (x - 40)) <= 0)
            }
        }
        let mask = EraseMask(width: w, height: h, masked: flags)
        let weights = Eraser.seamWeights(mask, x0: 0, y0: 0, x1: w, y1: h)
        let cells = (0..<(w * h)).filter { flags[$0] }
        var beyond = 0, holes = 0
        for y in 0..<h {
            for x in 0..<w where !flags[y * w + x] {
                let d2 = cells.map { (($0 % w) - x) * (($0 % w) - x) + (($0 / w) - y) * (($0 / w) - y) }.min()!
                if weights[y * w + x] > 0 && d2 >= band * band { beyond += 1 }
                if weights[y * w + x] == 0 && d2 <= (band - 2) * (band - 2) { holes += 1 }
            }
        }
        #expect(beyond == 0, "\(beyond) pixels beyond the band take weight")
        #expect(holes == 0, "\(holes) pixels near the mask take no weight")
        #expect(cells.allSatisfy { weights[$0] == 1 })
    }

    @Test func theLingeringBlockIsErasedAndNothingElseChanges() throws {
        let frames = Self.frames(), mask = Self.blockMask(margin: 8)
        let plain = try BurstStacker.stack(frames, options: Self.options(mask: nil))
        let erased = try BurstStacker.stack(frames, options: Self.options(mask: mask))
        let p = plain.image.uint8, e = erased.image.uint8
        let inBlock = { (x: Int, y: Int) in Self.block.x.contains(x) && Self.block.y.contains(y) }
        // The plain merge keeps the block (the majority there); the erased one shows the scene.
        #expect(Self.psnr(p, Self.scene, where: inBlock) < 20)
        let inside = Self.psnr(e, Self.scene, where: inBlock)
        #expect(inside > 38, "PSNR inside the block \(inside) dB")
        // Beyond the seam band the output is the plain merge's, bit for bit; within it, close.
        let band = Eraser.seamBand
        #expect(band <= 16)
        var changedFar = 0, changedNear = 0
        for y in 0..<240 {
            for x in 0..<320 {
                let dx = max(Self.block.x.lowerBound - 8 - x, x - (Self.block.x.upperBound + 7), 0)
                let dy = max(Self.block.y.lowerBound - 8 - y, y - (Self.block.y.upperBound + 7), 0)
                let far = dx * dx + dy * dy > band * band
                let differs = (0..<3).contains { p[x, y, $0] != e[x, y, $0] }
                if differs && far { changedFar += 1 }
                if differs && !far && !mask.masked[y * 320 + x].isMasked { changedNear += 1 }
            }
        }
        #expect(changedFar == 0, "\(changedFar) pixels changed beyond the seam band")
        #expect(changedNear > 0, "the seam band blends")
        // The summary and the maps say which frames filled the region: those without the block.
        let s = try #require(erased.erase)
        // What changed is the block (3,000 pixels), not the margin around it.
        #expect(s.maskedPixels == mask.count && s.remergedPixels >= 2_800 && s.remergedPixels <= 3_200, "\(s)")
        #expect(s.meanFrames >= 3 && s.meanFrames <= 4.01, "\(s)")
        let clear: Set<Int> = [0, 1, 8, 9]
        let major = s.frames.filter { $0.pixels * 20 > s.maskedPixels }.map(\.index)
        #expect(Set(major).isSubset(of: clear) && major.count == 4, "\(s.frames)")
        let maps = try #require(erased.maps)
        var fromClear = 0, total = 0
        for y in Self.block.y {
            for x in Self.block.x {
                total += 1
                if clear.contains(Int(maps.provenance[x, y, 0]) - 1) { fromClear += 1 }
            }
        }
        #expect(
            fromClear * 100 >= total * 98,
            "\(total - fromClear) of \(total) block pixels credited to a frame that showed the block")
        #expect(!s.description.isEmpty && s.description.contains("merged again"))
    }

    /// Frames 0 and 1 saw behind the block, and also a dark block passing beside it, inside the
    /// mask: where both show the passer, they agree with each other and disagree with the merge
    /// over most of their windows, like frames that saw behind something that stood there. Over
    /// the window they disagree with the erased picture too (the passer moved), so those pixels
    /// keep the plain merge, which shows the scene; the block is still erased.
    @Test func framesThatSawSomethingPassAreNotTakenForTheViewBehind() throws {
        let frames = Self.frames(passerAbove: true), mask = Self.blockMask(margin: 16)
        let plain = try BurstStacker.stack(frames, options: Self.options(mask: nil))
        let erased = try BurstStacker.stack(frames, options: Self.options(mask: mask))
        let p = plain.image.uint8, e = erased.image.uint8
        // Where both frames show the passer, inside the mask and outside the block.
        let strip = { (x: Int, y: Int) in x >= 175 && x < 185 && y >= 104 && y < 112 }
        let stripPSNR = Self.psnr(e, Self.scene, where: strip)
        #expect(Self.psnr(p, Self.scene, where: strip) > 38)
        #expect(stripPSNR > 38, "PSNR where the passer was \(stripPSNR) dB")
        var off = 0
        for y in 104..<112 {
            for x in 175..<185 where (0..<3).contains(where: { e[x, y, $0] != p[x, y, $0] }) {
                off += 1
            }
        }
        #expect(off == 0, "\(off) of 80 pixels where the passer was differ from the plain merge")
        let inBlock = { (x: Int, y: Int) in Self.block.x.contains(x) && Self.block.y.contains(y) }
        let inside = Self.psnr(e, Self.scene, where: inBlock)
        #expect(inside > 38, "PSNR inside the block \(inside) dB")
    }

    @Test func aMaskOfTheWrongSizeIsRefusedBeforeAlignment() {
        var o = Self.options(mask: EraseMask(width: 100, height: 100, masked: Array(repeating: true, count: 10_000)))
        o.givenHomographies = nil
        let stages = LockedBox(Set<StackStage>())
        o.progress = { p in stages.update { _ = $0.insert(p.stage) } }
        #expect(throws: StackError.eraseMaskSize(mask: "100x100", reference: "320x240")) {
            try BurstStacker.stack(Self.frames(), options: o)
        }
        #expect(stages.value.isEmpty, "no stage ran: \(stages.value)")
        #expect(StackError.eraseMaskSize(mask: "100x100", reference: "320x240").description.contains("at its size"))
    }

    @Test func aMaskOverWhatEveryFrameShowsIsRefused() {
        // The block is in every frame: no frame saw behind it.
        #expect(throws: StackError.nothingBehindMask(maskedPixels: Self.blockMask(margin: 0).count)) {
            try BurstStacker.stack(
                Self.frames(blockEverywhere: true), options: Self.options(mask: Self.blockMask(margin: 0)))
        }
        #expect(StackError.nothingBehindMask(maskedPixels: 5).description.contains("no frame saw behind"))
    }

    @Test func anEmptyMaskIsRefused() {
        let empty = EraseMask(width: 320, height: 240, masked: Array(repeating: false, count: 320 * 240))
        #expect(throws: SettingError.self) { try Self.options(mask: empty).validate() }
        #expect(throws: StackError.eraseMaskEmpty) {
            try BurstStacker.stack(Self.frames(), options: Self.options(mask: empty))
        }
    }

    @Test func aMaskPictureIsWhiteAndOpaque() {
        // RGBA: white opaque, white transparent, black opaque, grey just above half.
        let rgba = Image<UInt8>(
            width: 4, height: 1, channels: 4,
            samples: [255, 255, 255, 255, 255, 255, 255, 0, 0, 0, 0, 255, 128, 128, 128, 200])
        #expect(EraseMask(.uint8(rgba)).masked == [1, 0, 0, 1])
        let grey16 = Image<UInt16>(width: 3, height: 1, channels: 1, samples: [65535, 1000, 40000])
        #expect(EraseMask(.uint16(grey16)).masked == [1, 0, 1])
    }

    @Test("Erasing a finished stack gives what stacking with the mask gives, to the bit")
    func erasingAfterwardsIsErasingDuring() throws {
        let frames = Self.frames(), mask = Self.blockMask(margin: 4)
        let plain = try BurstStacker.stack(frames, options: Self.options(mask: nil))
        let during = try BurstStacker.stack(frames, options: Self.options(mask: mask))
        let after = try BurstStacker.erase(mask, from: plain, frames: frames)
        #expect(after.image == during.image && after.erase == during.erase)
        #expect(after.maps?.provenance == during.maps?.provenance && after.maps?.kept == during.maps?.kept)
        #expect(throws: StackError.eraseMaskSize(mask: "4x4", reference: "320x240")) {
            try BurstStacker.erase(
                EraseMask(width: 4, height: 4, masked: Array(repeating: true, count: 16)), from: plain, frames: frames)
        }
    }

    @Test("Worked through in bands of any height, the erase gives the same, to the bit, and reports each band")
    func bandsChangeNothing() throws {
        let frames = Self.frames(), mask = Self.blockMask(margin: 8)
        let plain = try BurstStacker.stack(frames, options: Self.options(mask: nil))
        let used = plain.frames.filter(\.used).map(\.index)
        let source = BurstFrameSource(
            names: frames.map(\.name), width: 320, height: 240, channels: 3, eightBit: true,
            referenceMetadata: plain.referenceMetadata, memory: frames, spill: nil, slots: [])
        func erase(bandRows: Int?) throws -> (Image<UInt8>, EraseSummary, StackMaps?, Int) {
            var maps = plain.maps
            let bands = LockedBox(0)
            let e = try BurstStacker.erase(
                mask, source.samplers(used, used.map { plain.frames[$0].homography }, [], .bicubic, as: UInt8.self),
                plain.image.uint8, sigma: plain.noiseSigma, maps: &maps, frameIndex: used, reference: 0,
                cancellation: nil,
                bandRows: bandRows, afterBand: { bands.update { $0 += 1 } })
            return (e.0, e.1, maps, bands.value)
        }
        // The region: the 60 x 50 block grown by 8 and by the seam band, 90 rows.
        let whole = try erase(bandRows: nil)
        #expect(whole.3 == 2)
        for rows in [1, 7, 40] {
            let banded = try erase(bandRows: rows)
            #expect(banded.0 == whole.0 && banded.1 == whole.1, "\(rows)-row bands")
            #expect(banded.2?.provenance == whole.2?.provenance && banded.2?.kept == whole.2?.kept)
            #expect(banded.3 == 2 * ((90 + rows - 1) / rows), "\(banded.3) bands of \(rows) rows, two passes")
        }
        // The default band: a 64 MB budget for the two byte buffers, at least 128 rows.
        #expect(Eraser.bandRows(frames: 30, width: 4000) == 279 && Eraser.bandRows(frames: 30, width: 12_000) == 128)
    }

    @Test func strokesPaintDiscsAndCapsules() throws {
        let disc = EraseMask(width: 100, height: 100, strokes: [EraseStroke(points: [[50, 50]], radius: 10)])
        #expect(abs(Double(disc.count) - Double.pi * 100) < 12, "\(disc.count)")
        // A horizontal stroke of length 40, radius 5: a 40 x 11 band plus two half discs.
        let capsule = EraseMask(
            width: 100, height: 100, strokes: [EraseStroke(points: [[30, 50], [70, 50]], radius: 5)])
        #expect(abs(Double(capsule.count) - (40 * 11 + Double.pi * 25)) < 12, "\(capsule.count)")
        #expect(
            capsule.masked[50 * 100 + 50] == 1 && capsule.masked[50 * 100 + 80] == 0
                && capsule.masked[44 * 100 + 50] == 0)
        // Strokes that do not validate paint nothing (and do not trap).
        for bad in [
            EraseStroke(points: [[.nan, 3]], radius: 5), EraseStroke(points: [[3, 3]], radius: .infinity),
            EraseStroke(points: [[1e300, 3]], radius: 5), EraseStroke(points: [], radius: 5)
        ] {
            #expect(throws: SettingError.self) { try bad.validate() }
            #expect(EraseMask(width: 10, height: 10, strokes: [bad]).count == 0)
        }
        // Random strokes: exactly the pixels whose centre is within the radius of the path.
        var noise = SplitMix(seed: 3)
        for _ in 0..<20 {
            let radius = Double(1 + 30 * noise.uniform())
            var points: [[Double]] = []
            for _ in 0..<(1 + Int(6 * noise.uniform())) {
                let x = Double(-20 + 140 * noise.uniform()), y = Double(-20 + 110 * noise.uniform())
                points.append([x, y])
            }
            let stroke = EraseStroke(points: points, radius: radius)
            var expected = [UInt8](repeating: 0, count: 100 * 80)
            for y in 0..<80 {
                for x in 0..<100 {
                    for i in 0..<points.count {
                        let a = points[i], b = points[min(i + 1, points.count - 1)]
                        let dx: Double = b[0] - a[0], dy: Double = b[1] - a[1], px: Double = Double(x) - a[0],
                            py: Double = Double(y) - a[1]
                        let length2: Double = dx * dx + dy * dy
                        let t: Double = length2 > 0 ? min(1, max(0, (px * dx + py * dy) / length2)) : 0
                        let ex: Double = px - t * dx, ey: Double = py - t * dy
                        if ex * ex + ey * ey <= radius * radius { expected[y * 100 + x] = 1 }
                    }
                }
            }
            #expect(EraseMask(width: 100, height: 80, strokes: [stroke]).masked == expected, "\(stroke)")
        }
        // The most a request may ask: 2,000 points of the largest brush (painted run by run, not pixel by pixel).
        let path: [[Double]] = (0..<2_000).map { (i: Int) -> [Double] in [Double(i % 40) * 50, Double(i / 40) * 30] }
        let big = EraseStroke(points: path, radius: 2_000)
        #expect(EraseMask(width: 2_000, height: 1_500, strokes: [big]).count == 3_000_000)
        // Off the picture: clipped.
        #expect(
            EraseMask(width: 10, height: 10, strokes: [EraseStroke(points: [[-50, -50], [200, 200]], radius: 2)]).count
                > 10)
    }

    /// The value behind (``Eraser/viewValue(_:_:pixel:tolerance:into:values:)``): the mean of the
    /// frames whose every channel lies within tolerance of the frames' per-channel median, else
    /// that median; the group and its members are still the largest agreeing group's.
    @Test func viewBehindIsTheMeanAroundTheMedian() {
        let t = SampleTile.allocate(frames: 7, maxPixels: 1, channels: 3)
        defer { t.deallocate() }
        // Frames 0-5 see the scene (green spread over 15 levels), frame 6 someone passing.
        let rgb: [[Float]] = [
            [100, 50, 20], [102, 52, 21], [101, 58, 20], [99, 51, 19], [101, 64, 20], [100, 65, 21], [30, 200, 90]
        ]
        for (k, v) in rgb.enumerated() { for ch in 0..<3 { t.values[k * t.stride + ch] = v[ch] } }
        var out = [Float](repeating: 0, count: 3), members: [Int] = [], values: [Float] = []
        let group = Eraser.largestAgreeingGroup(Array(0..<7), t, pixel: 0, tolerance: 10, members: &members)
        #expect(group == 6 && Set(members) == Set(0..<6))
        Eraser.viewValue(Array(0..<7), t, pixel: 0, tolerance: 10, into: &out, values: &values)
        // Medians (100, 58, 20); frames 0-5 lie within 10 of them: their mean.
        #expect(abs(out[0] - 100.5) < 1e-4 && abs(out[1] - 340.0 / 6) < 1e-4 && abs(out[2] - 121.0 / 6) < 1e-4)
        // Within 4: frame 2 alone (the others' green is 6-8 off).
        Eraser.viewValue(Array(0..<7), t, pixel: 0, tolerance: 4, into: &out, values: &values)
        #expect(out == [101, 58, 20])
        // Frames 0, 4 and 6, medians (100, 64, 20); within 0.5 none (frame 4's red is 1 off): the medians.
        Eraser.viewValue([0, 4, 6], t, pixel: 0, tolerance: 0.5, into: &out, values: &values)
        #expect(out == [100, 64, 20])
    }

    /// Fine texture the frames behind softened and the reference did not: a patch of 1-pixel
    /// squares (60 and 190) in the textured scene, every frame but the reference shifted by half
    /// a pixel (so the squares average to grey when warped back), a block standing over the patch
    /// in frames 2-7. Erased, the patch stays within the agreement tolerance of the reference's
    /// squares, where the mean of the frames behind is grey. Where someone dark passes in front of
    /// the reference alone, inside the block, its 5 x 5 means differ from the erased picture's,
    /// and the pixels keep the other frames' view.
    @Test func theViewBehindKeepsTheReferencesFineTexture() throws {
        let w = 160, h = 120, block = (x: 60..<100, y: 40..<80)
        let patch = (x: 72..<88, y: 52..<68), passer = (x: 62..<70, y: 42..<50)
        var scene = texturedScene(w, h)
        for y in patch.y { for x in patch.x { for c in 0..<3 { scene[x, y, c] = (x + y) % 2 == 0 ? 60 : 190 } } }
        let shifts: [(Double, Double)] = [
            (0, 0), (0.5, 0), (0, 0.5), (0.5, 0.5), (-0.5, 0), (1.5, 0.5), (0.5, -1), (-0.5, -0.5), (2.5, 0), (0, -1.5)
        ]
        var rng = SplitMix(seed: 3)
        let frames = shifts.enumerated().map { k, s in
            var painted = scene
            for y in 0..<h {
                for x in 0..<w {
                    let inBlock = (2...7).contains(k) && block.x.contains(x) && block.y.contains(y)
                    let inPasser = k == 0 && passer.x.contains(x) && passer.y.contains(y)
                    for c in 0..<3 where inBlock || inPasser { painted[x, y, c] = inBlock ? UInt8(200 - 40 * c) : 20 }
                }
            }
            var f = painted.warped(
                by: Homography.translation(-s.0, -s.1), width: w, height: h, interpolation: .catmullRom
            ).image
            for i in f.samples.indices {
                f.samples[i] = UInt8(clampingRounded: Float(f.samples[i]) + 2 * rng.gaussian())
            }
            return BurstFrame(name: "f\(k)", image: .uint8(f))
        }
        var options = StackOptions()
        options.givenHomographies = shifts.map { Homography.translation($0.0, $0.1) }
        options.erase = EraseMask(
            width: w, height: h,
            masked: (0..<(w * h)).map { i in
                (block.x.lowerBound - 8..<block.x.upperBound + 8).contains(i % w)
                    && (block.y.lowerBound - 8..<block.y.upperBound + 8).contains(i / w)
            })
        let e = try BurstStacker.stack(frames, options: options).image.uint8
        let held = Self.psnr(e, scene) { patch.x.contains($0) && patch.y.contains($1) }
        var near = 0
        for y in patch.y {
            for x in patch.x where (0..<3).allSatisfy({ abs(Int(e[x, y, $0]) - Int(scene[x, y, $0])) <= 10 }) {
                near += 1
            }
        }
        // Without the reference the squares come out grey, 65 levels off: 0 of 256, about 12 dB.
        #expect(near >= 230 && held > 20, "\(near) of 256 squares within 10 levels, PSNR \(held) dB")
        // Where the passer stood in the reference: the scene's texture (47 and up), not its dark.
        var pulled = 0
        for y in passer.y { for x in passer.x where (0..<3).contains(where: { e[x, y, $0] < 40 }) { pulled += 1 } }
        #expect(pulled == 0, "\(pulled) of 64 pixels pulled towards the reference's passer-by")
        let rest = Self.psnr(e, scene) {
            block.x.contains($0) && block.y.contains($1) && !(patch.x.contains($0) && patch.y.contains($1))
        }
        #expect(rest > 30, "PSNR over the rest of the block \(rest) dB")
    }

    @Test func otsuSplitsOnlyWhenTwoGroupsStandOut() {
        var clear: [(UInt8, Int)] = [(3, 0), (180, 1), (2, 2), (5, 3), (170, 4), (4, 5)]
        let at = Eraser.otsuSplit(&clear)
        #expect(at == 4 && Set(clear[4...].map(\.1)) == [1, 4])
        var same: [(UInt8, Int)] = [(3, 0), (9, 1), (2, 2), (12, 3), (6, 4)]
        #expect(Eraser.otsuSplit(&same) == nil, "a spread of noise is no second group")
    }
}

private extension UInt8 { var isMasked: Bool { self != 0 } }
