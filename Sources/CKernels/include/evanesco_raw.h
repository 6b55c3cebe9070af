// The raw finish's kernels: a Bayer mosaic's levels and white balance into a padded float plane,
// the green plane by gradient-weighted directional interpolation, and red and blue by colour
// differences fused with the colour matrix and the output curve. Row bands, so that the caller
// spreads them over threads; one body compiled portably and with AVX2 (evanesco_kernels.h).
#ifndef EVANESCO_RAW_H
#define EVANESCO_RAW_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Pixels of mirror padding (reflect-101, which keeps each site's colour) around the planes.
#define EVN_RAW_PAD 4

/// A Bayer mosaic being demosaiced: three float planes of (width + 8) x (height + 8), row
/// stride width + 8, pixel (x, y) of the image at ((y + 4) * stride + x + 4).
typedef struct evn_bayer {
    /// The levelled, white-balanced, clipped samples (0 black ... 1 white, times the exposure).
    float *cfa;
    /// Green at every pixel (the sample itself at green sites).
    float *green;
    /// Horizontal and vertical gradient strength at every pixel.
    float *dh, *dv;
    ptrdiff_t width, height, stride;
    /// The colour at each position of the 2x2 cell (0 red, 1 green, 2 blue), row-major.
    uint8_t colors[4];
} evn_bayer;

/// Padded rows py0..<py1 (0 ... height + 8) of `b->cfa` from `mosaic` (width x height samples):
/// clamp((s - black[p]) * scale[p], 0, 1) * exposure, p the 2x2 position.
void evn_bayer_levels(const evn_bayer *b, const uint16_t *mosaic, const float black[4], const float scale[4],
                      float exposure, ptrdiff_t py0, ptrdiff_t py1);

/// Image rows y0..<y1 (which may reach 2 beyond the image on each side) of the gradient planes.
void evn_bayer_gradients(const evn_bayer *b, ptrdiff_t y0, ptrdiff_t y1);
void evn_bayer_gradients_portable(const evn_bayer *b, ptrdiff_t y0, ptrdiff_t y1);
void evn_bayer_gradients_avx2(const evn_bayer *b, ptrdiff_t y0, ptrdiff_t y1);

/// Image rows y0..<y1 (which may reach 1 beyond the image on each side) of the green plane:
/// at red and blue sites, the horizontal and vertical Hamilton-Adams estimates weighted by the
/// inverse square of the gradient summed over the 3x3 neighbourhood.
void evn_bayer_green(const evn_bayer *b, ptrdiff_t y0, ptrdiff_t y1);
void evn_bayer_green_portable(const evn_bayer *b, ptrdiff_t y0, ptrdiff_t y1);
void evn_bayer_green_avx2(const evn_bayer *b, ptrdiff_t y0, ptrdiff_t y1);

/// How demosaiced pixels become output samples: camera RGB times `matrix` (3x3 row-major),
/// then, with `lut` (`lut_size` entries over 0...1, linear between entries), clamped to 0...1
/// and looked up; without, clamped to 0...1 for integer output and at 0 for float.
typedef struct evn_raw_output {
    float matrix[9];
    const float *lut;
    ptrdiff_t lut_size;
    /// 1: uint8 (x 255), 2: uint16 (x 65535), 4: float.
    int sample_bytes;
    /// Row y's first sample is at `pixels + y * row_bytes`; 3 samples a pixel.
    void *pixels;
    ptrdiff_t row_bytes;
} evn_raw_output;

/// One row of camera RGB (`rgb`: red, green and blue rows of `width` floats) through `out`'s
/// matrix and curve into `row` (3 samples a pixel).
void evn_raw_store_row(const evn_raw_output *out, const float *rgb, ptrdiff_t width, void *row);
void evn_raw_store_row_portable(const evn_raw_output *out, const float *rgb, ptrdiff_t width, void *row);
void evn_raw_store_row_avx2(const evn_raw_output *out, const float *rgb, ptrdiff_t width, void *row);

/// Image rows y0..<y1: red and blue from colour differences to green (the two neighbours along
/// the row or column at green sites, the four diagonal ones at red and blue sites), then the
/// output transform. `scratch` holds 3 x width floats.
void evn_bayer_finish_rows(const evn_bayer *b, const evn_raw_output *out, ptrdiff_t y0, ptrdiff_t y1, float *scratch);

