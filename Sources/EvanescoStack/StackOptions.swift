import EvanescoAlign
import EvanescoCore
import Foundation

/// How frames are registered to the reference.
public enum AlignMode: String, Sendable, Codable, CaseIterable {
    /// Homography, falling back to translation (with the reason in the report) when it fails.
    case auto
    /// Frames are used as they are (a tripod burst).
    case none
    /// A sub-pixel shift per frame (`VNTranslationalImageRegistrationRequest`).
    case translation
    /// A 3x3 projective warp per frame (`VNHomographicImageRegistrationRequest`).
    case homography
    /// A homography plus a per-cell local correction (`LocalAligner`) on every frame: near and
    /// far things that moved differently (parallax) are aligned too. `.auto` turns it on for the
    /// frames whose coarse field shows parallax.
    case local
}

/// How a raw burst's frames are sampled at the reference's photosites before they are merged.
public enum RawSampling: String, Sendable, Codable, CaseIterable {
    /// Each colour from its own samples around the site, with a narrow kernel and no demosaic:
    /// the fastest (about 3/4 of ``colour``'s time), and the softest where a frame's samples land
    /// between the reference's.
    case sites
    /// Green at full resolution (each frame's green estimated at its red and blue sites, then
    /// Catmull-Rom between pixels), and red and blue by their differences to green, pulled
    /// towards ``sites``' value where the two differ by about the noise: sharper where frames
    /// land between the reference's sites, and fewer of those misplaced edges for the vote to
    /// take for motion. On the 49 bursts of `Benchmarks/raw-stack-vs-anchor.py` (linear PSNR
    /// against the clean mosaic, `docs/benchmarks.md`): +0.6 dB on average, -0.2 to +1.8 dB;
    /// the static bursts' median gap to the averaging bound 1.64 dB instead of 2.77; the worst
    /// visibly-off pixels where people pass 0.070 % instead of 0.147 %. For about 1.35 times the
    /// whole command's time and half the frames' memory again (the estimates). The default. A frame
    /// scaled to a bracket's shortest exposure keeps ``sites``, and the erase pass
    /// (``StackOptions/erase``) samples the planes as it always has (as pictures).
    case colour

    /// Bytes a Bayer frame's samples take in memory beyond its planes, per photosite: ``colour``'s
    /// green at the red and blue sites, two 16-bit samples a 2 x 2 cell.
    var extraBytesPerPhotosite: Int { self == .colour ? 1 : 0 }
}

