import CKernels
import EvanescoCore
import EvanescoIO
import Foundation

/// A raw frame as the stacker merges it: the four photosites of each 2x2 Bayer cell as the four
/// channels of one half-size pixel, so that alignment, warping and every merge run on the
/// sensor's own samples, each colour plane at its own sites and never demosaiced.
///
/// The channels are ordered red, green, blue, then the second green: the grey that registration
/// takes from the first three (`GreyPyramid`'s luma weights, EvanescoAlign) is then a fair luminance of the
/// undemosaiced cell. A LinearRaw frame (three colours a pixel) keeps its three channels at full
/// size.
///
/// Samples are scaled by `65535 / white` (black stays in, unclipped: the noise below black must
/// average out, not be cut), so every raw bit depth uses the full 16-bit range and a merge of many
/// frames keeps the precision it gains; the merged DNG carries the scaled levels.
public struct RawPlanes: Sendable {
    /// Channel of each 2x2 site (row-major) for `cfa`: red, first green, blue, second green.
    public static func channels(of cfa: CFAPattern) -> [Int] {
        var seenGreen = false
        return cfa.colors.map { c in
            switch c {
            case 0: return 0
            case 2: return 2
            default:
                defer { seenGreen = true }
                return seenGreen ? 3 : 1
            }
        }
    }

    /// The factor raw units are multiplied by in the planes.
    public static func scale(white: Float) -> Float { 65535 / max(1, white) }

    /// The planes of `raw`: half size with four channels for a Bayer mosaic (an odd last row or
    /// column is left out; ``mosaic(_:like:noise:size:)`` takes it back from the reference), the three
    /// colours for LinearRaw.
    ///
    /// A frame of another exposure than the reference's is scaled to it by `gain` (the
    /// reference's exposure over the frame's) about its black: v' = black + (v - black) gain.
    /// Its samples that carry nothing then are 65535 (``missing``): those it clipped (within
    /// ``clippedFraction`` of white) and those the gain takes past full scale. The merge gives
    /// them no weight (`clipped_is_missing`).
    public static func planes(_ raw: RawMosaic, gain: Float = 1) -> Image<UInt16> {
        RawSampleRows.of(raw.samples) { planes(raw, rows: $0, gain: gain) }
    }

    /// ``planes(_:gain:)`` of `raw`'s header (its levels and CFA) over its samples `rows`, which
    /// need not be `raw`'s own: those of a file read without copying them
    /// (`RawCodec.read(_:limits:rows:)`, EvanescoIO).
    public static func planes(_ raw: RawMosaic, rows: RawSampleRows, gain: Float = 1) -> Image<UInt16> {
        guard let cfa = raw.cfa else {
            let black = raw.blackLevels.reduce(0, +) / Float(max(1, raw.blackLevels.count))
            let lut = scaling(white: raw.whiteLevel, black: black, gain: gain), n = rows.width * 3
            return Image(uninitializedWidth: rows.width, height: rows.height, channels: 3) { d in
                for y in 0..<rows.height {
                    let s = rows.row(y), o = y * n
                    for i in 0..<n { d[o + i] = lut[Int(s[i])] }
                }
            }
        }
        let w = rows.width / 2, h = rows.height / 2, map = channels(of: cfa)
        let black = { (site: Int) in raw.blackLevels[site < raw.blackLevels.count ? site : 0] }
        let luts =
            gain == 1
            ? [scaling(white: raw.whiteLevel)]
            : (0..<4).map { scaling(white: raw.whiteLevel, black: black($0), gain: gain) }
        return Image(uninitializedWidth: w, height: h, channels: 4) { d in
            StripExecutor.forEachStrip(rows: h, minimumRows: 16) { strip in
                for y in strip {
                    for site in 0..<4 {
                        let c = map[site], s = rows.row(2 * y + site / 2)
                        var o = site % 2, di = y * w * 4 + c
                        luts[gain == 1 ? 0 : site].withUnsafeBufferPointer { lut in
                            for _ in 0..<w {
                                d[di] = lut[Int(s[o])]
                                o += 2
                                di += 4
                            }
                        }
                    }
                }
            }
        }
    }

    /// The sample a frame scaled to another exposure has where it carries nothing (the kernels'
    /// EVN_RAW_MISSING).
    public static let missing = UInt16(EVN_RAW_MISSING)
    /// How near white (as a fraction of white minus black) a frame scaled to another exposure
    /// is taken to have clipped: sensors turn non-linear just below their clip.
    public static let clippedFraction: Float = 0.98

