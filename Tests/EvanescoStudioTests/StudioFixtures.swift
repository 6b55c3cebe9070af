import EvanescoCore
import EvanescoIO
import Foundation
import HTTPTestSupport
import Hummingbird
import HTTPTypes
import Logging
import Testing
@testable import EvanescoStudio

/// A folder the tests fill and remove.
final class StudioScratch: @unchecked Sendable {
    let dir: String
    init() {
        dir = NSTemporaryDirectory() + "/evanesco-studio-test-" + UUID().uuidString
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: dir) }
    func file(_ name: String) -> String { dir + "/" + name }
    func folder(_ name: String) -> String {
        try? FileManager.default.createDirectory(atPath: file(name), withIntermediateDirectories: true)
        return file(name)
    }
}

enum StudioFixtures {
    /// A textured background (the same in every frame) with a dark square that moves: stacked,
    /// the square vanishes. Frame `k` has the square at x = 10 + 40 k.
    static func burstFrame(_ k: Int, width w: Int = 192, height h: Int = 128) -> Image<UInt8> {
        Image<UInt8>(width: w, height: h, channels: 3) { d in
            for y in 0..<h {
                for x in 0..<w {
                    let inSquare = x >= 10 + 40 * k && x < 40 + 40 * k && y >= 40 && y < 70
                    // Smooth texture of incommensurate waves: detail everywhere, repeating nowhere (so it registers).
                    let fx = Double(x), fy = Double(y)
                    let t =
                        50 * sin(fx * 0.21 + fy * 0.05) + 40 * sin(fy * 0.17 - fx * 0.07) + 25
                        * sin((fx + 2 * fy) * 0.093)
                    for c in 0..<3 {
                        let v = 128 + t * (1 - 0.2 * Double(c))
                        d[(y * w + x) * 3 + c] = inSquare ? 5 : UInt8(max(0, min(255, v.rounded())))
                    }
                }
            }
        }
    }

    /// Writes a burst of `count` frames into `dir` as PNG.
    static func writeBurst(_ dir: String, count: Int = 3) throws {
        for k in 0..<count {
            try ImageCodecs.write(.uint8(burstFrame(k)), to: dir + String(format: "/frame%02d.png", k))
        }
    }

    /// A GDepth portrait JPEG: a 320x240 gradient photo; depth near (1 m) on the left half, far
    /// (4 m) on the right (RangeLinear, 255 = far), as a PNG in the XMP.
    static func depthPhoto(_ path: String) throws {
        let w = 320, h = 240
        let depth = Image<UInt8>(width: 80, height: 60, channels: 1) { d in
            for y in 0..<60 { for x in 0..<80 { d[y * 80 + x] = x < 40 ? 0 : 255 } }
        }
        let b64 = Data(try ImageCodecs.encode(.uint8(depth), format: .png)).base64EncodedString()
        let xmp = """
            <x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">\
            <rdf:Description xmlns:GDepth="http://ns.google.com/photos/1.0/depthmap/" GDepth:Format="RangeLinear" \
            GDepth:Near="1" GDepth:Far="4" GDepth:Mime="image/png" GDepth:Data="\(b64)"/></rdf:RDF></x:xmpmeta>
            """
        let photo = Image<UInt8>(width: w, height: h, channels: 3) { d in
            for y in 0..<h {
                for x in 0..<w {
                    d[(y * w + x) * 3] = UInt8(x * 255 / w)
                    d[(y * w + x) * 3 + 1] = UInt8(y * 255 / h)
                    d[(y * w + x) * 3 + 2] = 128
                }
            }
        }
        let jpeg = try ImageCodecs.encode(.uint8(photo), format: .jpeg, options: WriteOptions(quality: 95))
        let payload = Array("http://ns.adobe.com/xap/1.0/".utf8) + [0] + Array(xmp.utf8)
        let len = payload.count + 2
        let out = Array(jpeg[0..<2]) + [0xFF, 0xE1, UInt8(len >> 8), UInt8(len & 0xFF)] + payload + Array(jpeg[2...])
        FileManager.default.createFile(atPath: path, contents: Data(out))
    }

