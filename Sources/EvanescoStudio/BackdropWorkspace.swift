import EvanescoCore
import EvanescoDepth
import EvanescoFaces
import EvanescoIO
import Foundation
import Hummingbird

/// A portrait photo or a colour + depth clip opened in the backdrop workspace: colour frames at
/// preview size and raw depth frames, decoded once; full-size sources are read again only to export.
final class BackdropStudioSession: Sendable {
    let id: String
    let name: String
    let color: [AnyImage]
    let depth: [AnyImage]
    let depthEncoding: DepthEncoding?
    let framesPerSecond: Double
    let relativeAccuracy: Bool
    /// How to read the full-size sources again for an export.
    let photoPath: String?
    let clip: (color: String, depth: String)?
    let truncated: Bool

    init(id: String, photo path: String, previewLongSide: Int) throws {
        self.id = id
        name = (path as NSString).lastPathComponent
        let still = try PortraitFrames(DepthReader.read(path))
        guard let c = try still.color.next(), let d = try still.depth.next() else {
            throw PortraitError.noPhoto(path: path)
        }
        color = [preview(c, longSide: previewLongSide)]
        depth = [d]
        depthEncoding = still.depthEncoding
        framesPerSecond = 30
        relativeAccuracy = still.relativeAccuracy
        photoPath = path
        clip = nil
        truncated = false
    }

    init(id: String, color colorPath: String, depth depthPath: String, previewLongSide: Int, maxFrames: Int) throws {
        self.id = id
        name = (colorPath as NSString).lastPathComponent
        let c = try FrameSources.open(colorPath, role: .color), d = try FrameSources.open(depthPath, role: .depth(nil))
        var cs: [AnyImage] = [], ds: [AnyImage] = []
        var more = false
        while true {
            guard let cf = try c.next(), let df = try d.next() else { break }
            if cs.count == maxFrames {
                more = true
                break
            }
            cs.append(preview(cf, longSide: previewLongSide))
            ds.append(df)
        }
        guard !cs.isEmpty else { throw FrameStreamError.noFrames(source: colorPath) }
        color = cs
        depth = ds
        depthEncoding = nil
        relativeAccuracy = false
        framesPerSecond =
            (c as? VideoFrameReader).map { $0.info.framesPerSecond > 0 ? $0.info.framesPerSecond : 30 } ?? 30
        photoPath = nil
        clip = (colorPath, depthPath)
        truncated = more
    }
}

/// The TrueDepth background-replacement sample as a workspace: a portrait photo or a colour +
/// depth clip, a background (black, or an image), cutoff, blur and gamma with a live preview of
/// the composite and the mask, clip playback at preview size, and export.
final class BackdropWorkspace: Sendable {
    let lane = WorkLane("backdrop")
    let sessions = StudioRegistry<BackdropStudioSession>(prefix: "backdrop")
    let backgrounds = LockedBox([FileRef: Image<UInt8>]())
    let cascade = LockedBox((tried: false, cascade: CascadeClassifier?.none))
    let previewLongSide: Int
    let maxClipFrames: Int

    init(previewLongSide: Int, maxClipFrames: Int) {
        self.previewLongSide = previewLongSide
        self.maxClipFrames = maxClipFrames
    }

    /// The face cascade, loaded once (nil when opencv-data is missing: the nearest region is used).
    var faces: CascadeClassifier? {
        cascade.update { c in
            if !c.tried {
                c.tried = true
                c.cascade = try? CascadeClassifier.load()
            }
            return c.cascade
        }
    }

    struct OpenRequest: Codable {
        var photo: FileRef?
        var color: FileRef?
        var depth: FileRef?
    }
    struct Opened: Codable {
        var session: String
        var name: String
        var frames: Int
        var framesPerSecond: Double
        var width: Int
        var height: Int
        var truncated: Bool
        var relativeAccuracy: Bool
        var faceCascade: Bool
    }
    struct Settings: Sendable {
        var options: BackdropSessionOptions
        var background: FileRef?
        var mask: Bool
        var frame: Int
    }

