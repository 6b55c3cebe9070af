import EvanescoCore
import EvanescoIO
import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle

/// A job a worker holds: its spec, and the token that fences it (only the holder of the current
/// token may finish the job).
public struct ClaimedJob: Sendable {
    public var id: String
    public var spec: String
    public var token: Int64
    public var attempt: Int
    public var maxAttempts: Int
    /// The output an earlier attempt of this job was about to place (recorded before placing):
    /// an existing output with this digest is the job's own, and may be replaced.
    public var outputDigest: OutputDigest?
}

/// What ``JobQueue/submit(_:maxAttempts:)`` did.
public struct SubmitResult: Sendable, Codable, Equatable {
    /// Jobs new to the queue.
    public var added: Int
    /// Jobs already in the queue under the same id (submitting again changes nothing).
    public var alreadyQueued: Int
    /// Jobs refused: an id already queued with another spec, or an output another job writes.
    public var refused: [BatchStatus.Failure]
}

/// The job queue on PostgreSQL: one table of jobs, claimed with `FOR UPDATE SKIP LOCKED` under
/// a lease that the worker renews, finished only in a transaction that checks the lease's token,
/// and woken by `LISTEN/NOTIFY` (the pattern of graphile-worker, river, Oban and Solid Queue).
/// The schema is created and migrated by ``migrate()``, versioned in `SCHEMA.meta`.
public final class JobQueue: Service, Sendable {
    /// The schema version this build writes and reads.
    public static let schemaVersion = 2

    public let address: QueueAddress
    /// The pool of connections; replaced whole when an operation outlives the address's timeout.
    let pool: LockedBox<PostgresClient>
    /// Fired when the pool is replaced or the queue closed: the pool's runner moves on.
    let replaced = WakeSignal()
    /// The task that runs the pools when the queue runs itself (nil under a service group).
    let ownRunner: Task<Void, Never>?
    let logger: Logger
    var s: String { "\"\(address.schema)\"" }
    /// The NOTIFY channel of this queue.
    var channel: String { "evanesco_\(address.schema)" }

    /// Opens a pool of connections to the queue (none is made until the first query).
    ///
    /// - Parameters:
    ///   - address: The database and schema.
    ///   - logger: Where the pool logs (default: nowhere; the callers report what failed).
    ///   - runsItself: Whether the queue runs its pool in a task of its own, until ``close()``
    ///     (a command's one operation, a test). A long-running program passes `false` and runs the
    ///     queue as a service of its `ServiceGroup` instead, which shuts it down after the
    ///     services that use it.
    /// - Throws: When the TLS configuration cannot be made.
    public init(
        _ address: QueueAddress,
        logger: Logger = Logger(label: "evanesco.queue", factory: { _ in SwiftLogNoOpLogHandler() }),
        runsItself: Bool = true
    ) throws {
        self.address = address
        self.logger = logger
        let pool = LockedBox(try Self.makeClient(address, logger: logger))
        self.pool = pool
        let replaced = replaced
        ownRunner = runsItself ? Task { await Self.runPools(pool, replaced: replaced) } : nil
    }

    static func makeClient(_ address: QueueAddress, logger: Logger) throws -> PostgresClient {
        PostgresClient(configuration: try address.clientConfiguration(), backgroundLogger: logger)
    }

    /// Runs the pool, and each pool that replaces it, until the task is cancelled. A pool runs in
    /// a child task until it is replaced; its cancellation then fails whatever still waits on it.
    static func runPools(_ pool: LockedBox<PostgresClient>, replaced: WakeSignal) async {
        await withTaskCancellationHandler {
            while !Task.isCancelled {
                let client = pool.value
                await withTaskGroup(of: Void.self) { group in
                    group.addTask { await client.run() }
                    group.addTask {
                        while !Task.isCancelled && pool.value === client { await replaced.wait(seconds: 5) }
                    }
                    await group.next()
                    group.cancelAll()
                }
                // A pool that stopped by itself, not replaced, is not run again (a client runs once).
                if pool.value === client { return }
            }
        } onCancel: {
            replaced.fire()
        }
    }

