// The raw burst merge (evanesco_raw.h): every frame's samples gathered at the reference's
// photosites with a sharp kernel, whose weights are summed across frames, so that the frames
// whose samples land nearest a site count most; then a vote around the median with the sensor's
// noise model, so that what moved is left out.
#include "evanesco_raw.h"
#include "evanesco_kernels.h"
#include "vectors.h"
#include <math.h>
#include <stdlib.h>

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

static inline float lut_at(const float *lut, float t) {
    const int j = (int)(t * 64.0f + 0.5f);
    return lut[j < 0 ? 0 : (j > 64 ? 64 : j)];
}

/// The 2x2 neighbourhood of grid position (gx, gy): clamped pixel offsets (in samples) and the
/// kernel's four weights.
typedef struct {
    ptrdiff_t o00, o01, o10, o11;
    float w00, w01, w10, w11;
} quad;

/// floor(v) for |v| < 2^31, without a libm call.
static inline int floor_int(float v) {
    const int i = (int)v;
    return i - (v < (float)i);
}

/// One axis of a 2x2 neighbourhood at grid position g on a plane of n samples: its two sample
/// indices, clamped to the plane, in a and b, and the fraction of the way from a to b.
static inline float axis_taps(float g, int n, int *a, int *b) {
    const int i = floor_int(g);
    *a = clampi(i, 0, n - 1);
    *b = clampi(i + 1, 0, n - 1);
    return g - (float)i;
}

static inline quad quad_at(const evn_raw_frame *f, int c, const float *lut, float gx, float gy) {
    const int w = f->width;
    int x0, x1, y0, y1;
    const float tx = axis_taps(gx, w, &x0, &x1), ty = axis_taps(gy, f->height, &y0, &y1);
    const float wx0 = lut_at(lut, tx), wx1 = lut_at(lut, 1 - tx), wy0 = lut_at(lut, ty), wy1 = lut_at(lut, 1 - ty);
    quad q = {((ptrdiff_t)y0 * w + x0) * c,
              ((ptrdiff_t)y0 * w + x1) * c,
              ((ptrdiff_t)y1 * w + x0) * c,
              ((ptrdiff_t)y1 * w + x1) * c,
              wx0 * wy0,
              wx1 * wy0,
              wx0 * wy1,
              wx1 * wy1};
    return q;
}

/// A tap's weight, 0 for a missing sample when `missing` (a frame's `clipped_is_missing`).
#define TAP(w, s, missing) ((missing) && (s) == EVN_RAW_MISSING ? 0.0f : (w))

static inline void add_quad(const uint16_t *s, const quad *q, int missing, float scale, float *sum, float *wsum) {
    const float k = missing ? scale : 1.0f;
    const float w00 = TAP(q->w00 * k, s[q->o00], missing), w01 = TAP(q->w01 * k, s[q->o01], missing);
    const float w10 = TAP(q->w10 * k, s[q->o10], missing), w11 = TAP(q->w11 * k, s[q->o11], missing);
    *sum += s[q->o00] * w00 + s[q->o01] * w01 + s[q->o10] * w10 + s[q->o11] * w11;
    *wsum += w00 + w01 + w10 + w11;
}

static inline void field_value(const evn_raw_frame *f, float x, float y, float *dx, float *dy) {
    const float cell = (float)f->field_cell;
    float u = (x + 0.5f) / cell - 0.5f, v = (y + 0.5f) / cell - 0.5f;
    u = u < 0 ? 0 : (u > f->field_columns - 1 ? f->field_columns - 1 : u);
    v = v < 0 ? 0 : (v > f->field_rows - 1 ? f->field_rows - 1 : v);
    const int c0 = (int)u, r0 = (int)v;
    const int c1 = c0 + 1 < f->field_columns ? c0 + 1 : c0, r1 = r0 + 1 < f->field_rows ? r0 + 1 : r0;
    const float tx = u - c0, ty = v - r0;
    const int n = f->field_columns;
    const float *X = f->field_dx, *Y = f->field_dy;
    float top = X[r0 * n + c0] + (X[r0 * n + c1] - X[r0 * n + c0]) * tx;
    float bottom = X[r1 * n + c0] + (X[r1 * n + c1] - X[r1 * n + c0]) * tx;
    *dx = top + (bottom - top) * ty;
    top = Y[r0 * n + c0] + (Y[r0 * n + c1] - Y[r0 * n + c0]) * tx;
    bottom = Y[r1 * n + c0] + (Y[r1 * n + c1] - Y[r1 * n + c0]) * tx;
    *dy = top + (bottom - top) * ty;
}

