import EvanescoBatch
import EvanescoCore
import EvanescoIO
import Foundation
import SubprocessTestSupport
import Testing

/// The queue against hostile cases (issue 45): it refuses what `batch run` refuses, at submit and
/// again at the worker; "done" means the output is there; a connection problem is said at once in
/// its own words; ids it does not hold are said so. Part of ``QueueTests``, one test at a time:
/// some stop or restart the one database server every queue test uses.
extension QueueTests {
    /// A job whose output is one of its own input frames is refused at submit, with or without
    /// --force; someone's existing file is refused without --force. Nothing is queued or written.
    @Test func submitRefusesWhatBatchRunRefuses() throws {
        let s = Scratch()
        let burst = try BatchFixtures.burst(in: s.path, "frames", seed: 1, frames: 3)
        try FileManager.default.createDirectory(atPath: s.file("out"), withIntermediateDirectories: true)
        let frame = burst + "/f00.png", before = FileManager.default.contents(atPath: frame)
        let queue = try PG.queue("submitrules")
        let manifest = s.file("own.jsonl")
        try (BatchFixtures.line("own", "stack", ["frames/"], "frames/f00.png", ["align": "none"]) + "\n")
            .write(toFile: manifest, atomically: true, encoding: .utf8)
        for force in [[], ["--force"]] {
            let r = try CLI.run(["batch", "submit", manifest, "--queue", queue] + force)
            #expect(r.status == 65 && r.err.contains("an input of job own"), "\(r.err)")
        }
        try Data("someone's file".utf8).write(to: URL(fileURLWithPath: s.file("out/theirs.png")))
        let theirs = s.file("theirs.jsonl")
        try (BatchFixtures.line("theirs", "stack", ["frames/"], "out/theirs.png", ["align": "none"]) + "\n")
            .write(toFile: theirs, atomically: true, encoding: .utf8)
        var r = try CLI.run(["batch", "submit", theirs, "--queue", queue])
        #expect(r.status == 1 && r.err.contains("exists and no receipt says this batch wrote it"), "\(r.err)")
        #expect(r.out.contains("0 jobs added"), "\(r.out)")
        #expect(try PG.value("SELECT count(*) FROM submitrules_\(getpid()).jobs") == "0")
        // With --force the worker replaces it: it was asked to.
        r = try CLI.run(["batch", "submit", theirs, "--queue", queue, "--force"])
        #expect(r.status == 0 && r.out.contains("1 jobs added"), "\(r.err)")
        let w = try WorkerProcess(queue: queue, log: s.file("w.log"), extra: ["--exit-when-done", "--poll", "0.2"])
        #expect(w.wait(seconds: 120))
        #expect(FileManager.default.contents(atPath: s.file("out/theirs.png")) != Data("someone's file".utf8))
        #expect(FileManager.default.contents(atPath: frame) == before)
    }

