import EvanescoCore
import Foundation

/// StackOptions as JSON (a batch manifest's `options`, a preset): the settings a user chooses,
/// under the command line's names in camelCase (`kappa`, `alignLevel`, `videoFrames`;
/// `memoryLimit` in MB or as a size such as `"2G"`, `MemorySize` of EvanescoCore, 0 or null for none). A missing
/// key keeps its default, an unknown key is refused by name, and the values are checked by
/// ``StackOptions/validate()`` as they are read. Callbacks, given registrations and the maps
/// switch are not settings and are not read or written.
extension StackOptions: Codable {
    enum Key: String, CodingKey, CaseIterable {
        case align, merge, reference, interpolation, rawSampling, rawDenoise, kappa, winsorFraction, alignLevel,
            videoFrames,
            memoryLimit,
            spillDirectory,
            meanForTwoFrames, halfResolutionAlignmentAbove
    }

    public init(from decoder: any Decoder) throws {
        self.init()
        try SettingsCoding.rejectUnknownKeys(decoder, known: Key.allCases.map(\.rawValue))
        let c = try decoder.container(keyedBy: Key.self)
        align = try c.decodeChoiceIfPresent(AlignMode.self, forKey: .align) ?? align
        merge = try c.decodeChoiceIfPresent(MergeMethod.self, forKey: .merge) ?? merge
        reference = try c.decodeWholeNumberIfPresent(forKey: .reference) ?? reference
        if let name = try c.decodeIfPresent(String.self, forKey: .interpolation) {
            // The command line's kebab-case spelling and the Swift case name are both accepted.
            guard
                let i = Interpolation.allCases.first(where: {
                    Setting.kebab($0.rawValue) == name || $0.rawValue == name
                })
            else {
                let values = Self.setting("interpolation").choices.joined(separator: ", ")
                throw DecodingError.dataCorruptedError(
                    forKey: .interpolation, in: c, debugDescription: "must be one of \(values)")
            }
            interpolation = i
        }
        rawSampling = try c.decodeChoiceIfPresent(RawSampling.self, forKey: .rawSampling) ?? rawSampling
        rawDenoise = try c.decodeIfPresent(Float.self, forKey: .rawDenoise) ?? rawDenoise
        kappa = try c.decodeIfPresent(Float.self, forKey: .kappa) ?? kappa
        winsorFraction = try c.decodeIfPresent(Float.self, forKey: .winsorFraction) ?? winsorFraction
        alignLevel = try c.decodeWholeNumberIfPresent(forKey: .alignLevel) ?? alignLevel
        videoFrames = try c.decodeWholeNumberIfPresent(forKey: .videoFrames) ?? videoFrames
        if let limit = try c.decodeMemorySizeIfPresent(
            forKey: .memoryLimit, largest: Int(Limits.memoryLimit.maximum))
        {
            memoryLimit = limit
        }
        spillDirectory = try c.decodeIfPresent(String.self, forKey: .spillDirectory)
        meanForTwoFrames = try c.decodeIfPresent(Bool.self, forKey: .meanForTwoFrames) ?? meanForTwoFrames
        halfResolutionAlignmentAbove =
            try c.decodeWholeNumberIfPresent(forKey: .halfResolutionAlignmentAbove) ?? halfResolutionAlignmentAbove
        if let refusal = SettingError.refusal({ () throws(SettingError) in try validate() }) {
            throw SettingsCoding.invalid(refusal, in: decoder)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(align, forKey: .align)
        try c.encode(merge, forKey: .merge)
        try c.encode(reference, forKey: .reference)
        try c.encode(Setting.kebab(interpolation.rawValue), forKey: .interpolation)
        try c.encode(rawSampling, forKey: .rawSampling)
        try c.encode(rawDenoise, forKey: .rawDenoise)
        try c.encode(kappa, forKey: .kappa)
        try c.encode(winsorFraction, forKey: .winsorFraction)
        try c.encodeIfPresent(alignLevel, forKey: .alignLevel)
        try c.encode(videoFrames, forKey: .videoFrames)
        // In MB, the unit every front end reads; a size that is not whole MB as a string.
        if let memoryLimit, memoryLimit % 1_048_576 != 0 {
            try c.encode(MemorySize.describe(memoryLimit), forKey: .memoryLimit)
        } else {
            try c.encode(memoryLimit.map { $0 >> 20 }, forKey: .memoryLimit)
        }
        try c.encodeIfPresent(spillDirectory, forKey: .spillDirectory)
        try c.encode(meanForTwoFrames, forKey: .meanForTwoFrames)
        try c.encode(halfResolutionAlignmentAbove, forKey: .halfResolutionAlignmentAbove)
    }
}
