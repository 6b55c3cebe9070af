import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Paths as the file system resolves them: every symbolic link and `..` of the part that exists
/// resolved, the rest appended as written. Two names of one file (`out/j1.jpg` and
/// `out2/j1.jpg` with `out2` a link to `out`) have one real path.
public enum RealPath {
    /// The real path of `path` (absolute, or relative to the working folder).
    public static func of(_ path: String) -> String {
        var existing = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        var tail: [String] = []
        while true {
            if let resolved = realpath(existing, nil) {
                defer { free(resolved) }
                var base = String(cString: resolved)
                // The part that does not exist yet: `.` and `..` taken as written.
                for part in tail {
                    if part == "." || part.isEmpty { continue }
                    if part == ".." {
                        base = (base as NSString).deletingLastPathComponent
                        continue
                    }
                    base = base == "/" ? "/" + part : base + "/" + part
                }
                return base
            }
            let parent = (existing as NSString).deletingLastPathComponent
            if parent == existing || parent.isEmpty { return URL(fileURLWithPath: path).standardizedFileURL.path }
            tail.insert((existing as NSString).lastPathComponent, at: 0)
            existing = parent
        }
    }

    /// Whether real path `path` is `folder` or inside it.
    public static func isWithin(_ path: String, _ folder: String) -> Bool {
        path == folder || folder == "/" || path.hasPrefix(folder + "/")
    }
}

/// What a run must never write over, whatever `--force` says: inputs (files, and everything
/// inside an input folder), manifests, receipts and state folders. Every path is kept as its
/// real path, so a symbolic link or a `..` cannot make an input look like an output.
public struct ProtectedPaths: Sendable {
    /// Real path -> what it is ("an input of job b1", "the manifest").
    var exact: [String: String] = [:]
    /// The real paths, sorted, for "holds": made on first use after a change.
    private let sorted = SortedCache()

    public init() {}

    /// Protects `path` (a file, or a folder and everything in it) as `what`.
    public mutating func protect(_ path: String, as what: String) {
        let real = RealPath.of(path)
        if exact[real] == nil {
            exact[real] = what
            sorted.invalidate()
        }
    }

    /// Why `output` may not be written (it is protected, lies inside a protected folder, or, when
    /// `replacedWhole`, is a folder that holds something protected: placing a folder output
    /// replaces it whole), or nil. Costs a look-up per folder of the output's path and a binary
    /// search, so a manifest of a million jobs is checked in seconds.
    public func refusal(forOutput output: String, replacedWhole: Bool = true) -> String? {
        let real = RealPath.of(output)
        if let what = exact[real] { return "it is \(what)" + (real != output ? " (\(real))" : "") }
        var folder = real
        while folder != "/" && !folder.isEmpty {
            folder = (folder as NSString).deletingLastPathComponent
            if let what = exact[folder] { return "it is inside \(folder), \(what); write outputs to another folder" }
        }
        if replacedWhole, let inside = sorted.first(after: real + "/", in: exact) {
            return "it holds \(inside), \(exact[inside]!); write outputs to another folder"
        }
        return nil
    }

    /// The sorted keys of `exact`, kept between look-ups.
    private final class SortedCache: @unchecked Sendable {
        let lock = NSLock()
        var keys: [String]?

        func invalidate() { lock.withLock { keys = nil } }

        /// The first path that starts with `prefix`, if any.
        func first(after prefix: String, in exact: [String: String]) -> String? {
            let keys = lock.withLock {
                if self.keys == nil || self.keys!.count != exact.count { self.keys = exact.keys.sorted() }
                return self.keys!
            }
            var lo = 0, hi = keys.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if keys[mid] < prefix { lo = mid + 1 } else { hi = mid }
            }
            return lo < keys.count && keys[lo].hasPrefix(prefix) ? keys[lo] : nil
        }
    }
}
