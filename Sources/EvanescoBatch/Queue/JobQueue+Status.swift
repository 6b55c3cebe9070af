import EvanescoCore
import EvanescoIO
import Foundation
import Logging
import PostgresNIO

/// What the queue holds: counts, a job's row, the table's size.
extension JobQueue {
    // MARK: Status

    /// Counts, throughput, time left and failures.
    public func status(failureLimit: Int = 1000) async throws -> BatchStatus {
        let (counts, attempts, losses, finishedRecently, span, failures) = try await bounded { [self] client in
            var counts: [String: Int] = [:], attempts = 0, losses = 0
            for try await (state, n, a, l) in try await client.query(
                """
                SELECT state, count(*)::int8, coalesce(sum(attempts), 0)::int8, coalesce(sum(lease_losses), 0)::int8 \
                FROM \(unescaped: s).jobs GROUP BY state
                """, logger: logger
            ).decode((String, Int64, Int64, Int64).self) {
                counts[state] = Int(n)
                attempts += Int(a)
                losses += Int(l)
            }
            var finishedRecently = 0, span = 0.0
            for try await (n, seconds) in try await client.query(
                """
                SELECT count(*)::int8, coalesce(extract(epoch FROM max(finished_at) - min(finished_at)), 0)::float8 \
                FROM \(unescaped: s).jobs
                WHERE state = 'done' AND finished_at > \
                (SELECT max(finished_at) FROM \(unescaped: s).jobs WHERE state = 'done') - interval '10 minutes'
                """, logger: logger
            ).decode((Int64, Double).self) {
                finishedRecently = Int(n)
                span = seconds
            }
            var failures: [BatchStatus.Failure] = []
            for try await (id, error, a) in try await client.query(
                """
                SELECT id, coalesce(error, ''), attempts FROM \(unescaped: s).jobs WHERE state = 'failed' ORDER BY id \
                LIMIT \(failureLimit)
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
                SELECT id, kind, state, output, attempts, max_attempts, coalesce(lease_owner, finished_by), error, \
                seconds,
                       output_bytes, output_sha256, \
                to_char(submitted_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
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
                SELECT pg_total_relation_size('\(unescaped: s).jobs')::int8, \
                (SELECT count(*) FROM \(unescaped: s).jobs)::int8
                """, logger: logger
            ).decode((Int64, Int64).self) {
                bytes = Int(b)
                jobs = Int(n)
            }
            return (bytes, jobs)
        }
    }
}
