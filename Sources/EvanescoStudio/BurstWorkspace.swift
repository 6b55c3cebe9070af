import EvanescoCore
import EvanescoIO
import EvanescoStack
import Foundation
import Hummingbird

/// A burst opened in the studio: its frames decoded once (a folder of images, or evenly spaced
/// frames of a video), their thumbnails, and the last stack's result and maps. A burst whose
/// decoded frames would exceed the memory limit keeps only its thumbnails and is stacked from its
/// files, through the library's temporary file of frames.
final class BurstStudioSession: Sendable {
    let id: String
    let source: FileRef
    /// The decoded frames; nil for a burst too big to hold (stacked from `files`).
    let frames: [BurstFrame]?
    /// The inputs that decoded, in order.
    let files: [String]
    let info: [BurstWorkspace.FrameInfo]
    let skipped: [SkippedInput]
    let thumbnails: [[UInt8]]
    let memoryLimit: Int?
    /// A burst of camera raws: stacked from its files, on the sensor's planes, and shown finished.
    let raw: Bool
    let state = LockedBox(Stacked?.none)

    struct Stacked: Sendable {
        /// What is shown: the stack, with the erase strokes erased from it.
        var result: StackResult
        var pictures: [String: AnyImage]
        var previews: [String: [UInt8]]
        /// The stack as merged, before any stroke, and the options it was stacked with.
        var plain: StackResult
        var options: StackOptions
        /// The erase brush's strokes, oldest first.
        var strokes: [EraseStroke] = []
    }

    var count: Int { info.count }

    init(id: String, source: FileRef, path: String, memoryLimit: Int?) throws {
        self.id = id
        self.source = source
        self.memoryLimit = memoryLimit
        let inputs = try InputFile.expand([path])
        let video = inputs.count == 1 && VideoIO.isVideo(inputs[0])
        raw = !video && BurstInput.isRawBurst(inputs)
        // Raws are stacked from their files (their planes, not the finished frames shown here).
        let tooBig =
            !video && inputs.count > 1
            && (raw
                || memoryLimit.map { limit in (BurstInput.estimatedDecodedBytes(inputs) ?? 0) > limit } == true)
        @Sendable func thumbnail(_ image: AnyImage) throws -> [UInt8] {
            try ImageCodecs.encode(
                preview(image, longSide: 200), format: .jpeg, options: WriteOptions(quality: JPEGQuality.thumbnail))
        }
        @Sendable func named(_ name: String, _ image: AnyImage) -> BurstWorkspace.FrameInfo {
            BurstWorkspace.FrameInfo(
                index: 0, name: (name as NSString).lastPathComponent, width: image.width, height: image.height)
        }
        var decoded: [(file: String, info: BurstWorkspace.FrameInfo, thumbnail: [UInt8])] = []
        var skipped: [(String, String)] = []
        if tooBig {
            // Each frame decoded once for its thumbnail (two at a time), then let go.
            let results = LockedBox(
                [Result<(BurstWorkspace.FrameInfo, [UInt8]), Error>?](repeating: nil, count: inputs.count))
            StripExecutor.forEachIndex(in: 0..<inputs.count, workers: 2) { i in
                let r = Result { () throws -> (BurstWorkspace.FrameInfo, [UInt8]) in
                    let image = try ImageCodecs.read(inputs[i]).image
                    return (named(inputs[i], image), try thumbnail(image))
                }
                results.update { $0[i] = r }
            }
            for (i, r) in results.value.enumerated() {
                switch r! {
                case .success(let (info, thumb)): decoded.append((inputs[i], info, thumb))
                case .failure(let e): skipped.append((inputs[i], String(describing: e)))
                }
            }
            frames = nil
        } else {
            let loaded = try BurstInput.load([path])
            for f in loaded.frames { decoded.append((f.name, named(f.name, f.image), try thumbnail(f.image))) }
            skipped = loaded.skipped
            frames = loaded.frames
        }
        guard !decoded.isEmpty else {
            throw StackError.noUsableInput(reasons: skipped.map { "\(($0.0 as NSString).lastPathComponent): \($0.1)" })
        }
        files = decoded.map(\.file)
        info = decoded.enumerated().map { k, d in
            var i = d.info
            i.index = k
            return i
        }
        thumbnails = decoded.map(\.thumbnail)
        self.skipped = skipped.map { SkippedInput(name: ($0.0 as NSString).lastPathComponent, reason: $0.1) }
    }

