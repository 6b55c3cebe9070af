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

static inline float output_curve(const evn_raw_output *out, float v) {
    if (!out->lut) return out->sample_bytes == 4 ? (v < 0 ? 0 : v) : clamp01(v);
    const float t = clamp01(v) * (float)(out->lut_size - 1);
    const ptrdiff_t i = (ptrdiff_t)t;
    if (i >= out->lut_size - 1) return out->lut[out->lut_size - 1];
    const float f = t - (float)i;
    return out->lut[i] + f * (out->lut[i + 1] - out->lut[i]);
}

static inline void store_pixel(const evn_raw_output *out, void *row, ptrdiff_t x, float r, float g, float b) {
    const float *m = out->matrix;
    const float v[3] = {output_curve(out, m[0] * r + m[1] * g + m[2] * b),
                        output_curve(out, m[3] * r + m[4] * g + m[5] * b),
                        output_curve(out, m[6] * r + m[7] * g + m[8] * b)};
    switch (out->sample_bytes) {
    case 1:
        for (int c = 0; c < 3; c++) ((uint8_t *)row)[3 * x + c] = (uint8_t)(v[c] * 255.0f + 0.5f);
        break;
    case 2:
        for (int c = 0; c < 3; c++) ((uint16_t *)row)[3 * x + c] = (uint16_t)(v[c] * 65535.0f + 0.5f);
        break;
    default:
        for (int c = 0; c < 3; c++) ((float *)row)[3 * x + c] = v[c];
    }
}

void evn_bayer_finish_rows(const evn_bayer *b, const evn_raw_output *out, ptrdiff_t y0, ptrdiff_t y1) {
    const ptrdiff_t s = b->stride;
    for (ptrdiff_t y = y0; y < y1; y++) {
        const ptrdiff_t o = (y + EVN_RAW_PAD) * s + EVN_RAW_PAD;
        const float *p = b->cfa + o, *g = b->green + o;
        void *row = (char *)out->pixels + y * out->row_bytes;
        const uint8_t *colors = b->colors + (y & 1) * 2;
        // The colour along this row other than green, and the one along the columns.
        const int along_row = colors[0] != 1 ? colors[0] : colors[1];
        for (ptrdiff_t x = 0; x < b->width; x++) {
            const int c = colors[x & 1];
            const float gc = g[x];
            float rgb[3];
            rgb[1] = gc;
            if (c == 1) {
                const float dr = 0.5f * (p[x - 1] - g[x - 1] + p[x + 1] - g[x + 1]);
                const float dc = 0.5f * (p[x - s] - g[x - s] + p[x + s] - g[x + s]);
                rgb[along_row] = gc + dr;
                rgb[2 - along_row] = gc + dc;
            } else {
                const float dd = 0.25f * (p[x - s - 1] - g[x - s - 1] + p[x - s + 1] - g[x - s + 1] + p[x + s - 1] -
                                          g[x + s - 1] + p[x + s + 1] - g[x + s + 1]);
                rgb[c] = p[x];
                rgb[2 - c] = gc + dd;
            }
            store_pixel(out, row, x, rgb[0], rgb[1], rgb[2]);
        }
    }
}

void evn_linear_raw_finish_rows(const uint16_t *rgb, ptrdiff_t width, const float black[3], const float scale[3],
                                float exposure, const evn_raw_output *out, ptrdiff_t y0, ptrdiff_t y1) {
    for (ptrdiff_t y = y0; y < y1; y++) {
        const uint16_t *src = rgb + y * width * 3;
        void *row = (char *)out->pixels + y * out->row_bytes;
        for (ptrdiff_t x = 0; x < width; x++) {
            float v[3];
            for (int c = 0; c < 3; c++) v[c] = clamp01(((float)src[3 * x + c] - black[c]) * scale[c]) * exposure;
            store_pixel(out, row, x, v[0], v[1], v[2]);
        }
    }
}
