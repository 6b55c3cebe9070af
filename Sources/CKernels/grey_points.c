// A frame's grey levels (the mean of its channels, bilinear) at output points mapped through a
// homography, for 8-bit frames of 1 to 4 channels (RowSampler.grey, which the depth sweep of
// ParallaxConsistency calls for every point it scores). Eight points a step: each tap's pixel is
// read as one 32-bit word and its channels taken from it. One body for the portable and AVX2
// variants (see evanesco_kernels.h); the arithmetic, operation by operation, is RowSampler.grey's
// for other sample types, so 8-bit frames give the same values as the same levels in 16 bits.
#include "evanesco_kernels.h"
#include "vectors.h"
#include <math.h>
#include <stdint.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "grey_points.c reads a pixel's channels from a little-endian word"
#endif

// Pixel `offset`'s bytes as a little-endian word; past the end of the frame, zero bytes.
EVN_INLINE uint32_t pixel_word(const unsigned char *image, ptrdiff_t offset, ptrdiff_t total) {
    uint32_t u = 0;
    if (offset + 4 <= total) memcpy(&u, image + offset, 4);
    else
        for (ptrdiff_t k = 0; offset + k < total; k++) u |= (uint32_t)image[offset + k] << (8 * k);
    return u;
}

EVN_INLINE void grey_points(const evn_grey_points *G, const float *points, ptrdiff_t count, float *out) {
    const ptrdiff_t w = G->width, h = G->height, ch = G->channels, total = w * h * ch;
    const float *m = G->map;
    const v8f m0 = m[0], m1 = m[1], m2 = m[2], m3 = m[3], m4 = m[4], m5 = m[5], m6 = m[6], m7 = m[7], m8 = m[8];
    const v8f maxX = (float)(w - 1), maxY = (float)(h - 1), zero = 0, one = 1, tiny = 1e-12f;
    const v8f scale = 1 / (float)ch;
    for (ptrdiff_t i = 0; i < count; i += 8) {
        const ptrdiff_t n = count - i < 8 ? count - i : 8;
        v8f p0 = 0, p1 = 0;
        // Eight (x, y) pairs; lanes past the end are the point (0, 0) and are not written.
        if (n == 8) {
            p0 = load8(points + 2 * i);
            p1 = load8(points + 2 * i + 8);
        } else {
            for (ptrdiff_t k = 0; k < 2 * n; k++) {
                if (k < 8) p0[k] = points[2 * i + k];
                else p1[k - 8] = points[2 * i + k];
            }
        }
        const v8f x = __builtin_shufflevector(p0, p1, 0, 2, 4, 6, 8, 10, 12, 14);
        const v8f y = __builtin_shufflevector(p0, p1, 1, 3, 5, 7, 9, 11, 13, 15);
        const v8f d = (m6 * x + m7 * y) + m8;
        const v8f sx = ((m0 * x + m1 * y) + m2) / d, sy = ((m3 * x + m4 * y) + m5) / d;
        const v8i inside = (d > tiny) & (sx >= zero) & (sy >= zero) & (sx <= maxX) & (sy <= maxY);
        // Lanes outside read pixel 0 (their value is NaN below).
        const v8f cx = inside != 0 ? sx : zero, cy = inside != 0 ? sy : zero;
        const v8i x0 = __builtin_convertvector(cx, v8i), y0 = __builtin_convertvector(cy, v8i);
        const v8f tx = cx - __builtin_convertvector(x0, v8f), ty = cy - __builtin_convertvector(y0, v8f);
        // The taps' words gathered in plain arrays, then loaded as vectors (a lane written into
        // a vector in memory, then the vector read, stalls on every lane).
        int32_t ta[8], tb[8], te[8], tf[8], cols[8], rows[8];
        memcpy(cols, &x0, sizeof cols);
        memcpy(rows, &y0, sizeof rows);
        for (int l = 0; l < 8; l++) {
            const ptrdiff_t c0 = cols[l], r0 = rows[l];
            const ptrdiff_t c1 = c0 + 1 < w - 1 ? c0 + 1 : w - 1, r1 = r0 + 1 < h - 1 ? r0 + 1 : h - 1;
            ta[l] = (int32_t)pixel_word(G->image, (r0 * w + c0) * ch, total);
            tb[l] = (int32_t)pixel_word(G->image, (r0 * w + c1) * ch, total);
            te[l] = (int32_t)pixel_word(G->image, (r1 * w + c0) * ch, total);
            tf[l] = (int32_t)pixel_word(G->image, (r1 * w + c1) * ch, total);
        }
        v8i a, b, e, f;
        memcpy(&a, ta, sizeof a);
        memcpy(&b, tb, sizeof b);
        memcpy(&e, te, sizeof e);
        memcpy(&f, tf, sizeof f);
        const v8f oneLessTy = one - ty;
        v8f sum = 0;
        for (ptrdiff_t k = 0; k < ch; k++) {
            const int shift = (int)(8 * k);
            const v8f va = __builtin_convertvector((a >> shift) & 255, v8f),
                      vb = __builtin_convertvector((b >> shift) & 255, v8f);
            const v8f ve = __builtin_convertvector((e >> shift) & 255, v8f),
                      vf = __builtin_convertvector((f >> shift) & 255, v8f);
            sum += (va + (vb - va) * tx) * oneLessTy + (ve + (vf - ve) * tx) * ty;
        }
        const v8f v = inside != 0 ? sum * scale : (v8f)NAN;
        if (n == 8) store8(v, out + i);
        else
            for (ptrdiff_t k = 0; k < n; k++) out[i + k] = v[k];
    }
}

EVN_KERNEL_VARIANTS(void, evn_grey_points_run, evn_grey_points, grey_points,
                    (const evn_grey_points *frame, const float *points, ptrdiff_t count, float *out),
                    (frame, points, count, out))
