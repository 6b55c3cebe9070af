// What the kernels share: eight-lane vector types, loads and stores, and the attribute that
// compiles a function for AVX2 on x86-64 (elsewhere the same code for the baseline: never
// chosen there, as evn_cpu_has_avx2() is 0). Floating-point contraction is off: no fused
// multiply-add, so every variant does the same operations in the same order.
#ifndef EVANESCO_VECTORS_H
#define EVANESCO_VECTORS_H

#include <stddef.h>
#include <string.h>

#pragma clang fp contract(off)
// The helpers below are always inlined: no vector crosses a call, whatever the ABI.
#pragma clang diagnostic ignored "-Wpsabi"

typedef float v8f __attribute__((ext_vector_type(8)));
typedef float v4f __attribute__((ext_vector_type(4)));
typedef int v8i __attribute__((ext_vector_type(8)));
typedef int v4i __attribute__((ext_vector_type(4)));
typedef unsigned char v8b __attribute__((ext_vector_type(8)));

#if defined(__x86_64__)
#define EVN_AVX2 __attribute__((target("avx2")))
#else
#define EVN_AVX2
#endif

#define EVN_INLINE static inline __attribute__((always_inline))
/// A helper of AVX2 functions that takes or returns vectors (it must be compiled for AVX2 too).
#define EVN_AVX2_INLINE EVN_AVX2 EVN_INLINE

// Loads, stores and a lane test as macros, not functions: a vector argument or result crossing
// from an AVX2 function into one compiled without it changes the ABI (clang refuses it).
#define load8(p)                                                                                                       \
    ({                                                                                                                 \
        v8f v_;                                                                                                        \
        memcpy(&v_, (p), sizeof v_);                                                                                   \
        v_;                                                                                                            \
    })
#define load8b(p)                                                                                                      \
    ({                                                                                                                 \
        v8b v_;                                                                                                        \
        memcpy(&v_, (p), sizeof v_);                                                                                   \
        v_;                                                                                                            \
    })
#define store8(v, p)                                                                                                   \
    do {                                                                                                               \
        const v8f s_ = (v);                                                                                            \
        memcpy((p), &s_, sizeof s_);                                                                                   \
    } while (0)
/// A kernel's two variants from its one body (an EVN_INLINE function): `prefix`_portable for any
/// CPU, `prefix`_avx2 compiled with AVX2, and `dispatch`, which picks one by evn_cpu_has_avx2().
/// `params` is the parenthesised parameter list, `args` the same names as arguments. `storage`:
/// nothing, or `static` for a helper inside one file (EVN_STATIC_KERNEL_VARIANTS).
#define EVN_KERNEL_VARIANTS_AS(storage, ret, dispatch, prefix, body, params, args)                                     \
    storage ret prefix##_portable params { return body args; }                                                         \
    EVN_AVX2 storage ret prefix##_avx2 params { return body args; }                                                    \
    storage ret dispatch params { return evn_cpu_has_avx2() ? prefix##_avx2 args : prefix##_portable args; }
#define EVN_KERNEL_VARIANTS(...) EVN_KERNEL_VARIANTS_AS(, __VA_ARGS__)
#define EVN_STATIC_KERNEL_VARIANTS(...) EVN_KERNEL_VARIANTS_AS(static, __VA_ARGS__)

/// Whether every lane of an eight-lane mask is non-zero.
#define all8(m)                                                                                                        \
    ({                                                                                                                 \
        const v8i m_ = (m);                                                                                            \
        int a_ = 1;                                                                                                    \
        for (int k_ = 0; k_ < 8; k_++) a_ &= m_[k_] != 0;                                                              \
        a_;                                                                                                            \
    })

#endif
