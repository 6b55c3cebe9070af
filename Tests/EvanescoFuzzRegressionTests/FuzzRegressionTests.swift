import Foundation
import Testing
import EvanescoFuzzEntries

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
                let bytes = try [UInt8](Data(contentsOf: Self.folder.appendingPathComponent(t).appendingPathComponent(f)))
                #expect(FuzzEntries.run(t, bytes), "Regressions/\(t): no such fuzz target")
                replayed += 1
            }
        }
        // The fuzzers' trivial inputs go through every target too.
        for t in FuzzEntries.targets.keys.sorted() {
            for bytes: [UInt8] in [[], [0], Array(repeating: 0xFF, count: 64), Array("<a>".utf8)] { FuzzEntries.run(t, bytes) }
        }
        #expect(FuzzEntries.targets.count == 11)
        print("fuzz regressions: \(replayed) kept inputs replayed")
    }
}
