import EvanescoCore
import EvanescoIO
import Foundation
import HTTPTestSupport
import Hummingbird
import HTTPTypes
import Testing
@testable import EvanescoStudio

/// What a hostile or careless client must not be able to do: wedge the renders, hold
/// connections for ever, make the studio decode a bomb, fill the disk with exports; and what a
/// killed studio must not leave behind.
@Suite struct StudioHardening {
    /// One render with the largest `seq` must not make every later render look old.
    @Test func noSequenceNumberWedgesTheRenders() async throws {
        let s = StudioScratch()
        let studio = try StudioFixtures.studio(s) { $0.previewLongSide = 160 }
        defer { studio.shutdown() }
        try await StudioFixtures.serve(studio) { client in
            let session = try await client.openDepth("portrait.jpg")
            for seq in ["9223372036854775807", "1", "0", "42"] {
                try await client.execute(
                    uri: "/api/depth/\(session)/render?view=mask&focus=0.5&seq=\(seq)", method: .get,
                    headers: authorized
                ) { r in
                    #expect(r.status == .ok, "seq=\(seq): \(r.status)")
                    #expect(r.headers[HTTPField.Name("X-Seq")!] == seq)
                }
            }
            try await client.execute(
                uri: "/api/depth/\(session)/render?seq=9223372036854775808", method: .get, headers: authorized
            ) { #expect($0.status == .badRequest) }
            try await client.execute(uri: "/api/depth/\(session)/render?seq=-1", method: .get, headers: authorized) {
                #expect($0.status == .badRequest)
            }
        }
    }

    /// A render still waiting when a later one arrives is dropped (204), the later one rendered:
    /// the depth lane is held busy so that both wait, in the order they were sent.
    @Test func aRenderOvertakenWhileWaitingIsDropped() async throws {
        let s = StudioScratch()
        let studio = try StudioFixtures.studio(s) { $0.previewLongSide = 160 }
        defer { studio.shutdown() }
        try await StudioFixtures.serve(studio) { client in
            let session = try await client.openDepth("portrait.jpg")
            let gate = DispatchSemaphore(value: 0)
            studio.depth.lane.start { gate.wait() }
            let first = Task {
                try await client.execute(
                    uri: "/api/depth/\(session)/render?view=mask&focus=0.2&seq=900", method: .get, headers: authorized
                ) { $0.status }
            }
            try await waitUntil { studio.depth.lane.load == 2 }
            let second = Task {
                try await client.execute(
                    uri: "/api/depth/\(session)/render?view=mask&focus=0.8&seq=3", method: .get, headers: authorized
                ) { $0.status }
            }
            try await waitUntil { studio.depth.lane.load == 3 }
            gate.signal()
            #expect(try await first.value == .noContent)
            #expect(try await second.value == .ok)
        }
    }

    /// A client that connects and sends half a header (or nothing), or stops in the middle of a
    /// body, is disconnected after the idle timeout; the studio keeps answering others meanwhile.
    @Test func slowClientsAreDisconnected() async throws {
        let s = StudioScratch()
        let studio = try StudioFixtures.studio(s) { $0.idleTimeout = 1 }
        defer { studio.shutdown() }
        try await StudioFixtures.serve(studio) { client in
            let partial = [
                "GET /api/health HTTP/1.1\r\nHost: 127.0.0.1:\(client.port)\r\nX-Evan", "",
                "POST /api/upload?name=a.png HTTP/1.1\r\nHost: 127.0.0.1:\(client.port)\r\nContent-Length: "
                    + "100000\r\n\r\nabc"
            ]
            var sockets: [Int32] = []
            for k in 0..<30 {
                sockets.append(try SlowClient.connect(port: client.port, send: partial[k % partial.count]))
            }
            defer { sockets.forEach { close($0) } }
            try await client.execute(uri: "/api/health", method: .get, headers: authorized) {
                #expect($0.status == .ok)
            }
            let start = Date()
            for fd in sockets {
                let closedAfter = SlowClient.secondsUntilClosed(fd, limit: 10)
                #expect(closedAfter != nil, "a slow client was still connected after 10 s")
            }
            #expect(
                Date().timeIntervalSince(start) < 6,
                "the slow clients were disconnected after \(Date().timeIntervalSince(start)) s")
        }
    }

