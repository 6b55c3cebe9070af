// A sorting network's compare-exchanges over rows of samples, eight lanes a step (see
// evanesco_kernels.h). One body, inlined into a portable and an AVX2 function: the same
// comparisons, so the same values.
#include "evanesco_kernels.h"
#include "vectors.h"

EVN_INLINE void sort_network(const int32_t *pairs, ptrdiff_t count, float *base, ptrdiff_t vectors, ptrdiff_t stride) {
    for (ptrdiff_t k = 0; k < count; k++) {
        float *pa = base + (ptrdiff_t)pairs[2 * k] * stride, *pb = base + (ptrdiff_t)pairs[2 * k + 1] * stride;
        for (ptrdiff_t j = 0; j < vectors; j++) {
            const v8f x = load8(pa + 8 * j), y = load8(pb + 8 * j);
            store8(x < y ? x : y, pa + 8 * j);
            store8(x < y ? y : x, pb + 8 * j);
        }
    }
}

void evn_sort_network_portable(const int32_t *pairs, ptrdiff_t count, float *base, ptrdiff_t vectors,
                               ptrdiff_t stride) {
    sort_network(pairs, count, base, vectors, stride);
}

EVN_AVX2 void evn_sort_network_avx2(const int32_t *pairs, ptrdiff_t count, float *base, ptrdiff_t vectors,
                                    ptrdiff_t stride) {
    sort_network(pairs, count, base, vectors, stride);
}

void evn_sort_network(const int32_t *pairs, ptrdiff_t count, float *base, ptrdiff_t vectors, ptrdiff_t stride) {
    if (evn_cpu_has_avx2()) evn_sort_network_avx2(pairs, count, base, vectors, stride);
    else evn_sort_network_portable(pairs, count, base, vectors, stride);
}