    /// A studio over a scratch folder holding `burst/` (3 frames), `portrait.jpg` (depth),
    /// `plain.png`, and `secret.txt` beside it (outside the root).
    static func studio(_ s: StudioScratch, configure: (inout StudioConfiguration) -> Void = { _ in }) throws -> Studio {
        let root = s.folder("root")
        try writeBurst(s.folder("root/burst"))
        try depthPhoto(root + "/portrait.jpg")
        try ImageCodecs.write(.uint8(burstFrame(0)), to: root + "/plain.png")
        FileManager.default.createFile(atPath: s.file("secret.txt"), contents: Data("secret".utf8))
        var c = StudioConfiguration(paths: [root], token: "t0ken")
        configure(&c)
        return try Studio(c)
    }
}

/// A reply as the API tests read it.
struct TestResponse {
    let status: HTTPResponse.Status
    let headers: HTTPFields
    let body: ByteBuffer
}

/// Requests to a studio served on a real socket, written exactly as given (raw paths included).
struct StudioClient: Sendable {
    let port: Int

    @discardableResult
    func execute<R>(
        uri: String, method: HTTPRequest.Method, headers: HTTPFields = [:], body: ByteBuffer? = nil,
        _ check: (TestResponse) async throws -> R
    ) async throws -> R {
        let reply = try await HTTP1.request(
            method.rawValue, port: port, path: uri, headers: headers.map { ($0.name.rawName, $0.value) },
            body: body.map { Array(buffer: $0) })
        var fields = HTTPFields()
        for h in reply.headers {
            if let name = HTTPField.Name(h.name) { fields.append(HTTPField(name: name, value: h.value)) }
        }
        return try await check(
            TestResponse(status: .init(code: reply.status), headers: fields, body: ByteBuffer(bytes: reply.body)))
    }
}

extension StudioFixtures {
    /// Serves `studio` on a free port of 127.0.0.1 while `body` runs, then stops it as the CLI
    /// does at Ctrl-C (its temporary folder is removed).
    static func serve(_ studio: Studio, _ body: (StudioClient) async throws -> Void) async throws {
        let (ports, sink) = AsyncStream.makeStream(of: Int.self)
        // Everything the server logs, at info and above: a clean shutdown (the task cancelled)
        // must log nothing above info.
        let log = LogRecords()
        let server = Task {
            defer { sink.finish() }
            try await studio.run(handlesSignals: false, logger: log.logger(level: .info)) { url in
                // http://127.0.0.1:PORT/?token=...
                sink.yield(Int(url.split(separator: ":")[2].prefix { $0.isNumber }) ?? 0)
                sink.finish()
            }
        }
        var next = ports.makeAsyncIterator()
        guard let port = await next.next() else {
            try await server.value
            throw HTTP1.Failure(description: "the studio stopped before it listened")
        }
        do {
            try await body(StudioClient(port: port))
        } catch {
            server.cancel()
            _ = try? await server.value
            throw error
        }
        server.cancel()
        try await server.value
        // The capture works: the server said it was listening (at info).
        #expect(log.records.contains { $0.message.contains("listening") }, "\(log.records.map(\.message))")
        let loud = log.records.filter { $0.level > .info }
        #expect(loud.isEmpty, "a clean shutdown logged: \(loud.map { "\($0.level) \($0.message)" })")
    }
}

/// Log records kept in memory (a `LogHandler` per logger, all writing to one list).
final class LogRecords: Sendable {
    struct Record: Sendable {
        var level: Logger.Level
        var message: String
    }
    private let box = LockedBox([Record]())
    var records: [Record] { box.value }

    func logger(level: Logger.Level) -> Logger {
        var l = Logger(label: "evanesco.studio.test") { _ in Handler(records: self) }
        l.logLevel = level
        return l
    }

    struct Handler: LogHandler {
        let records: LogRecords
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .info
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(
            level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String, file: String,
            function: String,
            line: UInt
        ) {
            records.box.update { $0.append(Record(level: level, message: "\(message)")) }
        }
    }
}
