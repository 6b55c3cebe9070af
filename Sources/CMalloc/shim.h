// glibc's allocator tuning (mallopt and its parameters), for the command-line tool.
#include <malloc.h>
