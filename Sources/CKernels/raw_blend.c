// The robust raw merge blended with the Wiener merge anchored on the reference
// (evanesco_raw.h): the robust merge votes what moved out but its gather blurs texture a
// little; the Wiener merge keeps the reference's detail but also whatever moved in it (what
// moved in the others the vote has replaced before it merges them). Where nothing moved in the
// reference, each block takes from the Wiener merge as much as the two merges differ beyond the
// noise.
#include "evanesco_raw.h"
#include "evanesco_kernels.h"
#include "vectors.h"
#include <stdlib.h>
#include <string.h>

typedef double v4d __attribute__((ext_vector_type(4)));

/// Samples x ... x + 3 of four rows `s`, each sample's four rows in the lanes of one vector
/// (`out[j]`: sample x + j), as doubles.
EVN_INLINE void row_columns(const float *const s[4], int x, v4d out[4]) {
    v4f r0, r1, r2, r3;
    memcpy(&r0, s[0] + x, sizeof r0);
    memcpy(&r1, s[1] + x, sizeof r1);
    memcpy(&r2, s[2] + x, sizeof r2);
    memcpy(&r3, s[3] + x, sizeof r3);
    const v4f t0 = __builtin_shufflevector(r0, r1, 0, 4, 1, 5), t1 = __builtin_shufflevector(r0, r1, 2, 6, 3, 7);
    const v4f t2 = __builtin_shufflevector(r2, r3, 0, 4, 1, 5), t3 = __builtin_shufflevector(r2, r3, 2, 6, 3, 7);
    out[0] = __builtin_convertvector(__builtin_shufflevector(t0, t2, 0, 1, 4, 5), v4d);
    out[1] = __builtin_convertvector(__builtin_shufflevector(t0, t2, 2, 3, 6, 7), v4d);
    out[2] = __builtin_convertvector(__builtin_shufflevector(t1, t3, 0, 1, 4, 5), v4d);
    out[3] = __builtin_convertvector(__builtin_shufflevector(t1, t3, 2, 3, 6, 7), v4d);
}

/// The four rows' means of samples x ... x + 3 (`m[j]`: sample x + j, the rows in its lanes), as
/// floats into the rows `t`.
EVN_INLINE void store_columns(float *const t[4], int x, const v4d m[4]) {
    const v4f c0 = __builtin_convertvector(m[0], v4f), c1 = __builtin_convertvector(m[1], v4f);
    const v4f c2 = __builtin_convertvector(m[2], v4f), c3 = __builtin_convertvector(m[3], v4f);
    const v4f t0 = __builtin_shufflevector(c0, c1, 0, 4, 1, 5), t1 = __builtin_shufflevector(c0, c1, 2, 6, 3, 7);
    const v4f t2 = __builtin_shufflevector(c2, c3, 0, 4, 1, 5), t3 = __builtin_shufflevector(c2, c3, 2, 6, 3, 7);
    const v4f o0 = __builtin_shufflevector(t0, t2, 0, 1, 4, 5), o1 = __builtin_shufflevector(t0, t2, 2, 3, 6, 7);
    const v4f o2 = __builtin_shufflevector(t1, t3, 0, 1, 4, 5), o3 = __builtin_shufflevector(t1, t3, 2, 3, 6, 7);
    memcpy(t[0] + x, &o0, sizeof o0);
    memcpy(t[1] + x, &o1, sizeof o1);
    memcpy(t[2] + x, &o2, sizeof o2);
    memcpy(t[3] + x, &o3, sizeof o3);
}