/// Everything that decides how a burst is stacked, policies included, so that every front end
/// (the CLI, the studio, your code) stacks the same burst the same way.
public struct StackOptions: Sendable, DeclaresSettings {
    /// Registration model; `.auto` falls back from homography to translation per frame, and adds
    /// local alignment to the frames that show parallax.
    public var align: AlignMode = .auto
    /// Tuning of the local alignment (``AlignMode/local``, and `.auto` where there is parallax).
    public var localAlignment = LocalAlignmentOptions()
    /// Also compute the per-pixel maps (``StackResult/maps``): frames kept, provenance, local shift.
    public var collectMaps = false
    /// Merge method; `.robust` is the best measured (see ``MergeMethod``).
    public var merge: MergeMethod = .robust
    /// Index (in input order, among the decoded frames) of the reference frame; the output is in its coordinates.
    public var reference = 0
    /// Interpolation of the warp into the reference: Keys' bicubic (a = -0.75) by default, the
    /// sharpest of the cubics. Measured against Catmull-Rom (a = -0.5): every one of 64 bursts
    /// made with `make_burst.py` (aloe and motorcycle, with and without parallax, and the shared
    /// synthetic bursts) gained 0.20-0.45 dB against its ground truth, and the error pixels fell
    /// (worst of the 30 parallax bursts 0.065 -> 0.046 %); a real photo shifted by a fraction of
    /// a pixel and back keeps 1.2-1.6 dB more (5 photos: the HDR+ tree, the low-light street, the
    /// motorcycle, the aloe, graffiti). Catmull-Rom's exact linear ramps cost more detail
    /// than its phase shift, up to 0.05 px at quarter phases, gains.
    public var interpolation: Interpolation = .bicubic
    /// How a raw burst's frames are sampled at the reference's photosites: ``RawSampling/colour``
    /// by default. Images ignore it.
    public var rawSampling: RawSampling = .colour
    /// How strongly a raw burst's merge is denoised in space afterwards, in units of the noise it
    /// left (``Limits/rawDenoise``). Images and the ``MergeMethod/hdrplus`` merge ignore it.
    public var rawDenoise = Float(Limits.rawDenoise.defaultValue!)
    /// Sigma-clip and robust kappa.
    public var kappa = Float(Limits.kappa.defaultValue!)
    /// Winsorized: fraction replaced at each end.
    public var winsorFraction = Float(Limits.winsorFraction.defaultValue!)
    /// Finest pyramid level alignment is refined at: 0 = full resolution, 1 = half. `nil` (the
    /// default) picks 1 above ``halfResolutionAlignmentAbove`` pixels, else 0.
    public var alignLevel: Int?
    /// Frame size (pixels) above which alignment is refined at half resolution when
    /// ``alignLevel`` is nil: 12 MP frames align in a third of the time, no less accurately.
    public var halfResolutionAlignmentAbove = Int(Limits.halfResolutionAlignmentAbove.defaultValue!)
    /// Two frames cannot outvote a moving object: when only two frames are usable, merge them by
    /// their mean (and say so in ``StackResult/notices``). Set to false to keep ``merge``.
    public var meanForTwoFrames = true
    /// Further registration tuning (``alignLevel`` overrides its `finestLevel`).
    public var registration = RegistrationOptions()
    /// Known registrations (frame -> reference), by frame index, instead of aligning: e.g. from
    /// an earlier report, or ground truth. nil entries mark frames to leave out.
    public var givenHomographies: [Homography?]?
    /// Known local corrections (``StackResult/localFields``), by frame index, that go with
    /// ``givenHomographies`` (ignored without them): a burst stacked again from its files, as the
    /// studio's erase brush does on a burst over ``memoryLimit``, warps exactly as it did the
    /// first time. A nil entry, or a missing one, warps by the homography alone; a field that
    /// does not cover its frame leaves the frame out, with the reason in its report.
    public var givenFields: [DisplacementField?]?
    /// Frames taken from a video input, evenly spaced (``BurstStacker/stack(contentsOf:options:)``).
    public var videoFrames = Int(Limits.videoFrames.defaultValue!)
    /// Bytes the decoded frames may take in memory, all together
    /// (``BurstStacker/stack(contentsOf:options:)``). A burst whose frames need more is decoded
    /// into a temporary file instead (see ``spillDirectory``) and merged band by band from it, so
    /// the peak memory stays near this figure whatever the number of frames: 100 frames of 24 MP
    /// (7.2 GB decoded) stack in about 1 GB. nil keeps every burst in memory. Default 1 GiB.
    public var memoryLimit: Int? = Int(Limits.memoryLimit.defaultValue!)
    /// Where the temporary file of decoded frames goes when a burst exceeds ``memoryLimit``
    /// (nil: `$TMPDIR`, else `/tmp`). The file is unnamed from the moment it is made: nothing is
    /// left there, whatever happens.
    public var spillDirectory: String?
    /// Where the result must not keep what the plain merge shows (someone who stood there for
    /// most of the burst): inside it, each pixel is merged again from the frames that saw behind,
    /// blended into the rest over ``EraseSummary/seamBand`` pixels; beyond that band the output is
    /// the plain merge's, to the bit. In the reference frame's pixels, at its size.
    public var erase: EraseMask?
    /// The noise of each channel as a line in the sample value (variance = slope v + intercept),
    /// when the frames say (a raw burst's NoiseProfile, ``RawPlanes/sampleNoise(_:of:)``); the
    /// hdrplus merge then sets each tile's noise from its level instead of the burst's estimate.
    var sampleNoise: [(slope: Float, intercept: Float)]?
    /// Set for a raw burst's planes: they are merged by ``RawMerge``, at each channel's own site.
    var rawLayout: RawPlaneLayout?
    /// A raw burst's frames exposed longer than its shortest, by name, with the factor their
    /// planes were scaled by: their samples of 65535 are missing (``RawPlanes/missing``).
    var rawExposureGains: [String: Float] = [:]
    /// With ``rawExposureGains``: the level above which a frame may have clipped (the lowest
    /// frame's clip, scaled), where every frame's grey is cut for registration, so that what one
    /// frame clipped and another did not does not pull the alignment.
    var alignCeiling: UInt16?
    /// Keep the decoded frames in ``StackResult/decodedFrames`` (for
    /// ``BurstStacker/aligned(_:homography:interpolation:mergedFrames:local:)``).
    public var retainFrames = false
    /// Called from any thread as stages advance.
    public var progress: (@Sendable (StackProgress) -> Void)?
    /// Checked between frames and rows: once cancelled, the stack stops and throws
    /// ``StackError/cancelled`` (a studio's cancel button, a server shutting down).
    public var cancellation: StackCancellation?

