import Foundation
import Testing
import EvanescoCore
import EvanescoIO
@testable import EvanescoDepth
import EvanescoFaces
import SharedTestData

/// The shared sample data (``SharedTestData``, the one place that finds it).
typealias Shared = SharedTestData

/// IoU of two masks thresholded at 0.5 (8-bit: > 127).
func iou(_ a: Image<UInt8>, _ b: Image<UInt8>) -> Double {
    var inter = 0, union = 0
    for i in 0..<a.samples.count {
        let x = a.samples[i] > 127, y = b.samples[i] > 127
        if x && y { inter += 1 }
        if x || y { union += 1 }
    }
    return Double(inter) / Double(max(1, union))
}

@Suite("Backdrop pipeline on self-made frames")
struct BackdropSynthetic {
    /// 160x120 colour; depth 80x60 in metres: a "person" disc at 1 m, a wall at 3 m, some holes.
    static func frame(personX: Int = 40) -> (color: Image<UInt8>, depth: Image<Float>) {
        let color = Image<UInt8>(width: 160, height: 120, channels: 3) { d in
            for i in 0..<(160 * 120) {
                d[3 * i] = 200
                d[3 * i + 1] = 150
                d[3 * i + 2] = 100
            }
        }
        let depth = Image<Float>(width: 80, height: 60, channels: 1) { d in
            for y in 0..<60 {
                for x in 0..<80 {
                    let inside = (x - personX) * (x - personX) + (y - 30) * (y - 30) < 15 * 15
                    d[y * 80 + x] = inside ? ((x + y) % 9 == 0 ? 0 : 1.0) : 3.0  // holes inside the person
                }
            }
        }
        return (color, depth)
    }

    @Test("Subject depth from the face box median; cutoff = subject + 0.25 m; the person is kept, the wall replaced")
    func cut() throws {
        let (color, depth) = Self.frame()
        let bg = Image<UInt8>(width: 40, height: 30, channels: 3)  // black, scaled to fill
        var sample = BackdropOptions()
        sample.snapCutoffToGap = false
        let face = DetectedBox(x: 60, y: 40, width: 40, height: 40)
        let s = try BackdropPipeline(options: sample, background: bg).process(
            color: color, depth: depth, face: face, subject: .face)
        #expect(s.info.subjectDepth == 1 && s.info.cutoff == 1.25 && s.info.subject == .face)
        // By default the cutoff moves into the empty depth gap behind the subject (1 m person, 3 m wall).
        let pipe = BackdropPipeline(background: bg)
        let r = try pipe.process(color: color, depth: depth, face: face, subject: .face, keepMask: true)
        #expect(r.info.cutoff > 1.04 && r.info.cutoff < 1.25, "\(r.info.cutoff)")
        let m = try #require(r.mask)
        #expect(m[80, 60, 0] == 255 && m[150, 10, 0] == 0)  // centre of the person, the wall
        #expect(r.frame[80, 60, 0] == 200 && r.frame[150, 10, 0] == 0)
        // Holes inside the person were voted foreground: the mask has no dips there.
        #expect((50..<70).allSatisfy { m[80, $0, 0] == 255 })
    }

