import EvanescoCore

/// Whether a map holds disparity (1/distance, larger = nearer) or depth (distance, larger = farther).
public enum DepthKind: String, Sendable, Codable, CaseIterable {
    case disparity, depth
}

/// AVDepthData's accuracy: relative maps order points correctly but their scale is not metric.
public enum DepthAccuracy: String, Sendable, Codable {
    case relative, absolute
}

/// Camera calibration as Apple's depthData XMP gives it (AVCameraCalibrationData).
public struct CameraCalibration: Sendable, Codable, Equatable {
    /// 3x3 intrinsic matrix, row-major: fx 0 cx / 0 fy cy / 0 0 1 (Apple stores it column-major).
    public var intrinsics: [Double]?
    /// The image size the intrinsics refer to.
    public var referenceWidth: Int?
    /// Height of the image the intrinsics refer to.
    public var referenceHeight: Int?
    /// Pixel size in millimetres.
    public var pixelSize: Double?
    /// Radial lens distortion lookup table, as stored.
    public var lensDistortion: [Double]?
    /// Its inverse, as stored.
    public var inverseLensDistortion: [Double]?
    /// Lens distortion centre (x, y) at the reference size.
    public var lensDistortionCenter: [Double]?
    /// 4x3 extrinsic matrix as stored (rotation then translation), row-major.
    public var extrinsics: [Double]?

    /// Focal length in pixels of an image of `width` (the intrinsics rescaled from the reference size).
    public func focalLengthPixels(forWidth width: Int) -> Double? {
        guard let k = intrinsics, k.count == 9, let rw = referenceWidth, rw > 0 else { return nil }
        return k[0] * Double(width) / Double(rw)
    }
}

/// A depth or disparity map with what the file says about it (AVDepthData's counterpart).
public struct DepthData: Sendable {
    /// Disparity or depth.
    public var kind: DepthKind
    /// Float values, one channel. Holes (unknown values) are NaN.
    public var map: Image<Float>
    /// The samples as stored (one channel, 8/16-bit or float), in the same orientation as `map`.
    public var stored: AnyImage
    /// "8-bit", "16-bit", "float16" or "float32".
    public var storedFormat: String
    /// How the stored samples became ``map``'s values.
    public var encoding: DepthEncoding
    /// "1/m" for Apple disparity, "m" for depth, or what the file declares.
    public var units: String
    /// Relative or absolute, when the file says.
    public var accuracy: DepthAccuracy?
    /// Whether the map was filtered (holes filled, edges smoothed), when the file says.
    public var filtered: Bool?
    /// The quality the file declares ("high", "low").
    public var quality: String?
    /// Camera calibration, when the file has one.
    public var calibration: CameraCalibration?
    /// Where it came from: "HEIF depth item", "JPEG MPF image 2", "GDepth (extended XMP)", ...
    public var source: String
    /// The value range the metadata declares (FloatMin/FloatMax, d_min/d_max, Near/Far).
    public var declaredRange: ClosedRange<Double>?
    /// Notes on how the range was cross-checked between two sources in the file.
    public var rangeNotes: [String] = []
    /// The orientation applied to the stored map (`.up` when kept in sensor orientation).
    public var orientationApplied: Orientation = .up
    /// The embedded file the map was decoded from (JPEG/PNG bytes), when there is one.
    public var embeddedBytes: [UInt8]?
    /// The embedded file's format.
    public var embeddedFormat: ImageFormat?

    /// Map width in pixels.
    public var width: Int { map.width }
    /// Map height in pixels.
    public var height: Int { map.height }

    /// A map with everything known about it (readers fill this; see also
    /// ``init(floatMap:kind:units:accuracy:source:)``).
    public init(
        kind: DepthKind, map: Image<Float>, stored: AnyImage, storedFormat: String, encoding: DepthEncoding,
        units: String, accuracy: DepthAccuracy? = nil, filtered: Bool? = nil, quality: String? = nil,
        calibration: CameraCalibration? = nil, source: String, declaredRange: ClosedRange<Double>? = nil,
        orientationApplied: Orientation = .up
    ) {
        self.kind = kind
        self.map = map
        self.stored = stored
        self.storedFormat = storedFormat
        self.encoding = encoding
        self.units = units
        self.accuracy = accuracy
        self.filtered = filtered
        self.quality = quality
        self.calibration = calibration
        self.source = source
        self.declaredRange = declaredRange
        self.orientationApplied = orientationApplied
    }

    /// A float map as depth data (from a PFM, a TIFF or a computation).
    public init(
        floatMap map: Image<Float>, kind: DepthKind, units: String, accuracy: DepthAccuracy? = nil, source: String
    ) {
        self.init(
            kind: kind, map: map.withChannels(1), stored: .float32(map.withChannels(1)), storedFormat: "float",
            encoding: .identity, units: units, accuracy: accuracy, source: source)
    }

    /// Number of unknown (NaN or infinite, or non-positive for metric depth) values.
    public var holeCount: Int { map.samples.reduce(0) { $0 + ($1.isFinite ? 0 : 1) } }

    /// Smallest and largest finite value, or nil when every value is a hole.
    public var finiteRange: (min: Float, max: Float)? {
        var lo = Float.infinity, hi = -Float.infinity
        for v in map.samples where v.isFinite {
            lo = min(lo, v)
            hi = max(hi, v)
        }
        return lo <= hi ? (lo, hi) : nil
    }

