import EvanescoCore
import EvanescoDepth
import EvanescoIO
import EvanescoStack
import Foundation

/// What a job does.
public enum JobKind: String, Sendable, Codable, CaseIterable {
    /// Align and merge a burst (`BurstStacker`): inputs are image files, one
    /// folder of images or one video; options are `StackOptions`.
    case stack
    /// Render a depth effect on a portrait photo (`PortraitRenderer`): inputs are the photo, and
    /// optionally a separate disparity map; options are `PortraitSettings`.
    case portrait
    /// Replace the background behind a person (`BackdropSession`): inputs are the colour and the
    /// depth stream; options are `BackdropSessionOptions`.
    case backdrop

    /// The JPEG quality a job of this kind writes when its line gives none: the command line's
    /// default for the same command, so that a batch job and the command give the same bytes.
    public var defaultQuality: Int {
        switch self {
        case .stack: JPEGQuality.master
        case .portrait, .backdrop: JPEGQuality.rendered
        }
    }
}

/// A job's settings: the library's own option type for its kind.
public enum JobOptions: Sendable, Encodable {
    case stack(StackOptions)
    case portrait(PortraitSettings)
    case backdrop(BackdropSessionOptions)

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .stack(let o): try o.encode(to: encoder)
        case .portrait(let o): try o.encode(to: encoder)
        case .backdrop(let o): try o.encode(to: encoder)
        }
    }
}

/// One line of a batch manifest, read and checked:
/// `{"id": "...", "kind": "stack" | "portrait" | "backdrop", "inputs": [...], "output": "...", "options": {...}}`,
/// with optional keys: `quality` (JPEG quality of the output, 1...100; default: the command's),
/// `overwrite` (replace an existing output no receipt says this batch wrote), `timeout` (seconds),
/// for a backdrop `background` (an image scaled to fill; default black), and for a stack `erase`
/// (a mask the size of the result, white where what the merge kept must go, as
/// `evanesco stack --erase` reads it: `StackOptions.erase`).
public struct BatchJob: Sendable {
    /// The job's name, unique in its manifest or queue: 1 to 200 of `A-Z a-z 0-9 . _ - : @ +`,
    /// not starting with a dot (it names the job's receipt file).
    public var id: String
    public var kind: JobKind
    /// Input paths, absolute (a relative path in a manifest is relative to the manifest's folder).
    public var inputs: [String]
    /// The output path, absolute.
    public var output: String
    public var options: JobOptions
    /// JPEG quality of the output.
    public var quality: Int
    /// A backdrop's background image, absolute.
    public var background: String?
    /// A stack's erase mask (`StackOptions.erase`), absolute: read when the job runs.
    public var erase: String?
    /// Replace an output that exists and that no receipt (or queue row) says this batch wrote
    /// (`"overwrite": true` on the line; `batch run --force` and `batch submit --force` set it for
    /// every job). It never allows writing over an input, a manifest or a receipt.
    public var overwrite = false
    /// Seconds the job may run (`"timeout": 600` on the line; a worker's `--job-timeout` when
    /// absent): past it the job is stopped and failed, not left renewing its lease for ever.
    public var timeout: Double?

    /// The time limits a job line may give: a second to a week.
    public static let timeoutLimits = NumericSetting("timeout", 1...604_800, default: nil, unit: "seconds")
    /// The line as it was written, checked (what a queue stores and a worker reads back).
    public var line: String
    /// What the line says in a deprecated way (still honoured), for the front end to show.
    public var notes: [String] = []

