// The two passes of the separable 8-bit RGB cubic warp (RowSampler's rowCubicRGB8TwoPass and its
// Cache.preparePass) over one knot interval, in groups of four output pixels: eight a step where
// two groups qualify together, four where one does (see evanesco_kernels.h). One body each,
// inlined into a portable and an AVX2 function: the same decisions and, lane by lane, the same
// operations in the same order, so the same bits. A group that does not qualify is the caller's
// (RowSampler samples its pixels one by one).
#include "evanesco_kernels.h"
#include "cubic_taps.h"

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

// SUM8 with the weights of 8 pixels of phases ph: with one phase (positions along a pass are
// monotonic, so the first and last sharing it means all do: on a map close to a translation,
// most often) broadcasts of its weights, else spread8's. The same values either way.
#define WEIGHTED8(lut, ph, q, a, b, c)                                                                                 \
    do {                                                                                                               \
        if (ph[0] == ph[7]) {                                                                                          \
            v8f w_[4];                                                                                                 \
            for (int t_ = 0; t_ < 4; t_++) w_[t_] = (v8f)lut[ph[0] * 4 + t_];                                          \
            SUM8(q, w_, w_, w_, a, b, c);                                                                              \
        } else {                                                                                                       \
            v8f wa_[4], wb_[4], wc_[4];                                                                                \
            for (int t_ = 0; t_ < 4; t_++) spread8(lut, ph, t_, &wa_[t_], &wb_[t_], &wc_[t_]);                         \
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

EVN_KERNEL_VARIANTS(ptrdiff_t, evn_warp_horizontal_pass, evn_warp_horizontal_pass, horizontal_pass,
                    (const evn_warp_pass *P, ptrdiff_t g, ptrdiff_t n), (P, g, n))
EVN_KERNEL_VARIANTS(ptrdiff_t, evn_warp_vertical_pass, evn_warp_vertical_pass, vertical_pass,
                    (const evn_warp_pass *P, ptrdiff_t g, ptrdiff_t n), (P, g, n))
