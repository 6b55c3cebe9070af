import Foundation

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
    public var value: T {
        lock.lock()
        defer { lock.unlock() }
        return v
    }
    /// Changes the value under the lock.
    ///
    /// - Parameter body: The change.
    /// - Returns: What `body` returns.
    @discardableResult
    public func update<R>(_ body: (inout T) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&v)
    }
}

/// Objects that strips borrow and hand back: a loop of many strips on a few threads then makes
/// as many as run at once, not one per strip (the stacker's per-frame row caches: 3.6 MB, zeroed,
/// for 51 frames, made for each of 8 merge strips and 12 noise bands on highway).
public final class ReusePool<T>: @unchecked Sendable {
    private var free: [T] = [], made: [T] = []
    private let lock = NSLock()
    private let make: () -> T

    /// - Parameter make: Makes an object when none is free (on the borrowing thread).
    public init(_ make: @escaping () -> T) { self.make = make }

    /// Runs `body` with a free object (made when there is none), then frees it again.
    public func borrow<R>(_ body: (T) throws -> R) rethrows -> R {
        lock.lock()
        let item = free.popLast()
        lock.unlock()
        let x: T
        if let item {
            x = item
        } else {
            x = make()
            lock.lock()
            made.append(x)
            lock.unlock()
        }
        defer {
            lock.lock()
            free.append(x)
            lock.unlock()
        }
        return try body(x)
    }

    /// Every object made so far (to release what they hold once no strip runs).
    public var all: [T] {
        lock.lock()
        defer { lock.unlock() }
        return made
    }
}
