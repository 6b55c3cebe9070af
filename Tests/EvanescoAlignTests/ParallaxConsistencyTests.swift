import EvanescoCore
import Foundation
import Testing

@testable import EvanescoAlign

/// Fields made as the model says a burst's are (one depth per cell, one motion and one affine
/// error per frame), then spoiled the ways measurement spoils them.
@Suite struct ParallaxConsistencyKnownAnswers {
    static let columns = 24, rows = 16, cell = 8

    /// Relative inverse depth per cell: a slanted wall with a nearer box in it.
    static func depth(_ c: Int) -> Float {
        let i = c % columns, j = c / columns
        let box = (8..<14).contains(i) && (5..<11).contains(j)
        return (box ? 1.0 : -0.4) + 0.02 * Float(i)
    }

    /// Frame k's field: depth x motion plus a small affine error of its homography (the motion's
    /// direction `turn` x k radians: 2.1, the default, gives three directions, a third of a turn
    /// apart).
    static func truth(_ k: Int, turn: Float = 2.1) -> DisplacementField {
        var f = DisplacementField(width: columns * cell, height: rows * cell, cell: cell)
        let angle = Float(k) * turn, magnitude = 2 + Float(k % 3)
        let t = SIMD2(cos(angle), sin(angle)) * magnitude
        for c in 0..<(columns * rows) {
            let x = Float(c % columns) / Float(columns), y = Float(c / columns) / Float(rows)
            f.dx[c] = depth(c) * t.x + 0.1 * Float(k % 2) * x - 0.05
            f.dy[c] = depth(c) * t.y - 0.08 * y + 0.03 * Float(k % 3)
        }
        return f
    }

    static func maxError(_ a: DisplacementField, _ b: DisplacementField, cells: [Int]) -> Float {
        cells.map { max(abs(a.dx[$0] - b.dx[$0]), abs(a.dy[$0] - b.dy[$0])) }.max() ?? 0
    }

    @Test("Cells the reference's moving thing hid (garbage in every frame, measured by few) take the burst's depth")
    func coveredReference() {
        let K = 8, C = Self.columns * Self.rows
        let truths = (0..<K).map { Self.truth($0) }
        // A 4x3-cell patch at the box's edge: every frame matched it to something else.
        let hidden = (0..<C).filter { (6..<10).contains($0 % Self.columns) && (6..<9).contains($0 / Self.columns) }
        var fields = truths
        var measured = [[Bool]](repeating: [Bool](repeating: true, count: C), count: K)
        for k in 0..<K {
            for c in hidden {
                fields[k].dx[c] = Float((c * 7 + k * 13) % 11) - 5
                fields[k].dy[c] = Float((c * 5 + k * 3) % 9) - 4
                measured[k][c] = k == 0
            }
        }
        let (out, summary) = ParallaxConsistency.consolidate(fields.map { $0 }, measured: measured.map { $0 })
        let s = try! #require(summary)
        #expect(s.applied && s.frames == K && s.cells == C, "\(s)")
        #expect(s.inconsistentCells == hidden.count, "\(s)")
        // Inside the patch the depth comes from neighbours (wall or box, so within the box's
        // step at its edge); the cells away from the patch stay at the truth (the model's value,
        // which the measurements near it are drawn toward, is the truth to a hundredth of a pixel).
        for k in 0..<K {
            let f = try! #require(out[k])
            #expect(Self.maxError(f, truths[k], cells: Array(0..<C).filter { !hidden.contains($0) }) < 0.01)
            let interior = hidden.filter { (6..<8).contains($0 % Self.columns) }  // wall cells, left of the box
            #expect(Self.maxError(f, truths[k], cells: interior) < 0.1, "frame \(k)")
        }
        // Before: up to 5 px wrong.
        #expect(Self.maxError(fields[3], truths[3], cells: hidden) > 2)
    }

