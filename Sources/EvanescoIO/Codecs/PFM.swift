import EvanescoCore

/// Portable Float Map (the Middlebury/OpenCV .pfm): "Pf" (1 channel) or "PF" (3 channels), the
/// size, a scale whose sign gives the byte order (negative = little-endian), then rows of 32-bit
/// floats from the bottom row up. Infinity and NaN are allowed (unknown values).
public enum PFM {
    /// Encodes a one-channel float image as a little-endian PFM (`Pf`), rows bottom to top as the format wants.
    ///
    /// - Parameter image: The map (the first channel is written).
    /// - Returns: The file's bytes.
    public static func encode(_ image: Image<Float>) -> [UInt8] {
        precondition(image.channels == 1 || image.channels == 3, "PFM holds 1 or 3 channels")
        var out = Array("\(image.channels == 1 ? "Pf" : "PF")\n\(image.width) \(image.height)\n-1.0\n".utf8)
        let row = image.rowLength
        out.reserveCapacity(out.count + image.samples.count * 4)
        image.samples.withUnsafeBufferPointer { s in
            for y in stride(from: image.height - 1, through: 0, by: -1) {
                for v in s[(y * row)..<((y + 1) * row)] {
                    let b = v.bitPattern.littleEndian
                    out += [UInt8(b & 0xFF), UInt8(b >> 8 & 0xFF), UInt8(b >> 16 & 0xFF), UInt8(b >> 24)]
                }
            }
        }
        return out
    }

    /// Decodes a PFM (`Pf` grey or `PF` colour; colour keeps its first channel).
    ///
    /// - Parameters:
    ///   - bytes: The file's bytes.
    ///   - path: The file's name, for messages.
    ///   - limits: Size limits.
    /// - Returns: The map, rows top to bottom.
    /// - Throws: `ImageIOError` when the header is malformed, the size exceeds the limits or the data is short.
    public static func decode(_ bytes: [UInt8], path: String, limits: DecodeLimits = .standard) throws -> Image<Float> {
        // Three whitespace-separated header tokens after the magic, then one whitespace byte.
        var i = 0
        func token() throws -> String {
            while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 {
                i += 1
            }
            let s = i
            while i < bytes.count, !(bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09),
                i - s < 32
            { i += 1 }
            guard i > s, i < bytes.count else {
                throw ImageIOError.corrupt(path: path, format: "PFM", detail: "the header is incomplete")
            }
            return String(decoding: bytes[s..<i], as: UTF8.self)
        }
        let magic = try token()
        guard magic == "Pf" || magic == "PF" else {
            throw ImageIOError.unrecognizedFormat(path: path, detail: "not a PFM file (no Pf/PF header)")
        }
        guard let w = Int(try token()), let h = Int(try token()), let scale = Double(try token()), scale != 0 else {
            throw ImageIOError.corrupt(path: path, format: "PFM", detail: "the header's size or scale is not a number")
        }
        try limits.check(width: w, height: h, path: path)
        i += 1
        let c = magic == "Pf" ? 1 : 3
        let need = w * h * c * 4
        guard bytes.count - i >= need else {
            throw ImageIOError.truncated(path: path, format: "PFM", detail: "\(bytes.count - i) of \(need) data bytes")
        }
        let little = scale < 0
        let start = i
        return Image<Float>(uninitializedWidth: w, height: h, channels: c) { d in
            bytes.withUnsafeBytes { raw in
                for y in 0..<h {
                    let src = start + (h - 1 - y) * w * c * 4
                    for k in 0..<(w * c) {
                        let u = raw.loadUnaligned(fromByteOffset: src + k * 4, as: UInt32.self)
                        d[y * w * c + k] = Float(bitPattern: little ? UInt32(littleEndian: u) : UInt32(bigEndian: u))
                    }
                }
            }
        }
    }
}
