// Registration's bilinear samples of a frame at template points mapped through a homography
// (see evanesco_kernels.h): eight points a step, then one at a time with the same arithmetic.
// One body, inlined into a portable and an AVX2 function, so both give the same values.
#include "evanesco_kernels.h"
#include "vectors.h"
#include <math.h>

EVN_INLINE void sample_points(const evn_sample_points *P, ptrdiff_t start, ptrdiff_t end, float *out) {
    const float *m = P->map, *src = P->image, *xs = P->x, *ys = P->y;
    const v8f m0 = m[0], m1 = m[1], m2 = m[2], m3 = m[3], m4 = m[4], m5 = m[5], m6 = m[6], m7 = m[7], m8 = m[8];
    const v8f maxX = P->max_x, maxY = P->max_y, zero = 0, one = 1;
    const ptrdiff_t iw = P->width;
    ptrdiff_t i = start;
    for (; i + 8 <= end; i += 8) {
        const v8f x = load8(xs + i), y = load8(ys + i);
        const v8f r = one / (m6 * x + m7 * y + m8);
        const v8f qx = (m0 * x + m1 * y + m2) * r, qy = (m3 * x + m4 * y + m5) * r;
        const v8i inside = (qx >= zero) & (qy >= zero) & (qx < maxX) & (qy < maxY);
        // Lanes outside take position 0 (their value is NaN below): every tap read is inside.
        const v8f cx = inside != 0 ? qx : zero, cy = inside != 0 ? qy : zero;
        const v8i ix = __builtin_convertvector(cx, v8i), iy = __builtin_convertvector(cy, v8i);
        const v8f ax = cx - __builtin_convertvector(ix, v8f), ay = cy - __builtin_convertvector(iy, v8f);
        v8f s00, s01, s10, s11;
        for (int k = 0; k < 8; k++) {
            const float *p = src + (ptrdiff_t)iy[k] * iw + ix[k];
            s00[k] = p[0];
            s01[k] = p[1];
            s10[k] = p[iw];
            s11[k] = p[iw + 1];
        }
        const v8f top = s00 + (s01 - s00) * ax, bot = s10 + (s11 - s10) * ax;
        const v8f v = top + (bot - top) * ay;
        const v8f result = inside != 0 ? v : (v8f)NAN;
        store8(result, out + i);
    }
    const float n0 = m[0], n1 = m[1], n2 = m[2], n3 = m[3], n4 = m[4], n5 = m[5], n6 = m[6], n7 = m[7], n8 = m[8];
    for (; i < end; i++) {
        const float x = xs[i], y = ys[i];
        const float r = 1 / (n6 * x + n7 * y + n8);
        const float qx = (n0 * x + n1 * y + n2) * r, qy = (n3 * x + n4 * y + n5) * r;
        if (!(qx >= 0 && qy >= 0 && qx < P->max_x && qy < P->max_y)) {
            out[i] = NAN;
            continue;
        }
        // Non-negative and inside the frame: truncation is the floor, and the four taps lie inside.
        const ptrdiff_t ix = (ptrdiff_t)qx, iy = (ptrdiff_t)qy;
        const float ax = qx - (float)ix, ay = qy - (float)iy;
        const float *p = src + iy * iw + ix;
        const float top = p[0] + (p[1] - p[0]) * ax, bot = p[iw] + (p[iw + 1] - p[iw]) * ax;
        out[i] = top + (bot - top) * ay;
    }
}

void evn_sample_points_portable(const evn_sample_points *P, ptrdiff_t start, ptrdiff_t end, float *out) {
    sample_points(P, start, end, out);
}

EVN_AVX2 void evn_sample_points_avx2(const evn_sample_points *P, ptrdiff_t start, ptrdiff_t end, float *out) {
    sample_points(P, start, end, out);
}

void evn_sample_points_run(const evn_sample_points *P, ptrdiff_t start, ptrdiff_t end, float *out) {
    if (evn_cpu_has_avx2()) evn_sample_points_avx2(P, start, end, out);
    else evn_sample_points_portable(P, start, end, out);
}
