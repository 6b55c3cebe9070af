// `EvanescoBenchmarks encode`: our PNG, TIFF and JPEG writes (encode and file, as ImageCodecs.write
// does them for the CLI) against cv2.imwrite on the same pixels, alternated in one run. OpenCV
// runs in Benchmarks/encode_anchor.py, kept alive and timed there, so neither Python's start-up
// nor the pixels' transfer is counted.
import EvanescoCore
import EvanescoIO
import Foundation

/// OpenCV's side: the anchor script, asked line by line.
final class EncodeAnchor {
    let process = Process()
    let input = Pipe(), output = Pipe()
    var pending = Data()

    init() throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("encode_anchor.py").path
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script]
        process.standardInput = input
        process.standardOutput = output
        try process.run()
    }

    deinit {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }

    func ask(_ line: String) throws -> [String: Any] {
        try input.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8))
        while !pending.contains(10) {
            // availableData returns what the pipe holds (read(upToCount:) would wait for all 4096).
            let more = output.fileHandleForReading.availableData
            guard !more.isEmpty else {
                throw BenchError.anchor("encode_anchor.py stopped (is OpenCV installed? ../shared/bench/setup.sh)")
            }
            pending.append(more)
        }
        let end = pending.firstIndex(of: 10)!
        let reply = pending[pending.startIndex..<end]
        pending = Data(pending[(end + 1)...])
        guard let object = try JSONSerialization.jsonObject(with: reply) as? [String: Any] else {
            throw BenchError.anchor("bad reply")
        }
        if let error = object["error"] as? String { throw BenchError.anchor(error) }
        return object
    }

    /// Hands the anchor the pixels (raw, RGB, host order).
    func load(_ image: AnyImage, scratch: String) throws {
        let raw = scratch + "/pixels.raw"
        let bytes: [UInt8]
        switch image {
        case .uint8(let i): bytes = Array(i.samples)
        case .uint16(let i): bytes = i.samples.withUnsafeBytes { Array($0) }
        case .float32: throw BenchError.anchor("float pixels are not compared")
        }
        try Data(bytes).write(to: URL(fileURLWithPath: raw))
        _ = try ask("load \(raw) \(image.width) \(image.height) \(image.channels) \(image.bitDepth)")
    }

    /// cv2.imwrite's time and the file's size.
    func write(_ out: String, format: String, level: Int?) throws -> (Double, Int) {
        let r = try ask("write \(out) \(format)" + (level.map { " \($0)" } ?? ""))
        return (r["seconds"] as? Double ?? .nan, r["bytes"] as? Int ?? -1)
    }
}

enum BenchError: Error {
    case anchor(String)
    case mismatch(String)
}

/// A 16-bit picture made from an 8-bit photo: a [1 2 1] smoothing computed in 16 bits, so the
/// low byte carries information as a stack's or a raw converter's output does.
func sixteenBit(_ image: Image<UInt8>) -> Image<UInt16> {
    let w = image.width, c = image.channels
    return Image<UInt16>(uninitializedWidth: w, height: image.height, channels: c) { d in
        image.samples.withUnsafeBufferPointer { s in
            for y in 0..<image.height {
                for x in 0..<w {
                    let l = max(0, x - 1), r = min(w - 1, x + 1)
                    for k in 0..<c {
                        let row = y * w
                        let sum = Int(s[(row + l) * c + k]) + 2 * Int(s[(row + x) * c + k]) + Int(s[(row + r) * c + k])
                        d[(row + x) * c + k] = UInt16((sum * 257 + 2) / 4)
                    }
                }
            }
        }
    }
}

