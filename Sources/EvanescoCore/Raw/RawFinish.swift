import CKernels
import Foundation

/// How a raw frame is finished into a photo: its one declaration of each setting.
public struct RawFinishOptions: Sendable, Equatable, Codable, DeclaresSettings {
    /// The colour space of the finished pixels (an ICC profile of it goes with them).
    public enum ColorSpace: String, Sendable, CaseIterable, Codable {
        /// sRGB primaries and curve: what screens and the web expect.
        case sRGB = "srgb"
        /// Display P3 (wider, as iPhone photos): the P3 primaries with the sRGB curve.
        case displayP3 = "display-p3"
        /// Linear light, sRGB primaries: for further processing (float TIFF).
        case linearSRGB = "linear-srgb"
        /// Linear light, ProPhoto (ROMM) primaries, D50: the widest, for editing.
        case linearProPhoto = "linear-prophoto"

        /// Whether the samples are linear light (no curve, no tone).
        public var isLinear: Bool { self == .linearSRGB || self == .linearProPhoto }
        /// The primaries.
        public var primaries: RGBPrimaries {
            switch self {
            case .sRGB, .linearSRGB: .sRGB
            case .displayP3: .displayP3
            case .linearProPhoto: .proPhoto
            }
        }
    }

    /// The contrast curve of a display-referred finish.
    public enum Tone: String, Sendable, CaseIterable, Codable {
        /// A gentle S curve after the output curve (3v^2 - 2v^3, as the unprocessing papers' camera).
        case standard
        /// The output curve alone.
        case none
    }

    /// Which white the picture is balanced to.
    public enum WhiteBalance: String, Sendable, CaseIterable, Codable {
        /// The camera's white as shot (DNG AsShotNeutral, the maker's multipliers).
        case asShot = "as-shot"
        /// Daylight (D65) through the file's colour matrix.
        case daylight
    }

    public var colorSpace: ColorSpace
    public var tone: Tone
    public var whiteBalance: WhiteBalance
    /// Stops added to the file's baseline exposure.
    public var exposure: Float

    public init(
        colorSpace: ColorSpace = .sRGB, tone: Tone = .standard, whiteBalance: WhiteBalance = .asShot,
        exposure: Float = Float(RawFinishOptions.exposureSetting.defaultValue!)
    ) {
        self.colorSpace = colorSpace
        self.tone = tone
        self.whiteBalance = whiteBalance
        self.exposure = exposure
    }

    /// The range of ``exposure``.
    public static let exposureSetting = NumericSetting("exposure", -8...8, default: 0, unit: "EV")

    public static let settings: [Setting] = [
        .choice(
            "colorSpace", ColorSpace.self, default: Self().colorSpace,
            summary: "Colour space of a finished raw (its ICC profile is embedded); linear ones skip the tone curve"),
        .choice(
            "tone", Tone.self, default: Self().tone, summary: "Contrast curve of a finished raw (display spaces)"),
        .choice(
            "whiteBalance", WhiteBalance.self, default: Self().whiteBalance,
            summary: "White balance of a finished raw"),
        .number("exposure", exposureSetting)
    ]

    /// Refuses an exposure out of range.
    public func validate() throws(SettingError) { try Self.exposureSetting.check(exposure) }
}

/// Why a raw frame cannot be finished.
public struct RawFinishError: Error, Equatable, CustomStringConvertible {
    public var detail: String
    public var description: String { "cannot finish the raw frame: \(detail)" }
}

/// A raw frame into a photo: black and white levels, white balance, exposure (the file's baseline
/// plus the user's), demosaic (gradient-weighted directional green, colour-difference red and
/// blue), camera to the output space through the file's colour matrix, output curve and tone.
public enum RawFinish {
    /// The sRGB curve's table (`count` entries over 0...1), with the tone curve after it.
    static func curveTable(tone: RawFinishOptions.Tone, count: Int = 16385) -> [Float] {
        (0..<count).map { i in
            let v = SRGB.fromLinear(Float(i) / Float(count - 1))
            return tone == .standard ? v * v * (3 - 2 * v) : v
        }
    }

