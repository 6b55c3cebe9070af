import EvanescoCore
import EvanescoIO
import Foundation

/// What ``PortraitRenderer`` renders.
public enum PortraitEffect: String, Sendable, Codable, CaseIterable {
    /// The normalised disparity as grey (1 = nearest = white): the tutorial's "Depth" view.
    case depth
    /// The focus mask as grey: the tutorial's "Mask" view.
    case mask
    /// The photo through the mask over black (`CIBlendWithMask` over black).
    case spotlight
    /// The photo through the mask over its own luminance (`CIPhotoEffectMono` + `CIBlendWithMask`).
    case color
    /// Focal blur, strongest where the mask is 0 (`CIMaskedVariableBlur`).
    case blur
    /// A real lens's depth of field: each point blurred into the aperture's shape at its own
    /// circle of confusion, depth-ordered, in linear light (``LensBlur``).
    case lens
}

/// How the upscaled mask is snapped to edges.
public enum MaskRefinement: String, Sendable, Codable, CaseIterable {
    /// Bicubic upscale only (the tutorial).
    case none
    /// A guided filter on the photo's luma.
    case photo
    /// A guided filter on Apple's portrait matte (an error if the file has none).
    case matte
    /// The matte when the file has one, else the photo.
    case auto
}

/// A point of the upright photo, in pixels or as fractions of its size.
public struct PhotoPoint: Sendable, Equatable, Codable, LosslessStringConvertible {
    /// Column, in pixels or as a fraction of the width.
    public var x: Double
    /// Row, in pixels or as a fraction of the height.
    public var y: Double
    /// True when x and y are fractions 0...1 of the width and height.
    public var fractional: Bool

    /// - Parameters:
    ///   - x: Column.
    ///   - y: Row.
    ///   - fractional: Whether x and y are fractions 0...1.
    public init(x: Double, y: Double, fractional: Bool = false) {
        self.x = x
        self.y = y
        self.fractional = fractional
    }

    /// Parses `X,Y`: pixels (`1510,980`), or fractions when both are within 0...1 and one is
    /// written with a decimal point (`0.4,0.3`). Refuses negative and non-finite numbers.
    public init?(_ description: String) {
        let parts = description.split(separator: ",", omittingEmptySubsequences: false).map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        guard parts.count == 2, let x = Double(parts[0]), let y = Double(parts[1]), x.isFinite, y.isFinite, x >= 0,
            y >= 0
        else { return nil }
        self.init(x: x, y: y, fractional: x <= 1 && y <= 1 && (parts[0].contains(".") || parts[1].contains(".")))
    }

    /// Whole pixels as given (a huge coordinate is shown as the nearest Int, never trapped on).
    public var description: String { fractional ? "\(x),\(y)" : "\(Int(saturating: x)),\(Int(saturating: y))" }

    /// The point in pixels of a `width` x `height` photo.
    public func pixels(width: Int, height: Int) -> (x: Double, y: Double) {
        fractional ? (x * Double(width), y * Double(height)) : (x, y)
    }
}

/// Where to focus.
public enum FocusTarget: Sendable, Equatable {
    /// Normalised disparity, 0 (farthest) ... 1 (nearest): the tutorial's slider.
    case normalized(Float)
    /// A distance in metres (only for maps with absolute accuracy or metric units).
    case distance(metres: Double)
    /// Whatever is at this point of the upright photo (the median of the map around it).
    case point(PhotoPoint)
}

