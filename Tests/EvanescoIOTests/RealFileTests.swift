import Foundation
import SubprocessTestSupport
import Testing
import EvanescoCore
@testable import EvanescoIO

@Suite(.enabled(if: SharedData.available, SharedData.absent))
struct RealFiles {
    @Test func iphoneHEICPrimaryImage() throws {
        let d = try ImageCodecs.read(SharedData.path("depth/pug-iphone13pro/pug.heic"))
        #expect(d.format == .heif)
        #expect(d.image.width == 4032 && d.image.height == 3024 && d.image.channels == 3 && d.image.bitDepth == 8)
        #expect(d.auxiliary.contains("depth"))
        #expect(d.auxiliary.contains("urn:com:apple:photo:2020:aux:hdrgainmap"))
        #expect(d.metadata.icc?.count == 536)
        let info = try ImageCodecs.probe(SharedData.path("depth/truedepth-iphone/heic_face_data.heic"))
        #expect(info.storedWidth == 2316 && info.storedHeight == 3088)
        for matte in [
            "portraiteffectsmatte", "semanticskinmatte", "semantichairmatte", "semanticteethmatte",
            "semanticglassesmatte"
        ] {
            #expect(info.auxiliary.contains { $0.hasSuffix(matte) }, "\(matte)")
        }
    }

    @Test func appleJPEGAndItsMPFImages() throws {
        let path = SharedData.path("depth/truedepth-iphone/jpeg_depth_data.jpg")
        let d = try ImageCodecs.read(path)
        #expect(d.image.width == 2316 && d.image.height == 3088)
        #expect(d.auxiliary == ["disparity", "portraiteffectsmatte"])
        // MPF entries are byte-exact with exiftool's extractions.
        let bytes = bytesOf(path)
        let entries = MPFIndex.entries(bytes)
        #expect(entries.count == 2)
        let golden2 = bytesOf(SharedData.path("depth/truedepth-iphone/derived/jpeg_depth_data.MPImage2_disparity.jpg"))
        let golden3 = bytesOf(
            SharedData.path("depth/truedepth-iphone/derived/jpeg_depth_data.MPImage3_portraitmatte.jpg"))
        #expect(Array(bytes[entries[0].offset..<(entries[0].offset + entries[0].size)]) == golden2)
        #expect(Array(bytes[entries[1].offset..<(entries[1].offset + entries[1].size)]) == golden3)
        let disparity = try ImageCodecs.decode(golden2, path: "MPImage2")
        #expect(disparity.image.width == 480 && disparity.image.height == 640)
    }

    @Test func pngFramesAndGreyDepth() throws {
        let g = try ImageCodecs.read(SharedData.path("registration/graffiti/graf1.png"))
        #expect(g.image.width == 800 && g.image.height == 640)
        let depth = try ImageCodecs.read(SharedData.path("depth/pug-iphone13pro/pug_depth.png"))
        #expect(depth.image.channels == 1 && depth.image.width == 768 && depth.image.height == 576)
        let f = try ImageCodecs.read(SharedData.path("bursts/vtest-pedestrians/frames/vtest_000.png"))
        #expect(f.image.width == 768 && f.image.height == 576)
    }

    /// libheif's own tool decodes the same file to PNG: our primary image must match it exactly.
    @Test(
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: "/usr/bin/heif-convert"),
            "needs heif-convert (libheif-examples)"))
    func heicDecodeEqualsHeifConvert() throws {
        let t = TempDir()
        let path = SharedData.path("depth/truedepth-iphone/heic_face_data.heic")
        let r = try Subprocess.run("/usr/bin/heif-convert", [path, t.file("ref.png")], stdout: .discard, seconds: 120)
        #expect(r.status == 0, "\(r.stderr)")
        let ours = try ImageCodecs.read(path).image
        let ref = try ImageCodecs.read(t.file("ref.png")).image
        #expect(ours.width == 2316 && ours.height == 3088)
        #expect(ours == ref)
    }

    @Test func videoFramesFromOpenCVSample() throws {
        let path = SharedData.path("bursts/vtest-pedestrians/vtest.avi")
        let info = try VideoIO.probe(path)
        #expect(info.width == 768 && info.height == 576 && info.frameCount == 795)
        // The derived frames are every 40th frame: ours must match frame 40 closely.
        var got: [Int: Image<UInt8>] = [:]
        try VideoIO.decodeFrames(path, selection: .everyKth(40)) { i, img in if i <= 40 { got[i] = img } }
        let ref = try ImageCodecs.read(SharedData.path("bursts/vtest-pedestrians/frames/vtest_001.png")).image.uint8
        let mine = try #require(got[40])
        var diff = 0.0
        for (a, b) in zip(mine.samples, ref.samples) { diff += Double(abs(Int(a) - Int(b))) }
        #expect(diff / Double(ref.samples.count) < 1.0)
    }
}
