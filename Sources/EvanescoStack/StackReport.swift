import EvanescoAlign
import EvanescoCore
import EvanescoIO
import Foundation

/// The machine-readable account of a stack run (`evanesco stack --report`), in the bench tools'
/// report schema (`frames[].index`, `frames[].homography`) with snake_case keys throughout.
public struct StackReport: Sendable, Codable, Equatable {
    /// The program that wrote the report.
    public var tool = "evanesco stack"
    /// The inputs as given.
    public var inputs: [String]
    /// The output file, when one was written.
    public var output: String?
    /// The merge actually used.
    public var merge: MergeMethod
    /// The alignment mode asked for.
    public var align: AlignMode
    /// Index of the reference frame.
    public var reference: Int
    /// Output width in pixels.
    public var width: Int
    /// Output height in pixels.
    public var height: Int
    /// Burst-wide noise estimate used by the robust merge (sample units).
    public var noiseSigma: Float?
    /// Frames merged.
    public var framesUsed: Int
    /// One entry per decoded frame.
    public var frames: [FrameReport]
    /// The notices, as sentences.
    public var notices: [String]
    /// Seconds per stage (`times_s` in JSON).
    public var times: StageTimings
    /// Where the decoded frames were held: `memory`, or `temporary file` when they exceeded the
    /// memory limit (see ``StackOptions/memoryLimit``).
    public var framesHeld: String?
    /// Bytes of that temporary file.
    public var spilledBytes: Int?
    /// What the erase pass did (`--erase`), when it ran.
    public var erase: EraseSummary?
    /// What the burst-wide parallax passes did to the local fields, when three or more frames had one.
    public var parallax: ParallaxSummary?
    /// The process's peak resident memory in MB, when the program filled it in
    /// (`evanesco stack` does, after writing its outputs).
    public var peakResidentMB: Int?
    /// For a burst of camera raws: the noise model the merge used and the merged mosaic's.
    public var raw: RawReport?

    enum CodingKeys: String, CodingKey {
        case tool, inputs, output, merge, align, reference, width, height, noiseSigma, framesUsed, frames, notices,
            framesHeld, spilledBytes, erase, parallax, raw
        case peakResidentMB
        case times = "timesS"  // `times_s` through ReportJSON, which both writes and reads it
    }

    /// The report of `result`.
    ///
    /// - Parameters:
    ///   - result: A finished stack.
    ///   - inputs: What the user passed in.
    ///   - output: Where the image was written, if it was.
    public init(_ result: StackResult, inputs: [String], output: String?) {
        self.inputs = inputs
        self.output = output
        merge = result.merge
        align = result.align
        reference = result.referenceIndex
        width = result.image.width
        height = result.image.height
        noiseSigma = result.noiseSigma
        framesUsed = result.usedFrames
        frames = result.frames
        notices = result.notices.map(\.description)
        times = result.timings.rounded
        framesHeld = result.spilledBytes == nil ? "memory" : "temporary file"
        spilledBytes = result.spilledBytes
        erase = result.erase
        parallax = result.parallax
        if let r = result.raw {
            width = r.mosaic.width
            height = r.mosaic.height
            raw = RawReport(
                container: r.container, cfa: r.mosaic.cfa?.description ?? "LinearRaw", noise: r.noise,
                noiseSource: r.noiseSource, mergedNoise: r.mosaic.noise, denoise: r.denoise,
                blackLevels: r.mosaic.blackLevels, whiteLevel: r.mosaic.whiteLevel)
        }
    }

    /// Registrations from a report (ours, or the bench tools' `truth.json`), by frame index: its
    /// homography, or nil where the report has none. Pass them as ``StackOptions/givenHomographies``.
    ///
    /// - Parameters:
    ///   - bytes: The JSON document: `{"frames": [{"index": k, "homography": [[...], [...], [...]] or null}]}`.
    ///   - name: The document's name, for messages.
    /// - Returns: One entry per index up to the highest in the document.
    /// - Throws: ``StackReportError`` when the document is not such a report, or an index is
    ///   negative or above 100,000.
    public static func homographies(from bytes: [UInt8], name: String) throws -> [Homography?] {
        struct Doc: Decodable {
            struct Frame: Decodable {
                var index: Int
                var homography: Homography?
            }
            var frames: [Frame]
        }
        let doc: Doc
        do { doc = try JSONDecoder().decode(Doc.self, from: Data(bytes)) } catch {
            throw StackReportError.notAReport(name: name, detail: Self.describe(error))
        }
        guard doc.frames.allSatisfy({ (0...100_000).contains($0.index) }) else {
            throw StackReportError.notAReport(name: name, detail: "a frame index is negative or above 100000")
        }
        var out = [Homography?](repeating: nil, count: (doc.frames.map(\.index).max() ?? -1) + 1)
        for f in doc.frames { out[f.index] = f.homography }
        return out
    }

    /// The frames of a report that were aligned with a local field (`frames[].local.used`), by
    /// index, in order (none for a document without them, such as a `truth.json`). A report
    /// carries each frame's homography but not its field: given back as
    /// ``StackOptions/givenHomographies``, these frames are warped by their homographies alone.
    ///
    /// - Parameter bytes: A document ``homographies(from:name:)`` accepts.
    public static func framesWithLocalFields(from bytes: [UInt8]) -> [Int] {
        struct Doc: Decodable {
            struct Frame: Decodable {
                struct Local: Decodable { var used: Bool? }
                var index: Int
                var local: Local?
            }
            var frames: [Frame]
        }
        guard let doc = try? JSONDecoder().decode(Doc.self, from: Data(bytes)) else { return [] }
        return doc.frames.filter { $0.local?.used == true }.map(\.index).sorted()
    }

