/// The colour filter over each photosite of a Bayer sensor: the 2x2 cell at the top-left of the
/// visible area, read row by row (`RGGB` is red at (0, 0), green at (1, 0) and (0, 1), blue at
/// (1, 1)).
public struct CFAPattern: Sendable, Equatable, Hashable, Codable, CustomStringConvertible {
    /// The colour of each position of the cell: 0 red, 1 green, 2 blue; row-major.
    public let colors: [UInt8]

    /// A pattern from its four colours (0 red, 1 green, 2 blue), row-major; nil unless it is a
    /// Bayer pattern (one red, two greens on a diagonal, one blue).
    public init?(colors: [UInt8]) {
        guard colors.count == 4, colors.filter({ $0 == 0 }).count == 1, colors.filter({ $0 == 2 }).count == 1,
            colors[0] == colors[3] || colors[1] == colors[2], (colors[0] == 1) == (colors[3] == 1)
        else { return nil }
        self.colors = colors
    }

    /// A pattern from its name (`RGGB`, `BGGR`, `GRBG`, `GBRG`).
    public init?(name: String) {
        let map: [Character: UInt8] = ["R": 0, "G": 1, "B": 2]
        let c = name.uppercased().compactMap { map[$0] }
        guard c.count == 4, name.count == 4 else { return nil }
        self.init(colors: c)
    }

    public static let rggb = CFAPattern(name: "RGGB")!
    public static let bggr = CFAPattern(name: "BGGR")!
    public static let grbg = CFAPattern(name: "GRBG")!
    public static let gbrg = CFAPattern(name: "GBRG")!

    /// The colour at a position of the visible area.
    @inlinable
    public func color(x: Int, y: Int) -> Int { Int(colors[(y & 1) * 2 + (x & 1)]) }

    /// `RGGB`, ...
    public var description: String { String(colors.map { ["R", "G", "B"][Int($0)] }.joined()) }

    /// The pattern seen from `(dx, dy)` on (a crop that starts there).
    public func shifted(dx: Int, dy: Int) -> CFAPattern {
        CFAPattern(colors: (0..<4).map { p in colors[((p >> 1 + dy) & 1) * 2 + ((p & 1 + dx) & 1)] })!
    }
}

/// What a raw file says about its camera's colour: enough to turn the sensor's numbers into
/// colours (the DNG specification's model: a matrix from XYZ to the camera's space under each
/// calibration illuminant, and the camera's response to the scene's white).
public struct RawColor: Sendable, Equatable, Codable {
    /// XYZ (D65 for illuminant 21) to camera, 3x3 row-major: DNG ColorMatrix1, or LibRaw's
    /// `cam_xyz` for other formats. The one a finish uses.
    public var colorMatrix: [Float]
    /// The calibration illuminant of ``colorMatrix`` (EXIF light source code: 21 is D65, 17 A).
    public var illuminant: Int
    /// DNG ColorMatrix2 and CalibrationIlluminant2 when the file has a second calibration.
    public var colorMatrix2: [Float]?
    public var illuminant2: Int?
    /// DNG ForwardMatrix1/2 (white-balanced camera to XYZ D50), when present.
    public var forwardMatrix: [Float]?
    public var forwardMatrix2: [Float]?
    /// The camera's values for the scene's white as shot (DNG AsShotNeutral; 1 / LibRaw's
    /// `cam_mul` for other formats), green = 1.
    public var asShotNeutral: [Float]
    /// Stops the picture should be brightened by when finished (DNG BaselineExposure).
    public var baselineExposure: Float

    /// - Parameters:
    ///   - colorMatrix: XYZ to camera (3x3 row-major) under `illuminant`.
    ///   - illuminant: Its EXIF light-source code.
    ///   - asShotNeutral: The camera's values for white as shot.
    ///   - baselineExposure: Stops to brighten by when finishing.
    public init(colorMatrix: [Float], illuminant: Int = 21, asShotNeutral: [Float], baselineExposure: Float = 0) {
        self.colorMatrix = colorMatrix
        self.illuminant = illuminant
        self.asShotNeutral = asShotNeutral
        self.baselineExposure = baselineExposure
    }

    /// sRGB (linear, D65) to the camera's space: ``colorMatrix`` times sRGB's RGB-to-XYZ.
    public var cameraFromSRGB: Matrix3 { Matrix3(colorMatrix) * RGBPrimaries.sRGB.toXYZ }

    /// The camera's values for D65 white (sRGB's white through ``cameraFromSRGB``): the neutral
    /// of a daylight white balance.
    public var daylightNeutral: [Double] { cameraFromSRGB.apply([1, 1, 1]) }

    /// The white-balance gains of red, green and blue (1 / neutral, green 1).
    public var whiteBalanceGains: [Float] {
        let g = asShotNeutral[1]
        return asShotNeutral.map { g / $0 }
    }
}

/// The sensor noise model of the DNG specification's NoiseProfile: for each colour plane, the
/// variance of a signal `x` (0 black ... 1 white) is `scale * x + offset`.
public struct NoiseModel: Sendable, Equatable, Codable {
    /// (scale, offset) of each plane, or one pair for all planes.
    public var planes: [NoiseModelPlane]

