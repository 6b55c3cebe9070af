/// The text in a fixed-size C `char[N]` buffer (imported by Swift as a tuple), up to its NUL.
func stringFromCBuffer<T>(_ buffer: T) -> String {
    withUnsafeBytes(of: buffer) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
}
