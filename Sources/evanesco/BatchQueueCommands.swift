import ArgumentParser
import EvanescoBatch
import EvanescoCore
import Foundation

/// `--queue URL`, or `$EVANESCO_QUEUE` (keeps a password off the command line).
struct QueueOption: ParsableArguments {
    @Option(
        help:
            ArgumentHelp(
                "The queue: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?schema=NAME&timeout=SECONDS] (default: "
                    + "$EVANESCO_QUEUE; timeout bounds each queue operation, 30 s unless given).")
    )
    var queue: String?

    var url: String? { queue ?? ProcessInfo.processInfo.environment["EVANESCO_QUEUE"] }

    func address() throws -> QueueAddress {
        guard let url else { throw ValidationError("give --queue postgres://... or set EVANESCO_QUEUE") }
        do { return try QueueAddress(url) } catch { throw ValidationError(error.message) }
    }

    func validate() throws { if url != nil { _ = try address() } }

    /// Opens the queue (creating or migrating its schema), runs `body` on it, closes it.
    func with<T: Sendable>(_ body: @Sendable (JobQueue) async throws -> T) async throws -> T {
        let q = try JobQueue(try address())
        defer { q.close() }
        try await q.migrate()
        return try await body(q)
    }
}

struct BatchSubmit: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "submit",
        abstract: "Add a manifest's jobs to a queue (idempotent: a job id already queued is left as it is).")

    @Argument(help: "The manifest (JSON Lines).") var manifest: String
    @OptionGroup var queue: QueueOption
    @Option(help: .setting(JobQueue.SubmitSettings.self, "maxAttempts"))
    var maxAttempts = JobQueue.SubmitSettings().maxAttempts
    @Flag(help: "Let the workers replace outputs that exist and that the queue did not write (never an input).")
    var force = false

    func validate() throws {
        _ = try queue.address()
        try validateSettings(JobQueue.SubmitSettings.flagsByName) { () throws(SettingError) in
            try settings.validate()
        }
    }

    /// The submission's settings from the flags.
    var settings: JobQueue.SubmitSettings {
        var s = JobQueue.SubmitSettings()
        s.maxAttempts = maxAttempts
        return s
    }

    func run() async throws {
        try await reportingErrors {
            let m = try readManifest(manifest)
            let address = try queue.address(), attempts = maxAttempts
            let jobs = m.jobs.map { j in
                var j = j
                j.overwrite = j.overwrite || force
                return j
            }
            let r = try await queue.with { try await $0.submit(jobs, maxAttempts: attempts) }
            for f in r.refused { Diagnostics.warning("job \(f.id) not submitted: \(f.error)") }
            try StandardOutput.line(
                "\(address): \(r.added) jobs added, \(r.alreadyQueued) already queued, \(r.refused.count) refused")
            if !r.refused.isEmpty { throw ExitCode.failure }
        }
    }
}

/// Says which of the ids a user named were not acted on, and why; true when all were.
func reportUnmatched(_ ids: [String], acted: [String], states: [String: String], verb: String) -> Bool {
    let done = Set(acted)
    var all = true
    for id in ids where !done.contains(id) {
        all = false
        let why = states[id].map { "it is \($0)" } ?? "the queue holds no job with this id"
        Diagnostics.warning("job \(SettingsCoding.quoted(id, bare: true)) not \(verb): \(why)")
    }
    return all
}

struct BatchRetry: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "retry", abstract: "Put failed (or cancelled) jobs back in the queue, their attempts reset.")

    @Flag(help: "Retry failed jobs (all of them, or the IDS given).") var failed = false
    @Flag(help: "Retry cancelled jobs (all of them, or the IDS given).") var cancelled = false
    @Argument(help: "Job ids (default: every failed, or cancelled, job).") var ids: [String] = []
    @OptionGroup var queue: QueueOption

    func validate() throws {
        guard failed || cancelled else { throw ValidationError("say what to retry: --failed, --cancelled or both") }
        _ = try queue.address()
    }

    func run() async throws {
        try await reportingErrors {
            let ids = ids, cancelled = cancelled, failed = failed
            let (requeued, states) = try await queue.with { q in
                let chosen = try await q.retry(failed: failed, cancelled: cancelled, ids: ids.isEmpty ? nil : ids)
                return (chosen, ids.isEmpty ? [:] : try await q.states(of: ids))
            }
            let n = requeued.count,
                which = failed && cancelled ? "failed or cancelled" : failed ? "failed" : "cancelled"
            try StandardOutput.line("\(n) \(which) job\(n == 1 ? "" : "s") queued again")
            if !reportUnmatched(ids, acted: requeued, states: states, verb: "queued again") { throw ExitCode.failure }
        }
    }
}

struct BatchCancel: AsyncParsableCommand {
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

    func run() async throws {
        try await reportingErrors {
            let ids = ids
            let (cancelled, states) = try await queue.with { q in
                let c = try await q.cancel(ids: ids.isEmpty ? nil : ids)
                return (c, ids.isEmpty ? [:] : try await q.states(of: ids))
            }
            let n = cancelled.count
            try StandardOutput.line("\(n) job\(n == 1 ? "" : "s") cancelled")
            if !reportUnmatched(ids, acted: cancelled, states: states, verb: "cancelled") { throw ExitCode.failure }
        }
    }
}
