import Foundation
import Testing
import EvanescoCore
import EvanescoIO
@testable import EvanescoAlign

@Suite struct LocalAlignmentKnownAnswers {
    @Test(
        """
        A frame equal to the reference has a zero field; a frame shifted by (2.5, -1.25) px with an identity \
        homography has that field
        """
    )
    func knownShift() {
        let ref = scene(320, 240)
        let rp = GreyPyramid(ref)
        let same = LocalAligner.estimate(reference: rp, frame: GreyPyramid(ref), homography: .identity)
        #expect(same.statistics.maxPx < 0.05, "\(same.statistics)")
        // Frame pixel p shows reference point p - t, so reference pixel p is at frame p + t... the
        // field says where each reference pixel is found in the (homography-warped) frame.
        let moved = frame(of: ref, registration: .translation(-2.5, 1.25))
        let f = LocalAligner.estimate(reference: rp, frame: GreyPyramid(moved), homography: .identity)
        // Away from the frame's border (24 px), where the shifted frame has no pixels.
        var errs: [Float] = []
        for j in 0..<f.field.rows {
            for i in 0..<f.field.columns {
                let x = (Float(i) + 0.5) * Float(f.field.cell), y = (Float(j) + 0.5) * Float(f.field.cell)
                guard x > 24, y > 24, x < 296, y < 216 else { continue }
                let idx = j * f.field.columns + i
                errs.append(max(abs(f.field.dx[idx] - 2.5), abs(f.field.dy[idx] + 1.25)))
            }
        }
        errs.sort()
        #expect(
            errs[errs.count * 9 / 10] < 0.05 && errs.last! < 0.3,
            "p90 \(errs[errs.count * 9 / 10]), worst \(errs.last!) px; \(f.statistics)")
    }
}

@Suite struct LocalAlignmentSmoothField {
    /// The scene seen through a smooth parallax-like field: frame pixel q shows reference point q - d(q).
    static func bent(_ img: Image<UInt8>, _ d: (Float, Float) -> SIMD2<Float>) -> Image<UInt8> {
        let w = img.width, h = img.height
        return Image<UInt8>(width: w, height: h, channels: 3) { out in
            for y in 0..<h {
                for x in 0..<w {
                    let v = d(Float(x), Float(y))
                    let sx = min(max(Float(x) - v.x, 0), Float(w - 1)), sy = min(max(Float(y) - v.y, 0), Float(h - 1))
                    let ix = min(Int(sx), w - 2), iy = min(Int(sy), h - 2), tx = sx - Float(ix), ty = sy - Float(iy)
                    for c in 0..<3 {
                        func p(_ xx: Int, _ yy: Int) -> Float { Float(img[xx, yy, c]) }
                        let top = p(ix, iy) + (p(ix + 1, iy) - p(ix, iy)) * tx,
                            bot = p(ix, iy + 1) + (p(ix + 1, iy + 1) - p(ix, iy + 1)) * tx
                        out[(y * w + x) * 3 + c] = UInt8(clampingRounded: top + (bot - top) * ty)
                    }
                }
            }
        }
    }

    /// The scene with fine texture everywhere (a photo of a room has it; smooth blobs alone do not).
    static func textured(_ w: Int, _ h: Int) -> Image<UInt8> {
        var img = scene(w, h)
        var s: UInt64 = 11
        for i in 0..<(w * h) {
            s = s &* 6364136223846793005 &+ 1442695040888963407
            let n = Int(s >> 58) * 3 - 96
            for c in 0..<3 { img.samples[i * 3 + c] = UInt8(clamping: Int(img.samples[i * 3 + c]) + n) }
        }
        // Light smoothing, as a lens and demosaicing leave it.
        return img.resized(width: w / 2, height: h / 2, interpolation: .bilinear).resized(
            width: w, height: h, interpolation: .bicubic)
    }

