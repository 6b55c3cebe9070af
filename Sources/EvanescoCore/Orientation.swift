/// EXIF / TIFF orientation (tag 0x0112): how the stored pixels must be transformed to be shown
/// upright. Depth maps and mattes, stored in sensor orientation, take the same transform as the
/// photo. HEIF's `irot`/`imir` express the same eight cases.
public enum Orientation: Int, Sendable, CaseIterable, Codable {
    case up = 1  // as stored
    case upMirrored = 2  // mirror left-right
    case down = 3  // rotate 180
    case downMirrored = 4  // mirror top-bottom
    case leftMirrored = 5  // transpose (mirror across the main diagonal)
    case right = 6  // rotate 90 clockwise to display
    case rightMirrored = 7  // transverse (mirror across the anti-diagonal)
    case left = 8  // rotate 90 counter-clockwise to display

    /// True when width and height swap.
    public var swapsAxes: Bool { rawValue >= 5 }

    /// A short description for `info` ("rotate 90 CW", ...).
    public var summary: String {
        switch self {
        case .up: "normal"
        case .upMirrored: "mirrored horizontally"
        case .down: "rotated 180"
        case .downMirrored: "mirrored vertically"
        case .leftMirrored: "transposed"
        case .right: "rotate 90 CW to display"
        case .rightMirrored: "transversed"
        case .left: "rotate 90 CCW to display"
        }
    }

    /// For an upright pixel (x', y') of the displayed image, the stored pixel it comes from, for a
    /// stored image of `w x h`.
    @inlinable
    public func sourcePixel(x: Int, y: Int, width w: Int, height h: Int) -> (x: Int, y: Int) {
        switch self {
        case .up: (x, y)
        case .upMirrored: (w - 1 - x, y)
        case .down: (w - 1 - x, h - 1 - y)
        case .downMirrored: (x, h - 1 - y)
        case .leftMirrored: (y, x)
        case .right: (y, h - 1 - x)
        case .rightMirrored: (w - 1 - y, h - 1 - x)
        case .left: (w - 1 - y, x)
        }
    }
}

extension Orientation: ImageTransform {
    /// Turns a stored image upright.
    ///
    /// - Parameter image: The image as stored.
    /// - Returns: The image as displayed.
    public func apply<S: PixelSample>(_ image: Image<S>) -> Image<S> { image.oriented(self) }
}

extension Image {
    /// The image as displayed under `orientation` (so a stored image tagged `.right` comes back
    /// upright). Core Image counterpart: `CIImage.oriented(_:)`.
    @inlinable
    public func oriented(_ orientation: Orientation) -> Image<Sample> {
        if orientation == .up { return self }
        let w = width, h = height, c = channels
        let ow = orientation.swapsAxes ? h : w, oh = orientation.swapsAxes ? w : h
        return samples.withUnsafeBufferPointer { s in
            Image(uninitializedWidth: ow, height: oh, channels: c) { d in
                StripExecutor.forEachStrip(rows: oh, minimumRows: 32) { rows in
                    for y in rows {
                        for x in 0..<ow {
                            let p = orientation.sourcePixel(x: x, y: y, width: w, height: h)
                            let si = (p.y * w + p.x) * c, di = (y * ow + x) * c
                            for ch in 0..<c { d[di + ch] = s[si + ch] }
                        }
                    }
                }
            }
        }
    }
}
