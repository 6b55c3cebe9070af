// The backdrop pipeline's per-frame kernels (see evanesco_backdrop.h): one body each, compiled
// portably and with AVX2. Sums are taken in the same order in every lane and in every tail, so
// the variants (and the rows a vector step covers or not) give the same bits.
#include "evanesco_kernels.h"
#include "vectors.h"
#include <stdlib.h>

typedef unsigned short v8s __attribute__((ext_vector_type(8)));
typedef unsigned char v16b __attribute__((ext_vector_type(16)));

// MARK: - Depth cut

EVN_INLINE ptrdiff_t depth_cut_body(const float *d, ptrdiff_t n, float cutoff, uint8_t *bin) {
    ptrdiff_t i = 0, holes = 0;
    v8i counted = 0;
    for (; i + 8 <= n; i += 8) {
        const v8f v = load8(d + i);
        const v8i hole = v <= 0, subject = v <= cutoff;
        // A hole is also <= cutoff: 2 wins.
        const v8i code = (hole & 2) | (~hole & subject & 1);
        counted -= hole;
        const v8b b = __builtin_convertvector(code, v8b);
        memcpy(bin + i, &b, sizeof b);
    }
    for (int l = 0; l < 8; l++) holes += counted[l];
    for (; i < n; i++) {
        const float v = d[i];
        const uint8_t c = v <= 0 ? 2 : (v <= cutoff ? 1 : 0);
        bin[i] = c;
        holes += c == 2;
    }
    return holes;
}

ptrdiff_t evn_depth_cut_portable(const float *d, ptrdiff_t n, float cutoff, uint8_t *bin) {
    return depth_cut_body(d, n, cutoff, bin);
}
EVN_AVX2 ptrdiff_t evn_depth_cut_avx2(const float *d, ptrdiff_t n, float cutoff, uint8_t *bin) {
    return depth_cut_body(d, n, cutoff, bin);
}
ptrdiff_t evn_depth_cut(const float *d, ptrdiff_t n, float cutoff, uint8_t *bin) {
    return evn_cpu_has_avx2() ? evn_depth_cut_avx2(d, n, cutoff, bin) : evn_depth_cut_portable(d, n, cutoff, bin);
}

// MARK: - Depth histogram

ptrdiff_t evn_depth_histogram(const float *depth, ptrdiff_t w, ptrdiff_t h, ptrdiff_t step, float lo, float scale,
                              ptrdiff_t bins, uint32_t *counts) {
    // Four sub-histograms, one per lane of four consecutive samples: a run of equal depths (the
    // maps are mostly smooth) would otherwise wait on its own increments.
    uint32_t *sub = calloc((size_t)(4 * bins), sizeof *sub);
    if (!sub) return -1;
    ptrdiff_t counted = 0;
    const float top = (float)bins;
    for (ptrdiff_t y = 0; y < h; y += step) {
        const float *row = depth + y * w;
        ptrdiff_t x = 0, lane = 0;
        for (; x < w; x += step, lane = (lane + 1) & 3) {
            const float v = row[x];
            if (!(v > 0)) continue;
            const float t = (v - lo) * scale;
            // Truncation toward zero: t in (-1, bins) is bin 0..<bins (NaN fails both tests).
            if (t > -1 && t < top) {
                sub[lane * bins + (ptrdiff_t)t]++;
                counted++;
            }
        }
    }
    for (ptrdiff_t b = 0; b < bins; b++) counts[b] = sub[b] + sub[bins + b] + sub[2 * bins + b] + sub[3 * bins + b];
    free(sub);
    return counted;
}

// MARK: - Half-resolution coverage

