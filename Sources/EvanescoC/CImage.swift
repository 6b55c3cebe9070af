import CEvanesco
import EvanescoCore
import Foundation

/// Images across the C interface: a caller's strided view read once into an ``AnyImage``, and an
/// image handed back as one contiguous block from `malloc`.
enum CImage {
    /// The most samples an image passed in may hold (2^31: 8 GB of float RGBA).
    static let sampleLimit = 1 << 31

    /// Reads the image `image` describes, named `name` in errors.
    static func read(_ image: UnsafePointer<evn_image>?, _ name: String) throws -> AnyImage {
        guard let d = image?.pointee else { throw ArgumentError("\(name) is NULL") }
        guard let data = d.data else { throw ArgumentError("\(name): its data is NULL") }
        guard d.width > 0, d.height > 0 else {
            throw ArgumentError("\(name): an image must be at least 1x1, not \(d.width)x\(d.height)")
        }
        guard (1...4).contains(d.channels) else {
            throw ArgumentError("\(name): an image has 1, 3 or 4 channels (or 2: grey and alpha), not \(d.channels)")
        }
        let (w, h, c) = (Int(d.width), Int(d.height), Int(d.channels))
        let (area, o1) = w.multipliedReportingOverflow(by: h)
        let (count, o2) = area.multipliedReportingOverflow(by: c)
        guard !o1, !o2, count <= sampleLimit else {
            throw ArgumentError("\(name): \(w)x\(h)x\(c) is more than \(sampleLimit) samples")
        }
        switch d.sample_type {
        case Int32(EVN_UINT8.rawValue): return .uint8(load(d, data, UInt8.self))
        case Int32(EVN_UINT16.rawValue): return .uint16(load(d, data, UInt16.self))
        case Int32(EVN_FLOAT32.rawValue): return .float32(load(d, data, Float.self))
        default:
            throw ArgumentError(
                "\(name): sample type \(d.sample_type) is not one of EVN_UINT8, EVN_UINT16, EVN_FLOAT32")
        }
    }

    /// The strides in bytes, with 0 read as the contiguous value.
    static func strides(_ d: evn_image, size: Int) -> (row: Int, pixel: Int, channel: Int) {
        let channel = d.channel_stride == 0 ? size : Int(d.channel_stride)
        let pixel = d.pixel_stride == 0 ? Int(d.channels) * size : Int(d.pixel_stride)
        let row = d.row_stride == 0 ? Int(d.width) * pixel : Int(d.row_stride)
        return (row, pixel, channel)
    }

    /// One copy from the caller's layout to interleaved rows: whole rows at once where the
    /// caller's pixels are packed, sample by sample otherwise (a channel-first or a sliced array),
    /// in strips on every core into memory backed by huge pages (see ``prepare(_:bytes:)``).
    static func load<T: PixelSample>(_ d: evn_image, _ data: UnsafeMutableRawPointer, _: T.Type) -> Image<T> {
        let size = MemoryLayout<T>.size
        let (w, h, c) = (Int(d.width), Int(d.height), Int(d.channels))
        let s = strides(d, size: size)
        let src = UncheckedSendable(UnsafeRawPointer(data))
        return Image<T>(uninitializedWidth: w, height: h, channels: c) { out in
            prepare(UnsafeMutableRawPointer(out.baseAddress!), bytes: out.count * size)
            let dst = UncheckedSendable(out.baseAddress!)
            let rowSamples = w * c
            StripExecutor.forEachStrip(rows: h, minimumRows: stripRows(rowSamples * size)) { rows in
                for y in rows {
                    let row = src.value + y * s.row
                    let to = dst.value + y * rowSamples
                    if s.pixel == c * size && s.channel == size {
                        UnsafeMutableRawPointer(to).copyMemory(from: row, byteCount: rowSamples * size)
                        continue
                    }
                    for x in 0..<w {
                        let pixel = row + x * s.pixel
                        for k in 0..<c {
                            to[x * c + k] = pixel.loadUnaligned(fromByteOffset: k * s.channel, as: T.self)
                        }
                    }
                }
            }
        }
    }

    /// Rows a strip of a copy holds: about 1 MB, so a small image is copied by one thread.
    static func stripRows(_ rowBytes: Int) -> Int { max(1, (1 << 20) / max(1, rowBytes)) }

    /// Readies `bytes` of fresh memory at `start` for one copy: a large block is asked for huge
    /// pages (Linux's transparent huge pages, `madvise` mode), so filling it takes one fault a
    /// 2 MB page instead of one a 4 KB page (36 MB: 18 faults, not 9216). A 12 MP RGB image copied
    /// into fresh memory took 20-26 ms with small pages, as long as 5 % of a portrait blur.
    static func prepare(_ start: UnsafeMutableRawPointer, bytes: Int) {
        let huge = 2 << 20
        guard bytes >= 2 * huge else { return }
        let first = (Int(bitPattern: start) + huge - 1) / huge * huge
        let last = (Int(bitPattern: start) + bytes) / huge * huge
        guard last > first, let p = UnsafeMutableRawPointer(bitPattern: first) else { return }
        _ = madvise(p, last - first, MADV_HUGEPAGE)
    }

    /// Hands `image` to the caller: its samples copied once into memory from `malloc`.
    static func give(_ image: AnyImage, to out: UnsafeMutablePointer<evn_image>?) throws {
        guard let out else { throw ArgumentError("the result image pointer is NULL") }
        switch image {
        case .uint8(let i): out.pointee = try give(i, EVN_UINT8)
        case .uint16(let i): out.pointee = try give(i, EVN_UINT16)
        case .float32(let i): out.pointee = try give(i, EVN_FLOAT32)
        }
    }

    static func give<T: PixelSample>(_ image: Image<T>, _ type: evn_sample_type) throws -> evn_image {
        let size = MemoryLayout<T>.size
        let rowBytes = image.width * image.channels * size
        let bytes = image.samples.count * size
        // Aligned to a huge page, so all of a large block can be backed by them; free() releases
        // it as any malloc'd block.
        var block: UnsafeMutableRawPointer?
        guard posix_memalign(&block, bytes >= 4 << 20 ? 2 << 20 : 64, max(1, bytes)) == 0, let data = block else {
            throw OutOfMemory(bytes: bytes)
        }
        prepare(data, bytes: bytes)
        image.samples.withUnsafeBytes { source in
            let from = UncheckedSendable(source.baseAddress!), to = UncheckedSendable(data)
            StripExecutor.forEachStrip(rows: image.height, minimumRows: stripRows(rowBytes)) { rows in
                (to.value + rows.lowerBound * rowBytes).copyMemory(
                    from: from.value + rows.lowerBound * rowBytes, byteCount: rows.count * rowBytes)
            }
        }
        return evn_image(
            data: data, width: Int64(image.width), height: Int64(image.height), channels: Int64(image.channels),
            row_stride: Int64(rowBytes), pixel_stride: Int64(image.channels * size), channel_stride: Int64(size),
            sample_type: Int32(type.rawValue))
    }

    /// Clears an output image, so that a failed call leaves nothing to free.
    static func clear(_ out: UnsafeMutablePointer<evn_image>?) {
        out?.pointee = evn_image()
    }
}

/// No memory for a result: reported, not a crash.
struct OutOfMemory: Error, CustomStringConvertible {
    var bytes: Int
    var description: String {
        "no memory for the \(MemorySize.describe(bytes)) result; free some, or use smaller inputs"
    }
}
