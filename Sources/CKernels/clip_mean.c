// The robust merge's last step for 8-bit-range RGB tiles (SigmaClipKernel, joint colour): per
// pixel, the mean of the frames whose every channel lies within its threshold of the median,
// eight pixels a step, portable and AVX2 from one body (see evanesco_kernels.h). Per pixel the
// frames are added in order, as the scalar loop adds them: the same sums, the same bits.
#include "evanesco_kernels.h"
#include "vectors.h"

// 8 interleaved RGB pixels (24 floats) as three planes, and back.
#define DEINTERLEAVE(p, r, g, b)                                                                                       \
    do {                                                                                                               \
        const v8f a_ = load8(p), b_ = load8((p) + 8), c_ = load8((p) + 16);                                            \
        r = __builtin_shufflevector(__builtin_shufflevector(a_, b_, 0, 3, 6, 9, 12, 15, -1, -1), c_, 0, 1, 2, 3, 4, 5, \
                                    10, 13);                                                                           \
        g = __builtin_shufflevector(__builtin_shufflevector(a_, b_, 1, 4, 7, 10, 13, -1, -1, -1), c_, 0, 1, 2, 3, 4,   \
                                    8, 11, 14);                                                                        \
        b = __builtin_shufflevector(__builtin_shufflevector(a_, b_, 2, 5, 8, 11, 14, -1, -1, -1), c_, 0, 1, 2, 3, 4,   \
                                    9, 12, 15);                                                                        \
    } while (0)

#define ABS8(v)                                                                                                        \
    ({                                                                                                                 \
        const v8f v_ = (v);                                                                                            \
        v_ < 0 ? -v_ : v_;                                                                                             \
    })

EVN_INLINE ptrdiff_t clip_mean_body(const evn_clip_tile *T, float *out) {
    const ptrdiff_t pixels = T->pixels, frames = T->frames, stride = T->stride;
    const v8f zero = 0, one = 1;
    ptrdiff_t p = 0;
    for (; p + 8 <= pixels; p += 8) {
        v8f mr, mg, mb, tr, tg, tb;
        DEINTERLEAVE(out + 3 * p, mr, mg, mb);
        DEINTERLEAVE(T->thresholds + 3 * p, tr, tg, tb);
        v8f sr = 0, sg = 0, sb = 0, n = 0;
        const float *v = T->values + 3 * p;
        const unsigned char *ok = T->valid + p;
        for (ptrdiff_t k = 0; k < frames; k++, v += stride, ok += pixels) {
            v8f r, g, b;
            DEINTERLEAVE(v, r, g, b);
            const v8i valid = __builtin_convertvector(load8b(ok), v8i) != 0;
            const v8i keep = valid & (ABS8(r - mr) <= tr) & (ABS8(g - mg) <= tg) & (ABS8(b - mb) <= tb);
            sr += keep ? r : zero;
            sg += keep ? g : zero;
            sb += keep ? b : zero;
            n += keep ? one : zero;
        }
        const v8i some = n > zero;
        const v8f qr = some ? sr / n : mr, qg = some ? sg / n : mg, qb = some ? sb / n : mb;
        for (int l = 0; l < 8; l++) {
            out[3 * (p + l)] = qr[l];
            out[3 * (p + l) + 1] = qg[l];
            out[3 * (p + l) + 2] = qb[l];
        }
    }
    return p;
}

ptrdiff_t evn_clip_mean_rgb_portable(const evn_clip_tile *tile, float *out) { return clip_mean_body(tile, out); }
EVN_AVX2 ptrdiff_t evn_clip_mean_rgb_avx2(const evn_clip_tile *tile, float *out) { return clip_mean_body(tile, out); }

ptrdiff_t evn_clip_mean_rgb(const evn_clip_tile *tile, float *out) {
    return evn_cpu_has_avx2() ? evn_clip_mean_rgb_avx2(tile, out) : evn_clip_mean_rgb_portable(tile, out);
}