/// The means of rows y0 ... y0 + 3 of `src` over [x - lo, x + hi] (clamped to the row), into
/// the ring's rows y % rows. Four rows in the lanes of one vector: each row's running sum is a
/// chain of dependent additions and a division per sample, which one row alone leaves waiting
/// on each other; every lane does what one row did, in the same order. Past the last row a lane
/// repeats it (the same sums, written to it again). Where the window lies inside the row (one
/// sample in, one out, the same count), four samples at a time, loaded and stored as vectors and
/// turned between samples and rows in registers: the same sums in the same order.
EVN_INLINE void row_means(const float *src, int w, int h, int y0, int lo, int hi, float *ring, int rows) {
    const float *s[4];
    float *t[4];
    for (int i = 0; i < 4; i++) {
        const int r = y0 + i < h ? y0 + i : h - 1;
        s[i] = src + (ptrdiff_t)r * w;
        t[i] = ring + (ptrdiff_t)(r % rows) * w;
    }
    v4d sum = 0;
    int a = 0, b = -1; // the window [a, b] summed so far
    // From x = lo + 1 to w - 1 - hi the window moves by one whole sample.
    const int inside = lo + 1, last = w - 1 - hi;
    const double count = lo + hi + 1;
    int x = 0;
    while (x < w) {
        if (x == inside && b == x - 1 + hi && a == x - 1 - lo) {
            for (; x + 3 <= last; x += 4) {
                v4d in[4], out[4], m[4];
                row_columns(s, x + hi, in);
                row_columns(s, x - 1 - lo, out);
                for (int j = 0; j < 4; j++) {
                    sum += in[j];
                    sum -= out[j];
                    m[j] = sum / count;
                }
                store_columns(t, x, m);
            }
            b = x - 1 + hi, a = x - 1 - lo;
            if (x >= w) break;
        }
        const int na = x - lo < 0 ? 0 : x - lo, nb = x + hi >= w ? w - 1 : x + hi;
        while (b < nb) {
            b++;
            sum += (v4d){s[0][b], s[1][b], s[2][b], s[3][b]};
        }
        while (a < na) {
            sum -= (v4d){s[0][a], s[1][a], s[2][a], s[3][a]};
            a++;
        }
        const v4d m = sum / (double)(b - a + 1);
        t[0][x] = (float)m.x, t[1][x] = (float)m.y, t[2][x] = (float)m.z, t[3][x] = (float)m.w;
        x++;
    }
}

/// Mean over the window [x - lo, x + hi] x [y - lo, y + hi] clamped to the plane, of `src`
/// (width x height) into `dst`, which may be `src`: running sums in double, along the rows and
/// then down the columns. Only the rows' means the window spans are kept (a ring of them, in
/// cache), so the plane is read once and written once. -1: out of memory.
EVN_INLINE int box_mean_body(const float *src, int w, int h, int lo, int hi, float *dst) {
    // Alive at once: the window's rows, the one leaving it, and a group of four ahead.
    const int rows = lo + hi + 8;
    float *ring = evn_scratch_alloc("blend", sizeof(float) * (size_t)rows * (size_t)w, 0);
    double *col = evn_scratch_alloc("blend", sizeof(double) * (size_t)w, 1);
    if (!ring || !col) {
        free(ring), free(col);
        return -1;
    }
    // Rows [0, done) have their means. A group is computed when the window first reaches it,
    // at its first row nb >= y: every row it reads from `src` is one `dst` has not written yet.
    int done = 0, a = 0, b = -1;
    for (int y = 0; y < h; y++) {
        const int na = y - lo < 0 ? 0 : y - lo, nb = y + hi >= h ? h - 1 : y + hi;
        for (; done <= nb; done += 4) row_means(src, w, h, done, lo, hi, ring, rows);
        while (b < nb) {
            b++;
            const float *t = ring + (ptrdiff_t)(b % rows) * w;
            for (int x = 0; x < w; x++) col[x] += t[x];
        }
        while (a < na) {
            const float *t = ring + (ptrdiff_t)(a % rows) * w;
            for (int x = 0; x < w; x++) col[x] -= t[x];
            a++;
        }
        const double n = b - a + 1;
        for (int x = 0; x < w; x++) dst[(ptrdiff_t)y * w + x] = (float)(col[x] / n);
    }
    free(ring), free(col);
    return 0;
}

// Compiled twice (AVX2 and portable), the same operations in the same order: the same bits.
EVN_STATIC_KERNEL_VARIANTS(int, box_mean, box_mean, box_mean_body,
                           (const float *src, int w, int h, int lo, int hi, float *dst), (src, w, h, lo, hi, dst))