    /// Runs the queue's pool as a service, until the group shuts down gracefully or is cancelled.
    /// For a queue made with `runsItself: false`.
    public func run() async throws {
        precondition(ownRunner == nil, "a queue that runs itself is not also run as a service")
        let pool = pool, replaced = replaced
        await cancelWhenGracefulShutdown { await Self.runPools(pool, replaced: replaced) }
    }

    /// Closes the pool (of a queue that runs itself).
    public func close() {
        ownRunner?.cancel()
        replaced.fire()
    }

    deinit { close() }

    /// Runs one queue operation on the pool, for at most the address's timeout.
    ///
    /// Past it the operation's task is cancelled and left behind, the pool is replaced by a
    /// new one (closing the old one fails whatever still waits on it), and
    /// ``QueueError/unresponsive(address:seconds:)`` is thrown: the caller retries as after any
    /// database error. The postgres client's own connect timeout covers the TCP connect only,
    /// not the startup exchange that follows, so without this a server that accepted and went
    /// quiet (or a connection left half-made across a restart) held its caller forever.
    func bounded<T: Sendable>(_ body: @escaping @Sendable (PostgresClient) async throws -> T) async throws -> T {
        let client = pool.value
        let seconds = address.timeout
        return try await withDeadline(
            seconds,
            expired: { [self] in
                replacePool(client)
                return QueueError.unresponsive(address: address.description, seconds: seconds)
            }
        ) { try await body(client) }
    }

    /// Replaces the pool if `stale` is still the current one.
    /// (Several operations timing out together replace it once: the others find it replaced.
    /// Making a pool opens no connection, so it is made under the lock.)
    func replacePool(_ stale: PostgresClient) {
        let swapped = pool.update { p -> Bool in
            guard p === stale, let fresh = try? Self.makeClient(address, logger: logger) else { return false }
            p = fresh
            return true
        }
        if swapped { replaced.fire() }
    }

    // MARK: Producers

    /// Adds jobs; idempotent: a job id already queued with the same spec is left as it is.
    ///
    /// - Parameters:
    ///   - jobs: Checked jobs (from ``BatchManifest``).
    ///   - maxAttempts: Attempts before a job whose failures may pass is failed for good.
    /// - Returns: What was added, already there, or refused.
    public func submit(_ jobs: [BatchJob], maxAttempts: Int) async throws -> SubmitResult {
        var result = SubmitResult(added: 0, alreadyQueued: 0, refused: [])
        for all in stride(from: 0, to: jobs.count, by: 1000).map({ Array(jobs[$0..<min(jobs.count, $0 + 1000)]) }) {
            // The rules `batch run` applies, before anything is queued: a job new to the queue
            // may not write over one of its inputs, nor over an existing file unless it says
            // overwrite (a job already queued is checked by its worker, against its own row).
            let queued = try await states(of: all.map(\.id))
            var chunk: [BatchJob] = []
            for job in all {
                if queued[job.id] == nil, let why = job.outputRefusal() {
                    result.refused.append(.init(id: job.id, error: why))
                } else {
                    chunk.append(job)
                }
            }
            if chunk.isEmpty { continue }
            let ids = chunk.map(\.id), kinds = chunk.map(\.kind.rawValue),
                specs = try chunk.map { try $0.normalizedLine() }
            // Real paths: two names of one file (a linked folder) are one output, and UNIQUE says so.
            let outputs = chunk.map { RealPath.of($0.output) }
            let added = try await bounded { [self] client in
                var added = Set<String>()
                let rows = try await client.query(
                    """
                    INSERT INTO \(unescaped: s).jobs (id, kind, spec, output, max_attempts)
                    SELECT * FROM unnest(\(ids)::text[], \(kinds)::text[], \(specs)::text[], \(outputs)::text[]) AS \
                    t, (SELECT \(maxAttempts)::int) AS m
                    ON CONFLICT DO NOTHING RETURNING id
                    """, logger: logger)
                for try await id in rows.decode(String.self) { added.insert(id) }
                return added
            }
            result.added += added.count
            let others = chunk.filter { !added.contains($0.id) }
            if others.isEmpty { continue }
            let otherIDs = others.map(\.id), otherOutputs = others.map { RealPath.of($0.output) }
            let existing = try await bounded { [self] client in
                var rows: [(id: String, spec: String, output: String)] = []
                for try await row in try await client.query(
                    """
                    SELECT id, spec, output FROM \(unescaped: s).jobs WHERE id = ANY(\(otherIDs)) OR output = \
                    ANY(\(otherOutputs))
                    """, logger: logger
                ).decode((String, String, String).self) { rows.append(row) }
                return rows
            }
            try Self.tally(others, existing: existing, into: &result)
        }
        if result.added > 0 { try await notify() }
        return result
    }

