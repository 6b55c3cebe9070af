// The two passes of the separable 8-bit RGB cubic warp (RowSampler's rowCubicRGB8TwoPass and its
// Cache.preparePass) over one knot interval, in groups of four output pixels: eight a step where
// two groups qualify together, four where one does (see evanesco_kernels.h). One body, included by
// two translation units: warp_two_pass.c compiles it as it is (the portable variants),
// warp_two_pass_avx2.c with every function for AVX2 and EVN_WARP_PERMUTE (the AVX2 variants, which
// permute a group's weights where the portable ones load them one by one). Both take the same
// decisions and, lane by lane, do the same operations in the same order on the same table
// entries, so the same bits. A group that does not qualify is the caller's (RowSampler samples its
// pixels one by one).
#ifndef EVANESCO_WARP_TWO_PASS_H
#define EVANESCO_WARP_TWO_PASS_H

#include "evanesco_kernels.h"
#include "cubic_taps.h"

#ifndef EVN_WARP_PERMUTE
#define EVN_WARP_PERMUTE 0
#endif

// Four taps of 8 pixels' interleaved RGB (3 vectors: a, b, c) summed in pairs: tap t of vector
// v reads q[t] + 8v and is weighted by w[t] spread over the vector's lanes. With one phase the
// weights are broadcasts, else each lane's pixel's (spread8).
#define SUM8(q, wa, wb, wc, a, b, c)                                                                                   \
    do {                                                                                                               \
        a = (load8((q)[0]) * wa[0] + load8((q)[1]) * wa[1]) + (load8((q)[2]) * wa[2] + load8((q)[3]) * wa[3]);         \
        b = (load8((q)[0] + 8) * wb[0] + load8((q)[1] + 8) * wb[1]) +                                                  \
            (load8((q)[2] + 8) * wb[2] + load8((q)[3] + 8) * wb[3]);                                                   \
        c = (load8((q)[0] + 16) * wc[0] + load8((q)[1] + 16) * wc[1]) +                                                \
            (load8((q)[2] + 16) * wc[2] + load8((q)[3] + 16) * wc[3]);                                                 \
    } while (0)

// With EVN_WARP_PERMUTE (the AVX2 translation unit): the weights of 8 pixels whose phases lie
// within 8 of one another (along a pass they change slowly, by the map's scale and shear: a
// hand-held frame's groups span 1-4), spread over their RGB as spread8 spreads them, by permuting
// each tap's run of 8 phases in the table's by-tap half (one load and three permutes a tap instead
// of eight scalar loads and three shuffles). The same table entries, so the same bits. False (and
// nothing written) where the phases lie further apart, or without EVN_WARP_PERMUTE.
EVN_INLINE int few_phases8(const float *lut, v8i ph, v8f wa[4], v8f wb[4], v8f wc[4]) {
#if EVN_WARP_PERMUTE
    const int lo = ph[0] < ph[7] ? ph[0] : ph[7], hi = ph[0] < ph[7] ? ph[7] : ph[0];
    if (hi - lo > 7) return 0;
    const v8i d = ph - lo;
    const v8i da = __builtin_shufflevector(d, d, 0, 0, 0, 1, 1, 1, 2, 2);
    const v8i db = __builtin_shufflevector(d, d, 2, 3, 3, 3, 4, 4, 4, 5);
    const v8i dc = __builtin_shufflevector(d, d, 5, 5, 6, 6, 6, 7, 7, 7);
    const float *by_tap = lut + EVN_CUBIC_LUT_ROWS * 4 + lo;
    for (int t = 0; t < 4; t++) {
        const v8f run = load8(by_tap + t * EVN_CUBIC_LUT_BY_TAP);
        wa[t] = (v8f)__builtin_ia32_permvarsf256(run, da);
        wb[t] = (v8f)__builtin_ia32_permvarsf256(run, db);
        wc[t] = (v8f)__builtin_ia32_permvarsf256(run, dc);
    }
    return 1;
#else
    (void)lut, (void)ph, (void)wa, (void)wb, (void)wc;
    return 0;
#endif
}

// SUM8 with the weights of 8 pixels of phases ph: with one phase (positions along a pass are
// monotonic, so the first and last sharing it means all do: on a map close to a translation,
// most often) broadcasts of its weights, else few_phases8's (AVX2) or spread8's. The same values
// every way.
#define WEIGHTED8(lut, ph, q, a, b, c)                                                                                 \
    do {                                                                                                               \
        if (ph[0] == ph[7]) {                                                                                          \
            v8f w_[4];                                                                                                 \
            for (int t_ = 0; t_ < 4; t_++) w_[t_] = (v8f)lut[ph[0] * 4 + t_];                                          \
            SUM8(q, w_, w_, w_, a, b, c);                                                                              \
        } else {                                                                                                       \
            v8f wa_[4], wb_[4], wc_[4];                                                                                \
            if (!few_phases8(lut, ph, wa_, wb_, wc_)) {                                                                \
                for (int t_ = 0; t_ < 4; t_++) spread8(lut, ph, t_, &wa_[t_], &wb_[t_], &wc_[t_]);                     \
            }                                                                                                          \
            SUM8(q, wa_, wb_, wc_, a, b, c);                                                                           \
        }                                                                                                              \
    } while (0)

