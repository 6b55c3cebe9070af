// A sorting network's compare-exchanges over rows of samples, eight lanes a step with AVX2 (see
// evanesco_kernels.h): the same comparisons as the Swift loop, so the same values.
#include "evanesco_kernels.h"
#include <string.h>

#pragma clang diagnostic ignored "-Wpsabi"

#if defined(__x86_64__)

typedef float v8f __attribute__((ext_vector_type(8)));

__attribute__((target("avx2")))
void evn_sort_network_avx2(const int32_t *pairs, ptrdiff_t count, float *base, ptrdiff_t vectors, ptrdiff_t stride) {
    for (ptrdiff_t k = 0; k < count; k++) {
        float *pa = base + (ptrdiff_t)pairs[2 * k] * stride, *pb = base + (ptrdiff_t)pairs[2 * k + 1] * stride;
        for (ptrdiff_t j = 0; j < vectors; j++) {
            v8f x, y;
            memcpy(&x, pa + 8 * j, sizeof x);
            memcpy(&y, pb + 8 * j, sizeof y);
            const v8f lo = x < y ? x : y, hi = x < y ? y : x;
            memcpy(pa + 8 * j, &lo, sizeof lo);
            memcpy(pb + 8 * j, &hi, sizeof hi);
        }
    }
}

#else

void evn_sort_network_avx2(const int32_t *pairs, ptrdiff_t count, float *base, ptrdiff_t vectors, ptrdiff_t stride) {
    (void)pairs; (void)count; (void)base; (void)vectors; (void)stride;
}

#endif
