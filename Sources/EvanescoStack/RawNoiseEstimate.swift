import EvanescoCore
import Foundation

/// The noise of a raw frame that does not declare it, estimated from its own planes: for each
/// channel, over blocks of 8x8 plane pixels, the variance of the residual of each sample against
/// the mean of its four neighbours (1.25 sigma^2 for white noise on a locally linear signal)
/// against the block's mean; in 16 equally populated bins of level, the 10th percentile of the
/// block variances (texture only adds to them; the percentile of a 63-degree variance is 0.772
/// of the true one, which is divided out); then the least-squares line through the bins,
/// variance = slope v + intercept in sample units, its slope kept at or above zero.
enum RawNoiseEstimate {
    /// Each channel's line (sample units, black included in v). Every other block row is used.
    static func sampleNoise(_ planes: Image<UInt16>) -> [(slope: Float, intercept: Float)] {
        let c = planes.channels, w = planes.width, h = planes.height
        return planes.samples.withUnsafeBufferPointer { s in
            (0..<c).map { ch -> (slope: Float, intercept: Float) in
                var blocks: [(Double, Double)] = []
                var by = 1
                while by + 9 < h {
                    var bx = 1
                    while bx + 9 < w {
                        var sum = 0.0, sum2 = 0.0, level = 0.0
                        for y in by..<(by + 8) {
                            for x in bx..<(bx + 8) {
                                let o = (y * w + x) * c + ch
                                let v = Double(s[o])
                                let around =
                                    Double(s[o - c]) + Double(s[o + c]) + Double(s[o - w * c])
                                    + Double(s[o + w * c])
                                let r = v - around / 4
                                sum += r
                                sum2 += r * r
                                level += v
                            }
                        }
                        blocks.append((level / 64, (sum2 - sum * sum / 64) / 63 / 1.25))
                        bx += 8
                    }
                    by += 16
                }
                return fit(blocks.filter { $0.0 < 0.9 * 65535 })
            }
        }
    }

    /// The line through the (corrected) 10th percentile of each of 16 level bins.
    static func fit(_ blocks: [(Double, Double)]) -> (slope: Float, intercept: Float) {
        guard blocks.count >= 32 else { return (0, 1) }
        let sorted = blocks.sorted { $0.0 < $1.0 }, bins = 16, per = sorted.count / bins
        var points: [(Double, Double)] = []
        for b in 0..<bins {
            let slice = sorted[(b * per)..<(b == bins - 1 ? sorted.count : (b + 1) * per)]
            let vars = slice.map(\.1).sorted()
            points.append((slice.map(\.0).reduce(0, +) / Double(slice.count), vars[vars.count / 10] / 0.772))
        }
        let n = Double(points.count), sx = points.map(\.0).reduce(0, +), sy = points.map(\.1).reduce(0, +)
        let sxx = points.map { $0.0 * $0.0 }.reduce(0, +), sxy = points.map { $0.0 * $0.1 }.reduce(0, +)
        let det = n * sxx - sx * sx
        let slope = max(0, det > 0 ? (n * sxy - sx * sy) / det : 0)
        return (Float(slope), Float((sy - slope * sx) / n))
    }

    /// Lines in sample units (``RawPlanes/sampleNoise(_:of:)``'s inverse) as the DNG's model of
    /// `raw`: per colour, scale = slope / range and offset = (intercept + slope black) / range^2
    /// (the two greens averaged).
    static func model(_ lines: [(slope: Float, intercept: Float)], of raw: RawMosaic) -> NoiseModel {
        let k = RawPlanes.scale(white: raw.whiteLevel)
        let black = Double(raw.blackLevels.reduce(0, +) / 4 * k), range = Double(raw.whiteLevel * k) - black
        let pairs = lines.map { l -> NoiseModelPlane in
            NoiseModelPlane(
                scale: Double(l.slope) / range,
                offset: max(1e-12, (Double(l.intercept) + Double(l.slope) * black) / (range * range)))
        }
        guard pairs.count == 4 else { return NoiseModel(planes: pairs) }
        let green = NoiseModelPlane(
            scale: (pairs[1].scale + pairs[3].scale) / 2, offset: (pairs[1].offset + pairs[3].offset) / 2)
        return NoiseModel(planes: [pairs[0], green, pairs[2]])
    }
}
