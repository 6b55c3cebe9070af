// Scratch memory for the kernels whose callers report running out of it (evanesco_kernels.h).
#include "evanesco_kernels.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/// EVANESCO_TEST_FAIL_SCRATCH's value, copied once ("" when unset or too long to name a kernel).
static char failing[32];
static pthread_once_t read_once = PTHREAD_ONCE_INIT;

static void read_failing(void) {
    const char *e = getenv("EVANESCO_TEST_FAIL_SCRATCH");
    if (e && strlen(e) < sizeof failing) strcpy(failing, e);
}

void *evn_scratch_alloc(const char *who, size_t bytes, int zeroed) {
    pthread_once(&read_once, read_failing);
    if (failing[0] && strcmp(failing, who) == 0) return NULL;
    return zeroed ? calloc(bytes ? bytes : 1, 1) : malloc(bytes ? bytes : 1);
}
