// The spatial denoise of a raw merge's planes (evanesco_raw.h): every 4 x 4 window of cells of the
// four colours, decorrelated, shrunk in the DCT domain in two stages (a hard threshold for a
// pilot, then a Wiener filter on the pilot's spectrum), the windows' estimates averaged.
#include <stdlib.h>
#include <string.h>

#include "evanesco_kernels.h"
#include "evanesco_raw.h"
#include "vectors.h"

/// The orthonormal 4-point DCT-II: row u, tap k.
static const float dct4[4][4] = {
    {0.5f, 0.5f, 0.5f, 0.5f},
    {0.65328148f, 0.27059805f, -0.27059805f, -0.65328148f},
    {0.5f, -0.5f, -0.5f, 0.5f},
    {0.27059805f, -0.65328148f, 0.65328148f, -0.27059805f},
};

/// The colours of a cell (red, first green, second green, blue at the planes' channels 0, 1, 3, 2)
/// into luma, green-magenta, red-blue and green-green (orthonormal; its transpose takes them back).
static const float colour4[4][4] = {
    {0.5f, 0.5f, 0.5f, 0.5f},
    {0.5f, -0.5f, -0.5f, 0.5f},
    {0.70710678f, 0.0f, 0.0f, -0.70710678f},
    {0.0f, 0.70710678f, -0.70710678f, 0.0f},
};
static const int colour_channel[4] = {0, 1, 3, 2};

/// One row's transforms along x: for each window column x, the 4 coefficients u of `r[x..x+3]`,
/// at `o[u nw + x]`.
EVN_INLINE void row_transform(const float *r, ptrdiff_t nw, float *restrict o) {
    for (int u = 0; u < 4; u++) {
        const float d0 = dct4[u][0], d1 = dct4[u][1], d2 = dct4[u][2], d3 = dct4[u][3];
        float *restrict ou = o + u * nw;
        for (ptrdiff_t x = 0; x < nw; x++) ou[x] = (d0 * r[x] + d1 * r[x + 1]) + (d2 * r[x + 2] + d3 * r[x + 3]);
    }
}

/// A plane's row transforms (``row_transform``) for the four rows a window row reads, kept as the
/// windows move down one row at a time: row y at slot y mod 4 (4 nw floats each); `next`, the
/// first row not yet transformed.
typedef struct {
    float *slots;
    ptrdiff_t next;
} evn_row_ring;

/// The 16 coefficients of every window whose top-left cell is in row `t` (rows t..t+3 of the
/// plane `rows`, row 0 at index `first`, each `stride` floats) at columns 0..nw-1: `c[16 nw]`,
/// coefficient (v, u) at c[(4 v + u) nw]. The rows' transforms come from `ring`, which computes
/// those it does not hold yet.
EVN_INLINE void forward(const float *rows, ptrdiff_t first, ptrdiff_t stride, ptrdiff_t t, ptrdiff_t nw,
                        evn_row_ring *ring, float *restrict c) {
    if (ring->next < t) ring->next = t;
    for (; ring->next <= t + 3; ring->next++)
        row_transform(rows + (ring->next - first) * stride, nw, ring->slots + (ring->next & 3) * 4 * nw);
    const float *r0 = ring->slots + (t & 3) * 4 * nw, *r1 = ring->slots + ((t + 1) & 3) * 4 * nw;
    const float *r2 = ring->slots + ((t + 2) & 3) * 4 * nw, *r3 = ring->slots + ((t + 3) & 3) * 4 * nw;
    for (int v = 0; v < 4; v++) {
        const float d0 = dct4[v][0], d1 = dct4[v][1], d2 = dct4[v][2], d3 = dct4[v][3];
        for (int u = 0; u < 4; u++) {
            const float *a = r0 + u * nw, *b = r1 + u * nw, *e = r2 + u * nw, *f = r3 + u * nw;
            float *restrict o = c + (4 * v + u) * nw;
            for (ptrdiff_t x = 0; x < nw; x++) o[x] = (d0 * a[x] + d1 * b[x]) + (d2 * e[x] + d3 * f[x]);
        }
    }
}

