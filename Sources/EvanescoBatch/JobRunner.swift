import EvanescoCore
import EvanescoDepth
import EvanescoFaces
import EvanescoIO
import EvanescoStack
import Foundation

/// A job's machine-readable account: the same report its command writes with `--report`.
public enum JobReport: Encodable, Sendable {
    case stack(StackReport)
    case portrait(PortraitReport)
    case backdrop(BackdropReport)

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .stack(let r): try r.encode(to: encoder)
        case .portrait(let r): try r.encode(to: encoder)
        case .backdrop(let r): try r.encode(to: encoder)
        }
    }
}

/// Why a job failed, and whether trying again can help.
public struct JobFailure: Error, Sendable, CustomStringConvertible {
    /// The one-line message (the library's own, which says what to do).
    public var message: String
    /// True for bad input (the library's typed errors): the job fails at once. False for what
    /// may pass (I/O, a full disk, a lost database): the job is tried again, with backoff.
    public var permanent: Bool

    /// A job stopped at its time limit (`limit` seconds); `hint` says how to raise it.
    public static func timedOut(_ limit: Double, hint: String) -> JobFailure {
        JobFailure(
            message: "stopped: it ran longer than its time limit of \(String(format: "%g", limit)) s (\(hint))",
            permanent: true)
    }

    /// - Parameters:
    ///   - message: What went wrong.
    ///   - permanent: Whether another attempt is useless.
    public init(message: String, permanent: Bool) {
        self.message = message
        self.permanent = permanent
    }

    public var description: String { message }

    /// Classifies any error a job threw.
    ///
    /// - Parameter error: The error.
    /// - Returns: Its message, and permanent for the library's typed errors about the input or
    ///   the settings; transient for writes that failed and anything else.
    public static func classify(_ error: any Error) -> JobFailure {
        if let f = error as? JobFailure { return f }
        let message = String(describing: error)
        switch error {
        case let e as ImageIOError:
            switch e {
            case .cannotWrite, .encodeFailed: return JobFailure(message: message, permanent: false)
            default: return JobFailure(message: message, permanent: true)
            }
        case is SettingError, is StackError, is PortraitError, is DepthError, is FrameStreamError, is CascadeError,
            is BackdropSessionError, is ManifestError:
            return JobFailure(message: message, permanent: true)
        default:
            return JobFailure(message: message, permanent: false)
        }
    }
}

/// Runs one job through the library, the same entry points `evanesco stack`, `portrait` and
/// `backdrop` use, writing its output under a staging name beside the output. The caller moves
/// it into place (``Staging/place(_:at:expecting:)``) only when it may: a batch at once, a queue worker
/// inside the transaction that proves it still holds the job's lease.
public enum JobRunner {
    /// Runs `job` within its time limit (``BatchJob/timeout``; none: as ``run(_:staging:cancellation:log:)``):
    /// on a thread of its own, cancelled past the limit (a stack stops at its next frame or row)
    /// and failed at once with ``JobFailure/timedOut(_:hint:)``. What the thread still writes goes
    /// to `staging`, which the caller discards.
    ///
    /// - Parameters:
    ///   - job: The job.
    ///   - staging: Where its output goes.
    ///   - hint: How to raise the limit, for the message.
    /// - Returns: The job's report.
    /// - Throws: What the job throws, or the time limit's ``JobFailure``.
    public static func runWithinLimit(_ job: BatchJob, staging: String, hint: String) throws -> JobReport {
        guard let limit = job.timeout else { return try run(job, staging: staging) }
        let cancellation = StackCancellation()
        let result = LockedBox<Result<JobReport, any Error>?>(nil)
        let finished = DispatchSemaphore(value: 0)
        race(
            limit: limit, cancellation: cancellation,
            work: { Result { try run(job, staging: staging, cancellation: cancellation) } }, late: { _ in },
            finish: { r in
                result.update { $0 = r }
                finished.signal()
            })
        finished.wait()
        guard let r = result.value else { throw JobFailure.timedOut(limit, hint: hint) }
        return try r.get()
    }

    /// Runs `work` on a thread of its own (8 MB of stack, as a stack's recursion needs) and races
    /// it against `limit` seconds: `finish` gets the result, or nil once the limit passed first;
    /// then `cancellation` is cancelled (a stack stops at its next frame or row) and what the
    /// thread still returns goes to `late`, for its output to be discarded. `finish` is called
    /// exactly once. The one time limit of `batch run` and of the queue's workers.
    ///
    /// - Parameters:
    ///   - limit: Seconds; nil for none.
    ///   - cancellation: Cancelled when the limit passes first.
    ///   - work: The job.
    ///   - late: Receives a result that came after the limit.
    ///   - finish: Receives the result, or nil past the limit.
    public static func race<T: Sendable>(
        limit: Double?, cancellation: StackCancellation, work: @escaping @Sendable () -> T,
        late: @escaping @Sendable (T) -> Void, finish: @escaping @Sendable (T?) -> Void
    ) {
        let once = LockedBox(false)
        @Sendable func first() -> Bool {
            once.update { v in
                defer { v = true }
                return !v
            }
        }
        let thread = Thread {
            let r = work()
            if first() { finish(r) } else { late(r) }
        }
        thread.stackSize = 8 << 20
        thread.start()
        if let limit {
            DispatchQueue.global().asyncAfter(deadline: .now() + limit) {
                guard first() else { return }
                cancellation.cancel()
                finish(nil)
            }
        }
    }

