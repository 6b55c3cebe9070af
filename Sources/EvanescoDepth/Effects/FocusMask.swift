import EvanescoCore
import EvanescoIO

/// Why a focus could not be set.
public enum FocusError: Error, Equatable, CustomStringConvertible {
    case relativeAccuracy(path: String)
    case outOfRange(detail: String)
    case noValidDepth(detail: String)

    public var description: String {
        switch self {
        case .relativeAccuracy(let p):
            "\(p): the depth map has relative accuracy (its scale is not metric), so a distance in metres cannot be "
                + "placed on it; focus by a normalised value (0...1) or a point of the photo instead"
        case .outOfRange(let d): d
        case .noValidDepth(let d): d
        }
    }
}

/// Disparity normalised to 0...1 (1 = nearest), the tutorial's per-image normalisation.
public struct NormalizedDisparity: Sendable {
    /// 0...1, holes filled from their neighbours.
    public var map: Image<Float>
    /// The disparity values that map to 0 and 1.
    public var low: Float
    /// The disparity value that maps to 1 (see ``low``).
    public var high: Float
    /// Holes that were filled.
    public var filledHoles: Int

    /// Normalises `depth` (converted to disparity first). Holes (NaN) are kept out of the range and
    /// then filled with the mean of their valid neighbours, growing inwards (so a hole takes the
    /// values around it, not "far").
    public init(_ depth: DepthData) throws(FocusError) {
        let d = depth.kind == .disparity ? depth : depth.converted(to: .disparity)
        guard let r = d.finiteRange else {
            throw .noValidDepth(detail: "\(depth.source): every value of the map is a hole")
        }
        low = r.min
        high = r.max
        let span = max(r.max - r.min, .leastNormalMagnitude)
        var m = d.map
        var holes = 0
        m.samples.withUnsafeMutableBufferPointer { p in
            for i in 0..<p.count {
                if p[i].isFinite {
                    p[i] = (p[i] - r.min) / span
                } else {
                    p[i] = .nan
                    holes += 1
                }
            }
        }
        if holes > 0 { m = Self.fillHoles(m) }
        map = m
        filledHoles = holes
    }

    /// Fills NaN samples with the mean of their valid 8-neighbours, repeated until none is left.
    public static func fillHoles(_ image: Image<Float>) -> Image<Float> {
        var img = image
        let w = img.width, h = img.height
        var pending = (0..<(w * h)).filter { !img.samples[$0].isFinite }
        while !pending.isEmpty {
            var updates: [(Int, Float)] = []
            var still: [Int] = []
            for i in pending {
                let x = i % w, y = i / w
                var s: Float = 0, n: Float = 0
                for dy in -1...1 {
                    for dx in -1...1 where dx != 0 || dy != 0 {
                        let xx = x + dx, yy = y + dy
                        guard xx >= 0, yy >= 0, xx < w, yy < h else { continue }
                        let v = img.samples[yy * w + xx]
                        if v.isFinite {
                            s += v
                            n += 1
                        }
                    }
                }
                if n > 0 { updates.append((i, s / n)) } else { still.append(i) }
            }
            if updates.isEmpty { break }  // cannot happen unless every value is a hole
            for (i, v) in updates { img.samples[i] = v }
            pending = still
        }
        return img
    }

    /// Normalised value of a disparity.
    public func normalize(disparity: Float) -> Float { (disparity - low) / max(high - low, .leastNormalMagnitude) }

    /// The median normalised value in a window around a point given in photo pixel coordinates.
    public func value(atPhotoPoint x: Double, _ y: Double, photoWidth: Int, photoHeight: Int) -> Float {
        let dx = Int((x + 0.5) * Double(map.width) / Double(photoWidth))
        let dy = Int((y + 0.5) * Double(map.height) / Double(photoHeight))
        let r = max(1, min(map.width, map.height) / 100)
        var vals: [Float] = []
        for yy in max(0, dy - r)...min(map.height - 1, dy + r) {
            for xx in max(0, dx - r)...min(map.width - 1, dx + r) { vals.append(map.samples[yy * map.width + xx]) }
        }
        return Selection.median(&vals)
    }
}

/// The tutorial's focus mask (Image Depth Maps Tutorial for iOS, DepthImageFilters):
/// `filterWidth = 2/s + w`, `mask0 = clamp(s*d - s*(focus - filterWidth/2))`,
/// `mask1 = clamp(-s*d + s*(focus + filterWidth/2))`, `mask = min(mask0, mask1)`, over normalised
/// disparity `d`. The mask is 1 on a band of width `w` around `focus` and ramps to 0 over `1/s`.
public struct FocusMask: Sendable {
    /// Normalised disparity in focus, 0 (farthest) ... 1 (nearest).
    public var focus: Float
    /// Slope s: the mask ramps from 1 to 0 over 1/s.
    public var slope: Float = 4
    /// Width w of the band held at 1.
    public var width: Float = 0.1

    /// - Parameters:
    ///   - focus: Normalised disparity in focus.
    ///   - slope: Slope s.
    ///   - width: Width w.
    public init(focus: Float, slope: Float = 4, width: Float = 0.1) {
        self.focus = focus
        self.slope = slope
        self.width = width
    }

    /// The mask at one normalised disparity.
    ///
    /// - Parameter d: Normalised disparity.
    /// - Returns: 0...1.
    @inlinable
    public func value(_ d: Float) -> Float {
        let fw = 2 / slope + width
        let m0 = min(max(slope * d - slope * (focus - fw / 2), 0), 1)
        let m1 = min(max(-slope * d + slope * (focus + fw / 2), 0), 1)
        return min(m0, m1)
    }

    /// The mask at the depth map's resolution.
    public func mask(_ d: NormalizedDisparity) -> Image<Float> {
        let src = d.map
        return Image<Float>(uninitializedWidth: src.width, height: src.height, channels: 1) { out in
            src.samples.withUnsafeBufferPointer { s in for i in 0..<s.count { out[i] = value(s[i]) } }
        }
    }
}

extension Image where Sample == Float {
    /// Bicubic upscale (Keys a = -0.75, CIBicubicScaleTransform) clamped to 0...1: how the
    /// tutorial brings the mask to the photo's size.
    public func upscaledMask(width w: Int, height h: Int) -> Image<Float> {
        var up = resized(width: w, height: h, interpolation: .bicubic)
        up.samples.withUnsafeMutableBufferPointer { p in
            let n = p.count
            StripExecutor.forEachStrip(rows: h, minimumRows: 64) { rows in
                for i in (rows.lowerBound * w)..<min(n, rows.upperBound * w) { p[i] = min(max(p[i], 0), 1) }
            }
        }
        return up
    }
}
