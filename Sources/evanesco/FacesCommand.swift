import ArgumentParser
import EvanescoCore
import EvanescoDepth
import EvanescoIO
import Foundation
import EvanescoFaces

struct Faces: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "faces",
        abstract: "Find faces with an OpenCV cascade (Haar or LBP XML), in Swift.",
        discussion: """
            The cascade defaults to Debian's opencv-data (apt-get install opencv-data): \
            /usr/share/opencv4/haarcascades/haarcascade_frontalface_default.xml.

            EXAMPLES:
              evanesco faces group.jpg --json
              evanesco faces group.jpg --cascade my-cascade.xml --min-neighbors 3
            """)

    @Argument(help: "Image file.") var image: String
    @Option(help: "Cascade XML file.") var cascade: String?
    @Option(help: "Scale step between searched sizes, 1.01...4.") var scaleFactor: Double = 1.1
    @Option(help: "Raw detections a face needs.") var minNeighbors: Int = 5
    @Option(help: "Smallest face, in pixels of the image scaled to 640 on its long side.") var minSize: Int = 40
    @Option(help: "Search the image scaled to this long side (0: as is).") var workingSize: Int = 640
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        if !(scaleFactor >= 1.01 && scaleFactor <= 4) {
            throw ValidationError("--scale-factor must be within 1.01...4 (smaller steps search thousands of sizes)")
        }
        if minNeighbors < 0 { throw ValidationError("--min-neighbors must be >= 0") }
    }

    func run() throws {
        try reportingErrors {
            let c = try CascadeClassifier.load(cascade)
            let img = try ImageCodecs.read(image).image
            var f = FaceFinder(cascade: c)
            f.scaleFactor = scaleFactor
            f.minNeighbors = minNeighbors
            f.minSize = minSize
            f.workingSize = workingSize > 0 ? workingSize : max(img.width, img.height)
            let t0 = Date()
            let boxes = f.find(in: img)
            let ms = Date().timeIntervalSince(t0) * 1000
            if json {
                try StandardOutput.line(
                    ReportJSON.string(
                        FacesReport(
                            image: image, cascade: c.path, width: img.width, height: img.height,
                            milliseconds: ms, faces: boxes)))
            } else {
                if boxes.isEmpty { try StandardOutput.line("\(image): no face found") }
                for b in boxes {
                    try StandardOutput.line(
                        "\(image): face at \(b.x),\(b.y) size \(b.width)x\(b.height) (\(b.neighbors) detections)")
                }
            }
        }
    }
}

/// `evanesco faces --json`.
struct FacesReport: Encodable {
    var image: String
    var cascade: String
    var width: Int
    var height: Int
    var milliseconds: Double
    var faces: [DetectedBox]
}
