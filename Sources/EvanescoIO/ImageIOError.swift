import Foundation

/// Why an image could not be read or written. Every case names the file and says what to do.
public enum ImageIOError: Error, Equatable, CustomStringConvertible, LocalizedError {
    case fileNotFound(path: String)
    case notAFile(path: String)
    case unreadable(path: String, reason: String)
    case emptyFile(path: String)
    /// The bytes are not any image format we know.
    case unrecognizedFormat(path: String, detail: String)
    /// A known format we do not read or write (GIF, WebP, ...).
    case unsupportedFormat(path: String, format: String)
    case truncated(path: String, format: String, detail: String)
    case corrupt(path: String, format: String, detail: String)
    case dimensionsTooLarge(path: String, width: Int, height: Int, limit: Int)
    case unsupportedLayout(path: String, detail: String)
    case outputExists(path: String)
    case cannotWrite(path: String, reason: String)
    case encodeFailed(path: String, format: String, detail: String)
    case unknownOutputExtension(path: String)

    public var description: String {
        switch self {
        case .fileNotFound(let p): "\(p): no such file; check the path"
        case .notAFile(let p): "\(p): is a directory or special file, not an image file"
        case .unreadable(let p, let r): "\(p): cannot be read (\(r)); check its permissions"
        case .emptyFile(let p): "\(p): the file is empty (0 bytes); it was probably not copied or saved completely"
        case .unrecognizedFormat(let p, let d): "\(p): not an image this tool reads (\(d)); supported: JPEG, PNG, HEIC/HEIF, TIFF"
        case .unsupportedFormat(let p, let f): "\(p): \(f) images are not supported; convert it to PNG, JPEG or TIFF first (e.g. ffmpeg -i IN OUT.png)"
        case .truncated(let p, let f, let d): "\(p): the \(f) file is truncated (\(d)); re-copy or re-export it"
        case .corrupt(let p, let f, let d): "\(p): the \(f) data is damaged (\(d))"
        case .dimensionsTooLarge(let p, let w, let h, let l): "\(p): the header claims \(w)x\(h) pixels, over the limit of \(l) pixels; the file is damaged or hostile (raise the limit with EVANESCO_MAX_PIXELS if it is genuine)"
        case .unsupportedLayout(let p, let d): "\(p): \(d)"
        case .outputExists(let p): "\(p): already exists; choose another name, or allow overwriting it"
        case .cannotWrite(let p, let r): "\(p): cannot be written (\(r)); check that the folder exists and is writable"
        case .encodeFailed(let p, let f, let d): "\(p): \(f) encoding failed (\(d))"
        case .unknownOutputExtension(let p): "\(p): unknown output type; name it .jpg, .png or .tif"
        }
    }
    public var errorDescription: String? { description }

    /// The file the error is about.
    public var path: String {
        switch self {
        case .fileNotFound(let p), .notAFile(let p), .unreadable(let p, _), .emptyFile(let p),
             .unrecognizedFormat(let p, _), .unsupportedFormat(let p, _), .truncated(let p, _, _),
             .corrupt(let p, _, _), .dimensionsTooLarge(let p, _, _, _), .unsupportedLayout(let p, _),
             .outputExists(let p), .cannotWrite(let p, _), .encodeFailed(let p, _, _),
             .unknownOutputExtension(let p): p
        }
    }
}

/// Guards against hostile headers before any allocation.
public struct DecodeLimits: Sendable {
    /// Largest pixel count accepted (default 400 MP, or $EVANESCO_MAX_PIXELS).
    public var maxPixels: Int
    /// Largest side accepted.
    public var maxSide: Int

    /// - Parameters:
    ///   - maxPixels: Largest pixel count accepted.
    ///   - maxSide: Largest side accepted.
    public init(maxPixels: Int = DecodeLimits.defaultMaxPixels, maxSide: Int = 65535) {
        self.maxPixels = maxPixels; self.maxSide = maxSide
    }
    /// 400 MP, or `$EVANESCO_MAX_PIXELS` when set to a positive number.
    public static let defaultMaxPixels: Int = {
        if let s = ProcessInfo.processInfo.environment["EVANESCO_MAX_PIXELS"], let v = Int(s), v > 0 { return v }
        return 400_000_000
    }()
    /// The default limits.
    public static let standard = DecodeLimits()

    func check(width: Int, height: Int, path: String) throws {
        guard width > 0, height > 0 else {
            throw ImageIOError.corrupt(path: path, format: "image", detail: "header gives a size of \(width)x\(height)")
        }
        if width > maxSide || height > maxSide || width * height > maxPixels {
            throw ImageIOError.dimensionsTooLarge(path: path, width: width, height: height, limit: maxPixels)
        }
    }
}
