import Foundation

/// A child process started by a test, with every wait bounded.
///
/// Its stdout and stderr are read as they arrive, each on a thread of its own, so a child that
/// writes more than a pipe holds (a sanitizer's report, a long progress log) never blocks on a
/// pipe nobody reads; and ``finish(within:)`` stops a child that outlives its time (SIGTERM, then
/// SIGKILL two seconds later), so a hang fails the test that met it, with what the child had
/// said, instead of stopping the whole suite.
public final class Subprocess: @unchecked Sendable {
    /// Where one of the child's outputs goes.
    public enum Output: Sendable {
        /// A pipe, collected into the result.
        case pipe
        /// /dev/null.
        case discard
        /// A file (created or truncated), e.g. `/dev/full` to make every write fail.
        case file(String)
    }

    /// How a child ended.
    public struct Result: Sendable {
        /// Its exit status (the signal's number if a signal ended it); -1 if it outlived its time.
        public var status: Int32
        /// The bytes it wrote to a piped stdout, and to a piped stderr.
        public var out: [UInt8]
        public var err: [UInt8]
        /// Whether it was stopped for outliving its time.
        public var timedOut: Bool

        public var stdout: String { String(decoding: out, as: UTF8.self) }
        /// Its stderr, with a line saying so when it was stopped for time.
        public var stderr: String { String(decoding: err, as: UTF8.self) + (timedOut ? "\n[stopped: it hung]" : "") }
    }

    /// Bytes read from one pipe until its end, on a thread of its own.
    private final class Drain: @unchecked Sendable {
        private let lock = NSLock()
        private var bytes = [UInt8]()
        private var ended = false

        init(_ handle: FileHandle) {
            Thread { [self] in
                while true {
                    let chunk = handle.availableData
                    if chunk.isEmpty { break }
                    lock.withLock { bytes += chunk }
                }
                lock.withLock { ended = true }
            }.start()
        }

        /// What was read so far, and whether the pipe has ended.
        func snapshot() -> ([UInt8], Bool) { lock.withLock { (bytes, ended) } }

        /// What was read, once the pipe ended or `seconds` passed (a grandchild may hold it open).
        func collected(waiting seconds: Double) -> [UInt8] {
            _ = Subprocess.poll(seconds) { snapshot().1 }
            return snapshot().0
        }
    }

    /// The process itself (for its pid and state).
    public let process = Process()
    private let outDrain: Drain?
    private let errDrain: Drain?

    /// Starts `executable` with `arguments`.
    ///
    /// - Parameters:
    ///   - environment: The child's whole environment; nil inherits the test's.
    ///   - stdin: Bytes written to its stdin (then closed), from a thread of their own; nil gives
    ///     it /dev/null.
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, stdin: [UInt8]? = nil,
        stdout: Output = .pipe, stderr: Output = .pipe
    ) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let input = stdin.map { _ in Pipe() }
        process.standardInput = input ?? FileHandle.nullDevice
        let (outTarget, outPipe) = try Self.target(stdout)
        let (errTarget, errPipe) = try Self.target(stderr)
        process.standardOutput = outTarget
        process.standardError = errTarget
        try process.run()
        outDrain = outPipe.map { Drain($0.fileHandleForReading) }
        errDrain = errPipe.map { Drain($0.fileHandleForReading) }
        if let input, let stdin {
            Thread {
                // A child that exits without reading all of it closes the pipe: the write then
                // fails, which is the child's business. SIGPIPE is blocked on this thread only, so
                // it neither kills the test nor is ignored by the children (they inherit that).
                var pipeSignal = sigset_t()
                sigemptyset(&pipeSignal)
                sigaddset(&pipeSignal, SIGPIPE)
                pthread_sigmask(SIG_BLOCK, &pipeSignal, nil)
                try? input.fileHandleForWriting.write(contentsOf: Data(stdin))
                try? input.fileHandleForWriting.close()
            }.start()
        }
    }

    private static func target(_ output: Output) throws -> (Any, Pipe?) {
        switch output {
        case .pipe:
            let p = Pipe()
            return (p, p)
        case .discard: return (FileHandle.nullDevice, nil)
        case .file(let path):
            if !FileManager.default.fileExists(atPath: path) {
                _ = FileManager.default.createFile(atPath: path, contents: nil)
            }
            guard let h = FileHandle(forWritingAtPath: path) else {
                throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: path])
            }
            try? h.truncate(atOffset: 0)
            return (h, nil)
        }
    }

    /// The child's process id.
    public var pid: Int32 { process.processIdentifier }
    /// Whether it is still running.
    public var isRunning: Bool { process.isRunning }
    /// Sends it `signal` (SIGINT is Ctrl-C).
    public func send(_ signal: Int32) { kill(process.processIdentifier, signal) }

    /// The first line it writes to a piped stdout (without the newline), waiting at most
    /// `seconds` for it; nil if its stdout ended or the time passed first.
    public func firstLine(within seconds: Double) -> String? {
        guard let drain = outDrain else { return nil }
        _ = Self.poll(seconds) {
            let (bytes, ended) = drain.snapshot()
            return ended || bytes.contains(10)
        }
        let bytes = drain.snapshot().0
        return bytes.firstIndex(of: 10).map { String(decoding: bytes[..<$0], as: UTF8.self) }
    }

    /// Whether it exits within `seconds` (it is left running if not).
    public func exited(within seconds: Double) -> Bool { Self.poll(seconds) { !process.isRunning } }

    /// Whether `condition` holds within `seconds`, asked every 2 ms: every wait here is this one.
    static func poll(_ seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !condition() {
            if Date() >= deadline { return false }
            usleep(2_000)
        }
        return true
    }

    /// Waits at most `seconds` for it to exit; a child still running then is stopped (SIGTERM,
    /// SIGKILL two seconds later) and its result says `timedOut`, status -1.
    public func finish(within seconds: Double) -> Result {
        let timedOut = !exited(within: seconds)
        if timedOut {
            process.terminate()
            if !exited(within: 2) { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
        // The pipes end with the child, unless something it started still holds them.
        let out = outDrain?.collected(waiting: 10) ?? []
        let err = errDrain?.collected(waiting: 10) ?? []
        return Result(status: timedOut ? -1 : process.terminationStatus, out: out, err: err, timedOut: timedOut)
    }

    /// Runs `executable` to its end, at most `seconds`: see ``init(_:_:environment:stdin:stdout:stderr:)``
    /// and ``finish(within:)``.
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, stdin: [UInt8]? = nil,
        stdout: Output = .pipe, stderr: Output = .pipe, seconds: Double = 300
    ) throws -> Result {
        try Subprocess(executable, arguments, environment: environment, stdin: stdin, stdout: stdout, stderr: stderr)
            .finish(within: seconds)
    }
}