    /// The job as one JSON line with absolute paths and every setting written out (what a queue
    /// stores): ``parse(_:base:checkFiles:stored:)`` reads it back to the same job on any machine that
    /// mounts the same paths.
    ///
    /// - Returns: The line.
    /// - Throws: `EncodingError` (not expected: every setting is finite once validated).
    public func normalizedLine() throws -> String {
        struct Line: Encodable {
            var spec = JobSpec.current
            var id: String, kind: JobKind, inputs: [String], output: String, quality: Int, background: String?
            var erase: String?
            var overwrite: Bool?
            var timeout: Double?
            var options: JobOptions
        }
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = try e.encode(
            Line(
                id: id, kind: kind, inputs: inputs, output: output, quality: quality, background: background,
                erase: erase, overwrite: overwrite ? true : nil, timeout: timeout, options: options))
        return String(decoding: data, as: UTF8.self)
    }

    /// The characters a job id may hold.
    static let idCharacters = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-:@+")

    /// Whether `id` is a job id: 1 to 200 of `A-Z a-z 0-9 . _ - : @ +`, not starting with a dot.
    public static func isValid(id: String) -> Bool {
        (1...200).contains(id.count) && id.allSatisfy(idCharacters.contains) && !id.hasPrefix(".")
    }

    /// Reads and checks one manifest line, or a stored one (a queue row).
    ///
    /// - Parameters:
    ///   - line: The JSON object.
    ///   - base: The folder relative paths are resolved against.
    ///   - checkFiles: Also check that every input exists and that the output's folder does.
    ///   - stored: The line was stored by a binary (a queue row): without a `spec` key it is of
    ///     spec 1, the one before versions were written, and is migrated. A line a person wrote
    ///     without one is of the current spec.
    /// - Returns: The job, its paths absolute.
    /// - Throws: ``ManifestError`` with a one-line message.
    public static func parse(
        _ line: String, base: String, checkFiles: Bool = true, stored: Bool = false
    ) throws(ManifestError) -> BatchJob {
        // Strict JSON within bounds first: a trailing comma or a key given twice is refused, not
        // read as one of its meanings, and a 50 MB line costs a length check, not a parse.
        if let problem = StrictJSON.problem(in: line) { throw ManifestError(message: problem) }
        let line = try JobSpec.migrated(line, stored: stored)
        let raw: Raw
        do { raw = try JSONDecoder().decode(Raw.self, from: Data(line.utf8)) } catch {
            // Name the job when its id at least was readable and is an id.
            let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            let id = (object?["id"] as? String).flatMap { isValid(id: $0) ? $0 : nil }
            throw ManifestError(message: SettingsCoding.message(error), id: id)
        }
        guard isValid(id: raw.id) else {
            throw ManifestError(
                message:
                    "id \(ManifestError.quoted(raw.id)) must be 1 to 200 of A-Z a-z 0-9 . _ - : @ +, not starting "
                    + "with a dot"
            )
        }
        func bad(_ m: String) -> ManifestError { ManifestError(message: m, id: raw.id) }
        guard !raw.inputs.isEmpty, raw.inputs.allSatisfy({ !$0.isEmpty }) else {
            throw bad("inputs must list at least one path")
        }
        guard !raw.output.isEmpty else { throw bad("output must be a path") }
        if let q = raw.quality,
            let e = SettingError.refusal({ () throws(SettingError) in try JPEGQuality.setting.check(q) })
        {
            throw bad(e.description)
        }
        func absolute(_ p: String) -> String {
            URL(fileURLWithPath: p, relativeTo: URL(fileURLWithPath: base, isDirectory: true)).standardizedFileURL.path
        }
        let inputs = raw.inputs.map(absolute), output = absolute(raw.output)
        let background = raw.background.map(absolute), erase = raw.erase.map(absolute)
        if background != nil && raw.kind != .backdrop {
            throw bad("background is a backdrop job's key; a \(raw.kind.rawValue) job has none")
        }
        if erase != nil && raw.kind != .stack {
            throw bad("erase is a stack job's key; a \(raw.kind.rawValue) job has none")
        }
        if raw.erase?.isEmpty == true { throw bad("erase must be the path of a mask picture") }
        let ext = (output as NSString).pathExtension.lowercased()
        switch raw.kind {
        case .stack, .portrait:
            guard let f = ImageFormat.forOutput(extension: ext), !ext.hasPrefix("hei") else {
                throw bad("output \(raw.output): name it .jpg, .png or .tif")
            }
            if f == .raw && raw.kind == .portrait { throw bad("output \(raw.output): name it .jpg, .png or .tif") }
            if f == .raw && checkFiles && !BurstInput.isRawBurst(InputFile.expandedQuietly(inputs)) {
                throw bad(
                    "output \(raw.output): a .dng holds a merged raw mosaic, and these inputs are not camera raws")
            }
            if raw.kind == .portrait && inputs.count > 2 {
                throw bad(
                    "a portrait job takes the photo, and optionally its disparity map: \(inputs.count) inputs given")
            }
        case .backdrop:
            guard inputs.count == 2 else {
                throw bad("a backdrop job takes two inputs, the colour and the depth stream: \(inputs.count) given")
            }
            guard inputs.allSatisfy({ $0 != "-" }) else { throw bad("a batch job cannot read stdin") }
        }
        if inputs.contains(output) || background == output || erase == output {
            throw bad("output \(raw.output) is also an input")
        }
        if checkFiles, let problem = missingFile(inputs + [background, erase].compactMap { $0 }, output: output) {
            throw bad(problem)
        }
        var job = BatchJob(
            id: raw.id, kind: raw.kind, inputs: inputs, output: output, options: raw.options,
            quality: raw.quality ?? raw.kind.defaultQuality,
            background: background, erase: erase, overwrite: raw.overwrite ?? false, timeout: raw.timeout,
            line: line)
        if case .backdrop(let o) = raw.options, o.blurRadius != nil {
            job.notes.append(BackdropSessionOptions.blurRadiusDeprecation)
        }
        return job
    }

