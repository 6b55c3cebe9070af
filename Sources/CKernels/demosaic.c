// The raw finish: levels, gradient-weighted directional green, colour-difference red and blue,
// colour matrix and output curve (evanesco_raw.h).
#include "evanesco_raw.h"
#include "evanesco_kernels.h"
#include "vectors.h"
#include <math.h>

static inline ptrdiff_t reflect101(ptrdiff_t i, ptrdiff_t n) {
    if (i < 0) i = -i;
    if (i >= n) i = 2 * n - 2 - i;
    return i;
}

static inline float clamp01(float v) { return v < 0 ? 0 : (v > 1 ? 1 : v); }

void evn_bayer_levels(const evn_bayer *b, const uint16_t *mosaic, const float black[4], const float scale[4],
                      float exposure, ptrdiff_t py0, ptrdiff_t py1) {
    const ptrdiff_t w = b->width, h = b->height, s = b->stride;
    for (ptrdiff_t py = py0; py < py1; py++) {
        const ptrdiff_t y = reflect101(py - EVN_RAW_PAD, h);
        const uint16_t *src = mosaic + y * w;
        float *dst = b->cfa + py * s + EVN_RAW_PAD;
        const float b0 = black[(y & 1) * 2], b1 = black[(y & 1) * 2 + 1];
        const float s0 = scale[(y & 1) * 2], s1 = scale[(y & 1) * 2 + 1];
        ptrdiff_t x = 0;
        for (; x + 1 < w; x += 2) {
            dst[x] = clamp01(((float)src[x] - b0) * s0) * exposure;
            dst[x + 1] = clamp01(((float)src[x + 1] - b1) * s1) * exposure;
        }
        if (x < w) dst[x] = clamp01(((float)src[x] - b0) * s0) * exposure;
        for (ptrdiff_t k = 1; k <= EVN_RAW_PAD; k++) {
            dst[-k] = dst[reflect101(-k, w)];
            dst[w - 1 + k] = dst[reflect101(w - 1 + k, w)];
        }
    }
}

EVN_INLINE void gradients_body(const evn_bayer *b, ptrdiff_t y0, ptrdiff_t y1) {
    const ptrdiff_t s = b->stride;
    for (ptrdiff_t y = y0; y < y1; y++) {
        const ptrdiff_t o = (y + EVN_RAW_PAD) * s + EVN_RAW_PAD;
        const float *p = b->cfa + o;
        float *dh = b->dh + o, *dv = b->dv + o;
        for (ptrdiff_t x = -2; x < b->width + 2; x++) {
            const float c2 = 2 * p[x];
            dh[x] = fabsf(p[x - 1] - p[x + 1]) + fabsf(c2 - p[x - 2] - p[x + 2]);
            dv[x] = fabsf(p[x - s] - p[x + s]) + fabsf(c2 - p[x - 2 * s] - p[x + 2 * s]);
        }
    }
}

EVN_KERNEL_VARIANTS(void, evn_bayer_gradients, evn_bayer_gradients, gradients_body,
                    (const evn_bayer *b, ptrdiff_t y0, ptrdiff_t y1), (b, y0, y1))

EVN_INLINE void green_body(const evn_bayer *b, ptrdiff_t y0, ptrdiff_t y1) {
    const ptrdiff_t s = b->stride;
    const float eps = 1e-5f;
    for (ptrdiff_t y = y0; y < y1; y++) {
        const ptrdiff_t o = (y + EVN_RAW_PAD) * s + EVN_RAW_PAD;
        const float *p = b->cfa + o, *dh = b->dh + o, *dv = b->dv + o;
        float *g = b->green + o;
        // The first column of this row (x = -1, in the padding) that is not green.
        const uint8_t *row = b->colors + (y & 1) * 2;
        const ptrdiff_t first = row[1] != 1 ? -1 : 0;
        for (ptrdiff_t x = -1; x < b->width + 1; x++) g[x] = p[x];
        for (ptrdiff_t x = first; x < b->width + 1; x += 2) {
            const float c2 = 2 * p[x];
            const float gh = 0.5f * (p[x - 1] + p[x + 1]) + 0.25f * (c2 - p[x - 2] - p[x + 2]);
            const float gv = 0.5f * (p[x - s] + p[x + s]) + 0.25f * (c2 - p[x - 2 * s] - p[x + 2 * s]);
            float sh = 0, sv = 0;
            for (int j = -1; j <= 1; j++) {
                sh += dh[x + j * s - 1] + dh[x + j * s] + dh[x + j * s + 1];
                sv += dv[x + j * s - 1] + dv[x + j * s] + dv[x + j * s + 1];
            }
            const float wh = 1.0f / ((sh + eps) * (sh + eps)), wv = 1.0f / ((sv + eps) * (sv + eps));
            float v = (wh * gh + wv * gv) / (wh + wv);
            // Never beyond the four greens around it by more than their spread (overshoot at edges).
            const float a = p[x - 1], c = p[x + 1], d = p[x - s], e = p[x + s];
            const float lo = fminf(fminf(a, c), fminf(d, e)), hi = fmaxf(fmaxf(a, c), fmaxf(d, e));
            const float spread = hi - lo;
            v = fminf(fmaxf(v, lo - spread), hi + spread);
            g[x] = v < 0 ? 0 : v;
        }
    }
}

EVN_KERNEL_VARIANTS(void, evn_bayer_green, evn_bayer_green, green_body,
                    (const evn_bayer *b, ptrdiff_t y0, ptrdiff_t y1), (b, y0, y1))

