/// Float-to-integer conversions that cannot trap. `Int(x)` traps (SIGILL, no message) when `x`
/// is NaN, infinite or outside Int's range, so any number a user can choose (a flag, a request
/// field, a number read from a file) is converted through one of these instead.
extension Int {
    /// `value` rounded toward zero, or nil when it is NaN, infinite or outside Int's range.
    ///
    /// - Parameter value: Any floating-point value.
    @inlinable
    public init?<F: BinaryFloatingPoint>(checking value: F) {
        guard value.isFinite else { return nil }
        self.init(exactly: value.rounded(.towardZero))
    }

    /// `value` rounded toward zero and clamped to Int's range (NaN gives 0): for messages and
    /// limits, where the nearest representable value is the right answer.
    ///
    /// - Parameter value: Any floating-point value.
    @inlinable
    public init<F: BinaryFloatingPoint>(saturating value: F) {
        if value.isNaN {
            self = 0
            return
        }
        if let v = Int(checking: value) {
            self = v
            return
        }
        self = value < 0 ? .min : .max
    }
}