    /// The defaults: automatic alignment, the robust merge, Catmull-Rom sampling, frame 0 as reference.
    public init() {}

    /// Each numeric setting's name, default and allowed values; the defaults above are these.
    public enum Limits {
        public static let reference = NumericSetting(
            "reference frame", 0...1_000_000, default: 0, integer: true,
            summary: "Index of the reference frame among the usable inputs; the result is in its coordinates")
        public static let kappa = NumericSetting(
            "kappa", 0...100, open: .minimum, default: 2.5, typical: 1...5,
            summary: "How far from the consensus, in noise sigmas, a sample is an outlier (sigma-clip, robust)")
        /// The four colours of a raw burst's merge, decorrelated, go through a two-stage 4 x 4
        /// transform filter (`RawMerge.transform`) whose noise is this many times what the merge
        /// left there: the reference's noise line over the frames kept at the cell. 1 takes the
        /// noise for what it is. Chosen on the family (docs/benchmarks.md, "A transform filter"):
        /// against the Lee filter of 3 x 3 cells it replaced (at 0.5), +0.48 dB on the median
        /// held-out burst, up to +2.4 dB on smooth scenes at ISO 800-6400, and the same worst
        /// error pixels there; 1.5 and 2 smooth more and raise them.
        public static let rawDenoise = NumericSetting(
            "raw denoise", 0...16, default: 1, typical: 0...2,
            summary: "Spatial denoise of a raw merge, in units of the noise it left; 0 leaves the merge as it is")
        public static let winsorFraction = NumericSetting(
            "winsor fraction", 0...0.5, open: .maximum, default: 0.2,
            summary: "Fraction of the samples replaced at each end (winsorized merge)")
        public static let alignLevel = NumericSetting(
            "align level", 0...4, default: nil, integer: true,
            summary: "Finest pyramid level aligned at: 0 full size, 1 half (default: 1 above the threshold below)")
        public static let halfResolutionAlignmentAbove = NumericSetting(
            "half-resolution alignment threshold", 1...1e12, default: 8_000_000,
            unit: "pixels", integer: true, summary: "Frame size above which alignment stops at half resolution")
        public static let videoFrames = NumericSetting(
            "video frames", 1...100_000, default: 20, integer: true, typical: 3...100,
            summary: "Frames taken from a video input, evenly spaced")
        /// Bytes; at least 1 MiB, at most 16 TiB.
        public static let memoryLimit = NumericSetting(
            "memory limit", 1_048_576...17_592_186_044_416, default: 1_073_741_824, unit: "bytes",
            integer: true, summary: "What the decoded frames may hold in memory; past it they spill to a file")
    }

