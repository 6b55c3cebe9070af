/// How aligned frames are merged into one picture.
public enum MergeMethod: String, Sendable, Codable, CaseIterable {
    /// Average of the valid samples: the tutorial's running average (`avg += (x - avg) / n`),
    /// which equals the sum over the count. Moving things leave ghosts.
    case mean
    /// The tutorial's idea: for each pixel, the most common hue (HSL, 15-degree bins) among the
    /// frames wins and the frames in that bin are averaged; where too few frames are saturated
    /// enough for hue to mean anything (S < 0.12, or grey input), the per-channel median is used.
    case mode
    /// Per-channel median of the valid samples.
    case median
    /// Median-centred sigma clipping: keep samples with |x - median| <= kappa * (1.4826 MAD + 1)
    /// (the +1 grey-level floor keeps quantised, noise-free stacks from clipping everything),
    /// then average them. kappa defaults to 2.5.
    case sigmaClip = "sigma-clip"
    /// Winsorized mean: the lowest and highest 20 % of the valid samples are replaced by the
    /// nearest kept values, then averaged.
    case winsorized
    /// Evanesco's best (the default): sigma clipping around the median where the threshold adds
    /// the sample's own spread (1.4826 MAD) and the burst's noise (measured once, from the median
    /// absolute deviations of sampled pixels) in quadrature, kappa * sqrt(spread^2 + noise^2),
    /// and a frame is kept at a pixel only if all its colour channels pass, since a frame either
    /// covers a pixel or it does not. Where the frames split widely, the largest group of frames
    /// that agree wins instead if it clearly outnumbers the rest: a crowd over most of the frames,
    /// each passer-by different, still vanishes. Measured against every other merge on both synthetic
    /// bursts of ../shared (see the README). On a Bayer raw burst of three frames or more it is
    /// then blended with ``hdrplus`` wherever no frame moved: texture the gather softened comes
    /// back from the reference's own samples, flat places keep the vote's lower noise.
    case robust
    /// HDR+'s merge (Hasinoff et al. 2016), for camera raw bursts of a Bayer sensor only: each
    /// frame's 16 x 16 tiles of each colour plane pulled towards the reference's by a pairwise
    /// Wiener filter driven by the sensor's noise model (c = 8), then averaged. The reference
    /// wins wherever the frames disagree, so what moved stays as the reference shows it.
    case hdrplus
}
