import EvanescoCore
import EvanescoIO
import EvanescoStack
import Foundation
import Logging

/// `evanesco worker`: claims jobs from a ``JobQueue`` and runs them through the library.
///
/// - Claims up to ``Settings/concurrency`` jobs with `FOR UPDATE SKIP LOCKED`, each under a lease
///   of ``Settings/lease`` seconds that a heartbeat renews every third of it.
/// - Wakes on `LISTEN/NOTIFY`, and polls every ``Settings/poll`` seconds as well (a notification
///   lost while the database restarted costs at most one poll).
/// - Finishes a job only inside the transaction that proves it still holds the job's token: the
///   output is renamed into place there, so a worker that lost its lease (stalled, cut off)
///   discards its work and no output is written twice.
/// - Bad input fails the job at once with the library's message; I/O and database errors are
///   tried again with backoff. A database that goes away costs retries, never a job.
/// - ``drain()`` (SIGTERM) stops claiming, lets running jobs finish within ``Settings/grace``
///   seconds, and gives back the rest.
public final class QueueWorker: @unchecked Sendable {
    /// How the worker runs.
    public struct Settings: Sendable {
        /// Jobs run at once.
        public var concurrency = Int(Limits.jobs.defaultValue!)
        /// Lease length, seconds.
        public var lease = Limits.lease.defaultValue!
        /// Poll interval, seconds.
        public var poll = Limits.poll.defaultValue!
        /// Seconds a drain waits for running jobs before giving them back.
        public var grace = Limits.grace.defaultValue!
        /// Exit once no job is pending or running (a fleet that ends with its queue).
        public var exitWhenDone = false
        /// This worker's name in the queue (`lease_owner`, `finished_by`): host and process id.
        public var name = "\(ProcessInfo.processInfo.hostName):\(getpid())"
        /// The folders jobs may read and write in (real paths); empty: anywhere this user can.
        /// A job whose input, output, background, mask or spill folder resolves outside them
        /// (links and `..` resolved) fails without touching anything.
        public var allowed: [String] = []
        /// Seconds a job may run when its line gives no `timeout`; nil: no limit.
        public var jobTimeout: Double?
        /// Seconds a lease may stay expired before it is taken back: a database outage shorter
        /// than this (during which no lease can be renewed) costs no work in flight.
        public var outageGrace = Limits.outageGrace.defaultValue!
        /// The port Prometheus metrics are served on (`GET /metrics`); nil: none.
        public var metricsPort: Int?
        /// The address the metrics are served on: 127.0.0.1, or 0.0.0.0 for a Prometheus elsewhere.
        public var metricsHost = Settings.defaultMetricsHost
        /// The address metrics are served on unless told: this machine only.
        public static let defaultMetricsHost = "127.0.0.1"
        public init() {}
    }

    /// What a worker did.
    public struct Summary: Sendable, Codable {
        public var done = 0
        public var failed = 0
        public var retried = 0
        public var discarded = 0
        public var released = 0
        /// Why the worker stopped without being drained (a wrong password, an unknown database):
        /// nil after a drain or an empty queue.
        public var fatal: String?
    }

    struct Running {
        var job: ClaimedJob
        var cancellation: StackCancellation
        var lost = false
        /// Finished and being recorded: no longer renewed (its row leaves `running` at the commit).
        var completing = false
    }

    public let queue: JobQueue
    public let settings: Settings
    public let metrics: WorkerMetrics?
    let logger: Logger
    let running = LockedBox<[Int64: Running]>([:])
    let draining = LockedBox(false)
    let summary = LockedBox(Summary())
    let listener: Listener
    /// Set once, at the end of `init` (a lazy var here was initialised by two job tasks at once
    /// with `--jobs 2`, and one of the two completers was freed while in use).
    private(set) var completer: Completer!

