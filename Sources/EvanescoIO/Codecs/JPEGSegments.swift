/// The marker segments of a JPEG file up to the start of scan (where APPn metadata lives).
/// A bounds-checked reader: lengths that run past the end give a typed error, never a crash.
package struct JPEGSegments: Sendable {
    package struct Segment: Sendable {
        /// The marker's second byte (0xE1 = APP1, ...).
        package var marker: UInt8
        /// Offset of the payload (after the 2-byte length) in the file.
        package var payloadOffset: Int
        package var payloadLength: Int
    }
    package var segments: [Segment]

    package enum ParseError: Error, Equatable {
        case notJPEG
        case truncated(at: Int)
        case badMarker(at: Int)
    }

    package init(_ data: [UInt8]) throws(ParseError) {
        guard data.count >= 4, data[0] == 0xFF, data[1] == 0xD8 else { throw .notJPEG }
        var segs: [Segment] = []
        var p = 2
        while p < data.count {
            guard data[p] == 0xFF else { throw .badMarker(at: p) }
            while p < data.count && data[p] == 0xFF { p += 1 }  // fill bytes
            guard p < data.count else { throw .truncated(at: p) }
            let marker = data[p]
            p += 1
            if marker == 0xD9 { break }  // EOI
            if marker == 0x01 || (0xD0...0xD7).contains(marker) { continue }  // no length
            guard p + 2 <= data.count else { throw .truncated(at: p) }
            let len = Int(data[p]) << 8 | Int(data[p + 1])
            guard len >= 2 else { throw .badMarker(at: p) }
            guard p + len <= data.count else { throw .truncated(at: p) }
            segs.append(Segment(marker: marker, payloadOffset: p + 2, payloadLength: len - 2))
            p += len
            if marker == 0xDA { break }  // SOS: entropy data follows
        }
        segments = segs
    }

    /// Payloads of APPn segments whose payload starts with `signature`, signature stripped.
    package func payloads(app n: UInt8, signature: [UInt8], in data: [UInt8]) -> [ArraySlice<UInt8>] {
        segments.filter { $0.marker == 0xE0 + n }.compactMap { s in
            guard s.payloadLength >= signature.count,
                data[s.payloadOffset..<(s.payloadOffset + signature.count)].elementsEqual(signature)
            else { return nil }
            return data[(s.payloadOffset + signature.count)..<(s.payloadOffset + s.payloadLength)]
        }
    }

    static let exifSignature: [UInt8] = Array("Exif".utf8) + [0, 0]
    static let xmpSignature: [UInt8] = Array("http://ns.adobe.com/xap/1.0/".utf8) + [0]
    static let iccSignature: [UInt8] = Array("ICC_PROFILE".utf8) + [0]

    /// EXIF (TIFF-structured, without the "Exif\0\0" prefix), XMP packet and ICC profile
    /// (reassembled from its numbered APP2 chunks).
    package func metadata(in data: [UInt8]) -> (exif: [UInt8]?, xmp: [UInt8]?, icc: [UInt8]?) {
        let exif = payloads(app: 1, signature: Self.exifSignature, in: data).first.map(Array.init)
        let xmp = payloads(app: 1, signature: Self.xmpSignature, in: data).first.map(Array.init)
        var chunks: [(Int, ArraySlice<UInt8>)] = []
        for p in payloads(app: 2, signature: Self.iccSignature, in: data) where p.count >= 2 {
            chunks.append((Int(p[p.startIndex]), p.dropFirst(2)))
        }
        let icc: [UInt8]? = chunks.isEmpty ? nil : chunks.sorted { $0.0 < $1.0 }.flatMap { $0.1 }
        return (exif, xmp, icc)
    }

    /// Inserts APP1 EXIF and APP2 ICC segments right after SOI (and the JFIF APP0, if present)
    /// of an encoded JPEG, for writers (TurboJPEG cannot emit markers itself).
    package static func inserting(exif: [UInt8]?, icc: [UInt8]?, into jpeg: [UInt8]) -> [UInt8] {
        var extra: [UInt8] = []
        func segment(_ marker: UInt8, _ payload: [UInt8]) {
            let len = payload.count + 2
            extra += [0xFF, marker, UInt8(len >> 8), UInt8(len & 0xFF)] + payload
        }
        if let exif, exif.count + exifSignature.count + 2 <= 0xFFFF { segment(0xE1, exifSignature + exif) }
        if let icc, !icc.isEmpty {
            let maxChunk = 0xFFFF - 2 - iccSignature.count - 2
            let count = (icc.count + maxChunk - 1) / maxChunk
            if count <= 255 {
                for i in 0..<count {
                    let chunk = Array(icc[(i * maxChunk)..<min(icc.count, (i + 1) * maxChunk)])
                    segment(0xE2, iccSignature + [UInt8(i + 1), UInt8(count)] + chunk)
                }
            }
        }
        guard !extra.isEmpty else { return jpeg }
        var at = 2
        if jpeg.count > 6, jpeg[2] == 0xFF, jpeg[3] == 0xE0 { at = 4 + (Int(jpeg[4]) << 8 | Int(jpeg[5])) }
        return Array(jpeg[0..<at]) + extra + Array(jpeg[at...])
    }
}
