import EvanescoCore
import EvanescoIO
import Foundation
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle

/// The studio: a local web app over the library. It serves the page (plain HTML, CSS and
/// JavaScript modules kept in the package), the files under the paths it was given, and an API
/// that calls the same pipelines as the command line: `BurstStacker` for the burst workspace,
/// `PortraitRenderer` for the depth workspace, `BackdropSession` for the backdrop workspace.
/// It holds no imaging logic of its own.
///
/// ```swift
/// let studio = try Studio(StudioConfiguration(paths: ["Photos"]))
/// try await studio.run { url in print("studio: \(url)") }
/// ```
public final class Studio: Sendable {
    public let configuration: StudioConfiguration
    /// Temporary files (uploads, downloads); removed by ``shutdown()``.
    public let temporaryDirectory: String
    let catalog: StudioCatalog
    let jobs = StudioRegistry<StudioJob>(prefix: "job")
    let burst: BurstWorkspace
    let depth: DepthWorkspace
    let backdrop: BackdropWorkspace
    let uploads = LockedBox(0)
    /// Listing and upload checks: their own lane, so they never wait behind a stack or an export.
    let files = WorkLane("files")
    /// Exports waiting to be downloaded.
    let exports: ExportShelf
    /// The port the server listens on (0 until it does).
    let listeningPort = LockedBox(0)

    /// - Parameter configuration: Paths, address, limits, token.
    /// - Throws: ``StudioError/pathNotFound(_:)`` for a path that does not exist.
    public init(_ configuration: StudioConfiguration) throws {
        guard configuration.maxUploadBytes > 0, configuration.maxUploads > 0, configuration.previewLongSide >= 64 else {
            throw StudioError.badOption("upload limits and the preview size must be positive")
        }
        guard configuration.idleTimeout.isFinite, configuration.idleTimeout > 0, configuration.exportMaxAge.isFinite,
            configuration.exportMaxAge >= 0, configuration.exportMaxBytes > 0
        else {
            throw StudioError.badOption("the idle timeout, export age and export size must be positive")
        }
        self.configuration = configuration
        // Folders of studios that were killed before they could remove their own.
        StudioFolders.removeStale(in: NSTemporaryDirectory())
        temporaryDirectory = try StudioFolders.make(in: NSTemporaryDirectory())
        exports = ExportShelf(
            directory: temporaryDirectory + "/downloads", maxAge: configuration.exportMaxAge,
            maxBytes: configuration.exportMaxBytes)
        do {
            try FileManager.default.createDirectory(
                atPath: temporaryDirectory + "/uploads", withIntermediateDirectories: true)
            try FileManager.default.createDirectory(
                atPath: temporaryDirectory + "/downloads", withIntermediateDirectories: true)
        } catch {
            try? FileManager.default.removeItem(atPath: temporaryDirectory)
            throw StudioError.badOption("cannot create folders in \(temporaryDirectory): \(error.localizedDescription)")
        }
        do {
            catalog = try StudioCatalog(paths: configuration.paths, uploads: temporaryDirectory + "/uploads")
        } catch {
            try? FileManager.default.removeItem(atPath: temporaryDirectory)
            throw error
        }
        burst = BurstWorkspace(
            previewLongSide: configuration.previewLongSide, memoryLimit: configuration.burstMemoryLimit)
        depth = DepthWorkspace(previewLongSide: configuration.previewLongSide)
        backdrop = BackdropWorkspace(
            previewLongSide: configuration.previewLongSide, maxClipFrames: configuration.maxClipFrames)
    }

    /// Cancels running jobs and removes the temporary files.
    public func shutdown() {
        for j in jobs.all { j.cancellation.cancel() }
        try? FileManager.default.removeItem(atPath: temporaryDirectory)
    }

    /// A path for a download file in the temporary folder; older exports past their age or the
    /// folder's size are deleted first.
    func downloadPath(_ name: String) -> String {
        exports.sweep()
        return exports.path(for: name)
    }

