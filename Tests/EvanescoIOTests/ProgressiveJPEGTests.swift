import CTurboJPEG
import Foundation
import Testing
import EvanescoCore
@testable import EvanescoIO

@Suite("Progressive JPEG cut at a scan boundary")
struct ProgressiveJPEGTests {
    /// A progressive JPEG made with libjpeg-turbo (several scans, each starting with an SOS).
    static func progressive(_ image: Image<UInt8>) throws -> [UInt8] {
        let c = try TurboJPEGCompressor()
        var out: UnsafeMutablePointer<UInt8>? = nil
        var size: UInt = 0
        let r = image.samples.withUnsafeBufferPointer { src in
            tjCompress2(
                c.handle, src.baseAddress, Int32(image.width), 0, Int32(image.height), Int32(TJPF_RGB.rawValue),
                &out, &size, Int32(TJSAMP_420.rawValue), 90, TJFLAG_PROGRESSIVE)
        }
        defer { if let out { tjFree(out) } }
        guard r == 0, let out else {
            throw ImageIOError.encodeFailed(path: "p.jpg", format: "JPEG", detail: c.lastError)
        }
        return Array(UnsafeBufferPointer(start: out, count: Int(size)))
    }

    @Test("Every cut before a later scan is 'truncated', never a silent half-decoded picture")
    func cutAtScans() throws {
        let img = Image<UInt8>(width: 96, height: 64, channels: 3) { d in
            for i in 0..<d.count { d[i] = UInt8(truncatingIfNeeded: i &* 31 &+ i / 7) }
        }
        let bytes = try Self.progressive(img)
        #expect(try ImageCodecs.decode(bytes, path: "p.jpg").image.width == 96)
        let scans = (0..<(bytes.count - 1)).filter { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xDA }
        #expect(scans.count >= 3, "a progressive file has several scans, found \(scans.count)")
        for cut in scans.dropFirst() {
            #expect(throws: ImageIOError.self, "cut at byte \(cut) of \(bytes.count)") {
                try ImageCodecs.decode(Array(bytes[..<cut]), path: "p.jpg")
            }
        }
    }
}
