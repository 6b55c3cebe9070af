import Foundation
#if canImport(Glibc)
    import Glibc
#endif

/// HTTP/1.1 over a socket to 127.0.0.1, one request per connection (`Connection: close`), for the
/// tests that talk to a real server: the studio's API tests and the WebDriver client. The request
/// goes out exactly as written (a raw path like `/api/%2e%2e/x` is not normalised), and the reply
/// is read whole: Content-Length or chunked, or to the end of the connection.
/// (Foundation's URLSession on Linux refuses chromedriver's replies, which write
/// "Content-Length:249" without a space.)
public enum HTTP1 {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
        public init(description: String) { self.description = description }
    }

    public struct Reply: Sendable {
        public var status: Int
        /// Header names lowercased, in the order received.
        public var headers: [(name: String, value: String)]
        public var body: [UInt8]
        public func header(_ name: String) -> String? { headers.first { $0.name == name.lowercased() }?.value }
    }

    /// The request on a thread of the global queue (it blocks), awaited.
    public static func request(
        _ method: String, port: Int, path: String, headers: [(String, String)] = [],
        body: [UInt8]? = nil, timeout: Int = 150
    ) async throws -> Reply {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<Reply, Error>) in
            DispatchQueue.global().async {
                c.resume(
                    with: Result {
                        try blocking(method, port: port, path: path, headers: headers, body: body, timeout: timeout)
                    })
            }
        }
    }

    /// The request, blocking. `Host: 127.0.0.1:port` is sent unless `headers` names a Host;
    /// Content-Length is sent whenever there is a body. No read waits beyond `timeout` seconds.
    public static func blocking(
        _ method: String, port: Int, path: String, headers: [(String, String)] = [],
        body: [UInt8]? = nil, timeout: Int = 150
    ) throws -> Reply {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "no socket") }
        defer { close(fd) }
        var limit = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let ok = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard ok == 0 else { throw Failure(description: "cannot connect to 127.0.0.1:\(port)") }
        var lines = ["\(method) \(path) HTTP/1.1"]
        if !headers.contains(where: { $0.0.lowercased() == "host" }) { lines.append("Host: 127.0.0.1:\(port)") }
        lines += headers.map { "\($0.0): \($0.1)" }
        lines.append("Connection: close")
        if let body { lines.append("Content-Length: \(body.count)") }
        let out = Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8) + (body ?? [])
        var sent = 0
        while sent < out.count {
            let n = out[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            // A server may answer (413, 403) and close before it has read the whole body.
            guard n > 0 else { break }
            sent += n
        }
        // The head, then exactly Content-Length bytes (chromedriver keeps its connection open),
        // or everything to the end of the connection.
        var reply = [UInt8](), chunk = [UInt8](repeating: 0, count: 65536)
        var split: Int? = nil, expected: Int? = nil
        while true {
            if split == nil, let i = headEnd(reply) {
                split = i
                let head = String(decoding: reply[..<i], as: UTF8.self).lowercased()
                if let line = head.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }) {
                    expected = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces))
                }
            }
            if let split, let expected, reply.count - split - 4 >= expected { break }
            let n = recv(fd, &chunk, chunk.count, 0)
            if n <= 0 { break }
            reply += chunk[0..<n]
        }
        guard let split else { throw Failure(description: "no HTTP reply from 127.0.0.1:\(port)\(path)") }
        let headLines = String(decoding: reply[..<split], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = headLines.first?.split(separator: " ") ?? []
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else {
            throw Failure(description: "bad status line \(headLines.first ?? "")")
        }
        let fields: [(name: String, value: String)] = headLines.dropFirst().compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (line[..<colon].lowercased(), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        var payload = Array(reply[(split + 4)...])
        if let expected, payload.count > expected { payload = Array(payload.prefix(expected)) }
        if fields.contains(where: { $0.name == "transfer-encoding" && $0.value.lowercased().contains("chunked") }) {
            payload = try dechunk(payload)
        }
        return Reply(status: status, headers: fields, body: payload)
    }

    static func headEnd(_ b: [UInt8]) -> Int? {
        guard b.count >= 4 else { return nil }
        for i in 0...(b.count - 4) where b[i] == 13 && b[i + 1] == 10 && b[i + 2] == 13 && b[i + 3] == 10 { return i }
        return nil
    }

    static func dechunk(_ payload: [UInt8]) throws -> [UInt8] {
        var plain = [UInt8](), i = 0
        while i < payload.count {
            guard let eol = payload[i...].firstIndex(of: 13),
                let size = Int(
                    String(decoding: payload[i..<eol], as: UTF8.self).split(separator: ";").first ?? "", radix: 16)
            else {
                throw Failure(description: "bad chunk header")
            }
            if size == 0 { return plain }
            guard eol + 2 + size <= payload.count else { throw Failure(description: "truncated chunk") }
            plain += payload[(eol + 2)..<(eol + 2 + size)]
            i = eol + 2 + size + 2
        }
        throw Failure(description: "chunked body without its last chunk")
    }
}
