// The C interface's types are declared in include/evanesco.h; the functions are implemented in
// Swift (Sources/EvanescoC). This file only makes the header a C target.
#include "evanesco.h"