/// A hole's value: the majority of the known values among its 3x3 neighbours (tie or none: 0).
static inline int decide_hole(const uint8_t *bin, ptrdiff_t w, ptrdiff_t h, ptrdiff_t x, ptrdiff_t y) {
    const ptrdiff_t ylo = y > 0 ? y - 1 : 0, yhi = y + 1 < h ? y + 1 : h - 1;
    const ptrdiff_t xlo = x > 0 ? x - 1 : 0, xhi = x + 1 < w ? x + 1 : w - 1;
    int known = 0, subject = 0;
    for (ptrdiff_t yy = ylo; yy <= yhi; yy++) {
        for (ptrdiff_t xx = xlo; xx <= xhi; xx++) {
            const int u = bin[yy * w + xx];
            if (u != 2) {
                known++;
                subject += u;
            }
        }
    }
    return known > 0 && subject * 2 > known;
}

static inline int value_at(const uint8_t *bin, ptrdiff_t w, ptrdiff_t h, int fill, ptrdiff_t x, ptrdiff_t y) {
    const int v = bin[y * w + x];
    return v != 2 ? v : (fill ? decide_hole(bin, w, h, x, y) : 0);
}

EVN_INLINE void half_coverage_body(const uint8_t *bin, ptrdiff_t w, ptrdiff_t h, int fill, ptrdiff_t hy0, ptrdiff_t hy1,
                                   float *half) {
    const ptrdiff_t hw = (w + 1) / 2;
    const uint64_t holeBits = 0x0202020202020202ull;
    for (ptrdiff_t hy = hy0; hy < hy1; hy++) {
        const ptrdiff_t y0 = 2 * hy, y1 = 2 * hy + 1 < h ? 2 * hy + 1 : h - 1;
        const uint8_t *a = bin + y0 * w, *b = bin + y1 * w;
        float *out = half + hy * hw;
        ptrdiff_t hx = 0;
        // Sixteen columns (eight outputs) at a time while no hole is among them.
        for (; 2 * hx + 16 <= w; hx += 8) {
            uint64_t t[4];
            memcpy(t, a + 2 * hx, 16);
            memcpy(t + 2, b + 2 * hx, 16);
            if ((t[0] | t[1] | t[2] | t[3]) & holeBits) {
                for (int l = 0; l < 8; l++) {
                    const ptrdiff_t x0 = 2 * (hx + l), x1 = x0 + 1;
                    const int s = value_at(bin, w, h, fill, x0, y0) + value_at(bin, w, h, fill, x1, y0) +
                                  value_at(bin, w, h, fill, x0, y1) + value_at(bin, w, h, fill, x1, y1);
                    out[hx + l] = (float)s * 0.25f;
                }
                continue;
            }
            v16b A, B;
            memcpy(&A, a + 2 * hx, 16);
            memcpy(&B, b + 2 * hx, 16);
            const v8i s = __builtin_convertvector(__builtin_shufflevector(A, A, 0, 2, 4, 6, 8, 10, 12, 14), v8i) +
                          __builtin_convertvector(__builtin_shufflevector(A, A, 1, 3, 5, 7, 9, 11, 13, 15), v8i) +
                          __builtin_convertvector(__builtin_shufflevector(B, B, 0, 2, 4, 6, 8, 10, 12, 14), v8i) +
                          __builtin_convertvector(__builtin_shufflevector(B, B, 1, 3, 5, 7, 9, 11, 13, 15), v8i);
            store8(__builtin_convertvector(s, v8f) * 0.25f, out + hx);
        }
        for (; hx < hw; hx++) {
            const ptrdiff_t x0 = 2 * hx, x1 = 2 * hx + 1 < w ? 2 * hx + 1 : w - 1;
            const int s = value_at(bin, w, h, fill, x0, y0) + value_at(bin, w, h, fill, x1, y0) +
                          value_at(bin, w, h, fill, x0, y1) + value_at(bin, w, h, fill, x1, y1);
            out[hx] = (float)s * 0.25f;
        }
    }
}