    /// The page's fields and the library settings they set: the page takes their defaults and
    /// slider ranges from `GET /api/backdrop/settings`, and a refusal names the field.
    static let fields = FieldSetting.fields(BackdropSessionOptions.self, ["cutoffOffset", "blur", "gamma"])

    func settings(_ request: Request) throws -> Settings {
        var o = BackdropSessionOptions()
        if let v = try queryNumber(request, "cutoffOffset") { o.pipeline.cutoffOffset = v }
        if let v = try queryNumber(request, "blur") { o.pipeline.blurSigmaAt640 = v }
        if let v = try queryNumber(request, "gamma") { o.pipeline.gamma = v }
        o.pipeline.temporalWeight = 1
        o.detectEvery = 1
        try validateSettings(BackdropSessionOptions.keysByName) {
            () throws(SettingError) in
            try o.validate()
        }
        let view = request.uri.queryParameters.get("view") ?? "composite"
        guard view == "composite" || view == "mask" else {
            throw HTTPError(.badRequest, message: "view=\(view) is not composite or mask")
        }
        var bg: FileRef?
        if let p = request.uri.queryParameters.get("bgPath"), !p.isEmpty {
            bg = FileRef(root: try queryInt(request, "bgRoot"), path: p)
        }
        return Settings(
            options: o, background: bg, mask: view == "mask",
            frame: try queryInt(request, "frame", default: 0, range: 0...Int.max))
    }

    func background(_ ref: FileRef?, studio: Studio) throws -> Image<UInt8>? {
        guard let ref else { return nil }
        if let b = backgrounds.value[ref] { return b }
        let path = try studio.catalog.resolve(root: ref.root, path: ref.path)
        let b = preview(try ImageCodecs.read(path).image, longSide: 2 * previewLongSide).uint8
        backgrounds.update { d in
            if d.count > 8 { d.removeAll() }
            d[ref] = b
        }
        return b
    }

    func addRoutes(_ router: Router<BasicRequestContext>, studio: Studio) {
        router.get("/api/backdrop/settings") { _, _ -> Response in
            try jsonResponse(Self.fields)
        }
        router.post("/api/backdrop/open") { request, _ -> Response in
            let body = try await decodeBody(request, as: OpenRequest.self)
            let long = self.previewLongSide, maxFrames = self.maxClipFrames
            let s: BackdropStudioSession
            if let p = body.photo {
                let path = try studio.catalog.resolve(root: p.root, path: p.path)
                s = try await libraryCall(self.lane) {
                    try self.sessions.add { try BackdropStudioSession(id: $0, photo: path, previewLongSide: long) }
                }
            } else if let c = body.color, let d = body.depth {
                let cp = try studio.catalog.resolve(root: c.root, path: c.path),
                    dp = try studio.catalog.resolve(root: d.root, path: d.path)
                s = try await libraryCall(self.lane) {
                    try self.sessions.add {
                        try BackdropStudioSession(
                            id: $0, color: cp, depth: dp, previewLongSide: long, maxFrames: maxFrames)
                    }
                }
            } else {
                throw HTTPError(.badRequest, message: "give a portrait photo, or a colour clip and a depth clip")
            }
            self.sessions.keep(newest: 3)
            let hasFaces = try await self.lane.run { self.faces != nil }
            return try jsonResponse(
                Opened(
                    session: s.id, name: s.name, frames: s.color.count, framesPerSecond: s.framesPerSecond,
                    width: s.color[0].width, height: s.color[0].height, truncated: s.truncated,
                    relativeAccuracy: s.relativeAccuracy, faceCascade: hasFaces))
        }
        router.get("/api/backdrop/:id/render") { request, context -> Response in
            let s = try self.sessions.get(context.parameters.get("id"))
            let settings = try self.settings(request)
            guard settings.frame < s.color.count else {
                throw HTTPError(
                    .badRequest, message: "frame \(settings.frame) is past the clip's \(s.color.count) frames")
            }
            let bg = try await libraryCall(self.lane) { try self.background(settings.background, studio: studio) }
            let start = Date()
            let (bytes, report) = try await libraryCall(self.lane) {
                var o = settings.options
                o.depthEncoding = s.depthEncoding
                let session = BackdropSession(options: o, background: bg, cascade: self.faces)
                let f = try session.process(
                    color: s.color[settings.frame], depth: s.depth[settings.frame], keepMask: settings.mask)
                let picture: AnyImage = settings.mask ? .uint8(f.mask!) : .uint8(f.image)
                return (
                    try ImageCodecs.encode(picture, format: .jpeg, options: WriteOptions(quality: JPEGQuality.preview)),
                    f.report
                )
            }
            let facts = String(
                format: "subject %@ at %.2f m, cutoff %.2f m", report.subject.description, report.subjectDepth,
                report.cutoff)
            return imageResponse(
                bytes, type: "image/jpeg",
                headers: [
                    .init("X-Render-Ms")!: String(format: "%.1f", Date().timeIntervalSince(start) * 1000),
                    .init("X-Backdrop")!: facts
                ])
        }
        addExportRoutes(router, studio: studio)
    }

