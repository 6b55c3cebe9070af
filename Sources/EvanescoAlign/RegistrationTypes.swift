import CKernels
import EvanescoCore
import Foundation

/// The motion model a registration estimates.
public enum MotionModel: String, Sendable, Codable, CaseIterable {
    /// Sub-pixel shift: what VNTranslationalImageRegistrationRequest gives.
    case translation
    /// 3x3 projective warp: what VNHomographicImageRegistrationRequest gives.
    case homography
}

/// Tuning of a registration.
public struct RegistrationOptions: Sendable {
    /// Finest pyramid level refined (0 = full resolution).
    public var finestLevel = 0
    /// Template points kept at the finest level (the strongest gradients, spread over a grid);
    /// coarser levels keep a third as many. A level also keeps at most one point in
    /// ``pixelsPerPoint`` pixels, but never fewer than ``minPoints`` because of it.
    public var maxPoints = 40_000
    /// See ``maxPoints``: on a small frame (320 x 240, say) half its pixels qualify, and every
    /// Gauss-Newton iteration visits each point. Measured on motorcycle-handheld (741 x 500: 23,000
    /// points instead of 40,000): alignment error 0.0072 px against 0.0066 px mean, the same PSNR
    /// to 0.001 dB, 4 % less time for the whole stack.
    public var pixelsPerPoint = 16
    /// See ``maxPoints``.
    public var minPoints = 16_000
    /// Iterations per level (coarse levels get twice as many).
    public var iterations = 12
    /// Search radius of the coarse translation search, as a fraction of the coarsest level's size.
    public var searchFraction: Float = 0.12
    /// When the usual starts fail, search rotations and scales too (slower; for large motion).
    public var largeMotionSearch = true
    /// A frame whose matching texture falls below this fraction of the template is refused.
    /// Measured: real frames agree at 0.58 (the 12 MP pug burst, heavy occlusion) to 0.95;
    /// a frame of noise reached 0.36 after fitting 8 parameters and a gain.
    public var minimumInlierFraction: Float = 0.45
    /// The defaults, tuned on the real and synthetic bursts (see the README).
    public init() {}
}

/// Where a registration's refinement started from.
public enum RegistrationStart: String, Sendable, Codable, CaseIterable {
    /// The caller's estimate.
    case given
    /// A peak of the coarse shift search (the usual start).
    case coarseShift = "coarse_shift"
    /// Matched corner features (the slow path, for frames the shift starts cannot register).
    case features
    /// The rotation-and-scale search (the slowest path).
    case rotationSearch = "rotation_search"
}

/// The outcome of registering one frame to the reference.
public struct RegistrationResult: Sendable, Codable {
    /// Maps the frame's pixel coordinates to the reference's (top-left origin, integer centres).
    public var homography: Homography
    /// The model of ``homography`` (a translation falls back from a failed homography).
    public var model: MotionModel
    /// Robust RMS of the photometric residual on matching texture, in 8-bit grey levels.
    public var residual: Double
    /// Fraction of the template points inside the frame that agree with it after alignment
    /// (grey levels within 8 of each other): the registration's confidence.
    public var inlierFraction: Double
    /// Exposure difference found: frame ~ gain * reference + offset (grey levels).
    public var gain: Double
    /// The exposure offset, in grey levels (see ``gain``).
    public var offset: Double
    /// Gauss-Newton iterations run over all levels.
    public var iterations: Int
    /// Robustly weighted correlation of reference and aligned frame on the template points.
    public var correlation: Double
    /// Where the refinement that was kept started.
    public var start: RegistrationStart = .coarseShift
    /// The pyramid level it was refined down to (see `finestLevel` in
    /// ``RegistrationReference/register(pyramid:model:initial:finestLevel:)``).
    public var level = 0

    enum CodingKeys: String, CodingKey {
        case homography, model, residual, inlierFraction, gain, offset, iterations, correlation, start
    }
}

/// Why a frame could not be registered; the stacker reports it and leaves the frame out.
public enum RegistrationError: Error, CustomStringConvertible, Equatable {
    case sizeMismatch(frame: String, reference: String)
    case tooLittleTexture
    case noOverlap
    case diverged(String)
    case poorMatch(inlierFraction: Double)
    case structureless(slope: Double)
    /// The images are smaller than ``RegistrationReference/minimumSide`` on a side.
    case tooSmall(width: Int, height: Int)

    public var description: String {
        switch self {
        case .tooSmall(let w, let h):
            "\(w)x\(h) pixels is too small to register (\(RegistrationReference.minimumSide) on each side at least)"
        case .sizeMismatch(let f, let r): "frame is \(f) but the reference is \(r)"
        case .tooLittleTexture: "the reference has too little texture to align against"
        case .noOverlap: "the frame does not overlap the reference enough"
        case .diverged(let d): "alignment diverged (\(d))"
        case .poorMatch(let f):
            String(
                format:
                    "only %.0f%% of the texture matches the reference after alignment (a different scene, or too much "
                    + "moving)",
                f * 100)
        case .structureless(let g):
            String(
                format:
                    "at coarse scale the frame does not follow the reference's structure (slope %.2f): noise, a blank "
                    + "or a different scene",
                g)
        }
    }
}