/// Where point (px, py) lands through the homography `m` (into a frame of w x h cells): 0 when
/// it falls behind the camera (den <= 0) or outside the frame's cells. Without a branch (the
/// division runs even then, its result unused), so that a loop of it vectorises.
EVN_INLINE int project(const float *m, int w, int h, float px, float py, float *sx, float *sy) {
    const float den = m[6] * px + m[7] * py + m[8];
    *sx = (m[0] * px + m[1] * py + m[2]) / den;
    *sy = (m[3] * px + m[4] * py + m[5]) / den;
    return den > 1e-12f && *sx >= -0.5f && *sy >= -0.5f && *sx <= w - 0.5f && *sy <= h - 0.5f;
}

/// Where output cell (x, y) lands in frame `f`: through its field, then its homography;
/// 0 when it falls behind the camera (den <= 0) or outside the frame's cells.
EVN_INLINE int source_position(const evn_raw_frame *f, float px, float py, float *sx, float *sy) {
    if (f->field_dx) {
        float dx, dy;
        field_value(f, px, py, &dx, &dy);
        px += dx;
        py += dy;
    }
    return project(f->m, f->width, f->height, px, py, sx, sy);
}

typedef unsigned short v4u16 __attribute__((ext_vector_type(4)));

/// A pixel's four channels as floats.
#define load4u16(s)                                                                                                    \
    ({                                                                                                                 \
        v4u16 u_;                                                                                                      \
        memcpy(&u_, (s), sizeof u_);                                                                                   \
        __builtin_convertvector(u_, v4f);                                                                              \
    })

/// The 2x2 neighbourhood of grid position (gx, gy) with two kernels' weights: `a` from `lut_a`,
/// `b` from `lut_b` (the same sample offsets).
typedef struct {
    ptrdiff_t o00, o01, o10, o11;
    float a00, a01, a10, a11, b00, b01, b10, b11;
} quad2;

/// The neighbourhood of the sample offsets o (in cells) with the LUT indices jx0, jy0 of its
/// fractions along each axis.
EVN_INLINE quad2 quad2_from(const ptrdiff_t o[4], int jx0, int jy0, const float *lut_a, const float *lut_b) {
    const int jx1 = 64 - jx0, jy1 = 64 - jy0;
    const float ax0 = lut_a[jx0], ax1 = lut_a[jx1], ay0 = lut_a[jy0], ay1 = lut_a[jy1];
    const float bx0 = lut_b[jx0], bx1 = lut_b[jx1], by0 = lut_b[jy0], by1 = lut_b[jy1];
    quad2 q = {o[0] * 4,  o[1] * 4,  o[2] * 4,  o[3] * 4,  ax0 * ay0, ax1 * ay0,
               ax0 * ay1, ax1 * ay1, bx0 * by0, bx1 * by0, bx0 * by1, bx1 * by1};
    return q;
}

EVN_INLINE quad2 quad2_at(const evn_raw_frame *f, const float *lut_a, const float *lut_b, float gx, float gy) {
    const int w = f->width;
    int x0, x1, y0, y1;
    const float tx = axis_taps(gx, w, &x0, &x1), ty = axis_taps(gy, f->height, &y0, &y1);
    const ptrdiff_t o[4] = {(ptrdiff_t)y0 * w + x0, (ptrdiff_t)y0 * w + x1, (ptrdiff_t)y1 * w + x0,
                            (ptrdiff_t)y1 * w + x1};
    return quad2_from(o, (int)(tx * 64.0f + 0.5f), (int)(ty * 64.0f + 0.5f), lut_a, lut_b);
}

/// Cells whose source positions and neighbourhoods `bayer_row` works out together.
#define GATHER_CHUNK 64

/// Three neighbourhoods (a cell's own planes and each green's partner plane) of GATHER_CHUNK
/// cells: the four sample offsets (in cells) and the LUT indices of the two axes' fractions.
typedef struct {
    int32_t ok[GATHER_CHUNK];
    int32_t o00[3][GATHER_CHUNK], o01[3][GATHER_CHUNK], o10[3][GATHER_CHUNK], o11[3][GATHER_CHUNK];
    int32_t jx[3][GATHER_CHUNK], jy[3][GATHER_CHUNK];
} gather_plan;