/// Every choice of a portrait rendering. The defaults are the tutorial's recipe.
public struct PortraitSettings: Sendable, Equatable, DeclaresSettings {
    /// The effect rendered.
    public var effect: PortraitEffect = .spotlight
    /// What is in focus.
    public var focus: FocusTarget = .normalized(Float(Limits.focus.defaultValue!))
    /// Mask slope s (the ramp is 1/s wide).
    public var slope = Float(Limits.slope.defaultValue!)
    /// Mask width w (normalised disparity) of the in-focus band.
    public var width = Float(Limits.width.defaultValue!)
    /// Largest blur radius in pixels (``PortraitEffect/blur``), at the photo's full size.
    public var radius = Float(Limits.radius.defaultValue!)
    /// Blur levels blended per pixel.
    public var levels = Int(Limits.levels.defaultValue!)
    /// How the mask's edges are refined when it is scaled to the photo.
    public var refine: MaskRefinement = .none
    /// Gather background colour only, so the sharp subject does not bleed into the blur.
    public var protectSubject = true
    /// Lens blur: blur diameter in pixels of the full-size photo for a normalised disparity
    /// difference of 1 (the largest blur the photo can have). Nil: 40 at 12 MP, scaled with the
    /// photo's diagonal. Exclusive with ``fNumber``.
    public var aperture: Float?
    /// Lens blur: a full-frame-equivalent f-number, turned into a blur diameter through the file's
    /// calibration (focal length, pixel size) and absolute depth. Exclusive with ``aperture``.
    public var fNumber: Double?
    /// Lens blur: the aperture's shape (blades, rotation).
    public var shape = ApertureShape()
    /// Lens blur: cat-eye vignetting strength, 0 (off) ... 1.
    public var catEye = Float(Limits.catEye.defaultValue!)
    /// Lens blur: gain on clipped highlights, 1 (none) ... 16.
    public var highlights = Float(Limits.highlights.defaultValue!)

    /// The tutorial's recipe: spotlight at normalised focus 0.5, slope 4, width 0.1.
    public init() {}

    /// The numeric settings' ranges and defaults, one place for the command line, the studio
    /// (`GET /api/depth/settings`) and the batch manifests.
    public enum Limits {
        public static let focus = NumericSetting(
            "focus", 0...1, default: 0.5, unit: "(normalised disparity, 1 = nearest)",
            summary: "Focus as normalised disparity, 0 (farthest) ... 1 (nearest)")
        public static let focusDistance = NumericSetting(
            "focus distance", 0...100_000, open: .minimum, default: nil, unit: "m", typical: 0.1...10,
            summary: "Focus at this distance (needs absolute depth)")
        public static let slope = NumericSetting(
            "slope", 0...1000, open: .minimum, default: 4, typical: 0.5...20,
            summary: "How steeply the focus mask falls off away from the focus")
        public static let width = NumericSetting(
            "width", 0...1, default: 0.1, typical: 0...0.5,
            summary: "Width of the in-focus band, in normalised disparity")
        public static let radius = NumericSetting(
            "radius", 0...500, open: .minimum, default: 15, unit: "pixels", typical: 1...60,
            summary: "Largest blur radius of the focal blur (effect blur)")
        public static let levels = NumericSetting(
            "levels", 2...16, default: 5, integer: true, summary: "Blur levels blended per pixel (effect blur)")
        public static let aperture = NumericSetting(
            "aperture", 0...1000, open: .minimum, default: nil, unit: "pixels", typical: 1...200,
            summary: "Lens: blur diameter for the photo's whole disparity range (default: 40 at 12 MP, scaled)")
        public static let fNumber = NumericSetting(
            "f-number", 0.5...64, default: nil, typical: 1...22,
            summary: "Lens: full-frame-equivalent f-number (needs absolute depth and the camera's calibration)")
        public static let blades = NumericSetting(
            "blades", 0...16, default: 0, integer: true, summary: "Lens: diaphragm blades, 0 for a circle or 3...16")
        public static let bladeRotation = NumericSetting(
            "blade rotation", -360...360, default: 0, unit: "degrees", summary: "Lens: rotation of the blades")
        public static let catEye = NumericSetting(
            "cat eye", 0...1, default: 0, summary: "Lens: cat's-eye vignetting of the bokeh toward the corners, 0 (off)"
        )
        public static let highlights = NumericSetting(
            "highlights", 1...16, default: 2, unit: "(1 = no boost)", summary: "Lens: gain on clipped highlights")
    }

    /// Every setting a user chooses, declared once: the command line, manifests, the studio
    /// and the documentation take them from here. Only one of the three focus settings is given.
    public static let settings: [Setting] = [
        .choice("effect", PortraitEffect.self, default: Self().effect, summary: "What is rendered"),
        .number("focus", Limits.focus),
        .number("focusDistance", Limits.focusDistance),
        Setting(
            "focusPoint", .text(default: "none"),
            summary: "Focus on the point X,Y of the upright photo (pixels, or fractions 0...1)"),
        .number("slope", Limits.slope),
        .number("width", Limits.width),
        .number("radius", Limits.radius),
        .number("levels", Limits.levels),
        .choice(
            "refine", MaskRefinement.self, default: Self().refine,
            summary: "How the upscaled mask is snapped to edges: none (bicubic), photo, matte, auto"),
        Setting(
            "protectSubject", .toggle(default: true),
            summary: "Focal blur gathers background colour only, so the sharp subject does not bleed into it"),
        .number("aperture", Limits.aperture),
        .number("fNumber", Limits.fNumber),
        .number("blades", Limits.blades),
        .number("bladeRotation", Limits.bladeRotation),
        .number("catEye", Limits.catEye),
        .number("highlights", Limits.highlights)
    ]

