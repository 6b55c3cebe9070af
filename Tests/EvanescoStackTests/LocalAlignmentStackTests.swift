import Foundation
import Testing
import EvanescoAlign
import EvanescoCore
@testable import EvanescoStack

/// A burst with parallax: each frame sees the scene through its own smooth shift field (near
/// things move more than far ones, in a direction per frame) plus a global translation, and a
/// moving occluder. `magnitudes[k]`, when given, is frame k's largest parallax shift (3 px otherwise).
func parallaxBurst(_ scene: Image<UInt8>, frames n: Int, magnitudes: [Int: Float] = [:]) -> [BurstFrame] {
    let w = scene.width, h = scene.height
    return (0..<n).map { k in
        let angle = Float(k) * 2.1, magnitude: Float = k == 0 ? 0 : magnitudes[k] ?? 3
        let global = SIMD2<Float>(Float(k % 3) - 1, Float(k % 2)) * (k == 0 ? 0 : 1)
        var f = Image<UInt8>(width: w, height: h, channels: 3) { out in
            for y in 0..<h {
                for x in 0..<w {
                    // Depth in -1...1 over smooth hills (no homography can follow it): the shift is proportional.
                    let depth = sinf(Float(x) / 45) * cosf(Float(y) / 35)
                    let s = SIMD2(cosf(angle), sinf(angle)) * magnitude * depth + global
                    let sx = min(max(Float(x) - s.x, 0), Float(w - 1)), sy = min(max(Float(y) - s.y, 0), Float(h - 1))
                    let ix = min(Int(sx), w - 2), iy = min(Int(sy), h - 2), tx = sx - Float(ix), ty = sy - Float(iy)
                    for c in 0..<3 {
                        func p(_ xx: Int, _ yy: Int) -> Float { Float(scene[xx, yy, c]) }
                        let top = p(ix, iy) + (p(ix + 1, iy) - p(ix, iy)) * tx,
                            bot = p(ix, iy + 1) + (p(ix + 1, iy + 1) - p(ix, iy + 1)) * tx
                        out[(y * w + x) * 3 + c] = UInt8(clampingRounded: top + (bot - top) * ty)
                    }
                }
            }
        }
        if k > 0 {
            let x0 = 20 + k * 25
            for y in 100..<140 {
                for x in x0..<(x0 + 30) where x < w {
                    for c in 0..<3 { f[x, y, c] = UInt8((x * 7 + y * 3 + c * 50) % 256) }
                }
            }
        }
        return BurstFrame(name: "p\(k)", image: .uint8(f))
    }
}

@Suite struct LocalAlignmentStacking {
    static let scene = texturedScene(320, 240)

    /// Mean absolute error against the clean scene inside a 24 px margin.
    static func error(_ img: Image<UInt8>) -> Double {
        var sum = 0.0, n = 0
        for y in 24..<216 {
            for x in 24..<296 {
                for c in 0..<3 {
                    sum += Double(abs(Int(img[x, y, c]) - Int(scene[x, y, c])))
                    n += 1
                }
            }
        }
        return sum / Double(n)
    }

