/// One secondary image in a JPEG's MPF index (CIPA DC-007).
package struct MPFEntry: Sendable, Equatable {
    /// Byte range of the image in the file.
    package var offset: Int
    package var size: Int
    /// MP type code from the entry's attribute field (e.g. 0x030000 = baseline primary).
    package var typeCode: UInt32
}

/// A JPEG's Multi-Picture Format index: where its secondary images are (Apple stores depth,
/// mattes and gain maps there, each named by its own XMP `apdi:AuxiliaryImageType`). A parser
/// internal of ``DepthReader``.
package enum MPFIndex {
    /// The MPF entries after the primary image, bounds-checked against the file. Offsets in the
    /// index are relative to the MPF header (the byte after "MPF\0").
    package static func entries(_ bytes: [UInt8]) -> [MPFEntry] { read(bytes).entries }

    /// The MPF entries that lie inside the file, and how many more the index declares that do
    /// not (a truncated or damaged file).
    package static func read(_ bytes: [UInt8]) -> (entries: [MPFEntry], damaged: Int) {
        guard let segs = try? JPEGSegments(bytes) else { return ([], 0) }
        let sig = Array("MPF".utf8) + [0]
        guard
            let seg = segs.segments.first(where: {
                $0.marker == 0xE2 && $0.payloadLength >= 8
                    && bytes[$0.payloadOffset..<($0.payloadOffset + 4)].elementsEqual(sig)
            })
        else { return ([], 0) }
        let base = seg.payloadOffset + 4
        let e = Array(bytes[base..<(seg.payloadOffset + seg.payloadLength)])
        let r = TIFFStructureReader(e)
        guard let ifd = r.u32(4), let n = r.u16(ifd), n < 200 else { return ([], 0) }
        var count = 0, entryOffset = 0, entryBytes = 0
        for i in 0..<n {
            let at = ifd + 2 + i * 12
            guard let tag = r.u16(at) else { break }
            if tag == 0xB001 { count = r.u32(at + 8) ?? 0 }
            if tag == 0xB002 {
                entryBytes = r.u32(at + 4) ?? 0
                entryOffset = r.u32(at + 8) ?? 0
            }
        }
        guard count > 0, count < 100, entryBytes >= count * 16 else { return ([], 0) }
        var out: [MPFEntry] = []
        for k in 1..<count {  // entry 0 is the primary image
            let at = entryOffset + k * 16
            guard let attr = r.u32(at), let size = r.u32(at + 4), let off = r.u32(at + 8) else { break }
            let start = base + off
            guard size > 0, off > 0, start + size <= bytes.count else { continue }
            out.append(MPFEntry(offset: start, size: size, typeCode: UInt32(attr) & 0x00FF_FFFF))
        }
        return (out, count - 1 - out.count)
    }

    /// The byte after the primary image's EOI: the first FF D9 after the start of scan (entropy-
    /// coded data stuffs every FF with 00, so no earlier FF D9 can occur there).
    package static func primaryEnd(_ bytes: [UInt8]) -> Int? {
        guard let segs = try? JPEGSegments(bytes), let sos = segs.segments.last, sos.marker == 0xDA else { return nil }
        var i = sos.payloadOffset + sos.payloadLength
        while i + 1 < bytes.count {
            if bytes[i] == 0xFF && bytes[i + 1] == 0xD9 { return i + 2 }
            i += 1
        }
        return nil
    }
}

/// Reads TIFF-structured integers (EXIF, MPF) with the byte order from the header; every read is
/// bounds-checked and returns nil past the end.
struct TIFFStructureReader {
    let e: [UInt8]
    let littleEndian: Bool
    init(_ e: [UInt8]) {
        self.e = e
        littleEndian = e.first == 0x49
    }
    /// Bytes from inside a TIFF (a directory read on its own), in the byte order its header gave.
    init(_ e: [UInt8], littleEndian: Bool) {
        self.e = e
        self.littleEndian = littleEndian
    }
    func u16(_ o: Int) -> Int? {
        guard o >= 0, o + 2 <= e.count else { return nil }
        return littleEndian ? Int(e[o]) | Int(e[o + 1]) << 8 : Int(e[o]) << 8 | Int(e[o + 1])
    }
    func u32(_ o: Int) -> Int? {
        guard o >= 0, o + 4 <= e.count else { return nil }
        let b = (Int(e[o]), Int(e[o + 1]), Int(e[o + 2]), Int(e[o + 3]))
        return littleEndian ? b.0 | b.1 << 8 | b.2 << 16 | b.3 << 24 : b.0 << 24 | b.1 << 16 | b.2 << 8 | b.3
    }
}
