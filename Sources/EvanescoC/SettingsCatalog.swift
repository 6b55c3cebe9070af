import EvanescoCore
import EvanescoDepth
import EvanescoIO
import EvanescoStack
import Foundation

/// The settings each kind of call takes, from the option types' own declarations, as
/// `evn_settings` lists them.
enum SettingsCatalog {
    static let kinds: [String: [Setting]] = [
        "stack": StackOptions.settings, "portrait": PortraitSettings.settings,
        "backdrop": BackdropSessionOptions.settings, "write": WriteOptions.settings
    ]

    /// The declarations as a JSON array of flat objects (key, kind, default, range, choices, ...).
    static func json(_ settings: [Setting]) throws -> String {
        try CJSON.text(settings.map(describe))
    }

    static func describe(_ s: Setting) -> [String: Any] {
        var d: [String: Any] = [
            "key": s.key, "summary": s.summary, "help": s.help, "defaultText": s.defaultDescription ?? NSNull()
        ]
        func number(_ n: NumericSetting, _ kind: String) {
            d["kind"] = kind
            d["default"] = n.defaultValue.map { n.integer ? Int($0) as Any : $0 as Any } ?? NSNull()
            d["minimum"] = n.minimum
            d["maximum"] = n.maximum
            d["minimumIncluded"] = n.minimumIncluded
            d["maximumIncluded"] = n.maximumIncluded
            d["typicalMinimum"] = n.typicalMinimum
            d["typicalMaximum"] = n.typicalMaximum
            d["unit"] = n.unit
            d["integer"] = n.integer
            d["name"] = n.name
        }
        switch s.kind {
        case .number(let n): number(n, "number")
        case .size(let n):
            number(n, "size")
            d["zeroIsNone"] = s.zeroIsNone
        case .choice(let values, let value):
            d["kind"] = "choice"
            d["choices"] = values
            d["default"] = value
        case .toggle(let value):
            d["kind"] = "toggle"
            d["default"] = value
        case .text(let value):
            d["kind"] = "text"
            d["default"] = value
        }
        return d
    }
}