/// Camera RGB of image row y (the red, green and blue rows of `width` floats one after the other),
/// the first half of evn_bayer_finish_rows.
void evn_bayer_row_rgb(const evn_bayer *b, ptrdiff_t y, float *rgb);
void evn_bayer_row_rgb_portable(const evn_bayer *b, ptrdiff_t y, float *rgb);
void evn_bayer_row_rgb_avx2(const evn_bayer *b, ptrdiff_t y, float *rgb);

/// Rows y0..<y1 of three-colour linear samples (LinearRaw; `rgb` width x height x 3, 16-bit):
/// levels, white balance (scale per colour), exposure, then the output transform. `scratch` holds
/// 3 x width floats.
void evn_linear_raw_finish_rows(const uint16_t *rgb, ptrdiff_t width, const float black[3], const float scale[3],
                                float exposure, const evn_raw_output *out, ptrdiff_t y0, ptrdiff_t y1, float *scratch);

// ---- Raw burst merge: frames' colour planes gathered at the reference's photosites, merged ----

/// The sample of a frame scaled to a bracket's shortest exposure where it has none (it clipped
/// there): ``RawPlanes/missing`` is this value.
#define EVN_RAW_MISSING 65535

/// One frame's colour planes (``RawPlanes``: `channels` interleaved, 4 for a Bayer cell, 3 for
/// LinearRaw), with where each output cell centre lands in it.
typedef struct evn_raw_frame {
    const uint16_t *planes;
    int32_t width, height;
    /// Output (reference) plane position -> this frame's plane position: a homography, row-major.
    float m[9];
    /// Per channel, where its site lands relative to the cell centre's source position (the
    /// site's offset from the cell centre through the frame's local Jacobian), and the site's own
    /// offset from its cell centre (its samples sit at integer positions plus this offset).
    float site[4][2], offset[4][2];
    /// Local correction, or NULL: displacement per cell of `cell` output pixels, bilinear
    /// between cell centres, added to the output position before the homography.
    const float *field_dx, *field_dy;
    int32_t field_cell, field_columns, field_rows;
    /// 1: a sample of EVN_RAW_MISSING is no sample (a frame scaled to the burst's shortest
    /// exposure marks so what it clipped).
    int32_t clipped_is_missing;
    /// With `clipped_is_missing`: the factor the frame's weights are multiplied by (its share
    /// against the reference's by its noise: a frame exposed longer weighs more).
    float weight_scale;
    /// A Bayer frame's green at its red and blue sites (``evn_raw_green_sites``, two samples a
    /// cell), or NULL. Given, the gather interpolates green at full resolution and red and blue
    /// by their differences to it (see ``evn_raw_gather_row``).
    const uint16_t *green;
} evn_raw_frame;

/// Green at the red and blue sites of cells rows y0 ..< y1 of a Bayer frame's planes (`f`'s
/// `planes`, `width`, `height` and `offset`; channels red, green, blue, green): the horizontal or
/// vertical Hamilton-Adams estimate, whichever direction's gradient is smaller (their mean on a
/// tie), clamped to 0 ... 65535. `green` gets two samples a cell, at red's site then blue's.
/// Samples beyond the planes are those of the nearest cell at the same site.
void evn_raw_green_sites(const evn_raw_frame *f, int32_t y0, int32_t y1, uint16_t *green);

