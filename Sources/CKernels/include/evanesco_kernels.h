// Hot inner loops in C with an AVX2 variant, chosen once at run time (evn_cpu_has_avx2). Swift
// cannot mark one function for a wider instruction set, and a module compiled with -mavx2 would
// need unsafe flags (which make the package unusable as a versioned dependency) and would crash
// on older CPUs. Every kernel is one C body, compiled twice (`_portable` and `_avx2`, which tests
// call directly) behind a function that picks one; the portable variant is the fallback, and
// no Swift loop repeats a kernel's arithmetic. No fused multiply-add anywhere: every pair gives
// the same bits.
#ifndef EVANESCO_KERNELS_H
#define EVANESCO_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The weighted normal equations of a shift plus a brightness offset over one window (local
/// alignment's Lucas-Kanade step): a00..a22 and b0..b2 of the 3x3 system and the sum of squared
/// residuals (each capped at 50 grey levels), over `used` pixels.
typedef struct evn_lk_sums {
    float a00, a01, a02, a11, a12, a22, b0, b1, b2, squared_residual;
    ptrdiff_t used;
} evn_lk_sums;

/// The window's pixels and how to weigh them.
typedef struct evn_lk_window {
    /// Reference level and its x and y gradients, row-major with `stride` floats a row.
    const float *ref, *gx, *gy;
    /// The frame warped into the reference level, same stride; `frame + frame_offset` is the
    /// frame pixel that reference pixel 0 takes its top-left tap from (offset = oy * stride + ox).
    const float *frame;
    ptrdiff_t stride, frame_offset;
    /// The warped frame's validity (non-zero: valid), laid out as `frame`; NULL when every tap
    /// is valid. A pixel counts only when its four taps are valid.
    const unsigned char *valid;
    /// Columns x0..<x1 and rows y0, y0 + row_step, ... < y1 (x1 > x0, y1 > y0, row_step >= 1);
    /// every tap (x + 1, y + 1 included) must be inside the planes.
    ptrdiff_t x0, x1, y0, y1, row_step;
    /// Bilinear weights of the four taps: top-left, top-right, bottom-left, bottom-right.
    float w00, w01, w10, w11;
    /// Brightness offset subtracted from every residual.
    float bias;
    /// Robust weights: Tukey's biweight with 1 / c = `inverse_tukey_c` when `tukey` is non-zero,
    /// otherwise Huber's with threshold `huber`.
    int tukey;
    float huber, inverse_tukey_c;
    /// Non-zero: also sum the squared residuals (otherwise squared_residual is 0).
    int residual;
} evn_lk_window;

/// The sums over `window`, with the widest variant this CPU runs.
void evn_lk_sums_window(const evn_lk_window *window, evn_lk_sums *out);

/// The portable variant (any CPU).
void evn_lk_sums_window_portable(const evn_lk_window *window, evn_lk_sums *out);

/// Whether this CPU (and its operating system) runs the AVX2 variants (and they have not been
/// turned off: EVANESCO_PORTABLE_KERNELS=1 in the environment, or evn_set_portable_kernels).
int evn_cpu_has_avx2(void);

/// Non-zero: use the portable variants from now on, whatever the CPU (tests compare the two).
void evn_set_portable_kernels(int portable);

/// `malloc(bytes)` (`calloc` for `zeroed`) for the scratch memory of kernel `who` ("blend",
/// "denoise"), whose caller turns NULL into an error that says what ran out. NULL also when the
/// environment's EVANESCO_TEST_FAIL_SCRATCH names `who` (read once): the tests' way to reach that
/// error through the command-line tool.
void *evn_scratch_alloc(const char *who, size_t bytes, int zeroed);

/// Output row `y` of a homography and a local field: the field (a `columns` x `rows` grid of
/// `cell`-pixel cells, bilinear between cell centres, constant beyond the outer ones) and the
/// map from output to source pixels, row-major 3 x 3, with y folded in (m[2] = m[1] y + m[2],
/// m[5] = m[4] y + m[5], m[8] = m[7] y + m[8]).
typedef struct evn_field_positions {
    const float *dx, *dy;
    ptrdiff_t columns, rows, cell, y;
    float m[9];
} evn_field_positions;

