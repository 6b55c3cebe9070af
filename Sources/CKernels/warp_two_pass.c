// The separable cubic warp's passes, portable variants and dispatch (the body: warp_two_pass.h).
#include "warp_two_pass.h"

ptrdiff_t evn_warp_horizontal_pass_portable(const evn_warp_pass *P, ptrdiff_t g, ptrdiff_t n) {
    return horizontal_pass(P, g, n);
}

ptrdiff_t evn_warp_vertical_pass_portable(const evn_warp_pass *P, ptrdiff_t g, ptrdiff_t n) {
    return vertical_pass(P, g, n);
}

ptrdiff_t evn_warp_horizontal_pass(const evn_warp_pass *P, ptrdiff_t g, ptrdiff_t n) {
    return evn_cpu_has_avx2() ? evn_warp_horizontal_pass_avx2(P, g, n) : evn_warp_horizontal_pass_portable(P, g, n);
}

ptrdiff_t evn_warp_vertical_pass(const evn_warp_pass *P, ptrdiff_t g, ptrdiff_t n) {
    return evn_cpu_has_avx2() ? evn_warp_vertical_pass_avx2(P, g, n) : evn_warp_vertical_pass_portable(P, g, n);
}
