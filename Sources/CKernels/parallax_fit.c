// The depth fit of ParallaxConsistency (its Fit): each frame's weighted normal equations in the
// model's basis, and each cell's depth and weights given the frames. Eight cells a step, portable
// and AVX2 from one body (see evanesco_kernels.h): the same operations in the same order in both,
// so the same results; a range's last, partial step is read through zero-filled lanes.
#include "evanesco_kernels.h"
#include "vectors.h"

// Sums of eight lanes in a fixed order, as a double.
#define LANES(v) ((double)((((v)[0] + (v)[1]) + ((v)[2] + (v)[3])) + (((v)[4] + (v)[5]) + ((v)[6] + (v)[7]))))

// n (1...8) floats from p into the first lanes, the rest 0.
#define loadn(p, n)                                                                                                    \
    ({                                                                                                                 \
        v8f v_ = 0;                                                                                                    \
        memcpy(&v_, (p), (size_t)(n) * sizeof(float));                                                                 \
        v_;                                                                                                            \
    })

// The model's basis at eight cells (ParallaxConsistency.basis): depth, 1, x, y, x^2, xy, y^2.
#define BASIS(v, r, x, y)                                                                                              \
    do {                                                                                                               \
        (v)[0] = (r);                                                                                                  \
        (v)[1] = 1;                                                                                                    \
        (v)[2] = (x);                                                                                                  \
        (v)[3] = (y);                                                                                                  \
        (v)[4] = (x) * (x);                                                                                            \
        (v)[5] = (x) * (y);                                                                                            \
        (v)[6] = (y) * (y);                                                                                            \
    } while (0)

EVN_INLINE void parallax_normal(const evn_parallax_frame *F, double *normal, double *rhs) {
    enum { n = 7 };
    double a[n * n], b[2 * n];
    for (int k = 0; k < n * n; k++) a[k] = 0;
    for (int k = 0; k < 2 * n; k++) b[k] = 0;
    const ptrdiff_t cells = F->cells;
    ptrdiff_t c = 0;
    while (c < cells) {
        const ptrdiff_t stop = c + 256 < cells ? c + 256 : cells;
        v8f acc[n * (n + 1) / 2], bx[n], by[n];
        for (int k = 0; k < n * (n + 1) / 2; k++) acc[k] = 0;
        for (int k = 0; k < n; k++) bx[k] = by[k] = 0;
        for (; c < stop; c += 8) {
            const ptrdiff_t m = stop - c < 8 ? stop - c : 8;
            v8f w, r, x, y, dx, dy;
            if (m == 8) {
                w = load8(F->weight + c);
                r = load8(F->rho + c);
                x = load8(F->x + c);
                y = load8(F->y + c);
                dx = load8(F->dx + c);
                dy = load8(F->dy + c);
            } else {
                // Lanes past the range weigh 0.
                w = loadn(F->weight + c, m);
                r = loadn(F->rho + c, m);
                x = loadn(F->x + c, m);
                y = loadn(F->y + c, m);
                dx = loadn(F->dx + c, m);
                dy = loadn(F->dy + c, m);
            }
            v8f v[n];
            BASIS(v, r, x, y);
            int idx = 0;
            for (int i = 0; i < n; i++) {
                const v8f wv = w * v[i];
                for (int j = i; j < n; j++) {
                    acc[idx] += wv * v[j];
                    idx++;
                }
                bx[i] += wv * dx;
                by[i] += wv * dy;
            }
        }
        int idx = 0;
        for (int i = 0; i < n; i++) {
            for (int j = i; j < n; j++) {
                a[i * n + j] += LANES(acc[idx]);
                idx++;
            }
            b[i] += LANES(bx[i]);
            b[n + i] += LANES(by[i]);
        }
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) normal[i * n + j] = j >= i ? a[i * n + j] : a[j * n + i];
    for (int k = 0; k < 2 * n; k++) rhs[k] = b[k];
}

EVN_KERNEL_VARIANTS(void, evn_parallax_normal, evn_parallax_normal, parallax_normal,
                    (const evn_parallax_frame *frame, double *normal, double *rhs), (frame, normal, rhs))

// The displacement's part besides depth (the frame's coefficients 1..6 of the basis) at eight cells.
#define AFFINE(q, x, y, xx, xy, yy)                                                                                    \
    ((((q)[1] + (q)[2] * (x)) + ((q)[3] * (y) + (q)[4] * (xx))) + ((q)[5] * (xy) + (q)[6] * (yy)))