/// Writes the source position of output pixels x0 ..< x0 + count of row `y`, x and y interleaved
/// into `pos` (which must hold 2 count + 16 floats: the last group of eight is stored whole)
/// (H^-1 (p + d(p)) with d the field at p), and their bounds (min x, min y, max x, max y); returns
/// 0 (positions undefined) when one leaves the map's half-plane or is not finite.
int evn_field_positions_row(const evn_field_positions *map, ptrdiff_t x0, ptrdiff_t count, float *pos, float *bounds);
int evn_field_positions_row_portable(const evn_field_positions *map, ptrdiff_t x0, ptrdiff_t count, float *pos,
                                     float *bounds);
/// Call only when evn_cpu_has_avx2() is non-zero.
int evn_field_positions_row_avx2(const evn_field_positions *map, ptrdiff_t x0, ptrdiff_t count, float *pos,
                                 float *bounds);

/// What the 8-bit RGB cubic warp through a local field reads for one output row segment.
typedef struct evn_warp_rows {
    /// Each output pixel's source position, x and y interleaved (pixel 0 of the segment first).
    const float *positions;
    /// The source rows held: row r in slot r & mask, `stride` floats a slot, interleaved RGB from
    /// source column col_base on.
    const float *block;
    ptrdiff_t stride, mask, col_base;
    /// The source frame's size.
    ptrdiff_t width, height;
    /// Cubic weights of taps -1, 0, 1, 2 at phases 0, 1/128, ..., 1 (EVN_CUBIC_LUT_ROWS x 4 floats),
    /// then the same weights by tap: tap t's at phase k at EVN_CUBIC_LUT_ROWS * 4 +
    /// t * EVN_CUBIC_LUT_BY_TAP + k (k past 128 repeats 128's).
    const float *lut;
} evn_warp_rows;

/// Warps output pixels start, start + 4, ... of the segment in groups of four (eight a step where
/// two qualify) while each group's taps start on consecutive source columns of one source row,
/// inside the frame: writes their RGB (`out`, 3 floats a pixel, clamped to 0...255) and validity
/// (1), and returns the first pixel it did not write (start when the first group does not qualify).
ptrdiff_t evn_warp_cubic_rgb_field(const evn_warp_rows *rows, ptrdiff_t start, ptrdiff_t count, float *out,
                                   unsigned char *valid);
ptrdiff_t evn_warp_cubic_rgb_field_portable(const evn_warp_rows *rows, ptrdiff_t start, ptrdiff_t count, float *out,
                                            unsigned char *valid);
/// Call only when evn_cpu_has_avx2() is non-zero.
ptrdiff_t evn_warp_cubic_rgb_field_avx2(const evn_warp_rows *rows, ptrdiff_t start, ptrdiff_t count, float *out,
                                        unsigned char *valid);

/// The cubic weight table's rows (phases 0, 1/128, ..., 1), and the length of each tap's run in
/// its by-tap half: room for a run of 8 phases from any phase below 128.
#define EVN_CUBIC_LUT_ROWS 129
#define EVN_CUBIC_LUT_BY_TAP 136

/// One knot interval of a pass of the separable 8-bit RGB cubic warp (RowSampler's two-pass
/// path): output pixels base + g, g < n, whose source position along the pass is s0 + slope * g
/// (horizontal: plus g, the offset from the output column) in the pass's pixels.
typedef struct evn_warp_pass {
    /// Horizontal: the source row's RGB as floats from column `lo` (3 a pixel). Vertical: the
    /// horizontal pass's rows, row r in slot r & mask, `stride` floats a slot, output pixel k's
    /// RGB at 3k.
    const float *source;
    ptrdiff_t stride, mask;
    /// Cubic weights of taps -1, 0, 1, 2 at phases 0, 1/128, ..., 1 (EVN_CUBIC_LUT_ROWS x 4 floats),
    /// then the same weights by tap: tap t's at phase k at EVN_CUBIC_LUT_ROWS * 4 +
    /// t * EVN_CUBIC_LUT_BY_TAP + k (k past 128 repeats 128's).
    const float *lut;
    /// Output pixel k's RGB at out + 3k (vertical: clamped to 0...255, and its validity, 1, at valid[k]).
    float *out;
    unsigned char *valid;
    float s0, slope;
    /// The columns (horizontal) or rows (vertical) present.
    ptrdiff_t lo, hi;
    ptrdiff_t base;
} evn_warp_pass;

