import EvanescoCore
import EvanescoDepth
import EvanescoIO
import EvanescoStack
import Foundation
import Hummingbird
import HTTPTypes
import Testing
@testable import EvanescoStudio

let tokenHeader = HTTPField.Name("X-Evanesco-Token")!
let authorized: HTTPFields = [tokenHeader: "t0ken"]
let requestHeader = HTTPField.Name("X-Evanesco-Request")!

extension StudioClient {
    /// What the studio's own page sends with a request that changes something: the token, the
    /// studio's exact origin (scheme, host, port) and the request header.
    var fromPage: HTTPFields {
        [
            tokenHeader: "t0ken", .origin: "http://127.0.0.1:\(port)", requestHeader: "1",
            .contentType: "application/json"
        ]
    }
}

func json(_ body: ByteBuffer) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: Data(buffer: body))) as? [String: Any] ?? [:]
}
func errorMessage(_ r: TestResponse) -> String {
    (json(r.body)["error"] as? [String: Any])?["message"] as? String ?? ""
}
func with(_ h: HTTPFields, _ name: HTTPField.Name, _ value: String) -> HTTPFields {
    var c = h
    c[name] = value
    return c
}
func buffer(_ s: String) -> ByteBuffer { ByteBuffer(string: s) }

@Suite struct StudioFilesAndUploads {
    @Test func listsBurstsDepthPhotosAndImages() async throws {
        let s = StudioScratch()
        let studio = try StudioFixtures.studio(s)
        defer { studio.shutdown() }
        try await StudioFixtures.serve(studio) { client in
            try await client.execute(uri: "/api/files", method: .get, headers: authorized) { r in
                #expect(r.status == .ok)
                let entries = json(r.body)["entries"] as? [[String: Any]] ?? []
                let byPath = Dictionary(entries.map { ($0["path"] as! String, $0) }, uniquingKeysWith: { a, _ in a })
                #expect(byPath["burst"]?["kind"] as? String == "burst" && byPath["burst"]?["frames"] as? Int == 3)
                #expect(byPath["portrait.jpg"]?["kind"] as? String == "depth")
                #expect(byPath["plain.png"]?["kind"] as? String == "image")
                #expect(byPath["burst/frame01.png"]?["kind"] as? String == "image")
                #expect(entries.allSatisfy { !($0["path"] as! String).contains("secret") })
            }
        }
    }

    @Test("The burst page's align and merge choices and their defaults are the library's")
    func burstChoicesAreTheLibrarys() async throws {
        let s = StudioScratch()
        let studio = try StudioFixtures.studio(s)
        defer { studio.shutdown() }
        try await StudioFixtures.serve(studio) { client in
            try await client.execute(uri: "/api/burst/settings", method: .get, headers: authorized) { r in
                #expect(r.status == .ok)
                let choices = json(r.body)
                let align = choices["align"] as? [String: Any], merge = choices["merge"] as? [String: Any]
                #expect(align?["values"] as? [String] == AlignMode.allCases.map(\.rawValue))
                #expect(merge?["values"] as? [String] == MergeMethod.allCases.map(\.rawValue))
                #expect(align?["default_value"] as? String == "auto" && merge?["default_value"] as? String == "robust")
                #expect(
                    (merge?["values"] as? [String])?.contains("sigma-clip") == true,
                    "kebab-case, as on the command line")
            }
        }
    }

    @Test func uploadsAreCheckedBoundedAndListed() async throws {
        let s = StudioScratch()
        let studio = try StudioFixtures.studio(s) {
            $0.maxUploadBytes = 200_000
            $0.maxUploads = 3
        }
        defer { studio.shutdown() }
        let png = try ImageCodecs.encode(.uint8(StudioFixtures.burstFrame(1)), format: .png)
        try await StudioFixtures.serve(studio) { client in
            let upload = with(client.fromPage, .contentType, "application/octet-stream")
            try await Self.refusedUploads(client, headers: upload)
            // A good one is kept, under a cleaned name, and listed.
            try await client.execute(
                uri: "/api/upload?name=..%2F..%2Fnice%20frame.png", method: .post, headers: upload,
                body: ByteBuffer(bytes: png)
            ) { r in
                #expect(r.status == .created)
                let e = json(r.body)
                #expect(
                    e["path"] as? String == "nice_frame.png" && e["kind"] as? String == "image"
                        && e["root"] as? Int == 1)
            }
            try await client.execute(uri: "/api/files", method: .get, headers: authorized) { r in
                let entries = json(r.body)["entries"] as? [[String: Any]] ?? []
                #expect(entries.contains { $0["root"] as? Int == 1 && $0["path"] as? String == "nice_frame.png" })
            }
            try await client.execute(uri: "/api/file?root=1&path=nice_frame.png", method: .get, headers: authorized) {
                r in
                #expect(r.status == .ok && Array(buffer: r.body) == png)
            }
            // Refused uploads did not count; the count limit does.
            try await client.execute(
                uri: "/api/upload?name=second.png", method: .post, headers: upload, body: ByteBuffer(bytes: png)
            ) { #expect($0.status == .created) }
            // The same name again is kept beside it, never over it.
            try await client.execute(
                uri: "/api/upload?name=second.png", method: .post, headers: upload, body: ByteBuffer(bytes: png)
            ) { r in
                #expect(r.status == .created && json(r.body)["path"] as? String == "second-2.png")
            }
            try await client.execute(
                uri: "/api/upload?name=third.png", method: .post, headers: upload, body: ByteBuffer(bytes: png)
            ) { r in
                #expect(r.status == .tooManyRequests)
                #expect(errorMessage(r).contains("3 uploads"))
            }
            // The server keeps serving.
            try await client.execute(uri: "/api/health", method: .get, headers: authorized) {
                #expect($0.status == .ok)
            }
            let kept = try FileManager.default.contentsOfDirectory(atPath: studio.temporaryDirectory + "/uploads")
                .sorted()
            #expect(kept == ["nice_frame.png", "second-2.png", "second.png"])
        }
        // Stopped, the studio leaves nothing behind.
        #expect(!FileManager.default.fileExists(atPath: studio.temporaryDirectory))
    }
}

