import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Writes outputs so that a reader never sees a partial file and nothing is overwritten by
/// accident: the content goes to a hidden temporary file in the destination folder, which is then
/// renamed into place (or, without `overwrite`, hard-linked, which fails atomically if the name
/// was taken meanwhile). On any error the temporary file is removed.
public enum AtomicOutput {
    /// Calls `produce` with a temporary path in the destination's folder; on success moves it to
    /// `path`. Throws `outputExists` before doing any work when `path` exists and `!overwrite`.
    public static func write(to path: String, overwrite: Bool, _ produce: (String) throws -> Void) throws {
        let url = URL(fileURLWithPath: path)
        let dir = try checkFile(path, overwrite: overwrite)
        // Hidden, in the same folder (so rename is atomic), keeping the extension so that tools
        // which pick a format from the name (ffmpeg) still can.
        let ext = url.pathExtension.isEmpty ? "tmp" : url.pathExtension
        let temp = dir + "/." + url.deletingPathExtension().lastPathComponent + ".evanesco-\(UUID().uuidString.prefix(8)).\(ext)"
        Cleanup.add(file: temp)
        defer { unlink(temp); Cleanup.remove(file: temp) }
        try produce(temp)
        if overwrite {
            guard rename(temp, path) == 0 else { throw ImageIOError.cannotWrite(path: path, reason: String(cString: strerror(errno))) }
        } else {
            if link(temp, path) != 0 {
                let e = errno
                if e == EEXIST { throw ImageIOError.outputExists(path: path) }
                // File systems without hard links: fall back to a checked rename.
                if FileManager.default.fileExists(atPath: path) { throw ImageIOError.outputExists(path: path) }
                guard rename(temp, path) == 0 else { throw ImageIOError.cannotWrite(path: path, reason: String(cString: strerror(errno))) }
            }
        }
    }

    /// Checks every output of a run together, before any work, so that a refusal never comes
    /// after something was written: each file's folder exists, no output is a folder, an input,
    /// or another output, and none exists unless `overwrite`; each directory output is a folder
    /// or can be made.
    ///
    /// - Parameters:
    ///   - files: Output files (nil entries are ignored; `-` is standard output).
    ///   - directories: Output folders.
    ///   - inputs: Files the run reads; an output may never be one of them, even with `overwrite`.
    ///   - overwrite: Whether existing output files may be replaced.
    /// - Throws: `ImageIOError.outputExists`, `.outputIsInput` or `.cannotWrite`.
    public static func check(files: [String?], directories: [String?] = [], inputs: [String], overwrite: Bool) throws {
        let outs = files.compactMap { $0 }.filter { $0 != "-" }
        let dirs = directories.compactMap { $0 }
        func identity(_ p: String) -> String {
            var st = stat()
            if stat(p, &st) == 0 { return "\(st.st_dev):\(st.st_ino)" }
            return URL(fileURLWithPath: p).standardizedFileURL.path
        }
        let inputIDs = Set(InputFile.expandedQuietly(inputs).map(identity))
        var seen: [String: String] = [:]
        for p in outs + dirs {
            let id = identity(p)
            if inputIDs.contains(id) { throw ImageIOError.outputIsInput(path: p) }
            if let other = seen[id] { throw ImageIOError.cannotWrite(path: p, reason: "it is also given as the output \(other)") }
            seen[id] = p
        }
        for p in outs {
            let dir = try checkFile(p, overwrite: overwrite)
            guard access(dir, W_OK) == 0 else { throw ImageIOError.cannotWrite(path: p, reason: "folder \(dir) is not writable") }
        }
        for d in dirs {
            var isDir: ObjCBool = false
            if FileManager.default.fileExists(atPath: d, isDirectory: &isDir) {
                if !isDir.boolValue { throw ImageIOError.cannotWrite(path: d, reason: "it is a file, not a folder") }
            } else {
                let parent = URL(fileURLWithPath: d).deletingLastPathComponent().path
                guard FileManager.default.fileExists(atPath: parent, isDirectory: &isDir), isDir.boolValue else {
                    throw ImageIOError.cannotWrite(path: d, reason: "folder \(parent) does not exist")
                }
            }
        }
    }