    /// Counts the jobs the insert did not add: already queued with the same spec, or refused
    /// (another spec under the id, another job's output).
    static func tally(
        _ others: [BatchJob], existing: [(id: String, spec: String, output: String)], into result: inout SubmitResult
    ) throws {
        var byId: [String: (String, String)] = [:], byOutput: [String: String] = [:]
        for (id, spec, output) in existing {
            byId[id] = (spec, output)
            byOutput[output] = id
        }
        for job in others {
            if let (spec, _) = byId[job.id] {
                // A row of an older spec is compared as this binary reads it.
                let queued = try? BatchJob.parse(spec, base: "/", checkFiles: false, stored: true).normalizedLine()
                if queued == (try job.normalizedLine()) {
                    result.alreadyQueued += 1
                } else {
                    result.refused.append(
                        .init(
                            id: job.id,
                            error:
                                "already queued with other settings or paths; the queued job was kept (cancel it "
                                + "and submit under a new id to change it)"
                        ))
                }
            } else if let other = byOutput[RealPath.of(job.output)] {
                result.refused.append(
                    .init(
                        id: job.id, error: "output \(job.output) is job \(other)'s; two jobs cannot write one file")
                )
            } else {
                result.refused.append(
                    .init(
                        id: job.id, error: "not added (submitted concurrently with a conflicting job); submit again"
                    ))
            }
        }
    }

    /// Wakes the workers listening.
    func notify() async throws {
        try await bounded { [self] client in
            _ = try await client.query("SELECT pg_notify(\(channel), '')", logger: logger)
        }
    }

    /// Puts failed and/or cancelled jobs back to pending, their attempts reset.
    ///
    /// - Parameters:
    ///   - failed: Failed jobs.
    ///   - cancelled: Cancelled jobs.
    ///   - ids: Only these (nil: every such job).
    /// - Returns: The ids requeued.
    public func retry(failed: Bool = true, cancelled: Bool = false, ids: [String]? = nil) async throws -> [String] {
        let states = (failed ? ["failed"] : []) + (cancelled ? ["cancelled"] : [])
        let requeued = try await bounded { [self] client in
            let rows = try await client.query(
                """
                UPDATE \(unescaped: s).jobs SET state = 'pending', attempts = 0, error = NULL, run_after = now(), \
                finished_at = NULL
                WHERE state = ANY(\(states)) AND (\(ids == nil) OR id = ANY(\(ids ?? []))) RETURNING id
                """, logger: logger)
            return try await strings(rows)
        }
        if !requeued.isEmpty { try await notify() }
        return requeued
    }

    /// Cancels pending and running jobs; a worker running one loses its lease at its next
    /// heartbeat and discards its work.
    ///
    /// - Parameter ids: Only these (nil: every pending and running job).
    /// - Returns: The ids cancelled.
    public func cancel(ids: [String]? = nil) async throws -> [String] {
        try await bounded { [self] client in
            let rows = try await client.query(
                """
                UPDATE \(unescaped: s).jobs SET state = 'cancelled', lease_token = NULL, lease_expires = NULL, \
                finished_at = now()
                WHERE state IN ('pending', 'running') AND (\(ids == nil) OR id = ANY(\(ids ?? []))) RETURNING id
                """, logger: logger)
            return try await strings(rows)
        }
    }

