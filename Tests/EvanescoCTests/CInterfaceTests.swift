import CEvanesco
import EvanescoCore
import EvanescoDepth
import EvanescoIO
import EvanescoStack
import Foundation
import TestScenes
import EvanescoC
import XCTest

/// The C interface called as a C program calls it (these run under AddressSanitizer in CI, so a
/// buffer overrun or a leak across the interface fails them): strided views in, the library's
/// memory out and freed once, statuses and messages, cancellation from the callback, sessions.
final class CInterfaceTests: XCTestCase {
    /// Calls `body` with a message slot and returns its status and message (freed).
    func call(_ body: (UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> evn_status) -> (evn_status, String?) {
        var message: UnsafeMutablePointer<CChar>?
        let status = body(&message)
        defer { evn_free(message) }
        return (status, message.map { String(cString: $0) })
    }

    /// The text in `text`, freed.
    func take(_ text: UnsafeMutablePointer<CChar>?) -> String? {
        defer { evn_free(text) }
        return text.map { String(cString: $0) }
    }

    func samples(_ image: evn_image) -> [UInt8] {
        Array(
            UnsafeBufferPointer(
                start: image.data!.assumingMemoryBound(to: UInt8.self), count: Int(image.row_stride * image.height)))
    }

    func testAChannelFirstViewIsReadAsInterleavedPixels() throws {
        // 3 planes of 4x2 (channel-first), described with strides: pixel (x, y) channel c at c * 8 + y * 4 + x.
        var planes = (0..<24).map { UInt8($0) }
        let path = NSTemporaryDirectory() + "c-interface-\(UUID().uuidString).png"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let (status, message) = planes.withUnsafeMutableBytes { buffer in
            var view = evn_image(
                data: buffer.baseAddress, width: 4, height: 2, channels: 3, row_stride: 4, pixel_stride: 1,
                channel_stride: 8, sample_type: Int32(EVN_UINT8.rawValue))
            return call { evn_write_image(path, &view, nil, $0) }
        }
        XCTAssertEqual(status, EVN_OK, message ?? "")
        var image = evn_image()
        var info: UnsafeMutablePointer<CChar>?
        XCTAssertEqual(call { evn_read_image(path, &image, &info, $0) }.0, EVN_OK)
        defer { evn_free(image.data) }
        XCTAssertEqual(take(info)?.contains("\"format\":\"png\""), true)
        XCTAssertEqual(
            [image.width, image.height, image.channels, image.row_stride, image.pixel_stride], [4, 2, 3, 12, 3])
        var expected: [UInt8] = []
        for y in 0..<2 {
            for x in 0..<4 {
                for c in 0..<3 { expected.append(UInt8(c * 8 + y * 4 + x)) }
            }
        }
        XCTAssertEqual(samples(image), expected)
    }

    func testRefusalsComeBackAsStatusesAndMessages() {
        var image = evn_image()
        var (status, message) = call { evn_read_image("/nonexistent/x.png", &image, nil, $0) }
        XCTAssertEqual(status, EVN_ERROR_FILE)
        XCTAssertEqual(message, "/nonexistent/x.png: no such file; check the path")
        XCTAssertNil(image.data)
        (status, message) = call { evn_read_image(nil, &image, nil, $0) }
        XCTAssertEqual(status, EVN_ERROR_ARGUMENT)
        XCTAssertEqual(message, "path is NULL")
        var bad = evn_image(
            data: UnsafeMutableRawPointer(bitPattern: 64), width: 4, height: 4, channels: 5, row_stride: 0,
            pixel_stride: 0, channel_stride: 0, sample_type: Int32(EVN_UINT8.rawValue))
        (status, message) = call { evn_write_image("/tmp/never.png", &bad, nil, $0) }
        XCTAssertEqual(status, EVN_ERROR_ARGUMENT)
        XCTAssertEqual(message?.contains("not 5"), true)
        bad.channels = 3
        bad.sample_type = 9
        (status, message) = call { evn_write_image("/tmp/never.png", &bad, nil, $0) }
        XCTAssertEqual(message?.contains("sample type 9"), true)
        (status, message) = call { evn_write_image("/tmp/never.png", &bad, "{\"quality\": 101}", $0) }
        XCTAssertEqual(status, EVN_ERROR_SETTING)
        XCTAssertEqual(message, "quality must be within 1...100 (a whole number)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: "/tmp/never.png"))
        var json: UnsafeMutablePointer<CChar>?
        (status, message) = call { evn_settings("stak", &json, $0) }
        XCTAssertEqual(status, EVN_ERROR_ARGUMENT)
        XCTAssertEqual(message, "no settings kind \"stak\"; kinds: backdrop, portrait, stack, write")
        XCTAssertNil(json)
    }

    func testSettingsAreTheDeclarations() throws {
        var json: UnsafeMutablePointer<CChar>?
        XCTAssertEqual(call { evn_settings("portrait", &json, $0) }.0, EVN_OK)
        let list = try XCTUnwrap(
            JSONSerialization.jsonObject(with: Data(XCTUnwrap(take(json)).utf8)) as? [[String: Any]])
        XCTAssertEqual(list.map { $0["key"] as? String }, PortraitSettings.settings.map(\.key))
        let levels = try XCTUnwrap(list.first { $0["key"] as? String == "levels" })
        XCTAssertEqual(levels["default"] as? Int, PortraitSettings().levels)
        XCTAssertEqual(levels["integer"] as? Bool, true)
    }

    func frames(_ n: Int) -> [Image<UInt8>] { (0..<n).map { TestScenes.periodicFrame($0) } }

    func testStackingFramesInMemoryGivesTheLibrarysImage() throws {
        let burst = frames(4)
        var views = burst.map { f in
            evn_image(
                data: nil, width: Int64(f.width), height: Int64(f.height), channels: Int64(f.channels), row_stride: 0,
                pixel_stride: 0, channel_stride: 0, sample_type: Int32(EVN_UINT8.rawValue))
        }
        // The caller's memory: one block a frame, as a C program would hold them.
        let blocks = burst.map { f in
            let block = UnsafeMutableRawPointer.allocate(byteCount: f.samples.count, alignment: 16)
            f.samples.withUnsafeBytes { block.copyMemory(from: $0.baseAddress!, byteCount: f.samples.count) }
            return block
        }
        defer { blocks.forEach { $0.deallocate() } }
        for i in views.indices { views[i].data = blocks[i] }
        var result = evn_image()
        var report: UnsafeMutablePointer<CChar>?
        let status = call {
            evn_stack(views, Int64(views.count), nil, 0, "{\"merge\": \"median\"}", nil, nil, &result, &report, $0)
        }
        XCTAssertEqual(status.0, EVN_OK, status.1 ?? "")
        defer { evn_free(result.data) }
        var options = StackOptions()
        options.merge = .median
        let expected = try BurstStacker.stack(
            burst.enumerated().map { BurstFrame(name: "frame \($0.offset)", image: .uint8($0.element)) },
            options: options)
        guard case .uint8(let image) = expected.image else { return XCTFail("not 8-bit") }
        XCTAssertEqual(samples(result), Array(image.samples))
        XCTAssertEqual(take(report)?.contains("\"frames_used\":4"), true)
    }

    /// Counts progress calls (from the library's worker threads, hence the lock).
    final class Stopper: @unchecked Sendable {
        let lock = NSLock()
        var calls = 0
        var merges = 0
        func heard(_ stage: String) {
            lock.withLock {
                calls += 1
                if stage == "merge" { merges += 1 }
            }
        }
    }

    func testACallbackThatSaysStopCancelsTheStack() throws {
        let burst = frames(4)
        let dir = NSTemporaryDirectory() + "c-interface-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let paths = try burst.enumerated().map { i, f in
            let p = "\(dir)/f\(i).png"
            try ImageCodecs.write(.uint8(f), to: p)
            return p
        }
        let stopper = Stopper()
        let progress: evn_progress_fn = { context, stage, _, _ in
            let s = Unmanaged<Stopper>.fromOpaque(context!).takeUnretainedValue()
            s.heard(String(cString: stage!))
            return String(cString: stage!) == "merge" ? 1 : 0
        }
        var cPaths = paths.map { UnsafePointer(strdup($0)) }
        defer { cPaths.forEach { free(UnsafeMutableRawPointer(mutating: $0)) } }
        var result = evn_image()
        var report: UnsafeMutablePointer<CChar>?
        let (status, message) = call {
            evn_stack(
                nil, 0, &cPaths, Int64(cPaths.count), nil, progress, Unmanaged.passUnretained(stopper).toOpaque(),
                &result,
                &report, $0)
        }
        XCTAssertEqual(status, EVN_ERROR_CANCELLED)
        XCTAssertEqual(message, "the stack was cancelled before it finished")
        XCTAssertNil(result.data)
        XCTAssertNil(report)
        XCTAssertGreaterThan(stopper.calls, 1)
        XCTAssertLessThan(stopper.merges, 4)
    }

    func testABackdropSessionCarriesItsStateAndIsFreed() throws {
        let (w, h) = (64, 48)
        var color = [UInt8](repeating: 0, count: w * h * 3)
        for i in stride(from: 0, to: color.count, by: 3) { color[i] = 200 }
        var metres = [Float](repeating: 3, count: w * h)
        for y in 12..<36 { for x in 16..<48 { metres[y * w + x] = 1 } }
        var session: OpaquePointer?
        XCTAssertEqual(call { evn_backdrop_new("{\"subject\": \"nearest\"}", nil, nil, &session, $0) }.0, EVN_OK)
        defer { evn_backdrop_free(session) }
        for frame in 0..<2 {
            var out = evn_image()
            var info: UnsafeMutablePointer<CChar>?
            let (status, message) = color.withUnsafeMutableBytes { c in
                metres.withUnsafeMutableBytes { d in
                    var cv = evn_image(
                        data: c.baseAddress, width: Int64(w), height: Int64(h), channels: 3, row_stride: 0,
                        pixel_stride: 0, channel_stride: 0, sample_type: Int32(EVN_UINT8.rawValue))
                    var dv = evn_image(
                        data: d.baseAddress, width: Int64(w), height: Int64(h), channels: 1, row_stride: 0,
                        pixel_stride: 0, channel_stride: 0, sample_type: Int32(EVN_FLOAT32.rawValue))
                    return call { evn_backdrop_process(session, &cv, &dv, &out, &info, $0) }
                }
            }
            XCTAssertEqual(status, EVN_OK, message ?? "")
            let pixels = samples(out)
            evn_free(out.data)
            XCTAssertEqual(take(info)?.contains("\"frame\":\(frame)"), true)
            XCTAssertEqual(pixels[(24 * w + 32) * 3], 200)  // the near subject is kept
            XCTAssertEqual(pixels[(2 * w + 2) * 3], 0)  // the far background is black
        }
        var none: OpaquePointer?
        let (status, message) = call { evn_backdrop_new("{\"gama\": 1}", nil, nil, &none, $0) }
        XCTAssertEqual(status, EVN_ERROR_SETTING)
        XCTAssertEqual(message?.hasPrefix("unknown setting \"gama\" (did you mean \"gamma\"?)"), true)
        XCTAssertNil(none)
    }
}
