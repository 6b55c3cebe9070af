// PNG's row filters and TIFF's horizontal predictor, one body compiled portably and with AVX2
// (see evanesco_encode.h). Filtering for the encoder reads only the image's own bytes (the
// neighbours left, up and up-left are original samples), so every byte of a row is independent:
// sixteen at a time, in 16-bit lanes where Paeth's sums need them.
#include "evanesco_encode.h"
#include "evanesco_kernels.h"
#include "vectors.h"
#include <stdlib.h>

typedef short v16s __attribute__((ext_vector_type(16)));
typedef unsigned char v16u __attribute__((ext_vector_type(16)));
#define load16u(p)                                                                                                     \
    ({                                                                                                                 \
        v16u v_;                                                                                                       \
        memcpy(&v_, (p), sizeof v_);                                                                                   \
        v_;                                                                                                            \
    })
#define store16u(v, p)                                                                                                 \
    do {                                                                                                               \
        const v16u s_ = (v);                                                                                           \
        memcpy((p), &s_, sizeof s_);                                                                                   \
    } while (0)
#define widen(v) __builtin_convertvector((v), v16s)
#define ABS16(v)                                                                                                       \
    ({                                                                                                                 \
        const v16s v_ = (v);                                                                                           \
        v_ < 0 ? -v_ : v_;                                                                                             \
    })

// Each function filters one row: x the row, up the row above (zeros above the first), o the
// output, n bytes, bpp bytes a pixel. Bytes before the first pixel count as zero.
EVN_INLINE void sub_row(const uint8_t *x, uint8_t *o, size_t n, size_t bpp) {
    size_t i = 0;
    for (; i < bpp && i < n; i++) o[i] = x[i];
    for (; i + 16 <= n; i += 16) store16u(load16u(x + i) - load16u(x + i - bpp), o + i);
    for (; i < n; i++) o[i] = (uint8_t)(x[i] - x[i - bpp]);
}

EVN_INLINE void up_row(const uint8_t *x, const uint8_t *up, uint8_t *o, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) store16u(load16u(x + i) - load16u(up + i), o + i);
    for (; i < n; i++) o[i] = (uint8_t)(x[i] - up[i]);
}

EVN_INLINE void average_row(const uint8_t *x, const uint8_t *up, uint8_t *o, size_t n, size_t bpp) {
    size_t i = 0;
    for (; i < bpp && i < n; i++) o[i] = (uint8_t)(x[i] - (up[i] >> 1));
    for (; i + 16 <= n; i += 16) {
        const v16s mean = (widen(load16u(x + i - bpp)) + widen(load16u(up + i))) >> 1;
        store16u(__builtin_convertvector(widen(load16u(x + i)) - mean, v16u), o + i);
    }
    for (; i < n; i++) o[i] = (uint8_t)(x[i] - ((x[i - bpp] + up[i]) >> 1));
}

static inline int paeth(int a, int b, int c) {
    const int pa = abs(b - c), pb = abs(a - c), pc = abs(a + b - 2 * c);
    return (pa <= pb && pa <= pc) ? a : (pb <= pc ? b : c);
}

EVN_INLINE void paeth_row(const uint8_t *x, const uint8_t *up, uint8_t *o, size_t n, size_t bpp) {
    size_t i = 0;
    // No left neighbour: a = c = 0, and Paeth predicts b.
    for (; i < bpp && i < n; i++) o[i] = (uint8_t)(x[i] - up[i]);
    for (; i + 16 <= n; i += 16) {
        const v16s a = widen(load16u(x + i - bpp)), b = widen(load16u(up + i)), c = widen(load16u(up + i - bpp));
        const v16s pa = ABS16(b - c), pb = ABS16(a - c), pc = ABS16(a + b - c - c);
        const v16s predicted = (pa <= pb & pa <= pc) ? a : (pb <= pc ? b : c);
        store16u(__builtin_convertvector(widen(load16u(x + i)) - predicted, v16u), o + i);
    }
    for (; i < n; i++) o[i] = (uint8_t)(x[i] - paeth(x[i - bpp], up[i], up[i - bpp]));
}

EVN_INLINE void filter_row(int filter, const uint8_t *x, const uint8_t *up, uint8_t *o, size_t n, size_t bpp) {
    switch (filter) {
    case EVN_PNG_SUB:
        sub_row(x, o, n, bpp);
        break;
    case EVN_PNG_UP:
        up_row(x, up, o, n);
        break;
    case EVN_PNG_AVERAGE:
        average_row(x, up, o, n, bpp);
        break;
    case EVN_PNG_PAETH:
        paeth_row(x, up, o, n, bpp);
        break;
    default:
        memcpy(o, x, n);
        break;
    }
}

/// libpng's measure of a filtered row: the sum of its bytes' magnitudes as signed values.
EVN_INLINE uint64_t row_cost(const uint8_t *o, size_t n) {
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        const int v = (int8_t)o[i];
        sum += (uint64_t)(v < 0 ? -v : v);
    }
    return sum;
}