    /// The router: the page, its static files, and /api/.
    public func router() -> Router<BasicRequestContext> {
        let router = Router(context: BasicRequestContext.self)
        router.add(middleware: StudioGuard(token: configuration.token, host: configuration.host, port: listeningPort))
        addPageRoutes(router)
        addFileRoutes(router)
        addJobRoutes(router)
        burst.addRoutes(router, studio: self)
        depth.addRoutes(router, studio: self)
        backdrop.addRoutes(router, studio: self)
        return router
    }

    /// Serves until SIGINT or SIGTERM (unless `handlesSignals` is false: the caller then stops
    /// the process itself, after ``shutdown()``), then removes the temporary files.
    ///
    /// Cancelling the task that runs it stops the server gracefully too.
    ///
    /// - Parameters:
    ///   - handlesSignals: Stop gracefully on SIGINT and SIGTERM.
    ///   - logger: Where the server logs (default: stderr, errors only).
    ///   - ready: Called once listening, with the URL to open (token included).
    public func run(handlesSignals: Bool = true, logger: Logger? = nil, ready: @escaping @Sendable (String) -> Void)
        async throws
    {
        let host = configuration.host, token = configuration.token
        let listening = LockedBox(false)
        let boundPort = listeningPort
        let idle = TimeAmount.milliseconds(Int64(Int(saturating: (configuration.idleTimeout * 1000).rounded())))
        let app = Application(
            router: router(),
            server: .http1(configuration: .init(idleTimeout: idle)),
            configuration: .init(address: .hostname(host, port: configuration.port), serverName: "evanesco-studio"),
            onServerRunning: { channel in
                listening.update { $0 = true }
                let port = channel.localAddress?.port ?? 0
                boundPort.update { $0 = port }
                let shown = host.contains(":") ? "[\(host)]" : host
                ready("http://\(shown):\(port)/?token=\(token)")
            },
            logger: logger
                ?? {
                    var l = Logger(label: "evanesco.studio")
                    l.logLevel = .error
                    return l
                }())
        defer { shutdown() }
        // Exports nobody fetched are deleted after their age even when no request comes.
        let shelf = exports
        let sweeper = Task.detached {
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(max(1, min(60, shelf.maxAge / 4))))
                shelf.sweep()
            }
        }
        defer { sweeper.cancel() }
        // The server runs in a task of its own, so that cancelling this one does not cancel it
        // mid-flight (which makes the server log errors about closing channels that are already
        // closed): it is asked to shut down gracefully instead, as SIGINT and SIGTERM ask.
        let group = ServiceGroup(
            configuration: .init(
                services: [app], gracefulShutdownSignals: handlesSignals ? [.sigterm, .sigint] : [],
                logger: app.logger))
        let server = Task { try await group.run() }
        do {
            try await withTaskCancellationHandler {
                try await server.value
            } onCancel: {
                Task { await group.triggerGracefulShutdown() }
            }
        } catch {
            // Whatever stops it before it listens (a port in use, a host that is not an address
            // of this machine) is a bind failure, said with what to do.
            if !listening.value {
                throw StudioError.cannotBind(host: host, port: configuration.port, detail: String(describing: error))
            }
            throw error
        }
    }

    // MARK: The page

    /// The page's files: name to content type. Nothing else is served from the resources.
    static let pageFiles: [String: String] = [
        "index.html": "text/html; charset=utf-8", "studio.css": "text/css; charset=utf-8",
        "studio.js": "text/javascript; charset=utf-8", "api.js": "text/javascript; charset=utf-8",
        "burst.js": "text/javascript; charset=utf-8", "depth.js": "text/javascript; charset=utf-8",
        "backdrop.js": "text/javascript; charset=utf-8"
    ]

    static func resource(_ name: String) -> Data? {
        guard pageFiles[name] != nil,
            let url = Bundle.module.url(forResource: name, withExtension: nil, subdirectory: "Resources")
        else { return nil }
        return try? Data(contentsOf: url)
    }

    /// Nothing outside this machine is fetched; scripts only from the studio itself.
    static let contentSecurity =
        "default-src 'self'; img-src 'self' blob: data:; style-src 'self'; script-src 'self'; connect-src 'self'; "
        + "frame-ancestors 'none'"

    func addPageRoutes(_ router: Router<BasicRequestContext>) {
        let token = configuration.token
        router.get("/") { request, _ -> Response in
            var r = Self.file("index.html")
            // The first visit carries ?token=; the cookie carries it afterwards.
            if let t = request.uri.queryParameters.get("token"), StudioGuard<BasicRequestContext>.same(t, token) {
                r.setCookie(
                    .init(
                        name: StudioGuard<BasicRequestContext>.cookieName, value: token, path: "/", secure: false,
                        httpOnly: true, sameSite: .strict))
            }
            return r
        }
        router.get("/static/:name") { _, context -> Response in
            guard let name = context.parameters.get("name"), Self.pageFiles[name] != nil else {
                throw HTTPError(.notFound, message: "no such page file")
            }
            return Self.file(name)
        }
    }

    static func file(_ name: String) -> Response {
        guard let data = resource(name), let type = pageFiles[name] else { return Response(status: .notFound) }
        return Response(
            status: .ok,
            headers: [
                .contentType: type, .cacheControl: "no-cache", .contentSecurityPolicy: contentSecurity,
                .init("X-Content-Type-Options")!: "nosniff"
            ],
            body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    // MARK: Files and uploads

    struct FileList: Codable {
        var roots: [CatalogRoot]
        var entries: [CatalogEntry]
        var maxUploadBytes: Int
        var maxUploads: Int
    }

    func addFileRoutes(_ router: Router<BasicRequestContext>) {
        router.get("/api/health") { _, _ in try jsonResponse(["status": "ok", "version": "1"]) }
        router.get("/api/files") { _, _ in
            let list = try await self.files.run { self.catalog.list() }
            return try jsonResponse(
                FileList(
                    roots: self.catalog.roots, entries: list,
                    maxUploadBytes: self.configuration.maxUploadBytes, maxUploads: self.configuration.maxUploads))
        }
        // The file itself, as stored (only from under the roots).
        router.get("/api/file") { request, _ -> Response in
            let path = try self.catalog.resolve(
                root: try queryInt(request, "root"), path: try queryString(request, "path"))
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDir), !isDir.boolValue else {
                throw HTTPError(.badRequest, message: "that is a folder; open it in the burst workspace")
            }
            return try fileResponse(path, name: (path as NSString).lastPathComponent, attachment: false)
        }
        router.post("/api/upload") { request, context -> Response in
            try await self.upload(request, context: context)
        }
    }

    /// Stores an uploaded file in the upload area after the library has read its header: a
    /// file it cannot use is refused with its one-line error and not kept.
    func upload(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let limit = configuration.maxUploadBytes
        if let declared = request.headers[.contentLength].flatMap(Int.init), declared > limit {
            throw HTTPError(
                .contentTooLarge,
                message:
                    "the file is \(declared >> 20) MB; the studio takes uploads up to \(limit >> 20) MB "
                    + "(--max-upload-mb)"
            )
        }
        let name = try queryString(request, "name")
        let clean = String(
            ((name as NSString).lastPathComponent).map { $0.isLetter || $0.isNumber || "._-".contains($0) ? $0 : "_" }
                .prefix(120))
        guard !clean.isEmpty, !clean.hasPrefix("."), let kind = StudioCatalog.kind(ofFile: clean) else {
            throw HTTPError(
                .unsupportedMediaType,
                message:
                    "\(name): only images (JPEG, PNG, TIFF, HEIC) and videos (MP4, MOV, AVI, MKV, WebM) can be uploaded"
            )
        }
        guard
            uploads.update({ n -> Bool in
                if n >= configuration.maxUploads { return false }
                n += 1
                return true
            })
        else {
            throw HTTPError(
                .tooManyRequests,
                message: "the studio holds \(configuration.maxUploads) uploads at most; restart it to clear them")
        }
        var kept = false
        defer { if !kept { uploads.update { $0 -= 1 } } }
        let dir = catalog.roots[catalog.uploadsIndex].real
        let stored = try await receive(request, name: name, as: clean, into: dir, limit: limit)
        let path = dir + "/" + stored
        do {
            let check = uploadCheck
            try await files.run {
                if kind == "video" { _ = try VideoIO.probe(path) } else { try check(path) }
            }
        } catch {
            try? FileManager.default.removeItem(atPath: path)
            // The library names the stored file; the page knows it by the name it sent.
            throw HTTPError(
                .unprocessableContent,
                message: "\(name): " + oneLine(error).replacingOccurrences(of: path + ": ", with: ""))
        }
        kept = true
        let attrs = try? FileManager.default.attributesOfItem(atPath: path)
        var entryKind = kind
        if kind == "image", StudioCatalog.depthCarriers.contains((stored as NSString).pathExtension.lowercased()),
            catalog.hasDepth(path)
        {
            entryKind = "depth"
        }
        return try jsonResponse(
            CatalogEntry(
                root: catalog.uploadsIndex, path: stored, kind: entryKind,
                bytes: (attrs?[.size] as? NSNumber)?.intValue, frames: nil), status: .created)
    }

    /// Streams an upload's body to a hidden temporary file in `dir` (memory stays at one chunk),
    /// counted against `limit` as it arrives, then links it into place under `clean` (or
    /// clean-2, ... when taken); returns the name it was stored under.
    func receive(_ request: Request, name: String, as clean: String, into dir: String, limit: Int) async throws
        -> String
    {
        var stored = clean
        let temp = dir + "/.upload-" + UUID().uuidString
        guard FileManager.default.createFile(atPath: temp, contents: nil), let out = FileHandle(forWritingAtPath: temp)
        else {
            throw HTTPError(.internalServerError, message: "cannot write the upload into \(dir)")
        }
        var received = 0
        do {
            defer { try? out.close() }
            for try await chunk in request.body {
                received += chunk.readableBytes
                if received > limit {
                    throw HTTPError(
                        .contentTooLarge,
                        message:
                            "the file is larger than \(limit >> 20) MB, the studio's upload limit (--max-upload-mb)")
                }
                try out.write(contentsOf: Data(buffer: chunk))
            }
            guard received > 0 else { throw HTTPError(.badRequest, message: "\(name) is empty") }
            // link() never replaces: two uploads of one name at once get name and name-2.
            var n = 1
            while link(temp, dir + "/" + stored) != 0 {
                guard errno == EEXIST, n < 10_000 else {
                    throw HTTPError(.internalServerError, message: "cannot store \(stored) in \(dir)")
                }
                n += 1
                stored = ((clean as NSString).deletingPathExtension) + "-\(n)." + (clean as NSString).pathExtension
            }
            unlink(temp)
        } catch {
            unlink(temp)
            throw error
        }
        return stored
    }

    /// Checks an uploaded image: its header first, against the studio's decode budget and the
    /// expansion a real photo can have (a decompression bomb is refused by its declared size,
    /// before any pixel is decoded), then the whole image within the same limits.
    var uploadCheck: @Sendable (String) throws -> Void {
        let budget = configuration.maxUploadDecodedBytes ?? configuration.burstMemoryLimit ?? (1 << 30)
        let expansion = configuration.maxUploadExpansion
        return { path in
            let limits = DecodeLimits(maxBytes: budget)
            let header = try ImageCodecs.probe(path, limits: limits)
            var st = stat()
            let fileBytes = stat(path, &st) == 0 ? max(1, Int(st.st_size)) : 1
            let channels = max(1, header.image.channels), sample = max(1, header.image.bitDepth / 8)
            let (pixels, o1) = header.storedWidth.multipliedReportingOverflow(by: header.storedHeight)
            let (declared, o2) = pixels.multipliedReportingOverflow(by: channels * sample)
            if o1 || o2 || declared > budget {
                throw StudioError.badOption(
                    "the header declares \(header.storedWidth)x\(header.storedHeight) pixels, more than the studio "
                        + "decodes (\(budget >> 20) MB; --memory-limit raises it); it was not decoded"
                )
            }
            if declared > 64 << 20 && declared / fileBytes > expansion {
                throw StudioError.badOption(
                    "the header declares \(header.storedWidth)x\(header.storedHeight) pixels (\(declared >> 20) MB) "
                        + "in a file of \(fileBytes >> 10) KB, \(declared / fileBytes) times its size: a "
                        + "decompression bomb, not a photo; it was not decoded"
                )
            }
            _ = try ImageCodecs.read(path, options: ReadOptions(limits: limits))
        }
    }

    // MARK: Jobs

    func addJobRoutes(_ router: Router<BasicRequestContext>) {
        router.get("/api/jobs/:id/events") { _, context -> Response in
            let job = try self.jobs.get(context.parameters.get("id"))
            return Response(
                status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-store"],
                body: job.eventStream())
        }
        router.get("/api/jobs/:id") { _, context -> Response in
            let job = try self.jobs.get(context.parameters.get("id"))
            return try jsonResponse([
                "id": job.id, "finished": job.finished ? "true" : "false", "last": job.last?.type ?? "queued"
            ])
        }
        router.post("/api/jobs/:id/cancel") { _, context -> Response in
            let job = try self.jobs.get(context.parameters.get("id"))
            job.cancellation.cancel()
            return try jsonResponse(["id": job.id, "cancelling": "true"])
        }
        router.get("/api/jobs/:id/download") { _, context -> Response in
            let job = try self.jobs.get(context.parameters.get("id"))
            guard let d = job.download else {
                throw HTTPError(.conflict, message: "the job has nothing to download (yet)")
            }
            return try self.exportResponse(d.path, name: d.name, type: d.contentType)
        }
    }

    /// Starts a job on a lane; its events say when it is queued, started, progressing, done.
    func startJob(workspace: String, lane: WorkLane, _ work: @escaping @Sendable (StudioJob) throws -> Void)
        -> StudioJob
    {
        let job = jobs.add { StudioJob(id: $0, workspace: workspace) }
        jobs.keep(newest: 50)
        job.post(
            JobEvent(
                type: "queued",
                message: lane.load > 0 ? "waiting for \(lane.load) job(s) in the \(workspace) workspace" : nil))
        lane.start {
            if job.cancellation.isCancelled {
                job.post(JobEvent(type: "cancelled"))
                return
            }
            job.post(JobEvent(type: "started"))
            do {
                try work(job)
                job.post(JobEvent(type: job.cancellation.isCancelled ? "cancelled" : "done"))
            } catch {
                job.post(JobEvent(type: job.cancellation.isCancelled ? "cancelled" : "error", message: oneLine(error)))
            }
        }
        return job
    }
}

