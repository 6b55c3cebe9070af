import CKernels
import EvanescoCore

extension RawMerge {
    /// Cells whose 3 x 3 variance exceeds this many times the noise the merge left are texture,
    /// which the denoise leaves as it is (``evn_raw_denoise_params``' `texture`). Chosen on the
    /// family's tuned bursts (`Benchmarks/raw-denoise-study.py --texture`, docs/benchmarks.md): 9
    /// took one error pixel in a thousand off the two tuned bursts nearest the pEPs target
    /// (moto-parallax-iso6400-people 0.070 -> 0.069 %, moto-parallax-iso3200-people 0.043 ->
    /// 0.042 %) and moved no burst's PSNR by more than 0.02 dB; 4 cost moto-iso1600 0.04 dB.
    static let denoiseTexture: Float = 9

    /// The filter's passes, each with the noise it is told as a share of what the merge left:
    /// the second takes what the first leaves of white noise at the default strength (0.35 of its
    /// variance; at 1, 0.16). Chosen on the family's tuned bursts (docs/benchmarks.md): against
    /// one pass, every one of the 32 gained or stayed (+0.30 dB on average, up to +1.28 on
    /// lens-iso6400-people) and none had more error pixels than the merge alone; one pass at
    /// strength 1, which smooths as much, raised moto-parallax-iso6400-people's from 0.070 to 0.078 %.
    static let denoisePasses: [Float] = [1, 0.35]

    /// Whether a merge with `options` of `frames` frames of `channels`-channel planes is denoised:
    /// a Bayer burst's (four channels) of two frames or more (one frame is given back as it is), by
    /// a merge that counts the frames it keeps at each cell (not the median, nor hdrplus, which
    /// keeps the reference), with ``StackOptions/rawDenoise`` above 0.
    static func denoises(_ options: StackOptions, channels: Int, frames: Int) -> Bool {
        channels == 4 && frames >= 2 && options.rawDenoise > 0 && options.merge != .median
            && options.merge != .hdrplus
    }

    /// Each channel of the merged planes `image` denoised in place (``evn_raw_denoise_channel``):
    /// a Lee filter over 3 x 3 cells whose noise is ``StackOptions/rawDenoise`` times what the
    /// merge left, the channel's noise line (`params`) over the frames kept at the cell (`kept`),
    /// in ``denoisePasses``.
    static func denoise(
        _ image: inout Image<UInt16>, kept: UnsafeMutablePointer<UInt16>, params: evn_raw_merge_params,
        options: StackOptions
    ) {
        let w = image.width, h = image.height, c = image.channels
        let slopes = withUnsafeBytes(of: params.slope) { Array($0.bindMemory(to: Float.self)) }
        let intercepts = withUnsafeBytes(of: params.intercept) { Array($0.bindMemory(to: Float.self)) }
        image.samples.withUnsafeMutableBufferPointer { planes in
            let shared = UncheckedSendable((planes.baseAddress!, kept))
            StripExecutor.forEachStrip(rows: c, minimumRows: 1) { channels in
                let rows = UnsafeMutablePointer<Float>.allocate(capacity: 4 * w)
                defer { rows.deallocate() }
                for ch in channels {
                    for share in denoisePasses {
                        var p = evn_raw_denoise_params()
                        (p.slope, p.intercept) = (slopes[ch] * share, intercepts[ch] * share)
                        (p.strength, p.texture) = (options.rawDenoise, denoiseTexture)
                        let status = evn_raw_denoise_channel(
                            shared.value.0, shared.value.1, Int32(w), Int32(h), Int32(c), Int32(ch), &p, rows)
                        precondition(status == 0, "channel \(ch) of \(c)")
                    }
                }
            }
        }
    }
}