void evn_half_coverage_portable(const uint8_t *bin, ptrdiff_t w, ptrdiff_t h, int fill, ptrdiff_t hy0, ptrdiff_t hy1,
                                float *half) {
    half_coverage_body(bin, w, h, fill, hy0, hy1, half);
}
EVN_AVX2 void evn_half_coverage_avx2(const uint8_t *bin, ptrdiff_t w, ptrdiff_t h, int fill, ptrdiff_t hy0,
                                     ptrdiff_t hy1, float *half) {
    half_coverage_body(bin, w, h, fill, hy0, hy1, half);
}
void evn_half_coverage(const uint8_t *bin, ptrdiff_t w, ptrdiff_t h, int fill, ptrdiff_t hy0, ptrdiff_t hy1,
                       float *half) {
    if (evn_cpu_has_avx2()) evn_half_coverage_avx2(bin, w, h, fill, hy0, hy1, half);
    else evn_half_coverage_portable(bin, w, h, fill, hy0, hy1, half);
}

// MARK: - Gaussian blur

static inline ptrdiff_t clampi(ptrdiff_t v, ptrdiff_t lo, ptrdiff_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

EVN_INLINE void blur_rows_body(const evn_blur *B, const float *src, ptrdiff_t y0, ptrdiff_t y1, float *dst) {
    const ptrdiff_t w = B->width, taps = B->taps, k = taps / 2;
    const float *g = B->weights;
    for (ptrdiff_t y = y0; y < y1; y++) {
        const float *s = src + y * w;
        float *o = dst + y * w;
        ptrdiff_t x = 0;
        // Columns whose taps fall outside the row read the clamped edge; the rest, eight at a time.
        for (; x < w && x < k; x++) {
            float acc = 0;
            for (ptrdiff_t j = 0; j < taps; j++) acc = acc + s[clampi(x - k + j, 0, w - 1)] * g[j];
            o[x] = acc;
        }
        // Four vectors at a time: independent sums, each in the same order (the add's latency, not
        // its throughput, bounds one chain).
        for (; x + 32 + k <= w; x += 32) {
            v8f a0 = 0, a1 = 0, a2 = 0, a3 = 0;
            const float *p = s + x - k;
            for (ptrdiff_t j = 0; j < taps; j++) {
                const float gj = g[j];
                a0 = a0 + load8(p + j) * gj;
                a1 = a1 + load8(p + j + 8) * gj;
                a2 = a2 + load8(p + j + 16) * gj;
                a3 = a3 + load8(p + j + 24) * gj;
            }
            store8(a0, o + x);
            store8(a1, o + x + 8);
            store8(a2, o + x + 16);
            store8(a3, o + x + 24);
        }
        for (; x + 8 + k <= w; x += 8) {
            v8f acc = 0;
            for (ptrdiff_t j = 0; j < taps; j++) acc = acc + load8(s + x - k + j) * g[j];
            store8(acc, o + x);
        }
        for (; x < w; x++) {
            float acc = 0;
            for (ptrdiff_t j = 0; j < taps; j++) acc = acc + s[clampi(x - k + j, 0, w - 1)] * g[j];
            o[x] = acc;
        }
    }
}

EVN_INLINE void blur_columns_body(const evn_blur *B, const float *src, ptrdiff_t y0, ptrdiff_t y1, float *dst) {
    const ptrdiff_t w = B->width, h = B->height, taps = B->taps, k = taps / 2;
    const float *g = B->weights;
    for (ptrdiff_t y = y0; y < y1; y++) {
        float *o = dst + y * w;
        ptrdiff_t x = 0;
        for (; x + 32 <= w; x += 32) {
            v8f a0 = 0, a1 = 0, a2 = 0, a3 = 0;
            for (ptrdiff_t j = 0; j < taps; j++) {
                const float *p = src + clampi(y - k + j, 0, h - 1) * w + x;
                const float gj = g[j];
                a0 = a0 + load8(p) * gj;
                a1 = a1 + load8(p + 8) * gj;
                a2 = a2 + load8(p + 16) * gj;
                a3 = a3 + load8(p + 24) * gj;
            }
            store8(a0, o + x);
            store8(a1, o + x + 8);
            store8(a2, o + x + 16);
            store8(a3, o + x + 24);
        }
        for (; x + 8 <= w; x += 8) {
            v8f acc = 0;
            for (ptrdiff_t j = 0; j < taps; j++) acc = acc + load8(src + clampi(y - k + j, 0, h - 1) * w + x) * g[j];
            store8(acc, o + x);
        }
        for (; x < w; x++) {
            float acc = 0;
            for (ptrdiff_t j = 0; j < taps; j++) acc = acc + src[clampi(y - k + j, 0, h - 1) * w + x] * g[j];
            o[x] = acc;
        }
    }
}

void evn_blur_rows_portable(const evn_blur *b, const float *src, ptrdiff_t y0, ptrdiff_t y1, float *dst) {
    blur_rows_body(b, src, y0, y1, dst);
}
EVN_AVX2 void evn_blur_rows_avx2(const evn_blur *b, const float *src, ptrdiff_t y0, ptrdiff_t y1, float *dst) {
    blur_rows_body(b, src, y0, y1, dst);
}
void evn_blur_rows(const evn_blur *b, const float *src, ptrdiff_t y0, ptrdiff_t y1, float *dst) {
    if (evn_cpu_has_avx2()) evn_blur_rows_avx2(b, src, y0, y1, dst);
    else evn_blur_rows_portable(b, src, y0, y1, dst);
}
void evn_blur_columns_portable(const evn_blur *b, const float *src, ptrdiff_t y0, ptrdiff_t y1, float *dst) {
    blur_columns_body(b, src, y0, y1, dst);
}
EVN_AVX2 void evn_blur_columns_avx2(const evn_blur *b, const float *src, ptrdiff_t y0, ptrdiff_t y1, float *dst) {
    blur_columns_body(b, src, y0, y1, dst);
}
void evn_blur_columns(const evn_blur *b, const float *src, ptrdiff_t y0, ptrdiff_t y1, float *dst) {
    if (evn_cpu_has_avx2()) evn_blur_columns_avx2(b, src, y0, y1, dst);
    else evn_blur_columns_portable(b, src, y0, y1, dst);
}

// MARK: - Temporal smoothing and gamma

void evn_mask_finish(const float *blurred, const float *previous, float a, const float *table, ptrdiff_t start,
                     ptrdiff_t end, float *smoothed, float *mask) {
    const float b = 1 - a;
    for (ptrdiff_t i = start; i < end; i++) {
        float m = blurred[i];
        if (previous) m = a * m + b * previous[i];
        smoothed[i] = m;
        const float c = m < 0 ? 0 : (m > 1 ? 1 : m);
        mask[i] = table[(int)(c * 1024 + 0.5f)];
    }
}

// MARK: - Upscale and blend

/// Output pixels x..<x + 8 of a transition: the mask by the column taps, and the blend.
#define BLEND8(R, x, line, src, bg, dst, mout)                                                                         \
    do {                                                                                                               \
        const ptrdiff_t W_ = (R)->width;                                                                               \
        const int32_t *t_ = (R)->taps;                                                                                 \
        const float *tw_ = (R)->tap_weights;                                                                           \
        v8f l0_, l1_, l2_, l3_;                                                                                        \
        for (int l_ = 0; l_ < 8; l_++) {                                                                               \
            l0_[l_] = line[t_[(x) + l_]];                                                                              \
            l1_[l_] = line[t_[W_ + (x) + l_]];                                                                         \
            l2_[l_] = line[t_[2 * W_ + (x) + l_]];                                                                     \
            l3_[l_] = line[t_[3 * W_ + (x) + l_]];                                                                     \
        }                                                                                                              \
        v8f v_ = load8(tw_ + (x)) * l0_ + load8(tw_ + W_ + (x)) * l1_ + load8(tw_ + 2 * W_ + (x)) * l2_ +              \
                 load8(tw_ + 3 * W_ + (x)) * l3_;                                                                      \
        const v8f zero_ = 0, one_ = 1;                                                                                 \
        v_ = v_ < zero_ ? zero_ : v_;                                                                                  \
        v_ = v_ > one_ ? one_ : v_;                                                                                    \
        const v8i mi_ = __builtin_convertvector(v_ * 256 + 0.5f, v8i);                                                 \
        if (mout) {                                                                                                    \
            const v8b f_ = __builtin_convertvector((mi_ * 255 + 128) >> 8, v8b);                                       \
            memcpy((mout) + (x), &f_, 8);                                                                              \
        }                                                                                                              \
        const v8s m_ = __builtin_convertvector(mi_, v8s);                                                              \
        const v8s m3_[3] = {__builtin_shufflevector(m_, m_, 0, 0, 0, 1, 1, 1, 2, 2),                                   \
                            __builtin_shufflevector(m_, m_, 2, 3, 3, 3, 4, 4, 4, 5),                                   \
                            __builtin_shufflevector(m_, m_, 5, 5, 6, 6, 6, 7, 7, 7)};                                  \
        for (int p_ = 0; p_ < 3; p_++) {                                                                               \
            const ptrdiff_t o_ = 3 * (x) + 8 * p_;                                                                     \
            const v8s fg_ = __builtin_convertvector(load8b((src) + o_), v8s),                                          \
                      bk_ = __builtin_convertvector(load8b((bg) + o_), v8s);                                           \
            const v8s r_ = (fg_ * m3_[p_] + bk_ * (256 - m3_[p_]) + 128) >> 8;                                         \
            const v8b q_ = __builtin_convertvector(r_, v8b);                                                           \
            memcpy((dst) + o_, &q_, 8);                                                                                \
        }                                                                                                              \
    } while (0)

/// The class of the four taps from column i - 2 to i + 1 (clamped): 0 or 1 when all four are, else 2.
static inline uint8_t window_class(const uint8_t *flag, ptrdiff_t mw, ptrdiff_t i) {
    const uint8_t p = flag[i >= 2 ? i - 2 : 0], q = flag[i >= 1 ? i - 1 : 0], r = flag[i < mw ? i : mw - 1],
                  u = flag[i + 1 < mw ? i + 1 : mw - 1];
    return p == q && q == r && r == u ? p : 2;
}

EVN_INLINE void backdrop_row_body(const evn_backdrop_row *R) {
    const ptrdiff_t mw = R->mask_width, W = R->width;
    float *line = R->line;
    uint8_t *flag = R->flag, *window = R->window;
    const float a = R->weights[0], b = R->weights[1], c = R->weights[2], d = R->weights[3];
    const float *r0 = R->rows[0], *r1 = R->rows[1], *r2 = R->rows[2], *r3 = R->rows[3];
    ptrdiff_t i = 0;
    for (; i + 8 <= mw; i += 8)
        store8(a * load8(r0 + i) + b * load8(r1 + i) + c * load8(r2 + i) + d * load8(r3 + i), line + i);
    for (; i < mw; i++) line[i] = a * r0[i] + b * r1[i] + c * r2[i] + d * r3[i];
    // Where all four taps are 0 (or 1) the pixel is background (or subject): copy runs of those;
    // blend only the transition.
    i = 0;
    for (; i + 8 <= mw; i += 8) {
        const v8f l = load8(line + i);
        const v8i low = l <= 0.001f, high = l >= 0.999f;
        const v8b f = __builtin_convertvector((~low & high & 1) | (~low & ~high & 2), v8b);
        memcpy(flag + i, &f, 8);
    }
    for (; i < mw; i++) flag[i] = line[i] <= 0.001f ? 0 : (line[i] >= 0.999f ? 1 : 2);
    // window[i]: the class of the four taps at columns i - 2...i + 1 (clamped): the two first and
    // the last read clamped columns; in between sixteen at a time.
    i = 0;
    for (; i < 2 && i <= mw; i++) window[i] = window_class(flag, mw, i);
    for (; i + 17 <= mw; i += 16) {
        v16b p, q, r, u;
        memcpy(&p, flag + i - 2, 16);
        memcpy(&q, flag + i - 1, 16);
        memcpy(&r, flag + i, 16);
        memcpy(&u, flag + i + 1, 16);
        const v16b same = (v16b)((p == q) & (q == r) & (r == u)), two = 2;
        const v16b wv = (same & p) | (~same & two);
        memcpy(window + i, &wv, 16);
    }
    for (; i <= mw; i++) window[i] = window_class(flag, mw, i);
    const ptrdiff_t *first = R->first;
    const uint8_t *src = R->src, *bg = R->background;
    uint8_t *dst = R->dst, *mout = R->mask_out;
    // Windows from `end` on start at or past the row's end (first only grows).
    ptrdiff_t end = R->windows;
    i = 0;
    while (i < end) {
        const uint8_t kind = window[i];
        ptrdiff_t k = i + 1;
        // The run's end: sixteen windows at a time while all are of this kind.
        const v16b kv = kind;
        while (k + 16 <= end) {
            v16b wv;
            memcpy(&wv, window + k, 16);
            const v16b ne = (v16b)(wv != kv);
            uint64_t lanes[2];
            memcpy(lanes, &ne, 16);
            if (lanes[0] | lanes[1]) break;
            k += 16;
        }
        while (k < end && window[k] == kind) k++;
        const ptrdiff_t x0 = first[i], e = first[k];
        i = k;
        if (e <= x0) continue;
        switch (kind) {
        case 0:
            memcpy(dst + 3 * x0, bg + 3 * x0, (size_t)(3 * (e - x0)));
            if (mout) memset(mout + x0, 0, (size_t)(e - x0));
            break;
        case 1:
            memcpy(dst + 3 * x0, src + 3 * x0, (size_t)(3 * (e - x0)));
            if (mout) memset(mout + x0, 255, (size_t)(e - x0));
            break;
        default: {
            // Eight at a time; a step may run past e (never past the row): the runs after this one
            // write those pixels again.
            ptrdiff_t x = x0;
            // The rows below have their transition about here: ask for them now (a short run is
            // too short for the hardware prefetcher to find).
            if (R->prefetch_offset) {
                for (ptrdiff_t o = 3 * x0; o < 3 * e; o += 64) {
                    __builtin_prefetch(src + o + R->prefetch_offset);
                    __builtin_prefetch(bg + o + R->prefetch_offset);
                }
            }
            for (; x < e && x + 8 <= W; x += 8) BLEND8(R, x, line, src, bg, dst, mout);
            for (; x < e; x++) {
                const int32_t *t = R->taps;
                const float *tw = R->tap_weights;
                float v = tw[x] * line[t[x]] + tw[W + x] * line[t[W + x]] + tw[2 * W + x] * line[t[2 * W + x]] +
                          tw[3 * W + x] * line[t[3 * W + x]];
                v = v < 0 ? 0 : (v > 1 ? 1 : v);
                const unsigned mi = (unsigned)(int)(v * 256 + 0.5f);
                if (mout) mout[x] = (uint8_t)((mi * 255 + 128) >> 8);
                for (int ch = 0; ch < 3; ch++) {
                    const unsigned fg = src[3 * x + ch], bk = bg[3 * x + ch];
                    dst[3 * x + ch] = (uint8_t)((fg * mi + bk * (256 - mi) + 128) >> 8);
                }
            }
        }
        }
    }
}

void evn_backdrop_row_blend_portable(const evn_backdrop_row *row) { backdrop_row_body(row); }
EVN_AVX2 void evn_backdrop_row_blend_avx2(const evn_backdrop_row *row) { backdrop_row_body(row); }
void evn_backdrop_row_blend(const evn_backdrop_row *row) {
    if (evn_cpu_has_avx2()) evn_backdrop_row_blend_avx2(row);
    else evn_backdrop_row_blend_portable(row);
}
