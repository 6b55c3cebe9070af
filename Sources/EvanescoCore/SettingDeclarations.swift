/// One setting of an option type, declared once: the key every front end names it by, its kind
/// (a number with its unit, default and ranges; a choice with its values; an on/off switch; a
/// text), and one line of help. The command line's flag is the key in kebab-case (`videoFrames`,
/// `--video-frames`); a manifest's `options` and the studio's fields use the key itself. Option
/// types list theirs in ``DeclaresSettings/settings``, and a test walks every front end against
/// them, so that a setting cannot be half-wired.
public struct Setting: Sendable, Equatable, Codable {
    /// What kind of value the setting takes.
    public enum Kind: Sendable, Equatable, Codable {
        /// A number: its unit, default and ranges.
        case number(NumericSetting)
        /// One of a list of values (an enumeration's cases, as spelled on the command line).
        case choice(values: [String], default: String)
        /// A number of bytes, written as a size: a bare number is MB, `512M`, `2G` (``MemorySize``).
        case size(NumericSetting)
        /// On or off.
        case toggle(default: Bool)
        /// A text parsed by the option type (a point, a folder, a format); its default in words.
        case text(default: String)
    }

    /// The key: a manifest's and a preset's key, the studio's field, the flag in kebab-case.
    public var key: String
    /// The kind, with its default and allowed values.
    public var kind: Kind
    /// What the setting does, in one line.
    public var summary: String
    /// For a size: whether 0 means no limit (a memory limit) rather than being refused (an upload
    /// limit).
    public var zeroIsNone = true

    /// - Parameters:
    ///   - key: The key, in camelCase.
    ///   - kind: The kind, default and allowed values.
    ///   - summary: What the setting does, in one line.
    public init(_ key: String, _ kind: Kind, summary: String) {
        self.key = key
        self.kind = kind
        self.summary = summary
    }

    /// A numeric setting; its summary is the number's.
    public static func number(_ key: String, _ setting: NumericSetting) -> Setting {
        Setting(key, .number(setting), summary: setting.summary)
    }

    /// A choice among an enumeration's cases, spelled by `spelling` (the raw value by default).
    public static func choice<T: CaseIterable & Equatable>(
        _ key: String, _ type: T.Type, default value: T, spelling: (T) -> String, summary: String
    ) -> Setting {
        Setting(key, .choice(values: type.allCases.map(spelling), default: spelling(value)), summary: summary)
    }

    /// A choice among a string enumeration's raw values.
    public static func choice<T: CaseIterable & Equatable & RawRepresentable>(
        _ key: String, _ type: T.Type, default value: T, summary: String
    ) -> Setting where T.RawValue == String {
        choice(key, type, default: value, spelling: \.rawValue, summary: summary)
    }

    /// A choice's values; empty for any other kind.
    public var choices: [String] {
        if case .choice(let values, _) = kind { values } else { [] }
    }

    /// The command line's flag: `--` and the key in kebab-case.
    public var flag: String { "--" + Setting.kebab(key) }

    /// `videoFrames` as `video-frames`.
    public static func kebab(_ key: String) -> String {
        key.reduce(into: "") { s, c in s += c.isUppercase ? "-" + c.lowercased() : String(c) }
    }

    /// The help line of the setting's flag: the summary, then the allowed range and unit of a
    /// number (the command line shows the default and a choice's values beside it).
    public var help: String {
        switch kind {
        case .number(let n): return n.help
        case .size: return MemorySize.help(summary, zeroIsNone: zeroIsNone)
        default: break
        }
        return summary.hasSuffix(".") ? summary : summary + "."
    }

    /// The default in words, as help and the documentation show it; nil when it is computed.
    public var defaultDescription: String? {
        switch kind {
        case .number(let n): n.defaultValue.map(NumericSetting.number)
        case .size(let n): n.defaultValue.map { MemorySize.describe(Int($0)) }
        case .choice(_, let d): d
        case .toggle(let d): d ? "on" : "off"
        case .text(let d): d
        }
    }
}

/// An option type whose settings are declared as ``Setting`` values: the one source that the
/// command line, manifests, the studio, reports and the documentation are checked against.
public protocol DeclaresSettings {
    /// Every setting a user can choose, in the order help lists them.
    static var settings: [Setting] { get }
}

extension DeclaresSettings {
    /// The setting with this key; a programming error when there is none.
    public static func setting(_ key: String) -> Setting {
        guard let s = settings.first(where: { $0.key == key }) else {
            preconditionFailure("\(Self.self) declares no setting \(key)")
        }
        return s
    }

    /// Each numeric setting's name in words (as ``SettingError`` names it) and its key, for a
    /// front end that names the setting by its key (a manifest, the studio).
    public static var keysByName: [String: String] {
        var keys: [String: String] = [:]
        for s in settings {
            switch s.kind {
            case .number(let n), .size(let n): keys[n.name] = s.key
            default: keys[s.key] = s.key
            }
        }
        return keys
    }

    /// Each setting's name in words and its command-line flag.
    public static var flagsByName: [String: String] { keysByName.mapValues { "--" + Setting.kebab($0) } }

    /// The settings as a Markdown table (key, flag, kind and range, default, summary), as the
    /// documentation shows them.
    public static func markdownTable() -> String {
        var lines = ["| Key | Flag | Values | Default | What it does |", "|---|---|---|---|---|"]
        for s in settings {
            let values: String
            switch s.kind {
            case .number(let n): values = n.span + (n.unit.isEmpty ? "" : " \(n.unit)") + (n.integer ? ", whole" : "")
            case .size(let n):
                values =
                    (s.zeroIsNone ? "0 (none) or " : "") + MemorySize.describe(Int(n.minimum)) + "..."
                    + MemorySize.describe(Int(n.maximum))
            case .choice(let v, _): values = v.joined(separator: ", ")
            case .toggle: values = "on, off"
            case .text: values = "text"
            }
            let cells = ["`\(s.key)`", "`\(s.flag)`", values, s.defaultDescription ?? "unset or computed", s.summary]
            lines.append(
                "| " + cells.map { $0.replacingOccurrences(of: "|", with: "\\|") }.joined(separator: " | ") + " |")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