/// Samples the interval's groups of four from g on (n a multiple of 4) while each qualifies
/// (horizontal: taps on consecutive columns; vertical: one row of taps; all present), two groups
/// a step where both do; returns the first group that does not (n when all did).
ptrdiff_t evn_warp_horizontal_pass(const evn_warp_pass *pass, ptrdiff_t g, ptrdiff_t n);
ptrdiff_t evn_warp_horizontal_pass_portable(const evn_warp_pass *pass, ptrdiff_t g, ptrdiff_t n);
/// Call only when evn_cpu_has_avx2() is non-zero.
ptrdiff_t evn_warp_horizontal_pass_avx2(const evn_warp_pass *pass, ptrdiff_t g, ptrdiff_t n);
ptrdiff_t evn_warp_vertical_pass(const evn_warp_pass *pass, ptrdiff_t g, ptrdiff_t n);
ptrdiff_t evn_warp_vertical_pass_portable(const evn_warp_pass *pass, ptrdiff_t g, ptrdiff_t n);
/// Call only when evn_cpu_has_avx2() is non-zero.
ptrdiff_t evn_warp_vertical_pass_avx2(const evn_warp_pass *pass, ptrdiff_t g, ptrdiff_t n);

/// Registration's template points at one level, and one Gauss-Newton step's inputs: the
/// points' values `t`, agreement thresholds, steepest-descent rows (component c of point i at
/// jacobian[c * padded + i]) and the frame's samples at them (NaN: none); the exposure fit
/// (offset, inverse gain) and 1 / c^2 of the Tukey weights, written to `weights`.
typedef struct evn_normal_points {
    const float *t, *agreement, *jacobian, *samples;
    float *weights;
    ptrdiff_t padded;
    float offset, inverse_gain, inv_c2;
} evn_normal_points;

/// The sums of the normal equations: the upper triangle of the matrix row by row, the gradient,
/// sum w r^2, sum w, sum w over the matrix's points, and the points that agree.
typedef struct evn_normal_sums {
    double a[36], b[8], wr2, wsum, wsum_hessian, inliers;
} evn_normal_sums;

/// Adds points start..<end (multiples of 4) to `out` for `np` parameters (2, 6, 8), the matrix
/// too with `hessian`: eight points a step in float lanes, added to the double totals every 256
/// points. The AVX2 variant where the CPU has it (evn_cpu_has_avx2); both give the same sums.
void evn_normal_sums_add(const evn_normal_points *points, ptrdiff_t start, ptrdiff_t end, int np, int hessian,
                         evn_normal_sums *out);
void evn_normal_sums_portable(const evn_normal_points *points, ptrdiff_t start, ptrdiff_t end, int np, int hessian,
                              evn_normal_sums *out);
void evn_normal_sums_avx2(const evn_normal_points *points, ptrdiff_t start, ptrdiff_t end, int np, int hessian,
                          evn_normal_sums *out);

/// One frame's cells for the depth fit of ParallaxConsistency: its field (dx, dy), each
/// measurement's weight, and each cell's depth and centre (x, y, scaled to about [-1, 1]).
typedef struct evn_parallax_frame {
    const float *dx, *dy, *weight, *rho, *x, *y;
    ptrdiff_t cells;
} evn_parallax_frame;

/// The frame's weighted normal equations in the model's basis (depth, 1, x, y, x^2, xy, y^2):
/// the 7 x 7 matrix, both halves, row by row into normal[0..<49], and the right-hand sides of dx
/// and dy into rhs[0..<7] and rhs[7..<14]. Eight cells a step in float lanes, added to the double
/// totals every 256 cells. The AVX2 variant where the CPU has it; both give the same sums.
void evn_parallax_normal(const evn_parallax_frame *frame, double *normal, double *rhs);
void evn_parallax_normal_portable(const evn_parallax_frame *frame, double *normal, double *rhs);
/// Call only when evn_cpu_has_avx2() is non-zero.
void evn_parallax_normal_avx2(const evn_parallax_frame *frame, double *normal, double *rhs);

