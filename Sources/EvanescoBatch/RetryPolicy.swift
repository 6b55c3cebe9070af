import Foundation

/// How long to wait before trying something again: `first` seconds after the first failure,
/// multiplied by `factor` after each further one, never more than `cap`. The one backoff of the
/// batch system: the local batch's jobs, a queued job's next attempt, the worker's database steps
/// and the queue's listener all wait by one of the policies below, their parameters in one place.
public struct RetryPolicy: Sendable, Equatable {
    /// Seconds after the first failure.
    public var first: Double
    /// What each further failure multiplies the wait by.
    public var factor: Double
    /// The longest wait, in seconds.
    public var cap: Double

    /// - Parameters:
    ///   - first: Seconds after the first failure.
    ///   - factor: The growth per failure.
    ///   - cap: The longest wait.
    public init(first: Double, factor: Double = 2, cap: Double) {
        self.first = first
        self.factor = factor
        self.cap = cap
    }

    /// Seconds to wait after failure number `failures` (1 for the first).
    ///
    /// - Parameter failures: Failures so far, at least 1.
    /// - Returns: `first x factor^(failures - 1)`, at most ``cap``.
    public func delay(afterFailure failures: Int) -> Double {
        let n = Double(max(1, failures) - 1)
        let d = first * pow(factor, n)
        return d.isFinite ? min(cap, d) : cap
    }

    /// A job of a local batch whose failure may pass (I/O, a full disk): 1 s, 2 s, 4 s... 30 s.
    public static let localJob = RetryPolicy(first: 1, cap: 30)
    /// A queued job's next attempt after a failure that may pass: 2 s, 4 s, 8 s... 10 min (the
    /// job waits in the queue, pending, and any worker may take it).
    public static let queuedJob = RetryPolicy(first: 2, cap: 600)
    /// A worker's database step (claim, renew, record) and the queue's listener reconnecting,
    /// while the database restarts or the network blinks: 0.1 s, 0.2 s... 5 s.
    public static let database = RetryPolicy(first: 0.1, cap: 5)
}
