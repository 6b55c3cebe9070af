// The luma of 8-bit pixels on the 0...255 scale (GreyPyramid.luma255, every frame's pyramid
// base): 0.299 r + 0.587 g + 0.114 b, in that order, times a scale. One plain loop that the
// compiler vectorises, compiled for the baseline and for AVX2 (see evanesco_kernels.h): the same
// operations per pixel in both, so the same values as each other and as the Swift loop for other
// samples.
#include "evanesco_kernels.h"
#include "vectors.h"

EVN_INLINE void luma_rgb8(const unsigned char *src, ptrdiff_t channels, ptrdiff_t count, float scale, float *out) {
    for (ptrdiff_t i = 0; i < count; i++) {
        const unsigned char *p = src + i * channels;
        out[i] = (0.299f * (float)p[0] + 0.587f * (float)p[1] + 0.114f * (float)p[2]) * scale;
    }
}

EVN_INLINE void luma_rgb8_dispatch(const unsigned char *src, ptrdiff_t channels, ptrdiff_t count, float scale,
                                   float *out) {
    // Three and four channels get loops of their own (a constant stride vectorises).
    if (channels == 3) luma_rgb8(src, 3, count, scale, out);
    else if (channels == 4) luma_rgb8(src, 4, count, scale, out);
    else luma_rgb8(src, channels, count, scale, out);
}

EVN_KERNEL_VARIANTS(void, evn_luma_rgb8, evn_luma_rgb8, luma_rgb8_dispatch,
                    (const unsigned char *src, ptrdiff_t channels, ptrdiff_t count, float scale, float *out),
                    (src, channels, count, scale, out))