/// How the gathered frames are merged.
typedef struct evn_raw_merge_params {
    int32_t frames, channels;
    /// For each channel, the channel that samples the same colour at other sites (a Bayer
    /// cell's other green), or -1.
    int32_t partner[4];
    /// Gather kernel weights by the sample's distance t (plane pixels, per axis), t = j / 64:
    /// `lut` for a channel's own plane, `lut_dense` for green, whose two planes together sample
    /// twice as densely (a narrower kernel, both for its own plane and for its partner's).
    float lut[66], lut_dense[66];
    /// 0 mean, 1 robust (noise-model threshold around the median), 2 median, 3 sigma-clip (MAD).
    int32_t method;
    float kappa;
    /// Robust only, above 0: a frame is kept where the sum over a cell's channels of
    /// ((value - median) / limit)^2 is at most `joint`, instead of where each channel alone lies
    /// within its limit. Each channel's test turns away a frame's noise alone beyond kappa
    /// deviations, and any of c channels did so c times as often; the sum of c squared
    /// deviations (chi-square, c degrees) beyond the same tail does it as seldom as one channel
    /// (RawMerge.jointLimit).
    float joint;
    /// The reference among the frames (left out of `outlier`), or -1.
    int32_t reference;
    /// Noise variance of a sample v (sample units) of each channel: slope * v + intercept.
    float slope[4], intercept[4];
    /// Robust only, above 0: where a frame (not the reference) lies more than `replace_beyond`
    /// times the vote's limit from the median in any channel of a cell, its values there are
    /// replaced by the merged ones, in the `value` rows the vote read: what moved in it never
    /// reaches a merge that reads them afterwards (the Wiener pass), which gets there what the
    /// frames agree on instead. So are the reference's samples of weight 0 (missing ones); then
    /// every other frame's samples of weight 0 take the reference's (``evn_raw_wiener_fill``).
    float replace_beyond;
    /// A cell's value where no frame has a sample (every frame's is missing: they all clipped
    /// there, see `clipped_is_missing`): white for a burst with missing samples, else 0.
    float uncovered;
    /// With frames' `green` (the colour-difference gather): where its value and the plain
    /// gather's differ by d, the result is the plain one plus d^3 / (d^2 + colour_pull x the
    /// sample's noise variance): the plain gather's average of nearby samples where they differ
    /// by about the noise, the colour-difference value where by more.
    float colour_pull;
    /// Each channel's photosite in its 2 x 2 cell, 2 row + column (a Bayer burst's; 0 otherwise).
    int32_t site[4];
} evn_raw_merge_params;

/// 1 where `evn_raw_gather_row` of frame `f` gives each cell its own samples with weight 1
/// without interpolating them (and gives the same bits as it would interpolating): a frame that
/// does not move (the reference: no field, the identity homography, its sites its offsets)
/// gathered by colour differences with kernels that weigh distance 0 by 1 and the greens'
/// partner half a cell off by 0, as the merge's are. 0 otherwise.
int evn_raw_gather_is_own_samples(const evn_raw_frame *f, const evn_raw_merge_params *p);

/// Frame `f` gathered at output row `y`, cells x0 ..< x0 + count: for each cell and channel, the
/// kernel-weighted mean of the frame's samples of that colour around the site (`value`) and the
/// sum of their weights (`weight`, 0 where the site falls outside the frame, or where every
/// sample around it is missing: see `clipped_is_missing`).
void evn_raw_gather_row(const evn_raw_frame *f, const evn_raw_merge_params *p, int32_t y, int32_t x0, int32_t count,
                        float *value, float *weight);

/// `evn_raw_gather_row` at rows ys[0] ..< ys[rows], row r into values[r] and weights[r]: the same
/// values as row by row. Rows that follow each other down the frame (as a band's do) share the
/// work their neighbourhoods overlap in (the colour-difference gather's window of each column of
/// cells moves down a row at a time).
void evn_raw_gather_rows(const evn_raw_frame *f, const evn_raw_merge_params *p, const int32_t *ys, int32_t rows,
                         int32_t x0, int32_t count, float *const *values, float *const *weights);

/// The vote's first step, over `length` values of each of `frames` rows of `value` and `weight`
/// (`frame_stride` apart): `sorted` (rows `stride` apart) gets the values, +infinity where their
/// weight is 0 (to be sorted over the frames, which puts them last), and `counts` how many frames
/// cover each value. After that sort, `evn_raw_vote_medians` gives each value's median, and
/// `evn_raw_vote_deviations` each frame's distance to it (+infinity where the weight is 0), to be
/// sorted too.
void evn_raw_vote_prepare(const float *value, const float *weight, ptrdiff_t frame_stride, int32_t frames,
                          ptrdiff_t length, ptrdiff_t stride, float *sorted, float *counts);
void evn_raw_vote_medians(const float *sorted, const float *counts, ptrdiff_t length, ptrdiff_t stride, float *med);
void evn_raw_vote_deviations(const float *value, const float *weight, ptrdiff_t frame_stride, const float *med,
                             int32_t frames, ptrdiff_t length, ptrdiff_t stride, float *dev);

