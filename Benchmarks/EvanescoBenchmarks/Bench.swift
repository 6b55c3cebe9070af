import ArgumentParser
import EvanescoCore
import EvanescoIO
import Foundation

/// One benchmark's figures, as `--json FILE` writes them.
struct Row: Codable {
    var name: String
    var subject: String
    var baseline: String
    var subjectMedian: Double
    var baselineMedian: Double
    var ratio: Double
    var subjectRuns: [Double]
    var baselineRuns: [Double]
    /// encode: the files' sizes.
    var subjectBytes: Int? = nil
    var baselineBytes: Int? = nil
}
nonisolated(unsafe) var rows: [Row] = []

/// What every benchmark shares: the settings from the command line and the rows measured so far.
final class Bench {
    /// Alternated runs per comparison.
    let repeats: Int
    /// The folder holding `data/` and `bench/` (../shared beside the package).
    let shared: String
    /// warp-path: only this map (homography, affine or shift); align-burst: only this burst.
    let only: String?
    /// lens-oracle: folder for the fast and exact renderings of each crop.
    let save: String?
    /// Every comparison so far.
    var rows: [Row] = []

    init(repeats: Int, shared: String, only: String?, save: String?) {
        self.repeats = repeats
        self.shared = shared
        self.only = only
        self.save = save
    }

    /// Runs a and b alternately `n` times (after one warm-up each) and records medians.
    func compare(_ name: String, _ subject: String, _ a: () throws -> Void, _ baseline: String, _ b: () throws -> Void)
        rethrows
    {
        try a()
        try b()
        var ta: [Double] = [], tb: [Double] = []
        for i in 0..<repeats {
            if i % 2 == 0 {
                var t = now()
                try a()
                ta.append(now() - t)
                t = now()
                try b()
                tb.append(now() - t)
            } else {
                var t = now()
                try b()
                tb.append(now() - t)
                t = now()
                try a()
                ta.append(now() - t)
            }
        }
        let r = Row(
            name: name, subject: subject, baseline: baseline, subjectMedian: median(ta), baselineMedian: median(tb),
            ratio: median(ta) / median(tb), subjectRuns: ta, baselineRuns: tb)
        rows.append(r)
        func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }
        print(
            pad(name, 34) + pad(subject, 22) + String(format: "%9.1f ms   ", r.subjectMedian * 1000)
                + pad(baseline, 28) + String(format: "%9.1f ms   ratio %.3f", r.baselineMedian * 1000, r.ratio))
    }

    /// Times one call, median of ``repeats``.
    func timeIt(_ name: String, _ body: () throws -> Void) rethrows {
        try body()
        var t: [Double] = []
        for _ in 0..<repeats {
            let s = now()
            try body()
            t.append(now() - s)
        }
        print(name.padding(toLength: 48, withPad: " ", startingAt: 0) + String(format: "%9.1f ms", median(t) * 1000))
    }

    /// A 12 MP JPEG: pug-handheld's first frame, or a synthetic one without shared data.
    func twelveMegapixelJPEG() throws -> (path: String, bytes: [UInt8]) {
        let burst = shared + "/data/bursts/synthetic/pug-handheld/frames/f00.jpg"
        if FileManager.default.fileExists(atPath: burst) { return (burst, try InputFile.read(burst)) }
        // No shared data: make a 12 MP JPEG of a smooth synthetic scene.
        let img = Image<UInt8>(uninitializedWidth: 4032, height: 3024, channels: 3) { d in
            for y in 0..<3024 {
                for x in 0..<4032 {
                    let o = (y * 4032 + x) * 3
                    d[o] = UInt8((x ^ y) & 255)
                    d[o + 1] = UInt8(x / 16 & 255)
                    d[o + 2] = UInt8(y / 12 & 255)
                }
            }
        }
        let path = NSTemporaryDirectory() + "evanesco-bench-12mp.jpg"
        try? FileManager.default.removeItem(atPath: path)
        try ImageCodecs.write(.uint8(img), to: path, options: WriteOptions(quality: 92))
        return (path, try InputFile.read(path))
    }
}
