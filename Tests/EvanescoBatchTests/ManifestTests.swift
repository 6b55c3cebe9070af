import EvanescoBatch
import EvanescoCore
import EvanescoDepth
import EvanescoStack
import Foundation
import Testing

@Suite struct OptionCodingTests {
    @Test func stackOptionsRoundTripAndDefaults() throws {
        let empty = try JSONDecoder().decode(StackOptions.self, from: Data("{}".utf8))
        #expect(
            empty.kappa == StackOptions().kappa && empty.merge == .robust
                && empty.memoryLimit == StackOptions().memoryLimit)
        let text =
            #"{"align": "translation", "merge": "sigma-clip", "kappa": 3.5, "interpolation": "catmull-rom", "#
            + #""alignLevel": 1, "videoFrames": 12, "memoryLimit": null}"#
        let o = try JSONDecoder().decode(StackOptions.self, from: Data(text.utf8))
        #expect(
            o.align == .translation && o.merge == .sigmaClip && o.kappa == 3.5 && o.interpolation == .catmullRom
                && o.alignLevel == 1
                && o.videoFrames == 12 && o.memoryLimit == nil)
        let back = try JSONDecoder().decode(StackOptions.self, from: JSONEncoder().encode(o))
        #expect(
            back.align == o.align && back.merge == o.merge && back.kappa == o.kappa && back.alignLevel == o.alignLevel
                && back.videoFrames == o.videoFrames && back.memoryLimit == nil && back.interpolation == o.interpolation
        )
    }

    @Test func portraitAndBackdropRoundTrip() throws {
        let p = try JSONDecoder().decode(
            PortraitSettings.self,
            from: Data(#"{"effect": "lens", "focusPoint": "0.4,0.3", "blades": 6, "aperture": 60, "catEye": 0.6}"#.utf8)
        )
        #expect(
            p.effect == .lens && p.focus == .point(PhotoPoint("0.4,0.3")!) && p.shape.blades == 6 && p.aperture == 60
                && p.catEye == 0.6)
        #expect(try JSONDecoder().decode(PortraitSettings.self, from: JSONEncoder().encode(p)) == p)
        let b = try JSONDecoder().decode(
            BackdropSessionOptions.self,
            from: Data(
                #"{"subject": "120,80", "cutoffOffset": 0.4, "depthFormat": "disparity8:0.2,2", "gapSnap": false}"#.utf8
            ))
        #expect(b.subject == .point(x: 120, y: 80) && b.pipeline.cutoffOffset == 0.4 && !b.pipeline.snapCutoffToGap)
        #expect(b.depthEncoding == .disparity8(min: 0.2, max: 2))
        let b2 = try JSONDecoder().decode(BackdropSessionOptions.self, from: JSONEncoder().encode(b))
        #expect(
            b2.subject == b.subject && b2.pipeline.cutoffOffset == b.pipeline.cutoffOffset
                && b2.depthEncoding == b.depthEncoding
                && b2.pipeline.snapCutoffToGap == b.pipeline.snapCutoffToGap)
    }

    @Test(arguments: [
        (#"{"kapa": 2}"#, "unknown setting \"kapa\" (did you mean \"kappa\"?)"),
        (#"{"kappa": -1}"#, "kappa must be within (0, 100]"),
        (#"{"kappa": "high"}"#, "kappa: expected a number"),
        (#"{"merge": "average"}"#, "merge"),
        (#"{"reference": 1.5}"#, "reference"),
        (#"{"memoryLimit": 0.5}"#, "memory limit must be within"),
        (#"{"memoryLimit": "2X"}"#, "must be a number of MB, or a size such as 512M or 2G")
    ])
    func stackOptionsRefusals(text: String, expected: String) {
        do {
            _ = try JSONDecoder().decode(StackOptions.self, from: Data(text.utf8))
            Issue.record("\(text) was accepted")
        } catch {
            #expect(SettingsCoding.message(error).contains(expected), "\(SettingsCoding.message(error))")
        }
    }

    @Test func portraitRefusesTwoFocusesAndBadValues() {
        for (text, expected) in [
            (#"{"focus": 0.5, "focusDistance": 2}"#, "only one of focus"),
            (#"{"focus": 1.5}"#, "focus must be within 0...1"),
            (#"{"levels": 40}"#, "levels must be within 2...16"), (#"{"focusPoint": "left"}"#, "focusPoint: must be")
        ] {
            do {
                _ = try JSONDecoder().decode(PortraitSettings.self, from: Data(text.utf8))
                Issue.record("\(text) was accepted")
            } catch { #expect(SettingsCoding.message(error).contains(expected), "\(SettingsCoding.message(error))") }
        }
    }
}

@Suite struct ManifestTests {
    let dir: String = {
        let d = NSTemporaryDirectory() + "evanesco-manifest-\(UUID().uuidString)"
        try! FileManager.default.createDirectory(atPath: d + "/in", withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: d + "/in/a.png", contents: Data([1]))
        return d
    }()

    @Test func everyBadLineIsReportedWithItsNumber() throws {
        let text = """
            {"id": "ok", "kind": "stack", "inputs": ["in"], "output": "o1.jpg"}
            {"id": "ok", "kind": "stack", "inputs": ["in"], "output": "o2.jpg"}
            not json

            {"id": "k", "kind": "stack", "inputs": ["in"], "output": "o3.jpg", "options": {"kapa": 1}}
            {"id": "o", "kind": "stack", "inputs": ["in"], "output": "o1.jpg"}
            {"id": "m", "kind": "stack", "inputs": ["missing/"], "output": "o4.jpg"}
            {"id": "x", "kind": "collage", "inputs": ["in"], "output": "o5.jpg"}
            {"id": "../up", "kind": "stack", "inputs": ["in"], "output": "o6.jpg"}
            {"id": "h", "kind": "portrait", "inputs": ["in/a.png"], "output": "o7.heic"}
            {"id": "b", "kind": "backdrop", "inputs": ["in/a.png"], "output": "o8.png"}
            {"id": "i", "kind": "stack", "inputs": ["in/a.png"], "output": "in/a.png"}
            {"id": "q", "kind": "stack", "inputs": ["in"], "output": "o9.jpg", "quality": 0}
            {"id": "e", "kind": "portrait", "inputs": ["in/a.png"], "output": "o10.jpg", "erase": "in/a.png"}
            {"id": "f", "kind": "stack", "inputs": ["in"], "output": "in/a.png", "erase": "in/a.png"}
            {"id": "g", "kind": "stack", "inputs": ["in"], "output": "o11.jpg", "erase": "in/none.png"}
            """
        do {
            _ = try BatchManifest.parse(text, path: dir + "/jobs.jsonl")
            Issue.record("a manifest with bad lines was accepted")
        } catch {
            let byLine = Dictionary(uniqueKeysWithValues: error.problems.map { ($0.line ?? 0, $0.message) })
            #expect(byLine.keys.sorted() == [2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16])
            #expect(byLine[2]?.contains("also line 1's") == true)
            #expect(byLine[3]?.contains("not valid JSON") == true)
            #expect(byLine[5]?.contains("did you mean \"kappa\"") == true)
            #expect(byLine[6]?.contains("two jobs cannot write one file") == true)
            #expect(byLine[7]?.contains("no such file") == true)
            #expect(byLine[8]?.contains("stack, portrait or backdrop") == true)
            #expect(byLine[9]?.contains("must be 1 to 200") == true)
            #expect(byLine[10]?.contains(".jpg, .png or .tif") == true)
            #expect(byLine[11]?.contains("two inputs") == true)
            #expect(byLine[12]?.contains("also an input") == true)
            #expect(byLine[13]?.contains("quality") == true)
            #expect(byLine[14]?.contains("erase is a stack job's key; a portrait job has none") == true)
            #expect(byLine[15]?.contains("also an input") == true)
            #expect(byLine[16]?.contains("in/none.png: no such file") == true)
            #expect(error.description.contains("nothing was run"))
        }
    }

    @Test func normalizedLineReadsBackToTheSameJob() throws {
        let m = try BatchManifest.parse(
            #"{"id": "a", "kind": "stack", "inputs": ["in"], "output": "o.jpg", "#
                + #""options": {"merge": "median", "kappa": 3}}"#,
            path: dir + "/jobs.jsonl")
        let job = m.jobs[0]
        #expect(job.inputs == [dir + "/in"] && job.output == dir + "/o.jpg" && job.quality == 95)
        let again = try BatchJob.parse(try job.normalizedLine(), base: "/elsewhere", checkFiles: false)
        #expect(try again.normalizedLine() == job.normalizedLine())
        guard case .stack(let o) = again.options else {
            Issue.record("kind changed")
            return
        }
        #expect(o.merge == .median && o.kappa == 3)
        // A stack's erase mask, absolute, is carried in the line a queue stores.
        let erasing = try BatchJob.parse(
            #"{"id": "e", "kind": "stack", "inputs": ["in"], "output": "o.png", "erase": "masks/e.png"}"#, base: dir,
            checkFiles: false)
        #expect(erasing.erase == dir + "/masks/e.png")
        #expect(
            try BatchJob.parse(try erasing.normalizedLine(), base: "/elsewhere", checkFiles: false).erase
                == erasing.erase)
    }

    @Test func shardsSliceEveryJobOnceAndReadSchedulers() throws {
        let text = (0..<10).map { #"{"id": "j\#($0)", "kind": "stack", "inputs": ["in"], "output": "o\#($0).jpg"}"# }
            .joined(separator: "\n")
        let m = try BatchManifest.parse(text, path: dir + "/jobs.jsonl")
        let slices = (0..<3).map { m.jobs(in: Shard(index: $0, count: 3)).map(\.id) }
        #expect(slices.flatMap { $0 }.sorted() == m.jobs.map(\.id).sorted())
        #expect(slices[1] == ["j1", "j4", "j7"])
        #expect(
            try Shard.fromEnvironment([
                "SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "4", "SLURM_ARRAY_TASK_COUNT": "3"
            ]) == Shard(index: 1, count: 3))
        #expect(
            try Shard.fromEnvironment(["JOB_COMPLETION_INDEX": "2", "EVANESCO_SHARD_COUNT": "4"])
                == Shard(index: 2, count: 4))
        #expect(try Shard.fromEnvironment([:]) == nil)
        #expect(throws: ManifestError.self) { try Shard.fromEnvironment(["JOB_COMPLETION_INDEX": "2"]) }
        #expect(throws: ManifestError.self) {
            try Shard.fromEnvironment(["SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_COUNT": "3"])
        }
        #expect(Shard("3/3") == nil && Shard("-1/2") == nil && Shard("1/2") == Shard(index: 1, count: 2))
    }

    @Test func queueAddressesAreCheckedAndPasswordsHidden() throws {
        let a = try QueueAddress("postgres://me:s3cret@db.example:6432/photos?schema=night_1")
        #expect(
            a.host == "db.example" && a.port == 6432 && a.database == "photos" && a.schema == "night_1"
                && a.password == "s3cret")
        #expect(!a.description.contains("s3cret") && a.sslMode == "prefer")
        #expect(try QueueAddress("postgresql://me@127.0.0.1/x").sslMode == "disable")
        for bad in [
            "http://me@h/db", "postgres://h/db", "postgres://me@h/", "postgres://me@h/db?schema=Bad-Name",
            "postgres://me@h/db?mode=x",
            // A port that does not fit (URLComponents made it nil, and so 5432), or out of range.
            "postgres://me@h:99999999999999999999/db", "postgres://me@h:65536/db", "postgres://me@h:0/db",
            "postgres://me@h:99999/db", "postgres://me@h:-1/db", "postgres://me@[::1]:70000/db",
            // PostgreSQL's own schemas.
            "postgres://me@h/db?schema=pg_catalog", "postgres://me@h/db?schema=information_schema",
            "postgres://me@h/db?schema=pg_toast"
        ] {
            #expect(throws: ManifestError.self, "\(bad)") { try QueueAddress(bad) }
        }
        #expect(try QueueAddress("postgres://me@[::1]:6543/db").port == 6543)
        #expect(try QueueAddress("postgres://me@h:65535/db").port == 65535)
    }

    /// A password is percent-decoded once: "%2541" is "%41", not "A"; "%40" is "@".
    @Test func passwordsArePercentDecodedOnce() throws {
        #expect(try QueueAddress("postgres://me:p%2541ss@h/db").password == "p%41ss")
        #expect(try QueueAddress("postgres://me:a%40b%3Ac@h/db").password == "a@b:c")
        #expect(try QueueAddress("postgres://me:plain@h/db").password == "plain")
        #expect(try QueueAddress("postgres://me@h/db").password == nil)
    }

    /// Manifest lines are strict JSON within bounds, and what they say is quoted, not echoed.
    @Test(arguments: [
        (#"{"id": "a", "kind": "stack", "inputs": ["x"], "output": "o.png",}"#, "trailing commas"),
        (#"{"id": "a", "kind": "stack", "inputs": ["x",], "output": "o.png"}"#, "trailing commas"),
        (#"{"id": "a", "id": "b", "kind": "stack", "inputs": ["x"], "output": "o.png"}"#, "appears twice"),
        (
            #"{"id": "a", "kind": "stack", "inputs": ["x"], "output": "o.png", "#
                + #""options": {"merge": "mean", "merge": "median"}}"#,
            "appears twice"
        ),
        (#"{"id": "a", "kind": "stack", "inputs": ["x"], "output": "o.png"} {}"#, "text after"),
        (#"{"id": "a", "kind": 'stack'}"#, "unexpected character"),
        (#"{"id": "a\u0000", "kind": "stack", "inputs": ["x"], "output": "o.png"}"#, "\\u0000"),
        (#"{"id": "a\nline 2: job b: forged", "kind": "stack", "inputs": ["x"], "output": "o.png"}"#, "\\n")
    ])
    func strictLines(line: String, expected: String) {
        do {
            _ = try BatchJob.parse(line, base: "/tmp", checkFiles: false)
            Issue.record("\(line) was accepted")
        } catch {
            #expect(error.description.contains(expected), "\(error.description)")
            #expect(!error.description.contains("\n") && !error.description.contains("\0"), "\(error.description)")
        }
    }

    /// A string over 4096 bytes (a 50 MB key or id) is refused by its length, at once.
    @Test func longStringsAreRefusedByTheirLength() {
        let long = String(repeating: "k", count: 5000)
        for line in [
            #"{"id": "a", "kind": "stack", "inputs": ["x"], "output": "o.png", ""# + long + #"": 1}"#,
            #"{"id": ""# + long + #"", "kind": "stack", "inputs": ["x"], "output": "o.png"}"#
        ] {
            #expect(throws: ManifestError.self) { try BatchJob.parse(line, base: "/tmp", checkFiles: false) }
            do { _ = try BatchJob.parse(line, base: "/tmp", checkFiles: false) } catch {
                #expect(
                    error.description.contains("5000 bytes") && error.description.count < 300, "\(error.description)")
            }
        }
    }

    /// Scheduler variables: what does not make a slice (an overflow, garbage, both schedulers) is
    /// refused with the values quoted.
    @Test func schedulerVariablesThatDoNotMakeASliceAreRefused() throws {
        for env in [
            ["SLURM_ARRAY_TASK_ID": "9223372036854775807", "SLURM_ARRAY_TASK_MIN": "-1", "SLURM_ARRAY_TASK_COUNT": "2"],
            ["SLURM_ARRAY_TASK_ID": "-9223372036854775808", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "2"],
            ["SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "2", "JOB_COMPLETION_INDEX": "garbage"],
            ["JOB_COMPLETION_INDEX": "x\ny", "EVANESCO_SHARD_COUNT": "2"]
        ] {
            do {
                _ = try Shard.fromEnvironment(env)
                Issue.record("\(env) was accepted")
            } catch {
                #expect(!error.message.contains("\n"), "\(error.message)")
            }
        }
        #expect(
            try Shard.fromEnvironment([
                "SLURM_ARRAY_TASK_ID": "12", "SLURM_ARRAY_TASK_MIN": "10", "SLURM_ARRAY_TASK_COUNT": "5"
            ]) == Shard(index: 2, count: 5))
    }
}
