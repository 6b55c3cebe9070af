import ArgumentParser
import EvanescoCore

extension RawFinishOptions.ColorSpace: ExpressibleByArgument {}
extension RawFinishOptions.Tone: ExpressibleByArgument {}
extension RawFinishOptions.WhiteBalance: ExpressibleByArgument {}

/// How a raw input is finished (``RawFinishOptions/settings``), the same for every command that
/// reads camera raw files.
struct RawFinishFlags: ParsableArguments {
    @Option(help: .setting(RawFinishOptions.self, "colorSpace")) var colorSpace = RawFinishOptions().colorSpace
    @Option(help: .setting(RawFinishOptions.self, "tone")) var tone = RawFinishOptions().tone
    @Option(help: .setting(RawFinishOptions.self, "whiteBalance")) var whiteBalance = RawFinishOptions().whiteBalance
    // Unconditional: a negative EV (`--exposure -1`) is a value, not a flag.
    @Option(parsing: .unconditional, help: .setting(RawFinishOptions.self, "exposure"))
    var exposure = RawFinishOptions().exposure

    var options: RawFinishOptions {
        RawFinishOptions(colorSpace: colorSpace, tone: tone, whiteBalance: whiteBalance, exposure: exposure)
    }

    func validate() throws {
        try validateSettings(RawFinishOptions.flagsByName) { () throws(SettingError) in try options.validate() }
    }
}