    /// - Parameters:
    ///   - queue: The queue.
    ///   - settings: How to run.
    ///   - metrics: Counters to update, or nil.
    ///   - logger: Where to log (one line per job).
    public init(queue: JobQueue, settings: Settings, metrics: WorkerMetrics? = nil, logger: Logger) {
        self.queue = queue
        self.settings = settings
        self.metrics = metrics
        self.logger = logger
        listener = queue.listener()
        completer = Completer(worker: self)
    }

    /// Stops claiming; running jobs get ``Settings/grace`` seconds to finish.
    public func drain() {
        guard
            !draining.update({ d in
                defer { d = true }
                return d
            })
        else { return }
        let grace = String(format: "%.0f", settings.grace)
        logger.info("draining: no new jobs; \(running.value.count) running get \(grace) s to finish")
        listener.fire()
    }

    /// Runs until drained (or, with ``Settings/exitWhenDone``, until the queue is empty).
    ///
    /// - Returns: What was done.
    public func run() async -> Summary {
        // A drain while the database is still away ends the worker here: nothing was claimed.
        guard
            await retrying("create or migrate the schema", untilDrained: true, { try await self.queue.migrate() })
                != nil
        else { return summary.value }
        listener.start()
        let heartbeat = Task { await self.heartbeats() }
        var jobTasks: [Task<Void, Never>] = []
        while !draining.value {
            // A job being recorded no longer takes a slot: the next one starts while the commit runs.
            let free = settings.concurrency - running.value.values.filter { !$0.completing }.count
            var claimed: [ClaimedJob] = []
            if free > 0 {
                do {
                    claimed = try await queue.claim(limit: free, owner: settings.name, lease: settings.lease)
                } catch {
                    logger.warning("queue unreachable (\(Self.brief(error))); retrying")
                    await listener.wait(seconds: min(settings.poll, 1))
                    continue
                }
            }
            if draining.value {
                // Claimed just as the drain began: give them straight back.
                for job in claimed { await retrying("give back \(job.id)") { _ = try await self.queue.release(job) } }
                break
            }
            for job in claimed {
                running.update { $0[job.token] = Running(job: job, cancellation: StackCancellation()) }
                metrics?.running.set(Double(running.value.count))
                jobTasks.append(Task { await self.execute(job) })
            }
            jobTasks.removeAll { $0.isCancelled }
            if claimed.isEmpty && running.value.isEmpty && settings.exitWhenDone {
                if let s = try? await queue.status(failureLimit: 0), s.pending + s.running == 0 { break }
            }
            if claimed.isEmpty || running.value.values.filter({ !$0.completing }).count >= settings.concurrency {
                await listener.wait(seconds: settings.poll)
            }
        }
        await finishDrain()
        // Nothing of the worker outlives this call: the jobs given back stop at their next
        // cancellation check, and the heartbeat and the listener's connection end.
        for t in jobTasks { t.cancel() }
        for t in jobTasks { await t.value }
        heartbeat.cancel()
        await heartbeat.value
        await listener.stop()
        return summary.value
    }

    /// After a drain: waits up to the grace period, then gives back what still runs.
    func finishDrain() async {
        let deadline = Date().addingTimeInterval(settings.grace)
        while !running.value.isEmpty && Date() < deadline { await listener.wait(seconds: 0.1) }
        for (_, r) in running.value {
            r.cancellation.cancel()
            await retrying("give back \(r.job.id)", limit: 10) { _ = try await self.queue.release(r.job) }
            summary.update { $0.released += 1 }
            logger.info("gave back \(r.job.id) unfinished (grace of \(String(format: "%.0f", settings.grace)) s over)")
        }
        // Staging folders of jobs given back go with the process (Cleanup).
        Cleanup.run()
    }

