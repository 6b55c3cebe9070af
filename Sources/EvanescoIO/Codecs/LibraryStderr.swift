#if canImport(Glibc)
    import Glibc
#endif
import Foundation

/// What C libraries print on stderr themselves (libde265, under libheif, writes "SPS error: ..."
/// lines before libheif returns its own error): captured while a decode runs, so that a failure
/// is one line of ours with the decoder's words folded in, never loose lines before it.
///
/// stderr is process-wide: while any capture runs, file descriptor 2 points at an anonymous
/// unnamed temporary file, and each capture takes what was written between its start and end.
/// Concurrent captures share it (so two HEIC frames still decode on two threads); what another
/// thread writes meanwhile (our own progress lines, which start with a carriage return or
/// "evanesco", and the studio's log lines, which start with their time) is handed back to the
/// real stderr, not folded into an error.
package enum LibraryStderr {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var active = 0
    nonisolated(unsafe) private static var saved: Int32 = -1
    nonisolated(unsafe) private static var sink: Int32 = -1

    /// Runs `body` with stderr captured; returns its result and the library's lines.
    package static func capture<T>(_ body: () throws -> T) rethrows -> (result: T, lines: [String]) {
        let start = begin()
        var outcome: Result<T, Error>
        do { outcome = .success(try body()) } catch { outcome = .failure(error) }
        let text = end(from: start)
        var library: [String] = []
        var ours = ""
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            if line.hasPrefix("\r") || line.hasPrefix("\u{1B}") || line.hasPrefix("evanesco") || isLogLine(line) {
                ours += line + "\n"
            } else {
                // A decoder repeats itself (once per slice or tile): each line once.
                let l = line.trimmingCharacters(in: .whitespacesAndNewlines)
                if !library.contains(l) { library.append(l) }
            }
        }
        if !ours.isEmpty { _ = WriteFailure.writeAll(Array(ours.utf8), to: STDERR_FILENO) }
        switch outcome {
        case .success(let v): return (v, library.filter { !$0.isEmpty })
        case .failure(let e): try { throw e }()
        }
        fatalError("unreachable")
    }

    /// A line of our own log (swift-log's stream handler starts each with an ISO 8601 time).
    static func isLogLine(_ line: Substring) -> Bool {
        let u = Array(line.utf8.prefix(11))
        guard u.count == 11 else { return false }
        let digits = [0, 1, 2, 3, 5, 6, 8, 9]
        return digits.allSatisfy { (48...57).contains(u[$0]) } && u[4] == 45 && u[7] == 45 && u[10] == 84
    }

    private static func begin() -> off_t {
        lock.lock()
        defer { lock.unlock() }
        fflush(nil)
        if active == 0 {
            // An unnamed temporary file (made, then unlinked at once: nothing can be left behind).
            var template = Array((NSTemporaryDirectory() + "/.evn-stderr-XXXXXX").utf8CString)
            let fd = mkstemp(&template)
            if fd >= 0 {
                unlink(template)
                _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            }
            let keep = dup(STDERR_FILENO)
            guard fd >= 0, keep >= 0, dup2(fd, STDERR_FILENO) >= 0 else {
                // Nothing captured, nothing lost: the library's lines go where they went before.
                if fd >= 0 { close(fd) }
                if keep >= 0 { close(keep) }
                return -1
            }
            sink = fd
            saved = keep
        }
        active += 1
        return lseek(sink, 0, SEEK_CUR)
    }

    private static func end(from start: off_t) -> String {
        guard start >= 0 else { return "" }
        lock.lock()
        defer { lock.unlock() }
        fflush(nil)
        let stop = lseek(sink, 0, SEEK_CUR)
        var bytes = [UInt8](repeating: 0, count: max(0, Int(stop - start)))
        if !bytes.isEmpty { _ = bytes.withUnsafeMutableBytes { pread(sink, $0.baseAddress, $0.count, start) } }
        active -= 1
        if active == 0 {
            dup2(saved, STDERR_FILENO)
            close(saved)
            close(sink)
            saved = -1
            sink = -1
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
