import ArgumentParser
import EvanescoBatch
import EvanescoCore
import EvanescoIO
import Foundation

struct Batch: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "batch",
        abstract: "Run thousands of stack, portrait and backdrop jobs: on this machine, in shards, or through a PostgreSQL queue.",
        discussion: """
        A manifest is JSON Lines, one job a line (paths relative to the manifest's folder):
          {"id": "b1", "kind": "stack", "inputs": ["b1/"], "output": "out/b1.jpg",
           "options": {"merge": "median", "kappa": 2}}
        kind is stack, portrait or backdrop; options are the command's settings in camelCase. \
        Every line is checked before any job runs.

        EXAMPLES:
          evanesco batch run jobs.jsonl --jobs 2
          evanesco batch run jobs.jsonl --shard 0/4
          evanesco batch status jobs.jsonl
          evanesco batch submit jobs.jsonl --queue postgres://me@db/photos
          evanesco batch status --queue postgres://me@db/photos --json
          evanesco batch retry --failed --queue postgres://me@db/photos
        """,
        subcommands: [BatchRun.self, BatchStatusCommand.self, BatchSubmit.self, BatchRetry.self, BatchCancel.self])
}

/// `--queue URL`, or `$EVANESCO_QUEUE` (keeps a password off the command line).
struct QueueOption: ParsableArguments {
    @Option(help: "The queue: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?schema=NAME] (default: $EVANESCO_QUEUE).")
    var queue: String?

    var url: String? { queue ?? ProcessInfo.processInfo.environment["EVANESCO_QUEUE"] }

    func address() throws -> QueueAddress {
        guard let url else { throw ValidationError("give --queue postgres://... or set EVANESCO_QUEUE") }
        do { return try QueueAddress(url) } catch { throw ValidationError(error.message) }
    }

    func validate() throws { if url != nil { _ = try address() } }
}

/// Runs an async body from a synchronous command (the root command is synchronous).
func runAsync<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let box = LockedBox<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task {
        do { let v = try await body(); box.update { $0 = .success(v) } } catch { box.update { $0 = .failure(error) } }
        done.signal()
    }
    done.wait()
    return try box.value!.get()
}

/// Reads a manifest, turning its problems into the command's error.
func readManifest(_ path: String) throws -> BatchManifest {
    do { return try BatchManifest.read(path) } catch let p as ManifestProblems {
        FileHandle.standardError.write(Data("evanesco: error: \(p.description)\n".utf8))
        throw ExitCode(65)
    }
}

struct BatchRun: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run a manifest on this machine (no database); resumable.",
        discussion: """
        A job whose output and receipt exist is skipped, so a killed run resumes with the same \
        command. Receipts (each job's report) go to MANIFEST.state/done and /failed. Without \
        --shard, the slice comes from SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT or from \
        JOB_COMPLETION_INDEX with EVANESCO_SHARD_COUNT, so sbatch --array and a Kubernetes \
        Indexed Job work unchanged. Exit status 1 when a job failed (listed on stderr).
        """)

    @Argument(help: "The manifest (JSON Lines).") var manifest: String
    @Option(help: "Jobs run at once.") var jobs = 1
    @Option(help: ArgumentHelp("Run only slice I of N (0-based): jobs whose line index modulo N is I.", valueName: "I/N")) var shard: String?
    @Option(help: "Write a JSON summary (jobs done, skipped, failed with their messages).") var report: String?
    @Flag(help: "Replace outputs that exist without a receipt of this batch.") var force = false
    @Flag(help: "No progress on stderr.") var quiet = false

    func validate() throws {
        guard (1...256).contains(jobs) else { throw ValidationError("--jobs must be within 1...256") }
        if let shard, Shard(shard) == nil { throw ValidationError("--shard must be I/N with 0 <= I < N, e.g. 0/4") }
    }

    func run() throws {
        try reportingErrors {
            if let report { try AtomicOutput.check(files: [report], inputs: [manifest], overwrite: force) }
            let m = try readManifest(manifest)
            var batch = LocalBatch(manifest: m)
            batch.concurrency = jobs
            batch.overwrite = force
            if let shard { batch.shard = Shard(shard) } else {
                do throws(ManifestError) { batch.shard = try Shard.fromEnvironment(ProcessInfo.processInfo.environment) } catch {
                    throw ValidationError(error.message)
                }
            }
            let progress = ProgressDisplay(quiet: quiet)
            let start = Date()
            batch.progress = { done, total, receipt in
                if receipt.state == "failed" { Diagnostics.warning("job \(receipt.id) failed: \(receipt.error ?? "")") }
                let elapsed = Date().timeIntervalSince(start)
                progress.show(stage: "batch", done: done, total: total, unit: "jobs",
                              remaining: done > 0 ? elapsed / Double(done) * Double(total - done) : nil)
            }
            let summary = try batch.run()
            if let report { try ReportFile.write(summary, to: report, overwrite: force) }
            try StandardOutput.line(String(format: "%@%@: %d jobs: %d done, %d skipped (done before), %d failed in %.1f s", m.path,
                                           batch.shard.map { " shard \($0)" } ?? "", summary.jobs, summary.done, summary.skipped,
                                           summary.failed.count, summary.seconds))
            if !summary.failed.isEmpty { throw ExitCode.failure }
        }
    }
}

