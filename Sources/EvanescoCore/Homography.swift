import Foundation

/// A 3x3 projective transform of pixel coordinates, row-major, normalised so `m[8] == 1` when
/// possible. Translation and affine transforms are the special cases with last row (0, 0, 1).
///
/// Convention (as OpenCV and ../bench): origin top-left, pixel centres at integer coordinates.
/// In registration results a homography maps a *frame's* pixel coordinates to the *reference*
/// frame's: `p_ref ~ H * (x, y, 1)`. `VNHomographicImageRegistrationRequest` reports a
/// `warpTransform` in Core Image's bottom-left, +0.5-centred space; convert with
/// ``convertedFromHalfPixelCentres()`` and a vertical flip of both sides.
public struct Homography: Sendable, Equatable, Hashable, CustomStringConvertible {
    /// Row-major elements.
    public var m: [Double]

    /// A homography from its nine entries, row-major.
    ///
    /// - Parameter m: h00 h01 h02 h10 h11 h12 h20 h21 h22.
    public init(_ m: [Double]) {
        precondition(m.count == 9, "a homography has 9 elements")
        self.m = m
    }
    /// A homography from its three rows (the JSON form reports use).
    ///
    /// - Parameter rows: Three rows of three entries.
    public init(rows: [[Double]]) { self.init(rows.flatMap { $0 }) }

    /// The transform that maps every point to itself.
    public static let identity = Homography([1, 0, 0, 0, 1, 0, 0, 0, 1])

    /// `x' = x + tx, y' = y + ty` (VNTranslationalImageRegistrationRequest's alignmentTransform,
    /// with the y sign flipped for the top-left origin).
    public static func translation(_ tx: Double, _ ty: Double) -> Homography {
        Homography([1, 0, tx, 0, 1, ty, 0, 0, 1])
    }
    /// `x' = a x + b y + c, y' = d x + e y + f`.
    public static func affine(_ a: Double, _ b: Double, _ c: Double, _ d: Double, _ e: Double, _ f: Double)
        -> Homography
    {
        Homography([a, b, c, d, e, f, 0, 0, 1])
    }
    /// Rotation by `degrees` (clockwise on screen, since y points down) and uniform `scale` about
    /// the point `(cx, cy)`.
    public static func rotation(degrees: Double, scale: Double = 1, about cx: Double, _ cy: Double) -> Homography {
        let t = degrees * .pi / 180, c = cos(t) * scale, s = sin(t) * scale
        return .affine(c, -s, cx - c * cx + s * cy, s, c, cy - s * cx - c * cy)
    }

    /// The three rows, as reports write them.
    public var rows: [[Double]] { [Array(m[0..<3]), Array(m[3..<6]), Array(m[6..<9])] }

    /// True when the last row is (0, 0, 1).
    public var isAffine: Bool { m[6] == 0 && m[7] == 0 && m[8] == 1 }
    /// True for a pure translation.
    public var isTranslation: Bool { isAffine && m[0] == 1 && m[1] == 0 && m[3] == 0 && m[4] == 1 }

    /// Maps a point. Returns nil where the point goes to infinity (w == 0) or behind the camera.
    public func apply(_ x: Double, _ y: Double) -> (x: Double, y: Double)? {
        let w = m[6] * x + m[7] * y + m[8]
        guard w > 1e-12 || w < -1e-12 else { return nil }
        return ((m[0] * x + m[1] * y + m[2]) / w, (m[3] * x + m[4] * y + m[5]) / w)
    }

    /// `self * other`: apply `other` first, then `self`.
    public static func * (a: Homography, b: Homography) -> Homography {
        var r = [Double](repeating: 0, count: 9)
        for i in 0..<3 { for j in 0..<3 { for k in 0..<3 { r[i * 3 + j] += a.m[i * 3 + k] * b.m[k * 3 + j] } } }
        return Homography(r).normalized()
    }

    /// The inverse, or nil when singular.
    public var inverse: Homography? {
        let a = m
        let c00 = a[4] * a[8] - a[5] * a[7], c01 = a[5] * a[6] - a[3] * a[8], c02 = a[3] * a[7] - a[4] * a[6]
        let det = a[0] * c00 + a[1] * c01 + a[2] * c02
        let scale = a.map(abs).max() ?? 1
        guard abs(det) > 1e-14 * scale * scale * scale else { return nil }
        let inv = [
            c00, a[2] * a[7] - a[1] * a[8], a[1] * a[5] - a[2] * a[4],
            c01, a[0] * a[8] - a[2] * a[6], a[2] * a[3] - a[0] * a[5],
            c02, a[1] * a[6] - a[0] * a[7], a[0] * a[4] - a[1] * a[3]
        ].map { $0 / det }
        return Homography(inv).normalized()
    }

    /// Scaled so that `m[8] == 1` (unchanged when `m[8]` is ~0).
    public func normalized() -> Homography {
        guard abs(m[8]) > 1e-15 else { return self }
        return Homography(m.map { $0 / m[8] })
    }

    /// The same transform for coordinates whose pixel centres sit at +0.5 (Core Image, Vision):
    /// `T(+0.5) * H * T(-0.5)`. ``convertedFromHalfPixelCentres()`` is its inverse.
    public func convertedToHalfPixelCentres() -> Homography {
        .translation(0.5, 0.5) * self * .translation(-0.5, -0.5)
    }
    /// The inverse of ``convertedToHalfPixelCentres()``: `T(-0.5) * H * T(+0.5)`.
    public func convertedFromHalfPixelCentres() -> Homography {
        .translation(-0.5, -0.5) * self * .translation(0.5, 0.5)
    }

    /// The same transform for images scaled by `s` (pixel-centre correct):
    /// coordinates at the new scale are `s * (p + 0.5) - 0.5`.
    public func rescaled(by s: Double) -> Homography {
        let toScaled = Homography.translation(-0.5, -0.5) * Homography.affine(s, 0, 0, 0, s, 0) * .translation(0.5, 0.5)
        return toScaled * self * toScaled.inverse!
    }

    public var description: String {
        rows.map { "[" + $0.map { String(format: "%.6g", $0) }.joined(separator: ", ") + "]" }.joined(separator: " ")
    }
}

/// Encoded as its three rows, `[[m0, m1, m2], [m3, m4, m5], [m6, m7, m8]]`, the form of the
/// bench tools' reports and `truth.json`. Decoding refuses anything but 3 rows of 3 finite numbers.
extension Homography: Codable {
    public init(from decoder: Decoder) throws {
        let rows = try decoder.singleValueContainer().decode([[Double]].self)
        guard rows.count == 3, rows.allSatisfy({ $0.count == 3 }) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "a homography is 3 rows of 3 numbers"))
        }
        guard rows.joined().allSatisfy(\.isFinite) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "a homography's elements must be finite"))
        }
        self.init(rows: rows)
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(rows)
    }
}
