import CKernels
import EvanescoCore
import Foundation

// Where refinement starts: exhaustive searches over shifts (and rotations and scales) at the
// coarsest level, scored by normalised cross-correlation.

extension RegistrationReference {
    /// Starting warps (reference -> frame, level-0 pixels) from an exhaustive search over
    /// rotations (every 5 degrees to +-45), scales (0.7 to 1.4) and shifts at the coarsest level,
    /// best three by correlation.
    func similarityStarts(_ frame: Image<Float>, _ ref: Image<Float>, level: Int) -> [Homography] {
        let cx = Double(ref.width - 1) / 2, cy = Double(ref.height - 1) / 2
        var hypotheses: [(score: Float, w: Homography)] = []
        for degrees in stride(from: -45.0, through: 45.0, by: 5.0) {
            for scale in [0.7, 0.8, 0.9, 1.0, 1.12, 1.25, 1.4] {
                // Reference -> frame at the coarse level: rotation and scale about the centre.
                let wTop = Homography.rotation(degrees: degrees, scale: scale, about: cx, cy)
                // The frame resampled into the reference's geometry under wTop.
                let resampled = frame.warped(
                    by: wTop.inverse!, width: ref.width, height: ref.height, interpolation: .bilinear
                ).image
                guard let best = coarseShifts(resampled, ref, count: 1).first else { continue }
                let w = wTop * Homography.translation(Double(best.dx), Double(best.dy))
                hypotheses.append((best.score, w.rescaled(by: pow(2.0, Double(level)))))
            }
        }
        return hypotheses.sorted { $0.score > $1.score }.prefix(3).map(\.w)
    }

    /// The `count` best integer shifts (frame minus reference) by zero-mean normalised
    /// cross-correlation at the coarsest level, at least 2 pixels apart, best first.
    ///
    /// Coarse to fine when the search is wide: every shift of half-size copies (a quarter of the
    /// pixels, a quarter of the shifts), then the shifts within a pixel of the best few of them,
    /// and of zero, at this level. (A start only has to land in the refinement's reach, a pixel
    /// or two here; its agreement after refinement ranks it.)
    func coarseShifts(_ frame: Image<Float>, _ ref: Image<Float>, count: Int) -> [(dx: Int, dy: Int, score: Float)] {
        let w = ref.width, h = ref.height
        let r = max(2, Int(Float(max(w, h)) * options.searchFraction))
        var scores: [(dx: Int, dy: Int, score: Float)]
        if r >= 6 && w >= 32 && h >= 32 {
            let half = RegistrationReference.shiftScores(
                GreyPyramid.halve(frame), GreyPyramid.halve(ref), shifts: RegistrationReference.square((r + 1) / 2)
            )
            .sorted { $0.score > $1.score }
            var centres: [(Int, Int)] = [(0, 0)]
            for c in half where centres.count < count + 4 {
                if centres.allSatisfy({ abs($0.0 - 2 * c.dx) > 3 || abs($0.1 - 2 * c.dy) > 3 }) {
                    centres.append((2 * c.dx, 2 * c.dy))
                }
            }
            var wanted = Set<Int>(), shifts: [(Int, Int)] = []
            for (cx, cy) in centres {
                for dy in (cy - 1)...(cy + 1) {
                    for dx in (cx - 1)...(cx + 1) where abs(dx) <= r && abs(dy) <= r {
                        if wanted.insert((dy + r) * (2 * r + 1) + dx + r).inserted { shifts.append((dx, dy)) }
                    }
                }
            }
            scores = RegistrationReference.shiftScores(frame, ref, shifts: shifts)
        } else {
            scores = RegistrationReference.shiftScores(frame, ref, shifts: RegistrationReference.square(r))
        }
        scores.sort { $0.score > $1.score }
        var picked: [(dx: Int, dy: Int, score: Float)] = []
        for c in scores where picked.count < count {
            if picked.allSatisfy({ abs($0.dx - c.dx) > 3 || abs($0.dy - c.dy) > 3 }) { picked.append(c) }
        }
        // A burst barely moves: the zero shift is always worth a try, even when a moving object
        // wins the coarse correlation.
        if !picked.contains(where: { abs($0.dx) <= 1 && abs($0.dy) <= 1 }),
            let zero = scores.first(where: { $0.dx == 0 && $0.dy == 0 })
        {
            picked.append(zero)
        }
        guard let top = picked.first else { return [(0, 0, 0)] }
        // Peaks within 0.03 of the best are near-ties (a repetitive pattern aliases): a burst
        // moves little between frames, so the smaller shift goes first.
        let ties = picked.filter { $0.score >= top.score - 0.03 }.sorted {
            $0.dx * $0.dx + $0.dy * $0.dy < $1.dx * $1.dx + $1.dy * $1.dy
        }
        return ties + picked.filter { $0.score < top.score - 0.03 }
    }

    /// Every shift within `r` of zero on each axis.
    static func square(_ r: Int) -> [(Int, Int)] { (-r...r).flatMap { dy in (-r...r).map { dx in (dx, dy) } } }

    /// The zero-mean normalised cross-correlation of `ref` and `frame` shifted by each of
    /// `shifts` (frame minus reference), over their overlap; shifts whose overlap is under a
    /// quarter of the image are left out.
    static func shiftScores(_ frame: Image<Float>, _ ref: Image<Float>, shifts: [(Int, Int)]) -> [(
        dx: Int, dy: Int, score: Float
    )] {
        let w = ref.width, h = ref.height
        var scores: [(dx: Int, dy: Int, score: Float)] = []
        scores.reserveCapacity(shifts.count)
        ref.samples.withUnsafeBufferPointer { t in
            frame.samples.withUnsafeBufferPointer { f in
                for (dx, dy) in shifts {
                    let x0 = max(0, -dx), x1 = min(w, w - dx), y0 = max(0, -dy), y1 = min(h, h - dy)
                    let n = (x1 - x0) * (y1 - y0)
                    guard x1 > x0, y1 > y0, n >= w * h / 4 else { continue }
                    // Four columns at a time (the overlap is inside both images by construction).
                    var st4 = SIMD4<Float>(), sf4 = SIMD4<Float>(), stt4 = SIMD4<Float>(), sff4 = SIMD4<Float>(),
                        stf4 = SIMD4<Float>()
                    var st: Float = 0, sf: Float = 0, stt: Float = 0, sff: Float = 0, stf: Float = 0
                    let tp = t.baseAddress!, fp = f.baseAddress!
                    for y in y0..<y1 {
                        let rt = tp + y * w, rf = fp + ((y + dy) * w + dx)
                        var x = x0
                        while x + 4 <= x1 {
                            let a = UnsafeRawPointer(rt + x).loadUnaligned(as: SIMD4<Float>.self)
                            let b = UnsafeRawPointer(rf + x).loadUnaligned(as: SIMD4<Float>.self)
                            st4 += a
                            sf4 += b
                            stt4 += a * a
                            sff4 += b * b
                            stf4 += a * b
                            x += 4
                        }
                        while x < x1 {
                            let a = rt[x], b = rf[x]
                            st += a
                            sf += b
                            stt += a * a
                            sff += b * b
                            stf += a * b
                            x += 1
                        }
                    }
                    st += st4.sum()
                    sf += sf4.sum()
                    stt += stt4.sum()
                    sff += sff4.sum()
                    stf += stf4.sum()
                    let fn = Float(n)
                    let cov = stf - st * sf / fn, vt = stt - st * st / fn, vf = sff - sf * sf / fn
                    scores.append((dx, dy, cov / max(1e-6, (vt * vf).squareRoot())))
                }
            }
        }
        return scores
    }
}
