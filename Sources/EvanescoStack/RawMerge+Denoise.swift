import CKernels
import EvanescoCore

extension RawMerge {
    /// Whether a merge with `options` of `frames` frames of `channels`-channel planes is denoised:
    /// a Bayer burst's (four channels) of two frames or more (one frame is given back as it is), by
    /// a merge that counts the frames it keeps at each cell (not the median, nor hdrplus, which
    /// keeps the reference), with ``StackOptions/rawDenoise`` above 0.
    static func denoises(_ options: StackOptions, channels: Int, frames: Int) -> Bool {
        channels == 4 && frames >= 2 && options.rawDenoise > 0 && options.merge != .median
            && options.merge != .hdrplus
    }

    /// The transform filter's settings (``evn_raw_transform_params``), chosen on the raw family
    /// (`Benchmarks/raw-denoise-study.py --transform`, docs/benchmarks.md): stage one's hard
    /// threshold, in noise deviations, as in the BM3D papers' 2.7; and how much of luma's pilot
    /// spectrum a colour coefficient keeps: colour edges where luma has an edge. Without it the
    /// colours' shrink flattened the colour of strong dark edges the parallax bursts' alignment
    /// leaves a little off, past the error-pixel line (moto-parallax-iso6400-strong-people-s103
    /// 0.043 % with the Lee filter before, 0.059 % without the guide); at 1, 0.046 %, for up to
    /// 0.55 dB of the colours' gain (lens-iso6400-people 46.18 -> 45.63 dB; aloe-tripod4 49.70 ->
    /// 49.61); at 3, 0.042 % and 0.1-0.5 dB less again.
    static let transform = (threshold: Float(2.7), guide: Float(1))

    /// The merged planes `image` (four channels) denoised by ``evn_raw_denoise_transform``, then
    /// their red and blue again as differences from green at their own sites
    /// (``evn_raw_denoise_differences``, at the photosites `params.site`), whose noise is
    /// ``StackOptions/rawDenoise`` times what the merge left: the channel's noise line (`params`)
    /// over the frames kept at the cell (`kept`). Rows in strips, each thread its own; the output
    /// does not depend on the split. Throws ``OutOfMemoryError/rawDenoise`` if either pass's
    /// scratch memory cannot be had: a merge said to be denoised is.
    static func denoise(
        _ image: inout Image<UInt16>, kept: UnsafeMutablePointer<UInt16>, params: evn_raw_merge_params,
        options: StackOptions
    ) throws {
        guard image.channels == 4 else { return }
        var p = evn_raw_transform_params()
        (p.slope, p.intercept) = (params.slope, params.intercept)
        (p.strength, p.threshold, p.guide) = (options.rawDenoise, transform.threshold, transform.guide)
        p.difference_threshold = differenceThreshold
        p.site = params.site
        let settings = p
        let filtered = try pass(image, kept: kept, settings: settings, evn_raw_denoise_transform)
        image = try pass(image, kept: kept, settings: settings) { merged, kept, w, h, p, y0, y1, out in
            filtered.samples.withUnsafeBufferPointer {
                evn_raw_denoise_differences(merged, $0.baseAddress!, kept, w, h, p, y0, y1, out)
            }
        }
    }

    /// Stage one's threshold, in noise deviations, for red and blue taken again as differences
    /// from green at their own sites (``evn_raw_denoise_differences``): chosen in numpy on the raw
    /// family (`Benchmarks/raw-denoise-study.py --differences`, docs/benchmarks.md, 2026-12-02):
    /// 2.2, 2.7 and 3.2 gave aloe-tripod4 49.70, 49.72 and 49.74 dB.
    static let differenceThreshold: Float = 3.2

    /// One of the denoise's kernels over `image`'s rows, in strips, each thread its own.
    private static func pass(
        _ image: Image<UInt16>, kept: UnsafeMutablePointer<UInt16>, settings: evn_raw_transform_params,
        _ kernel:
            @Sendable (
                UnsafePointer<UInt16>, UnsafePointer<UInt16>, Int32, Int32, UnsafePointer<evn_raw_transform_params>,
                Int32,
                Int32, UnsafeMutablePointer<UInt16>
            ) -> Int32
    ) throws -> Image<UInt16> {
        let w = image.width, h = image.height
        let failed = LockedBox(false)
        let out = image.samples.withUnsafeBufferPointer { src in
            let shared = UncheckedSendable((src.baseAddress!, UnsafePointer(kept)))
            return Image<UInt16>(uninitializedWidth: w, height: h, channels: 4) { d in
                let d = UncheckedSendable(d.baseAddress!)
                StripExecutor.forEachStrip(rows: h, minimumRows: 64) { rows in
                    let status = withUnsafePointer(to: settings) { p in
                        kernel(
                            shared.value.0, shared.value.1, Int32(w), Int32(h), p, Int32(rows.lowerBound),
                            Int32(rows.upperBound), d.value)
                    }
                    if status != 0 { failed.update { $0 = true } }
                }
            }
        }
        if failed.value { throw OutOfMemoryError.rawDenoise }
        return out
    }
}
