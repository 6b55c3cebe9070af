import CKernels
import EvanescoAlign
import EvanescoCore
import Foundation

extension RawMerge {
    /// The blend's settings (``evn_raw_blend_params``), chosen on make_raw_burst.py bursts
    /// (docs/benchmarks.md, "Raw bursts"): beta for how much of the Wiener merge a block takes;
    /// the guard and contrast terms that find what moved in the reference; how far (cells) that
    /// region is grown; beyond how many times its limit the vote replaces a frame's values before
    /// the Wiener merge reads them (2: on moto-parallax, nightcars, lens and pug-people, 1 cost
    /// aloe-iso100 0.24 dB, where the vote turns away frames whose gather softened an edge, and
    /// 3 lens-iso1600-people 0.13 dB; what moves in other frames then needs no guard of its own,
    /// docs/benchmarks.md); and how its Wiener
    /// merge pulls frames towards the reference: the energy two frames' noise gives their
    /// difference (2 s2) taken off first, then c = 4 (on pug-static, aloe-iso100, moto-iso1600
    /// and graf-iso3200: c 3 / 4 / 5 with 2 s2 off, 1 / 1.5 / 2 s2 off with c 4, and the papers'
    /// c = 8 with nothing off; every burst of the family gained, docs/benchmarks.md). `dense`: where
    /// more than `fraction` of the 21 x 21 cells around a cell moved (after the growth), the cell
    /// counts as moving too. At ISO 3200-6400 the guard finds a passer-by in the reference in
    /// patches, and the Wiener merge kept the rest of it (tree-iso3200-strong-people 0.122 ->
    /// 0.063 % error pixels, nightcars-iso6400-people 0.469 -> 0.245 %); parallax leaves thin
    /// traces that stay under the fraction, where growing everything by 10 cells instead of 5 cost
    /// moto-parallax-strong-people 1.95 dB (0.10 dB this way; 0.15 of the cells: 0.68 dB).
    /// `wide`: the guard again on the 2 x 2 means of the cells, over 5 x 5 of them (10 x 10
    /// cells), where the noise averages down, at 3 noise variances plus 9 times the gradient
    /// energy (the 4 x 4 test's weight: texture does not average down). A faint passer-by at ISO
    /// 3200-6400 the 4 x 4 test missed (graf-iso6400-people 0.252 -> 0.021 % error pixels,
    /// tree-iso3200-strong-people 0.063 -> 0.030 %); 9 x 9 cells at full resolution did as well
    /// (0.008 %) for 0.1 s more CPU on 12 x 12 MP, 7 x 7 blocks let graf's back (0.039 %); 3 times
    /// the gradient energy cost aero-iso100 0.74 dB and moto-parallax-iso800-people
    /// 1.03 dB, 9 costs no burst of the family more than 0.06 dB. `vote`: what moved in the
    /// reference too, where over 9 x 9 cells the reference's distance from the vote, in units of
    /// the frames' noise and disagreement (``evn_raw_merge_cells``' `reference_deviation`), each
    /// cell's taken at most 4, averages more than 2 (noise alone: about 1). Texture the gather
    /// softened needs no term of its own there: the frames' disagreement is in the unit. A
    /// passer-by on texture at ISO 6400 the guard's gradient term let through
    /// (moto-iso6400-people 0.078 -> 0.002 %, tree-iso6400-people 0.242 -> 0.095 %); without the
    /// cap depth edges counted (moto-parallax-iso800-people -0.80 dB), at 1.6 aloe-iso100 lost
    /// 0.24 dB, at 2 no burst of 37 more than 0.03 dB. `offset`: what moved in the reference where
    /// the frames disagree (parallax, texture at ISO 3200-6400), which widens the vote's unit cell
    /// by cell: over 9 x 9 cells the reference's signed distance from the vote (each cell's
    /// clamped to 4 units) still lies to one side, by more than 5 standard errors of noise
    /// (``evn_raw_blend_offset_guard``). moto-parallax-iso6400-people 0.430 -> 0.147 % error
    /// pixels, aloe-parallax-iso6400-people 0.060 -> 0.006 %, tree-iso6400-people 0.094 ->
    /// 0.055 %; 4 standard errors cost moto-parallax-iso800-people 0.77 dB (0.06 dB at 5), 13 x
    /// 13 cells 0.98 dB; the mean over the channels first (one plane) 0.78 dB; the signed
    /// distance of the reference from the robust merge itself, in noise units without the
    /// frames' disagreement, cost aero-iso100 7.7 dB and every parallax burst 1-5 dB.
    static let blend = (
        beta: Float(0.25), guard: Float(9), contrast: Float(1), dilation: Int32(5), replaceBeyond: Float(2),
        pull: WienerPull(c: 4, expected: 2), dense: (radius: Int32(10), fraction: Float(0.3)),
        wide: (radius: Int32(2), guard: Float(3), contrast: Float(9)),
        vote: (radius: Int32(4), cap: Float(4), threshold: Float(2)),
        offset: (radius: Int32(4), threshold: Float(25))
    )