    /// The same data as disparity or depth (1/x; zero and holes become NaN). Units follow:
    /// "m" <-> "1/m".
    public func converted(to target: DepthKind) -> DepthData {
        guard target != kind else { return self }
        var out = self
        out.kind = target
        out.map = Image<Float>(uninitializedWidth: map.width, height: map.height, channels: 1) { d in
            map.samples.withUnsafeBufferPointer { s in
                for i in 0..<s.count {
                    let v = s[i]
                    d[i] = v.isFinite && v > 0 ? 1 / v : .nan
                }
            }
        }
        if units.hasPrefix("1/") { out.units = String(units.dropFirst(2)) } else { out.units = "1/" + units }
        out.declaredRange = declaredRange.flatMap { r in
            r.lowerBound > 0 ? (1 / r.upperBound)...(1 / r.lowerBound) : nil
        }
        return out
    }

    /// Decodes stored samples (first channel) with `encoding`; non-finite results and, for
    /// depth, values <= 0 become NaN holes.
    public static func decodeMap(_ stored: AnyImage, encoding: DepthEncoding, kind: DepthKind) -> Image<Float> {
        encoding.decode(stored, hole: .nan) { v in !v.isFinite || (kind == .depth && v <= 0) }
    }
}

extension AnyImage {
    /// The first channel only (depth PNGs are sometimes stored as RGB(A) with equal channels).
    public var firstChannel: AnyImage {
        func pick<S: PixelSample>(_ i: Image<S>) -> Image<S> {
            if i.channels == 1 { return i }
            let c = i.channels
            return i.samples.withUnsafeBufferPointer { s in
                Image<S>(uninitializedWidth: i.width, height: i.height, channels: 1) { d in
                    for k in 0..<(i.width * i.height) { d[k] = s[k * c] }
                }
            }
        }
        switch self {
        case .uint8(let i): return .uint8(pick(i))
        case .uint16(let i): return .uint16(pick(i))
        case .float32(let i): return .float32(pick(i))
        }
    }
}

/// What an auxiliary image is.
public enum AuxiliaryKind: String, Sendable, Codable, CaseIterable {
    case depth, disparity
    case portrait, skin, hair, teeth, glasses, sky
    case gainmap
    case confidence
    /// Google's GImage: the photo before the lens-blur effect.
    case original
    case other

    /// Classifies a type string: an Apple URN, an apdi type or sub-type, a HEIF auxC URN, or a
    /// Dynamic Depth semantic.
    public static func classify(_ type: String) -> AuxiliaryKind {
        let t = type.lowercased()
        if t == "urn:mpeg:hevc:2015:auxid:2" || t == "urn:mpeg:mpegb:cicp:systems:auxiliary:depth" || t == "depth" {
            return .depth
        }
        if t == "disparity" { return .disparity }
        if t.contains("portraiteffectsmatte") || t == "portrait" || t == "segmentation" { return .portrait }
        if t.contains("semanticskinmatte") || t == "skin" { return .skin }
        if t.contains("semantichairmatte") || t == "hair" { return .hair }
        if t.contains("semanticteethmatte") || t == "teeth" { return .teeth }
        if t.contains("semanticglassesmatte") || t == "glasses" { return .glasses }
        if t.contains("semanticskymatte") || t == "sky" { return .sky }
        if t.contains("hdrgainmap") || t.contains("gainmap") { return .gainmap }
        if t.contains("confidence") { return .confidence }
        if t == "original" || t == "gimage" { return .original }
        return .other
    }
}

/// An auxiliary image (matte, gain map, confidence, original) with its type as the file names it.
public struct AuxiliaryImage: Sendable {
    /// What the image is.
    public var kind: AuxiliaryKind
    /// The type string in the file (URN, apdi type, semantic).
    public var type: String
    /// Pixels (grey for mattes), in the photo's orientation unless read raw. Empty when only
    /// listed (not decoded).
    public var image: AnyImage
    /// Width in pixels (known even when not decoded).
    public var width: Int
    /// Height in pixels (known even when not decoded).
    public var height: Int
    /// Where it came from.
    public var source: String
    /// The embedded file's bytes, when it is a file inside the file (MPF, GDepth, container item).
    public var embeddedBytes: [UInt8]?
    /// The embedded file's format.
    public var embeddedFormat: ImageFormat?
}

/// A photo with its depth and auxiliary images.
public struct DepthPhoto: Sendable {
    /// The file read.
    public var path: String
    /// Its container format.
    public var format: ImageFormat
    /// The photo effects start from, upright (only when decoding was asked for): the primary
    /// image, or the original a render was made from (Lens Blur's GImage; see ``photoSource``).
    public var photo: DecodedImage?
    /// Where ``photo`` came from when it is not the primary image; nil for the primary image.
    public var photoSource: String?
    /// Upright size of the primary image.
    public var width: Int
    /// Upright height of the primary image.
    public var height: Int
    /// The photo's orientation (EXIF, or HEIF irot/imir as reflected in EXIF).
    public var orientation: Orientation
    /// The depth or disparity map, if the file has one.
    public var depth: DepthData?
    /// Every auxiliary image found; decoded when asked for (see `DepthReadOptions.auxiliary`).
    public var auxiliary: [AuxiliaryImage]
    /// Things noticed while reading (a damaged MPF entry, a GUID mismatch accepted, ...).
    public var warnings: [String]

    /// A depth photo from parts (for your own data: a render, a capture).
    public init(
        path: String, format: ImageFormat, photo: DecodedImage?, width: Int, height: Int,
        orientation: Orientation = .up,
        depth: DepthData?, auxiliary: [AuxiliaryImage] = [], warnings: [String] = []
    ) {
        self.path = path
        self.format = format
        self.photo = photo
        self.width = width
        self.height = height
        self.orientation = orientation
        self.depth = depth
        self.auxiliary = auxiliary
        self.warnings = warnings
    }

    /// The first auxiliary image of `kind`, if any.
    public func auxiliary(_ kind: AuxiliaryKind) -> AuxiliaryImage? { auxiliary.first { $0.kind == kind } }
}