/// Every frame's cells for the depth step of the fit: frame k's cell c at k * cells + c in dx, dy
/// and weight; per cell its depth, centre, and the metric its depth is measured in (four floats a
/// cell: xx, xy, yy, unused; NULL: the plain distance); per frame 16 coefficients of the basis
/// (x's eight, then y's; the eighth of each unused); the Cauchy weights' 1 / scale.
typedef struct evn_parallax_cells {
    const float *dx, *dy;
    float *weight, *rho;
    const float *x, *y, *metric, *coefficients;
    ptrdiff_t frames, cells;
    float inverse_scale;
} evn_parallax_cells;

/// For cells start..<end: the depth that fits the frames best given their coefficients
/// (weighted least squares in the cell's metric; kept where the frames' motions weigh almost
/// nothing), then each frame's weight 1 / (1 + (r / scale)^2) at its distance r from the model.
/// Eight cells a step; the AVX2 variant where the CPU has it; both give the same values.
void evn_parallax_depths(const evn_parallax_cells *cells, ptrdiff_t start, ptrdiff_t end);
void evn_parallax_depths_portable(const evn_parallax_cells *cells, ptrdiff_t start, ptrdiff_t end);
/// Call only when evn_cpu_has_avx2() is non-zero.
void evn_parallax_depths_avx2(const evn_parallax_cells *cells, ptrdiff_t start, ptrdiff_t end);

/// Frame `frame`'s model displacement at cells start..<end (its coefficients, each cell's depth
/// and centre; dx, dy, weight and metric are not read) into mx[c] and my[c]. The same arithmetic
/// as evn_parallax_depths' distances; both variants give the same values.
void evn_parallax_model(const evn_parallax_cells *cells, ptrdiff_t frame, ptrdiff_t start, ptrdiff_t end, float *mx,
                        float *my);
void evn_parallax_model_portable(const evn_parallax_cells *cells, ptrdiff_t frame, ptrdiff_t start, ptrdiff_t end,
                                 float *mx, float *my);
/// Call only when evn_cpu_has_avx2() is non-zero.
void evn_parallax_model_avx2(const evn_parallax_cells *cells, ptrdiff_t frame, ptrdiff_t start, ptrdiff_t end,
                             float *mx, float *my);

/// The depth sweep's scores (ParallaxConsistency.sweep): frame j's grey level at point i for depth
/// r at values[(j * depths + r) * points + i] (NaN: the frame does not see it; at most 16 frames
/// are read). For each depth, over the points that at least 3 frames see: the mean distance of
/// their levels from the levels' median (the upper one of an even count), each distance capped at
/// `cap`; the depth's score is the mean of these over the points, NaN when fewer than 4 points
/// count. Eight points a step; the AVX2 variant where the CPU has it; both give the same scores.
void evn_sweep_scores(const float *values, ptrdiff_t frames, ptrdiff_t depths, ptrdiff_t points, float cap,
                      float *scores);
void evn_sweep_scores_portable(const float *values, ptrdiff_t frames, ptrdiff_t depths, ptrdiff_t points, float cap,
                               float *scores);
/// Call only when evn_cpu_has_avx2() is non-zero.
void evn_sweep_scores_avx2(const float *values, ptrdiff_t frames, ptrdiff_t depths, ptrdiff_t points, float cap,
                           float *scores);

/// The luma of `count` 8-bit pixels of `channels` (3 or more) interleaved bytes, the first three
/// red, green, blue: (0.299 r + 0.587 g + 0.114 b) * scale into out[0..<count]. The AVX2 variant
/// where the CPU has it; both give the same values.
void evn_luma_rgb8(const unsigned char *src, ptrdiff_t channels, ptrdiff_t count, float scale, float *out);
void evn_luma_rgb8_portable(const unsigned char *src, ptrdiff_t channels, ptrdiff_t count, float scale, float *out);
/// Call only when evn_cpu_has_avx2() is non-zero.
void evn_luma_rgb8_avx2(const unsigned char *src, ptrdiff_t channels, ptrdiff_t count, float scale, float *out);