    /// Each third of the lease: takes back the jobs whose lease expired (any worker's), and
    /// renews every lease this worker holds; a job whose lease was lost is cancelled.
    func heartbeats() async {
        while !Task.isCancelled {
            do {
                let reclaimed = try await queue.reclaimExpired(grace: settings.outageGrace)
                if reclaimed > 0 {
                    metrics?.leaseLosses.increment(by: Int64(reclaimed))
                    logger.info("took back \(reclaimed) expired lease(s)")
                }
            } catch  where !Task.isCancelled {
                logger.warning("could not look for expired leases (\(Self.brief(error))); will retry")
            } catch {
                break
            }
            try? await Task.sleep(for: .seconds(min(settings.lease / 3, settings.poll)))
            if Task.isCancelled { break }
            let tokens = running.value.filter { !$0.value.lost && !$0.value.completing }.map(\.key)
            guard !tokens.isEmpty else { continue }
            do {
                let held = try await queue.renew(tokens: tokens, lease: settings.lease)
                for t in tokens where !held.contains(t) {
                    // A job that finished meanwhile (recorded, or being recorded) did not lose anything.
                    let lostJob: String? = running.update { r in
                        guard let job = r[t], !job.completing else { return nil }
                        r[t]?.lost = true
                        job.cancellation.cancel()
                        return job.job.id
                    }
                    if let lostJob {
                        logger.warning(
                            """
                            lost the lease of \(lostJob) (expired and taken over, or cancelled); \
                            its work will be discarded
                            """)
                    }
                }
            } catch  where !Task.isCancelled {
                // The database is away: keep working; the finish checks the token anyway.
                logger.warning("lease renewal failed (\(Self.brief(error))); will retry")
            } catch {
                break
            }
        }
    }

    /// Runs one job on its own thread (the library's work is synchronous and must not hold the
    /// heartbeat's threads), then finishes it, fenced.
    func execute(_ job: ClaimedJob) async {
        let started = Date()
        let log = JobLog()
        let outcome = await work(job, log: log)
        let seconds = Date().timeIntervalSince(started)
        let lost = running.update { r -> Bool in
            r[job.token]?.completing = true
            return r[job.token]?.lost == true
        }
        listener.fire()
        if lost {
            if case .success(let (staged, _, _)) = outcome { Staging.discard(staged) }
            discard(job, seconds: seconds)
            return
        }
        var result = outcome
        if case .success(let (staged, report, digest)) = outcome {
            let json = (try? String(decoding: ReportJSON.encode(report), as: UTF8.self)) ?? "{}"
            let output = (try? BatchJob.parse(job.spec, base: "/", checkFiles: false, stored: true).output) ?? ""
            switch await completer.record(
                JobQueue.Completion(job: job, report: json, seconds: seconds, digest: digest, log: log.text),
                staged: staged, output: output)
            {
            case .done:
                summary.update { $0.done += 1 }
                metrics?.done.increment()
                metrics?.seconds.record(seconds)
                logger.info("done \(job.id) in \(String(format: "%.2f", seconds)) s (attempt \(job.attempt))")
                running.update { $0[job.token] = nil }
                metrics?.running.set(Double(running.value.count))
                listener.fire()
                return
            case .lostLease, .databaseAway:
                Staging.discard(staged)
                discard(job, seconds: seconds)
                return
            case .notPlaced(let why):
                // Not done without its output: the attempt failed, and the job runs again.
                Staging.discard(staged)
                result = .failure(JobFailure(message: why, permanent: false))
            }
        }
        if case .failure(let failure) = result, await !recordFailure(job, failure, log: log) {
            discard(job, seconds: seconds)
            return
        }
        running.update { $0[job.token] = nil }
        metrics?.running.set(Double(running.value.count))
        listener.fire()
    }

