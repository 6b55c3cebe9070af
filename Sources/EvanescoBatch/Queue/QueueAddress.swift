import Foundation
import PostgresNIO

/// Where a queue lives:
/// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?schema=NAME&sslmode=MODE&timeout=SECONDS]`.
/// `schema` (default `evanesco`) lets several queues share one database; `sslmode` is `disable`
/// (the default on loopback), `prefer` (the default elsewhere) or `require`; `timeout` (default
/// 30, from 1 to 3600) is how long one queue operation may take, connecting included, before it
/// fails and the connections are made afresh (a server that accepts and never answers, or a
/// connection left half-made by a restart, costs a retry instead of a worker that waits forever).
public struct QueueAddress: Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var user: String
    public var password: String?
    public var database: String
    public var schema: String
    public var sslMode: String
    /// Seconds one queue operation may take (``QueueAddress`` says what happens after).
    public var timeout: Double

    /// Parses a URL.
    ///
    /// - Parameter url: `postgres://...` or `postgresql://...`.
    /// - Throws: ``ManifestError`` saying what is wrong with it.
    public init(_ url: String) throws(ManifestError) {
        func bad(_ m: String) -> ManifestError {
            ManifestError(
                message:
                    "--queue \(Self.redacted(url)): \(m); write "
                    + "postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?schema=NAME&sslmode=MODE&timeout=SECONDS]"
            )
        }
        guard let c = URLComponents(string: url), let scheme = c.scheme, ["postgres", "postgresql"].contains(scheme)
        else {
            throw bad("not a postgres:// URL")
        }
        guard let host = c.host, !host.isEmpty else { throw bad("no host") }
        // The port as written: URLComponents turns one too large for an Int into nil, which
        // would silently mean 5432.
        let authority = url.drop { $0 != "/" }.dropFirst(2).prefix { $0 != "/" && $0 != "?" }
        let hostPort = authority.split(separator: "@", omittingEmptySubsequences: false).last ?? ""
        let afterHost = hostPort.hasPrefix("[") ? hostPort.drop { $0 != "]" }.dropFirst() : hostPort.drop { $0 != ":" }
        var port = 5432
        if afterHost.hasPrefix(":") {
            let text = afterHost.dropFirst()
            guard !text.isEmpty, text.count <= 5, text.allSatisfy(\.isASCII), let p = Int(text), (1...65535).contains(p)
            else {
                throw bad("port \(ManifestError.quoted(String(text))) must be a number from 1 to 65535")
            }
            port = p
        }
        guard let user = c.user, !user.isEmpty else { throw bad("no user") }
        let database = String(c.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty else { throw bad("no database") }
        let items = Dictionary((c.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
        for key in items.keys where !["schema", "sslmode", "timeout"].contains(key) {
            throw bad("unknown parameter \(key)")
        }
        let schema = items["schema"] ?? "evanesco"
        guard (1...63).contains(schema.count), schema.first!.isLetter,
            schema.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "_") })
        else {
            throw bad("schema must be 1 to 63 of a-z 0-9 _, starting with a letter")
        }
        // PostgreSQL's own schemas: the queue's tables do not belong there.
        guard !schema.hasPrefix("pg_"), schema != "information_schema" else {
            throw bad("schema \(schema) is PostgreSQL's own; name one for the queue (the default is evanesco)")
        }
        let loopback = ["localhost", "127.0.0.1", "::1"].contains(host)
        let ssl = items["sslmode"] ?? (loopback ? "disable" : "prefer")
        guard ["disable", "prefer", "require"].contains(ssl) else {
            throw bad("sslmode must be disable, prefer or require")
        }
        var timeout = 30.0
        if let t = items["timeout"] {
            guard let v = Double(t), v.isFinite, (1...3600).contains(v) else {
                throw bad("timeout must be a number of seconds from 1 to 3600")
            }
            timeout = v
        }
        self.timeout = timeout
        self.host = host
        self.port = port
        self.user = user
        // Decoded once: URLComponents' `password` is decoded already, so decoding it again
        // turned a password holding "%41" into one holding "A".
        self.password = c.percentEncodedPassword.map { $0.removingPercentEncoding ?? $0 }
        self.database = database
        self.schema = schema
        self.sslMode = ssl
    }

    /// The URL with its password hidden, for logs and errors.
    public static func redacted(_ url: String) -> String {
        guard var c = URLComponents(string: url), c.password != nil else { return url }
        c.password = "***"
        return c.string ?? url
    }

    public var description: String { "postgres://\(user)@\(host):\(port)/\(database)?schema=\(schema)" }

    /// The pool's configuration.
    func clientConfiguration() throws -> PostgresClient.Configuration {
        var c = PostgresClient.Configuration(
            host: host, port: port, username: user, password: password, database: database, tls: try tls())
        c.options.connectTimeout = .seconds(5)
        c.options.maximumConnections = 8
        return c
    }

    /// A single connection's configuration (the LISTEN connection).
    func connectionConfiguration() throws -> PostgresConnection.Configuration {
        var c = PostgresConnection.Configuration(
            host: host, port: port, username: user, password: password, database: database,
            tls: sslMode == "disable"
                ? .disable
                : sslMode == "require"
                    ? .require(try .init(configuration: .makeClientConfiguration()))
                    : .prefer(try .init(configuration: .makeClientConfiguration())))
        c.options.connectTimeout = .seconds(5)
        return c
    }

    func tls() throws -> PostgresClient.Configuration.TLS {
        switch sslMode {
        case "disable": .disable
        case "require": .require(.makeClientConfiguration())
        default: .prefer(.makeClientConfiguration())
        }
    }
}
