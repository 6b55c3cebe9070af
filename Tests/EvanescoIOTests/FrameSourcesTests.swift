import EvanescoCore
import Foundation
import Testing
@testable import EvanescoIO

@Suite("FrameSources.open: one meaning of a frame source for every front end")
struct FrameSourcesTests {
    @Test("Raw layouts: colour RGB, depth 16-bit unless 8-bit disparity (or a float map) is said")
    func layouts() {
        #expect(FrameRole.color.rawLayout == .rgb24)
        #expect(FrameRole.depth(nil).rawLayout == .gray16le)
        #expect(FrameRole.depth(.millimetres16).rawLayout == .gray16le)
        #expect(FrameRole.depth(.disparity8(min: 0.5, max: 3)).rawLayout == .gray)
    }

    @Test("A folder of images, one image, stdin with and without a size, a missing path")
    func sources() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("evanesco-sources-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let frame = Image<UInt8>(width: 4, height: 3, channels: 3) { d in for i in 0..<d.count { d[i] = UInt8(i) } }
        for name in ["b.png", "a.png"] { try ImageCodecs.write(.uint8(frame), to: "\(dir)/\(name)") }
        try Data("notes".utf8).write(to: URL(fileURLWithPath: "\(dir)/notes.txt"))
        let folder = try FrameSources.open(dir, role: .color)
        #expect(folder is ImageFileReader && folder.knownCount == 2)
        let first = try #require(try folder.next())
        #expect(first.width == 4 && first.height == 3)
        let one = try FrameSources.open("\(dir)/a.png", role: .depth(nil))
        #expect(one is ImageFileReader && one.knownCount == 1)
        let raw = try FrameSources.open("-", role: .depth(.millimetres16), rawSize: (640, 480))
        #expect(raw is RawFrameReader)
        #expect(throws: FrameStreamError.self) { try FrameSources.open("-", role: .color) }
        #expect(throws: ImageIOError.fileNotFound(path: "\(dir)/none.mp4")) {
            try FrameSources.open("\(dir)/none.mp4", role: .color)
        }
    }
}