/// Merges `count` cells of the gathered frames (frame k's values and weights at k *
/// frame_stride) into `out` (count * channels), given `counts` and `medians` (NULL for the mean)
/// and `dev` (the sorted deviations, frame rows `stride` apart; NULL unless robust or
/// sigma-clip). `kept` (optional): frames kept per cell; `best` (optional): the covering frame
/// closest to the result, or -1. With `replace_beyond` (robust), the values of frames far from
/// the vote are then replaced in `value`. `reference_deviation` (optional, robust with a
/// reference): per cell, the reference's squared distance from the median in units of the vote's
/// spread and noise ((limit / kappa)^2), the mean over its channels; about 1 where only noise
/// parts them, 0 where the reference does not cover the cell. `reference_offset` (optional, on
/// the same terms): per cell and channel, the reference's signed distance from the median in the
/// same unit (limit / kappa), clamped to +-EVN_RAW_OFFSET_RANGE and stored as
/// round(distance x 127 / EVN_RAW_OFFSET_RANGE); 0 where the reference does not cover the cell.
void evn_raw_merge_cells(float *value, const float *weight, ptrdiff_t frame_stride, const float *counts,
                         const float *medians, const float *dev, const evn_raw_merge_params *p, int32_t count,
                         ptrdiff_t stride, float *out, uint16_t *kept, int16_t *best, float *reference_deviation,
                         int8_t *reference_offset);

/// The distance (in units of the vote's spread and noise) that `reference_offset`'s 127 stands for.
#define EVN_RAW_OFFSET_RANGE 4

/// The blend of the robust merge with the Wiener merge anchored on the reference (four
/// channels a cell, 16-bit sample units; raw_blend.c).
typedef struct evn_raw_blend_params {
    /// Noise variance of a sample v of each channel: slope * v + intercept.
    float slope[4], intercept[4];
    /// How much of the Wiener merge's difference a block takes: D / (D + beta s2).
    float beta;
    /// Something moved in the reference where its 4 x 4 mean squared distance to the robust merge
    /// exceeds guard x (s2 + contrast x the robust merge's local gradient energy). (What moved in
    /// another frame never reaches the Wiener merge: see `replace_beyond`.)
    float guard, contrast;
    /// The same test over a wider window, on the 2 x 2 means of the cells (the squared distances,
    /// the gradient energy, the level): (2 wide_radius + 1)^2 such blocks, where the noise
    /// averages down further; a block moved where the mean squared distance exceeds wide_guard x
    /// s2 + wide_contrast x the gradient energy (texture's share does not average down, so it
    /// keeps the narrow test's weight). Finds a faint passer-by at high ISO that the 4 x 4 test
    /// misses. 0: off.
    int32_t wide_radius;
    float wide_guard, wide_contrast;
} evn_raw_blend_params;

/// Channel `ch`'s cells where something moved in the reference `ref`, which the Wiener merge
/// would keep, by the test of ``evn_raw_blend_params``. `moving` gets 1 there, 0 elsewhere.
/// Returns -1 when out of memory.
int evn_raw_blend_guard(const uint16_t *r, const uint16_t *ref, int32_t width, int32_t height, int32_t ch,
                        const evn_raw_blend_params *p, uint8_t *moving);
/// Grows `mask` (width x height) by `radius` cells in each direction (a square). -1: out of memory.
int evn_raw_blend_dilate(uint8_t *mask, int32_t width, int32_t height, int32_t radius);
/// Sets `moving` (width x height) where the mean of `deviation` (the vote's
/// `reference_deviation`), each cell's taken at most `cap`, over the square of `radius` cells
/// around a cell (clamped) exceeds `threshold`: where the reference lies off the other frames'
/// vote by more than their noise and disagreement over a region, though within the vote's limit
/// cell by cell. The cap keeps a thin trace far off the vote (a depth edge) from counting as a
/// region. -1: out of memory.
int evn_raw_blend_vote_guard(const float *deviation, int32_t width, int32_t height, int32_t radius, float cap,
                             float threshold, uint8_t *moving);