    /// The job's work on a thread of its own, its time limit (if any) racing it. Past the limit
    /// the job is cancelled (a stack stops at its next frame or row) and failed at once; what its
    /// thread still produces is discarded.
    func work(_ job: ClaimedJob, log: JobLog) async -> Result<(String, JobReport, OutputDigest), JobFailure> {
        let cancellation = running.value[job.token]?.cancellation ?? StackCancellation()
        log.add("attempt \(job.attempt) of \(job.maxAttempts) on \(settings.name)")
        let limit =
            (try? BatchJob.parse(job.spec, base: "/", checkFiles: false, stored: true).timeout) ?? settings.jobTimeout
        let allowed = settings.allowed
        let raced: Result<(String, JobReport, OutputDigest), JobFailure>? = await withCheckedContinuation { done in
            JobRunner.race(
                limit: limit, cancellation: cancellation,
                work: { Self.attempt(job, cancellation: cancellation, allowed: allowed, log: log) },
                late: { r in if case .success(let (staged, _, _)) = r { Staging.discard(staged) } },
                finish: { done.resume(returning: $0) })
        }
        let outcome =
            raced
            ?? .failure(
                JobFailure.timedOut(limit ?? 0, hint: "raise the line's timeout, or the worker's --job-timeout"))
        switch outcome {
        case .success: log.add("finished its work")
        case .failure(let f): log.add("failed: \(f.message)")
        }
        return outcome
    }

    /// Records a failed attempt: the job fails for good (permanent, or its last attempt) or waits
    /// for its next attempt. False when the record did not apply (the lease was lost).
    func recordFailure(_ job: ClaimedJob, _ failure: JobFailure, log: JobLog) async -> Bool {
        let final = failure.permanent || job.attempt >= job.maxAttempts
        let result = await retrying("record \(job.id)'s failure", limit: 120) {
            try await self.queue.fail(
                job, message: failure.message, permanent: failure.permanent, owner: self.settings.name, log: log.text)
        }
        guard result == .applied else { return false }
        if final {
            summary.update { $0.failed += 1 }
            metrics?.failed.increment()
            logger.error("failed \(job.id): \(failure.message)")
        } else {
            summary.update { $0.retried += 1 }
            logger.warning("attempt \(job.attempt) of \(job.id) failed, will retry: \(failure.message)")
        }
        return true
    }

    func discard(_ job: ClaimedJob, seconds: Double) {
        summary.update { $0.discarded += 1 }
        metrics?.leaseLosses.increment()
        let ran = String(format: "%.1f", seconds)
        logger.warning("discarded \(job.id): its lease was lost while it ran (\(ran) s); another worker has it")
        running.update { $0[job.token] = nil }
        metrics?.running.set(Double(running.value.count))
        listener.fire()
    }

    /// How recording a finished job ended.
    enum Recorded: Sendable, Equatable {
        /// Done: its output in place, the row done with its digest.
        case done
        /// Its lease was lost: its output was not placed.
        case lostLease
        /// The database stayed away: nothing recorded.
        case databaseAway
        /// Its staged output was gone before it could be placed (and the output is not it): the
        /// attempt failed.
        case notPlaced(String)
    }