    public init(planes: [NoiseModelPlane]) { self.planes = planes }

    /// The pair of a colour plane (the one pair when there is one for all).
    public func plane(_ color: Int) -> NoiseModelPlane { planes[min(color, planes.count - 1)] }
}

/// One plane's noise: variance = `scale` * signal + `offset` (signal 0...1).
public struct NoiseModelPlane: Sendable, Equatable, Codable {
    public var scale: Double
    public var offset: Double
    public init(scale: Double, offset: Double) {
        self.scale = scale
        self.offset = offset
    }
}

/// The camera and exposure a raw frame was taken with.
public struct RawCapture: Sendable, Equatable, Codable {
    public var make = ""
    public var model = ""
    /// DNG UniqueCameraModel, else make and model.
    public var uniqueCameraModel = ""
    public var software = ""
    /// ISO speed, 0 when unknown.
    public var iso: Float = 0
    /// Exposure time in seconds, 0 when unknown.
    public var exposureTime: Float = 0
    /// f-number, 0 when unknown.
    public var aperture: Float = 0
    /// Focal length in mm, 0 when unknown.
    public var focalLength: Float = 0
    /// Capture time in seconds since 1970 (0 when unknown).
    public var timestamp: Int = 0

    public init() {}
}

/// A raw frame as the sensor recorded it: one 16-bit sample per photosite under a Bayer colour
/// filter (``CFAPattern``), or three linear colours per pixel (a LinearRaw DNG, such as Apple
/// ProRAW), with the levels, colour calibration and noise needed to turn it into a photo.
///
/// Coordinates are those of the visible area (LibRaw's `width x height` after its margins), as
/// stored: ``orientation`` says how to show it upright.
public struct RawMosaic: Sendable, Equatable {
    /// How the samples are laid out.
    public enum Layout: Sendable, Equatable {
        /// One sample per photosite, under this colour filter.
        case bayer(CFAPattern)
        /// Three linear colours per pixel (already demosaiced), in the camera's space.
        case linearRGB
    }

    /// The samples: `width * height` for a Bayer mosaic, `width * height * 3` for linear RGB.
    public var samples: Image<UInt16>
    public var layout: Layout
    /// The black level at each position of the 2x2 cell (row-major), in raw units.
    public var blackLevels: [Float]
    /// The level at which the sensor saturates, in raw units.
    public var whiteLevel: Float
    public var color: RawColor
    /// The file's noise model, when it has one (DNG NoiseProfile).
    public var noise: NoiseModel?
    public var capture: RawCapture
    /// How the stored samples are shown upright.
    public var orientation: Orientation

    /// - Parameters:
    ///   - samples: One channel for a Bayer mosaic, three for linear RGB.
    ///   - layout: The CFA, or linear RGB.
    ///   - blackLevels: Black at each 2x2 position (one value is repeated).
    ///   - whiteLevel: Saturation level.
    ///   - color: The colour calibration.
    ///   - noise: The noise model, if known.
    ///   - capture: Camera and exposure.
    ///   - orientation: How to show the samples upright.
    public init(
        samples: Image<UInt16>, layout: Layout, blackLevels: [Float], whiteLevel: Float, color: RawColor,
        noise: NoiseModel? = nil, capture: RawCapture = RawCapture(), orientation: Orientation = .up
    ) {
        precondition(samples.channels == (layout == .linearRGB ? 3 : 1), "raw samples do not match their layout")
        self.samples = samples
        self.layout = layout
        self.blackLevels = blackLevels.count == 1 ? Array(repeating: blackLevels[0], count: 4) : blackLevels
        self.whiteLevel = whiteLevel
        self.color = color
        self.noise = noise
        self.capture = capture
        self.orientation = orientation
    }

    public var width: Int { samples.width }
    public var height: Int { samples.height }

    /// The CFA, or nil for linear RGB.
    public var cfa: CFAPattern? {
        if case .bayer(let p) = layout { p } else { nil }
    }
}

/// A raw frame's visible samples, row by row, wherever they lie: in a ``RawMosaic``'s image, or
/// in the bytes of the file they were read from (no copy). Row `y` holds `width x channels`
/// samples; the pointers it gives are valid only while whoever handed the rows on says so.
public struct RawSampleRows {
    public let width: Int
    public let height: Int
    public let channels: Int
    /// Row y's first sample, 0 <= y < height.
    public let row: (Int) -> UnsafePointer<UInt16>

    public init(width: Int, height: Int, channels: Int, row: @escaping (Int) -> UnsafePointer<UInt16>) {
        (self.width, self.height, self.channels, self.row) = (width, height, channels, row)
    }

    /// The rows of `samples`, for as long as `body` runs.
    public static func of<R>(_ samples: Image<UInt16>, _ body: (RawSampleRows) throws -> R) rethrows -> R {
        try samples.samples.withUnsafeBufferPointer { s in
            let base = s.baseAddress, n = samples.width * samples.channels
            return try body(
                RawSampleRows(width: samples.width, height: samples.height, channels: samples.channels) { y in
                    guard let base else { preconditionFailure("row \(y) of an empty image") }
                    return base + y * n
                })
        }
    }
}