/// Sets `moving` (width x height) where the reference lies off the vote to one side over a
/// region: per channel, the mean of `offset` (``evn_raw_merge_cells``' `reference_offset`,
/// `channels` a cell) over the square of `radius` cells around a cell (clamped to the plane);
/// moving where the mean over the channels of those means squared exceeds `threshold` divided by
/// the window's cells. Noise alone gives each cell's offset a variance of about 1, so its mean
/// over n cells about 1 / n: `threshold` is how many such variances (25: 5 standard errors). A
/// passer-by on texture, whose distance the frames' disagreement there hides cell by cell (and in
/// ``evn_raw_blend_vote_guard``'s squares), still lies to one side of the vote; texture the gather
/// softened or frames misregistered by parallax lie to both. -1: out of memory, or `channels`
/// under 1 (`moving` is then left as it was).
int evn_raw_blend_offset_guard(const int8_t *offset, int32_t width, int32_t height, int32_t channels, int32_t radius,
                               float threshold, uint8_t *moving);
/// Fills in the dense parts of `mask` (width x height): a cell becomes 1 where more than
/// `fraction` of the square of `radius` cells around it (clamped to the mask) is. -1: out of memory.
int evn_raw_blend_fill_dense(uint8_t *mask, int32_t width, int32_t height, int32_t radius, float fraction);
/// Channel `ch` of `out`: per 8 x 8 block around each cell, D = mean (wiener - r)^2 and s2 the
/// noise at the block's level; out = r + D / (D + beta s2) (wiener - r), and r where `moving`.
/// Texture the robust merge blurred (D well above the noise) comes from the Wiener merge, which
/// keeps the reference's own samples; flat places keep the robust merge's lower noise.
int evn_raw_blend_channel(const uint16_t *r, const uint16_t *wiener, const uint8_t *moving, int32_t width,
                          int32_t height, int32_t ch, const evn_raw_blend_params *p, uint16_t *out);

/// The spatial denoise of a raw merge (``evn_raw_denoise_transform``).
typedef struct {
    /// Each channel's noise line in the samples' units (channels 0-3: red, green, blue, green): a
    /// sample of value v has variance `slope` v + `intercept` in one frame.
    float slope[4], intercept[4];
    /// The variance taken for noise, in units of the noise the merge left (the line's variance at
    /// the channel's 3 x 3 mean over the frames kept). 0: nothing changes.
    float strength;
    /// Stage one keeps a window's coefficients above this many noise deviations.
    float threshold;
    /// Stage two keeps a colour coefficient as if its pilot's energy were raised by `guide` times
    /// luma's pilot's at the same frequency and window.
    float guide;
    /// ``evn_raw_denoise_differences``: stage one's threshold for the differences (0: none).
    float difference_threshold;
    /// Each channel's photosite in its 2 x 2 cell: 2 row + column (0-3).
    int32_t site[4];
} evn_raw_transform_params;

/// Rows [y0, y1) of `out` (width x height cells of 4 channels: red, green, blue, green, as
/// `planes`) denoised from `planes`: each cell's four colours taken to luma, green-magenta,
/// red-blue and green-green (orthonormal); in each, every 4 x 4 window of cells inside the image
/// is transformed (orthonormal DCT-II), its coefficients above `threshold` deviations of the
/// window's noise kept (the mean always) for a pilot (the windows' inverses averaged), then the
/// original window's coefficients multiplied by e / (e + s2), e the pilot's energy there (plus
/// `guide` times luma's pilot's, for the colours) and s2 the window's mean noise variance, and the
/// windows averaged again. A cell's noise is the line at its channel's 3 x 3 mean (edges repeated)
/// times `strength` over the frames kept (`kept`, width x height; NULL counts one). The result does
/// not depend on how the rows are split. Images under 4 x 4 cells, or `strength` 0: copied.
/// -1: out of memory; -2: rows outside the image.
int evn_raw_denoise_transform(const uint16_t *planes, const uint16_t *kept, int32_t width, int32_t height,
                              const evn_raw_transform_params *p, int32_t y0, int32_t y1, uint16_t *out);
int evn_raw_denoise_transform_portable(const uint16_t *planes, const uint16_t *kept, int32_t width, int32_t height,
                                       const evn_raw_transform_params *p, int32_t y0, int32_t y1, uint16_t *out);
