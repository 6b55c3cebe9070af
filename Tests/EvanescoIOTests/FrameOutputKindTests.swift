import EvanescoCore
import Foundation
import Testing

@testable import EvanescoIO

@Suite("A stream's output is classified once, by its name")
struct FrameOutputKindTests {
    @Test("Stdout, images, videos and folders by name, case-insensitively")
    func kinds() {
        #expect(FrameOutputKind("-") == .standardOutput)
        for name in ["out.jpg", "a/b.PNG", "x.tif", "x.tiff", "y.jpeg"] {
            #expect(FrameOutputKind(name) == .image, "\(name)")
        }
        for name in ["clip.mp4", "c.MKV", "d.mov"] { #expect(FrameOutputKind(name) == .video, "\(name)") }
        for name in ["frames", "out/", "frames.d", "./-"] { #expect(FrameOutputKind(name) == .folder, "\(name)") }
    }

    @Test("Each kind opens its writer, and a folder's frames are numbered PNGs")
    func writers() throws {
        let dir = NSTemporaryDirectory() + "evanesco-frame-output-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        #expect(try FrameOutputKind("-").writer(at: "-", frameRate: 30, overwrite: false) is RawFrameWriter)
        #expect(
            try FrameOutputKind("a.png").writer(at: dir + "/a.png", frameRate: 30, overwrite: false) is ImageFrameWriter
        )
        let folder = try FrameOutputKind("frames").writer(at: dir + "/frames", frameRate: 30, overwrite: false)
        let frame = Image<UInt8>(width: 4, height: 3, channels: 3) { d in for i in 0..<d.count { d[i] = UInt8(i) } }
        try folder.write(frame)
        try folder.finish()
        #expect(folder.written == 1)
        let files = try FileManager.default.contentsOfDirectory(atPath: dir + "/frames")
        #expect(files == ["frame00001.png"], "\(files)")
        #expect(try ImageCodecs.read(dir + "/frames/frame00001.png").image.uint8 == frame)
    }
}
