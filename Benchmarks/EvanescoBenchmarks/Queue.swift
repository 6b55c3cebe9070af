import EvanescoBatch
import Foundation

extension Bench {
    /// The queue's own overhead: jobs that do nothing, claimed and completed by `claimers`
    /// concurrent claimers, each with its own connection (as separate worker processes would be),
    /// on the PostgreSQL server at `url` (a schema of its own, dropped with the rest of the
    /// benchmark's cluster). Prints submits per second, claims per second (claim + fenced complete
    /// of each job) and the bytes the table holds per job.
    func queueBenchmark(url: String, jobs: Int = 20_000, claimers: Int = 16) async throws {
        let address = try QueueAddress(url + "?schema=bench_\(getpid())")
        let producer = try JobQueue(address)
        try await producer.migrate()
        var submitSeconds = 0.0
        for batch in [1, 8, 32] {
            let specs = try (0..<jobs).map { i in
                try BatchJob.parse(
                    #"{"id": "b\#(batch)-\#(i)", "kind": "stack", "inputs": ["/in/\#(i)"], "#
                        + #""output": "/out/\#(batch)/\#(i).jpg"}"#,
                    base: "/", checkFiles: false)
            }
            var t = now()
            let submitted = try await producer.submit(specs, maxAttempts: 3)
            submitSeconds = now() - t
            precondition(submitted.added == jobs)
            let queues = try (0..<claimers).map { _ in try JobQueue(address) }
            t = now()
            let counts = try await withThrowingTaskGroup(of: Int.self) { group in
                for (i, q) in queues.enumerated() {
                    group.addTask {
                        var n = 0
                        while true {
                            let claimed = try await q.claim(limit: batch, owner: "bench-\(i)", lease: 60)
                            if claimed.isEmpty { return n }
                            // All of a claim's jobs recorded in one transaction, as a worker's completer
                            // does with the jobs that finished together: their outputs' digests first
                            // (committed before any output is placed), then the fenced finish.
                            let items = claimed.map {
                                JobQueue.Completion(
                                    job: $0, report: "{}", seconds: 0, digest: OutputDigest(bytes: 0, sha256: ""))
                            }
                            try await q.intend(items)
                            let done = try await q.complete(items, owner: "bench-\(i)") { _ in }
                            n += done.count
                        }
                    }
                }
                return try await group.reduce(0, +)
            }
            let seconds = now() - t
            precondition(counts == jobs, "\(counts) of \(jobs) jobs claimed")
            print(
                String(
                    format:
                        "queue: %d no-op jobs, %d claimers claiming %d at a time: %.0f claims/s (claim, then the "
                        + "digests and one fenced complete of the claimed jobs), %.2f s",
                    jobs, claimers, batch, Double(jobs) / seconds, seconds))
            rows.append(
                Row(
                    name: "queue claims/s, \(claimers) claimers, \(batch) per claim", subject: "evanesco queue",
                    baseline: "goal 5000/s",
                    subjectMedian: Double(jobs) / seconds, baselineMedian: 5000, ratio: Double(jobs) / seconds / 5000,
                    subjectRuns: [seconds], baselineRuns: []))
            for q in queues { q.close() }
        }
        let footprint = try await producer.footprint()  // both rounds' jobs
        print(
            String(
                format:
                    "queue: submit %.0f jobs/s; the table and its indexes hold %.0f bytes per job (%d jobs, no-op "
                    + "reports)",
                Double(jobs) / submitSeconds, Double(footprint.bytes) / Double(footprint.jobs), footprint.jobs))
        producer.close()
    }
}