    @Test("A cell one frame alone got wrong (something covered that frame) takes the model's value; the rest stay")
    func coveredFrame() {
        let K = 6
        var fields = (0..<K).map { Self.truth($0) }
        let c = 5 * Self.columns + 3
        fields[2].dx[c] += 3
        let (out, summary) = ParallaxConsistency.consolidate(fields.map { $0 })
        let s = try! #require(summary)
        #expect(s.applied && s.replacedFrameCells == 1 && s.inconsistentCells == 0, "\(s)")
        #expect(abs(out[2]!.dx[c] - Self.truth(2).dx[c]) < 0.01)
        let C = Self.columns * Self.rows
        for k in 0..<K where k != 2 { #expect(Self.maxError(out[k]!, fields[k], cells: Array(0..<C)) < 0.01) }
    }

    @Test(
        """
        A cell most frames measured is kept (within the blend's pull) even where it fits one depth badly (a leaf \
        before a wall)
        """
    )
    func measuredCellsKept() {
        let K = 8, C = Self.columns * Self.rows
        var fields = (0..<K).map { Self.truth($0) }
        let c = 10 * Self.columns + 20
        for k in 0..<K { fields[k].dx[c] += Float(k % 2 == 0 ? 1.5 : -1.5) }
        let all = [[Bool]](repeating: [Bool](repeating: true, count: C), count: K)
        let (out, summary) = ParallaxConsistency.consolidate(fields.map { $0 }, measured: all.map { $0 })
        #expect(summary?.inconsistentCells == 0)
        // 1.5 px from the model: r^2 / (r^2 + 0.2^2) = 98 % of the difference is kept.
        for k in 0..<K { #expect(abs(out[k]!.dx[c] - fields[k].dx[c]) < 0.05, "frame \(k)") }
    }

    /// Frame k's field with a perspective error of its homography (a quadratic in the position)
    /// on top of ``truth(_:)``.
    static func perspectiveTruth(_ k: Int) -> DisplacementField {
        var f = truth(k)
        for c in 0..<(columns * rows) {
            let x = Float(c % columns) / Float(columns) - 0.5, y = Float(c / columns) / Float(rows) - 0.5
            let p = 0.6 * Float(k % 3 - 1) * x + 0.4 * Float(k % 2) * y
            f.dx[c] += -x * p * 1.5
            f.dy[c] += -y * p * 1.5
        }
        return f
    }

    @Test(
        """
        Noisy measurements of a burst whose homographies have perspective errors come out closer to the truth: the \
        model fits the quadratic, and each measurement is drawn toward it
        """
    )
    func noiseIsPooled() throws {
        let K = 10, C = Self.columns * Self.rows
        let truths = (0..<K).map(Self.perspectiveTruth)
        var fields = truths
        var state: UInt64 = 5
        func noise() -> Float {
            // The sum of three uniforms, spread +-0.15 px.
            var v: Float = 0
            for _ in 0..<3 {
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                v += Float(state >> 40) / Float(1 << 24) - 0.5
            }
            return v * 0.1
        }
        for k in 0..<K {
            for c in 0..<C {
                fields[k].dx[c] += noise()
                fields[k].dy[c] += noise()
            }
        }
        func rms(_ fs: [DisplacementField?]) -> Float {
            var s: Float = 0
            for k in 0..<K {
                for c in 0..<C {
                    let ex = fs[k]!.dx[c] - truths[k].dx[c], ey = fs[k]!.dy[c] - truths[k].dy[c]
                    s += ex * ex + ey * ey
                }
            }
            return (s / Float(K * C)).squareRoot()
        }
        let (out, summary) = ParallaxConsistency.consolidate(fields.map { $0 })
        let s = try #require(summary)
        #expect(s.applied && s.inconsistentCells == 0, "\(s)")
        let before = rms(fields.map { $0 }), after = rms(out)
        #expect(before > 0.07 && after < 0.6 * before, "rms error \(before) -> \(after)")
    }

    @Test(
        """
        A frame's cell that a moving thing dragged further than any depth could (measured, 9 px off) takes the \
        model's value; one within the depths' reach is kept
        """
    )
    func motionBeyondParallax() throws {
        let K = 8, C = Self.columns * Self.rows
        var fields = (0..<K).map { Self.truth($0) }
        let far = 3 * Self.columns + 4, near = 12 * Self.columns + 18
        fields[5].dx[far] += 9
        fields[5].dy[near] += 1.2
        let all = [[Bool]](repeating: [Bool](repeating: true, count: C), count: K)
        let (out, summary) = ParallaxConsistency.consolidate(fields.map { $0 }, measured: all.map { $0 })
        let s = try #require(summary)
        #expect(s.applied && s.replacedFrameCells == 1, "\(s)")
        #expect(abs(out[5]!.dx[far] - Self.truth(5).dx[far]) < 0.02)
        // 1.2 px: within the frame's motion (3-4 px) times the depths' range (about 1.9).
        #expect(abs(out[5]!.dy[near] - fields[5].dy[near]) < 0.05)
    }

    @Test(
        """
        The depth fit weighs measurements by the cell's gradient structure: where a window sees only vertical \
        stripes, noise along them barely moves the depth
        """
    )
    func structureWeighsTheFit() throws {
        let K = 8, C = Self.columns * Self.rows
        // Motions in eight directions (with three, a depth error along y alone can look like
        // the frames' own terms).
        let truths = (0..<K).map { Self.truth($0, turn: 0.8) }
        var fields = truths
        // The box's cells see vertical stripes (texture across x only): their y measurements are
        // whatever the aperture gives, here noise of up to half a pixel either way.
        let box = (0..<C).filter { (8..<14).contains($0 % Self.columns) && (5..<11).contains($0 / Self.columns) }
        for k in 0..<K { for c in box { fields[k].dy[c] += Float((c * 37 + k * 101) % 21 - 10) / 20 } }
        var structure = [SIMD3<Float>](repeating: SIMD3(100, 0, 100), count: C)
        for c in box { structure[c] = SIMD3(200, 0, 0) }
        // Every frame measured every cell (the box's cells are kept: their depth is the fit's).
        let all: [[Bool]?] = [[Bool]](repeating: [Bool](repeating: true, count: C), count: K)
        let plain = ParallaxConsistency.consolidated(fields.map { $0 }, measured: all).model
        let weighed = ParallaxConsistency.consolidated(fields.map { $0 }, measured: all, structure: structure).model
        let m0 = try #require(plain), m1 = try #require(weighed)
        // The model's depth is its own up to scale and offset: fitted to the wall's cells, the
        // largest error of a box cell's depth, relative to the box's step (1.4).
        func error(_ m: ParallaxConsistency.Model) -> Float {
            let a = 2 * Self.columns + 2, b = 2 * Self.columns + 20
            let scale = (m.rho[b] - m.rho[a]) / (Self.depth(b) - Self.depth(a))
            return box.map { abs((m.rho[$0] - m.rho[a]) / scale - (Self.depth($0) - Self.depth(a))) / 1.4 }.max()!
        }
        let e0 = error(m0), e1 = error(m1)
        #expect(e1 < 0.02 && e1 < e0 / 3, "box depth error: plain \(e0), weighed \(e1)")
    }

    @Test("Fields no depth map explains (a scene that deforms) are returned unchanged, and so are two frames")
    func notApplied() {
        let K = 6
        var fields = (0..<K).map { Self.truth($0) }
        for k in 0..<K {
            for c in fields[k].dx.indices {
                fields[k].dx[c] = Float((c * 31 + k * 17) % 23) / 4 - 2.75
                fields[k].dy[c] = Float((c * 13 + k * 29) % 19) / 4 - 2.25
            }
        }
        let (out, summary) = ParallaxConsistency.consolidate(fields.map { $0 })
        #expect(summary?.applied == false)
        for k in 0..<K { #expect(out[k] == fields[k]) }
        let two: [DisplacementField?] = [nil, Self.truth(1), Self.truth(2)]
        let (same, none) = ParallaxConsistency.consolidate(two)
        #expect(none == nil && same[1] == two[1] && same[2] == two[2] && same[0] == nil)
    }

    /// A textured scene, analytic.
    static func scene(_ p: SIMD2<Float>) -> Float {
        128 + 50 * sin(0.9 * p.x) * cos(0.7 * p.y) + 30 * sin(0.37 * (p.x + 2 * p.y))
    }

    /// Frame k as the sweep samples it: at output position x it shows the scene point p with
    /// p + d_k(p) = x, for the true field d_k (`flat`: a scene with nothing to match).
    static func sampler(_ k: Int, flat: Bool = false, noise: Float = 0) -> ParallaxConsistency.Sampler {
        let truth = Self.truth(k), w = columns * cell, h = rows * cell
        return { points, values in
            for i in points.indices {
                let x = points[i]
                guard x.x >= 0, x.y >= 0, x.x <= Float(w - 1), x.y <= Float(h - 1) else {
                    values[i] = .nan
                    continue
                }
                var p = x
                for _ in 0..<6 {
                    let px = min(max(Int(p.x.rounded()), 0), w - 1), py = min(max(Int(p.y.rounded()), 0), h - 1)
                    p = x - truth.value(atX: px, y: py)
                }
                values[i] = (flat ? 128 : Self.scene(p)) + noise * Self.grain(k, x)
            }
        }
    }

    /// A sensor's grain: uniform in [-1, 1], fixed per frame and position (a sixteenth of a pixel).
    static func grain(_ k: Int, _ x: SIMD2<Float>) -> Float {
        var h = UInt64(k) &* 0x9E37_79B9_7F4A_7C15
        h ^= UInt64(bitPattern: Int64((x.x * 16).rounded())) &* 0xBF58_476D_1CE4_E5B9
        h ^= UInt64(bitPattern: Int64((x.y * 16).rounded())) &* 0x94D0_49BB_1331_11EB
        h ^= h >> 31
        h = h &* 0xD6E8_FEB8_6659_FD93
        h ^= h >> 32
        return Float(h % 2001) / 1000 - 1
    }

    /// Eight frames' true fields, with the middle of the box (4x4 cells) hidden: the reference
    /// was covered there by something flat, so no frame measured it and every frame filled it
    /// with the wall's depth around the box (the box's depth at a cell is 1.0 + 0.02 i; the
    /// wall's, -0.4 + 0.02 i); and those fields consolidated.
    static func hiddenBox() -> (
        K: Int, truths: [DisplacementField], hidden: [Int],
        consolidated: (
            fields: [DisplacementField?], summary: ParallaxConsistency.Summary?, model: ParallaxConsistency.Model?
        )
    ) {
        let K = 8, C = columns * rows
        let truths = (0..<K).map { truth($0) }
        let hidden = (0..<C).filter { (9..<13).contains($0 % columns) && (6..<10).contains($0 / columns) }
        var fields = truths
        var measured = [[Bool]](repeating: [Bool](repeating: true, count: C), count: K)
        for k in 0..<K {
            let t = SIMD2(cos(Float(k) * 2.1), sin(Float(k) * 2.1)) * (2 + Float(k % 3))
            for c in hidden {
                fields[k].dx[c] -= 1.4 * t.x
                fields[k].dy[c] -= 1.4 * t.y
                measured[k][c] = false
            }
        }
        return (K, truths, hidden, ParallaxConsistency.consolidated(fields.map { $0 }, measured: measured.map { $0 }))
    }

    @Test(
        """
        Cells no frame could measure, in grainy frames, take a depth good to a few hundredths of a pixel: the \
        frames' pixels across the cell judge it, not the sweep's five points
        """
    )
    func polishedDepth() throws {
        let (K, truths, hidden, r) = Self.hiddenBox()
        let model = try #require(r.model)
        let (out, _) = ParallaxConsistency.sweep(
            r.fields, model: model, samplers: (0..<K).map { Self.sampler($0, noise: 8) })
        var worst: Float = 0
        for k in 0..<K { worst = max(worst, Self.maxError(try #require(out[k]), truths[k], cells: hidden)) }
        // The sweep's five points in eight frames alone: 0.21 px. (At twice the grain, 0.24 px
        // either way: a start more than a step off stays off; see `polishStep`.)
        #expect(worst < 0.1, "worst \(worst) px")
    }

    @Test("Cells no frame could measure, filled with the wrong depth, take the depth at which the frames' pixels agree")
    func sweptDepth() throws {
        let (K, truths, hidden, r) = Self.hiddenBox()
        let C = Self.columns * Self.rows
        let model = try #require(r.model)
        #expect(r.summary?.inconsistentCells == 0, "every frame agrees with the wrong guess")
        #expect(hidden.allSatisfy { model.measuredBy[$0] == 0 })
        #expect(Self.maxError(r.fields[3]!, truths[3], cells: hidden) > 2)

        let (out, summary) = ParallaxConsistency.sweep(
            r.fields, model: model, samplers: (0..<K).map { Self.sampler($0) })
        #expect(summary == ParallaxConsistency.SweepSummary(sweptCells: hidden.count, changedCells: hidden.count))
        let others = Array(0..<C).filter { !hidden.contains($0) }
        for k in 0..<K {
            let f = try #require(out[k])
            #expect(Self.maxError(f, truths[k], cells: hidden) < 0.15, "frame \(k)")
            #expect(Self.maxError(f, r.fields[k]!, cells: others) == 0, "frame \(k): a measured cell changed")
        }

        // Nothing to match behind the covered part (a flat scene): every depth scores alike, the
        // guess stays.
        let (kept, flat) = ParallaxConsistency.sweep(
            r.fields, model: model, samplers: (0..<K).map { Self.sampler($0, flat: true) })
        #expect(flat.changedCells == 0)
        for k in 0..<K { #expect(kept[k] == r.fields[k]) }
        // A frame without a sampler: nothing is swept.
        var missing: [ParallaxConsistency.Sampler?] = (0..<K).map { Self.sampler($0) }
        missing[2] = nil
        #expect(ParallaxConsistency.sweep(r.fields, model: model, samplers: missing).1.sweptCells == 0)
    }

    @Test(
        """
        Cells every frame measured but where the frames disagree (a window across a leaf and the wall behind) take \
        the depth at which the frames' pixels agree
        """
    )
    func disagreeingCellsSwept() throws {
        let K = 8, C = Self.columns * Self.rows
        let truths = (0..<K).map { Self.truth($0) }
        // The middle of the box: each frame matched the wall in some cells, the box in others.
        let torn = (0..<C).filter { (9..<13).contains($0 % Self.columns) && (6..<10).contains($0 / Self.columns) }
        var fields = truths
        for k in 0..<K {
            let t = SIMD2(cos(Float(k) * 2.1), sin(Float(k) * 2.1)) * (2 + Float(k % 3))
            for c in torn where (c + k) % 2 == 0 {
                fields[k].dx[c] -= 1.4 * t.x
                fields[k].dy[c] -= 1.4 * t.y
            }
        }
        let all: [[Bool]?] = [[Bool]](repeating: [Bool](repeating: true, count: C), count: K)
        let r = ParallaxConsistency.consolidated(fields.map { $0 }, measured: all)
        let model = try #require(r.model)
        #expect(torn.allSatisfy { model.measuredBy[$0] == K && model.misfit[$0] > ParallaxConsistency.sweepMisfit })
        let others = Array(0..<C).filter { !torn.contains($0) }
        #expect(others.allSatisfy { model.misfit[$0] < 0.01 })
        let (out, summary) = ParallaxConsistency.sweep(
            r.fields, model: model, samplers: (0..<K).map { Self.sampler($0) })
        #expect(summary.sweptCells == torn.count && summary.changedCells > torn.count / 2, "\(summary)")
        for k in 0..<K {
            let f = try #require(out[k])
            #expect(Self.maxError(f, truths[k], cells: torn) < 0.15, "frame \(k)")
            #expect(Self.maxError(f, r.fields[k]!, cells: others) == 0, "frame \(k): a cell that fits changed")
        }
    }
}
