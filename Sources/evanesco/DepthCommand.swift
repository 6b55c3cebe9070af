import ArgumentParser
import EvanescoCore
import EvanescoIO
import Foundation

struct Depth: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Read the depth/disparity map and mattes of a portrait photo.",
        discussion: """
        Reads iPhone HEIC (depth item, mattes, gain map), iPhone JPEG (MPF images), Google GDepth
        (XMP + extended XMP) and Android Dynamic Depth / GContainer JPEGs.
        Examples:
          evanesco depth info IMG_0001.HEIC --json
          evanesco depth extract IMG_0001.HEIC -o depth.pfm --as depth
          evanesco depth extract IMG_0001.HEIC -o matte.png --aux portrait
        """,
        subcommands: [DepthInfo.self, DepthExtract.self])
}

extension GDepthPolarity: ExpressibleByArgument {}
extension DepthKind: ExpressibleByArgument {}

/// Options shared by the depth commands.
struct DepthSourceOptions: ParsableArguments {
    @Option(help: "GDepth polarity: spec (0 = near, Google's published encoding), near-high, or auto (spec unless the file's GFocus focal point fits the other reading). (default: auto)")
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
        abstract: "List the depth map (kind, size, range, accuracy, calibration) and every auxiliary image.")

    @Argument(help: "Portrait photo (HEIC or JPEG).") var photo: String
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var source: DepthSourceOptions

    func run() throws {
        try reportingErrors {
            var o = source.readOptions
            o.decodePhoto = false
            o.requireDepth = false
            let p = try DepthReader.read(photo, options: o)
            let info = DepthReport.describe(p)
            if json {
                print(try DepthReport.json(info))
            } else {
                print(DepthReport.text(info))
            }
            if p.depth == nil { throw DepthError.noDepth(path: photo, found: p.auxiliary.map { $0.type }) }
        }
    }
}