    /// Every setting a user chooses, declared once: the command line, manifests, the studio
    /// and the documentation take them from here.
    public static let settings: [Setting] = [
        .choice("align", AlignMode.self, default: Self().align, summary: "How frames are registered to the reference"),
        .choice("merge", MergeMethod.self, default: Self().merge, summary: "How the aligned frames are merged"),
        .number("reference", Limits.reference),
        .choice(
            "interpolation", Interpolation.self, default: Self().interpolation,
            spelling: { Setting.kebab($0.rawValue) },
            summary: "How frames are sampled when warped into the reference"),
        .choice(
            "rawSampling", RawSampling.self, default: Self().rawSampling,
            summary: "How raw frames are sampled at the reference's photosites; sites is faster and softer"),
        .number("rawDenoise", Limits.rawDenoise),
        .number("kappa", Limits.kappa),
        .number("winsorFraction", Limits.winsorFraction),
        .number("alignLevel", Limits.alignLevel),
        .number("halfResolutionAlignmentAbove", Limits.halfResolutionAlignmentAbove),
        .number("videoFrames", Limits.videoFrames),
        Setting("memoryLimit", .size(Limits.memoryLimit), summary: Limits.memoryLimit.summary),
        Setting(
            "spillDirectory", .text(default: "$TMPDIR, else /tmp"),
            summary: "Folder for the temporary file of decoded frames past the memory limit (nothing is left there)"),
        Setting(
            "meanForTwoFrames", .toggle(default: true),
            summary: "Merge a burst of two usable frames by their mean, as two cannot outvote a moving object")
    ]

    /// Checks every value, NaN and infinity included, and that the spill directory is a folder
    /// this user can write to.
    ///
    /// - Throws: `SettingError` naming the setting.
    public func validate() throws(SettingError) {
        try Limits.reference.check(reference)
        try Limits.rawDenoise.check(rawDenoise)
        try Limits.kappa.check(kappa)
        try Limits.winsorFraction.check(winsorFraction)
        if let alignLevel { try Limits.alignLevel.check(alignLevel) }
        try Limits.halfResolutionAlignmentAbove.check(halfResolutionAlignmentAbove)
        try Limits.videoFrames.check(videoFrames)
        if let memoryLimit { try Limits.memoryLimit.checkLimit(memoryLimit) }
        if let erase, erase.count == 0 {
            throw SettingError(
                setting: "erase mask",
                detail: "marks no pixel: paint white (opaque) where the result must not keep what it shows")
        }
        if let d = spillDirectory {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: d, isDirectory: &isDirectory), isDirectory.boolValue,
                FileManager.default.isWritableFile(atPath: d)
            else {
                throw SettingError(setting: "spill directory", detail: "\(d) is not a folder this user can write to")
            }
        }
    }

    /// The options that apply to a burst of `count` frames of `pixels` pixels each: the
    /// two-frame and alignment-level policies resolved.
    ///
    /// - Parameters:
    ///   - count: Usable frames in the burst.
    ///   - pixels: Pixels per frame.
    /// - Returns: These options with ``merge`` and `registration.finestLevel` decided, and the
    ///   notices that explain a changed merge.
    public func resolved(frames count: Int, pixels: Int) -> (options: StackOptions, notices: [StackNotice]) {
        var o = self
        var notices: [StackNotice] = []
        if count == 1 { notices.append(.singleFrame) }
        if count == 2 && merge != .mean && meanForTwoFrames {
            o.merge = .mean
            notices.append(.twoFramesMergedByMean(requested: merge))
        }
        o.registration.finestLevel =
            alignLevel ?? (pixels > halfResolutionAlignmentAbove ? 1 : registration.finestLevel)
        return (o, notices)
    }
}

