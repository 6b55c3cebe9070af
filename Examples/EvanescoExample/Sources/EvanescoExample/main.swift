// The three systems of Evanesco through its public API, on data this program makes itself:
//   1. stack a hand-held burst with a moving object and check that the object is gone;
//   2. render portrait effects (focal blur, lens blur) from a photo + depth map;
//   3. replace the background of one colour + depth frame.
// Usage: swift run EvanescoExample [OUTPUT_DIR]    (default: a new temporary folder)
import EvanescoCore
import EvanescoDepth
import EvanescoIO
import EvanescoStack
import Foundation

let outDir =
    CommandLine.arguments.count > 1
    ? CommandLine.arguments[1]
    : NSTemporaryDirectory() + "evanesco-example-" + UUID().uuidString
try FileManager.default.createDirectory(atPath: outDir, withIntermediateDirectories: true)

/// A textured 320x240 scene: smooth stripes in three colours.
func scene(shiftX: Double = 0, shiftY: Double = 0, block: Int? = nil) -> Image<UInt8> {
    Image<UInt8>(width: 320, height: 240, channels: 3) { d in
        for y in 0..<240 {
            for x in 0..<320 {
                let sx = Float(Double(x) - shiftX), sy = Float(Double(y) - shiftY)
                let v = 128 + 50 * sinf(sx * 0.11) * cosf(sy * 0.07) + 30 * sinf((sx + 2 * sy) * 0.031)
                var px = (v, 255 - v, v * 0.5 + 40)
                // A passer-by
                if let b = block, (b..<(b + 40)).contains(x), (100..<140).contains(y) { px = (255, 255, 255) }
                let o = (y * 320 + x) * 3
                d[o] = UInt8(clampingRounded: px.0)
                d[o + 1] = UInt8(clampingRounded: px.1)
                d[o + 2] = UInt8(clampingRounded: px.2)
            }
        }
    }
}

// 1. Burst stacking: five frames, the camera drifting by up to 3 px, a white block walking across.
let shifts: [(Double, Double)] = [(0, 0), (1.5, -1), (-2, 0.5), (3, 2), (-1, -2.5)]
let burst = shifts.enumerated().map { k, s in
    BurstFrame(name: "frame\(k)", image: .uint8(scene(shiftX: s.0, shiftY: s.1, block: 20 + 60 * k)))
}
var options = StackOptions()
options.merge = .robust
let stacked = try BurstStacker.stack(burst, options: options)
let clean = stacked.image.uint8, truth = scene()
var worst = 0
for y in 100..<140 { for x in 20..<300 { worst = max(worst, abs(Int(clean[x, y, 0]) - Int(truth[x, y, 0]))) } }
try ImageCodecs.write(stacked.image, to: outDir + "/stacked.png", options: WriteOptions(overwrite: true))
print(
    "stack: \(stacked.usedFrames) of \(burst.count) frames merged (\(stacked.merge.rawValue)); the walker left at "
        + "most \(worst) grey levels"
)
for f in stacked.frames { print("  \(f.source): \(f.status.rawValue) \(f.homography.map { "\($0)" } ?? "")") }
guard worst <= 16 else { fatalError("the moving block should have vanished") }

// 2. Portrait: left half near (1 m), right half far (4 m); focus on the near half and blur the rest.
let map = Image<Float>(width: 160, height: 120, channels: 1) { d in
    for y in 0..<120 { for x in 0..<160 { d[y * 160 + x] = x < 80 ? 1 : 0.25 } }
}
let depth = DepthData(floatMap: map, kind: .disparity, units: "1/m", accuracy: .absolute, source: "example")
let photo = DepthPhoto(
    path: "example", format: .png, photo: DecodedImage(image: .uint8(truth), format: .png),
    width: 320, height: 240, depth: depth)
let renderer = try PortraitRenderer(photo)
var settings = PortraitSettings()
settings.effect = .blur
settings.focus = .distance(metres: 1)
settings.radius = 8
let portrait = try renderer.render(settings)
try ImageCodecs.write(portrait.image, to: outDir + "/portrait-blur.png", options: WriteOptions(overwrite: true))
print(
    "portrait: focus \(portrait.report.focus) (\(portrait.report.focusFrom)), "
        + "\(Int(portrait.report.mask.fractionOverHalf * 100)) % in focus"
)
// The same focus through a six-bladed lens: the near half stays as it is, the far half blurs.
settings.effect = .lens
settings.aperture = 16
settings.shape = ApertureShape(blades: 6)
let lens = try renderer.render(settings)
try ImageCodecs.write(lens.image, to: outDir + "/portrait-lens.png", options: WriteOptions(overwrite: true))
print(
    "lens: aperture \(lens.report.lens?.aperturePixels ?? 0) px, \(lens.report.lens?.statistics.layers ?? 0) depth "
        + "layers"
)
guard lens.image.uint8[40, 120, 0] == truth[40, 120, 0] else { fatalError("the in-focus half changed") }

// 3. Background replacement: a person at 1 m in the middle of a 3 m room, 16-bit millimetres.
let depthFrame = Image<UInt16>(width: 160, height: 120, channels: 1) { d in
    for y in 0..<120 { for x in 0..<160 { d[y * 160 + x] = (60..<100).contains(x) && y > 30 ? 1000 : 3000 } }
}
let beach = Image<UInt8>(width: 64, height: 48, channels: 3) { d in
    for i in stride(from: 0, to: d.count, by: 3) {
        d[i] = 40
        d[i + 1] = 120
        d[i + 2] = 220
    }
}
var backdropOptions = BackdropSessionOptions()
backdropOptions.subject = .nearest
let session = BackdropSession(options: backdropOptions, background: beach, cascade: nil)
let frame = try session.process(color: .uint8(truth), depth: .uint16(depthFrame))
try ImageCodecs.write(.uint8(frame.image), to: outDir + "/backdrop.png", options: WriteOptions(overwrite: true))
print(
    "backdrop: subject at \(frame.report.subjectDepth) m from \(frame.report.subject), cutoff \(frame.report.cutoff) m")
guard frame.image[10, 200, 2] == 220, frame.image[160, 200, 0] == truth[160, 200, 0] else {
    fatalError("background not replaced")
}

print("outputs in \(outDir)")
