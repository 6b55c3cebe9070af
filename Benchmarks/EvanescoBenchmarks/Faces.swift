import EvanescoCore
import EvanescoFaces
import EvanescoIO
import Foundation

/// OpenCV's `detectMultiScale` in a Python process that detects once per line it reads (the
/// anchor_backdrop.py call), so its runs alternate with ours in one benchmark.
final class OpenCVCascade {
    private let process = Process()
    private let input = Pipe(), output = Pipe()

    init(cascade: String, grey: String) throws {
        let script = """
            import sys, cv2
            cc = cv2.CascadeClassifier(sys.argv[1]); g = cv2.imread(sys.argv[2], cv2.IMREAD_GRAYSCALE)
            for line in sys.stdin:
                print(len(cc.detectMultiScale(g, scaleFactor=1.1, minNeighbors=5, minSize=(40, 40))), flush=True)
            """
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script, cascade, grey]
        process.standardInput = input
        process.standardOutput = output
        try process.run()
    }

    /// One detection: the faces OpenCV found.
    func detect() -> Int {
        input.fileHandleForWriting.write(Data("\n".utf8))
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let d = output.fileHandleForReading.availableData
            if d.isEmpty { fatalError("the OpenCV process ended") }
            line += d
        }
        return Int(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    deinit {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}

extension Bench {
    /// The cascade scan against OpenCV's on the same grey pictures: each TrueDepth colour shot as
    /// FaceFinder prepares it (Rec.601 grey, area-resized to 640, equalised), HAAR and LBP frontal
    /// cascades, the backdrop's settings (scale 1.1, 5 neighbours, 40 px).
    func faces() throws {
        let dir = shared + "/data/rgbd/truedepth-frames"
        let scratch = NSTemporaryDirectory() + "/evanesco-faces-\(getpid())"
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        for name in ["haarcascade_frontalface_default", "lbpcascade_frontalface_improved"] {
            let path = shared + "/data/faces/cascades/\(name).xml"
            let cascade = try CascadeClassifier.load(path)
            for shot in ["heic_depth_data", "heic_face_data", "jpeg_depth_data"] {
                let grey = try ImageCodecs.read("\(dir)/\(shot)_color.jpg").image.uint8.luma(.rec601)
                let s = 640 / Double(max(grey.width, grey.height))
                let small = grey.areaResized(
                    width: Int((Double(grey.width) * s).rounded()), height: Int((Double(grey.height) * s).rounded())
                ).equalized()
                let file = "\(scratch)/\(shot).png"
                try ImageCodecs.write(.uint8(small), to: file, options: WriteOptions(overwrite: true))
                let opencv = try OpenCVCascade(cascade: path, grey: file)
                var ours = 0, theirs = 0
                compare(
                    "faces \(name.split(separator: "_")[0]) \(shot)", "CascadeClassifier",
                    { ours = cascade.detect(small, scaleFactor: 1.1, minNeighbors: 5, minSize: 40).count },
                    "OpenCV detectMultiScale", { theirs = opencv.detect() })
                print("  faces found: ours \(ours), OpenCV \(theirs)")
            }
        }
    }
}
