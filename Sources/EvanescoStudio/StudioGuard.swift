import Foundation
import Hummingbird

/// The studio's front door, as Jupyter keeps its own: the Host header must name this machine
/// (no DNS rebinding), a request that changes something must come from the studio's own page
/// (Origin checked, no cross-site POST), and everything under /api/ carries the token (cookie,
/// `X-Evanesco-Token` header, `Authorization: token ...` or `?token=`). A path with `..` or an
/// encoded dot is refused before any route sees it.
struct StudioGuard<Context: RequestContext>: RouterMiddleware {
    let token: String
    let allowedHosts: Set<String>
    static var cookieName: String { "evanesco-token" }

    init(token: String, host: String) {
        self.token = token
        var hosts: Set<String> = ["127.0.0.1", "localhost", "::1"]
        if host != "0.0.0.0" && host != "::" { hosts.insert(host.lowercased()) }
        allowedHosts = hosts
    }

    /// The host name of a Host or Origin value, without port or brackets.
    static func hostName(_ authority: Substring) -> String {
        var a = authority
        if a.hasPrefix("[") {
            if let end = a.firstIndex(of: "]") { return String(a[a.index(after: a.startIndex)..<end]).lowercased() }
            return String(a).lowercased()
        }
        if let colon = a.lastIndex(of: ":") { a = a[..<colon] }
        return String(a).lowercased()
    }

    func hostAllowed(_ value: String?) -> Bool {
        guard let value, !value.isEmpty else { return false }
        return allowedHosts.contains(Self.hostName(Substring(value)))
    }

    func originAllowed(_ origin: String) -> Bool {
        guard origin.hasPrefix("http://") else { return false }
        return allowedHosts.contains(Self.hostName(origin.dropFirst("http://".count).prefix { $0 != "/" }))
    }

    /// Constant-time comparison, so the token cannot be guessed a byte at a time.
    static func same(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var d: UInt8 = 0
        for i in x.indices { d |= x[i] ^ y[i] }
        return d == 0
    }

    func presentedToken(_ request: Request) -> String? {
        if let h = request.headers[.init("X-Evanesco-Token")!] { return h }
        if let a = request.headers[.authorization], a.lowercased().hasPrefix("token ") { return String(a.dropFirst(6)) }
        if let q = request.uri.queryParameters.get("token") { return q }
        return request.cookies[Self.cookieName]?.value
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard hostAllowed(request.head.authority) else {
            throw HTTPError(.forbidden, message: "the Host header must name this machine (127.0.0.1 or localhost); open the URL the studio printed")
        }
        let raw = request.uri.path.lowercased()
        if raw.contains("..") || raw.contains("%2e") || raw.contains("%2f") || raw.contains("%5c") || raw.contains("\\") {
            throw HTTPError(.forbidden, message: "paths with .. or encoded separators are not served")
        }
        if request.method != .get && request.method != .head {
            // Browsers always send Origin on a cross-site POST; a request from the page carries ours.
            guard let origin = request.headers[.origin], originAllowed(origin) else {
                throw HTTPError(.forbidden, message: "requests that change something must come from the studio's own page (Origin checked)")
            }
        }
        if let site = request.headers[.init("Sec-Fetch-Site")!], site == "cross-site" {
            throw HTTPError(.forbidden, message: "cross-site requests are refused")
        }
        if request.uri.path.hasPrefix("/api/") {
            guard let t = presentedToken(request), Self.same(t, token) else {
                throw HTTPError(.unauthorized, message: "the studio's token is missing or wrong; open the URL with ?token= that `evanesco studio` printed")
            }
        }
        return try await next(request, context)
    }
}
