import EvanescoCore
import EvanescoIO
import Foundation

/// A batch manifest: JSON Lines, one ``BatchJob`` a line, blank lines ignored. Every line is
/// checked when the manifest is read (JSON, keys, option values through the option types' own
/// `validate()`, ids and outputs unique, inputs present), and every bad line is reported with its
/// number before any job runs.
public struct BatchManifest: Sendable {
    /// The manifest's path, absolute.
    public var path: String
    /// The jobs, in line order.
    public var jobs: [BatchJob]
    /// The line number of each job (1-based), parallel to ``jobs``.
    public var lineNumbers: [Int]

    /// Manifests larger than this are refused (a million jobs of a few hundred bytes each).
    public static let maximumBytes = 1 << 30

    /// Reads and checks a manifest.
    ///
    /// - Parameters:
    ///   - path: The manifest file.
    ///   - checkFiles: Also check that inputs exist and output folders do.
    /// - Returns: The manifest.
    /// - Throws: ``ManifestProblems`` listing every bad line; `ImageIOError` when the file cannot be read.
    public static func read(_ path: String, checkFiles: Bool = true) throws -> BatchManifest {
        let absolute = URL(fileURLWithPath: path).standardizedFileURL.path
        let st = try InputFile.requireRegular(absolute)
        guard Int(st.st_size) <= maximumBytes else {
            throw ManifestProblems(
                path: path, problems: [ManifestError(message: "the manifest is over 1 GiB; split it into several")])
        }
        let bytes = try InputFile.read(absolute)
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw ManifestProblems(path: path, problems: [ManifestError(message: "the manifest is not UTF-8 text")])
        }
        return try parse(text, path: absolute, checkFiles: checkFiles)
    }

    /// Checks manifest text.
    ///
    /// - Parameters:
    ///   - text: JSON Lines.
    ///   - path: Where it came from (relative paths are resolved against its folder).
    ///   - checkFiles: Also check that inputs exist and output folders do.
    /// - Returns: The manifest.
    /// - Throws: ``ManifestProblems`` listing every bad line.
    public static func parse(_ text: String, path: String, checkFiles: Bool = true) throws(ManifestProblems)
        -> BatchManifest
    {
        let base = (path as NSString).deletingLastPathComponent
        var jobs: [BatchJob] = [], numbers: [Int] = [], problems: [ManifestError] = []
        var ids: [String: Int] = [:], outputs: [String: Int] = [:]
        var number = 0
        // Split on bytes, not Characters: a line is cut at "\n" (its "\r" dropped, for a
        // manifest written on Windows), and a 50 MB line is refused by its length before it is
        // made a String or decoded.
        for bytes in text.utf8.split(separator: 10, omittingEmptySubsequences: false) {
            number += 1
            let lineBytes = bytes.last == 13 ? bytes.dropLast() : bytes
            if lineBytes.count > StrictJSON.maximumLineBytes {
                problems.append(
                    ManifestError(
                        message:
                            "the line is \(lineBytes.count) bytes, over the \(StrictJSON.maximumLineBytes >> 20) MiB "
                            + "a job may take",
                        line: number))
                continue
            }
            let line = String(decoding: lineBytes, as: UTF8.self)
            let trimmed = line.trimmingCharacters(in: .whitespacesAndNewlines)
            if trimmed.isEmpty { continue }
            do throws(ManifestError) {
                let job = try BatchJob.parse(trimmed, base: base, checkFiles: checkFiles)
                if let first = ids[job.id] {
                    throw ManifestError(message: "the id is also line \(first)'s; ids must be unique", id: job.id)
                }
                // By real path: `out/j1.jpg` and `out2/j1.jpg` are one file when out2 links to out.
                let real = checkFiles ? RealPath.of(job.output) : job.output
                if let first = outputs[real] {
                    throw ManifestError(
                        message: "output \(job.output) is also line \(first)'s"
                            + (real != job.output ? " (both are \(real))" : "") + "; two jobs cannot write one file",
                        id: job.id)
                }
                ids[job.id] = number
                outputs[real] = number
                jobs.append(job)
                numbers.append(number)
            } catch {
                var e = error
                e.line = number
                problems.append(e)
            }
        }
        if checkFiles && problems.isEmpty {
            // No output may be an input of any job, the manifest or its receipts, even with --force.
            let protected = protectedPaths(manifest: path, jobs: jobs)
            for (job, number) in zip(jobs, numbers) {
                if let why = protected.refusal(forOutput: job.output) {
                    problems.append(ManifestError(message: "output \(job.output): \(why)", id: job.id, line: number))
                }
            }
        }
        if !problems.isEmpty { throw ManifestProblems(path: path, problems: problems) }
        if jobs.isEmpty {
            throw ManifestProblems(path: path, problems: [ManifestError(message: "the manifest has no jobs")])
        }
        return BatchManifest(path: path, jobs: jobs, lineNumbers: numbers)
    }

    /// What no output, report or side output of a run of this manifest may write over: every
    /// job's inputs, the manifest itself and its state folder (receipts).
    public var protectedPaths: ProtectedPaths { Self.protectedPaths(manifest: path, jobs: jobs) }

    static func protectedPaths(manifest: String, jobs: [BatchJob]) -> ProtectedPaths {
        var p = ProtectedPaths()
        p.protect(manifest, as: "the manifest")
        p.protect(LocalBatch.stateFolder(of: manifest), as: "the manifest's state folder (its receipts)")
        for job in jobs { p.protect(inputsOf: job) }
        return p
    }

    /// The jobs of shard `shard` (jobs whose index in the manifest is `shard.index` modulo
    /// `shard.count`): the same slice on every machine, whatever order they start in.
    ///
    /// - Parameter shard: The slice, or nil for every job.
    /// - Returns: The jobs of that slice, in manifest order.
    public func jobs(in shard: Shard?) -> [BatchJob] {
        guard let shard else { return jobs }
        return jobs.indices.filter { $0 % shard.count == shard.index }.map { jobs[$0] }
    }
}