    @Test(
        "A smooth field (up to 3 px, 0.06 px/px) is recovered within 0.2 px (90 % of cells) at every cell size",
        arguments: [8, 12, 16, 24])
    func smoothFieldRecovered(cell: Int) {
        let ref = Self.textured(320, 240)
        let truth = { (x: Float, y: Float) in SIMD2<Float>(3 * sinf(x / 50), 2.5 * cosf(y / 40)) }
        let frame = Self.bent(ref, truth)
        var o = LocalAlignmentOptions()
        o.cell = cell
        let f = LocalAligner.estimate(
            reference: GreyPyramid(ref), frame: GreyPyramid(frame), homography: .identity, options: o
        ).field
        var errs: [Float] = []
        for j in 0..<f.rows {
            for i in 0..<f.columns {
                let x = (Float(i) + 0.5) * Float(f.cell) - 0.5, y = (Float(j) + 0.5) * Float(f.cell) - 0.5
                guard x > 24, y > 24, x < 296, y < 216 else { continue }
                // The field says where reference pixel p is in the frame: p + t with t = d(p + t).
                var t = truth(x, y)
                for _ in 0..<6 { t = truth(x + t.x, y + t.y) }
                let idx = j * f.columns + i
                errs.append(max(abs(f.dx[idx] - t.x), abs(f.dy[idx] - t.y)))
            }
        }
        errs.sort()
        let p90 = errs[errs.count * 9 / 10]
        #expect(p90 < 0.2, "cell \(cell): p90 error \(p90), max \(errs.last!)")
    }

    /// The detail pass skips fine cells where the coarse field is flat: a step in the field marks
    /// the cells whose neighbourhood holds it, and nothing else; on a uniform shift the skipped
    /// cells keep the coarse value (measured) and the field matches a full detail pass.
    @Test func detailPassSkipsWhereTheCoarseFieldIsFlat() {
        var step = DisplacementField(width: 160, height: 80, cell: 16)
        for c in step.dx.indices where c % step.columns >= 5 { step.dx[c] = 1 }
        let flat = LocalAligner.flatCells(step, limit: 0.1)
        for c in flat.indices {
            let i = c % step.columns
            #expect(flat[c] == !(4...5).contains(i), "cell \(c)")
        }
        #expect(!LocalAligner.flatCells(step, limit: 0).contains(true))

        let ref = Self.textured(320, 240)
        let frame = Self.bent(ref) { _, _ in SIMD2(1.25, -0.75) }
        var o = LocalAlignmentOptions()
        let full: LocalAlignment = {
            o.detailFlatLimit = 0
            return LocalAligner.estimate(
                reference: GreyPyramid(ref), frame: GreyPyramid(frame), homography: .identity, options: o)
        }()
        o.detailFlatLimit = 0.1
        let skipping = LocalAligner.estimate(
            reference: GreyPyramid(ref), frame: GreyPyramid(frame), homography: .identity, options: o)
        let f = skipping.field
        var worst: Float = 0, interior = 0, measured = 0
        for j in 3..<(f.rows - 3) {
            for i in 3..<(f.columns - 3) {
                let c = j * f.columns + i
                interior += 1
                if skipping.measured[c] { measured += 1 }
                worst = max(worst, abs(f.dx[c] - full.field.dx[c]), abs(f.dy[c] - full.field.dy[c]))
                worst = max(worst, abs(f.dx[c] - 1.25), abs(f.dy[c] + 0.75))
            }
        }
        #expect(worst < 0.1, "worst difference \(worst) px")
        #expect(measured == interior)
        // The skipped cells hold the coarse value, not the detail pass's own.
        #expect(zip(f.dx, full.field.dx).contains { $0 != $1 })
    }

    /// The field's 3x3 median filter (sorted columns, 4 cells at a time inside) against the
    /// median of each cell's neighbours sorted, on grids from 1 x 1 to wider than a vector, with
    /// ties (values drawn from a few levels) and without.
    @Test(arguments: [
        (1, 1), (1, 5), (5, 1), (2, 2), (3, 3), (4, 3), (5, 4), (6, 5), (7, 3), (9, 6), (13, 11), (94, 63)
    ])
    func medianFilterIsTheMedianOfEachNeighbourhood(_ size: (Int, Int)) {
        let (c, r) = size
        var rng = SplitMix(seed: UInt64(c * 1000 + r))
        for levels in [0, 3] {
            let v = (0..<(c * r)).map { _ -> Float in
                levels > 0 ? Float(rng.next() % UInt64(levels)) : Float(rng.next() % 1_000_000) / 1000 - 500
            }
            let filtered = LocalAligner.median3x3(v, columns: c, rows: r)
            var wrong = 0
            for j in 0..<r {
                for i in 0..<c {
                    var n: [Float] = []
                    for jj in max(0, j - 1)...min(r - 1, j + 1) {
                        for ii in max(0, i - 1)...min(c - 1, i + 1) { n.append(v[jj * c + ii]) }
                    }
                    n.sort()
                    if filtered[j * c + i] != n[n.count / 2] { wrong += 1 }
                }
            }
            #expect(wrong == 0, "\(c) x \(r), \(levels) levels: \(wrong) cells differ")
        }
    }