    /// Stacks the burst: from the frames held, or from the files through the temporary file.
    func stack(_ options: StackOptions) throws -> (result: StackResult, reference: AnyImage) {
        if let frames {
            let r = try BurstStacker.stack(frames, options: options)
            return (r, frames[r.referenceIndex].image)
        }
        var o = options
        o.memoryLimit = memoryLimit
        let r = try shown(BurstStacker.stack(contentsOf: files, options: o))
        return (r, try ImageCodecs.read(r.frames[r.referenceIndex].source).image)
    }

    /// A result as the page shows it: a raw burst's merged mosaic finished (the default finish,
    /// upright), the mosaic kept for the DNG download.
    func shown(_ result: StackResult) throws -> StackResult {
        guard result.raw != nil else { return result }
        var r = result
        (r.image, r.referenceMetadata) = try result.picture()
        return r
    }
}

struct SkippedInput: Codable, Sendable {
    var name: String
    var reason: String
}

/// An image scaled so that its long side is at most `longSide`, 8-bit for display.
func preview(_ image: AnyImage, longSide: Int) -> AnyImage {
    let long = max(image.width, image.height)
    let small: AnyImage
    if long > longSide {
        let s = Double(longSide) / Double(long)
        small = image.map(
            Resize(
                width: max(1, Int(Double(image.width) * s)), height: max(1, Int(Double(image.height) * s)),
                interpolation: .bilinear))
    } else {
        small = image
    }
    return .uint8(small.uint8)
}

/// The burst-stacking camera app as a workspace: a frame strip with thumbnails and per-frame
/// status, a reference frame to click, align and merge choices, a stack with live progress and
/// a cancel button, the result with before/after, 1:1 and the per-pixel maps, downloads.
final class BurstWorkspace: Sendable {
    let lane = WorkLane("burst")
    let sessions = StudioRegistry<BurstStudioSession>(prefix: "burst")
    let previewLongSide: Int
    /// Bytes a burst's decoded frames may take before it is stacked through a temporary file.
    let memoryLimit: Int?

    init(previewLongSide: Int, memoryLimit: Int?) {
        self.previewLongSide = previewLongSide
        self.memoryLimit = memoryLimit
    }

    struct Opened: Codable {
        var session: String
        var name: String
        var frames: [FrameInfo]
        var skipped: [SkippedInput]
    }
    struct FrameInfo: Codable {
        var index: Int
        var name: String
        var width: Int
        var height: Int
    }
    struct StackRequest: Codable {
        var reference: Int?
        var align: String?
        var merge: String?
    }
    /// The stack's report as the page reads it: the library's ``StackReport`` (the same keys as
    /// `evanesco stack --report`), and beside its keys what only the studio has: the provenance
    /// legend and how many brush strokes are erased.
    struct Report: Encodable {
        var stack: StackReport
        var legend: StackMaps.Legend?
        var strokes: Int
        /// A burst of camera raws: its merged mosaic downloads as a DNG.
        var dng: Bool

        enum StudioKeys: String, CodingKey { case legend, strokes, dng }

        func encode(to encoder: Encoder) throws {
            try stack.encode(to: encoder)
            var c = encoder.container(keyedBy: StudioKeys.self)
            try c.encodeIfPresent(legend, forKey: .legend)
            try c.encode(strokes, forKey: .strokes)
            try c.encode(dng, forKey: .dng)
        }
    }