    @Test("With parallax, --align local aligns what one homography cannot, and auto turns it on (the report says so)")
    func parallaxAligned() throws {
        let frames = parallaxBurst(Self.scene, frames: 7)
        var global = StackOptions()
        global.align = .homography
        var local = StackOptions()
        local.align = .local
        let g = try BurstStacker.stack(frames, options: global), l = try BurstStacker.stack(frames, options: local)
        let eg = Self.error(g.image.uint8), el = Self.error(l.image.uint8)
        #expect(el < 0.5 * eg && el < 2.5, "mean error: homography \(eg), local \(el)")
        let auto = try BurstStacker.stack(frames, options: StackOptions())
        #expect(
            auto.frames.dropFirst().allSatisfy { $0.local?.used == true },
            "\(auto.frames.map { $0.local?.decision ?? "-" })")
        #expect(abs(Self.error(auto.image.uint8) - el) < 0.2)
        let stats = try #require(l.frames[3].local?.field)
        #expect(stats.cells > 0 && stats.p90Px > 1 && stats.maxPx < 8)
        #expect(l.localFields.count == 7 && l.localFields[0] == nil && l.localFields[3] != nil)
        // The report carries it, in snake_case.
        let json = String(decoding: try ReportJSON.encode(StackReport(l, inputs: ["x"], output: "y")), as: UTF8.self)
        #expect(json.contains("\"local\"") && json.contains("\"p90_px\"") && json.contains("\"decision\""))
        // Given back, a report's homographies carry no field: the frames that had one are named.
        let bytes = try ReportJSON.encode(StackReport(l, inputs: ["x"], output: "y"))
        #expect(StackReport.framesWithLocalFields(from: bytes) == Array(1...6))
        #expect(
            StackReport.framesWithLocalFields(from: try ReportJSON.encode(StackReport(g, inputs: ["x"], output: nil)))
                .isEmpty)
        #expect(StackReport.framesWithLocalFields(from: Array("not json".utf8)).isEmpty)
        #expect(
            StackReport.localFieldsNotice(in: bytes, name: "r.json")?.hasPrefix("r.json: 6 frame(s) were aligned")
                == true)
        #expect(StackReport.localFieldsNotice(in: Array("{}".utf8), name: "r.json") == nil)
        // The burst is one depth map seen along a direction per frame: the joint fit explains
        // the six fields, and the report says what it did with them.
        let p = try #require(l.parallax)
        let fieldCells = try #require(l.localFields[3]).dx.count
        #expect(p.frames == 6 && p.cells == fieldCells && p.applied, "\(p)")
        #expect(p.medianResidualPx <= 0.35 && p.inconsistentCells < p.cells / 4, "\(p)")
        #expect(p.changedCells <= p.sweptCells && p.sweptCells <= p.cells)
        #expect(
            json.contains("\"parallax\"") && json.contains("\"median_residual_px\"") && json.contains("\"swept_cells\"")
        )
    }

    @Test(
        """
        The maps: the occluder's path keeps fewer frames, provenance names merged frames, the local shift shows the \
        parallax
        """
    )
    func maps() throws {
        var o = StackOptions()
        o.align = .local
        o.collectMaps = true
        let r = try BurstStacker.stack(parallaxBurst(Self.scene, frames: 7), options: o)
        let m = try #require(r.maps)
        #expect(m.mergedFrames == 7 && m.frames == 7 && m.kept.width == 320)
        // Frame k's occluder covers x 20 + 25k ..< 50 + 25k on rows 100..<140: at x = 90 only
        // frame 2's, so six of seven frames are kept there; far from it all seven.
        #expect(m.kept[90, 120, 0] == 6 && m.kept[160, 40, 0] == 7, "\(m.kept[90, 120, 0]) \(m.kept[160, 40, 0])")
        #expect(m.provenance.samples.allSatisfy { (1...7).contains(Int($0)) })
        // The shift field's amplitude is 3 px (depth +-1): its median over the frames is of that order.
        var big = 0
        for v in m.localShift.samples where v > 100 { big += 1 }
        #expect(
            big > m.localShift.samples.count / 4, "\(big) of \(m.localShift.samples.count) pixels moved more than 1 px")
        let pics = m.pictures()
        #expect(pics.map(\.name) == Array(StackMaps.fileNames.dropLast()))
        #expect(pics.first { $0.name == "provenance-legend.png" }?.image.width == 7 * 24)
    }

    @Test(
        """
        Parallax is the burst's: with a share set, a frame the coarse look turned away gets a field once enough \
        frames found parallax, and a burst without any is left as it was
        """
    )
    func burstParallaxShare() throws {
        // Frame 4 moved little (its median shift is under the threshold); the others 3 px.
        let frames = parallaxBurst(Self.scene, frames: 7, magnitudes: [4: 0.2])
        let alone = try BurstStacker.stack(frames, options: StackOptions())
        #expect(alone.frames[4].local?.used == false, "\(alone.frames[4].local?.decision ?? "-")")
        #expect(alone.frames.dropFirst().filter { $0.local?.used == true }.count == 5)
        var o = StackOptions()
        o.localAlignment.burstParallaxShare = 0.25
        let shared = try BurstStacker.stack(frames, options: o)
        let report = try #require(shared.frames[4].local)
        #expect(report.used && report.field != nil && report.coarse == alone.frames[4].local?.coarse)
        #expect(report.decision.hasPrefix("parallax in 5 of the burst's 6 frames"), "\(report.decision)")
        #expect(shared.localFields[4] != nil && alone.localFields[4] == nil)
        // The frames that found parallax themselves are aligned as before.
        for k in [1, 2, 3, 5, 6] { #expect(shared.frames[k].local == alone.frames[k].local) }
        // A share no burst of 5 of 6 reaches changes nothing.
        o.localAlignment.burstParallaxShare = 0.9
        #expect(try BurstStacker.stack(frames, options: o).image == alone.image)
        // Without parallax in any frame nothing changes either: the homography stack, to the byte.
        let still = burst(Self.scene, shifts: [(0, 0), (1.5, -0.5), (-2.25, 1), (0.5, 2), (3, 0.75)])
        o.localAlignment.burstParallaxShare = 0.25
        var h = StackOptions()
        h.align = .homography
        #expect(try BurstStacker.stack(still, options: o).image == BurstStacker.stack(still, options: h).image)
        // Raw bursts decide this way (their options), pictures frame by frame as before.
        #expect(LocalAlignmentOptions().linear.burstParallaxShare == LocalAlignmentOptions.linearBurstParallaxShare)
        #expect(LocalAlignmentOptions().burstParallaxShare == 0)
    }

    @Test("Without parallax auto leaves local alignment off: the stack is exactly the homography stack")
    func noParallaxNoChange() throws {
        let frames = burst(Self.scene, shifts: [(0, 0), (1.5, -0.5), (-2.25, 1), (0.5, 2), (3, 0.75)])
        var h = StackOptions()
        h.align = .homography
        let a = try BurstStacker.stack(frames, options: StackOptions()), b = try BurstStacker.stack(frames, options: h)
        #expect(a.frames.dropFirst().allSatisfy { $0.local?.used == false })
        #expect(a.image == b.image)
        // No field, no parallax pass, nothing in the report about one.
        #expect(a.parallax == nil)
        #expect(
            !String(decoding: try ReportJSON.encode(StackReport(a, inputs: ["x"], output: nil)), as: UTF8.self)
                .contains("\"parallax\""))
    }
}
