import Dispatch
import EvanescoAlign
import EvanescoCore
import EvanescoIO
import Foundation

/// One frame of a burst, decoded.
public struct BurstFrame: Sendable {
    /// A name for reports and messages (usually the file name).
    public var name: String
    /// The decoded pixels, upright.
    public var image: AnyImage
    /// EXIF, ICC and XMP of the file, kept for the output when this is the reference.
    public var metadata: ImageMetadata
    /// - Parameters:
    ///   - name: A name for reports.
    ///   - image: The decoded pixels.
    ///   - metadata: The file's metadata.
    public init(name: String, image: AnyImage, metadata: ImageMetadata = ImageMetadata()) {
        self.name = name
        self.image = image
        self.metadata = metadata
    }
}

/// Why a burst cannot be stacked. Every case says what to do.
public enum StackError: Error, CustomStringConvertible, Equatable {
    case noFrames
    /// Every input was left out; each with its reason.
    case noUsableInput(reasons: [String])
    case referenceOutOfRange(Int, count: Int)
    case sizeMismatch(frame: String, size: String, reference: String, referenceSize: String)
    case channelMismatch(frame: String)
    /// Frames smaller than ``BurstStacker/minimumAlignedSide`` on a side cannot be registered.
    case tooSmallToAlign(width: Int, height: Int)
    /// ``StackOptions/cancellation`` was cancelled; nothing was produced.
    case cancelled
    /// The decoded frames exceed ``StackOptions/memoryLimit`` and the temporary file that holds
    /// them instead could not be made or written.
    case spillFailed(directory: String, reason: String)
    /// ``StackOptions/erase`` is not the reference frame's size.
    case eraseMaskSize(mask: String, reference: String)
    /// ``StackOptions/erase`` masks no pixel.
    case eraseMaskEmpty
    /// Every frame agreed with the merge inside ``StackOptions/erase``: nothing saw behind it.
    case nothingBehindMask(maskedPixels: Int)
    /// Camera raws and finished pictures in one burst.
    case mixedRawAndPictures(raw: String, picture: String)
    /// A raw frame whose camera, size, colour filter, orientation or exposure is not the reference's.
    case rawFrameMismatch(frame: String, what: String, reference: String)
    /// ``MergeMethod/hdrplus`` asked for a burst that is not of Bayer camera raws.
    case hdrplusNeedsBayerRaw

    public var description: String {
        switch self {
        case .tooSmallToAlign(let w, let h):
            "the frames are \(w)x\(h) pixels, too small to align (\(BurstStacker.minimumAlignedSide) on each side at "
                + "least); merge them without alignment"
        case .cancelled: "the stack was cancelled before it finished"
        case .eraseMaskSize(let m, let r):
            "the erase mask is \(m) but the result is \(r): paint the mask over the result (the reference frame's "
                + "pixels), at its size"
        case .eraseMaskEmpty:
            "the erase mask marks no pixel: paint white (opaque) where the result must not keep what it shows"
        case .nothingBehindMask(let n):
            "no frame saw behind what the merge shows inside the erase mask (\(n) pixels): every frame agrees with "
                + "the merge there, so there is nothing to fill it from; mask only what stayed for part of the burst, "
                + "or add frames in which that place is clear"
        case .spillFailed(let d, let r):
            "the decoded frames do not fit in the memory limit and cannot be kept in a temporary file in \(d): \(r); "
                + "free space there, choose another spill directory or raise the memory limit"
        case .mixedRawAndPictures(let r, let p):
            "\(r) is a camera raw but \(p) is a finished picture: a burst is all raw files or all pictures; convert "
                + "the raws first (evanesco convert RAW OUT.tif) or leave the pictures out"
        case .rawFrameMismatch(let f, let what, let r):
            "\(f) differs from the reference \(r): \(what); a raw burst is one camera's frames of one size, "
                + "within 6 stops of exposure: leave that frame out"
        case .hdrplusNeedsBayerRaw:
            "the hdrplus merge works on the colour planes of Bayer camera raws (DNG, CR2, NEF, ...) with the "
                + "sensor's noise model; for these frames use --merge robust"
        case .noFrames: "no usable frames; give image files, a folder of images or one video"
        case .noUsableInput(let r):
            "no input could be used (\(r.joined(separator: "; "))); give image files, a folder of images or one video"
        case .referenceOutOfRange(let r, let n):
            "reference frame \(r) is out of range: there are \(n) usable frames (0...\(n - 1))"
        case .sizeMismatch(let f, let s, let r, let rs):
            "\(f) is \(s) but the reference \(r) is \(rs); all frames of a burst must have the same size (crop or "
                + "resize them first)"
        case .channelMismatch(let f):
            "\(f) has a different number of colour channels from the reference; convert the burst to one colour type "
                + "first"
        }
    }
}