/// Channel `ch` of a four-channel plane image as floats.
static void channel(const uint16_t *src, ptrdiff_t cells, int ch, float *dst) {
    for (ptrdiff_t i = 0; i < cells; i++) dst[i] = src[4 * i + ch];
}

/// The noise variance at the level of the window [x - lo, x + hi] x [y - lo, y + hi] around
/// each cell of channel `ch` of `r` (in `s2`). -1: out of memory.
static int window_noise(const float *r, int w, int h, int lo, int hi, const evn_raw_blend_params *p, int ch,
                        float *s2) {
    const ptrdiff_t cells = (ptrdiff_t)w * h;
    if (box_mean(r, w, h, lo, hi, s2) != 0) return -1;
    for (ptrdiff_t i = 0; i < cells; i++) {
        const float v = p->slope[ch] * s2[i] + p->intercept[ch];
        s2[i] = v > 0 ? v : 0;
    }
    return 0;
}

/// The noise variance of the 8 x 8 block around each cell of channel `ch` of `r` (in `s2`).
/// -1: out of memory.
static int block_noise(const float *r, int w, int h, const evn_raw_blend_params *p, int ch, float *s2) {
    return window_noise(r, w, h, 4, 3, p, ch, s2);
}

/// The local contrast of `rv` (Sobel / 8, squared) into `g`.
static void gradient_energy(const float *rv, int w, int h, float *g) {
    for (int y = 0; y < h; y++) {
        const float *up = rv + (ptrdiff_t)(y > 0 ? y - 1 : 0) * w, *mid = rv + (ptrdiff_t)y * w;
        const float *dn = rv + (ptrdiff_t)(y + 1 < h ? y + 1 : h - 1) * w;
        for (int x = 0; x < w; x++) {
            const int l = x > 0 ? x - 1 : 0, rr = x + 1 < w ? x + 1 : w - 1;
            const float gx = (up[rr] + 2 * mid[rr] + dn[rr] - up[l] - 2 * mid[l] - dn[l]) / 8;
            const float gy = (dn[l] + 2 * dn[x] + dn[rr] - up[l] - 2 * up[x] - up[rr]) / 8;
            g[(ptrdiff_t)y * w + x] = gx * gx + gy * gy;
        }
    }
}

/// The 2 x 2 means of `src` (w x h) into `dst` ((w + 1) / 2 x (h + 1) / 2; an odd last row or
/// column repeats itself).
static void halve(const float *src, int w, int h, float *dst) {
    const int w2 = (w + 1) / 2, h2 = (h + 1) / 2;
    for (int y = 0; y < h2; y++) {
        const float *a = src + (ptrdiff_t)(2 * y) * w, *b = src + (ptrdiff_t)(2 * y + 1 < h ? 2 * y + 1 : 2 * y) * w;
        float *d = dst + (ptrdiff_t)y * w2;
        for (int x = 0; x < w2; x++) {
            const int x0 = 2 * x, x1 = 2 * x + 1 < w ? 2 * x + 1 : 2 * x;
            d[x] = 0.25f * (a[x0] + a[x1] + b[x0] + b[x1]);
        }
    }
}

