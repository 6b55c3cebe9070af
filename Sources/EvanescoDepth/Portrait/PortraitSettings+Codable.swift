import EvanescoCore
import Foundation

/// PortraitSettings as JSON (a batch manifest's `options`, a preset), under the command line's
/// names in camelCase: `effect`, one of `focus` (normalised disparity), `focusDistance` (metres)
/// or `focusPoint` (`"X,Y"`, pixels or fractions), `slope`, `width`, `radius`, `levels`,
/// `refine`, `protectSubject`, `aperture`, `fNumber`, `blades`, `bladeRotation`, `catEye`
/// (0...1) and `highlights`. A missing key keeps its default, an unknown key is refused by name,
/// and ``PortraitSettings/validate()`` checks the values as they are read.
extension PortraitSettings: Codable {
    enum Key: String, CodingKey, CaseIterable {
        case effect, focus, focusDistance, focusPoint, slope, width, radius, levels, refine, protectSubject, aperture,
            fNumber, blades,
            bladeRotation, catEye, highlights
    }

    public init(from decoder: any Decoder) throws {
        self.init()
        try SettingsCoding.rejectUnknownKeys(decoder, known: Key.allCases.map(\.rawValue))
        let c = try decoder.container(keyedBy: Key.self)
        guard [Key.focus, .focusDistance, .focusPoint].filter({ c.contains($0) }).count <= 1 else {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: decoder.codingPath,
                    debugDescription: "give only one of focus, focusDistance, focusPoint"))
        }
        effect = try c.decodeChoiceIfPresent(PortraitEffect.self, forKey: .effect) ?? effect
        if let f = try c.decodeIfPresent(Float.self, forKey: .focus) { focus = .normalized(f) }
        if let d = try c.decodeIfPresent(Double.self, forKey: .focusDistance) { focus = .distance(metres: d) }
        if let text = try c.decodeIfPresent(String.self, forKey: .focusPoint) {
            guard let p = PhotoPoint(text) else {
                throw DecodingError.dataCorruptedError(
                    forKey: .focusPoint, in: c,
                    debugDescription: "must be \"X,Y\": pixels of the upright photo, or fractions such as \"0.4,0.3\"")
            }
            focus = .point(p)
        }
        slope = try c.decodeIfPresent(Float.self, forKey: .slope) ?? slope
        width = try c.decodeIfPresent(Float.self, forKey: .width) ?? width
        radius = try c.decodeIfPresent(Float.self, forKey: .radius) ?? radius
        levels = try c.decodeWholeNumberIfPresent(forKey: .levels) ?? levels
        refine = try c.decodeChoiceIfPresent(MaskRefinement.self, forKey: .refine) ?? refine
        protectSubject = try c.decodeIfPresent(Bool.self, forKey: .protectSubject) ?? protectSubject
        aperture = try c.decodeIfPresent(Float.self, forKey: .aperture)
        fNumber = try c.decodeIfPresent(Double.self, forKey: .fNumber)
        shape = ApertureShape(
            blades: try c.decodeWholeNumberIfPresent(forKey: .blades) ?? shape.blades,
            rotation: try c.decodeIfPresent(Float.self, forKey: .bladeRotation) ?? shape.rotation)
        catEye = try c.decodeIfPresent(Float.self, forKey: .catEye) ?? catEye
        highlights = try c.decodeIfPresent(Float.self, forKey: .highlights) ?? highlights
        do { try validate() } catch {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: error.description))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(effect, forKey: .effect)
        switch focus {
        case .normalized(let f): try c.encode(f, forKey: .focus)
        case .distance(let d): try c.encode(d, forKey: .focusDistance)
        case .point(let p): try c.encode(p.description, forKey: .focusPoint)
        }
        try c.encode(slope, forKey: .slope)
        try c.encode(width, forKey: .width)
        try c.encode(radius, forKey: .radius)
        try c.encode(levels, forKey: .levels)
        try c.encode(refine, forKey: .refine)
        try c.encode(protectSubject, forKey: .protectSubject)
        try c.encodeIfPresent(aperture, forKey: .aperture)
        try c.encodeIfPresent(fNumber, forKey: .fNumber)
        try c.encode(shape.blades, forKey: .blades)
        try c.encode(shape.rotation, forKey: .bladeRotation)
        try c.encode(catEye, forKey: .catEye)
        try c.encode(highlights, forKey: .highlights)
    }
}