    /// The state of each of `ids` that the queue holds (an id it does not hold is absent).
    public func states(of ids: [String]) async throws -> [String: String] {
        try await bounded { [self] client in
            var states: [String: String] = [:]
            for try await (id, state) in try await client.query(
                "SELECT id, state FROM \(unescaped: s).jobs WHERE id = ANY(\(ids))", logger: logger
            ).decode((String, String).self) { states[id] = state }
            return states
        }
    }

    func strings(_ rows: PostgresRowSequence) async throws -> [String] {
        var out: [String] = []
        for try await v in rows.decode(String.self) { out.append(v) }
        return out
    }

    func count(_ rows: PostgresRowSequence) async throws -> Int {
        var n = 0
        for try await _ in rows { n += 1 }
        return n
    }

    // MARK: Workers

    /// Claims up to `limit` ready jobs for `owner`, oldest first, skipping rows other workers
    /// hold locked, each with a new fencing token and a lease of `lease` seconds.
    public func claim(limit: Int, owner: String, lease: Double) async throws -> [ClaimedJob] {
        try await bounded { [self] client in
            let rows = try await client.query(
                """
                WITH picked AS (
                    SELECT id FROM \(unescaped: s).jobs WHERE state = 'pending' AND run_after <= now()
                    ORDER BY seq LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                UPDATE \(unescaped: s).jobs j SET state = 'running', attempts = j.attempts + 1,
                    lease_token = nextval('\(unescaped: s).lease_tokens'), lease_owner = \(owner),
                    lease_expires = now() + make_interval(secs => \(lease)), started_at = now()
                FROM picked WHERE j.id = picked.id
                RETURNING j.id, j.spec, j.lease_token, j.attempts, j.max_attempts, j.output_bytes, j.output_sha256
                """, logger: logger)
            var jobs: [ClaimedJob] = []
            for try await (id, spec, token, attempt, max, bytes, sha) in rows.decode(
                (String, String, Int64, Int32, Int32, Int64?, String?).self)
            {
                let digest = bytes.flatMap { b in sha.map { OutputDigest(bytes: Int(b), sha256: $0) } }
                jobs.append(
                    ClaimedJob(
                        id: id, spec: spec, token: token, attempt: Int(attempt), maxAttempts: Int(max),
                        outputDigest: digest))
            }
            return jobs
        }
    }

    /// Takes back the jobs whose lease expired more than `grace` seconds ago (their worker was
    /// killed, stalled or cut off): pending again, or failed if that was their last attempt. Rows
    /// a worker holds locked (it is finishing them) are skipped. A grace longer than a database
    /// outage lets the workers renew, after it, the leases that ran out during it.
    ///
    /// - Returns: Leases taken back.
    public func reclaimExpired(grace: Double = 0) async throws -> Int {
        let n = try await bounded { [self] client in
            let rows = try await client.query(
                """
                WITH lost AS (
                    SELECT id FROM \(unescaped: s).jobs WHERE state = 'running'
                        AND lease_expires < now() - make_interval(secs => \(grace)) FOR UPDATE SKIP LOCKED)
                UPDATE \(unescaped: s).jobs j SET lease_losses = j.lease_losses + 1, lease_token = NULL, \
                lease_expires = NULL, run_after = now(),
                    state = CASE WHEN j.attempts >= j.max_attempts THEN 'failed' ELSE 'pending' END,
                    error = 'worker ' || coalesce(j.lease_owner, '?') || ' stopped renewing its lease \
                (killed, stalled or cut off)'
                        || CASE WHEN j.attempts >= j.max_attempts THEN ' on each of ' || j.attempts || ' attempts' \
                ELSE '' END,
                    finished_at = CASE WHEN j.attempts >= j.max_attempts THEN now() ELSE NULL END
                FROM lost WHERE j.id = lost.id RETURNING j.id
                """, logger: logger)
            return try await count(rows)
        }
        if n > 0 { try await notify() }
        return n
    }