// MARK: Helpers shared by the workspaces

/// The library's error as one line, as the command line prints it.
func oneLine(_ error: Error) -> String {
    String(describing: error).split(whereSeparator: \.isNewline).joined(separator: " ")
}

/// A JSON answer, in the one convention of every report (``ReportJSON``: snake_case keys, sorted).
func jsonResponse<T: Encodable>(_ value: T, status: HTTPResponse.Status = .ok) throws -> Response {
    Response(
        status: status, headers: [.contentType: "application/json", .cacheControl: "no-store"],
        body: .init(byteBuffer: ByteBuffer(bytes: try ReportJSON.encode(value))))
}

func imageResponse(_ bytes: [UInt8], type: String, headers extra: HTTPFields = [:]) -> Response {
    var h: HTTPFields = [.contentType: type, .cacheControl: "no-store"]
    h.append(contentsOf: extra)
    return Response(status: .ok, headers: h, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
}

extension Studio {
    /// An export, sent once: the file is deleted as it is read (exports never pile up).
    func exportResponse(_ path: String, name: String, type: String? = nil) throws -> Response {
        guard let data = exports.take(path) else {
            throw HTTPError(.gone, message: "\(name) was already downloaded or has expired; export it again")
        }
        return dataResponse(data, name: name, attachment: true, type: type)
    }
}

func fileResponse(_ path: String, name: String, attachment: Bool, type: String? = nil) throws -> Response {
    guard let data = FileManager.default.contents(atPath: path) else {
        throw HTTPError(.notFound, message: "\(name) cannot be read")
    }
    return dataResponse(data, name: name, attachment: attachment, type: type)
}

func dataResponse(_ data: Data, name: String, attachment: Bool, type: String? = nil) -> Response {
    let ext = (name as NSString).pathExtension.lowercased()
    let t =
        type ?? [
            "jpg": "image/jpeg", "jpeg": "image/jpeg", "png": "image/png", "tif": "image/tiff", "tiff": "image/tiff",
            "heic": "image/heic", "heif": "image/heif", "mp4": "video/mp4", "json": "application/json"
        ][ext] ?? "application/octet-stream"
    let safe = name.map { $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) ? $0 : "_" }
    return Response(
        status: .ok,
        headers: [
            .contentType: t, .cacheControl: "no-store",
            .contentDisposition: "\(attachment ? "attachment" : "inline"); filename=\"\(String(safe))\""
        ],
        body: .init(byteBuffer: ByteBuffer(bytes: data)))
}

