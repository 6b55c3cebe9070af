import Dispatch
import Foundation

/// The one parallel executor hot loops use: it splits a row range into horizontal strips and runs
/// them on all cores. Kernels describe *what* they compute for a strip of rows; this type decides
/// *how* the strips are scheduled (Halide's split of algorithm and schedule).
public enum StripExecutor {
    /// Worker count; defaults to the active processor count. Set to 1 to run serially.
    nonisolated(unsafe) public static var threadCount: Int = max(1, ProcessInfo_activeProcessorCount())

    /// Runs `body` once for each index of `range` on up to `workers` threads, each taking the
    /// next index when it finishes the last (so items of uneven cost balance). Once `stop`
    /// returns true no further index is handed out.
    ///
    /// While two or more items run at once, each already has a core: strips that an item's own
    /// loops ask for (``forEachStrip(rows:minimumRows:_:)``) run on its thread, in order, instead
    /// of waking further threads to share the same cores. Once the items have run out and an
    /// item is left running alone (the last frame of an odd number), its strips spread over the
    /// idle cores again.
    public static func forEachIndex(
        in range: Range<Int>, workers: Int, until stop: @Sendable () -> Bool = { false },
        _ body: @Sendable (Int) -> Void
    ) {
        guard !range.isEmpty else { return }
        let next = LockedBox(range.lowerBound)
        let parallel = min(workers, range.count) > 1
        let group = ItemGroup(running: 0)
        DispatchQueue.concurrentPerform(iterations: max(1, min(workers, range.count))) { _ in
            let outer = ItemThread.group
            if parallel { ItemThread.group = group }
            defer { if parallel { ItemThread.group = outer } }
            while !stop() {
                let i = next.update { v -> Int in
                    defer { v += 1 }
                    return v
                }
                guard i < range.upperBound else { break }
                group.add(1)
                body(i)
                group.add(-1)
            }
        }
    }

    /// Runs `body` as one of several items running at once on threads of their own (as
    /// ``forEachIndex(in:workers:until:_:)``'s are): the strips its loops ask for run on this
    /// thread.
    public static func asItem<R>(_ body: () throws -> R) rethrows -> R {
        let outer = ItemThread.group
        ItemThread.group = ItemGroup.others
        defer { ItemThread.group = outer }
        return try body()
    }

    /// Runs `body` over disjoint strips covering `0..<rows`. Strips hold at least
    /// `minimumRows` rows; there are a few strips per thread so uneven strips balance out.
    /// `body` must only write to rows of its own strip.
    @inlinable
    public static func forEachStrip(rows: Int, minimumRows: Int = 16, _ body: (Range<Int>) -> Void) {
        guard rows > 0 else { return }
        let threads = threadCount
        let strips = max(1, min(threads * 4, rows / max(1, minimumRows)))
        let group = ItemThread.group
        if threads == 1 || strips == 1 || group?.othersRunning == true {
            body(0..<rows)
            return
        }
        withoutActuallyEscaping(body) { body in
            guard group != nil else {
                let box = UncheckedSendable(body)
                DispatchQueue.concurrentPerform(iterations: strips) { s in
                    let r = strip(s, of: strips, rows: rows)
                    if !r.isEmpty { box.value(r) }
                }
                return
            }
            // An item left running alone: inside forEachIndex's concurrentPerform a nested one
            // would run on this thread only (libdispatch divides the outer width), and the global
            // queue's threads may all be taken; so threads of their own take strips beside this
            // one (tens of microseconds to start, against milliseconds of strips), and every
            // strip is done before this returns.
            let job = StripJob(body, rows: rows, strips: strips), done = DispatchSemaphore(value: 0)
            for _ in 1..<threads {
                Thread {
                    job.take()
                    done.signal()
                }.start()
            }
            job.take()
            for _ in 1..<threads { done.wait() }
            // The threads' closures hold the job, not the body: dropped here, the body does not
            // outlive this call (withoutActuallyEscaping checks).
            job.body = nil
        }
    }
}

extension StripExecutor {
    /// `count` elements from `start` set to `value`, on every thread: a fresh allocation's pages
    /// are zeroed by the kernel as they are first touched, which one thread alone does at a
    /// fraction of the machine's speed (tens of megabytes: tens of milliseconds). Inlinable, so
    /// that callers get it for their element type: unspecialised, each element was set through
    /// its type's value witness, one call per element.
    @inlinable
    public static func initialize<T>(_ start: UnsafeMutablePointer<T>, repeating value: T, count: Int) {
        let chunk = 1 << 16, shared = UncheckedSendable(start), v = UncheckedSendable(value)
        forEachStrip(rows: (count + chunk - 1) / chunk, minimumRows: 1) { r in
            let lo = r.lowerBound * chunk, hi = min(count, r.upperBound * chunk)
            (shared.value + lo).initialize(repeating: v.value, count: hi - lo)
        }
    }

    /// Rows of strip `s` of `strips` covering `0..<rows`.
    @inlinable @inline(__always)
    static func strip(_ s: Int, of strips: Int, rows: Int) -> Range<Int> {
        (rows * s / strips)..<(rows * (s + 1) / strips)
    }
}

/// The strips of a lone item's ``StripExecutor/forEachStrip(rows:minimumRows:_:)``, for the
/// threads that share them.
@usableFromInline
final class StripJob: @unchecked Sendable {
    @usableFromInline var body: ((Range<Int>) -> Void)?
    let rows: Int, strips: Int
    private let next = LockedBox(0)
    @usableFromInline init(_ body: @escaping (Range<Int>) -> Void, rows: Int, strips: Int) {
        self.body = body
        self.rows = rows
        self.strips = strips
    }
    /// Runs strips until none is left.
    @usableFromInline func take() {
        guard let body else { return }
        while true {
            let s = next.update { v -> Int in
                defer { v += 1 }
                return v
            }
            guard s < strips else { return }
            let r = StripExecutor.strip(s, of: strips, rows: rows)
            if !r.isEmpty { body(r) }
        }
    }
}

/// The items of one ``StripExecutor/forEachIndex(in:workers:until:_:)`` run: how many are
/// running at this moment.
@usableFromInline
final class ItemGroup: @unchecked Sendable {
    private let lock = NSLock()
    private var running: Int
    init(running: Int) { self.running = running }

    /// A group whose other items always run: ``StripExecutor/asItem(_:)``'s, whose siblings it
    /// cannot see.
    static let others = ItemGroup(running: 2)

    func add(_ n: Int) {
        lock.lock()
        running += n
        lock.unlock()
    }

    /// Whether items other than the caller's are running (the caller's own is one of them).
    @usableFromInline var othersRunning: Bool {
        lock.lock()
        defer { lock.unlock() }
        return running > 1
    }
}

/// The item group this thread runs an item of, if any (a thread-local value).
@usableFromInline
enum ItemThread {
    static let key: pthread_key_t = {
        var k = pthread_key_t()
        pthread_key_create(&k, nil)
        return k
    }()
    /// Set only for the duration of the run that holds the group.
    @usableFromInline static var group: ItemGroup? {
        get { pthread_getspecific(key).map { Unmanaged<ItemGroup>.fromOpaque($0).takeUnretainedValue() } }
        set { pthread_setspecific(key, newValue.map { UnsafeRawPointer(Unmanaged.passUnretained($0).toOpaque()) }) }
    }
}

#if canImport(Glibc)
    import Glibc
#endif

@usableFromInline
func ProcessInfo_activeProcessorCount() -> Int {
    #if canImport(Glibc)
        return Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
    #else
        return 1
    #endif
}
