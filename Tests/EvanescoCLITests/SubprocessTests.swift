import Foundation
import SubprocessTestSupport
import Testing

/// The child-process helper every CLI test uses: it must never be the thing that hangs.
@Suite struct SubprocessHelper {
    @Test("A child that floods stdout and stderr (far past a pipe's 64 KB) finishes, every byte read")
    func floodingChildFinishes() throws {
        let r = try Subprocess.run(
            "/bin/bash", ["-c", "head -c 3000000 /dev/zero; head -c 2000000 /dev/zero >&2; exit 3"], seconds: 60)
        #expect(!r.timedOut && r.status == 3)
        #expect(r.out.count == 3_000_000 && r.err.count == 2_000_000)
    }

    @Test("stdin reaches the child whole, and a child that ignores it does not block the writer")
    func stdinIsFed() throws {
        let bytes = (0..<1_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let r = try Subprocess.run("/bin/cat", [], stdin: bytes, seconds: 60)
        #expect(r.status == 0 && r.out == bytes)
        let ignored = try Subprocess.run("/bin/true", [], stdin: bytes, seconds: 60)
        #expect(ignored.status == 0 && !ignored.timedOut)
    }

    @Test("A child past its time is stopped (SIGKILL if it ignores SIGTERM): status -1, what it said kept")
    func hangIsStopped() throws {
        let start = Date()
        let r = try Subprocess.run(
            "/bin/bash", ["-c", "trap '' TERM; echo started; echo why >&2; sleep 100"], seconds: 1)
        #expect(r.timedOut && r.status == -1)
        #expect(r.stdout == "started\n" && r.stderr.hasPrefix("why\n") && r.stderr.contains("it hung"))
        #expect(Date().timeIntervalSince(start) < 20)
    }

    @Test("The first line is read without waiting for the rest; a child that never writes one gives nil")
    func firstLine() throws {
        let p = try Subprocess("/bin/bash", ["-c", "echo url; sleep 100"])
        #expect(p.firstLine(within: 30) == "url")
        p.send(SIGKILL)
        _ = p.finish(within: 10)
        let silent = try Subprocess("/bin/true", [])
        #expect(silent.firstLine(within: 30) == nil)
    }
}
