// The 8-bit RGB cubic warp through a local field (RowSampler's cached path), eight output pixels
// a step with AVX2 (see evanesco_kernels.h). Lane by lane the same operations in the same order
// as the Swift loop it stands in for (four pixels a step): the same bits.
#include "evanesco_kernels.h"
#include "cubic_taps.h"

EVN_AVX2 ptrdiff_t evn_warp_cubic_rgb_field8_avx2(const evn_warp_rows *W, ptrdiff_t start, ptrdiff_t count, float *out, unsigned char *valid) {
    const float *pos = W->positions, *lut = W->lut, *block = W->block;
    const ptrdiff_t stride = W->stride, mask = W->mask, colBase = W->col_base, w = W->width, h = W->height;
    const v8i steps = { 0, 1, 2, 3, 4, 5, 6, 7 };
    const v8f zero = 0, full = 255;
    ptrdiff_t i = start;
    for (; i + 8 <= count; i += 8) {
        const v8f p0 = load8(pos + 2 * i), p1 = load8(pos + 2 * i + 8);
        const v8f xs = __builtin_shufflevector(p0, p1, 0, 2, 4, 6, 8, 10, 12, 14);
        const v8f ys = __builtin_shufflevector(p0, p1, 1, 3, 5, 7, 9, 11, 13, 15);
        const v8i qx = fixed8(xs), qy = fixed8(ys);
        const v8i cx = qx >> 7, ry = qy >> 7;
        const ptrdiff_t ix = cx[0], iy = ry[0];
        // Tap origins on consecutive columns of one row, every tap inside the frame.
        const v8i off = (cx - ix != steps) | (ry != (v8i)iy);
        if (!all8(off == 0) || ix < 1 || ix + 9 >= w || iy < 1 || iy + 2 >= h) break;
        const v8i phx = qx & 127, phy = qy & 127;
        v8f xa[4], xb[4], xc[4];
        for (int t = 0; t < 4; t++) spread8(lut, phx, t, &xa[t], &xb[t], &xc[t]);
        v8f va = 0, vb = 0, vc = 0, sa[4], sb[4], sc[4];
        for (int r = 0; r < 4; r++) {
            const float *q = block + ((iy - 1 + r) & mask) * stride + (ix - 1 - colBase) * 3;
            v8f ta[4], tb[4], tc[4];
            for (int t = 0; t < 4; t++) {
                ta[t] = load8(q + 3 * t) * xa[t];
                tb[t] = load8(q + 3 * t + 8) * xb[t];
                tc[t] = load8(q + 3 * t + 16) * xc[t];
            }
            v8f ya, yb, yc;
            spread8(lut, phy, r, &ya, &yb, &yc);
            sa[r] = ((ta[0] + ta[1]) + (ta[2] + ta[3])) * ya;
            sb[r] = ((tb[0] + tb[1]) + (tb[2] + tb[3])) * yb;
            sc[r] = ((tc[0] + tc[1]) + (tc[2] + tc[3])) * yc;
        }
        va = (sa[0] + sa[1]) + (sa[2] + sa[3]);
        vb = (sb[0] + sb[1]) + (sb[2] + sb[3]);
        vc = (sc[0] + sc[1]) + (sc[2] + sc[3]);
        // Clamped to 0...255 as the Swift loop does (below 0 first, then above 255).
        va = va < zero ? zero : va; va = va > full ? full : va;
        vb = vb < zero ? zero : vb; vb = vb > full ? full : vb;
        vc = vc < zero ? zero : vc; vc = vc > full ? full : vc;
        store8(va, out + 3 * i); store8(vb, out + 3 * i + 8); store8(vc, out + 3 * i + 16);
        memset(valid + i, 1, 8);
    }
    return i;
}

