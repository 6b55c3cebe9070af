/// The JSON a manifest line or a queued spec may be, checked before it is decoded: RFC 8259 to the
/// letter (Foundation's decoder accepts trailing commas and keeps the last of two equal keys, so
/// `{"merge": "mean", "merge": "median"}` would run silently as one of them), with bounds on
/// what a hostile line can make the reader do: its length, each string's length, the nesting.
enum StrictJSON {
    /// Bytes a manifest line may hold (a stack of a thousand frames named in full fits).
    static let maximumLineBytes = 1 << 20
    /// Bytes one string (a key, a path, an id) may hold: a path is at most 4096 bytes on Linux.
    static let maximumStringBytes = 4096
    /// Arrays and objects inside one another.
    static let maximumDepth = 16

    /// Checks `text`, returning what is wrong in one line, or nil when it is one strict JSON value.
    static func problem(in text: String) -> String? {
        let bytes = Array(text.utf8)
        if bytes.count > maximumLineBytes {
            return "the line is \(bytes.count) bytes, over the \(maximumLineBytes >> 20) MiB a job may take"
        }
        var scanner = Scanner(bytes: bytes)
        do throws(Scanner.Failure) {
            scanner.skipSpace()
            try scanner.value(depth: 0)
            scanner.skipSpace()
            if scanner.at < bytes.count { throw Scanner.Failure(at: scanner.at, what: "text after the JSON object") }
            return nil
        } catch {
            return "not valid JSON at byte \(error.at + 1): \(error.what)"
        }
    }

    struct Scanner {
        struct Failure: Error {
            var at: Int
            var what: String
        }
        let bytes: [UInt8]
        var at = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        func fail(_ what: String) -> Failure { Failure(at: at, what: what) }

        mutating func skipSpace() {
            while at < bytes.count, [0x20, 0x09, 0x0a, 0x0d].contains(bytes[at]) { at += 1 }
        }

        mutating func expect(_ byte: UInt8, _ what: String) throws(Failure) {
            guard at < bytes.count, bytes[at] == byte else { throw fail("expected \(what)") }
            at += 1
        }

        mutating func value(depth: Int) throws(Failure) {
            guard at < bytes.count else { throw fail("the line ends where a value should be") }
            switch bytes[at] {
            case UInt8(ascii: "{"): try object(depth: depth + 1)
            case UInt8(ascii: "["): try array(depth: depth + 1)
            case UInt8(ascii: "\""): _ = try string()
            case UInt8(ascii: "t"): try literal("true")
            case UInt8(ascii: "f"): try literal("false")
            case UInt8(ascii: "n"): try literal("null")
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try number()
            default: throw fail("unexpected character")
            }
        }

        mutating func literal(_ word: String) throws(Failure) {
            let w = Array(word.utf8)
            guard at + w.count <= bytes.count, Array(bytes[at..<at + w.count]) == w else {
                throw fail("unexpected character")
            }
            at += w.count
        }

        mutating func number() throws(Failure) {
            let start = at
            if bytes[at] == UInt8(ascii: "-") { at += 1 }
            func digits(_ s: inout Scanner) -> Int {
                let from = s.at
                while s.at < s.bytes.count, (48...57).contains(s.bytes[s.at]) { s.at += 1 }
                return s.at - from
            }
            let whole = digits(&self)
            guard whole > 0 else { throw fail("a number needs digits") }
            if whole > 1 && bytes[at - whole] == UInt8(ascii: "0") { throw fail("a number cannot start with 0") }
            if at < bytes.count, bytes[at] == UInt8(ascii: ".") {
                at += 1
                guard digits(&self) > 0 else { throw fail("a number needs digits after its point") }
            }
            if at < bytes.count, bytes[at] | 0x20 == UInt8(ascii: "e") {
                at += 1
                if at < bytes.count, bytes[at] == UInt8(ascii: "+") || bytes[at] == UInt8(ascii: "-") { at += 1 }
                guard digits(&self) > 0 else { throw fail("a number needs digits in its exponent") }
            }
            if at - start > 64 { throw Failure(at: start, what: "a number of \(at - start) characters") }
        }

        /// A string, returned raw (escapes left as they are: keys are compared as written, and
        /// two spellings of one key are caught by the decoder's own unknown-key check).
        mutating func string() throws(Failure) -> ArraySlice<UInt8> {
            let start = at
            at += 1
            while at < bytes.count {
                let b = bytes[at]
                if b == UInt8(ascii: "\"") {
                    at += 1
                    if at - start - 2 > maximumStringBytes {
                        throw Failure(
                            at: start,
                            what: "a string of \(at - start - 2) bytes, over the \(maximumStringBytes) allowed")
                    }
                    return bytes[(start + 1)..<(at - 1)]
                }
                if b < 0x20 { throw fail("a control character inside a string (escape it)") }
                if b == UInt8(ascii: "\\") {
                    at += 1
                    guard at < bytes.count else { break }
                    switch bytes[at] {
                    case UInt8(ascii: "u"):
                        guard at + 4 < bytes.count,
                            bytes[(at + 1)...(at + 4)].allSatisfy({
                                ($0 >= 48 && $0 <= 57) || ($0 | 0x20 >= 97 && $0 | 0x20 <= 102)
                            })
                        else { throw fail("\\u needs four hexadecimal digits") }
                        at += 4
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                        UInt8(ascii: "f"),
                        UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                        break
                    default: throw fail("an unknown escape")
                    }
                }
                at += 1
            }
            throw Failure(at: start, what: "a string that never ends")
        }

        mutating func object(depth: Int) throws(Failure) {
            guard depth <= maximumDepth else { throw fail("nested deeper than \(maximumDepth)") }
            at += 1
            skipSpace()
            if at < bytes.count, bytes[at] == UInt8(ascii: "}") {
                at += 1
                return
            }
            var keys = Set<ArraySlice<UInt8>>()
            while true {
                skipSpace()
                guard at < bytes.count, bytes[at] == UInt8(ascii: "\"") else {
                    throw fail(keys.isEmpty ? "expected a key" : "a comma before } (trailing commas are not JSON)")
                }
                let keyAt = at
                let key = try string()
                guard keys.insert(key).inserted else {
                    throw Failure(
                        at: keyAt,
                        what:
                            "the key \(ManifestError.quoted(String(decoding: key, as: UTF8.self))) appears twice in "
                            + "one object"
                    )
                }
                skipSpace()
                try expect(UInt8(ascii: ":"), "a colon after the key")
                skipSpace()
                try value(depth: depth)
                skipSpace()
                guard at < bytes.count else { throw fail("the line ends inside an object") }
                if bytes[at] == UInt8(ascii: ",") {
                    at += 1
                    continue
                }
                try expect(UInt8(ascii: "}"), "a comma or }")
                return
            }
        }

        mutating func array(depth: Int) throws(Failure) {
            guard depth <= maximumDepth else { throw fail("nested deeper than \(maximumDepth)") }
            at += 1
            skipSpace()
            if at < bytes.count, bytes[at] == UInt8(ascii: "]") {
                at += 1
                return
            }
            while true {
                skipSpace()
                if at < bytes.count, bytes[at] == UInt8(ascii: "]") {
                    throw fail("a comma before ] (trailing commas are not JSON)")
                }
                try value(depth: depth)
                skipSpace()
                guard at < bytes.count else { throw fail("the line ends inside an array") }
                if bytes[at] == UInt8(ascii: ",") {
                    at += 1
                    continue
                }
                try expect(UInt8(ascii: "]"), "a comma or ]")
                return
            }
        }
    }
}