/// The wide test (``evn_raw_blend_params``) on the 2 x 2 means of the squared distances `d2`,
/// the gradient energy `g` and the robust merge `rv` (each w x h), set into `moving`. -1: out of
/// memory.
static int wide_guard(const float *d2, const float *g, const float *rv, int w, int h, const evn_raw_blend_params *p,
                      int ch, uint8_t *moving) {
    const int w2 = (w + 1) / 2, h2 = (h + 1) / 2, R = p->wide_radius;
    const ptrdiff_t half = (ptrdiff_t)w2 * h2;
    float *e = evn_scratch_alloc("blend", sizeof(float) * half, 0),
          *gh = evn_scratch_alloc("blend", sizeof(float) * half, 0);
    float *n = evn_scratch_alloc("blend", sizeof(float) * half, 0);
    int ok = e && gh && n;
    if (ok) {
        halve(d2, w, h, e);
        halve(g, w, h, gh);
        halve(rv, w, h, n);
        ok = box_mean(e, w2, h2, R, R, e) == 0 && box_mean(gh, w2, h2, R, R, gh) == 0 &&
             window_noise(n, w2, h2, R, R, p, ch, n) == 0;
    }
    if (ok) {
        for (ptrdiff_t i = 0; i < half; i++) n[i] = e[i] > p->wide_guard * n[i] + p->wide_contrast * gh[i];
        for (int y = 0; y < h; y++) {
            const float *row = n + (ptrdiff_t)(y / 2) * w2;
            uint8_t *m = moving + (ptrdiff_t)y * w;
            for (int x = 0; x < w; x++) m[x] |= row[x / 2] != 0;
        }
    }
    free(e), free(gh), free(n);
    return ok ? 0 : -1;
}

int evn_raw_blend_guard(const uint16_t *r, const uint16_t *ref, int32_t w, int32_t h, int32_t ch,
                        const evn_raw_blend_params *p, uint8_t *moving) {
    const ptrdiff_t cells = (ptrdiff_t)w * h;
    float *rv = evn_scratch_alloc("blend", sizeof(float) * cells, 0),
          *d2 = evn_scratch_alloc("blend", sizeof(float) * cells, 0);
    float *g = evn_scratch_alloc("blend", sizeof(float) * cells, 0),
          *s2 = evn_scratch_alloc("blend", sizeof(float) * cells, 0);
    int ok = rv && d2 && g && s2;
    if (ok) {
        channel(r, cells, ch, rv);
        for (ptrdiff_t i = 0; i < cells; i++) {
            const float d = (float)ref[4 * i + ch] - rv[i];
            d2[i] = d * d;
        }
        // The robust merge's local contrast: how far its gather's slight blur, or a frame's
        // slight misregistration, takes a frame from it where nothing moved.
        gradient_energy(rv, w, h, g);
        memset(moving, 0, (size_t)cells);
        if (p->wide_guard > 0) ok = wide_guard(d2, g, rv, w, h, p, ch, moving) == 0;
        ok = ok && box_mean(d2, w, h, 2, 1, d2) == 0 && box_mean(g, w, h, 2, 1, g) == 0 &&
             block_noise(rv, w, h, p, ch, s2) == 0;
    }
    if (ok) {
        for (ptrdiff_t i = 0; i < cells; i++) moving[i] |= d2[i] > p->guard * (s2[i] + p->contrast * g[i]);
    }
    free(rv), free(d2), free(g), free(s2);
    return ok ? 0 : -1;
}

int evn_raw_blend_dilate(uint8_t *mask, int32_t w, int32_t h, int32_t radius) {
    const ptrdiff_t cells = (ptrdiff_t)w * h;
    float *m = evn_scratch_alloc("blend", sizeof(float) * cells, 0);
    int ok = m != NULL;
    if (ok) {
        for (ptrdiff_t i = 0; i < cells; i++) m[i] = mask[i] ? 1.0f : 0.0f;
        ok = box_mean(m, w, h, radius, radius, m) == 0;
    }
    if (ok) {
        for (ptrdiff_t i = 0; i < cells; i++) mask[i] = m[i] > 0;
    }
    free(m);
    return ok ? 0 : -1;
}

int evn_raw_blend_vote_guard(const float *deviation, int32_t w, int32_t h, int32_t radius, float cap, float threshold,
                             uint8_t *moving) {
    const ptrdiff_t cells = (ptrdiff_t)w * h;
    float *m = evn_scratch_alloc("blend", sizeof(float) * cells, 0);
    int ok = m != NULL;
    if (ok) {
        for (ptrdiff_t i = 0; i < cells; i++) m[i] = deviation[i] < cap ? deviation[i] : cap;
        ok = box_mean(m, w, h, radius, radius, m) == 0;
    }
    if (ok) {
        for (ptrdiff_t i = 0; i < cells; i++) moving[i] |= m[i] > threshold;
    }
    free(m);
    return ok ? 0 : -1;
}

