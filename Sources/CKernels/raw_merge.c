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

/// Cells the colour-difference gather works out together, one a lane.
#define CD_LANES 8

typedef unsigned short v8u16 __attribute__((ext_vector_type(8)));
typedef unsigned short v16u16 __attribute__((ext_vector_type(16)));
typedef unsigned short v32u16 __attribute__((ext_vector_type(32)));

/// The 4 x 4 cells around CD_LANES cells' grid positions (from the cell up and left of each
/// position's), lane by lane: every plane's sample, and the green estimates at red's and blue's
/// sites, as floats.
typedef struct {
    float s[4][4][4][CD_LANES]; // [row][column][channel][lane]
    float e[4][4][2][CD_LANES];
} cd_window;

/// Where a cd_window's estimates start (floats).
#define CD_E (4 * 4 * 4 * CD_LANES)
_Static_assert(offsetof(cd_window, e) == CD_E * sizeof(float), "cd_window's estimates follow its samples");

/// What the colour-difference gather of a frame's row shares: each channel's site (0 or 1 on
/// each axis); where each green's partner plane's neighbourhood lies from the cell's own (plane
/// pixels); and, for each pixel of a window's 8 x 8 at full resolution, where its green is in a
/// cd_window (floats from its start) whose first row is at slot `top`: a green sample, or the
/// estimate at a red or blue site.
typedef struct {
    int sx[4], sy[4];
    float part[4][2];
    int green[4][8][8]; // [top (cd_sweep)][row][column]
} cd_layout;

/// floor(v), lane by lane, as `floor_int`.
EVN_INLINE v8i floor8(v8f v) {
    const v8i i = __builtin_convertvector(v, v8i);
    return i + (v < __builtin_convertvector(i, v8f)); // a true lane is -1
}

/// Catmull-Rom's four weights at fraction t, lane by lane.
EVN_INLINE void catmull8(v8f t, v8f w[4]) {
    const v8f t2 = t * t, t3 = t2 * t;
    w[0] = 0.5f * (-t3 + 2 * t2 - t);
    w[1] = 0.5f * (3 * t3 - 5 * t2 + 2);
    w[2] = 0.5f * (-3 * t3 + 4 * t2 + t);
    w[3] = 0.5f * (t3 - t2);
}

/// `lut_at` lane by lane.
EVN_INLINE v8f lut8(const float *lut, v8f t) {
    const v8i lo = 0, hi = 64;
    v8i j = __builtin_convertvector(t * 64.0f + 0.5f, v8i);
    j = j < lo ? lo : j;
    j = j > hi ? hi : j;
    const v8f r = {lut[j[0]], lut[j[1]], lut[j[2]], lut[j[3]], lut[j[4]], lut[j[5]], lut[j[6]], lut[j[7]]};
    return r;
}

/// Catmull-Rom's weights at fraction t of the way from tap 1 to tap 2, over five taps where the
/// first is the fraction's tap 0 (phase 0) or its tap 1 (phase 1: a true lane of `late`), the
/// unused tap weighing 0.
EVN_INLINE void catmull5(v8f t, v8i late, v8f w[5]) {
    v8f c[4];
    catmull8(t, c);
    const v8f zero = 0;
    w[0] = late ? zero : c[0];
    for (int k = 1; k < 4; k++) w[k] = late ? c[k - 1] : c[k];
    w[4] = late ? c[3] : zero;
}

/// Row b of the window of a run (see `cd_window_run`) into its slot `slot`: CD_LANES cells side by
/// side in row iy - 1 + b of the planes, lane i at column ix + i, all of it inside the planes. The
/// row is two loads: its first eight cells and its last eight (the window's columns 0 and 3);
/// columns 1 and 2 are lanes of both. Every lane is stored with `first`, else only the lanes of
/// `take` (true lanes).
EVN_INLINE void cd_window_row(const evn_raw_frame *f, int ix, int iy, int b, int slot, v8i take, int first,
                              cd_window *win) {
    const int w = f->width;
#define CD_STORE(v, at) store8(first ? (v) : (take ? (v) : load8(at)), at)
// The window's four columns of one channel (row[a][ch]) from its first eight cells x and its
// last eight y.
#define CD_COLUMNS(x, y, row, ch)                                                                                      \
    do {                                                                                                               \
        const v8f x_ = (x), y_ = (y);                                                                                  \
        CD_STORE(x_, (row)[0][ch]);                                                                                    \
        CD_STORE(__builtin_shufflevector(x_, y_, 1, 2, 8, 9, 10, 11, 12, 13), (row)[1][ch]);                           \
        CD_STORE(__builtin_shufflevector(x_, y_, 2, 8, 9, 10, 11, 12, 13, 14), (row)[2][ch]);                          \
        CD_STORE(y_, (row)[3][ch]);                                                                                    \
    } while (0)
// Channel ch of the eight cells of s (its lanes ch, ch + 4, ...), as floats; estimate k of the eight cells of e.
#define CD_PLANE(s, ch)                                                                                                \
    __builtin_convertvector(                                                                                           \
        __builtin_shufflevector(s, s, ch, ch + 4, ch + 8, ch + 12, ch + 16, ch + 20, ch + 24, ch + 28), v8f)
#define CD_ESTIMATE(e, k)                                                                                              \
    __builtin_convertvector(__builtin_shufflevector(e, e, k, k + 2, k + 4, k + 6, k + 8, k + 10, k + 12, k + 14), v8f)
    const ptrdiff_t cell = (ptrdiff_t)(iy - 1 + b) * w + (ix - 1);
    v32u16 s0, s3;
    v16u16 e0, e3;
    memcpy(&s0, f->planes + cell * 4, sizeof s0);
    memcpy(&s3, f->planes + (cell + 3) * 4, sizeof s3);
    memcpy(&e0, f->green + cell * 2, sizeof e0);
    memcpy(&e3, f->green + (cell + 3) * 2, sizeof e3);
    CD_COLUMNS(CD_PLANE(s0, 0), CD_PLANE(s3, 0), win->s[slot], 0);
    CD_COLUMNS(CD_PLANE(s0, 1), CD_PLANE(s3, 1), win->s[slot], 1);
    CD_COLUMNS(CD_PLANE(s0, 2), CD_PLANE(s3, 2), win->s[slot], 2);
    CD_COLUMNS(CD_PLANE(s0, 3), CD_PLANE(s3, 3), win->s[slot], 3);
    CD_COLUMNS(CD_ESTIMATE(e0, 0), CD_ESTIMATE(e3, 0), win->e[slot], 0);
    CD_COLUMNS(CD_ESTIMATE(e0, 1), CD_ESTIMATE(e3, 1), win->e[slot], 1);
#undef CD_PLANE
#undef CD_ESTIMATE
#undef CD_COLUMNS
#undef CD_STORE
}

