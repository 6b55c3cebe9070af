/// Numbers read from files, validated once where they are read: a number that is not finite, not
/// in its range or whose sum overflows is treated as absent or refused, never passed on. NaN and
/// infinity pass `<` and `>` range checks, `Int(Double)` traps on them, and sums of lengths read
/// from a file can overflow: every numeric field a parser reads goes through here.
package enum FileNumber {
    /// A finite decimal number, or nil.
    ///
    /// - Parameter text: The field's text (white space around it is ignored).
    /// - Returns: The value when it parses and is finite.
    package static func double<S: StringProtocol>(_ text: S?) -> Double? {
        guard let text, let v = Double(text.trimmingWhitespace), v.isFinite else { return nil }
        return v
    }

    /// A finite number inside `range`, or nil.
    package static func double<S: StringProtocol>(_ text: S?, in range: ClosedRange<Double>) -> Double? {
        guard let v = double(text), range.contains(v) else { return nil }
        return v
    }

    /// An integer inside `range` (written as an integer, or as a float with no fraction), or nil.
    package static func int<S: StringProtocol>(_ text: S?, in range: ClosedRange<Int>) -> Int? {
        guard let text else { return nil }
        let t = text.trimmingWhitespace
        if let i = Int(t) { return range.contains(i) ? i : nil }
        return int(exactly: double(t), in: range)
    }

    /// A finite whole number inside `range` as an `Int`, or nil (never traps).
    package static func int(exactly value: Double?, in range: ClosedRange<Int>) -> Int? {
        guard let value, value.isFinite, value == value.rounded(),
            value >= Double(range.lowerBound), value <= Double(range.upperBound)
        else { return nil }
        return Int(value)
    }

    /// The sum of non-negative lengths, or nil when it overflows.
    package static func sum(_ lengths: [Int]) -> Int? {
        var total = 0
        for n in lengths {
            guard n >= 0 else { return nil }
            let (s, overflow) = total.addingReportingOverflow(n)
            if overflow { return nil }
            total = s
        }
        return total
    }
}
