// Source positions of an output row segment warped through a homography and a local field (the
// 8-bit RGB cubic warp's first step, see evanesco_kernels.h). One body, inlined into a portable and
// an AVX2 function: each lane does the same arithmetic in the same order, so the same values.
#include "evanesco_kernels.h"
#include "vectors.h"

EVN_INLINE int field_positions(const evn_field_positions *F, ptrdiff_t x0, ptrdiff_t count, float *pos, float *bounds) {
    const ptrdiff_t cols = F->columns, rows = F->rows, c = F->cell;
    const float cell = (float)c;
    // The field's rows either side of output row y, and the weight between them (the field's
    // bilinear interpolation between cell centres, clamped at the border).
    float fy = ((float)F->y + 0.5f) / cell - 0.5f;
    fy = fy < 0 ? 0 : fy > (float)(rows - 1) ? (float)(rows - 1) : fy;
    const ptrdiff_t r0 = (ptrdiff_t)fy, r1 = r0 + 1 < rows ? r0 + 1 : rows - 1;
    const float ty = fy - (float)r0;
    const float *ax = F->dx + r0 * cols, *bx = F->dx + r1 * cols, *ay = F->dy + r0 * cols, *by = F->dy + r1 * cols;
    const float m0 = F->m[0], m1 = F->m[1], m2 = F->m[2], m3 = F->m[3], m4 = F->m[4], m5 = F->m[5];
    const float m6 = F->m[6], m7 = F->m[7], m8 = F->m[8];
    const v8f lanes = {0, 1, 2, 3, 4, 5, 6, 7};
    const v8f inf = (v8f)__builtin_inff();
    v8f lox = inf, loy = inf, hix = -inf, hiy = -inf;
    v8i ok = (v8i)-1;
    // The run of pixels between centre k and centre k + 1 (k = -1: before the first centre,
    // k = cols - 1: after the last; the field is constant there). Centre k is at output pixel
    // k c + (c - 1) / 2, so the run of k starts at pixel k c + c / 2 (integer division).
    ptrdiff_t k = x0 < c / 2 ? -1 : (x0 - c / 2) / c;
    if (k > cols - 1) k = cols - 1;
    ptrdiff_t i = 0;
    while (i < count) {
        const ptrdiff_t x = x0 + i;
        const ptrdiff_t next = k < cols - 1 ? (k + 1) * c + c / 2 : x0 + count;
        const ptrdiff_t k0 = k < 0 ? 0 : k, k1 = k < 0 ? 0 : k + 1 < cols ? k + 1 : cols - 1;
        const float ux = ax[k0] + (bx[k0] - ax[k0]) * ty, vx = ax[k1] + (bx[k1] - ax[k1]) * ty;
        const float uy = ay[k0] + (by[k0] - ay[k0]) * ty, vy = ay[k1] + (by[k1] - ay[k1]) * ty;
        ptrdiff_t end = next < x0 + count ? next : x0 + count;
        for (ptrdiff_t xs = x; xs < end; xs += 8) {
            const ptrdiff_t n = end - xs < 8 ? end - xs : 8, at = xs - x0;
            const v8f fx = (v8f)(float)xs + lanes;
            v8f t = (fx + 0.5f) / cell - 0.5f - (float)k0;
            t = t < 0 ? 0 : t;
            t = t > 1 ? 1 : t;
            const v8f ox = ux + (vx - ux) * t, oy = uy + (vy - uy) * t;
            const v8f nx = m0 * fx + m2 + (m0 * ox + m1 * oy);
            const v8f ny = m3 * fx + m5 + (m3 * ox + m4 * oy);
            const v8f d = m6 * fx + m8 + (m6 * ox + m7 * oy);
            const v8f px = nx / d, py = ny / d;
            // Lanes past the run take no part; a NaN fails every test, so it clears ok.
            const v8i in = __builtin_convertvector(lanes, v8i) < (int)n;
            const v8f ax_ = __builtin_elementwise_abs(px), ay_ = __builtin_elementwise_abs(py);
            ok &= ~in | ((d > 1e-12f) & (ax_ < 1e30f) & (ay_ < 1e30f));
            lox = in ? __builtin_elementwise_min(lox, px) : lox;
            hix = in ? __builtin_elementwise_max(hix, px) : hix;
            loy = in ? __builtin_elementwise_min(loy, py) : loy;
            hiy = in ? __builtin_elementwise_max(hiy, py) : hiy;
            // Interleaved x, y: 16 floats (the caller's buffer holds 16 past the segment).
            store8(__builtin_shufflevector(px, py, 0, 8, 1, 9, 2, 10, 3, 11), pos + 2 * at);
            store8(__builtin_shufflevector(px, py, 4, 12, 5, 13, 6, 14, 7, 15), pos + 2 * at + 8);
        }
        i = end - x0;
        k++;
    }
    for (int j = 0; j < 8; j++)
        if (!ok[j]) return 0;
    float b[4] = {lox[0], loy[0], hix[0], hiy[0]};
    for (int j = 1; j < 8; j++) {
        b[0] = lox[j] < b[0] ? lox[j] : b[0];
        b[1] = loy[j] < b[1] ? loy[j] : b[1];
        b[2] = hix[j] > b[2] ? hix[j] : b[2];
        b[3] = hiy[j] > b[3] ? hiy[j] : b[3];
    }
    memcpy(bounds, b, sizeof b);
    return 1;
}

EVN_KERNEL_VARIANTS(int, evn_field_positions_row, evn_field_positions_row, field_positions,
                    (const evn_field_positions *F, ptrdiff_t x0, ptrdiff_t count, float *pos, float *bounds),
                    (F, x0, count, pos, bounds))
