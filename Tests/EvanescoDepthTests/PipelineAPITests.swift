import Foundation
import Testing
import EvanescoCore
import EvanescoIO
@testable import EvanescoDepth
import EvanescoFaces

/// A 96x64 photo whose left half is near (disparity 1) and right half far (disparity 0.25),
/// with a 48x32 map; grey 200 on the left, 60 on the right.
func splitPhoto(accuracy: DepthAccuracy? = .absolute) -> DepthPhoto {
    let photo = Image<UInt8>(width: 96, height: 64, channels: 3) { d in
        for y in 0..<64 { for x in 0..<96 { for c in 0..<3 { d[(y * 96 + x) * 3 + c] = x < 48 ? 200 : 60 } } }
    }
    let map = Image<Float>(width: 48, height: 32, channels: 1) { d in
        for y in 0..<32 { for x in 0..<48 { d[y * 48 + x] = x < 24 ? 1 : 0.25 } }
    }
    return DepthPhoto(
        path: "split.jpg", format: .jpeg, photo: DecodedImage(image: .uint8(photo), format: .jpeg), width: 96,
        height: 64,
        orientation: .up, depth: depthData(map, accuracy: accuracy), auxiliary: [], warnings: [])
}

@Suite("PortraitRenderer")
struct PortraitRendererTests {
    @Test("Focus by value, distance and point; spotlight keeps the focused half and blacks out the other")
    func focusAndSpotlight() throws {
        let r = try PortraitRenderer(splitPhoto())
        var s = PortraitSettings()
        s.focus = .normalized(1)
        var out = try r.render(s)
        #expect(out.report.focus == 1 && out.report.effect == .spotlight)
        #expect(out.image.uint8[10, 30, 0] == 200 && out.image.uint8[85, 30, 0] == 0)
        s.focus = .distance(metres: 4)  // disparity 0.25: the far half
        out = try r.render(s)
        #expect(abs(out.report.focus) < 1e-6 && out.image.uint8[10, 30, 0] == 0 && out.image.uint8[85, 30, 0] == 60)
        s.focus = .point(PhotoPoint(x: 0.9, y: 0.5, fractional: true))
        #expect(try r.render(s).report.focus == 0)
        s.focus = .point(PhotoPoint(x: 10, y: 10))
        #expect(try r.render(s).report.focus == 1)
    }

    @Test("Typed errors: a distance on a relative map, a point outside, NaN settings, no matte")
    func errors() throws {
        let rel = try PortraitRenderer(splitPhoto(accuracy: .relative))
        var s = PortraitSettings()
        s.focus = .distance(metres: 2)
        #expect(throws: FocusError.relativeAccuracy(path: "split.jpg")) { try rel.render(s) }
        s.focus = .point(PhotoPoint(x: 500, y: 10))
        #expect(throws: FocusError.self) { try rel.render(s) }
        for bad in [Float.nan, .infinity, -1] {
            var t = PortraitSettings()
            t.slope = bad
            #expect(throws: PortraitError.self) { try rel.render(t) }
            t = PortraitSettings()
            t.focus = .normalized(bad)
            #expect(throws: PortraitError.self) { try rel.render(t) }
        }
        var m = PortraitSettings()
        m.refine = .matte
        #expect(throws: DepthError.self) { try rel.render(m) }
        #expect(
            PhotoPoint("nan,3") == nil && PhotoPoint("-1,2") == nil && PhotoPoint("0.4,0.3")?.fractional == true
                && PhotoPoint("4,3")?.fractional == false)
    }

    @Test("A preview renderer scales the photo, not the focus: the same point gives the same focus")
    func previewScaling() throws {
        let full = try PortraitRenderer(splitPhoto())
        let small = full.scaled(toLongSide: 48)
        #expect(small.image.width == 48 && small.image.height == 32 && abs(small.scale - 0.5) < 1e-9)
        var s = PortraitSettings()
        s.effect = .blur
        s.focus = .point(PhotoPoint(x: 80, y: 30))  // full-size pixels: the far half
        let a = try full.render(s), b = try small.render(s)
        #expect(a.report.focus == b.report.focus && b.image.width == 48)
        #expect(full.scaled(toLongSide: 500) === full)
    }
}

@Suite("BackdropSession")
struct BackdropSessionTests {
    /// A person (depth 1 m) in the middle third of a 3 m scene, 16-bit millimetres.
    static func frames() -> (AnyImage, AnyImage) {
        let color = Image<UInt8>(width: 120, height: 90, channels: 3) { d in for i in 0..<d.count { d[i] = 180 } }
        let depth = Image<UInt16>(width: 60, height: 45, channels: 1) { d in
            for y in 0..<45 { for x in 0..<60 { d[y * 60 + x] = (20..<40).contains(x) && y > 10 ? 1000 : 3000 } }
        }
        return (.uint8(color), .uint16(depth))
    }

