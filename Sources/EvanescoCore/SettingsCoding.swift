import Foundation

/// Any key of a JSON object, for reading objects whose keys are checked by hand.
public struct AnyCodingKey: CodingKey, Hashable, Sendable {
    public var stringValue: String
    public var intValue: Int?
    public init(_ string: String) { stringValue = string }
    public init?(stringValue: String) { self.stringValue = stringValue }
    public init?(intValue: Int) {
        stringValue = String(intValue)
        self.intValue = intValue
    }
}

/// Reading option types from JSON (a batch manifest, a saved preset) the way a careful user
/// expects: a missing key keeps the default, an unknown key is refused by name (a typo such as
/// `kapa` must not silently leave kappa at its default), and the values are then checked by the
/// type's own `validate()`.
public enum SettingsCoding {
    /// Refuses any key of the object being decoded that is not in `known`.
    ///
    /// - Parameters:
    ///   - decoder: The decoder positioned on the object.
    ///   - known: The keys the type reads.
    /// - Throws: `DecodingError.dataCorrupted` naming the unknown key and the known ones.
    public static func rejectUnknownKeys(_ decoder: any Decoder, known: [String]) throws {
        let container = try decoder.container(keyedBy: AnyCodingKey.self)
        let allowed = Set(known)
        for key in container.allKeys where !allowed.contains(key.stringValue) {
            // A near name is looked for only among names of a plausible length (the distance of
            // a long key to every known one would take minutes).
            let near =
                key.stringValue.count > 64
                ? nil : known.min { distance($0, key.stringValue) < distance($1, key.stringValue) }
            let hint = near.map { distance($0, key.stringValue) <= 2 ? " (did you mean \"\($0)\"?)" : "" } ?? ""
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: container.codingPath,
                    debugDescription:
                        "unknown setting \(quoted(key.stringValue))\(hint); known: "
                        + "\(known.sorted().joined(separator: ", "))"
                ))
        }
    }

    /// The error a `validate()` refusal becomes while decoding: it names the JSON key.
    ///
    /// - Parameters:
    ///   - error: The refusal.
    ///   - decoder: The decoder positioned on the object.
    /// - Returns: A `DecodingError.dataCorrupted` at the object's path.
    public static func invalid(_ error: SettingError, in decoder: any Decoder) -> DecodingError {
        .dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.description))
    }

    /// A `DecodingError` in one line: where (`options.kappa`) and what.
    ///
    /// - Parameter error: Any error from a decoder.
    /// - Returns: The line a user reads.
    public static func message(_ error: any Error) -> String {
        func path(_ p: [any CodingKey]) -> String {
            p.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".").replacingOccurrences(
                of: ".[", with: "[")
        }
        func at(_ p: [any CodingKey]) -> String { p.isEmpty ? "" : "\(path(p)): " }
        switch error {
        case DecodingError.dataCorrupted(let c):
            if let u = c.underlyingError as NSError?, c.codingPath.isEmpty {
                return "not valid JSON (\(u.userInfo[NSDebugDescriptionErrorKey] ?? u.localizedDescription))"
            }
            return at(c.codingPath) + c.debugDescription
        case DecodingError.keyNotFound(let key, let c): return "\(at(c.codingPath))\"\(key.stringValue)\" is missing"
        case DecodingError.typeMismatch(let type, let c): return "\(at(c.codingPath))expected \(describe(type))"
        case DecodingError.valueNotFound(let type, let c):
            return "\(at(c.codingPath))expected \(describe(type)), found null"
        default: return "\(error)"
        }
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Bool.Type: "true or false"
        case is Int.Type, is Int64.Type: "a whole number"
        case is Float.Type, is Double.Type: "a number"
        case is [Any].Type: "an array"
        default: "\(type)"
        }
    }

    /// Text from a manifest, the environment, a request or a queue as a message may show it: control
    /// characters (a newline, a NUL) escaped, and cut to `limit` characters with the length said,
    /// so a 50 MB id or a line feed in a key cannot flood or forge the error output.
    ///
    /// - Parameters:
    ///   - text: The text.
    ///   - limit: Characters shown at most.
    ///   - bare: Leave out the quotes when nothing needed escaping.
    /// - Returns: The text, quoted.
    public static func quoted(_ text: String, limit: Int = 80, bare: Bool = false) -> String {
        var out = "", escaped = false, shown = 0
        for scalar in text.unicodeScalars {
            if shown == limit {
                return "\"" + out + "\"... (\(text.utf8.count) bytes)"
            }
            shown += 1
            switch scalar {
            case "\"", "\\":
                out += "\\" + String(scalar)
                escaped = true
            case _ where scalar.value < 0x20 || scalar.value == 0x7f || (0x80..<0xa0).contains(scalar.value):
                out +=
                    scalar.value == 10
                    ? "\\n"
                    : scalar.value == 13
                        ? "\\r"
                        : scalar.value == 9
                            ? "\\t"
                            : String(format: "\\u%04x", scalar.value)
                escaped = true
            default: out.unicodeScalars.append(scalar)
            }
        }
        return bare && !escaped && !out.isEmpty ? out : "\"" + out + "\""
    }

    /// Edit distance, for "did you mean".
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a.lowercased()), b = Array(b.lowercased())
        var row = Array(0...b.count)
        for i in 1...max(1, a.count) where !a.isEmpty {
            var previous = row[0]
            row[0] = i
            for j in 1...max(1, b.count) where !b.isEmpty {
                let current = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] == b[j - 1] ? 0 : 1))
                previous = current
            }
        }
        return a.isEmpty ? b.count : row[b.count]
    }
}