    /// A small PNG that declares a huge image of zeros is refused from its header: not decoded,
    /// not kept.
    @Test func aDecompressionBombIsRefusedBeforeDecoding() async throws {
        let s = StudioScratch()
        let studio = try StudioFixtures.studio(s)
        defer { studio.shutdown() }
        // 6000 x 6000 RGB zeros: 108 MB decoded from about 110 KB.
        let bomb = try ImageCodecs.encode(
            .uint8(Image<UInt8>(width: 6000, height: 6000, channels: 3)), format: .png,
            options: WriteOptions(compression: .best))
        #expect(bomb.count < 1 << 20)
        // 4000 x 3000 RGB: over a 64 MB budget whatever its file size.
        let huge = try ImageCodecs.encode(
            .uint8(Image<UInt8>(width: 4000, height: 3000, channels: 3)), format: .png,
            options: WriteOptions(compression: .best))
        let studio2 = try StudioFixtures.studio(StudioScratch()) { $0.maxUploadDecodedBytes = 64 << 20 }
        defer { studio2.shutdown() }
        for (st, name, bytes, words) in [
            (studio, "bomb.png", bomb, "bomb"), (studio2, "huge.png", huge, "4000x3000 pixels would need")
        ] {
            try await StudioFixtures.serve(st) { client in
                let upload = with(client.fromPage, .contentType, "application/octet-stream")
                try await client.execute(
                    uri: "/api/upload?name=\(name)", method: .post, headers: upload, body: ByteBuffer(bytes: bytes)
                ) { r in
                    #expect(r.status == .unprocessableContent)
                    #expect(
                        errorMessage(r).hasPrefix("\(name): ") && errorMessage(r).contains(words), "\(errorMessage(r))")
                    #expect(!errorMessage(r).contains(st.temporaryDirectory), "the server's own paths stay private")
                }
                let kept = try FileManager.default.contentsOfDirectory(atPath: st.temporaryDirectory + "/uploads")
                #expect(kept.isEmpty, "\(kept)")
            }
        }
        // A real photo-like upload still goes through.
        let fine = try ImageCodecs.encode(.uint8(StudioFixtures.burstFrame(0)), format: .png)
        let studio3 = try StudioFixtures.studio(StudioScratch())
        defer { studio3.shutdown() }
        try await StudioFixtures.serve(studio3) { client in
            let upload = with(client.fromPage, .contentType, "application/octet-stream")
            try await client.execute(
                uri: "/api/upload?name=fine.png", method: .post, headers: upload, body: ByteBuffer(bytes: fine)
            ) { #expect($0.status == .created) }
        }
    }

    /// An export is deleted once it is downloaded; a second download says so.
    @Test func exportsAreDeletedOnceDownloaded() async throws {
        let s = StudioScratch()
        let studio = try StudioFixtures.studio(s)
        defer { studio.shutdown() }
        let downloads = studio.temporaryDirectory + "/downloads"
        try await StudioFixtures.serve(studio) { client in
            let session = try await client.openDepth("portrait.jpg")
            for format in ["jpeg", "png", "tiff"] {
                try await client.execute(
                    uri: "/api/depth/\(session)/export?effect=blur&format=\(format)", method: .get, headers: authorized
                ) { r in
                    #expect(r.status == .ok && r.body.readableBytes > 1000)
                }
                #expect(try FileManager.default.contentsOfDirectory(atPath: downloads).isEmpty, "\(format)")
            }
            let b: String = try await client.execute(
                uri: "/api/backdrop/open", method: .post, headers: client.fromPage,
                body: buffer(#"{"photo":{"root":0,"path":"portrait.jpg"}}"#)
            ) { json($0.body)["session"] as! String }
            let job: String = try await client.execute(
                uri: "/api/backdrop/\(b)/export", method: .post, headers: client.fromPage
            ) { json($0.body)["job"] as! String }
            #expect(try await StudioWorkspaces.events(client, job: job).last == "done")
            #expect(try FileManager.default.contentsOfDirectory(atPath: downloads).count == 1)
            try await client.execute(uri: "/api/jobs/\(job)/download", method: .get, headers: authorized) {
                #expect($0.status == .ok)
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: downloads).isEmpty)
            try await client.execute(uri: "/api/jobs/\(job)/download", method: .get, headers: authorized) { r in
                #expect(r.status == .gone)
                #expect(errorMessage(r).contains("export it again"))
            }
        }
    }

