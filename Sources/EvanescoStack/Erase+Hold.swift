import EvanescoCore

extension EraseRun {
    /// The reference frame's samples over some rows of O grown by 2 pixels, as the stack sampled
    /// it (``EraseRun/referenceRows(around:)``).
    struct ReferenceRows {
        let x0: Int, y0: Int, width: Int, height: Int
        let values: [S]

        /// Channel `ch` at (x, y) of the picture.
        func at(_ x: Int, _ y: Int, _ ch: Int, channels c: Int) -> Float {
            values[((y - y0) * width + x - x0) * c + ch].floatValue
        }
    }

    /// The reference frame's samples over the band's rows of O and 2 pixels around them (clipped
    /// to the picture), or nil where the reference is not one of the frames.
    func referenceRows(around band: Band) -> ReferenceRows? {
        guard let reference else { return nil }
        let c = plain.channels, w = plain.width, h = plain.height
        let x0 = max(0, region.ox0 - 2), x1 = min(w, region.ox1 + 2)
        let y0 = max(0, band.rows.lowerBound - 2), y1 = min(h, band.rows.upperBound + 2)
        var values = [S](repeating: S(clampingRounded: 0), count: (x1 - x0) * (y1 - y0) * c)
        buffers.borrow { tile, _, caches in
            caches[reference].invalidate()
            var s0 = x0
            while s0 < x1 {
                let s1 = min(x1, s0 + tileWidth), t = tile.resized(pixels: s1 - s0)
                for y in y0..<y1 {
                    warpers[reference].sampleRow(
                        y: y, x0: s0, x1: s1, into: t.values, valid: t.valid, cache: caches[reference])
                    let row = ((y - y0) * (x1 - x0) + s0 - x0) * c
                    for i in 0..<(t.pixels * c) { values[row + i] = S(clampingRounded: t.values[i]) }
                }
                s0 = s1
            }
        }
        return ReferenceRows(x0: x0, y0: y0, width: x1 - x0, height: y1 - y0, values: values)
    }

    /// Holds the erased value at (x, y) within the agreement tolerance of the reference frame's,
    /// channel by channel, where the reference shows what the erased picture shows around it: over
    /// the 5 x 5 pixels around (clipped to the picture), each channel's mean of the reference lies
    /// within the tolerance of the erased picture's (`tentative`, over R). The other frames were
    /// resampled on their way to the reference's grid, which softens fine texture but keeps such
    /// means; someone passing in front of the reference alone moves them. On motorcycle-3 of
    /// `Benchmarks/erase-family.sh`, 17 pixels of a fine pattern had come out 22-33 grey levels
    /// off the truth, the frames behind softened by 1-33 levels there (docs/benchmarks.md).
    func hold(x: Int, y: Int, tentative: Image<S>, reference r: ReferenceRows, into out: inout Image<S>) {
        let c = plain.channels, w = plain.width, h = plain.height, rw = region.rw, rx0 = region.rx0, ry0 = region.ry0
        let xs = max(0, x - 2)...min(w - 1, x + 2), ys = max(0, y - 2)...min(h - 1, y + 2)
        /// Channel `ch` of the erased picture at (x, y).
        func erased(_ x: Int, _ y: Int, _ ch: Int) -> Float {
            tentative.samples[((y - ry0) * rw + x - rx0) * c + ch].floatValue
        }
        for ch in 0..<c {
            var own: Float = 0, theirs: Float = 0
            for yy in ys {
                for xx in xs {
                    own += r.at(xx, yy, ch, channels: c)
                    theirs += erased(xx, yy, ch)
                }
            }
            guard abs(own - theirs) <= tolerance * Float(xs.count * ys.count) else { return }
        }
        let o = (y * w + x) * c
        for ch in 0..<c {
            let ref = r.at(x, y, ch, channels: c), view = erased(x, y, ch)
            out.samples[o + ch] = S(clampingRounded: ref + min(max(view - ref, -tolerance), tolerance))
        }
    }
}
