import EvanescoCore
import EvanescoIO
import Foundation

/// What `evanesco info` adds for a camera raw: the sensor's data as the finish and the merge use
/// it (`--json`: under `raw`, snake_case keys).
struct RawInfo: Encodable {
    var container: String
    var make: String
    var model: String
    var uniqueCameraModel: String
    var layout: String
    var cfa: String?
    var blackLevels: [Float]
    var whiteLevel: Float
    var asShotNeutral: [Float]
    var colorMatrix: [Float]
    var calibrationIlluminant: Int
    var colorMatrix2: [Float]?
    var calibrationIlluminant2: Int?
    var forwardMatrix: [Float]?
    var baselineExposure: Float
    var noiseProfile: [[Double]]?
    var iso: Float?
    var exposureTime: Float?
    var aperture: Float?
    var focalLength: Float?

    init(_ f: RawFile) {
        let r = f.raw
        container = f.container
        make = r.capture.make
        model = r.capture.model
        uniqueCameraModel = r.capture.uniqueCameraModel
        layout = r.cfa == nil ? "linear RGB" : "Bayer"
        cfa = r.cfa?.description
        blackLevels = r.blackLevels
        whiteLevel = r.whiteLevel
        asShotNeutral = r.color.asShotNeutral
        colorMatrix = r.color.colorMatrix
        calibrationIlluminant = r.color.illuminant
        colorMatrix2 = r.color.colorMatrix2
        calibrationIlluminant2 = r.color.illuminant2
        forwardMatrix = r.color.forwardMatrix
        baselineExposure = r.color.baselineExposure
        noiseProfile = r.noise?.planes.map { [$0.scale, $0.offset] }
        let c = r.capture
        iso = c.iso > 0 ? c.iso : nil
        exposureTime = c.exposureTime > 0 ? c.exposureTime : nil
        aperture = c.aperture > 0 ? c.aperture : nil
        focalLength = c.focalLength > 0 ? c.focalLength : nil
    }

    /// The lines of the text form.
    var lines: [String] {
        func g(_ v: Float) -> String { String(format: "%.6g", Double(v)) }
        func list(_ v: [Float]) -> String { v.map(g).joined(separator: " ") }
        var out = [
            "raw container: \(container)", "camera: \(make) \(model) (\(uniqueCameraModel))",
            "sensor: \(layout)\(cfa.map { ", CFA \($0)" } ?? "")", "black levels: \(list(blackLevels))",
            "white level: \(g(whiteLevel))", "as-shot neutral: \(list(asShotNeutral))",
            "colour matrix (illuminant \(calibrationIlluminant)): \(list(colorMatrix))"
        ]
        if let m = colorMatrix2 {
            out.append("colour matrix 2 (illuminant \(calibrationIlluminant2 ?? 0)): \(list(m))")
        }
        if let m = forwardMatrix { out.append("forward matrix: \(list(m))") }
        out.append("baseline exposure: \(g(baselineExposure)) EV")
        if let n = noiseProfile {
            let pairs = n.map { String(format: "%.6g %.6g", $0[0], $0[1]) }
            out.append("noise profile (scale, offset): \(pairs.joined(separator: ", "))")
        }
        if let iso { out.append("ISO: \(g(iso))") }
        if let exposureTime { out.append("exposure time: \(g(exposureTime)) s") }
        if let aperture { out.append("aperture: f/\(g(aperture))") }
        if let focalLength { out.append("focal length: \(g(focalLength)) mm") }
        return out
    }
}
