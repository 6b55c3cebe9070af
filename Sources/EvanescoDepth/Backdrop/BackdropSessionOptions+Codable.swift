import EvanescoCore
import EvanescoIO
import Foundation

/// BackdropSessionOptions as JSON, under the command line's names in camelCase: `subject`
/// (`"face"`, `"nearest"` or `"X,Y"`), `cutoffOffset`, `blur` (sigma in pixels of a 640-wide
/// depth map; the deprecated `blurRadius`, sigma in pixels of the map as given, is still read,
/// never beside `blur`), `gamma`, `temporal`, `refine`, `gapSnap`, `fillHoles`, `coreDepth`,
/// `detectEvery`, `depthFormat` (`"auto"`, `"mm16"`, `"pfm"`, `"disparity8:MIN,MAX"`),
/// `faceWorkingSize` and `faceMinSize`. A missing key keeps its default, an unknown key is
/// refused by name, and ``BackdropSessionOptions/validate()`` checks the values as they are read.
extension BackdropSessionOptions: Codable {
    enum Key: String, CodingKey, CaseIterable {
        case subject, cutoffOffset, blur, blurRadius, gamma, temporal, refine, gapSnap, fillHoles, coreDepth,
            detectEvery, depthFormat,
            faceWorkingSize, faceMinSize
    }

    public init(from decoder: any Decoder) throws {
        self.init()
        try SettingsCoding.rejectUnknownKeys(decoder, known: Key.allCases.map(\.rawValue))
        let c = try decoder.container(keyedBy: Key.self)
        if let s = try c.decodeIfPresent(String.self, forKey: .subject) {
            guard let v = SubjectSelection(s) else {
                throw DecodingError.dataCorruptedError(
                    forKey: .subject, in: c,
                    debugDescription: "must be \"face\", \"nearest\" or \"X,Y\" (colour pixels)")
            }
            subject = v
        }
        pipeline.cutoffOffset = try c.decodeIfPresent(Float.self, forKey: .cutoffOffset) ?? pipeline.cutoffOffset
        if c.contains(.blur) && c.contains(.blurRadius) {
            throw DecodingError.dataCorruptedError(
                forKey: .blurRadius, in: c,
                debugDescription: "give blur, or the deprecated blurRadius, not both (\(Self.blurRadiusDeprecation))")
        }
        pipeline.blurSigmaAt640 = try c.decodeIfPresent(Float.self, forKey: .blur) ?? pipeline.blurSigmaAt640
        blurRadius = try c.decodeIfPresent(Float.self, forKey: .blurRadius)
        pipeline.gamma = try c.decodeIfPresent(Float.self, forKey: .gamma) ?? pipeline.gamma
        pipeline.temporalWeight = try c.decodeIfPresent(Float.self, forKey: .temporal) ?? pipeline.temporalWeight
        pipeline.refineWithColor = try c.decodeIfPresent(Bool.self, forKey: .refine) ?? pipeline.refineWithColor
        pipeline.snapCutoffToGap = try c.decodeIfPresent(Bool.self, forKey: .gapSnap) ?? pipeline.snapCutoffToGap
        pipeline.fillHoles = try c.decodeIfPresent(Bool.self, forKey: .fillHoles) ?? pipeline.fillHoles
        pipeline.coreDepth = try c.decodeIfPresent(Float.self, forKey: .coreDepth) ?? pipeline.coreDepth
        detectEvery = try c.decodeWholeNumberIfPresent(forKey: .detectEvery) ?? detectEvery
        if let f = try c.decodeIfPresent(String.self, forKey: .depthFormat), f != "auto" {
            guard let e = DepthEncoding(f) else {
                throw DecodingError.dataCorruptedError(
                    forKey: .depthFormat, in: c,
                    debugDescription:
                        "must be \"auto\", \"mm16\", \"pfm\" or \"disparity8:MIN,MAX\" (0 <= MIN < MAX, 1/m)")
            }
            depthEncoding = e
        }
        faceWorkingSize = try c.decodeWholeNumberIfPresent(forKey: .faceWorkingSize) ?? faceWorkingSize
        faceMinSize = try c.decodeWholeNumberIfPresent(forKey: .faceMinSize) ?? faceMinSize
        if let refusal = SettingError.refusal({ () throws(SettingError) in try validate() }) {
            throw SettingsCoding.invalid(refusal, in: decoder)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(subject.description, forKey: .subject)
        try c.encode(pipeline.cutoffOffset, forKey: .cutoffOffset)
        // One of the two: the deprecated spelling, when given, is what the session applies.
        if let blurRadius {
            try c.encode(blurRadius, forKey: .blurRadius)
        } else {
            try c.encode(pipeline.blurSigmaAt640, forKey: .blur)
        }
        try c.encode(pipeline.gamma, forKey: .gamma)
        try c.encode(pipeline.temporalWeight, forKey: .temporal)
        try c.encode(pipeline.refineWithColor, forKey: .refine)
        try c.encode(pipeline.snapCutoffToGap, forKey: .gapSnap)
        try c.encode(pipeline.fillHoles, forKey: .fillHoles)
        try c.encode(pipeline.coreDepth, forKey: .coreDepth)
        try c.encode(detectEvery, forKey: .detectEvery)
        try c.encode(depthEncoding?.description ?? "auto", forKey: .depthFormat)
        try c.encode(faceWorkingSize, forKey: .faceWorkingSize)
        try c.encode(faceMinSize, forKey: .faceMinSize)
    }
}
