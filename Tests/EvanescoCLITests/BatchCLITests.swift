import EvanescoCore
import EvanescoIO
import Foundation
import SubprocessTestSupport
import Testing

/// `evanesco batch run` and `batch status` on manifests the tests make: every job through the
/// library, outputs identical to the commands alone, resumable, sharded.
@Suite(.serialized) struct BatchCLITests {
    func receipt(_ made: BatchFixtures.Made, _ folder: String, _ id: String) -> [String: Any]? {
        guard let d = FileManager.default.contents(atPath: made.manifest + ".state/\(folder)/\(id).json") else {
            return nil
        }
        return try? JSONSerialization.jsonObject(with: d) as? [String: Any]
    }

    @Test func runsEveryJobOnceResumesAndReportsFailures() throws {
        let s = Scratch()
        let made = try BatchFixtures.manifest(in: s.path, stacks: 12, portraits: 8, bad: 2)
        var r = try CLI.run(["batch", "run", made.manifest, "--jobs", "2", "--report", s.file("summary.json")])
        #expect(r.status == 1, "a failed job makes the run fail: \(r.err)")
        #expect(r.out.contains("22 jobs: 20 done, 0 skipped (done before), 2 failed"), "\(r.out)")
        for (id, message) in made.bad {
            #expect(r.err.contains("job \(id) failed: ") && r.err.contains(message), "\(r.err)")
            let failed = try #require(receipt(made, "failed", id))
            #expect((failed["error"] as? String)?.contains(message) == true)
        }
        // Every good job: its output, its receipt holding its command's report, the same bytes as the command alone.
        for (id, job) in made.good {
            #expect(FileManager.default.fileExists(atPath: job.output), "\(id)")
            let done = try #require(receipt(made, "done", id))
            #expect(done["state"] as? String == "done" && (done["report"] as? [String: Any]) != nil)
        }
        try BatchFixtures.expectSameAsCommand(made, ids: made.good.keys.sorted(), scratch: s.path)
        let summary = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: s.file("summary.json"))))
                as? [String: Any])
        #expect(summary["done"] as? Int == 20 && (summary["failed"] as? [Any])?.count == 2)
        #expect(BatchFixtures.leftovers(in: s.path).isEmpty, "\(BatchFixtures.leftovers(in: s.path))")

        // Status from the receipts.
        r = try CLI.run(["batch", "status", made.manifest, "--json"])
        let status = try #require(try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any])
        #expect(
            status["done"] as? Int == 20 && status["failed"] as? Int == 2 && status["pending"] as? Int == 0
                && status["total"] as? Int == 22)

        // Resume: done jobs are skipped; a deleted output is made again; the failures are tried again.
        let stamp =
            try FileManager.default.attributesOfItem(atPath: made.good["stack1"]!.output)[.modificationDate] as? Date
        try FileManager.default.removeItem(atPath: made.good["portrait3"]!.output)
        r = try CLI.run(["batch", "run", made.manifest, "--quiet"])
        #expect(r.out.contains("22 jobs: 1 done, 19 skipped (done before), 2 failed"), "\(r.out)")
        #expect(FileManager.default.fileExists(atPath: made.good["portrait3"]!.output))
        #expect(
            try FileManager.default.attributesOfItem(atPath: made.good["stack1"]!.output)[.modificationDate] as? Date
                == stamp, "a done job was run again")
    }

    @Test func anOutputThatIsNotTheBatchsIsNotReplacedWithoutForce() throws {
        let s = Scratch()
        let made = try BatchFixtures.manifest(in: s.path, stacks: 2, portraits: 0, bad: 0)
        let theirs = made.good["stack0"]!.output
        try Data("someone's file".utf8).write(to: URL(fileURLWithPath: theirs))
        var r = try CLI.run(["batch", "run", made.manifest, "--quiet"])
        #expect(
            r.status == 1 && r.err.contains("exists and no receipt says this batch wrote it")
                && r.err.contains("--force"), "\(r.err)")
        #expect(FileManager.default.contents(atPath: theirs) == Data("someone's file".utf8))
        r = try CLI.run(["batch", "run", made.manifest, "--quiet", "--force"])
        #expect(r.status == 0, "\(r.err)")
        try BatchFixtures.expectSameAsCommand(made, ids: ["stack0"], scratch: s.path)
    }

    @Test func badManifestLinesAreAllReportedAndNothingRuns() throws {
        let s = Scratch()
        let made = try BatchFixtures.manifest(in: s.path, stacks: 2, portraits: 0, bad: 0)
        var text = try String(contentsOfFile: made.manifest, encoding: .utf8)
        text += BatchFixtures.line("k", "stack", ["burst0"], "out/k.jpg", ["kappa": -2]) + "\n{\"id\": \"x\"}\n"
        try text.write(toFile: made.manifest, atomically: true, encoding: .utf8)
        let r = try CLI.run(["batch", "run", made.manifest])
        #expect(r.status == 65, "\(r.err)")
        #expect(
            r.err.contains("2 bad lines; nothing was run")
                && r.err.contains("line 3: job k: options: kappa must be within (0, 100]")
                && r.err.contains("line 4: job x: \"kind\" is missing"), "\(r.err)")
        let written = try FileManager.default.contentsOfDirectory(atPath: made.outputs)
        #expect(!FileManager.default.fileExists(atPath: made.manifest + ".state") && written.isEmpty)
    }

    @Test func shardsInParallelCoverTheManifestExactlyOnce() throws {
        let s = Scratch()
        let made = try BatchFixtures.manifest(in: s.path, stacks: 14, portraits: 7, bad: 0)
        // Five slices at once: two by --shard, Slurm's array variables, a Kubernetes Indexed Job's, and --shard again.
        let environments: [([String], [String: String])] = [
            (["--shard", "0/5"], [:]), (["--shard", "1/5"], [:]),
            ([], ["SLURM_ARRAY_TASK_ID": "12", "SLURM_ARRAY_TASK_MIN": "10", "SLURM_ARRAY_TASK_COUNT": "5"]),
            ([], ["JOB_COMPLETION_INDEX": "3", "EVANESCO_SHARD_COUNT": "5"]), (["--shard", "4/5"], [:])
        ]
        let processes = try environments.map { args, env in
            try Subprocess(
                CLI.binary, ["batch", "run", made.manifest, "--quiet"] + args,
                environment: ProcessInfo.processInfo.environment.filter {
                    !$0.key.hasPrefix("SLURM_") && $0.key != "JOB_COMPLETION_INDEX"
                }
                .merging(env) { $1 }, stderr: .discard)
        }
        var total = 0
        for (i, p) in processes.enumerated() {
            let r = p.finish(within: 600)
            let text = r.stdout
            #expect(r.status == 0 && text.contains("shard \(i)/5"), "\(text)")
            let done =
                text.split(separator: " ").firstIndex(of: "done,").map { Int(text.split(separator: " ")[$0 - 1]) ?? 0 }
                ?? 0
            #expect(done == (21 - i + 4) / 5, "shard \(i): \(text)")
            total += done
        }
        #expect(total == 21, "every job run exactly once over the shards")
        let receipts = try FileManager.default.contentsOfDirectory(atPath: made.manifest + ".state/done")
        #expect(receipts.count == 21)
        try BatchFixtures.expectSameAsCommand(made, ids: ["stack3", "portrait5"], scratch: s.path)
    }

    /// A line's `timeout` bounds the job in `batch run` as on a worker: past it the job is
    /// stopped and failed (its receipt says why), no output is placed, and the other job is done.
    @Test func aJobPastItsTimeLimitFailsInABatchRunToo() throws {
        let s = Scratch()
        let slow = QueueTests.slowBurst
        let big = try BatchFixtures.burst(
            in: s.path, "big", seed: 1, frames: slow.frames, width: slow.width, height: slow.height)
        let small = try BatchFixtures.burst(in: s.path, "small", seed: 2)
        try FileManager.default.createDirectory(atPath: s.file("out"), withIntermediateDirectories: true)
        func line(_ id: String, _ burst: String, _ align: String, timeout: Int) -> String {
            String(BatchFixtures.line(id, "stack", [burst], "out/\(id).png", ["align": align]).dropLast())
                + ", \"timeout\": \(timeout)}"
        }
        try (line("slow", big, "local", timeout: 1) + "\n" + line("quick", small, "none", timeout: 600) + "\n")
            .write(toFile: s.file("jobs.jsonl"), atomically: true, encoding: .utf8)
        let start = Date()
        let r = try CLI.run(["batch", "run", s.file("jobs.jsonl"), "--quiet", "--jobs", "2"])
        #expect(r.status == 1 && r.err.contains("job slow failed") && r.err.contains("time limit of 1 s"), "\(r.err)")
        #expect(Date().timeIntervalSince(start) < 30, "the slow job was not stopped at its limit")
        #expect(!FileManager.default.fileExists(atPath: s.file("out/slow.png")))
        #expect(FileManager.default.fileExists(atPath: s.file("out/quick.png")))
        let receipt = (try? String(contentsOfFile: s.file("jobs.jsonl.state/failed/slow.json"), encoding: .utf8)) ?? ""
        #expect(receipt.contains("raise the line's timeout") && receipt.contains("\"attempts\" : 1"), "\(receipt)")
        #expect(BatchFixtures.leftovers(in: s.path).isEmpty, "left behind: \(BatchFixtures.leftovers(in: s.path))")
    }

    /// A stack job's `erase` mask: what stood in three of five frames is erased, as by
    /// `evanesco stack --erase` alone (the same bytes); a mask of another size fails the job and
    /// names both sizes.
    @Test func stackJobsEraseWhatTheirMaskMarks() throws {
        let s = Scratch()
        let burst = s.file("burst")
        try FileManager.default.createDirectory(atPath: burst, withIntermediateDirectories: true)
        for f in 0..<5 {
            // The square (12x13 at y 20) stands at x 20 in frames 0-2, then at x 60.
            try ImageCodecs.write(
                .uint8(BatchFixtures.frame(96, 80, seed: 3, squareAt: f < 3 ? 20 : 60)), to: burst + "/f\(f).png",
                options: WriteOptions(compression: .fast))
        }
        let mask = Image<UInt8>(width: 96, height: 80, channels: 1) { d in
            for y in 16..<37 { for x in 16..<36 { d[y * 96 + x] = 255 } }
        }
        try ImageCodecs.write(.uint8(mask), to: s.file("mask.png"))
        try ImageCodecs.write(.uint8(Image<UInt8>(width: 10, height: 10, channels: 1)), to: s.file("small.png"))
        try FileManager.default.createDirectory(atPath: s.file("out"), withIntermediateDirectories: true)
        func job(_ id: String, _ mask: String) -> String {
            let line = BatchFixtures.line(id, "stack", ["burst"], "out/\(id).png", ["align": "none", "merge": "median"])
            return String(line.dropLast()) + #", "erase": "\#(mask)"}"#
        }
        let manifest = s.file("jobs.jsonl")
        try (job("erased", "mask.png") + "\n" + job("wrong", "small.png") + "\n")
            .write(toFile: manifest, atomically: true, encoding: .utf8)
        let r = try CLI.run(["batch", "run", manifest, "--quiet"])
        #expect(r.status == 1, "\(r.err)")
        #expect(
            r.err.contains("job wrong failed: ") && r.err.contains("the erase mask is 10x10 but the result is 96x80"))
        // This job once failed under load ("no frame saw behind", issue 45 item 21): the mask
        // above was drawn into uninitialised memory, so stray heap bytes outside the square were
        // masked too. The closure form of Image's init now starts from zero (ImageBasics).
        #expect(
            !r.err.contains("job erased failed"),
            "\(r.err)\n\((try? String(contentsOfFile: manifest + ".state/failed/erased.json", encoding: .utf8)) ?? "")")
        let alone = try CLI.run([
            "stack", burst, "--align", "none", "--merge", "median", "--erase", s.file("mask.png"), "-o",
            s.file("alone.png"), "--quiet", "--report", s.file("alone.json")
        ])
        #expect(alone.status == 0, "\(alone.err)")
        let report = (try? String(contentsOfFile: s.file("alone.json"), encoding: .utf8)) ?? ""
        #expect(report.contains("\"erase\""), "\(report)")
        let out = try #require(FileManager.default.contents(atPath: s.file("out/erased.png")))
        #expect(
            out == FileManager.default.contents(atPath: s.file("alone.png")),
            "the batch's erase differs from the command's")
        // The square is gone: the pixels where it stood are those of frames 3 and 4.
        let image = try ImageCodecs.read(s.file("out/erased.png")).image.uint8
        let clear = BatchFixtures.frame(96, 80, seed: 3, squareAt: 60)
        for (x, y) in [(22, 22), (30, 30), (25, 27)] {
            #expect((0..<3).allSatisfy { image[x, y, $0] == clear[x, y, $0] }, "(\(x), \(y)) still shows the square")
        }
    }

    @Test func backdropJobsWriteTheSameFramesAsTheCommand() throws {
        let s = Scratch()
        let (color, depth) = try BackdropCommands().writeFrames(s, count: 3)
        try FileManager.default.createDirectory(atPath: s.file("out"), withIntermediateDirectories: true)
        let manifest = s.file("jobs.jsonl")
        try
            (BatchFixtures.line(
                "call", "backdrop", ["color", "depth"], "out/frames", ["subject": "nearest", "cutoffOffset": 0.3])
            + "\n")
            .write(toFile: manifest, atomically: true, encoding: .utf8)
        var r = try CLI.run(["batch", "run", manifest, "--quiet"])
        #expect(r.status == 0, "\(r.err)")
        r = try CLI.run([
            "backdrop", "--color", color, "--depth", depth, "-o", s.file("alone"), "--subject", "nearest",
            "--cutoff-offset", "0.3", "--quiet"
        ])
        #expect(r.status == 0, "\(r.err)")
        let frames = try FileManager.default.contentsOfDirectory(atPath: s.file("out/frames")).sorted()
        #expect(frames == ["frame00001.png", "frame00002.png", "frame00003.png"])
        for f in frames {
            #expect(
                FileManager.default.contents(atPath: s.file("out/frames/" + f))
                    == FileManager.default.contents(atPath: s.file("alone/" + f)), "\(f)")
        }
        #expect(BatchFixtures.leftovers(in: s.file("out")).isEmpty)
    }
}
