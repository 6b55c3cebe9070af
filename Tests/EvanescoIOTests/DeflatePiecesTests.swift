import CKernels
import CPNG
import EvanescoCore
import EvanescoIO
import Testing

/// zlib's raw inflate of `data` (which must end its stream): the bytes, or nil.
func inflateRaw(_ data: [UInt8], expected: Int) -> [UInt8]? {
    var z = z_stream()
    guard inflateInit2_(&z, -15, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK else { return nil }
    defer { inflateEnd(&z) }
    var out = [UInt8](repeating: 0, count: expected + 64)
    let status = data.withUnsafeBufferPointer { src in
        out.withUnsafeMutableBufferPointer { dst in
            z.next_in = UnsafeMutablePointer(mutating: src.baseAddress)
            z.avail_in = UInt32(src.count)
            z.next_out = dst.baseAddress
            z.avail_out = UInt32(dst.count)
            return inflate(&z, Z_FINISH)
        }
    }
    guard status == Z_STREAM_END, z.avail_in == 0 else { return nil }
    return Array(out.prefix(Int(z.total_out)))
}

/// libdeflate's streams joined piece by piece (the final block found by walking the stream, made
/// not final, and a sync-flush marker appended): whatever the data and level, zlib inflates the
/// joined pieces to the input.
@Suite struct DeflatePiecesTests {
    static func data(_ kind: String, _ n: Int) -> [UInt8] {
        var s: UInt64 = 99
        func next() -> UInt64 {
            s = s &* 6364136223846793005 &+ 1442695040888963407
            return s >> 33
        }
        switch kind {
        case "zeros": return [UInt8](repeating: 0, count: n)
        case "noise": return (0..<n).map { _ in UInt8(truncatingIfNeeded: next()) }
        case "text":
            return Array(
                String(repeating: "the quick brown fox jumps over the lazy dog 0123456789 ", count: n / 50 + 1).utf8
                    .prefix(n))
        // filtered photo-like
        case "small-noise": return (0..<n).map { _ in UInt8(truncatingIfNeeded: Int(next() % 7) - 3) }
        default: return (0..<n).map { UInt8(truncatingIfNeeded: $0 / 97 + Int(next() % 3)) }  // ramps
        }
    }

    /// `zlibPieces`: the pieces (by index) compressed by the zlib fallback instead.
    static func joined(_ input: [UInt8], pieces: Int, level: Int32, zlibPieces: Set<Int> = []) -> [UInt8]? {
        var stream: [UInt8] = []
        for k in 0..<pieces {
            let a = input.count * k / pieces, b = input.count * (k + 1) / pieces
            let cap = evn_deflate_piece_bound(b - a)
            var out = [UInt8](repeating: 0, count: cap)
            let n = input.withUnsafeBufferPointer { src in
                out.withUnsafeMutableBufferPointer { o in
                    let last: Int32 = k == pieces - 1 ? 1 : 0
                    return zlibPieces.contains(k)
                        ? evn_deflate_piece_zlib(src.baseAddress! + a, b - a, o.baseAddress, cap, min(level, 9), last)
                        : evn_deflate_piece(src.baseAddress! + a, b - a, o.baseAddress, cap, level, last)
                }
            }
            guard n >= 0 else { return nil }
            stream += out.prefix(n)
        }
        return stream
    }

    @Test(arguments: ["zeros", "noise", "text", "small-noise", "ramps"])
    func joinedPiecesInflateToTheInput(kind: String) throws {
        for level: Int32 in [1, 2, 4, 6, 9, 12] {
            for (size, pieces) in [(1, 1), (1000, 3), (300_000, 4), (1_200_000, 2)] {
                let input = Self.data(kind, size)
                let stream = try #require(
                    Self.joined(input, pieces: pieces, level: level), "\(kind) \(size) level \(level)")
                #expect(
                    inflateRaw(stream, expected: size) == input,
                    "\(kind): \(size) bytes in \(pieces) pieces at level \(level)")
            }
        }
    }

    /// The zlib fallback (taken for a piece the walk could not follow) joins with libdeflate's
    /// pieces on either side, first, middle or last.
    @Test func zlibPiecesJoinLibdeflatePieces() throws {
        let input = Self.data("small-noise", 400_000)
        for zlibPieces: Set<Int> in [[0], [1], [3], [0, 2], [0, 1, 2, 3]] {
            let stream = try #require(Self.joined(input, pieces: 4, level: 1, zlibPieces: zlibPieces))
            #expect(inflateRaw(stream, expected: input.count) == input, "zlib for pieces \(zlibPieces.sorted())")
        }
    }

    /// The walk knows where a stream ends: a whole stream is accepted with its last bit inside
    /// its last byte; cut short or changed at random it is refused (or, where the change still
    /// decodes, never read past its end) rather than hang or crash.
    @Test func theWalkFindsTheEndAndRefusesDamage() {
        let input = Self.data("small-noise", 200_000)
        var out = [UInt8](repeating: 0, count: evn_deflate_piece_bound(input.count))
        let n = input.withUnsafeBufferPointer { src in
            out.withUnsafeMutableBufferPointer {
                evn_deflate_piece(src.baseAddress, src.count, $0.baseAddress, $0.count, 1, 1)
            }
        }
        #expect(n > 0)
        let stream = Array(out.prefix(n))
        var final = 0, end = 0
        #expect(evn_deflate_find_final(stream, stream.count, &final, &end) == 0)
        #expect(end > (stream.count - 1) * 8 && end <= stream.count * 8 && final < end)
        for cut in [1, 2, stream.count / 2, stream.count - 1] {
            #expect(evn_deflate_find_final(stream, cut, &final, &end) != 0, "cut at \(cut)")
        }
        var s: UInt64 = 5
        for _ in 0..<200 {
            var damaged = stream
            s = s &* 6364136223846793005 &+ 1442695040888963407
            damaged[Int(s >> 33) % damaged.count] ^= UInt8(truncatingIfNeeded: s >> 20) | 1
            if evn_deflate_find_final(damaged, damaged.count, &final, &end) == 0 { #expect(end <= damaged.count * 8) }
        }
        #expect(evn_deflate_find_final(nil, 0, &final, &end) != 0)
    }
}

