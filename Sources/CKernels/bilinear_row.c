// One-channel bilinear warp of a Float plane along an output row (local alignment's planes), in
// groups of four output pixels: eight a step where two groups qualify together, four where one
// does (see evanesco_kernels.h). One body, inlined into a portable and an AVX2 function: each
// lane does the arithmetic of RowSampler's pixel alone, in the same order, so the same values. A
// group that does not qualify is the caller's.
#include "evanesco_kernels.h"
#include "vectors.h"

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

// L pixels from output pixel i on, if they read consecutive columns of one pair of plane rows,
// all inside: writes them and their validity, advances i and continues the enclosing loop (a
// block, not a do-while, so that `continue` is the loop's).
#define BILINEAR(L, load, store)                                                                                       \
    {                                                                                                                  \
        const v##L##f lanes = __builtin_convertvector(steps##L, v##L##f);                                              \
        const v##L##f fx = (v##L##f)(float)(R->x0 + i) + lanes;                                                        \
        const v##L##f d = m6 * fx + m8;                                                                                \
        const v##L##i far = d > (v##L##f)1e-12f;                                                                       \
        int all = 1;                                                                                                   \
        for (int k = 0; k < L; k++) all &= far[k] != 0;                                                                \
        if (all) {                                                                                                     \
            const v##L##f px = (m0 * fx + m2) / d, py = (m3 * fx + m5) / d;                                            \
            const float fx0 = __builtin_floorf(px[0]), fy0 = __builtin_floorf(py[0]);                                  \
            if (fx0 >= 0 && fy0 >= 0 && fx0 + L < (float)w && fy0 + 1 < (float)h) {                                    \
                const v##L##f tx = px - ((v##L##f)fx0 + lanes), ty = py - (v##L##f)fy0;                                \
                const v##L##i in = (tx >= 0) & (tx < 1) & (ty >= 0) & (ty < 1);                                        \
                for (int k = 0; k < L; k++) all &= in[k] != 0;                                                         \
                if (all) {                                                                                             \
                    const float *p = src + (ptrdiff_t)fy0 * w + (ptrdiff_t)fx0, *q = p + w;                            \
                    const v##L##f t0 = load(p), t1 = load(p + 1), b0 = load(q), b1 = load(q + 1);                      \
                    const v##L##f top = t0 + (t1 - t0) * tx, bottom = b0 + (b1 - b0) * tx;                             \
                    store(top + (bottom - top) * ty, out + i);                                                         \
                    memset(valid + i, 1, L);                                                                           \
                    i += L;                                                                                            \
                    continue;                                                                                          \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }

EVN_INLINE ptrdiff_t bilinear_row(const evn_bilinear_row *R, ptrdiff_t start, ptrdiff_t count, float *out,
                                  unsigned char *valid) {
    const v8i steps8 = {0, 1, 2, 3, 4, 5, 6, 7};
    const v4i steps4 = {0, 1, 2, 3};
    const float m0 = R->m0, m2 = R->m2, m3 = R->m3, m5 = R->m5, m6 = R->m6, m8 = R->m8;
    const ptrdiff_t w = R->width, h = R->height;
    const float *src = R->plane;
    ptrdiff_t i = start;
    while (i + 4 <= count) {
        if (i + 8 <= count) BILINEAR(8, load8, store8);
        BILINEAR(4, load4, store4);
        return i;
    }
    return i;
}

EVN_KERNEL_VARIANTS(ptrdiff_t, evn_bilinear_row_run, evn_bilinear_row, bilinear_row,
                    (const evn_bilinear_row *R, ptrdiff_t start, ptrdiff_t count, float *out, unsigned char *valid),
                    (R, start, count, out, valid))