/// A tile of RGB samples seen through every frame (SampleTile): frame k's pixel p at
/// values[k * stride + 3p], its validity at valid[k * pixels + p]; one threshold per sample.
typedef struct evn_clip_tile {
    const float *values;
    const unsigned char *valid;
    const float *thresholds;
    ptrdiff_t stride, pixels, frames;
} evn_clip_tile;

/// For pixels 0, 8, ... eight at a time: the mean of the valid frames whose every channel lies
/// within its threshold of `out` (the medians, 3 floats a pixel), written over it (left as it
/// is where no frame does). Returns the pixels done (a multiple of 8; the caller does the rest).
/// The AVX2 variant where the CPU has it; the same bits either way.
ptrdiff_t evn_clip_mean_rgb(const evn_clip_tile *tile, float *out);
ptrdiff_t evn_clip_mean_rgb_portable(const evn_clip_tile *tile, float *out);
ptrdiff_t evn_clip_mean_rgb_avx2(const evn_clip_tile *tile, float *out);

/// The robust merge's second look where the frames split (``evn_largest_group``).
typedef struct evn_group_params {
    /// Width of a group in each channel (sample units): frames agree when every channel of each
    /// lies in one window this wide. The result moves to a group only when it lies further than
    /// half this from the group's mean.
    float width;
    /// Pixels whose threshold is at most this in every channel are left as they are: their
    /// frames agree, nothing split them.
    float gate;
    /// In each channel the group's window must hold more frames than any window `wide` wide that
    /// does not overlap it: what the other frames agree on, looser, still counts fewer.
    float wide;
    /// A group has at least `min_group` frames and `min_share` of the pixel's valid frames.
    int32_t min_group;
    float min_share;
    /// Only runs of at least this many neighbouring pixels of the tile's row change.
    int32_t min_run;
} evn_group_params;

/// For each pixel of the tile (`channels` 1...4 per pixel, laid out as in evn_clip_tile; the
/// tile's thresholds are the clip's): where some channel's threshold exceeds `gate`, the densest
/// window of `width` over each channel's sorted valid values (`sorted[i * stride + j]`, the first
/// `counts[j]` valid), and the frames whose every channel lies in its window. Where those are
/// as many as asked, each window holds more frames than any `wide` window beside it and twice as
/// many as lie within one width of it, and `out` (the clip's result) lies further than width / 2
/// from their mean, `out` becomes that mean, for runs of at least `min_run` such pixels. A crowd
/// that covers a place in more than half the frames, each passer-by showing something else,
/// leaves the median among them; the frames that saw the place itself still agree. `work`: room
/// for (channels + 1) floats a pixel. Returns the pixels changed, or -1 for a channel count out of
/// range.
ptrdiff_t evn_largest_group(const evn_clip_tile *tile, ptrdiff_t channels, const float *sorted, const int32_t *counts,
                            const evn_group_params *params, float *work, float *out);

/// Prefetches `bytes` from `start` (every cache line) into the cache, for a read soon after: the
/// stacker's warp reads a row of each of many frames in turn, more streams than the hardware
/// prefetcher follows.
void evn_prefetch(const void *start, ptrdiff_t bytes);

/// The AVX2 variant; call only when evn_cpu_has_avx2() is non-zero.
void evn_lk_sums_window_avx2(const evn_lk_window *window, evn_lk_sums *out);

/// Runs `count` compare-exchanges (pairs[2k] < pairs[2k + 1], row indices) over rows of `stride`
/// floats at `base`, each over `vectors` eight-float groups from the row's start: afterwards row
/// a holds the smaller and row b the larger of every column's two values. The AVX2 variant where
/// the CPU has it; both are one body and give the same values.
void evn_sort_network(const int32_t *pairs, ptrdiff_t count, float *base, ptrdiff_t vectors, ptrdiff_t stride);
void evn_sort_network_portable(const int32_t *pairs, ptrdiff_t count, float *base, ptrdiff_t vectors, ptrdiff_t stride);
/// Call only when evn_cpu_has_avx2() is non-zero.
void evn_sort_network_avx2(const int32_t *pairs, ptrdiff_t count, float *base, ptrdiff_t vectors, ptrdiff_t stride);