/// The windows' inverse transforms of `g` (as ``forward`` lays it out) added to rows t..t+3 of
/// `acc` (each `stride` floats; window x covers columns x..x+3). `tmp`: 16 nw floats, not `g`.
EVN_INLINE void inverse_add(const float *restrict g, ptrdiff_t nw, float *restrict tmp, float *acc, ptrdiff_t stride) {
    // Over u first: t[v][k] = sum_u D[u][k] g[v][u].
    for (int v = 0; v < 4; v++) {
        const float *g0 = g + (4 * v) * nw, *g1 = g0 + nw, *g2 = g1 + nw, *g3 = g2 + nw;
        for (int k = 0; k < 4; k++) {
            const float d0 = dct4[0][k], d1 = dct4[1][k], d2 = dct4[2][k], d3 = dct4[3][k];
            float *restrict o = tmp + (4 * v + k) * nw;
            for (ptrdiff_t x = 0; x < nw; x++) o[x] = (d0 * g0[x] + d1 * g1[x]) + (d2 * g2[x] + d3 * g3[x]);
        }
    }
    // Then over v, row i of the window: b[i][k] = sum_v D[v][i] t[v][k], added at column x + k.
    for (int i = 0; i < 4; i++) {
        const float d0 = dct4[0][i], d1 = dct4[1][i], d2 = dct4[2][i], d3 = dct4[3][i];
        float *a = acc + i * stride;
        for (int k = 0; k < 4; k++) {
            const float *t0 = tmp + k * nw, *t1 = tmp + (4 + k) * nw, *t2 = tmp + (8 + k) * nw,
                        *t3 = tmp + (12 + k) * nw;
            float *restrict o = a + k;
            for (ptrdiff_t x = 0; x < nw; x++) o[x] += (d0 * t0[x] + d1 * t1[x]) + (d2 * t2[x] + d3 * t3[x]);
        }
    }
}

/// The windows' noise variance of row `t` (mean of `var` over each window; `hsum` holds each row's
/// sums of 4 neighbouring cells) into `vw`.
EVN_INLINE void window_noise(const float *hsum, ptrdiff_t stride, ptrdiff_t nw, float *restrict vw) {
    const float *a = hsum, *b = hsum + stride, *c = hsum + 2 * stride, *d = hsum + 3 * stride;
    for (ptrdiff_t x = 0; x < nw; x++) vw[x] = ((a[x] + b[x]) + (c[x] + d[x])) * (1.0f / 16);
}

/// Stage one for one window row: coefficients above `threshold` noise deviations kept (the mean
/// always), the rest set to 0.
EVN_INLINE void hard_threshold(float *restrict c, const float *restrict vw, ptrdiff_t nw, float t2) {
    for (int k = 1; k < 16; k++) {
        float *restrict o = c + k * nw;
        for (ptrdiff_t x = 0; x < nw; x++) o[x] = o[x] * o[x] > t2 * vw[x] ? o[x] : 0.0f;
    }
}

/// Stage two: each coefficient times q^2 / (q^2 + vw), q^2 the pilot's energy there plus `guide`
/// times luma's pilot's (`luma`, NULL for luma itself): a colour edge is kept where luma has one.
EVN_INLINE void wiener(float *restrict c, const float *restrict q, const float *restrict luma, float guide,
                       const float *restrict vw, ptrdiff_t nw) {
    for (int k = 1; k < 16; k++) {
        float *restrict o = c + k * nw;
        const float *p = q + k * nw, *l = luma ? luma + k * nw : q + k * nw;
        const float gl = luma ? guide : 0.0f;
        for (ptrdiff_t x = 0; x < nw; x++) {
            const float e = p[x] * p[x] + gl * (l[x] * l[x]);
            o[x] = o[x] * (e / (e + vw[x] + 1e-30f));
        }
    }
}

