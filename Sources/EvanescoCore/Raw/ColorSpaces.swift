import Foundation

/// A 3x3 matrix, row-major, in double precision (colour conversions are composed in doubles and
/// only the product is applied per pixel).
public struct Matrix3: Sendable, Equatable {
    public var m: [Double]

    public init(_ m: [Double]) {
        precondition(m.count == 9, "a 3x3 matrix has 9 entries")
        self.m = m
    }
    public init(_ m: [Float]) { self.init(m.map(Double.init)) }

    public static let identity = Matrix3([1, 0, 0, 0, 1, 0, 0, 0, 1] as [Double])

    public static func diagonal(_ d: [Double]) -> Matrix3 { Matrix3([d[0], 0, 0, 0, d[1], 0, 0, 0, d[2]] as [Double]) }

    public static func * (a: Matrix3, b: Matrix3) -> Matrix3 {
        var r = [Double](repeating: 0, count: 9)
        for i in 0..<3 {
            for j in 0..<3 { r[i * 3 + j] = (0..<3).reduce(0) { $0 + a.m[i * 3 + $1] * b.m[$1 * 3 + j] } }
        }
        return Matrix3(r)
    }

    public func apply(_ v: [Double]) -> [Double] {
        (0..<3).map { i in m[i * 3] * v[0] + m[i * 3 + 1] * v[1] + m[i * 3 + 2] * v[2] }
    }

    public var determinant: Double {
        m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) + m[2] * (m[3] * m[7] - m[4] * m[6])
    }

    /// The inverse, or nil when the matrix is singular (or not finite).
    public var inverse: Matrix3? {
        let d = determinant
        guard d.isFinite, abs(d) > 1e-12 else { return nil }
        let c = [
            m[4] * m[8] - m[5] * m[7], m[2] * m[7] - m[1] * m[8], m[1] * m[5] - m[2] * m[4],
            m[5] * m[6] - m[3] * m[8], m[0] * m[8] - m[2] * m[6], m[2] * m[3] - m[0] * m[5],
            m[3] * m[7] - m[4] * m[6], m[1] * m[6] - m[0] * m[7], m[0] * m[4] - m[1] * m[3]
        ]
        return Matrix3(c.map { $0 / d })
    }

    /// Each row scaled to sum to 1.
    public var rowNormalized: Matrix3 {
        var r = m
        for i in 0..<3 {
            let s = r[i * 3] + r[i * 3 + 1] + r[i * 3 + 2]
            for j in 0..<3 { r[i * 3 + j] /= s }
        }
        return Matrix3(r)
    }
}

/// RGB spaces defined by their primaries and white (CIE xy), as ICC and the DNG specification
/// use them.
public struct RGBPrimaries: Sendable, Equatable {
    public var red: (Double, Double), green: (Double, Double), blue: (Double, Double), white: (Double, Double)

    public static func == (a: RGBPrimaries, b: RGBPrimaries) -> Bool {
        [a.red, a.green, a.blue, a.white].elementsEqual([b.red, b.green, b.blue, b.white]) { $0 == $1 }
    }

    public static let d65 = (0.3127, 0.3290)
    public static let d50 = (0.3457, 0.3585)
    /// IEC 61966-2-1.
    public static let sRGB = RGBPrimaries(red: (0.64, 0.33), green: (0.30, 0.60), blue: (0.15, 0.06), white: d65)
    /// SMPTE EG 432-1 (DCI-P3 primaries, D65 white).
    public static let displayP3 = RGBPrimaries(
        red: (0.680, 0.320), green: (0.265, 0.690), blue: (0.150, 0.060), white: d65)
    /// ROMM RGB (ISO 22028-2), D50 white.
    public static let proPhoto = RGBPrimaries(
        red: (0.7347, 0.2653), green: (0.1596, 0.8404), blue: (0.0366, 0.0001), white: d50)

    /// XYZ (Y = 1) of an xy chromaticity.
    public static func xyz(_ c: (Double, Double)) -> [Double] { [c.0 / c.1, 1, (1 - c.0 - c.1) / c.1] }

    /// RGB to XYZ (relative to this space's own white, white Y = 1).
    public var toXYZ: Matrix3 {
        let p = [red, green, blue].map(RGBPrimaries.xyz)
        let cols = Matrix3([p[0][0], p[1][0], p[2][0], p[0][1], p[1][1], p[2][1], p[0][2], p[1][2], p[2][2]])
        let s = cols.inverse!.apply(RGBPrimaries.xyz(white))
        return cols * Matrix3.diagonal(s)
    }

    /// Bradford adaptation of XYZ from white `from` to white `to`.
    public static func bradford(from: (Double, Double), to: (Double, Double)) -> Matrix3 {
        let b = Matrix3([0.8951, 0.2664, -0.1614, -0.7502, 1.7135, 0.0367, 0.0389, -0.0685, 1.0296])
        let s = b.apply(xyz(from)), d = b.apply(xyz(to))
        return b.inverse! * Matrix3.diagonal([d[0] / s[0], d[1] / s[1], d[2] / s[2]]) * b
    }

    /// RGB of this space to XYZ adapted to D50 (the ICC profile connection space).
    public var toXYZD50: Matrix3 { RGBPrimaries.bradford(from: white, to: RGBPrimaries.d50) * toXYZ }
}