    /// Checks every value, NaN and infinity included.
    ///
    /// - Throws: ``PortraitError/invalidSetting(name:detail:)`` naming the setting.
    public func validate() throws(PortraitError) {
        func bad(_ name: String, _ detail: String) -> PortraitError { .invalidSetting(name: name, detail: detail) }
        do throws(SettingError) {
            switch focus {
            case .normalized(let f): try Limits.focus.check(f)
            case .distance(let d): try Limits.focusDistance.check(d)
            case .point(let p):
                guard p.x.isFinite, p.y.isFinite, p.x >= 0, p.y >= 0 else {
                    throw SettingError(setting: "focus point", detail: "must be X,Y with X, Y >= 0")
                }
            }
            try Limits.slope.check(slope)
            try Limits.width.check(width)
            try Limits.radius.check(radius)
            try Limits.levels.check(levels)
            if aperture != nil && fNumber != nil {
                throw SettingError(setting: "aperture", detail: "and f-number are exclusive: give one")
            }
            if let a = aperture { try Limits.aperture.check(a) }
            if let n = fNumber { try Limits.fNumber.check(n) }
            try Limits.blades.check(shape.blades)
            guard shape.blades == 0 || (3...16).contains(shape.blades) else {
                throw SettingError(setting: "blades", detail: "must be 0 (a circle) or 3...16")
            }
            try Limits.bladeRotation.check(shape.rotation)
            try Limits.catEye.check(catEye)
            try Limits.highlights.check(highlights)
        } catch {
            throw bad(error.setting, error.detail)
        }
    }
}

public enum PortraitError: Error, Equatable, CustomStringConvertible {
    case invalidSetting(name: String, detail: String)
    case noPhoto(path: String)
    case noPhysicalAperture(path: String, reason: String)

    public var description: String {
        switch self {
        case .invalidSetting(let name, let detail): "\(name) \(detail)"
        case .noPhoto(let path): "\(path): the photo itself was not decoded; read it with decodePhoto = true"
        case .noPhysicalAperture(let path, let reason):
            "\(path): an f-number needs \(reason); give the blur size in pixels (aperture) instead"
        }
    }
}

/// The machine-readable account of one rendering (`evanesco portrait --report`).
public struct PortraitReport: Sendable, Codable, Equatable {
    /// How the disparity was normalised.
    public struct Normalization: Sendable, Codable, Equatable {
        /// The disparity that maps to 0.
        public var disparityLow: Float
        /// The disparity that maps to 1.
        public var disparityHigh: Float
        /// Holes filled from their neighbours.
        public var filledHoles: Int
    }
    /// What the mask covers.
    public struct MaskStatistics: Sendable, Codable, Equatable {
        /// Mean mask value.
        public var mean: Double
        /// Fraction of the photo with mask above 0.5 ("in focus").
        public var fractionOverHalf: Double
    }
    /// The photo's path.
    public var input: String
    /// The effect rendered.
    public var effect: PortraitEffect
    /// The focus as normalised disparity, however it was given.
    public var focus: Float
    /// How the focus was found, in words.
    public var focusFrom: String
    /// Mask slope s.
    public var slope: Float
    /// Mask width w.
    public var width: Float
    /// What the mask was refined with: "none", "photo luma" or "portrait matte".
    public var refinedWith: String
    /// Blur radius (blur only).
    public var radius: Float?
    /// Blur levels (blur only).
    public var levels: Int?
    /// Whether the blur protected the subject (blur only).
    public var protectSubject: Bool?
    /// Output width in pixels.
    public var outputWidth: Int
    /// Output height in pixels.
    public var outputHeight: Int
    /// The photo's depth map, summarised.
    public var depth: DepthSummary.Depth?
    /// How the disparity was normalised.
    public var normalization: Normalization
    /// What the mask covers.
    public var mask: MaskStatistics
    /// Seconds per stage (`times_s` in JSON).
    public var times: StageTimings
    /// The lens (lens blur only).
    public var lens: LensReport?