/// How many windows (of 4 along an axis of `n` cells, all inside it) cover index `i`.
static inline float covering(ptrdiff_t i, ptrdiff_t n) {
    const ptrdiff_t lo = i - 3 > 0 ? i - 3 : 0, hi = i < n - 4 ? i : n - 4;
    return (float)(hi - lo + 1);
}

/// The rows a strip [y0, y1) of an image `h` cells high reads and computes: the cells read (6
/// rows either side: 3 for the pilot's windows, 3 for theirs), the pilot's rows, and the windows
/// of each stage (their top rows, all inside the image).
typedef struct {
    ptrdiff_t a, b, p0, p1, t1a, t1b, t2a, t2b;
} strip_rows;

static inline strip_rows rows_of(ptrdiff_t y0, ptrdiff_t y1, ptrdiff_t h) {
    strip_rows r;
    r.a = y0 - 6 > 0 ? y0 - 6 : 0, r.b = y1 + 6 < h ? y1 + 6 : h;
    r.p0 = y0 - 3 > 0 ? y0 - 3 : 0, r.p1 = y1 + 3 < h ? y1 + 3 : h;
    r.t1a = r.p0 - 3 > 0 ? r.p0 - 3 : 0, r.t1b = r.p1 - 1 < h - 4 ? r.p1 - 1 : h - 4;
    r.t2a = y0 - 3 > 0 ? y0 - 3 : 0, r.t2b = y1 - 1 < h - 4 ? y1 - 1 : h - 4;
    return r;
}

/// Channel `ch`'s noise at row `y` of `planes` (w x h cells of 4 channels) into `var`: the line at
/// its 3 x 3 mean (edges repeated) times `strength` over `frames`; `pad` holds 3 (w + 2) floats,
/// its middle row then the channel's row y (from index 1).
EVN_INLINE void channel_noise(const uint16_t *planes, ptrdiff_t w, ptrdiff_t h, int ch, ptrdiff_t y,
                              const evn_raw_transform_params *p, const float *frames, float *pad, float *restrict var) {
    const ptrdiff_t src[3] = {y > 0 ? y - 1 : 0, y, y + 1 < h ? y + 1 : h - 1};
    for (int i = 0; i < 3; i++) {
        const uint16_t *sr = planes + src[i] * w * 4 + ch;
        float *restrict d = pad + i * (w + 2) + 1;
        for (ptrdiff_t x = 0; x < w; x++) d[x] = sr[x * 4];
        d[-1] = d[0], d[w] = d[w - 1];
    }
    const float *pa = pad, *py = pad + (w + 2), *pb = pad + 2 * (w + 2);
    const float slope = p->slope[ch], intercept = p->intercept[ch], strength = p->strength;
    for (ptrdiff_t x = 0; x < w; x++) {
        const float m =
            (pa[x] + pa[x + 1] + pa[x + 2] + py[x] + py[x + 1] + py[x + 2] + pb[x] + pb[x + 1] + pb[x + 2]) *
            (1.0f / 9);
        const float level = slope * m + intercept;
        var[x] = (level > 0 ? level : 0) * strength / frames[x];
    }
}

/// Each cell's frames kept at row `y` (at least 1; 1 everywhere without `kept`) into `frames`.
EVN_INLINE void frames_row(const uint16_t *kept, ptrdiff_t w, ptrdiff_t y, float *restrict frames) {
    const uint16_t *kr = kept ? kept + y * w : NULL;
    for (ptrdiff_t x = 0; x < w; x++) frames[x] = kr && kr[x] > 1 ? (float)kr[x] : 1.0f;
}

