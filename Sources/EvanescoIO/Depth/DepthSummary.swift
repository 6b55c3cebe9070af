import EvanescoCore

/// What `evanesco depth info` shows of a depth photo, as a Codable value: the photo's format,
/// size and orientation, its depth map's description and every auxiliary image.
public struct DepthSummary: Sendable, Codable, Equatable {
    /// The depth map's description.
    public struct Depth: Sendable, Codable, Equatable {
        /// Disparity or depth.
        public var kind: DepthKind
        /// Map width.
        public var width: Int
        /// Map height.
        public var height: Int
        /// Units of the values ("1/m", "m", "relative").
        public var units: String
        /// How the samples are stored ("8-bit", "float16", ...).
        public var storedFormat: String
        /// Where the map was found.
        public var source: String
        /// The encoding's ``DepthEncoding/summary``.
        public var encoding: String
        /// Unknown values.
        public var holes: Int
        /// Smallest and largest finite value.
        public var range: [Float]?
        /// The range the metadata declares.
        public var declaredRange: [Double]?
        /// How the range was cross-checked.
        public var rangeNotes: [String]
        /// Relative or absolute.
        public var accuracy: DepthAccuracy?
        /// Whether the map was filtered.
        public var filtered: Bool?
        /// The declared quality.
        public var quality: String?
        /// Camera calibration.
        public var calibration: CameraCalibration?
        /// EXIF orientation code applied to the stored map.
        public var orientationApplied: Int
    }

    /// One auxiliary image's description.
    public struct Auxiliary: Sendable, Codable, Equatable {
        /// What the image is.
        public var kind: AuxiliaryKind
        /// Its type as the file names it.
        public var type: String
        /// Width in pixels.
        public var width: Int
        /// Height in pixels.
        public var height: Int
        /// Where it was found.
        public var source: String
        /// - Parameters:
        ///   - kind: What the image is.
        ///   - type: Its type in the file.
        ///   - width: Width.
        ///   - height: Height.
        ///   - source: Where it was found.
        public init(kind: AuxiliaryKind, type: String, width: Int, height: Int, source: String) {
            self.kind = kind
            self.type = type
            self.width = width
            self.height = height
            self.source = source
        }
    }

    /// The file.
    public var file: String
    /// Its container format.
    public var format: String
    /// Upright photo width.
    public var width: Int
    /// Upright photo height.
    public var height: Int
    /// EXIF orientation code.
    public var orientation: Int
    /// What the orientation does, in words.
    public var orientationMeaning: String
    /// Whether a depth or disparity map was found.
    public var hasDepth: Bool
    /// The map's description.
    public var depth: Depth?
    /// Every auxiliary image.
    public var auxiliary: [Auxiliary]
    /// Damaged parts that were skipped.
    public var warnings: [String]

    /// The summary of `p`.
    ///
    /// - Parameter p: A photo read by ``DepthReader``.
    public init(_ p: DepthPhoto) {
        file = p.path
        format = p.format.name
        width = p.width
        height = p.height
        orientation = p.orientation.rawValue
        orientationMeaning = p.orientation.summary
        hasDepth = p.depth != nil
        warnings = p.warnings
        depth = p.depth.map { d in
            Depth(
                kind: d.kind, width: d.width, height: d.height, units: d.units, storedFormat: d.storedFormat,
                source: d.source,
                encoding: d.encoding.summary, holes: d.holeCount, range: d.finiteRange.map { [$0.min, $0.max] },
                declaredRange: d.declaredRange.map { [$0.lowerBound, $0.upperBound] }, rangeNotes: d.rangeNotes,
                accuracy: d.accuracy, filtered: d.filtered, quality: d.quality, calibration: d.calibration,
                orientationApplied: d.orientationApplied.rawValue)
        }
        auxiliary = p.auxiliary.map {
            Auxiliary(kind: $0.kind, type: $0.type, width: $0.width, height: $0.height, source: $0.source)
        }
    }

    /// Lines for a person to read.
    public var text: String {
        var lines = ["file: \(file)", "format: \(format), \(width)x\(height), orientation \(orientation)"]
        if let d = depth {
            lines.append("depth: \(d.kind.rawValue) \(d.width)x\(d.height), \(d.storedFormat), from \(d.source)")
            if let r = d.range { lines.append("  range: \(r[0]) ... \(r[1]) \(d.units)") }
            lines.append("  encoding: \(d.encoding)")
            for n in d.rangeNotes { lines.append("  \(n)") }
            if let a = d.accuracy { lines.append("  accuracy: \(a.rawValue)") }
            if let f = d.filtered { lines.append("  filtered: \(f)") }
            if let q = d.quality { lines.append("  quality: \(q)") }
            if let c = d.calibration { lines.append("  calibration: \(c.summary)") }
            lines.append("  holes: \(d.holes)")
        } else {
            lines.append("depth: none")
        }
        for a in auxiliary {
            lines.append("auxiliary: \(a.kind.rawValue) \(a.width)x\(a.height) (\(a.type), \(a.source))")
        }
        for w in warnings { lines.append("warning: \(w)") }
        return lines.joined(separator: "\n")
    }
}

extension CameraCalibration {
    /// One line: the fields present, `name=value`.
    public var summary: String {
        var parts: [String] = []
        if let i = intrinsics { parts.append("intrinsics=\(i)") }
        if let w = referenceWidth, let h = referenceHeight { parts.append("reference=\(w)x\(h)") }
        if let p = pixelSize { parts.append("pixelSize=\(p)") }
        if let d = lensDistortionCenter { parts.append("distortionCenter=\(d)") }
        if let d = lensDistortion { parts.append("lensDistortion=\(d.count) values") }
        if let e = extrinsics { parts.append("extrinsics=\(e)") }
        return parts.joined(separator: "; ")
    }
}