    enum CodingKeys: String, CodingKey {
        case input, effect, focus, focusFrom, slope, width, refinedWith, radius, levels, protectSubject, outputWidth,
            outputHeight
        case depth, normalization, mask, lens
        case times = "timesS"  // `times_s` through ReportJSON, which both writes and reads it
    }
}

/// The lens a lens-blur rendering used.
public struct LensReport: Sendable, Codable, Equatable {
    /// Blur diameter in pixels of the full-size photo for a normalised disparity difference of 1.
    public var aperturePixels: Float
    /// Where the aperture came from: "default", "aperture" or "f-number".
    public var apertureFrom: String
    /// The full-frame-equivalent f-number asked for, if any.
    public var fNumber: Double?
    /// The camera's focal length in millimetres (from the calibration), with an f-number.
    public var focalLengthMM: Double?
    /// Its full-frame equivalent, with an f-number.
    public var equivalentFocalLengthMM: Double?
    /// The aperture's shape.
    public var shape: ApertureShape
    /// Cat-eye strength.
    public var catEye: Float
    /// Highlight gain.
    public var highlights: Float
    /// What the renderer did.
    public var statistics: LensStatistics
}

/// One rendering: the image, the full-size mask and the report.
public struct PortraitRendering: Sendable {
    /// The rendered photo (or the depth or mask view).
    public var image: AnyImage
    /// The full-size focus mask, 0...1.
    public var mask: Image<Float>
    /// Metadata for the output: the photo's, without the ICC profile for the grey views.
    public var metadata: ImageMetadata
    /// What was rendered and what it cost.
    public var report: PortraitReport
}

/// The "Image Depth Maps" tutorial as one object: holds a depth photo's decoded pixels, its
/// normalised disparity and its portrait matte, and renders any ``PortraitSettings`` from them
/// without decoding again, so a slider can re-render at preview size as fast as it moves.
///
/// ```swift
/// let renderer = try PortraitRenderer(contentsOf: "IMG_0001.HEIC")
/// var settings = PortraitSettings()
/// settings.effect = .blur
/// settings.focus = .point(PhotoPoint(x: 0.5, y: 0.45, fractional: true))
/// let out = try renderer.render(settings)
/// try ImageCodecs.write(out.image, to: "blur.jpg", options: WriteOptions(metadata: out.metadata))
/// ```
public final class PortraitRenderer: Sendable {
    /// The photo as read (path, format, depth, auxiliary images).
    public let photo: DepthPhoto
    /// The upright photo's pixels (possibly scaled: see ``scaled(toLongSide:)``).
    public let image: AnyImage
    /// The photo's metadata (EXIF, ICC), for outputs.
    public let metadata: ImageMetadata
    /// The photo's depth map.
    public let depth: DepthData
    /// Its disparity normalised to 0...1, holes filled.
    public let normalized: NormalizedDisparity
    /// The portrait matte, if the file has one (and it was decoded).
    public let matte: Image<Float>?
    /// Photo pixels per pixel of the full-size photo (1 unless scaled for previews).
    public let scale: Double
    /// Seconds the read took (0 when built from a `DepthPhoto`).
    public let decodeSeconds: Double
    /// The depth map's description, as reports carry it.
    let depthSummary: DepthSummary.Depth?

    /// A renderer for a photo already read with its pixels.
    ///
    /// - Parameter photo: Read by `DepthReader` with `decodePhoto` (and `.portrait` in
    ///   `decodeAuxiliary` to refine with the matte).
    /// - Throws: ``PortraitError/noPhoto(path:)``, `DepthError.noDepth`, or ``FocusError/noValidDepth(detail:)``
    ///   when every value of the map is a hole.
    public convenience init(_ photo: DepthPhoto) throws {
        try self.init(read: photo, decodeSeconds: 0)
    }

    /// Reads a portrait photo (its pixels, depth and portrait matte) and prepares it for rendering.
    ///
    /// - Parameters:
    ///   - path: A HEIC or JPEG portrait photo (Apple, GDepth, Dynamic Depth).
    ///   - options: Read options; the photo and the portrait matte are always decoded.
    /// - Throws: What `DepthReader.read(_:options:)` throws, and what ``init(_:)`` throws.
    public convenience init(contentsOf path: String, options: DepthReadOptions = DepthReadOptions()) throws {
        var o = options
        o.decodePhoto = true
        o.requireDepth = true
        o.decodeAuxiliary.insert(.portrait)
        let start = Date()
        let p = try DepthReader.read(path, options: o)
        try self.init(read: p, decodeSeconds: Date().timeIntervalSince(start))
    }

