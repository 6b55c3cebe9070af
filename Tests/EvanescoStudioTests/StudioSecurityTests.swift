import EvanescoCore
import EvanescoDepth
import EvanescoIO
import EvanescoStack
import Foundation
import Hummingbird
import HTTPTypes
import Testing
@testable import EvanescoStudio

@Suite struct StudioSecurity {
    @Test func healthNeedsTheToken() async throws {
        let s = StudioScratch()
        let studio = try StudioFixtures.studio(s)
        defer { studio.shutdown() }
        try await StudioFixtures.serve(studio) { client in
            try await client.execute(uri: "/api/health", method: .get) { r in
                #expect(r.status == .unauthorized)
                #expect(errorMessage(r).contains("token"))
            }
            try await client.execute(uri: "/api/health", method: .get, headers: [tokenHeader: "wrong"]) {
                #expect($0.status == .unauthorized)
            }
            try await client.execute(uri: "/api/health", method: .get, headers: [tokenHeader: "t0ke"]) {
                #expect($0.status == .unauthorized)
            }
            try await client.execute(uri: "/api/health", method: .get, headers: authorized) {
                #expect($0.status == .ok)
            }
            try await client.execute(uri: "/api/health", method: .get, headers: [.authorization: "token t0ken"]) {
                #expect($0.status == .ok)
            }
            try await client.execute(uri: "/api/health", method: .get, headers: [.cookie: "evanesco-token=t0ken"]) {
                #expect($0.status == .ok)
            }
            try await client.execute(uri: "/api/health?token=t0ken", method: .get) { #expect($0.status == .ok) }
        }
    }

    @Test func thePageSetsTheCookieOnlyForTheRightToken() async throws {
        let s = StudioScratch()
        let studio = try StudioFixtures.studio(s)
        defer { studio.shutdown() }
        try await StudioFixtures.serve(studio) { client in
            try await client.execute(uri: "/?token=t0ken", method: .get) { r in
                #expect(r.status == .ok)
                #expect(r.headers[.contentType]?.hasPrefix("text/html") == true)
                #expect(r.headers[.contentSecurityPolicy]?.contains("default-src 'self'") == true)
                let cookie = r.headers[.setCookie] ?? ""
                #expect(
                    cookie.contains("evanesco-token=t0ken") && cookie.contains("HttpOnly")
                        && cookie.contains("SameSite=Strict"))
                #expect(String(buffer: r.body).contains("data-testid=\"workspace-burst\""))
            }
            try await client.execute(uri: "/?token=nope", method: .get) { r in
                #expect(r.status == .ok)
                #expect(r.headers[.setCookie] == nil)
            }
            for name in ["studio.js", "api.js", "burst.js", "depth.js", "backdrop.js", "studio.css"] {
                try await client.execute(uri: "/static/\(name)", method: .get) { r in
                    #expect(r.status == .ok, "\(name)")
                    #expect(r.body.readableBytes ?? 0 > 500, "\(name)")
                }
            }
            try await client.execute(uri: "/static/Package.swift", method: .get) { #expect($0.status == .notFound) }
            try await client.execute(uri: "/static/..%2f..%2fPackage.swift", method: .get) {
                #expect($0.status == .forbidden)
            }
        }
    }

    @Test func traversalIsRefused() async throws {
        let s = StudioScratch()
        let studio = try StudioFixtures.studio(s)
        defer { studio.shutdown() }
        // A symbolic link inside the root that leads out of it.
        try FileManager.default.createSymbolicLink(
            atPath: s.file("root/escape.txt"), withDestinationPath: s.file("secret.txt"))
        try FileManager.default.createSymbolicLink(atPath: s.file("root/outside"), withDestinationPath: s.dir)
        try await StudioFixtures.serve(studio) { client in
            let attempts = [
                "../secret.txt", "burst/../../secret.txt", "%2e%2e/secret.txt", "%252e%252e%252fsecret.txt",
                "..%2fsecret.txt",
                s.file("secret.txt"), "/etc/passwd", "escape.txt", "outside/secret.txt", "burst/..", "./plain.png"
            ]
            for a in attempts {
                let q = a.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? a
                try await client.execute(uri: "/api/file?root=0&path=\(q)", method: .get, headers: authorized) { r in
                    #expect(r.status == .forbidden, "\(a): \(r.status)")
                    #expect(String(buffer: r.body).contains("secret") == false || a.contains("secret"))
                }
            }
            // Raw dots in the URL's path are refused before any route.
            try await client.execute(uri: "/api/../api/health", method: .get, headers: authorized) {
                #expect($0.status == .forbidden)
            }
            try await client.execute(uri: "/api/%2e%2e/health", method: .get, headers: authorized) {
                #expect($0.status == .forbidden)
            }
            try await client.execute(uri: "/api/file?root=7&path=plain.png", method: .get, headers: authorized) {
                #expect($0.status == .forbidden)
            }
            // A file under the root is served, byte for byte.
            try await client.execute(uri: "/api/file?root=0&path=plain.png", method: .get, headers: authorized) { r in
                #expect(r.status == .ok)
                #expect(Data(buffer: r.body) == FileManager.default.contents(atPath: s.file("root/plain.png")))
            }
            try await client.execute(uri: "/api/file?root=0&path=missing.png", method: .get, headers: authorized) {
                #expect($0.status == .notFound)
            }
        }
    }

    @Test func changesNeedTheStudiosOwnOrigin() async throws {
        let s = StudioScratch()
        let studio = try StudioFixtures.studio(s)
        defer { studio.shutdown() }
        let body = buffer(#"{"root":0,"path":"burst"}"#)
        try await StudioFixtures.serve(studio) { client in
            try await client.execute(uri: "/api/burst/open", method: .post, headers: authorized, body: body) {
                #expect($0.status == .forbidden)
            }
            let evil = with(client.fromPage, .origin, "http://evil.example")
            try await client.execute(uri: "/api/burst/open", method: .post, headers: evil, body: body) { r in
                #expect(r.status == .forbidden)
                #expect(errorMessage(r).contains("Origin"))
            }
            let rebinding = with(client.fromPage, .origin, "http://127.0.0.1.evil.example:\(client.port)")
            try await client.execute(uri: "/api/burst/open", method: .post, headers: rebinding, body: body) {
                #expect($0.status == .forbidden)
            }
            let crossSite = with(client.fromPage, HTTPField.Name("Sec-Fetch-Site")!, "cross-site")
            try await client.execute(uri: "/api/burst/open", method: .post, headers: crossSite, body: body) {
                #expect($0.status == .forbidden)
            }
            try await client.execute(uri: "/api/burst/open", method: .post, headers: client.fromPage, body: body) {
                #expect($0.status == .ok)
            }
        }
    }

    /// The forgery a page on another port of this machine could send: the same site to a browser
    /// (so the SameSite=Strict cookie goes along), a `text/plain` POST that needs no preflight.
    @Test func anotherLocalPortIsNotTheStudiosPage() async throws {
        let s = StudioScratch()
        let studio = try StudioFixtures.studio(s)
        defer { studio.shutdown() }
        let body = buffer(#"{"root":0,"path":"burst"}"#)
        try await StudioFixtures.serve(studio) { client in
            let cookie: HTTPFields = [.cookie: "evanesco-token=t0ken", .contentType: "text/plain"]
            for origin in [
                "http://127.0.0.1:3000", "http://localhost:3000", "http://127.0.0.1:\(client.port + 1)",
                "http://127.0.0.1",
                "https://127.0.0.1:\(client.port)", "http://localhost:\(client.port)",
                "http://127.0.0.1:\(client.port)/x", "null"
            ] {
                let forged = with(with(cookie, .origin, origin), requestHeader, "1")
                try await client.execute(uri: "/api/burst/open", method: .post, headers: forged, body: body) { r in
                    #expect(r.status == .forbidden, "\(origin): \(r.status)")
                    #expect(errorMessage(r).contains("Origin"), "\(origin)")
                }
            }
            // The studio's own origin with the cookie, but without the page's request header: a
            // simple request, which any page could make; refused.
            let simple = with(cookie, .origin, "http://127.0.0.1:\(client.port)")
            try await client.execute(uri: "/api/burst/open", method: .post, headers: simple, body: body) { r in
                #expect(r.status == .forbidden)
                #expect(errorMessage(r).contains("X-Evanesco-Request"))
            }
            // The preflight a page elsewhere needs before it may send that header: refused, with
            // no Access-Control-Allow-* header, so the browser never sends the request.
            let preflight: HTTPFields = [
                .origin: "http://127.0.0.1:3000", HTTPField.Name("Access-Control-Request-Method")!: "POST",
                HTTPField.Name("Access-Control-Request-Headers")!: "x-evanesco-request,content-type"
            ]
            try await client.execute(uri: "/api/burst/open", method: .options, headers: preflight) { r in
                #expect(r.status == .forbidden)
                #expect(!r.headers.contains { $0.name.rawName.lowercased().hasPrefix("access-control-allow") })
            }
            // A browser's fetch from another local page names itself same-site: refused even for
            // GET (no render, no export, no file read for another page).
            let sameSite = with(authorized, HTTPField.Name("Sec-Fetch-Site")!, "same-site")
            try await client.execute(uri: "/api/files", method: .get, headers: sameSite) {
                #expect($0.status == .forbidden)
            }
            try await client.execute(
                uri: "/api/files", method: .get,
                headers: with(authorized, HTTPField.Name("Sec-Fetch-Site")!, "same-origin")
            ) {
                #expect($0.status == .ok)
            }
            // A link from elsewhere to the page itself still opens it (the token decides the rest).
            try await client.execute(
                uri: "/?token=t0ken", method: .get, headers: [HTTPField.Name("Sec-Fetch-Site")!: "same-site"]
            ) { #expect($0.status == .ok) }
            // A Host naming another port than the studio's is refused too.
            let otherPort = try RawHTTP.get(
                port: client.port, path: "/api/health", host: "127.0.0.1:\(client.port + 1)",
                headers: ["X-Evanesco-Token: t0ken"])
            #expect(otherPort.hasPrefix("HTTP/1.1 403"), "\(otherPort.prefix(60))")
            // Nothing was opened by any of it: the first burst session is still to be made.
            try await client.execute(uri: "/api/burst/open", method: .post, headers: client.fromPage, body: body) { r in
                #expect(r.status == .ok)
                #expect(json(r.body)["session"] as? String == "burst1", "\(json(r.body))")
            }
        }
    }

    @Test func hostAndOriginNames() {
        let port = LockedBox(8750)
        let g = StudioGuard<BasicRequestContext>(token: "x", host: "127.0.0.1", port: port)
        #expect(
            g.hostAllowed("127.0.0.1:8750") && g.hostAllowed("localhost:8750") && g.hostAllowed("[::1]:8750")
                && g.hostAllowed("LOCALHOST"))
        #expect(!g.hostAllowed("127.0.0.1:8751") && !g.hostAllowed("[::1]:80") && !g.hostAllowed("localhost:x"))
        #expect(
            !g.hostAllowed("evil.example:8750") && !g.hostAllowed("127.0.0.1.nip.io") && !g.hostAllowed(nil)
                && !g.hostAllowed(""))
        #expect(
            g.originAllowed("http://localhost:8750", host: "localhost:8750")
                && g.originAllowed("http://127.0.0.1:8750", host: "127.0.0.1:8750"))
        #expect(g.originAllowed("http://[::1]:8750", host: "[::1]:8750"))
        #expect(
            !g.originAllowed("http://localhost:8750", host: "127.0.0.1:8750"), "another host name is another origin")
        #expect(!g.originAllowed("http://127.0.0.1:3000", host: "127.0.0.1:8750"), "another port is another origin")
        #expect(
            !g.originAllowed("http://127.0.0.1", host: "127.0.0.1:8750")
                && !g.originAllowed("http://127.0.0.1:8750/", host: "127.0.0.1:8750"))
        #expect(
            !g.originAllowed("https://localhost:8750", host: "localhost:8750")
                && !g.originAllowed("http://localhost.evil:1", host: "localhost:1"))
        #expect(
            !g.originAllowed("null", host: "localhost:8750") && !g.originAllowed("http://localhost:8750", host: nil))
        #expect(
            StudioGuard<BasicRequestContext>.same("abc", "abc") && !StudioGuard<BasicRequestContext>.same("abc", "abd")
                && !StudioGuard<BasicRequestContext>.same("abc", "ab"))
    }

    @Test func aHostThatIsNotThisMachineIsABindErrorAndLeavesNoFiles() async throws {
        let s = StudioScratch()
        let studio = try StudioFixtures.studio(s) { $0.host = "999.1.1.1" }
        await #expect {
            try await studio.run(handlesSignals: false) { _ in }
        } throws: { error in
            guard case StudioError.cannotBind(let host, _, _) = error else { return false }
            return host == "999.1.1.1" && "\(error)".contains("--host")
        }
        #expect(!FileManager.default.fileExists(atPath: studio.temporaryDirectory))
    }

    /// Over a real socket: a Host header naming another machine (DNS rebinding) is refused.
    @Test func dnsRebindingIsRefusedOnTheWire() async throws {
        let s = StudioScratch()
        let studio = try StudioFixtures.studio(s)
        defer { studio.shutdown() }
        try await StudioFixtures.serve(studio) { client in
            let port = client.port
            let good = try RawHTTP.get(
                port: port, path: "/api/health", host: "127.0.0.1:\(port)", headers: ["X-Evanesco-Token: t0ken"])
            #expect(good.hasPrefix("HTTP/1.1 200"), "\(good)")
            let evil = try RawHTTP.get(
                port: port, path: "/api/health", host: "evil.example:\(port)", headers: ["X-Evanesco-Token: t0ken"])
            #expect(evil.hasPrefix("HTTP/1.1 403"), "\(evil)")
            #expect(evil.contains("Host"))
        }
    }
}