    /// A full estimate that continues from a coarse look (what auto does) finds the field a
    /// fresh estimate finds, and the coarse look's reference planes are reused, not rebuilt.
    @Test func continuingFromACoarseLookMatchesAFreshEstimate() {
        let ref = Self.textured(320, 240)
        let frame = Self.bent(ref, { x, y in SIMD2<Float>(3 * sinf(x / 50), 2.5 * cosf(y / 40)) })
        let prepared = LocalAligner.Reference(GreyPyramid(ref)), fp = GreyPyramid(frame)
        let coarse = LocalAligner.estimate(reference: prepared, frame: fp, homography: .identity, finestLevel: 2)
        let continued = LocalAligner.estimate(reference: prepared, frame: fp, homography: .identity, continuing: coarse)
        let fresh = LocalAligner.estimate(reference: GreyPyramid(ref), frame: fp, homography: .identity)
        #expect(coarse.level == 2 && continued.field.cell == fresh.field.cell)
        var worst: Float = 0
        for j in 0..<fresh.field.rows {
            for i in 0..<fresh.field.columns {
                let x = (Float(i) + 0.5) * Float(fresh.field.cell), y = (Float(j) + 0.5) * Float(fresh.field.cell)
                guard x > 24, y > 24, x < 296, y < 216 else { continue }
                let k = j * fresh.field.columns + i
                worst = max(
                    worst, abs(continued.field.dx[k] - fresh.field.dx[k]),
                    abs(continued.field.dy[k] - fresh.field.dy[k]))
            }
        }
        #expect(worst < 0.1, "continued and fresh fields differ by up to \(worst) px")
    }
}

extension LocalAlignmentSmoothField {
    /// A reference shared by estimates with different cells and windows keeps each one's window
    /// textures apart (they are computed once per grid and reused for the burst's other frames):
    /// every estimate finds exactly the field it finds against a fresh reference.
    @Test func sharedReferenceKeepsEachGridsTextures() {
        let ref = Self.textured(320, 240)
        let frame = Self.bent(ref, { x, y in SIMD2<Float>(2 * sinf(x / 45), 1.5 * cosf(y / 35)) })
        let prepared = LocalAligner.Reference(GreyPyramid(ref)), fp = GreyPyramid(frame)
        var options = [LocalAlignmentOptions(), LocalAlignmentOptions(), LocalAlignmentOptions()]
        options[1].cell = 24
        options[1].detailWindowRadius = 9
        options[2].windowRadius = 20
        options[2].detailCell = 6
        for round in 0..<2 {
            for o in options {
                let shared = LocalAligner.estimate(reference: prepared, frame: fp, homography: .identity, options: o)
                let fresh = LocalAligner.estimate(
                    reference: GreyPyramid(ref), frame: fp, homography: .identity, options: o)
                #expect(
                    shared.field.dx == fresh.field.dx && shared.field.dy == fresh.field.dy,
                    "round \(round), cell \(o.cell) window \(o.windowRadius)")
            }
        }
    }
}

@Suite struct LocalAlignmentMismatch {
    @Test func limitsKnownAnswers() {
        let r: [Float] = [1, 2, 3, .infinity, 0.5]
        // Finite residuals 0.5, 1, 2, 3: the median the selection takes is 2.
        #expect(MismatchLimit.pictures.limit(r) == 6)
        #expect(MismatchLimit.linear.limit(r) == 4)
        #expect(MismatchLimit.linearSearch.limit(r) == 8)
        #expect(MismatchLimit.linear.limit([.infinity]) == .infinity)
        #expect(MismatchLimit.linear.limit([]) == .infinity)
        let o = LocalAlignmentOptions().linear
        #expect(o.mismatch == .linear && o.searchMismatch == .linearSearch && o.detailMismatch == .pictures)
        #expect(LocalAlignmentOptions().mismatch == .pictures)
    }

