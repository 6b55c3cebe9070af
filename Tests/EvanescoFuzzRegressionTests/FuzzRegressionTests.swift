import Foundation
import Testing
import CPNG
import EvanescoCore
import EvanescoIO
@testable import EvanescoFuzzEntries

/// Replays every input a fuzz target once failed on (kept in Regressions/<Target>/), plus the
/// seeds each target starts from, through the same bodies the fuzzers run. A regression crashes
/// this test process, so it cannot pass silently.
@Suite("Fuzz regressions")
struct FuzzRegressionTests {
    static var folder: URL { Bundle.module.resourceURL!.appendingPathComponent("Regressions") }

    @Test("Every kept finding replays without a crash, through a target that exists")
    func replay() throws {
        let fm = FileManager.default
        let targets = try fm.contentsOfDirectory(atPath: Self.folder.path).filter { !$0.hasSuffix(".md") }
        var replayed = 0
        for t in targets {
            for f in try fm.contentsOfDirectory(atPath: Self.folder.appendingPathComponent(t).path) {
                let bytes = try [UInt8](
                    Data(contentsOf: Self.folder.appendingPathComponent(t).appendingPathComponent(f)))
                #expect(FuzzEntries.run(t, bytes), "Regressions/\(t): no such fuzz target")
                replayed += 1
            }
        }
        // The fuzzers' trivial inputs go through every target too.
        for t in FuzzEntries.targets.keys.sorted() {
            for bytes: [UInt8] in [[], [0], Array(repeating: 0xFF, count: 64), Array("<a>".utf8)] {
                FuzzEntries.run(t, bytes)
            }
        }
        #expect(FuzzEntries.targets.count == 12)
        print("fuzz regressions: \(replayed) kept inputs replayed")
    }

    @Test("FuzzPNG's CRC repair leaves a valid PNG as it is and mends a chunk's broken CRC")
    func pngCRCRepair() throws {
        let image = Image<UInt8>(width: 7, height: 5, channels: 3) { d in
            for i in 0..<d.count { d[i] = UInt8(truncatingIfNeeded: i &* 29) }
        }
        let png = try ImageCodecs.encode(.uint8(image), format: .png)
        #expect(FuzzEntries.withPNGCRCsFixed(png) == png)
        // Every chunk's CRC (its last 4 bytes) flipped in turn comes back as written.
        var pos = 8, chunks = 0
        while pos + 12 <= png.count {
            let length = png[pos..<(pos + 4)].reduce(0) { $0 << 8 | Int($1) }
            var broken = png
            broken[pos + 8 + length] ^= 0x5A
            #expect(FuzzEntries.withPNGCRCsFixed(broken) == png)
            pos += 12 + length
            chunks += 1
        }
        #expect(chunks >= 3)  // IHDR, IDAT, IEND at least
        // A chunk's data changed (IHDR's interlace byte, offset 28) keeps its bytes and gets the
        // CRC zlib computes for them (an implementation apart from the libdeflate one it uses).
        var changed = png
        changed[28] ^= 0x01
        let mended = FuzzEntries.withPNGCRCsFixed(changed)
        #expect(Array(mended[..<29]) == Array(changed[..<29]) && Array(mended[33...]) == Array(png[33...]))
        let crc = changed.withUnsafeBufferPointer { UInt32(crc32(0, $0.baseAddress! + 12, 17)) }
        #expect(Array(mended[29..<33]) == (0..<4).map { UInt8(truncatingIfNeeded: crc >> (24 - 8 * $0)) })
        #expect(Array(mended[29..<33]) != Array(png[29..<33]))
    }
}