    /// What is missing on disk: an input, or the output's folder; nil when nothing is.
    static func missingFile(_ inputs: [String], output: String) -> String? {
        for p in inputs where !FileManager.default.fileExists(atPath: p) { return "input \(p): no such file or folder" }
        var isDir: ObjCBool = false
        let dir = (output as NSString).deletingLastPathComponent
        guard FileManager.default.fileExists(atPath: dir, isDirectory: &isDir), isDir.boolValue else {
            return "output folder \(dir) does not exist; make it first"
        }
        return nil
    }

    /// The line's JSON as decoded: the options by the kind's own type.
    struct Raw: Decodable {
        var id: String
        var kind: JobKind
        var inputs: [String]
        var output: String
        var options: JobOptions
        var quality: Int?
        var background: String?
        var erase: String?
        var overwrite: Bool?
        var timeout: Double?

        enum Key: String, CodingKey, CaseIterable {
            case spec, id, kind, inputs, output, options, quality, background, erase, overwrite, timeout
        }

        init(from decoder: any Decoder) throws {
            try SettingsCoding.rejectUnknownKeys(decoder, known: Key.allCases.map(\.rawValue))
            let c = try decoder.container(keyedBy: Key.self)
            id = try c.decode(String.self, forKey: .id)
            guard let k = JobKind(rawValue: try c.decode(String.self, forKey: .kind)) else {
                throw DecodingError.dataCorruptedError(
                    forKey: .kind, in: c, debugDescription: "must be stack, portrait or backdrop")
            }
            kind = k
            inputs = try c.decode([String].self, forKey: .inputs)
            output = try c.decode(String.self, forKey: .output)
            quality = try c.decodeWholeNumberIfPresent(forKey: .quality)
            background = try c.decodeIfPresent(String.self, forKey: .background)
            erase = try c.decodeIfPresent(String.self, forKey: .erase)
            overwrite = try c.decodeIfPresent(Bool.self, forKey: .overwrite)
            timeout = try c.decodeIfPresent(Double.self, forKey: .timeout)
            if let t = timeout,
                let e = SettingError.refusal({ () throws(SettingError) in try BatchJob.timeoutLimits.check(t) })
            {
                throw DecodingError.dataCorrupted(.init(codingPath: [Key.timeout], debugDescription: e.description))
            }
            let present = c.contains(.options)
            switch k {
            case .stack: options = .stack(present ? try c.decode(StackOptions.self, forKey: .options) : StackOptions())
            case .portrait:
                options = .portrait(
                    present ? try c.decode(PortraitSettings.self, forKey: .options) : PortraitSettings())
            case .backdrop:
                options = .backdrop(
                    present ? try c.decode(BackdropSessionOptions.self, forKey: .options) : BackdropSessionOptions())
            }
        }
    }
}