    /// Exports nobody downloads are deleted after their age, and the folder stays within its size.
    @Test func theExportShelfIsBounded() throws {
        let s = StudioScratch()
        let dir = s.folder("downloads")
        let shelf = ExportShelf(directory: dir, maxAge: 60, maxBytes: 2500)
        var paths: [String] = []
        for k in 0..<4 {
            let p = shelf.path(for: "e\(k).jpg")
            FileManager.default.createFile(atPath: p, contents: Data(count: 1000))
            // Oldest first: k minutes ago... 0.
            var times = [
                timespec(tv_sec: time(nil) - (3 - k) * 20, tv_nsec: 0),
                timespec(tv_sec: time(nil) - (3 - k) * 20, tv_nsec: 0)
            ]
            utimensat(AT_FDCWD, p, &times, 0)
            paths.append(p)
        }
        // 4000 bytes over a 2500-byte bound: the oldest two go; none is past 60 s yet (oldest 60 s).
        #expect(shelf.sweep() == 2)
        #expect(!FileManager.default.fileExists(atPath: paths[0]) && !FileManager.default.fileExists(atPath: paths[1]))
        #expect(FileManager.default.fileExists(atPath: paths[2]) && FileManager.default.fileExists(atPath: paths[3]))
        // Two minutes later both are past their age.
        #expect(shelf.sweep(now: Date().addingTimeInterval(120)) == 2)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).isEmpty)
        // take() hands the bytes over once and deletes the file.
        let p = shelf.path(for: "x.png")
        FileManager.default.createFile(atPath: p, contents: Data([1, 2, 3]))
        #expect(shelf.take(p) == Data([1, 2, 3]))
        #expect(shelf.take(p) == nil)
    }

    /// The folder of a studio that was killed is removed when the next one starts; a live
    /// studio's, a folder of another form and a fresh one without an owner are left alone.
    @Test func staleFoldersOfDeadStudiosAreRemoved() throws {
        let s = StudioScratch()
        let tmp = s.folder("tmp")
        // A process that has exited: its pid and start time no longer name a live process.
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/true")
        try p.run()
        p.waitUntilExit()
        let dead = try StudioFolders.make(in: tmp)
        try "\(p.processIdentifier) 12345".write(toFile: dead + "/owner", atomically: true, encoding: .utf8)
        FileManager.default.createFile(atPath: dead + "/downloads-big.tif", contents: Data(count: 100))
        // A live one (this process) and a pid reused by another process (our pid, another start time).
        let live = try StudioFolders.make(in: tmp)
        let reused = try StudioFolders.make(in: tmp)
        try "\(getpid()) 1".write(toFile: reused + "/owner", atomically: true, encoding: .utf8)
        let unrelated = s.folder("tmp/evanesco-studio-test-keep")
        let fresh = s.folder("tmp/evanesco-studio-abcdef")
        let removed = StudioFolders.removeStale(in: tmp)
        #expect(Set(removed) == [dead, reused], "\(removed)")
        for kept in [live, unrelated, fresh] { #expect(FileManager.default.fileExists(atPath: kept), "\(kept)") }
        // A day later, the fresh folder without an owner is stale too.
        #expect(StudioFolders.removeStale(in: tmp, now: Date().addingTimeInterval(90_000)) == [fresh])
        #expect(StudioFolders.identity(of: getpid())?.hasPrefix("\(getpid()) ") == true)
    }
}

extension StudioClient {
    /// Opens a depth photo of the fixture's root as the page does; returns the session id.
    func openDepth(_ path: String) async throws -> String {
        try await execute(
            uri: "/api/depth/open", method: .post, headers: fromPage, body: buffer(#"{"root":0,"path":"\#(path)"}"#)
        ) {
            json($0.body)["session"] as? String ?? ""
        }
    }
}

/// Waits (up to 10 s) until `condition` holds.
func waitUntil(_ condition: () -> Bool) async throws {
    let deadline = Date().addingTimeInterval(10)
    while !condition() {
        guard Date() < deadline else { throw HTTP1.Failure(description: "timed out waiting") }
        try await Task.sleep(for: .milliseconds(5))
    }
}

/// A client that connects, sends a little and then nothing.
enum SlowClient {
    static func connect(port: Int, send text: String) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let c = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard c == 0 else {
            close(fd)
            throw POSIXError(.ECONNREFUSED)
        }
        if !text.isEmpty { _ = text.withCString { Glibc.send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) } }
        return fd
    }

    /// Seconds until the server closes the connection (reads and discards what it sends), or nil
    /// after `limit`.
    static func secondsUntilClosed(_ fd: Int32, limit: Double) -> Double? {
        let start = Date()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while Date().timeIntervalSince(start) < limit {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 100) >= 0 else { return nil }
            if p.revents != 0 {
                let n = recv(fd, &chunk, chunk.count, 0)
                if n <= 0 { return Date().timeIntervalSince(start) }
            }
        }
        return nil
    }
}
