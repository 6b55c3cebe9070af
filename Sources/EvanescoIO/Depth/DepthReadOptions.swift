import EvanescoCore
import Foundation

/// Why depth could not be read. Every case names the file and says what to do.
public enum DepthError: Error, Equatable, CustomStringConvertible, LocalizedError {
    /// The photo carries no depth or disparity map.
    case noDepth(path: String, found: [String])
    /// The requested auxiliary image is not in the file.
    case auxiliaryNotFound(path: String, kind: String, available: [String])
    /// Depth metadata is missing fields, malformed or hostile.
    case badMetadata(path: String, detail: String)
    /// Embedded data points outside the file or does not decode.
    case damaged(path: String, detail: String)
    case unsupported(path: String, detail: String)

    public var description: String {
        switch self {
        case .noDepth(let p, let f):
            "\(p): this photo has no depth or disparity "
                + "map\(f.isEmpty ? "" : " (it carries: \(f.joined(separator: ", ")))"). Use a Portrait-mode photo "
                + "from an iPhone (HEIC or JPEG) or an Android/Google camera (GDepth or Dynamic Depth JPEG)"
        case .auxiliaryNotFound(let p, let k, let a):
            "\(p): no \(k) image in this file; it has: \(a.isEmpty ? "none" : a.joined(separator: ", "))"
        case .badMetadata(let p, let d): "\(p): the depth metadata is unusable (\(d))"
        case .damaged(let p, let d): "\(p): the embedded depth data is damaged (\(d)); re-copy or re-export the photo"
        case .unsupported(let p, let d): "\(p): \(d)"
        }
    }
    public var errorDescription: String? { description }
}

/// Which of Google's two depth polarities to assume for GDepth maps.
public enum GDepthPolarity: String, Sendable, CaseIterable {
    /// The published encoding: a normalised value of 0 is Near, 1 is Far.
    case spec
    /// Inverted: high values are near (maps exported by some editors as a "white is near" image).
    case nearIsHigh = "near-high"
    /// Spec, unless the file's GFocus focal point and distance fit the inverted reading better.
    case auto
}

/// What to read.
public struct DepthReadOptions: Sendable {
    /// Decode the primary image too.
    public var decodePhoto = true
    /// Keep depth and auxiliary images in sensor orientation (as stored) instead of the photo's.
    public var sensorOrientation = false
    /// Auxiliary kinds to decode; the others are only listed with their sizes.
    public var decodeAuxiliary: Set<AuxiliaryKind> = []
    /// How GDepth maps are read.
    public var gdepthPolarity = GDepthPolarity.auto
    /// Require a depth map (throw `DepthError.noDepth` when absent).
    public var requireDepth = true
    /// Size limits for the photo and every embedded image.
    public var limits = DecodeLimits.standard
    /// Decode the photo and require depth; auxiliary images are listed, not decoded.
    public init() {}

    /// Limits for images inside a photo (depth, mattes, GDepth maps): never more pixels than the
    /// photo itself (at least 4 MP), so a small file cannot declare a huge hidden map.
    func embeddedLimits(photoWidth: Int, photoHeight: Int) -> DecodeLimits {
        limits.tightened(toPixels: max(photoWidth * photoHeight, 1 << 22))
    }
}
