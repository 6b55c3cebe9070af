import EvanescoAlign
import EvanescoCore
import EvanescoIO
import Foundation

extension BurstStacker {
    /// Stacks a burst of camera raws on the sensor's samples: each frame's colour planes
    /// (``RawPlanes``) are aligned (on their grey, at half size), warped and merged as any burst
    /// is, in memory or from a spill file, then put back into a mosaic with the reference's
    /// metadata (``StackResult/raw``).
    ///
    /// The frames' headers are checked first: one camera, size, colour filter and orientation
    /// (``StackError/rawFrameMismatch(frame:what:reference:)`` names the odd one). Frames of
    /// several exposures are merged at the shortest, their clipped samples left out, so that
    /// every highlight a frame saw is kept; the DNG's BaselineExposure is raised by the stops the
    /// reference was exposed over the shortest, so that it renders as the reference. The
    /// noise model is the reference's NoiseProfile, else estimated from its samples; it drives
    /// ``MergeMethod/hdrplus`` and gives the merged mosaic's NoiseProfile.
    static func stackRaw(_ files: [String], options requested: StackOptions) throws -> StackResult {
        let start = Date()
        let headers = try RawBurstCheck.headers(files, reference: requested.reference)
        guard let refHeader = headers.indices.contains(requested.reference) ? headers[requested.reference] : nil
        else {
            // The reference does not read: let the ordinary path say why, frame by frame.
            return try decodeAndStack(files, decoder: .rawPlanes, options: requested, start: start)
        }
        if requested.merge == .hdrplus && refHeader.raw.cfa == nil { throw StackError.hdrplusNeedsBayerRaw }
        let gains = try RawBurstCheck.exposureGains(headers, files: files, reference: requested.reference)
        if requested.erase != nil, let odd = files.first(where: { gains[$0] != nil }) {
            // The erase pass samples the frames as pictures, where a clipped sample would count.
            throw StackError.rawFrameMismatch(
                frame: odd,
                what: "exposure \(String(format: "%.3g", 1 / gains[odd]!))x the shortest frame's, and --erase "
                    + "merges frames of one exposure", reference: files[requested.reference])
        }
        var options = requested
        options.rawExposureGains = gains
        if let g = gains.values.min() {
            let raw = refHeader.raw, white = raw.whiteLevel
            let black = raw.blackLevels.reduce(0, +) / Float(max(1, raw.blackLevels.count))
            let clip = (black + RawPlanes.clippedFraction * (white - black) * g) * RawPlanes.scale(white: white)
            options.alignCeiling = UInt16(max(0, min(65534, clip.rounded(.down))))
        }
        options.rawLayout = RawPlaneLayout(cfa: refHeader.raw.cfa)
        options.localAlignment = requested.localAlignment.linear
        if let mask = requested.erase { options.erase = try RawPlanes.planeMask(mask, frame: refHeader) }
        if refHeader.raw.cfa != nil {
            // Registrations are given and reported in photosites; the planes' pixels are cells.
            options.givenHomographies = requested.givenHomographies?.map { $0.map(RawPlanes.toPlanes) }
        }
        let declared = refHeader.raw.noise
        if let model = declared { options.sampleNoise = RawPlanes.sampleNoise(model, of: refHeader.raw) }
        var r = try decodeAndStack(files, decoder: .rawPlanes(gains: gains), options: options, start: start)
        r.notices += files.compactMap { f in gains[f].map { StackNotice.exposureScaled(source: f, factor: $0) } }
        // Merged at the shortest exposure: the DNG says how far to raise it to look as the
        // reference does (what the reference clipped is kept above that).
        let referenceStops = log2(1 / (gains[files[requested.reference]] ?? 1))
        if refHeader.raw.cfa != nil {
            for i in r.frames.indices { r.frames[i].homography = r.frames[i].homography.map(RawPlanes.toPhotosites) }
        }
        let planes = r.image.uint16
        // The reference as a whole frame, for its odd last row or column.
        var reference = refHeader.raw
        let odd = refHeader.width % 2 == 1 || refHeader.height % 2 == 1
        if odd { reference = try RawCodec.read(r.frames[r.referenceIndex].source).raw }
        let noise = declared ?? RawNoiseEstimate.model(r.sampleNoise ?? [], of: reference)
        let merged = Double(max(1, r.usedFrames))
        let mergedNoise = NoiseModel(
            planes: noise.planes.map { NoiseModelPlane(scale: $0.scale / merged, offset: $0.offset / merged) })
        reference.color.baselineExposure += referenceStops
        r.raw = RawStack(
            mosaic: RawPlanes.mosaic(
                planes, like: reference, noise: mergedNoise,
                size: odd ? nil : (refHeader.width, refHeader.height)), noise: noise,
            noiseSource: declared != nil ? "the reference's NoiseProfile" : "estimated from the reference's samples",
            container: refHeader.container,
            denoise: denoised(options, merge: r.merge, channels: planes.channels, frames: r.usedFrames))
        r.maps = r.maps.map { $0.scaled(toWidth: refHeader.width, height: refHeader.height) }
        return r
    }

