import EvanescoAlign
import EvanescoCore
import Foundation

/// What became of one frame of a burst.
public enum FrameStatus: String, Sendable, Codable, CaseIterable {
    /// The reference frame itself.
    case reference
    /// Registered to the reference.
    case aligned
    /// Used unaligned (``AlignMode/none``).
    case asIs = "as_is"
    /// Registered by a homography the caller gave (``StackOptions/givenHomographies``).
    case given
    /// Left out; ``FrameReport/reason`` says why.
    case failed
    /// Not yet processed.
    case pending
}

/// A registration model that failed and the one used instead.
public struct AlignmentFallback: Sendable, Codable, Equatable, CustomStringConvertible {
    /// The model that failed.
    public var from: MotionModel
    /// The model used instead.
    public var to: MotionModel
    /// Why the first model failed.
    public var reason: String
    /// - Parameters:
    ///   - from: The model that failed.
    ///   - to: The model used instead.
    ///   - reason: Why.
    public init(from: MotionModel, to: MotionModel, reason: String) {
        self.from = from
        self.to = to
        self.reason = reason
    }
    public var description: String { "\(from.rawValue) failed (\(reason)); used \(to.rawValue)" }
}

/// What happened to one frame, in the report schema of the bench tools (`frames[].index`,
/// `frames[].homography` as a row-major 3x3 array) plus our own keys.
public struct FrameReport: Sendable, Codable, Equatable {
    /// Position of the frame among the decoded frames.
    public var index: Int
    /// The frame's file, or the video and frame number.
    public var source: String
    /// Maps this frame's pixel coordinates to the reference's; nil if not aligned.
    public var homography: Homography?
    /// Whether the frame was merged.
    public var used: Bool
    /// What happened to the frame.
    public var status: FrameStatus
    /// Why a frame failed, in words.
    public var reason: String?
    /// The motion model of the registration that was used, when the frame was aligned.
    public var model: MotionModel?
    /// Set when the homography failed and a translation was used.
    public var fallback: AlignmentFallback?
    /// Robust RMS photometric residual after alignment, grey levels.
    public var residual: Double?
    /// Fraction of the template texture that agrees after alignment.
    public var inlierFraction: Double?
    /// Exposure gain of the frame relative to the reference (frame = gain x reference + offset).
    public var gain: Double?
    /// Robust correlation of the aligned frame with the reference's texture.
    public var correlation: Double?
    /// Seconds spent aligning this frame (pyramid + registration).
    public var alignSeconds: Double?
    /// Where the registration started: the coarse shift search, or the slower feature or
    /// rotation-and-scale searches for a frame the shift starts could not register.
    public var start: RegistrationStart?
    /// The local alignment (``AlignMode/local``, or `.auto` on a frame with parallax).
    public var local: LocalFrameReport?

    /// Creates a report; the stacker fills the registration fields as it goes.
    public init(
        index: Int, source: String, homography: Homography? = nil, used: Bool = false, status: FrameStatus = .pending
    ) {
        self.index = index
        self.source = source
        self.homography = homography
        self.used = used
        self.status = status
    }

    mutating func fill(_ r: RegistrationResult) {
        homography = r.homography
        used = true
        status = .aligned
        model = r.model
        residual = (r.residual * 1000).rounded() / 1000
        inlierFraction = (r.inlierFraction * 1000).rounded() / 1000
        gain = (r.gain * 10000).rounded() / 10000
        correlation = (r.correlation * 10000).rounded() / 10000
        start = r.start
    }

    /// The report with ``alignSeconds`` since `start`.
    func timed(since start: Date) -> FrameReport {
        var r = self
        r.alignSeconds = (Date().timeIntervalSince(start) * 1000).rounded() / 1000
        return r
    }

    mutating func fail(_ why: String) {
        used = false
        status = .failed
        reason = why
    }
}

/// A frame's local alignment, as reports carry it.
public struct LocalFrameReport: Sendable, Codable, Equatable {
    /// Whether the field was applied (always with `--align local`; with `auto`, when the coarse
    /// look showed parallax).
    public var used: Bool
    /// Why, in words.
    public var decision: String
    /// The field applied, summarised (nil when not applied).
    public var field: LocalFieldStatistics?
    /// The coarse look (two pyramid levels above the finest) that `auto` decides on (nil with
    /// `--align local`, which does not look first).
    public var coarse: LocalFieldStatistics?
}
