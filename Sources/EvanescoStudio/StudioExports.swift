import EvanescoCore
import Foundation

/// The studio's temporary folder for exports (downloads): each file is deleted once it has been
/// sent, or after ``maxAge`` if nobody fetched it, and the folder never holds more than
/// ``maxBytes`` (the oldest files go first). Nothing piles up while the studio runs.
final class ExportShelf: Sendable {
    let directory: String
    /// Seconds an unfetched export is kept.
    let maxAge: TimeInterval
    /// Bytes the folder may hold.
    let maxBytes: Int

    init(directory: String, maxAge: TimeInterval, maxBytes: Int) {
        self.directory = directory
        self.maxAge = maxAge
        self.maxBytes = maxBytes
    }

    /// A new path for an export named `name` (the name is only kept for the download).
    func path(for name: String) -> String {
        directory + "/" + UUID().uuidString.prefix(8) + "-" + name
    }

    /// The file's bytes, read once for the response; the file is deleted.
    func take(_ path: String) -> Data? {
        defer { unlink(path) }
        return FileManager.default.contents(atPath: path)
    }

    /// Deletes exports older than ``maxAge``, then the oldest until the folder is within
    /// ``maxBytes`` (keeping `keep`, the export being made). Returns how many were deleted.
    @discardableResult
    func sweep(now: Date = Date(), keeping keep: String? = nil) -> Int {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return 0 }
        var files: [(path: String, modified: Date, bytes: Int)] = []
        // Hidden files are exports still being written (their writer renames or removes them).
        for n in names where !n.hasPrefix(".") {
            let p = directory + "/" + n
            var st = stat()
            guard lstat(p, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { continue }
            files.append((p, Date(timeIntervalSince1970: TimeInterval(st.st_mtim.tv_sec)), Int(st.st_size)))
        }
        var removed = 0
        files.sort { $0.modified < $1.modified }
        var kept: [(path: String, modified: Date, bytes: Int)] = []
        for f in files {
            if f.path != keep && now.timeIntervalSince(f.modified) > maxAge {
                unlink(f.path)
                removed += 1
            } else {
                kept.append(f)
            }
        }
        var total = kept.reduce(0) { $0 + $1.bytes }
        for f in kept where total > maxBytes && f.path != keep {
            unlink(f.path)
            removed += 1
            total -= f.bytes
        }
        return removed
    }
}

/// The studio's temporary folders: `evanesco-studio-XXXXXX` in the temporary directory, each with
/// an `owner` file naming the process that made it (pid and its start time, so a reused pid is
/// not taken for the owner). A studio that was killed (SIGKILL, a crash, a power cut) cannot
/// remove its folder; the next studio to start removes every folder whose owner is gone.
enum StudioFolders {
    static let prefix = "evanesco-studio-"

    /// This process's identity: pid and start time (clock ticks after boot, from /proc).
    static func identity(of pid: pid_t) -> String? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        // Fields after the command name: state is field 3; start time is field 22.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 19 else { return nil }
        return "\(pid) \(fields[19])"
    }

    /// Makes a new folder and writes its owner file.
    static func make(in temporary: String) throws -> String {
        var template = Array((temporary + "/" + prefix + "XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else {
            throw StudioError.badOption(
                "cannot create a temporary folder in \(temporary) (\(String(cString: strerror(errno))))")
        }
        let dir = String(cString: made)
        let me = identity(of: getpid()) ?? "\(getpid())"
        guard FileManager.default.createFile(atPath: dir + "/owner", contents: Data(me.utf8)) else {
            try? FileManager.default.removeItem(atPath: dir)
            throw StudioError.badOption("cannot write in the temporary folder \(dir)")
        }
        return dir
    }

    /// Removes the folders of studios that are no longer running (only this user's, only names
    /// of our exact form). A folder without an owner file is removed once it is a day old.
    /// Returns the folders removed.
    @discardableResult
    static func removeStale(in temporary: String, now: Date = Date()) -> [String] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: temporary) else { return [] }
        var removed: [String] = []
        for n in names where n.hasPrefix(prefix) && n.count == prefix.count + 6 {
            let dir = temporary + "/" + n
            var st = stat()
            guard lstat(dir, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR, st.st_uid == getuid() else { continue }
            let stale: Bool
            if let owner = try? String(contentsOfFile: dir + "/owner", encoding: .utf8) {
                let pid = pid_t(owner.split(separator: " ").first.flatMap { Int32($0) } ?? 0)
                stale = pid <= 0 || identity(of: pid) != owner.trimmingCharacters(in: .whitespacesAndNewlines)
            } else {
                stale = now.timeIntervalSince1970 - TimeInterval(st.st_mtim.tv_sec) > 86_400
            }
            if stale, (try? FileManager.default.removeItem(atPath: dir)) != nil { removed.append(dir) }
        }
        return removed
    }
}
