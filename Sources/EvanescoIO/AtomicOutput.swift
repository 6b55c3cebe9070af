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
        let dir = try checkFile(path, overwrite: overwrite)
        let temp = temporaryName(for: path, in: dir)
        Cleanup.add(file: temp)
        defer {
            unlink(temp)
            Cleanup.remove(file: temp)
        }
        do { try produce(temp) } catch let e as ImageIOError {
            // A library writer (libtiff, ffmpeg) says only that its write failed: name the cause
            // when the device is what failed.
            if case .encodeFailed = e, let cause = WriteFailure.deviceProblem(in: dir) {
                throw ImageIOError.cannotWrite(path: path, reason: cause)
            }
            throw e
        }
        // A writer that reported success but left nothing is not a success.
        var st = stat()
        guard stat(temp, &st) == 0 else {
            throw ImageIOError.cannotWrite(path: path, reason: WriteFailure.reason(errno))
        }
        if overwrite {
            guard rename(temp, path) == 0 else {
                throw ImageIOError.cannotWrite(path: path, reason: WriteFailure.reason(errno))
            }
        } else {
            if link(temp, path) != 0 {
                let e = errno
                if e == EEXIST { throw ImageIOError.outputExists(path: path) }
                if e == ENAMETOOLONG || e == ENOSPC || e == EROFS || e == EDQUOT {
                    throw ImageIOError.cannotWrite(path: path, reason: WriteFailure.reason(e))
                }
                // File systems without hard links: fall back to a checked rename.
                if FileManager.default.fileExists(atPath: path) { throw ImageIOError.outputExists(path: path) }
                guard rename(temp, path) == 0 else {
                    throw ImageIOError.cannotWrite(path: path, reason: WriteFailure.reason(errno))
                }
            }
        }
        Cleanup.add(placed: path)
    }

    /// Makes a folder for outputs (and any missing parents), with an error that says why it
    /// cannot be made; the top-most folder it made is remembered for ``Cleanup/rollBack()``.
    public static func makeFolder(_ path: String) throws {
        var existing = URL(fileURLWithPath: path).standardizedFileURL
        var top: String? = nil
        var isDir: ObjCBool = false
        while !FileManager.default.fileExists(atPath: existing.path, isDirectory: &isDir) {
            top = existing.path
            existing.deleteLastPathComponent()
        }
        guard isDir.boolValue else {
            throw ImageIOError.cannotWrite(path: path, reason: "\(existing.path) is a file, not a folder")
        }
        guard let top else { return }
        try checkName(path)
        try checkWritable(folder: existing.path, for: path)
        guard mkdirs(path) else { throw ImageIOError.cannotWrite(path: path, reason: WriteFailure.reason(errno)) }
        Cleanup.add(madeFolder: top)
    }

    /// mkdir -p, keeping errno on failure.
    private static func mkdirs(_ path: String) -> Bool {
        if mkdir(path, 0o755) == 0 || errno == EEXIST { return true }
        guard errno == ENOENT else { return false }
        let parent = (path as NSString).deletingLastPathComponent
        guard !parent.isEmpty, parent != path, mkdirs(parent) else { return false }
        return mkdir(path, 0o755) == 0 || errno == EEXIST
    }

    /// A hidden name in `dir` for the temporary file: short whatever the output's name (so an
    /// output name of 255 bytes, the most a file system allows, still works), and keeping a short
    /// extension so that tools which pick a format from the name (ffmpeg) still can.
    static func temporaryName(for path: String, in dir: String) -> String {
        let ext = (path as NSString).pathExtension
        let kept =
            !ext.isEmpty && ext.utf8.count <= 8 && ext.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
            ? ext : "tmp"
        var g = SystemRandomNumberGenerator()
        let tag = String(UInt64.random(in: 0...UInt64.max, using: &g), radix: 36)
        return dir + "/.evn-" + tag + "." + kept
    }

    /// Checks every output of a run together, before any work, so that a refusal never comes
    /// after something was written: each file's folder exists and is writable with room left, its
    /// name fits the file system, no output is a folder, an input, or another output, none exists
    /// unless `overwrite`, and every image output has an extension we write; each directory
    /// output is a writable folder or can be made in one.
    ///
    /// - Parameters:
    ///   - files: Output files (nil entries are ignored; `-` is standard output).
    ///   - images: Output files that must be images (.jpg, .png, .tif); checked like `files` too.
    ///   - directories: Output folders.
    ///   - inputs: Files the run reads; an output may never be one of them, even with `overwrite`.
    ///   - overwrite: Whether existing output files may be replaced.
    /// - Throws: `ImageIOError.outputExists`, `.outputIsInput`, `.unknownOutputExtension` or `.cannotWrite`.
    public static func check(
        files: [String?] = [], images: [String?] = [], directories: [String?] = [], inputs: [String], overwrite: Bool
    ) throws {
        for p in images.compactMap({ $0 }) {
            guard let f = ImageFormat.forOutput(extension: (p as NSString).pathExtension), f != .heif else {
                throw ImageIOError.unknownOutputExtension(path: p)
            }
        }
        let outs = (files + images).compactMap { $0 }.filter { $0 != "-" }
        let dirs = directories.compactMap { $0 }
        func identity(_ p: String) -> String {
            var st = stat()
            if stat(p, &st) == 0 { return "\(st.st_dev):\(st.st_ino)" }
            return URL(fileURLWithPath: p).standardizedFileURL.path
        }
        let inputIDs = Set(InputFile.expandedQuietly(inputs).map(identity))
        // Real paths too: an output inside an input folder, or a folder output that is (through
        // a link) or holds an input folder, would change the inputs.
        var protected = ProtectedPaths()
        for i in inputs where i != "-" { protect(i, in: &protected) }
        var seen: [String: String] = [:]
        for p in outs + dirs {
            let id = identity(p)
            if inputIDs.contains(id) { throw ImageIOError.outputIsInput(path: p) }
            if let why = protected.refusal(forOutput: p, replacedWhole: false) {
                throw ImageIOError.cannotWrite(path: p, reason: why + " (inputs are never modified)")
            }
            if let other = seen[id] {
                throw ImageIOError.cannotWrite(path: p, reason: "it is also given as the output \(other)")
            }
            seen[id] = p
        }
        for p in outs {
            let dir = try checkFile(p, overwrite: overwrite)
            try checkWritable(folder: dir, for: p)
        }
        for d in dirs {
            try checkName(d)
            var isDir: ObjCBool = false
            if FileManager.default.fileExists(atPath: d, isDirectory: &isDir) {
                if !isDir.boolValue { throw ImageIOError.cannotWrite(path: d, reason: "it is a file, not a folder") }
                try checkWritable(folder: d, for: d)
            } else {
                let parent = URL(fileURLWithPath: d).deletingLastPathComponent().path
                guard FileManager.default.fileExists(atPath: parent, isDirectory: &isDir), isDir.boolValue else {
                    throw ImageIOError.cannotWrite(path: d, reason: "folder \(parent) does not exist")
                }
                try checkWritable(folder: parent, for: d)
            }
        }
    }

    /// Protects one input: a folder as a whole, a file as itself.
    private static func protect(_ input: String, in protected: inout ProtectedPaths) {
        var isDir: ObjCBool = false
        let folder = FileManager.default.fileExists(atPath: input, isDirectory: &isDir) && isDir.boolValue
        protected.protect(input, as: folder ? "the input folder \(input)" : "the input \(input)")
    }

    /// Free bytes below which a folder counts as full before any work starts (a write that needs
    /// more than is left still fails, cleanly, when it happens).
    public static let minimumFreeBytes = 256 << 10

    /// The folder can be written in: not read-only, permitted, with room left.
    static func checkWritable(folder dir: String, for path: String) throws {
        guard access(dir, W_OK) == 0 else {
            let e = errno
            throw ImageIOError.cannotWrite(
                path: path,
                reason: e == EROFS
                    ? WriteFailure.reason(EROFS) : "folder \(dir) is not writable (\(WriteFailure.reason(e)))")
        }
        if let free = WriteFailure.freeBytes(in: dir), free < minimumFreeBytes {
            throw ImageIOError.cannotWrite(
                path: path, reason: "\(WriteFailure.reason(ENOSPC)) (\(free >> 10) KB free in \(dir))")
        }
    }

    /// The last component fits the file system's limit of 255 bytes.
    static func checkName(_ path: String) throws {
        let name = (path as NSString).lastPathComponent
        if name.utf8.count > 255 {
            throw ImageIOError.cannotWrite(path: path, reason: WriteFailure.reason(ENAMETOOLONG))
        }
    }

    /// The one check of an output file: its name fits, its folder exists, it is not a folder,
    /// and it does not exist unless `overwrite`. Returns the folder.
    static func checkFile(_ path: String, overwrite: Bool) throws -> String {
        try checkName(path)
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

    /// Writes bytes atomically; every write is checked (a full disk, a read-only folder and a
    /// short write are errors that say so).
    public static func write(_ bytes: [UInt8], to path: String, overwrite: Bool) throws {
        try write(to: path, overwrite: overwrite) { temp in
            try WriteFailure.writeFile(bytes, to: temp, reportPath: path)
        }
    }
}

