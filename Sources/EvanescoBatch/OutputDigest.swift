import Crypto
import EvanescoIO
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The size and SHA-256 of an output as placed: a file's bytes, or for a folder output (a
/// backdrop's frames) every file in it, by name. Receipts and queue rows keep it, so "done"
/// means the output is there, whole, as the job wrote it.
public struct OutputDigest: Codable, Sendable, Equatable {
    /// Bytes (a folder: the sum over its files).
    public var bytes: Int
    /// Hex SHA-256 (a folder: over each file's name, length and bytes, in name order).
    public var sha256: String

    public init(bytes: Int, sha256: String) {
        self.bytes = bytes
        self.sha256 = sha256
    }

    /// The bytes at `path` now (a folder: the sum over its files), without reading them; nil when
    /// nothing is there.
    public static func size(of path: String) -> Int? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        guard (st.st_mode & S_IFMT) == S_IFDIR else { return (st.st_mode & S_IFMT) == S_IFREG ? Int(st.st_size) : nil }
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { return nil }
        var total = 0
        for name in names {
            var f = stat()
            guard lstat((path as NSString).appendingPathComponent(name), &f) == 0 else { return nil }
            total += Int(f.st_size)
        }
        return total
    }

    /// The digest of what is at `path` now, or nil when nothing readable is there.
    public static func of(_ path: String) -> OutputDigest? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        var hasher = SHA256()
        var total = 0
        if (st.st_mode & S_IFMT) == S_IFDIR {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { return nil }
            for name in names.sorted() {
                guard let n = add((path as NSString).appendingPathComponent(name), to: &hasher, name: name) else {
                    return nil
                }
                total += n
            }
        } else {
            guard (st.st_mode & S_IFMT) == S_IFREG, let n = add(path, to: &hasher, name: nil) else { return nil }
            total = n
        }
        return OutputDigest(bytes: total, sha256: hasher.finalize().map { String(format: "%02x", $0) }.joined())
    }

    /// Adds one regular file to `hasher`; returns its size.
    private static func add(_ path: String, to hasher: inout SHA256, name: String?) -> Int? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        if let name { hasher.update(data: Data("\(name)\0\(st.st_size)\0".utf8)) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var total = 0
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { break }
            buffer.withUnsafeBytes { hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            total += n
        }
        return total
    }
}