    static let pictureNames = ["result", "reference", "kept", "provenance", "shift", "legend"]

    /// The stack's choices as the page offers them (`GET /api/burst/settings`): every align mode
    /// and merge method the library has, and the defaults of `StackOptions()`.
    struct Choices: Encodable {
        struct Choice: Encodable {
            var values: [String]
            var defaultValue: String
        }
        var align: Choice
        var merge: Choice

        static let library = Choices(align: choice("align"), merge: choice("merge"))

        /// A declared choice of ``StackOptions/settings``.
        static func choice(_ key: String) -> Choice {
            let s = StackOptions.setting(key)
            return Choice(values: s.choices, defaultValue: s.defaultDescription ?? "")
        }
    }

    /// The result and its maps, by the names the image route takes.
    static func pictures(of result: StackResult) -> [String: AnyImage] {
        var pictures: [String: AnyImage] = ["result": result.image]
        for (name, image) in result.maps?.pictures() ?? [] {
            switch name {
            case "kept.png": pictures["kept"] = image
            case "provenance.png": pictures["provenance"] = image
            case "local-shift.png": pictures["shift"] = image
            case "provenance-legend.png": pictures["legend"] = image
            default: break
            }
        }
        return pictures
    }

    func addRoutes(_ router: Router<BasicRequestContext>, studio: Studio) {
        addEraseRoutes(router)
        router.get("/api/burst/settings") { _, _ -> Response in try jsonResponse(Choices.library) }
        router.post("/api/burst/open") { request, _ -> Response in
            let ref = try await decodeBody(request, as: FileRef.self)
            let path = try studio.catalog.resolve(root: ref.root, path: ref.path)
            let limit = self.memoryLimit
            let s = try await libraryCall(self.lane) {
                try self.sessions.add { try BurstStudioSession(id: $0, source: ref, path: path, memoryLimit: limit) }
            }
            self.sessions.keep(newest: 3)
            return try jsonResponse(
                Opened(
                    session: s.id, name: ref.path == "." ? studio.catalog.roots[ref.root].name : ref.path,
                    frames: s.info,
                    skipped: s.skipped))
        }
        router.get("/api/burst/:id/thumb") { request, context -> Response in
            let s = try self.sessions.get(context.parameters.get("id"))
            let i = try queryInt(request, "index", range: 0...(s.count - 1))
            return imageResponse(s.thumbnails[i], type: "image/jpeg")
        }
        router.post("/api/burst/:id/stack") { request, context -> Response in
            let s = try self.sessions.get(context.parameters.get("id"))
            let body = try await decodeBody(request, as: StackRequest.self)
            var options = StackOptions()
            options.reference = body.reference ?? 0
            guard (0..<s.count).contains(options.reference) else {
                throw HTTPError(
                    .badRequest,
                    message: "reference \(options.reference) is not a frame of this burst (0...\(s.count - 1))")
            }
            options.align = try choice(body.align, "align") ?? options.align
            options.merge = try choice(body.merge, "merge") ?? options.merge
            options.collectMaps = true
            try validateSettings(["reference frame": "reference"]) { () throws(SettingError) in try options.validate() }
            let asked = options
            let job = studio.startJob(workspace: "burst", lane: self.lane) { job in
                var o = asked
                o.cancellation = job.cancellation
                o.progress = { job.progress($0) }
                s.state.update { $0 = nil }
                let (result, reference) = try s.stack(o)
                var pictures = Self.pictures(of: result)
                pictures["reference"] = reference
                s.state.update {
                    $0 = BurstStudioSession.Stacked(
                        result: result, pictures: pictures, previews: [:], plain: result, options: asked)
                }
            }
            return try jsonResponse(["job": job.id])
        }
        addResultRoutes(router, studio: studio)
    }

