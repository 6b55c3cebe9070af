import Foundation
import Hummingbird
import Prometheus

/// A worker's metrics in Prometheus's text format: jobs done, failed and running, a histogram of
/// job seconds, and leases lost.
public final class WorkerMetrics: Sendable {
    public let registry = PrometheusCollectorRegistry()
    public let done: Counter
    public let failed: Counter
    public let running: Gauge
    public let seconds: ValueHistogram
    public let leaseLosses: Counter

    public init() {
        func name(_ metric: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
            MetricNameDescriptor(namespace: "evanesco", metricName: metric, unitName: unit, helpText: help)
        }
        done = registry.makeCounter(descriptor: name("jobs_done", "total", "Jobs this worker finished."))
        failed = registry.makeCounter(descriptor: name("jobs_failed", "total", "Jobs this worker failed for good."))
        running = registry.makeGauge(descriptor: name("jobs", "running", "Jobs this worker runs now."))
        seconds = registry.makeValueHistogram(
            descriptor: name("job", "seconds", "Seconds per finished job."),
            buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300])
        leaseLosses = registry.makeCounter(
            descriptor: name(
                "lease_losses", "total",
                "Leases lost: this worker's discarded jobs, and expired leases it took back."))
    }

    /// The metrics as Prometheus text.
    public func text() -> String {
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }

    /// Serves `GET /metrics` on `host`:`port` until the task is cancelled.
    ///
    /// - Parameters:
    ///   - host: The address to listen on (127.0.0.1: this machine only).
    ///   - port: The TCP port.
    public func serve(host: String = "127.0.0.1", port: Int) async throws {
        let router = Router()
        router.get("metrics") { _, _ -> Response in
            Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                body: .init(byteBuffer: ByteBuffer(string: self.text())))
        }
        let app = Application(router: router, configuration: .init(address: .hostname(host, port: port)))
        try await app.runService()
    }
}