    /// The strength `frames` frames' planes merged by `merge` were denoised at, nil when they were not.
    static func denoised(_ options: StackOptions, merge: MergeMethod, channels: Int, frames: Int) -> Float? {
        var o = options
        o.merge = merge
        return RawMerge.denoises(o, channels: channels, frames: frames) ? o.rawDenoise : nil
    }

    /// A raw burst's planes merged by ``RawMerge`` (with the reference's noise lines, measured on
    /// its planes when the frames declare none, which `noise` receives), and the noise at
    /// mid-level that the erase pass and the maps judge agreement by.
    static func mergeRawPlanes(
        _ source: BurstFrameSource, _ used: [Int], _ homographies: [Homography?], _ offsets: [DisplacementField?],
        _ options: StackOptions, maps: inout StackMaps?, bandRows: Int?,
        noise: inout [(slope: Float, intercept: Float)]?
    ) throws -> (Image<UInt16>, Float?) {
        let lines = options.sampleNoise ?? RawNoiseEstimate.sampleNoise(source.image(options.reference).uint16)
        noise = lines
        let plain = try RawMerge.merge(
            source, used: used, homographies: homographies, fields: offsets, layout: options.rawLayout!,
            noise: lines, options: options, maps: &maps, bandRows: bandRows,
            afterBand: source.spill.map { s in { s.releaseAll() } })
        let sigma = lines.map { ($0.slope * 32768 + $0.intercept).squareRoot() }.max() ?? 0
        maps?.tolerance = agreement(UInt16.self, noise: sigma)
        return (plain, sigma)
    }

}

extension RawPlanes {
    /// Plane pixel (i, j) of a Bayer burst is the cell whose centre is photosite (2i + 1/2, 2j + 1/2).
    static let cellToPhotosite = Homography([2, 0, 0.5, 0, 2, 0.5, 0, 0, 1])

    /// A registration between frames' planes as one between their photosites.
    static func toPhotosites(_ h: Homography) -> Homography {
        cellToPhotosite * h * cellToPhotosite.inverse!
    }

    /// A registration between frames' photosites as one between their planes.
    static func toPlanes(_ h: Homography) -> Homography {
        cellToPhotosite.inverse! * h * cellToPhotosite
    }

    /// An erase mask painted over the raw frame (its stored size, `frame`'s) as a mask of its
    /// planes: a plane pixel is masked when any of its cell's photosites is.
    static func planeMask(_ mask: EraseMask, frame: RawFile) throws -> EraseMask {
        guard mask.width == frame.width, mask.height == frame.height else {
            throw StackError.eraseMaskSize(
                mask: "\(mask.width)x\(mask.height)", reference: "\(frame.width)x\(frame.height) (the raw as stored)")
        }
        guard frame.raw.cfa != nil else { return mask }
        let w = frame.width / 2, h = frame.height / 2
        var flags = [Bool](repeating: false, count: w * h)
        for y in 0..<h {
            for x in 0..<w {
                let o = 2 * y * mask.width + 2 * x
                flags[y * w + x] =
                    mask.masked[o] | mask.masked[o + 1] | mask.masked[o + mask.width] | mask.masked[o + mask.width + 1]
                    != 0
            }
        }
        return EraseMask(width: w, height: h, masked: flags)
    }
}