/// Every bad line of a manifest.
public struct ManifestProblems: Error, Sendable, CustomStringConvertible {
    public var path: String
    public var problems: [ManifestError]

    public var description: String {
        let shown = problems.prefix(50).map { "  \($0)" }.joined(separator: "\n")
        let more = problems.count > 50 ? "\n  ... and \(problems.count - 50) more" : ""
        return "\(path): \(problems.count) bad line\(problems.count == 1 ? "" : "s"); nothing was run:\n\(shown)\(more)"
    }
}

/// One deterministic slice of a manifest: jobs whose index modulo ``count`` is ``index``.
public struct Shard: Sendable, Equatable, CustomStringConvertible {
    /// 0-based.
    public var index: Int
    public var count: Int

    /// - Parameters:
    ///   - index: 0-based, below `count`.
    ///   - count: Number of slices, 1 or more.
    public init?(index: Int, count: Int) {
        guard count >= 1, count <= 1_000_000, (0..<count).contains(index) else { return nil }
        self.index = index
        self.count = count
    }

    /// Parses `I/N` (0-based I).
    public init?(_ text: String) {
        let p = text.split(separator: "/", omittingEmptySubsequences: false)
        guard p.count == 2, let i = Int(p[0]), let n = Int(p[1]) else { return nil }
        self.init(index: i, count: n)
    }

    public var description: String { "\(index)/\(count)" }

    /// The slice an array job's scheduler gives this process, from its environment: Slurm's
    /// `SLURM_ARRAY_TASK_ID` (made 0-based by `SLURM_ARRAY_TASK_MIN`) of
    /// `SLURM_ARRAY_TASK_COUNT`, or a Kubernetes Indexed Job's `JOB_COMPLETION_INDEX` of
    /// `EVANESCO_SHARD_COUNT` (set it to the Job's `completions`).
    ///
    /// - Parameter environment: The process's environment.
    /// - Returns: The slice; nil when no scheduler variable is set.
    /// - Throws: ``ManifestError`` when the variables are set but do not make a slice.
    public static func fromEnvironment(_ environment: [String: String]) throws(ManifestError) -> Shard? {
        let slurm = environment["SLURM_ARRAY_TASK_ID"], kubernetes = environment["JOB_COMPLETION_INDEX"]
        // Each variable is quoted back shortened and escaped: the environment is not ours.
        func shown(_ key: String) -> String { environment[key].map { ManifestError.quoted($0) } ?? "unset" }
        if slurm != nil && kubernetes != nil {
            throw ManifestError(
                message:
                    "both SLURM_ARRAY_TASK_ID (\(shown("SLURM_ARRAY_TASK_ID"))) and JOB_COMPLETION_INDEX "
                    + "(\(shown("JOB_COMPLETION_INDEX"))) are set; unset the one that is not this job's "
                    + "scheduler, or give --shard I/N"
            )
        }
        if let id = slurm {
            // Whole numbers that fit, and a difference that does not overflow: the variables are
            // any text a user exported, not what Slurm guarantees.
            let min = environment["SLURM_ARRAY_TASK_MIN"].map { Int($0) } ?? 0
            guard let i = Int(id), let min, let n = environment["SLURM_ARRAY_TASK_COUNT"].flatMap(Int.init),
                case let (index, overflow) = i.subtractingReportingOverflow(min), !overflow,
                let s = Shard(index: index, count: n)
            else {
                throw ManifestError(
                    message:
                        "SLURM_ARRAY_TASK_ID=\(shown("SLURM_ARRAY_TASK_ID")) with "
                        + "SLURM_ARRAY_TASK_MIN=\(shown("SLURM_ARRAY_TASK_MIN")) and "
                        + "SLURM_ARRAY_TASK_COUNT=\(shown("SLURM_ARRAY_TASK_COUNT")) is not a slice; submit "
                        + "with sbatch --array=0-(N-1) (a contiguous range of at most 1000000 tasks)"
                )
            }
            return s
        }
        if kubernetes != nil {
            guard let i = environment["JOB_COMPLETION_INDEX"].flatMap(Int.init),
                let n = environment["EVANESCO_SHARD_COUNT"].flatMap(Int.init), let s = Shard(index: i, count: n)
            else {
                throw ManifestError(
                    message:
                        "JOB_COMPLETION_INDEX=\(shown("JOB_COMPLETION_INDEX")) with "
                        + "EVANESCO_SHARD_COUNT=\(shown("EVANESCO_SHARD_COUNT")) is not a slice; set "
                        + "EVANESCO_SHARD_COUNT to the Job's completions (at most 1000000), the index being 0 "
                        + "to completions - 1"
                )
            }
            return s
        }
        return nil
    }
}
