import CHeif
import CKernels
import CPNG
import CTurboJPEG
import EvanescoAlign
import EvanescoCore
import EvanescoDepth
import EvanescoIO
import EvanescoStack
import Foundation
import EvanescoFaces

func now() -> Double { Date().timeIntervalSinceReferenceDate }
func median(_ v: [Double]) -> Double {
    let s = v.sorted()
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

func bareTurboJPEG(_ bytes: [UInt8]) {
    guard let h = tjInitDecompress() else { fatalError() }
    var w: Int32 = 0, ht: Int32 = 0, ss: Int32 = 0, cs: Int32 = 0
    _ = bytes.withUnsafeBufferPointer { tjDecompressHeader3(h, $0.baseAddress, UInt($0.count), &w, &ht, &ss, &cs) }
    let buf = UnsafeMutablePointer<UInt8>.allocate(capacity: Int(w) * Int(ht) * 3)
    _ = bytes.withUnsafeBufferPointer {
        tjDecompress2(h, $0.baseAddress, UInt($0.count), buf, w, w * 3, ht, Int32(TJPF_RGB.rawValue), 0)
    }
    buf.deallocate()
    tjDestroy(h)
}

/// A PNG through libpng and zlib alone (the shim's calls, as PNGCodec makes them for a file the
/// plain-PNG reader leaves to libpng).
func bareLibpng(_ bytes: [UInt8]) {
    var io = evn_png_io()
    defer { evn_png_read_end(&io) }
    bytes.withUnsafeBufferPointer { buf in
        guard evn_png_read_begin(&io, buf.baseAddress, buf.count) == 0 else {
            fatalError("libpng could not read the header")
        }
        let h = Int(png_get_image_height(io.png, io.info))
        let rowBytes = Int(png_get_rowbytes(io.png, io.info))
        let out = UnsafeMutablePointer<UInt8>.allocate(capacity: rowBytes * h)
        defer { out.deallocate() }
        var rows: [UnsafeMutablePointer<UInt8>?] = (0..<h).map { out + $0 * rowBytes }
        guard rows.withUnsafeMutableBufferPointer({ evn_png_read_rows(&io, $0.baseAddress) }) == 0 else {
            fatalError("libpng rows")
        }
    }
}

func bareLibheif(_ bytes: [UInt8]) {
    let ctx = evn_heif_context_alloc()
    _ = bytes.withUnsafeBytes { evn_heif_context_read_from_memory_without_copy(ctx, $0.baseAddress, $0.count, nil) }
    var handle: OpaquePointer? = nil
    _ = evn_heif_context_get_primary_image_handle(ctx, &handle)
    var img: OpaquePointer? = nil
    _ = evn_heif_decode_image(handle, &img, heif_colorspace_RGB, heif_chroma_interleaved_RGB, nil)
    evn_heif_image_release(img)
    evn_heif_image_handle_release(handle)
    evn_heif_context_free(ctx)
}

func runTool(_ exe: String, _ args: [String]) throws {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: exe)
    p.arguments = args
    p.standardOutput = FileHandle.nullDevice
    p.standardError = FileHandle.nullDevice
    try p.run()
    p.waitUntilExit()
}

/// The JPEG and PNG frames of a burst folder, sorted, or nil when it has fewer than two.
func burstFrames(_ path: String) -> [String]? {
    guard
        let files = try? FileManager.default.contentsOfDirectory(atPath: path).filter({
            $0.hasSuffix(".jpg") || $0.hasSuffix(".png")
        }).sorted(),
        files.count >= 2
    else { return nil }
    return files
}

/// A lens-blur set-up on a real depth photo: the renderer, its full-size signed blur diameters for
/// the default aperture, focused at `focus` (fractions of the photo).
func lensSetup(_ path: String, focus: (Double, Double)) throws -> (PortraitRenderer, Image<Float>, Float) {
    let r = try PortraitRenderer(contentsOf: path)
    let f = try r.focusValue(.point(PhotoPoint(x: focus.0, y: focus.1, fractional: true))).value
    let a = PortraitRenderer.defaultAperture(width: r.image.width, height: r.image.height)
    var c = r.normalized.map.resized(width: r.image.width, height: r.image.height, interpolation: .bilinear)
    c.samples.withUnsafeMutableBufferPointer { p in for i in 0..<p.count { p[i] = a * (p[i] - f) } }
    return (r, c, f)
}

let lensPhotos: [(String, (Double, Double))] = [
    ("depth/pug-iphone13pro/pug.heic", (0.55, 0.55)),
    ("depth/truedepth-iphone/heic_face_data.heic", (0.5, 0.4)),
    ("depth/truedepth-iphone/heic_depth_data.heic", (0.5, 0.4)),
    ("depth/gdepth-lensblur/lensblur_gdepth_compound.jpg", (0.5, 0.5))
]
