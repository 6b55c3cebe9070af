import EvanescoCore
import EvanescoIO
import EvanescoStack
import Foundation

/// --save-frames: the decoded frames and the aligned ones (the pixels the merge sampled), as
/// the tutorial's ImageSaver does.
enum FrameSaver {
    static func save(_ r: StackResult, to dir: String, interpolation: Interpolation) throws -> String {
        let folder = (dir as NSString).appendingPathComponent(UUID().uuidString)
        try AtomicOutput.makeFolder(folder)
        let frames = r.decodedFrames ?? []
        for (i, f) in frames.enumerated() {
            try ImageCodecs.write(f.image, to: folder + String(format: "/decoded_%03d.png", i), options: WriteOptions(compression: .fast))
            let rep = r.frames[i]
            guard rep.used, let h = rep.homography else { continue }
            let aligned = BurstStacker.aligned(f, homography: h, interpolation: interpolation, mergedFrames: r.usedFrames,
                                               local: i < r.localFields.count ? r.localFields[i] : nil)
            try ImageCodecs.write(aligned, to: folder + String(format: "/aligned_%03d.png", i), options: WriteOptions(compression: .fast))
        }
        return folder
    }
}
