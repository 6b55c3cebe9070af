import EvanescoCore
import EvanescoIO
import Foundation
import EvanescoFaces
import CKernels

/// Where the subject is.
public enum SubjectSelection: Sendable, Equatable {
    /// A face from the cascade (the sample's choice); falls back to the nearest large region.
    case face
    /// The nearest large depth region.
    case nearest
    /// Whatever is at this point of the colour frame.
    case point(x: Int, y: Int)
}

/// Settings of the background replacement.
public struct BackdropOptions: Sendable {
    /// cutoff = subject depth + this (metres).
    public var cutoffOffset = Float(Limits.cutoffOffset.defaultValue!)
    /// Gaussian sigma of the mask, in depth pixels of a 640-wide map (scaled with the depth width).
    public var blurSigmaAt640 = Float(Limits.blurSigmaAt640.defaultValue!)
    /// Gamma applied to the blurred mask (CIGammaAdjust's `inputPower`); below 1 widens the subject.
    public var gamma = Float(Limits.gamma.defaultValue!)
    /// Temporal smoothing: weight of the newest cutoff and mask (1 = none).
    public var temporalWeight = Float(Limits.temporalWeight.defaultValue!)
    /// Move the cutoff nearer, into the emptiest depth gap between the subject and subject +
    /// offset, when there is a clear one (a chair or wall just behind the person is then cut off).
    public var snapCutoffToGap = true
    /// Fill unknown depth inside the subject (holes at hair and edges) by a 3x3 majority vote.
    public var fillHoles = true
    /// Decide the pixels between the subject's own depth and the cutoff (a chair back at shoulder
    /// depth, say) by colour: each frame, colour histograms of the sure subject (within
    /// `coreDepth` of its depth) and of the sure background (beyond the cutoff) vote on them.
    public var refineWithColor = false
    /// Depth beyond the subject's that is subject for sure (metres).
    public var coreDepth = Float(Limits.coreDepth.defaultValue!)
    /// The sample's settings, plus gap snapping and hole filling.
    public init() {}

    /// Each numeric setting's name, default and allowed values; the defaults above are these.
    public enum Limits {
        public static let cutoffOffset = NumericSetting(
            "cutoff offset", 0...10, default: 0.25, unit: "m", typical: 0...2,
            summary: "The cutoff: what lies farther than the subject's depth plus this is background")
        public static let blurSigmaAt640 = NumericSetting(
            "blur", 0...200, default: 5.3, unit: "depth pixels at 640 wide", typical: 0...30,
            summary: "Mask blur: Gaussian sigma in pixels of a 640-wide depth map, scaled with the map's width")
        public static let gamma = NumericSetting(
            "gamma", 0.05...10, default: 0.55, typical: 0.1...3,
            summary: "Gamma of the blurred mask; below 1 widens the subject")
        public static let temporalWeight = NumericSetting(
            "temporal weight", 0...1, open: .minimum, default: 0.5,
            summary: "Temporal smoothing: weight of the newest frame's cutoff and mask (1 = none)")
        public static let coreDepth = NumericSetting(
            "core depth", 0...10, default: 0.08, unit: "m", typical: 0...0.5,
            summary: "Depth beyond the subject's that is subject for sure (the colour refinement's seed)")
    }

    /// Checks every value, NaN and infinity included.
    ///
    /// - Throws: `SettingError` naming the setting.
    public func validate() throws(SettingError) {
        try Limits.cutoffOffset.check(cutoffOffset)
        try Limits.blurSigmaAt640.check(blurSigmaAt640)
        try Limits.gamma.check(gamma)
        try Limits.temporalWeight.check(temporalWeight)
        try Limits.coreDepth.check(coreDepth)
    }
}

/// Why the subject was not taken from a face.
public enum SubjectFallback: String, Sendable, Codable {
    /// No face was found in the frame (or none was held).
    case noFace = "no_face"
    /// A face was found but its box holds no valid depth.
    case noDepthInFaceBox = "no_depth_in_face_box"
    /// No face cascade could be loaded.
    case noCascade = "no_cascade"
}

/// What one frame's subject depth was taken from.
public enum SubjectSource: Sendable, Equatable, Codable, CustomStringConvertible {
    /// The median depth in the face box.
    case face
    /// The median depth around a point of the colour frame.
    case point(x: Int, y: Int)
    /// The nearest depth region holding `percent` % of the valid depth; `fallback` says why a
    /// face was not used when one was asked for.
    case nearestRegion(percent: Int, fallback: SubjectFallback?)

    public var description: String {
        switch self {
        case .face: "face"
        case .point(let x, let y): "point \(x),\(y)"
        case .nearestRegion(let p, let fb):
            (fb.map {
                let why =
                    $0 == .noCascade
                    ? "no face cascade" : $0 == .noFace ? "no face found" : "no valid depth in the face box"
                return why + "; fell back to "
            } ?? "")
                + "the nearest large depth region (\(p) % of the valid depth)"
        }
    }
}

/// What one frame's cut was based on.
public struct BackdropFrameInfo: Sendable, Codable {
    /// Face box in colour pixels (when a face was used).
    public var face: DetectedBox?
    /// Where the subject depth came from.
    public var subject: SubjectSource
    /// The subject's depth in metres.
    public var subjectDepth: Float
    /// Depths beyond this (metres) were replaced.
    public var cutoff: Float
    /// Milliseconds: mask (depth to blurred mask) and composite (upscale + blend).
    public var maskMilliseconds: Double
    /// Milliseconds of the composite (upscale + blend).
    public var compositeMilliseconds: Double
}

/// Why a frame could not be cut.
public enum BackdropError: Error, Equatable, CustomStringConvertible {
    case noSubject(detail: String)
    public var description: String {
        switch self {
        case .noSubject(let d): "no subject found: \(d)"
        }
    }
}
