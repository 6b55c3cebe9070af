import EvanescoBatch
import EvanescoCore
import Foundation
import Testing

/// The worker's wake-up: its main loop waits on it between claims, so a wait that never
/// returns is a worker that stops claiming (seen: a worker silent for minutes after a database
/// restart, when its timer fired before the wait had registered).
@Suite struct WakeSignalTests {
    /// Runs `body` in a task and reports whether it finished within `seconds`.
    func finishes(within seconds: Double, _ body: @escaping @Sendable () async -> Void) async -> Bool {
        let done = LockedBox(false)
        Task {
            await body()
            done.update { $0 = true }
        }
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if done.value { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return done.value
    }

    @Test func aTimerThatFiresFirstStillEndsTheWait() async {
        // Zero-second waits: the timer is due before the wait has registered.
        let signal = WakeSignal()
        #expect(
            await finishes(within: 600) {
                for _ in 0..<3000 { await signal.wait(seconds: 0) }
            }, "a zero-second wait did not return")
    }

    // Upper bounds on time are loose: in a parallel test run the cooperative threads that resume
    // these tests can be busy for tens of seconds with other suites' image work.
    @Test func aFireWithNobodyWaitingIsKeptForTheNextWaitOnly() async {
        let signal = WakeSignal()
        signal.fire()
        #expect(
            await finishes(within: 600) { await signal.wait(seconds: 3600) },
            "the kept fire did not end the wait (its timeout is an hour)")
        let start = Date()
        await signal.wait(seconds: 0.2)
        let waited = Date().timeIntervalSince(start)
        #expect(waited >= 0.19, "the fire was used up: the next wait runs to its timeout (\(waited) s)")
    }

    @Test func aFireWakesEveryWaiter() async {
        let signal = WakeSignal()
        let woken = LockedBox(0)
        for _ in 0..<4 {
            Task {
                await signal.wait(seconds: 3600)
                woken.update { $0 += 1 }
            }
        }
        try? await Task.sleep(for: .milliseconds(200))
        let start = Date()
        signal.fire()
        while woken.value < 4 && Date().timeIntervalSince(start) < 600 { try? await Task.sleep(for: .milliseconds(5)) }
        #expect(woken.value == 4, "a fire did not wake every waiter (their timeout is an hour)")
    }

    @Test func manyWaitersAndFiresNeverLoseAWait() async {
        // Waiters with short timeouts race fires from another task; every wait must return.
        let signal = WakeSignal()
        let firing = Task {
            while !Task.isCancelled {
                signal.fire()
                try? await Task.sleep(for: .microseconds(300))
            }
        }
        #expect(
            await finishes(within: 600) {
                await withTaskGroup(of: Void.self) { group in
                    for w in 0..<6 {
                        group.addTask {
                            for i in 0..<400 { await signal.wait(seconds: Double((i + w) % 3) * 0.001) }
                        }
                    }
                }
            })
        firing.cancel()
        await firing.value
    }
}
