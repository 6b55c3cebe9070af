/// Why an XMP packet was refused.
public enum XMPError: Error, Equatable, CustomStringConvertible {
    case tooLarge(bytes: Int, limit: Int)
    case tooDeep(limit: Int)
    case tooManyElements(limit: Int)
    /// DOCTYPE or ENTITY declarations: refused outright, so entity expansion ("billion laughs")
    /// and external entities cannot happen.
    case declarationRefused
    case undefinedEntity(String)
    case malformed(offset: Int, reason: String)

    public var description: String {
        switch self {
        case .tooLarge(let b, let l): "the XML packet is \(b) bytes, over the limit of \(l)"
        case .tooDeep(let l): "the XML nests elements deeper than \(l) levels"
        case .tooManyElements(let l): "the XML has more than \(l) elements"
        case .declarationRefused: "the XML contains a DOCTYPE/ENTITY declaration, which is refused (entity expansion)"
        case .undefinedEntity(let e): "the XML uses the undefined entity &\(e);"
        case .malformed(let o, let r): "the XML is not well-formed XML at byte \(o): \(r)"
        }
    }
}

/// One XML element of an XMP packet, with names resolved to namespace URIs.
public struct XMLElement: Sendable {
    /// The element's namespace URI.
    public var namespace: String
    /// Its local name.
    public var name: String
    /// Attributes as (namespace URI, local name, value); unprefixed attributes have namespace "".
    public var attributes: [(namespace: String, name: String, value: String)]
    /// Child elements, in order.
    public var children: [XMLElement]
    /// Character data directly inside the element, entities decoded.
    public var text: String

    /// The value of attribute `name` in namespace `ns`.
    ///
    /// - Parameters:
    ///   - ns: Namespace URI ("" for unprefixed attributes).
    ///   - name: Local name.
    /// - Returns: The value, or nil.
    public func attribute(_ ns: String, _ name: String) -> String? {
        attributes.first { $0.namespace == ns && $0.name == name }?.value
    }

    /// Depth-first walk over this element and its descendants.
    public func walk(_ visit: (XMLElement) -> Void) {
        var stack = [self]
        while let e = stack.popLast() {
            visit(e)
            stack.append(contentsOf: e.children.reversed())
        }
    }

    /// Descendants (and self) with this name, in document order.
    public func elements(_ ns: String, _ name: String) -> [XMLElement] {
        var out: [XMLElement] = []
        walk { if $0.namespace == ns && $0.name == name { out.append($0) } }
        return out
    }

    /// `property` on this element or, failing that, on any descendant (properties are often on a
    /// nested rdf:Description).
    public func deepProperty(_ ns: String, _ name: String) -> String? {
        if let v = property(ns, name) { return v }
        var found: String?
        walk { e in if found == nil, let v = e.property(ns, name) { found = v } }
        return found
    }

    /// A simple property written either as an attribute of this element or as a child element
    /// holding text.
    public func property(_ ns: String, _ name: String) -> String? {
        if let a = attribute(ns, name) { return a }
        if let c = children.first(where: { $0.namespace == ns && $0.name == name && $0.children.isEmpty }) {
            return c.text.trimmingWhitespace
        }
        return nil
    }
}

/// A parsed XMP packet: a small, strict, non-validating XML reader with hard limits. It refuses
/// DOCTYPE and ENTITY declarations and undefined entities, bounds size, depth and element
/// count, and never recurses, so a hostile packet costs linear time and bounded memory.
public struct XMPDocument: Sendable {
    /// The document's root element.
    public var root: XMLElement

    /// Bounds on hostile input.
    public struct Limits: Sendable {
        /// Largest packet accepted.
        public var maxBytes = 64 << 20
        /// Deepest element nesting accepted.
        public var maxDepth = 64
        /// Most elements accepted.
        public var maxElements = 200_000
        /// 64 MB, depth 64, 200,000 elements.
        public init() {}
    }

    /// Parses a packet.
    ///
    /// - Parameters:
    ///   - bytes: UTF-8 XML.
    ///   - limits: Bounds.
    /// - Throws: ``XMPError`` for malformed, forbidden or oversized input.
    public init(_ bytes: [UInt8], limits: Limits = Limits()) throws(XMPError) {
        guard bytes.count <= limits.maxBytes else { throw .tooLarge(bytes: bytes.count, limit: limits.maxBytes) }
        var p = XMLParser(bytes: bytes, limits: limits)
        root = try p.parse()
    }

