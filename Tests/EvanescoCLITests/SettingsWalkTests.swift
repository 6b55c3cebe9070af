import ArgumentParser
import EvanescoBatch
import EvanescoCore
import EvanescoDepth
import EvanescoStack
import EvanescoStudio
import Foundation
import Testing
@testable import evanesco

/// Walks every declared setting of every option type (``DeclaresSettings``) through every front
/// end: the command line (flag, help, default, range, and the value reaching the options), a
/// manifest (key, default, range), the `--report` echo and the documentation table. A setting
/// declared but not wired into one of them, or wired with another name, default or range, fails.
@Suite("Every declared setting reaches every front end with one name, default and range")
struct SettingsWalkTests {
    /// An option type and how each front end reaches it.
    struct Front {
        var name: String
        var settings: [Setting]
        /// The command line up to the settings' flags.
        var command: [String]
        /// The options the parsed command makes, as a manifest would write them.
        var options: (ParsableCommand) throws -> [String: Any]
        /// The manifest's kind; nil for settings no manifest holds (a worker's).
        var kind: String?
        /// A value for each text setting, and what the options then hold.
        var texts: [String: (given: String, held: String)]
        /// Settings that a setting's extreme values need beside them (a smallest face at most
        /// the search size), as manifest JSON members.
        var companions: [String: (key: String, value: Double)] = [:]
        /// The manifest line's inputs and output.
        var files = #""inputs":["in.jpg"],"output":"out.jpg""#
    }

