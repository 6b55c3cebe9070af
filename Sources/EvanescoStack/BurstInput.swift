import Dispatch
import EvanescoCore
import EvanescoIO
import Foundation

/// Turns command-line inputs into decoded frames: image files, folders of images (sorted by
/// name), or one video file (N evenly spaced frames through ffmpeg). Files that cannot be decoded
/// are reported and skipped.
public enum BurstInput {
    public struct Loaded: Sendable {
        public var frames: [BurstFrame]
        /// (input, reason) for every input left out.
        public var skipped: [(String, String)]
    }

    /// Expands folders into their files, sorted by name (hidden files ignored).
    public static func expand(_ inputs: [String]) throws -> [String] {
        var out: [String] = []
        for input in inputs {
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: input, isDirectory: &isDir) else { throw ImageIOError.fileNotFound(path: input) }
            if isDir.boolValue {
                let names = try FileManager.default.contentsOfDirectory(atPath: input).filter { !$0.hasPrefix(".") }.sorted()
                let files = names.map { (input as NSString).appendingPathComponent($0) }.filter {
                    var d: ObjCBool = false
                    return FileManager.default.fileExists(atPath: $0, isDirectory: &d) && !d.boolValue
                }
                if files.isEmpty { throw ImageIOError.unreadable(path: input, reason: "the folder holds no files") }
                out += files
            } else {
                out.append(input)
            }
        }
        return out
    }

    /// True when the file's bytes say video container rather than an image.
    public static func isVideo(_ path: String) -> Bool {
        guard let h = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? h.close() }
        let head = [UInt8](h.readData(ofLength: 32))
        if case .other(let name) = FormatSniffer.sniff(head) {
            return name.contains("video") || name.contains("ISO media") || name.contains("Matroska")
        }
        return false
    }

    public static func load(_ inputs: [String], videoFrames: Int = 20, progress: (@Sendable (StackProgress) -> Void)? = nil) throws -> Loaded {
        let files = try expand(inputs)
        if files.count == 1, isVideo(files[0]) {
            var frames: [BurstFrame] = []
            let start = Date()
            let info = try VideoIO.probe(files[0])
            let total = min(videoFrames, info.frameCount)
            try VideoIO.decodeFrames(files[0], selection: .evenlySpaced(videoFrames)) { index, img in
                frames.append(BurstFrame(name: "\((files[0] as NSString).lastPathComponent)#\(index)", image: .uint8(img)))
                progress?(StackProgress(stage: "decode", done: frames.count, total: total, elapsed: Date().timeIntervalSince(start)))
            }
            return Loaded(frames: frames, skipped: [])
        }
        let results = LockedBox([Result<DecodedImage, Error>?](repeating: nil, count: files.count))
        let start = Date()
        let done = LockedBox(0)
        // Two decoders at a time: TurboJPEG is single-threaded, and more would only add memory.
        let next = LockedBox(0)
        DispatchQueue.concurrentPerform(iterations: min(2, files.count)) { _ in
            while true {
                let i = next.update { v -> Int in defer { v += 1 }; return v }
                guard i < files.count else { break }
                let r = Result { try ImageCodecs.read(files[i]) }
                results.update { $0[i] = r }
                let d = done.update { $0 += 1; return $0 }
                progress?(StackProgress(stage: "decode", done: d, total: files.count, elapsed: Date().timeIntervalSince(start)))
            }
        }
        var frames: [BurstFrame] = [], skipped: [(String, String)] = []
        for (i, r) in results.value.enumerated() {
            switch r! {
            case .success(let d): frames.append(BurstFrame(name: files[i], image: d.image, metadata: d.metadata))
            case .failure(let e): skipped.append((files[i], String(describing: e)))
            }
        }
        return Loaded(frames: frames, skipped: skipped)
    }
}
