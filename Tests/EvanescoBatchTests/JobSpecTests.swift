import EvanescoBatch
import EvanescoCore
import EvanescoDepth
import EvanescoIO
import EvanescoStack
import Foundation
import Testing

/// One unit per quantity and versioned job lines (issue 46): memory sizes read alike everywhere,
/// the backdrop blur under one name with its old one still honoured, and jobs stored by the
/// previous binary (spec 1) read by this one.
@Suite struct JobSpecTests {
    @Test(arguments: [
        ("512", 512 << 20), ("512M", 512 << 20), ("2G", 2 << 30), ("2 GiB", 2 << 30), ("1.5g", 3 << 29),
        ("64k", 64 << 10), ("1T", 1 << 40), ("1048576B", 1 << 20), ("0", 0), ("3MB", 3 << 20)
    ])
    func memorySizesAreReadAlike(text: String, bytes: Int) {
        #expect(MemorySize.bytes(text) == bytes, "\(text)")
    }

    @Test func memorySizesThatAreNotAreRefusedAndSizesAreWrittenExactly() {
        for bad in ["", "-1", "abc", "12X", "1..5G", "G", "1e3", "99999999999T"] {
            #expect(MemorySize.bytes(bad) == nil, "\(bad)")
        }
        #expect(MemorySize.describe(2 << 30) == "2G" && MemorySize.describe(1536 << 10) == "1536K")
        #expect(MemorySize.describe(1000) == "1000B" && MemorySize.describe(512 << 20) == "512M")
        for b in [1 << 20, 3 << 29, 1000, 7 << 40] { #expect(MemorySize.bytes(MemorySize.describe(b)) == b) }
    }

    func stackLine(_ options: String, spec: String = "") -> String {
        #"{\#(spec)"id": "s", "kind": "stack", "inputs": ["b"], "output": "o.png", "options": {\#(options)}}"#
    }

    @Test func aManifestsMemoryLimitIsInMBOrASize() throws {
        let cases: [(String, Int?)] = [
            (#""memoryLimit": 512"#, 512 << 20), (#""memoryLimit": "2G""#, 2 << 30),
            (#""memoryLimit": "1536K""#, 1536 << 10), (#""memoryLimit": 0"#, nil), (#""memoryLimit": null"#, nil)
        ]
        for (options, bytes) in cases {
            let job = try BatchJob.parse(stackLine(options), base: "/", checkFiles: false)
            guard case .stack(let o) = job.options else {
                Issue.record("not a stack")
                return
            }
            #expect(o.memoryLimit == bytes, "\(options)")
            // The stored line says its spec and reads back to the same limit.
            let stored = try job.normalizedLine()
            #expect(stored.contains(#""spec":2"#), "\(stored)")
            let back = try BatchJob.parse(stored, base: "/", checkFiles: false, stored: true)
            guard case .stack(let b) = back.options else { return }
            let restored = try back.normalizedLine()
            #expect(b.memoryLimit == bytes && restored == stored)
        }
        // A byte count from an older manifest is refused with the unit, not read as 1 PB.
        #expect {
            try BatchJob.parse(stackLine(#""memoryLimit": 1073741824"#), base: "/", checkFiles: false)
        } throws: { e in
            let m = (e as? ManifestError)?.message ?? ""
            return m.contains("options.memoryLimit") && m.contains("is in MB") && m.contains("\"1073741824B\"")
        }
        #expect {
            try BatchJob.parse(stackLine(#""memoryLimit": "12X""#), base: "/", checkFiles: false)
        } throws: { e in ((e as? ManifestError)?.message ?? "").contains("a size such as 512M or 2G") }
    }

    /// What the previous binary stored (no `spec`, the memory limit in bytes) runs with this
    /// one, migrated; the same line written by a person today is of the current spec and refused.
    @Test func aJobStoredByThePreviousSpecIsMigrated() throws {
        let v1 = stackLine(#""merge": "median", "memoryLimit": 536870912"#)
        let job = try BatchJob.parse(v1, base: "/", checkFiles: false, stored: true)
        guard case .stack(let o) = job.options else {
            Issue.record("not a stack")
            return
        }
        #expect(o.memoryLimit == 512 << 20 && o.merge == .median)
        #expect(try job.normalizedLine().contains(#""memoryLimit":512"#))
        let explicit = try BatchJob.parse(
            stackLine(#""memoryLimit": 536870912"#, spec: #""spec": 1, "#), base: "/", checkFiles: false)
        guard case .stack(let e) = explicit.options else { return }
        #expect(e.memoryLimit == 512 << 20)
        #expect(throws: ManifestError.self) { try BatchJob.parse(v1, base: "/", checkFiles: false) }
        #expect {
            try BatchJob.parse(stackLine("", spec: #""spec": 3, "#), base: "/", checkFiles: false, stored: true)
        } throws: { e in ((e as? ManifestError)?.message ?? "").contains("a newer evanesco wrote it") }
        #expect(throws: ManifestError.self) {
            try BatchJob.parse(stackLine("", spec: #""spec": 1.5, "#), base: "/", checkFiles: false)
        }
    }

    func backdropLine(_ options: String) -> String {
        #"{"id": "b", "kind": "backdrop", "inputs": ["c", "d"], "output": "out", "options": {\#(options)}}"#
    }

    /// The blur is one setting; the old spelling is honoured with a note, never beside it.
    @Test func theBackdropBlurIsOneSettingAndItsOldSpellingANote() throws {
        let blur = try BatchJob.parse(backdropLine(#""blur": 8"#), base: "/", checkFiles: false)
        guard case .backdrop(let b) = blur.options else {
            Issue.record("not a backdrop")
            return
        }
        #expect(b.pipeline.blurSigmaAt640 == 8 && b.blurRadius == nil && blur.notes.isEmpty)
        let old = try BatchJob.parse(backdropLine(#""blurRadius": 3"#), base: "/", checkFiles: false)
        guard case .backdrop(let o) = old.options else { return }
        #expect(o.blurRadius == 3 && old.notes == [BackdropSessionOptions.blurRadiusDeprecation])
        // Stored, it reads back the same (one of the two keys written).
        let again = try BatchJob.parse(old.normalizedLine(), base: "/", checkFiles: false, stored: true)
        guard case .backdrop(let a) = again.options else { return }
        #expect(a.blurRadius == 3)
        #expect {
            try BatchJob.parse(backdropLine(#""blur": 8, "blurRadius": 3"#), base: "/", checkFiles: false)
        } throws: { e in ((e as? ManifestError)?.message ?? "").contains("not both") }
        // Declared once: the flag's help is made from the setting.
        let setting = BackdropOptions.Limits.blurSigmaAt640
        #expect(setting.help.contains("640-wide") && setting.help.contains("0...200"))
    }

    /// JPEG quality is declared once: its range refuses the same values on a line as on a flag.
    @Test func jpegQualityHasOneDeclaration() throws {
        #expect(JobKind.stack.defaultQuality == JPEGQuality.master && JobKind.backdrop.defaultQuality == 92)
        #expect(WriteOptions().quality == JPEGQuality.rendered)
        for q in [0, 101] {
            #expect {
                try BatchJob.parse(
                    #"{"id": "p", "kind": "portrait", "inputs": ["a.jpg"], "output": "o.jpg", "quality": \#(q)}"#,
                    base: "/", checkFiles: false)
            } throws: { e in ((e as? ManifestError)?.message ?? "").contains("quality must be within 1...100") }
        }
    }
}

/// The batch system's one backoff (issue 46): each user's waits, as known answers.
@Suite struct RetryPolicyTests {
    @Test func eachPolicyWaitsAsDocumented() {
        #expect((1...7).map { RetryPolicy.localJob.delay(afterFailure: $0) } == [1, 2, 4, 8, 16, 30, 30])
        #expect((1...3).map { RetryPolicy.queuedJob.delay(afterFailure: $0) } == [2, 4, 8])
        #expect(
            RetryPolicy.queuedJob.delay(afterFailure: 10) == 600
                && RetryPolicy.queuedJob.delay(afterFailure: 5000) == 600)
        let database = (1...8).map { RetryPolicy.database.delay(afterFailure: $0) }
        #expect(zip(database, [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5, 5]).allSatisfy { abs($0 - $1) < 1e-9 }, "\(database)")
        #expect(RetryPolicy(first: 1, factor: 1, cap: 9).delay(afterFailure: 0) == 1)
    }
}