func queryString(_ request: Request, _ name: String) throws -> String {
    guard let v = request.uri.queryParameters.get(name) else {
        throw HTTPError(.badRequest, message: "the request needs ?\(name)=")
    }
    return v
}

func queryInt(_ request: Request, _ name: String, default d: Int? = nil, range: ClosedRange<Int> = Int.min...Int.max)
    throws -> Int
{
    guard let s = request.uri.queryParameters.get(name) else {
        if let d { return d }
        throw HTTPError(.badRequest, message: "the request needs ?\(name)=")
    }
    guard let v = Int(s), range.contains(v) else {
        throw HTTPError(
            .badRequest, message: "\(name)=\(s) is not a whole number within \(range.lowerBound)...\(range.upperBound)")
    }
    return v
}

/// A finite number within `range` (NaN and infinity are refused, not clamped).
func queryFloat(_ request: Request, _ name: String, default d: Float, range: ClosedRange<Float>) throws -> Float {
    guard let v = try queryNumber(request, name) else { return d }
    guard range.contains(v) else {
        throw HTTPError(
            .badRequest, message: "\(name)=\(v) must be a number within \(range.lowerBound)...\(range.upperBound)")
    }
    return v
}

/// A page field and the library setting it sets (`GET /api/depth/settings`, `/api/backdrop/settings`).
struct FieldSetting: Codable {
    var field: String
    var setting: NumericSetting