struct DepthExtract: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "extract",
        abstract: "Write the depth/disparity map (or an auxiliary image) as a file.",
        discussion: """
        Output by extension: .pfm and .tif hold the float values (holes are NaN); .png holds 16 bits,
        the finite range mapped to 1...65535 with 0 for holes (the range is printed and goes to
        --report). --raw writes the stored samples in sensor orientation as an 8/16-bit PNG; when the
        map is an embedded PNG or JPEG and the output has that extension, its bytes are written
        unchanged. Mattes and gain maps (--aux) are written as 8-bit images.
        """)

    @Argument(help: "Portrait photo (HEIC or JPEG).") var photo: String
    @Option(name: .shortAndLong, help: "Output file (.png, .pfm, .tif; .jpg only with --raw of a JPEG-stored map or aux).") var output: String
    @Option(name: .customLong("as"), help: "Convert to disparity or depth (1/x). Default: as stored.") var kind: DepthKind?
    @Option(help: "Extract an auxiliary image instead: depth, portrait, skin, hair, teeth, glasses, sky, gainmap, confidence, original.") var aux: String?
    @Flag(help: "Normalise the finite range to 0...1 (.pfm/.tif).") var normalize = false
    @Flag(help: "Stored samples, in sensor orientation.") var raw = false
    @Flag(help: "Overwrite an existing output.") var force = false
    @Option(help: "Write a JSON report (kind, range, mapping, source).") var report: String?
    @OptionGroup var source: DepthSourceOptions

    func validate() throws {
        if let aux, AuxiliaryKind(rawValue: aux) == nil || aux == "other" {
            throw ValidationError("--aux must be one of: \(AuxiliaryKind.allCases.filter { $0 != .other }.map(\.rawValue).joined(separator: ", "))")
        }
        if raw && (kind != nil || normalize) { throw ValidationError("--raw writes stored samples; it cannot be combined with --as or --normalize") }
    }

    func run() throws {
        try reportingErrors {
            var o = source.readOptions
            o.decodePhoto = false
            o.sensorOrientation = raw
            let auxKind = aux.flatMap(AuxiliaryKind.init(rawValue:))
            let wantsMap = auxKind == nil || auxKind == .depth || auxKind == .disparity
            o.requireDepth = wantsMap
            if let auxKind, !wantsMap { o.decodeAuxiliary = [auxKind] }
            let p = try DepthReader.read(photo, options: o)
            let ext = URL(fileURLWithPath: output).pathExtension.lowercased()
            var fields: [String: Any] = ["input": photo, "output": output]
            if !wantsMap, let auxKind {
                guard let a = p.auxiliary(auxKind) else {
                    throw DepthError.auxiliaryNotFound(path: photo, kind: auxKind.rawValue, available: p.auxiliary.map { $0.kind.rawValue })
                }
                if raw, let bytes = a.embeddedBytes, let f = a.embeddedFormat, ImageFormat.forOutput(extension: ext) == f {
                    try AtomicOutput.write(bytes, to: output, overwrite: force)
                } else {
                    try ImageCodecs.write(a.image, to: output, options: WriteOptions(overwrite: force))
                }
                fields["auxiliary"] = ["kind": a.kind.rawValue, "type": a.type, "width": a.image.width, "height": a.image.height, "source": a.source]
            } else {
                guard var d = p.depth else { throw DepthError.noDepth(path: photo, found: p.auxiliary.map { $0.type }) }
                if raw {
                    if let bytes = d.embeddedBytes, let f = d.embeddedFormat, ImageFormat.forOutput(extension: ext) == f {
                        try AtomicOutput.write(bytes, to: output, overwrite: force)
                    } else {
                        guard ext == "png" || ext == "tif" || ext == "tiff" else {
                            throw ValidationError("--raw writes the stored samples: name the output .png or .tif")
                        }
                        try ImageCodecs.write(d.stored, to: output, options: WriteOptions(overwrite: force))
                    }
                    fields["stored"] = d.storedFormat
                } else {
                    if let kind { d = d.converted(to: kind) }
                    let r = d.finiteRange
                    var map = d.map
                    if normalize, let r {
                        let lo = r.min, span = max(r.max - r.min, .leastNormalMagnitude)
                        map.samples.withUnsafeMutableBufferPointer { m in for i in 0..<m.count where m[i].isFinite { m[i] = (m[i] - lo) / span } }
                    }
                    switch ext {
                    case "pfm":
                        try AtomicOutput.write(PFM.encode(map), to: output, overwrite: force)
                    case "tif", "tiff":
                        try ImageCodecs.write(.float32(map), to: output, options: WriteOptions(bitDepth: 32, overwrite: force))
                    case "png":
                        guard let r else { throw DepthError.badMetadata(path: photo, detail: "every value of the map is a hole") }
                        let lo = r.min, span = max(r.max - r.min, .leastNormalMagnitude)
                        let q = Image<UInt16>(width: map.width, height: map.height, channels: 1) { dst in
                            map.samples.withUnsafeBufferPointer { s in
                                for i in 0..<s.count { dst[i] = s[i].isFinite ? UInt16(1 + ((s[i] - lo) / span * 65534).rounded()) : 0 }
                            }
                        }
                        try ImageCodecs.write(.uint16(q), to: output, options: WriteOptions(bitDepth: 16, overwrite: force))
                        fields["png16Mapping"] = "value = \(lo) + (v - 1) / 65534 * \(r.max - r.min); v = 0 is a hole"
                        print("\(output): 16-bit PNG, \(d.kind.rawValue) \(lo)...\(r.max) \(d.units) mapped to 1...65535 (0 = hole)")
                    default:
                        throw ValidationError("name the output .pfm, .tif or .png (or use --raw for the stored samples)")
                    }
                    fields["kind"] = d.kind.rawValue
                    fields["units"] = d.units
                    fields["range"] = r.map { [Double($0.min), Double($0.max)] } ?? []
                    fields["normalized"] = normalize
                    fields["holes"] = d.holeCount
                }
                fields["width"] = d.width; fields["height"] = d.height; fields["source"] = d.source
                fields["orientationApplied"] = d.orientationApplied.rawValue
            }
            for w in p.warnings { Diagnostics.warning("\(photo): \(w)") }
            if let report {
                let data = try JSONSerialization.data(withJSONObject: fields, options: [.prettyPrinted, .sortedKeys])
                try AtomicOutput.write(Array(data) + [10], to: report, overwrite: true)
            }
        }
    }
}

