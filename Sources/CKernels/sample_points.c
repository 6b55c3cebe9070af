// Registration's bilinear samples of a frame at template points mapped through a homography,
// eight points a step with AVX2 (see evanesco_kernels.h): lane by lane the Swift loop's
// arithmetic, so the same values.
#include "evanesco_kernels.h"
#include "vectors.h"
#include <math.h>

EVN_AVX2 void evn_sample_points_avx2(const evn_sample_points *P, ptrdiff_t start, ptrdiff_t end, float *out) {
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
            s00[k] = p[0]; s01[k] = p[1]; s10[k] = p[iw]; s11[k] = p[iw + 1];
        }
        const v8f top = s00 + (s01 - s00) * ax, bot = s10 + (s11 - s10) * ax;
        const v8f v = top + (bot - top) * ay;
        const v8f result = inside != 0 ? v : (v8f)NAN;
        store8(result, out + i);
    }
}