@Suite struct StudioWorkspaces {
    /// Reads a job's server-sent events to the end.
    static func events(_ client: StudioClient, job: String) async throws -> [String] {
        try await client.execute(uri: "/api/jobs/\(job)/events", method: .get, headers: authorized) { r in
            #expect(r.headers[.contentType] == "text/event-stream")
            return String(buffer: r.body).components(separatedBy: "\n").filter { $0.hasPrefix("event: ") }.map {
                String($0.dropFirst(7))
            }
        }
    }

    /// With a one-byte memory limit the burst keeps only thumbnails and is stacked from its files
    /// through the library's temporary file: the same result.
    @Test(arguments: [false, true])
    func stacksABurstAsTheLibraryDoes(throughAFile: Bool) async throws {
        let s = StudioScratch()
        let studio = try StudioFixtures.studio(s) { if throughAFile { $0.burstMemoryLimit = 1 } }
        defer { studio.shutdown() }
        try await StudioFixtures.serve(studio) { client in
            let session: String = try await client.execute(
                uri: "/api/burst/open", method: .post, headers: client.fromPage,
                body: buffer(#"{"root":0,"path":"burst"}"#)
            ) { r in
                #expect(r.status == .ok)
                let o = json(r.body)
                #expect(
                    (o["frames"] as? [[String: Any]])?.map { $0["name"] as! String } == [
                        "frame00.png", "frame01.png", "frame02.png"
                    ])
                return o["session"] as! String
            }
            try await client.execute(uri: "/api/burst/\(session)/thumb?index=2", method: .get, headers: authorized) {
                r in
                let img = try ImageCodecs.decode(Array(buffer: r.body), path: "thumb").image
                #expect(max(img.width, img.height) == 192)
            }
            try await client.execute(uri: "/api/burst/\(session)/report", method: .get, headers: authorized) {
                #expect($0.status == .conflict)
            }
            try await client.execute(
                uri: "/api/burst/\(session)/stack", method: .post, headers: client.fromPage,
                body: buffer(#"{"reference":7}"#)
            ) { #expect($0.status == .badRequest) }
            try await client.execute(
                uri: "/api/burst/\(session)/stack", method: .post, headers: client.fromPage,
                body: buffer(#"{"merge":"average"}"#)
            ) { r in
                #expect(r.status == .badRequest)
                #expect(errorMessage(r).contains("median"))
            }
            let job: String = try await client.execute(
                uri: "/api/burst/\(session)/stack", method: .post, headers: client.fromPage,
                body: buffer(#"{"reference":1,"align":"auto","merge":"median"}"#)
            ) { json($0.body)["job"] as! String }
            let events = try await Self.events(client, job: job)
            #expect(
                events.first == "queued" && events.contains("started") && events.contains("progress")
                    && events.last == "done", "\(events)")
            try await client.execute(uri: "/api/burst/\(session)/report", method: .get, headers: authorized) { r in
                let o = json(r.body)
                #expect(
                    o["frames_used"] as? Int == 3 && o["reference"] as? Int == 1 && o["merge"] as? String == "median",
                    "\((o["frames"] as? [[String: Any]])?.map { $0["reason"] ?? "" } ?? [])")
                #expect((o["legend"] as? [String: Any])?["merged_frames"] as? Int == 3)
                #expect(o["frames_held"] as? String == (throughAFile ? "temporary file" : "memory"))
                #expect((o["spilled_bytes"] as? Int ?? 0) >= (throughAFile ? 3 * 192 * 128 * 3 : 0))
                // The library's report itself, as `evanesco stack --report` writes it.
                let report = try ReportJSON.decoder().decode(StackReport.self, from: Data(buffer: r.body))
                #expect(
                    report.tool == "evanesco stack" && report.framesUsed == 3 && report.frames.count == 3
                        && report.times.align != nil)
                #expect((o["times_s"] as? [String: Any])?["align"] is Double && o["strokes"] as? Int == 0)
            }
            try await Self.downloadIsTheLibrarysResult(client, session: session)
            for which in ["result", "reference", "kept", "provenance", "shift", "legend"] {
                try await client.execute(
                    uri: "/api/burst/\(session)/image?which=\(which)", method: .get, headers: authorized
                ) { r in
                    #expect(r.status == .ok, "\(which)")
                    #expect(r.headers[.contentType] == "image/jpeg")
                }
            }
            try await client.execute(uri: "/api/burst/\(session)/image?which=../x", method: .get, headers: authorized) {
                #expect($0.status == .badRequest)
            }
            try await client.execute(
                uri: "/api/burst/\(session)/download?format=gif", method: .get, headers: authorized
            ) { #expect($0.status == .badRequest) }
        }
    }

    @Test func aCancelledStackSaysSo() async throws {
        let s = StudioScratch()
        let studio = try StudioFixtures.studio(s)
        defer { studio.shutdown() }
        try await StudioFixtures.serve(studio) { client in
            let session: String = try await client.execute(
                uri: "/api/burst/open", method: .post, headers: client.fromPage,
                body: buffer(#"{"root":0,"path":"burst"}"#)
            ) {
                json($0.body)["session"] as! String
            }
            // Hold the burst lane so the stack is still queued when it is cancelled.
            let gate = DispatchSemaphore(value: 0)
            studio.burst.lane.start { gate.wait() }
            let job: String = try await client.execute(
                uri: "/api/burst/\(session)/stack", method: .post, headers: client.fromPage, body: buffer("{}")
            ) {
                json($0.body)["job"] as! String
            }
            try await client.execute(uri: "/api/jobs/\(job)/cancel", method: .post, headers: client.fromPage) {
                #expect($0.status == .ok)
            }
            gate.signal()
            let events = try await Self.events(client, job: job)
            #expect(events == ["queued", "cancelled"], "\(events)")
            try await client.execute(uri: "/api/burst/\(session)/report", method: .get, headers: authorized) {
                #expect($0.status == .conflict)
            }
            try await client.execute(uri: "/api/jobs/nope/cancel", method: .post, headers: client.fromPage) {
                #expect($0.status == .notFound)
            }
        }
    }

    @Test func rendersDepthPreviewsFocusAndExports() async throws {
        let s = StudioScratch()
        let studio = try StudioFixtures.studio(s) { $0.previewLongSide = 160 }
        defer { studio.shutdown() }
        try await StudioFixtures.serve(studio) { client in
            let o: [String: Any] = try await client.execute(
                uri: "/api/depth/open", method: .post, headers: client.fromPage,
                body: buffer(#"{"root":0,"path":"portrait.jpg"}"#)
            ) { r in
                #expect(r.status == .ok)
                return json(r.body)
            }
            let session = o["session"] as! String
            #expect(
                o["width"] as? Int == 320 && o["preview_width"] as? Int == 160 && o["preview_height"] as? Int == 120)
            #expect(
                ((o["depth"] as? [String: Any])?["depth"] as? [String: Any])?["source"] as? String == "GDepth (XMP)")
            // Click on the left (near) half, then the right (far) half.
            let near: Double = try await client.execute(
                uri: "/api/depth/\(session)/focus-at?x=0.2&y=0.5", method: .get, headers: authorized
            ) { json($0.body)["focus"] as! Double }
            let far: Double = try await client.execute(
                uri: "/api/depth/\(session)/focus-at?x=0.8&y=0.5", method: .get, headers: authorized
            ) { json($0.body)["focus"] as! Double }
            #expect(near > 0.9 && far < 0.1, "near \(near), far \(far)")
            // The mask view at focus near: white on the left, black on the right, at preview size.
            func mask(_ focus: Double) async throws -> Image<UInt8> {
                try await client.execute(
                    uri: "/api/depth/\(session)/render?view=mask&focus=\(focus)&seq=1", method: .get,
                    headers: authorized
                ) { r in
                    #expect(r.status == .ok && r.headers[HTTPField.Name("X-Render-Ms")!] != nil)
                    return try ImageCodecs.decode(Array(buffer: r.body), path: "mask").image.uint8
                }
            }
            let m = try await mask(near)
            #expect(m.width == 160 && m.height == 120)
            #expect(m.samples[60 * 160 + 20] > 240 && m.samples[60 * 160 + 140] < 15)
            let m2 = try await mask(far)
            #expect(m2.samples[60 * 160 + 20] < 15 && m2.samples[60 * 160 + 140] > 240)
            try await Self.depthRefusalsAndSettings(client, session: session)
            for effect in ["spotlight", "color", "blur", "lens"] {
                try await client.execute(
                    uri: "/api/depth/\(session)/render?effect=\(effect)&focus=0.9&seq=9", method: .get,
                    headers: authorized
                ) { r in
                    #expect(r.status == .ok, "\(effect)")
                }
            }
            try await client.execute(
                uri: "/api/depth/\(session)/export?effect=blur&focus=0.9&format=png", method: .get, headers: authorized
            ) { r in
                #expect(r.headers[.contentDisposition]?.contains("portrait-blur.png") == true)
                let img = try ImageCodecs.decode(Array(buffer: r.body), path: "export").image
                #expect(img.width == 320 && img.height == 240)
            }
            try await client.execute(uri: "/api/depth/\(session)/matte?kind=hair", method: .get, headers: authorized) {
                #expect($0.status == .notFound)
            }
            try await client.execute(
                uri: "/api/depth/open", method: .post, headers: client.fromPage,
                body: buffer(#"{"root":0,"path":"plain.png"}"#)
            ) { r in
                #expect(r.status == .unprocessableContent)
                #expect(errorMessage(r).contains("plain.png"))
            }
        }
    }

    @Test func replacesTheBackgroundOfAPortrait() async throws {
        let s = StudioScratch()
        let studio = try StudioFixtures.studio(s)
        defer { studio.shutdown() }
        try await StudioFixtures.serve(studio) { client in
            let session: String = try await client.execute(
                uri: "/api/backdrop/open", method: .post, headers: client.fromPage,
                body: buffer(#"{"photo":{"root":0,"path":"portrait.jpg"}}"#)
            ) { r in
                #expect(r.status == .ok)
                let o = json(r.body)
                #expect(o["frames"] as? Int == 1 && o["width"] as? Int == 320)
                return o["session"] as! String
            }
            // The nearest region (left half, 1 m) is kept; behind the cutoff it is the background (black).
            let composite: Image<UInt8> = try await client.execute(
                uri: "/api/backdrop/\(session)/render?cutoffOffset=0.5", method: .get, headers: authorized
            ) { r in
                #expect(r.status == .ok)
                #expect(r.headers[HTTPField.Name("X-Backdrop")!]?.contains("cutoff") == true)
                return try ImageCodecs.decode(Array(buffer: r.body), path: "composite").image.uint8
            }
            let w = composite.width
            #expect(composite.samples[(120 * w + 60) * 3] > 20)  // the near half, photo kept
            #expect(composite.samples[(120 * w + 280) * 3] < 10)  // the far half, black
            let mask: Image<UInt8> = try await client.execute(
                uri: "/api/backdrop/\(session)/render?cutoffOffset=0.5&view=mask", method: .get, headers: authorized
            ) {
                try ImageCodecs.decode(Array(buffer: $0.body), path: "mask").image.uint8
            }
            #expect(mask.samples[120 * mask.width + 60] > 200 && mask.samples[120 * mask.width + 280] < 30)
            // With plain.png as the background, the far half shows it.
            let withBackground: Image<UInt8> = try await client.execute(
                uri: "/api/backdrop/\(session)/render?cutoffOffset=0.5&bgRoot=0&bgPath=plain.png", method: .get,
                headers: authorized
            ) {
                try ImageCodecs.decode(Array(buffer: $0.body), path: "bg").image.uint8
            }
            #expect(withBackground.samples[(120 * w + 280) * 3] > 20)
            try await client.execute(
                uri: "/api/backdrop/\(session)/render?bgRoot=0&bgPath=../secret.txt", method: .get, headers: authorized
            ) { #expect($0.status == .forbidden) }
            try await client.execute(uri: "/api/backdrop/\(session)/render?gamma=0", method: .get, headers: authorized)
            { #expect($0.status == .badRequest) }
            try await Self.backdropRefusalsAndSettings(client, session: session)
            let job: String = try await client.execute(
                uri: "/api/backdrop/\(session)/export?cutoffOffset=0.5", method: .post, headers: client.fromPage
            ) { json($0.body)["job"] as! String }
            let events = try await Self.events(client, job: job)
            #expect(events.last == "done", "\(events)")
            try await client.execute(uri: "/api/jobs/\(job)/download", method: .get, headers: authorized) { r in
                let img = try ImageCodecs.decode(Array(buffer: r.body), path: "export").image
                #expect(img.width == 320 && img.height == 240)
            }
        }
    }
}

extension StudioWorkspaces {
    /// A colour + depth clip as two folders of frames (16-bit millimetre depth): preview any
    /// frame, then export the video through ffmpeg.
    @Test(
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg"),
            "SKIPPED: ffmpeg is not installed (scripts/install-deps.sh installs it)"))
    func playsAndExportsAClip() async throws {
        let s = StudioScratch()
        let studio = try StudioFixtures.studio(s)
        defer { studio.shutdown() }
        let color = s.folder("root/clip-color"), depth = s.folder("root/clip-depth")
        for k in 0..<3 {
            try ImageCodecs.write(.uint8(StudioFixtures.burstFrame(0)), to: color + "/c\(k).png")
            // Near (1 m) on a band that moves right by 20 px a frame; far (4 m) elsewhere.
            let d = Image<UInt16>(width: 192, height: 128, channels: 1) { p in
                for y in 0..<128 { for x in 0..<192 { p[y * 192 + x] = x >= 20 * k && x < 20 * k + 80 ? 1000 : 4000 } }
            }
            try ImageCodecs.write(.uint16(d), to: depth + "/d\(k).png")
        }
        try await StudioFixtures.serve(studio) { client in
            let session: String = try await client.execute(
                uri: "/api/backdrop/open", method: .post, headers: client.fromPage,
                body: buffer(#"{"color":{"root":0,"path":"clip-color"},"depth":{"root":0,"path":"clip-depth"}}"#)
            ) { r in
                #expect(r.status == .ok, "\(errorMessage(r))")
                let o = json(r.body)
                #expect(o["frames"] as? Int == 3 && o["width"] as? Int == 192 && o["truncated"] as? Bool == false)
                return o["session"] as? String ?? ""
            }
            // The kept band follows the near region from frame to frame.
            for k in [0, 2] {
                let mask: Image<UInt8> = try await client.execute(
                    uri: "/api/backdrop/\(session)/render?view=mask&blur=0&frame=\(k)", method: .get,
                    headers: authorized
                ) {
                    try ImageCodecs.decode(Array(buffer: $0.body), path: "mask").image.uint8
                }
                #expect(mask.samples[64 * 192 + 20 * k + 40] > 200 && mask.samples[64 * 192 + 170] < 30, "frame \(k)")
            }
            try await client.execute(uri: "/api/backdrop/\(session)/render?frame=3", method: .get, headers: authorized)
            { #expect($0.status == .badRequest) }
            let job: String = try await client.execute(
                uri: "/api/backdrop/\(session)/export", method: .post, headers: client.fromPage
            ) { json($0.body)["job"] as? String ?? "" }
            let events = try await Self.events(client, job: job)
            #expect(events.last == "done", "\(events)")
            try await client.execute(uri: "/api/jobs/\(job)/download", method: .get, headers: authorized) { r in
                #expect(r.headers[.contentType] == "video/mp4")
                let file = s.file("out.mp4")
                FileManager.default.createFile(atPath: file, contents: Data(buffer: r.body))
                let frames = try VideoIO.probe(file).frameCount
                #expect(frames == 3)
            }
        }
    }
}

/// A bare HTTP/1.1 request over a socket, to send a Host header no client library would.
enum RawHTTP {
    static func get(port: Int, path: String, host: String, headers: [String]) throws -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let c = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard c == 0 else { throw POSIXError(.ECONNREFUSED) }
        let request =
            (["GET \(path) HTTP/1.1", "Host: \(host)", "Connection: close"] + headers).joined(separator: "\r\n")
            + "\r\n\r\n"
        _ = request.withCString { send(fd, $0, strlen($0), 0) }
        var out = [UInt8](), chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(fd, &chunk, chunk.count, 0)
            if n <= 0 { break }
            out += chunk[0..<n]
        }
        return String(decoding: out, as: UTF8.self)
    }
}