int evn_raw_blend_offset_guard(const int8_t *offset, int32_t w, int32_t h, int32_t channels, int32_t radius,
                               float threshold, uint8_t *moving) {
    const ptrdiff_t cells = (ptrdiff_t)w * h;
    float *m = evn_scratch_alloc("blend", sizeof(float) * cells, 0);
    float *sum = evn_scratch_alloc("blend", sizeof(float) * (size_t)cells, 1);
    int ok = m && sum && channels > 0;
    if (ok) {
        const float unit = (float)EVN_RAW_OFFSET_RANGE / 127.0f;
        for (int ch = 0; ch < channels && ok; ch++) {
            for (ptrdiff_t i = 0; i < cells; i++) m[i] = offset[i * channels + ch] * unit;
            ok = box_mean(m, w, h, radius, radius, m) == 0;
            for (ptrdiff_t i = 0; i < cells; i++) sum[i] += m[i] * m[i];
        }
    }
    if (ok) {
        for (int y = 0; y < h; y++) {
            const int rows = (y + radius < h ? y + radius : h - 1) - (y - radius > 0 ? y - radius : 0) + 1;
            for (int x = 0; x < w; x++) {
                const int columns = (x + radius < w ? x + radius : w - 1) - (x - radius > 0 ? x - radius : 0) + 1;
                const ptrdiff_t i = (ptrdiff_t)y * w + x;
                moving[i] |= sum[i] / channels > threshold / (float)(rows * columns);
            }
        }
    }
    free(m), free(sum);
    return ok ? 0 : -1;
}

int evn_raw_blend_fill_dense(uint8_t *mask, int32_t w, int32_t h, int32_t radius, float fraction) {
    const ptrdiff_t cells = (ptrdiff_t)w * h;
    ptrdiff_t set = 0;
    for (ptrdiff_t i = 0; i < cells; i++) set += mask[i] != 0;
    if (set == 0) return 0; // nothing moved (most static bursts): nothing to fill
    float *m = evn_scratch_alloc("blend", sizeof(float) * cells, 0);
    int ok = m != NULL;
    if (ok) {
        for (ptrdiff_t i = 0; i < cells; i++) m[i] = mask[i] ? 1.0f : 0.0f;
        ok = box_mean(m, w, h, radius, radius, m) == 0;
    }
    if (ok) {
        for (ptrdiff_t i = 0; i < cells; i++) mask[i] = mask[i] || m[i] > fraction;
    }
    free(m);
    return ok ? 0 : -1;
}

int evn_raw_blend_channel(const uint16_t *r, const uint16_t *wiener, const uint8_t *moving, int32_t w, int32_t h,
                          int32_t ch, const evn_raw_blend_params *p, uint16_t *out) {
    const ptrdiff_t cells = (ptrdiff_t)w * h;
    float *rv = evn_scratch_alloc("blend", sizeof(float) * cells, 0),
          *d = evn_scratch_alloc("blend", sizeof(float) * cells, 0);
    float *s2 = evn_scratch_alloc("blend", sizeof(float) * cells, 0);
    int ok = rv && d && s2;
    if (ok) {
        channel(r, cells, ch, rv);
        for (ptrdiff_t i = 0; i < cells; i++) {
            const float x = (float)wiener[4 * i + ch] - rv[i];
            d[i] = x * x;
        }
        ok = box_mean(d, w, h, 4, 3, d) == 0 && block_noise(rv, w, h, p, ch, s2) == 0;
    }
    if (ok) {
        for (ptrdiff_t i = 0; i < cells; i++) {
            const float a = moving[i] ? 0 : d[i] / (d[i] + p->beta * s2[i] + 1e-12f);
            const float v = rv[i] + a * ((float)wiener[4 * i + ch] - rv[i]);
            out[4 * i + ch] = (uint16_t)(v < 0 ? 0 : (v > 65535 ? 65535 : v + 0.5f));
        }
    }
    free(rv), free(d), free(s2);
    return ok ? 0 : -1;
}
