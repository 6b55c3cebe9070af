// One-channel bilinear warp of a Float plane along an output row (local alignment's planes),
// eight pixels a step with AVX2 (see evanesco_kernels.h): lane by lane the Swift loop's
// arithmetic, so the same values.
#include "evanesco_kernels.h"
#include "vectors.h"

EVN_AVX2 ptrdiff_t evn_bilinear_row_avx2(const evn_bilinear_row *R, ptrdiff_t start, ptrdiff_t count, float *out, unsigned char *valid) {
    const v8f lanes = { 0, 1, 2, 3, 4, 5, 6, 7 }, tiny = 1e-12f, zero = 0, one = 1;
    const v8f m0 = R->m0, m2 = R->m2, m3 = R->m3, m5 = R->m5, m6 = R->m6, m8 = R->m8;
    const ptrdiff_t w = R->width, h = R->height;
    const float *src = R->plane;
    ptrdiff_t i = start;
    for (; i + 8 <= count; i += 8) {
        const v8f fx = (v8f)(float)(R->x0 + i) + lanes;
        const v8f d = m6 * fx + m8;
        if (!all8(d > tiny)) break;
        const v8f px = (m0 * fx + m2) / d, py = (m3 * fx + m5) / d;
        const float fx0 = __builtin_floorf(px[0]), fy0 = __builtin_floorf(py[0]);
        // Eight consecutive columns of one pair of rows, all inside.
        if (!(fx0 >= 0 && fy0 >= 0 && fx0 + 8 < (float)w && fy0 + 1 < (float)h)) break;
        const v8f tx = px - ((v8f)fx0 + lanes), ty = py - (v8f)fy0;
        if (!all8((tx >= zero) & (tx < one) & (ty >= zero) & (ty < one))) break;
        const float *p = src + (ptrdiff_t)fy0 * w + (ptrdiff_t)fx0, *q = p + w;
        const v8f t0 = load8(p), t1 = load8(p + 1), b0 = load8(q), b1 = load8(q + 1);
        const v8f top = t0 + (t1 - t0) * tx, bottom = b0 + (b1 - b0) * tx;
        const v8f value = top + (bottom - top) * ty;
        store8(value, out + i);
        memset(valid + i, 1, 8);
    }
    return i;
}

