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
    /// The decoded image would not fit the memory budget (``DecodeLimits/maxBytes``).
    case tooLargeForMemory(path: String, width: Int, height: Int, bytes: Int, budget: Int)
    case unsupportedLayout(path: String, detail: String)
    case outputExists(path: String)
    /// An output names a file the run reads.
    case outputIsInput(path: String)
    case cannotWrite(path: String, reason: String)
    case encodeFailed(path: String, format: String, detail: String)
    case unknownOutputExtension(path: String)

    public var description: String {
        switch self {
        case .fileNotFound(let p): "\(p): no such file; check the path"
        case .notAFile(let p):
            "\(p): is not a regular file (a folder, a named pipe or a device); give an image or video file (copy a "
                + "stream to a file first)"
        case .unreadable(let p, let r):
            // "Check its permissions" only where they can be the cause.
            r.contains("ermission") || r.contains("not permitted")
                ? "\(p): cannot be read (\(r)); check its permissions" : "\(p): cannot be read (\(r))"
        case .emptyFile(let p): "\(p): the file is empty (0 bytes); it was probably not copied or saved completely"
        case .unrecognizedFormat(let p, let d):
            "\(p): not an image this tool reads (\(d)); supported: JPEG, PNG, HEIC/HEIF, TIFF"
        case .unsupportedFormat(let p, let f):
            "\(p): \(f) images are not supported; convert it to PNG, JPEG or TIFF first (e.g. ffmpeg -i IN OUT.png)"
        case .truncated(let p, let f, let d): "\(p): the \(f) file is truncated (\(d)); re-copy or re-export it"
        case .corrupt(let p, let f, let d): "\(p): the \(f) data is damaged (\(d))"
        case .dimensionsTooLarge(let p, let w, let h, let l):
            "\(p): the header claims \(w)x\(h) pixels, over the limit of \(l) pixels; the file is damaged or hostile "
                + "(raise the limit with EVANESCO_MAX_PIXELS if it is genuine)"
        case .tooLargeForMemory(let p, let w, let h, let b, let m):
            "\(p): \(w)x\(h) pixels would need \(b >> 20) MB, over this machine's budget of \(m >> 20) MB; scale the "
                + "image down first"
        case .unsupportedLayout(let p, let d): "\(p): \(d)"
        case .outputExists(let p): "\(p): already exists; choose another name, or allow overwriting it"
        case .outputIsInput(let p):
            "\(p): is also an input of this run; write the output to another file (inputs are never modified)"
        case .cannotWrite(let p, let r): "\(p): cannot be written: \(r)"
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
            .corrupt(let p, _, _), .dimensionsTooLarge(let p, _, _, _), .tooLargeForMemory(let p, _, _, _, _),
            .unsupportedLayout(let p, _),
            .outputExists(let p), .outputIsInput(let p), .cannotWrite(let p, _), .encodeFailed(let p, _, _),
            .unknownOutputExtension(let p):
            p
        }
    }
}

/// Guards against hostile headers before any allocation: a size limit, a memory budget, and a
/// plausibility check of the size a header declares against the bytes actually present (no
/// codec expands data more than ``maxExpansion`` times: deflate's limit is 1032, LZW's about
/// 2730), so a 3 KB file cannot make the decoder allocate gigabytes before it finds the data missing.
public struct DecodeLimits: Sendable {
    /// Largest pixel count accepted (default 400 MP, or $EVANESCO_MAX_PIXELS).
    public var maxPixels: Int
    /// Largest side accepted.
    public var maxSide: Int
    /// Largest decoded image in bytes (default half the machine's memory).
    public var maxBytes: Int
    /// Decoded bytes a file may declare per byte it holds (plus 16 MB of slack).
    public var maxExpansion = 4096

    /// - Parameters:
    ///   - maxPixels: Largest pixel count accepted.
    ///   - maxSide: Largest side accepted.
    ///   - maxBytes: Largest decoded image in bytes.
    public init(
        maxPixels: Int = DecodeLimits.defaultMaxPixels, maxSide: Int = 65535,
        maxBytes: Int = DecodeLimits.defaultMaxBytes
    ) {
        self.maxPixels = maxPixels
        self.maxSide = maxSide
        self.maxBytes = maxBytes
    }
    /// 400 MP, or `$EVANESCO_MAX_PIXELS` when set to a positive number.
    public static let defaultMaxPixels: Int = {
        if let v = FileNumber.int(ProcessInfo.processInfo.environment["EVANESCO_MAX_PIXELS"], in: 1...Int(Int32.max)) {
            return v
        }
        return 400_000_000
    }()
    /// Half the machine's physical memory.
    public static let defaultMaxBytes: Int = Int(clamping: ProcessInfo.processInfo.physicalMemory / 2)
    /// The default limits.
    public static let standard = DecodeLimits()

    /// The same limits with the pixel count lowered to `pixels` (for images embedded in a photo).
    ///
    /// - Parameter pixels: The new pixel limit (kept when larger than the current one).
    /// - Returns: The tightened limits.
    public func tightened(toPixels pixels: Int) -> DecodeLimits {
        var l = self
        l.maxPixels = min(maxPixels, pixels)
        return l
    }

    /// Checks a declared size before anything is allocated.
    ///
    /// - Parameters:
    ///   - width: Declared width.
    ///   - height: Declared height.
    ///   - path: The file, for messages.
    ///   - bytesPerPixel: Bytes per decoded pixel (for the memory budget).
    ///   - sourceBytes: Bytes of compressed data present, when known (for the plausibility check).
    ///   - format: The format's name, for messages.
    func check(
        width: Int, height: Int, path: String, bytesPerPixel: Int = 4, sourceBytes: Int? = nil, format: String = "image"
    ) throws {
        guard width > 0, height > 0 else {
            throw ImageIOError.corrupt(path: path, format: "image", detail: "header gives a size of \(width)x\(height)")
        }
        if width > maxSide || height > maxSide || width * height > maxPixels {
            throw ImageIOError.dimensionsTooLarge(path: path, width: width, height: height, limit: maxPixels)
        }
        let (bytes, overflow) = (width * height).multipliedReportingOverflow(by: max(1, bytesPerPixel))
        if overflow || bytes > maxBytes {
            throw ImageIOError.tooLargeForMemory(
                path: path, width: width, height: height, bytes: overflow ? Int.max : bytes, budget: maxBytes)
        }
        if let sourceBytes {
            let (room, o) = sourceBytes.multipliedReportingOverflow(by: maxExpansion)
            if !o && width * height > room + (16 << 20) {
                throw ImageIOError.truncated(
                    path: path, format: format,
                    detail:
                        "the header declares \(width)x\(height) pixels but the file holds only \(sourceBytes) bytes "
                        + "of data"
                )
            }
        }
    }
}
