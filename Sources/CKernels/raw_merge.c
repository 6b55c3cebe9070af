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

/// Where output cell (x, y) lands in frame `f`, as `source_position`; where it lands outside,
/// 0 with the cell's four values and weights `v` and `wt` set to 0.
EVN_INLINE int cell_source(const evn_raw_frame *f, int32_t y, int32_t x, float *v, float *wt, float *sx, float *sy) {
    if (source_position(f, (float)x, (float)y, sx, sy)) return 1;
    memset(v, 0, 4 * sizeof(float));
    memset(wt, 0, 4 * sizeof(float));
    return 0;
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
        if (!cell_source(f, y, x0 + i, v, wt, &sx, &sy)) continue;
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

/// The channel at each site of a Bayer frame's 2x2 cell (row-major), from its sites' offsets.
static void site_channels(const evn_raw_frame *f, int chan[4]) {
    for (int ch = 0; ch < 4; ch++) chan[(f->offset[ch][1] > 0) * 2 + (f->offset[ch][0] > 0)] = ch;
}

/// The mosaic's sample at full-resolution pixel (X, Y): its cell clamped to the planes, its site kept.
static inline float mosaic_at(const evn_raw_frame *f, const int chan[4], int X, int Y) {
    const int cx = clampi(X >> 1, 0, f->width - 1), cy = clampi(Y >> 1, 0, f->height - 1);
    return f->planes[((ptrdiff_t)cy * f->width + cx) * 4 + chan[(Y & 1) * 2 + (X & 1)]];
}

/// Hamilton-Adams green from a site's sample c0, its neighbours one pixel left, right, up and
/// down, and its same-colour neighbours two pixels away.
EVN_INLINE uint16_t hamilton_adams(float c0, float l1, float r1, float l2, float r2, float u1, float d1, float u2,
                                   float d2) {
    const float lh = 2 * c0 - l2 - r2, lv = 2 * c0 - u2 - d2;
    const float dh = fabsf(l1 - r1) + fabsf(lh), dv = fabsf(u1 - d1) + fabsf(lv);
    const float gh = 0.5f * (l1 + r1) + 0.25f * lh, gv = 0.5f * (u1 + d1) + 0.25f * lv;
    float g = dh < dv ? gh : (dv < dh ? gv : 0.5f * (gh + gv));
    g = g < 0 ? 0 : (g > 65535 ? 65535 : g);
    return (uint16_t)(g + 0.5f);
}

/// `evn_raw_green_sites` at cell (x, y), from samples anywhere (clamped to the planes).
static void green_sites_cell(const evn_raw_frame *f, const int chan[4], int x, int y, uint16_t *out) {
    for (int k = 0; k < 2; k++) {
        const int ch = 2 * k; // red, then blue
        const int X = 2 * x + (f->offset[ch][0] > 0), Y = 2 * y + (f->offset[ch][1] > 0);
        out[k] =
            hamilton_adams(mosaic_at(f, chan, X, Y), mosaic_at(f, chan, X - 1, Y), mosaic_at(f, chan, X + 1, Y),
                           mosaic_at(f, chan, X - 2, Y), mosaic_at(f, chan, X + 2, Y), mosaic_at(f, chan, X, Y - 1),
                           mosaic_at(f, chan, X, Y + 1), mosaic_at(f, chan, X, Y - 2), mosaic_at(f, chan, X, Y + 2));
    }
}

EVN_INLINE void green_sites_rows(const evn_raw_frame *f, int32_t y0, int32_t y1, uint16_t *green, float *rows) {
    int chan[4];
    site_channels(f, chan);
    const int w = f->width, h = f->height;
    for (int32_t y = y0; y < y1; y++) {
        uint16_t *out = green + (ptrdiff_t)y * w * 2;
        if (!rows || y == 0 || y == h - 1 || w < 3) {
            for (int x = 0; x < w; x++) green_sites_cell(f, chan, x, y, out + 2 * x);
            continue;
        }
        // Rows y - 1, y and y + 1 of each channel, as floats: rows[(r * 4 + ch) * w + x].
        for (int r = 0; r < 3; r++) {
            const uint16_t *src = f->planes + (ptrdiff_t)(y - 1 + r) * w * 4;
            for (int ch = 0; ch < 4; ch++) {
                float *d = rows + (ptrdiff_t)(r * 4 + ch) * w;
                for (int x = 0; x < w; x++) d[x] = src[x * 4 + ch];
            }
        }
        for (int k = 0; k < 2; k++) {
            const int ch = 2 * k, sx = f->offset[ch][0] > 0, sy = f->offset[ch][1] > 0;
            // The greens beside the site on its row, and above and below it on its column.
            const int gh = chan[sy * 2 + (1 - sx)], gv = chan[(1 - sy) * 2 + sx];
            const float *c = rows + (ptrdiff_t)(4 + ch) * w, *up2 = rows + (ptrdiff_t)ch * w;
            const float *down2 = rows + (ptrdiff_t)(8 + ch) * w;
            const float *left = rows + (ptrdiff_t)(4 + gh) * w - 1 + sx, *right = rows + (ptrdiff_t)(4 + gh) * w + sx;
            const float *up = rows + (ptrdiff_t)(sy * 4 + gv) * w, *down = rows + (ptrdiff_t)((1 + sy) * 4 + gv) * w;
            for (int x = 1; x < w - 1; x++) {
                out[2 * x + k] =
                    hamilton_adams(c[x], left[x], right[x], c[x - 1], c[x + 1], up[x], down[x], up2[x], down2[x]);
            }
        }
        green_sites_cell(f, chan, 0, y, out);
        green_sites_cell(f, chan, w - 1, y, out + 2 * (w - 1));
    }
}

static void green_sites_portable(const evn_raw_frame *f, int32_t y0, int32_t y1, uint16_t *green, float *rows) {
    green_sites_rows(f, y0, y1, green, rows);
}

EVN_AVX2 static void green_sites_avx2(const evn_raw_frame *f, int32_t y0, int32_t y1, uint16_t *green, float *rows) {
    green_sites_rows(f, y0, y1, green, rows);
}

void evn_raw_green_sites(const evn_raw_frame *f, int32_t y0, int32_t y1, uint16_t *green) {
    // Without memory for the rows, every cell takes the clamped path: the same values, slower.
    float *rows = malloc(sizeof(float) * 12 * (size_t)(f->width > 0 ? f->width : 1));
    if (evn_cpu_has_avx2()) green_sites_avx2(f, y0, y1, green, rows);
    else green_sites_portable(f, y0, y1, green, rows);
    free(rows);
}

/// Catmull-Rom's four weights at fraction t.
static inline void catmull(float t, float w[4]) {
    const float t2 = t * t, t3 = t2 * t;
    w[0] = 0.5f * (-t3 + 2 * t2 - t);
    w[1] = 0.5f * (3 * t3 - 5 * t2 + 2);
    w[2] = 0.5f * (-3 * t3 + 4 * t2 + t);
    w[3] = 0.5f * (t3 - t2);
}

/// What the colour-difference gather of a frame's row shares: each channel's site (0 or 1 on each axis), and where each
/// green's partner plane's neighbourhood lies from the cell's own (plane pixels).
typedef struct {
    int sx[4], sy[4];
    float part[4][2];
    /// Per site (row-major), green's first sample (in the planes or the estimates) and the
    /// samples a cell.
    const uint16_t *base[4];
    int step[4];
} cd_layout;

/// One cell of the colour-difference gather (a frame with `green`); (gx, gy) is the cell's grid
/// position in the frame's planes (its source position plus `own`, as in `bayer_row`), where
/// every channel's site lands within a few thousandths of a plane pixel of its own offset.
/// Green is interpolated at full resolution where each channel's site lands (Catmull-Rom over
/// the 4 x 4 pixels around it, from the 4 x 4 cells around the position: their greens, and the
/// estimates at their red and blue sites); red and blue add their differences to green,
/// Catmull-Rom on their planes at the same position. That value is then pulled towards the
/// plain gather's (`bayer_cell`'s kernel means, from the same cells) by `colour_pull`. The
/// weights are the plain gather's kernel sums (how near the frame's samples of each colour lie).
EVN_INLINE void cd_cell(const evn_raw_frame *f, const evn_raw_merge_params *p, const cd_layout *l, float gx, float gy,
                        float *v, float *wt) {
    const int w = f->width, h = f->height;
    const int ix = floor_int(gx), iy = floor_int(gy);
    const float fx = gx - ix, fy = gy - iy;
    // Full resolution: channel ch's site lands at 2 g + its site, so at column floor(2 gx) + sx
    // with the fraction of 2 gx; the 4 x 4 cells from (ix - 1, iy - 1) are columns 2 ix - 2 ...
    const int FX = floor_int(2 * gx), FY = floor_int(2 * gy);
    const float tx = 2 * gx - FX, ty = 2 * gy - FY;
    float green[8][8], dr[4][4], db[4][4], rr[4][4], bb[4][4];
    int cols[4];
    for (int a = 0; a < 4; a++) cols[a] = clampi(ix - 1 + a, 0, w - 1);
    // Green at each site of a cell: a green sample in the planes, or the estimate (l->base).
    const uint16_t *g0 = l->base[0], *g1 = l->base[1], *g2 = l->base[2], *g3 = l->base[3];
    const int k0 = l->step[0], k1 = l->step[1], k2 = l->step[2], k3 = l->step[3];
    for (int b = 0; b < 4; b++) {
        const ptrdiff_t row = (ptrdiff_t)clampi(iy - 1 + b, 0, h - 1) * w;
        float *top = green[2 * b], *bottom = green[2 * b + 1];
        for (int a = 0; a < 4; a++) {
            const ptrdiff_t cell = row + cols[a];
            const uint16_t *s = f->planes + cell * 4, *e = f->green + cell * 2;
            top[2 * a] = g0[cell * k0];
            top[2 * a + 1] = g1[cell * k1];
            bottom[2 * a] = g2[cell * k2];
            bottom[2 * a + 1] = g3[cell * k3];
            dr[b][a] = (float)s[0] - e[0];
            db[b][a] = (float)s[2] - e[1];
            rr[b][a] = s[0];
            bb[b][a] = s[2];
        }
    }
    float wx[4], wy[4], cx[4], cy[4];
    catmull(tx, wx);
    catmull(ty, wy);
    catmull(fx, cx);
    catmull(fy, cy);
    // Column of the window's first pixel for a channel at site 0: floor(2 gx) - 1, less the
    // window's first column, 2 ix - 2.
    const int ox = FX - 2 * ix + 1, oy = FY - 2 * iy + 1;
    float g[4];
    for (int ch = 0; ch < 4; ch++) {
        const int x0 = ox + l->sx[ch], y0 = oy + l->sy[ch];
        float sum = 0;
        for (int j = 0; j < 4; j++) {
            const float *r = green[y0 + j] + x0;
            sum += wy[j] * (wx[0] * r[0] + wx[1] * r[1] + wx[2] * r[2] + wx[3] * r[3]);
        }
        g[ch] = sum;
    }
    float d0 = 0, d2 = 0;
    for (int j = 0; j < 4; j++) {
        d0 += cy[j] * (cx[0] * dr[j][0] + cx[1] * dr[j][1] + cx[2] * dr[j][2] + cx[3] * dr[j][3]);
        d2 += cy[j] * (cx[0] * db[j][0] + cx[1] * db[j][1] + cx[2] * db[j][2] + cx[3] * db[j][3]);
    }
    float cd[4] = {g[0] + d0, g[1], g[2] + d2, g[3]};
    // The kernel sums: a 2 x 2 neighbourhood's weights are the product of each axis's two.
    const float sx0 = lut_at(p->lut, fx), sx1 = lut_at(p->lut, 1 - fx);
    const float sy0 = lut_at(p->lut, fy), sy1 = lut_at(p->lut, 1 - fy);
    const float nx0 = lut_at(p->lut_dense, fx), nx1 = lut_at(p->lut_dense, 1 - fx);
    const float ny0 = lut_at(p->lut_dense, fy), ny1 = lut_at(p->lut_dense, 1 - fy);
    const float sparse = (sx0 + sx1) * (sy0 + sy1), dense = (nx0 + nx1) * (ny0 + ny1);
    float plain[4];
    plain[0] = (sy0 * (sx0 * rr[1][1] + sx1 * rr[1][2]) + sy1 * (sx0 * rr[2][1] + sx1 * rr[2][2])) / sparse;
    plain[2] = (sy0 * (sx0 * bb[1][1] + sx1 * bb[1][2]) + sy1 * (sx0 * bb[2][1] + sx1 * bb[2][2])) / sparse;
    wt[0] = wt[2] = sparse;
    for (int ch = 1; ch < 4; ch += 2) {
        const int k = 4 - ch; // the other green
        // Own plane: cells ix, ix + 1 (window columns 1, 2); the channel's site in each.
        const float *r0 = green[2 + l->sy[ch]] + l->sx[ch], *r1 = green[4 + l->sy[ch]] + l->sx[ch];
        float sum = ny0 * (nx0 * r0[2] + nx1 * r0[4]) + ny1 * (nx0 * r1[2] + nx1 * r1[4]);
        const float px = gx + l->part[ch][0], py = gy + l->part[ch][1];
        const int jx = floor_int(px), jy = floor_int(py);
        const float qx = px - jx, qy = py - jy;
        const float ax0 = lut_at(p->lut_dense, qx), ax1 = lut_at(p->lut_dense, 1 - qx);
        const float ay0 = lut_at(p->lut_dense, qy), ay1 = lut_at(p->lut_dense, 1 - qy);
        const int ca = 2 * (jx - ix + 1) + l->sx[k], rb = 2 * (jy - iy + 1) + l->sy[k];
        sum += ay0 * (ax0 * green[rb][ca] + ax1 * green[rb][ca + 2]) +
               ay1 * (ax0 * green[rb + 2][ca] + ax1 * green[rb + 2][ca + 2]);
        wt[ch] = dense + (ax0 + ax1) * (ay0 + ay1);
        plain[ch] = sum / wt[ch];
    }
    // Where the two differ by no more than the noise, the plain gather's average of nearby
    // samples is the less noisy; where by more, the frame has detail it softens.
    for (int ch = 0; ch < 4; ch++) {
        const float d = cd[ch] - plain[ch];
        float noise = p->slope[ch] * plain[ch] + p->intercept[ch];
        noise = noise > 0 ? noise : 0;
        const float d2 = d * d, k = d2 + p->colour_pull * noise;
        v[ch] = plain[ch] + (k > 0 ? d * d2 / k : d);
    }
}

EVN_INLINE void cd_cells(const evn_raw_frame *f, const evn_raw_merge_params *p, int32_t y, int32_t x0, int32_t count,
                         float *value, float *weight, const float own[2], float part[4][2], const int chan[4]) {
    cd_layout l;
    for (int q = 0; q < 4; q++) {
        const int ch = chan[q];
        l.sx[ch] = q & 1;
        l.sy[ch] = q >> 1;
        l.base[q] = ch & 1 ? f->planes + ch : f->green + ch / 2;
        l.step[q] = ch & 1 ? 4 : 2;
    }
    for (int ch = 0; ch < 4; ch++) {
        l.part[ch][0] = ch & 1 ? part[ch][0] - own[0] : 0;
        l.part[ch][1] = ch & 1 ? part[ch][1] - own[1] : 0;
    }
    for (int i = 0; i < count; i++) {
        float sx, sy;
        float *v = value + (ptrdiff_t)i * 4, *wt = weight + (ptrdiff_t)i * 4;
        if (!cell_source(f, y, x0 + i, v, wt, &sx, &sy)) continue;
        cd_cell(f, p, &l, sx + own[0], sy + own[1], v, wt);
    }
}

EVN_INLINE void cd_row(const evn_raw_frame *f, const evn_raw_merge_params *p, int32_t y, int32_t x0, int32_t count,
                       float *value, float *weight, const float own[2], float part[4][2]) {
    int chan[4];
    site_channels(f, chan);
    cd_cells(f, p, y, x0, count, value, weight, own, part, chan);
}

static void cd_row_portable(const evn_raw_frame *f, const evn_raw_merge_params *p, int32_t y, int32_t x0, int32_t count,
                            float *value, float *weight, const float own[2], float part[4][2]) {
    cd_row(f, p, y, x0, count, value, weight, own, part);
}

EVN_AVX2 static void cd_row_avx2(const evn_raw_frame *f, const evn_raw_merge_params *p, int32_t y, int32_t x0,
                                 int32_t count, float *value, float *weight, const float own[2], float part[4][2]) {
    cd_row(f, p, y, x0, count, value, weight, own, part);
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
        if (f->green && !f->clipped_is_missing) {
            if (evn_cpu_has_avx2()) cd_row_avx2(f, p, y, x0, count, value, weight, own, part);
            else cd_row_portable(f, p, y, x0, count, value, weight, own, part);
            return;
        }
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
