import EvanescoIO
import Foundation

/// Results on standard output, every write checked: `evanesco info --json > file` on a full
/// disk, or into /dev/full, is an error with a non-zero exit, not an empty file and status 0.
/// (Swift's `print` buffers and drops a failed flush at exit without a word.)
enum StandardOutput {
    /// Why standard output could not take the result.
    struct Failure: Error, CustomStringConvertible {
        let code: Int32
        var description: String {
            code == EPIPE
                ? "standard output was closed before the result was written (the reader went away)"
                : "cannot write the result to standard output: \(WriteFailure.reason(code))"
        }
    }

    /// Writes `text` and a newline, whole, or throws.
    static func line(_ text: String) throws {
        try write(text + "\n")
    }

    /// Writes `text`, whole, or throws.
    static func write(_ text: String) throws {
        // A closed pipe is an error to report, not a signal that kills the process silently.
        signal(SIGPIPE, SIG_IGN)
        let code = WriteFailure.writeAll(Array(text.utf8), to: STDOUT_FILENO)
        if code != 0 { throw Failure(code: code) }
    }
}
