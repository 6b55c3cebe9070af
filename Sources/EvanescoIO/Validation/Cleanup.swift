import Dispatch
import Foundation

/// What a run must undo if it is interrupted: temporary files not yet renamed into place and
/// child processes (ffmpeg) still running. ``AtomicOutput`` and the video streams register here;
/// ``installSignalHandlers()`` makes SIGINT and SIGTERM remove the files and stop the children
/// before the process exits (status 130 or 143), so an interrupted run leaves nothing behind.
public enum Cleanup {
    static let lock = NSLock()
    nonisolated(unsafe) static var files: Set<String> = []
    nonisolated(unsafe) static var children: Set<pid_t> = []
    nonisolated(unsafe) static var sources: [DispatchSourceSignal] = []
    nonisolated(unsafe) static var recording = false
    nonisolated(unsafe) static var placed: [String] = []
    nonisolated(unsafe) static var madeFolders: [String] = []
    /// Set once an interrupting signal is being handled: nothing registered after it may outlive
    /// the process (see ``park()``).
    nonisolated(unsafe) static var interrupted = false

    /// Remembers from now on every output placed and folder made, so that ``rollBack()`` can
    /// remove them if the run then fails (a command-line tool's run is all or nothing; a server
    /// does not call this).
    public static func recordOutputs() {
        lock.lock()
        recording = true
        lock.unlock()
    }
    /// An output was renamed into place.
    package static func add(placed path: String) {
        lock.lock()
        if recording { placed.append(path) }
        lock.unlock()
    }
    /// A folder was made for outputs.
    package static func add(madeFolder path: String) {
        lock.lock()
        if recording { madeFolders.append(path) }
        lock.unlock()
    }

    /// Keeps what was placed so far even if the run then fails (a stream cut short: the frames
    /// before the cut are complete and the error says they were kept).
    public static func keepPlaced() {
        lock.lock()
        placed = []
        madeFolders = []
        lock.unlock()
    }

    /// Removes every output this run placed and every folder it made (with what it wrote in
    /// them), newest first: the run failed, so nothing of it is left as if it had succeeded.
    ///
    /// - Returns: What was removed.
    @discardableResult
    public static func rollBack() -> [String] {
        lock.lock()
        let files = placed, folders = madeFolders
        placed = []
        madeFolders = []
        lock.unlock()
        var removed: [String] = []
        for f in files.reversed() where unlink(f) == 0 { removed.append(f) }
        for d in folders.reversed() where (try? FileManager.default.removeItem(atPath: d)) != nil { removed.append(d) }
        return removed
    }

    /// Registers a temporary file to remove if the run is interrupted. Once the run is being
    /// interrupted, the caller never gets to make the file: it is parked until the process exits
    /// (the handler removes the name anyway).
    package static func add(file path: String) {
        lock.lock()
        files.insert(path)
        let late = interrupted
        lock.unlock()
        if late { park() }
    }
    /// The file was renamed into place or removed: nothing to undo.
    package static func remove(file path: String) {
        lock.lock()
        files.remove(path)
        lock.unlock()
    }
    /// Starts `process`, a child (that writes `temporaryFile`, if given), registering both in one
    /// step with the start: an interruption either finds the child registered (and stops it
    /// before removing the file) or comes first, and then the child is never started. Registered
    /// after the start, a child started as the signal's cleanup ran was missed, and when the
    /// process then exited, ffmpeg saw its input end and wrote an empty video under the hidden
    /// name. Every child is started here.
    package static func start(_ process: Process, writing temporaryFile: String? = nil) throws {
        lock.lock()
        guard !interrupted else {
            lock.unlock()
            park()
        }
        if let temporaryFile { files.insert(temporaryFile) }
        do {
            try process.run()
        } catch {
            if let temporaryFile { files.remove(temporaryFile) }
            lock.unlock()
            throw error
        }
        children.insert(process.processIdentifier)
        lock.unlock()
    }

    /// Whether an interrupting signal is being handled: the process is about to exit with 128 +
    /// the signal, and nothing else may decide its status.
    package static var isInterrupted: Bool {
        lock.lock()
        defer { lock.unlock() }
        return interrupted
    }

    /// Parks the calling thread if an interrupting signal is being handled. A writer whose file
    /// the handler removed fails on its own ("cannot be written"); without this its error path
    /// raced the handler and the process exited 1, not 128 + the signal, with a false error.
    package static func yieldToInterruption() {
        if isInterrupted { park() }
    }

    /// Stops the calling thread for good: the process is exiting on a signal, and whatever this
    /// thread would do next (make a file, start a child) would outlive the cleanup.
    package static func park() -> Never {
        while true { sleep(60) }
    }
    /// The child has exited.
    package static func remove(child pid: pid_t) {
        lock.lock()
        children.remove(pid)
        lock.unlock()
    }

    /// Removes every registered temporary file and stops every registered child.
    public static func run() {
        lock.lock()
        let f = files, c = children
        files = []
        children = []
        lock.unlock()
        // Children first (ffmpeg may still be writing a temporary file): SIGTERM, half a second
        // to exit, then SIGKILL; the files go once nothing can write them any more.
        for pid in c { kill(pid, SIGTERM) }
        let deadline = Date().addingTimeInterval(0.5)
        var running = c
        while !running.isEmpty && Date() < deadline {
            running = running.filter { waitpid($0, nil, WNOHANG) == 0 }
            if !running.isEmpty { usleep(10_000) }
        }
        for pid in running {
            kill(pid, SIGKILL)
            waitpid(pid, nil, 0)
        }
        // A staging folder (a batch job's) goes with what is in it.
        for path in f where unlink(path) != 0 && (errno == EISDIR || errno == EPERM) {
            try? FileManager.default.removeItem(atPath: path)
        }
    }

    /// Handles SIGINT and SIGTERM (for a command-line tool): cleans up, then exits with 128 +
    /// the signal number. Call once, early.
    public static func installSignalHandlers() {
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler {
                lock.lock()
                interrupted = true
                var names = files
                lock.unlock()
                run()
                // A writer that registered its file just before the signal may make it just
                // after the sweep: sweep again, briefly, before exiting.
                for _ in 0..<3 {
                    usleep(20_000)
                    lock.lock()
                    names.formUnion(files)
                    files = []
                    lock.unlock()
                    for path in names { unlink(path) }
                }
                signal(sig, SIG_DFL)
                exit(128 + sig)
            }
            source.resume()
            lock.lock()
            sources.append(source)
            lock.unlock()
        }
    }
}