/// The output curve of one sample: the table (linear between entries) over 0...1, or a clamp.
EVN_INLINE float output_curve(const float *lut, ptrdiff_t last, int clamp_high, float v) {
    if (!lut) return v < 0 ? 0 : (clamp_high && v > 1 ? 1 : v);
    const float t = clamp01(v) * (float)last;
    ptrdiff_t i = (ptrdiff_t)t;
    i = i < last ? i : last - 1;
    const float f = t - (float)i;
    return lut[i] + f * (lut[i + 1] - lut[i]);
}

#define STORE_ROW_LOOP(T, SCALE)                                                                                       \
    for (ptrdiff_t x = 0; x < width; x++) {                                                                            \
        const float r = rgb[x], g = rgb[width + x], b = rgb[2 * width + x];                                            \
        T *o = (T *)row + 3 * x;                                                                                       \
        const float v0 = output_curve(lut, last, clamp_high, m[0] * r + m[1] * g + m[2] * b);                          \
        const float v1 = output_curve(lut, last, clamp_high, m[3] * r + m[4] * g + m[5] * b);                          \
        const float v2 = output_curve(lut, last, clamp_high, m[6] * r + m[7] * g + m[8] * b);                          \
        o[0] = (T)(v0 * SCALE);                                                                                        \
        o[1] = (T)(v1 * SCALE);                                                                                        \
        o[2] = (T)(v2 * SCALE);                                                                                        \
    }

/// One row of camera RGB (`rgb`: the red, green and blue rows one after the other) through the
/// matrix and curve into `row`.
EVN_INLINE void store_row_body(const evn_raw_output *out, const float *rgb, ptrdiff_t width, void *row) {
    const float m[9] = {out->matrix[0], out->matrix[1], out->matrix[2], out->matrix[3], out->matrix[4],
                        out->matrix[5], out->matrix[6], out->matrix[7], out->matrix[8]};
    const float *lut = out->lut;
    const ptrdiff_t last = out->lut_size - 1;
    const int clamp_high = out->sample_bytes != 4;
    switch (out->sample_bytes) {
    case 1:
        STORE_ROW_LOOP(uint8_t, 255.0f + 0.5f) break;
    case 2:
        STORE_ROW_LOOP(uint16_t, 65535.0f + 0.5f) break;
    default:
        STORE_ROW_LOOP(float, 1.0f)
    }
}

EVN_KERNEL_VARIANTS(void, evn_raw_store_row, evn_raw_store_row, store_row_body,
                    (const evn_raw_output *out, const float *rgb, ptrdiff_t width, void *row), (out, rgb, width, row))

/// Camera RGB of row y: at green sites the two colour differences along the row and the column,
/// at red and blue sites the four diagonal ones. Two pixels a step (the row's two phases).
EVN_INLINE void bayer_row_rgb(const evn_bayer *b, ptrdiff_t y, float *rgb) {
    const ptrdiff_t s = b->stride, w = b->width;
    const ptrdiff_t o = (y + EVN_RAW_PAD) * s + EVN_RAW_PAD;
    const float *p = b->cfa + o, *g = b->green + o;
    const uint8_t *colors = b->colors + (y & 1) * 2;
    // The colour along this row other than green, and where the row's green sites are.
    const int along_row = colors[0] != 1 ? colors[0] : colors[1];
    const ptrdiff_t green_phase = colors[0] == 1 ? 0 : 1;
    const int across = 2 - along_row;
    float *green = rgb + w, *row_colour = rgb + along_row * w, *column_colour = rgb + across * w;
    for (ptrdiff_t x = green_phase; x < w; x += 2) {
        const float gc = g[x];
        green[x] = gc;
        row_colour[x] = gc + 0.5f * (p[x - 1] - g[x - 1] + p[x + 1] - g[x + 1]);
        column_colour[x] = gc + 0.5f * (p[x - s] - g[x - s] + p[x + s] - g[x + s]);
    }
    for (ptrdiff_t x = 1 - green_phase; x < w; x += 2) {
        const float gc = g[x];
        const float dd = p[x - s - 1] - g[x - s - 1] + p[x - s + 1] - g[x - s + 1];
        const float de = p[x + s - 1] - g[x + s - 1] + p[x + s + 1] - g[x + s + 1];
        green[x] = gc;
        row_colour[x] = p[x];
        column_colour[x] = gc + 0.25f * (dd + de);
    }
}

EVN_KERNEL_VARIANTS(void, evn_bayer_row_rgb, evn_bayer_row_rgb, bayer_row_rgb,
                    (const evn_bayer *b, ptrdiff_t y, float *rgb), (b, y, rgb))

void evn_bayer_finish_rows(const evn_bayer *b, const evn_raw_output *out, ptrdiff_t y0, ptrdiff_t y1, float *scratch) {
    for (ptrdiff_t y = y0; y < y1; y++) {
        evn_bayer_row_rgb(b, y, scratch);
        evn_raw_store_row(out, scratch, b->width, (char *)out->pixels + y * out->row_bytes);
    }
}

void evn_linear_raw_finish_rows(const uint16_t *rgb, ptrdiff_t width, const float black[3], const float scale[3],
                                float exposure, const evn_raw_output *out, ptrdiff_t y0, ptrdiff_t y1, float *row) {
    for (ptrdiff_t y = y0; y < y1; y++) {
        const uint16_t *src = rgb + y * width * 3;
        for (ptrdiff_t x = 0; x < width; x++)
            for (int c = 0; c < 3; c++)
                row[c * width + x] = clamp01(((float)src[3 * x + c] - black[c]) * scale[c]) * exposure;
        evn_raw_store_row(out, row, width, (char *)out->pixels + y * out->row_bytes);
    }
}