    /// Records finished jobs as done, those that finished together in one transaction (a group
    /// commit): with many short jobs, one commit per job would cost more than the jobs.
    actor Completer {
        unowned let worker: QueueWorker
        var waiting:
            [(item: JobQueue.Completion, staged: String, output: String, done: CheckedContinuation<Recorded, Never>)] =
                []
        var draining = false

        init(worker: QueueWorker) { self.worker = worker }

        /// Records one job, with the others waiting.
        func record(_ item: JobQueue.Completion, staged: String, output: String) async -> Recorded {
            await withCheckedContinuation { c in
                waiting.append((item, staged, output, c))
                if !draining {
                    draining = true
                    Task { await self.drain() }
                }
            }
        }

        func drain() async {
            while !waiting.isEmpty {
                var batch = Array(waiting.prefix(64))
                waiting.removeFirst(batch.count)
                // A staged output that vanished (another process removed it) is not placed, and
                // its job is not recorded done, unless an earlier try placed it already.
                batch.removeAll { b in
                    if FileManager.default.fileExists(atPath: b.staged) || OutputDigest.of(b.output) == b.item.digest {
                        return false
                    }
                    b.done.resume(
                        returning: .notPlaced(
                            "its staged output \(b.staged) was removed before it could be placed; it will run again"))
                    return true
                }
                if batch.isEmpty { continue }
                // By token, not id: a job whose lease this worker lost can be claimed by it again,
                // and both finishes can wait here together (only the current token is recorded).
                let paths = Dictionary(
                    uniqueKeysWithValues: batch.map { ($0.item.job.token, ($0.staged, $0.output, $0.item.digest)) })
                let items = batch.map(\.item)
                let applied = await worker.retrying("record \(batch.count) finished job(s) as done", limit: 120) {
                    try await self.worker.queue.intend(items)
                    return try await self.worker.queue.complete(items, owner: self.worker.settings.name) { item in
                        guard let (staged, output, digest) = paths[item.job.token] else { return }
                        // Placed already when an earlier try placed it but did not commit.
                        if !FileManager.default.fileExists(atPath: staged) && OutputDigest.of(output) == digest {
                            return
                        }
                        try Staging.place(staged, at: output, expecting: digest)
                    }
                }
                for b in batch {
                    b.done.resume(
                        returning: applied.map { $0.contains(b.item.job.token) ? .done : .lostLease } ?? .databaseAway)
                }
            }
            draining = false
        }
    }

    /// The job's work, synchronous: parse, check the output may be written, stage, run. Never
    /// throws.
    static func attempt(
        _ job: ClaimedJob, cancellation: StackCancellation, allowed: [String] = [], log: JobLog? = nil
    ) -> Result<(String, JobReport, OutputDigest), JobFailure> {
        var staged: String?
        do {
            let spec = try BatchJob.parse(job.spec, base: "/", checkFiles: false, stored: true)
            if let why = spec.confinementRefusal(allowed: allowed) { throw JobFailure(message: why, permanent: true) }
            // The same rules as `batch run`, checked again here: the files may have changed since
            // the job was submitted (a link made, someone's file put at the output).
            if let why = spec.outputRefusal(ours: { job.outputDigest != nil && OutputDigest.of($0) == job.outputDigest }
            ) {
                throw JobFailure(message: why, permanent: true)
            }
            // Only older attempts' folders go: a newer lease's attempt may be running now.
            staged = try Staging.prepare(
                for: spec.output, token: String(job.token), stale: { Int64($0).map { $0 < job.token } ?? true })
            let folder = (staged! as NSString).deletingLastPathComponent
            Cleanup.add(file: folder)
            defer { Cleanup.remove(file: folder) }
            let report = try JobRunner.run(spec, staging: staged!, cancellation: cancellation, log: log)
            guard let digest = OutputDigest.of(staged!) else {
                throw JobFailure(message: "the job wrote no output at \(staged!)", permanent: false)
            }
            return .success((staged!, report, digest))
        } catch {
            if let staged { Staging.discard(staged) }
            return .failure(JobFailure.classify(error))
        }
    }

    /// Runs a database step until it succeeds (the database restarting, the network blinking),
    /// waiting by ``RetryPolicy/database`` between tries, at most `limit` times (and, with `untilDrained`, no more
    /// once a
    /// drain has begun).
    @discardableResult
    func retrying<T>(
        _ what: String, limit: Int = .max, untilDrained: Bool = false, _ body: @Sendable () async throws -> T
    ) async -> T? {
        for attempt in 1... {
            let delay = RetryPolicy.database.delay(afterFailure: attempt)
            do { return try await body() } catch {
                if untilDrained && draining.value { return nil }
                // Waiting does not fix a wrong password or database: stop, and say why.
                if let q = error as? QueueError, q.isPermanent {
                    summary.update { if $0.fatal == nil { $0.fatal = q.description } }
                    return nil
                }
                if attempt >= limit {
                    logger.error("gave up trying to \(what) after \(attempt) attempts: \(Self.brief(error))")
                    return nil
                }
                if attempt == 1 || attempt % 10 == 0 {
                    logger.warning("could not \(what) (\(Self.brief(error))); retrying")
                }
                if untilDrained {
                    await listener.wait(seconds: delay)
                } else {
                    try? await Task.sleep(for: .seconds(delay))
                }
            }
        }
        return nil
    }

