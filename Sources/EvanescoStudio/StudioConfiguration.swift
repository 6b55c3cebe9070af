import EvanescoCore
import EvanescoStack
import Foundation

/// How a studio is served: what it may show, where it listens, how much it accepts.
public struct StudioConfiguration: Sendable {
    /// Files and folders the file panel lists; nothing outside them (and the upload area) is served.
    public var paths: [String]
    /// Address to bind; 127.0.0.1 by default, so only this machine can reach the studio.
    public var host = Self.defaultHost
    /// Port; 0 picks any free one.
    public var port = Int(Limits.port.defaultValue!)
    /// Largest upload, bytes.
    public var maxUploadBytes = Int(Limits.maxUpload.defaultValue!)
    /// Most uploads kept at once (the oldest are not evicted: the page says the limit is reached).
    public var maxUploads = 200
    /// The secret every API request carries (cookie, header or `?token=`).
    public var token: String
    /// Long side of previews, pixels.
    public var previewLongSide = 1600
    /// Most frames of a clip held for playback in the backdrop workspace.
    public var maxClipFrames = 300
    /// Bytes a burst's decoded frames may take: a bigger burst keeps only its thumbnails and is
    /// stacked from its files through a temporary file (`StackOptions.memoryLimit`). nil: no limit.
    public var burstMemoryLimit: Int? = Int(StackOptions.Limits.memoryLimit.defaultValue!)
    /// Seconds a connection may stay silent: a client that has not sent a whole request header
    /// within this time of connecting (or of its previous answer), or stops sending a body this
    /// long, is disconnected. Answers being computed and event streams are never cut.
    public var idleTimeout: Double = 30
    /// Seconds an export nobody downloaded is kept (a downloaded one is deleted at once).
    public var exportMaxAge: Double = 900
    /// Bytes the exports folder may hold; the oldest go first.
    public var exportMaxBytes = 2 << 30
    /// Largest decoded size of an uploaded image, bytes, judged from its header before any
    /// pixel is decoded (default: the burst memory limit, else 1 GB).
    public var maxUploadDecodedBytes: Int?
    /// Most decoded bytes an upload may declare per byte of file, above 64 MB decoded: photos
    /// compress 3-20 times, a decompression bomb a thousand.
    public var maxUploadExpansion = 200

    /// - Parameters:
    ///   - paths: What the file panel lists.
    ///   - token: The secret; nil makes a random 192-bit one.
    public init(paths: [String], token: String? = nil) {
        self.paths = paths
        self.token = token ?? Self.randomToken()
    }

    /// The address a studio listens on unless told: this machine only.
    public static let defaultHost = "127.0.0.1"

    /// 48 hex digits from the system's secure generator.
    public static func randomToken() -> String {
        var g = SystemRandomNumberGenerator()
        return (0..<24).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &g)) }.joined()
    }
}

/// Why a studio cannot start.
public enum StudioError: Error, CustomStringConvertible, Equatable {
    case pathNotFound(String)
    case badOption(String)
    case cannotBind(host: String, port: Int, detail: String)

    public var description: String {
        switch self {
        case .pathNotFound(let p): "\(p) does not exist; give files or folders the studio should show"
        case .badOption(let d): d
        case .cannotBind(let h, let p, let d):
            "cannot listen on \(h):\(p) (\(d)); give --host an address of this machine (127.0.0.1 by default) and "
                + "another --port, or --port 0 for any free one"
        }
    }
}

extension StudioConfiguration: DeclaresSettings {
    /// Each numeric setting's name, default and allowed values; the defaults above are these.
    public enum Limits {
        public static let port = NumericSetting(
            "port", 0...65535, default: 0, integer: true, summary: "Port to listen on, 0 for any free one")
        /// Bytes; at least 1 MiB, at most 64 GiB.
        public static let maxUpload = NumericSetting(
            "largest upload", 1_048_576...68_719_476_736, default: 1_073_741_824, unit: "bytes", integer: true,
            summary: "Largest file the page may upload")
    }

    /// The settings of `evanesco studio`, declared once: its flags take them from here. The
    /// burst memory limit is the stack's (`StackOptions.Limits.memoryLimit`).
    public static let settings: [Setting] = [
        Setting("host", .text(default: defaultHost), summary: "Address to listen on (127.0.0.1: this machine only)"),
        .number("port", Limits.port),
        {
            var s = Setting("maxUpload", .size(Limits.maxUpload), summary: Limits.maxUpload.summary)
            s.zeroIsNone = false
            return s
        }(),
        Setting(
            "memoryLimit", .size(StackOptions.Limits.memoryLimit),
            summary: "What a burst's decoded frames may take; a bigger burst keeps only thumbnails and is stacked "
                + "through a temporary file")
    ]

    /// Checks the declared settings against their ranges, as the command line does. A program
    /// (or a test) may set smaller limits than a user may give: ``Studio`` does not call this.
    ///
    /// - Throws: `SettingError` naming the setting.
    public func validate() throws(SettingError) {
        try Limits.port.check(port)
        try Limits.maxUpload.check(maxUploadBytes)
        if let burstMemoryLimit { try StackOptions.Limits.memoryLimit.checkLimit(burstMemoryLimit) }
    }
}
