import ArgumentParser
import EvanescoBatch
import EvanescoCore
import EvanescoIO
import Foundation
import Logging

struct Worker: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "worker",
        abstract: "Run jobs from a PostgreSQL queue until stopped (SIGTERM drains).",
        discussion: """
            Start as many as you like, on as many machines as share the queue and the files. Each \
            claims jobs under a lease it renews; a worker that dies loses its lease after --lease \
            seconds and another takes the job; a worker that lost its lease discards its work, so \
            every output is placed once. SIGTERM or SIGINT stops claiming, lets running jobs finish \
            within --grace seconds and gives back the rest. One line per job on stderr.

            EXAMPLES:
              evanesco worker --queue postgres://me@db/photos --jobs 2
              EVANESCO_QUEUE=postgres://me@db/photos evanesco worker --metrics-port 9464
            """)

    @OptionGroup var queue: QueueOption
    @Option(help: .worker("jobs")) var jobs = QueueWorker.Settings().concurrency
    @Option(help: .worker("lease")) var lease = QueueWorker.Settings().lease
    @Option(help: .worker("poll")) var poll = QueueWorker.Settings().poll
    @Option(help: .worker("grace")) var grace = QueueWorker.Settings().grace
    @Option(help: .worker("metricsPort")) var metricsPort: Int?
    @Option(help: .worker("metricsHost")) var metricsHost = QueueWorker.Settings().metricsHost
    @Option(help: .worker("allow", valueName: "DIR", more: " Also $EVANESCO_ALLOW, folders separated by ':'."))
    var allow: [String] = []
    @Option(help: .worker("jobTimeout")) var jobTimeout: Double?
    @Option(help: .worker("outageGrace")) var outageGrace = QueueWorker.Settings().outageGrace
    @Flag(inversion: .prefixedNo, help: .worker("exitWhenDone")) var exitWhenDone = QueueWorker.Settings().exitWhenDone
    @Flag(help: "Only warnings and errors on stderr.") var quiet = false

    func validate() throws {
        _ = try queue.address()
        try validateSettings(QueueWorker.Settings.flagsByName) { () throws(SettingError) in try settings().validate() }
        for dir in allowedFolders {
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: dir, isDirectory: &isDir), isDir.boolValue else {
                throw ValidationError("--allow \(dir): no such folder")
            }
        }
    }

    /// The worker's settings from the flags.
    func settings() -> QueueWorker.Settings {
        var settings = QueueWorker.Settings()
        settings.allowed = allowedFolders.map { RealPath.of($0) }
        settings.jobTimeout = jobTimeout
        settings.outageGrace = outageGrace
        settings.concurrency = jobs
        settings.lease = lease
        settings.poll = poll
        settings.grace = grace
        settings.exitWhenDone = exitWhenDone
        settings.metricsPort = metricsPort
        settings.metricsHost = metricsHost
        return settings
    }

    /// The folders of --allow and $EVANESCO_ALLOW, as given.
    var allowedFolders: [String] {
        allow + (ProcessInfo.processInfo.environment["EVANESCO_ALLOW"] ?? "").split(separator: ":").map(String.init)
    }

    func run() async throws {
        let settings = settings()
        let address = try queue.address(), quiet = quiet
        if let port = settings.metricsPort {
            do throws(ManifestError) { try WorkerMetrics.checkListenable(host: settings.metricsHost, port: port) } catch
            {
                throw ValidationError(error.message)
            }
        }
        LoggingSystem.bootstrap { label in
            var h = StreamLogHandler.standardError(label: label)
            h.logLevel = quiet ? .warning : .info
            return h
        }
        var logger = Logger(label: "evanesco.worker")
        logger.logLevel = quiet ? .warning : .info
        logger.info("worker \(settings.name) on \(address), \(jobs) at once, lease \(lease) s")
        if settings.allowed.isEmpty {
            logger.notice("no --allow: jobs may read and write wherever this user can")
        } else {
            logger.info("jobs confined to \(settings.allowed.joined(separator: ", "))")
        }
        // One service group: SIGTERM and SIGINT drain the worker, then stop the metrics server
        // and close the queue's pool.
        let summary = try await QueueWorker.serve(address, settings: settings, logger: logger)
        if let fatal = summary.fatal {
            Diagnostics.error(fatal)
            throw ExitCode.failure
        }
        try StandardOutput.line(
            "worker \(settings.name): \(summary.done) done, \(summary.failed) failed, \(summary.retried) to retry, "
                + "\(summary.discarded) discarded (lease lost), \(summary.released) given back")
    }
}