EVN_INLINE void parallax_depths(const evn_parallax_cells *P, ptrdiff_t start, ptrdiff_t end) {
    const ptrdiff_t C = P->cells, K = P->frames;
    const float *coefficients = P->coefficients;
    const v8f one = 1, inverseScale = P->inverse_scale, tiny = 1e-6f;
    for (ptrdiff_t c = start; c < end; c += 8) {
        const ptrdiff_t m = end - c < 8 ? end - c : 8;
        v8f x, y, rho, mxx = 1, mxy = 0, myy = 1;
        if (m == 8) {
            x = load8(P->x + c);
            y = load8(P->y + c);
            rho = load8(P->rho + c);
        } else {
            x = loadn(P->x + c, m);
            y = loadn(P->y + c, m);
            rho = loadn(P->rho + c, m);
        }
        if (P->metric) {
            // Four floats a cell: xx, xy, yy, unused.
            for (ptrdiff_t l = 0; l < m; l++) {
                mxx[l] = P->metric[4 * (c + l)];
                mxy[l] = P->metric[4 * (c + l) + 1];
                myy[l] = P->metric[4 * (c + l) + 2];
            }
        }
        const v8f xx = x * x, xy = x * y, yy = y * y;
        v8f num = 0, den = 0;
        for (ptrdiff_t k = 0; k < K; k++) {
            const float *qx = coefficients + 16 * k, *qy = qx + 8;
            const float *dxk = P->dx + k * C + c, *dyk = P->dy + k * C + c, *wk = P->weight + k * C + c;
            const v8f dx = m == 8 ? load8(dxk) : loadn(dxk, m), dy = m == 8 ? load8(dyk) : loadn(dyk, m);
            const v8f w = m == 8 ? load8(wk) : loadn(wk, m);
            // The measurement less the model's terms besides depth, against the frame's motion in
            // the cell's metric.
            const v8f restX = dx - AFFINE(qx, x, y, xx, xy, yy), restY = dy - AFFINE(qy, x, y, xx, xy, yy);
            const v8f tx = qx[0], ty = qy[0];
            const v8f atX = mxx * tx + mxy * ty, atY = mxy * tx + myy * ty;
            num += w * (atX * restX + atY * restY);
            den += w * (atX * tx + atY * ty);
        }
        rho = den > tiny ? num / (den > tiny ? den : one) : rho;
        if (m == 8) store8(rho, P->rho + c);
        else memcpy(P->rho + c, &rho, (size_t)m * sizeof(float));
        for (ptrdiff_t k = 0; k < K; k++) {
            const float *qx = coefficients + 16 * k, *qy = qx + 8;
            const float *dxk = P->dx + k * C + c, *dyk = P->dy + k * C + c;
            const v8f dx = m == 8 ? load8(dxk) : loadn(dxk, m), dy = m == 8 ? load8(dyk) : loadn(dyk, m);
            const v8f tx = qx[0], ty = qy[0];
            const v8f ex = dx - (rho * tx + AFFINE(qx, x, y, xx, xy, yy));
            const v8f ey = dy - (rho * ty + AFFINE(qy, x, y, xx, xy, yy));
            const v8f r2 = (ex * ex + ey * ey) * (inverseScale * inverseScale);
            const v8f wt = one / (one + r2);
            if (m == 8) store8(wt, P->weight + k * C + c);
            else memcpy(P->weight + k * C + c, &wt, (size_t)m * sizeof(float));
        }
    }
}

EVN_KERNEL_VARIANTS(void, evn_parallax_depths, evn_parallax_depths, parallax_depths,
                    (const evn_parallax_cells *cells, ptrdiff_t start, ptrdiff_t end), (cells, start, end))

EVN_INLINE void parallax_model(const evn_parallax_cells *P, ptrdiff_t k, ptrdiff_t start, ptrdiff_t end, float *mx,
                               float *my) {
    const float *qx = P->coefficients + 16 * k, *qy = qx + 8;
    for (ptrdiff_t c = start; c < end; c += 8) {
        const ptrdiff_t m = end - c < 8 ? end - c : 8;
        const v8f x = m == 8 ? load8(P->x + c) : loadn(P->x + c, m), y = m == 8 ? load8(P->y + c) : loadn(P->y + c, m);
        const v8f rho = m == 8 ? load8(P->rho + c) : loadn(P->rho + c, m);
        const v8f xx = x * x, xy = x * y, yy = y * y;
        const v8f vx = rho * qx[0] + AFFINE(qx, x, y, xx, xy, yy), vy = rho * qy[0] + AFFINE(qy, x, y, xx, xy, yy);
        if (m == 8) {
            store8(vx, mx + c);
            store8(vy, my + c);
        } else {
            memcpy(mx + c, &vx, (size_t)m * sizeof(float));
            memcpy(my + c, &vy, (size_t)m * sizeof(float));
        }
    }
}

EVN_KERNEL_VARIANTS(void, evn_parallax_model, evn_parallax_model, parallax_model,
                    (const evn_parallax_cells *cells, ptrdiff_t frame, ptrdiff_t start, ptrdiff_t end, float *mx,
                     float *my),
                    (cells, frame, start, end, mx, my))
