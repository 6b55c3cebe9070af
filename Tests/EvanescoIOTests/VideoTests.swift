import Foundation
import Testing
import EvanescoCore
@testable import EvanescoIO

@Suite struct VideoBridge {
    @Test func selectionIndices() throws {
        #expect(try VideoIO.indices(.evenlySpaced(5), count: 101) == [0, 25, 50, 75, 100])
        #expect(try VideoIO.indices(.evenlySpaced(50), count: 10) == Array(0..<10))
        #expect(try VideoIO.indices(.everyKth(3), count: 10) == [0, 3, 6, 9])
        #expect(try VideoIO.indices(.evenlySpaced(1), count: 10) == [0])
        #expect(throws: VideoError.self) { try VideoIO.indices(.everyKth(0), count: 10) }
    }

    /// Frames of flat, distinct colours written through ffmpeg come back in order.
    @Test func writeThenReadFrames() throws {
        let t = TempDir()
        let colours: [[UInt8]] = (0..<12).map { [UInt8(20 * $0), UInt8(240 - 20 * $0), 128] }
        let w = try VideoWriter(path: t.file("clip.mp4"), width: 64, height: 48, framesPerSecond: 10)
        for c in colours {
            try w.append(
                Image<UInt8>(width: 64, height: 48, channels: 3) { d in for i in 0..<d.count { d[i] = c[i % 3] } })
        }
        #expect(!FileManager.default.fileExists(atPath: t.file("clip.mp4")), "no file before finish()")
        try w.finish()
        let info = try VideoIO.probe(t.file("clip.mp4"))
        #expect(info.width == 64 && info.height == 48 && info.frameCount == 12)
        let frames = try VideoIO.readFrames(t.file("clip.mp4"), selection: .evenlySpaced(4))
        #expect(frames.map(\.index) == [0, 4, 7, 11])
        for (i, img) in frames {
            for c in 0..<3 { #expect(abs(Int(img[32, 24, c]) - Int(colours[i][c])) <= 6, "frame \(i) channel \(c)") }
        }
        #expect(try VideoIO.readFrames(t.file("clip.mp4"), selection: .everyKth(5)).map(\.index) == [0, 5, 10])
        #expect(t.contents == ["clip.mp4"])
    }

    /// 300 frames evenly spaced in 500 (a select term per frame made ffmpeg run out of memory):
    /// each frame shows its own number in three flat channels (8 levels each, 32 apart, so H.264
    /// keeps it), and every frame read back is the one `indices` names, in order.
    @Test func threeHundredOfFiveHundredFramesAreTheRightOnes() throws {
        let t = TempDir()
        let v = try VideoWriter(path: t.file("clip.mp4"), width: 16, height: 16, framesPerSecond: 25)
        for k in 0..<500 {
            let code = [k % 8, (k / 8) % 8, k / 64].map { UInt8($0 * 32 + 16) }
            try v.append(
                Image<UInt8>(width: 16, height: 16, channels: 3) { d in for i in 0..<d.count { d[i] = code[i % 3] } })
        }
        try v.finish()
        for wanted in [300, 2, 499] {
            let frames = try VideoIO.readFrames(t.file("clip.mp4"), selection: .evenlySpaced(wanted))
            #expect(frames.map(\.index) == (try VideoIO.indices(.evenlySpaced(wanted), count: 500)))
            for (index, image) in frames {
                let shown = (0..<3).map { Int(image[8, 8, $0]) / 32 }
                #expect(shown[0] + 8 * shown[1] + 64 * shown[2] == index, "frame \(index) shows \(shown)")
            }
        }
        // The expression does not grow with the frames wanted.
        #expect(VideoIO.evenlySpacedExpression(count: 100_000, wanted: 30_000).count < 80)
    }

    /// A file probed once is not probed again while unchanged, and is when it changes.
    @Test func aChangedVideoIsProbedAgain() throws {
        let t = TempDir()
        func write(_ frames: Int, _ w: Int) throws {
            try? FileManager.default.removeItem(atPath: t.file("clip.mp4"))
            let v = try VideoWriter(path: t.file("clip.mp4"), width: w, height: 48, framesPerSecond: 10)
            for k in 0..<frames {
                try v.append(
                    Image<UInt8>(width: w, height: 48, channels: 3) { d in
                        for i in 0..<d.count { d[i] = UInt8(k * 9 % 256) }
                    })
            }
            try v.finish()
        }
        try write(6, 64)
        #expect(try VideoIO.probe(t.file("clip.mp4")).frameCount == 6)
        #expect(try VideoIO.probe(t.file("clip.mp4")).frameCount == 6)
        try write(9, 96)
        let info = try VideoIO.probe(t.file("clip.mp4"))
        #expect(info.frameCount == 9 && info.width == 96, "\(info)")
    }

    @Test func notAVideo() throws {
        let t = TempDir()
        _ = FileManager.default.createFile(atPath: t.file("x.mp4"), contents: Data("nope".utf8))
        #expect(throws: VideoError.self) { try VideoIO.probe(t.file("x.mp4")) }
        #expect(throws: ImageIOError.fileNotFound(path: t.file("missing.mp4"))) {
            try VideoIO.probe(t.file("missing.mp4"))
        }
    }
}
