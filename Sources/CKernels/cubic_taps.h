// What the cubic warp kernels share (warp_cubic.c, warp_two_pass.c): RowSampler's fixed-point
// positions and the table's weights spread over interleaved RGB.
#ifndef EVANESCO_CUBIC_TAPS_H
#define EVANESCO_CUBIC_TAPS_H

#include "vectors.h"

// round(v * 128) as integers, by the float bit trick (RowSampler's Quad.fixed): the source
// position in 1/128 px, `>> 7` the tap origin and `& 127` the table's row. Eight lanes, and one value.
EVN_AVX2_INLINE v8i fixed8(v8f v) {
    const v8f magic = 12582912.0f;
    return (v8i)(v * 128 + magic) - 0x4B400000;
}
EVN_AVX2_INLINE int fixed1(float v) {
    const float s = v * 128 + 12582912.0f;
    int bits;
    memcpy(&bits, &s, sizeof bits);
    return bits - 0x4B400000;
}

// Weights of tap t of 8 pixels (phases ph, rows of the 129 x 4 table), spread over their RGB:
// the 24 floats of 8 interleaved pixels are 3 vectors, pixel p's channels in lanes 3p..3p+2.
// (Eight loads: AVX2's gather measured slower here, 5.9 against 5.0 ns a pixel.)
EVN_AVX2_INLINE void spread8(const float *lut, v8i ph, int t, v8f *a, v8f *b, v8f *c) {
    const v8f w = { lut[ph[0] * 4 + t], lut[ph[1] * 4 + t], lut[ph[2] * 4 + t], lut[ph[3] * 4 + t],
                    lut[ph[4] * 4 + t], lut[ph[5] * 4 + t], lut[ph[6] * 4 + t], lut[ph[7] * 4 + t] };
    *a = __builtin_shufflevector(w, w, 0, 0, 0, 1, 1, 1, 2, 2);
    *b = __builtin_shufflevector(w, w, 2, 3, 3, 3, 4, 4, 4, 5);
    *c = __builtin_shufflevector(w, w, 5, 5, 6, 6, 6, 7, 7, 7);
}

#endif
