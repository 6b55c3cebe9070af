import CEvanesco
import EvanescoCore
import XCTest

@testable import EvanescoC

/// A call that fails after handing some outputs over takes them all back: the caller's pointers
/// are cleared and the memory is freed (LeakSanitizer, in CI, fails the run if it is not).
final class HandoverTests: XCTestCase {
    struct Late: Error {}

    func testAFailureAfterHandingOverTakesEverythingBack() {
        var text: UnsafeMutablePointer<CChar>?
        var image = evn_image()
        var array: UnsafeMutablePointer<evn_image>?
        var count: Int64 = 0
        var message: UnsafeMutablePointer<CChar>?
        let status = CCall.run(&message) { handover in
            handover.text("{\"report\": 1}", to: &text)
            try handover.image(.uint8(Image<UInt8>(width: 64, height: 48, channels: 3)), to: &image)
            let mattes = try handover.images(2, to: &array, length: &count)
            try handover.image(.float32(Image<Float>(width: 8, height: 8, channels: 1)), to: mattes)
            XCTAssertNotNil(text)
            XCTAssertNotNil(image.data)
            XCTAssertEqual(count, 2)
            throw Late()
        }
        defer { evn_free(message) }
        XCTAssertEqual(status, EVN_ERROR_OTHER)
        XCTAssertNil(text)
        XCTAssertNil(image.data)
        XCTAssertEqual(image.width, 0)
        XCTAssertNil(array)
        XCTAssertEqual(count, 0)
        XCTAssertNotNil(message)
    }

    func testASuccessKeepsWhatItHandedOver() {
        var text: UnsafeMutablePointer<CChar>?
        var message: UnsafeMutablePointer<CChar>?
        let status = CCall.run(&message) { handover in handover.text("kept", to: &text) }
        defer { evn_free(text) }
        XCTAssertEqual(status, EVN_OK)
        XCTAssertEqual(text.map { String(cString: $0) }, "kept")
        XCTAssertNil(message)
    }
}
