import EvanescoAlign
import EvanescoCore
import EvanescoIO
import Foundation

/// The frames of a burst as the pipeline reads them: decoded in memory (``BurstFrame``s), or
/// in a ``FrameSpill`` when they exceed ``StackOptions/memoryLimit``. All have one size and one
/// channel count (checked before this is made).
struct BurstFrameSource: @unchecked Sendable {
    let names: [String]
    let width: Int, height: Int, channels: Int
    /// 8-bit samples (else 16-bit: float frames are merged as 16-bit).
    let eightBit: Bool
    let referenceMetadata: ImageMetadata
    let memory: [BurstFrame]?
    let spill: FrameSpill?
    /// Frame i's slot in `spill`.
    let slots: [Int]
    /// The frames' registrations when they were made as the frames were decoded.
    var aligned: (reports: [FrameReport], fields: [DisplacementField?], parallax: ParallaxSummary?)? = nil
    /// What the result says about the frames themselves (those converted to the burst's depth).
    var notices: [StackNotice] = []

    var count: Int { names.count }

    /// Frame i whole, for registration (a copy, from a spill).
    func image(_ i: Int) -> AnyImage {
        if let memory { return memory[i].image }
        let s = spill!
        return eightBit
            ? .uint8(s.image(slots[i], width: width, height: height, channels: channels, as: UInt8.self))
            : .uint16(s.image(slots[i], width: width, height: height, channels: channels, as: UInt16.self))
    }

    /// Registration has read frame i: a spill drops its pages from the process.
    func doneAligning(_ i: Int) { spill?.release(slots[i]) }

    /// The samplers of frames `used`, with their homographies and local corrections.
    func samplers<S: PixelSample>(
        _ used: [Int], _ homographies: [Homography?], _ offsets: [DisplacementField?],
        _ interpolation: Interpolation, as type: S.Type
    ) -> [RowSampler<S>] {
        used.indices.map { k in
            let i = used[k], h = homographies[k], o = k < offsets.count ? offsets[k] : nil
            if let spill {
                return RowSampler(
                    samples: spill.samples(slots[i], as: S.self), width: width, height: height, channels: channels,
                    owner: spill, homography: h, interpolation: interpolation, offsets: o)
            }
            let image = memory![i].image
            let typed: Image<S> = S.self == UInt8.self ? image.uint8 as! Image<S> : image.uint16 as! Image<S>
            return RowSampler(frame: typed, homography: h, interpolation: interpolation, offsets: o)
        }
    }

    /// Rows per merge band: all of them in memory; from a spill, as many as keep one band of
    /// every merged frame (with a margin for the warp's reach) within half the memory limit,
    /// with `extraBytesPerCell` more of each frame's (a raw burst's ``RawSampling`` estimates).
    func bandRows(frames n: Int, limit: Int?, extraBytesPerCell: Int = 0) -> Int? {
        guard spill != nil else { return nil }
        let rowBytes = max(1, n * width * (channels * (eightBit ? 1 : 2) + extraBytesPerCell))
        let budget = (limit ?? (1 << 30)) / 2
        return max(32, budget / rowBytes - 64) / 16 * 16
    }

    /// ``bandRows(frames:limit:extraBytesPerCell:)`` for `options`' memory limit, with what its
    /// ``RawSampling`` adds to a Bayer burst's frames.
    func bandRows(frames n: Int, options: StackOptions) -> Int? {
        let bayer = options.rawLayout?.offsets.count == 4
        return bandRows(
            frames: n, limit: options.memoryLimit,
            extraBytesPerCell: bayer ? 4 * options.rawSampling.extraBytesPerPhotosite : 0)
    }
}