/// The `depth info` description, shared with `portrait --report`.
enum DepthReport {
    static func describe(_ p: DepthPhoto) -> [String: Any] {
        var out: [String: Any] = ["file": p.path, "format": p.format.name, "width": p.width, "height": p.height,
                                  "orientation": p.orientation.rawValue, "orientationMeaning": p.orientation.summary,
                                  "hasDepth": p.depth != nil, "warnings": p.warnings]
        if let d = p.depth {
            var dd: [String: Any] = ["kind": d.kind.rawValue, "width": d.width, "height": d.height, "units": d.units,
                                     "storedFormat": d.storedFormat, "source": d.source, "encoding": d.encoding.summary,
                                     "holes": d.holeCount, "rangeNotes": d.rangeNotes,
                                     "orientationApplied": d.orientationApplied.rawValue]
            if let r = d.finiteRange { dd["range"] = [Double(r.min), Double(r.max)] }
            if let r = d.declaredRange { dd["declaredRange"] = [r.lowerBound, r.upperBound] }
            if let a = d.accuracy { dd["accuracy"] = a.rawValue }
            if let f = d.filtered { dd["filtered"] = f }
            if let q = d.quality { dd["quality"] = q }
            if let c = d.calibration, let data = try? JSONEncoder().encode(c), let obj = try? JSONSerialization.jsonObject(with: data) {
                dd["calibration"] = obj
            }
            out["depth"] = dd
        }
        out["auxiliary"] = p.auxiliary.map { a -> [String: Any] in
            ["kind": a.kind.rawValue, "type": a.type, "width": a.width, "height": a.height, "source": a.source]
        }
        return out
    }

    static func json(_ obj: [String: Any]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: obj, options: [.prettyPrinted, .sortedKeys]), as: UTF8.self)
    }

    static func text(_ info: [String: Any]) -> String {
        var lines = ["file: \(info["file"]!)", "format: \(info["format"]!), \(info["width"]!)x\(info["height"]!), orientation \(info["orientation"]!)"]
        if let d = info["depth"] as? [String: Any] {
            lines.append("depth: \(d["kind"]!) \(d["width"]!)x\(d["height"]!), \(d["storedFormat"]!), from \(d["source"]!)")
            if let r = d["range"] as? [Double] { lines.append("  range: \(r[0]) ... \(r[1]) \(d["units"]!)") }
            lines.append("  encoding: \(d["encoding"]!)")
            for n in d["rangeNotes"] as? [String] ?? [] { lines.append("  \(n)") }
            if let a = d["accuracy"] { lines.append("  accuracy: \(a)") }
            if let f = d["filtered"] { lines.append("  filtered: \(f)") }
            if let q = d["quality"] { lines.append("  quality: \(q)") }
            if let c = d["calibration"] as? [String: Any] {
                lines.append("  calibration: " + c.keys.sorted().map { "\($0)=\(c[$0]!)" }.joined(separator: "; ").replacingOccurrences(of: "\n", with: ""))
            }
            lines.append("  holes: \(d["holes"]!)")
        } else {
            lines.append("depth: none")
        }
        for a in info["auxiliary"] as? [[String: Any]] ?? [] {
            lines.append("auxiliary: \(a["kind"]!) \(a["width"]!)x\(a["height"]!) (\(a["type"]!), \(a["source"]!))")
        }
        for w in info["warnings"] as? [String] ?? [] { lines.append("warning: \(w)") }
        return lines.joined(separator: "\n")
    }
}