    /// An error in a few words (PSQLError's description hides the server's message).
    static func brief(_ error: any Error) -> String {
        let text = String(reflecting: error)
        if let r = text.range(of: "message: ") {
            return String(text[r.upperBound...].prefix { $0 != "," && $0 != ")" }).trimmingCharacters(
                in: .init(charactersIn: "\""))
        }
        return String(text.prefix(200))
    }
}

extension QueueWorker.Settings: DeclaresSettings {
    /// Each numeric setting's name, default and allowed values; the defaults above are these.
    public enum Limits {
        public static let jobs = NumericSetting(
            "jobs", 1...256, default: 1, integer: true, summary: "Jobs run at once")
        public static let lease = NumericSetting(
            "lease", 1...3600, default: 30, unit: "seconds", summary: "Lease length (renewed every third of it)")
        public static let poll = NumericSetting(
            "poll", 0.05...600, default: 2, unit: "seconds",
            summary: "Poll interval (notifications wake the worker sooner)")
        public static let grace = NumericSetting(
            "grace", 0...86400, default: 30, unit: "seconds",
            summary: "Seconds running jobs get to finish after SIGTERM")
        public static let jobTimeout = NumericSetting(
            "job timeout", BatchJob.timeoutLimits.minimum...BatchJob.timeoutLimits.maximum, default: nil,
            unit: "seconds",
            summary: "Seconds a job may run when its line gives no timeout; then it is stopped and failed")
        public static let outageGrace = NumericSetting(
            "outage grace", 0...86400, default: 0, unit: "seconds",
            summary: "Seconds an expired lease is left before it is taken back: work in flight survives a "
                + "database outage shorter than this")
        public static let metricsPort = NumericSetting(
            "metrics port", 1...65535, default: nil, integer: true,
            summary: "Serve Prometheus metrics on this port (GET /metrics)")
    }

    /// Every setting of a worker, declared once: `evanesco worker`'s flags take them from here.
    public static let settings: [Setting] = [
        .number("jobs", Limits.jobs), .number("lease", Limits.lease), .number("poll", Limits.poll),
        .number("grace", Limits.grace), .number("jobTimeout", Limits.jobTimeout),
        .number("outageGrace", Limits.outageGrace),
        Setting("exitWhenDone", .toggle(default: false), summary: "Exit once no job is pending or running"),
        Setting(
            "allow", .text(default: "anywhere this user can"),
            summary: "A folder jobs may read and write in (repeatable); a job whose inputs, output, background, mask "
                + "or spill folder resolve elsewhere (links and .. resolved) fails untouched"),
        .number("metricsPort", Limits.metricsPort),
        Setting(
            "metricsHost", .text(default: defaultMetricsHost),
            summary: "The address metrics are served on: 127.0.0.1, or 0.0.0.0 for a Prometheus on another machine")
    ]

    /// Checks every value, NaN and infinity included.
    ///
    /// - Throws: `SettingError` naming the setting.
    public func validate() throws(SettingError) {
        try Limits.jobs.check(concurrency)
        try Limits.lease.check(lease)
        try Limits.poll.check(poll)
        try Limits.grace.check(grace)
        if let jobTimeout { try Limits.jobTimeout.check(jobTimeout) }
        try Limits.outageGrace.check(outageGrace)
        if let metricsPort { try Limits.metricsPort.check(metricsPort) }
        var address = in6_addr()
        guard inet_pton(AF_INET, metricsHost, &address) == 1 || inet_pton(AF_INET6, metricsHost, &address) == 1 else {
            throw SettingError(setting: "metricsHost", detail: "must be an IP address (127.0.0.1, 0.0.0.0, ::1)")
        }
    }
}
