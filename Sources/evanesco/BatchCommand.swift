import ArgumentParser
import EvanescoBatch
import EvanescoCore
import EvanescoIO
import Foundation

struct Batch: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "batch",
        abstract: "Run many stack, portrait and backdrop jobs: here, in shards, or through a PostgreSQL queue.",
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

/// Reads a manifest, turning its problems into the command's error; its jobs' notes (a
/// deprecated spelling) are said once each, with how many jobs use it.
func readManifest(_ path: String) throws -> BatchManifest {
    do {
        let m = try BatchManifest.read(path)
        var counts: [String: Int] = [:]
        for job in m.jobs { for n in job.notes { counts[n, default: 0] += 1 } }
        for (note, n) in counts.sorted(by: { $0.key < $1.key }) {
            Diagnostics.warning("\(n) job\(n == 1 ? "" : "s") of \(path): \(note)")
        }
        return m
    } catch let p as ManifestProblems {
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
    @Option(
        help: ArgumentHelp("Run only slice I of N (0-based): jobs whose line index modulo N is I.", valueName: "I/N"))
    var shard: String?
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
            if let report {
                // The summary may replace an old summary with --force; never an input, the
                // manifest, a receipt or any job's output (real paths: links and `..` resolved).
                var protected = m.protectedPaths
                for job in m.jobs { protected.protect(job.output, as: "the output of job \(job.id)") }
                if let why = protected.refusal(forOutput: report, replacedWhole: false) {
                    throw ImageIOError.cannotWrite(path: report, reason: why)
                }
            }
            var batch = LocalBatch(manifest: m)
            batch.concurrency = jobs
            batch.overwrite = force
            if let shard {
                batch.shard = Shard(shard)
            } else {
                do throws(ManifestError) {
                    batch.shard = try Shard.fromEnvironment(ProcessInfo.processInfo.environment)
                } catch {
                    throw ValidationError(error.message)
                }
            }
            let progress = ProgressDisplay(quiet: quiet)
            let start = Date()
            batch.progress = { done, total, receipt in
                if receipt.state == "failed" { Diagnostics.warning("job \(receipt.id) failed: \(receipt.error ?? "")") }
                let elapsed = Date().timeIntervalSince(start)
                progress.show(
                    stage: "batch", done: done, total: total, unit: "jobs",
                    remaining: done > 0 ? elapsed / Double(done) * Double(total - done) : nil)
            }
            let summary = try batch.run()
            if let report { try ReportFile.write(summary, to: report, overwrite: force) }
            try StandardOutput.line(
                String(
                    format: "%@%@: %d jobs: %d done, %d skipped (done before), %d failed%@ in %.1f s", m.path,
                    batch.shard.map { " shard \($0)" } ?? "", summary.jobs, summary.done, summary.skipped,
                    summary.failed.count,
                    summary.elsewhere > 0 ? ", \(summary.elsewhere) left to another run that holds them" : "",
                    summary.seconds))
            if !summary.failed.isEmpty {
                let receipts = LocalBatch.stateFolder(of: m.path) + "/failed"
                let failed = "\(summary.failed.count) of \(summary.jobs) jobs failed"
                Diagnostics.error(
                    "\(failed) (each said above; receipts in \(receipts)); fix them and run the same command again")
                throw ExitCode.failure
            }
        }
    }
}

struct BatchStatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Count done, failed and pending jobs: of a manifest (from its receipts) or of a queue.")

    @Argument(help: "The manifest (without --queue).") var manifest: String?
    @OptionGroup var queue: QueueOption
    @Option(help: "One queued job: its state, attempts, worker, error, output digest and the last lines of its log.")
    var job: String?
    @Flag(help: "Print JSON (every failure with its message).") var json = false

    func validate() throws {
        if (manifest == nil) == (queue.url == nil) {
            throw ValidationError("give a MANIFEST, or --queue URL (or $EVANESCO_QUEUE)")
        }
        if job != nil && queue.url == nil { throw ValidationError("--job ID reads a queue: give --queue URL") }
    }

    func run() async throws {
        try await reportingErrors {
            if let id = job {
                guard let detail = try await queue.with({ try await $0.job(id) }) else {
                    Diagnostics.error("the queue holds no job \(SettingsCoding.quoted(id, bare: true))")
                    throw ExitCode.failure
                }
                try StandardOutput.line(
                    json ? String(decoding: try ReportJSON.encode(detail).dropLast(), as: UTF8.self) : detail.text)
                return
            }
            let status: BatchStatus
            if let manifest {
                status = LocalBatch.status(of: try readManifest(manifest))
            } else {
                status = try await queue.with { try await $0.status() }
            }
            try StandardOutput.line(
                json ? String(decoding: try ReportJSON.encode(status).dropLast(), as: UTF8.self) : status.text)
        }
    }
}