struct BatchStatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "Count done, failed and pending jobs: of a manifest (from its receipts) or of a queue.")

    @Argument(help: "The manifest (without --queue).") var manifest: String?
    @OptionGroup var queue: QueueOption
    @Flag(help: "Print JSON (every failure with its message).") var json = false

    func validate() throws {
        if (manifest == nil) == (queue.url == nil) { throw ValidationError("give a MANIFEST, or --queue URL (or $EVANESCO_QUEUE)") }
    }

    func run() throws {
        try reportingErrors {
            let status: BatchStatus
            if let manifest {
                status = LocalBatch.status(of: try readManifest(manifest))
            } else {
                let address = try queue.address()
                status = try runAsync {
                    let q = try JobQueue(address)
                    defer { q.close() }
                    try await q.migrate()
                    return try await q.status()
                }
            }
            try StandardOutput.line(json ? String(decoding: try ReportJSON.encode(status).dropLast(), as: UTF8.self) : status.text)
        }
    }
}

struct BatchSubmit: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "submit",
        abstract: "Add a manifest's jobs to a queue (idempotent: a job id already queued is left as it is).")

    @Argument(help: "The manifest (JSON Lines).") var manifest: String
    @OptionGroup var queue: QueueOption
    @Option(help: "Attempts for a job whose failures may pass (I/O, a lost worker); bad input fails at once.") var maxAttempts = 5

    func validate() throws {
        _ = try queue.address()
        guard (1...100).contains(maxAttempts) else { throw ValidationError("--max-attempts must be within 1...100") }
    }

    func run() throws {
        try reportingErrors {
            let m = try readManifest(manifest)
            let address = try queue.address(), attempts = maxAttempts
            let r = try runAsync {
                let q = try JobQueue(address)
                defer { q.close() }
                try await q.migrate()
                return try await q.submit(m.jobs, maxAttempts: attempts)
            }
            for f in r.refused { Diagnostics.warning("job \(f.id) not submitted: \(f.error)") }
            try StandardOutput.line("\(address): \(r.added) jobs added, \(r.alreadyQueued) already queued, \(r.refused.count) refused")
            if !r.refused.isEmpty { throw ExitCode.failure }
        }
    }
}

struct BatchRetry: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "retry", abstract: "Put failed jobs back in the queue, their attempts reset.")

    @Flag(help: "Retry failed jobs (all of them, or the IDS given).") var failed = false
    @Argument(help: "Job ids (default: every failed job).") var ids: [String] = []
    @OptionGroup var queue: QueueOption

    func validate() throws {
        guard failed else { throw ValidationError("say what to retry: --failed") }
        _ = try queue.address()
    }

    func run() throws {
        try reportingErrors {
            let address = try queue.address(), ids = ids
            let n = try runAsync {
                let q = try JobQueue(address)
                defer { q.close() }
                try await q.migrate()
                return try await q.retryFailed(ids: ids.isEmpty ? nil : ids)
            }
            try StandardOutput.line("\(n) failed job\(n == 1 ? "" : "s") queued again")
        }
    }
}

struct BatchCancel: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel",
        abstract: "Cancel pending and running jobs (a worker running one discards its work at its next heartbeat).")

    @Argument(help: "Job ids.") var ids: [String] = []
    @Flag(help: "Cancel every pending and running job.") var all = false
    @OptionGroup var queue: QueueOption

    func validate() throws {
        guard all != !ids.isEmpty else { throw ValidationError("give job ids, or --all") }
        _ = try queue.address()
    }

    func run() throws {
        try reportingErrors {
            let address = try queue.address(), ids = ids
            let n = try runAsync {
                let q = try JobQueue(address)
                defer { q.close() }
                try await q.migrate()
                return try await q.cancel(ids: ids.isEmpty ? nil : ids)
            }
            try StandardOutput.line("\(n) job\(n == 1 ? "" : "s") cancelled")
        }
    }
}