/// A pilot's rows p0 ..< p1 (row 0 at index `a`, `w` wide, in an image `h` rows high) divided by
/// how many windows covered each cell (`cx`: along x): the mean of its windows' estimates.
EVN_INLINE void pilot_means(float *pilot, ptrdiff_t a, ptrdiff_t p0, ptrdiff_t p1, ptrdiff_t w, ptrdiff_t h,
                            const float *cx) {
    for (ptrdiff_t y = p0; y < p1; y++) {
        float *restrict o = pilot + (y - a) * w;
        const float cy = covering(y, h);
        for (ptrdiff_t x = 0; x < w; x++) o[x] /= cy * cx[x];
    }
}

/// `v` rounded to the nearest sample, clamped to 0 ... 65535, plus the truncation's 0.5: the
/// caller's cast to uint16_t completes the rounding.
static inline float sample_half_up(float v) { return v <= 0 ? 0.5f : v >= 65535 ? 65535.5f : v + 0.5f; }

EVN_INLINE int transform_strip(const uint16_t *planes, const uint16_t *kept, int32_t width, int32_t height,
                               const evn_raw_transform_params *p, int32_t y0, int32_t y1, uint16_t *out) {
    const ptrdiff_t w = width, h = height, nw = w - 3;
    if (y0 < 0 || y1 > height || y0 > y1) return -2;
    if (w < 4 || h < 4 || !(p->strength > 0)) {
        // No window fits (or no noise to take): the rows as they are.
        memcpy(out + (ptrdiff_t)y0 * w * 4, planes + (ptrdiff_t)y0 * w * 4,
               sizeof(uint16_t) * (size_t)((y1 - y0) * w * 4));
        return 0;
    }
    const strip_rows sr = rows_of(y0, y1, h);
    const ptrdiff_t a = sr.a, nr = sr.b - sr.a, p0 = sr.p0, p1 = sr.p1, t1a = sr.t1a, t1b = sr.t1b, t2a = sr.t2a,
                    t2b = sr.t2b;
    const ptrdiff_t plane = nr * w;
    // comp, hsum (of the variance), pilot, acc: 4 planes each; coefficient sets c, q, ql; the
    // rings of row transforms (4 for the colours, 4 for their pilots); rows of the prepare and
    // finish loops.
    float *buf = evn_scratch_alloc(
        "denoise", sizeof(float) * (size_t)(16 * plane + 3 * 16 * nw + 8 * 16 * nw + nw + 3 * (w + 2) + 8 * w), 0);
    if (!buf) return -1;
    float *comp = buf, *hsum = comp + 4 * plane, *pilot = hsum + 4 * plane, *acc = pilot + 4 * plane;
    float *c = acc + 4 * plane, *q = c + 16 * nw, *ql = q + 16 * nw, *slots = ql + 16 * nw, *vw = slots + 8 * 16 * nw;
    float *pad = vw + nw, *var = pad + 3 * (w + 2), *frames = var + w, *cx = frames + w, *row = cx + w;
    memset(pilot, 0, sizeof(float) * (size_t)(8 * plane));
    for (ptrdiff_t x = 0; x < w; x++) cx[x] = covering(x, w);
    // The colours decorrelated, and each one's noise: the merge's line at the 3 x 3 mean of the
    // channel (edges repeated), over the frames kept.
    for (ptrdiff_t r = 0; r < nr; r++) {
        const ptrdiff_t y = a + r;
        float *hs[4];
        for (int k = 0; k < 4; k++) {
            float *restrict o = comp + k * plane + r * w;
            for (ptrdiff_t x = 0; x < w; x++) o[x] = 0;
            hs[k] = hsum + k * plane + r * w;
            for (ptrdiff_t x = 0; x < w; x++) hs[k][x] = 0;
        }
        frames_row(kept, w, y, frames);
        for (int j = 0; j < 4; j++) {
            const int ch = colour_channel[j];
            channel_noise(planes, w, h, ch, y, p, frames, pad, var);
            const float *py = pad + (w + 2);
            for (int k = 0; k < 4; k++) {
                const float t = colour4[k][j], t2 = t * t;
                if (t == 0) continue;
                float *restrict o = comp + k * plane + r * w, *restrict v = hsum + k * plane + r * w;
                for (ptrdiff_t x = 0; x < w; x++) {
                    o[x] += t * py[x + 1];
                    v[x] += t2 * var[x];
                }
            }
        }
        // Each row's sums of 4 neighbouring variances, in place (window x covers x..x+3).
        for (int k = 0; k < 4; k++)
            for (ptrdiff_t x = 0; x < nw; x++) hs[k][x] = (hs[k][x] + hs[k][x + 1]) + (hs[k][x + 2] + hs[k][x + 3]);
    }
    evn_row_ring rings[8];
    for (int k = 0; k < 8; k++) rings[k] = (evn_row_ring){slots + k * 16 * nw, 0};
    const float t2 = p->threshold * p->threshold;
    // Stage one: the pilot.
    for (ptrdiff_t t = t1a; t <= t1b; t++) {
        for (int k = 0; k < 4; k++) {
            window_noise(hsum + k * plane + (t - a) * w, w, nw, vw);
            forward(comp + k * plane, a, w, t, nw, &rings[k], c);
            hard_threshold(c, vw, nw, t2);
            inverse_add(c, nw, q, pilot + k * plane + (t - a) * w, w);
        }
    }
    for (int k = 0; k < 4; k++) pilot_means(pilot + k * plane, a, p0, p1, w, h, cx);
    // Stage two: each colour's windows shrunk by their pilot's spectrum (colours also by luma's).
    // (Its windows start above where stage one's ended: the colours' rings begin again.)
    for (int k = 0; k < 4; k++) rings[k].next = 0;
    for (ptrdiff_t t = t2a; t <= t2b; t++) {
        forward(pilot, a, w, t, nw, &rings[4], ql);
        for (int k = 0; k < 4; k++) {
            window_noise(hsum + k * plane + (t - a) * w, w, nw, vw);
            forward(comp + k * plane, a, w, t, nw, &rings[k], c);
            if (k > 0) forward(pilot + k * plane, a, w, t, nw, &rings[4 + k], q);
            wiener(c, k > 0 ? q : ql, k > 0 ? ql : NULL, p->guide, vw, nw);
            inverse_add(c, nw, q, acc + k * plane + (t - a) * w, w);
        }
    }
    // Back to the channels.
    for (ptrdiff_t y = y0; y < y1; y++) {
        const float cy = covering(y, h);
        const float *e0 = acc + (y - a) * w, *e1 = e0 + plane, *e2 = e1 + plane, *e3 = e2 + plane;
        for (int j = 0; j < 4; j++) {
            const float c0 = colour4[0][j], c1 = colour4[1][j], c2 = colour4[2][j], c3 = colour4[3][j];
            float *restrict o = row + j * w;
            for (ptrdiff_t x = 0; x < w; x++) {
                const float n = 1.0f / (cy * cx[x]);
                const float v = c0 * (e0[x] * n) + c1 * (e1[x] * n) + c2 * (e2[x] * n) + c3 * (e3[x] * n);
                o[x] = sample_half_up(v);
            }
        }
        uint16_t *d = out + y * w * 4;
        for (int j = 0; j < 4; j++) {
            const float *o = row + j * w;
            uint16_t *dc = d + colour_channel[j];
            for (ptrdiff_t x = 0; x < w; x++) dc[x * 4] = (uint16_t)o[x];
        }
    }
    free(buf);
    return 0;
}

