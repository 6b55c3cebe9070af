import CPNG
import EvanescoCore
import EvanescoFaces
import EvanescoIO
import EvanescoStack
import Foundation

/// The fuzz targets' bodies, in one place: the libFuzzer executables of `FuzzTesting/` call
/// them, and `swift test` replays every crash file kept in `Tests/FuzzRegressions/` through them.
/// Each takes arbitrary bytes and must return without crashing, hanging or leaking.
public enum FuzzEntries {
    /// Small limits: the fuzzer looks for crashes, hangs and leaks, not for big pictures.
    static let fuzzLimits = DecodeLimits(maxPixels: 4_000_000, maxSide: 8192, maxBytes: 256 << 20)
    /// `bytes` with the CRC of every whole chunk after the PNG signature recomputed.
    static func withPNGCRCsFixed(_ bytes: [UInt8]) -> [UInt8] {
        var b = bytes, pos = 8
        while b.count - pos >= 12 {
            let length = b[pos..<(pos + 4)].reduce(0) { $0 << 8 | Int($1) }
            guard length <= b.count - pos - 12 else { break }
            // The CRC the fast path checks with (libdeflate's), over the chunk's type and data.
            let c = b.withUnsafeBufferPointer { UInt32(libdeflate_crc32(0, $0.baseAddress! + pos + 4, length + 4)) }
            for k in 0..<4 { b[pos + 8 + length + k] = UInt8(truncatingIfNeeded: c >> (24 - 8 * k)) }
            pos += 12 + length
        }
        return b
    }
    static let probe = Image<UInt8>(uninitializedWidth: 48, height: 40, channels: 1) { d in
        for i in 0..<d.count { d[i] = UInt8(truncatingIfNeeded: i &* 37) }
    }

