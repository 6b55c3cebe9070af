import ArgumentParser
import EvanescoCore
import EvanescoIO
import Foundation

struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Describe an image or video: format, size, bit depth, orientation, metadata, depth and auxiliary images.",
        discussion: "Reads only the headers. Example: evanesco info IMG_0001.HEIC --json")

    @Argument(help: "Image (JPEG, PNG, HEIC, TIFF) or video file.")
    var file: String

    @Flag(help: "Print JSON instead of text.")
    var json = false

    func run() throws {
        try reportingErrors {
            var fields: [(String, Any)] = [("file", file)]
            do {
                let d = try ImageCodecs.probe(file)
                let o = d.metadata.orientation
                let shown = (o.swapsAxes && !d.metadata.orientationApplied) ? (d.storedHeight, d.storedWidth) : (d.storedWidth, d.storedHeight)
                fields += [("format", d.format.name), ("width", shown.0), ("height", shown.1),
                           ("storedWidth", d.storedWidth), ("storedHeight", d.storedHeight),
                           ("bitDepth", d.image.bitDepth), ("channels", d.image.channels),
                           ("orientation", o.rawValue), ("orientationMeaning", o.summary),
                           ("orientationAppliedByContainer", d.metadata.orientationApplied),
                           ("exif", d.metadata.exif != nil), ("iccProfileBytes", d.metadata.icc?.count ?? 0),
                           ("xmp", d.metadata.xmp != nil),
                           ("hasDepth", d.auxiliary.contains { ["depth", "disparity", "gdepth", "dynamic-depth-container"].contains($0) }),
                           ("auxiliary", d.auxiliary)]
            } catch ImageIOError.unsupportedFormat(let path, let name) where name.contains("video") || name.contains("ISO media") {
                let v = try VideoIO.probe(path)
                fields += [("format", "video (\(name))"), ("width", v.width), ("height", v.height),
                           ("frames", v.frameCount), ("framesPerSecond", v.framesPerSecond), ("rotation", v.rotationDegrees)]
            }
            if json {
                let dict = Dictionary(uniqueKeysWithValues: fields)
                let data = try JSONSerialization.data(withJSONObject: dict, options: [.prettyPrinted, .sortedKeys])
                print(String(decoding: data, as: UTF8.self))
            } else {
                for (k, v) in fields {
                    let value = (v as? [String]).map { $0.isEmpty ? "none" : $0.joined(separator: ", ") } ?? "\(v)"
                    print("\(k): \(value)")
                }
            }
        }
    }
}
