import EvanescoCore
import Foundation
import Hummingbird

/// The studio's front door, as Jupyter keeps its own:
///
/// - The Host header must name this machine (no DNS rebinding) and, once the studio listens,
///   the port it listens on.
/// - A request that changes something (any method but GET and HEAD) must come from the studio's
///   own page: its Origin must be exactly the studio's origin (scheme, host and port: a page on
///   another port of localhost is the same *site* to a browser, so it sends the SameSite cookie,
///   but it is not the same *origin*), and it must carry ``requestHeader``, which a simple
///   cross-origin request cannot: any other page's request needs a CORS preflight, and the studio
///   answers every preflight (OPTIONS) with 403 and no `Access-Control-Allow-*` header.
/// - A browser's `Sec-Fetch-Site` must be `same-origin` (or `none`: the user typed the URL) for
///   everything but a visit to the page itself, so another local page cannot even make the
///   studio render or export by GET.
/// - Everything under /api/ carries the token (cookie, `X-Evanesco-Token` header,
///   `Authorization: token ...` or `?token=`).
/// - A path with `..` or an encoded dot is refused before any route sees it.
struct StudioGuard<Context: RequestContext>: RouterMiddleware {
    let token: String
    let allowedHosts: Set<String>
    /// The port the studio listens on, once known (0 until then: any port is taken).
    let port: LockedBox<Int>
    static var cookieName: String { "evanesco-token" }
    /// The header the page sends with every request that changes something.
    static var requestHeader: String { "X-Evanesco-Request" }

    init(token: String, host: String, port: LockedBox<Int> = LockedBox(0)) {
        self.token = token
        self.port = port
        var hosts: Set<String> = ["127.0.0.1", "localhost", "::1"]
        if host != "0.0.0.0" && host != "::" { hosts.insert(host.lowercased()) }
        allowedHosts = hosts
    }

    /// The host name and port of a Host or Origin authority (`[::1]:80`, `localhost`), lowercased.
    static func split(_ authority: Substring) -> (host: String, port: Int?) {
        var a = authority
        var port: Int?
        if a.hasPrefix("[") {
            guard let end = a.firstIndex(of: "]") else { return (String(a).lowercased(), nil) }
            let rest = a[a.index(after: end)...]
            if rest.hasPrefix(":") { port = Int(rest.dropFirst()) ?? -1 } else if !rest.isEmpty { port = -1 }
            return (String(a[a.index(after: a.startIndex)..<end]).lowercased(), port)
        }
        if let colon = a.lastIndex(of: ":") {
            port = Int(a[a.index(after: colon)...]) ?? -1
            a = a[..<colon]
        }
        return (String(a).lowercased(), port)
    }

    /// The host name of a Host or Origin value, without port or brackets.
    static func hostName(_ authority: Substring) -> String { split(authority).host }

    /// The Host header names this machine and, once listening, the studio's port.
    func hostAllowed(_ value: String?) -> Bool {
        guard let value, !value.isEmpty else { return false }
        let (h, p) = Self.split(Substring(value))
        guard allowedHosts.contains(h) else { return false }
        let listening = port.value
        if listening != 0, let p, p != listening { return false }
        if let p, p < 0 { return false }
        return true
    }

    /// The Origin is the studio's own: `http://`, the host the request was sent to (already
    /// checked to be this machine), and the same port, with nothing after it.
    func originAllowed(_ origin: String, host: String?) -> Bool {
        guard origin.hasPrefix("http://"), let host else { return false }
        let authority = origin.dropFirst("http://".count)
        guard !authority.isEmpty, !authority.contains("/") else { return false }
        let o = Self.split(authority), h = Self.split(Substring(host))
        guard allowedHosts.contains(o.host), o.host == h.host else { return false }
        // A missing port is 80 in both, as browsers write it.
        return (o.port ?? 80) == (h.port ?? 80)
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

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        guard hostAllowed(request.head.authority) else {
            throw HTTPError(
                .forbidden,
                message:
                    "the Host header must name this machine (127.0.0.1 or localhost) and the studio's port; open the "
                    + "URL the studio printed"
            )
        }
        let raw = request.uri.path.lowercased()
        if raw.contains("..") || raw.contains("%2e") || raw.contains("%2f") || raw.contains("%5c") || raw.contains("\\")
        {
            throw HTTPError(.forbidden, message: "paths with .. or encoded separators are not served")
        }
        // No CORS: a preflight is always refused, so no other origin may send a custom header.
        if request.method == .options {
            throw HTTPError(.forbidden, message: "cross-origin requests are refused (the studio answers no preflight)")
        }
        if let site = request.headers[.init("Sec-Fetch-Site")!] {
            let pageVisit = request.method == .get && request.uri.path == "/"
            if !(site == "same-origin" || site == "none" || pageVisit) {
                throw HTTPError(
                    .forbidden, message: "requests from other pages (\(site)) are refused; use the studio's own page")
            }
        }
        if request.method != .get && request.method != .head {
            // Browsers always send Origin on a cross-origin POST; a request from the page carries ours.
            guard let origin = request.headers[.origin], originAllowed(origin, host: request.head.authority) else {
                throw HTTPError(
                    .forbidden,
                    message:
                        "requests that change something must come from the studio's own page (Origin must be its "
                        + "scheme, host and port)"
                )
            }
            guard request.headers[.init(Self.requestHeader)!] != nil else {
                throw HTTPError(
                    .forbidden,
                    message:
                        "requests that change something must carry the \(Self.requestHeader) header the studio's page "
                        + "sends"
                )
            }
        }
        if request.uri.path.hasPrefix("/api/") {
            guard let t = presentedToken(request), Self.same(t, token) else {
                throw HTTPError(
                    .unauthorized,
                    message:
                        "the studio's token is missing or wrong; open the URL with ?token= that `evanesco studio` "
                        + "printed"
                )
            }
        }
        return try await next(request, context)
    }
}
