/// A numeric setting as its option type declares it, once: the name its errors use, its default
/// and the values it allows. The option type's `validate()` checks against it; the command line
/// maps ``name`` to its flag, the studio to its field, and serves the list to its page (defaults
/// and slider ranges included), so no front end keeps its own copy.
public struct NumericSetting: Sendable, Codable, Equatable {
    /// The setting in words, as errors name it: "cutoff offset", "kappa".
    public var name: String
    /// The smallest and largest values allowed; NaN and infinity never are.
    public var minimum: Double
    public var maximum: Double
    /// Whether ``minimum`` (``maximum``) itself is allowed.
    public var minimumIncluded: Bool
    public var maximumIncluded: Bool
    /// The default; nil when the default is computed (a size that scales with the input).
    public var defaultValue: Double?
    /// The unit, for help and labels ("m", "depth pixels"); empty for a plain number.
    public var unit: String
    /// Whether only whole numbers are allowed.
    public var integer: Bool
    /// The range an interactive control (a slider) spans: the useful part of the allowed range.
    public var typicalMinimum: Double
    public var typicalMaximum: Double
    /// What the setting does, in one line, for a flag's help and a field's tooltip (empty when
    /// the front end words it itself).
    public var summary: String

    /// - Parameters:
    ///   - name: The setting in words.
    ///   - range: The values allowed.
    ///   - open: The ends of `range` left out (none by default).
    ///   - defaultValue: The default, or nil when it is computed.
    ///   - unit: The unit, or empty.
    ///   - integer: Whole numbers only.
    ///   - typical: The slider's range (default: the allowed range).
    ///   - summary: What the setting does, in one line.
    public init(
        _ name: String, _ range: ClosedRange<Double>, open: OpenEnds = [], default defaultValue: Double?,
        unit: String = "",
        integer: Bool = false, typical: ClosedRange<Double>? = nil, summary: String = ""
    ) {
        self.name = name
        minimum = range.lowerBound
        maximum = range.upperBound
        minimumIncluded = !open.contains(.minimum)
        maximumIncluded = !open.contains(.maximum)
        self.defaultValue = defaultValue
        self.unit = unit
        self.integer = integer
        typicalMinimum = typical?.lowerBound ?? range.lowerBound
        typicalMaximum = typical?.upperBound ?? range.upperBound
        self.summary = summary
    }

    /// The help line of the setting's flag: the summary, the unit and the allowed range (the
    /// default is shown beside it by the command line).
    public var help: String {
        (summary.isEmpty ? name.prefix(1).uppercased() + name.dropFirst() : summary) + " (" + span
            + (unit.isEmpty ? "" : " \(unit)") + ")."
    }

    /// Which ends of a range are left out.
    public struct OpenEnds: OptionSet, Sendable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }
        public static let minimum = OpenEnds(rawValue: 1)
        public static let maximum = OpenEnds(rawValue: 2)
    }

    /// Whether `value` is allowed (NaN and infinity never are).
    public func allows(_ value: Double) -> Bool {
        guard value.isFinite else { return false }
        if integer && value.rounded() != value { return false }
        let aboveMinimum = minimumIncluded ? value >= minimum : value > minimum
        let belowMaximum = maximumIncluded ? value <= maximum : value < maximum
        return aboveMinimum && belowMaximum
    }

    /// "within (0, 10] m": the allowed range as an error states it.
    public var rangeDescription: String {
        // Bytes read as sizes: 1M...16T, not 1048576...17592186044416 bytes.
        if unit == "bytes" && minimumIncluded && maximumIncluded {
            return "within \(MemorySize.describe(Int(minimum)))...\(MemorySize.describe(Int(maximum)))"
        }
        return "within \(span)" + (unit.isEmpty ? "" : " \(unit)") + (integer ? " (a whole number)" : "")
    }

    /// The allowed range alone: `1...100`, `(0, 100]`.
    public var span: String {
        let number = Self.number
        return minimumIncluded && maximumIncluded
            ? "\(number(minimum))...\(number(maximum))"
            : "\(minimumIncluded ? "[" : "(")\(number(minimum)), \(number(maximum))\(maximumIncluded ? "]" : ")")"
    }

    /// A value as help and errors write it: whole numbers without a decimal point.
    public static func number(_ v: Double) -> String {
        v.rounded() == v && abs(v) < 1e15 ? String(Int(v)) : String(v)
    }

    /// Checks a value.
    ///
    /// - Throws: ``SettingError`` naming this setting and its range.
    public func check(_ value: Double) throws(SettingError) {
        guard allows(value) else { throw SettingError(setting: name, detail: "must be \(rangeDescription)") }
    }

    /// Checks a limit in bytes whose 0 means no limit (the caller has already read 0 as none):
    /// the refusal says that 0 is allowed too.
    public func checkLimit(_ value: Int) throws(SettingError) {
        guard allows(Double(value)) else {
            throw SettingError(setting: name, detail: "must be \(rangeDescription), or 0 for no limit")
        }
    }

    /// Checks a Float value (NaN and infinity included).
    public func check(_ value: Float) throws(SettingError) { try check(Double(value)) }

    /// Checks an Int value.
    public func check(_ value: Int) throws(SettingError) { try check(Double(value)) }
}

/// A setting of an option type that its `validate()` refused. It names the setting in words,
/// not a flag or a form field: each front end maps ``setting`` to its own name for it.
public struct SettingError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The setting in words (``NumericSetting/name``).
    public var setting: String
    /// What is wrong, e.g. "must be within (0, 10]".
    public var detail: String

    /// - Parameters:
    ///   - setting: The setting in words.
    ///   - detail: What is wrong.
    public init(setting: String, detail: String) {
        self.setting = setting
        self.detail = detail
    }

    public var description: String { "\(setting) \(detail)" }

    /// The same error with the setting called `name` (a flag, a form field).
    public func named(_ name: String) -> String { "\(name) \(detail)" }
}

extension SettingError {
    /// Runs a `validate()` and returns its refusal, nil when it passes: a front end then names the
    /// setting its own way (a flag, a form field).
    public static func refusal(_ validate: () throws(SettingError) -> Void) -> SettingError? {
        do throws(SettingError) {
            try validate()
            return nil
        } catch {
            return error
        }
    }
}
