import Foundation

/// The shape of a lens aperture, as a defocused point of light draws it: a circle, or a regular
/// polygon with one side per diaphragm blade (a hexagon for six blades).
///
/// A shape of diameter `d` is the circle of diameter `d` or the polygon inscribed in it (its
/// corners on the circle). With cat-eye vignetting the shape is cut by a second circle of the same
/// size, shifted away from the photo's centre, as the lens barrel cuts the light cone toward the
/// corners of a real photo.
public struct ApertureShape: Sendable, Equatable, Codable {
    /// Diaphragm blades: 0 for a circle, else 3...16 sides.
    public let blades: Int
    /// Rotation of the polygon in degrees (counter-clockwise as seen on the photo, y down).
    public let rotation: Float
    /// Outward edge normals (x, y) of the polygon; empty for a circle.
    let normals: [SIMD2<Float>]

    /// - Parameters:
    ///   - blades: 0 for a circle, else 3...16.
    ///   - rotation: Degrees.
    public init(blades: Int = 0, rotation: Float = 0) {
        self.blades = blades
        self.rotation = rotation
        // Only a shape `validate()` can accept gets its edges: a hostile count (a manifest's
        // 8.9e15, a flag's Int.max) must be refused by the check, not allocated first.
        guard (3...16).contains(blades) else {
            normals = []
            return
        }
        let r = Double(rotation) * .pi / 180
        // Corners at angles r + 2 pi k / n; the edge between corners k and k+1 faces their mid-angle.
        normals = (0..<blades).map { k in
            let a = r + .pi * Double(2 * k + 1) / Double(blades)
            return SIMD2(Float(cos(a)), Float(-sin(a)))
        }
    }

    enum CodingKeys: String, CodingKey { case blades, rotation }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            blades: try c.decode(Int.self, forKey: .blades), rotation: try c.decode(Float.self, forKey: .rotation))
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(blades, forKey: .blades)
        try c.encode(rotation, forKey: .rotation)
    }

    public static func == (a: Self, b: Self) -> Bool { a.blades == b.blades && a.rotation == b.rotation }

    /// The x interval the shape covers on the horizontal line at `y` (relative to its centre),
    /// for a shape of radius `radius`, cut by the cat-eye circle of the same radius centred at
    /// `eye` (pass zero for none).
    ///
    /// - Returns: `(lo, hi)`, empty when `lo >= hi`.
    package func span(y: Float, radius r: Float, eye: SIMD2<Float>) -> (lo: Float, hi: Float) {
        var lo: Float, hi: Float
        if normals.isEmpty {
            let q = r * r - y * y
            guard q > 0 else { return (0, 0) }
            let h = q.squareRoot()
            lo = -h
            hi = h
        } else {
            // Inside every edge's half-plane n . p <= r cos(pi/n).
            let apothem = r * Float(cos(Double.pi / Double(blades)))
            lo = -r
            hi = r
            for n in normals {
                let rhs = apothem - n.y * y
                if abs(n.x) < 1e-6 {
                    if rhs < 0 { return (0, 0) }
                } else if n.x > 0 {
                    hi = min(hi, rhs / n.x)
                } else {
                    lo = max(lo, rhs / n.x)
                }
            }
        }
        if eye != .zero {
            let dy = y - eye.y, q = r * r - dy * dy
            guard q > 0 else { return (0, 0) }
            let h = q.squareRoot()
            lo = max(lo, eye.x - h)
            hi = min(hi, eye.x + h)
        }
        return (lo, hi)
    }
}

/// One aperture shape at one diameter, as weights on the pixel grid (their sum is 1), kept per
/// row as a run of equal full-coverage weights plus the partly covered pixels at its ends. A
/// gather with it costs one prefix-sum difference per row plus the edge pixels: O(diameter), not
/// O(diameter^2), per output pixel.
struct LensKernel: Sendable {
    struct Row: Sendable {
        /// Row offset.
        var dy: Int
        /// Columns dx in runLo...runHi all carry `runWeight` (empty when runLo > runHi).
        var runLo: Int, runHi: Int
        var runWeight: Float
        /// Partly covered pixels (dx, weight).
        var taps: [(dx: Int, w: Float)]
    }
    var rows: [Row]
    /// Largest |dx| or |dy| with a weight.
    var reach: Int

    /// Pixel weights of `shape` at `diameter` pixels, from the exact covered length of 8
    /// horizontal lines per pixel row (anti-aliased edges). Diameters under 1 are a single pixel.
    ///
    /// - Parameters:
    ///   - eye: The cat-eye circle's centre in units of the radius (zero for none).
    init(diameter: Float, shape: ApertureShape, eye: SIMD2<Float> = .zero) {
        guard diameter >= 1 else {
            rows = [Row(dy: 0, runLo: 0, runHi: 0, runWeight: 1, taps: [])]
            reach = 0
            return
        }
        let r = diameter / 2, e = eye * r
        let w = LensKernel.coverage(radius: r, shape: shape, eye: e)
        var total: Double = 0
        for row in w.rows { for v in row { total += Double(v) } }
        let scale = Float(1 / max(total, 1e-12))
        var out: [Row] = []
        var reach = 0
        for (j, row) in w.rows.enumerated() {
            let dy = j - w.half
            var lo = Int.max, hi = Int.min
            for (i, v) in row.enumerated() where v >= 1 {
                lo = min(lo, i)
                hi = max(hi, i)
            }
            var taps: [(Int, Float)] = []
            for (i, v) in row.enumerated() where v > 0 && !(lo <= i && i <= hi) { taps.append((i - w.half, v * scale)) }
            if lo > hi && taps.isEmpty { continue }
            reach = max(reach, abs(dy))
            for (i, v) in row.enumerated() where v > 0 { reach = max(reach, abs(i - w.half)) }
            out.append(
                lo <= hi
                    ? Row(dy: dy, runLo: lo - w.half, runHi: hi - w.half, runWeight: scale, taps: taps)
                    : Row(dy: dy, runLo: 1, runHi: 0, runWeight: 0, taps: taps))
        }
        rows = out
        self.reach = reach
    }

    /// Covered area of each pixel (1 = fully inside) of a shape centred on pixel (half, half).
    static func coverage(radius r: Float, shape: ApertureShape, eye: SIMD2<Float>) -> (rows: [[Float]], half: Int) {
        let half = Int((r + 0.5).rounded(.up)) + 1
        let n = 2 * half + 1
        var rows = [[Float]](repeating: [Float](repeating: 0, count: n), count: n)
        let sub = 8
        for j in 0..<n {
            for s in 0..<sub {
                let y = Float(j - half) - 0.5 + (Float(s) + 0.5) / Float(sub)
                let (lo, hi) = shape.span(y: y, radius: r, eye: eye)
                guard lo < hi else { continue }
                let i0 = max(0, Int((lo + 0.5).rounded(.down)) + half),
                    i1 = min(n - 1, Int((hi + 0.5).rounded(.up)) + half)
                guard i0 <= i1 else { continue }
                for i in i0...i1 {
                    let x = Float(i - half)
                    let o = min(hi, x + 0.5) - max(lo, x - 0.5)
                    if o > 0 { rows[j][i] += o / Float(sub) }
                }
            }
        }
        return (rows, half)
    }
}
