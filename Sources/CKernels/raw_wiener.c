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
FFT16(fft16, c4)
FFT16(fft16x2, c8)

EVN_INLINE void fft2d(c4 *tile) {
    for (int r = 0; r < 16; r++) fft16(tile + 16 * r, 1);
    for (int c = 0; c < 16; c++) fft16(tile + c, 16);
}

EVN_INLINE void fft2d_x2(c8 *tile) {
    for (int r = 0; r < 16; r++) fft16x2(tile + 16 * r, 1);
    for (int c = 0; c < 16; c++) fft16x2(tile + c, 16);
}

/// The inverse through the forward: conj(DFT(conj X)) / 256.
EVN_INLINE void ifft2d(c4 *tile) {
    for (int i = 0; i < 256; i++) tile[i].im = -tile[i].im;
    fft2d(tile);
    for (int i = 0; i < 256; i++) {
        tile[i].re = tile[i].re * (1.0f / 256);
        tile[i].im = -tile[i].im * (1.0f / 256);
    }
}

EVN_INLINE float raised_cosine(int x) { return 0.5f - 0.5f * cosf(2 * 3.14159265358979f * (x + 0.5f) / 16); }

/// Frame k's gathered sample at `at` (four channels): the reference's where k does not cover the
/// site (evn_raw_wiener_fill put it there), so that there the frame says what the reference says.
EVN_INLINE v4f frame_sample(const evn_raw_wiener_band_args *a, int k, ptrdiff_t frame, ptrdiff_t at) {
    v4f v;
    memcpy(&v, a->values + k * frame + at, sizeof v);
    return v;
}

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

EVN_INLINE void wiener_band(const evn_raw_wiener_band_args *a) {
    const int n = a->frames, w = a->width, ref = a->reference;
    const ptrdiff_t row = (ptrdiff_t)w * 4, frame = 16 * row;
    float win[16];
    for (int i = 0; i < 16; i++) win[i] = raised_cosine(i);
    // sum of w^2 over the tile: the variance of one DFT coefficient of windowed white noise of
    // variance 1 (36 for the 16 x 16 raised cosine).
    float energy = 0;
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) energy += win[i] * win[i] * win[j] * win[j];
    c4 t0[256], acc[256];
    c8 z[256];
    for (int tx = -8; tx < w; tx += 8) {
        // The reference's tile, its window-weighted level, and its noise per coefficient.
        v4f level = {0, 0, 0, 0};
        float wsum = 0;
        for (int r = 0; r < 16; r++) {
            for (int c = 0; c < 16; c++) {
                const int x = tx + c < 0 ? 0 : (tx + c >= w ? w - 1 : tx + c);
                v4f v;
                memcpy(&v, a->values + ref * frame + band_row(a, r) * row + 4 * x, sizeof v);
                const float ww = win[r] * win[c];
                t0[16 * r + c].re = v * ww;
                t0[16 * r + c].im = (v4f){0, 0, 0, 0};
                level += v * ww;
                wsum += ww;
            }
        }
        level /= wsum;
        v4f noise, expected;
        for (int ch = 0; ch < 4; ch++) {
            const float s2 = a->slope[ch] * level[ch] + a->intercept[ch];
            noise[ch] = a->c * (s2 > 0 ? s2 : 0) * energy;
            expected[ch] = a->expected * (s2 > 0 ? s2 : 0) * energy;
        }
        fft2d(t0);
        // Every tile is real, so every spectrum here is Hermitian (the coefficient at the mirror
        // j of i is i's conjugate), and so is each pull: only one of each mirrored pair (and the
        // four that are their own mirrors) is computed, from i's coefficients; j's is its
        // conjugate, set once all frames are added.
        for (int i = 0; i < 256; i++) acc[i] = t0[i];
        // The other frames two at a time: both tiles are real, so one complex transform of the
        // first + i x the second gives both (their spectra are the Hermitian and anti-Hermitian
        // parts).
        int others[n > 1 ? n - 1 : 1], m = 0;
        for (int k = 0; k < n; k++)
            if (k != ref) others[m++] = k;
        // Two pairs at a time in the 8 lanes (the first pair in lanes 0-3, the second in 4-7),
        // their pulls added in the frames' order as one pair at a time would.
        for (int q = 0; q < m; q += 4) {
            int k[4];
            for (int e = 0; e < 4; e++) k[e] = q + e < m ? others[q + e] : -1;
            for (int r = 0; r < 16; r++) {
                for (int c = 0; c < 16; c++) {
                    const int x = tx + c < 0 ? 0 : (tx + c >= w ? w - 1 : tx + c);
                    const ptrdiff_t at = band_row(a, r) * row + 4 * x;
                    const float ww = win[r] * win[c];
                    v4f lane[4];
                    for (int e = 0; e < 4; e++)
                        lane[e] = k[e] >= 0 ? frame_sample(a, k[e], frame, at) * ww : (v4f){0, 0, 0, 0};
                    z[16 * r + c].re =
                        (v8f){lane[0].x, lane[0].y, lane[0].z, lane[0].w, lane[2].x, lane[2].y, lane[2].z, lane[2].w};
                    z[16 * r + c].im =
                        (v8f){lane[1].x, lane[1].y, lane[1].z, lane[1].w, lane[3].x, lane[3].y, lane[3].z, lane[3].w};
                }
            }
            fft2d_x2(z);
            // Both pairs' pulls in the 8 lanes at once (the first frame of each pair, then the
            // second), added to the sum in the frames' order.
            const v8f noise8 = {noise.x, noise.y, noise.z, noise.w, noise.x, noise.y, noise.z, noise.w};
            const v8f expected8 = {expected.x, expected.y, expected.z, expected.w,
                                   expected.x, expected.y, expected.z, expected.w};
            const int subtract = a->expected > 0;
            for (int i = 0; i < 256; i++) {
                const int j = mirror(i);
                if (j < i) continue;
                const c8 t = {
                    {t0[i].re.x, t0[i].re.y, t0[i].re.z, t0[i].re.w, t0[i].re.x, t0[i].re.y, t0[i].re.z, t0[i].re.w},
                    {t0[i].im.x, t0[i].im.y, t0[i].im.z, t0[i].im.w, t0[i].im.x, t0[i].im.y, t0[i].im.z, t0[i].im.w}};
                const c8 z1 = {(z[i].re + z[j].re) * 0.5f, (z[i].im - z[j].im) * 0.5f};
                const c8 z2 = {(z[i].im + z[j].im) * 0.5f, (z[j].re - z[i].re) * 0.5f};
                const c8 p1 = pulled(t, z1, noise8, expected8, subtract),
                         p2 = pulled(t, z2, noise8, expected8, subtract);
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
        ifft2d(acc);
        // Overlap-add the rows of this band that the caller keeps, at the columns inside.
        for (int r = a->first_row; r < a->end_row; r++) {
            float *o = a->out + (ptrdiff_t)(r - a->first_row) * row;
            for (int c = 0; c < 16; c++) {
                const int x = tx + c;
                if (x < 0 || x >= w) continue;
                const v4f v = acc[16 * r + c].re;
                for (int ch = 0; ch < 4; ch++) o[4 * x + ch] += v[ch];
            }
        }
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