    /// What to tell a user who gives back a report (`name`) in which some frames had a local
    /// field (``framesWithLocalFields(from:)``); nil when none had.
    public static func localFieldsNotice(in bytes: [UInt8], name: String) -> String? {
        let local = framesWithLocalFields(from: bytes)
        guard !local.isEmpty else { return nil }
        return "\(name): \(local.count) frame(s) were aligned with a local field (parallax), which a report does "
            + "not carry; they are warped by their homographies alone, so near things may ghost (stack without "
            + "--homographies to align them again)"
    }

    static func describe(_ error: Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let c):
            c.debugDescription
                + (c.codingPath.isEmpty ? "" : " at " + c.codingPath.map(\.stringValue).joined(separator: "."))
        case DecodingError.keyNotFound(let k, _): "no \"\(k.stringValue)\""
        case DecodingError.typeMismatch(_, let c):
            "wrong type at " + c.codingPath.map(\.stringValue).joined(separator: ".")
        case DecodingError.valueNotFound(_, let c):
            "missing value at " + c.codingPath.map(\.stringValue).joined(separator: ".")
        default: String(describing: error)
        }
    }
}

/// What the burst-wide parallax passes did to the frames' local fields (`parallax` in a report):
/// the joint fit of one scene seen from every frame (`ParallaxConsistency`) and the depth sweep
/// where most frames could not measure (`ParallaxConsistency.sweep(_:model:samplers:)`).
public struct ParallaxSummary: Sendable, Codable, Equatable {
    /// Frames whose fields took part in the joint fit.
    public var frames: Int
    /// Cells per field.
    public var cells: Int
    /// The median distance between a frame's measured displacement and the fitted scene, pixels.
    public var medianResidualPx: Float
    /// Whether the fields were changed: false when the fitted scene did not explain them (a
    /// scene that deforms, or a burst too short to tell), and every field was used as measured.
    public var applied: Bool
    /// Cells where most frames disagreed with the scene, which took their depth from consistent
    /// neighbours.
    public var inconsistentCells: Int
    /// Single frames' cells replaced by the scene's value (something covered that frame there).
    public var replacedFrameCells: Int
    /// Cells most frames could not measure, where depths were tried against the frames' pixels.
    public var sweptCells: Int
    /// Of those, cells whose depth changed.
    public var changedCells: Int

    /// The account of a consistency pass (nil when it did not run: fewer than 3 frames had fields)
    /// and of the sweep that followed it, if one did.
    init?(_ c: ParallaxConsistency.Summary?, sweep: ParallaxConsistency.SweepSummary?) {
        guard let c else { return nil }
        frames = c.frames
        cells = c.cells
        medianResidualPx = (c.medianResidualPx * 1000).rounded() / 1000
        applied = c.applied
        inconsistentCells = c.inconsistentCells
        replacedFrameCells = c.replacedFrameCells
        sweptCells = sweep?.sweptCells ?? 0
        changedCells = sweep?.changedCells ?? 0
    }
}

/// A registrations document that cannot be used.
public enum StackReportError: Error, Equatable, CustomStringConvertible {
    case notAReport(name: String, detail: String)
    public var description: String {
        switch self {
        case .notAReport(let name, let detail):
            "\(name): not a report with frames[].index and frames[].homography (\(detail)); give a stack report or a "
                + "truth.json"
        }
    }
}

extension StackResult {
    /// The one line a front end prints for a finished stack: "out.jpg: 640x480, 9 of 10 frames
    /// merged (robust, align auto), 1 input skipped in 0.42 s".
    ///
    /// - Parameters:
    ///   - output: The output's name.
    ///   - size: The written image's width and height.
    /// - Returns: The line.
    public func summary(output: String, size: (width: Int, height: Int)) -> String {
        let skipped = skippedInputs == 0 ? "" : ", \(skippedInputs) input\(skippedInputs == 1 ? "" : "s") skipped"
        return String(
            format: "%@: %dx%d, %d of %d frames merged (%@, align %@)%@ in %.2f s", output, size.width, size.height,
            usedFrames, frames.count, merge.rawValue, align.rawValue, skipped, timings.total ?? 0)
    }
}

/// What a raw burst's report adds (``StackReport/raw``). Homographies in `frames` are in
/// photosites; local fields and noise sigma are in the planes' cells and 16-bit units.
public struct RawReport: Codable, Sendable, Equatable {
    /// The reference's container ("DNG 1.4", "NEF"...).
    public var container: String
    /// The colour filter, e.g. "RGGB".
    public var cfa: String
    /// The frames' noise model (variance = scale x + offset per colour, x in 0...1).
    public var noise: NoiseModel
    /// Where it came from: the reference's NoiseProfile, or estimated from its samples.
    public var noiseSource: String
    /// The merged mosaic's NoiseProfile (the frames' divided by the frames merged; the spatial
    /// denoise lowers it further where it smoothed, which the profile does not claim).
    public var mergedNoise: NoiseModel?
    /// The spatial denoise's strength (``StackOptions/rawDenoise``), nil when the planes were not
    /// denoised.
    public var denoise: Float?
    /// The merged mosaic's levels (scaled to 16 bits).
    public var blackLevels: [Float]
    public var whiteLevel: Float
}