/// A run of the window: CD_LANES cells side by side in row iy of the planes, lane i at column
/// ix + i, all of it inside the planes, its row b at slot b. Every lane is stored with `first`,
/// else only the lanes of `take` (true lanes).
EVN_INLINE void cd_window_run(const evn_raw_frame *f, int ix, int iy, v8i take, int first, cd_window *win) {
    for (int b = 0; b < 4; b++) cd_window_row(f, ix, iy, b, b, take, first, win);
}

/// Whether a run from column ix of row iy (see `cd_window_run`) lies inside the planes.
EVN_INLINE int cd_run_inside(const evn_raw_frame *f, int ix, int iy) {
    return iy >= 1 && iy + 2 < f->height && ix >= 1 && ix + CD_LANES + 1 < f->width;
}

/// The lanes of `used` (true lanes) that lie in one run with the first of them (cells side by
/// side: lane i at column start + i of row iy, the same for all of them), that run's start and
/// row, and whether it lies inside the planes; 0 where no lane is used.
EVN_INLINE int cd_first_run(const evn_raw_frame *f, v8i ix, v8i iy, v8i used, v8i *in_run, int *start, int *row) {
    const v8i lane = {0, 1, 2, 3, 4, 5, 6, 7};
    const v8i from = ix - lane;
    int k = 0;
    while (k < CD_LANES && !used[k]) k++;
    if (k == CD_LANES) return 0;
    *in_run = used & (from == from[k]) & (iy == iy[k]);
    *start = from[k], *row = iy[k];
    return cd_run_inside(f, *start, *row);
}

/// The window of CD_LANES cells around cells (ix[i], iy[i]), of which only the lanes of `used`
/// (true lanes) matter: where those lie in at most two runs inside the planes (cells side by
/// side: lane i at column c + i of row r, the same c and r for the run's lanes), loaded run by
/// run, its rows at slots 0 ... 3, and 1; else 0.
EVN_INLINE int cd_window_runs(const evn_raw_frame *f, v8i ix, v8i iy, v8i used, cd_window *win) {
    v8i first, second;
    int start, row, start2, row2;
    if (!cd_first_run(f, ix, iy, used, &first, &start, &row)) return 0;
    const v8i rest = used & ~first;
    if (!cd_first_run(f, ix, iy, rest, &second, &start2, &row2)) {
        int more = 0;
        for (int i = 0; i < CD_LANES; i++) more |= rest[i];
        if (more) return 0; // a second run outside the planes
        cd_window_run(f, start, row, first, 1, win);
        return 1;
    }
    for (int i = 0; i < CD_LANES; i++) {
        if (rest[i] && !second[i]) return 0;
    }
    cd_window_run(f, start, row, first, 1, win);
    cd_window_run(f, start2, row2, second, 0, win);
    return 1;
}

/// The window of one column of lanes kept from one output row to the next, down a band: where
/// every lane used lies in one run inside the planes (see `cd_window_runs`), the window holds
/// that run (`start`, `row`) in all its lanes (`whole`), its row b at slot (b + top) mod 4. The
/// next row's run one row down then takes one row of the planes (into the slot of the row that
/// leaves), and the same run none.
typedef struct {
    cd_window win;
    int whole, start, row, top;
} cd_sweep;

/// The window of any CD_LANES cells (lane i around cell ix[i], iy[i]), cell by cell, clamped to
/// the planes.
EVN_INLINE void cd_window_cells(const evn_raw_frame *f, v8i ix, v8i iy, cd_window *win) {
    const int w = f->width, h = f->height;
    for (int i = 0; i < CD_LANES; i++) {
        for (int b = 0; b < 4; b++) {
            const ptrdiff_t row = (ptrdiff_t)clampi(iy[i] - 1 + b, 0, h - 1) * w;
            for (int a = 0; a < 4; a++) {
                const ptrdiff_t cell = row + clampi(ix[i] - 1 + a, 0, w - 1);
                const uint16_t *s = f->planes + cell * 4, *e = f->green + cell * 2;
                for (int ch = 0; ch < 4; ch++) win->s[b][a][ch][i] = s[ch];
                win->e[b][a][0][i] = e[0];
                win->e[b][a][1][i] = e[1];
            }
        }
    }
}