EVN_KERNEL_VARIANTS(int, evn_raw_denoise_transform, evn_raw_denoise_transform, transform_strip,
                    (const uint16_t *planes, const uint16_t *kept, int32_t width, int32_t height,
                     const evn_raw_transform_params *p, int32_t y0, int32_t y1, uint16_t *out),
                    (planes, kept, width, height, p, y0, y1, out))

/// Green at the site `sy`, `sx` of cell (x, y) of the planes `f` (width `w`, height `h`, 4
/// channels; `chan`: each site's channel): the mean of the greens at its four neighbouring
/// photosites inside the image.
static inline float green_at(const uint16_t *f, ptrdiff_t w, ptrdiff_t h, const int chan[4], int sy, int sx,
                             ptrdiff_t x, ptrdiff_t y) {
    const ptrdiff_t Y = 2 * y + sy, X = 2 * x + sx;
    const ptrdiff_t ny[4] = {Y, Y, Y - 1, Y + 1}, nx[4] = {X - 1, X + 1, X, X};
    float sum = 0;
    int n = 0;
    for (int i = 0; i < 4; i++) {
        if (ny[i] < 0 || ny[i] >= 2 * h || nx[i] < 0 || nx[i] >= 2 * w) continue;
        sum += f[((ny[i] >> 1) * w + (nx[i] >> 1)) * 4 + chan[(ny[i] & 1) * 2 + (nx[i] & 1)]];
        n++;
    }
    return sum / (float)n;
}

