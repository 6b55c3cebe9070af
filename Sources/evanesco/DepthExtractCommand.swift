import ArgumentParser
import EvanescoCore
import EvanescoIO
import Foundation

struct DepthExtract: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "extract",
        abstract: "Write the depth/disparity map (or an auxiliary image) as a file.",
        discussion: """
            Output by extension: .pfm and .tif hold the float values (holes are NaN); .png holds 16 bits, \
            the finite range mapped to 1...65535 with 0 for holes (the range is printed and goes to \
            --report). --raw writes the stored samples in sensor orientation as an 8/16-bit PNG; when the \
            map is an embedded PNG or JPEG and the output has that extension, its bytes are written \
            unchanged. Mattes and gain maps (--aux) are written as 8-bit images.

            EXAMPLES:
              evanesco depth extract IMG_0001.HEIC -o depth.pfm --as depth
              evanesco depth extract IMG_0001.HEIC -o matte.png --aux portrait
              evanesco depth extract portrait.jpg -o stored.png --raw
            """)

    @Argument(help: "Portrait photo (HEIC or JPEG).") var photo: String
    @Option(
        name: .shortAndLong, help: "Output file (.png, .pfm, .tif; .jpg only with --raw of a JPEG-stored map or aux).")
    var output: String
    @Option(name: .customLong("as"), help: "Convert to disparity or depth (1/x). Default: as stored.") var kind:
        DepthKind?
    @Option(
        help:
            ArgumentHelp(
                "Extract an auxiliary image instead: depth, portrait, skin, hair, teeth, glasses, sky, gainmap, "
                    + "confidence, original.")
    ) var aux: String?
    @Flag(help: "Normalise the finite range to 0...1 (.pfm/.tif).") var normalize = false
    @Flag(help: "Stored samples, in sensor orientation.") var raw = false
    @OptionGroup var lossless: LosslessOptions
    @Flag(help: "Overwrite an existing output.") var force = false
    @Option(help: "Write a JSON report (kind, range, mapping, source).") var report: String?
    @OptionGroup var source: DepthSourceOptions

    func validate() throws {
        if let aux, AuxiliaryKind(rawValue: aux) == nil || aux == "other" {
            throw ValidationError(
                "--aux must be one of: "
                    + "\(AuxiliaryKind.allCases.filter { $0 != .other }.map(\.rawValue).joined(separator: ", "))"
            )
        }
        if raw && (kind != nil || normalize) {
            throw ValidationError("--raw writes stored samples; it cannot be combined with --as or --normalize")
        }
    }

    func run() throws {
        try reportingErrors {
            try AtomicOutput.check(files: [output, report], inputs: [photo], overwrite: force)
            var o = source.readOptions
            o.decodePhoto = false
            o.sensorOrientation = raw
            let auxKind = aux.flatMap(AuxiliaryKind.init(rawValue:))
            let wantsMap = auxKind == nil || auxKind == .depth || auxKind == .disparity
            o.requireDepth = wantsMap
            if let auxKind, !wantsMap { o.decodeAuxiliary = [auxKind] }
            let p = try DepthReader.read(photo, options: o)
            let ext = URL(fileURLWithPath: output).pathExtension.lowercased()
            var fields = ExtractReport(input: photo, output: output)
            if !wantsMap, let auxKind {
                guard let a = p.auxiliary(auxKind) else {
                    throw DepthError.auxiliaryNotFound(
                        path: photo, kind: auxKind.rawValue, available: p.auxiliary.map { $0.kind.rawValue })
                }
                if raw, let bytes = a.embeddedBytes, let f = a.embeddedFormat,
                    ImageFormat.forOutput(extension: ext) == f
                {
                    try AtomicOutput.write(bytes, to: output, overwrite: force)
                } else {
                    try ImageCodecs.write(
                        a.image, to: output, options: WriteOptions(overwrite: force, compression: lossless.compression))
                }
                fields.auxiliary = DepthSummary.Auxiliary(
                    kind: a.kind, type: a.type, width: a.image.width, height: a.image.height, source: a.source)
            } else {
                guard let d = p.depth else { throw DepthError.noDepth(path: photo, found: p.auxiliary.map { $0.type }) }
                if raw {
                    if let bytes = d.embeddedBytes, let f = d.embeddedFormat, ImageFormat.forOutput(extension: ext) == f
                    {
                        try AtomicOutput.write(bytes, to: output, overwrite: force)
                    } else {
                        guard ext == "png" || ext == "tif" || ext == "tiff" else {
                            throw ValidationError("--raw writes the stored samples: name the output .png or .tif")
                        }
                        try ImageCodecs.write(
                            d.stored, to: output,
                            options: WriteOptions(overwrite: force, compression: lossless.compression))
                    }
                    fields.stored = d.storedFormat
                } else {
                    try writeMap(d, ext: ext, into: &fields)
                }
                fields.width = d.width
                fields.height = d.height
                fields.source = d.source
                fields.orientationApplied = d.orientationApplied.rawValue
            }
            for w in p.warnings { Diagnostics.warning("\(photo): \(w)") }
            if let report { try ReportFile.write(fields, to: report, overwrite: force) }
        }
    }

    /// Writes the map, converted and normalised as asked, in the format the output's name says.
    func writeMap(_ depth: DepthData, ext: String, into fields: inout ExtractReport) throws {
        let d = kind.map { depth.converted(to: $0) } ?? depth
        var r = d.finiteRange
        var map = d.map
        if normalize, let n = d.normalizedMap() {
            map = n.map
            // The PNG mapping and the report speak of the values written: 0...1 now.
            r = (min: 0, max: n.range.max > n.range.min ? 1 : 0)
        }
        switch ext {
        case "pfm":
            try AtomicOutput.write(PFM.encode(map), to: output, overwrite: force)
        case "tif", "tiff":
            try ImageCodecs.write(
                .float32(map), to: output,
                options: WriteOptions(bitDepth: 32, overwrite: force, compression: lossless.compression))
        case "png":
            let range = try DepthPNG.write(
                map, range: r, to: output, source: photo,
                options: WriteOptions(overwrite: force, compression: lossless.compression))
            fields.png16Mapping = DepthPNG.mapping(range: range)
            try StandardOutput.line(
                "\(output): 16-bit PNG, \(d.kind.rawValue) \(range.min)...\(range.max) \(d.units) mapped "
                    + "to 1...65535 (0 = hole)"
            )
        default:
            throw ValidationError(
                "name the output .pfm, .tif or .png (or use --raw for the stored samples)")
        }
        fields.kind = d.kind
        fields.units = d.units
        fields.range = r.map { [$0.min, $0.max] }
        fields.normalized = normalize
        fields.holes = d.holeCount
    }
}
