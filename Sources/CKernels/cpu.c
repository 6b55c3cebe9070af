// Which instruction sets this CPU runs (see evanesco_kernels.h).
#include "evanesco_kernels.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int detect_avx2(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    // AVX and OSXSAVE, and the operating system saves the YMM registers (XCR0 bits 1 and 2).
    if (!(c & bit_AVX) || !(c & bit_OSXSAVE)) return 0;
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 6) != 6) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return (b & bit_AVX2) != 0;
}

static int known = -1;

void evn_set_portable_kernels(int portable) {
    __atomic_store_n(&known, portable ? 0 : detect_avx2(), __ATOMIC_RELAXED);
}

int evn_cpu_has_avx2(void) {
    // -1: not yet known. Two threads asking at once both compute the same answer.
    int v = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (v < 0) {
        // EVANESCO_PORTABLE_KERNELS=1 keeps to the portable variants (to compare or to rule them out).
        const char *portable = getenv("EVANESCO_PORTABLE_KERNELS");
        v = (portable && portable[0] && strcmp(portable, "0") != 0) ? 0 : detect_avx2();
        __atomic_store_n(&known, v, __ATOMIC_RELAXED);
    }
    return v;
}
#else
int evn_cpu_has_avx2(void) { return 0; }
void evn_set_portable_kernels(int portable) { (void)portable; }
#endif