/// `green_at` for the cells x0 ..< x1 of a row y inside the image by a cell on every side (its four
/// neighbours all inside, at fixed cells and channels): the same sums in the same order, into `g`.
EVN_INLINE void green_row_inside(const uint16_t *f, ptrdiff_t w, const int chan[4], int sy, int sx, ptrdiff_t y,
                                 ptrdiff_t x0, ptrdiff_t x1, float *restrict g) {
    // Photosite (Y + ny, X + nx) of cell (x, y), Y = 2 y + sy, X = 2 x + sx: at cell
    // (x + floor((sx + nx) / 2), y + floor((sy + ny) / 2)), channel of site ((sy + ny) & 1, (sx + nx) & 1).
    const int ny[4] = {0, 0, -1, 1}, nx[4] = {-1, 1, 0, 0};
    ptrdiff_t at[4];
    for (int i = 0; i < 4; i++) {
        const int py = sy + ny[i], px = sx + nx[i];
        at[i] = ((py >> 1) * w + (px >> 1)) * 4 + chan[(py & 1) * 2 + (px & 1)];
    }
    const uint16_t *r = f + y * w * 4;
    for (ptrdiff_t x = x0; x < x1; x++) {
        const uint16_t *p = r + x * 4;
        float sum = 0;
        sum += p[at[0]];
        sum += p[at[1]];
        sum += p[at[2]];
        sum += p[at[3]];
        g[x] = sum / 4.0f;
    }
}

