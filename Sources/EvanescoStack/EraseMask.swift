import EvanescoCore
import EvanescoIO
import Foundation

/// Where the result must not keep what the plain merge shows (``StackOptions/erase``): a
/// person who stood in one place for most of the burst, a cup that was moved halfway through.
/// No per-pixel vote removes those, since at their place they are the majority.
///
/// The mask is in the reference frame's pixels, the size of the result.
public struct EraseMask: Sendable, Equatable {
    /// Width in pixels (the reference frame's).
    public let width: Int
    /// Height in pixels.
    public let height: Int
    /// 1 where the result must not keep what the merge shows, 0 elsewhere, row by row.
    public let masked: [UInt8]

    /// - Parameters:
    ///   - width: The reference frame's width.
    ///   - height: Its height.
    ///   - masked: `width * height` flags, row by row.
    public init(width: Int, height: Int, masked: [Bool]) {
        precondition(width >= 0 && height >= 0 && masked.count == width * height, "mask size")
        self.width = width
        self.height = height
        self.masked = masked.map { $0 ? 1 : 0 }
    }

    /// A mask from a picture: masked where it is white, at least half of full scale in its
    /// brightest colour channel and, with an alpha channel, at least half opaque (a brush stroke
    /// painted on a transparent layer works as it is).
    ///
    /// - Parameter image: A grey, grey + alpha, RGB or RGBA picture.
    public init(_ image: AnyImage) {
        let f = image.float32, c = f.channels, colours = c == 2 || c == 4 ? c - 1 : c, half: Float = 0.5
        var flags = [Bool](repeating: false, count: f.width * f.height)
        for i in flags.indices {
            var bright: Float = 0
            for ch in 0..<colours { bright = max(bright, f.samples[i * c + ch]) }
            flags[i] = bright >= half && (colours == c || f.samples[i * c + c - 1] >= half)
        }
        self.init(width: f.width, height: f.height, masked: flags)
    }

    /// Reads a mask picture (PNG, TIFF, JPEG...).
    ///
    /// - Parameter path: The picture's path.
    /// - Throws: `ImageIOError` when it cannot be read.
    public static func read(_ path: String) throws -> EraseMask { EraseMask(try ImageCodecs.read(path).image) }

    /// Reads a mask picture for the burst `inputs`, checking its header against the frames' size
    /// before a pixel of it is decoded: a small file that declares 20000x20000 is refused in
    /// milliseconds, not after gigabytes are decoded.
    ///
    /// - Parameters:
    ///   - path: The picture's path.
    ///   - inputs: The burst (image files, folders of them, or one video), as the stack takes it.
    /// - Throws: ``StackError/eraseMaskSize(mask:reference:)`` when the sizes differ;
    ///   `ImageIOError` when the mask cannot be read.
    public static func read(_ path: String, forBurst inputs: [String]) throws -> EraseMask {
        let header = try ImageCodecs.probe(path)
        let swap = header.metadata.orientation.swapsAxes
        let w = swap ? header.storedHeight : header.storedWidth, h = swap ? header.storedWidth : header.storedHeight
        if let frame = BurstInput.frameSize(inputs), frame.width != w || frame.height != h {
            throw StackError.eraseMaskSize(mask: "\(w)x\(h)", reference: "\(frame.width)x\(frame.height)")
        }
        return try read(path)
    }

    /// Masked pixels.
    public var count: Int { masked.reduce(0) { $0 + Int($1) } }

    /// The smallest rectangle holding every masked pixel, nil when none is.
    var bounds: (x0: Int, y0: Int, x1: Int, y1: Int)? {
        var x0 = width, y0 = height, x1 = -1, y1 = -1
        for y in 0..<height {
            let row = y * width
            for x in 0..<width where masked[row + x] != 0 {
                x0 = min(x0, x)
                x1 = max(x1, x)
                y0 = min(y0, y)
                y1 = max(y1, y)
            }
        }
        return x1 < 0 ? nil : (x0, y0, x1 + 1, y1 + 1)
    }
}

/// A stroke of a round brush over the result (the studio's erase brush): a path of points in
/// the reference frame's pixels, painted with a disc of ``radius`` pixels.
public struct EraseStroke: Sendable, Codable, Equatable {
    /// The path, `[x, y]` each (pixel centres at whole numbers); one point paints a disc.
    public var points: [[Double]]
    /// The brush's radius in pixels.
    public var radius: Double

    /// - Parameters:
    ///   - points: The path, `[x, y]` each.
    ///   - radius: The brush's radius in pixels.
    public init(points: [[Double]], radius: Double) {
        self.points = points
        self.radius = radius
    }

    /// The brush's radius, in the result's pixels. No default: a brush is sized where it is
    /// painted (the studio's is a size on screen, turned into the result's pixels at its zoom).
    public static let radiusLimits = NumericSetting("brush radius", 0.5...2_000, default: nil, unit: "pixels")
    /// Points in one stroke, at most.
    public static let maximumPoints = 2_000
    /// Strokes one result keeps, at most: each stroke erases the union of the strokes again, so
    /// without a bound a long session slowed down stroke by stroke (0.13 s to 0.8 s after 77).
    public static let maximumStrokes = 100

    enum CodingKeys: String, CodingKey, CaseIterable { case points, radius }

