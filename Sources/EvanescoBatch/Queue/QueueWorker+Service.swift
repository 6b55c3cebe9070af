import Logging
import ServiceLifecycle
import UnixSignals

extension QueueWorker {
    /// Runs a worker on `address` as one `ServiceGroup`: the queue's connection pool, the
    /// metrics server when ``Settings/metricsPort`` is set, and the worker. A graceful shutdown (one of
    /// `signals`, SIGTERM and SIGINT by default) drains the worker first: it stops claiming and
    /// gives running jobs ``Settings/grace`` seconds; then the metrics server stops and the pool
    /// closes last, after the worker's final writes. A worker that ends by itself (with
    /// ``Settings/exitWhenDone``, or on a fatal error) shuts the group down the same way.
    ///
    /// - Parameters:
    ///   - address: The queue.
    ///   - settings: How the worker runs.
    ///   - metrics: The counters to serve (made when nil and a metrics port is set).
    ///   - logger: Where the worker logs (one line per job).
    ///   - queueLogger: Where the pool and the group log (default: nowhere).
    ///   - signals: The signals that drain the worker.
    /// - Returns: What the worker did.
    /// - Throws: When the pool cannot be configured, or the metrics server cannot listen.
    public static func serve(
        _ address: QueueAddress, settings: Settings,
        metrics: WorkerMetrics? = nil, logger: Logger,
        queueLogger: Logger = Logger(label: "evanesco.queue", factory: { _ in SwiftLogNoOpLogHandler() }),
        signals: [UnixSignal] = [.sigterm, .sigint]
    ) async throws -> Summary {
        let queue = try JobQueue(address, logger: queueLogger, runsItself: false)
        let metrics = settings.metricsPort == nil ? nil : metrics ?? WorkerMetrics()
        let worker = QueueWorker(queue: queue, settings: settings, metrics: metrics, logger: logger)
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: queue)]
        if let metrics, let port = settings.metricsPort {
            services.append(.init(service: metrics.server(host: settings.metricsHost, port: port)))
        }
        services.append(
            .init(
                service: Drained(worker: worker), successTerminationBehavior: .gracefullyShutdownGroup,
                failureTerminationBehavior: .gracefullyShutdownGroup))
        let group = ServiceGroup(
            configuration: .init(services: services, gracefulShutdownSignals: signals, logger: queueLogger))
        try await group.run()
        return worker.summary.value
    }

    /// The worker as a service: a graceful shutdown drains it.
    struct Drained: Service {
        let worker: QueueWorker

        func run() async throws {
            let worker = worker
            _ = await withGracefulShutdownHandler {
                await worker.run()
            } onGracefulShutdown: {
                worker.drain()
            }
        }
    }
}