/// Why a write failed, in words that say what to do, and the checked write itself.
public enum WriteFailure {
    /// The cause of a failed write or rename, from its errno.
    public static func reason(_ code: Int32) -> String {
        switch code {
        case ENOSPC: "no space left on the device; free some space or write to another disk"
        case EDQUOT: "the disk quota is used up; free some space or write elsewhere"
        case EROFS: "the file system is read-only; write to another folder"
        case ENAMETOOLONG: "the name is longer than the file system allows (255 bytes a name); choose a shorter name"
        case EACCES, EPERM: "permission denied; choose a folder you can write to"
        case ENOENT: "its folder does not exist (or was removed while writing)"
        case ENOTDIR: "a part of the path is a file, not a folder"
        case EISDIR: "it is a folder"
        case EIO: "an I/O error on the device"
        case EFBIG: "the file is larger than the file system allows"
        default: String(cString: strerror(code))
        }
    }

    /// Why writes into `dir` fail now, when the device is the reason (full or read-only), else nil.
    public static func deviceProblem(in dir: String) -> String? {
        if access(dir, W_OK) != 0 && errno == EROFS { return reason(EROFS) }
        guard let free = freeBytes(in: dir) else { return nil }
        return free < 64 << 10 ? reason(ENOSPC) : nil
    }