int evn_raw_denoise_transform_avx2(const uint16_t *planes, const uint16_t *kept, int32_t width, int32_t height,
                                   const evn_raw_transform_params *p, int32_t y0, int32_t y1, uint16_t *out);

/// Rows [y0, y1) of `out` (as `filtered`, the planes ``evn_raw_denoise_transform`` made of
/// `merged`): its greens as they are, its red and blue taken again as colour differences at their
/// own sites. At each red (blue) site, green is the mean of the filtered greens at its four
/// neighbouring photosites inside the image; the merge's red (blue) minus that green is filtered
/// alone, by the same two stages over 4 x 4 windows of cells (no colour transform, no guide; stage
/// one at `difference_threshold` deviations), its noise the line at the channel's 3 x 3 mean of
/// `merged` times `strength` over the frames kept; the output is green plus the filtered
/// difference. Texture lies in green and leaves the difference smooth; an edge moves both. Rows do
/// not depend on the split. Images under 4 x 4 cells, `strength` or `difference_threshold` 0:
/// `filtered` copied. -1: out of memory; -2: rows outside the image.
int evn_raw_denoise_differences(const uint16_t *merged, const uint16_t *filtered, const uint16_t *kept, int32_t width,
                                int32_t height, const evn_raw_transform_params *p, int32_t y0, int32_t y1,
                                uint16_t *out);
int evn_raw_denoise_differences_portable(const uint16_t *merged, const uint16_t *filtered, const uint16_t *kept,
                                         int32_t width, int32_t height, const evn_raw_transform_params *p, int32_t y0,
                                         int32_t y1, uint16_t *out);
int evn_raw_denoise_differences_avx2(const uint16_t *merged, const uint16_t *filtered, const uint16_t *kept,
                                     int32_t width, int32_t height, const evn_raw_transform_params *p, int32_t y0,
                                     int32_t y1, uint16_t *out);

/// One band of 16 rows of the HDR+ pairwise Wiener merge of a Bayer burst's gathered planes
/// (four channels a cell): every 16 x 16 tile along the band (columns from -8, stride 8; columns
/// outside repeat the edge), raised-cosine windowed, DFT; each frame's tile Z pulled towards the
/// reference's T: Z + A (T - Z), A = |T - Z|^2 / (|T - Z|^2 + c s2), s2 the noise of one
/// coefficient (the noise line at the reference tile's window-weighted level, times the window's
/// energy); the mean over the frames, inverse DFT, overlap-added into `out` for the band's rows
/// first_row ..< end_row (row r of `out` is band row first_row + r). With `expected` above 0 (the
/// robust merge's blend; 0 is HDR+ as published), the energy that two frames' noise alone gives
/// their difference, expected s2, is taken off first: A = D / (D + c s2), D = max(0, |T - Z|^2 -
/// expected s2), so that differences the noise explains are averaged away and only the rest
/// (what moved, what the gather softened) pulls towards the reference.
typedef struct evn_raw_wiener_band_args {
    /// Frame k's gathered values, 16 rows of width * 4 floats, at k * 16 * width * 4, the band's
    /// row r in row (r + `ring`) mod 16 of them; where k has no sample (weight 0), the
    /// reference's value (``evn_raw_wiener_fill``).
    const float *values;
    int32_t frames, reference, width;
    /// 0 or 8: where the band's first row is kept (the band before's last 8 rows stay where they
    /// were gathered, the next 8 are gathered in place of its first 8).
    int32_t ring;
    float c, expected;
    float slope[4], intercept[4];
    int32_t first_row, end_row;
    float *out;
} evn_raw_wiener_band_args;

void evn_raw_wiener_band(const evn_raw_wiener_band_args *a);

/// Before a band's tiles are merged: each frame's gathered values where its weight is 0 (it does
/// not cover the site) replaced by the reference's, so that there the frame says what the
/// reference says. Frame k's values and weights start at k * `frame`; the `count` floats from
/// `first` are filled.
void evn_raw_wiener_fill(float *values, const float *weights, int32_t frames, int32_t reference, ptrdiff_t frame,
                         ptrdiff_t first, ptrdiff_t count);

#ifdef __cplusplus
}
#endif

#endif
