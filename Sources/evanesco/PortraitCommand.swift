import ArgumentParser
import EvanescoCore
import EvanescoDepth
import EvanescoIO
import Foundation

extension PortraitEffect: ExpressibleByArgument {}
extension MaskRefinement: ExpressibleByArgument {}
extension PhotoPoint: ExpressibleByArgument {}

struct Portrait: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "portrait",
        abstract: "Render a depth effect on a portrait photo: depth, mask, spotlight, color highlight or focal blur.",
        discussion: """
            The defaults are the "Image Depth Maps" tutorial's recipe: disparity normalised to 0...1 \
            (1 = nearest), mask slope 4 and width 0.1 around --focus, bicubic upscale, and the effect \
            rendered in linear light (as Core Image does). Beyond the tutorial: --focus-distance \
            focuses at a distance in metres (maps with absolute accuracy or metric units), \
            --focus-point at whatever is at a pixel of the upright photo (fractions such as 0.4,0.3 \
            are read as parts of the size), and --refine auto snaps the mask's edges to the portrait \
            matte when the file has one, else to the photo's edges (guided filter). The blur gathers \
            background colour only, so the subject does not bleed into it; --plain-blur turns that off.

            --effect lens renders a real lens's depth of field instead of the tutorial's masked blur: \
            every point becomes the aperture's shape (--blades, --blade-rotation) at its own circle of \
            confusion c = A * |d - focus| (d the normalised disparity), depth-ordered so a blurred \
            background stays behind the sharp subject and a blurred foreground spreads over it, in \
            linear light with clipped highlights boosted (--highlights) so bokeh stays bright. A is \
            --aperture (pixels; 40 at 12 MP by default, scaled with the photo) or comes from \
            --f-number (full-frame equivalent) through the file's calibration and absolute depth. The \
            portrait matte, when the file has one, sharpens the subject's edge.

            EXAMPLES:
              evanesco portrait photo.heic -o blur.jpg --effect blur --focus-point 0.5,0.45
              evanesco portrait photo.heic -o spot.jpg --effect spotlight --focus 0.8
              evanesco portrait photo.heic -o mask.png --effect mask --focus-distance 1.2
              evanesco portrait a.jpg --depth-map d.png -o b.jpg --focus 0.7 --refine auto
              evanesco portrait in.heic -o lens.jpg --effect lens --aperture 60 --blades 6
              evanesco portrait me.heic -o out.jpg --effect lens --f-number 2 --cat-eye 0.6
            """)

    @Argument(help: "Portrait photo with depth (HEIC or JPEG), or any photo with --depth-map.") var photo: String
    @Option(help: "A separate depth or disparity map for the photo (PNG, JPEG, TIFF or PFM, the photo's shape).")
    var depthMap: String?
    @Option(help: "What --depth-map holds: disparity (larger = nearer, as depth models and stereo give) or depth.")
    var depthKind: DepthKind = DepthReader.separateMapKind
    @Option(name: .shortAndLong, help: "Output image (.jpg, .png, .tif).") var output: String
    @Option(help: .portrait("effect")) var effect = PortraitSettings().effect
    @Option(help: .portrait("focus", showingDefault: true)) var focus: Float?
    @Option(help: .portrait("focusDistance")) var focusDistance: Double?
    @Option(help: .portrait("focusPoint")) var focusPoint: PhotoPoint?
    @Option(help: .portrait("slope")) var slope = PortraitSettings().slope
    @Option(help: .portrait("width")) var width = PortraitSettings().width
    @Option(help: .portrait("radius")) var radius = PortraitSettings().radius
    @Option(help: .portrait("levels")) var levels = PortraitSettings().levels
    @Option(help: .portrait("refine")) var refine = PortraitSettings().refine
    @Flag(inversion: .prefixedNo, help: .portrait("protectSubject")) var protectSubject = PortraitSettings()
        .protectSubject
    @Option(help: .portrait("aperture")) var aperture: Float?
    @Option(help: .portrait("fNumber")) var fNumber: Double?
    @Option(help: .portrait("blades")) var blades = PortraitSettings().shape.blades
    @Option(help: .portrait("bladeRotation")) var bladeRotation = PortraitSettings().shape.rotation
    @Option(help: .portrait("catEye")) var catEye = PortraitSettings().catEye
    @Option(help: .portrait("highlights")) var highlights = PortraitSettings().highlights
    @Option(help: ArgumentHelp(JPEGQuality.help)) var quality = JPEGQuality.rendered
    @OptionGroup var lossless: LosslessOptions
    @Option(help: "Also write the full-size mask as an 8-bit image.") var saveMask: String?
    @Option(help: "Write a JSON report (depth, focus, timings).") var report: String?
    @Flag(help: "Overwrite existing outputs.") var force = false
    @OptionGroup var source: DepthSourceOptions

    var settings: PortraitSettings {
        var s = PortraitSettings()
        s.effect = effect
        s.slope = slope
        s.width = width
        s.radius = radius
        s.levels = levels
        s.refine = refine
        s.protectSubject = protectSubject
        s.aperture = aperture
        s.fNumber = fNumber
        s.shape = ApertureShape(blades: blades, rotation: bladeRotation)
        s.catEye = catEye
        s.highlights = highlights
        if let d = focusDistance {
            s.focus = .distance(metres: d)
        } else if let p = focusPoint {
            s.focus = .point(p)
        } else {
            s.focus = .normalized(focus ?? Float(PortraitSettings.Limits.focus.defaultValue!))
        }
        return s
    }

    func validate() throws {
        if [focus != nil, focusDistance != nil, focusPoint != nil].filter({ $0 }).count > 1 {
            throw ValidationError("give only one of --focus, --focus-distance, --focus-point")
        }
        try checkQuality(quality)
        do { try settings.validate() } catch { throw ValidationError("\(Self.flag(error)): \(error)") }
    }

    /// The flag that a settings error names (the setting's declared key in kebab-case).
    static func flag(_ e: PortraitError) -> String {
        guard case .invalidSetting(let name, _) = e else { return "" }
        return PortraitSettings.flagsByName[name] ?? "--" + name.replacingOccurrences(of: " ", with: "-")
    }

    func run() throws {
        try reportingErrors {
            // Every output is checked before any work, so a refusal never leaves one of them written.
            try AtomicOutput.check(
                files: [report], images: [output, saveMask], inputs: [photo, depthMap].compactMap { $0 },
                overwrite: force)
            let renderer =
                try depthMap.map { try PortraitRenderer(DepthReader.read(photo: photo, depthMap: $0, kind: depthKind)) }
                ?? PortraitRenderer(contentsOf: photo, options: source.readOptions)
            for w in renderer.photo.warnings { Diagnostics.warning("\(photo): \(w)") }
            var r = try renderer.render(settings)
            try r.report.times.measure(\.encode) {
                try ImageCodecs.write(
                    r.image, to: output,
                    options: WriteOptions(
                        quality: quality, metadata: r.metadata, overwrite: force,
                        compression: lossless.compression))
                if let saveMask {
                    try ImageCodecs.write(
                        .uint8(DepthEffects.grey(r.mask, as: UInt8.self)), to: saveMask,
                        options: WriteOptions(overwrite: force, compression: lossless.compression))
                }
            }
            r.report.times = r.report.times.rounded
            if let report { try ReportFile.write(r.report, settings: settings, to: report, overwrite: force) }
            FileHandle.standardError.write(
                Data(
                    String(
                        format: "%@: %@ at focus %.3f (%@), %.0f%% of the photo in focus; %.2f s\n", output,
                        effect.rawValue, r.report.focus, r.report.focusFrom, 100 * r.report.mask.fractionOverHalf,
                        r.report.times.total ?? 0
                    ).utf8))
        }
    }
}