/// The first n lanes of four channels' values, cell by cell (lane i's channels at out + 4 i),
/// 0 in the lanes not `used`.
EVN_INLINE void cd_store(const v8f c[4], v8i used, int n, float *out) {
    const v8f zero = 0;
    const v8f c0 = used ? c[0] : zero, c1 = used ? c[1] : zero, c2 = used ? c[2] : zero, c3 = used ? c[3] : zero;
    typedef float v16f __attribute__((ext_vector_type(16)));
    typedef float v32f __attribute__((ext_vector_type(32)));
    const v16f a = __builtin_shufflevector(c0, c1, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
    const v16f b = __builtin_shufflevector(c2, c3, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
    const v32f all = __builtin_shufflevector(a, b, 0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23, 8, 9, 24, 25,
                                             10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31);
    if (n == CD_LANES) memcpy(out, &all, sizeof all);
    else {
        float tmp[4 * CD_LANES];
        memcpy(tmp, &all, sizeof all);
        memcpy(out, tmp, sizeof(float) * 4 * (size_t)n);
    }
}

/// The window of CD_LANES cells around cells (ix[i], iy[i]) (only the lanes of `used` matter)
/// into `sw`: kept, or moved down a row, where the sweep's window holds the run they lie in or the
/// one above it; else loaded anew.
EVN_INLINE void cd_window_load(const evn_raw_frame *f, v8i ix, v8i iy, v8i used, cd_sweep *sw) {
    v8i run;
    int start, row;
    if (cd_first_run(f, ix, iy, used, &run, &start, &row)) {
        int whole = 1;
        for (int i = 0; i < CD_LANES; i++) whole &= !used[i] || run[i];
        if (whole) {
            if (sw->whole && start == sw->start && row == sw->row) return;
            if (sw->whole && start == sw->start && row == sw->row + 1) {
                // The top row leaves; the row below the window enters in its slot.
                cd_window_row(f, start, row, 3, sw->top, run, 1, &sw->win);
                sw->top = (sw->top + 1) & 3;
                sw->row = row;
                return;
            }
            cd_window_run(f, start, row, run, 1, &sw->win);
            sw->whole = 1, sw->start = start, sw->row = row, sw->top = 0;
            return;
        }
    }
    sw->whole = 0, sw->top = 0;
    if (!cd_window_runs(f, ix, iy, used, &sw->win)) cd_window_cells(f, ix, iy, &sw->win);
}

/// CD_LANES cells of the colour-difference gather (a frame with `green`), lane i at grid position
/// (gx[i], gy[i]) in the frame's planes (its source position plus `own`, as in `bayer_row`),
/// where every channel's site lands within a few thousandths of a plane pixel of its own offset;
/// the first n cells' values and weights are written, 0 for a cell not `used` (outside the frame).
/// Green is interpolated at full resolution where each channel's site lands (Catmull-Rom over
/// the 4 x 4 pixels around it, from the 4 x 4 cells around the position: their greens, and the
/// estimates at their red and blue sites); red and blue add their differences to green,
/// Catmull-Rom on their planes at the same position. That value is then pulled towards the
/// plain gather's (`bayer_cell`'s kernel means, from the same cells) by `colour_pull`. The
/// weights are the plain gather's kernel sums (how near the frame's samples of each colour lie).
/// Lane by lane the same operations in the same order whichever way the window is loaded (anew,
/// or kept or moved down from the row above by `sw`).
EVN_INLINE void cd_lanes(const evn_raw_frame *f, const evn_raw_merge_params *p, const cd_layout *l, v8f gx, v8f gy,
                         v8i used, int n, float *value, float *weight, cd_sweep *sw) {
    const v8i ix = floor8(gx), iy = floor8(gy);
    const v8f fx = gx - __builtin_convertvector(ix, v8f), fy = gy - __builtin_convertvector(iy, v8f);
    int any = 0;
    for (int i = 0; i < CD_LANES; i++) any |= used[i];
    if (!any) { // every cell outside the frame
        memset(value, 0, sizeof(float) * 4 * (size_t)n);
        memset(weight, 0, sizeof(float) * 4 * (size_t)n);
        return;
    }
    cd_window_load(f, ix, iy, used, sw);
    const cd_window *win = &sw->win;
    const float *W = (const float *)win;
    const int top = sw->top;
#define GW(r, c) load8(W + l->green[top][r][c])
#define S(b, a, ch) load8(win->s[((b) + top) & 3][a][ch])
#define E(b, a, k) load8(win->e[((b) + top) & 3][a][k])
    // Full resolution: a channel at site s lands at 2 g + s. Its four taps start at pixel
    // floor(2 g) - 1 + s: window column 1 + s, or 2 + s where 2 g's cell is the late one.
    const v8f gx2 = 2 * gx, gy2 = 2 * gy;
    const v8i FX = floor8(gx2), FY = floor8(gy2);
    v8f wx[5], wy[5];
    catmull5(gx2 - __builtin_convertvector(FX, v8f), FX != 2 * ix, wx);
    catmull5(gy2 - __builtin_convertvector(FY, v8f), FY != 2 * iy, wy);
    // Window rows 1 ... 6 across, from column 1 + s.
    v8f across[6][2];
    for (int r = 0; r < 6; r++) {
        for (int s = 0; s < 2; s++) {
            v8f sum = wx[0] * GW(r + 1, s + 1);
            for (int k = 1; k < 5; k++) sum += wx[k] * GW(r + 1, s + 1 + k);
            across[r][s] = sum;
        }
    }
    v8f cd[4];
    for (int ch = 0; ch < 4; ch++) {
        v8f sum = 0;
        for (int j = 0; j < 5; j++) sum += wy[j] * across[l->sy[ch] + j][l->sx[ch]];
        cd[ch] = sum;
    }
    v8f cx[4], cy[4];
    catmull8(fx, cx);
    catmull8(fy, cy);
    v8f d0 = 0, d2 = 0;
    for (int j = 0; j < 4; j++) {
        d0 += cy[j] * (cx[0] * (S(j, 0, 0) - E(j, 0, 0)) + cx[1] * (S(j, 1, 0) - E(j, 1, 0)) +
                       cx[2] * (S(j, 2, 0) - E(j, 2, 0)) + cx[3] * (S(j, 3, 0) - E(j, 3, 0)));
        d2 += cy[j] * (cx[0] * (S(j, 0, 2) - E(j, 0, 1)) + cx[1] * (S(j, 1, 2) - E(j, 1, 1)) +
                       cx[2] * (S(j, 2, 2) - E(j, 2, 1)) + cx[3] * (S(j, 3, 2) - E(j, 3, 1)));
    }
    cd[0] += d0;
    cd[2] += d2;
    // The kernel sums: a 2 x 2 neighbourhood's weights are the product of each axis's two.
    const v8f sx0 = lut8(p->lut, fx), sx1 = lut8(p->lut, 1 - fx), sy0 = lut8(p->lut, fy), sy1 = lut8(p->lut, 1 - fy);
    const v8f nx0 = lut8(p->lut_dense, fx), nx1 = lut8(p->lut_dense, 1 - fx);
    const v8f ny0 = lut8(p->lut_dense, fy), ny1 = lut8(p->lut_dense, 1 - fy);
    const v8f sparse = (sx0 + sx1) * (sy0 + sy1), dense = (nx0 + nx1) * (ny0 + ny1);
    const v8f zero = 0;
    v8f plain[4], wt[4];
    plain[0] = (sy0 * (sx0 * S(1, 1, 0) + sx1 * S(1, 2, 0)) + sy1 * (sx0 * S(2, 1, 0) + sx1 * S(2, 2, 0))) / sparse;
    plain[2] = (sy0 * (sx0 * S(1, 1, 2) + sx1 * S(1, 2, 2)) + sy1 * (sx0 * S(2, 1, 2) + sx1 * S(2, 2, 2))) / sparse;
    wt[0] = wt[2] = sparse;
    for (int ch = 1; ch < 4; ch += 2) {
        const int k = 4 - ch; // the other green
        // Own plane: cells ix, ix + 1 (window columns 2 and 4, plus the channel's site).
        const int r0 = 2 + l->sy[ch], c0 = 2 + l->sx[ch];
        v8f sum =
            ny0 * (nx0 * GW(r0, c0) + nx1 * GW(r0, c0 + 2)) + ny1 * (nx0 * GW(r0 + 2, c0) + nx1 * GW(r0 + 2, c0 + 2));
        // The partner plane's 2 x 2 around the position moved by `part` (which is under a cell):
        // cells jx, jx + 1 of the window's 4 (from ix - 1), so each cell's weight is ax0, ax1 or 0
        // (0s add exactly nothing), and so down the rows.
        const v8f px = gx + l->part[ch][0], py = gy + l->part[ch][1];
        const v8i jx = floor8(px), jy = floor8(py);
        const v8f qx = px - __builtin_convertvector(jx, v8f), qy = py - __builtin_convertvector(jy, v8f);
        const v8f ax0 = lut8(p->lut_dense, qx), ax1 = lut8(p->lut_dense, 1 - qx);
        const v8f ay0 = lut8(p->lut_dense, qy), ay1 = lut8(p->lut_dense, 1 - qy);
        // Offsets -1, 0 or 1 (clamped): the 2 x 2's first column is the window's ox + 1, its
        // first row oy + 1. Each row's two columns are picked, weighed and added, then the two
        // rows: the products and sums of a sum over the 4 x 4 whose other weights are 0.
        const v8i minus = -1;
        const v8i ox = jx - ix, oy = jy - iy;
        const v8i xl = ox <= minus, xm = ox == 0, yl = oy <= minus, ym = oy == 0; // else 1 (or more)
        v8f across[4];
        for (int b = 0; b < 4; b++) {
            const int r = 2 * b + l->sy[k], c = l->sx[k];
            const v8f g0 = GW(r, c), g1 = GW(r, c + 2), g2 = GW(r, c + 4), g3 = GW(r, c + 6);
            const v8f first = xl ? g0 : (xm ? g1 : g2), second = xl ? g1 : (xm ? g2 : g3);
            across[b] = ax0 * first;
            across[b] += ax1 * second;
        }
        const v8f top = yl ? across[0] : (ym ? across[1] : across[2]);
        const v8f bottom = yl ? across[1] : (ym ? across[2] : across[3]);
        v8f partner = ay0 * top;
        partner += ay1 * bottom;
        sum += partner;
        wt[ch] = dense + (ax0 + ax1) * (ay0 + ay1);
        plain[ch] = sum / wt[ch];
    }
#undef GW
#undef S
#undef E
    // Where the two differ by no more than the noise, the plain gather's average of nearby
    // samples is the less noisy; where by more, the frame has detail it softens.
    v8f v[4];
    for (int ch = 0; ch < 4; ch++) {
        const v8f d = cd[ch] - plain[ch];
        v8f noise = p->slope[ch] * plain[ch] + p->intercept[ch];
        noise = noise > zero ? noise : zero;
        const v8f d2 = d * d, k = d2 + p->colour_pull * noise;
        v[ch] = plain[ch] + (k > zero ? d * d2 / k : d);
    }
    cd_store(v, used, n, value);
    cd_store(wt, used, n, weight);
}

/// `project` for the CD_LANES cells x ..< x + CD_LANES of row y, lane by lane with the same
/// operations, of which the first n count: each one's grid position (its source position plus
/// `own`), 0 where it does not land in the frame, and whether it does (a true lane of `in`).
EVN_INLINE void project8(const evn_raw_frame *f, int32_t x, int32_t y, int n, const float own[2], v8f *gx, v8f *gy,
                         v8i *in) {
    const float *m = f->m;
    const v8i lane = {0, 1, 2, 3, 4, 5, 6, 7};
    const v8f px = __builtin_convertvector(x + lane, v8f), py = (float)y;
    const v8f den = m[6] * px + m[7] * py + m[8];
    const v8f sx = (m[0] * px + m[1] * py + m[2]) / den, sy = (m[3] * px + m[4] * py + m[5]) / den;
    const v8f tiny = 1e-12f, low = -0.5f, right = f->width - 0.5f, bottom = f->height - 0.5f, zero = 0;
    *in = (lane < n) & (den > tiny) & (sx >= low) & (sy >= low) & (sx <= right) & (sy <= bottom);
    *gx = *in ? sx + own[0] : zero;
    *gy = *in ? sy + own[1] : zero;
}

/// Asks for the samples a column of lanes from output cell x reads going down rows y0 ... y1 (where
/// the homography takes them; a field moves them a little): a sweep reads a few cache lines of each
/// of a dozen rows, too many streams at once for the processor to foresee.
EVN_INLINE void prefetch_sweep(const evn_raw_frame *f, int32_t x, int32_t y0, int32_t y1) {
    float ax, ay, bx, by;
    if (!project(f->m, f->width, f->height, (float)x, (float)y0, &ax, &ay) ||
        !project(f->m, f->width, f->height, (float)x, (float)y1, &bx, &by))
        return;
    const int c0 = clampi((int)(ax < bx ? ax : bx) - 2, 0, f->width - 1);
    const int c1 = clampi((int)(ax > bx ? ax : bx) + CD_LANES + 2, 0, f->width - 1);
    const int r0 = clampi((int)ay - 2, 0, f->height - 1), r1 = clampi((int)by + 3, 0, f->height - 1);
    for (int r = r0; r <= r1; r++) {
        const ptrdiff_t cell = (ptrdiff_t)r * f->width;
        for (int c = c0; c <= c1; c += 8) __builtin_prefetch(f->planes + (cell + c) * 4);
        __builtin_prefetch(f->planes + (cell + c1) * 4);
        for (int c = c0; c <= c1; c += 16) __builtin_prefetch(f->green + (cell + c) * 2);
        __builtin_prefetch(f->green + (cell + c1) * 2);
    }
}

/// `evn_raw_gather_rows` for a Bayer frame with `green` (the colour-difference gather: see
/// `cd_lanes`), CD_LANES cells at a time: each column of lanes down the rows, its window kept from
/// one row to the next (`cd_sweep`).
EVN_INLINE void cd_rows(const evn_raw_frame *f, const evn_raw_merge_params *p, const int32_t *ys, int32_t rows,
                        int32_t x0, int32_t count, float *const *values, float *const *weights, const float own[2],
                        float part[4][2]) {
    int chan[4];
    site_channels(f, chan);
    cd_layout l;
    for (int q = 0; q < 4; q++) {
        l.sx[chan[q]] = q & 1;
        l.sy[chan[q]] = q >> 1;
    }
    for (int ch = 0; ch < 4; ch++) {
        l.part[ch][0] = ch & 1 ? part[ch][0] - own[0] : 0;
        l.part[ch][1] = ch & 1 ? part[ch][1] - own[1] : 0;
    }
    for (int top = 0; top < 4; top++) {
        for (int r = 0; r < 8; r++) {
            for (int c = 0; c < 8; c++) {
                const int b = ((r >> 1) + top) & 3, a = c >> 1, ch = chan[(r & 1) * 2 + (c & 1)];
                l.green[top][r][c] =
                    ch & 1 ? ((b * 4 + a) * 4 + ch) * CD_LANES : CD_E + ((b * 4 + a) * 2 + ch / 2) * CD_LANES;
            }
        }
    }
    cd_sweep sw;
    for (int32_t i0 = 0; i0 < count; i0 += CD_LANES) {
        const int n = count - i0 < CD_LANES ? count - i0 : CD_LANES;
        if (rows > 1) prefetch_sweep(f, x0 + i0 + 2 * CD_LANES, ys[0], ys[rows - 1]);
        sw.whole = 0, sw.top = 0;
        for (int32_t r = 0; r < rows; r++) {
            // The positions go to cd_lanes as vectors: eight floats stored one by one and loaded
            // as one vector wait on the stores (no store forwarding), which cost about a seventh
            // of the gather under perf.
            v8f gx = 0, gy = 0;
            v8i used = 0;
            if (f->field_dx) {
                for (int i = 0; i < n; i++) {
                    float sx, sy;
                    const int ok = source_position(f, (float)(x0 + i0 + i), (float)ys[r], &sx, &sy);
                    gx[i] = ok ? sx + own[0] : 0;
                    gy[i] = ok ? sy + own[1] : 0;
                    used[i] = ok ? -1 : 0;
                }
            } else {
                project8(f, x0 + i0, ys[r], n, own, &gx, &gy, &used);
            }
            cd_lanes(f, p, &l, gx, gy, used, n, values[r] + (ptrdiff_t)i0 * 4, weights[r] + (ptrdiff_t)i0 * 4, &sw);
        }
    }
}

static void cd_rows_portable(const evn_raw_frame *f, const evn_raw_merge_params *p, const int32_t *ys, int32_t rows,
                             int32_t x0, int32_t count, float *const *values, float *const *weights, const float own[2],
                             float part[4][2]) {
    cd_rows(f, p, ys, rows, x0, count, values, weights, own, part);
}

EVN_AVX2 static void cd_rows_avx2(const evn_raw_frame *f, const evn_raw_merge_params *p, const int32_t *ys,
                                  int32_t rows, int32_t x0, int32_t count, float *const *values, float *const *weights,
                                  const float own[2], float part[4][2]) {
    cd_rows(f, p, ys, rows, x0, count, values, weights, own, part);
}

/// Whether the colour-difference gather of frame `f` (`cd_lanes`) gives each cell its own
/// samples with weight 1: the frame does not move (no field, the identity; the reference),
/// each channel's grid position is the cell itself (`own` 0), the kernels weigh a sample at
/// distance 0 by 1 and at 1 by 0, and each green's partner plane lies half a cell off in x or
/// y, where the dense kernel weighs 0. Then every Catmull-Rom weight is 1 or 0, the colour
/// difference adds back exactly what it took, and the partner adds +0: the same bits.
static int gathers_own_samples(const evn_raw_frame *f, const evn_raw_merge_params *p, const float own[2],
                               float part[4][2]) {
    const float *m = f->m;
    if (f->field_dx || m[0] != 1 || m[1] != 0 || m[2] != 0 || m[3] != 0 || m[4] != 1 || m[5] != 0 || m[6] != 0 ||
        m[7] != 0 || m[8] != 1 || own[0] != 0 || own[1] != 0)
        return 0;
    if (p->lut[0] != 1 || p->lut[64] != 0 || p->lut_dense[0] != 1 || p->lut_dense[64] != 0) return 0;
    for (int ch = 1; ch < 4; ch += 2) {
        float q[2];
        for (int a = 0; a < 2; a++) {
            const float t = part[ch][a];
            // Half cells only, small: x + t is then exact, its fraction 0 or 0.5 at every cell.
            if (!(fabsf(t) <= 4) || 2 * t != floorf(2 * t)) return 0;
            q[a] = t - floorf(t);
        }
        const int xs = lut_at(p->lut_dense, q[0]) == 0 && lut_at(p->lut_dense, 1 - q[0]) == 0;
        const int ys = lut_at(p->lut_dense, q[1]) == 0 && lut_at(p->lut_dense, 1 - q[1]) == 0;
        if (!xs && !ys) return 0;
    }
    return 1;
}

/// `evn_raw_gather_row` where `gathers_own_samples`: each cell's samples, weight 1 (0 and 0
/// outside the frame).
static void own_samples_row(const evn_raw_frame *f, int32_t y, int32_t x0, int32_t count, float *value, float *weight) {
    for (int32_t i = 0; i < count; i++) {
        const int32_t x = x0 + i;
        if (x < 0 || x >= f->width || y < 0 || y >= f->height) {
            for (int ch = 0; ch < 4; ch++) value[4 * i + ch] = weight[4 * i + ch] = 0;
            continue;
        }
        const uint16_t *s = f->planes + ((ptrdiff_t)y * f->width + x) * 4;
        for (int ch = 0; ch < 4; ch++) {
            value[4 * i + ch] = (float)s[ch];
            weight[4 * i + ch] = 1;
        }
    }
}

/// Each channel's grid position is the cell centre's source position plus a constant: its
/// site through the frame's Jacobian, minus its own offset; for a hand-held frame this is
/// within a few thousandths of a plane pixel of the cell centre's, so one neighbourhood serves
/// every channel's own plane (its weights from the mean of their offsets: `own`), and one more
/// each green's partner plane (`part`, for the channels with a partner).
static void gather_offsets(const evn_raw_frame *f, const evn_raw_merge_params *p, float own[2], float part[4][2]) {
    const int c = p->channels;
    own[0] = own[1] = 0;
    for (int ch = 0; ch < c; ch++) {
        own[0] += (f->site[ch][0] - f->offset[ch][0]) / c;
        own[1] += (f->site[ch][1] - f->offset[ch][1]) / c;
    }
    for (int ch = 0; ch < c; ch++) {
        const int k = p->partner[ch];
        if (k < 0) continue;
        part[ch][0] = f->site[ch][0] - f->offset[k][0];
        part[ch][1] = f->site[ch][1] - f->offset[k][1];
    }
}

/// Whether the gather takes a Bayer cell's four planes (`bayer_row`, `cd_row`): four channels,
/// the greens each other's partners, red and blue alone.
static int gathers_bayer(const evn_raw_merge_params *p) {
    return p->channels == 4 && p->partner[0] < 0 && p->partner[1] == 3 && p->partner[2] < 0 && p->partner[3] == 1;
}

/// Whether the gather goes by colour differences (`cd_row`): a Bayer frame with its green
/// estimates, nothing marked missing.
static int gathers_colour(const evn_raw_frame *f, const evn_raw_merge_params *p) {
    return gathers_bayer(p) && f->green && !f->clipped_is_missing;
}

int evn_raw_gather_is_own_samples(const evn_raw_frame *f, const evn_raw_merge_params *p) {
    float own[2], part[4][2];
    gather_offsets(f, p, own, part);
    return gathers_colour(f, p) && gathers_own_samples(f, p, own, part);
}

/// `evn_raw_gather_row` of a frame that does not gather by colour differences.
static void gather_row(const evn_raw_frame *f, const evn_raw_merge_params *p, int32_t y, int32_t x0, int32_t count,
                       float *value, float *weight, const float own[2], float part[4][2]) {
    const int c = p->channels;
    if (gathers_bayer(p)) {
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

void evn_raw_gather_rows(const evn_raw_frame *f, const evn_raw_merge_params *p, const int32_t *ys, int32_t rows,
                         int32_t x0, int32_t count, float *const *values, float *const *weights) {
    float own[2], part[4][2];
    gather_offsets(f, p, own, part);
    if (gathers_colour(f, p) && !gathers_own_samples(f, p, own, part)) {
        if (evn_cpu_has_avx2()) cd_rows_avx2(f, p, ys, rows, x0, count, values, weights, own, part);
        else cd_rows_portable(f, p, ys, rows, x0, count, values, weights, own, part);
        return;
    }
    for (int32_t r = 0; r < rows; r++) {
        if (gathers_colour(f, p)) own_samples_row(f, ys[r], x0, count, values[r], weights[r]);
        else gather_row(f, p, ys[r], x0, count, values[r], weights[r], own, part);
    }
}

void evn_raw_gather_row(const evn_raw_frame *f, const evn_raw_merge_params *p, int32_t y, int32_t x0, int32_t count,
                        float *value, float *weight) {
    evn_raw_gather_rows(f, p, &y, 1, x0, count, &value, &weight);
}

EVN_INLINE void vote_prepare(const float *value, const float *weight, ptrdiff_t frame_stride, int32_t frames,
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

EVN_INLINE void vote_deviations(const float *value, const float *weight, ptrdiff_t frame_stride, const float *med,
                                int32_t frames, ptrdiff_t length, ptrdiff_t stride, float *dev) {
    for (int k = 0; k < frames; k++) {
        const float *v = value + k * frame_stride, *w = weight + k * frame_stride;
        float *d = dev + k * stride;
        for (ptrdiff_t j = 0; j < length; j++) d[j] = w[j] > 0 ? fabsf(v[j] - med[j]) : INFINITY;
    }
}

// The vote's passes over a segment's samples, compiled twice (the same operations: the same bits).
EVN_KERNEL_VARIANTS(void, evn_raw_vote_prepare, raw_vote_prepare, vote_prepare,
                    (const float *value, const float *weight, ptrdiff_t frame_stride, int32_t frames, ptrdiff_t length,
                     ptrdiff_t stride, float *sorted, float *counts),
                    (value, weight, frame_stride, frames, length, stride, sorted, counts))
EVN_KERNEL_VARIANTS(void, evn_raw_vote_deviations, raw_vote_deviations, vote_deviations,
                    (const float *value, const float *weight, ptrdiff_t frame_stride, const float *med, int32_t frames,
                     ptrdiff_t length, ptrdiff_t stride, float *dev),
                    (value, weight, frame_stride, med, frames, length, stride, dev))

/// Cells a chunk of evn_raw_merge_cells works on at a time (its per-sample arrays on the stack).
#define MERGE_CHUNK 64

/// One chunk of evn_raw_merge_cells: cells i0 ..< i0 + ci. Every loop over the chunk's samples
/// runs with the frames outside, so that it vectorises; each sample's sums still add the frames
/// in order, so the results are those of a loop over frames per sample, to the bit.
/// A frame's `length` values `v` where its weight `w` is 0 set to the reference's `vr` (another
/// frame's row), only written where there is one.
EVN_INLINE void fill_uncovered(float *restrict v, const float *restrict w, const float *restrict vr, int length) {
    int any = 0;
    for (int j = 0; j < length; j++) any |= !(w[j] > 0);
    if (any)
        for (int j = 0; j < length; j++) v[j] = w[j] > 0 ? v[j] : vr[j];
}

EVN_INLINE void merge_chunk(float *value, const float *weight, ptrdiff_t frame_stride, const float *counts,
                            const float *medians, const float *dev, const evn_raw_merge_params *p, int32_t i0,
                            int32_t ci, ptrdiff_t stride, float *out, uint16_t *kept, int16_t *best, float *refdev,
                            int8_t *refoff, const int c) {
    const int n = p->frames, method = p->method, length = ci * c;
    const ptrdiff_t j0 = (ptrdiff_t)i0 * c;
    float med[MERGE_CHUNK * 4], limit[MERGE_CHUNK * 4], sum[MERGE_CHUNK * 4], wsum[MERGE_CHUNK * 4];
    float bd[MERGE_CHUNK];
    int covered[MERGE_CHUNK * 4], keptCount[MERGE_CHUNK], b[MERGE_CHUNK];
    int ok[MERGE_CHUNK * 4];
    const int replacing = p->replace_beyond > 0 && method == 1 && dev;
    const int joint = p->joint > 0 && method == 1;
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
        // Sample by sample (so that it vectorises), then each cell's sum over its channels in
        // their order.
        float dist[MERGE_CHUNK * 4];
        for (int j = 0; j < length; j++) {
            const float q = limit[j] / p->kappa;
            const float d = ((wr[j] > 0) & (q < INFINITY)) ? (vr[j] - med[j]) / sqrtf(q * q + 1e-12f) : 0.0f;
            dist[j] = d;
            // rintf rounds as lrintf does (to nearest, ties to even), to an integral float.
            if (refoff) refoff[j0 + j] = (int8_t)(int)rintf((d > range ? range : (d < -range ? -range : d)) * scale);
        }
        if (refdev) {
            for (int i = 0; i < ci; i++) {
                float sum = 0;
                for (int ch = 0; ch < c; ch++) sum += dist[i * c + ch] * dist[i * c + ch];
                refdev[i0 + i] = sum / c;
            }
        }
    }
    // Robust keeps a frame only where all its channels agree (a frame covers a cell or it does
    // not): each within its limit, or with `joint` their squared distances together; sigma-clip
    // judges each channel alone; the mean keeps every covering frame.
    for (int i = 0; i < ci; i++) keptCount[i] = 0;
    // Each sample's test first, over all of them (no branch: it vectorises), then each cell's.
    int within[MERGE_CHUNK * 4];
    for (int k = 0; k < n; k++) {
        const float *v = value + k * frame_stride + j0, *w = weight + k * frame_stride + j0;
        if (joint) {
            // Each sample's squared distance in units of its limit (0 where the limit is
            // infinite), then each cell's sum over its channels, which must all be covered.
            float z2[MERGE_CHUNK * 4];
            for (int j = 0; j < length; j++) {
                const float e = limit[j] > 0 ? (v[j] - med[j]) / limit[j] : (v[j] == med[j] ? 0.0f : INFINITY);
                z2[j] = e * e;
            }
            for (int i = 0; i < ci; i++) {
                float sum2 = 0;
                int all = 1;
                for (int ch = 0; ch < c; ch++) {
                    sum2 += z2[i * c + ch];
                    all &= w[i * c + ch] > 0;
                }
                all &= sum2 <= p->joint;
                for (int ch = 0; ch < c; ch++) ok[i * c + ch] = all;
                keptCount[i] += all;
            }
        } else {
            for (int j = 0; j < length; j++) within[j] = (w[j] > 0) & (fabsf(v[j] - med[j]) <= limit[j]);
            for (int i = 0; i < ci; i++) {
                int all = 1;
                for (int ch = 0; ch < c; ch++) all &= within[i * c + ch];
                for (int ch = 0; ch < c; ch++) ok[i * c + ch] = all;
                keptCount[i] += all;
            }
        }
        if (method == 2) continue;
        for (int j = 0; j < length; j++) {
            const int use = method == 1 ? ok[j] : within[j];
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
                    off |= (w[ch] > 0) & (fabsf(v[ch] - med[i * c + ch]) > p->replace_beyond * limit[i * c + ch]);
                if (off)
                    for (int ch = 0; ch < c; ch++) v[ch] = out[j0 + i * c + ch];
            }
        }
        // Then each other frame's samples of weight 0 (it does not cover the site) take the
        // reference's, as evn_raw_wiener_fill did after the vote: here the rows are still in cache.
        if (p->reference >= 0) {
            const float *vr = value + p->reference * frame_stride + j0;
            for (int k = 0; k < n; k++)
                if (k != p->reference)
                    fill_uncovered(value + k * frame_stride + j0, weight + k * frame_stride + j0, vr, length);
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
        // A Bayer burst's four channels as a constant: the loops over them unroll and vectorise
        // (the same operations in the same order).
        if (p->channels == 4)
            merge_chunk(value, weight, frame_stride, counts, medians, dev, p, i0, ci, stride, out, kept, best, refdev,
                        refoff, 4);
        else
            merge_chunk(value, weight, frame_stride, counts, medians, dev, p, i0, ci, stride, out, kept, best, refdev,
                        refoff, p->channels);
    }
}

EVN_KERNEL_VARIANTS(void, evn_raw_merge_cells, raw_merge_cells, merge_cells,
                    (float *value, const float *weight, ptrdiff_t frame_stride, const float *counts,
                     const float *medians, const float *dev, const evn_raw_merge_params *p, int32_t count,
                     ptrdiff_t stride, float *out, uint16_t *kept, int16_t *best, float *reference_deviation,
                     int8_t *reference_offset),
                    (value, weight, frame_stride, counts, medians, dev, p, count, stride, out, kept, best,
                     reference_deviation, reference_offset))