    /// Parses a packet given as a string.
    ///
    /// - Parameters:
    ///   - text: XML.
    ///   - limits: Bounds.
    /// - Throws: ``XMPError``.
    public init(_ text: String, limits: Limits = Limits()) throws(XMPError) {
        try self.init(Array(text.utf8), limits: limits)
    }

    /// The first simple property `name` in namespace `ns` anywhere in the packet.
    public func value(_ ns: String, _ name: String) -> String? {
        var found: String?
        root.walk { e in
            if found == nil, let v = e.property(ns, name) { found = v }
        }
        return found
    }

    /// A property read as a number.
    ///
    /// - Parameters:
    ///   - ns: Namespace URI.
    ///   - name: Local name.
    /// - Returns: The value, or nil when absent or not a finite number.
    public func double(_ ns: String, _ name: String) -> Double? {
        FileNumber.double(value(ns, name))
    }

    /// A numeric list property ("1, 2, 3" or space separated), as Apple writes matrices.
    ///
    /// - Parameters:
    ///   - ns: Namespace URI.
    ///   - name: Local name.
    /// - Returns: The numbers, or nil when absent or when any item is not a finite number (a
    ///   list with a hole in it would shift every later entry).
    public func doubles(_ ns: String, _ name: String) -> [Double]? {
        // An rdf:Seq/Bag/Alt of rdf:li items, or one string of numbers.
        let texts: [String]
        if let e = elements(ns, name).first, !e.children.isEmpty {
            texts = e.elements(XMPNamespace.rdf, "li").map(\.text)
        } else if let v = value(ns, name) {
            texts = v.split { $0 == "," || $0.isWhitespace }.map(String.init)
        } else {
            return nil
        }
        let items = texts.map { FileNumber.double($0) }
        guard !items.isEmpty, items.allSatisfy({ $0 != nil }) else { return nil }
        return items.map { $0! }
    }

    /// Every element `name` in namespace `ns`, in document order.
    ///
    /// - Parameters:
    ///   - ns: Namespace URI.
    ///   - name: Local name.
    /// - Returns: The elements.
    public func elements(_ ns: String, _ name: String) -> [XMLElement] { root.elements(ns, name) }
}

/// Namespace URIs used by depth photos.
package enum XMPNamespace {
    package static let apdi = "http://ns.apple.com/pixeldatainfo/1.0/"
    package static let depthData = "http://ns.apple.com/depthData/1.0/"
    package static let gDepth = "http://ns.google.com/photos/1.0/depthmap/"
    package static let gImage = "http://ns.google.com/photos/1.0/image/"
    package static let gFocus = "http://ns.google.com/photos/1.0/focus/"
    package static let xmpNote = "http://ns.adobe.com/xmp/note/"
    package static let rdf = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
    package static let ddDevice = "http://ns.google.com/photos/dd/1.0/device/"
    package static let ddContainer = "http://ns.google.com/photos/dd/1.0/container/"
    package static let ddItem = "http://ns.google.com/photos/dd/1.0/item/"
    package static let ddCamera = "http://ns.google.com/photos/dd/1.0/camera/"
    package static let ddDepthMap = "http://ns.google.com/photos/dd/1.0/depthmap/"
    package static let gContainer = "http://ns.google.com/photos/1.0/container/"
    package static let gContainerItem = "http://ns.google.com/photos/1.0/container/item/"
}

extension StringProtocol {
    /// The string without leading and trailing white space.
    public var trimmingWhitespace: String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s = s.dropFirst() }
        while let l = s.last, l.isWhitespace { s = s.dropLast() }
        return String(s)
    }
}

private struct XMLParser {
    let b: [UInt8]
    let limits: XMPDocument.Limits
    var i = 0
    var elementCount = 0

    init(bytes: [UInt8], limits: XMPDocument.Limits) {
        b = bytes
        self.limits = limits
    }

    struct Open {
        var prefix: String, name: String
        var rawAttributes: [(prefix: String, name: String, value: String)]
        var namespaces: [String: String]
        var children: [XMLElement] = []
        var text: [UInt8] = []
    }

