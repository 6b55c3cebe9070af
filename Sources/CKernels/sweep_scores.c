// The depth sweep's score of each depth tried at a cell (ParallaxConsistency.sweep): for every
// point, the frames' grey levels there sorted, their median, and the mean of their distances from
// it (each capped); a depth's score is the mean over the points that at least 3 frames see.
// Eight points a step, one per lane: the frames' values sorted by a network of compare-exchanges
// (a frame that does not see the point sorts last as +infinity), the median and the distances
// taken lane by lane, then the points summed one after the other in their order. One body for
// the portable and AVX2 variants (see evanesco_kernels.h); sorting is exact and every sum runs
// in the order a one-point-at-a-time loop takes, so the scores are that loop's, bit for bit.
#include "evanesco_kernels.h"
#include "vectors.h"
#include <math.h>

EVN_INLINE void sweep_scores(const float *values, ptrdiff_t frames, ptrdiff_t depths, ptrdiff_t points, float cap,
                             float *scores) {
    enum { most = 16 };
    const ptrdiff_t S = frames < most ? frames : most;
    const v8f inf = INFINITY, zero = 0, capv = cap;
    const v8i one = 1;
    for (ptrdiff_t r = 0; r < depths; r++) {
        float total = 0;
        ptrdiff_t seen = 0;
        for (ptrdiff_t i0 = 0; i0 < points; i0 += 8) {
            const ptrdiff_t lanes = points - i0 < 8 ? points - i0 : 8;
            v8f b[most];
            v8i n = 0;
            for (ptrdiff_t j = 0; j < S; j++) {
                const float *p = values + (j * depths + r) * points + i0;
                v8f v = inf;
                if (lanes == 8) v = load8(p);
                else
                    for (ptrdiff_t l = 0; l < lanes; l++) v[l] = p[l];
                const v8i ok = v == v;
                n -= ok;
                b[j] = ok ? v : inf;
            }
            // Odd-even transposition: S rounds sort S values.
            for (ptrdiff_t round = 0; round < S; round++) {
                for (ptrdiff_t j = round & 1; j + 1 < S; j += 2) {
                    const v8f lo = b[j + 1] < b[j] ? b[j + 1] : b[j], hi = b[j + 1] < b[j] ? b[j] : b[j + 1];
                    b[j] = lo;
                    b[j + 1] = hi;
                }
            }
            const v8i half = n / 2;
            v8f m = zero;
            for (ptrdiff_t j = 0; j < S; j++) m = half == (int)j ? b[j] : m;
            v8f spread = zero;
            for (ptrdiff_t j = 0; j < S; j++) {
                const v8f d = b[j] - m, a = d < zero ? -d : d;
                spread += (int)j < n ? (capv < a ? capv : a) : zero;
            }
            const v8f mean = spread / __builtin_convertvector(n > 0 ? n : one, v8f);
            for (ptrdiff_t l = 0; l < lanes; l++) {
                if (n[l] >= 3) {
                    total += mean[l];
                    seen++;
                }
            }
        }
        scores[r] = seen >= 4 ? total / (float)seen : NAN;
    }
}

EVN_KERNEL_VARIANTS(void, evn_sweep_scores, evn_sweep_scores, sweep_scores,
                    (const float *values, ptrdiff_t frames, ptrdiff_t depths, ptrdiff_t points, float cap,
                     float *scores),
                    (values, frames, depths, points, cap, scores))