    /// A dim scene, as a raw burst's linear grey is (0-40 levels): the reference holds a patch of
    /// other texture (a passer-by) that the frame, shifted by (1.5, -1) px, does not. Under linear
    /// grey's limit the cells under the patch match nothing and take their neighbours' shift;
    /// under pictures' floor of 6 levels they are measurements, and the patch drags them.
    @Test func aPatchOnlyTheReferenceHoldsDoesNotDragTheField() {
        let w = 320, h = 240
        let dim = { (img: Image<UInt8>) -> Image<UInt8> in
            var out = img
            for i in out.samples.indices { out.samples[i] = out.samples[i] / 6 }
            return out
        }
        let clean = dim(LocalAlignmentSmoothField.textured(w, h))
        let other = dim(
            LocalAlignmentSmoothField.textured(w, h).resized(
                width: w * 2, height: h * 2, interpolation: .bilinear))
        var ref = clean
        let patch = (x: 120..<200, y: 80..<160)
        for y in patch.y {
            for x in patch.x {
                for c in 0..<3 { ref[x, y, c] = other[x * 2 - 150, y * 2 - 90, c] }
            }
        }
        let frame = LocalAlignmentSmoothField.bent(clean) { _, _ in SIMD2(1.5, -1) }
        func worstUnderPatch(_ o: LocalAlignmentOptions) -> Float {
            let f = LocalAligner.estimate(
                reference: GreyPyramid(ref), frame: GreyPyramid(frame), homography: .identity, options: o
            ).field
            var worst: Float = 0
            for y in stride(from: patch.y.lowerBound + 4, to: patch.y.upperBound - 4, by: 4) {
                for x in stride(from: patch.x.lowerBound + 4, to: patch.x.upperBound - 4, by: 4) {
                    let v = f.value(atX: x, y: y)
                    worst = max(worst, abs(v.x - 1.5), abs(v.y + 1))
                }
            }
            return worst
        }
        let linear = worstUnderPatch(LocalAlignmentOptions().linear)
        let pictures = worstUnderPatch(LocalAlignmentOptions())
        #expect(linear < 0.5, "linear: worst \(linear) px off the frame's shift under the patch")
        #expect(pictures > 1, "pictures: worst \(pictures) px (linear \(linear))")
    }
}

@Suite struct LocalAlignmentNoiseUnits {
    /// A dim textured scene (0-25 levels, as a raw burst's linear grey in its shadows) seen
    /// through `shift`, with Gaussian noise of 3 levels.
    static func noisyDim(seed: UInt64, _ shift: @escaping (Float, Float) -> SIMD2<Float>) -> Image<UInt8> {
        var img = LocalAlignmentSmoothField.bent(LocalAlignmentSmoothField.textured(320, 240), shift)
        var rng = SplitMix(seed: seed)
        for i in img.samples.indices {
            // Box-Muller from two uniforms in (0, 1].
            let u = Float(rng.next() >> 40 + 1) / Float(1 << 24), v = Float(rng.next() >> 40) / Float(1 << 24)
            let n = 3 * (-2 * logf(u)).squareRoot() * cosf(2 * .pi * v)
            img.samples[i] = UInt8(clampingRounded: Float(img.samples[i]) / 10 + n)
        }
        return img
    }

    /// A frame that only its noise tells from the reference measures a coarse field whose median
    /// reaches the pixel threshold (0.07 px of level 2, 0.28 px) but lies within a noise unit or
    /// so; one with smooth parallax of up to 5 px lies well beyond the raw path's 1.3.
    @Test func aFieldOfNoiseIsTold() throws {
        let reference = GreyPyramid(Self.noisyDim(seed: 1) { _, _ in .zero })
        let prepared = LocalAligner.Reference(reference)
        let o = LocalAlignmentOptions().linear
        func coarse(_ frame: Image<UInt8>) -> LocalFieldStatistics {
            LocalAligner.estimate(
                reference: prepared, frame: GreyPyramid(frame), homography: .identity, options: o, finestLevel: 2
            ).statistics
        }
        let still = coarse(Self.noisyDim(seed: 2) { _, _ in .zero })
        let units = try #require(still.p50Noise)
        #expect(still.p50Px >= o.parallaxThreshold * 4, "\(still)")
        #expect(units < o.parallaxNoiseRatio && units > 0.3, "\(still)")
        let hills = coarse(
            Self.noisyDim(seed: 3) { x, y in SIMD2(4, -3) * sinf(x / 45) * cosf(y / 35) })
        #expect(try #require(hills.p50Noise) > 1.5 * o.parallaxNoiseRatio, "\(hills)")
        #expect(o.parallaxNoiseRatio == LocalAlignmentOptions.linearParallaxNoiseRatio)
        #expect(LocalAlignmentOptions().parallaxNoiseRatio == 0)
    }
}
