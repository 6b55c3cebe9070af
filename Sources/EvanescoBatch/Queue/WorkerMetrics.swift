import Foundation
import Hummingbird
import Logging
import Prometheus
import ServiceLifecycle

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

    /// Checks that `host`:`port` can be listened on now (the port is free, the address is this
    /// machine's), so a worker refuses to start rather than run with no metrics and no word.
    ///
    /// - Throws: `ManifestError` naming the flag and the cause.
    public static func checkListenable(host: String, port: Int) throws(ManifestError) {
        // A numeric address only (AI_NUMERICHOST: no name is looked up), IPv4 or IPv6.
        var hints = addrinfo()
        hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &found) == 0, let info = found else {
            throw ManifestError(message: "--metrics-host \(host) is not an IP address")
        }
        defer { freeaddrinfo(found) }
        let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
        guard fd >= 0 else {
            throw ManifestError(message: "cannot open a socket for the metrics: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if bind(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) != 0 || listen(fd, 1) != 0 {
            let e = errno
            switch e {
            case EADDRINUSE:
                throw ManifestError(
                    message: "--metrics-port \(port) on \(host) is in use by another program; choose another port")
            case EADDRNOTAVAIL:
                throw ManifestError(
                    message:
                        "--metrics-host \(host) is not an address of this machine; use 127.0.0.1, or 0.0.0.0 for "
                        + "every interface"
                )
            case EACCES:
                throw ManifestError(
                    message: "--metrics-port \(port) needs privileges (ports under 1024); choose a port from 1024")
            default:
                throw ManifestError(message: "cannot serve metrics on \(host):\(port): \(String(cString: strerror(e)))")
            }
        }
    }

    /// The server of `GET /metrics` on `host`:`port`, as a service of a `ServiceGroup`.
    ///
    /// - Parameters:
    ///   - host: The address to listen on (127.0.0.1: this machine only).
    ///   - port: The TCP port.
    public func server(host: String = "127.0.0.1", port: Int) -> some Service {
        let router = Router()
        router.get("metrics") { _, _ -> Response in
            Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                body: .init(byteBuffer: ByteBuffer(string: self.text())))
        }
        return Application(
            router: router, configuration: .init(address: .hostname(host, port: port)),
            logger: Logger(label: "evanesco.metrics", factory: { _ in SwiftLogNoOpLogHandler() }))
    }
}
