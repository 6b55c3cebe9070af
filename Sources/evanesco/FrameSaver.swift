import ArgumentParser
import EvanescoCore
import EvanescoIO
import EvanescoStack
import Foundation

/// The --report JSON: ../shared/bench's report schema (frames[].index, homography) plus
/// residuals, status, timings and the merge used.
enum StackReport {
    struct Document: Encodable {
        var tool = "evanesco stack"
        var inputs: [String]
        var output: String
        var merge: String
        var align: String
        var reference: Int
        var width: Int
        var height: Int
        var noiseSigma: Float?
        var framesUsed: Int
        var frames: [FrameReport]
        var skippedInputs: [[String: String]]
        var timesS: [String: Double]
        enum CodingKeys: String, CodingKey {
            case tool, inputs, output, merge, align, reference, width, height, noiseSigma = "noise_sigma", framesUsed = "frames_used", frames
            case skippedInputs = "skipped_inputs", timesS = "times_s"
        }
    }

    static func write(_ r: StackResult, timings: [String: Double], skipped: [(String, String)], inputs: [String], output: String, to path: String, overwrite: Bool) throws {
        let doc = Document(inputs: inputs, output: output, merge: r.merge.rawValue, align: r.align.rawValue, reference: r.referenceIndex,
                           width: r.image.width, height: r.image.height, noiseSigma: r.noiseSigma, framesUsed: r.usedFrames,
                           frames: r.frames, skippedInputs: skipped.map { ["input": $0.0, "reason": $0.1] },
                           timesS: timings.mapValues { ($0 * 1000).rounded() / 1000 })
        let enc = JSONEncoder()
        enc.outputFormatting = [.prettyPrinted, .sortedKeys]
        try AtomicOutput.write([UInt8](try enc.encode(doc)), to: path, overwrite: overwrite)
    }
}

/// --save-frames: the decoded frames and the aligned ones, as the tutorial's ImageSaver does.
enum FrameSaver {
    static func save(_ frames: [BurstFrame], _ r: StackResult, to dir: String, interpolation: Interpolation) throws -> String {
        let folder = (dir as NSString).appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        for (i, f) in frames.enumerated() {
            let img = f.image.uint8
            try ImageCodecs.write(.uint8(img), to: folder + String(format: "/decoded_%03d.png", i), options: WriteOptions(pngCompression: 1))
            let rep = r.frames[i]
            guard rep.used, let rows = rep.homography else { continue }
            let warped = img.warped(by: Homography(rows: rows), width: img.width, height: img.height, interpolation: interpolation)
            try ImageCodecs.write(.uint8(warped.image), to: folder + String(format: "/aligned_%03d.png", i), options: WriteOptions(pngCompression: 1))
        }
        return folder
    }
}

/// Reads registrations in the report schema: {"frames": [{"index": k, "homography": [[...]] or null}]}.
enum GivenHomographies {
    struct Doc: Decodable { struct Frame: Decodable { var index: Int; var homography: [[Double]]? }; var frames: [Frame] }

    static func read(_ path: String, count: Int) throws -> [Homography?] {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let doc: Doc
        do { doc = try JSONDecoder().decode(Doc.self, from: data) } catch {
            throw ValidationError("\(path): not a report with frames[].index and frames[].homography (\(error.localizedDescription))")
        }
        var out = [Homography?](repeating: nil, count: count)
        for f in doc.frames where f.index >= 0 && f.index < count {
            guard let rows = f.homography else { continue }
            guard rows.count == 3, rows.allSatisfy({ $0.count == 3 }) else { throw ValidationError("\(path): frame \(f.index) has no 3x3 homography") }
            out[f.index] = Homography(rows: rows)
        }
        return out
    }
}
