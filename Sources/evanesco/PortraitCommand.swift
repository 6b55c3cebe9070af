import ArgumentParser
import EvanescoCore
import EvanescoDepth
import EvanescoIO
import Foundation

enum PortraitEffect: String, ExpressibleByArgument, CaseIterable { case depth, mask, spotlight, color, blur }
enum MaskRefinement: String, ExpressibleByArgument, CaseIterable { case none, photo, matte, auto }

struct Portrait: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Render a depth effect on a portrait photo: depth, mask, spotlight, color highlight or focal blur.",
        discussion: """
        The defaults are the "Image Depth Maps" tutorial's recipe: disparity normalised to 0...1
        (1 = nearest), mask slope 4 and width 0.1 around --focus, bicubic upscale, and the effect
        rendered in linear light (as Core Image does). Better than the tutorial:
          --focus-distance 1.2     focus at 1.2 m (maps with absolute accuracy or metric units)
          --focus-point 1510,980   focus on what is at that pixel of the upright photo
                                   (fractions such as 0.4,0.3 are read as parts of the size)
          --refine auto            snap the mask's edges to the portrait matte when the file has
                                   one, else to the photo's edges (guided filter)
        The blur gathers background colour only (no subject fringe); --plain-blur turns that off.
        Examples:
          evanesco portrait IMG_0001.HEIC -o blur.jpg --effect blur --focus-point 0.5,0.45
          evanesco portrait IMG_0001.HEIC -o spot.jpg --effect spotlight --focus 0.8 --refine auto
        """)

    @Argument(help: "Portrait photo with depth (HEIC or JPEG).") var photo: String
    @Option(name: .shortAndLong, help: "Output image (.jpg, .png, .tif).") var output: String
    @Option(help: "depth, mask, spotlight, color or blur.") var effect: PortraitEffect = .spotlight
    @Option(help: "Focus as normalised disparity, 0 (farthest) ... 1 (nearest). (default: 0.5)") var focus: Float?
    @Option(help: "Focus distance in metres.") var focusDistance: Double?
    @Option(help: "Focus on the point X,Y of the upright photo (pixels, or fractions 0...1).") var focusPoint: String?
    @Option(help: "Mask slope s.") var slope: Float = 4
    @Option(help: "Mask width w (normalised disparity).") var width: Float = 0.1
    @Option(help: "Largest blur radius in pixels, for --effect blur.") var radius: Float = 15
    @Option(help: "Blur levels blended per pixel.") var levels: Int = 5
    @Option(help: "Mask upscaling: none (bicubic, the tutorial), photo, matte, auto.") var refine: MaskRefinement = .none
    @Flag(help: "Blur without protecting the subject (the tutorial's plain variable blur).") var plainBlur = false
    @Option(help: "JPEG quality.") var quality: Int = 92
    @Option(help: "Also write the full-size mask as an 8-bit image.") var saveMask: String?
    @Option(help: "Write a JSON report (depth, focus, timings).") var report: String?
    @Flag(help: "Overwrite existing outputs.") var force = false
    @OptionGroup var source: DepthSourceOptions

    func validate() throws {
        let n = [focus != nil, focusDistance != nil, focusPoint != nil].filter { $0 }.count
        if n > 1 { throw ValidationError("give only one of --focus, --focus-distance, --focus-point") }
        if let f = focus, !(0...1).contains(f) { throw ValidationError("--focus must be within 0...1 (normalised disparity, 1 = nearest)") }
        if let d = focusDistance, !(d > 0 && d.isFinite) { throw ValidationError("--focus-distance must be a positive number of metres") }
        if slope <= 0 || width < 0 { throw ValidationError("--slope must be > 0 and --width >= 0") }
        if !(radius > 0 && radius <= 500) { throw ValidationError("--radius must be within (0, 500] pixels") }
        if !(2...16).contains(levels) { throw ValidationError("--levels must be within 2...16") }
        if !(1...100).contains(quality) { throw ValidationError("--quality must be within 1...100") }
        if let p = focusPoint, Self.parsePoint(p) == nil { throw ValidationError("--focus-point must be X,Y (e.g. 1510,980 or 0.4,0.3)") }
    }

    static func parsePoint(_ s: String) -> (Double, Double, fractional: Bool)? {
        let parts = s.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        guard parts.count == 2, let x = Double(parts[0]), let y = Double(parts[1]), x >= 0, y >= 0 else { return nil }
        return (x, y, x <= 1 && y <= 1 && (parts[0].contains(".") || parts[1].contains(".")))
    }

    func run() throws {
        try reportingErrors {
            // Both outputs are checked before any work, so a refusal never leaves one of them written.
            for path in [output] + (saveMask.map { [$0] } ?? []) where !force && FileManager.default.fileExists(atPath: path) {
                throw ImageIOError.outputExists(path: path)
            }
            var times: [String: Double] = [:]
            let t0 = Date()
            func lap(_ name: String, _ start: Date) { times[name] = Date().timeIntervalSince(start) }

            var ts = Date()
            var o = source.readOptions
            if refine == .matte || refine == .auto { o.decodeAuxiliary = [.portrait] }
            let p = try DepthReader.read(photo, options: o)
            guard let decoded = p.photo, let depth = p.depth else { throw DepthError.noDepth(path: photo, found: []) }
            for w in p.warnings { Diagnostics.warning("\(photo): \(w)") }
            lap("decode", ts)

            ts = Date()
            let nd = try NormalizedDisparity(depth)
            var focusNote = "--focus"
            let f: Float
            if let d = focusDistance {
                if depth.accuracy == .relative { throw FocusError.relativeAccuracy(path: photo) }
                let disp = Float(1 / d)
                f = nd.normalize(disparity: disp)
                guard (-0.05...1.05).contains(f) else {
                    throw FocusError.outOfRange(detail: "\(photo): \(d) m is outside the map's range of \(String(format: "%.3g", 1 / Double(nd.high)))...\(String(format: "%.3g", 1 / Double(nd.low))) m")
                }
                focusNote = "--focus-distance \(d) m (disparity \(disp) \(depth.kind == .disparity ? depth.units : "1/" + depth.units))"
            } else if let s = focusPoint, let pt = Self.parsePoint(s) {
                let x = pt.fractional ? pt.0 * Double(p.width) : pt.0, y = pt.fractional ? pt.1 * Double(p.height) : pt.1
                guard x < Double(p.width), y < Double(p.height) else {
                    throw FocusError.outOfRange(detail: "--focus-point \(s) is outside the \(p.width)x\(p.height) photo")
                }
                f = nd.value(atPhotoPoint: x, y, photoWidth: p.width, photoHeight: p.height)
                focusNote = "--focus-point \(Int(x)),\(Int(y)): median normalised disparity around it"
            } else {
                f = focus ?? 0.5
            }
            lap("normalize", ts)

            ts = Date()
            let small = FocusMask(focus: f, slope: slope, width: width).mask(nd)
            let W = decoded.image.width, H = decoded.image.height
            var mask = small.upscaledMask(width: W, height: H)
            lap("mask", ts)

            ts = Date()
            var refinedWith = "none"
            if refine != .none && (effect != .depth) {
                let matte = p.auxiliary(.portrait).flatMap { $0.image.width == 0 ? nil : $0.image }
                if refine == .matte && matte == nil {
                    throw DepthError.auxiliaryNotFound(path: photo, kind: "portrait matte (for --refine matte)", available: p.auxiliary.map { $0.kind.rawValue })
                }
                let guide: Image<Float>
                if let matte, refine != .photo {
                    guide = matte.float32.resized(width: W, height: H, interpolation: .bilinear)
                    refinedWith = "portrait matte"
                } else {
                    guide = decoded.image.float32.luma(.rec709)
                    refinedWith = "photo luma"
                }
                let depthPixel = max(1, W / max(1, small.width))
                mask = GuidedFilter(radius: 2 * depthPixel, epsilon: 1e-3, subsample: max(1, depthPixel / 2)).apply(mask: mask, guide: guide)
            }
            lap("refine", ts)

            ts = Date()
            let out: AnyImage
            switch effect {
            case .depth: out = .uint8(DepthEffects.grey(nd.map.upscaledMask(width: W, height: H), as: UInt8.self))
            case .mask: out = .uint8(DepthEffects.grey(mask, as: UInt8.self))
            case .spotlight: out = DepthEffects.spotlight(decoded.image, mask: mask)
            case .color: out = DepthEffects.colorHighlight(decoded.image, mask: mask)
            case .blur: out = FocalBlur(radius: radius, levels: levels, protectSubject: !plainBlur).apply(decoded.image, mask: mask)
            }
            lap("effect", ts)

            ts = Date()
            var meta = decoded.metadata
            if effect == .depth || effect == .mask { meta.icc = nil }
            try ImageCodecs.write(out, to: output, options: WriteOptions(quality: quality, metadata: meta, overwrite: force))
            if let saveMask {
                try ImageCodecs.write(.uint8(DepthEffects.grey(mask, as: UInt8.self)), to: saveMask, options: WriteOptions(overwrite: force))
            }
            lap("encode", ts)
            times["total"] = Date().timeIntervalSince(t0)

            var over = 0
            var sum: Double = 0
            for v in mask.samples { sum += Double(v); if v > 0.5 { over += 1 } }
            if let report {
                var r: [String: Any] = ["input": photo, "output": output, "effect": effect.rawValue, "focus": Double(f),
                                        "focusFrom": focusNote, "slope": Double(slope), "width": Double(width),
                                        "refine": refinedWith, "depth": DepthReport.describe(p)["depth"] ?? [:],
                                        "normalization": ["disparityLow": Double(nd.low), "disparityHigh": Double(nd.high), "filledHoles": nd.filledHoles],
                                        "mask": ["mean": sum / Double(mask.samples.count), "fractionOverHalf": Double(over) / Double(mask.samples.count)],
                                        "timesSeconds": times]
                if effect == .blur { r["radius"] = Double(radius); r["levels"] = levels; r["protectSubject"] = !plainBlur }
                let data = try JSONSerialization.data(withJSONObject: r, options: [.prettyPrinted, .sortedKeys])
                try AtomicOutput.write(Array(data) + [10], to: report, overwrite: true)
            }
            Diagnostics.progress(String(format: "%@: %@ at focus %.3f (%@), %.0f%% of the photo in focus; %.2f s", output, effect.rawValue, f, focusNote,
                                        100 * Double(over) / Double(mask.samples.count), times["total"]!))
        }
    }
}
