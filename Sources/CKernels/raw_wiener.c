// The pairwise temporal Wiener merge of HDR+ (Hasinoff et al. 2016, eq. 6-7; Monod et al., IPOL
// 2021) on a raw burst's planes gathered at the reference's photosites (evanesco_raw.h): 16 x 16
// tiles overlapping by half, a raised-cosine window before the DFT, each frame's tile pulled
// towards the reference's where they differ by more than the noise. The four channels of a
// Bayer cell run in the four lanes of one vector: the same transforms, each with its own noise.
#include "evanesco_raw.h"
#include "evanesco_kernels.h"
#include "vectors.h"
#include <math.h>

typedef struct {
    v4f re, im;
} c4;

/// Two c4 side by side: two frame pairs' four channels in one 8-lane transform.
typedef struct {
    v8f re, im;
} c8;

static const int fft_rev[16] = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};
static const float fft_cos[8] = {1.0f, 0.92387953f,  0.70710678f,  0.38268343f,
                                 0.0f, -0.38268343f, -0.70710678f, -0.92387953f};
static const float fft_sin[8] = {0.0f,  -0.38268343f, -0.70710678f, -0.92387953f,
                                 -1.0f, -0.92387953f, -0.70710678f, -0.38268343f};

/// In-place radix-2 DFT of 16 points x[0], x[s], ..., x[15 s] (forward: e^{-2 pi i k n / 16}),
/// for a complex type T of any lane count: each lane sees the same operations in the same order.
#define FFT16(name, T)                                                                                                 \
    EVN_INLINE void name(T *x, int s) {                                                                                \
        T t[16];                                                                                                       \
        for (int i = 0; i < 16; i++) t[fft_rev[i]] = x[i * s];                                                         \
        _Pragma("clang loop unroll(full)") for (int len = 2; len <= 16; len <<= 1) {                                   \
            const int half = len >> 1, step = 16 / len;                                                                \
            _Pragma("clang loop unroll(full)") for (int i = 0; i < 16; i += len) {                                     \
                _Pragma("clang loop unroll(full)") for (int j = 0; j < half; j++) {                                    \
                    const int e = j * step;                                                                            \
                    const float wr = fft_cos[e], wi = fft_sin[e];                                                      \
                    T *a = &t[i + j], *b = &t[i + j + half];                                                           \
                    /* The twiddles 1 and -i without their products by 1 and 0 (the loops unroll, */                   \
                    /* so e is known): the same sums but for the sign of a zero. */                                    \
                    const __typeof__(a->re) br = e == 0 ? b->re : (e == 4 ? b->im : b->re * wr - b->im * wi);          \
                    const __typeof__(a->re) bi = e == 0 ? b->im : (e == 4 ? -b->re : b->re * wi + b->im * wr);         \
                    b->re = a->re - br;                                                                                \
                    b->im = a->im - bi;                                                                                \
                    a->re = a->re + br;                                                                                \
                    a->im = a->im + bi;                                                                                \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
        for (int i = 0; i < 16; i++) x[i * s] = t[i];                                                                  \
    }
FFT16(fft16x2, c8)

EVN_INLINE void fft2d_x2(c8 *tile) {
    for (int r = 0; r < 16; r++) fft16x2(tile + 16 * r, 1);
    for (int c = 0; c < 16; c++) fft16x2(tile + c, 16);
}

/// The inverse through the forward: conj(DFT(conj X)) / 256, two tiles at once.
EVN_INLINE void ifft2d_x2(c8 *tile) {
    for (int i = 0; i < 256; i++) tile[i].im = -tile[i].im;
    fft2d_x2(tile);
    for (int i = 0; i < 256; i++) {
        tile[i].re = tile[i].re * (1.0f / 256);
        tile[i].im = -tile[i].im * (1.0f / 256);
    }
}

EVN_INLINE float raised_cosine(int x) { return 0.5f - 0.5f * cosf(2 * 3.14159265358979f * (x + 0.5f) / 16); }

/// Two frames' coefficients `z` (four channels each) pulled towards the reference's `t`:
/// z + A (t - z), A = |t - z|^2 / (|t - z|^2 + noise), or with `subtract`, A = D / (D + noise),
/// D = max(0, |t - z|^2 - expected).
EVN_INLINE c8 pulled(c8 t, c8 z, v8f noise, v8f expected, int subtract) {
    const v8f dr = t.re - z.re, di = t.im - z.im;
    const v8f d2 = dr * dr + di * di;
    v8f pull;
    if (subtract) {
        const v8f excess = d2 - expected, zero = 0;
        const v8f d = excess > 0 ? excess : zero, sum = d + noise;
        pull = sum > 0 ? d / sum : zero;
    } else {
        pull = d2 / (d2 + noise);
    }
    return (c8){z.re + pull * dr, z.im + pull * di};
}

/// The coefficient (-u, -v) mod 16 of coefficient i = 16 u + v: for a real tile, i's conjugate.
EVN_INLINE int mirror(int i) { return ((16 - (i >> 4)) & 15) * 16 + ((16 - (i & 15)) & 15); }

EVN_INLINE void add_c4(c4 *acc, v4f re, v4f im) {
    acc->re += re;
    acc->im += im;
}

/// Where the band's row r lies among the 16 rows of `values` (``evn_raw_wiener_band_args``).
EVN_INLINE int band_row(const evn_raw_wiener_band_args *a, int r) { return (r + a->ring) & 15; }

/// The window's weights and their energy: the sum of w^2 over the tile, the variance of one DFT
/// coefficient of windowed white noise of variance 1 (36 for the 16 x 16 raised cosine).
typedef struct {
    float w[16], energy;
} tile_window;

EVN_INLINE tile_window window_of_tiles(void) {
    tile_window t;
    for (int i = 0; i < 16; i++) t.w[i] = raised_cosine(i);
    t.energy = 0;
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) t.energy += t.w[i] * t.w[i] * t.w[j] * t.w[j];
    return t;
}

/// Column tx + c of the band, clamped to the row.
EVN_INLINE int tile_column(int tx, int c, int w) { return tx + c < 0 ? 0 : (tx + c >= w ? w - 1 : tx + c); }

/// The reference's windowed tiles at columns tx (lanes 0-3) and tx + 8 (lanes 4-7, when `two`;
/// else 0), transformed, and each one's window-weighted level: two tiles in one 8-lane transform,
/// each lane with the same operations as a tile alone.
EVN_INLINE void reference_tiles(const evn_raw_wiener_band_args *a, const tile_window *win, int tx, int two, c8 *t0,
                                v8f *level) {
    const int w = a->width;
    const ptrdiff_t row = (ptrdiff_t)w * 4, frame = 16 * row;
    const float *ref = a->values + a->reference * frame;
    v8f sum = 0;
    float wsum = 0;
    for (int r = 0; r < 16; r++) {
        for (int c = 0; c < 16; c++) {
            v4f u, v = {0, 0, 0, 0};
            memcpy(&u, ref + band_row(a, r) * row + 4 * tile_column(tx, c, w), sizeof u);
            if (two) memcpy(&v, ref + band_row(a, r) * row + 4 * tile_column(tx + 8, c, w), sizeof v);
            const float ww = win->w[r] * win->w[c];
            const v8f both = __builtin_shufflevector(u, v, 0, 1, 2, 3, 4, 5, 6, 7) * ww;
            t0[16 * r + c].re = both;
            t0[16 * r + c].im = 0;
            sum += both;
            wsum += ww;
        }
    }
    *level = sum / wsum;
    fft2d_x2(t0);
}

/// One tile's merged spectrum `acc` (four channels) from its reference's spectrum `t0` (lanes 0-3
/// of `t0`, or 4-7 with `late`) and level: every other frame's tile transformed and pulled
/// towards the reference's, averaged with it.
EVN_INLINE void merged_tile(const evn_raw_wiener_band_args *a, const tile_window *win, int tx, const c8 *t0, int late,
                            v4f level, c4 *acc) {
    const int n = a->frames, w = a->width, ref = a->reference;
    const ptrdiff_t row = (ptrdiff_t)w * 4, frame = 16 * row;
    v4f noise, expected;
    for (int ch = 0; ch < 4; ch++) {
        const float s2 = a->slope[ch] * level[ch] + a->intercept[ch];
        noise[ch] = a->c * (s2 > 0 ? s2 : 0) * win->energy;
        expected[ch] = a->expected * (s2 > 0 ? s2 : 0) * win->energy;
    }
    // Every tile is real, so every spectrum here is Hermitian (the coefficient at the mirror
    // j of i is i's conjugate), and so is each pull: only one of each mirrored pair (and the
    // four that are their own mirrors) is computed, from i's coefficients; j's is its
    // conjugate, set once all frames are added.
    for (int i = 0; i < 256; i++) {
        acc[i].re = late ? t0[i].re.hi : t0[i].re.lo;
        acc[i].im = late ? t0[i].im.hi : t0[i].im.lo;
    }
    // The other frames two at a time: both tiles are real, so one complex transform of the
    // first + i x the second gives both (their spectra are the Hermitian and anti-Hermitian
    // parts).
    int others[n > 1 ? n - 1 : 1], m = 0;
    for (int k = 0; k < n; k++)
        if (k != ref) others[m++] = k;
    c8 z[256];
    // Two pairs at a time in the 8 lanes (the first pair in lanes 0-3, the second in 4-7),
    // their pulls added in the frames' order as one pair at a time would.
    for (int q = 0; q < m; q += 4) {
        int k[4];
        for (int e = 0; e < 4; e++) k[e] = q + e < m ? others[q + e] : -1;
        for (int r = 0; r < 16; r++) {
            const ptrdiff_t line = band_row(a, r) * row;
            for (int c = 0; c < 16; c++) {
                const ptrdiff_t at = line + 4 * tile_column(tx, c, w);
                const float ww = win->w[r] * win->w[c];
                // Frame k's gathered samples: where k does not cover a site, the reference's
                // (evn_raw_wiener_fill put them there), so that there the frame says what the
                // reference says.
                v4f lane[4];
                for (int e = 0; e < 4; e++) {
                    v4f v = {0, 0, 0, 0};
                    if (k[e] >= 0) {
                        memcpy(&v, a->values + k[e] * frame + at, sizeof v);
                        v *= ww;
                    }
                    lane[e] = v;
                }
                z[16 * r + c].re = __builtin_shufflevector(lane[0], lane[2], 0, 1, 2, 3, 4, 5, 6, 7);
                z[16 * r + c].im = __builtin_shufflevector(lane[1], lane[3], 0, 1, 2, 3, 4, 5, 6, 7);
            }
        }
        fft2d_x2(z);
        // Both pairs' pulls in the 8 lanes at once (the first frame of each pair, then the
        // second), added to the sum in the frames' order.
        const v8f noise8 = __builtin_shufflevector(noise, noise, 0, 1, 2, 3, 0, 1, 2, 3);
        const v8f expected8 = __builtin_shufflevector(expected, expected, 0, 1, 2, 3, 0, 1, 2, 3);
        const int subtract = a->expected > 0;
        for (int i = 0; i < 256; i++) {
            const int j = mirror(i);
            if (j < i) continue;
            const v4f tr = late ? t0[i].re.hi : t0[i].re.lo, ti = late ? t0[i].im.hi : t0[i].im.lo;
            const c8 t = {__builtin_shufflevector(tr, tr, 0, 1, 2, 3, 0, 1, 2, 3),
                          __builtin_shufflevector(ti, ti, 0, 1, 2, 3, 0, 1, 2, 3)};
            const c8 z1 = {(z[i].re + z[j].re) * 0.5f, (z[i].im - z[j].im) * 0.5f};
            const c8 z2 = {(z[i].im + z[j].im) * 0.5f, (z[j].re - z[i].re) * 0.5f};
            const c8 p1 = pulled(t, z1, noise8, expected8, subtract), p2 = pulled(t, z2, noise8, expected8, subtract);
            add_c4(&acc[i], p1.re.lo, p1.im.lo);
            if (k[1] >= 0) add_c4(&acc[i], p2.re.lo, p2.im.lo);
            if (k[2] >= 0) add_c4(&acc[i], p1.re.hi, p1.im.hi);
            if (k[3] >= 0) add_c4(&acc[i], p2.re.hi, p2.im.hi);
        }
    }
    for (int i = 0; i < 256; i++) {
        const int j = mirror(i);
        if (j < i) continue;
        acc[i].re = acc[i].re * (1.0f / n);
        acc[i].im = acc[i].im * (1.0f / n);
        acc[j] = (c4){acc[i].re, -acc[i].im};
    }
}

/// Overlap-adds the tile at column tx (lanes 0-3 of `tile`, or 4-7 with `late`) into the rows of
/// the band that the caller keeps, at the columns inside.
EVN_INLINE void add_tile(const evn_raw_wiener_band_args *a, int tx, const c8 *tile, int late) {
    const int w = a->width;
    const ptrdiff_t row = (ptrdiff_t)w * 4;
    for (int r = a->first_row; r < a->end_row; r++) {
        float *o = a->out + (ptrdiff_t)(r - a->first_row) * row;
        for (int c = 0; c < 16; c++) {
            const int x = tx + c;
            if (x < 0 || x >= w) continue;
            const v4f v = late ? tile[16 * r + c].re.hi : tile[16 * r + c].re.lo;
            for (int ch = 0; ch < 4; ch++) o[4 * x + ch] += v[ch];
        }
    }
}

/// Asks for the samples of columns x0 ..< x0 + 16 (those inside) of every frame's 16 rows, which
/// the next two tiles read: they come from memory while this pair's are transformed (each tile
/// reads 16 rows of a dozen frames, more streams than the hardware prefetcher follows).
EVN_INLINE void prefetch_columns(const evn_raw_wiener_band_args *a, int x0) {
    const int w = a->width;
    if (x0 >= w) return;
    const ptrdiff_t row = (ptrdiff_t)w * 4, frame = 16 * row;
    const int x1 = x0 + 16 < w ? x0 + 16 : w;
    for (int k = 0; k < a->frames; k++) {
        for (int r = 0; r < 16; r++) {
            const float *p = a->values + k * frame + r * row;
            for (int x = x0; x < x1; x += 4) __builtin_prefetch(p + 4 * x);
        }
    }
}

/// The band's tiles two at a time (columns tx and tx + 8): their reference tiles transformed
/// together, and their merged spectra transformed back together, in lanes 0-3 and 4-7.
EVN_INLINE void wiener_band(const evn_raw_wiener_band_args *a) {
    const int w = a->width;
    const tile_window win = window_of_tiles();
    c8 t0[256], tiles[256];
    c4 acc[256];
    for (int tx = -8; tx < w; tx += 16) {
        const int two = tx + 8 < w;
        prefetch_columns(a, tx + 24);
        v8f level;
        reference_tiles(a, &win, tx, two, t0, &level);
        for (int e = 0; e < 1 + two; e++) {
            merged_tile(a, &win, tx + 8 * e, t0, e, e ? level.hi : level.lo, acc);
            for (int i = 0; i < 256; i++) {
                if (e) {
                    tiles[i].re.hi = acc[i].re;
                    tiles[i].im.hi = acc[i].im;
                } else {
                    tiles[i].re = __builtin_shufflevector(acc[i].re, acc[i].re, 0, 1, 2, 3, 0, 1, 2, 3);
                    tiles[i].im = __builtin_shufflevector(acc[i].im, acc[i].im, 0, 1, 2, 3, 0, 1, 2, 3);
                }
            }
        }
        ifft2d_x2(tiles);
        add_tile(a, tx, tiles, 0);
        if (two) add_tile(a, tx + 8, tiles, 1);
    }
}

EVN_KERNEL_VARIANTS(void, evn_raw_wiener_band, raw_wiener_band, wiener_band, (const evn_raw_wiener_band_args *a), (a))

EVN_INLINE void wiener_fill(float *values, const float *weights, int32_t frames, int32_t reference, ptrdiff_t frame,
                            ptrdiff_t first, ptrdiff_t count) {
    const float *ref = values + reference * frame + first;
    for (int k = 0; k < frames; k++) {
        if (k == reference) continue;
        float *v = values + k * frame + first;
        const float *wt = weights + k * frame + first;
        for (ptrdiff_t i = 0; i < count; i++) v[i] = wt[i] > 0 ? v[i] : ref[i];
    }
}

EVN_KERNEL_VARIANTS(void, evn_raw_wiener_fill, raw_wiener_fill, wiener_fill,
                    (float *values, const float *weights, int32_t frames, int32_t reference, ptrdiff_t frame,
                     ptrdiff_t first, ptrdiff_t count),
                    (values, weights, frames, reference, frame, first, count))
