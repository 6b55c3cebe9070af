import EvanescoCore
import EvanescoIO
import Foundation
import Logging
import PostgresNIO

/// A dedicated connection that LISTENs to a queue's channel; reconnects after the database
/// restarts. Notifications only shorten a wait: the worker polls as well.
public final class Listener: @unchecked Sendable {
    let queue: JobQueue
    let wake = WakeSignal()
    var task: Task<Void, Never>?

    init(queue: JobQueue) {
        self.queue = queue
    }

    /// Starts listening in the background.
    public func start() {
        let queue = self.queue
        // A strong capture: stop() ends the task, which then lets go of the listener.
        task = Task { [self] in
            var id = 1, failures = 0
            while !Task.isCancelled {
                do {
                    let configuration = try queue.address.connectionConfiguration(), logger = queue.logger
                    let connection = try await withDeadline(
                        queue.address.timeout,
                        expired: {
                            QueueError.unresponsive(address: queue.address.description, seconds: queue.address.timeout)
                        },
                        abandoned: { late in Task { try? await late.close() } }
                    ) { [id] in
                        try await PostgresConnection.connect(configuration: configuration, id: id, logger: logger)
                    }
                    id += 1
                    // Closed here, not by a task of its own that could outlive the listener.
                    do {
                        try await connection.listen(on: queue.channel) { notifications in
                            for try await _ in notifications { self.fire() }
                        }
                    } catch {
                        try? await connection.close()
                        throw error
                    }
                    try? await connection.close()
                    failures = 0
                } catch {
                    if Task.isCancelled { return }
                    failures += 1
                    try? await Task.sleep(for: .seconds(RetryPolicy.database.delay(afterFailure: failures)))
                }
            }
        }
    }

    /// Stops listening, and returns when the connection is closed.
    public func stop() async {
        task?.cancel()
        fire()
        await task?.value
    }

    func fire() { wake.fire() }

    /// Returns at the next notification or after `seconds`.
    public func wait(seconds: Double) async { await wake.wait(seconds: seconds) }
}
