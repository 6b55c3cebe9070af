import ArgumentParser
import EvanescoAlign
import EvanescoCore
import EvanescoDepth
import EvanescoIO
import EvanescoStack
import Foundation

// How the command line spells the library's values and the CLI's own argument types.

extension AlignMode: ExpressibleByArgument {}
extension RawSampling: ExpressibleByArgument {}
extension MergeMethod: ExpressibleByArgument {}
/// On the command line in kebab-case, as every value is (`catmull-rom`); the old spelling
/// `catmullRom` is still accepted.
extension Interpolation: ExpressibleByArgument {
    public init?(argument: String) {
        guard let v = Self.allCases.first(where: { $0.argument == argument || $0.rawValue == argument }) else {
            return nil
        }
        self = v
    }
    /// The value in kebab-case, as ``StackOptions/settings`` spells it.
    var argument: String { Setting.kebab(rawValue) }
    public static var allValueStrings: [String] { allCases.map(\.argument) }
    /// None: the values are listed in one line, as every other choice's.
    public static var allValueDescriptions: [String: String] { [:] }
    public var defaultValueDescription: String { argument }
}

extension SubjectSelection: ExpressibleByArgument {}

/// `--depth-format`: auto, or a stream ``DepthEncoding`` (mm16, metres/pfm, disparity8:MIN,MAX).
enum DepthFormatArgument: ExpressibleByArgument, Equatable {
    case auto
    case format(DepthEncoding)
    init?(argument: String) {
        if argument == "auto" {
            self = .auto
        } else if let f = DepthEncoding(argument) {
            self = .format(f)
        } else {
            return nil
        }
    }
    var format: DepthEncoding? { if case .format(let f) = self { f } else { nil } }
    var defaultValueDescription: String { "auto" }
}

/// `WIDTHxHEIGHT`.
struct FrameSize: ExpressibleByArgument {
    var width: Int, height: Int
    init?(argument: String) {
        guard let (w, h) = try? FrameStreamError.parseSize(argument) else { return nil }
        width = w
        height = h
    }
}

extension GDepthPolarity: ExpressibleByArgument {}
extension DepthKind: ExpressibleByArgument {}

/// `--quality`, checked against ``JPEGQuality/setting``.
func checkQuality(_ quality: Int) throws {
    if let e = SettingError.refusal({ () throws(SettingError) in try JPEGQuality.setting.check(quality) }) {
        throw ValidationError(e.named("--quality"))
    }
}

/// `--memory-limit`: a number of MB or a size such as `512M` or `2G` (`MemorySize`, the unit a
/// manifest's `memoryLimit` and the studio read too); 0 for no limit.
struct MemoryLimit: ExpressibleByArgument, Equatable {
    /// Bytes; nil for no limit.
    var bytes: Int?
    init(bytes: Int?) { self.bytes = bytes }
    init?(argument: String) {
        guard let b = ByteSize(argument: argument)?.bytes else { return nil }
        bytes = b == 0 ? nil : b
    }
    var defaultValueDescription: String { bytes.map(MemorySize.describe) ?? "0" }
    /// The stack's default.
    static let standard = MemoryLimit(bytes: StackOptions().memoryLimit)
    /// The help of a memory-limit flag, after what the memory is for.
    static func help(_ what: String) -> ArgumentHelp {
        ArgumentHelp(MemorySize.help(what), valueName: "size")
    }
}

/// A number of bytes on the command line, as ``MemorySize`` spells it: a bare number is MB, or
/// `512M`, `2G`.
struct ByteSize: ExpressibleByArgument, Equatable {
    var bytes: Int
    init(bytes: Int) { self.bytes = bytes }
    init?(argument: String) {
        guard let b = MemorySize.bytes(argument) else { return nil }
        bytes = b
    }
    var defaultValueDescription: String { MemorySize.describe(bytes) }
}
