import EvanescoCore
import Foundation

/// Per-pixel maps of a stack (``StackOptions/collectMaps``, `evanesco stack --save-maps`): how
/// many frames agreed with the result at each pixel, which frame it came from most, and how far
/// the local alignment moved things there.
public struct StackMaps: Sendable {
    /// Frames kept at each pixel: valid frames whose colour lies within ``tolerance`` of the
    /// merged colour on every channel.
    public var kept: Image<UInt16>
    /// The frame that dominated each pixel: the valid frame closest to the merged colour, as
    /// 1 + its index in ``StackResult/frames`` (0 where no frame covered the pixel).
    public var provenance: Image<UInt16>
    /// The median over the locally aligned frames of their displacement length at each pixel,
    /// in 1/100 px (0 where no local alignment was applied).
    public var localShift: Image<UInt16>
    /// The tolerance used for ``kept``, in sample units (3 x the burst noise, at least 2 % of
    /// full scale).
    public var tolerance: Float
    /// Frames merged (the largest possible ``kept`` value).
    public var mergedFrames: Int
    /// Frames in the report (the legend's length).
    public var frames: Int
}

extension StackMaps {
    /// Accumulates one tile's maps: the tile's frames are the merged frames in order
    /// (`frameIndex[k]` is frame k's index in the report), `merged` the tile's result.
    static func record(
        _ t: SampleTile, merged: UnsafePointer<Float>, tolerance: Float, frameIndex: [Int],
        kept: UnsafeMutablePointer<UInt16>, provenance: UnsafeMutablePointer<UInt16>
    ) {
        let c = t.channels
        for p in 0..<t.pixels {
            var n: UInt16 = 0, best = Float.infinity, bestFrame = -1
            for k in 0..<t.frames where t.valid[k * t.pixels + p] != 0 {
                let o = k * t.stride + p * c
                var worst: Float = 0, dist: Float = 0
                for ch in 0..<c {
                    let d = abs(t.values[o + ch] - merged[p * c + ch])
                    worst = max(worst, d)
                    dist += d * d
                }
                if worst <= tolerance { n += 1 }
                if dist < best {
                    best = dist
                    bestFrame = k
                }
            }
            kept[p] = n
            provenance[p] = bestFrame >= 0 ? UInt16(frameIndex[bestFrame] + 1) : 0
        }
    }

    /// The median displacement length of `fields` at each pixel of a `width` x `height` stack.
    static func localShift(_ fields: [DisplacementField?], width w: Int, height h: Int) -> Image<UInt16> {
        let present = fields.compactMap { $0 }
        return Image<UInt16>(uninitializedWidth: w, height: h, channels: 1) { out in
            guard !present.isEmpty else {
                for i in 0..<(w * h) { out[i] = 0 }
                return
            }
            let o = UncheckedSendable(out)
            StripExecutor.forEachStrip(rows: h, minimumRows: 16) { rows in
                var lengths = [Float](repeating: 0, count: present.count)
                for y in rows {
                    for x in 0..<w {
                        for (k, f) in present.enumerated() {
                            let d = f.value(atX: x, y: y)
                            lengths[k] = (d * d).sum().squareRoot()
                        }
                        o.value[y * w + x] = UInt16(clampingRounded: Selection.median(&lengths) * 100)
                    }
                }
            }
        }
    }