    /// The result's routes: the report, the pictures and maps, the full-size downloads.
    func addResultRoutes(_ router: Router<BasicRequestContext>, studio: Studio) {
        router.get("/api/burst/:id/report") { _, context -> Response in
            let s = try self.sessions.get(context.parameters.get("id"))
            guard let st = s.state.value else {
                throw HTTPError(.conflict, message: "the burst has not been stacked yet; press Stack")
            }
            let r = st.result
            return try jsonResponse(
                Report(
                    stack: StackReport(r, inputs: [s.source.path], output: nil),
                    legend: r.maps?.legend(names: r.frames.map { ($0.source as NSString).lastPathComponent }),
                    strokes: st.strokes.count, dng: r.raw != nil))
        }
        // A picture of the result: preview size (cached) or full size (for 1:1).
        router.get("/api/burst/:id/image") { request, context -> Response in
            let s = try self.sessions.get(context.parameters.get("id"))
            let which = request.uri.queryParameters.get("which") ?? "result"
            guard Self.pictureNames.contains(which) else {
                throw HTTPError(
                    .badRequest, message: "which=\(which) is not one of \(Self.pictureNames.joined(separator: ", "))")
            }
            let full = request.uri.queryParameters.get("size") == "full"
            guard let st = s.state.value, let picture = st.pictures[which] else {
                throw HTTPError(.conflict, message: "the burst has not been stacked yet; press Stack")
            }
            let key = which + (full ? "-full" : "")
            if let cached = st.previews[key] { return imageResponse(cached, type: "image/jpeg") }
            let long = self.previewLongSide
            let bytes = try await libraryCall(self.lane) {
                try ImageCodecs.encode(
                    full || which == "legend" ? .uint8(picture.uint8) : preview(picture, longSide: long), format: .jpeg,
                    options: WriteOptions(quality: JPEGQuality.preview))
            }
            s.state.update { $0?.previews[key] = bytes }
            return imageResponse(bytes, type: "image/jpeg")
        }
        router.get("/api/burst/:id/download") { request, context -> Response in
            let s = try self.sessions.get(context.parameters.get("id"))
            guard let st = s.state.value else {
                throw HTTPError(.conflict, message: "the burst has not been stacked yet; press Stack")
            }
            let format = request.uri.queryParameters.get("format") ?? "jpeg"
            var choices: [String: (String, Int?)] = ["jpeg": ("jpg", nil), "png16": ("png", 16), "tiff": ("tif", nil)]
            if st.result.raw != nil { choices["dng"] = ("dng", nil) }
            guard let (ext, bits) = choices[format] else {
                throw HTTPError(
                    .badRequest,
                    message: "format=\(format) is not jpeg, png16 or tiff"
                        + (format == "dng" ? " (a DNG is the merge of a burst of camera raws)" : ""))
            }
            let base = s.source.path == "." ? "burst" : (s.source.path as NSString).lastPathComponent
            let name = "\((base as NSString).deletingPathExtension)-stacked.\(ext)"
            let out = studio.downloadPath(name)
            try await libraryCall(self.lane) {
                if st.result.raw != nil {
                    // The mosaic as a DNG, or finished afresh at full depth.
                    try st.result.write(to: out, bitDepth: bits, options: WriteOptions(quality: JPEGQuality.master))
                } else {
                    try ImageCodecs.write(
                        st.result.image, to: out,
                        options: WriteOptions(
                            quality: JPEGQuality.master, bitDepth: bits, metadata: st.result.referenceMetadata))
                }
            }
            return try studio.exportResponse(out, name: name)
        }
    }
}

/// A choice the page sends by its raw value (`align=local`), read through the library's type:
/// nil when absent, a 400 listing the type's own cases when it is none of them.
func choice<T: RawRepresentable & CaseIterable>(_ value: String?, _ key: String) throws -> T?
where T.RawValue == String {
    guard let value else { return nil }
    guard let v = T(rawValue: value) else {
        throw HTTPError(
            .badRequest,
            message: "\(key)=\(value) is not one of \(T.allCases.map(\.rawValue).joined(separator: ", "))")
    }
    return v
}
