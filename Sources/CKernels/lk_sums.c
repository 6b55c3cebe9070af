// Local alignment's Lucas-Kanade sums (see evanesco_kernels.h). One body, written with eight-lane
// vectors, inlined into a portable and an AVX2 function: the same operations in the same order.
#include "evanesco_kernels.h"
#include "vectors.h"

EVN_INLINE v8f vmin(v8f a, v8f b) { return b < a ? b : a; }
EVN_INLINE v8f vmax(v8f a, v8f b) { return b > a ? b : a; }

EVN_INLINE float lanes(v8f v) {
    // Pairwise, the same order in every variant.
    v4f h = v.lo + v.hi;
    return (h.x + h.z) + (h.y + h.w);
}

EVN_INLINE float fmin1(float a, float b) { return b < a ? b : a; }
EVN_INLINE float fmax1(float a, float b) { return b > a ? b : a; }

EVN_INLINE
void lk_sums(const evn_lk_window *W, evn_lk_sums *out, const int tukey, const int residual, const int masked) {
    const ptrdiff_t stride = W->stride, x0 = W->x0, x1 = W->x1;
    const float w00 = W->w00, w01 = W->w01, w10 = W->w10, w11 = W->w11;
    const float bias = W->bias, huber = W->huber, invT = W->inverse_tukey_c;
    const v8f W00 = w00, W01 = w01, W10 = w10, W11 = w11, B = bias, H = huber, IT = invT;
    const v8f one = 1, zero = 0, cap = 50;
    v8f a00 = 0, a01 = 0, a02 = 0, a11 = 0, a12 = 0, a22 = 0, b0 = 0, b1 = 0, b2 = 0, sq = 0;
    float s00 = 0, s01 = 0, s02 = 0, s11 = 0, s12 = 0, s22 = 0, t0 = 0, t1 = 0, t2 = 0, ssq = 0;
    v8i used = 0;
    ptrdiff_t usedTail = 0;
    for (ptrdiff_t y = W->y0; y < W->y1; y += W->row_step) {
        const float *rr = W->ref + y * stride, *gxr = W->gx + y * stride, *gyr = W->gy + y * stride;
        const float *top = W->frame + W->frame_offset + y * stride, *bottom = top + stride;
        const unsigned char *vt = masked ? W->valid + W->frame_offset + y * stride : NULL,
                            *vb = masked ? vt + stride : NULL;
        ptrdiff_t x = x0;
        for (; x + 8 <= x1; x += 8) {
            const v8f f =
                W00 * load8(top + x) + W01 * load8(top + x + 1) + W10 * load8(bottom + x) + W11 * load8(bottom + x + 1);
            const v8f gx = load8(gxr + x), gy = load8(gyr + x);
            v8f e = f - load8(rr + x) - B;
            v8i m = -1;
            if (masked) {
                const v8b zero8 = 0;
                m = __builtin_convertvector((load8b(vt + x) != zero8) & (load8b(vt + x + 1) != zero8) &
                                                (load8b(vb + x) != zero8) & (load8b(vb + x + 1) != zero8),
                                            v8i);
                // An invalid pixel adds nothing (whatever the plane holds there).
                e = m != 0 ? e : zero;
            }
            const v8f ae = vmax(e, -e);
            v8f wt;
            if (tukey) {
                const v8f u = e * IT;
                const v8f t = vmax(zero, one - u * u);
                wt = t * t;
            } else {
                wt = vmin(one, H / ae);
            }
            if (masked) {
                wt = m != 0 ? wt : zero;
                used -= m;
            }
            const v8f wgx = wt * gx, wgy = wt * gy;
            a00 += wgx * gx;
            a01 += wgx * gy;
            a02 += wgx;
            a11 += wgy * gy;
            a12 += wgy;
            a22 += wt;
            b0 += wgx * e;
            b1 += wgy * e;
            b2 += wt * e;
            if (residual) {
                const v8f c = vmin(ae, cap);
                sq += c * c;
            }
        }
        for (; x < x1; x++) {
            if (masked && !(vt[x] && vt[x + 1] && vb[x] && vb[x + 1])) continue;
            usedTail++;
            const float f = w00 * top[x] + w01 * top[x + 1] + w10 * bottom[x] + w11 * bottom[x + 1];
            const float gx = gxr[x], gy = gyr[x];
            const float e = f - rr[x] - bias;
            const float ae = fmax1(e, -e);
            float wt;
            if (tukey) {
                const float u = e * invT;
                const float t = fmax1(0, 1 - u * u);
                wt = t * t;
            } else {
                wt = fmin1(1, huber / ae);
            }
            const float wgx = wt * gx, wgy = wt * gy;
            s00 += wgx * gx;
            s01 += wgx * gy;
            s02 += wgx;
            s11 += wgy * gy;
            s12 += wgy;
            s22 += wt;
            t0 += wgx * e;
            t1 += wgy * e;
            t2 += wt * e;
            if (residual) {
                const float c = fmin1(ae, 50);
                ssq += c * c;
            }
        }
    }
    out->a00 = lanes(a00) + s00;
    out->a01 = lanes(a01) + s01;
    out->a02 = lanes(a02) + s02;
    out->a11 = lanes(a11) + s11;
    out->a12 = lanes(a12) + s12;
    out->a22 = lanes(a22) + s22;
    out->b0 = lanes(b0) + t0;
    out->b1 = lanes(b1) + t1;
    out->b2 = lanes(b2) + t2;
    out->squared_residual = lanes(sq) + ssq;
    const ptrdiff_t rows = (W->y1 - W->y0 + W->row_step - 1) / W->row_step;
    out->used =
        masked ? (ptrdiff_t)(used[0] + used[1] + used[2] + used[3] + used[4] + used[5] + used[6] + used[7]) + usedTail
               : rows * (x1 - x0);
}

EVN_INLINE void lk_dispatch(const evn_lk_window *W, evn_lk_sums *out) {
    // Each weight kind, with and without the residual and the validity test, gets its own loop.
    if (W->valid) {
        if (W->tukey) lk_sums(W, out, 1, W->residual != 0, 1);
        else lk_sums(W, out, 0, W->residual != 0, 1);
    } else if (W->tukey) {
        if (W->residual) lk_sums(W, out, 1, 1, 0);
        else lk_sums(W, out, 1, 0, 0);
    } else {
        if (W->residual) lk_sums(W, out, 0, 1, 0);
        else lk_sums(W, out, 0, 0, 0);
    }
}

void evn_lk_sums_window_portable(const evn_lk_window *W, evn_lk_sums *out) { lk_dispatch(W, out); }

EVN_AVX2 void evn_lk_sums_window_avx2(const evn_lk_window *W, evn_lk_sums *out) { lk_dispatch(W, out); }

void evn_lk_sums_window(const evn_lk_window *W, evn_lk_sums *out) {
    if (evn_cpu_has_avx2()) evn_lk_sums_window_avx2(W, out);
    else evn_lk_sums_window_portable(W, out);
}
