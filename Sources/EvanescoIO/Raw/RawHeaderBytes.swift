import EvanescoCore
import Foundation

/// What a probe of a DNG needs of its bytes, without its image data: the file's first bytes,
/// where every directory and every value of its header lies, and the first bytes of each strip
/// and tile (LibRaw looks at them to tell what kind of data they hold). A stack's frames are
/// probed before they are decoded: reading a 24 MB frame whole for a header of a few kilobytes
/// took a 12 x 12 MP merge about 0.1 s of its 2 s.
///
/// Only where nothing the header says lies elsewhere: an uncompressed DNG whose directories
/// (the first's chain, their SubIFDs, Exif and GPS directories) and their values all lie in the
/// head, with no maker note (whose own offsets may point anywhere). Anything else is read whole.
struct RawHeaderBytes {
    /// The file's first bytes.
    var head: [UInt8]
    /// The file's size.
    var size: Int
    /// The first bytes of each strip and tile, at their offsets in the file.
    var pieces: [(offset: Int, bytes: [UInt8])]

    static let headBytes = 1 << 16, pieceBytes = 4096, maxPieces = 1024

    /// The header of the DNG at `path` read so, or nil when the file must be read whole (not a
    /// DNG, compressed, a directory or value beyond `head` bytes, a maker note), or when it is
    /// not much larger than its head.
    static func read(_ path: String, head limit: Int = headBytes) throws -> RawHeaderBytes? {
        let st = try InputFile.requireRegular(path)
        let size = Int(st.st_size)
        guard size > 2 * limit else { return nil }
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw ImageIOError.unreadable(path: path, reason: String(cString: strerror(errno))) }
        defer { close(fd) }
        let head = try InputFile.read(fd, at: 0, count: limit, path: path)
        guard head.count == limit, DNGTags.read(head) != nil, let first = TIFFDirectory.firstOffset(head),
            let directories = directories(head, first: first)
        else { return nil }
        var pieces: [(offset: Int, bytes: [UInt8])] = []
        for d in directories {
            let (offsets, counts) = d.dataPieces
            guard offsets.count == counts.count, pieces.count + offsets.count <= maxPieces else { return nil }
            for (o, c) in zip(offsets, counts) where o >= 0 && o < size && c > 0 {
                pieces.append((o, try InputFile.read(fd, at: o, count: min(pieceBytes, c, size - o), path: path)))
            }
        }
        return RawHeaderBytes(head: head, size: size, pieces: pieces)
    }

    /// Every directory a probe reads, all inside `head` with their values; nil when one is not,
    /// or when one holds compressed image data or a maker note.
    static func directories(_ head: [UInt8], first: Int) -> [TIFFDirectory]? {
        var queue = [first], seen = Set<Int>(), found: [TIFFDirectory] = []
        while let o = queue.popLast() {
            guard seen.insert(o).inserted else { continue }
            guard found.count < 64, let d = TIFFDirectory(head, offset: o), !d.valuesBeyondBytes else { return nil }
            // MakerNote, DNGPrivateData: their offsets are their own.
            guard d.entries[37500] == nil, d.entries[50740] == nil else { return nil }
            let hasData = d.entries[273] != nil || d.entries[324] != nil
            guard !hasData || d.int(259, 1) == 1 else { return nil }
            found.append(d)
            if d.next != 0 { queue.append(d.next) }
            for tag in [330, 34665, 34853] { queue += d.ints(tag) ?? [] }
        }
        return found
    }

    /// `body` with a buffer of the file's size that holds `head` (the head as LibRaw is to see
    /// it) and the pieces where they lie, zeros elsewhere (pages never touched: no cost).
    /// The pieces go in first: where one starts inside the head, the head's bytes are what LibRaw sees.
    func withBuffer<R>(head guarded: [UInt8], path: String, _ body: (UnsafeMutableRawPointer, Int) throws -> R)
        throws -> R
    {
        guard let buffer = calloc(size, 1) else {
            throw ImageIOError.unreadable(path: path, reason: "no memory for a view of its \(size) bytes")
        }
        defer { free(buffer) }
        for p in pieces {
            p.bytes.withUnsafeBytes { (buffer + p.offset).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        }
        guarded.withUnsafeBytes { buffer.copyMemory(from: $0.baseAddress!, byteCount: min($0.count, size)) }
        return try body(buffer, size)
    }
}