    /// Renews the leases of the given tokens.
    ///
    /// - Returns: The tokens still held; any other was lost (expired and taken, or cancelled).
    public func renew(tokens: [Int64], lease: Double) async throws -> Set<Int64> {
        guard !tokens.isEmpty else { return [] }
        return try await bounded { [self] client in
            let rows = try await client.query(
                """
                UPDATE \(unescaped: s).jobs SET lease_expires = now() + make_interval(secs => \(lease))
                WHERE state = 'running' AND lease_token = ANY(\(tokens)) RETURNING lease_token
                """, logger: logger)
            var held = Set<Int64>()
            for try await t in rows.decode(Int64.self) { held.insert(t) }
            return held
        }
    }

    /// How a fenced transaction ended.
    public enum Fenced: Sendable, Equatable {
        /// The token was current: the change was made.
        case applied
        /// The token is stale (the lease was lost): nothing was changed.
        case lostLease
    }

    /// A finished job to record.
    public struct Completion: Sendable {
        public var job: ClaimedJob
        /// The job's report, JSON.
        public var report: String
        public var seconds: Double
        /// The staged output's size and digest, kept with the done row.
        public var digest: OutputDigest
        /// The job's log, kept with the row.
        public var log: String
        public init(job: ClaimedJob, report: String, seconds: Double, digest: OutputDigest, log: String = "") {
            self.job = job
            self.report = report
            self.seconds = seconds
            self.digest = digest
            self.log = log
        }
    }

    /// Finishes jobs as done, several in one transaction (a worker's jobs that finished while the
    /// previous ones were being recorded: one commit for all of them). In that transaction the
    /// UPDATE matches only the rows whose token is still the worker's, and holds their locks
    /// from then on; only then does `place` move each of those outputs into place, and the commit
    /// follows. A job whose lease was lost is left out and `place` is not called for it; if
    /// `place` throws, nothing is recorded (the caller retries). One window remains: if the
    /// connection fails after `place` but before the commit is acknowledged, the output is in
    /// place but the job is not recorded as done; it runs again once its lease expires and its
    /// output is replaced, whole, by the same bytes. An output is never half-written, nor placed
    /// by a worker that lost its lease.
    ///
    /// - Returns: The lease tokens recorded as done; the others had lost their lease. (Tokens, not
    ///   ids: a job can be here twice, under a lost lease and under the one that replaced it.)
    public func complete(
        _ items: [Completion], owner: String, place: @escaping @Sendable (Completion) throws -> Void
    ) async throws -> Set<Int64> {
        guard !items.isEmpty else { return [] }
        return try await bounded { [self] client in
            try await client.withTransaction(logger: logger) { c in
                let rows = try await c.query(
                    """
                    UPDATE \(unescaped: self.s).jobs j SET state = 'done', report = t.report::jsonb, seconds = \
                    t.seconds, finished_at = now(),
                        finished_by = \(owner), lease_token = NULL, lease_expires = NULL, error = NULL,
                        output_bytes = t.bytes, output_sha256 = t.sha256, log = t.log
                    FROM unnest(\(items.map(\.job.id))::text[], \(items.map(\.job.token))::int8[], \
                    \(items.map(\.report))::text[],
                                \(items.map(\.seconds))::float8[], \(items.map { Int64($0.digest.bytes) })::int8[],
                                \(items.map(\.digest.sha256))::text[], \(items.map(\.log))::text[])
                         AS t(id, token, report, seconds, bytes, sha256, log)
                    WHERE j.id = t.id AND j.lease_token = t.token AND j.state = 'running' RETURNING t.token
                    """, logger: self.logger)
                var applied = Set<Int64>()
                for try await token in rows.decode(Int64.self) { applied.insert(token) }
                for item in items where applied.contains(item.job.token) { try place(item) }
                return applied
            }
        }
    }

    /// Finishes one job as done (``complete(_:owner:place:)`` for one).
    public func complete(
        _ job: ClaimedJob, report: String, seconds: Double, digest: OutputDigest, owner: String,
        place: @escaping @Sendable () throws -> Void
    )
        async throws -> Fenced
    {
        try await complete([Completion(job: job, report: report, seconds: seconds, digest: digest)], owner: owner) {
            _ in try place()
        }
        .isEmpty ? .lostLease : .applied
    }

