import Foundation
import Testing
import EvanescoCore
@testable import EvanescoIO
import SharedTestData

/// The shared sample data (``SharedTestData``, the one place that finds it).
typealias SharedData = SharedTestData

/// A fresh temporary folder, removed when the value is dropped.
final class TempDir {
    let path: String
    init() {
        path = NSTemporaryDirectory() + "evanesco-test-\(UUID().uuidString)"
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
    func file(_ name: String) -> String { path + "/" + name }
    var contents: [String] { (try? FileManager.default.contentsOfDirectory(atPath: path))?.sorted() ?? [] }
}

/// Deterministic pseudo-random samples.
func noiseImage<S: PixelSample>(_ w: Int, _ h: Int, channels: Int, as: S.Type, seed: UInt64 = 7) -> Image<S> {
    var s = seed
    return Image<S>(width: w, height: h, channels: channels) { d in
        for i in 0..<d.count {
            s = s &* 6364136223846793005 &+ 1442695040888963407
            d[i] = S(clampingRounded: Float(s >> 40) / Float(1 << 24) * S.fullScale)
        }
    }
}

/// A smooth 8-bit RGB image (JPEG-friendly).
func smoothImage(_ w: Int, _ h: Int) -> Image<UInt8> {
    Image<UInt8>(width: w, height: h, channels: 3) { d in
        for y in 0..<h {
            for x in 0..<w {
                let o = (y * w + x) * 3
                d[o] = UInt8(x * 255 / max(1, w - 1))
                d[o + 1] = UInt8(y * 255 / max(1, h - 1))
                d[o + 2] = UInt8((x + y) * 127 / max(1, w + h))
            }
        }
    }
}

/// An EXIF block (little-endian TIFF structure) holding only an orientation tag.
func exifBlock(orientation: Int) -> [UInt8] {
    [
        0x49, 0x49, 0x2A, 0x00, 0x08, 0x00, 0x00, 0x00,  // header, IFD0 at 8
        0x01, 0x00,  // one entry
        0x12, 0x01, 0x03, 0x00, 0x01, 0x00, 0x00, 0x00, UInt8(orientation), 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00
    ]  // no next IFD
}

func crc32(_ bytes: [UInt8]) -> UInt32 {
    var c: UInt32 = 0xFFFF_FFFF
    for b in bytes {
        c ^= UInt32(b)
        for _ in 0..<8 { c = (c >> 1) ^ (0xEDB8_8320 & (0 &- (c & 1))) }
    }
    return ~c
}

func bytesOf(_ path: String) -> [UInt8] { [UInt8](FileManager.default.contents(atPath: path) ?? Data()) }

/// A structurally valid ICC profile header (RGB display class, XYZ PCS, no tags) padded to
/// `size` bytes: enough for libpng's checks and for multi-chunk JPEG APP2 carriage.
func iccProfile(size: Int) -> [UInt8] {
    var p = [UInt8](repeating: 0, count: size)
    p[0] = UInt8(size >> 24 & 0xFF)
    p[1] = UInt8(size >> 16 & 0xFF)
    p[2] = UInt8(size >> 8 & 0xFF)
    p[3] = UInt8(size & 0xFF)
    p[8] = 2
    p[9] = 0x10  // version 2.1
    for (i, b) in Array("mntrRGB XYZ ".utf8).enumerated() { p[12 + i] = b }
    for (i, b) in Array("acsp".utf8).enumerated() { p[36 + i] = b }
    // D50 illuminant
    let d50: [UInt8] = [0x00, 0x00, 0xF6, 0xD6, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0xD3, 0x2D]
    for (i, b) in d50.enumerated() { p[68 + i] = b }
    for i in 132..<size { p[i] = UInt8(truncatingIfNeeded: i) }
    return p
}