/// A frame level and the points to sample it at.
typedef struct evn_sample_points {
    /// The frame: `width` floats a row; a point is inside when 0 <= x < max_x and 0 <= y < max_y
    /// (max_x = width - 1, max_y = height - 1).
    const float *image;
    ptrdiff_t width;
    float max_x, max_y;
    /// The points (reference level pixels) and the map to the frame: row-major 3 x 3.
    const float *x, *y;
    const float *map;
} evn_sample_points;

/// Bilinear samples of the frame at points start..<end mapped through `map` into out[start..<end]
/// (NaN for a point outside), eight at a time. The AVX2 variant where the CPU has it; both are
/// one body and give the same values.
void evn_sample_points_run(const evn_sample_points *points, ptrdiff_t start, ptrdiff_t end, float *out);
void evn_sample_points_portable(const evn_sample_points *points, ptrdiff_t start, ptrdiff_t end, float *out);
/// Call only when evn_cpu_has_avx2() is non-zero.
void evn_sample_points_avx2(const evn_sample_points *points, ptrdiff_t start, ptrdiff_t end, float *out);

/// An 8-bit frame (width x height pixels of `channels` bytes, 1 to 4, interleaved, row-major)
/// and the map from output positions to it (row-major 3 x 3).
typedef struct evn_grey_points {
    const unsigned char *image;
    ptrdiff_t width, height, channels;
    const float *map;
} evn_grey_points;

/// The frame's grey levels (the mean of its channels, bilinear, taps clamped to the frame) at
/// `count` output points (x, y pairs) into out[0..<count]: NaN where the mapped position is not
/// inside [0, width - 1] x [0, height - 1] or the map's denominator is not positive. Eight points a
/// step; the AVX2 variant where the CPU has it; both give the same values.
void evn_grey_points_run(const evn_grey_points *frame, const float *points, ptrdiff_t count, float *out);
void evn_grey_points_portable(const evn_grey_points *frame, const float *points, ptrdiff_t count, float *out);
/// Call only when evn_cpu_has_avx2() is non-zero.
void evn_grey_points_avx2(const evn_grey_points *frame, const float *points, ptrdiff_t count, float *out);

/// A Float plane and the map of one output row to it: output pixel x0 + i samples the plane at
/// ((m0 f + m2) / d, (m3 f + m5) / d), d = m6 f + m8, f = x0 + i (the row's terms folded in).
typedef struct evn_bilinear_row {
    const float *plane;
    ptrdiff_t width, height, x0;
    float m0, m2, m3, m5, m6, m8;
} evn_bilinear_row;

/// Writes output pixels start, start + 4, ... (bilinear values and validity 1) in groups of four
/// (eight a step where two qualify) while each group reads consecutive columns of one pair of
/// plane rows, all inside, its map's denominator positive; returns the first pixel it did not write.
ptrdiff_t evn_bilinear_row_run(const evn_bilinear_row *row, ptrdiff_t start, ptrdiff_t count, float *out,
                               unsigned char *valid);
ptrdiff_t evn_bilinear_row_portable(const evn_bilinear_row *row, ptrdiff_t start, ptrdiff_t count, float *out,
                                    unsigned char *valid);
/// Call only when evn_cpu_has_avx2() is non-zero.
ptrdiff_t evn_bilinear_row_avx2(const evn_bilinear_row *row, ptrdiff_t start, ptrdiff_t count, float *out,
                                unsigned char *valid);

#ifdef __cplusplus
}
#endif

// Lossless writing's kernels (PNG filters, deflate in pieces) are declared in their own header,
// included here so that a build folder made before it existed rebuilds the module.
#include "evanesco_encode.h"
// The backdrop pipeline's kernels, likewise.
#include "evanesco_backdrop.h"
// The raw finish's kernels (levels, demosaic, output transform).
#include "evanesco_raw.h"

#endif
