import EvanescoCore
import EvanescoIO
import Foundation
import Logging
import PostgresNIO

/// A wake-up that one side fires and the other waits for, with a timeout.
///
/// A fire while nobody waits is kept for the next wait, so a job that finishes between a claim
/// and the wait does not cost a whole poll interval. Each wait's continuation is resumed exactly
/// once, by whichever of the fire and the timer takes it out first: a timer that fires before
/// the wait has registered cannot leave it waiting for a notification that never comes.
public final class WakeSignal: @unchecked Sendable {
    let state = LockedBox<(waiters: [Int: CheckedContinuation<Void, Never>], missed: Bool, next: Int)>(([:], false, 0))

    public init() {}

    /// Wakes every waiter, or the next wait when nobody waits.
    public func fire() {
        let waiting = state.update { w in
            defer { w.waiters = [:] }
            if w.waiters.isEmpty { w.missed = true }
            return Array(w.waiters.values)
        }
        for c in waiting { c.resume() }
    }

    /// Returns at the next ``fire()`` (or at once if one came while nobody waited), or after
    /// `seconds`, whichever is first.
    public func wait(seconds: Double) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let id: Int? = state.update { w in
                if w.missed {
                    w.missed = false
                    return nil
                }
                w.next += 1
                w.waiters[w.next] = c
                return w.next
            }
            guard let id else { return c.resume() }
            let delay = seconds.isFinite ? max(0, min(seconds, 86_400)) : 86_400
            timerQueue.asyncAfter(deadline: .now() + delay) {
                self.state.update { $0.waiters.removeValue(forKey: id) }?.resume()
            }
        }
    }
}

/// Runs `body` in a task of its own and returns its result, or throws `expired()` once `seconds`
/// have passed, whichever comes first. On expiry the task is cancelled and not waited for (an
/// operation stuck where cancellation does not reach cannot hold the caller); a value it still
/// produces afterwards goes to `abandoned`.
func withDeadline<T: Sendable>(
    _ seconds: Double, expired: @escaping @Sendable () -> any Error,
    abandoned: @escaping @Sendable (T) -> Void = { _ in }, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let waiting = LockedBox<CheckedContinuation<T, any Error>?>(nil)
    @Sendable func take() -> CheckedContinuation<T, any Error>? {
        waiting.update { w in
            defer { w = nil }
            return w
        }
    }
    return try await withCheckedThrowingContinuation { c in
        waiting.update { $0 = c }
        let work = Task {
            do {
                let value = try await body()
                if let c = take() { c.resume(returning: value) } else { abandoned(value) }
            } catch {
                take()?.resume(throwing: error)
            }
        }
        timerQueue.asyncAfter(deadline: .now() + max(0, seconds)) {
            guard let c = take() else { return }
            work.cancel()
            c.resume(throwing: expired())
        }
    }
}

/// Where the queue's timers run: a queue of their own, so they fire on time while the global
/// queue's threads are all busy with image work (on the global queue a 0.2 s wait was seen to
/// take 18 s during a parallel test run).
let timerQueue = DispatchQueue(label: "evanesco.queue-timers")