    /// White-balanced camera RGB to the output space: the file's XYZ-to-camera matrix times sRGB's
    /// RGB-to-XYZ, rows normalised so that white stays white, inverted; then sRGB to the output
    /// primaries (Bradford to D50 for ProPhoto).
    public static func cameraToOutput(_ color: RawColor, space: RawFinishOptions.ColorSpace) throws(RawFinishError)
        -> Matrix3
    {
        let camFromSRGB = color.cameraFromSRGB
        let sums = color.daylightNeutral
        guard sums.allSatisfy({ $0.isFinite && $0 > 0 }), let srgbFromCam = camFromSRGB.rowNormalized.inverse else {
            throw RawFinishError(detail: "its colour matrix is singular or not finite")
        }
        let target = space.primaries
        let outFromSRGB =
            target == .sRGB
            ? Matrix3.identity
            : target.toXYZ.inverse! * RGBPrimaries.bradford(from: RGBPrimaries.d65, to: target.white)
                * RGBPrimaries.sRGB.toXYZ
        return outFromSRGB * srgbFromCam
    }

    /// The gains of red, green and blue, the smallest 1 (so that every saturated site stays white).
    public static func gains(_ color: RawColor, balance: RawFinishOptions.WhiteBalance) throws(RawFinishError)
        -> [Float]
    {
        let neutral: [Double]
        switch balance {
        case .asShot: neutral = color.asShotNeutral.map(Double.init)
        case .daylight: neutral = color.daylightNeutral
        }
        guard neutral.count == 3, neutral.allSatisfy({ $0.isFinite && $0 > 0 }) else {
            throw RawFinishError(detail: "its white balance (\(neutral)) is not three positive numbers")
        }
        let g = neutral.map { 1 / $0 }
        let least = g.min()!
        return g.map { Float($0 / least) }
    }

    /// Finishes `raw` into samples of type `T` (8-bit, 16-bit or float), as stored (apply
    /// `raw.orientation` to show it upright).
    public static func render<T: PixelSample>(
        _ raw: RawMosaic, options: RawFinishOptions = RawFinishOptions(), as: T.Type
    ) throws(RawFinishError) -> Image<T> {
        guard raw.width >= 8, raw.height >= 8 else {
            throw RawFinishError(detail: "it is \(raw.width)x\(raw.height), smaller than 8x8")
        }
        guard raw.blackLevels.allSatisfy({ $0.isFinite && $0 >= 0 && $0 < raw.whiteLevel }), raw.whiteLevel.isFinite
        else {
            throw RawFinishError(
                detail: "its black level (\(raw.blackLevels)) is not below its white level "
                    + "(\(raw.whiteLevel))")
        }
        let gains = try gains(raw.color, balance: options.whiteBalance)
        let matrix = try cameraToOutput(raw.color, space: options.colorSpace)
        let exposure = exp2f(raw.color.baselineExposure + options.exposure)
        guard exposure.isFinite, exposure > 0 else {
            throw RawFinishError(detail: "its baseline exposure is not finite")
        }
        let lut = options.colorSpace.isLinear ? nil : curveTable(tone: options.tone)
        let bytes = MemoryLayout<T>.size
        return Image<T>(uninitializedWidth: raw.width, height: raw.height, channels: 3) { pixels in
            var out = evn_raw_output()
            withUnsafeMutableBytes(of: &out.matrix) { m in
                for (i, v) in matrix.m.enumerated() { m.storeBytes(of: Float(v), toByteOffset: i * 4, as: Float.self) }
            }
            out.sample_bytes = Int32(bytes == 8 ? 4 : bytes)
            out.pixels = UnsafeMutableRawPointer(pixels.baseAddress!)
            out.row_bytes = raw.width * 3 * bytes
            (lut ?? []).withUnsafeBufferPointer { table in
                out.lut = lut == nil ? nil : table.baseAddress
                out.lut_size = table.count
                switch raw.layout {
                case .bayer(let cfa): finishBayer(raw, cfa: cfa, gains: gains, exposure: exposure, out: out)
                case .linearRGB: finishLinear(raw, gains: gains, exposure: exposure, out: out)
                }
            }
        }
    }

