import EvanescoCore
import EvanescoDepth
import EvanescoIO
import Foundation
import Hummingbird

/// A depth photo opened in the studio: decoded once, at full size for exports and at preview
/// size for the slider, so no slider step decodes the photo again.
final class DepthStudioSession: Sendable {
    let id: String
    let source: FileRef
    let path: String
    let full: PortraitRenderer
    let preview: PortraitRenderer
    let summary: DepthSummary
    /// Mattes the file carries, at preview size, grey PNG.
    let mattes: [String: [UInt8]]
    let original: [UInt8]
    /// Render requests in the order they arrived: one still waiting when a later one has arrived
    /// is dropped, not rendered. The order is the server's own count, not a number the page
    /// sends, so no value of the page's `seq` can make later renders look old.
    let arrivals = LockedBox(0)
    /// Smaller renderers for dragging (blur and lens cost more per pixel), made once each.
    let smaller = LockedBox([Int: PortraitRenderer]())

    /// The renderer for a preview whose long side is at most `longSide`, snapped to a few sizes
    /// so that only a handful are ever made.
    func renderer(longSide: Int) -> PortraitRenderer {
        let previewLong = max(preview.image.width, preview.image.height)
        guard let size = [512, 768, 1024, 1280].last(where: { $0 <= longSide }), size < previewLong else {
            return preview
        }
        if let r = smaller.value[size] { return r }
        let r = full.scaled(toLongSide: size)
        smaller.update { $0[size] = r }
        return r
    }

    init(id: String, source: FileRef, path: String, previewLongSide: Int) throws {
        self.id = id
        self.source = source
        self.path = path
        var o = DepthReadOptions()
        o.decodePhoto = true
        o.requireDepth = true
        o.decodeAuxiliary = [.portrait, .skin, .hair, .teeth, .glasses, .sky]
        let photo = try DepthReader.read(path, options: o)
        full = try PortraitRenderer(photo)
        preview = full.scaled(toLongSide: previewLongSide)
        summary = DepthSummary(photo)
        let w = preview.image.width, h = preview.image.height
        var m: [String: [UInt8]] = [:]
        for a in photo.auxiliary
        where a.image.width > 0 && [.portrait, .skin, .hair, .teeth, .glasses, .sky].contains(a.kind)
            && m[a.kind.rawValue] == nil
        {
            let grey = a.image.float32.luma(.rec709).resized(width: w, height: h, interpolation: .bilinear)
            m[a.kind.rawValue] = try ImageCodecs.encode(
                .uint8(DepthEffects.grey(grey, as: UInt8.self)), format: .png, options: WriteOptions(compression: .fast)
            )
        }
        mattes = m
        original = try ImageCodecs.encode(
            preview.image, format: .jpeg, options: WriteOptions(quality: JPEGQuality.preview))
    }
}

/// The "Image Depth Maps" tutorial as a workspace: Original / Depth / Mask / Filtered views,
/// Spotlight / Color / Blur (and a real lens) effects, a focus slider that re-renders while it
/// moves, click to focus, mattes as overlays, the depth facts, and full-size export.
final class DepthWorkspace: Sendable {
    let lane = WorkLane("depth")
    let sessions = StudioRegistry<DepthStudioSession>(prefix: "depth")
    let previewLongSide: Int

    init(previewLongSide: Int) { self.previewLongSide = previewLongSide }

    struct Opened: Codable {
        var session: String
        var name: String
        var width: Int, height: Int
        var previewWidth: Int, previewHeight: Int
        var mattes: [String]
        var depth: DepthSummary
    }

    /// The page's sliders and the library settings they set: the page takes their defaults and
    /// ranges from `GET /api/depth/settings`, and a refusal names the field.
    static let fields = FieldSetting.fields(PortraitSettings.self, ["focus", "slope", "width", "radius", "aperture"])

    /// The settings a request asks for, checked by the library's `validate()` before any work.
    static func settings(_ request: Request) throws -> (view: String, settings: PortraitSettings) {
        let view = request.uri.queryParameters.get("view") ?? "filtered"
        guard ["original", "depth", "mask", "filtered"].contains(view) else {
            throw HTTPError(.badRequest, message: "view=\(view) is not original, depth, mask or filtered")
        }
        var s = PortraitSettings()
        let effect = request.uri.queryParameters.get("effect") ?? "spotlight"
        // The page's effects are the library's less the two views (depth, mask) chosen by `view`.
        let effects = PortraitEffect.allCases.filter { ![.depth, .mask].contains($0) }
        guard let e = PortraitEffect(rawValue: effect), effects.contains(e) else {
            throw HTTPError(
                .badRequest,
                message: "effect=\(effect) is not one of \(effects.map(\.rawValue).joined(separator: ", "))")
        }
        s.effect = view == "depth" ? .depth : view == "mask" ? .mask : e
        if let f = try queryNumber(request, "focus") { s.focus = .normalized(f) }
        if let v = try queryNumber(request, "slope") { s.slope = v }
        if let v = try queryNumber(request, "width") { s.width = v }
        if let v = try queryNumber(request, "radius") { s.radius = v }
        s.aperture = try queryNumber(request, "aperture")
        s.refine = try choice(request.uri.queryParameters.get("refine"), "refine") ?? s.refine
        do throws(PortraitError) { try s.validate() } catch {
            guard case .invalidSetting(let name, let detail) = error else { throw error }
            let field = PortraitSettings.keysByName[name] ?? name
            throw HTTPError(.badRequest, message: "\(field) \(detail)")
        }
        return (view, s)
    }

