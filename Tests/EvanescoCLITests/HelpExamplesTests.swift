import ArgumentParser
import EvanescoCore
import EvanescoDepth
import EvanescoIO
import EvanescoStack
import Foundation
import Testing
@testable import evanesco

@Suite("Every --help example is one line that parses as copied")
struct HelpExamplesTests {
    /// Each command with its discussion, the root included.
    static func commands(_ type: ParsableCommand.Type = Evanesco.self) -> [ParsableCommand.Type] {
        [type] + type.configuration.subcommands.flatMap { commands($0) }
    }

    /// The lines under EXAMPLES: in each command's discussion.
    static var examples: [(command: String, line: String)] {
        commands().flatMap { c -> [(command: String, line: String)] in
            let text = c.configuration.discussion
            guard let start = text.range(of: "EXAMPLES:") else { return [] }
            return text[start.upperBound...].split(separator: "\n").map {
                String($0).trimmingCharacters(in: .whitespaces)
            }
            .filter { $0.hasPrefix("evanesco") }.map { (String(describing: c), $0) }
        }
    }

    @Test("Examples fit the 79 columns --help keeps on a line (two of indent), so none is cut in two")
    func fitOnOneLine() {
        let all = Self.examples
        #expect(all.count >= 30, "\(all.count) examples found")
        for e in all { #expect(e.line.count <= 77, "\(e.command): \(e.line.count) columns: \(e.line)") }
    }

    @Test("Each example parses (and passes its command's validate()), up to a pipe")
    func parse() {
        for e in Self.examples {
            let words = e.line.split(separator: "|")[0].split(separator: " ").map(String.init)
            #expect(words.first == "evanesco")
            do { _ = try Evanesco.parseAsRoot(Array(words.dropFirst())) } catch {
                // The studio's validate() looks for its folders: a missing one is this machine's
                // doing, not the example's.
                let message = Evanesco.message(for: error)
                if !message.contains("does not exist") { Issue.record("\(e.line): \(message)") }
            }
        }
    }
}

@Suite("Values and flags on the command line")
struct ArgumentSpellingTests {
    @Test("Enum values are kebab-case; the old camelCase spelling of the interpolation is still accepted")
    func kebabCase() throws {
        #expect(Interpolation.allValueStrings == ["nearest", "bilinear", "bicubic", "catmull-rom"])
        for spelling in ["catmull-rom", "catmullRom"] {
            let s = try Stack.parse(["a.png", "-o", "out.png", "--interpolation", spelling])
            #expect(s.interpolation == .catmullRom)
        }
        #expect(throws: (any Error).self) {
            try Stack.parse(["a.png", "-o", "out.png", "--interpolation", "catmull_rom"])
        }
        // Every value of every enum option, as --help lists it, is lower-case words joined by dashes.
        for values in [
            Interpolation.allValueStrings, AlignMode.allValueStrings, MergeMethod.allValueStrings,
            LosslessCompression.allValueStrings,
            PortraitEffect.allValueStrings, MaskRefinement.allValueStrings, DepthKind.allValueStrings,
            GDepthPolarity.allValueStrings
        ] {
            for v in values { #expect(v.allSatisfy { $0.isLowercase || $0.isNumber || $0 == "-" }, "\(v)") }
        }
    }

    @Test("--gap-snap / --no-gap-snap: one flag and its inversion, snapping by default")
    func gapSnap() throws {
        let base = ["--portrait", "p.heic", "-o", "o.jpg"]
        #expect(try Backdrop.parse(base).gapSnap)
        #expect(try !Backdrop.parse(base + ["--no-gap-snap"]).gapSnap)
        #expect(try Backdrop.parse(base + ["--gap-snap"]).gapSnap)
        #expect(try !Backdrop.parse(base + ["--no-gap-snap"]).options().pipeline.snapCutoffToGap)
    }
}

@Suite("Command files stay small")
struct CommandSizeTests {
    @Test(
        """
        Every command's file is at most 150 code lines (blank and comment lines not counted): the work is the \
        library's
        """
    )
    func commandFiles() throws {
        let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
            .appendingPathComponent("Sources/evanesco").path
        let files = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix("Command.swift") }
        #expect(files.count >= 10, "\(files)")
        for f in files {
            let lines = try String(contentsOfFile: dir + "/" + f, encoding: .utf8).split(
                separator: "\n", omittingEmptySubsequences: false)
            let code = lines.filter { l in
                let t = l.trimmingCharacters(in: .whitespaces)
                return !t.isEmpty && !t.hasPrefix("//")
            }
            #expect(code.count <= 150, "\(f): \(code.count) code lines")
        }
    }
}