    /// Whether a merge of `channels`-channel planes of `frames` frames is blended
    /// (``voteAndBlend(_:source:used:params:options:maps:)``): the robust merge of a
    /// Bayer burst of at least three frames.
    static func blends(_ options: StackOptions, channels: Int, frames: Int) -> Bool {
        options.merge == .robust && channels == 4 && frames >= 3
    }

    /// The vote and the Wiener merge anchored on the reference in one pass (each row of each frame
    /// gathered once, for both), then ``blended(_:wiener:frames:source:used:options:params:vote:)``
    /// and ``denoise(_:kept:params:options:)``.
    static func voteAndBlend(
        _ frames: [(evn_raw_frame, DisplacementField?)], source: BurstFrameSource, used: [Int],
        params: evn_raw_merge_params, options: StackOptions, maps: inout StackMaps?, release: Release? = nil
    ) throws -> Image<UInt16> {
        let w = source.width, h = source.height, n = used.count, ref = used.firstIndex(of: options.reference) ?? 0
        let segment = 256, stride = segment * 4, row = w * 4
        let denoising = denoises(options, channels: 4, frames: n)
        let outputs = CellOutputs(cells: w * h, maps: maps != nil, kept: denoising, distances: true)
        var voting = params
        voting.replace_beyond = blend.replaceBeyond
        let scratch = VoteScratch(voting, frames: n, segment: segment)
        var wiener: Image<UInt16>?
        let robust = Image<UInt16>(uninitializedWidth: w, height: h, channels: 4) { dst in
            wiener = withFrames(frames, source: source, used: used) { pinned in
                defer { release?.call() }
                return Self.wiener(
                    pinned, params: params, reference: ref, width: w, height: h, progress: options.progress,
                    release: release, pull: blend.pull
                ) { values, weights, y0, band, ring, handedOn in
                    // Another strip's rows are voted only for the values the vote replaces, which
                    // this strip's tiles read too (the cells' outputs are that strip's to write).
                    scratch.buffers.borrow { buffer in
                        for r in band {
                            var x0 = 0
                            while x0 < w {
                                let count = min(segment, w - x0), o = (y0 + r) * w + x0
                                let at = bandRow(r, ring: ring) * row + x0 * 4
                                voteSegment(
                                    scratch.params, frames: n, count: count, stride: stride, buffer: buffer,
                                    network: scratch.network, kept: handedOn ? outputs.kept.map { $0 + o } : nil,
                                    best: handedOn ? outputs.best.map { $0 + o } : nil,
                                    gathered: (values + at, weights + at, 16 * row),
                                    deviation: handedOn ? outputs.deviation.map { $0 + o } : nil,
                                    offset: handedOn ? outputs.offset.map { $0 + 4 * o } : nil)
                                if handedOn {
                                    let merged = buffer + 4 * n * stride
                                    for j in 0..<(count * 4) { dst[o * 4 + j] = UInt16(clampingRounded: merged[j]) }
                                }
                                x0 += count
                            }
                        }
                    }
                }
            }
        }
        if let k = outputs.kept, let b = outputs.best { fill(&maps, kept: k, best: b, used: used, width: w, height: h) }
        var out = try blended(
            robust, wiener: wiener!, frames: frames, source: source, used: used, options: options, params: params,
            vote: outputs)
        if denoising, let k = outputs.kept {
            try denoise(&out, kept: k, params: params, options: options)
        }
        return out
    }