    @Test("No face: falls back to the nearest large depth region and says so")
    func fallback() throws {
        let (color, depth) = Self.frame()
        let r = try BackdropPipeline().process(color: color, depth: depth, face: nil, subject: .face)
        guard case .nearestRegion(let percent, .noFace) = r.info.subject else {
            Issue.record("\(r.info.subject)")
            return
        }
        #expect(percent > 10 && r.info.subject.description.contains("fell back"))
        #expect(abs(r.info.subjectDepth - 1) < 0.03)
        let empty = Image<Float>(width: 80, height: 60, channels: 1)
        #expect(throws: BackdropError.self) {
            try BackdropPipeline().process(color: color, depth: empty, face: nil, subject: .face)
        }
    }

    @Test("Temporal smoothing: the cutoff moves half way towards a new subject depth; a jump of > 0.5 m resets it")
    func temporal() throws {
        var o = BackdropOptions()
        o.snapCutoffToGap = false
        let pipe = BackdropPipeline(options: o)
        #expect(pipe.cutoff(subject: 1.0) == 1.25)
        #expect(pipe.cutoff(subject: 1.2) == 1.35)
        #expect(pipe.cutoff(subject: 2.5) == 2.75)
    }

    @Test("Depth formats: mm16, disparity8 with its range, metres with holes")
    func formats() {
        let mm = DepthEncoding.millimetres16.metres(
            .uint16(Image(width: 2, height: 1, channels: 1, samples: [0, 1500])))
        #expect(mm.samples == [0, 1.5])
        let d8 = DepthEncoding.disparity8(min: 0.5, max: 3).metres(
            .uint8(Image(width: 2, height: 1, channels: 1, samples: [0, 255])))
        #expect(d8.samples == [2, 1 / Float(3)])
        let f = DepthEncoding.identity.metres(.float32(Image(width: 3, height: 1, channels: 1, samples: [.nan, -1, 2])))
        #expect(f.samples == [0, 0, 2])
        // Disparity from 0 (infinitely far, unknown) and the 16-bit table path on a large frame.
        let far = DepthEncoding.disparity8(min: 0, max: 2).metres(
            .uint8(Image(width: 3, height: 1, channels: 1, samples: [0, 51, 255])))
        #expect(far.samples[0] == 0 && abs(far.samples[1] - 2.5) < 1e-5 && far.samples[2] == 0.5)
        let big = Image<UInt16>(
            width: 300, height: 300, channels: 1,
            samples: ContiguousArray((0..<90_000).map { UInt16(truncatingIfNeeded: $0 &* 7919) }))
        let viaTable = DepthEncoding.millimetres16.metres(.uint16(big))
        #expect(viaTable.samples.indices.allSatisfy { viaTable.samples[$0] == Float(Double(big.samples[$0]) / 1000) })
    }

    @Test("The fused upscale + blend equals a plain bicubic upscale and blend")
    func compositeMatchesReference() {
        let w = 37, h = 23
        let mask = (0..<(w * h)).map { i -> Float in Float((i * 37) % 101) / 100 }
        let color = Image<UInt8>(width: 150, height: 90, channels: 3) { d in
            for i in 0..<d.count { d[i] = UInt8(i % 251) }
        }
        let bg = Image<UInt8>(width: 150, height: 90, channels: 3) { d in
            for i in 0..<d.count { d[i] = UInt8((i * 7) % 253) }
        }
        let out = BackdropPipeline(background: bg).composite(
            color: color, mask: mask, width: w, height: h, keepMask: true)
        let up = Image<Float>(width: w, height: h, channels: 1, samples: ContiguousArray(mask)).resized(
            width: 150, height: 90, interpolation: .bicubic)
        var worst = 0
        for y in 0..<90 {
            for x in 0..<150 {
                let m = Int32(min(max(up[x, y, 0], 0), 1) * 256 + 0.5)
                for c in 0..<3 {
                    let e = (Int32(color[x, y, c]) * m + Int32(bg[x, y, c]) * (256 - m) + 128) >> 8
                    worst = max(worst, abs(Int(e) - Int(out.frame[x, y, c])))
                }
            }
        }
        #expect(worst <= 1)
    }
}

@Suite("Faces and masks on ../shared/data", .enabled(if: Shared.available, Shared.absent))
struct BackdropReal {
    static let ranges: [String: (Float, Float)] = [
        "heic_depth_data": (0.508301, 3.767578), "heic_face_data": (0.493652, 3.402344),
        "jpeg_depth_data": (0.554199, 2.808594)
    ]
    let cascade = try! CascadeClassifier.load(Shared.root + "/faces/cascades/haarcascade_frontalface_default.xml")

    func close(_ a: DetectedBox, _ b: (Int, Int, Int, Int), tolerance: Double = 0.2) -> Bool {
        let size = Double(b.2)
        return abs(Double(a.x - b.0)) <= tolerance * size && abs(Double(a.y - b.1)) <= tolerance * size
            && abs(Double(a.width - b.2)) <= tolerance * size && abs(Double(a.height - b.3)) <= tolerance * size
    }