/// `source_position` and `quad2_at`'s integer work for cells x0 ..< x0 + count of row y, with
/// the same float operations, in loops without a call or a branch, which vectorise (no field:
/// with one, `field_value` runs cell by cell as before). A cell outside the frame is planned at
/// position 0 and marked not ok.
EVN_INLINE void plan_cells(const evn_raw_frame *f, int32_t y, int32_t x0, int count, const float offsets[3][2],
                           gather_plan *g) {
    const int w = f->width, h = f->height;
    float sx[GATHER_CHUNK], sy[GATHER_CHUNK];
    for (int i = 0; i < count; i++) {
        float x, yy;
        const int ok = project(f->m, w, h, (float)(x0 + i), (float)y, &x, &yy);
        g->ok[i] = ok;
        sx[i] = ok ? x : 0;
        sy[i] = ok ? yy : 0;
    }
    for (int q = 0; q < 3; q++) {
        for (int i = 0; i < count; i++) {
            int xa, xb, ya, yb;
            const float tx = axis_taps(sx[i] + offsets[q][0], w, &xa, &xb);
            const float ty = axis_taps(sy[i] + offsets[q][1], h, &ya, &yb);
            g->o00[q][i] = ya * w + xa;
            g->o01[q][i] = ya * w + xb;
            g->o10[q][i] = yb * w + xa;
            g->o11[q][i] = yb * w + xb;
            g->jx[q][i] = (int)(tx * 64.0f + 0.5f);
            g->jy[q][i] = (int)(ty * 64.0f + 0.5f);
        }
    }
}

/// `quad2_at`'s result from a plan's neighbourhood q of cell i.
EVN_INLINE quad2 planned_quad(const gather_plan *g, int q, int i, const float *lut_a, const float *lut_b) {
    const ptrdiff_t o[4] = {g->o00[q][i], g->o01[q][i], g->o10[q][i], g->o11[q][i]};
    return quad2_from(o, g->jx[q][i], g->jy[q][i], lut_a, lut_b);
}

/// One cell of `bayer_row` from its three neighbourhoods; with `missing` (a constant where it is
/// inlined), samples of EVN_RAW_MISSING weigh nothing, and a channel none of whose samples weigh is 0.
EVN_INLINE void bayer_cell(const uint16_t *planes, quad2 q, quad2 g1, quad2 g2, int missing, float scale, float *v,
                           float *wt) {
    const v4f s00 = load4u16(planes + q.o00), s01 = load4u16(planes + q.o01);
    const v4f s10 = load4u16(planes + q.o10), s11 = load4u16(planes + q.o11);
    v4f w00 = {q.a00, q.b00, q.a00, q.b00}, w01 = {q.a01, q.b01, q.a01, q.b01};
    v4f w10 = {q.a10, q.b10, q.a10, q.b10}, w11 = {q.a11, q.b11, q.a11, q.b11};
    if (missing) {
        const v4f zero = 0;
        w00 *= scale;
        w01 *= scale;
        w10 *= scale;
        w11 *= scale;
        w00 = s00 == (float)EVN_RAW_MISSING ? zero : w00;
        w01 = s01 == (float)EVN_RAW_MISSING ? zero : w01;
        w10 = s10 == (float)EVN_RAW_MISSING ? zero : w10;
        w11 = s11 == (float)EVN_RAW_MISSING ? zero : w11;
    }
    v4f sum = s00 * w00 + s01 * w01 + s10 * w10 + s11 * w11;
    v4f wsum = w00 + w01 + w10 + w11;
    // Each green's partner plane: green 1 (channel 1) from channel 3's samples, and back.
    const uint16_t *p3 = planes + 3, *p1 = planes + 1;
    const float s1 = missing ? scale : 1.0f;
    const float a00 = TAP(g1.a00 * s1, p3[g1.o00], missing), a01 = TAP(g1.a01 * s1, p3[g1.o01], missing);
    const float a10 = TAP(g1.a10 * s1, p3[g1.o10], missing), a11 = TAP(g1.a11 * s1, p3[g1.o11], missing);
    sum.y += p3[g1.o00] * a00 + p3[g1.o01] * a01 + p3[g1.o10] * a10 + p3[g1.o11] * a11;
    wsum.y += a00 + a01 + a10 + a11;
    const float b00 = TAP(g2.a00 * s1, p1[g2.o00], missing), b01 = TAP(g2.a01 * s1, p1[g2.o01], missing);
    const float b10 = TAP(g2.a10 * s1, p1[g2.o10], missing), b11 = TAP(g2.a11 * s1, p1[g2.o11], missing);
    sum.w += p1[g2.o00] * b00 + p1[g2.o01] * b01 + p1[g2.o10] * b10 + p1[g2.o11] * b11;
    wsum.w += b00 + b01 + b10 + b11;
    v4f r = sum / wsum;
    if (missing) {
        const v4f zero = 0;
        r = wsum > 0 ? r : zero;
    }
    memcpy(v, &r, sizeof r);
    memcpy(wt, &wsum, sizeof wsum);
}

