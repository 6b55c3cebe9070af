import EvanescoCore
import Testing

@Suite("NumericSetting: one declaration of a setting's default and range")
struct SettingsTests {
    @Test("Closed, open and whole-number ranges; NaN and infinity never pass")
    func allows() {
        let offset = NumericSetting("cutoff offset", 0...10, default: 0.25, unit: "m")
        #expect(offset.allows(0) && offset.allows(10) && offset.allows(0.25))
        #expect(
            !offset.allows(-0.001) && !offset.allows(10.0001) && !offset.allows(.nan) && !offset.allows(.infinity)
                && !offset.allows(-.infinity))
        let weight = NumericSetting("temporal weight", 0...1, open: .minimum, default: 0.5)
        #expect(!weight.allows(0) && weight.allows(1) && weight.allows(1e-9))
        let fraction = NumericSetting("winsor fraction", 0...0.5, open: .maximum, default: 0.2)
        #expect(fraction.allows(0) && !fraction.allows(0.5))
        let frames = NumericSetting("video frames", 1...100, default: 20, integer: true)
        #expect(frames.allows(1) && !frames.allows(1.5) && !frames.allows(0))
    }

    @Test("Errors name the setting and its range, in words")
    func errors() throws {
        let offset = NumericSetting("cutoff offset", 0...10, default: 0.25, unit: "m")
        #expect(throws: SettingError(setting: "cutoff offset", detail: "must be within 0...10 m")) {
            try offset.check(Float.nan)
        }
        let weight = NumericSetting("temporal weight", 0...1, open: .minimum, default: 0.5)
        #expect(weight.rangeDescription == "within (0, 1]")
        let gamma = NumericSetting("gamma", 0.05...10, default: 0.55)
        #expect(gamma.rangeDescription == "within 0.05...10")
        let frames = NumericSetting("video frames", 1...100, default: 20, integer: true)
        #expect(frames.rangeDescription == "within 1...100 (a whole number)")
        #expect(
            SettingError(setting: "gamma", detail: "must be within 0.05...10").named("--gamma")
                == "--gamma must be within 0.05...10")
        #expect(throws: Never.self) { try gamma.check(Float(0.55)) }
    }

    @Test("The typical range defaults to the allowed one")
    func typical() {
        let a = NumericSetting("blur", 0...200, default: 5.3, typical: 0...30)
        #expect(a.typicalMinimum == 0 && a.typicalMaximum == 30)
        let b = NumericSetting("kappa", 0...100, open: .minimum, default: 2.5)
        #expect(b.typicalMinimum == 0 && b.typicalMaximum == 100)
    }
}