extension StackMaps {
    /// The maps of a raw burst's planes at the mosaic's size: each plane pixel covers its 2x2
    /// cell (an odd last row or column repeats the one before).
    func scaled(toWidth w: Int, height h: Int) -> StackMaps {
        let sw = kept.width, sh = kept.height
        guard sw > 0, sh > 0, sw != w || sh != h else { return self }
        func up(_ m: Image<UInt16>, times f: UInt16 = 1) -> Image<UInt16> {
            Image(uninitializedWidth: w, height: h, channels: 1) { d in
                for y in 0..<h {
                    let sy = min(sh - 1, y / 2)
                    for x in 0..<w {
                        d[y * w + x] =
                            m.samples[sy * sw + min(sw - 1, x / 2)].multipliedReportingOverflow(by: f).overflow
                            ? .max : m.samples[sy * sw + min(sw - 1, x / 2)] * f
                    }
                }
            }
        }
        var s = self
        s.kept = up(kept)
        s.provenance = up(provenance)
        // Plane pixels are two photosites apart.
        s.localShift = up(localShift, times: 2)
        return s
    }
}

extension BurstInput {
    /// True when `files` are all camera raws, which are stacked on their sensor samples (files
    /// whose first bytes do not read are left to the decoder to report).
    public static func isRawBurst(_ files: [String]) -> Bool {
        let kinds = files.compactMap { RawSniffer.isRawFile($0) }
        return !kinds.isEmpty && kinds.allSatisfy { $0 }
    }
}

extension StackResult {
    /// The picture to show or write, upright, with the metadata for its file: the merged image
    /// with the reference's metadata, or a raw burst's merged mosaic finished with `finish` (in
    /// float for `bitDepth` 32, else 16-bit) with its colour space's ICC profile.
    public func picture(finish: RawFinishOptions = RawFinishOptions(), bitDepth: Int? = nil) throws -> (
        AnyImage, ImageMetadata
    ) {
        guard let raw else { return (image, referenceMetadata) }
        let m = raw.mosaic, name = frames[referenceIndex].source
        let image: AnyImage =
            bitDepth == 32
            ? .float32(try RawCodec.finished(m, options: finish, as: Float.self, path: name))
            : .uint16(try RawCodec.finished(m, options: finish, as: UInt16.self, path: name))
        return (image.map(m.orientation), ImageMetadata(icc: ICCProfile.profile(for: finish.colorSpace)))
    }
}

extension StackResult {
    /// Writes the result to `path`, atomically: a raw burst's merged mosaic as a DNG (to .dng),
    /// else ``picture(finish:bitDepth:)`` at `bitDepth` (default: the frames' depth; 16 for a
    /// finished raw burst, except JPEG's 8) with its metadata.
    ///
    /// - Returns: The size written (the mosaic's for a DNG, the upright picture's otherwise).
    @discardableResult
    public func write(
        to path: String, finish: RawFinishOptions = RawFinishOptions(), bitDepth: Int? = nil, options: WriteOptions
    ) throws -> (width: Int, height: Int) {
        let format = ImageFormat.forOutput(extension: (path as NSString).pathExtension)
        if let raw, format == .raw {
            try DNGWriter.write(
                raw.mosaic, to: path, overwrite: options.overwrite,
                description: "merged by Evanesco from \(usedFrames) frames (\(merge.rawValue))")
            return (raw.mosaic.width, raw.mosaic.height)
        }
        var (image, metadata) = try picture(finish: finish, bitDepth: bitDepth)
        let depth = bitDepth ?? (raw != nil && format != .jpeg ? 16 : nil)
        if let b = depth, b != 32 { image = b == 8 ? .uint8(image.uint8) : .uint16(image.uint16) }
        var o = options
        o.metadata = metadata
        try ImageCodecs.write(image, to: path, options: o)
        return (image.width, image.height)
    }
}
