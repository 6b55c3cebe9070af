import ArgumentParser
import EvanescoCore
import EvanescoIO
import Foundation

struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract:
            "Describe an image or video: format, size, bit depth, orientation, metadata, depth and auxiliary images.",
        discussion: """
            Reads only the headers; --json prints the same fields with snake_case keys.

            EXAMPLES:
              evanesco info IMG_0001.HEIC
              evanesco info clip.mp4 --json
            """)

    @Argument(help: "Image (JPEG, PNG, HEIC, TIFF), camera raw (DNG, CR2, CR3, NEF, ARW, ...) or video file.")
    var file: String

    @Flag(help: "Print JSON instead of text.")
    var json = false

    func run() throws {
        try reportingErrors {
            var info = FileInfo(file: file)
            do {
                let d = try ImageCodecs.probe(file)
                let o = d.metadata.orientation
                let shown =
                    (o.swapsAxes && !d.metadata.orientationApplied)
                    ? (d.storedHeight, d.storedWidth) : (d.storedWidth, d.storedHeight)
                info.format = d.format.name
                info.width = shown.0
                info.height = shown.1
                info.storedWidth = d.storedWidth
                info.storedHeight = d.storedHeight
                info.bitDepth = d.image.bitDepth
                info.channels = d.image.channels
                info.orientation = o.rawValue
                info.orientationMeaning = o.summary
                info.orientationAppliedByContainer = d.metadata.orientationApplied
                info.exif = d.metadata.exif != nil
                info.iccProfileBytes = d.metadata.icc?.count ?? 0
                info.xmp = d.metadata.xmp != nil
                info.hasDepth = d.auxiliary.contains {
                    ["depth", "disparity", "gdepth", "dynamic-depth-container"].contains($0)
                }
                info.auxiliary = d.auxiliary
                if d.format == .raw { info.raw = RawInfo(try RawCodec.probe(path: file)) }
            } catch ImageIOError.unsupportedFormat(let path, let name)
                where name.contains("video") || name.contains("ISO media")
            {
                let v = try VideoIO.probe(path)
                info.format = "video (\(name))"
                info.width = v.width
                info.height = v.height
                info.frames = v.frameCount
                info.framesPerSecond = v.framesPerSecond
                info.rotation = v.rotationDegrees
            }
            try StandardOutput.line(json ? try ReportJSON.string(info) : info.text)
        }
    }
}

/// What `evanesco info` prints (`--json`: snake_case keys; absent fields are left out).
struct FileInfo: Encodable {
    var file: String
    var format: String?
    var width: Int?
    var height: Int?
    var storedWidth: Int?
    var storedHeight: Int?
    var bitDepth: Int?
    var channels: Int?
    var orientation: Int?
    var orientationMeaning: String?
    var orientationAppliedByContainer: Bool?
    var exif: Bool?
    var iccProfileBytes: Int?
    var xmp: Bool?
    var hasDepth: Bool?
    var auxiliary: [String]?
    var frames: Int?
    var framesPerSecond: Double?
    var rotation: Int?
    var raw: RawInfo?

    var text: String {
        var lines = ["file: \(file)"]
        func add(_ k: String, _ v: Any?) { if let v { lines.append("\(k): \(v)") } }
        add("format", format)
        add("width", width)
        add("height", height)
        add("stored width", storedWidth)
        add("stored height", storedHeight)
        add("bit depth", bitDepth)
        add("channels", channels)
        add("orientation", orientation.map { "\($0) (\(orientationMeaning ?? ""))" })
        add("orientation applied by container", orientationAppliedByContainer)
        add("exif", exif)
        add("icc profile bytes", iccProfileBytes)
        add("xmp", xmp)
        add("has depth", hasDepth)
        add("auxiliary", auxiliary.map { $0.isEmpty ? "none" : $0.joined(separator: ", ") })
        add("frames", frames)
        add("frames per second", framesPerSecond)
        add("rotation", rotation)
        lines += raw?.lines ?? []
        return lines.joined(separator: "\n")
    }
}