    /// The robust merge `robust` blended with HDR+'s Wiener merge anchored on the reference, `wiener`, except
    /// where something moved in the reference: there the robust merge alone (what the frames
    /// agree on). What moved in the other frames the vote replaced before the Wiener merge.
    /// Elsewhere texture the robust merge's gather softened comes back from the reference's own
    /// samples, and flat places keep the robust merge's lower noise
    /// (``evn_raw_blend_channel``). `vote`: the vote's cell outputs, whose distances of the
    /// reference from it the guards read. Throws ``OutOfMemoryError/rawBlend`` if the guards' and
    /// the blend's scratch memory cannot be had.
    static func blended(
        _ robust: Image<UInt16>, wiener: Image<UInt16>,
        frames: [(evn_raw_frame, DisplacementField?)], source: BurstFrameSource, used: [Int], options: StackOptions,
        params: evn_raw_merge_params, vote outputs: CellOutputs
    ) throws -> Image<UInt16> {
        let w = source.width, h = source.height, cells = w * h, ref = used.firstIndex(of: options.reference) ?? 0
        var bp = evn_raw_blend_params()
        (bp.slope, bp.intercept) = (params.slope, params.intercept)
        (bp.beta, bp.guard, bp.contrast) = (blend.beta, blend.guard, blend.contrast)
        (bp.wide_radius, bp.wide_guard, bp.wide_contrast) = (blend.wide.radius, blend.wide.guard, blend.wide.contrast)
        let settings = bp
        let failed = LockedBox(false)
        let moving = UnsafeMutablePointer<UInt8>.allocate(capacity: cells)
        defer { moving.deallocate() }
        let out = withFrames(frames, source: source, used: used) { pinned -> Image<UInt16> in
            // Moving in any colour, or by the vote's or the offsets' guard, is moving in all of
            // them; grown to cover its edges.
            robust.samples.withUnsafeBufferPointer { r in
                if !guards(
                    r.baseAddress!, reference: pinned[ref].planes!, width: w, height: h, settings, outputs, moving)
                {
                    failed.update { $0 = true }
                }
            }
            if evn_raw_blend_dilate(moving, Int32(w), Int32(h), blend.dilation) != 0 { failed.update { $0 = true } }
            if evn_raw_blend_fill_dense(moving, Int32(w), Int32(h), blend.dense.radius, blend.dense.fraction) != 0 {
                failed.update { $0 = true }
            }
            return Image(uninitializedWidth: w, height: h, channels: 4) { d in
                let d = UncheckedSendable(d.baseAddress!)
                robust.samples.withUnsafeBufferPointer { r in
                    wiener.samples.withUnsafeBufferPointer { wv in
                        let rw = UncheckedSendable((r.baseAddress!, wv.baseAddress!))
                        StripExecutor.forEachStrip(rows: 4, minimumRows: 1) { channels in
                            for ch in channels {
                                let status = withUnsafePointer(to: settings) { p in
                                    evn_raw_blend_channel(
                                        rw.value.0, rw.value.1, moving, Int32(w), Int32(h), Int32(ch), p, d.value)
                                }
                                if status != 0 { failed.update { $0 = true } }
                            }
                        }
                    }
                }
            }
        }
        if failed.value { throw OutOfMemoryError.rawBlend }
        return out
    }

    /// Where something moved in the reference, into `moving` (1 byte a cell: 1 where it did): each
    /// colour's guard (``evn_raw_blend_guard``), the vote's (``evn_raw_blend_vote_guard``) and the
    /// offsets' (``evn_raw_blend_offset_guard``), side by side into planes of their own, then their
    /// union. False where their scratch memory could not be had.
    static func guards(
        _ robust: UnsafePointer<UInt16>, reference: UnsafePointer<UInt16>, width w: Int, height h: Int,
        _ settings: evn_raw_blend_params, _ outputs: CellOutputs, _ moving: UnsafeMutablePointer<UInt8>
    ) -> Bool {
        let cells = w * h, planes = UnsafeMutablePointer<UInt8>.allocate(capacity: 6 * cells)
        defer { planes.deallocate() }
        let failed = LockedBox(false), vote = blend.vote, offset = blend.offset
        let shared = UncheckedSendable((robust, reference, planes, outputs.deviation, outputs.offset))
        StripExecutor.forEachStrip(rows: 6, minimumRows: 1) { tasks in
            let (r, ref, planes, deviation, signed) = shared.value
            for task in tasks {
                let m = planes + task * cells
                var status: Int32 = 0
                if task < 4 {
                    status = withUnsafePointer(to: settings) { p in
                        evn_raw_blend_guard(r, ref, Int32(w), Int32(h), Int32(task), p, m)
                    }
                } else {
                    m.update(repeating: 0, count: cells)
                    if task == 4, let deviation {
                        status = evn_raw_blend_vote_guard(
                            deviation, Int32(w), Int32(h), vote.radius, vote.cap, vote.threshold, m)
                    } else if task == 5, let signed {
                        status = evn_raw_blend_offset_guard(
                            signed, Int32(w), Int32(h), 4, offset.radius, offset.threshold, m)
                    }
                }
                if status != 0 { failed.update { $0 = true } }
            }
        }
        for i in 0..<cells {
            moving[i] =
                planes[i] | planes[cells + i] | planes[2 * cells + i] | planes[3 * cells + i] | planes[4 * cells + i]
                | planes[5 * cells + i]
        }
        return !failed.value
    }
}
