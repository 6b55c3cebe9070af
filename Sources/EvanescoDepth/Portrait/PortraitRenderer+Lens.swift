import EvanescoCore
import EvanescoIO
import Foundation

extension PortraitRenderer {
    /// The default lens: a 40 px blur diameter at 12 MP, scaled with the photo's diagonal.
    public static func defaultAperture(width: Int, height: Int) -> Float {
        40 * Float((Double(width) * Double(height) / 12_000_000).squareRoot())
    }

    /// The physical aperture for a full-frame-equivalent f-number, from the thin-lens model:
    /// c = F_px * F_eq / N * |disparity - disparity_focus| (disparity in 1/m), where the focal
    /// length F comes from the calibration's intrinsics and pixel size and F_eq = F * crop factor
    /// (43.27 mm over the sensor's diagonal).
    ///
    /// - Returns: The blur diameter in full-size photo pixels for a normalised disparity
    ///   difference of 1, the focal length and its equivalent, in millimetres.
    /// - Throws: ``PortraitError/noPhysicalAperture(path:reason:)`` for relative depth, a map
    ///   that is not in metres, or a file without focal length or pixel size.
    public func physicalAperture(fNumber n: Double) throws(PortraitError) -> (
        pixels: Float, focalMM: Double, equivalentMM: Double
    ) {
        if depth.accuracy == .relative {
            throw .noPhysicalAperture(
                path: photo.path,
                reason: "absolute depth, and this map's accuracy is relative (its scale is not metric)")
        }
        let metric = depth.kind == .disparity ? depth.units == "1/m" : depth.units == "m"
        guard metric else {
            throw .noPhysicalAperture(
                path: photo.path, reason: "depth in metres or disparity in 1/m, and this map is in \(depth.units)")
        }
        guard let cal = depth.calibration, let fx = cal.focalLengthPixels(forWidth: photo.width), fx > 0,
            let pixel = cal.pixelSize, pixel > 0, let rw = cal.referenceWidth, let rh = cal.referenceHeight, rw > 0,
            rh > 0
        else {
            throw .noPhysicalAperture(
                path: photo.path,
                reason: "the camera's focal length and pixel size, and this file has no such calibration")
        }
        let focalMM = fx * Double(rw) / Double(photo.width) * pixel
        let diagonalMM = pixel * (Double(rw * rw + rh * rh)).squareRoot()
        let equivalentMM = focalMM * 43.27 / diagonalMM
        let span = Double(normalized.high - normalized.low)
        let pixels = fx * (equivalentMM / 1000) / n * span
        guard pixels.isFinite, pixels > 0 else {
            throw .noPhysicalAperture(path: photo.path, reason: "a depth range, and this map has a single value")
        }
        return (Float(min(pixels, 1000)), focalMM, equivalentMM)
    }

    /// The lens effect: circle of confusion from the normalised disparity (refined at the
    /// renderer's grid with the portrait matte when the file has one), then ``LensBlur``.
    func renderLens(_ settings: PortraitSettings, focus f: Float, note: String, times t: StageTimings, start: Date)
        throws -> PortraitRendering
    {
        var times = t
        let W = image.width, H = image.height
        var from = "default", focalMM: Double? = nil, equivalentMM: Double? = nil
        var fullAperture = Self.defaultAperture(width: photo.width, height: photo.height)
        if let a = settings.aperture {
            fullAperture = a
            from = "aperture"
        }
        if let n = settings.fNumber {
            let p = try physicalAperture(fNumber: n)
            fullAperture = p.pixels
            focalMM = p.focalMM
            equivalentMM = p.equivalentMM
            from = "f-number"
        }
        let aperture = fullAperture * Float(scale)
        let lens = LensBlur(shape: settings.shape, catEye: settings.catEye, highlights: settings.highlights)
        var refinedWith = "none"
        let coc: Image<Float> = times.measure(\.mask) {
            var d = normalized.map
            let guideSource: Image<Float>? =
                matte ?? (settings.refine == .photo || settings.refine == .auto ? image.float32.luma(.rec709) : nil)
            if let guideSource, settings.refine != .none || matte != nil {
                // Edge-aware upsampling of the disparity to the renderer's grid, snapped to the guide.
                let k = lens.gridDivisor(width: W, height: H)
                let gw = (W + k - 1) / k, gh = (H + k - 1) / k
                let up = d.resized(width: gw, height: gh, interpolation: .bilinear)
                let guide = guideSource.resized(width: gw, height: gh, interpolation: .bilinear)
                let depthPixel = max(1, gw / max(1, d.width))
                d = GuidedFilter(radius: 2 * depthPixel, epsilon: 1e-3, subsample: max(1, depthPixel / 2)).apply(
                    mask: up, guide: guide)
                refinedWith = matte != nil ? "portrait matte" : "photo luma"
            }
            d.samples.withUnsafeMutableBufferPointer { p in for i in 0..<p.count { p[i] = aperture * (p[i] - f) } }
            return d
        }
        let r = times.measure(\.effect) { lens.apply(image, coc: coc) }
        times.total = Date().timeIntervalSince(start) + decodeSeconds
        let report = PortraitReport(
            input: photo.path, effect: .lens, focus: f, focusFrom: note, slope: settings.slope, width: settings.width,
            refinedWith: refinedWith, radius: nil, levels: nil, protectSubject: nil, outputWidth: W, outputHeight: H,
            depth: depthSummary,
            normalization: .init(
                disparityLow: normalized.low, disparityHigh: normalized.high, filledHoles: normalized.filledHoles),
            mask: .init(mean: r.statistics.fractionInFocus, fractionOverHalf: r.statistics.fractionInFocus),
            times: times.rounded,
            lens: LensReport(
                aperturePixels: fullAperture, apertureFrom: from, fNumber: settings.fNumber, focalLengthMM: focalMM,
                equivalentFocalLengthMM: equivalentMM, shape: settings.shape, catEye: settings.catEye,
                highlights: settings.highlights, statistics: r.statistics))
        return PortraitRendering(image: r.image, mask: r.inFocus, metadata: metadata, report: report)
    }
}