    mutating func parse() throws(XMPError) -> XMLElement {
        // Synthetic document root so that any number of top-level elements is accepted.
        var stack: [Open] = [
            Open(
                prefix: "", name: "#document", rawAttributes: [],
                namespaces: ["xml": "http://www.w3.org/XML/1998/namespace"])
        ]
        while i < b.count {
            if b[i] != UInt8(ascii: "<") {
                let start = i
                while i < b.count && b[i] != UInt8(ascii: "<") { i += 1 }
                if stack.count > 1 { stack[stack.count - 1].text += try decodeText(b[start..<i], at: start) }
                continue
            }
            if starts("<?") {
                try skip(past: "?>")
                continue
            }
            if starts("<!--") {
                try skip(past: "-->")
                continue
            }
            if starts("<![CDATA[") {
                i += 9
                let start = i
                try skip(past: "]]>")
                if stack.count > 1 { stack[stack.count - 1].text += b[start..<(i - 3)] }
                continue
            }
            if starts("<!") { throw .declarationRefused }
            if starts("</") {
                try endTag(&stack)
                continue
            }
            // Start tag.
            i += 1
            elementCount += 1
            if elementCount > limits.maxElements { throw .tooManyElements(limit: limits.maxElements) }
            let (open, selfClosing) = try startTag()
            if selfClosing {
                stack.append(open)
                let o = stack.removeLast()
                let element = try close(o, inScope: stack + [o])
                stack[stack.count - 1].children.append(element)
            } else {
                stack.append(open)
                if stack.count - 1 > limits.maxDepth { throw .tooDeep(limit: limits.maxDepth) }
            }
        }
        guard stack.count == 1 else {
            throw .malformed(offset: i, reason: "the packet ends with <\(stack.last!.name)> still open")
        }
        let doc = stack[0]
        return XMLElement(namespace: "", name: "#document", attributes: [], children: doc.children, text: "")
    }

    /// Reads an end tag (after its `</`) and closes the element it ends.
    mutating func endTag(_ stack: inout [Open]) throws(XMPError) {
        i += 2
        let (prefix, name) = try qname()
        skipSpace()
        try expect(">")
        guard stack.count > 1, let open = stack.popLast() else {
            throw .malformed(offset: i, reason: "unexpected closing tag")
        }
        guard open.prefix == prefix && open.name == name else {
            throw .malformed(
                offset: i,
                reason:
                    "closing tag \(prefix.isEmpty ? "" : prefix + ":")\(name) does not match "
                    + "\(open.prefix):\(open.name)"
            )
        }
        let element = try close(open, inScope: stack)
        stack[stack.count - 1].children.append(element)
    }

    /// Reads a start tag after its `<`: the name, attributes and namespace declarations, and
    /// whether it closes itself (`/>`).
    mutating func startTag() throws(XMPError) -> (Open, selfClosing: Bool) {
        let (prefix, name) = try qname()
        var attrs: [(prefix: String, name: String, value: String)] = []
        var ns: [String: String] = [:]
        var selfClosing = false
        while true {
            skipSpace()
            guard i < b.count else { throw .malformed(offset: i, reason: "the file ends inside a tag") }
            if b[i] == UInt8(ascii: ">") {
                i += 1
                break
            }
            if starts("/>") {
                i += 2
                selfClosing = true
                break
            }
            let (ap, an) = try qname()
            skipSpace()
            try expect("=")
            skipSpace()
            guard i < b.count, b[i] == UInt8(ascii: "\"") || b[i] == UInt8(ascii: "'") else {
                throw .malformed(offset: i, reason: "attribute value without quotes")
            }
            let q = b[i]
            i += 1
            let start = i
            while i < b.count && b[i] != q {
                if b[i] == UInt8(ascii: "<") {
                    throw .malformed(offset: i, reason: "'<' inside an attribute value")
                }
                i += 1
            }
            guard i < b.count else { throw .malformed(offset: start, reason: "unterminated attribute value") }
            let value = String(decoding: try decodeText(b[start..<i], at: start), as: UTF8.self)
            i += 1
            if ap == "xmlns" {
                ns[an] = value
            } else if ap.isEmpty && an == "xmlns" {
                ns[""] = value
            } else {
                attrs.append((ap, an, value))
            }
        }
        return (Open(prefix: prefix, name: name, rawAttributes: attrs, namespaces: ns), selfClosing)
    }