    /// The targets, by name.
    public static let targets: [String: @Sendable (UnsafeRawPointer, Int) -> Void] = [
        "FuzzCascade": { start, count in
            let bytes = [UInt8](UnsafeRawBufferPointer(start: start, count: count))
            if let c = try? CascadeClassifier(xml: bytes, path: "fuzz.xml") {
                _ = c.detect(probe, scaleFactor: 1.5, minNeighbors: 1)
            }
        },
        "FuzzDepthJPEG": { start, count in
            // MPF images and their XMP, extended XMP, GDepth and Dynamic Depth containers.
            readDepth(UnsafeRawBufferPointer(start: start, count: count), path: "fuzz.jpg")
        },
        "FuzzDNG": { start, count in
            // A camera raw through LibRaw and our own DNG tag reader: the header, the samples (our
            // strip reader or LibRaw's unpack), then the finish.
            let bytes = [UInt8](UnsafeRawBufferPointer(start: start, count: count))
            _ = try? RawCodec.probe(bytes, path: "fuzz.dng", limits: fuzzLimits)
            if let f = try? RawCodec.decode(bytes, path: "fuzz.dng", limits: fuzzLimits) {
                _ = try? RawFinish.render(f.raw, as: UInt8.self)
            }
        },
        "FuzzEXIF": { start, count in
            let bytes = [UInt8](UnsafeRawBufferPointer(start: start, count: count))
            _ = EXIF.orientation(in: bytes)
        },
        "FuzzHEIF": { start, count in
            // Apple HEIC depth through libheif: the depth item, its XMP and the auxiliary images.
            readDepth(UnsafeRawBufferPointer(start: start, count: count), path: "fuzz.heic")
        },
        "FuzzHomographies": { start, count in
            let bytes = [UInt8](UnsafeRawBufferPointer(start: start, count: count))
            _ = try? StackReport.homographies(from: bytes, name: "fuzz.json")
        },
        "FuzzJPEG": { start, count in
            let bytes = [UInt8](UnsafeRawBufferPointer(start: start, count: count))
            // Header, segments, EXIF, ICC, XMP, the MPF listing (header-only path), then the pixels.
            _ = try? ImageCodecs.probe(bytes: bytes, path: "fuzz.jpg", limits: fuzzLimits)
            _ = try? ImageCodecs.decode(bytes, path: "fuzz.jpg", options: ReadOptions(limits: fuzzLimits))
        },
        "FuzzPFM": { start, count in
            let bytes = [UInt8](UnsafeRawBufferPointer(start: start, count: count))
            _ = try? PFM.decode(bytes, path: "fuzz.pfm", limits: fuzzLimits)
        },
        "FuzzPNG": { start, count in
            // As given, and with every chunk's CRC made right: a mutation then reaches what the CRC
            // guards (the image data, its filters, the chunks' order and sizes) instead of ending
            // at the first CRC check, in the fast path as in libpng.
            let bytes = [UInt8](UnsafeRawBufferPointer(start: start, count: count))
            let fixed = withPNGCRCsFixed(bytes)
            _ = try? ImageCodecs.decode(fixed, path: "fuzz.png", options: ReadOptions(limits: fuzzLimits))
            if fixed != bytes {
                _ = try? ImageCodecs.decode(bytes, path: "fuzz.png", options: ReadOptions(limits: fuzzLimits))
            }
        },
        "FuzzRawFrames": { start, count in
            // The raw frame reader on a pipe: frame size and layout from the first bytes, then whatever follows.
            guard count >= 3 else { return }
            let b = UnsafeRawBufferPointer(start: start, count: count)
            let w = Int(b[0] % 64) + 1, h = Int(b[1] % 64) + 1
            let layout: RawFrameReader.Layout = [.rgb24, .gray, .gray16le][Int(b[2] % 3)]
            var fds: [Int32] = [0, 0]
            guard pipe(&fds) == 0 else { return }
            let body = Array(b[3...]), writeEnd = fds[1]
            let writer = Thread {
                body.withUnsafeBytes { p in
                    var sent = 0
                    while sent < p.count {
                        let n = write(writeEnd, p.baseAddress! + sent, p.count - sent)
                        if n <= 0 { break }
                        sent += n
                    }
                }
                close(writeEnd)
            }
            writer.start()
            let reader = RawFrameReader(fd: fds[0], width: w, height: h, layout: layout, name: "fuzz")
            while let f = try? reader.next() { _ = f.width }
            close(fds[0])
        },
        "FuzzTIFF": { start, count in
            let bytes = [UInt8](UnsafeRawBufferPointer(start: start, count: count))
            _ = try? ImageCodecs.decode(bytes, path: "fuzz.tif", options: ReadOptions(limits: fuzzLimits))
        },
        "FuzzXMP": { start, count in
            let bytes = [UInt8](UnsafeRawBufferPointer(start: start, count: count))
            if let doc = try? XMPDocument(bytes) {
                _ = doc.value("http://ns.google.com/photos/1.0/depthmap/", "Near")
                _ = doc.doubles("http://ns.apple.com/depthData/1.0/", "IntrinsicMatrix")
                _ = doc.elements("http://ns.google.com/photos/dd/1.0/container/", "Item").map {
                    $0.deepProperty("http://ns.google.com/photos/dd/1.0/item/", "Length")
                }
            }
        }
    ]

    /// Reads a depth photo with every auxiliary image decoded, depth not required.
    static func readDepth(_ b: UnsafeRawBufferPointer, path: String) {
        var o = DepthReadOptions()
        o.requireDepth = false
        o.limits = fuzzLimits
        o.decodeAuxiliary = Set(AuxiliaryKind.allCases)
        _ = try? DepthReader.read(bytes: [UInt8](b), path: path, options: o)
    }

    /// Runs one target on one input.
    ///
    /// - Parameters:
    ///   - target: A key of ``targets``.
    ///   - bytes: The input.
    /// - Returns: False when there is no such target.
    @discardableResult
    public static func run(_ target: String, _ bytes: [UInt8]) -> Bool {
        guard let body = targets[target] else { return false }
        bytes.withUnsafeBytes { b in body(b.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, b.count) }
        return true
    }
}