    func addRoutes(_ router: Router<BasicRequestContext>, studio: Studio) {
        router.get("/api/depth/settings") { _, _ -> Response in
            try jsonResponse(Self.fields)
        }
        router.post("/api/depth/open") { request, _ -> Response in
            let ref = try await decodeBody(request, as: FileRef.self)
            let path = try studio.catalog.resolve(root: ref.root, path: ref.path)
            let long = self.previewLongSide
            let s = try await libraryCall(self.lane) {
                try self.sessions.add { id in
                    try DepthStudioSession(id: id, source: ref, path: path, previewLongSide: long)
                }
            }
            // Decoded photos are large: keep the last four opened.
            self.sessions.keep(newest: 4)
            return try jsonResponse(
                Opened(
                    session: s.id, name: (ref.path as NSString).lastPathComponent,
                    width: s.full.image.width, height: s.full.image.height,
                    previewWidth: s.preview.image.width, previewHeight: s.preview.image.height,
                    mattes: s.mattes.keys.sorted(), depth: s.summary))
        }
        router.get("/api/depth/:id/render") { request, context -> Response in
            let s = try self.sessions.get(context.parameters.get("id"))
            let (view, settings) = try Self.settings(request)
            // The page's own counter, echoed back so it can match answers to requests.
            let seq = try queryInt(request, "seq", default: 0, range: 0...Int.max)
            // While a slider moves the page may ask for a smaller preview, then the full one on release.
            let long = try queryInt(request, "size", default: self.previewLongSide, range: 64...100_000)
            let ticket = s.arrivals.update { n -> Int in
                n &+= 1
                return n
            }
            if view == "original" { return imageResponse(s.original, type: "image/jpeg") }
            let start = Date()
            let bytes: [UInt8]? = try await libraryCall(self.lane) {
                // A newer request arrived while this one waited: drop it.
                if ticket != s.arrivals.value { return nil }
                let r = try s.renderer(longSide: long).render(settings)
                return try ImageCodecs.encode(
                    r.image, format: .jpeg, options: WriteOptions(quality: JPEGQuality.preview))
            }
            guard let bytes else {
                return Response(
                    status: .noContent,
                    headers: [.init("X-Dropped")!: "superseded by a newer request", .init("X-Seq")!: String(seq)])
            }
            let ms = String(format: "%.1f", Date().timeIntervalSince(start) * 1000)
            return imageResponse(
                bytes, type: "image/jpeg", headers: [.init("X-Render-Ms")!: ms, .init("X-Seq")!: String(seq)])
        }
        router.get("/api/depth/:id/focus-at") { request, context -> Response in
            let s = try self.sessions.get(context.parameters.get("id"))
            let x = try queryFloat(request, "x", default: 0.5, range: 0...1),
                y = try queryFloat(request, "y", default: 0.5, range: 0...1)
            let point = PhotoPoint(x: Double(min(x, 0.9999)), y: Double(min(y, 0.9999)), fractional: true)
            let f = try await libraryCall(self.lane) { try s.full.focusValue(.point(point)) }
            return try jsonResponse(FocusAnswer(focus: min(1, max(0, f.value)), note: f.note))
        }
        addDownloadRoutes(router, studio: studio)
    }

    /// The full-size downloads: a matte as stored, the rendered photo at full resolution.
    func addDownloadRoutes(_ router: Router<BasicRequestContext>, studio: Studio) {
        router.get("/api/depth/:id/matte") { request, context -> Response in
            let s = try self.sessions.get(context.parameters.get("id"))
            let kind = try queryString(request, "kind")
            guard let png = s.mattes[kind] else {
                throw HTTPError(
                    .notFound,
                    message:
                        "the photo carries no \(kind) matte (it has: \(s.mattes.keys.sorted().joined(separator: ", ")))"
                )
            }
            return imageResponse(png, type: "image/png")
        }
        // Full resolution, written by the library's own writer (metadata kept), then sent.
        router.get("/api/depth/:id/export") { request, context -> Response in
            let s = try self.sessions.get(context.parameters.get("id"))
            let (_, settings) = try Self.settings(request)
            let format = request.uri.queryParameters.get("format") ?? "jpeg"
            guard let ext = ["jpeg": "jpg", "png": "png", "tiff": "tif"][format] else {
                throw HTTPError(.badRequest, message: "format=\(format) is not jpeg, png or tiff")
            }
            let base = ((s.source.path as NSString).lastPathComponent as NSString).deletingPathExtension
            let name = "\(base)-\(settings.effect.rawValue).\(ext)"
            let out = studio.downloadPath(name)
            try await libraryCall(self.lane) {
                let r = try s.full.render(settings)
                try ImageCodecs.write(
                    r.image, to: out, options: WriteOptions(quality: JPEGQuality.rendered, metadata: r.metadata))
            }
            return try studio.exportResponse(out, name: name)
        }
    }

    struct FocusAnswer: Codable {
        var focus: Float
        var note: String
    }
}
