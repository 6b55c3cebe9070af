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
    /// of waking further threads to share the same cores.
    public static func forEachIndex(in range: Range<Int>, workers: Int, until stop: @Sendable () -> Bool = { false },
                                    _ body: @Sendable (Int) -> Void) {
        guard !range.isEmpty else { return }
        let next = LockedBox(range.lowerBound)
        let parallel = min(workers, range.count) > 1
        DispatchQueue.concurrentPerform(iterations: max(1, min(workers, range.count))) { _ in
            let outer = ItemThread.isSet
            if parallel { ItemThread.isSet = true }
            defer { if parallel { ItemThread.isSet = outer } }
            while !stop() {
                let i = next.update { v -> Int in defer { v += 1 }; return v }
                guard i < range.upperBound else { break }
                body(i)
            }
        }
    }

    /// Runs `body` as one of several items running at once on threads of their own (as
    /// ``forEachIndex(in:workers:until:_:)``'s are): the strips its loops ask for run on this
    /// thread.
    public static func asItem<R>(_ body: () throws -> R) rethrows -> R {
        let outer = ItemThread.isSet
        ItemThread.isSet = true
        defer { ItemThread.isSet = outer }
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
        if threads == 1 || strips == 1 || ItemThread.isSet {
            body(0..<rows)
            return
        }
        withoutActuallyEscaping(body) { body in
            let box = UncheckedSendable(body)
            DispatchQueue.concurrentPerform(iterations: strips) { s in
                let lo = rows * s / strips, hi = rows * (s + 1) / strips
                if lo < hi { box.value(lo..<hi) }
            }
        }
    }
}

/// Whether this thread runs an item of a parallel ``StripExecutor/forEachIndex(in:workers:until:_:)``
/// (a thread-local flag).
@usableFromInline
enum ItemThread {
    static let key: pthread_key_t = {
        var k = pthread_key_t()
        pthread_key_create(&k, nil)
        return k
    }()
    @usableFromInline static var isSet: Bool {
        get { pthread_getspecific(key) != nil }
        set { pthread_setspecific(key, newValue ? UnsafeRawPointer(bitPattern: 1) : nil) }
    }
}

/// Wraps a value that is safe to share for the duration of a strip run (each strip writes to its
/// own rows) but that the type system cannot prove Sendable, such as buffer pointers.
public struct UncheckedSendable<T>: @unchecked Sendable {
    /// The wrapped value.
    public let value: T
    /// - Parameter value: The value to share.
    @inlinable public init(_ value: T) { self.value = value }
}

/// A value shared between strips or threads, read and changed under a lock.
public final class LockedBox<T>: @unchecked Sendable {
    private var v: T
    private let lock = NSLock()
    /// - Parameter v: The initial value.
    public init(_ v: T) { self.v = v }
    /// The current value, read under the lock.
    public var value: T { lock.lock(); defer { lock.unlock() }; return v }
    /// Changes the value under the lock.
    ///
    /// - Parameter body: The change.
    /// - Returns: What `body` returns.
    @discardableResult
    public func update<R>(_ body: (inout T) -> R) -> R { lock.lock(); defer { lock.unlock() }; return body(&v) }
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
