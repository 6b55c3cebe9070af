import EvanescoIO
import Foundation
import Hummingbird

/// One thing the file panel lists.
struct CatalogEntry: Codable, Sendable, Equatable {
    /// Index of the root (a PATH given, or the upload area) it was found under.
    var root: Int
    /// Its path relative to that root ("." for the root itself).
    var path: String
    /// `burst` (a folder of images or a video), `video`, `depth` (a photo with a depth map), `image`.
    var kind: String
    /// Bytes, for files.
    var bytes: Int?
    /// Images in a burst folder.
    var frames: Int?
}

/// A root the studio serves from: a PATH given on the command line, or the upload area.
struct CatalogRoot: Codable, Sendable {
    var index: Int
    /// As given (for the panel's headings).
    var name: String
    /// Resolved, symlinks and all.
    var real: String
    var isDirectory: Bool
    var isUploads: Bool
}

/// The files under the studio's roots, and the one gate through which every path a request
/// names is turned into a file: relative, no `..`, no encoded dots, no symlink leading out.
final class StudioCatalog: @unchecked Sendable {
    let roots: [CatalogRoot]
    let uploadsIndex: Int
    private let lock = NSLock()
    private var depthCache: [String: Bool] = [:]
    static let depthCarriers: Set<String> = ["jpg", "jpeg", "heic", "heif"]
    static let maxEntries = 5000
    static let maxDepth = 4

