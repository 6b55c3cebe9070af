import ArgumentParser
import EvanescoCore
import EvanescoDepth
import EvanescoIO
import EvanescoStack
import Foundation
import EvanescoFaces

@main
struct Evanesco: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "evanesco",
        abstract: "Computational photography on Linux: burst stacking, depth photos, depth backgrounds.",
        discussion: """
            Results go to stdout or files; progress and diagnostics to stderr.

            EXAMPLES:
              evanesco info photo.heic
              evanesco convert photo.heic photo.png --bit-depth 16 --keep-metadata
              evanesco stack burst/ -o clean.jpg --report report.json
              evanesco depth info IMG_0001.HEIC --json
              evanesco portrait IMG_0001.HEIC -o o.jpg --effect blur --focus-point 0.5,0.4
              evanesco backdrop --color cam.mp4 --depth d.mkv --background sea.jpg -o o.mp4
              evanesco batch run jobs.jsonl --jobs 2
              evanesco worker --queue postgres://me@db/photos
              evanesco studio ~/Pictures
              evanesco demo
            """,
        version: EvanescoVersion.current,
        subcommands: [
            Info.self, Convert.self, Stack.self, Depth.self, Portrait.self, Backdrop.self, Faces.self, Batch.self,
            Worker.self, StudioCommand.self, Demo.self
        ]
    )

    /// Parses, refuses NaN and infinity in every numeric option (they pass every `<`/`>` range
    /// check a command's `validate()` makes), then runs.
    static func main() async {
        do {
            try Arguments.refuseInvalidUTF8()
            var arguments = Array(CommandLine.arguments.dropFirst())
            if arguments.first == "portrait" {
                let legacy = LegacyArguments.rewrite(arguments)
                arguments = legacy.arguments
                legacy.notes.forEach(Diagnostics.warning)
            }
            var command = try parseAsRoot(arguments)
            try NumericOptions.refuseNonFinite(in: command)
            // The studio and workers are servers: they stop on SIGINT/SIGTERM by themselves
            // (a worker drains). A batch keeps what it finished: its receipts make it resumable.
            if command is BatchRun {
                Cleanup.installSignalHandlers()
            } else if !(command is StudioCommand || command is Worker || command is BatchSubmit
                || command is BatchStatusCommand
                || command is BatchRetry || command is BatchCancel)
            {
                Cleanup.installSignalHandlers()
                Cleanup.recordOutputs()
                let limit = (command as? Stack)?.memoryLimit.bytes ?? MemoryLimit.standard.bytes
                Allocator.keepFreedMemory(limitMB: (limit ?? 0) >> 20)
            }
            if var command = command as? AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
            Cleanup.yieldToInterruption()
        } catch {
            Cleanup.yieldToInterruption()
            exit(withError: error)
        }
    }
}

#if canImport(Glibc)
    import CMalloc
#endif

/// How a one-shot command's process allocates.
enum Allocator {
    /// Keeps freed memory in the process for the next allocation: a command allocates and frees
    /// frames, pyramids and tiles of the same few sizes over and over, and glibc, by default,
    /// maps each block above 128 KB afresh and returns it when freed, so every frame's buffers
    /// came back as new pages to fault in and clear (5 % of a 20-frame stack's time went to page
    /// faults). Free heap up to a quarter of `--memory-limit` is now kept (1 GB without a limit)
    /// and blocks up to a quarter of that come from the heap (at most 256 MB), so the limit still
    /// bounds the process: a block kept in the heap also pins everything below it.
    /// Measured: motorcycle-handheld 0.195 -> 0.179 s, highway 0.159 -> 0.146 s; pug-handheld
    /// through the temporary file (`--memory-limit 256`) 3.7 -> 2.8 s at 324 MB peak instead of
    /// 253 MB (428 MB when 1 GB was kept whatever the limit).
    static func keepFreedMemory(limitMB: Int) {
        #if canImport(Glibc)
            let keep = limitMB > 0 ? min(1 << 30, (limitMB << 20) / 4) : 1 << 30
            _ = mallopt(M_MMAP_THRESHOLD, Int32(min(256 << 20, keep / 4)))
            _ = mallopt(M_TRIM_THRESHOLD, Int32(keep))
        #endif
    }
}

/// The one check of numeric command-line values: every `Float`/`Double` option of every command
/// (and of its option groups) must be finite. Found by reflection, so an option added later is
/// covered without anyone remembering to.
enum NumericOptions {
    static func refuseNonFinite(in arguments: Any) throws {
        for child in Mirror(reflecting: arguments).children {
            guard let label = child.label else { continue }
            let name =
                "--"
                + label.drop { $0 == "_" }.reduce(into: "") { s, c in
                    if c.isUppercase { s += "-" + c.lowercased() } else { s.append(c) }
                }
            if let option = child.value as? FiniteCheckable, let bad = option.nonFiniteValue {
                throw ValidationError("\(name) must be a finite number, not \(bad)")
            }
            if let group = child.value as? NestedArguments { try refuseNonFinite(in: group.nested) }
        }
    }
}

/// A parsed option whose value may hold a float.
protocol FiniteCheckable { var nonFiniteValue: String? { get } }
/// An option group whose options are checked too.
protocol NestedArguments { var nested: Any { get } }
/// Values that are, or hold, floats.
protocol FloatHolding { var nonFinite: String? { get } }
extension Float: FloatHolding { var nonFinite: String? { isFinite ? nil : "\(self)" } }
extension Double: FloatHolding { var nonFinite: String? { isFinite ? nil : "\(self)" } }
extension Optional: FloatHolding where Wrapped: FloatHolding { var nonFinite: String? { self?.nonFinite } }
extension Array: FloatHolding where Element: FloatHolding {
    var nonFinite: String? { lazy.compactMap(\.nonFinite).first }
}
extension Option: FiniteCheckable where Value: FloatHolding { var nonFiniteValue: String? { wrappedValue.nonFinite } }
extension OptionGroup: NestedArguments { var nested: Any { wrappedValue } }