/// `evn_raw_gather_row` for a Bayer cell's four channels (red, green, blue, green): every
/// channel's own plane from one neighbourhood, four lanes at once (red and blue with the sparse
/// kernel's weights, the greens with the dense one's), and each green's partner plane. Without a
/// field, the cells' positions and neighbourhoods are planned GATHER_CHUNK at a time.
EVN_INLINE void bayer_row(const evn_raw_frame *f, const evn_raw_merge_params *p, int32_t y, int32_t x0, int32_t count,
                          float *value, float *weight, const float own[2], float part[4][2], int missing) {
    const uint16_t *planes = f->planes;
    // (The plan holds cell offsets in 32 bits: planes of 2^31 cells or more take the per-cell path.)
    if (!f->field_dx && (int64_t)f->width * f->height < INT32_MAX) {
        const float offsets[3][2] = {{own[0], own[1]}, {part[1][0], part[1][1]}, {part[3][0], part[3][1]}};
        gather_plan g;
        for (int32_t i0 = 0; i0 < count; i0 += GATHER_CHUNK) {
            const int n = count - i0 < GATHER_CHUNK ? count - i0 : GATHER_CHUNK;
            plan_cells(f, y, x0 + i0, n, offsets, &g);
            for (int i = 0; i < n; i++) {
                float *v = value + (ptrdiff_t)(i0 + i) * 4, *wt = weight + (ptrdiff_t)(i0 + i) * 4;
                if (!g.ok[i]) {
                    memset(v, 0, 4 * sizeof(float));
                    memset(wt, 0, 4 * sizeof(float));
                    continue;
                }
                bayer_cell(planes, planned_quad(&g, 0, i, p->lut, p->lut_dense),
                           planned_quad(&g, 1, i, p->lut_dense, p->lut_dense),
                           planned_quad(&g, 2, i, p->lut_dense, p->lut_dense), missing, f->weight_scale, v, wt);
            }
        }
        return;
    }
    for (int i = 0; i < count; i++) {
        float sx, sy;
        float *v = value + (ptrdiff_t)i * 4, *wt = weight + (ptrdiff_t)i * 4;
        if (!source_position(f, (float)(x0 + i), (float)y, &sx, &sy)) {
            memset(v, 0, 4 * sizeof(float));
            memset(wt, 0, 4 * sizeof(float));
            continue;
        }
        bayer_cell(planes, quad2_at(f, p->lut, p->lut_dense, sx + own[0], sy + own[1]),
                   quad2_at(f, p->lut_dense, p->lut_dense, sx + part[1][0], sy + part[1][1]),
                   quad2_at(f, p->lut_dense, p->lut_dense, sx + part[3][0], sy + part[3][1]), missing, f->weight_scale,
                   v, wt);
    }
}

static void bayer_row_portable(const evn_raw_frame *f, const evn_raw_merge_params *p, int32_t y, int32_t x0,
                               int32_t count, float *value, float *weight, const float own[2], float part[4][2]) {
    if (f->clipped_is_missing) bayer_row(f, p, y, x0, count, value, weight, own, part, 1);
    else bayer_row(f, p, y, x0, count, value, weight, own, part, 0);
}

EVN_AVX2 static void bayer_row_avx2(const evn_raw_frame *f, const evn_raw_merge_params *p, int32_t y, int32_t x0,
                                    int32_t count, float *value, float *weight, const float own[2], float part[4][2]) {
    if (f->clipped_is_missing) bayer_row(f, p, y, x0, count, value, weight, own, part, 1);
    else bayer_row(f, p, y, x0, count, value, weight, own, part, 0);
}