    /// The export of the whole clip, with its progress as server-sent events.
    func addExportRoutes(_ router: Router<BasicRequestContext>, studio: Studio) {
        router.post("/api/backdrop/:id/export") { request, context -> Response in
            let s = try self.sessions.get(context.parameters.get("id"))
            let settings = try self.settings(request)
            let bgRef = settings.background
            let bgFull = try bgRef.map {
                try ImageCodecs.read(try studio.catalog.resolve(root: $0.root, path: $0.path)).image.uint8
            }
            let job = studio.startJob(workspace: "backdrop", lane: self.lane) { job in
                var o = settings.options
                o.pipeline.temporalWeight = BackdropOptions().temporalWeight
                o.detectEvery = BackdropSessionOptions().detectEvery
                let base = (s.name as NSString).deletingPathExtension
                let session: BackdropSession
                let color: FrameReader, depth: FrameReader, out: FrameWriter, name: String, path: String
                if let photo = s.photoPath {
                    let still = try PortraitFrames(DepthReader.read(photo))
                    o.depthEncoding = still.depthEncoding
                    color = still.color
                    depth = still.depth
                    name = "\(base)-backdrop.jpg"
                    path = studio.downloadPath(name)
                    out = ImageFrameWriter(path: path, overwrite: false)
                } else if let clip = s.clip {
                    color = try FrameSources.open(clip.color, role: .color)
                    depth = try FrameSources.open(clip.depth, role: .depth(nil))
                    name = "\(base)-backdrop.mp4"
                    path = studio.downloadPath(name)
                    out = try VideoFrameWriter(path: path, framesPerSecond: s.framesPerSecond, overwrite: false)
                } else {
                    return
                }
                session = BackdropSession(options: o, background: bgFull, cascade: self.faces)
                let total = s.photoPath != nil ? 1 : (s.truncated ? nil : s.color.count)
                let report = session.run(color: color, depth: depth, to: out) { n, elapsed in
                    if job.cancellation.isCancelled { return }
                    job.post(
                        JobEvent(
                            type: "progress", stage: "frames", done: n, total: total, elapsed: elapsed,
                            remaining: total.map { n > 0 ? elapsed / Double(n) * Double(max(0, $0 - n)) : 0 }))
                }
                if let e = session.failure { throw e }
                guard report.framesWritten > 0 else { throw FrameStreamError.noFrames(source: s.name) }
                job.download = StudioDownload(
                    path: path, name: name, contentType: s.photoPath != nil ? "image/jpeg" : "video/mp4")
            }
            return try jsonResponse(["job": job.id])
        }
    }
}