    /// The page's sliders for these declared settings of `type`, each field named by its key.
    static func fields<T: DeclaresSettings>(_ type: T.Type, _ keys: [String]) -> [FieldSetting] {
        keys.map { key in
            guard case .number(let n) = T.setting(key).kind else { preconditionFailure("\(key) is not a number") }
            return FieldSetting(field: key, setting: n)
        }
    }
}

/// A query parameter as a number, nil when absent; not a number is a 400 naming it. NaN and
/// infinity pass here: the range check that follows (the library's `validate()`) refuses them.
func queryNumber(_ request: Request, _ name: String) throws -> Float? {
    guard let s = request.uri.queryParameters.get(name) else { return nil }
    guard let v = Float(s) else { throw HTTPError(.badRequest, message: "\(name)=\(s) is not a number") }
    return v
}

/// Runs an option type's `validate()`; a refusal becomes a 400 naming the page's field for the
/// setting (`fields` maps a setting's name to it; a setting not in it keeps its name).
func validateSettings(_ fields: [String: String], _ validate: () throws(SettingError) -> Void) throws {
    if let refusal = SettingError.refusal(validate) {
        throw HTTPError(.badRequest, message: refusal.named(fields[refusal.setting] ?? refusal.setting))
    }
}

/// Runs library work and turns its errors into 422 responses carrying its one-line message.
func libraryCall<T: Sendable>(_ lane: WorkLane, _ work: @escaping @Sendable () throws -> T) async throws -> T {
    do { return try await lane.run(work) } catch let e as HTTPError { throw e } catch {
        throw HTTPError(.unprocessableContent, message: oneLine(error))
    }
}

/// Decodes a JSON body of at most 64 KB.
func decodeBody<T: Decodable>(_ request: Request, as type: T.Type) async throws -> T {
    let body = try await request.body.collect(upTo: 65536)
    do { return try ReportJSON.decoder().decode(T.self, from: Data(buffer: body)) } catch {
        // In the words a user reads (where, and what), never the decoder's own description.
        throw HTTPError(
            .badRequest, message: "the request body is not the JSON expected: \(SettingsCoding.message(error))")
    }
}