void evn_raw_gather_row(const evn_raw_frame *f, const evn_raw_merge_params *p, int32_t y, int32_t x0, int32_t count,
                        float *value, float *weight) {
    const int c = p->channels;
    // Each channel's grid position is the cell centre's source position plus a constant: its
    // site through the frame's Jacobian, minus its own offset; for a hand-held frame this is
    // within a few thousandths of a plane pixel of the cell centre's, so one neighbourhood
    // serves every channel's own plane (its weights from the mean of their offsets), and one
    // more each green's partner plane.
    float own[2] = {0, 0};
    for (int ch = 0; ch < c; ch++) {
        own[0] += (f->site[ch][0] - f->offset[ch][0]) / c;
        own[1] += (f->site[ch][1] - f->offset[ch][1]) / c;
    }
    float part[4][2];
    for (int ch = 0; ch < c; ch++) {
        const int k = p->partner[ch];
        if (k < 0) continue;
        part[ch][0] = f->site[ch][0] - f->offset[k][0];
        part[ch][1] = f->site[ch][1] - f->offset[k][1];
    }
    if (c == 4 && p->partner[0] < 0 && p->partner[1] == 3 && p->partner[2] < 0 && p->partner[3] == 1) {
        if (evn_cpu_has_avx2()) bayer_row_avx2(f, p, y, x0, count, value, weight, own, part);
        else bayer_row_portable(f, p, y, x0, count, value, weight, own, part);
        return;
    }
    for (int i = 0; i < count; i++) {
        float sx, sy;
        float *v = value + (ptrdiff_t)i * c, *wt = weight + (ptrdiff_t)i * c;
        if (!source_position(f, (float)(x0 + i), (float)y, &sx, &sy)) {
            for (int ch = 0; ch < c; ch++) v[ch] = wt[ch] = 0;
            continue;
        }
        const quad sparse = quad_at(f, c, p->lut, sx + own[0], sy + own[1]);
        const quad dense = quad_at(f, c, p->lut_dense, sx + own[0], sy + own[1]);
        for (int ch = 0; ch < c; ch++) {
            float sum = 0, wsum = 0;
            const int k = p->partner[ch];
            if (k < 0) {
                add_quad(f->planes + ch, &sparse, f->clipped_is_missing, f->weight_scale, &sum, &wsum);
            } else {
                add_quad(f->planes + ch, &dense, f->clipped_is_missing, f->weight_scale, &sum, &wsum);
                const quad q = quad_at(f, c, p->lut_dense, sx + part[ch][0], sy + part[ch][1]);
                add_quad(f->planes + k, &q, f->clipped_is_missing, f->weight_scale, &sum, &wsum);
            }
            v[ch] = wsum > 0 ? sum / wsum : 0;
            wt[ch] = wsum;
        }
    }
}

void evn_raw_vote_prepare(const float *value, const float *weight, ptrdiff_t frame_stride, int32_t frames,
                          ptrdiff_t length, ptrdiff_t stride, float *sorted, float *counts) {
    for (ptrdiff_t j = 0; j < length; j++) counts[j] = 0;
    for (int k = 0; k < frames; k++) {
        const float *v = value + k * frame_stride, *w = weight + k * frame_stride;
        float *s = sorted + k * stride;
        for (ptrdiff_t j = 0; j < length; j++) {
            s[j] = w[j] > 0 ? v[j] : INFINITY;
            counts[j] += w[j] > 0 ? 1.0f : 0.0f;
        }
    }
}

/// The middle one or two of the first `m` of a value's sorted frames (0 when none).
static inline float median_at(const float *sorted, ptrdiff_t stride, ptrdiff_t j, int m) {
    if (m <= 0) return 0;
    const float a = sorted[(ptrdiff_t)((m - 1) / 2) * stride + j], b = sorted[(ptrdiff_t)(m / 2) * stride + j];
    return 0.5f * (a + b);
}

void evn_raw_vote_medians(const float *sorted, const float *counts, ptrdiff_t length, ptrdiff_t stride, float *med) {
    for (ptrdiff_t j = 0; j < length; j++) med[j] = median_at(sorted, stride, j, (int)counts[j]);
}