    @Test("Faces: within 20 % of OpenCV 4.13's detectMultiScale with the same cascade; none where OpenCV finds none")
    func faces() throws {
        // OpenCV's boxes (anchor_backdrop.py's preprocessing: long side 640 by INTER_AREA, equalizeHist,
        // scaleFactor 1.1, minNeighbors 5, minSize 40), mapped back to the image's pixels.
        let astro = try ImageCodecs.read(Shared.root + "/faces/samples/astronaut.png").image
        var finder = FaceFinder(cascade: cascade)
        finder.workingSize = 640
        // astronaut.png is 512x512: OpenCV upsampled it to 640; its box [219, 81, 123, 123] is [175, 65, 98, 98] here.
        let a = FaceFinder(cascade: cascade).find(in: astro)
        #expect(a.count == 1 && close(a[0], (175, 65, 98, 98)), "\(a)")
        let face = try ImageCodecs.read(Shared.root + "/rgbd/truedepth-frames/heic_face_data_color.jpg").image
        let f = finder.find(in: face)
        // OpenCV at 480x640: [91, 158, 277, 277], x 4.825 to 2316x3088.
        #expect(f.count == 1 && close(f[0], (439, 762, 1337, 1337)), "\(f)")
        for shot in ["heic_depth_data", "jpeg_depth_data"] {
            let img = try ImageCodecs.read(Shared.root + "/rgbd/truedepth-frames/\(shot)_color.jpg").image
            #expect(finder.find(in: img).isEmpty, "\(shot)")
        }
        let lbp = FaceFinder(
            cascade: try CascadeClassifier.load(Shared.root + "/faces/cascades/lbpcascade_frontalface_improved.xml")
        ).find(in: face)
        // OpenCV: [144, 227, 177, 177] at 480x640
        #expect(lbp.count == 1 && close(lbp[0], (695, 1095, 854, 854)), "\(lbp)")
    }

    @Test(
        """
        Masks: IoU with Apple's portrait matte >= 0.95 (face, jpeg) and >= 0.85 (heic_depth_data, chair at shoulder \
        depth)
        """
    )
    func masks() throws {
        for (shot, floor) in [("heic_face_data", 0.95), ("jpeg_depth_data", 0.95), ("heic_depth_data", 0.85)] {
            let dir = Shared.root + "/rgbd/truedepth-frames/"
            let color = try ImageCodecs.read(dir + "\(shot)_color.jpg").image.uint8
            let dpath =
                FileManager.default.fileExists(atPath: dir + "\(shot)_disparity8.png")
                ? dir + "\(shot)_disparity8.png" : dir + "\(shot)_disparity8.jpg"
            let depth = DepthEncoding.disparity8(min: Double(Self.ranges[shot]!.0), max: Double(Self.ranges[shot]!.1))
                .metres(try ImageCodecs.read(dpath).image)
            let mpath =
                FileManager.default.fileExists(atPath: dir + "\(shot)_portraitmatte.png")
                ? dir + "\(shot)_portraitmatte.png" : dir + "\(shot)_portraitmatte.jpg"
            let matte = try ImageCodecs.read(mpath).image.uint8.withChannels(1).resized(
                width: color.width, height: color.height, interpolation: .bilinear)
            let face = FaceFinder(cascade: cascade).find(in: .uint8(color)).first
            var results: [String] = []
            for variant in ["sample", "default", "default+colour"] {
                var o = BackdropOptions()
                o.snapCutoffToGap = variant != "sample"
                o.refineWithColor = variant == "default+colour"
                let r = try BackdropPipeline(options: o).process(
                    color: color, depth: depth, face: face, subject: .face, keepMask: true)
                let score = iou(try #require(r.mask), matte)
                results.append(String(format: "%@ %.4f", variant, score))
                // The sample's plain cut must reach the issue's floors; ours must do better than 0.95 on all three.
                #expect(score >= (variant == "sample" ? floor : 0.95), "\(shot) \(variant): IoU \(score)")
                if shot != "heic_face_data" {
                    #expect(
                        r.info.subject == .nearestRegion(percent: 0, fallback: .noFace)
                            || r.info.subject.description.contains("fell back"), "\(shot): \(r.info.subject)")
                }
            }
            print("IoU \(shot): \(results.joined(separator: "; "))")
        }
    }
}