/// Runs a command body, turning any error into one line on stderr and exit status 1. A run is
/// all or nothing: the outputs it already placed (the main image before a side output failed)
/// are removed, so a failed command never leaves a result that looks complete.
func reportingErrors(_ body: () throws -> Void) throws {
    do { try body() } catch { try reported(error) }
}

/// ``reportingErrors(_:)`` for a command that runs asynchronously.
func reportingErrors(_ body: () async throws -> Void) async throws {
    do { try await body() } catch { try reported(error) }
}

/// The error a command body threw, reported once on stderr and turned into its exit status.
private func reported(_ error: any Error) throws -> Never {
    switch error {
    case let e as ExitCode:
        Cleanup.yieldToInterruption()
        if e != .success { Cleanup.rollBack() }
        throw e
    case let e as ValidationError:
        // A usage problem found while running (a scheduler's variables, a URL): status 64, as
        // for one found while parsing.
        Cleanup.rollBack()
        Diagnostics.error(e.message)
        throw ExitCode.validationFailure
    case let e as FrameStreamError where e.isOneImageForSeveralFrames:
        // Several frames for one image is the output named wrong: a usage problem too.
        Cleanup.rollBack()
        Diagnostics.error("-o " + String(describing: e))
        throw ExitCode.validationFailure
    default:
        // A failure caused by the signal's cleanup (its temporary file removed) is not reported:
        // the handler exits with 128 + the signal.
        Cleanup.yieldToInterruption()
        Cleanup.rollBack()
        Diagnostics.error(commandLineMessage(error))
        throw ExitCode.failure
    }
}

extension FrameStreamError {
    var isOneImageForSeveralFrames: Bool { if case .oneImageForSeveralFrames = self { true } else { false } }
}

/// The raw command line, before Swift turns it into strings.
enum Arguments {
    /// Swift's `CommandLine.arguments` replaces bytes that are not UTF-8 with U+FFFD, so a file
    /// name that is not UTF-8 would be read or written under another name. Such an argument is
    /// refused (status 64) before anything is parsed.
    static func refuseInvalidUTF8() throws {
        for i in 1..<max(1, Int(CommandLine.argc)) {
            guard let raw = CommandLine.unsafeArgv[i] else { continue }
            let bytes = UnsafeBufferPointer(
                start: UnsafeRawPointer(raw).assumingMemoryBound(to: UInt8.self), count: strlen(raw))
            if String(validating: bytes, as: UTF8.self) == nil {
                let shown = String(decoding: bytes, as: UTF8.self)
                throw ValidationError(
                    "argument \(i) (\(shown)) is not valid UTF-8; evanesco reads and writes names in UTF-8 only: "
                        + "rename the file (e.g. convmv -f latin1 -t utf8) or pass another name"
                )
            }
        }
    }
}

/// The library's message, with the option that does what it asks for: library errors name no flags.
func commandLineMessage(_ error: Error) -> String {
    switch error {
    case ImageIOError.outputExists(let p): "\(p): already exists; pass --force to overwrite it or choose another name"
    case CascadeError.notFound:
        String(describing: error).replacingOccurrences(of: "or give a cascade file", with: "or pass --cascade FILE.xml")
    case StackError.referenceOutOfRange:
        "--" + String(describing: error).replacingOccurrences(of: "reference frame ", with: "reference ")
    case StackError.tooSmallToAlign: String(describing: error) + " (--align none)"
    case StackError.spillFailed: String(describing: error) + " (--spill-dir, --memory-limit MB)"
    case let e as OutOfMemoryError: "\(e.shortage), or pass --\(Setting.kebab(e.setting)) \(e.value)"
    case FocusError.relativeAccuracy: String(describing: error) + " (--focus 0..1 or --focus-point X,Y)"
    default: String(describing: error)
    }
}

/// Diagnostics go to stderr, never stdout.
enum Diagnostics {
    /// One line, whatever a library underneath put in the message.
    static func error(_ message: String) {
        let line = message.split(whereSeparator: \.isNewline).joined(separator: " ")
        FileHandle.standardError.write(Data("evanesco: error: \(line)\n".utf8))
    }
    static func warning(_ message: String) {
        FileHandle.standardError.write(Data("evanesco: warning: \(message)\n".utf8))
    }
}

/// Reports as files: the one JSON convention (``ReportJSON``), written atomically.
enum ReportFile {
    static func write<T: Encodable>(_ report: T, to path: String, overwrite: Bool) throws {
        try AtomicOutput.write(try ReportJSON.encode(report), to: path, overwrite: overwrite)
    }

    /// Writes `report` with the settings it was made with under `settings`: every declared
    /// setting of the option type by its key (in the reports' snake_case), as a manifest takes it.
    static func write<T: Encodable, S: Encodable & DeclaresSettings>(
        _ report: T, settings: S, to path: String, overwrite: Bool
    ) throws {
        try write(WithSettings(report: report, settings: settings), to: path, overwrite: overwrite)
    }

    /// A report's own keys and `settings` beside them.
    private struct WithSettings<T: Encodable, S: Encodable>: Encodable {
        var report: T
        var settings: S
        enum Key: String, CodingKey { case settings }
        func encode(to encoder: any Encoder) throws {
            try report.encode(to: encoder)
            var c = encoder.container(keyedBy: Key.self)
            try c.encode(settings, forKey: .settings)
        }
    }
}