    /// A distinct colour per frame (golden-angle hues), for the provenance map and its legend.
    public static func colour(ofFrame k: Int) -> (UInt8, UInt8, UInt8) {
        let h = (Double(k) * 0.381966).truncatingRemainder(dividingBy: 1) * 6, s = 0.75, v = k % 2 == 0 ? 0.95 : 0.75
        let i = Int(h), f = h - Double(i)
        let p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f))
        let (r, g, b): (Double, Double, Double)
        switch i % 6 {
        case 0: (r, g, b) = (v, t, p)
        case 1: (r, g, b) = (q, v, p)
        case 2: (r, g, b) = (p, v, t)
        case 3: (r, g, b) = (p, q, v)
        case 4: (r, g, b) = (t, p, v)
        default: (r, g, b) = (v, p, q)
        }
        return (UInt8(r * 255), UInt8(g * 255), UInt8(b * 255))
    }

    /// The maps as pictures a person can look at, and their numeric 16-bit versions, by file name:
    /// `kept.png` (grey, white = every merged frame agreed), `provenance.png` (where the frames
    /// disagreed, the colour of the frame closest to the result, `provenance-legend.png` showing
    /// them in order; mid grey where every frame agreed, black where none covered), `local-shift.png`
    /// (black = not moved, white = ``localShiftScale`` px or more), and `*-16.png` with the raw values.
    public func pictures() -> [(name: String, image: AnyImage)] {
        let w = kept.width, h = kept.height, n = max(1, mergedFrames)
        let keptGrey = Image<UInt8>(uninitializedWidth: w, height: h, channels: 1) { d in
            for i in 0..<(w * h) { d[i] = UInt8(min(255, Int(kept.samples[i]) * 255 / n)) }
        }
        let prov = Image<UInt8>(uninitializedWidth: w, height: h, channels: 3) { d in
            for i in 0..<(w * h) {
                let k = Int(provenance.samples[i])
                let (r, g, b): (UInt8, UInt8, UInt8) =
                    k == 0
                    ? (0, 0, 0) : Int(kept.samples[i]) >= mergedFrames ? (128, 128, 128) : Self.colour(ofFrame: k - 1)
                d[3 * i] = r
                d[3 * i + 1] = g
                d[3 * i + 2] = b
            }
        }
        let scale = Float(localShiftScale * 100)
        let shift = Image<UInt8>(uninitializedWidth: w, height: h, channels: 1) { d in
            for i in 0..<(w * h) { d[i] = UInt8(min(255, Float(localShift.samples[i]) / scale * 255)) }
        }
        return [
            ("kept.png", .uint8(keptGrey)), ("kept-16.png", .uint16(kept)),
            ("provenance.png", .uint8(prov)), ("provenance-16.png", .uint16(provenance)),
            ("provenance-legend.png", .uint8(legend(frames: frames))),
            ("local-shift.png", .uint8(shift)), ("local-shift-16.png", .uint16(localShift))
        ]
    }

    /// The files ``pictures()`` names, and `maps.json` (the legend and the scales).
    public static let fileNames = [
        "kept.png", "kept-16.png", "provenance.png", "provenance-16.png", "provenance-legend.png",
        "local-shift.png", "local-shift-16.png", "maps.json"
    ]

    /// The paths of ``fileNames`` in `directory` when it is an existing folder (what saving the
    /// maps there would replace), else none.
    public static func existingPaths(in directory: String?) -> [String] {
        var isDirectory: ObjCBool = false
        guard let directory, FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory),
            isDirectory.boolValue
        else { return [] }
        return fileNames.map { (directory as NSString).appendingPathComponent($0) }
    }

    /// What the pictures mean, for `maps.json`.
    public struct Legend: Codable, Sendable {
        /// One entry per frame of the report, in order: its name and its colour in `provenance.png`.
        public var frames: [LegendFrame]
        /// Frames merged: white in `kept.png`.
        public var mergedFrames: Int
        /// A frame is kept at a pixel when every channel is within this many sample units of the result.
        public var keptTolerance: Float
        /// Pixels of displacement shown as white in `local-shift.png`; `local-shift-16.png` holds 1/100 px.
        public var localShiftScalePx: Double
    }

    /// A frame in the legend.
    public struct LegendFrame: Codable, Sendable {
        /// Its index in the report (`provenance-16.png` holds index + 1).
        public var index: Int
        /// Its name.
        public var source: String
        /// Its colour in `provenance.png`, as #rrggbb.
        public var colour: String
    }

    /// The legend for frames named `names` (the report's order).
    public func legend(names: [String]) -> Legend {
        Legend(
            frames: names.enumerated().map { k, n in
                let (r, g, b) = Self.colour(ofFrame: k)
                return LegendFrame(index: k, source: n, colour: String(format: "#%02x%02x%02x", r, g, b))
            }, mergedFrames: mergedFrames, keptTolerance: (tolerance * 100).rounded() / 100,
            localShiftScalePx: localShiftScale)
    }

    /// Pixels of displacement that `local-shift.png` shows as white.
    public var localShiftScale: Double { 4 }

    /// A legend strip: one swatch per frame, left to right in frame order, each with its index
    /// written in a 3x5 pixel font.
    func legend(frames: Int) -> Image<UInt8> {
        let sw = 24, sh = 24, n = max(1, frames)
        var img = Image<UInt8>(width: sw * n, height: sh, channels: 3)
        for k in 0..<n {
            let (r, g, b) = Self.colour(ofFrame: k)
            for y in 0..<sh {
                for x in (k * sw)..<((k + 1) * sw - 1) {
                    img[x, y, 0] = r
                    img[x, y, 1] = g
                    img[x, y, 2] = b
                }
            }
            // The index in black, 2x scale, at the swatch's top left.
            let text = String(k)
            for (ci, ch) in text.enumerated() {
                guard let glyph = Self.digits[ch] else { continue }
                for gy in 0..<5 {
                    for gx in 0..<3 where glyph[gy] & (4 >> gx) != 0 {
                        for dy in 0..<2 {
                            for dx in 0..<2 {
                                let x = k * sw + 2 + ci * 8 + gx * 2 + dx, y = 2 + gy * 2 + dy
                                if x < (k + 1) * sw - 1 { for c in 0..<3 { img[x, y, c] = 0 } }
                            }
                        }
                    }
                }
            }
        }
        return img
    }

    /// 3x5 digit glyphs, one row per entry, bits 4-2-1 from left to right.
    static let digits: [Character: [UInt8]] = [
        "0": [7, 5, 5, 5, 7], "1": [2, 6, 2, 2, 7], "2": [7, 1, 7, 4, 7], "3": [7, 1, 7, 1, 7], "4": [5, 5, 7, 1, 1],
        "5": [7, 4, 7, 1, 7], "6": [7, 4, 7, 5, 7], "7": [7, 1, 1, 1, 1], "8": [7, 5, 7, 5, 7], "9": [7, 5, 7, 1, 7]
    ]
}
