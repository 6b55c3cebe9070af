import EvanescoCore
import Foundation

/// What ``LensBlur/apply(_:coc:)`` returns.
public struct LensRendering: Sendable {
    /// The rendered photo, same size, channels and sample type as the input (float photos as 16-bit).
    public var image: AnyImage
    /// 1 where the photo stays sharp (blur diameter under 1 px), else 0, at the photo's size.
    public var inFocus: Image<Float>
    /// What the renderer did.
    public var statistics: LensStatistics
}

/// How a lens rendering went (carried in `evanesco portrait --report` as `lens`).
public struct LensStatistics: Sendable, Codable, Equatable {
    /// The photo is rendered on a grid 1/`gridDivisor` of its size (1 = full resolution); the
    /// in-focus layer is always kept at full resolution.
    public var gridDivisor: Int
    /// Depth layers present (of the partition's bins).
    public var layers: Int
    /// Largest blur diameter in the photo, in pixels.
    public var largestDiameter: Float
    /// Fraction of the photo that stays sharp.
    public var fractionInFocus: Double
    /// Layers whose hidden background was filled for partial occlusion.
    public var filledLayers: Int
}

/// A physically based depth-of-field renderer: what a real lens does to a photo focused at one
/// depth, from a per-pixel circle of confusion (the blur diameter of each point).
///
/// - Bright points become the aperture's shape (circle or blades) at their own blur size.
/// - Depth ordering: the photo is split into depth layers by blur diameter (see `LensLayers`), each
///   blurred with its aperture and composited far to near, so a blurred background never spreads
///   over the sharp subject in front of it, while a blurred foreground spreads over what lies
///   behind it and shows it through its soft edge (the hidden background is filled in from around it).
/// - Linear light: blurring happens on linear RGB, and clipped highlights are boosted first
///   (``highlights``), so bokeh balls stay bright instead of turning into grey smudges.
/// - Cost: each layer's gather costs O(diameter) per pixel (one prefix-sum difference per kernel
///   row plus the anti-aliased edge pixels), on a half or quarter grid for photos above
///   ``fullResolutionLimit`` pixels; the in-focus layer keeps every full-resolution pixel.
///
/// Core Image has no counterpart; Apple's Portrait mode and Google's Lens Blur render this effect.
public struct LensBlur: Sendable {
    /// The aperture's shape (circle or blades).
    public var shape = ApertureShape()
    /// Optical vignetting: 0 is off; otherwise, at the photo's corners, the aperture is cut by a
    /// circle shifted by this many radii (0...1), so bokeh toward the corners becomes cat's eyes.
    public var catEye: Float = 0
    /// Gain applied to clipped highlights before the blur (1 = none): an inverse tone curve on
    /// pixels whose brightest channel is within the top 3 % of the scale, multiplying their linear
    /// light by up to this factor at full scale. Flat clipped areas stay white; a clipped point
    /// light spreads into a bright disc instead of a grey one.
    public var highlights: Float = 2
    /// Where the highlight boost starts, as a fraction of full scale.
    static let highlightThreshold: Float = 0.97
    /// Photos with more pixels than this are rendered on a grid halved (or quartered) until they fit.
    public var fullResolutionLimit = 4_200_000

    /// - Parameters:
    ///   - shape: Aperture shape.
    ///   - catEye: Cat-eye strength, 0...1.
    ///   - highlights: Highlight gain, at least 1.
    public init(shape: ApertureShape = ApertureShape(), catEye: Float = 0, highlights: Float = 2) {
        self.shape = shape
        self.catEye = catEye
        self.highlights = highlights
    }

    /// The divisor of the grid the renderer works on for a `width` x `height` photo (1, 2, 4 ...).
    public func gridDivisor(width: Int, height: Int) -> Int {
        var k = 1
        while (width / k) * (height / k) > fullResolutionLimit && k < 64 { k *= 2 }
        return k
    }

    /// Renders `photo` through the lens.
    ///
    /// - Parameters:
    ///   - photo: 8- or 16-bit sRGB (float photos are rendered as 16-bit); 1-4 channels.
    ///   - coc: Signed blur diameter in photo pixels (positive in front of the focus plane), one
    ///     channel, any size (resampled to the photo's grid with its corners aligned); NaN is read as 0.
    /// - Returns: The rendering, its in-focus mask and statistics.
    public func apply(_ photo: AnyImage, coc: Image<Float>) -> LensRendering {
        switch photo {
        case .uint8(let i):
            let r = render(i, coc: coc)
            return LensRendering(image: .uint8(r.0), inFocus: r.1, statistics: r.2)
        case .uint16(let i):
            let r = render(i, coc: coc)
            return LensRendering(image: .uint16(r.0), inFocus: r.1, statistics: r.2)
        case .float32(let i):
            let r = render(i.converted(to: UInt16.self), coc: coc)
            return LensRendering(image: .uint16(r.0), inFocus: r.1, statistics: r.2)
        }
    }

    /// Linear light of one pixel with the highlight boost (a = 1).
    @inline(__always)
    static func linear<S: PixelSample>(
        _ src: UnsafeBufferPointer<S>, _ o: Int, _ c: Int, _ lin: UnsafeBufferPointer<Float>,
        boostFrom: Float, gain: Float
    ) -> SIMD4<Float> {
        let r = src[o].floatValue, g = c >= 3 ? src[o + 1].floatValue : r, b = c >= 3 ? src[o + 2].floatValue : r
        var p = SIMD4<Float>(lin[Int(r)], lin[Int(g)], lin[Int(b)], 1)
        if gain != 1 {
            let m = max(r, g, b)
            if m > boostFrom {
                let t = min((m - boostFrom) / (S.fullScale - boostFrom), 1)
                let k = 1 + (gain - 1) * t * t * (3 - 2 * t)
                p = SIMD4(p.x * k, p.y * k, p.z * k, 1)
            }
        }
        return p
    }
}
