import EvanescoCore
import EvanescoIO
import EvanescoStack
import Foundation

/// A job's receipt: what `batch status` counts and what an operator reads. Written atomically
/// (`AtomicOutput`) into the manifest's state folder, `done/ID.json` or `failed/ID.json`.
public struct JobReceipt: Encodable, Sendable {
    public var id: String
    public var kind: JobKind
    public var output: String
    /// `done` or `failed`.
    public var state: String
    /// Attempts made (transient failures are tried again).
    public var attempts: Int
    /// Seconds the last attempt took.
    public var seconds: Double
    /// ISO 8601, UTC.
    public var finishedAt: String
    /// The machine that ran it.
    public var host: String
    /// Why it failed (failed jobs).
    public var error: String?
    /// The output as placed (done jobs): its size and SHA-256. A receipt whose output is not
    /// there at that size does not count as done.
    public var outputDigest: OutputDigest?
    /// The job's own report (done jobs): the same JSON its command's `--report` writes.
    public var report: JobReport?
    /// The job spec its settings were read with (``JobSpec``).
    public var spec = JobSpec.current
}

/// What `batch status` and a resumed run read back of a receipt.
struct ReceiptSummary: Decodable {
    var id: String
    var state: String
    var output: String?
    var seconds: Double
    var finishedAt: String
    var error: String?
    var outputDigest: OutputDigest?
}

/// `evanesco batch run`: a manifest on this machine, no database. Resumable: a job whose output
/// and receipt exist is skipped, so a killed run is started again with the same command. Each
/// job's output is staged beside it and renamed into place whole, then its receipt written.
public struct LocalBatch: Sendable {
    /// The manifest.
    public var manifest: BatchManifest
    /// Jobs run at once.
    public var concurrency = 1
    /// This process's slice of the manifest.
    public var shard: Shard?
    /// Replace outputs that exist without a receipt of this batch (else such a job fails: the
    /// file may be someone's).
    public var overwrite = false
    /// Attempts for a job whose failure may pass (I/O); a bad input fails at once.
    public var maxAttempts = 3
    /// Called after each job, from any thread, with the jobs finished so far (this run), the
    /// jobs this run has to do, and the job's receipt.
    public var progress: (@Sendable (Int, Int, JobReceipt) -> Void)?

    /// - Parameter manifest: The manifest.
    public init(manifest: BatchManifest) { self.manifest = manifest }

    /// The state folder of a manifest: `MANIFEST.state` beside it.
    public static func stateFolder(of manifestPath: String) -> String { manifestPath + ".state" }

    /// What a run did.
    public struct Summary: Encodable, Sendable {
        public var manifest: String
        public var shard: String?
        public var jobs: Int
        public var skipped: Int
        public var done: Int
        /// Jobs another run of the same manifest was running (a second `batch run`, an
        /// overlapping shard): left to it, neither done nor failed here.
        public var elsewhere: Int
        public var failed: [BatchStatus.Failure]
        public var seconds: Double
    }

    /// How one job of this run ended.
    enum Outcome {
        case ran(JobReceipt)
        /// Done before (found so once its lock was held, or recovered from its placing receipt).
        case doneBefore
        /// Another process holds its lock.
        case elsewhere
    }

    /// Runs this process's slice.
    ///
    /// - Returns: What was done, skipped and failed.
    /// - Throws: `ImageIOError` when the state folder cannot be made.
    public func run() throws -> Summary {
        let start = Date()
        let state = Self.stateFolder(of: manifest.path)
        for sub in ["done", "failed", "placing", "locks"] {
            try AtomicOutput.makeFolder((state as NSString).appendingPathComponent(sub))
        }
        let mine = manifest.jobs(in: shard)
        let todo = mine.filter { !Self.isDone($0, state: state) }
        struct Tally { var next = 0, finished = 0, skipped = 0, elsewhere = 0, failures: [BatchStatus.Failure] = [] }
        let tally = LockedBox(Tally())
        let host = ProcessInfo.processInfo.hostName
        DispatchQueue.concurrentPerform(iterations: max(1, min(concurrency, todo.count))) { _ in
            while true {
                let index: Int? = tally.update { t in
                    guard t.next < todo.count else { return nil }
                    t.next += 1
                    return t.next - 1
                }
                guard let index else { return }
                let job = todo[index]
                let outcome = runLocked(job, state: state, host: host)
                let n = tally.update { t in
                    t.finished += 1
                    switch outcome {
                    case .ran(let receipt) where receipt.state == "failed":
                        t.failures.append(.init(id: job.id, error: receipt.error ?? "", attempts: receipt.attempts))
                    case .ran: break
                    case .doneBefore: t.skipped += 1
                    case .elsewhere: t.elsewhere += 1
                    }
                    return t.finished
                }
                if case .ran(let receipt) = outcome { progress?(n, todo.count, receipt) }
            }
        }
        let t = tally.value
        return Summary(
            manifest: manifest.path, shard: shard?.description, jobs: mine.count,
            skipped: mine.count - todo.count + t.skipped,
            done: todo.count - t.failures.count - t.skipped - t.elsewhere, elsewhere: t.elsewhere,
            failed: t.failures.sorted { $0.id < $1.id }, seconds: Date().timeIntervalSince(start))
    }