extension KeyedDecodingContainer {
    /// One of an enumeration's values, by its raw value: a value that is none of them gets a
    /// message naming the key and the values allowed (Foundation's says "Cannot initialize T from
    /// invalid String value").
    ///
    /// - Parameters:
    ///   - type: The enumeration.
    ///   - key: The key.
    /// - Returns: The value, or nil when the key is absent or null.
    /// - Throws: `DecodingError.dataCorrupted` naming the key and the values.
    public func decodeChoiceIfPresent<T: CaseIterable & RawRepresentable>(_ type: T.Type, forKey key: Key) throws -> T?
    where T.RawValue == String {
        guard let text = try decodeIfPresent(String.self, forKey: key) else { return nil }
        guard let value = T(rawValue: text) else {
            let values = T.allCases.map(\.rawValue).joined(separator: ", ")
            throw DecodingError.dataCorruptedError(
                forKey: key, in: self, debugDescription: "must be one of \(values), not \(SettingsCoding.quoted(text))")
        }
        return value
    }

    /// A whole number, read as a number first so that `1.5` or `1e30` gets a message naming the
    /// key (Foundation's decoder says only that the data is not valid JSON).
    ///
    /// - Parameter key: The key.
    /// - Returns: The value, or nil when the key is absent or null.
    /// - Throws: `DecodingError.dataCorrupted` naming the key when the number is not whole or too large.
    public func decodeWholeNumberIfPresent(forKey key: Key) throws -> Int? {
        guard let d = try decodeIfPresent(Double.self, forKey: key) else { return nil }
        guard d.rounded() == d, abs(d) < 9e15 else {
            throw DecodingError.dataCorruptedError(
                forKey: key, in: self, debugDescription: "must be a whole number, not \(d)")
        }
        return Int(d)
    }

    /// A memory size (``MemorySize``): a number of MB, or a string such as `"512M"` or `"2G"`;
    /// 0 or null for no limit.
    ///
    /// - Parameters:
    ///   - key: The key.
    ///   - largest: The largest size allowed, in bytes (a number past it gets a message that says
    ///     the unit, for a byte count from a manifest older than job spec 2).
    /// - Returns: nil when the key is absent; `.some(nil)` for no limit; else the bytes.
    /// - Throws: `DecodingError.dataCorrupted` naming the key.
    public func decodeMemorySizeIfPresent(forKey key: Key, largest: Int) throws -> Int?? {
        guard contains(key) else { return nil }
        if try decodeNil(forKey: key) { return .some(nil) }
        let bytes: Int
        if let text = try? decode(String.self, forKey: key) {
            guard let b = MemorySize.bytes(text) else {
                throw DecodingError.dataCorruptedError(
                    forKey: key, in: self,
                    debugDescription: "must be \(MemorySize.spellings), not \(SettingsCoding.quoted(text))")
            }
            bytes = b
        } else {
            let mb = try decode(Double.self, forKey: key)
            guard mb.isFinite, mb >= 0, mb * 1_048_576 <= Double(largest) else {
                throw DecodingError.dataCorruptedError(
                    forKey: key, in: self,
                    debugDescription:
                        "is in MB (or a size such as \"512M\" or \"2G\"): \(String(format: "%.0f", mb)) MB is not "
                        + "within 0...\(largest >> 20); a byte count is written with B, as "
                        + "\"\(String(format: "%.0f", mb))B\""
                )
            }
            bytes = Int((mb * 1_048_576).rounded())
        }
        return .some(bytes == 0 ? nil : bytes)
    }
}
