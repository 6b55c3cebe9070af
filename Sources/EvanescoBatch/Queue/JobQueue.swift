import EvanescoCore
import EvanescoIO
import Foundation
import Logging
import PostgresNIO

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
public final class JobQueue: Sendable {
    /// The schema version this build writes and reads.
    public static let schemaVersion = 2

    public let address: QueueAddress
    /// The pool and the task that runs it; replaced whole when an operation outlives the
    /// address's timeout.
    let pool: LockedBox<(client: PostgresClient, runner: Task<Void, Never>)>
    let logger: Logger
    var s: String { "\"\(address.schema)\"" }
    /// The NOTIFY channel of this queue.
    var channel: String { "evanesco_\(address.schema)" }

    /// Opens a pool of connections to the queue (none is made until the first query).
    ///
    /// - Parameters:
    ///   - address: The database and schema.
    ///   - logger: Where the pool logs (default: nowhere; the callers report what failed).
    /// - Throws: When the TLS configuration cannot be made.
    public init(
        _ address: QueueAddress,
        logger: Logger = Logger(label: "evanesco.queue", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws {
        self.address = address
        self.logger = logger
        pool = LockedBox(try Self.makePool(address, logger: logger))
    }

    static func makePool(_ address: QueueAddress, logger: Logger) throws -> (
        client: PostgresClient, runner: Task<Void, Never>
    ) {
        let client = PostgresClient(configuration: try address.clientConfiguration(), backgroundLogger: logger)
        return (client, Task { await client.run() })
    }

    /// Closes the pool.
    public func close() { pool.value.runner.cancel() }

    deinit { pool.value.runner.cancel() }

    /// Runs one queue operation on the pool, for at most the address's timeout.
    ///
    /// Past it the operation's task is cancelled and left behind, the pool is replaced by a
    /// new one (closing the old one fails whatever still waits on it), and
    /// ``QueueError/unresponsive(address:seconds:)`` is thrown: the caller retries as after any
    /// database error. The postgres client's own connect timeout covers the TCP connect only,
    /// not the startup exchange that follows, so without this a server that accepted and went
    /// quiet (or a connection left half-made across a restart) held its caller forever.
    func bounded<T: Sendable>(_ body: @escaping @Sendable (PostgresClient) async throws -> T) async throws -> T {
        let client = pool.value.client
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
        let old = pool.update { p -> Task<Void, Never>? in
            guard p.client === stale, let fresh = try? Self.makePool(address, logger: logger) else { return nil }
            defer { p = fresh }
            return p.runner
        }
        old?.cancel()
    }

    // MARK: Schema

    /// Creates the schema, or migrates it to ``schemaVersion``, under an advisory lock (several
    /// workers starting at once migrate once). Refuses a schema newer than this build.
    ///
    /// - Throws: ``QueueError/schemaTooNew(found:supported:)``, or the database's error.
    public func migrate() async throws {
        try await probe()
        let version: Int = try await bounded { [self] client in
            try await client.withTransaction(logger: logger) { c in
                try await c.query(
                    "SELECT pg_advisory_xact_lock(hashtext(\(self.address.schema + ".migrate")))", logger: self.logger)
                try await c.query("CREATE SCHEMA IF NOT EXISTS \(unescaped: self.s)", logger: self.logger)
                try await c.query(
                    "CREATE TABLE IF NOT EXISTS \(unescaped: self.s).meta (key text PRIMARY KEY, value text NOT NULL)",
                    logger: self.logger)
                var found = 0
                for try await v in try await c.query(
                    "SELECT value FROM \(unescaped: self.s).meta WHERE key = 'schema_version'", logger: self.logger
                )
                .decode(String.self) { found = Int(v) ?? 0 }
                if found > Self.schemaVersion { return found }
                if found < 1 {
                    for statement in Self.version1(self.s) {
                        try await c.query(PostgresQuery(unsafeSQL: statement), logger: self.logger)
                    }
                }
                if found < 2 {
                    for statement in Self.version2(self.s) {
                        try await c.query(PostgresQuery(unsafeSQL: statement), logger: self.logger)
                    }
                }
                try await c.query(
                    """
                    INSERT INTO \(unescaped: self.s).meta (key, value) VALUES ('schema_version', \(String(Self.schemaVersion)))
                    ON CONFLICT (key) DO UPDATE SET value = excluded.value
                    """, logger: self.logger)
                return found
            }
        }
        if version > Self.schemaVersion { throw QueueError.schemaTooNew(found: version, supported: Self.schemaVersion) }
    }

    /// Connects once, directly (not through the pool, which retries a refused login until the
    /// operation's timeout), so that a wrong password, an unknown role or database, a refused
    /// port, an unknown host or a server without TLS under `sslmode=require` is said at once,
    /// in its own words.
    ///
    /// - Throws: ``QueueError/cannotConnect(address:reason:permanent:)`` or
    ///   ``QueueError/unresponsive(address:seconds:)``.
    public func probe() async throws {
        let configuration = try address.connectionConfiguration(), logger = logger, address = address
        do {
            let connection = try await withDeadline(
                address.timeout,
                expired: { QueueError.unresponsive(address: address.description, seconds: address.timeout) },
                abandoned: { late in Task { try? await late.close() } }
            ) { try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger) }
            try? await connection.close()
        } catch let e as QueueError {
            throw e
        } catch {
            throw QueueError.connectionFailure(error, address: address)
        }
    }

    static func version1(_ s: String) -> [String] {
        [
            "CREATE SEQUENCE \(s).lease_tokens",
            """
            CREATE TABLE \(s).jobs (
                seq bigserial NOT NULL,
                id text PRIMARY KEY,
                kind text NOT NULL,
                spec text NOT NULL,
                output text NOT NULL UNIQUE,
                state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'running', 'done', 'failed', 'cancelled')),
                attempts int NOT NULL DEFAULT 0,
                max_attempts int NOT NULL,
                run_after timestamptz NOT NULL DEFAULT now(),
                lease_token bigint,
                lease_owner text,
                lease_expires timestamptz,
                lease_losses int NOT NULL DEFAULT 0,
                error text,
                report jsonb,
                submitted_at timestamptz NOT NULL DEFAULT now(),
                started_at timestamptz,
                finished_at timestamptz,
                seconds double precision,
                finished_by text
            )
            """,
            "CREATE INDEX jobs_ready ON \(s).jobs (seq) WHERE state = 'pending'",
            "CREATE INDEX jobs_leased ON \(s).jobs (lease_expires) WHERE state = 'running'",
            "CREATE INDEX jobs_finished ON \(s).jobs (finished_at) WHERE finished_at IS NOT NULL"
        ]
    }

    /// Version 2: the output's size and SHA-256, recorded before it is placed and kept with the
    /// done row (a job is done only with its output there, whole); the last lines of the job's
    /// log (``JobLog``).
    static func version2(_ s: String) -> [String] {
        ["ALTER TABLE \(s).jobs ADD COLUMN output_bytes bigint, ADD COLUMN output_sha256 text, ADD COLUMN log text"]
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
                    SELECT * FROM unnest(\(ids)::text[], \(kinds)::text[], \(specs)::text[], \(outputs)::text[]) AS t, (SELECT \(maxAttempts)::int) AS m
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
                    SELECT id, spec, output FROM \(unescaped: s).jobs WHERE id = ANY(\(otherIDs)) OR output = ANY(\(otherOutputs))
                    """, logger: logger
                ).decode((String, String, String).self) { rows.append(row) }
                return rows
            }
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
                                    "already queued with other settings or paths; the queued job was kept (cancel it and submit under a new id to change it)"
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
        if result.added > 0 { try await notify() }
        return result
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
                UPDATE \(unescaped: s).jobs SET state = 'pending', attempts = 0, error = NULL, run_after = now(), finished_at = NULL
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
                UPDATE \(unescaped: s).jobs SET state = 'cancelled', lease_token = NULL, lease_expires = NULL, finished_at = now()
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
                UPDATE \(unescaped: s).jobs j SET lease_losses = j.lease_losses + 1, lease_token = NULL, lease_expires = NULL, run_after = now(),
                    state = CASE WHEN j.attempts >= j.max_attempts THEN 'failed' ELSE 'pending' END,
                    error = 'worker ' || coalesce(j.lease_owner, '?') || ' stopped renewing its lease (killed, stalled or cut off)'
                        || CASE WHEN j.attempts >= j.max_attempts THEN ' on each of ' || j.attempts || ' attempts' ELSE '' END,
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
                    UPDATE \(unescaped: self.s).jobs j SET state = 'done', report = t.report::jsonb, seconds = t.seconds, finished_at = now(),
                        finished_by = \(owner), lease_token = NULL, lease_expires = NULL, error = NULL,
                        output_bytes = t.bytes, output_sha256 = t.sha256, log = t.log
                    FROM unnest(\(items.map(\.job.id))::text[], \(items.map(\.job.token))::int8[], \(items.map(\.report))::text[],
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
                UPDATE \(unescaped: s).jobs SET state = \(final ? "failed" : "pending"), error = \(message), log = \(log), lease_token = NULL,
                    lease_expires = NULL, finished_by = \(owner), run_after = now() + make_interval(secs => \(final ? 0 : backoff)),
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
                UPDATE \(unescaped: s).jobs SET state = 'pending', attempts = greatest(0, attempts - 1), lease_token = NULL,
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

    // MARK: Status

    /// Counts, throughput, time left and failures.
    public func status(failureLimit: Int = 1000) async throws -> BatchStatus {
        let (counts, attempts, losses, finishedRecently, span, failures) = try await bounded { [self] client in
            var counts: [String: Int] = [:], attempts = 0, losses = 0
            for try await (state, n, a, l) in try await client.query(
                """
                SELECT state, count(*)::int8, coalesce(sum(attempts), 0)::int8, coalesce(sum(lease_losses), 0)::int8 FROM \(unescaped: s).jobs GROUP BY state
                """, logger: logger
            ).decode((String, Int64, Int64, Int64).self) {
                counts[state] = Int(n)
                attempts += Int(a)
                losses += Int(l)
            }
            var finishedRecently = 0, span = 0.0
            for try await (n, seconds) in try await client.query(
                """
                SELECT count(*)::int8, coalesce(extract(epoch FROM max(finished_at) - min(finished_at)), 0)::float8 FROM \(unescaped: s).jobs
                WHERE state = 'done' AND finished_at > (SELECT max(finished_at) FROM \(unescaped: s).jobs WHERE state = 'done') - interval '10 minutes'
                """, logger: logger
            ).decode((Int64, Double).self) {
                finishedRecently = Int(n)
                span = seconds
            }
            var failures: [BatchStatus.Failure] = []
            for try await (id, error, a) in try await client.query(
                """
                SELECT id, coalesce(error, ''), attempts FROM \(unescaped: s).jobs WHERE state = 'failed' ORDER BY id LIMIT \(failureLimit)
                """, logger: logger
            ).decode((String, String, Int32).self) { failures.append(.init(id: id, error: error, attempts: Int(a))) }
            return (counts, attempts, losses, finishedRecently, span, failures)
        }
        let rate = finishedRecently >= 2 && span > 0 ? Double(finishedRecently - 1) / span * 60 : 0
        let pending = counts["pending", default: 0], running = counts["running", default: 0]
        return BatchStatus(
            total: counts.values.reduce(0, +), done: counts["done", default: 0], failed: counts["failed", default: 0],
            pending: pending, running: running, cancelled: counts["cancelled", default: 0], jobsPerMinute: rate,
            secondsLeft: rate > 0 && pending + running > 0 ? Double(pending + running) / rate * 60 : nil,
            leaseLosses: losses, attempts: attempts, failures: failures)
    }

    /// One job as the queue holds it, for `batch status --job ID`.
    public struct JobDetail: Codable, Sendable {
        public var id: String
        public var kind: String
        public var state: String
        public var output: String
        public var attempts: Int
        public var maxAttempts: Int
        /// The worker holding it, or the last that finished or failed it.
        public var worker: String?
        public var error: String?
        public var seconds: Double?
        public var outputBytes: Int?
        public var outputSha256: String?
        public var submittedAt: String
        public var finishedAt: String?
        /// The last lines of its last attempt's log.
        public var log: [String]

        /// The job in a few lines of text.
        public var text: String {
            var lines = [
                "\(id) (\(kind)): \(state), attempt \(attempts) of \(maxAttempts)"
                    + (worker.map { ", worker \($0)" } ?? ""),
                "output \(output)" + (outputBytes.map { " (\($0) bytes, sha256 \(outputSha256 ?? "?"))" } ?? "")
            ]
            if let error { lines.append("error: \(error)") }
            if !log.isEmpty { lines.append("log:") }
            lines += log.map { "  " + $0 }
            return lines.joined(separator: "\n")
        }
    }

    /// The job `id`, or nil when the queue holds none.
    public func job(_ id: String) async throws -> JobDetail? {
        try await bounded { [self] client in
            var found: JobDetail?
            for try await row in try await client.query(
                """
                SELECT id, kind, state, output, attempts, max_attempts, coalesce(lease_owner, finished_by), error, seconds,
                       output_bytes, output_sha256, to_char(submitted_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                       to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), coalesce(log, '')
                FROM \(unescaped: s).jobs WHERE id = \(id)
                """, logger: logger
            ).decode(
                (
                    String, String, String, String, Int32, Int32, String?, String?, Double?, Int64?, String?, String,
                    String?, String
                ).self
            ) {
                found = JobDetail(
                    id: row.0, kind: row.1, state: row.2, output: row.3, attempts: Int(row.4), maxAttempts: Int(row.5),
                    worker: row.6, error: row.7, seconds: row.8, outputBytes: row.9.map(Int.init), outputSha256: row.10,
                    submittedAt: row.11, finishedAt: row.12,
                    log: row.13.split(separator: "\n", omittingEmptySubsequences: true).map(String.init))
            }
            return found
        }
    }

    /// Bytes the queue's table and indexes take, and jobs in it (for "what the database holds per job").
    public func footprint() async throws -> (bytes: Int, jobs: Int) {
        try await bounded { [self] client in
            var bytes = 0, jobs = 0
            for try await (b, n) in try await client.query(
                """
                SELECT pg_total_relation_size('\(unescaped: s).jobs')::int8, (SELECT count(*) FROM \(unescaped: s).jobs)::int8
                """, logger: logger
            ).decode((Int64, Int64).self) {
                bytes = Int(b)
                jobs = Int(n)
            }
            return (bytes, jobs)
        }
    }
}

/// A dedicated connection that LISTENs to a queue's channel; reconnects after the database
/// restarts. Notifications only shorten a wait: the worker polls as well.
public final class Listener: @unchecked Sendable {
    let queue: JobQueue
    let wake = WakeSignal()
    var task: Task<Void, Never>?

    init(queue: JobQueue) {
        self.queue = queue
    }

    /// Starts listening in the background.
    public func start() {
        let queue = self.queue
        // A strong capture: stop() ends the task, which then lets go of the listener.
        task = Task { [self] in
            var id = 1, failures = 0
            while !Task.isCancelled {
                do {
                    let configuration = try queue.address.connectionConfiguration(), logger = queue.logger
                    let connection = try await withDeadline(
                        queue.address.timeout,
                        expired: {
                            QueueError.unresponsive(address: queue.address.description, seconds: queue.address.timeout)
                        },
                        abandoned: { late in Task { try? await late.close() } }
                    ) { [id] in
                        try await PostgresConnection.connect(configuration: configuration, id: id, logger: logger)
                    }
                    id += 1
                    // Closed here, not by a task of its own that could outlive the listener.
                    do {
                        try await connection.listen(on: queue.channel) { notifications in
                            for try await _ in notifications { self.fire() }
                        }
                    } catch {
                        try? await connection.close()
                        throw error
                    }
                    try? await connection.close()
                    failures = 0
                } catch {
                    if Task.isCancelled { return }
                    failures += 1
                    try? await Task.sleep(for: .seconds(RetryPolicy.database.delay(afterFailure: failures)))
                }
            }
        }
    }

    /// Stops listening, and returns when the connection is closed.
    public func stop() async {
        task?.cancel()
        fire()
        await task?.value
    }

    func fire() { wake.fire() }

    /// Returns at the next notification or after `seconds`.
    public func wait(seconds: Double) async { await wake.wait(seconds: seconds) }
}

/// Why the queue refused.
public enum QueueError: Error, CustomStringConvertible, Equatable {
    case schemaTooNew(found: Int, supported: Int)
    /// An operation took longer than the address's `timeout`.
    case unresponsive(address: String, seconds: Double)
    /// The database could not be reached or refused the login; `permanent` when trying again
    /// cannot help (a wrong password, an unknown role or database or host, no TLS).
    case cannotConnect(address: String, reason: String, permanent: Bool)

    /// Whether waiting and trying again can help.
    public var isPermanent: Bool {
        switch self {
        case .schemaTooNew: true
        case .unresponsive: false
        case .cannotConnect(_, _, let permanent): permanent
        }
    }

    /// What a failed connection attempt means, from postgres-nio's error: the server's SQLSTATE
    /// for a refused login, the socket's error for a refused port or an unknown host.
    static func connectionFailure(_ error: any Error, address: QueueAddress) -> QueueError {
        let at = address.description
        func permanent(_ reason: String) -> QueueError { .cannotConnect(address: at, reason: reason, permanent: true) }
        func transient(_ reason: String) -> QueueError { .cannotConnect(address: at, reason: reason, permanent: false) }
        if let p = error as? PSQLError {
            let message = p.serverInfo?[.message] ?? ""
            switch p.code {
            case .server:
                switch p.serverInfo?[.sqlState] ?? "" {
                case "28P01":
                    return permanent(
                        "the server refused the password of user \(address.user) (\(message)); fix the URL's password")
                case "28000":
                    return permanent(
                        "the server refused user \(address.user) (\(message)): an unknown role, or pg_hba.conf does not let it in from here"
                    )
                case "3D000":
                    return permanent(
                        "database \(address.database) does not exist; create it (createdb \(address.database)) or fix the URL"
                    )
                case "42501":
                    return permanent("permission denied (\(message)); grant user \(address.user) CONNECT and CREATE")
                case let state:
                    return transient("the server said \(message) (SQLSTATE \(state))")
                }
            case .sslUnsupported:
                return permanent(
                    "the server does not offer TLS and the URL says sslmode=require; enable ssl on the server, or use sslmode=prefer"
                )
            case .authMechanismRequiresPassword:
                return permanent(
                    "the server asks user \(address.user) for a password; put it in the URL (postgres://USER:PASSWORD@HOST/DB)"
                )
            case .unsupportedAuthMechanism, .saslError:
                return permanent(
                    "the server's authentication could not be completed (\(String(describing: p.code))); check the user and password"
                )
            default: break
            }
        }
        let text = String(reflecting: error)
        let lower = text.lowercased()
        if lower.contains("connection refused") || lower.contains("errno: 111") {
            return transient(
                "nothing listens at \(address.host):\(address.port) (connection refused); start PostgreSQL, or fix the URL's host and port"
            )
        }
        if lower.contains("dnsaerror") && lower.contains("connectionerrors: []")
            || lower.contains("name or service not known")
            || lower.contains("no address associated")
        {
            return permanent("host \(address.host) could not be resolved; fix the URL's host name")
        }
        if lower.contains("connecttimeout") || lower.contains("timed out") {
            return transient(
                "connecting to \(address.host):\(address.port) timed out; check the host, the port and the firewall")
        }
        return transient(String(text.prefix(300)))
    }

    public var description: String {
        switch self {
        case .cannotConnect(let address, let reason, _): "cannot use the queue at \(address): \(reason)"
        case .schemaTooNew(let found, let supported):
            "the queue's schema is version \(found), newer than this evanesco reads (\(supported)); upgrade evanesco on this machine"
        case .unresponsive(let address, let seconds):
            "the database at \(address) did not answer within \(String(format: "%g", seconds)) s; check that PostgreSQL (not another program) listens there and is not overloaded, or raise the URL's timeout=SECONDS"
        }
    }
}

/// A wake-up that one side fires and the other waits for, with a timeout.
///
/// A fire while nobody waits is kept for the next wait, so a job that finishes between a claim
/// and the wait does not cost a whole poll interval. Each wait's continuation is resumed exactly
/// once, by whichever of the fire and the timer takes it out first: a timer that fires before
/// the wait has registered cannot leave it waiting for a notification that never comes.
public final class WakeSignal: @unchecked Sendable {
    let state = LockedBox<(waiters: [Int: CheckedContinuation<Void, Never>], missed: Bool, next: Int)>(([:], false, 0))

    public init() {}

    /// Wakes every waiter, or the next wait when nobody waits.
    public func fire() {
        let waiting = state.update { w in
            defer { w.waiters = [:] }
            if w.waiters.isEmpty { w.missed = true }
            return Array(w.waiters.values)
        }
        for c in waiting { c.resume() }
    }

    /// Returns at the next ``fire()`` (or at once if one came while nobody waited), or after
    /// `seconds`, whichever is first.
    public func wait(seconds: Double) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let id: Int? = state.update { w in
                if w.missed {
                    w.missed = false
                    return nil
                }
                w.next += 1
                w.waiters[w.next] = c
                return w.next
            }
            guard let id else { return c.resume() }
            let delay = seconds.isFinite ? max(0, min(seconds, 86_400)) : 86_400
            timerQueue.asyncAfter(deadline: .now() + delay) {
                self.state.update { $0.waiters.removeValue(forKey: id) }?.resume()
            }
        }
    }
}

/// Runs `body` in a task of its own and returns its result, or throws `expired()` once `seconds`
/// have passed, whichever comes first. On expiry the task is cancelled and not waited for (an
/// operation stuck where cancellation does not reach cannot hold the caller); a value it still
/// produces afterwards goes to `abandoned`.
func withDeadline<T: Sendable>(
    _ seconds: Double, expired: @escaping @Sendable () -> any Error,
    abandoned: @escaping @Sendable (T) -> Void = { _ in }, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let waiting = LockedBox<CheckedContinuation<T, any Error>?>(nil)
    @Sendable func take() -> CheckedContinuation<T, any Error>? {
        waiting.update { w in
            defer { w = nil }
            return w
        }
    }
    return try await withCheckedThrowingContinuation { c in
        waiting.update { $0 = c }
        let work = Task {
            do {
                let value = try await body()
                if let c = take() { c.resume(returning: value) } else { abandoned(value) }
            } catch {
                take()?.resume(throwing: error)
            }
        }
        timerQueue.asyncAfter(deadline: .now() + max(0, seconds)) {
            guard let c = take() else { return }
            work.cancel()
            c.resume(throwing: expired())
        }
    }
}

/// Where the queue's timers run: a queue of their own, so they fire on time while the global
/// queue's threads are all busy with image work (on the global queue a 0.2 s wait was seen to
/// take 18 s during a parallel test run).
let timerQueue = DispatchQueue(label: "evanesco.queue-timers")