    /// The one check of an output file: its folder exists, it is not a folder, and it does not
    /// exist unless `overwrite`. Returns the folder.
    static func checkFile(_ path: String, overwrite: Bool) throws -> String {
        let dir = URL(fileURLWithPath: path).deletingLastPathComponent().path
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: dir, isDirectory: &isDir), isDir.boolValue else {
            throw ImageIOError.cannotWrite(path: path, reason: "folder \(dir) does not exist")
        }
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDir) {
            if isDir.boolValue { throw ImageIOError.cannotWrite(path: path, reason: "it is a directory") }
            if !overwrite { throw ImageIOError.outputExists(path: path) }
        }
        return dir
    }

    /// Writes bytes atomically.
    public static func write(_ bytes: [UInt8], to path: String, overwrite: Bool) throws {
        try write(to: path, overwrite: overwrite) { temp in
            guard FileManager.default.createFile(atPath: temp, contents: Data(bytes)) else {
                throw ImageIOError.cannotWrite(path: path, reason: "could not create a file in its folder")
            }
        }
    }
}

/// Reads a whole input file with clear errors (never modifies it).
public enum InputFile {
    /// Expands folders into their files, sorted by name (hidden files ignored).
    public static func expand(_ inputs: [String]) throws -> [String] {
        var out: [String] = []
        for input in inputs {
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: input, isDirectory: &isDir) else { throw ImageIOError.fileNotFound(path: input) }
            if isDir.boolValue {
                let names = try FileManager.default.contentsOfDirectory(atPath: input).filter { !$0.hasPrefix(".") }.sorted()
                let files = names.map { (input as NSString).appendingPathComponent($0) }.filter {
                    var d: ObjCBool = false
                    return FileManager.default.fileExists(atPath: $0, isDirectory: &d) && !d.boolValue
                }
                if files.isEmpty { throw ImageIOError.unreadable(path: input, reason: "the folder holds no files") }
                out += files
            } else {
                out.append(input)
            }
        }
        return out
    }

    /// Like ``expand(_:)``, but keeps what cannot be listed as it is (for checks, not for reading).
    static func expandedQuietly(_ inputs: [String]) -> [String] {
        inputs.flatMap { (try? expand([$0])) ?? [$0] }
    }

    /// Reads a whole input file, refusing what is not a regular file (a folder, a FIFO, a device).
    ///
    /// - Parameter path: The file.
    /// - Returns: Its bytes.
    /// - Throws: `ImageIOError.fileNotFound` or `.unreadable` with the reason.
    public static func read(_ path: String) throws -> [UInt8] {
        var st = stat()
        guard stat(path, &st) == 0 else {
            if errno == ENOENT { throw ImageIOError.fileNotFound(path: path) }
            throw ImageIOError.unreadable(path: path, reason: String(cString: strerror(errno)))
        }
        guard (st.st_mode & S_IFMT) == S_IFREG else { throw ImageIOError.notAFile(path: path) }
        guard st.st_size > 0 else { throw ImageIOError.emptyFile(path: path) }
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw ImageIOError.unreadable(path: path, reason: String(cString: strerror(errno))) }
        defer { close(fd) }
        let size = Int(st.st_size)
        var bytes = [UInt8](repeating: 0, count: size)
        var got = 0
        try bytes.withUnsafeMutableBytes { buf in
            while got < size {
                let n = Glibc.read(fd, buf.baseAddress! + got, size - got)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { throw ImageIOError.unreadable(path: path, reason: n == 0 ? "file shrank while reading" : String(cString: strerror(errno))) }
                got += n
            }
        }
        return bytes
    }
}
