import EvanescoCore
import Foundation

/// Counts of a batch, from receipts or from a queue.
public struct BatchStatus: Codable, Sendable, Equatable {
    public struct Failure: Codable, Sendable, Equatable {
        public var id: String
        public var error: String
        public var attempts: Int?
    }
    public var total: Int
    public var done: Int
    public var failed: Int
    public var pending: Int
    /// Claimed by a worker now (queues only).
    public var running: Int
    /// Cancelled before they ran (queues only).
    public var cancelled: Int
    /// Jobs finished per minute over the last 10 minutes of finishes (0 when none).
    public var jobsPerMinute: Double
    /// Seconds left at that rate (nil when nothing is finishing).
    public var secondsLeft: Double?
    /// Leases that expired with their worker gone (queues only).
    public var leaseLosses: Int
    /// Attempts over every job (queues only; a job tried twice counts 2).
    public var attempts: Int
    public var failures: [Failure]

    /// The status in a few lines of text.
    public var text: String {
        var lines = [
            "\(total) jobs: \(done) done, \(failed) failed, \(pending) pending"
                + (running > 0 ? ", \(running) running" : "") + (cancelled > 0 ? ", \(cancelled) cancelled" : "")
        ]
        if jobsPerMinute > 0 {
            lines.append(
                String(format: "%.1f jobs/min", jobsPerMinute)
                    + (secondsLeft.map { ", about \(Self.duration($0)) left" } ?? ""))
        }
        if leaseLosses > 0 {
            lines.append(
                "\(leaseLosses) lease\(leaseLosses == 1 ? "" : "s") lost (a worker died or stalled; its job was taken "
                    + "over)"
            )
        }
        for f in failures.prefix(20) { lines.append("failed \(f.id): \(f.error)") }
        if failures.count > 20 { lines.append("... and \(failures.count - 20) more failures (--json lists them all)") }
        return lines.joined(separator: "\n")
    }

    static func duration(_ s: Double) -> String {
        s < 90
            ? String(format: "%.0f s", s)
            : s < 5400 ? String(format: "%.0f min", s / 60) : String(format: "%.1f h", s / 3600)
    }

    /// Jobs per minute over the finishes in the last 10 minutes before the latest.
    static func rate(finishes: [Date]) -> Double {
        guard let last = finishes.max() else { return 0 }
        let window = finishes.filter { last.timeIntervalSince($0) <= 600 }
        guard window.count >= 2, let first = window.min(), last > first else { return 0 }
        return Double(window.count - 1) / last.timeIntervalSince(first) * 60
    }
}