    @Test("Sniffs mm16 from 16-bit depth, falls back without a cascade and says why, keeps the subject")
    func noCascade() throws {
        var o = BackdropSessionOptions()
        o.subject = .face
        let session = BackdropSession(options: o, cascade: nil)
        let (c, d) = Self.frames()
        let f = try session.process(color: c, depth: d, keepMask: true)
        #expect(session.depthEncoding == .millimetres16 && session.frameIndex == 1)
        guard case .nearestRegion(_, .noCascade) = f.report.subject else {
            Issue.record("\(f.report.subject)")
            return
        }
        #expect(abs(f.report.subjectDepth - 1) < 0.03)
        let mask = try #require(f.mask)
        #expect(mask[60, 60, 0] == 255 && mask[5, 60, 0] == 0)
        #expect(f.image[60, 60, 0] == 180 && f.image[5, 60, 0] == 0)
    }

    @Test("A stream asked to stop stops before the next frame, keeps what it wrote and says why")
    func cancelledBetweenFrames() throws {
        let (c, d) = Self.frames()
        let color = MemoryFrameReader(frames: Array(repeating: c, count: 5), name: "colour")
        let depth = MemoryFrameReader(frames: Array(repeating: d, count: 5), name: "depth")
        let out = CountingWriter()
        var asked = 0
        let session = BackdropSession(options: BackdropSessionOptions(), cascade: nil)
        let report = session.run(
            color: color, depth: depth, to: out,
            isCancelled: {
                asked += 1
                return asked > 2
            })
        #expect(out.written == 2 && out.finished && report.framesWritten == 2, "\(report)")
        #expect(session.failure as? BackdropSessionError == .cancelled(after: 2))
        #expect(report.error == "cancelled after 2 frames")
    }

    /// Counts the frames written and whether the output was finished.
    final class CountingWriter: FrameWriter {
        var written = 0, finished = false
        func write(_ frame: Image<UInt8>) throws { written += 1 }
        func finish() throws { finished = true }
    }

    @Test("8-bit depth needs a format; a point outside the frame is a typed error, not a crash")
    func errors() throws {
        let (c, _) = Self.frames()
        let d8 = AnyImage.uint8(Image<UInt8>(width: 60, height: 45, channels: 1))
        #expect(throws: BackdropSessionError.depthFormatNeeded(bits: 8)) {
            try BackdropSession(cascade: nil).process(color: c, depth: d8)
        }
        // A depth map of another shape would give a silently wrong cut.
        let tall = AnyImage.uint16(Image(width: 10, height: 60, channels: 1))
        #expect(throws: BackdropSessionError.shapesDiffer(color: "\(c.width)x\(c.height)", depth: "10x60")) {
            try BackdropSession(cascade: nil).process(color: c, depth: tall)
        }
        var o = BackdropSessionOptions()
        o.subject = .point(x: 99_999_999, y: 99_999_999)
        #expect(throws: BackdropError.self) {
            try BackdropSession(options: o, cascade: nil).process(color: c, depth: Self.frames().1)
        }
        #expect(
            SubjectSelection("12,34") == .point(x: 12, y: 34) && SubjectSelection("12") == nil
                && SubjectSelection("-1,2") == nil)
        #expect(
            DepthEncoding("disparity8:0.2,2") == .disparity8(min: 0.2, max: 2)
                && DepthEncoding("disparity8:nan,2") == nil
                && DepthEncoding("disparity8:0.2,2")?.description == "disparity8:0.2,2.0"
                && DepthEncoding("pfm") == .identity)
        #expect(
            DepthEncoding("disparity8:2,1") == nil && DepthEncoding("mm16") == .millimetres16
                && DepthEncoding.millimetres16.description == "mm16")
    }

    @Test("A portrait photo as a one-frame stream: depth in metres from disparity, the accuracy flagged")
    func portraitFrames() throws {
        let still = try PortraitFrames(splitPhoto(accuracy: .relative))
        #expect(still.relativeAccuracy && still.depthEncoding == .identity && still.color.knownCount == 1)
        guard case .float32(let metres)? = try still.depth.next() else {
            Issue.record("depth is not float")
            return
        }
        // Disparity 1 (1/m) is 1 m, disparity 0.25 is 4 m.
        #expect(metres.width == 48 && metres[0, 0, 0] == 1 && metres[47, 0, 0] == 4)
        #expect(try still.depth.next() == nil)
        var noDepth = splitPhoto()
        noDepth.depth = nil
        #expect(throws: DepthError.self) { try PortraitFrames(noDepth) }
        // Cut at the near half: the far half is replaced, the near half kept.
        var o = BackdropSessionOptions()
        o.subject = .nearest
        o.depthEncoding = still.depthEncoding
        let f = try BackdropSession(options: o, cascade: nil).process(
            color: try #require(try still.color.next()), depth: .float32(metres), keepMask: true)
        let mask = try #require(f.mask)
        #expect(mask[10, 32, 0] == 255 && mask[90, 32, 0] == 0)
    }
}