    static func receiptPath(_ state: String, _ folder: String, _ id: String) -> String {
        ((state as NSString).appendingPathComponent(folder) as NSString).appendingPathComponent(id + ".json")
    }

    /// The receipt in `folder` for `job`, if it reads and is this job's (a corrupt or foreign
    /// file is no receipt).
    static func receipt(_ job: BatchJob, state: String, folder: String) -> ReceiptSummary? {
        guard let data = FileManager.default.contents(atPath: receiptPath(state, folder, job.id)),
            let r = try? ReportJSON.decoder().decode(ReceiptSummary.self, from: data), r.id == job.id
        else { return nil }
        return r
    }

    /// Done: a readable done receipt of this job, and its output there at the size the receipt
    /// gives (a truncated or replaced output is not done).
    static func isDone(_ job: BatchJob, state: String) -> Bool {
        guard let r = receipt(job, state: state, folder: "done"), r.state == "done" else { return false }
        guard let digest = r.outputDigest else { return FileManager.default.fileExists(atPath: job.output) }
        return OutputDigest.size(of: job.output) == digest.bytes
    }

    /// Runs `job` holding its lock (`locks/ID.lock`, flock): a second run of the same manifest,
    /// or an overlapping shard, leaves a job to the run that holds it instead of failing it.
    func runLocked(_ job: BatchJob, state: String, host: String) -> Outcome {
        let path = ((state as NSString).appendingPathComponent("locks") as NSString).appendingPathComponent(
            job.id + ".lock")
        var fd: Int32 = -1
        // The lock file is removed after the job: a lock taken on a file that was removed in
        // between is no lock, so take it again on the file now at that name.
        while true {
            fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
            guard fd >= 0 else {
                return .ran(
                    failedReceipt(
                        job, host: host, attempts: 0, began: Date(),
                        message: "cannot make its lock \(path): \(WriteFailure.reason(errno))"))
            }
            if flock(fd, LOCK_EX | LOCK_NB) != 0 {
                close(fd)
                return .elsewhere
            }
            var held = stat(), named = stat()
            if fstat(fd, &held) == 0 && stat(path, &named) == 0 && held.st_ino == named.st_ino
                && held.st_dev == named.st_dev
            {
                break
            }
            close(fd)
        }
        defer {
            unlink(path)
            close(fd)
        }
        // Finished by the run that held the lock before us.
        if Self.isDone(job, state: state) { return .doneBefore }
        if recover(job, state: state) { return .doneBefore }
        return .ran(runOne(job, state: state, host: host))
    }