    /// Every raw value's scaled sample: round(v * 65535 / white), at most 65535; with a gain
    /// other than 1, round((black + (v - black) gain) * 65535 / white), and ``missing`` where
    /// v is within ``clippedFraction`` of white or the result would pass 65534.
    public static func scaling(white: Float, black: Float = 0, gain: Float = 1) -> [UInt16] {
        let k = 65535 / Double(max(1, white))
        guard gain != 1 else { return (0...65535).map { UInt16(min(65535, (Double($0) * k).rounded())) } }
        let b = Double(black), g = Double(gain), clip = b + Double(clippedFraction) * (Double(white) - b)
        return (0...65535).map { v in
            let s = ((b + (Double(v) - b) * g) * k).rounded()
            return Double(v) >= clip || s >= Double(missing) ? missing : UInt16(max(0, s))
        }
    }

    /// The merged planes put back into a mosaic laid out as `reference` is: its CFA, size,
    /// colour, camera and orientation, levels scaled as the planes were, and `noise` (the merged
    /// frame's). An odd last row or column comes from the reference's own samples, scaled.
    /// `size`: the mosaic's, when the reference's samples were not read (a header: only for an
    /// even size, which the planes cover whole).
    public static func mosaic(
        _ planes: Image<UInt16>, like reference: RawMosaic, noise: NoiseModel?, size: (width: Int, height: Int)? = nil
    ) -> RawMosaic {
        let k = scale(white: reference.whiteLevel), ref = reference.samples
        let edge = scaling(white: reference.whiteLevel)
        let samples: Image<UInt16>
        if let cfa = reference.cfa {
            let w = size?.width ?? ref.width, h = size?.height ?? ref.height, pw = planes.width, ph = planes.height
            precondition(
                (ref.width == w && ref.height == h) || (2 * pw == w && 2 * ph == h),
                "the reference's samples are needed for an odd size")
            let map = channels(of: cfa)
            samples = Image(uninitializedWidth: w, height: h, channels: 1) { d in
                let d = UncheckedSendable(d.baseAddress!)
                planes.samples.withUnsafeBufferPointer { p in
                    ref.samples.withUnsafeBufferPointer { s in
                        let ps = UncheckedSendable((p.baseAddress!, s.baseAddress))
                        StripExecutor.forEachStrip(rows: h, minimumRows: 16) { rows in
                            let (p, s) = ps.value
                            for y in rows {
                                let inRow = y / 2 < ph, o = y * w, po = (y / 2) * pw * 4, site = (y & 1) * 2
                                for x in 0..<w {
                                    d.value[o + x] =
                                        inRow && x / 2 < pw
                                        ? p[po + (x / 2) * 4 + map[site + (x & 1)]] : edge[Int(s![o + x])]
                                }
                            }
                        }
                    }
                }
            }
        } else {
            samples = planes
        }
        var m = reference
        m.samples = samples
        m.blackLevels = reference.blackLevels.map { $0 * k }
        m.whiteLevel = min(65535, reference.whiteLevel * k)
        m.noise = noise
        return m
    }

    /// `raw`'s noise model in the planes' units: the variance of a sample `v` of channel `c` is
    /// `slope[c] * v + intercept[c]` (v with its black). The DNG model says variance = S x + O for
    /// x = (v - black) / (white - black), so slope = S range and intercept = O range^2 - S range black.
    public static func sampleNoise(_ model: NoiseModel, of raw: RawMosaic) -> [(slope: Float, intercept: Float)] {
        let k = scale(white: raw.whiteLevel)
        let colours: [Int] = raw.cfa == nil ? [0, 1, 2] : [0, 1, 2, 1]
        // Black of each channel: the mean over the sites of its colour (they agree in practice).
        let blacks: [Float] = (0..<colours.count).map { c in
            guard let cfa = raw.cfa else { return raw.blackLevels.reduce(0, +) / 4 * k }
            let sites = (0..<4).filter { channels(of: cfa)[$0] == c }
            return sites.map { raw.blackLevels[$0] }.reduce(0, +) / Float(max(1, sites.count)) * k
        }
        return colours.indices.map { c in
            let p = model.plane(colours[c]), range = Double(raw.whiteLevel * k - blacks[c])
            let slope = p.scale * range
            return (Float(slope), Float(p.offset * range * range - slope * Double(blacks[c])))
        }
    }
}

/// The header of every frame of a raw burst, checked against the reference's before any frame
/// is decoded: one camera, one size, one CFA, one orientation; exposures may differ (a bracket),
/// and each frame is then scaled to the shortest (``exposureGains(_:files:reference:)``).
public enum RawBurstCheck {
    /// Relative difference of exposure (time x ISO) within which frames are taken as equal.
    public static let exposureTolerance: Float = 0.02
    /// The most stops a frame's exposure may be longer than the shortest frame's.
    public static let exposureStops = 6
    /// The widest ratio of exposures merged: 2^``exposureStops``.
    public static let exposureRange = Float(1 << exposureStops)

