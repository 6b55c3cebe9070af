import EvanescoStack
import Foundation

/// Progress on stderr. On a terminal: one line rewritten in place, with a bar and the time
/// left. Otherwise (a pipe, a log file, CI): plain lines, at most one every half second per stage.
final class ProgressDisplay: @unchecked Sendable {
    private let enabled: Bool
    private let tty: Bool
    private let lock = NSLock()
    private var lastStage = ""
    private var lastPrint = Date.distantPast
    private var lineOpen = false

    init(quiet: Bool, tty: Bool = isatty(STDERR_FILENO) == 1) {
        enabled = !quiet
        self.tty = tty
    }

    /// A callback for the library's `progress` options, or nil when quiet.
    var stackCallback: (@Sendable (StackProgress) -> Void)? {
        guard enabled else { return nil }
        return { [self] p in
            show(stage: p.stage.rawValue, done: p.done, total: p.total, unit: p.stage.unit, remaining: p.remaining)
        }
    }

    /// Shows `done` of `total` `unit` in `stage`, with the time left when known.
    func show(stage: String, done: Int, total: Int, unit: String, remaining: Double?) {
        guard enabled else { return }
        lock.lock()
        defer { lock.unlock() }
        let now = Date()
        let finished = done >= total
        if tty {
            guard stage != lastStage || finished || now.timeIntervalSince(lastPrint) > 0.1 else { return }
            if stage != lastStage && lineOpen { write("\n") }
            lastStage = stage
            lastPrint = now
            let width = 24, filled = total > 0 ? min(width, done * width / total) : 0
            let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
            var line = "\(stage) [\(bar)] \(done)/\(total) \(unit)"
            if let r = remaining { line += ", " + Self.duration(r) + " left" }
            write("\r\u{1B}[2K" + line + (finished ? "\n" : ""))
            lineOpen = !finished
        } else {
            guard stage != lastStage || finished || now.timeIntervalSince(lastPrint) > 0.5 else { return }
            lastStage = stage
            lastPrint = now
            var line = "\(stage): \(done)/\(total) \(unit)"
            if let r = remaining { line += ", about " + Self.duration(r) + " left" }
            write(line + "\n")
        }
    }

    /// Ends an open progress line so that the next message starts on its own line.
    func finish() {
        lock.lock()
        defer { lock.unlock() }
        if lineOpen {
            write("\n")
            lineOpen = false
        }
    }

    /// A free-form progress message (a plain line; closes an open bar first).
    func message(_ text: String) {
        guard enabled else { return }
        finish()
        write(text + "\n")
    }

    static func duration(_ s: Double) -> String {
        s < 60 ? String(format: "%.1f s", s) : String(format: "%d min %02d s", Int(s) / 60, Int(s) % 60)
    }

    private func write(_ s: String) { FileHandle.standardError.write(Data(s.utf8)) }
}

/// This process's peak resident memory so far, in MB (getrusage: kilobytes on Linux).
func peakResidentMB() -> Int {
    var u = rusage()
    #if os(Linux)
        guard getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &u) == 0 else { return 0 }
    #else
        guard getrusage(RUSAGE_SELF, &u) == 0 else { return 0 }
    #endif
    #if os(Linux)
        return (u.ru_maxrss + 1023) / 1024
    #else
        return (u.ru_maxrss + (1 << 20) - 1) >> 20
    #endif
}
