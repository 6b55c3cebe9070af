import ArgumentParser
import EvanescoBatch
import EvanescoCore
import EvanescoDepth
import EvanescoStack
import EvanescoStudio

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

extension ArgumentHelp {
    /// The help of a flag from its declaration: the setting's summary and, for a number, its
    /// range and unit (ArgumentParser adds the default and a choice's values).
    static func setting<T: DeclaresSettings>(_ type: T.Type, _ key: String) -> ArgumentHelp {
        let s = T.setting(key)
        if case .size = s.kind { return ArgumentHelp(s.help, valueName: "size") }
        return ArgumentHelp(s.help)
    }
    /// A stack setting's help (``StackOptions/settings``).
    static func stack(_ key: String) -> ArgumentHelp { setting(StackOptions.self, key) }
}

extension ArgumentHelp {
    /// A portrait setting's help (``PortraitSettings/settings``).
    /// `showingDefault` adds the declared default to the help, for a flag whose property is
    /// optional (so that ArgumentParser shows none) although the setting has one.
    static func portrait(_ key: String, showingDefault: Bool = false) -> ArgumentHelp {
        let s = PortraitSettings.setting(key)
        guard showingDefault, let d = s.defaultDescription else { return setting(PortraitSettings.self, key) }
        return ArgumentHelp(s.help + " (default: \(d))")
    }
    /// A worker setting's help (``QueueWorker/Settings/settings``).
    static func worker(_ key: String, valueName: String? = nil, more: String = "") -> ArgumentHelp {
        ArgumentHelp(QueueWorker.Settings.setting(key).help + more, valueName: valueName)
    }
    /// A studio setting's help (``StudioConfiguration/settings``).
    static func studio(_ key: String) -> ArgumentHelp { setting(StudioConfiguration.self, key) }
    /// A backdrop setting's help (``BackdropSessionOptions/settings``).
    static func backdrop(_ key: String) -> ArgumentHelp { setting(BackdropSessionOptions.self, key) }
}

/// The spellings of earlier versions that the command line still reads, each rewritten to today's
/// with a note on stderr: `--cat-eye` without a number (today a strength, 0...1) meant 0.6, and
/// `--plain-blur` is `--no-protect-subject`.
enum LegacyArguments {
    /// The arguments with the old spellings rewritten, and the notes to print.
    static func rewrite(_ arguments: [String]) -> (arguments: [String], notes: [String]) {
        var out: [String] = [], notes: [String] = []
        for (i, a) in arguments.enumerated() {
            out.append(a)
            if a == "--cat-eye", i + 1 == arguments.count || Float(arguments[i + 1]) == nil {
                out.append("0.6")
                notes.append("--cat-eye without a number is deprecated: it is read as --cat-eye 0.6 (0...1)")
            }
            if a == "--plain-blur" {
                out[out.count - 1] = "--no-protect-subject"
                notes.append("--plain-blur is deprecated: it is read as --no-protect-subject")
            }
        }
        return (out, notes)
    }
}
