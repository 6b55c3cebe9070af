import EvanescoCore
import Foundation

/// The versions of a job line (a manifest line, a queue row, a receipt): what each changed, and
/// how a line of an older one is read by this binary (darktable's `legacy_params` is the model:
/// a job queued by the previous version still runs, migrated, never misread).
///
/// - 1: no `spec` key (every row a binary stored before versions were written); a stack's
///   `options.memoryLimit` in bytes.
/// - 2: `spec` written into every stored line and receipt; a stack's `options.memoryLimit` in MB
///   or as a size (`"512M"`, `"2G"`), the unit of `--memory-limit` and the studio.
public enum JobSpec {
    /// The version this binary writes.
    public static let current = 2

    /// `line` brought to ``current``: unchanged when it is already, else migrated step by step.
    ///
    /// - Parameters:
    ///   - line: A job line (strict JSON already checked).
    ///   - stored: Whether a binary stored it (then no `spec` key means 1; else the current).
    /// - Returns: The line at the current spec.
    /// - Throws: ``ManifestError`` when the line names a spec this binary does not read.
    static func migrated(_ line: String, stored: Bool) throws(ManifestError) -> String {
        // Not an object: the decoder says what is wrong with it.
        guard var object = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] else {
            return line
        }
        let id = (object["id"] as? String).flatMap { BatchJob.isValid(id: $0) ? $0 : nil }
        var version = stored ? 1 : current
        if let v = object["spec"] {
            guard let n = v as? Double, n.rounded() == n, (1...Double(current)).contains(n) else {
                throw ManifestError(
                    message:
                        "spec \(SettingsCoding.quoted("\(v)")) is not a job spec this evanesco reads "
                        + "(1...\(current)): a newer evanesco wrote it; upgrade this one",
                    id: id)
            }
            version = Int(n)
        }
        if version == current { return line }
        if version < 2 {
            // 1 -> 2: the memory limit in bytes becomes a size with its unit.
            if object["kind"] as? String == "stack", var options = object["options"] as? [String: Any],
                let bytes = options["memoryLimit"] as? Double
            {
                let whole = bytes.rounded() == bytes && abs(bytes) < 9e15
                options["memoryLimit"] = whole ? String(format: "%.0fB", bytes) : "\(bytes)B"
                object["options"] = options
            }
        }
        object["spec"] = current
        guard
            let data = try? JSONSerialization.data(
                withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        else { throw ManifestError(message: "could not migrate the job from spec \(version)", id: id) }
        return String(decoding: data, as: UTF8.self)
    }
}