    /// Bytes an unprivileged user can still write in `dir`'s file system, or nil when unknown.
    public static func freeBytes(in dir: String) -> Int? {
        var fs = statvfs()
        guard statvfs(dir, &fs) == 0 else { return nil }
        return Int(clamping: UInt64(fs.f_bavail) &* UInt64(fs.f_frsize))
    }

    /// Creates `path` (which must not exist) and writes all of `bytes`, checking every write and
    /// the close; on failure the file is removed and the error names `reportPath` and the cause.
    public static func writeFile(_ bytes: [UInt8], to path: String, reportPath: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw ImageIOError.cannotWrite(path: reportPath, reason: reason(errno)) }
        var failure = writeAll(bytes, to: fd)
        if close(fd) != 0 && failure == 0 { failure = errno }
        if failure != 0 {
            unlink(path)
            throw ImageIOError.cannotWrite(path: reportPath, reason: reason(failure))
        }
    }

    /// Writes all of `bytes` to an open descriptor (standard output, a pipe), checked.
    ///
    /// - Returns: 0, or the errno of the failed write.
    public static func writeAll(_ bytes: some ContiguousBytes, to fd: Int32) -> Int32 {
        bytes.withUnsafeBytes { buf in
            var done = 0
            while done < buf.count {
                let n = Glibc.write(fd, buf.baseAddress! + done, buf.count - done)
                if n < 0 && errno == EINTR { continue }
                // A write of 0 bytes where some were asked is a full device.
                guard n > 0 else { return n == 0 ? ENOSPC : errno }
                done += n
            }
            return 0
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
            guard FileManager.default.fileExists(atPath: input, isDirectory: &isDir) else {
                throw ImageIOError.fileNotFound(path: input)
            }
            if isDir.boolValue {
                let names = try FileManager.default.contentsOfDirectory(atPath: input).filter { !$0.hasPrefix(".") }
                    .sorted()
                let files = names.map { (input as NSString).appendingPathComponent($0) }.filter {
                    var d: ObjCBool = false
                    return FileManager.default.fileExists(atPath: $0, isDirectory: &d) && !d.boolValue
                }
                if files.isEmpty {
                    throw ImageIOError.unreadable(
                        path: input,
                        reason:
                            "the folder holds no files (hidden ones aside); put the burst's frames in it, or name the "
                            + "files"
                    )
                }
                out += files
            } else {
                out.append(input)
            }
        }
        return out
    }

    /// Like ``expand(_:)``, but keeps what cannot be listed as it is (for checks, not for reading).
    public static func expandedQuietly(_ inputs: [String]) -> [String] {
        inputs.flatMap { (try? expand([$0])) ?? [$0] }
    }

    /// True when `path` is a regular file (following links), not a folder, FIFO, socket or device.
    public static func isRegular(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
    }

    /// Refuses what is not a regular file before anything opens it: a FIFO would block an open
    /// or a read until some other process writes to it, a device could be read for ever.
    ///
    /// - Returns: The file's status (its size, for a reader).
    /// - Throws: `ImageIOError.fileNotFound`, `.notAFile` or `.unreadable`.
    @discardableResult
    public static func requireRegular(_ path: String) throws -> stat {
        var st = stat()
        guard stat(path, &st) == 0 else {
            if errno == ENOENT { throw ImageIOError.fileNotFound(path: path) }
            throw ImageIOError.unreadable(path: path, reason: String(cString: strerror(errno)))
        }
        guard (st.st_mode & S_IFMT) == S_IFREG else { throw ImageIOError.notAFile(path: path) }
        return st
    }

    /// Reads a whole input file, refusing what is not a regular file (a folder, a FIFO, a device).
    ///
    /// - Parameter path: The file.
    /// - Returns: Its bytes.
    /// - Throws: `ImageIOError.fileNotFound` or `.unreadable` with the reason.
    public static func read(_ path: String) throws -> [UInt8] {
        let st = try requireRegular(path)
        guard st.st_size > 0 else { throw ImageIOError.emptyFile(path: path) }
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw ImageIOError.unreadable(path: path, reason: String(cString: strerror(errno))) }
        defer { close(fd) }
        let size = Int(st.st_size)
        let bytes = try read(fd, at: 0, count: size, path: path)
        guard bytes.count == size else {
            throw ImageIOError.unreadable(path: path, reason: "file shrank while reading")
        }
        return bytes
    }

    /// `count` bytes of the open file `fd` from `offset`, fewer only where the file ended.
    /// Not zeroed first: every byte is read into (or the read fails), and zeroing 24 MB costs
    /// about as much as reading it from the page cache.
    static func read(_ fd: Int32, at offset: Int, count: Int, path: String) throws -> [UInt8] {
        try [UInt8](unsafeUninitializedCapacity: count) { buf, got in
            got = 0
            while got < count {
                let n = pread(fd, buf.baseAddress! + got, count - got, off_t(offset + got))
                if n < 0 && errno == EINTR { continue }
                guard n >= 0 else {
                    throw ImageIOError.unreadable(path: path, reason: String(cString: strerror(errno)))
                }
                if n == 0 { break }
                got += n
            }
        }
    }
}