/// The PNG row filters and TIFF's predictor against the specification's arithmetic written out
/// here sample by sample; the portable and AVX2 builds of the one C body give the same bytes.
@Suite struct RowFilterTests {
    static func paeth(_ a: Int, _ b: Int, _ c: Int) -> Int {
        let p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c)
        return pa <= pb && pa <= pc ? a : pb <= pc ? b : c
    }

    /// PNG 1.2 section 6 for one row (`bytes` as stored: 16-bit samples big-endian).
    static func reference(_ filter: Int, _ x: [UInt8], _ up: [UInt8], bpp: Int) -> [UInt8] {
        (0..<x.count).map { i in
            let a = i >= bpp ? Int(x[i - bpp]) : 0, b = Int(up[i]), c = i >= bpp ? Int(up[i - bpp]) : 0
            let predicted = [0, a, b, (a + b) / 2, paeth(a, b, c)][filter]
            return UInt8(truncatingIfNeeded: Int(x[i]) - predicted)
        }
    }

    typealias Variant = (UnsafePointer<UInt8>?, Int, Int, Int32, Int, Int, Int32, UnsafeMutablePointer<UInt8>?) -> Int32

    @Test(arguments: [1, 2, 3, 4])
    func everyFilterAsTheSpecificationSaysPortable(_ filter: Int32) {
        check(filter, evn_png_filter_rows_portable)
    }

    @Test(
        .enabled(if: evn_cpu_has_avx2() != 0, "this CPU has no AVX2: only the portable build is checked"),
        arguments: [1, 2, 3, 4])
    func everyFilterAsTheSpecificationSaysAVX2(_ filter: Int32) {
        check(filter, evn_png_filter_rows_avx2)
    }

    func check(_ filter: Int32, _ variant: Variant) {
        for (w, channels, sixteen) in [(37, 3, false), (40, 4, false), (17, 1, false), (23, 3, true), (9, 2, true)] {
            let h = 6, bpp = channels * (sixteen ? 2 : 1), rowBytes = w * bpp
            let image = (0..<(rowBytes * h)).map { UInt8(truncatingIfNeeded: ($0 * 7919) >> 3 ^ $0) }
            // The rows as PNG stores them (16-bit big-endian); the image is host order.
            let stored: [UInt8] = sixteen ? (0..<image.count).map { image[$0 ^ 1] } : image
            for (y0, y1) in [(0, h), (2, 5)] {
                var want: [UInt8] = []
                for y in y0..<y1 {
                    let x = Array(stored[(y * rowBytes)..<((y + 1) * rowBytes)])
                    let up =
                        y == 0
                        ? [UInt8](repeating: 0, count: rowBytes) : Array(stored[((y - 1) * rowBytes)..<(y * rowBytes)])
                    want += [UInt8(filter)] + Self.reference(Int(filter), x, up, bpp: bpp)
                }
                var out = [UInt8](repeating: 0, count: (y1 - y0) * (rowBytes + 1))
                #expect(variant(image, rowBytes, bpp, sixteen ? 1 : 0, y0, y1, filter, &out) == 0)
                #expect(out == want, "filter \(filter) \(w)x\(channels) sixteen \(sixteen) rows \(y0)..<\(y1)")
            }
        }
    }

    /// The per-row choice takes, for each row, the filter with the smallest sum of magnitudes.
    @Test func adaptivePicksTheCheapestFilterOfEachRow() {
        let w = 50, h = 5, bpp = 3, rowBytes = w * bpp
        // Row 0 flat, then a horizontal ramp, a copy of the row above (Up and Paeth both cost
        // nothing there: the lower type is kept), noise.
        var image = [UInt8](repeating: 40, count: rowBytes * h)
        for i in 0..<rowBytes {
            image[rowBytes + i] = UInt8(i / 3 * 2)
            image[2 * rowBytes + i] = image[rowBytes + i]
        }
        for i in 0..<(2 * rowBytes) { image[3 * rowBytes + i] = UInt8(truncatingIfNeeded: i * 7919 >> 2) }
        var out = [UInt8](repeating: 0, count: h * (rowBytes + 1))
        #expect(evn_png_filter_rows(image, rowBytes, bpp, 0, 0, h, 5, &out) == 0)
        let types = (0..<h).map { Int(out[$0 * (rowBytes + 1)]) }
        #expect(types[0] == 1 && types[2] == 2, "\(types)")
        for y in 0..<h {
            let x = Array(image[(y * rowBytes)..<((y + 1) * rowBytes)])
            let up =
                y == 0 ? [UInt8](repeating: 0, count: rowBytes) : Array(image[((y - 1) * rowBytes)..<(y * rowBytes)])
            let costs = (0...4).map { f in
                Self.reference(f, x, up, bpp: bpp).reduce(0) { $0 + abs(Int(Int8(bitPattern: $1))) }
            }
            #expect(costs[types[y]] == costs.min(), "row \(y): \(costs)")
            #expect(
                Array(out[(y * (rowBytes + 1) + 1)..<((y + 1) * (rowBytes + 1))])
                    == Self.reference(types[y], x, up, bpp: bpp))
        }
    }

    @Test func tiffPredictorIsTheDifferenceOfEachChannel() {
        let w = 29, spp = 3, rows = 4
        let eight = (0..<(w * spp * rows)).map { UInt8(truncatingIfNeeded: $0 * 31 ^ ($0 >> 2)) }
        var out8 = [UInt8](repeating: 0, count: eight.count)
        evn_tiff_predict_rows(eight, w * spp, spp, 8, rows, &out8)
        let sixteen = (0..<(w * spp * rows)).map { UInt16(truncatingIfNeeded: $0 * 40_503 ^ ($0 >> 1)) }
        var out16 = [UInt16](repeating: 0, count: sixteen.count)
        evn_tiff_predict_rows(sixteen, w * spp, spp, 16, rows, &out16)
        for i in 0..<eight.count {
            let first = i % (w * spp) < spp
            #expect(out8[i] == (first ? eight[i] : eight[i] &- eight[i - spp]))
            #expect(out16[i] == (first ? sixteen[i] : sixteen[i] &- sixteen[i - spp]))
        }
    }
}