void evn_raw_vote_deviations(const float *value, const float *weight, ptrdiff_t frame_stride, const float *med,
                             int32_t frames, ptrdiff_t length, ptrdiff_t stride, float *dev) {
    for (int k = 0; k < frames; k++) {
        const float *v = value + k * frame_stride, *w = weight + k * frame_stride;
        float *d = dev + k * stride;
        for (ptrdiff_t j = 0; j < length; j++) d[j] = w[j] > 0 ? fabsf(v[j] - med[j]) : INFINITY;
    }
}

/// Cells a chunk of evn_raw_merge_cells works on at a time (its per-sample arrays on the stack).
#define MERGE_CHUNK 64

/// One chunk of evn_raw_merge_cells: cells i0 ..< i0 + ci. Every loop over the chunk's samples
/// runs with the frames outside, so that it vectorises; each sample's sums still add the frames
/// in order, so the results are those of a loop over frames per sample, to the bit.
EVN_INLINE void merge_chunk(float *value, const float *weight, ptrdiff_t frame_stride, const float *counts,
                            const float *medians, const float *dev, const evn_raw_merge_params *p, int32_t i0,
                            int32_t ci, ptrdiff_t stride, float *out, uint16_t *kept, int16_t *best, float *refdev,
                            int8_t *refoff) {
    const int n = p->frames, c = p->channels, method = p->method, length = ci * c;
    const ptrdiff_t j0 = (ptrdiff_t)i0 * c;
    float med[MERGE_CHUNK * 4], limit[MERGE_CHUNK * 4], sum[MERGE_CHUNK * 4], wsum[MERGE_CHUNK * 4];
    float bd[MERGE_CHUNK];
    int covered[MERGE_CHUNK * 4], keptCount[MERGE_CHUNK], b[MERGE_CHUNK];
    int ok[MERGE_CHUNK * 4];
    const int replacing = p->replace_beyond > 0 && method == 1 && dev;
    for (int j = 0; j < length; j++) {
        const int ch = j % c, m = counts ? (int)counts[j0 + j] : 1;
        covered[j] = m;
        med[j] = medians ? medians[j0 + j] : 0;
        limit[j] = INFINITY;
        sum[j] = wsum[j] = 0;
        if (!dev || m == 0) continue;
        const float spread = 1.4826f * median_at(dev, stride, j0 + j, m);
        if (method == 3) {
            limit[j] = p->kappa * (spread + 1);
        } else {
            float noise = p->slope[ch] * med[j] + p->intercept[ch];
            noise = noise > 0 ? noise : 0;
            limit[j] = p->kappa * sqrtf(spread * spread + noise);
        }
    }
    if (refdev || refoff) {
        // The reference's distance from the vote per channel, in units of limit / kappa.
        const float *vr = value + (ptrdiff_t)p->reference * frame_stride + j0;
        const float *wr = weight + (ptrdiff_t)p->reference * frame_stride + j0;
        const float range = EVN_RAW_OFFSET_RANGE, scale = 127.0f / EVN_RAW_OFFSET_RANGE;
        for (int i = 0; i < ci; i++) {
            float sum = 0;
            for (int ch = 0; ch < c; ch++) {
                const int j = i * c + ch;
                const float q = limit[j] / p->kappa;
                const float d = wr[j] > 0 && q < INFINITY ? (vr[j] - med[j]) / sqrtf(q * q + 1e-12f) : 0.0f;
                sum += d * d;
                if (refoff) refoff[j0 + j] = (int8_t)lrintf((d > range ? range : (d < -range ? -range : d)) * scale);
            }
            if (refdev) refdev[i0 + i] = sum / c;
        }
    }
    // Robust keeps a frame only where all its channels agree (a frame covers a cell or it does
    // not); sigma-clip judges each channel alone; the mean keeps every covering frame.
    for (int i = 0; i < ci; i++) keptCount[i] = 0;
    for (int k = 0; k < n; k++) {
        const float *v = value + k * frame_stride + j0, *w = weight + k * frame_stride + j0;
        for (int i = 0; i < ci; i++) {
            int all = 1;
            for (int ch = 0; ch < c; ch++) {
                const int j = i * c + ch;
                all &= w[j] > 0 && fabsf(v[j] - med[j]) <= limit[j];
            }
            for (int ch = 0; ch < c; ch++) ok[i * c + ch] = all;
            keptCount[i] += all;
        }
        if (method == 2) continue;
        for (int j = 0; j < length; j++) {
            const int use = method == 1 ? ok[j] : (w[j] > 0 && fabsf(v[j] - med[j]) <= limit[j]);
            sum[j] += use ? w[j] * v[j] : 0.0f;
            wsum[j] += use ? w[j] : 0.0f;
        }
    }
    for (int j = 0; j < length; j++) {
        const float none = p->uncovered, fallback = medians ? med[j] : none;
        out[j0 + j] = covered[j] == 0 ? none : method == 2 ? med[j] : (wsum[j] > 0 ? sum[j] / wsum[j] : fallback);
    }
    if (kept) {
        for (int i = 0; i < ci; i++) kept[i0 + i] = (uint16_t)(method == 2 ? 0 : keptCount[i]);
    }
    if (best) {
        for (int i = 0; i < ci; i++) {
            bd[i] = INFINITY;
            b[i] = -1;
        }
        for (int k = 0; k < n; k++) {
            const float *v = value + k * frame_stride + j0, *w = weight + k * frame_stride + j0;
            for (int i = 0; i < ci; i++) {
                float d = 0;
                int all = 1;
                for (int ch = 0; ch < c; ch++) {
                    const int j = i * c + ch;
                    all &= w[j] > 0;
                    d += (v[j] - out[j0 + j]) * (v[j] - out[j0 + j]);
                }
                if (all && d < bd[i]) {
                    bd[i] = d;
                    b[i] = k;
                }
            }
        }
        for (int i = 0; i < ci; i++) best[i0 + i] = (int16_t)b[i];
    }
    // Last (the loops above read the frames' own values): a frame far from the vote in any
    // channel of a cell takes the merged values there, the reference only where it has none.
    // Far is beyond the limit, so only cells where the vote turned a covering frame away are
    // looked at.
    if (replacing) {
        // The reference's missing samples (it clipped there, a bracket's longer frame) too: the
        // Wiener merge's tiles then hold what the frames that saw it agree on.
        if (p->reference >= 0) {
            float *vr = value + p->reference * frame_stride + j0;
            const float *wr = weight + p->reference * frame_stride + j0;
            for (int j = 0; j < length; j++) vr[j] = wr[j] > 0 ? vr[j] : out[j0 + j];
        }
        for (int i = 0; i < ci; i++) {
            if (keptCount[i] >= covered[i * c]) continue;
            for (int k = 0; k < n; k++) {
                if (k == p->reference) continue;
                float *v = value + k * frame_stride + j0 + i * c;
                const float *w = weight + k * frame_stride + j0 + i * c;
                int off = 0;
                for (int ch = 0; ch < c; ch++)
                    off |= w[ch] > 0 && fabsf(v[ch] - med[i * c + ch]) > p->replace_beyond * limit[i * c + ch];
                if (off)
                    for (int ch = 0; ch < c; ch++) v[ch] = out[j0 + i * c + ch];
            }
        }
    }
}