    /// A run killed between placing an output and writing its receipt left the receipt in
    /// `placing/`: if the output is there with that receipt's size and digest, the job is done
    /// and its receipt is moved into `done/`.
    func recover(_ job: BatchJob, state: String) -> Bool {
        let placing = Self.receiptPath(state, "placing", job.id)
        guard let r = Self.receipt(job, state: state, folder: "placing"), let digest = r.outputDigest,
            OutputDigest.of(job.output) == digest, var data = FileManager.default.contents(atPath: placing),
            var object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
        else { return false }
        object["state"] = "done"
        guard let d = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return false }
        data = d
        guard
            (try? AtomicOutput.write([UInt8](data), to: Self.receiptPath(state, "done", job.id), overwrite: true))
                != nil
        else { return false }
        unlink(placing)
        unlink(Self.receiptPath(state, "failed", job.id))
        return true
    }

    func failedReceipt(_ job: BatchJob, host: String, attempts: Int, began: Date, message: String) -> JobReceipt {
        JobReceipt(
            id: job.id, kind: job.kind, output: job.output, state: "failed", attempts: attempts,
            seconds: Date().timeIntervalSince(began), finishedAt: Self.timestamp(), host: host, error: message,
            outputDigest: nil, report: nil)
    }

    func runOne(_ job: BatchJob, state: String, host: String) -> JobReceipt {
        var attempts = 0
        var job = job
        job.overwrite = job.overwrite || overwrite
        while true {
            attempts += 1
            let began = Date()
            var receipt = JobReceipt(
                id: job.id, kind: job.kind, output: job.output, state: "done", attempts: attempts, seconds: 0,
                finishedAt: "", host: host, error: nil, outputDigest: nil, report: nil)
            do {
                // Our own output may be replaced: one a readable done receipt of this job names
                // (the output was truncated or damaged since), or one whose digest a placing
                // receipt gives.
                let placing = Self.receipt(job, state: state, folder: "placing")
                let done = Self.receipt(job, state: state, folder: "done")
                if let why = job.outputRefusal(ours: { path in
                    (done?.state == "done" && done?.output == job.output)
                        || (placing?.outputDigest != nil && OutputDigest.of(path) == placing?.outputDigest)
                }) {
                    let unreadable =
                        FileManager.default.fileExists(atPath: Self.receiptPath(state, "done", job.id)) && done == nil
                    throw JobFailure(
                        message: why
                            + (unreadable
                                ? " (its receipt \(Self.receiptPath(state, "done", job.id)) is unreadable: check the "
                                    + "output, then remove the receipt or use --force)"
                                : ""),
                        permanent: true)
                }
                let staging = try Staging.prepare(for: job.output, token: Staging.newToken())
                let folder = (staging as NSString).deletingLastPathComponent
                Cleanup.add(file: folder)
                defer {
                    Staging.discard(staging)
                    Cleanup.remove(file: folder)
                }
                receipt.report = try JobRunner.runWithinLimit(job, staging: staging, hint: "raise the line's timeout")
                guard let digest = OutputDigest.of(staging) else {
                    throw JobFailure(message: "the job wrote no output at \(staging)", permanent: false)
                }
                receipt.outputDigest = digest
                receipt.seconds = Date().timeIntervalSince(began)
                receipt.finishedAt = Self.timestamp()
                // The receipt first, as placing: a run killed after the rename finds it and the
                // output it describes, and records the job done (``recover(_:state:)``).
                let encoded = try ReportJSON.encode(receipt)
                var pending = receipt
                pending.state = "placing"
                try AtomicOutput.write(
                    try ReportJSON.encode(pending), to: Self.receiptPath(state, "placing", job.id), overwrite: true)
                try Staging.place(staging, at: job.output, expecting: digest)
                try AtomicOutput.write(encoded, to: Self.receiptPath(state, "done", job.id), overwrite: true)
                unlink(Self.receiptPath(state, "placing", job.id))
                unlink(Self.receiptPath(state, "failed", job.id))
                return receipt
            } catch {
                let failure = JobFailure.classify(error)
                if !failure.permanent && attempts < maxAttempts {
                    Thread.sleep(forTimeInterval: RetryPolicy.localJob.delay(afterFailure: attempts))
                    continue
                }
                receipt = failedReceipt(job, host: host, attempts: attempts, began: began, message: failure.message)
                try? AtomicOutput.write(
                    try ReportJSON.encode(receipt), to: Self.receiptPath(state, "failed", job.id), overwrite: true)
                return receipt
            }
        }
    }

    static func timestamp(_ date: Date = Date()) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f.string(from: date)
    }

    /// The status of a manifest from its receipts.
    ///
    /// - Parameter manifest: The manifest.
    /// - Returns: Done (receipt and output present), failed (a failure receipt and no newer
    ///   success), pending (the rest), the rate of the last finishes and the time left.
    public static func status(of manifest: BatchManifest) -> BatchStatus {
        let state = stateFolder(of: manifest.path)
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var done = 0, failures: [BatchStatus.Failure] = [], finishes: [Date] = []
        for job in manifest.jobs {
            if isDone(job, state: state) {
                done += 1
                if let r = receipt(job, state: state, folder: "done"), let d = f.date(from: r.finishedAt) {
                    finishes.append(d)
                }
            } else if let r = receipt(job, state: state, folder: "failed") {
                failures.append(.init(id: job.id, error: r.error ?? "", attempts: nil))
            }
        }
        let pending = manifest.jobs.count - done - failures.count
        let rate = BatchStatus.rate(finishes: finishes)
        return BatchStatus(
            total: manifest.jobs.count, done: done, failed: failures.count, pending: pending, running: 0, cancelled: 0,
            jobsPerMinute: rate, secondsLeft: rate > 0 && pending > 0 ? Double(pending) / rate * 60 : nil,
            leaseLosses: 0,
            attempts: 0, failures: failures)
    }
}