extension BatchJob {
    /// The files this job reads, protected from every output of its batch.
    public var protectedInputs: ProtectedPaths {
        var p = ProtectedPaths()
        p.protect(inputsOf: self)
        return p
    }

    /// Why this job may not write its output now, or nil: the output is one of its inputs or
    /// inside an input folder (real paths: links and `..` resolved, whatever `overwrite` says),
    /// or it exists and neither ``overwrite`` nor `ours` allows replacing it.
    ///
    /// - Parameter ours: Whether the existing output is this batch's own (its receipt or queue
    ///   row says so, size and digest matching).
    public func outputRefusal(ours: (String) -> Bool = { _ in false }) -> String? {
        if let why = protectedInputs.refusal(forOutput: output) { return "output \(output): \(why)" }
        var st = stat()
        if lstat(output, &st) == 0 && !overwrite && !ours(output) {
            return
                "\(output) exists and no receipt says this batch wrote it; remove it, or run with --force to replace it"
        }
        return nil
    }
}

extension ProtectedPaths {
    /// Protects a job's inputs, background and erase mask.
    public mutating func protect(inputsOf job: BatchJob) {
        for p in job.inputs { protect(p, as: "an input of job \(job.id)") }
        if let b = job.background { protect(b, as: "the background of job \(job.id)") }
        if let e = job.erase { protect(e, as: "the erase mask of job \(job.id)") }
    }
}

extension BatchJob {
    /// Why this job may not run on a worker confined to `allowed` (real folders), or nil: an
    /// input (each file of an input folder too), the background, the mask, the output or the
    /// spill folder resolves outside every one of them. Empty `allowed`: no confinement.
    public func confinementRefusal(allowed: [String]) -> String? {
        guard !allowed.isEmpty else { return nil }
        var paths = InputFile.expandedQuietly(inputs) + inputs
        paths += [background, erase].compactMap { $0 }
        if case .stack(let o) = options, let spill = o.spillDirectory { paths.append(spill) }
        paths.append(output)
        for p in paths {
            let real = RealPath.of(p)
            if !allowed.contains(where: { RealPath.isWithin(real, $0) }) {
                return
                    "\(p) resolves to \(real), outside the folders this worker may use (--allow "
                    + "\(allowed.joined(separator: " --allow ")))"
            }
        }
        return nil
    }
}

/// Why a manifest line (or a queued job) was refused.
public struct ManifestError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong, in one line.
    public var message: String
    /// The job's id, when the line got that far.
    public var id: String?
    /// The line number in the manifest (1-based), when read from one.
    public var line: Int?

    /// - Parameters:
    ///   - message: What is wrong.
    ///   - id: The job's id, if known.
    ///   - line: The line number, if known.
    public init(message: String, id: String? = nil, line: Int? = nil) {
        self.message = message
        self.id = id
        self.line = line
    }

    public var description: String {
        (line.map { "line \($0): " } ?? "") + (id.map { "job \(Self.quoted($0, bare: true)): " } ?? "") + message
    }

    /// Text from a manifest, the environment or a queue as a message may show it
    /// (`SettingsCoding.quoted(_:limit:bare:)` of EvanescoCore).
    public static func quoted(_ text: String, limit: Int = 80, bare: Bool = false) -> String {
        SettingsCoding.quoted(text, limit: limit, bare: bare)
    }
}
