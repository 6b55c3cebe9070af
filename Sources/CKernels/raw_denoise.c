// The spatial denoise of a raw merge's planes (evanesco_raw.h): a Lee filter whose noise is
// what the merge left, the sensor's noise line over the frames kept at each cell.
#include "evanesco_kernels.h"
#include "evanesco_raw.h"
#include "vectors.h"

/// The filter at one cell, from columns `xl`, `x` and `xr` of the three original rows around it;
/// every cell takes the same operations in the same order (the loop below runs them eight cells a
/// lane on AVX2).
EVN_INLINE float lee_cell(const float *r0, const float *r1, const float *r2, ptrdiff_t xl, ptrdiff_t x, ptrdiff_t xr,
                          float frames, const evn_raw_denoise_params *p) {
    const float x0 = r1[x];
    // Differences from the cell itself: their sums keep a noise variance of a few hundred exact
    // next to samples in the tens of thousands (the mean of squares less the squared mean does not).
    const float d0 = r0[xl] - x0, d1 = r0[x] - x0, d2 = r0[xr] - x0, d3 = r1[xl] - x0, d5 = r1[xr] - x0;
    const float d6 = r2[xl] - x0, d7 = r2[x] - x0, d8 = r2[xr] - x0;
    const float s = ((d0 + d1) + (d2 + d3)) + ((d5 + d6) + (d7 + d8));
    const float q = ((d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3)) + ((d5 * d5 + d6 * d6) + (d7 * d7 + d8 * d8));
    const float md = s / 9, var = q / 9 - md * md, m = x0 + md;
    const float level = p->slope * m + p->intercept;
    const float n = (level > 0 ? level : 0) / frames, r = p->strength * n;
    const float g = var > r ? (var - r) / var : 0;
    const float y = p->texture > 0 && var > p->texture * n ? x0 : m + g * (x0 - m);
    return y <= 0 ? 0 : y >= 65535 ? 65535 : y;
}

/// One row: `out` gets the filtered cells of the middle row `r1` (edges mirrored).
EVN_INLINE void denoise_row(const float *r0, const float *r1, const float *r2, const uint16_t *kept, ptrdiff_t w,
                            const evn_raw_denoise_params *p, float *out) {
    if (w == 1) {
        out[0] = lee_cell(r0, r1, r2, 0, 0, 0, kept && kept[0] > 1 ? (float)kept[0] : 1, p);
        return;
    }
    out[0] = lee_cell(r0, r1, r2, 1, 0, 1, kept && kept[0] > 1 ? (float)kept[0] : 1, p);
    if (kept) {
        for (ptrdiff_t x = 1; x < w - 1; x++) {
            const float k = (float)kept[x];
            out[x] = lee_cell(r0, r1, r2, x - 1, x, x + 1, k > 1 ? k : 1, p);
        }
    } else {
        for (ptrdiff_t x = 1; x < w - 1; x++) out[x] = lee_cell(r0, r1, r2, x - 1, x, x + 1, 1, p);
    }
    out[w - 1] = lee_cell(r0, r1, r2, w - 2, w - 1, w - 2, kept && kept[w - 1] > 1 ? (float)kept[w - 1] : 1, p);
}

EVN_KERNEL_VARIANTS(void, evn_raw_denoise_row, evn_raw_denoise_row, denoise_row,
                    (const float *r0, const float *r1, const float *r2, const uint16_t *kept, ptrdiff_t w,
                     const evn_raw_denoise_params *p, float *out),
                    (r0, r1, r2, kept, w, p, out))

/// Row `y` of channel `ch` as floats into `row`.
static void load_row(const uint16_t *planes, ptrdiff_t w, int c, int ch, ptrdiff_t y, float *row) {
    const uint16_t *s = planes + (y * w) * c + ch;
    for (ptrdiff_t x = 0; x < w; x++) row[x] = s[x * c];
}

int evn_raw_denoise_channel(uint16_t *planes, const uint16_t *kept, int32_t width, int32_t height, int32_t channels,
                            int32_t ch, const evn_raw_denoise_params *p, float *rows4) {
    const ptrdiff_t w = width, h = height;
    const int c = channels;
    if (ch < 0 || ch >= c) return -1;
    if (w < 1 || h < 1 || !(p->strength > 0)) return 0;
    // The original rows y - 1, y and y + 1 (row y is written back before y + 1 is read), and the
    // filtered row.
    float *orig[3] = {rows4, rows4 + w, rows4 + 2 * w}, *out = rows4 + 3 * w;
    load_row(planes, w, c, ch, 0, orig[1]);
    if (h > 1) load_row(planes, w, c, ch, 1, orig[2]);
    for (ptrdiff_t y = 0; y < h; y++) {
        // Mirrored: above row 0 is row 1, below the last the one before it.
        const float *above = y == 0 ? (h > 1 ? orig[2] : orig[1]) : orig[0];
        const float *below = y == h - 1 ? (h > 1 ? orig[0] : orig[1]) : orig[2];
        evn_raw_denoise_row(above, orig[1], below, kept ? kept + y * w : NULL, w, p, out);
        uint16_t *d = planes + (y * w) * c + ch;
        for (ptrdiff_t x = 0; x < w; x++) d[x * c] = (uint16_t)(out[x] + 0.5f);
        // Shift the ring: the rows y and y + 1 become y - 1 and y; y + 2 is read.
        float *t = orig[0];
        orig[0] = orig[1], orig[1] = orig[2], orig[2] = t;
        if (y + 2 < h) load_row(planes, w, c, ch, y + 2, orig[2]);
    }
    return 0;
}
