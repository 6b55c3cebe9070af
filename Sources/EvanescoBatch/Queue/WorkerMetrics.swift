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
        done = registry.makeCounter(name: "evanesco_jobs_done_total", help: "Jobs this worker finished.")
        failed = registry.makeCounter(name: "evanesco_jobs_failed_total", help: "Jobs this worker failed for good.")
        running = registry.makeGauge(name: "evanesco_jobs_running", help: "Jobs this worker runs now.")
        seconds = registry.makeValueHistogram(name: "evanesco_job_seconds", buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
                                              help: "Seconds per finished job.")
        leaseLosses = registry.makeCounter(name: "evanesco_lease_losses_total",
                                           help: "Leases lost: this worker's discarded jobs, and expired leases it took back.")
    }

    /// The metrics as Prometheus text.
    public func text() -> String {
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }

    /// Serves `GET /metrics` on 127.0.0.1:`port` until the task is cancelled.
    ///
    /// - Parameter port: The TCP port.
    public func serve(port: Int) async throws {
        let router = Router()
        router.get("metrics") { _, _ -> Response in
            Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                     body: .init(byteBuffer: ByteBuffer(string: self.text())))
        }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
        try await app.runService()
    }
}