EVN_INLINE int difference_strip(const uint16_t *merged, const uint16_t *filtered, const uint16_t *kept, int32_t width,
                                int32_t height, const evn_raw_transform_params *p, int32_t y0, int32_t y1,
                                uint16_t *out) {
    const ptrdiff_t w = width, h = height, nw = w - 3;
    if (y0 < 0 || y1 > height || y0 > y1) return -2;
    memcpy(out + (ptrdiff_t)y0 * w * 4, filtered + (ptrdiff_t)y0 * w * 4,
           sizeof(uint16_t) * (size_t)((y1 - y0) * w * 4));
    if (w < 4 || h < 4 || !(p->strength > 0) || !(p->difference_threshold > 0)) return 0;
    int chan[4];
    for (int ch = 0; ch < 4; ch++) chan[p->site[ch] & 3] = ch;
    const strip_rows sr = rows_of(y0, y1, h);
    const ptrdiff_t a = sr.a, nr = sr.b - sr.a, plane = nr * w;
    // difference, hsum (of the variance), pilot, acc, green, frames kept: a plane each;
    // coefficient sets c and q; the rings of row transforms of the difference and of its pilot;
    // rows of the prepare loop.
    float *buf =
        evn_scratch_alloc("denoise-differences",
                          sizeof(float) * (size_t)(6 * plane + 2 * 16 * nw + 2 * 16 * nw + nw + 3 * (w + 2) + w), 0);
    if (!buf) return -1;
    float *diff = buf, *hsum = diff + plane, *pilot = hsum + plane, *acc = pilot + plane, *green = acc + plane;
    float *frames = green + plane, *c = frames + plane, *q = c + 16 * nw, *slots = q + 16 * nw;
    float *vw = slots + 2 * 16 * nw, *pad = vw + nw, *cx = pad + 3 * (w + 2);
    // The frames kept, row by row, for both colours.
    for (ptrdiff_t r = 0; r < nr; r++) frames_row(kept, w, a + r, frames + r * w);
    for (ptrdiff_t x = 0; x < w; x++) cx[x] = covering(x, w);
    const float t2 = p->difference_threshold * p->difference_threshold;
    for (int ch = 0; ch < 4; ch += 2) { // red, then blue
        const int sy = (p->site[ch] & 3) >> 1, sx = p->site[ch] & 1;
        memset(pilot, 0, sizeof(float) * (size_t)(2 * plane));
        for (ptrdiff_t r = 0; r < nr; r++) {
            const ptrdiff_t y = a + r;
            float *restrict g = green + r * w, *restrict dr = diff + r * w, *restrict hs = hsum + r * w;
            channel_noise(merged, w, h, ch, y, p, frames + r * w, pad, hs);
            const float *py = pad + (w + 2);
            if (y >= 1 && y + 1 < h && w >= 3) {
                g[0] = green_at(filtered, w, h, chan, sy, sx, 0, y);
                green_row_inside(filtered, w, chan, sy, sx, y, 1, w - 1, g);
                g[w - 1] = green_at(filtered, w, h, chan, sy, sx, w - 1, y);
            } else {
                for (ptrdiff_t x = 0; x < w; x++) g[x] = green_at(filtered, w, h, chan, sy, sx, x, y);
            }
            for (ptrdiff_t x = 0; x < w; x++) dr[x] = py[x + 1] - g[x];
            for (ptrdiff_t x = 0; x < nw; x++) hs[x] = (hs[x] + hs[x + 1]) + (hs[x + 2] + hs[x + 3]);
        }
        evn_row_ring rd = {slots, 0}, rp = {slots + 16 * nw, 0};
        // Stage one: the pilot.
        for (ptrdiff_t t = sr.t1a; t <= sr.t1b; t++) {
            window_noise(hsum + (t - a) * w, w, nw, vw);
            forward(diff, a, w, t, nw, &rd, c);
            hard_threshold(c, vw, nw, t2);
            inverse_add(c, nw, q, pilot + (t - a) * w, w);
        }
        pilot_means(pilot, a, sr.p0, sr.p1, w, h, cx);
        // Stage two: the difference's windows shrunk by their pilot's spectrum.
        rd.next = 0;
        for (ptrdiff_t t = sr.t2a; t <= sr.t2b; t++) {
            window_noise(hsum + (t - a) * w, w, nw, vw);
            forward(diff, a, w, t, nw, &rd, c);
            forward(pilot, a, w, t, nw, &rp, q);
            wiener(c, q, NULL, 0, vw, nw);
            inverse_add(c, nw, q, acc + (t - a) * w, w);
        }
        for (ptrdiff_t y = y0; y < y1; y++) {
            const float cy = covering(y, h);
            const float *e = acc + (y - a) * w, *g = green + (y - a) * w;
            uint16_t *d = out + y * w * 4 + ch;
            for (ptrdiff_t x = 0; x < w; x++) {
                const float v = g[x] + e[x] / (cy * cx[x]);
                d[x * 4] = (uint16_t)sample_half_up(v);
            }
        }
    }
    free(buf);
    return 0;
}

EVN_KERNEL_VARIANTS(int, evn_raw_denoise_differences, evn_raw_denoise_differences, difference_strip,
                    (const uint16_t *merged, const uint16_t *filtered, const uint16_t *kept, int32_t width,
                     int32_t height, const evn_raw_transform_params *p, int32_t y0, int32_t y1, uint16_t *out),
                    (merged, filtered, kept, width, height, p, y0, y1, out))