    static func finishBayer(_ raw: RawMosaic, cfa: CFAPattern, gains: [Float], exposure: Float, out: evn_raw_output) {
        let w = raw.width, h = raw.height, stride = w + 2 * Int(EVN_RAW_PAD)
        let planeSize = stride * (h + 2 * Int(EVN_RAW_PAD))
        let scale = (0..<4).map { p in gains[cfa.color(x: p & 1, y: p >> 1)] / (raw.whiteLevel - raw.blackLevels[p]) }
        let planes = UnsafeMutablePointer<Float>.allocate(capacity: planeSize * 4)
        defer { planes.deallocate() }
        var b = evn_bayer()
        b.cfa = planes
        b.green = planes + planeSize
        b.dh = planes + 2 * planeSize
        b.dv = planes + 3 * planeSize
        b.width = w
        b.height = h
        b.stride = stride
        b.colors = (cfa.colors[0], cfa.colors[1], cfa.colors[2], cfa.colors[3])
        let bayer = b
        raw.samples.samples.withUnsafeBufferPointer { mosaic in
            raw.blackLevels.withUnsafeBufferPointer { black in
                scale.withUnsafeBufferPointer { s in
                    StripExecutor.forEachStrip(rows: h + 2 * Int(EVN_RAW_PAD), minimumRows: 32) { rows in
                        withUnsafePointer(to: bayer) {
                            evn_bayer_levels(
                                $0, mosaic.baseAddress, black.baseAddress, s.baseAddress, exposure, rows.lowerBound,
                                rows.upperBound)
                        }
                    }
                }
            }
        }
        withUnsafePointer(to: bayer) { bp in
            let p = UncheckedSendable(bp)
            StripExecutor.forEachStrip(rows: h + 4, minimumRows: 32) { rows in
                evn_bayer_gradients(p.value, rows.lowerBound - 2, rows.upperBound - 2)
            }
            StripExecutor.forEachStrip(rows: h + 2, minimumRows: 32) { rows in
                evn_bayer_green(p.value, rows.lowerBound - 1, rows.upperBound - 1)
            }
            withUnsafePointer(to: out) { op in
                let o = UncheckedSendable(op)
                StripExecutor.forEachStrip(rows: h, minimumRows: 16) { rows in
                    withUnsafeTemporaryAllocation(of: Float.self, capacity: w * 3) { scratch in
                        evn_bayer_finish_rows(p.value, o.value, rows.lowerBound, rows.upperBound, scratch.baseAddress)
                    }
                }
            }
        }
    }

    static func finishLinear(_ raw: RawMosaic, gains: [Float], exposure: Float, out: evn_raw_output) {
        let black = Array(raw.blackLevels.prefix(3))
        let scale = (0..<3).map { gains[$0] / (raw.whiteLevel - black[$0]) }
        raw.samples.samples.withUnsafeBufferPointer { rgb in
            withUnsafePointer(to: out) { op in
                let o = UncheckedSendable(op)
                StripExecutor.forEachStrip(rows: raw.height, minimumRows: 16) { rows in
                    withUnsafeTemporaryAllocation(of: Float.self, capacity: raw.width * 3) { scratch in
                        evn_linear_raw_finish_rows(
                            rgb.baseAddress, raw.width, black, scale, exposure, o.value, rows.lowerBound,
                            rows.upperBound, scratch.baseAddress)
                    }
                }
            }
        }
    }
}