    /// Reads a stroke, refusing unknown keys by name (a typo such as `radious` must not be
    /// dropped silently).
    public init(from decoder: any Decoder) throws {
        try SettingsCoding.rejectUnknownKeys(decoder, known: CodingKeys.allCases.map(\.rawValue))
        let c = try decoder.container(keyedBy: CodingKeys.self)
        points = try c.decode([[Double]].self, forKey: .points)
        radius = try c.decode(Double.self, forKey: .radius)
    }

    /// Checks the radius, that there are 1 to ``maximumPoints`` points of two finite numbers each.
    ///
    /// - Throws: `SettingError` naming the brush radius or the stroke.
    public func validate() throws(SettingError) {
        try Self.radiusLimits.check(radius)
        guard (1...Self.maximumPoints).contains(points.count) else {
            throw SettingError(
                setting: "stroke", detail: "has \(points.count) points; it must have 1 to \(Self.maximumPoints)")
        }
        for p in points where p.count != 2 || !p.allSatisfy({ $0.isFinite && abs($0) <= 1e6 }) {
            throw SettingError(setting: "stroke", detail: "has a point \(p) that is not [x, y] in pixels")
        }
    }
}

extension EraseMask {
    /// The mask the strokes paint, each a round brush dragged along its path: every pixel whose
    /// centre is within the radius of the path.
    ///
    /// - Parameters:
    ///   - width: The result's width.
    ///   - height: Its height.
    ///   - strokes: The strokes; one that fails ``EraseStroke/validate()`` paints nothing.
    /// - Complexity: O(s x r + w x h) for s segments of radius r: each segment marks where it
    ///   starts and ends on each row it crosses, and one pass over the picture fills between, so
    ///   2,000 points of a 2,000-pixel brush cost what the picture does, not 2,000 pictures.
    public init(width: Int, height: Int, strokes: [EraseStroke]) {
        // Per row, +1 where a painted run starts and -1 after it ends.
        var edges = [Int32](repeating: 0, count: (width + 1) * height)
        // (A stroke that does not validate paints nothing, rather than trap on a NaN.)
        for stroke in strokes where (try? stroke.validate()) != nil {
            let pts = stroke.points
            for i in 0..<pts.count {
                let a = (pts[i][0], pts[i][1]), j = min(i + 1, pts.count - 1), b = (pts[j][0], pts[j][1])
                let y0 = max(0, Int((min(a.1, b.1) - stroke.radius).rounded(.up)))
                let y1 = min(height - 1, Int((max(a.1, b.1) + stroke.radius).rounded(.down)))
                guard y0 <= y1 else { continue }
                for y in y0...y1 {
                    guard let run = Self.capsuleRun(a, b, radius: stroke.radius, row: Double(y)) else { continue }
                    let x0 = max(0, Int(run.lowerBound.rounded(.up))),
                        x1 = min(width - 1, Int(run.upperBound.rounded(.down)))
                    guard x0 <= x1 else { continue }
                    edges[y * (width + 1) + x0] += 1
                    edges[y * (width + 1) + x1 + 1] -= 1
                }
            }
        }
        var flags = [Bool](repeating: false, count: width * height)
        for y in 0..<height {
            var depth: Int32 = 0
            for x in 0..<width {
                depth += edges[y * (width + 1) + x]
                flags[y * width + x] = depth > 0
            }
        }
        self.init(width: width, height: height, masked: flags)
    }

    /// Where the row `y` crosses the capsule of `radius` around the segment a-b (the points
    /// within `radius` of it): one run, since a capsule is convex, so the union of where the row
    /// crosses its two end discs and its straight band.
    static func capsuleRun(_ a: (Double, Double), _ b: (Double, Double), radius r: Double, row y: Double)
        -> ClosedRange<Double>?
    {
        var lo = Double.infinity, hi = -Double.infinity
        for c in [a, b] where abs(y - c.1) <= r {
            let half = (r * r - (y - c.1) * (y - c.1)).squareRoot()
            lo = min(lo, c.0 - half)
            hi = max(hi, c.0 + half)
        }
        let dx = b.0 - a.0, dy = b.1 - a.1, length = (dx * dx + dy * dy).squareRoot()
        if length > 0 {
            // The band: 0 <= (p - a) . u <= length and |(p - a) . n| <= r, for u along the
            // segment and n across it; each is a condition on x alone along the row.
            let ux = dx / length, uy = dy / length
            var bandLo = -Double.infinity, bandHi = Double.infinity
            func within(_ k: Double, _ c: Double, _ from: Double, _ to: Double) {
                // from <= k x + c <= to
                if abs(k) < 1e-12 {
                    if c < from || c > to {
                        bandLo = .infinity
                        bandHi = -.infinity
                    }
                } else {
                    let p = (from - c) / k, q = (to - c) / k
                    bandLo = max(bandLo, min(p, q))
                    bandHi = min(bandHi, max(p, q))
                }
            }
            within(ux, -a.0 * ux + (y - a.1) * uy, 0, length)
            within(-uy, a.0 * uy + (y - a.1) * ux, -r, r)
            if bandLo <= bandHi {
                lo = min(lo, bandLo)
                hi = max(hi, bandHi)
            }
        }
        return lo <= hi ? lo...hi : nil
    }
}
