// The 8-bit RGB cubic warp through a local field (RowSampler's cached path), in groups of four
// output pixels: eight a step where two groups qualify together, four where one does (see
// evanesco_kernels.h). One body, inlined into a portable and an AVX2 function: the same decisions
// and, lane by lane, the same operations in the same order, so the same bits. A group that does
// not qualify is the caller's (RowSampler samples its pixels one by one).
#include "evanesco_kernels.h"
#include "cubic_taps.h"

// Each source row's four taps weighted (tap t of vector v at q + 3t + lanes * v), summed in pairs,
// weighted by the row's weight; the four rows summed in pairs; clamped. For L = 8 or 4 lanes.
#define CUBIC_FIELD(L, spread, load, store, xs_ph, ys_ph)                                                              \
    do {                                                                                                               \
        v##L##f xa[4], xb[4], xc[4], sa[4], sb[4], sc[4];                                                              \
        for (int t = 0; t < 4; t++) spread(lut, xs_ph, t, &xa[t], &xb[t], &xc[t]);                                     \
        for (int r = 0; r < 4; r++) {                                                                                  \
            const float *q = block + ((iy - 1 + r) & mask) * stride + (ix - 1 - colBase) * 3;                          \
            v##L##f ta[4], tb[4], tc[4], ya, yb, yc;                                                                   \
            for (int t = 0; t < 4; t++) {                                                                              \
                ta[t] = load(q + 3 * t) * xa[t];                                                                       \
                tb[t] = load(q + 3 * t + L) * xb[t];                                                                   \
                tc[t] = load(q + 3 * t + 2 * L) * xc[t];                                                               \
            }                                                                                                          \
            spread(lut, ys_ph, r, &ya, &yb, &yc);                                                                      \
            sa[r] = ((ta[0] + ta[1]) + (ta[2] + ta[3])) * ya;                                                          \
            sb[r] = ((tb[0] + tb[1]) + (tb[2] + tb[3])) * yb;                                                          \
            sc[r] = ((tc[0] + tc[1]) + (tc[2] + tc[3])) * yc;                                                          \
        }                                                                                                              \
        v##L##f va = (sa[0] + sa[1]) + (sa[2] + sa[3]);                                                                \
        v##L##f vb = (sb[0] + sb[1]) + (sb[2] + sb[3]);                                                                \
        v##L##f vc = (sc[0] + sc[1]) + (sc[2] + sc[3]);                                                                \
        CLAMP255(va);                                                                                                  \
        CLAMP255(vb);                                                                                                  \
        CLAMP255(vc);                                                                                                  \
        store(va, out + 3 * i);                                                                                        \
        store(vb, out + 3 * i + L);                                                                                    \
        store(vc, out + 3 * i + 2 * L);                                                                                \
        memset(valid + i, 1, L);                                                                                       \
        i += L;                                                                                                        \
    } while (0)

// One pixel whose taps (origin column ix - 1, row iy - 1) are inside the frame, with weights wx
// and wy (rows of the table): each source row's four taps weighted and summed in pairs, the rows
// weighted and summed in pairs, clamped; the operations of CUBIC_FIELD, lane by lane, and of
// RowSampler's per-pixel path.
EVN_INLINE void cubic_pixel(const evn_warp_rows *W, ptrdiff_t ix, ptrdiff_t iy, const float *wx, const float *wy,
                            float *out) {
    v4f s[4];
    for (int r = 0; r < 4; r++) {
        const float *q = W->block + ((iy - 1 + r) & W->mask) * W->stride + (ix - 1 - W->col_base) * 3;
        const v4f t0 = load4(q) * wx[0], t1 = load4(q + 3) * wx[1], t2 = load4(q + 6) * wx[2],
                  t3 = load4(q + 9) * wx[3];
        s[r] = ((t0 + t1) + (t2 + t3)) * wy[r];
    }
    v4f v = (s[0] + s[1]) + (s[2] + s[3]);
    CLAMP255(v);
    out[0] = v[0];
    out[1] = v[1];
    out[2] = v[2];
}

EVN_INLINE ptrdiff_t warp_cubic_field(const evn_warp_rows *W, ptrdiff_t start, ptrdiff_t count, float *out,
                                      unsigned char *valid) {
    const float *pos = W->positions, *lut = W->lut, *block = W->block;
    const ptrdiff_t stride = W->stride, mask = W->mask, colBase = W->col_base, w = W->width, h = W->height;
    const v8i steps8 = {0, 1, 2, 3, 4, 5, 6, 7};
    const v4i steps4 = {0, 1, 2, 3};
    ptrdiff_t i = start;
    while (i + 4 <= count) {
        if (i + 8 <= count) {
            const v8f p0 = load8(pos + 2 * i), p1 = load8(pos + 2 * i + 8);
            const v8i qx = fixed8(__builtin_shufflevector(p0, p1, 0, 2, 4, 6, 8, 10, 12, 14));
            const v8i qy = fixed8(__builtin_shufflevector(p0, p1, 1, 3, 5, 7, 9, 11, 13, 15));
            const v8i cx = qx >> 7, ry = qy >> 7;
            const ptrdiff_t ix = cx[0], iy = ry[0];
            // Tap origins on consecutive columns of one row, every tap inside the frame.
            const v8i off = (cx - ix != steps8) | (ry != (v8i)iy);
            if (all8(off == 0) && ix >= 1 && ix + 9 < w && iy >= 1 && iy + 2 < h) {
                CUBIC_FIELD(8, spread8, load8, store8, qx & 127, qy & 127);
                continue;
            }
        }
        // The same test for four (the first half of the eight, or the last four of the segment).
        const v4f p0 = load4(pos + 2 * i), p1 = load4(pos + 2 * i + 4);
        const v4i qx = fixed4(__builtin_shufflevector(p0, p1, 0, 2, 4, 6));
        const v4i qy = fixed4(__builtin_shufflevector(p0, p1, 1, 3, 5, 7));
        const v4i cx = qx >> 7, ry = qy >> 7;
        const ptrdiff_t ix = cx[0], iy = ry[0];
        const v4i off = (cx - ix != steps4) | (ry != (v4i)iy);
        if (!(off[0] == 0 && off[1] == 0 && off[2] == 0 && off[3] == 0) || ix < 1 || ix + 5 >= w || iy < 1 ||
            iy + 2 >= h) {
            // Rows or columns differ within the group (the field bends there) or it nears an
            // edge: pixel by pixel while each one's taps are inside.
            const v4i px = qx & 127, py = qy & 127;
            for (int j = 0; j < 4; j++) {
                if (cx[j] < 1 || cx[j] + 2 >= w || ry[j] < 1 || ry[j] + 2 >= h) return i;
                cubic_pixel(W, cx[j], ry[j], lut + px[j] * 4, lut + py[j] * 4, out + 3 * i);
                valid[i] = 1;
                i++;
            }
            continue;
        }
        CUBIC_FIELD(4, spread4, load4, store4, qx & 127, qy & 127);
    }
    return i;
}

EVN_KERNEL_VARIANTS(ptrdiff_t, evn_warp_cubic_rgb_field, evn_warp_cubic_rgb_field, warp_cubic_field,
                    (const evn_warp_rows *W, ptrdiff_t start, ptrdiff_t count, float *out, unsigned char *valid),
                    (W, start, count, out, valid))
