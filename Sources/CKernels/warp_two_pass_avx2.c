// The separable cubic warp's passes, AVX2 variants (the body: warp_two_pass.h): every function of
// this translation unit, the body's and its helpers' included, is compiled for AVX2, and the
// weights of a group whose phases differ are permuted (EVN_WARP_PERMUTE). Elsewhere than x86-64
// the portable body (never chosen there: evn_cpu_has_avx2() is 0).
#if defined(__x86_64__)
#pragma clang attribute push(__attribute__((target("avx2"))), apply_to = function)
#define EVN_WARP_PERMUTE 1
#endif
#include "warp_two_pass.h"

ptrdiff_t evn_warp_horizontal_pass_avx2(const evn_warp_pass *P, ptrdiff_t g, ptrdiff_t n) {
    return horizontal_pass(P, g, n);
}

ptrdiff_t evn_warp_vertical_pass_avx2(const evn_warp_pass *P, ptrdiff_t g, ptrdiff_t n) {
    return vertical_pass(P, g, n);
}

#if defined(__x86_64__)
#pragma clang attribute pop
#endif