    /// Records, fenced and committed, the outputs these jobs are about to place: if the commit
    /// of ``complete(_:owner:place:)`` is then lost after an output was renamed into place, the
    /// next attempt finds the output's digest in its row and knows the file is the job's own.
    public func intend(_ items: [Completion]) async throws {
        guard !items.isEmpty else { return }
        try await bounded { [self] client in
            _ = try await client.query(
                """
                UPDATE \(unescaped: s).jobs j SET output_bytes = t.bytes, output_sha256 = t.sha256
                FROM unnest(\(items.map(\.job.id))::text[], \(items.map(\.job.token))::int8[],
                            \(items.map { Int64($0.digest.bytes) })::int8[], \(items.map(\.digest.sha256))::text[])
                     AS t(id, token, bytes, sha256)
                WHERE j.id = t.id AND j.lease_token = t.token AND j.state = 'running'
                """, logger: logger)
        }
    }

    /// Records a failed attempt, fenced by the token: a permanent failure (or the last attempt)
    /// fails the job; otherwise it is pending again after ``RetryPolicy/queuedJob``'s wait (2^attempt
    /// seconds, at most 10 min).
    public func fail(
        _ job: ClaimedJob, message: String, permanent: Bool, owner: String, log: String = ""
    ) async throws -> Fenced {
        let final = permanent || job.attempt >= job.maxAttempts
        let backoff = RetryPolicy.queuedJob.delay(afterFailure: job.attempt)
        return try await bounded { [self] client in
            let rows = try await client.query(
                """
                UPDATE \(unescaped: s).jobs SET state = \(final ? "failed" : "pending"), error = \(message), log = \
                \(log), lease_token = NULL,
                    lease_expires = NULL, finished_by = \(owner), run_after = now() + \
                make_interval(secs => \(final ? 0 : backoff)),
                    finished_at = CASE WHEN \(final) THEN now() ELSE NULL END
                WHERE id = \(job.id) AND lease_token = \(job.token) AND state = 'running' RETURNING 1
                """, logger: logger)
            return try await count(rows) == 1 ? .applied : .lostLease
        }
    }

    /// Gives a job back unfinished (a drain that ran out of time): pending at once, the attempt
    /// not counted. Fenced by the token.
    public func release(_ job: ClaimedJob) async throws -> Fenced {
        let released = try await bounded { [self] client in
            let rows = try await client.query(
                """
                UPDATE \(unescaped: s).jobs SET state = 'pending', attempts = greatest(0, attempts - 1), lease_token \
                = NULL,
                    lease_expires = NULL, run_after = now()
                WHERE id = \(job.id) AND lease_token = \(job.token) AND state = 'running' RETURNING 1
                """, logger: logger)
            return try await count(rows) == 1
        }
        if released { try await notify() }
        return released ? .applied : .lostLease
    }

    /// Waits for a notification on this queue's channel, or `timeout` seconds, whichever comes
    /// first, on the connection `listener` (kept open between calls by ``Listener``).
    public func listener() -> Listener { Listener(queue: self) }
}

extension JobQueue {
    /// How ``submit(_:maxAttempts:)`` queues jobs: `evanesco batch submit`'s settings, declared once.
    public struct SubmitSettings: DeclaresSettings, Sendable {
        /// Each numeric setting's name, default and allowed values.
        public enum Limits {
            public static let maxAttempts = NumericSetting(
                "max attempts", 1...100, default: 5, integer: true,
                summary: "Attempts for a job whose failures may pass (I/O, a lost worker); bad input fails at once")
        }

        public static let settings: [Setting] = [.number("maxAttempts", Limits.maxAttempts)]

        /// Attempts before a job whose failures may pass is failed for good.
        public var maxAttempts = Int(Limits.maxAttempts.defaultValue!)

        public init() {}

        /// Checks every value.
        ///
        /// - Throws: `SettingError` naming the setting.
        public func validate() throws(SettingError) { try Limits.maxAttempts.check(maxAttempts) }
    }
}
