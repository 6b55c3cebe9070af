import ArgumentParser
import EvanescoCore
import EvanescoIO
import Foundation

struct Depth: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "depth",
        abstract: "Read the depth/disparity map and mattes of a portrait photo.",
        discussion: """
            Reads iPhone HEIC (depth item, mattes, gain map), iPhone JPEG (MPF images), Google GDepth \
            (XMP + extended XMP) and Android Dynamic Depth / GContainer JPEGs.

            EXAMPLES:
              evanesco depth info IMG_0001.HEIC --json
              evanesco depth extract IMG_0001.HEIC -o depth.pfm --as depth
              evanesco depth extract IMG_0001.HEIC -o matte.png --aux portrait
            """,
        subcommands: [DepthInfo.self, DepthExtract.self])
}

/// Options shared by the depth commands.
struct DepthSourceOptions: ParsableArguments {
    @Option(
        help:
            ArgumentHelp(
                "GDepth polarity: spec (0 = near, Google's published encoding), near-high, or auto (spec unless the "
                    + "file's GFocus focal point fits the other reading). (default: auto)")
    )
    var gdepthPolarity: GDepthPolarity = .auto

    /// Read options with this polarity (the rest at their defaults).
    var readOptions: DepthReadOptions {
        var o = DepthReadOptions()
        o.gdepthPolarity = gdepthPolarity
        return o
    }
}

struct DepthInfo: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "List the depth map (kind, size, range, accuracy, calibration) and every auxiliary image.",
        discussion: """
            --json prints the same facts with snake_case keys (has_depth, depth.stored_format, ...).

            EXAMPLES:
              evanesco depth info IMG_0001.HEIC
              evanesco depth info portrait.jpg --json
            """)

    @Argument(help: "Portrait photo (HEIC or JPEG).") var photo: String
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var source: DepthSourceOptions

    func run() throws {
        try reportingErrors {
            var o = source.readOptions
            o.decodePhoto = false
            o.requireDepth = false
            let p = try DepthReader.read(photo, options: o)
            let summary = DepthSummary(p)
            try StandardOutput.line(json ? try ReportJSON.string(summary) : summary.text)
            if p.depth == nil { throw DepthError.noDepth(path: photo, found: p.auxiliary.map { $0.type }) }
        }
    }
}
