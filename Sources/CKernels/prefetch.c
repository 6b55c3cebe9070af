// Asks the CPU to start loading memory that will be read soon (see evanesco_kernels.h).
#include "evanesco_kernels.h"

void evn_prefetch(const void *start, ptrdiff_t bytes) {
    const char *p = (const char *)start;
    for (ptrdiff_t i = 0; i < bytes; i += 64) __builtin_prefetch(p + i);
    if (bytes > 0) __builtin_prefetch(p + bytes - 1);
}