    /// Reads the headers of `files` and checks them against the reference's.
    ///
    /// - Returns: The headers (samples empty), in file order; nil for files whose header does not
    ///   read (the decoder reports them).
    /// - Throws: ``StackError/rawFrameMismatch(frame:what:reference:)`` naming the first odd frame.
    public static func headers(_ files: [String], reference: Int) throws -> [RawFile?] {
        // Two files at a time, as the frames are decoded (a file read whole where its header
        // cannot be read alone).
        let probed = LockedBox([RawFile?](repeating: nil, count: files.count))
        StripExecutor.forEachIndex(in: 0..<files.count, workers: 2) { i in
            let h = try? RawCodec.probe(path: files[i])
            probed.update { $0[i] = h }
        }
        let headers = probed.value
        guard reference >= 0, reference < files.count, let ref = headers[reference] else { return headers }
        for (i, h) in headers.enumerated() where i != reference {
            guard let h else { continue }
            if let what = mismatch(h, ref) {
                throw StackError.rawFrameMismatch(frame: files[i], what: what, reference: files[reference])
            }
        }
        return headers
    }

    /// A frame's exposure: time x ISO (ISO 1 when not given), nil when its time is not given.
    static func exposure(_ m: RawMosaic) -> Float? {
        m.capture.exposureTime > 0 ? m.capture.exposureTime * max(1, m.capture.iso) : nil
    }

    /// The factor each frame's samples are scaled by to the shortest exposure of the burst (the
    /// shortest over the frame's), by file, for the frames whose exposure is longer than the
    /// shortest by more than ``exposureTolerance``, the reference's included; empty when the
    /// frames' exposures agree. The merge then holds every highlight a frame saw, whichever
    /// frame is the reference.
    ///
    /// - Throws: ``StackError/rawFrameMismatch(frame:what:reference:)`` for a frame more than
    ///   ``exposureStops`` longer than the shortest, or one that does not say its exposure in a
    ///   burst whose exposures differ.
    public static func exposureGains(_ headers: [RawFile?], files: [String], reference: Int) throws -> [String: Float] {
        guard headers.indices.contains(reference), headers[reference] != nil else { return [:] }
        let describe = { (m: RawMosaic) in
            m.capture.exposureTime > 0
                ? String(format: "%.3g s at ISO %.0f", m.capture.exposureTime, m.capture.iso) : "not given"
        }
        let known = headers.indices.compactMap { i in headers[i].flatMap { exposure($0.raw) }.map { (i, $0) } }
        guard let shortest = known.min(by: { $0.1 < $1.1 }) else { return [:] }
        var gains: [String: Float] = [:]
        for (i, e) in known where abs(e / shortest.1 - 1) > exposureTolerance {
            guard e / shortest.1 <= exposureRange else {
                throw StackError.rawFrameMismatch(
                    frame: files[i],
                    what: "exposure \(describe(headers[i]!.raw)), more than \(exposureStops) stops longer than "
                        + "\(files[shortest.0])'s \(describe(headers[shortest.0]!.raw))",
                    reference: files[reference])
            }
            gains[files[i]] = shortest.1 / e
        }
        guard !gains.isEmpty else { return [:] }
        // Frames that do not say their exposure cannot be scaled with the others.
        if let i = headers.indices.first(where: { headers[$0].map { exposure($0.raw) == nil } ?? false }) {
            throw StackError.rawFrameMismatch(
                frame: files[i], what: "exposure not given in a burst of several exposures",
                reference: files[reference])
        }
        return gains
    }

    /// What differs between a frame's header and the reference's, in words; nil when nothing does.
    static func mismatch(_ file: RawFile, _ refFile: RawFile) -> String? {
        let f = file.raw, r = refFile.raw
        let camera = { (m: RawMosaic) in
            m.capture.uniqueCameraModel.isEmpty ? "\(m.capture.make) \(m.capture.model)" : m.capture.uniqueCameraModel
        }
        if camera(f) != camera(r) { return "camera \(camera(f)), not \(camera(r))" }
        if file.width != refFile.width || file.height != refFile.height {
            return "size \(file.width)x\(file.height), not \(refFile.width)x\(refFile.height)"
        }
        if f.layout != r.layout {
            return "colour filter \(f.cfa?.description ?? "LinearRaw"), not \(r.cfa?.description ?? "LinearRaw")"
        }
        if f.orientation != r.orientation {
            return "orientation \(f.orientation.rawValue), not \(r.orientation.rawValue)"
        }
        return nil
    }
}