extension Bench {
    /// Alternates our write and the anchor's ``Bench/repeats`` times (or `repeats`) (after one warm-up each) and
    /// records
    /// medians, as compare() does, with the files' sizes.
    func compareWrites(
        _ name: String, _ subject: String, _ ours: () throws -> (Double, Int),
        _ baseline: String, _ theirs: () throws -> (Double, Int), repeats: Int? = nil
    ) rethrows {
        var (_, oursBytes) = try ours()
        var (_, theirBytes) = try theirs()
        var a: [Double] = [], b: [Double] = []
        for i in 0..<(repeats ?? self.repeats) {
            if i % 2 == 0 {
                let x = try ours()
                a.append(x.0)
                oursBytes = x.1
                let y = try theirs()
                b.append(y.0)
                theirBytes = y.1
            } else {
                let y = try theirs()
                b.append(y.0)
                theirBytes = y.1
                let x = try ours()
                a.append(x.0)
                oursBytes = x.1
            }
        }
        let r = Row(
            name: name, subject: subject, baseline: baseline, subjectMedian: median(a), baselineMedian: median(b),
            ratio: median(a) / median(b), subjectRuns: a, baselineRuns: b, subjectBytes: oursBytes,
            baselineBytes: theirBytes)
        rows.append(r)
        func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }
        print(
            pad(name, 40) + pad(subject, 16)
                + String(format: "%7.3f s %6.2f MB   ", r.subjectMedian, Double(oursBytes) / 1e6)
                + pad(baseline, 18)
                + String(
                    format: "%7.3f s %6.2f MB   time %.2f  size %.2f", r.baselineMedian, Double(theirBytes) / 1e6,
                    r.ratio, Double(oursBytes) / Double(theirBytes)))
    }

    /// The pictures the encode benchmark writes: three shared photos, or a synthetic 12 MP one
    /// when ../shared/data is absent.
    func encodePhotos() -> [(String, AnyImage)] {
        var photos: [(String, AnyImage)] = []
        for (name, path) in [
            ("pug.heic 4032x3024", "/data/depth/pug-iphone13pro/pug.heic"),
            ("pug-handheld f00.jpg 4032x3024", "/data/bursts/synthetic/pug-handheld/frames/f00.jpg"),
            ("jpeg_depth_data.jpg 2316x3088", "/data/depth/truedepth-iphone/jpeg_depth_data.jpg")
        ] {
            if let d = try? ImageCodecs.read(shared + path) {
                photos.append((name, .uint8(d.image.uint8)))
            } else {
                print("encode: \(name) is absent, skipped")
            }
        }
        if photos.isEmpty {
            print("encode: no shared photos; a synthetic 12 MP picture instead")
            let img = Image<UInt8>(uninitializedWidth: 4032, height: 3024, channels: 3) { d in
                var seed: UInt64 = 1
                for i in 0..<d.count {
                    seed = seed &* 6364136223846793005 &+ 1442695040888963407
                    d[i] = UInt8(truncatingIfNeeded: (i / 3 % 4032) / 16 + (i / 3 / 4032) / 12 + Int(seed >> 61))
                }
            }
            photos.append(("synthetic 4032x3024", .uint8(img)))
        }
        return photos
    }

    func encode() throws {
        let scratch = NSTemporaryDirectory() + "evanesco-encode-bench-\(getpid())"
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let anchor = try EncodeAnchor()
        let photos = encodePhotos()
        print("encode: whole writes (encode + file) of RGB pictures; size ratio = ours / OpenCV's")
        for (index, (name, image8)) in photos.enumerated() {
            var pictures: [(String, AnyImage)] = [("8-bit", image8)]
            if index == 0 { pictures.append(("16-bit", .uint16(sixteenBit(image8.uint8)))) }
            for (depth, image) in pictures {
                try anchor.load(image, scratch: scratch)
                func ours(_ ext: String, _ options: WriteOptions) -> () throws -> (Double, Int) {
                    {
                        let out = scratch + "/ours." + ext
                        try? FileManager.default.removeItem(atPath: out)
                        let t = now()
                        try ImageCodecs.write(image, to: out, options: options)
                        let seconds = now() - t
                        return (
                            seconds, Int((try? FileManager.default.attributesOfItem(atPath: out)[.size] as? Int) ?? -1)
                        )
                    }
                }
                func theirs(_ ext: String, _ level: Int?) -> () throws -> (Double, Int) {
                    { try anchor.write(scratch + "/cv." + ext, format: ext, level: level) }
                }
                let label = "\(name) \(depth)"
                // --repeat 0: only the read-back below (CI's check that other programs read our files).
                if repeats > 0 {
                    try compareWrites(
                        "PNG \(label)", "ours default", ours("png", WriteOptions()), "cv2 default", theirs("png", nil))
                    try compareWrites(
                        "PNG \(label)", "ours default", ours("png", WriteOptions()), "cv2 level 1", theirs("png", 1))
                    try compareWrites(
                        "PNG \(label)", "ours fast", ours("png", WriteOptions(compression: .fast)), "cv2 default",
                        theirs("png", nil))
                    try compareWrites(
                        "PNG \(label)", "ours best", ours("png", WriteOptions(compression: .best)), "cv2 level 9",
                        theirs("png", 9),
                        repeats: min(3, repeats))
                    try compareWrites(
                        "TIFF \(label)", "ours default", ours("tif", WriteOptions()), "cv2 default", theirs("tif", nil))
                    if depth == "8-bit" {
                        try compareWrites(
                            "JPEG q92 \(label)", "ours", ours("jpg", WriteOptions(quality: 92)), "cv2 q92",
                            theirs("jpg", 92))
                    }
                }
                // Every file of ours has the pixels, for libpng/libtiff (our reader) and for OpenCV.
                for (ext, compression) in [
                    ("png", LosslessCompression.fast), ("png", .default), ("png", .best), ("tif", .default)
                ] {
                    let out = scratch + "/check." + ext
                    try? FileManager.default.removeItem(atPath: out)
                    try ImageCodecs.write(image, to: out, options: WriteOptions(compression: compression))
                    guard try ImageCodecs.read(out).image == image,
                        try anchor.ask("check \(out)")["same"] as? Bool == true
                    else {
                        throw BenchError.mismatch("\(label) \(ext) \(compression): the pixels read back differ")
                    }
                }
            }
        }
        print("encode: every file written was read back by libpng/libtiff and by OpenCV with the same pixels")
    }
}
