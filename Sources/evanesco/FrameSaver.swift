import EvanescoCore
import EvanescoIO
import EvanescoStack
import Foundation

/// The stack's side outputs: --save-frames (the decoded frames and the aligned ones, the pixels
/// the merge sampled, as the tutorial's ImageSaver does) and --save-maps.
enum FrameSaver {
    static func save(_ r: StackResult, to dir: String, interpolation: Interpolation) throws -> String {
        let folder = (dir as NSString).appendingPathComponent(UUID().uuidString)
        try AtomicOutput.makeFolder(folder)
        let frames = r.decodedFrames ?? []
        for (i, f) in frames.enumerated() {
            try ImageCodecs.write(
                f.image, to: folder + String(format: "/decoded_%03d.png", i), options: WriteOptions(compression: .fast))
            let rep = r.frames[i]
            guard rep.used, let h = rep.homography else { continue }
            let aligned = BurstStacker.aligned(
                f, homography: h, interpolation: interpolation, mergedFrames: r.usedFrames,
                local: i < r.localFields.count ? r.localFields[i] : nil)
            try ImageCodecs.write(
                aligned, to: folder + String(format: "/aligned_%03d.png", i), options: WriteOptions(compression: .fast))
        }
        return folder
    }

    /// The per-pixel maps as pictures, and their legend as maps.json, into `dir` (made if missing).
    static func saveMaps(_ r: StackResult, to dir: String, overwrite: Bool) throws {
        guard let maps = r.maps else { return }
        try AtomicOutput.makeFolder(dir)
        for (name, picture) in maps.pictures() {
            try ImageCodecs.write(
                picture, to: (dir as NSString).appendingPathComponent(name),
                options: WriteOptions(overwrite: overwrite, compression: .fast))
        }
        try ReportFile.write(
            maps.legend(names: r.frames.map(\.source)), to: (dir as NSString).appendingPathComponent("maps.json"),
            overwrite: overwrite)
    }
}
