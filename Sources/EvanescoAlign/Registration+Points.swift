import CKernels
import EvanescoCore
import Foundation

// Choosing the template points: the strongest gradients, spread over the picture.

extension RegistrationReference {
    static func selectPoints(_ img: Image<Float>, cap: Int) -> TemplateLevel {
        let w = img.width, h = img.height
        // Gradient magnitude per pixel (central differences), 2-pixel border excluded, chosen
        // cell by cell of an 8 x 8 grid; the grid's rows at once on all cores (the reference's
        // points are made before any frame can be registered), joined in order.
        let cells = 8
        let cellW = max(1, (w + cells - 1) / cells), cellH = max(1, (h + cells - 1) / cells)
        let quota = cap == Int.max ? Int.max : max(16, cap / (cells * cells))
        let rows = LockedBox([PointRow?](repeating: nil, count: cells))
        img.samples.withUnsafeBufferPointer { buffer in
            let s = UncheckedSendable(buffer)
            StripExecutor.forEachStrip(rows: cells, minimumRows: 1) { range in
                for cyi in range {
                    let row = selectPoints(
                        s.value, width: w, height: h, y0: max(2, cyi * cellH), y1: min(h - 2, (cyi + 1) * cellH),
                        cells: cells, cellWidth: cellW, quota: quota)
                    rows.update { $0[cyi] = row }
                }
            }
        }
        var px: [Float] = [], py: [Float] = [], pt: [Float] = [], pgx: [Float] = [], pgy: [Float] = []
        for case let r? in rows.value {
            px += r.x
            py += r.y
            pt += r.value
            pgx += r.gx
            pgy += r.gy
        }
        return TemplateLevel(width: w, height: h, x: px, y: py, t: pt, gx: pgx, gy: pgy)
    }

    /// `quota` of a cell's candidates (squared gradient, index), preferring strong gradients but
    /// capping their rank at 4x the cell's median magnitude: otherwise the hard edges of a moving
    /// object (a car, a person against the sky) take every point of their cells and drag the
    /// estimate. Ties at the cap are spread evenly.
    private static func strongest(_ cand: [(g: Float, i: Int)], quota: Int) -> [(g: Float, i: Int)] {
        // Squared gradients (at least 1): magnitudes, selected by their bits.
        var g = cand.map(\.g)
        let cap = 16 * Selection.kthOfMagnitudes(&g, g.count / 2)
        var keys = cand.map { min($0.g, cap) }
        let kth = Selection.kthOfMagnitudes(&keys, keys.count - quota)
        var kept = cand.filter { min($0.g, cap) > kth }
        let tied = cand.filter { min($0.g, cap) == kth }
        let need = quota - kept.count
        if need > 0 && !tied.isEmpty {
            let step = Double(tied.count) / Double(need)
            for k in 0..<min(need, tied.count) { kept.append(tied[Int(Double(k) * step)]) }
        }
        return kept
    }

    /// Points of one row of the grid: positions, values and gradients.
    private struct PointRow: Sendable {
        var x: [Float] = [], y: [Float] = [], value: [Float] = [], gx: [Float] = [], gy: [Float] = []
    }

    /// The points of one row of ``selectPoints(_:cap:)``'s grid (rows y0..<y1), cell by cell.
    private static func selectPoints(
        _ s: UnsafeBufferPointer<Float>, width w: Int, height h: Int, y0: Int, y1: Int,
        cells: Int, cellWidth cellW: Int, quota: Int
    ) -> PointRow {
        var r = PointRow()
        var cand: [(g: Float, i: Int)] = []
        guard y0 < y1 else { return r }
        for cxi in 0..<cells {
            cand.removeAll(keepingCapacity: true)
            let x0 = max(2, cxi * cellW), x1 = min(w - 2, (cxi + 1) * cellW)
            guard x0 < x1 else { continue }
            for y in y0..<y1 {
                for x in x0..<x1 {
                    let i = y * w + x
                    let gx = 0.5 * (s[i + 1] - s[i - 1]), gy = 0.5 * (s[i + w] - s[i - w])
                    let g = gx * gx + gy * gy
                    if g >= 1.0 { cand.append((g, i)) }  // |grad| >= 1 grey level / px
                }
            }
            for c in cand.count > quota ? strongest(cand, quota: quota) : cand {
                r.x.append(Float(c.i % w))
                r.y.append(Float(c.i / w))
                r.value.append(s[c.i])
                r.gx.append(0.5 * (s[c.i + 1] - s[c.i - 1]))
                r.gy.append(0.5 * (s[c.i + w] - s[c.i - w]))
            }
        }
        return r
    }
}
