import EvanescoCore
import EvanescoIO
import Foundation
import Logging
import PostgresNIO

/// Why the queue refused.
public enum QueueError: Error, CustomStringConvertible, Equatable {
    case schemaTooNew(found: Int, supported: Int)
    /// An operation took longer than the address's `timeout`.
    case unresponsive(address: String, seconds: Double)
    /// The database could not be reached or refused the login; `permanent` when trying again
    /// cannot help (a wrong password, an unknown role or database or host, no TLS).
    case cannotConnect(address: String, reason: String, permanent: Bool)

    /// Whether waiting and trying again can help.
    public var isPermanent: Bool {
        switch self {
        case .schemaTooNew: true
        case .unresponsive: false
        case .cannotConnect(_, _, let permanent): permanent
        }
    }

    /// What a failed connection attempt means, from postgres-nio's error: the server's SQLSTATE
    /// for a refused login, the socket's error for a refused port or an unknown host.
    static func connectionFailure(_ error: any Error, address: QueueAddress) -> QueueError {
        let at = address.description
        func permanent(_ reason: String) -> QueueError { .cannotConnect(address: at, reason: reason, permanent: true) }
        func transient(_ reason: String) -> QueueError { .cannotConnect(address: at, reason: reason, permanent: false) }
        if let p = error as? PSQLError {
            let message = p.serverInfo?[.message] ?? ""
            switch p.code {
            case .server:
                switch p.serverInfo?[.sqlState] ?? "" {
                case "28P01":
                    return permanent(
                        "the server refused the password of user \(address.user) (\(message)); fix the URL's password")
                case "28000":
                    return permanent(
                        "the server refused user \(address.user) (\(message)): an unknown role, or pg_hba.conf does "
                            + "not let it in from here"
                    )
                case "3D000":
                    return permanent(
                        "database \(address.database) does not exist; create it (createdb \(address.database)) or fix "
                            + "the URL"
                    )
                case "42501":
                    return permanent("permission denied (\(message)); grant user \(address.user) CONNECT and CREATE")
                case let state:
                    return transient("the server said \(message) (SQLSTATE \(state))")
                }
            case .sslUnsupported:
                return permanent(
                    "the server does not offer TLS and the URL says sslmode=require; enable ssl on the server, or use "
                        + "sslmode=prefer"
                )
            case .authMechanismRequiresPassword:
                return permanent(
                    "the server asks user \(address.user) for a password; put it in the URL "
                        + "(postgres://USER:PASSWORD@HOST/DB)"
                )
            case .unsupportedAuthMechanism, .saslError:
                return permanent(
                    "the server's authentication could not be completed (\(String(describing: p.code))); check the "
                        + "user and password"
                )
            default: break
            }
        }
        let text = String(reflecting: error)
        let lower = text.lowercased()
        if lower.contains("connection refused") || lower.contains("errno: 111") {
            return transient(
                "nothing listens at \(address.host):\(address.port) (connection refused); start PostgreSQL, or fix "
                    + "the URL's host and port"
            )
        }
        if lower.contains("dnsaerror") && lower.contains("connectionerrors: []")
            || lower.contains("name or service not known")
            || lower.contains("no address associated")
        {
            return permanent("host \(address.host) could not be resolved; fix the URL's host name")
        }
        if lower.contains("connecttimeout") || lower.contains("timed out") {
            return transient(
                "connecting to \(address.host):\(address.port) timed out; check the host, the port and the firewall")
        }
        return transient(String(text.prefix(300)))
    }

    public var description: String {
        switch self {
        case .cannotConnect(let address, let reason, _): "cannot use the queue at \(address): \(reason)"
        case .schemaTooNew(let found, let supported):
            "the queue's schema is version \(found), newer than this evanesco reads (\(supported)); upgrade evanesco "
                + "on this machine"
        case .unresponsive(let address, let seconds):
            "the database at \(address) did not answer within \(String(format: "%g", seconds)) s; check that "
                + "PostgreSQL (not another program) listens there and is not overloaded, or raise the URL's "
                + "timeout=SECONDS"
        }
    }
}