    static func json<T: Encodable>(_ value: T) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: JSONEncoder().encode(value)) as? [String: Any] ?? [:]
    }

    static var fronts: [Front] {
        [
            Front(
                name: "stack", settings: StackOptions.settings, command: ["stack", "a.jpg", "-o", "o.jpg"],
                options: { try json(($0 as! Stack).options()) }, kind: "stack",
                texts: ["spillDirectory": ("/tmp", "/tmp")]),
            Front(
                name: "portrait", settings: PortraitSettings.settings, command: ["portrait", "p.jpg", "-o", "o.jpg"],
                options: { try json(($0 as! Portrait).settings) }, kind: "portrait",
                texts: ["focusPoint": ("0.4,0.3", "0.4,0.3")]),
            Front(
                name: "backdrop", settings: BackdropSessionOptions.settings,
                command: ["backdrop", "--color", "c.mp4", "--depth", "d.mp4", "-o", "o.mp4"],
                options: { try json(($0 as! Backdrop).options()) }, kind: "backdrop",
                texts: ["subject": ("nearest", "nearest"), "depthFormat": ("mm16", "mm16")],
                companions: ["faceMinSize": ("faceWorkingSize", 8192)],
                files: #""inputs":["c.mp4","d.mp4"],"output":"o.mp4""#),
            Front(
                name: "worker", settings: QueueWorker.Settings.settings,
                command: ["worker", "--queue", "postgres://me@db/photos"],
                options: { c in
                    let s = (c as! Worker).settings()
                    return [
                        "jobs": s.concurrency, "lease": s.lease, "poll": s.poll, "grace": s.grace,
                        "jobTimeout": s.jobTimeout as Any, "outageGrace": s.outageGrace, "exitWhenDone": s.exitWhenDone,
                        "allow": s.allowed.joined(separator: ":"), "metricsPort": s.metricsPort as Any,
                        "metricsHost": s.metricsHost
                    ]
                }, kind: nil, texts: ["allow": ("/tmp", "/tmp"), "metricsHost": ("0.0.0.0", "0.0.0.0")]),
            Front(
                name: "studio", settings: StudioConfiguration.settings, command: ["studio", "/tmp", "--no-open"],
                options: { c in
                    let s = (c as! StudioCommand).configuration()
                    return [
                        "host": s.host, "port": s.port, "maxUpload": s.maxUploadBytes >> 20,
                        "memoryLimit": (s.burstMemoryLimit ?? 0) >> 20
                    ]
                }, kind: nil, texts: ["host": ("0.0.0.0", "0.0.0.0")]),
            Front(
                name: "batch submit", settings: JobQueue.SubmitSettings.settings,
                command: ["batch", "submit", "jobs.jsonl", "--queue", "postgres://me@db/photos"],
                options: { ["maxAttempts": ($0 as! BatchSubmit).settings.maxAttempts] }, kind: nil, texts: [:]),
            Front(
                name: "convert (raw finish)", settings: RawFinishOptions.settings,
                command: ["convert", "photo.dng", "o.tif"], options: { try json(($0 as! Convert).finish.options) },
                kind: nil, texts: [:])
        ]
    }

    /// A parse or a manifest line: what it made, or the message of its refusal.
    enum Outcome<T> {
        case made(T)
        case refused(String)
        var value: T? { if case .made(let v) = self { v } else { nil } }
    }

    /// Values inside and outside a numeric setting's range (NaN aside, which the command line
    /// refuses before any option type sees it).
    static func samples(_ n: NumericSetting) -> (inside: [Double], outside: [Double]) {
        let step = n.integer ? 1 : max(abs(n.maximum) * 0.01, 0.001)
        let inside = [
            n.minimumIncluded ? n.minimum : n.minimum + step, n.maximumIncluded ? n.maximum : n.maximum - step
        ]
        let outside = [
            n.minimumIncluded ? n.minimum - step : n.minimum, n.maximumIncluded ? n.maximum + step : n.maximum
        ]
        return (inside, outside)
    }

    static func text(_ v: Double, integer: Bool) -> String { integer ? String(Int(v)) : String(v) }

    static func same(_ held: Any?, _ expected: Double) -> Bool {
        guard let h = held as? Double ?? (held as? Int).map(Double.init) else { return false }
        return abs(h - expected) <= 1e-6 * max(1, abs(expected))
    }

    /// The OPTIONS entries of a help text, each flag's lines joined into one.
    static func entries(_ help: String) -> [String] {
        var entries: [String] = []
        for line in help.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("  -") {
                entries.append(line.trimmingCharacters(in: .whitespaces))
            } else if line.hasPrefix("    "), !entries.isEmpty {
                entries[entries.count - 1] += " " + line.trimmingCharacters(in: .whitespaces)
            }
        }
        return entries
    }

    /// The parsed command, or the message of its refusal.
    static func parse(_ arguments: [String]) -> Outcome<ParsableCommand> {
        do { return .made(try Evanesco.parseAsRoot(arguments)) } catch {
            return .refused(Evanesco.message(for: error))
        }
    }

    @Test("the command line: each flag is the key in kebab-case, with the declared help, default and range")
    func commandLine() throws {
        for front in Self.fronts {
            let help = Evanesco.helpMessage(for: type(of: try Evanesco.parseAsRoot(front.command)), columns: 2000)
            for s in front.settings {
                let line = Self.entries(help).first { e in [" ", ",", "/"].contains { e.hasPrefix(s.flag + $0) } }
                guard let line else {
                    Issue.record("\(front.name): no \(s.flag) for the declared setting \(s.key)")
                    continue
                }
                #expect(line.contains(s.help), "\(front.name) \(s.flag): help is not the declaration's: \(line)")
                try checkDefault(front, s, String(line))
                try checkValues(front, s)
            }
        }
    }

    func checkDefault(_ front: Front, _ s: Setting, _ line: String) throws {
        switch s.kind {
        case .number(let n):
            guard let d = n.defaultValue else { return }
            let shown = line.range(of: "default: ").map {
                line[$0.upperBound...].prefix { "-0123456789.e".contains($0) }
            }
            #expect(shown.flatMap { Double($0) } == d, "\(front.name) \(s.flag): default shown is not \(d): \(line)")
        case .size(let n):
            #expect(line.contains("default: \(MemorySize.describe(Int(n.defaultValue!)))"), "\(line)")
        case .choice(let values, let d):
            #expect(line.contains("values: \(values.joined(separator: ", "))"), "\(front.name) \(s.flag): \(line)")
            #expect(line.contains("default: \(d)"), "\(front.name) \(s.flag): \(line)")
        case .toggle(let d):
            #expect(line.contains("default: \(d ? s.flag : "--no-" + s.flag.dropFirst(2))"), "\(line)")
        case .text: break
        }
        // Given nothing, the options hold the declared default.
        if let d = s.defaultDescription, case .made(let c) = Self.parse(front.command) {
            let held = try front.options(c)[s.key]
            switch s.kind {
            case .number(let n): if let v = n.defaultValue { #expect(Self.same(held, v), "\(s.key): \(held ?? "nil")") }
            case .size(let n): #expect(Self.same(held, n.defaultValue! / 1_048_576), "\(s.key): \(held ?? "nil")")
            case .choice: #expect(held as? String == d, "\(front.name) \(s.key): \(held ?? "nil")")
            case .toggle(let v): #expect(held as? Bool == v, "\(front.name) \(s.key): \(held ?? "nil")")
            case .text: break
            }
        }
    }

    func checkValues(_ front: Front, _ s: Setting) throws {
        let companion =
            front.companions[s.key].map { c in
                ["--" + Setting.kebab(c.key) + "=" + Self.text(c.value, integer: true)]
            } ?? []
        func given(_ args: [String]) -> Outcome<ParsableCommand> {
            // `--flag=value`, so that a negative value is not read as a flag.
            Self.parse(front.command + companion + (args.count == 2 ? [args[0] + "=" + args[1]] : args))
        }
        switch s.kind {
        case .number(let n):
            let (inside, outside) = Self.samples(n)
            for v in inside {
                guard case .made(let c) = given([s.flag, Self.text(v, integer: n.integer)]) else {
                    let outcome = given([s.flag, Self.text(v, integer: n.integer)])
                    Issue.record("\(front.name) \(s.flag) \(v) refused although within \(n.span): \(outcome)")
                    continue
                }
                #expect(
                    Self.same(try front.options(c)[s.key], v), "\(front.name) \(s.flag) \(v) did not reach \(s.key)")
            }
            for v in outside {
                guard case .refused(let message) = given([s.flag, Self.text(v, integer: n.integer)]) else {
                    Issue.record("\(front.name) \(s.flag) \(v) accepted although outside \(n.span)")
                    continue
                }
                #expect(message.contains(s.flag), "\(front.name) \(s.flag) \(v): the refusal names no flag: \(message)")
            }
        case .size(let n):
            guard case .made(let c) = given([s.flag, "2G"]) else {
                Issue.record("\(s.flag) 2G refused")
                return
            }
            #expect(Self.same(try front.options(c)[s.key], 2048))
            let past = MemorySize.describe(Int(n.maximum) * 2)
            guard case .refused(let m) = given([s.flag, past]) else {
                Issue.record("\(s.flag) \(past) taken")
                return
            }
            #expect(m.contains(s.flag), "\(m)")
            // A limit that 0 turns off says so when it refuses a value.
            #expect(m.contains("0 for no limit") == s.zeroIsNone, "\(s.flag): \(m)")
        case .choice(let values, _):
            for v in values {
                guard case .made(let c) = given([s.flag, v]) else {
                    Issue.record("\(front.name) \(s.flag) \(v) refused")
                    continue
                }
                #expect(try front.options(c)[s.key] as? String == v, "\(front.name) \(s.flag) \(v)")
            }
            #expect(given([s.flag, "no-such-value"]).value == nil)
        case .toggle(let d):
            let other = d ? "--no-" + s.flag.dropFirst(2) : s.flag
            guard case .made(let c) = given([other]) else {
                Issue.record("\(other) refused")
                return
            }
            #expect(try front.options(c)[s.key] as? Bool == !d, "\(front.name) \(other)")
        case .text:
            guard let sample = front.texts[s.key] else {
                Issue.record("no sample for text \(s.key)")
                return
            }
            guard case .made(let c) = given([s.flag, sample.given]) else {
                Issue.record("\(s.flag) \(sample.given) refused")
                return
            }
            #expect(try front.options(c)[s.key] as? String == sample.held, "\(front.name) \(s.flag)")
        }
    }

    /// A manifest line of `front`'s kind with these options.
    static func manifestOptions(_ front: Front, _ options: String) -> Outcome<[String: Any]> {
        let line =
            #"{"id":"j","kind":"\#(front.kind ?? "")",\#(front.files),"options":{\#(options)}}"#
        do {
            let job = try BatchJob.parse(line, base: "/tmp", checkFiles: false)
            return .made(try json(job.options))
        } catch {
            return .refused(String(describing: error))
        }
    }

    @Test("a manifest: each key is the declared one, with the declared default and range")
    func manifest() throws {
        for front in Self.fronts where front.kind != nil {
            guard case .made(let defaults) = Self.manifestOptions(front, "") else {
                Issue.record("\(front.name): an empty options object refused: \(Self.manifestOptions(front, ""))")
                continue
            }
            // Nothing is written that is not declared (the deprecated blurRadius aside: written only when given).
            #expect(
                Set(defaults.keys).subtracting(front.settings.map(\.key)).isEmpty, "\(front.name): \(defaults.keys)")
            for s in front.settings {
                let companion =
                    front.companions[s.key].map { "\"\($0.key)\":\(Self.text($0.value, integer: true))," } ?? ""
                func with(_ v: String) -> Outcome<[String: Any]> {
                    Self.manifestOptions(front, companion + "\"\(s.key)\":\(v)")
                }
                switch s.kind {
                case .number(let n):
                    if let d = n.defaultValue {
                        #expect(Self.same(defaults[s.key], d), "\(front.name) \(s.key) default")
                    }
                    let (inside, outside) = Self.samples(n)
                    for v in inside {
                        let r = with(Self.text(v, integer: n.integer))
                        #expect(r.value.map { Self.same($0[s.key], v) } == true, "\(front.name) \(s.key) \(v)")
                    }
                    for v in outside {
                        guard case .refused(let m) = with(Self.text(v, integer: n.integer)) else {
                            Issue.record("\(front.name) \(s.key) \(v) accepted although outside \(n.span)")
                            continue
                        }
                        #expect(m.contains(s.key) || m.contains(n.name), "\(front.name) \(s.key) \(v): \(m)")
                    }
                case .size(let n):
                    #expect(Self.same(defaults[s.key], n.defaultValue! / 1_048_576))
                    #expect(with("\"2G\"").value?[s.key] as? Int == 2048)
                    #expect(with("\"\(MemorySize.describe(Int(n.maximum) * 2))\"").value == nil)
                case .choice(let values, let d):
                    #expect(defaults[s.key] as? String == d, "\(front.name) \(s.key) default")
                    for v in values { #expect(with("\"\(v)\"").value?[s.key] as? String == v, "\(s.key) \(v)") }
                    #expect(with("\"no-such-value\"").value == nil)
                case .toggle(let d):
                    #expect(defaults[s.key] as? Bool == d, "\(front.name) \(s.key) default")
                    #expect(with("\(!d)").value?[s.key] as? Bool == !d, "\(front.name) \(s.key)")
                case .text:
                    let sample = try #require(front.texts[s.key])
                    #expect(with("\"\(sample.given)\"").value?[s.key] as? String == sample.held, "\(s.key)")
                }
            }
        }
    }

    @Test("the studio's sliders and choices are declared settings, under their keys")
    func studio() throws {
        // The studio's fields are checked in its own tests against these lists; here, that what
        // it lists is declared: the same key, the same number.
        for (type, fields): (any DeclaresSettings.Type, [String]) in [
            (PortraitSettings.self, ["focus", "slope", "width", "radius", "aperture"]),
            (BackdropSessionOptions.self, ["cutoffOffset", "blur", "gamma"])
        ] {
            for f in fields { #expect(type.settings.contains { $0.key == f }, "\(type): \(f)") }
        }
    }

    @Test("a report echoes every setting under its key, in the reports' snake_case")
    func reportEcho() throws {
        struct Report: Encodable { var tool = "t" }
        var o = StackOptions()
        o.alignLevel = 1
        o.spillDirectory = "/tmp"
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("walk-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/r.json"
        try ReportFile.write(Report(), settings: o, to: path, overwrite: false)
        let r = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any]
        let echoed = try #require(r?["settings"] as? [String: Any])
        #expect(r?["tool"] as? String == "t")
        func snake(_ k: String) -> String { Setting.kebab(k).replacingOccurrences(of: "-", with: "_") }
        #expect(Set(echoed.keys) == Set(StackOptions.settings.map { snake($0.key) }))
    }

    @Test("docs/settings.md is the declarations' table")
    func documentation() throws {
        var text = "# Settings\n\n"
        text += "Generated from the library's declarations (`DeclaresSettings`); `SettingsWalkTests` checks that "
        text += "it is current (`EVANESCO_UPDATE_GOLDEN=1` rewrites it). A manifest's `options` and the studio "
        text += "take the key; the command line takes the flag; a `--report` echoes each under `settings`, "
        text += "in snake_case.\n"
        for (title, table) in [
            ("`evanesco stack`, kind `stack` (`StackOptions`)", StackOptions.markdownTable()),
            ("`evanesco portrait`, kind `portrait` (`PortraitSettings`)", PortraitSettings.markdownTable()),
            ("`evanesco backdrop`, kind `backdrop` (`BackdropSessionOptions`)", BackdropSessionOptions.markdownTable()),
            ("`evanesco worker` (`QueueWorker.Settings`)", QueueWorker.Settings.markdownTable()),
            ("`evanesco studio` (`StudioConfiguration`)", StudioConfiguration.markdownTable()),
            ("`evanesco batch submit` (`JobQueue.SubmitSettings`)", JobQueue.SubmitSettings.markdownTable()),
            ("`evanesco convert` of a camera raw (`RawFinishOptions`)", RawFinishOptions.markdownTable())
        ] {
            text += "\n## \(title)\n\n" + table
        }
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
            "../../docs/settings.md"
        ).standardized.path
        if ProcessInfo.processInfo.environment["EVANESCO_UPDATE_GOLDEN"] == "1" {
            try text.write(toFile: path, atomically: true, encoding: .utf8)
        }
        let current = try String(contentsOfFile: path, encoding: .utf8)
        #expect(current == text, "docs/settings.md is not current: run the tests with EVANESCO_UPDATE_GOLDEN=1")
    }

    @Test("the old spellings still parse, each with a note")
    func oldSpellings() throws {
        let base = ["portrait", "p.jpg", "-o", "o.jpg"]
        let plain = LegacyArguments.rewrite(base + ["--plain-blur", "--cat-eye"])
        #expect(plain.arguments == base + ["--no-protect-subject", "--cat-eye", "0.6"])
        #expect(plain.notes.count == 2)
        let settings = try #require(try Evanesco.parseAsRoot(plain.arguments) as? Portrait).settings
        #expect(!settings.protectSubject && settings.catEye == 0.6)
        let today = LegacyArguments.rewrite(base + ["--cat-eye", "0.3", "--blades", "6"])
        #expect(today.arguments == base + ["--cat-eye", "0.3", "--blades", "6"] && today.notes.isEmpty)
        // The deprecated manifest key is still read (with its note, tested with the backdrop's settings).
        let stack = try #require(try Evanesco.parseAsRoot(["stack", "a.jpg", "-o", "o.jpg", "--frames", "7"]) as? Stack)
        #expect(try stack.options().videoFrames == 7)
    }
}