EVN_INLINE void swap16(const uint8_t *src, uint8_t *dst, size_t n) {
    for (size_t i = 0; i + 1 < n; i += 2) {
        const uint8_t lo = src[i];
        dst[i] = src[i + 1];
        dst[i + 1] = lo;
    }
}

EVN_INLINE int filter_rows_body(const uint8_t *image, size_t row_bytes, size_t bpp, int sixteen, size_t y0, size_t y1,
                                int filter, uint8_t *out) {
    if (y1 <= y0) return 0;
    // Scratch: a zero row (above the first), two byte-swapped rows (16-bit), five candidates (adaptive).
    const size_t slots = 1 + (sixteen ? 2 : 0) + (filter == EVN_PNG_ADAPTIVE ? 5 : 0);
    uint8_t *scratch = calloc(slots, row_bytes ? row_bytes : 1);
    if (!scratch) return -1;
    // 16-bit: `next` takes each row byte-swapped, `held` keeps the row above (they trade places).
    uint8_t *zero = scratch, *next = scratch + row_bytes, *held = scratch + 2 * row_bytes;
    uint8_t *candidates = scratch + (sixteen ? 3 : 1) * row_bytes;
    const uint8_t *up = zero;
    if (y0 > 0) {
        up = image + (y0 - 1) * row_bytes;
        if (sixteen) {
            swap16(up, held, row_bytes);
            up = held;
        }
    }
    for (size_t y = y0; y < y1; y++) {
        const uint8_t *x = image + y * row_bytes;
        if (sixteen) {
            swap16(x, next, row_bytes);
            x = next;
            next = held;
            held = (uint8_t *)x;
        }
        uint8_t *o = out + (y - y0) * (row_bytes + 1);
        if (filter == EVN_PNG_ADAPTIVE) {
            int best = EVN_PNG_NONE;
            uint64_t bestCost = row_cost(x, row_bytes);
            for (int f = EVN_PNG_SUB; f <= EVN_PNG_PAETH; f++) {
                uint8_t *c = candidates + (size_t)(f - 1) * row_bytes;
                filter_row(f, x, up, c, row_bytes, bpp);
                const uint64_t cost = row_cost(c, row_bytes);
                if (cost < bestCost) {
                    bestCost = cost;
                    best = f;
                }
            }
            o[0] = (uint8_t)best;
            memcpy(o + 1, best == EVN_PNG_NONE ? x : candidates + (size_t)(best - 1) * row_bytes, row_bytes);
        } else {
            o[0] = (uint8_t)filter;
            filter_row(filter, x, up, o + 1, row_bytes, bpp);
        }
        up = x;
    }
    free(scratch);
    return 0;
}

int evn_png_filter_rows_portable(const uint8_t *image, size_t row_bytes, size_t bpp, int sixteen, size_t y0, size_t y1,
                                 int filter, uint8_t *out) {
    return filter_rows_body(image, row_bytes, bpp, sixteen, y0, y1, filter, out);
}

EVN_AVX2 int evn_png_filter_rows_avx2(const uint8_t *image, size_t row_bytes, size_t bpp, int sixteen, size_t y0,
                                      size_t y1, int filter, uint8_t *out) {
    return filter_rows_body(image, row_bytes, bpp, sixteen, y0, y1, filter, out);
}

int evn_png_filter_rows(const uint8_t *image, size_t row_bytes, size_t bpp, int sixteen, size_t y0, size_t y1,
                        int filter, uint8_t *out) {
    return evn_cpu_has_avx2() ? evn_png_filter_rows_avx2(image, row_bytes, bpp, sixteen, y0, y1, filter, out)
                              : evn_png_filter_rows_portable(image, row_bytes, bpp, sixteen, y0, y1, filter, out);
}

EVN_INLINE void predict_body(const void *image, size_t row_samples, size_t spp, int bits, size_t rows, void *out) {
    for (size_t y = 0; y < rows; y++) {
        if (bits == 16) {
            const uint16_t *x = (const uint16_t *)image + y * row_samples;
            uint16_t *o = (uint16_t *)out + y * row_samples;
            for (size_t i = 0; i < spp && i < row_samples; i++) o[i] = x[i];
            for (size_t i = spp; i < row_samples; i++) o[i] = (uint16_t)(x[i] - x[i - spp]);
        } else {
            const uint8_t *x = (const uint8_t *)image + y * row_samples;
            sub_row(x, (uint8_t *)out + y * row_samples, row_samples, spp);
        }
    }
}

static void predict_portable(const void *image, size_t row_samples, size_t spp, int bits, size_t rows, void *out) {
    predict_body(image, row_samples, spp, bits, rows, out);
}

EVN_AVX2 static void predict_avx2(const void *image, size_t row_samples, size_t spp, int bits, size_t rows, void *out) {
    predict_body(image, row_samples, spp, bits, rows, out);
}

void evn_tiff_predict_rows(const void *image, size_t row_samples, size_t spp, int bits, size_t rows, void *out) {
    if (evn_cpu_has_avx2()) predict_avx2(image, row_samples, spp, bits, rows, out);
    else predict_portable(image, row_samples, spp, bits, rows, out);
}
