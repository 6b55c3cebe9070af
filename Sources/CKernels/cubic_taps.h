// What the cubic warp kernels share (warp_cubic.c, warp_two_pass.c): RowSampler's fixed-point
// positions and the table's weights spread over interleaved RGB, for eight pixels and for four.
// Always inlined into the kernel bodies, so compiled with each variant's instruction set.
#ifndef EVANESCO_CUBIC_TAPS_H
#define EVANESCO_CUBIC_TAPS_H

#include "vectors.h"

// round(v * 128) for |v| < 16384, as integers, by the float bit trick: the source position in
// 1/128 px, `>> 7` the tap origin and `& 127` the table's row (the phase rounded to nearest; one
// that rounds up to 1 is phase 0 of the next pixel, the same weights). Eight lanes, and one value.
EVN_INLINE v8i fixed8(v8f v) {
    const v8f magic = 12582912.0f;
    return (v8i)(v * 128 + magic) - 0x4B400000;
}
EVN_INLINE int fixed1(float v) {
    const float s = v * 128 + 12582912.0f;
    int bits;
    memcpy(&bits, &s, sizeof bits);
    return bits - 0x4B400000;
}

// Weights of tap t of 8 pixels (phases ph, rows of the 129 x 4 table), spread over their RGB:
// the 24 floats of 8 interleaved pixels are 3 vectors, pixel p's channels in lanes 3p..3p+2.
// (Eight loads: AVX2's gather measured slower here, 5.9 against 5.0 ns a pixel.)
EVN_INLINE void spread8(const float *lut, v8i ph, int t, v8f *a, v8f *b, v8f *c) {
    const v8f w = {lut[ph[0] * 4 + t], lut[ph[1] * 4 + t], lut[ph[2] * 4 + t], lut[ph[3] * 4 + t],
                   lut[ph[4] * 4 + t], lut[ph[5] * 4 + t], lut[ph[6] * 4 + t], lut[ph[7] * 4 + t]};
    *a = __builtin_shufflevector(w, w, 0, 0, 0, 1, 1, 1, 2, 2);
    *b = __builtin_shufflevector(w, w, 2, 3, 3, 3, 4, 4, 4, 5);
    *c = __builtin_shufflevector(w, w, 5, 5, 6, 6, 6, 7, 7, 7);
}

// The same for 4 pixels (12 floats, 3 four-lane vectors).
EVN_INLINE void spread4(const float *lut, v4i ph, int t, v4f *a, v4f *b, v4f *c) {
    const float w0 = lut[ph[0] * 4 + t], w1 = lut[ph[1] * 4 + t], w2 = lut[ph[2] * 4 + t], w3 = lut[ph[3] * 4 + t];
    *a = (v4f){w0, w0, w0, w1};
    *b = (v4f){w1, w1, w2, w2};
    *c = (v4f){w2, w3, w3, w3};
}

EVN_INLINE v4i fixed4(v4f v) {
    const v4f magic = 12582912.0f;
    return (v4i)(v * 128 + magic) - 0x4B400000;
}

#define load4(p)                                                                                                       \
    ({                                                                                                                 \
        v4f v_;                                                                                                        \
        memcpy(&v_, (p), sizeof v_);                                                                                   \
        v_;                                                                                                            \
    })
#define store4(v, p)                                                                                                   \
    do {                                                                                                               \
        const v4f s_ = (v);                                                                                            \
        memcpy((p), &s_, sizeof s_);                                                                                   \
    } while (0)

// Below 0 to 0, then above 255 to 255, as RowSampler's per-pixel paths clamp (any lane count).
#define CLAMP255(v)                                                                                                    \
    do {                                                                                                               \
        const __typeof__(v) z_ = 0, f_ = 255;                                                                          \
        v = v < z_ ? z_ : v;                                                                                           \
        v = v > f_ ? f_ : v;                                                                                           \
    } while (0)

#endif
