// The pairwise temporal Wiener merge of HDR+ (Hasinoff et al. 2016, eq. 6-7; Monod et al., IPOL
// 2021) on a raw burst's planes gathered at the reference's photosites (evanesco_raw.h): 16 x 16
// tiles overlapping by half, a raised-cosine window before the DFT, each frame's tile pulled
// towards the reference's where they differ by more than the noise. The four channels of a
// Bayer cell run in the four lanes of one vector: the same transforms, each with its own noise.
#include "evanesco_raw.h"
#include "vectors.h"
#include <math.h>

typedef struct {
    v4f re, im;
} c4;

/// In-place radix-2 DFT of 16 points x[0], x[s], ..., x[15 s] (forward: e^{-2 pi i k n / 16}).
static void fft16(c4 *x, int s) {
    static const int rev[16] = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};
    static const float cs[8] = {1.0f, 0.92387953f,  0.70710678f,  0.38268343f,
                                0.0f, -0.38268343f, -0.70710678f, -0.92387953f};
    static const float sn[8] = {0.0f,  -0.38268343f, -0.70710678f, -0.92387953f,
                                -1.0f, -0.92387953f, -0.70710678f, -0.38268343f};
    c4 t[16];
    for (int i = 0; i < 16; i++) t[rev[i]] = x[i * s];
    for (int len = 2; len <= 16; len <<= 1) {
        const int half = len >> 1, step = 16 / len;
        for (int i = 0; i < 16; i += len) {
            for (int j = 0; j < half; j++) {
                const float wr = cs[j * step], wi = sn[j * step];
                c4 *a = &t[i + j], *b = &t[i + j + half];
                const v4f br = b->re * wr - b->im * wi, bi = b->re * wi + b->im * wr;
                b->re = a->re - br;
                b->im = a->im - bi;
                a->re = a->re + br;
                a->im = a->im + bi;
            }
        }
    }
    for (int i = 0; i < 16; i++) x[i * s] = t[i];
}

static void fft2d(c4 *tile) {
    for (int r = 0; r < 16; r++) fft16(tile + 16 * r, 1);
    for (int c = 0; c < 16; c++) fft16(tile + c, 16);
}

/// The inverse through the forward: conj(DFT(conj X)) / 256.
static void ifft2d(c4 *tile) {
    for (int i = 0; i < 256; i++) tile[i].im = -tile[i].im;
    fft2d(tile);
    for (int i = 0; i < 256; i++) {
        tile[i].re = tile[i].re * (1.0f / 256);
        tile[i].im = -tile[i].im * (1.0f / 256);
    }
}

static inline float raised_cosine(int x) { return 0.5f - 0.5f * cosf(2 * 3.14159265358979f * (x + 0.5f) / 16); }

/// Frame k's gathered sample at `at` (four channels), or the reference's where k does not cover
/// the site: there the frame says what the reference says.
static inline v4f covered_or_reference(const evn_raw_wiener_band_args *a, int k, ptrdiff_t frame, ptrdiff_t at) {
    v4f v, wt, vr;
    memcpy(&v, a->values + k * frame + at, sizeof v);
    memcpy(&wt, a->weights + k * frame + at, sizeof wt);
    memcpy(&vr, a->values + a->reference * frame + at, sizeof vr);
    return wt > 0 ? v : vr;
}

/// Adds to `acc` the frame's coefficient `z` pulled towards the reference's `t`:
/// z + A (t - z), A = |t - z|^2 / (|t - z|^2 + noise).
static inline void pull_towards(c4 *acc, c4 t, c4 z, v4f noise) {
    const v4f dr = t.re - z.re, di = t.im - z.im;
    const v4f d2 = dr * dr + di * di;
    const v4f pull = d2 / (d2 + noise);
    acc->re += z.re + pull * dr;
    acc->im += z.im + pull * di;
}

void evn_raw_wiener_band(const evn_raw_wiener_band_args *a) {
    const int n = a->frames, w = a->width, ref = a->reference;
    const ptrdiff_t row = (ptrdiff_t)w * 4, frame = 16 * row;
    float win[16];
    for (int i = 0; i < 16; i++) win[i] = raised_cosine(i);
    // sum of w^2 over the tile: the variance of one DFT coefficient of windowed white noise of
    // variance 1 (36 for the 16 x 16 raised cosine).
    float energy = 0;
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) energy += win[i] * win[i] * win[j] * win[j];
    c4 t0[256], z[256], acc[256];
    for (int tx = -8; tx < w; tx += 8) {
        // The reference's tile, its window-weighted level, and its noise per coefficient.
        v4f level = {0, 0, 0, 0};
        float wsum = 0;
        for (int r = 0; r < 16; r++) {
            for (int c = 0; c < 16; c++) {
                const int x = tx + c < 0 ? 0 : (tx + c >= w ? w - 1 : tx + c);
                v4f v;
                memcpy(&v, a->values + ref * frame + r * row + 4 * x, sizeof v);
                const float ww = win[r] * win[c];
                t0[16 * r + c].re = v * ww;
                t0[16 * r + c].im = (v4f){0, 0, 0, 0};
                level += v * ww;
                wsum += ww;
            }
        }
        level /= wsum;
        v4f noise;
        for (int ch = 0; ch < 4; ch++) {
            const float s2 = a->slope[ch] * level[ch] + a->intercept[ch];
            noise[ch] = a->c * (s2 > 0 ? s2 : 0) * energy;
        }
        fft2d(t0);
        for (int i = 0; i < 256; i++) acc[i] = t0[i];
        // The other frames two at a time: both tiles are real, so one complex transform of the
        // first + i x the second gives both (their spectra are the Hermitian and anti-Hermitian
        // parts).
        int others[n > 1 ? n - 1 : 1], m = 0;
        for (int k = 0; k < n; k++)
            if (k != ref) others[m++] = k;
        for (int q = 0; q < m; q += 2) {
            const int k1 = others[q], k2 = q + 1 < m ? others[q + 1] : -1;
            for (int r = 0; r < 16; r++) {
                for (int c = 0; c < 16; c++) {
                    const int x = tx + c < 0 ? 0 : (tx + c >= w ? w - 1 : tx + c);
                    const ptrdiff_t at = r * row + 4 * x;
                    const float ww = win[r] * win[c];
                    z[16 * r + c].re = covered_or_reference(a, k1, frame, at) * ww;
                    z[16 * r + c].im = k2 >= 0 ? covered_or_reference(a, k2, frame, at) * ww : (v4f){0, 0, 0, 0};
                }
            }
            fft2d(z);
            for (int i = 0; i < 256; i++) {
                const int j = ((16 - (i >> 4)) & 15) * 16 + ((16 - (i & 15)) & 15);
                const c4 z1 = {(z[i].re + z[j].re) * 0.5f, (z[i].im - z[j].im) * 0.5f};
                pull_towards(&acc[i], t0[i], z1, noise);
                if (k2 >= 0) {
                    const c4 z2 = {(z[i].im + z[j].im) * 0.5f, (z[j].re - z[i].re) * 0.5f};
                    pull_towards(&acc[i], t0[i], z2, noise);
                }
            }
        }
        for (int i = 0; i < 256; i++) {
            acc[i].re = acc[i].re * (1.0f / n);
            acc[i].im = acc[i].im * (1.0f / n);
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
