import Dispatch
import EvanescoCore
import EvanescoStack
import Foundation
import Hummingbird

/// Where a workspace's heavy work runs: one job at a time, the rest wait their turn, and none of
/// it on the server's own threads (which keep answering, streaming progress and serving files).
final class WorkLane: Sendable {
    let name: String
    private let queue: DispatchQueue
    private let waiting = LockedBox(0)

    init(_ name: String) {
        self.name = name
        queue = DispatchQueue(label: "evanesco.studio.\(name)", qos: .userInitiated)
    }

    /// Jobs queued or running.
    var load: Int { waiting.value }

    /// Runs `work` after the lane's earlier jobs and returns what it returns (or throws).
    func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        waiting.update { $0 += 1 }
        return try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, Error>) in
            queue.async {
                let r = Result { try work() }
                self.waiting.update { $0 -= 1 }
                c.resume(with: r)
            }
        }
    }

    /// Starts `work` after the lane's earlier jobs without waiting for it.
    func start(_ work: @escaping @Sendable () -> Void) {
        waiting.update { $0 += 1 }
        queue.async {
            work()
            self.waiting.update { $0 -= 1 }
        }
    }
}

/// What a job tells the page, as server-sent events.
struct JobEvent: Codable, Sendable {
    /// `queued`, `started`, `progress`, `done`, `error`, `cancelled`.
    var type: String
    var stage: String?
    var done: Int?
    var total: Int?
    var elapsed: Double?
    /// Seconds left at the current rate.
    var remaining: Double?
    var message: String?
}

/// A long piece of work the page follows (a stack, an export): its events, its cancel flag and,
/// once done, what can be downloaded.
final class StudioJob: Sendable {
    let id: String
    let workspace: String
    let cancellation = StackCancellation()
    private let state = LockedBox((events: [JobEvent](), finished: false, download: StudioDownload?.none))

    init(id: String, workspace: String) {
        self.id = id
        self.workspace = workspace
    }

    func post(_ e: JobEvent) {
        state.update { s in
            guard !s.finished else { return }
            s.events.append(e)
            if ["done", "error", "cancelled"].contains(e.type) { s.finished = true }
        }
    }

    func events(from index: Int) -> (events: [JobEvent], finished: Bool) {
        state.update { s in (index < s.events.count ? Array(s.events[index...]) : [], s.finished) }
    }

    var finished: Bool { state.value.finished }
    var last: JobEvent? { state.value.events.last }
    var download: StudioDownload? {
        get { state.value.download }
        set { state.update { $0.download = newValue } }
    }

    /// Progress from the library's callback, with time left.
    func progress(_ p: StackProgress) {
        post(
            JobEvent(
                type: "progress", stage: p.stage.rawValue, done: p.done, total: p.total, elapsed: p.elapsed,
                remaining: p.remaining))
    }

    /// Server-sent events from the first one on; ends when the job has finished.
    func eventStream() -> ResponseBody {
        ResponseBody { writer in
            var next = 0
            var idle = 0
            while true {
                let (events, finished) = self.events(from: next)
                for e in events {
                    let json = try ReportJSON.line(e)
                    try await writer.write(ByteBuffer(string: "event: \(e.type)\ndata: \(json)\n\n"))
                }
                next += events.count
                if finished && events.isEmpty { break }
                if events.isEmpty {
                    idle += 1
                    if idle % 100 == 0 { try await writer.write(ByteBuffer(string: ": still working\n\n")) }
                } else {
                    idle = 0
                }
                try await Task.sleep(for: .milliseconds(80))
            }
            try await writer.finish(nil)
        }
    }
}

/// A file a job wrote for the page to download.
struct StudioDownload: Sendable {
    var path: String
    var name: String
    var contentType: String
}

/// Every job and session by id.
final class StudioRegistry<Value: Sendable>: Sendable {
    private let items = LockedBox([String: Value]())
    private let counter = LockedBox(0)
    let prefix: String

    init(prefix: String) { self.prefix = prefix }

    func add(_ make: (String) throws -> Value) rethrows -> Value {
        let id =
            prefix
            + String(
                counter.update {
                    $0 += 1
                    return $0
                })
        let v = try make(id)
        items.update { $0[id] = v }
        return v
    }

    func get(_ id: String?) throws -> Value {
        guard let id, let v = items.value[id] else { throw HTTPError(.notFound, message: "no \(prefix) \(id ?? "")") }
        return v
    }

    var all: [Value] { Array(items.value.values) }

    /// Keeps the newest `count` (sessions hold decoded photos; old ones are let go).
    func keep(newest count: Int) {
        items.update { d in
            let ids = d.keys.sorted { Int($0.dropFirst(prefix.count)) ?? 0 < Int($1.dropFirst(prefix.count)) ?? 0 }
            for id in ids.dropLast(count) { d[id] = nil }
        }
    }
}