    init(paths: [String], uploads: String) throws {
        var roots: [CatalogRoot] = []
        for (i, p) in paths.enumerated() {
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: p, isDirectory: &isDir) else {
                throw StudioError.pathNotFound(p)
            }
            roots.append(
                CatalogRoot(
                    index: i, name: p, real: Self.realPath(p) ?? p, isDirectory: isDir.boolValue, isUploads: false))
        }
        uploadsIndex = roots.count
        roots.append(
            CatalogRoot(
                index: roots.count, name: "uploads", real: Self.realPath(uploads) ?? uploads, isDirectory: true,
                isUploads: true))
        self.roots = roots
    }

    static func realPath(_ p: String) -> String? {
        guard let r = realpath(p, nil) else { return nil }
        defer { free(r) }
        return String(cString: r)
    }

    static func kind(ofFile name: String) -> String? {
        let ext = (name as NSString).pathExtension.lowercased()
        if ImageFormat.fileExtensions.contains(ext) { return "image" }
        if VideoIO.fileExtensions.contains(ext) { return "video" }
        return nil
    }

    /// Everything under every root, in a stable order.
    func list() -> [CatalogEntry] {
        var out: [CatalogEntry] = []
        for root in roots {
            if !root.isDirectory {
                if let e = entry(file: root.real, root: root.index, relative: (root.name as NSString).lastPathComponent)
                {
                    out.append(e)
                }
                continue
            }
            walk(root.real, relative: "", root: root.index, depth: 0, into: &out)
        }
        return out
    }

    private func walk(_ dir: String, relative: String, root: Int, depth: Int, into out: inout [CatalogEntry]) {
        guard out.count < Self.maxEntries,
            let names = try? FileManager.default.contentsOfDirectory(atPath: dir)
        else { return }
        var images = 0
        var files: [CatalogEntry] = [], folders: [String] = []
        for name in names.sorted() where !name.hasPrefix(".") {
            let full = dir + "/" + name
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: full, isDirectory: &isDir) else { continue }
            // Only what resolves inside the root is listed (a symlink out of it is not).
            guard let real = Self.realPath(full), contains(root: root, real: real) else { continue }
            let rel = relative.isEmpty ? name : relative + "/" + name
            if isDir.boolValue {
                folders.append(name)
                continue
            }
            if Self.kind(ofFile: name) == "image" { images += 1 }
            if let e = entry(file: full, root: root, relative: rel) { files.append(e) }
        }
        // A folder of two or more images is a burst.
        if images >= 2 && !roots[root].isUploads {
            out.append(
                CatalogEntry(
                    root: root, path: relative.isEmpty ? "." : relative, kind: "burst", bytes: nil, frames: images))
        }
        out.append(contentsOf: files.prefix(Self.maxEntries - out.count))
        guard depth < Self.maxDepth else { return }
        for f in folders {
            walk(
                dir + "/" + f, relative: relative.isEmpty ? f : relative + "/" + f, root: root, depth: depth + 1,
                into: &out)
        }
    }

    private func entry(file: String, root: Int, relative: String) -> CatalogEntry? {
        guard let k = Self.kind(ofFile: file) else { return nil }
        let attrs = try? FileManager.default.attributesOfItem(atPath: file)
        let bytes = (attrs?[.size] as? NSNumber)?.intValue
        var kind = k
        if k == "image", Self.depthCarriers.contains((file as NSString).pathExtension.lowercased()),
            hasDepth(file, attrs: attrs)
        {
            kind = "depth"
        }
        return CatalogEntry(root: root, path: relative, kind: kind, bytes: bytes, frames: nil)
    }

    /// Whether a photo carries a depth map (its containers parsed, no pixel decoded), cached by
    /// path, size and modification time.
    func hasDepth(_ file: String, attrs: [FileAttributeKey: Any]? = nil) -> Bool {
        let a = attrs ?? (try? FileManager.default.attributesOfItem(atPath: file))
        let size = (a?[.size] as? NSNumber)?.intValue ?? -1
        let key = "\(file)|\(size)|\((a?[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0)"
        if let v = lock.withLock({ depthCache[key] }) { return v }
        var o = DepthReadOptions()
        o.decodePhoto = false
        o.requireDepth = false
        let v = ((try? DepthReader.read(file, options: o))?.depth) != nil
        lock.withLock { depthCache[key] = v }
        return v
    }

    private func contains(root: Int, real: String) -> Bool {
        let r = roots[root].real
        return real == r || real.hasPrefix(r.hasSuffix("/") ? r : r + "/")
    }

    /// The file or folder a request names, or a 403/404 that says why not.
    ///
    /// - Parameters:
    ///   - root: Index of a root.
    ///   - path: Relative to it: no leading `/`, no `..` (plain or percent-encoded), no NUL.
    func resolve(root: Int, path: String) throws -> String {
        guard roots.indices.contains(root) else {
            throw HTTPError(.forbidden, message: "root \(root) is not one of the studio's folders")
        }
        let r = roots[root]
        guard !path.isEmpty, !path.hasPrefix("/"), !path.contains("\0"), !path.contains("\\") else {
            throw HTTPError(.forbidden, message: "\(path.debugDescription) is not a relative path under \(r.name)")
        }
        // No component may step out or stay put ("..", "."), and no percent sign is taken at all:
        // a name that is still encoded after the URL was decoded is an attempt to smuggle one in.
        if path != "." {
            for c in path.split(separator: "/", omittingEmptySubsequences: false)
            where c.isEmpty || c == "." || c == ".." || c.contains("%") {
                throw HTTPError(
                    .forbidden,
                    message:
                        "\(path.debugDescription) is refused: only plain relative paths under \(r.name) are served "
                        + "(no '..', '.', '%' or empty parts)"
                )
            }
        }
        let candidate: String
        if !r.isDirectory {
            // A file given on the command line is served under its own name only.
            guard path == (r.name as NSString).lastPathComponent || path == "." else {
                throw HTTPError(.forbidden, message: "\(path) is not \(r.name)")
            }
            candidate = r.real
        } else {
            candidate = path == "." ? r.real : r.real + "/" + path
        }
        guard FileManager.default.fileExists(atPath: candidate) else {
            throw HTTPError(.notFound, message: "\(path) is not under \(r.name)")
        }
        guard let real = Self.realPath(candidate), r.isDirectory ? contains(root: root, real: real) : real == r.real
        else {
            throw HTTPError(
                .forbidden, message: "\(path) leads outside \(r.name) (a symbolic link); only files under it are served"
            )
        }
        return real
    }
}

/// A `{root, path}` a request names.
struct FileRef: Codable, Sendable, Hashable {
    var root: Int
    var path: String
}