    /// A row written straight into the queue (another tool, an older binary) whose output is its
    /// own input, or someone's file: the worker checks again and fails the job, touching nothing.
    @Test func theWorkerChecksAgainWhatItIsGiven() throws {
        let s = Scratch()
        let burst = try BatchFixtures.burst(in: s.path, "frames", seed: 2, frames: 3)
        try FileManager.default.createDirectory(atPath: s.file("out"), withIntermediateDirectories: true)
        try Data("someone's file".utf8).write(to: URL(fileURLWithPath: s.file("out/theirs.png")))
        let frame = burst + "/f01.png", before = FileManager.default.contents(atPath: frame)
        let queue = try PG.queue("workerrules"), schema = "workerrules_\(getpid())"
        // Asking for the status makes the schema.
        _ = try CLI.run(["batch", "status", "--queue", queue])
        for (id, output) in [("own", frame), ("theirs", s.file("out/theirs.png"))] {
            let job = try BatchJob.parse(
                BatchFixtures.line(id, "stack", [burst], output, ["align": "none"]), base: s.path, checkFiles: false)
            let spec = try job.normalizedLine().replacingOccurrences(of: "'", with: "''")
            _ = try PG.value(
                "INSERT INTO \(schema).jobs (id, kind, spec, output, max_attempts) VALUES ('\(id)', 'stack', "
                    + "'\(spec)', '\(output)', 3)"
            )
        }
        let w = try WorkerProcess(queue: queue, log: s.file("w.log"), extra: ["--exit-when-done", "--poll", "0.2"])
        #expect(w.wait(seconds: 120), "\(w.text)")
        #expect(
            try PG.value("SELECT string_agg(id || ' ' || state, ',' ORDER BY id) FROM \(schema).jobs")
                == "own failed,theirs failed")
        #expect(
            try PG.value("SELECT error FROM \(schema).jobs WHERE id = 'own'").contains("an input of job own"),
            "\(w.text)")
        #expect(FileManager.default.contents(atPath: frame) == before)
        #expect(FileManager.default.contents(atPath: s.file("out/theirs.png")) == Data("someone's file".utf8))
    }

    /// A staged output removed before it is placed (a worker whose lease lapsed cleaning up) is
    /// not recorded done: placing it throws, the transaction is rolled back, no row says done.
    @Test func aJobWhoseStagedOutputVanishedIsNotDone() async throws {
        let s = Scratch()
        let made = try BatchFixtures.manifest(in: s.path, stacks: 1, portraits: 0, bad: 0)
        let queue = try JobQueue(QueueAddress(try PG.queue("vanished")))
        defer { queue.close() }
        try await queue.migrate()
        let jobs = try BatchManifest.read(made.manifest).jobs(in: nil)
        #expect(try await queue.submit(jobs, maxAttempts: 4).added == 1)
        let claimed = try #require(try await queue.claim(limit: 1, owner: "w", lease: 30).first)
        let output = jobs[0].output
        let staged = try Staging.prepare(for: output, token: String(claimed.token))
        try Data("abc".utf8).write(to: URL(fileURLWithPath: staged))
        let digest = try #require(OutputDigest.of(staged))
        #expect(digest.bytes == 3 && digest.sha256.hasPrefix("ba7816bf"))  // SHA-256("abc")
        // Another process removes every staging folder of this output.
        Staging.discard(staged)
        do {
            _ = try await queue.complete(
                [JobQueue.Completion(job: claimed, report: "{}", seconds: 0.1, digest: digest)], owner: "w"
            ) { _ in try Staging.place(staged, at: output, expecting: digest) }
            Issue.record("a job whose staged output was gone was recorded done")
        } catch {
            #expect(String(describing: error).contains("is gone"), "\(error)")
        }
        #expect(!FileManager.default.fileExists(atPath: output))
        #expect(try PG.value("SELECT state FROM vanished_\(getpid()).jobs") == "running")
        // Placed for real, the row keeps the output's size and digest.
        let again = try Staging.prepare(for: output, token: String(claimed.token))
        try Data("abc".utf8).write(to: URL(fileURLWithPath: again))
        let applied = try await queue.complete(
            [JobQueue.Completion(job: claimed, report: "{}", seconds: 0.1, digest: digest)], owner: "w"
        ) { _ in try Staging.place(again, at: output, expecting: digest) }
        #expect(applied == [claimed.token])
        #expect(
            try PG.value("SELECT state || ' ' || output_bytes || ' ' || output_sha256 FROM vanished_\(getpid()).jobs")
                == "done 3 \(digest.sha256)")
    }

    /// Each connection problem is said at once, in its own words, not as "did not answer within
    /// 30 s"; permanent ones stop a worker instead of retrying for ever.
    @Test func connectionProblemsAreSaidAtOnce() throws {
        let base = try #require(PG.url)
        let url = try #require(URLComponents(string: base))
        let port = url.port ?? 5432
        // A port nothing listens on: bound, then closed.
        let free = try Subprocess.run(
            "/usr/bin/env",
            ["python3", "-c", "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"],
            seconds: 30
        ).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let cases: [(String, String)] = [
            ("postgres://nobody_here@127.0.0.1:\(port)/evanesco", "refused user nobody_here"),
            ("postgres://evanesco@127.0.0.1:\(port)/no_such_db", "database no_such_db does not exist"),
            ("postgres://evanesco@127.0.0.1:\(free)/evanesco", "connection refused"),
            ("postgres://evanesco@127.0.0.1:\(port)/evanesco?sslmode=require", "does not offer TLS")
        ]
        for (queue, words) in cases {
            let start = Date()
            let r = try CLI.run(["batch", "status", "--queue", queue], seconds: 60)
            #expect(r.status == 1 && r.err.contains(words), "\(queue): \(r.err)")
            #expect(Date().timeIntervalSince(start) < 15, "\(queue): \(Date().timeIntervalSince(start)) s")
        }
        // A worker given an unknown role stops with that error instead of retrying for ever.
        let s = Scratch()
        let w = try WorkerProcess(queue: cases[0].0, log: s.file("w.log"), extra: [])
        #expect(w.wait(seconds: 20), "the worker kept retrying a permanent error:\n\(w.text)")
        #expect(w.process.terminationStatus == 1 && w.text.contains("refused user nobody_here"), "\(w.text)")
    }

    /// `--metrics-port` already taken, or `--metrics-host` not of this machine: the worker does
    /// not start (no database needed to find out).
    @Test func metricsThatCannotBeServedStopTheWorker() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        listen(listener, 1)
        var bound = sockaddr_in(), length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        let taken = Int(UInt16(bigEndian: bound.sin_port))
        let queue = try PG.queue("metricsrefused")
        var r = try CLI.run(["worker", "--queue", queue, "--metrics-port", String(taken)], seconds: 30)
        #expect(r.status == 64 && r.err.contains("in use by another program"), "\(r.err)")
        // 192.0.2.1 (TEST-NET-1) is no address of this machine: bind fails locally, nothing is sent.
        r = try CLI.run(["worker", "--queue", queue, "--metrics-port", "0", "--metrics-host", "192.0.2.1"], seconds: 30)
        #expect(r.status == 64, "\(r.err)")
        r = try CLI.run(
            ["worker", "--queue", queue, "--metrics-port", "9", "--metrics-host", "192.0.2.1"], seconds: 30)
        #expect(r.status == 64 && r.err.contains("not an address of this machine"), "\(r.err)")
    }

    /// Cancel and retry name the ids they did not act on and exit 1; cancelled jobs can be
    /// queued again.
    @Test func cancelAndRetrySayWhatTheyDidNotDo() throws {
        let s = Scratch()
        let made = try BatchFixtures.manifest(in: s.path, stacks: 2, portraits: 0, bad: 0)
        let queue = try PG.queue("cancelretry"), schema = "cancelretry_\(getpid())"
        #expect(try CLI.run(["batch", "submit", made.manifest, "--queue", queue]).status == 0)
        var r = try CLI.run(["batch", "cancel", "stack0", "nonesuch", "--queue", queue])
        #expect(r.status == 1 && r.out.contains("1 job cancelled"), "\(r.out)")
        #expect(r.err.contains("job nonesuch not cancelled: the queue holds no job with this id"), "\(r.err)")
        r = try CLI.run(["batch", "retry", "--failed", "stack0", "--queue", queue])
        #expect(r.status == 1 && r.err.contains("job stack0 not queued again: it is cancelled"), "\(r.err)")
        r = try CLI.run(["batch", "retry", "--cancelled", "stack0", "--queue", queue])
        #expect(r.status == 0 && r.out.contains("1 cancelled job queued again"), "\(r.out) \(r.err)")
        #expect(try PG.value("SELECT string_agg(state, ',') FROM \(schema).jobs") == "pending,pending")
    }

    /// `--allow DIR`: a job whose input, output (through a link too) or mask resolves outside the
    /// allowed folders fails untouched; one inside runs.
    @Test func aConfinedWorkerRefusesPathsOutsideItsFolders() throws {
        let s = Scratch()
        let inside = s.file("inside"), outside = s.file("outside")
        for d in [inside + "/out", outside] {
            try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        }
        _ = try BatchFixtures.burst(in: inside, "frames", seed: 3, frames: 3)
        _ = try BatchFixtures.burst(in: outside, "frames", seed: 4, frames: 3)
        // A link inside the allowed folder that leads out of it.
        try FileManager.default.createSymbolicLink(atPath: inside + "/escape", withDestinationPath: outside)
        let lines = [
            BatchFixtures.line("ok", "stack", [inside + "/frames"], inside + "/out/ok.png", ["align": "none"]),
            BatchFixtures.line("reads", "stack", [outside + "/frames"], inside + "/out/reads.png", ["align": "none"]),
            BatchFixtures.line("writes", "stack", [inside + "/frames"], inside + "/escape/w.png", ["align": "none"])
        ]
        try (lines.joined(separator: "\n") + "\n").write(
            toFile: s.file("jobs.jsonl"), atomically: true, encoding: .utf8)
        let queue = try PG.queue("confined"), schema = "confined_\(getpid())"
        #expect(try CLI.run(["batch", "submit", s.file("jobs.jsonl"), "--queue", queue]).status == 0)
        let w = try WorkerProcess(
            queue: queue, log: s.file("w.log"), extra: ["--exit-when-done", "--poll", "0.2", "--allow", inside])
        #expect(w.wait(seconds: 120), "\(w.text)")
        #expect(
            try PG.value("SELECT string_agg(id || ' ' || state, ',' ORDER BY id) FROM \(schema).jobs")
                == "ok done,reads failed,writes failed")
        for id in ["reads", "writes"] {
            #expect(
                try PG.value("SELECT error FROM \(schema).jobs WHERE id = '\(id)'").contains(
                    "outside the folders this worker may use"))
        }
        #expect(!FileManager.default.fileExists(atPath: outside + "/w.png"))
    }

    /// A job past its time limit (the line's `timeout`, else the worker's `--job-timeout`) is
    /// stopped and failed, not left renewing its lease; `batch status --job` shows its log.
    @Test func aJobPastItsTimeLimitIsStoppedAndFailedWithItsLog() throws {
        let s = Scratch()
        // The slow job must outlast the limit many times over on any machine: a plain merge of
        // the slow burst once finished in 0.99 s under ASan, inside the 1 s limit.
        let made = try BatchFixtures.manifest(
            in: s.path, stacks: 2, portraits: 0, bad: 0, big: 1, bigBurst: QueueTests.slowBurst, bigAlign: "local")
        let queue = try PG.queue("timeout"), schema = "timeout_\(getpid())"
        #expect(try CLI.run(["batch", "submit", made.manifest, "--queue", queue]).status == 0)
        let start = Date()
        let w = try WorkerProcess(
            queue: queue, log: s.file("w.log"),
            extra: ["--exit-when-done", "--poll", "0.2", "--lease", "2", "--job-timeout", "1"])
        #expect(w.wait(seconds: 120), "\(w.text)")
        #expect(Date().timeIntervalSince(start) < 60)
        // The big stack takes seconds: stopped at 1 s. The small one is done well within it.
        #expect(
            try PG.value(
                "SELECT string_agg(id || ' ' || state || ' ' || attempts, ',' ORDER BY id) FROM \(schema).jobs")
                == "stack0 failed 1,stack1 done 1", "\(w.text)")
        let r = try CLI.run(["batch", "status", "--queue", queue, "--job", "stack0"])
        #expect(r.status == 0 && r.out.contains("stack0 (stack): failed, attempt 1 of 5"), "\(r.out)")
        #expect(r.out.contains("time limit of 1 s") && r.out.contains("attempt 1 of 5 on"), "\(r.out)")
        let done = try CLI.run(["batch", "status", "--queue", queue, "--job", "stack1", "--json"])
        let detail = try #require(try JSONSerialization.jsonObject(with: Data(done.out.utf8)) as? [String: Any])
        #expect(detail["state"] as? String == "done" && (detail["output_bytes"] as? Int ?? 0) > 0, "\(done.out)")
        #expect((detail["log"] as? [String] ?? []).contains { $0.contains("merge:") }, "\(done.out)")
        #expect(try CLI.run(["batch", "status", "--queue", queue, "--job", "nonesuch"]).status == 1)
        // A line's own timeout wins over the worker's.
        #expect(throws: ManifestError.self) {
            try BatchJob.parse(
                #"{"id": "t", "kind": "stack", "inputs": ["x"], "output": "o.png", "timeout": 0}"#, base: "/",
                checkFiles: false)
        }
    }

    /// A database outage longer than the lease but shorter than `--outage-grace`: the job in
    /// flight is finished and recorded once, on its first attempt, by the worker that ran it.
    @Test func workInFlightSurvivesAnOutageShorterThanTheGrace() throws {
        guard let outage = PG.outage else {
            Issue.record("EVANESCO_TEST_PG_OUTAGE is not set: run through scripts/with-postgres.sh")
            return
        }
        let s = Scratch()
        let made = try BatchFixtures.manifest(
            in: s.path, stacks: 1, portraits: 0, bad: 0, big: 1, bigBurst: (60, 960, 720), bigAlign: "local")
        let queue = try PG.queue("outage") + "&timeout=3", schema = "outage_\(getpid())"
        #expect(try CLI.run(["batch", "submit", made.manifest, "--queue", queue]).status == 0)
        let w = try WorkerProcess(
            queue: queue, log: s.file("w.log"),
            extra: ["--exit-when-done", "--poll", "0.2", "--lease", "1", "--outage-grace", "60"])
        #expect(
            try eventually(60) { try PG.value("SELECT state FROM \(schema).jobs") == "running" }, "never claimed")
        // Away for 4 s: four leases' worth.
        #expect(system(outage + " 4") == 0)
        try #require(w.wait(seconds: 180), "\(w.text)")
        #expect(
            try PG.value("SELECT state || ' ' || attempts || ' ' || lease_losses FROM \(schema).jobs") == "done 1 0",
            "\(w.text)")
        #expect(
            w.text.contains("failed") || w.text.contains("could not"), "the outage did not overlap the job:\n\(w.text)")
        #expect(FileManager.default.fileExists(atPath: made.good["stack0"]!.output))
    }

    /// A job the previous binary queued (job spec 1: no `spec` key, the memory limit in bytes)
    /// runs with this one, migrated; submitting the same line again finds it already queued.
    @Test func aJobQueuedByThePreviousSpecRuns() throws {
        let s = Scratch()
        let burst = try BatchFixtures.burst(in: s.path, "b", seed: 2)
        try FileManager.default.createDirectory(atPath: s.file("out"), withIntermediateDirectories: true)
        let options: [String: Any] = ["merge": "median", "align": "none", "memoryLimit": 512]
        try (BatchFixtures.line("old", "stack", [burst], s.file("out/old.png"), options) + "\n").write(
            toFile: s.file("jobs.jsonl"), atomically: true, encoding: .utf8)
        let queue = try PG.queue("legacy"), schema = "legacy_\(getpid())"
        #expect(try CLI.run(["batch", "submit", s.file("jobs.jsonl"), "--queue", queue]).status == 0)
        // The row as the previous binary wrote it.
        let stored = try PG.value("SELECT spec FROM \(schema).jobs WHERE id = 'old'")
        var object = try #require(try JSONSerialization.jsonObject(with: Data(stored.utf8)) as? [String: Any])
        #expect(object["spec"] as? Int == 2, "\(stored)")
        object["spec"] = nil
        var stackOptions = try #require(object["options"] as? [String: Any])
        stackOptions["memoryLimit"] = 536_870_912
        object["options"] = stackOptions
        let v1 = String(
            decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
        _ = try PG.value("UPDATE \(schema).jobs SET spec = '\(v1)' WHERE id = 'old'")
        #expect(try PG.value("SELECT spec FROM \(schema).jobs WHERE id = 'old'").contains("536870912"))
        let again = try CLI.run(["batch", "submit", s.file("jobs.jsonl"), "--queue", queue])
        #expect(again.status == 0 && again.out.contains("0 jobs added, 1 already queued"), "\(again.out)\(again.err)")
        let w = try WorkerProcess(queue: queue, log: s.file("w.log"), extra: ["--exit-when-done", "--poll", "0.2"])
        #expect(w.wait(seconds: 120), "\(w.text)")
        #expect(try PG.value("SELECT state FROM \(schema).jobs WHERE id = 'old'") == "done", "\(w.text)")
        let alone = try CLI.run([
            "stack", burst, "--merge", "median", "--align", "none", "--memory-limit", "512", "-o", s.file("alone.png"),
            "--quiet"
        ])
        #expect(alone.status == 0, "\(alone.err)")
        #expect(bytesOf(s.file("out/old.png")) == bytesOf(s.file("alone.png")))
    }
}
