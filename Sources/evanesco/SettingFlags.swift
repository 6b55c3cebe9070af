import ArgumentParser
import EvanescoCore

extension SettingError {
    /// The library's refusal as a usage error (status 64) naming this command's flag for the
    /// setting: `flags` maps a setting's name to its flag; a name not in it is taken as the flag
    /// with its spaces as dashes.
    func usage(_ flags: [String: String]) -> ValidationError {
        ValidationError(named(flags[setting] ?? "--" + setting.replacingOccurrences(of: " ", with: "-")))
    }
}

/// Runs an option type's `validate()`, its refusal turned into a usage error naming this
/// command's flag (see ``SettingError/usage(_:)``).
func validateSettings(_ flags: [String: String], _ validate: () throws(SettingError) -> Void) throws {
    if let refusal = SettingError.refusal(validate) { throw refusal.usage(flags) }
}
