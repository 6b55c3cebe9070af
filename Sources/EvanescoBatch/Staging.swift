import EvanescoCore
import EvanescoIO
import Foundation

/// Staged outputs: each attempt writes into its own hidden folder beside the output
/// (`.evanesco-staging-HASH-TOKEN/`, HASH naming the output, TOKEN the attempt), and the output is
/// renamed out of it into place whole, so a reader never sees half an output. Whatever an attempt
/// leaves (a worker killed mid-write) is in that folder, and the next attempt at the same output
/// removes it.
public enum Staging {
    /// The prefix of every staging folder's name.
    public static let marker = ".evanesco-staging-"

    /// A short name of an output path (FNV-1a, 64 bits, hex).
    static func tag(_ output: String) -> String {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in output.utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        return String(h, radix: 16)
    }

    /// Makes the attempt's staging folder, after removing those that `stale` says earlier
    /// attempts at the same output left, and returns the path to write the output to (the
    /// output's own name, inside it).
    ///
    /// - Parameters:
    ///   - output: The job's output.
    ///   - token: Unique to the attempt (a lease token, a random tag).
    ///   - stale: Given another attempt's token, whether its folder is left over and may go. A
    ///     queue removes only older leases' folders (a live attempt's folder is never taken from
    ///     under it); a local batch, which holds the job's lock, removes them all.
    /// - Returns: The staging path of the output.
    /// - Throws: `ImageIOError.cannotWrite` when the folder cannot be made.
    public static func prepare(
        for output: String, token: String, stale: (String) -> Bool = { _ in true }
    ) throws -> String {
        let dir = (output as NSString).deletingLastPathComponent
        let prefix = marker + tag(output) + "-"
        for name in (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        where name.hasPrefix(prefix) && stale(String(name.dropFirst(prefix.count))) {
            try? FileManager.default.removeItem(atPath: (dir as NSString).appendingPathComponent(name))
        }
        let folder = (dir as NSString).appendingPathComponent(prefix + token)
        guard mkdir(folder, 0o755) == 0 else {
            throw ImageIOError.cannotWrite(path: output, reason: String(cString: strerror(errno)))
        }
        return (folder as NSString).appendingPathComponent((output as NSString).lastPathComponent)
    }

    /// Moves a staged output into place, replacing what is there (a folder output included), and
    /// removes its staging folder; then checks that what is at `output` is what was staged.
    ///
    /// - Parameters:
    ///   - staged: The path ``prepare(for:token:stale:)`` returned.
    ///   - output: Its final path.
    ///   - digest: The staged output's size and digest: after the rename, `output` must have that
    ///     size (a staged output that vanished, or was replaced, is not placed as done).
    /// - Throws: `ImageIOError.cannotWrite` with the reason.
    public static func place(_ staged: String, at output: String, expecting digest: OutputDigest) throws {
        defer { discard(staged) }
        var st = stat()
        guard lstat(staged, &st) == 0 else {
            throw ImageIOError.cannotWrite(
                path: output,
                reason: "its staged output \(staged) is gone (removed by another process); it was not placed")
        }
        if rename(staged, output) != 0 {
            let e = errno
            guard e == ENOTEMPTY || e == EEXIST || e == EISDIR else {
                throw ImageIOError.cannotWrite(path: output, reason: String(cString: strerror(e)))
            }
            // A folder output from an earlier run: set it aside, move the new one in, remove the old.
            let aside = staged + ".old"
            guard rename(output, aside) == 0 else {
                throw ImageIOError.cannotWrite(path: output, reason: String(cString: strerror(errno)))
            }
            guard rename(staged, output) == 0 else {
                let reason = String(cString: strerror(errno))
                _ = rename(aside, output)
                throw ImageIOError.cannotWrite(path: output, reason: reason)
            }
        }
        guard OutputDigest.size(of: output) == digest.bytes else {
            throw ImageIOError.cannotWrite(
                path: output,
                reason:
                    "after placing it holds \(OutputDigest.size(of: output).map(String.init) ?? "nothing"), not the "
                    + "\(digest.bytes) bytes written"
            )
        }
    }

    /// Removes an attempt's staging folder and whatever is in it.
    ///
    /// - Parameter staged: The path ``prepare(for:token:stale:)`` returned.
    public static func discard(_ staged: String) {
        try? FileManager.default.removeItem(atPath: (staged as NSString).deletingLastPathComponent)
    }

    /// A random token for one attempt.
    public static func newToken() -> String {
        var g = SystemRandomNumberGenerator()
        return String(UInt64.random(in: 0...UInt64.max, using: &g), radix: 36)
    }
}