EVN_INLINE void merge_cells(float *value, const float *weight, ptrdiff_t frame_stride, const float *counts,
                            const float *medians, const float *dev, const evn_raw_merge_params *p, int32_t count,
                            ptrdiff_t stride, float *out, uint16_t *kept, int16_t *best, float *refdev,
                            int8_t *refoff) {
    // The reference's distance needs the vote's limits (robust, with a reference).
    if (!dev || p->method != 1 || p->reference < 0) refdev = NULL, refoff = NULL;
    for (int32_t i0 = 0; i0 < count; i0 += MERGE_CHUNK) {
        const int32_t ci = count - i0 < MERGE_CHUNK ? count - i0 : MERGE_CHUNK;
        merge_chunk(value, weight, frame_stride, counts, medians, dev, p, i0, ci, stride, out, kept, best, refdev,
                    refoff);
    }
}

EVN_KERNEL_VARIANTS(void, evn_raw_merge_cells, raw_merge_cells, merge_cells,
                    (float *value, const float *weight, ptrdiff_t frame_stride, const float *counts,
                     const float *medians, const float *dev, const evn_raw_merge_params *p, int32_t count,
                     ptrdiff_t stride, float *out, uint16_t *kept, int16_t *best, float *reference_deviation,
                     int8_t *reference_offset),
                    (value, weight, frame_stride, counts, medians, dev, p, count, stride, out, kept, best,
                     reference_deviation, reference_offset))
