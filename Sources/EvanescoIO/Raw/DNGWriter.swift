import CTIFF
import EvanescoCore
import Foundation

/// Writes raw frames as DNG 1.4 files through libtiff: the mosaic (or linear RGB) uncompressed
/// in 16 bits, with the frame's CFA, levels, colour calibration (ColorMatrix1/2, illuminants,
/// ForwardMatrix, AsShotNeutral, BaselineExposure), NoiseProfile, orientation, camera names and
/// an EXIF directory with the capture settings. Atomically, like every output.
public enum DNGWriter {
    /// The name written as Software.
    public static let software = "Evanesco"

    /// Writes `raw` to `path` (a temporary file renamed into place; an existing file only with
    /// `overwrite`).
    public static func write(_ raw: RawMosaic, to path: String, overwrite: Bool = false, description: String = "")
        throws
    {
        guard raw.width > 0, raw.height > 0 else {
            throw ImageIOError.encodeFailed(path: path, format: "DNG", detail: "the raw frame is empty")
        }
        let numbers =
            raw.blackLevels + [raw.whiteLevel, raw.color.baselineExposure] + raw.color.colorMatrix
            + raw.color.asShotNeutral + (raw.color.colorMatrix2 ?? []) + (raw.color.forwardMatrix ?? [])
            + (raw.color.forwardMatrix2 ?? [])
        guard numbers.allSatisfy(\.isFinite), raw.whiteLevel >= 1, raw.whiteLevel <= 65535,
            raw.color.colorMatrix.count == 9, raw.color.asShotNeutral.count == 3
        else {
            throw ImageIOError.encodeFailed(
                path: path, format: "DNG",
                detail: "the frame's levels or colour are not finite numbers in range (white \(raw.whiteLevel))")
        }
        var info = tags(raw)
        let cap = raw.capture
        let datetime = cap.timestamp > 0 ? exifDate(cap.timestamp) : ""
        // UniqueCameraModel is required; LibRaw and dcraw also take the camera's make from it when
        // Make is absent, and refuse a DNG with no make at all.
        let named = cap.uniqueCameraModel.trimmingCharacters(in: .whitespaces)
        let fallback = "\(cap.make) \(cap.model)".trimmingCharacters(in: .whitespaces)
        let unique = !named.isEmpty ? named : !fallback.isEmpty ? fallback : "Unknown camera"
        try AtomicOutput.write(to: path, overwrite: overwrite) { temp in
            var io = evn_tiff_io()
            let ok = cap.make.withCString { make in
                cap.model.withCString { model in
                    unique.withCString { unique in
                        software.withCString { sw in
                            description.withCString { desc in
                                datetime.withCString { date in
                                    info.make = make
                                    info.model = model
                                    info.unique_model = unique
                                    info.software = sw
                                    info.description = desc
                                    info.datetime = date
                                    return raw.samples.samples.withUnsafeBufferPointer {
                                        evn_dng_write(&io, temp, &info, $0.baseAddress)
                                    }
                                }
                            }
                        }
                    }
                }
            }
            if ok == 0 {
                let reason = withUnsafeBytes(of: io.error) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                throw ImageIOError.encodeFailed(
                    path: path, format: "DNG", detail: reason.isEmpty ? "libtiff failed" : reason)
            }
        }
    }

    /// The DNG's numbers (the strings are set where they are written).
    static func tags(_ raw: RawMosaic) -> evn_dng_info {
        var info = evn_dng_info()
        info.width = UInt32(raw.width)
        info.height = UInt32(raw.height)
        if let cfa = raw.cfa {
            info.samples_per_pixel = 1
            info.cfa = (cfa.colors[0], cfa.colors[1], cfa.colors[2], cfa.colors[3])
        } else {
            info.samples_per_pixel = 3
        }
        info.black = (raw.blackLevels[0], raw.blackLevels[1], raw.blackLevels[2], raw.blackLevels[3])
        info.white = UInt32(max(1, min(65535, raw.whiteLevel.rounded())))
        let c = raw.color
        fill(&info.color_matrix1, c.colorMatrix)
        info.illuminant1 = UInt16(clamping: c.illuminant)
        if let m2 = c.colorMatrix2 {
            fill(&info.color_matrix2, m2)
            info.has_color_matrix2 = 1
            info.illuminant2 = UInt16(clamping: c.illuminant2 ?? 17)
        }
        if let f = c.forwardMatrix {
            fill(&info.forward_matrix1, f)
            info.has_forward_matrix1 = 1
        }
        if let f = c.forwardMatrix2, c.colorMatrix2 != nil {
            fill(&info.forward_matrix2, f)
            info.has_forward_matrix2 = 1
        }
        info.as_shot_neutral = (c.asShotNeutral[0], c.asShotNeutral[1], c.asShotNeutral[2])
        info.baseline_exposure = c.baselineExposure
        if let n = raw.noise {
            let values = n.planes.prefix(3).flatMap { [$0.scale, $0.offset] }
            withUnsafeMutableBytes(of: &info.noise_profile) { b in
                for (i, v) in values.enumerated() { b.storeBytes(of: v, toByteOffset: i * 8, as: Double.self) }
            }
            info.noise_values = Int32(values.count)
        }
        info.orientation = UInt16(raw.orientation.rawValue)
        let cap = raw.capture
        info.iso = cap.iso
        info.exposure_time = cap.exposureTime
        info.f_number = cap.aperture
        info.focal_length = cap.focalLength
        return info
    }

    static func fill<T>(_ tuple: inout T, _ values: [Float]) {
        withUnsafeMutableBytes(of: &tuple) { b in
            for (i, v) in values.prefix(9).enumerated() { b.storeBytes(of: v, toByteOffset: i * 4, as: Float.self) }
        }
    }

    /// EXIF's "YYYY:MM:DD HH:MM:SS" (UTC) of a time in seconds since 1970.
    static func exifDate(_ t: Int) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "UTC")
        f.dateFormat = "yyyy:MM:dd HH:mm:ss"
        return f.string(from: Date(timeIntervalSince1970: TimeInterval(t)))
    }
}
