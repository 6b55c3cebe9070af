// The backdrop pipeline's per-frame kernels (depth cut, half-resolution coverage, Gaussian blur,
// temporal smoothing and gamma, bicubic upscale fused with the blend). The vector ones are one C
// body compiled portably and with AVX2 (see evanesco_kernels.h; the unsuffixed name picks the
// AVX2 variant where the CPU has it, and every variant gives the same bits: no fused
// multiply-add); the depth histogram and the mask's last step are plain C, one variant.
#ifndef EVANESCO_BACKDROP_H
#define EVANESCO_BACKDROP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The binary cut of `count` depth samples (metres): 1 where 0 < d <= cutoff, 2 where d <= 0 (no
/// depth), else 0 (NaN too). Returns the number of 2s (holes).
ptrdiff_t evn_depth_cut(const float *depth, ptrdiff_t count, float cutoff, uint8_t *bin);
ptrdiff_t evn_depth_cut_portable(const float *depth, ptrdiff_t count, float cutoff, uint8_t *bin);
ptrdiff_t evn_depth_cut_avx2(const float *depth, ptrdiff_t count, float cutoff, uint8_t *bin);

/// A histogram of the depth at every `step`-th column of every `step`-th row: for each sample
/// v > 0, t = (v - lo) * scale counts in bin (int)t when -1 < t < bins. Returns the samples
/// counted (-1 when out of memory; counts is then unchanged).
ptrdiff_t evn_depth_histogram(const float *depth, ptrdiff_t w, ptrdiff_t h, ptrdiff_t step, float lo, float scale,
                              ptrdiff_t bins, uint32_t *counts);

/// Rows hy0..<hy1 of the half-resolution coverage of a w x h cut (`bin` as evn_depth_cut writes
/// it; the plane is (w + 1) / 2 x (h + 1) / 2): each value the mean of its 2x2 block (edges
/// clamped). With `fill`, a hole first takes the majority of the known values among its 3x3
/// neighbours in `bin` (a tie or none known: 0); without, a hole is 0.
void evn_half_coverage(const uint8_t *bin, ptrdiff_t w, ptrdiff_t h, int fill, ptrdiff_t hy0, ptrdiff_t hy1,
                       float *half);
void evn_half_coverage_portable(const uint8_t *bin, ptrdiff_t w, ptrdiff_t h, int fill, ptrdiff_t hy0, ptrdiff_t hy1,
                                float *half);
void evn_half_coverage_avx2(const uint8_t *bin, ptrdiff_t w, ptrdiff_t h, int fill, ptrdiff_t hy0, ptrdiff_t hy1,
                            float *half);

/// A separable Gaussian's taps: `taps` = 2k + 1 weights for offsets -k...k; edges clamped.
typedef struct evn_blur {
    const float *weights;
    ptrdiff_t taps;
    /// The plane, `width` x `height` floats.
    ptrdiff_t width, height;
} evn_blur;

/// The horizontal pass over rows y0..<y1: dst[x] = sum over j in order of w[j] src[x - k + j].
void evn_blur_rows(const evn_blur *blur, const float *src, ptrdiff_t y0, ptrdiff_t y1, float *dst);
void evn_blur_rows_portable(const evn_blur *blur, const float *src, ptrdiff_t y0, ptrdiff_t y1, float *dst);
void evn_blur_rows_avx2(const evn_blur *blur, const float *src, ptrdiff_t y0, ptrdiff_t y1, float *dst);
/// The vertical pass over rows y0..<y1 (the same sums down the columns).
void evn_blur_columns(const evn_blur *blur, const float *src, ptrdiff_t y0, ptrdiff_t y1, float *dst);
void evn_blur_columns_portable(const evn_blur *blur, const float *src, ptrdiff_t y0, ptrdiff_t y1, float *dst);
void evn_blur_columns_avx2(const evn_blur *blur, const float *src, ptrdiff_t y0, ptrdiff_t y1, float *dst);

/// Temporal smoothing and gamma of mask values start..<end: m = a m + (1 - a) previous (when
/// `previous` is not NULL), kept in `smoothed`; then m = table[(int)(clamp(m, 0, 1) * 1024 + 0.5)]
/// (1025 entries) written to `mask`.
void evn_mask_finish(const float *blurred, const float *previous, float a, const float *table, ptrdiff_t start,
                     ptrdiff_t end, float *smoothed, float *mask);

/// One output row of the composite: the mask (mask_width x rows at half the depth resolution)
/// upscaled bicubically to `width` columns and the blend dst = src m + background (1 - m), 8-bit
/// fixed point (m in 1/256), RGB.
typedef struct evn_backdrop_row {
    /// The four mask rows of this output row and their vertical weights.
    const float *rows[4];
    float weights[4];
    ptrdiff_t mask_width, width;
    /// Per output column its four mask columns and weights, tap j of column x at j * width + x.
    const int32_t *taps;
    const float *tap_weights;
    /// first[i]: the first output column whose first tap (clamped to -1...mask_width - 1) plus 1 is
    /// i or more; first[mask_width + 1] = width (mask_width + 2 entries).
    const ptrdiff_t *first;
    /// The number of windows that start inside the row (the first i with first[i] = width).
    ptrdiff_t windows;
    /// Bytes from this row to a later one whose colour and background to prefetch (0: none).
    ptrdiff_t prefetch_offset;
    /// The colour row, the background row (black: a row of zeros), the output row (width x 3 bytes).
    const uint8_t *src, *background;
    uint8_t *dst;
    /// The upscaled mask row (0...255), or NULL.
    uint8_t *mask_out;
    /// Scratch: mask_width floats, mask_width bytes and mask_width + 1 bytes.
    float *line;
    uint8_t *flag, *window;
} evn_backdrop_row;

/// Writes one row. Where all four taps of a column are 0 (or 1) the background (or the colour) is
/// copied; the rest is upscaled and blended, eight pixels at a time.
void evn_backdrop_row_blend(const evn_backdrop_row *row);
void evn_backdrop_row_blend_portable(const evn_backdrop_row *row);
void evn_backdrop_row_blend_avx2(const evn_backdrop_row *row);

#ifdef __cplusplus
}
#endif

#endif