/// A step of the merge could not have the working memory it needs (the machine ran out): the
/// stack stops rather than hand back a result without that step while saying it had it. Passing
/// again may succeed once memory is free (a batch queue retries it); without the step, it needs
/// none (``setting`` at ``value``).
public struct OutOfMemoryError: Error, CustomStringConvertible, Equatable, Sendable {
    /// The step, in words ("the raw merge's spatial denoise").
    public var step: String
    /// The setting's key (as manifests and presets name it) and the value that leaves the step out.
    public var setting: String, value: String

    /// What ran out and the first remedy, without the setting (a front end names it its own way).
    public var shortage: String { "not enough memory for \(step): free memory and run it again" }

    public var description: String { "\(shortage), or leave that step out (\(setting) \(value))" }

    /// The raw merge's spatial denoise (``StackOptions/rawDenoise``).
    static let rawDenoise = OutOfMemoryError(
        step: "the raw merge's spatial denoise", setting: StackOptions.Key.rawDenoise.stringValue, value: "0")
    /// The robust raw merge's blend with the Wiener merge anchored on the reference.
    static let rawBlend = OutOfMemoryError(
        step: "the robust raw merge's blend with the reference's detail", setting: StackOptions.Key.merge.stringValue,
        value: MergeMethod.mean.rawValue)
}

/// The merged picture and everything measured on the way.
public struct StackResult: Sendable {
    /// The merged picture, in the frames' sample type.
    public var image: AnyImage
    /// One entry per decoded frame, in input order.
    public var frames: [FrameReport]
    /// Seconds per stage. ``BurstStacker/stack(_:options:)`` fills align, warp, merge and their
    /// fused wall time `warpMerge` (warp and merge run tile by tile together; their wall time is
    /// split by their shares of thread time); ``BurstStacker/stack(contentsOf:options:)`` adds decode.
    public var timings: StageTimings
    /// The merge actually used (see ``StackOptions/meanForTwoFrames``).
    public var merge: MergeMethod
    /// The alignment mode that was asked for.
    public var align: AlignMode
    /// Burst-wide noise estimate (sample units) used by the robust merge.
    public var noiseSigma: Float?
    /// Index (in ``frames``) of the frame the others were aligned to.
    public var referenceIndex: Int
    /// Decisions and problems to tell the user about, in order: skipped inputs, frames left out,
    /// fallbacks, policy changes.
    public var notices: [StackNotice]
    /// Metadata of the reference frame (EXIF, ICC), for the output.
    public var referenceMetadata: ImageMetadata
    /// The decoded frames, when ``StackOptions/retainFrames`` is set.
    public var decodedFrames: [BurstFrame]?
    /// Each frame's local alignment (in ``frames`` order; nil where none was applied).
    public var localFields: [DisplacementField?] = []
    /// The per-pixel maps, when ``StackOptions/collectMaps`` is set.
    public var maps: StackMaps?
    /// What the erase pass did, when ``StackOptions/erase`` was given.
    public var erase: EraseSummary?
    /// What the burst-wide parallax passes did to ``localFields`` (nil when fewer than 3 frames had one).
    public var parallax: ParallaxSummary?
    /// For a burst of camera raws: the merged mosaic and the noise model the merge used. ``image``
    /// then holds the merged colour planes (``RawPlanes``), half size.
    public var raw: RawStack?
    /// The noise lines (sample units) a raw burst's merge used.
    var sampleNoise: [(slope: Float, intercept: Float)]?
    /// Bytes of the temporary file the decoded frames were kept in, when they exceeded
    /// ``StackOptions/memoryLimit``; nil when they were held in memory.
    public var spilledBytes: Int?
    /// How many times the merge dropped the temporary file's pages from the process, when there
    /// was one (it must, every band of rows, for memory to stay at a band's frames).
    var spillReleases: Int?
    /// Inputs that could not be decoded (see ``notices``).
    public var skippedInputs: Int { notices.filter { if case .inputSkipped = $0 { true } else { false } }.count }
    /// Frames merged.
    public var usedFrames: Int { frames.filter(\.used).count }
}

/// What the merge of a raw burst made: a mosaic laid out as the reference frame's, with its
/// metadata, ready for a DNG or a finish.
public struct RawStack: Sendable {
    /// The merged mosaic: the reference's CFA, size, colour and camera; levels scaled to 16 bits
    /// (``RawPlanes``); the NoiseProfile of the merged frame.
    public var mosaic: RawMosaic
    /// The frames' noise model the merge used (variance = scale x + offset, x in 0...1).
    public var noise: NoiseModel
    /// Where ``noise`` came from: the reference's NoiseProfile, or an estimate from its samples.
    public var noiseSource: String
    /// The reference's container ("DNG 1.4", "CR2"...).
    public var container: String
    /// The strength of the spatial denoise the merged planes went through
    /// (``StackOptions/rawDenoise``), nil when they were not (a merge it does not apply to, or 0).
    public var denoise: Float?
}
