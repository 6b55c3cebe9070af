import EvanescoCore
import EvanescoIO
import Foundation
import Logging
import PostgresNIO

/// The queue's tables: created, or migrated to ``JobQueue/schemaVersion``, and probed.
extension JobQueue {
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
                    INSERT INTO \(unescaped: self.s).meta (key, value) VALUES \
                    ('schema_version', \(String(Self.schemaVersion)))
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
                state text NOT NULL DEFAULT 'pending' CHECK \
            (state IN ('pending', 'running', 'done', 'failed', 'cancelled')),
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
}