    /// Runs `job`, writing to `staging`.
    ///
    /// - Parameters:
    ///   - job: The job.
    ///   - staging: Where the output goes (from ``Staging/prepare(for:token:stale:)``).
    ///   - cancellation: Stops a stack between frames (a lost lease, a drain that ran out of time).
    ///   - log: Hears a stack's stages and notices (a queue row keeps the last lines).
    /// - Returns: The job's report.
    /// - Throws: The library's error, for ``JobFailure/classify(_:)``.
    public static func run(
        _ job: BatchJob, staging: String, cancellation: StackCancellation? = nil, log: JobLog? = nil
    ) throws -> JobReport {
        let start = Date()
        switch job.options {
        case .stack(var options):
            options.cancellation = cancellation
            if let log { options.progress = { @Sendable p in log.progress(p) } }
            options.erase = try job.erase.map { try EraseMask.read($0, forBurst: job.inputs) }
            var result = try BurstStacker.stack(contentsOf: job.inputs, options: options)
            let encodeStart = Date()
            // (A raw burst's mosaic to a .dng output, else the picture, a raw one finished.)
            try result.write(to: staging, options: WriteOptions(quality: job.quality, overwrite: true))
            result.timings.encode = Date().timeIntervalSince(encodeStart)
            result.timings.total = Date().timeIntervalSince(start)
            for n in result.notices { log?.add("notice: \(n)") }
            return .stack(StackReport(result, inputs: job.inputs, output: job.output))
        case .portrait(let settings):
            let renderer =
                job.inputs.count == 2
                ? try PortraitRenderer(
                    DepthReader.read(photo: job.inputs[0], depthMap: job.inputs[1], kind: .disparity))
                : try PortraitRenderer(contentsOf: job.inputs[0])
            // A render is not cut short, but a job past its time limit goes no further.
            if cancellation?.isCancelled == true { throw StackError.cancelled }
            var r = try renderer.render(settings)
            if cancellation?.isCancelled == true { throw StackError.cancelled }
            try r.report.times.measure(\.encode) {
                try ImageCodecs.write(
                    r.image, to: staging,
                    options: WriteOptions(quality: job.quality, metadata: r.metadata, overwrite: true))
            }
            r.report.times = r.report.times.rounded
            return .portrait(r.report)
        case .backdrop(let options):
            return .backdrop(try runBackdrop(job, options: options, staging: staging, cancellation: cancellation))
        }
    }

    /// A backdrop job: its frames through a session, stopped between frames once `cancellation` is
    /// cancelled (a job past its time limit does not keep its thread).
    static func runBackdrop(
        _ job: BatchJob, options: BackdropSessionOptions, staging: String, cancellation: StackCancellation? = nil
    ) throws -> BackdropReport {
        let background = try job.background.map { try ImageCodecs.read($0).image.uint8 }
        let cascade = try BackdropSession.cascade(for: options.subject, path: nil).0
        let inputs = try BackdropInputs(
            color: job.inputs[0], depth: job.inputs[1], depthEncoding: options.depthEncoding)
        let color = inputs.color, depth = inputs.depth
        let writer = try FrameOutputKind(job.output).writer(
            at: staging, frameRate: color.framesPerSecond ?? 30, overwrite: true, quality: job.quality)
        let session = BackdropSession(options: options, background: background, cascade: cascade)
        var report = session.run(
            color: color, depth: depth, to: writer, isCancelled: cancellation.map { c in { c.isCancelled } })
        if let e = session.failure { throw e }
        guard report.framesWritten > 0 else { throw FrameStreamError.noFrames(source: job.inputs[0]) }
        report.output = job.output
        return report
    }
}

/// The last lines of what a job did (its stages, its notices, how it ended), kept with its queue
/// row so `batch status --job ID` shows them.
public final class JobLog: @unchecked Sendable {
    /// Lines kept, the newest.
    public static let maximumLines = 40
    private let lines = LockedBox([String]())
    private let started = Date()
    private var lastStage: StackStage?

    public init() {}

    /// Adds a line, stamped with the seconds since the job started.
    public func add(_ line: String) {
        let stamped = String(format: "%7.2f s  ", Date().timeIntervalSince(started)) + line
        lines.update { l in
            l.append(String(stamped.prefix(500)))
            if l.count > Self.maximumLines { l.removeFirst(l.count - Self.maximumLines) }
        }
    }

    /// A stack's progress: a line when a stage starts and when it ends.
    func progress(_ p: StackProgress) {
        let first = lines.update { _ -> Bool in
            defer { lastStage = p.stage }
            return lastStage != p.stage
        }
        if first { add("\(p.stage.rawValue): started") }
        if p.done == p.total { add("\(p.stage.rawValue): \(p.total) done in \(String(format: "%.2f", p.elapsed)) s") }
    }

    /// The lines, oldest first.
    public var text: String { lines.value.joined(separator: "\n") }
}