// Four pixels (one group) by the per-lane weights of their positions s0 + slope * (g + lane):
// tap t of vector v reads q[t] + 4v. The four-lane half of WEIGHTED8: the same bits.
EVN_INLINE void sum4(const float *lut, float s0, float slope, ptrdiff_t g, const float *const q[4], v4f *a, v4f *b,
                     v4f *c) {
    const v4f l4 = {0, 1, 2, 3};
    const v4i ph = fixed4((v4f)s0 + slope * ((v4f)(float)g + l4)) & 127;
    v4f ta[4], tb[4], tc[4];
    for (int t = 0; t < 4; t++) {
        v4f wa, wb, wc;
        spread4(lut, ph, t, &wa, &wb, &wc);
        ta[t] = load4(q[t]) * wa;
        tb[t] = load4(q[t] + 4) * wb;
        tc[t] = load4(q[t] + 8) * wc;
    }
    *a = (ta[0] + ta[1]) + (ta[2] + ta[3]);
    *b = (tb[0] + tb[1]) + (tb[2] + tb[3]);
    *c = (tc[0] + tc[1]) + (tc[2] + tc[3]);
}

EVN_INLINE ptrdiff_t horizontal_pass(const evn_warp_pass *P, ptrdiff_t g, ptrdiff_t n) {
    const float *row = P->source, *lut = P->lut;
    float *out = P->out + 3 * P->base;
    const float s0 = P->s0, drift = P->slope;
    const ptrdiff_t lo = P->lo, hi = P->hi;
    const v8f lanes = {0, 1, 2, 3, 4, 5, 6, 7};
    while (g + 4 <= n) {
        // Group g (four pixels): tap origins on consecutive columns, every tap present.
        const int e0 = fixed1(s0 + drift * (float)g), e3 = fixed1(s0 + drift * (float)(g + 3));
        const ptrdiff_t first = (ptrdiff_t)(e0 >> 7) + g - 1;
        if ((e3 >> 7) != (e0 >> 7) || first < lo || first + 6 > hi) return g;
        int eight = 0;
        if (g + 8 <= n) {
            const int f0 = fixed1(s0 + drift * (float)(g + 4)), f3 = fixed1(s0 + drift * (float)(g + 7));
            const ptrdiff_t next = (ptrdiff_t)(f0 >> 7) + g + 3;
            // The next group qualifies too, its taps 4 columns on from these.
            eight = (f3 >> 7) == (f0 >> 7) && (f0 >> 7) == (e0 >> 7) && next + 6 <= hi;
        }
        const float *p = row + (first - lo) * 3;
        const float *q[4] = {p, p + 3, p + 6, p + 9};
        if (eight) {
            const v8i ph = fixed8((v8f)s0 + drift * ((v8f)(float)g + lanes)) & 127;
            v8f a, b, c;
            WEIGHTED8(lut, ph, q, a, b, c);
            store8(a, out + 3 * g);
            store8(b, out + 3 * g + 8);
            store8(c, out + 3 * g + 16);
            g += 8;
        } else {
            v4f a, b, c;
            sum4(lut, s0, drift, g, q, &a, &b, &c);
            store4(a, out + 3 * g);
            store4(b, out + 3 * g + 4);
            store4(c, out + 3 * g + 8);
            g += 4;
        }
    }
    return g;
}

EVN_INLINE ptrdiff_t vertical_pass(const evn_warp_pass *P, ptrdiff_t g, ptrdiff_t n) {
    const float *rows = P->source, *lut = P->lut;
    float *out = P->out + 3 * P->base;
    unsigned char *valid = P->valid + P->base;
    const float s0 = P->s0, slope = P->slope;
    const ptrdiff_t lo = P->lo, hi = P->hi, stride = P->stride, mask = P->mask;
    const v8f lanes = {0, 1, 2, 3, 4, 5, 6, 7};
    while (g + 4 <= n) {
        // Group g: all four on one row of taps, every tap row held.
        const int q0 = fixed1(s0 + slope * (float)g), q3 = fixed1(s0 + slope * (float)(g + 3));
        const ptrdiff_t r = q0 >> 7;
        if ((q3 >> 7) != (q0 >> 7) || r - 1 < lo || r + 2 > hi) return g;
        int eight = 0;
        if (g + 8 <= n) {
            const int f0 = fixed1(s0 + slope * (float)(g + 4)), f3 = fixed1(s0 + slope * (float)(g + 7));
            eight = (f3 >> 7) == (f0 >> 7) && (f0 >> 7) == (q0 >> 7);
        }
        const float *p[4];
        for (int k = 0; k < 4; k++) p[k] = rows + ((r - 1 + k) & mask) * stride + 3 * (P->base + g);
        if (eight) {
            const v8i ph = fixed8((v8f)s0 + slope * ((v8f)(float)g + lanes)) & 127;
            v8f a, b, c;
            WEIGHTED8(lut, ph, p, a, b, c);
            CLAMP255(a);
            CLAMP255(b);
            CLAMP255(c);
            store8(a, out + 3 * g);
            store8(b, out + 3 * g + 8);
            store8(c, out + 3 * g + 16);
            memset(valid + g, 1, 8);
            g += 8;
        } else {
            v4f a, b, c;
            sum4(lut, s0, slope, g, p, &a, &b, &c);
            CLAMP255(a);
            CLAMP255(b);
            CLAMP255(c);
            store4(a, out + 3 * g);
            store4(b, out + 3 * g + 4);
            store4(c, out + 3 * g + 8);
            memset(valid + g, 1, 4);
            g += 4;
        }
    }
    return g;
}

#endif
