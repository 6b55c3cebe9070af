import Foundation

/// How a studio is served: what it may show, where it listens, how much it accepts.
public struct StudioConfiguration: Sendable {
    /// Files and folders the file panel lists; nothing outside them (and the upload area) is served.
    public var paths: [String]
    /// Address to bind; 127.0.0.1 by default, so only this machine can reach the studio.
    public var host = "127.0.0.1"
    /// Port; 0 picks any free one.
    public var port = 0
    /// Largest upload, bytes.
    public var maxUploadBytes = 1024 << 20
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
    public var burstMemoryLimit: Int? = 1 << 30

    /// - Parameters:
    ///   - paths: What the file panel lists.
    ///   - token: The secret; nil makes a random 192-bit one.
    public init(paths: [String], token: String? = nil) {
        self.paths = paths
        self.token = token ?? Self.randomToken()
    }

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
        case .cannotBind(let h, let p, let d): "cannot listen on \(h):\(p) (\(d)); give --host an address of this machine (127.0.0.1 by default) and another --port, or --port 0 for any free one"
        }
    }
}