    /// The one path from a read photo: its pixels, depth, normalised disparity, matte and the
    /// depth summary every report carries (computed once, not per render).
    convenience init(read photo: DepthPhoto, decodeSeconds: Double) throws {
        guard let decoded = photo.photo else { throw PortraitError.noPhoto(path: photo.path) }
        guard let depth = photo.depth else {
            throw DepthError.noDepth(path: photo.path, found: photo.auxiliary.map(\.type))
        }
        let matte = photo.auxiliary(.portrait).flatMap { $0.image.width == 0 ? nil : $0.image.float32 }
        self.init(
            photo: photo, image: decoded.image, metadata: decoded.metadata, depth: depth,
            normalized: try Self.normalize(depth, path: photo.path), matte: matte,
            depthSummary: DepthSummary(photo).depth,
            scale: 1, decodeSeconds: decodeSeconds)
    }

    /// The normalised disparity, with the photo named in the error when the map has no value.
    static func normalize(_ depth: DepthData, path: String) throws -> NormalizedDisparity {
        do { return try NormalizedDisparity(depth) } catch FocusError.noValidDepth(let detail) {
            throw FocusError.noValidDepth(detail: "\(path): \(detail)")
        }
    }

    init(
        photo: DepthPhoto, image: AnyImage, metadata: ImageMetadata, depth: DepthData, normalized: NormalizedDisparity,
        matte: Image<Float>?, depthSummary: DepthSummary.Depth?, scale: Double, decodeSeconds: Double
    ) {
        self.photo = photo
        self.image = image
        self.metadata = metadata
        self.depth = depth
        self.normalized = normalized
        self.matte = matte
        self.depthSummary = depthSummary
        self.scale = scale
        self.decodeSeconds = decodeSeconds
    }

    /// A renderer on the photo scaled down so that its long side is at most `longSide` (for
    /// previews); the depth data is shared, and blur radii and focus points are scaled to match.
    ///
    /// - Parameter longSide: The preview's long side in pixels.
    /// - Returns: `self` when the photo is already that small.
    public func scaled(toLongSide longSide: Int) -> PortraitRenderer {
        let long = max(image.width, image.height)
        guard longSide > 0, long > longSide else { return self }
        let s = Double(longSide) / Double(long)
        let w = max(1, Int((Double(image.width) * s).rounded())), h = max(1, Int((Double(image.height) * s).rounded()))
        let small = image.map(Resize(width: w, height: h, interpolation: .bilinear))
        return PortraitRenderer(
            photo: photo, image: small, metadata: metadata, depth: depth, normalized: normalized,
            matte: matte, depthSummary: depthSummary, scale: s * scale, decodeSeconds: decodeSeconds)
    }

    /// The normalised focus value for `target`, and how it was found.
    ///
    /// - Parameter target: Where to focus.
    /// - Returns: The focus (may lie slightly outside 0...1 for a distance at the map's edge) and a note.
    /// - Throws: ``FocusError`` when a distance is asked of a relative map, or lies outside it, or the point is
    /// outside the photo.
    public func focusValue(_ target: FocusTarget) throws(FocusError) -> (value: Float, note: String) {
        switch target {
        case .normalized(let f):
            return (f, "normalised focus \(f)")
        case .distance(let d):
            if depth.accuracy == .relative { throw .relativeAccuracy(path: photo.path) }
            let disp = Float(1 / d)
            let f = normalized.normalize(disparity: disp)
            guard f.isFinite, (-0.05...1.05).contains(f) else {
                let near = String(format: "%.3g", 1 / Double(normalized.high))
                let far = String(format: "%.3g", 1 / Double(normalized.low))
                throw .outOfRange(detail: "\(photo.path): \(d) m is outside the map's range of \(near)...\(far) m")
            }
            return (
                f, "distance \(d) m (disparity \(disp) \(depth.kind == .disparity ? depth.units : "1/" + depth.units))"
            )
        case .point(let p):
            let fullW = photo.width, fullH = photo.height
            let (x, y) = p.pixels(width: fullW, height: fullH)
            guard x < Double(fullW), y < Double(fullH) else {
                throw .outOfRange(detail: "the focus point \(p) is outside the \(fullW)x\(fullH) photo")
            }
            let f = normalized.value(atPhotoPoint: x, y, photoWidth: fullW, photoHeight: fullH)
            return (f, "point \(Int(saturating: x)),\(Int(saturating: y)): median normalised disparity around it")
        }
    }

