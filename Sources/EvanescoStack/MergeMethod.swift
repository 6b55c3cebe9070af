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
    /// Evanesco's best: per pixel, a Tukey-biweight reweighted mean over all colour channels at
    /// once (a frame either covers a pixel or it does not), seeded by the per-channel median, with
    /// the noise scale measured once for the whole burst instead of per pixel (20 samples give a
    /// poor per-pixel scale). Frames whose colour lies more than 3.5 noise sigmas (RMS over the
    /// channels) from the median get no weight. It keeps the median's immunity to movers and
    /// the mean's low noise.
    case robust
}
