/// A raster image with value semantics and copy-on-write storage.
///
/// Layout: **interleaved** (chunky) samples, row-major, no padding: sample `c` of pixel `(x, y)`
/// sits at `(y * width + x) * channels + c`. Interleaved was chosen over planar because every codec
/// this library speaks (TurboJPEG, libpng, libheif, libtiff contiguous) and ffmpeg's rawvideo
/// deliver and accept interleaved rows, so decode and encode need no reshuffle; and the per-pixel
/// operations (colour matrices, blends, warps) read all channels of a pixel from one cache line.
/// Operations that treat samples independently (merges, gamma, clamps) simply run over
/// `width * channels` samples a row. A single-channel image is what the docs call a *plane*
/// (depth maps, masks, luma).
///
/// Coordinates: origin top-left, pixel centres at integer coordinates (as OpenCV; Core Image's
/// origin is bottom-left with centres at +0.5).
///
/// Storage is a `ContiguousArray`, which is copy-on-write: copies are O(1) until one is mutated.
public struct Image<Sample: PixelSample>: Sendable {
    /// Width in pixels.
    public let width: Int
    /// Height in pixels.
    public let height: Int
    /// Samples per pixel (1 grey, 3 RGB, 4 RGBA).
    public let channels: Int
    /// All samples, interleaved, `width * height * channels` of them.
    /// Always `width * height * channels` long: change samples in place, never replace the array
    /// with one of another length.
    public var samples: ContiguousArray<Sample>

    /// A zero-filled image.
    public init(width: Int, height: Int, channels: Int) {
        precondition(width >= 0 && height >= 0 && (1...4).contains(channels), "bad image geometry")
        self.width = width
        self.height = height
        self.channels = channels
        self.samples = ContiguousArray(repeating: .zero, count: width * height * channels)
    }

    /// Wraps existing samples; `samples.count` must be `width * height * channels`.
    public init(width: Int, height: Int, channels: Int, samples: ContiguousArray<Sample>) {
        precondition(width >= 0 && height >= 0 && (1...4).contains(channels), "bad image geometry")
        precondition(samples.count == width * height * channels, "sample count does not match geometry")
        self.width = width
        self.height = height
        self.channels = channels
        self.samples = samples
    }

    /// Creates an image whose samples start at zero and are then changed by `draw` (what it does
    /// not write stays zero).
    ///
    /// The trailing-closure form `Image(width:height:channels:) { ... }` is this one: drawing a
    /// square or a mask into part of an image is then safe. Code that writes every sample and
    /// cannot afford the zero fill says so with ``init(uninitializedWidth:height:channels:_:)``.
    @inlinable
    public init(
        width: Int, height: Int, channels: Int, _ draw: (UnsafeMutableBufferPointer<Sample>) throws -> Void
    ) rethrows {
        self.init(width: width, height: height, channels: channels)
        try samples.withUnsafeMutableBufferPointer { try draw($0) }
    }

    /// Creates an image whose samples are written by `fill` into uninitialised memory (no zero
    /// fill: the caller must write every sample, or the image holds whatever the memory held,
    /// which differs from run to run).
    @inlinable
    public init(
        uninitializedWidth width: Int, height: Int, channels: Int,
        _ fill: (UnsafeMutableBufferPointer<Sample>) throws -> Void
    ) rethrows {
        precondition(width >= 0 && height >= 0 && (1...4).contains(channels), "bad image geometry")
        let n = width * height * channels
        self.width = width
        self.height = height
        self.channels = channels
        self.samples = try ContiguousArray(unsafeUninitializedCapacity: n) { buf, count in
            try fill(buf)
            count = n
        }
    }

    /// Samples in one row (`width * channels`).
    @inlinable public var rowLength: Int { width * channels }
    @inlinable public var pixelCount: Int { width * height }
    @inlinable public var isEmpty: Bool { width == 0 || height == 0 }

    /// Sample `c` of the pixel at column `x`, row `y` (bounds-checked).
    @inlinable
    public subscript(x: Int, y: Int, c: Int) -> Sample {
        get { samples[(y * width + x) * channels + c] }
        set { samples[(y * width + x) * channels + c] = newValue }
    }

    /// Same size and channel count.
    @inlinable
    public func hasSameGeometry<T>(as other: Image<T>) -> Bool {
        width == other.width && height == other.height && channels == other.channels
    }
}

extension Image: Equatable {}

/// A single-channel image: depth, disparity, masks, luma.
public typealias Plane<Sample: PixelSample> = Image<Sample>

/// An image whose sample type is chosen at run time (what a decoder returns).
public enum AnyImage: Sendable, Equatable {
    case uint8(Image<UInt8>)
    case uint16(Image<UInt16>)
    case float32(Image<Float>)

    /// Width in pixels.
    public var width: Int {
        switch self {
        case .uint8(let i): i.width
        case .uint16(let i): i.width
        case .float32(let i): i.width
        }
    }
    /// Height in pixels.
    public var height: Int {
        switch self {
        case .uint8(let i): i.height
        case .uint16(let i): i.height
        case .float32(let i): i.height
        }
    }
    /// Samples per pixel.
    public var channels: Int {
        switch self {
        case .uint8(let i): i.channels
        case .uint16(let i): i.channels
        case .float32(let i): i.channels
        }
    }
    /// Bits per sample: 8, 16 or 32 (float).
    public var bitDepth: Int {
        switch self {
        case .uint8: 8
        case .uint16: 16
        case .float32: 32
        }
    }

    /// The image as 8-bit samples (rounded; floats clamped to 0...1).
    public var uint8: Image<UInt8> {
        switch self {
        case .uint8(let i): i
        case .uint16(let i): i.converted(to: UInt8.self)
        case .float32(let i): i.converted(to: UInt8.self)
        }
    }
    /// The image as 16-bit samples.
    public var uint16: Image<UInt16> {
        switch self {
        case .uint8(let i): i.converted(to: UInt16.self)
        case .uint16(let i): i
        case .float32(let i): i.converted(to: UInt16.self)
        }
    }
    /// The image as Float samples normalised so that 1.0 is full scale.
    public var float32: Image<Float> {
        switch self {
        case .uint8(let i): i.converted(to: Float.self)
        case .uint16(let i): i.converted(to: Float.self)
        case .float32(let i): i
        }
    }

    /// Applies a sample-type-independent transform.
    public func map(_ transform: (any ImageTransform)) -> AnyImage {
        switch self {
        case .uint8(let i): .uint8(transform.apply(i))
        case .uint16(let i): .uint16(transform.apply(i))
        case .float32(let i): .float32(transform.apply(i))
        }
    }
}

/// A transform that works on any sample type (used to apply one geometric operation, e.g. an
/// orientation, to whatever a decoder returned).
public protocol ImageTransform {
    func apply<S: PixelSample>(_ image: Image<S>) -> Image<S>
}
