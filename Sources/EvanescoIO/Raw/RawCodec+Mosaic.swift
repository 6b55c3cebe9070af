import CRaw
import Foundation
import EvanescoCore

extension RawCodec {
    /// The frame from LibRaw's metadata (and, for a DNG, its own tags), checked: black below
    /// white, finite invertible colour matrix, positive white balance.
    static func mosaic(
        _ m: evn_raw_meta, layout: RawMosaic.Layout, samples: Image<UInt16>, dng: DNGTags?, path: String,
        container: String
    ) throws -> RawMosaic {
        let black = withUnsafeBytes(of: m.black) { Array($0.bindMemory(to: Float.self)) }
        let white = m.white
        guard white.isFinite, white > 0, black.allSatisfy({ $0.isFinite && $0 >= 0 && $0 < white }) else {
            throw ImageIOError.corrupt(
                path: path, format: container,
                detail: "its black level (\(black)) is not below its white level (\(white))")
        }
        let color = try dng?.color(path: path) ?? libRawColor(m, path: path, container: container)
        var capture = RawCapture()
        // A DNG's names as written (LibRaw may have been handed a copy with some masked, and
        // normalises others).
        capture.make = dng?.first.string(271) ?? cString(m.make)
        capture.model = dng?.first.string(272) ?? cString(m.model)
        capture.software = dng?.first.string(305) ?? cString(m.software)
        let unique = dng?.first.string(50708) ?? cString(m.unique_model)
        capture.uniqueCameraModel = unique.isEmpty ? "\(capture.make) \(capture.model)" : unique
        capture.iso = m.iso.isFinite ? m.iso : 0
        capture.exposureTime = m.shutter.isFinite ? m.shutter : 0
        capture.aperture = m.aperture.isFinite ? m.aperture : 0
        capture.focalLength = m.focal_length.isFinite ? m.focal_length : 0
        capture.timestamp = Int(m.timestamp)
        return RawMosaic(
            samples: samples, layout: layout, blackLevels: black, whiteLevel: white, color: color,
            noise: dng?.noise, capture: capture, orientation: orientation(flip: Int(m.flip)))
    }

    /// LibRaw's flip (0, 3, 5, 6) as an EXIF orientation.
    static func orientation(flip: Int) -> Orientation {
        switch flip {
        case 3: .down
        case 5: .left
        case 6: .right
        default: .up
        }
    }

    /// A camera format's colour as LibRaw knows it: its XYZ-to-camera matrix (from its tables)
    /// and the maker's as-shot multipliers (else the daylight ones).
    static func libRawColor(_ m: evn_raw_meta, path: String, container: String) throws -> RawColor {
        let camXYZ = withUnsafeBytes(of: m.cam_xyz) { Array($0.bindMemory(to: Float.self).prefix(9)) }
        guard camXYZ.allSatisfy(\.isFinite), Matrix3(camXYZ).inverse != nil else {
            throw ImageIOError.unsupportedFormat(
                path: path,
                format: "this camera (\(cString(m.make)) \(cString(m.model)): LibRaw has no colour matrix for it)")
        }
        func neutral(_ mul: [Float]) -> [Float]? {
            guard mul.prefix(3).allSatisfy({ $0.isFinite && $0 > 0 }) else { return nil }
            return mul.prefix(3).map { mul[1] / $0 }
        }
        let cam = withUnsafeBytes(of: m.cam_mul) { Array($0.bindMemory(to: Float.self)) }
        let pre = withUnsafeBytes(of: m.pre_mul) { Array($0.bindMemory(to: Float.self)) }
        guard let n = neutral(cam) ?? neutral(pre) else {
            throw ImageIOError.corrupt(
                path: path, format: container, detail: "it has no usable white balance (multipliers \(cam))")
        }
        return RawColor(colorMatrix: camXYZ, illuminant: 21, asShotNeutral: n)
    }

    static func cString<T>(_ tuple: T) -> String {
        withUnsafeBytes(of: tuple) { b in
            String(decoding: b.prefix { $0 != 0 }, as: UTF8.self).trimmingCharacters(in: .whitespaces)
        }
    }
}
