// The robust normal equations of one Gauss-Newton step of registration (NormalEquations.sum),
// eight points a step, portable and AVX2 from one body (see evanesco_kernels.h): the same
// operations in the same order in both, so the same sums.
#include "evanesco_kernels.h"
#include "vectors.h"

// Sums of eight lanes in a fixed order, as a double.
#define LANES(v) ((double)((((v)[0] + (v)[1]) + ((v)[2] + (v)[3])) + (((v)[4] + (v)[5]) + ((v)[6] + (v)[7]))))

// Points [start, end) (multiples of 4) with `np` parameters (2, 6 or 8; the steepest-descent
// components they read: 2 and 5 for a shift, else 0..np-1) and, with `hessian`, the matrix.
// Float lanes, added to the double totals every 256 points.
EVN_INLINE void sum_body(const evn_normal_points *P, ptrdiff_t start, ptrdiff_t end, const int np, const int hessian,
                         evn_normal_sums *out) {
    const float *t = P->t, *agreement = P->agreement, *smp = P->samples;
    float *wts = P->weights;
    const ptrdiff_t padded = P->padded;
    const v8f offset = P->offset, inverseGain = P->inverse_gain, invC2 = P->inv_c2, zero = 0, one = 1;
    const float *jac[8];
    for (int q = 0; q < np; q++) jac[q] = P->jacobian + (np == 2 ? (q == 0 ? 2 : 5) : q) * padded;
    const int entries = np * (np + 1) / 2;
    ptrdiff_t i = start;
    while (i < end) {
        const ptrdiff_t stop = i + 256 < end ? i + 256 : end;
        v8f acc[36], grad[8], wr2 = 0, wsum = 0, wsumHessian = 0, inliers = 0;
        for (int k = 0; k < entries; k++) acc[k] = 0;
        for (int q = 0; q < np; q++) grad[q] = 0;
        for (; i < stop; i += 8) {
            // The last step of a range may hold 4 points: the others are read as no sample.
            const int half = stop - i < 8;
            v8f v = (v8f)__builtin_nanf(""), tv = 0, ag = 0, js[8];
            if (half) {
                memcpy(&v, smp + i, 16);
                memcpy(&tv, t + i, 16);
                memcpy(&ag, agreement + i, 16);
                for (int q = 0; q < np; q++) {
                    js[q] = 0;
                    memcpy(&js[q], jac[q] + i, 16);
                }
            } else {
                v = load8(smp + i);
                tv = load8(t + i);
                ag = load8(agreement + i);
                for (int q = 0; q < np; q++) js[q] = load8(jac[q] + i);
            }
            const v8i ok = v == v;
            const v8f r = ok ? (v - offset) * inverseGain - tv : zero;
            const v8f magnitude = r < zero ? -r : r;
            const v8i agrees = (magnitude <= ag) & ok;
            const v8f u2 = r * r * invC2;
            const v8f om = one - u2;
            const v8f wt = ((u2 < one) & ok) ? om * om : zero;
            if (half) memcpy(wts + i, &wt, 16);
            else store8(wt, wts + i);
            const v8f wr = wt * r;
            wr2 += wr * r;
            wsum += wt;
            inliers += agrees ? one : zero;
            for (int q = 0; q < np; q++) grad[q] += wr * js[q];
            if (hessian) {
                wsumHessian += wt;
                int idx = 0;
                for (int q = 0; q < np; q++) {
                    const v8f wj = wt * js[q];
                    for (int u = q; u < np; u++) {
                        acc[idx] += wj * js[u];
                        idx++;
                    }
                }
            }
        }
        for (int k = 0; k < entries; k++) out->a[k] += LANES(acc[k]);
        for (int q = 0; q < np; q++) out->b[q] += LANES(grad[q]);
        out->wr2 += LANES(wr2);
        out->wsum += LANES(wsum);
        out->wsum_hessian += LANES(wsumHessian);
        out->inliers += LANES(inliers);
    }
}

#define VARIANTS(name, attribute)                                                                                      \
    attribute void name(const evn_normal_points *points, ptrdiff_t start, ptrdiff_t end, int np, int hessian,          \
                        evn_normal_sums *out) {                                                                        \
        if (start >= end) return;                                                                                      \
        switch (np * 2 + (hessian != 0)) {                                                                             \
        case 4:                                                                                                        \
            sum_body(points, start, end, 2, 0, out);                                                                   \
            break;                                                                                                     \
        case 5:                                                                                                        \
            sum_body(points, start, end, 2, 1, out);                                                                   \
            break;                                                                                                     \
        case 12:                                                                                                       \
            sum_body(points, start, end, 6, 0, out);                                                                   \
            break;                                                                                                     \
        case 13:                                                                                                       \
            sum_body(points, start, end, 6, 1, out);                                                                   \
            break;                                                                                                     \
        case 16:                                                                                                       \
            sum_body(points, start, end, 8, 0, out);                                                                   \
            break;                                                                                                     \
        default:                                                                                                       \
            sum_body(points, start, end, 8, 1, out);                                                                   \
            break;                                                                                                     \
        }                                                                                                              \
    }

VARIANTS(evn_normal_sums_portable, )
VARIANTS(evn_normal_sums_avx2, EVN_AVX2)

void evn_normal_sums_add(const evn_normal_points *points, ptrdiff_t start, ptrdiff_t end, int np, int hessian,
                         evn_normal_sums *out) {
    if (evn_cpu_has_avx2()) evn_normal_sums_avx2(points, start, end, np, hessian, out);
    else evn_normal_sums_portable(points, start, end, np, hessian, out);
}