    /// Renders `settings`.
    ///
    /// - Parameter settings: Effect, focus, mask shape, blur, refinement.
    /// - Returns: The image at this renderer's size, its mask and the report.
    /// - Throws: ``PortraitError`` for an invalid setting, ``FocusError`` for a focus that cannot
    ///   be placed, `DepthError.auxiliaryNotFound` for ``MaskRefinement/matte`` without a matte.
    public func render(_ settings: PortraitSettings) throws -> PortraitRendering {
        try settings.validate()
        var times = StageTimings()
        times.decode = decodeSeconds
        let start = Date()
        let (f, note) = try times.measure(\.normalize) { () throws(FocusError) in try focusValue(settings.focus) }
        let W = image.width, H = image.height
        if settings.effect == .lens {
            return try renderLens(settings, focus: f, note: note, times: times, start: start)
        }
        var mask = times.measure(\.mask) {
            FocusMask(focus: f, slope: settings.slope, width: settings.width).mask(normalized).upscaledMask(
                width: W, height: H)
        }
        var refinedWith = "none"
        if settings.refine != .none && settings.effect != .depth {
            if settings.refine == .matte && matte == nil {
                throw DepthError.auxiliaryNotFound(
                    path: photo.path, kind: "portrait matte (to refine with)",
                    available: photo.auxiliary.map { $0.kind.rawValue })
            }
            mask = times.measure(\.refine) {
                let guide: Image<Float>
                if let matte, settings.refine != .photo {
                    guide = matte.resized(width: W, height: H, interpolation: .bilinear)
                    refinedWith = "portrait matte"
                } else {
                    guide = image.float32.luma(.rec709)
                    refinedWith = "photo luma"
                }
                let depthPixel = max(1, W / max(1, normalized.map.width))
                return GuidedFilter(radius: 2 * depthPixel, epsilon: 1e-3, subsample: max(1, depthPixel / 2)).apply(
                    mask: mask, guide: guide)
            }
        }
        let out: AnyImage = times.measure(\.effect) {
            switch settings.effect {
            case .depth: .uint8(DepthEffects.grey(normalized.map.upscaledMask(width: W, height: H), as: UInt8.self))
            case .mask: .uint8(DepthEffects.grey(mask, as: UInt8.self))
            case .spotlight: DepthEffects.spotlight(image, mask: mask)
            case .color: DepthEffects.colorHighlight(image, mask: mask)
            case .blur:
                FocalBlur(
                    radius: max(0.5, settings.radius * Float(scale)), levels: settings.levels,
                    protectSubject: settings.protectSubject
                )
                .apply(image, mask: mask)
            case .lens: image  // rendered by renderLens
            }
        }
        times.total = Date().timeIntervalSince(start) + decodeSeconds
        var meta = metadata
        if settings.effect == .depth || settings.effect == .mask { meta.icc = nil }
        var over = 0, sum = 0.0
        mask.samples.withUnsafeBufferPointer { m in
            for v in m {
                sum += Double(v)
                if v > 0.5 { over += 1 }
            }
        }
        let n = Double(max(1, mask.samples.count))
        let isBlur = settings.effect == .blur
        let report = PortraitReport(
            input: photo.path, effect: settings.effect, focus: f, focusFrom: note, slope: settings.slope,
            width: settings.width,
            refinedWith: refinedWith, radius: isBlur ? settings.radius : nil, levels: isBlur ? settings.levels : nil,
            protectSubject: isBlur ? settings.protectSubject : nil, outputWidth: W, outputHeight: H,
            depth: depthSummary,
            normalization: .init(
                disparityLow: normalized.low, disparityHigh: normalized.high, filledHoles: normalized.filledHoles),
            mask: .init(mean: sum / n, fractionOverHalf: Double(over) / n), times: times.rounded, lens: nil)
        return PortraitRendering(image: out, mask: mask, metadata: meta, report: report)
    }
}
