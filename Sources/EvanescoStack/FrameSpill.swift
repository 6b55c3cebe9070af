#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import EvanescoCore
import Foundation

/// Decoded frames kept in a temporary file instead of memory, for bursts whose frames would not
/// fit in ``StackOptions/memoryLimit``: one slot per frame, in the frames' own sample type (8 or
/// 16 bits, interleaved, the compact form), mapped read-only so the warp samples it in place.
///
/// The file is unlinked as soon as it is made, so it has no name: the kernel frees it when the
/// stack ends, fails, is interrupted or is killed, and nothing is left behind. Its whole size is
/// reserved at the start (a full disk fails then, with a message, not later as a fault while
/// reading the mapping). The pages the merge has read are dropped from the process after each
/// band of rows (`release`): they stay in the page cache, and the resident memory stays at the
/// band's working set.
final class FrameSpill: @unchecked Sendable {
    let directory: String
    /// Bytes per slot (a frame's samples, rounded up to whole pages so slots can be released).
    let slotBytes: Int
    let slots: Int
    let length: Int
    private let fd: Int32
    private let base: UnsafeMutableRawPointer

    /// - Parameters:
    ///   - directory: Where the temporary file goes (it never gets a name there).
    ///   - frameBytes: Bytes of one frame's samples.
    ///   - slots: Frames.
    /// - Throws: ``StackError/spillFailed(directory:reason:)``.
    init(directory: String, frameBytes: Int, slots: Int) throws {
        self.directory = directory
        let page = max(4096, Int(sysconf(Int32(_SC_PAGESIZE))))
        let (rounded, o1) = frameBytes.addingReportingOverflow(page - 1)
        let slot = rounded / page * page
        let (len, o2) = slot.multipliedReportingOverflow(by: max(1, slots))
        guard frameBytes > 0, !o1, !o2 else {
            throw StackError.spillFailed(
                directory: directory, reason: "\(slots) frames of \(frameBytes) bytes do not fit in one file")
        }
        slotBytes = slot
        self.slots = slots
        length = len
        var template = Array("\(directory)/.evanesco-frames-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else {
            throw StackError.spillFailed(directory: directory, reason: String(cString: strerror(errno)))
        }
        // No name from here on: the kernel removes the file when the last descriptor closes.
        _ = template.withUnsafeBufferPointer { unlink($0.baseAddress!) }
        let reserved = posix_fallocate(fd, 0, off_t(len))
        guard reserved == 0 else {
            close(fd)
            let need = String(format: "%.1f GB", Double(len) / 1e9)
            throw StackError.spillFailed(
                directory: directory,
                reason: reserved == ENOSPC
                    ? "not enough free space for the decoded frames (\(need) needed)"
                    : String(cString: strerror(reserved)))
        }
        guard let p = mmap(nil, len, PROT_READ, MAP_SHARED, fd, 0), p != MAP_FAILED else {
            let e = errno
            close(fd)
            throw StackError.spillFailed(directory: directory, reason: "cannot map it: \(String(cString: strerror(e)))")
        }
        self.fd = fd
        base = p
    }

    deinit {
        munmap(base, length)
        close(fd)
    }

    /// Writes `image`'s samples into `slot`.
    func write<S: PixelSample>(_ image: Image<S>, slot: Int) throws {
        precondition(slot >= 0 && slot < slots)
        let bytes = image.samples.count * MemoryLayout<S>.stride
        precondition(bytes <= slotBytes, "a frame larger than its slot")
        try image.samples.withUnsafeBytes { raw in
            var done = 0
            while done < bytes {
                let n = pwrite(fd, raw.baseAddress! + done, bytes - done, off_t(slot * slotBytes + done))
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else {
                    throw StackError.spillFailed(
                        directory: directory, reason: n < 0 ? String(cString: strerror(errno)) : "a write wrote nothing"
                    )
                }
                done += n
            }
        }
    }

    /// The first sample of `slot`, valid while this spill lives.
    func samples<S: PixelSample>(_ slot: Int, as type: S.Type) -> UnsafePointer<S> {
        UnsafeRawPointer(base + slot * slotBytes).assumingMemoryBound(to: S.self)
    }

    /// A copy of `slot` as an image (for registration, which reads a frame whole).
    func image<S: PixelSample>(_ slot: Int, width: Int, height: Int, channels: Int, as type: S.Type) -> Image<S> {
        let src = samples(slot, as: S.self), n = width * height * channels
        return Image<S>(uninitializedWidth: width, height: height, channels: channels) { d in
            d.baseAddress!.initialize(from: src, count: n)
        }
    }

    /// Drops `slot`'s pages from this process (they stay in the file and the page cache).
    func release(_ slot: Int) {
        madvise(base + slot * slotBytes, slotBytes, MADV_DONTNEED)
    }

    /// Drops every page read so far from this process.
    func releaseAll() {
        madvise(base, length, MADV_DONTNEED)
        releases.update { $0 += 1 }
    }

    /// How many times ``releaseAll()`` ran (a merge that never calls it holds every frame's pages
    /// it read until the stack ends).
    var releaseCount: Int { releases.value }
    private let releases = LockedBox(0)
}