    /// Resolves names with the namespaces in scope (the element's own declarations included).
    func close(_ open: Open, inScope stack: [Open]) throws(XMPError) -> XMLElement {
        func resolve(_ prefix: String, attribute: Bool) -> String {
            if attribute && prefix.isEmpty { return "" }
            if let v = open.namespaces[prefix] { return v }
            for s in stack.reversed() { if let v = s.namespaces[prefix] { return v } }
            return prefix.isEmpty ? "" : "urn:undeclared:\(prefix)"
        }
        let attrs = open.rawAttributes.map {
            (namespace: resolve($0.prefix, attribute: true), name: $0.name, value: $0.value)
        }
        return XMLElement(
            namespace: resolve(open.prefix, attribute: false), name: open.name, attributes: attrs,
            children: open.children, text: String(decoding: open.text, as: UTF8.self))
    }

    func starts(_ s: StaticString) -> Bool {
        let n = s.utf8CodeUnitCount
        guard i + n <= b.count else { return false }
        let p = s.utf8Start
        for k in 0..<n where b[i + k] != p[k] { return false }
        return true
    }

    mutating func skip(past s: StaticString) throws(XMPError) {
        let start = i
        while i < b.count {
            if starts(s) {
                i += s.utf8CodeUnitCount
                return
            }
            i += 1
        }
        throw .malformed(offset: start, reason: "unterminated construct (expected \(s))")
    }

    mutating func expect(_ c: Unicode.Scalar) throws(XMPError) {
        guard i < b.count, b[i] == UInt8(ascii: c) else { throw .malformed(offset: i, reason: "expected '\(c)'") }
        i += 1
    }

    mutating func skipSpace() {
        while i < b.count, b[i] == 0x20 || b[i] == 0x09 || b[i] == 0x0A || b[i] == 0x0D { i += 1 }
    }

    mutating func qname() throws(XMPError) -> (String, String) {
        let start = i
        var colon = -1
        while i < b.count {
            let c = b[i]
            if c == UInt8(ascii: ":") {
                colon = i
            } else if c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D || c == UInt8(ascii: ">")
                || c == UInt8(ascii: "/")
                || c == UInt8(ascii: "=") || c == UInt8(ascii: "<")
            {
                break
            }
            i += 1
        }
        guard i > start else { throw .malformed(offset: start, reason: "expected a name") }
        if colon < 0 { return ("", String(decoding: b[start..<i], as: UTF8.self)) }
        return (String(decoding: b[start..<colon], as: UTF8.self), String(decoding: b[(colon + 1)..<i], as: UTF8.self))
    }

    /// Character data with the five predefined entities and numeric references decoded.
    func decodeText(_ s: ArraySlice<UInt8>, at offset: Int) throws(XMPError) -> [UInt8] {
        guard s.contains(UInt8(ascii: "&")) else { return Array(s) }
        var out: [UInt8] = []
        out.reserveCapacity(s.count)
        var k = s.startIndex
        while k < s.endIndex {
            let c = s[k]
            guard c == UInt8(ascii: "&") else {
                out.append(c)
                k += 1
                continue
            }
            guard let semi = s[k...].prefix(12).firstIndex(of: UInt8(ascii: ";")) else {
                throw .malformed(offset: offset + (k - s.startIndex), reason: "'&' without a terminated entity")
            }
            let name = String(decoding: s[(k + 1)..<semi], as: UTF8.self)
            switch name {
            case "lt": out.append(UInt8(ascii: "<"))
            case "gt": out.append(UInt8(ascii: ">"))
            case "amp": out.append(UInt8(ascii: "&"))
            case "quot": out.append(UInt8(ascii: "\""))
            case "apos": out.append(UInt8(ascii: "'"))
            default:
                var scalar: Unicode.Scalar?
                if name.hasPrefix("#x") || name.hasPrefix("#X") {
                    scalar = UInt32(name.dropFirst(2), radix: 16).flatMap(Unicode.Scalar.init)
                } else if name.hasPrefix("#") {
                    scalar = UInt32(name.dropFirst()).flatMap(Unicode.Scalar.init)
                }
                guard let scalar else { throw .undefinedEntity(name) }
                out += Array(String(Character(scalar)).utf8)
            }
            k = semi + 1
        }
        return out
    }
}