/// A stage of the burst pipeline, as progress reports it.
public enum StackStage: String, Sendable, Codable, CaseIterable {
    case decode, align, merge

    /// What ``StackProgress/done`` counts in this stage.
    public var unit: String { self == .merge ? "rows" : "frames" }
}

/// Progress of a long stage, for a bar or a log line.
public struct StackProgress: Sendable {
    /// The stage running.
    public var stage: StackStage
    /// Steps done in the stage (frames, or rows for the merge).
    public var done: Int
    /// Steps in the stage.
    public var total: Int
    /// Seconds since the stage started.
    public var elapsed: Double
    /// - Parameters:
    ///   - stage: The stage running.
    ///   - done: Steps done.
    ///   - total: Steps in the stage.
    ///   - elapsed: Seconds since the stage started.
    public init(stage: StackStage, done: Int, total: Int, elapsed: Double) {
        self.stage = stage
        self.done = done
        self.total = total
        self.elapsed = elapsed
    }
    /// Seconds left at the stage's pace so far; nil before the first step and after the last.
    public var remaining: Double? { done > 0 && done < total ? elapsed / Double(done) * Double(total - done) : nil }
}

/// Something the stacker decided or noticed that the user should hear about.
public enum StackNotice: Sendable, Equatable, Codable, CustomStringConvertible {
    /// Only one usable frame: the output is that frame.
    case singleFrame
    /// Two frames were merged by their mean instead of the requested method.
    case twoFramesMergedByMean(requested: MergeMethod)
    /// An input could not be decoded and was skipped.
    case inputSkipped(input: String, reason: String)
    /// A frame could not be aligned and was left out.
    case frameLeftOut(source: String, reason: String)
    /// A frame's homography failed and a translation was used.
    case fellBack(source: String, reason: String)
    /// A frame of another bit depth than the reference was converted to the depth the burst is
    /// merged at (`from`, `to`: 8, 16, or 32 for float).
    case depthConverted(source: String, from: Int, to: Int)
    /// A raw frame exposed longer than the burst's shortest was scaled to it by `factor` (the
    /// shortest exposure over its own); its clipped samples were left out.
    case exposureScaled(source: String, factor: Float)

    public var description: String {
        switch self {
        case .singleFrame: "only one usable frame: the output is that frame, nothing can be removed"
        case .twoFramesMergedByMean(let m):
            "two frames cannot outvote a moving object (asked for \(m.rawValue)); merged by their mean: use 3 or more "
                + "frames"
        // Reasons from the codecs already start with the file's name.
        case .inputSkipped(let input, let reason):
            reason.hasPrefix(input) ? "skipped \(reason)" : "skipped \(input): \(reason)"
        case .frameLeftOut(let source, let reason): "left out \(source): \(reason)"
        case .fellBack(let source, let reason): "\(source): \(reason)"
        case .depthConverted(let source, let from, let to) where from > to:
            "\(source): \(from == 32 ? "float" : "\(from)-bit") frame merged as \(to)-bit, the reference's depth: its "
                + "finer levels are rounded "
                + "away (to keep them, make a frame of that depth the reference frame)"
        case .depthConverted(let source, let from, let to):
            "\(source): \(from)-bit frame scaled to \(to)-bit, the depth the burst is merged at"
        case .exposureScaled(let source, let factor):
            "\(source): exposed \(String(format: "%.3g", 1 / factor))x the shortest frame: merged at that "
                + "exposure, its clipped samples left out"
        }
    }
}

/// A flag another thread sets to stop a running stack (see ``StackOptions/cancellation``).
public final class StackCancellation: @unchecked Sendable {
    private let flag = LockedBox(false)
    public init() {}
    /// Asks the stack to stop at its next frame or row.
    public func cancel() { flag.update { $0 = true } }
    /// Whether ``cancel()`` was called.
    public var isCancelled: Bool { flag.value }
}
