import Foundation
import Testing
@testable import EvanescoIO

/// C libraries' own stderr lines are captured while a decode runs and handed back as lines;
/// our own progress and log lines written meanwhile go on to the real stderr.
@Suite(.serialized) struct LibraryStderrTests {
    @Test func capturesWhatCCodeWritesOnDescriptor2() {
        let (value, lines) = LibraryStderr.capture { () -> Int in
            _ = "SPS error: CB alignment\nSPS error: CB alignment\n".withCString { write(2, $0, strlen($0)) }
            _ = "\r\u{1B}[2Kdecode [####] 3/4 frames\n".withCString { write(2, $0, strlen($0)) }
            _ = "2026-11-26T02:00:00+0000 error evanesco.studio: a log line\n".withCString { write(2, $0, strlen($0)) }
            return 42
        }
        #expect(value == 42)
        // (Other tests of this process may write on stderr meanwhile; only these lines are ours.)
        #expect(lines.filter { $0 == "SPS error: CB alignment" }.count == 1, "\(lines)")
        #expect(!lines.contains { $0.contains("decode [") || $0.contains("a log line") }, "\(lines)")
        // stderr is ours again afterwards: descriptor 2 is the same file as before the capture.
        var a = stat(), b = stat()
        fstat(2, &a)
        let (_, none) = LibraryStderr.capture { () -> Int in 0 }
        fstat(2, &b)
        #expect(none.isEmpty && a.st_ino == b.st_ino && a.st_dev == b.st_dev)
    }

    @Test func nestedAndFailingCapturesRestoreStderr() throws {
        var before = stat()
        fstat(2, &before)
        struct Boom: Error {}
        #expect(throws: Boom.self) {
            _ = try LibraryStderr.capture { () -> Int in
                let (_, inner) = LibraryStderr.capture { () -> Int in
                    _ = "inner\n".withCString { write(2, $0, strlen($0)) }
                    return 0
                }
                #expect(inner == ["inner"])
                throw Boom()
            }
        }
        var after = stat()
        fstat(2, &after)
        #expect(before.st_ino == after.st_ino && before.st_dev == after.st_dev)
    }

    @Test func logLinesAreRecognised() {
        #expect(LibraryStderr.isLogLine("2026-11-26T02:00:00+0000 info x"))
        #expect(
            !LibraryStderr.isLogLine("SPS error: x") && !LibraryStderr.isLogLine("2026-11")
                && !LibraryStderr.isLogLine("20261126T0200"))
    }
}
