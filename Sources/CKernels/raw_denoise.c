// The spatial denoise of a raw merge's planes (evanesco_raw.h): a Lee filter whose noise is
// what the merge left, the sensor's noise line over the frames kept at each cell.
#include "evanesco_raw.h"
#include <math.h>

/// Mirror of `i` into [0, n): -1 is 1, n is n - 2 (one cell alone is itself).
static inline int mirror(int i, int n) {
    if (n == 1) return 0;
    if (i < 0) return -i;
    if (i >= n) return 2 * n - 2 - i;
    return i;
}

/// Row `y` of channel `ch` as floats into `row`.
static void load_row(const uint16_t *planes, int w, int c, int ch, int y, float *row) {
    const uint16_t *s = planes + ((ptrdiff_t)y * w) * c + ch;
    for (int x = 0; x < w; x++) row[x] = s[(ptrdiff_t)x * c];
}

/// The filtered value of the cell at `x` of the middle row of `rows` (the three original rows),
/// kept by `frames` frames.
static inline float lee(const float *const rows[3], int x, int w, float frames, const evn_raw_denoise_params *p) {
    const int xl = mirror(x - 1, w), xr = mirror(x + 1, w);
    float v9[9];
    float sum = 0;
    for (int i = 0; i < 3; i++) {
        v9[3 * i] = rows[i][xl], v9[3 * i + 1] = rows[i][x], v9[3 * i + 2] = rows[i][xr];
        sum += v9[3 * i] + v9[3 * i + 1] + v9[3 * i + 2];
    }
    const float m = sum / 9;
    // The variance about the mean (not the mean of squares less the square of the mean, which
    // loses the noise's few hundred to rounding next to samples in the tens of thousands).
    float var = 0;
    for (int i = 0; i < 9; i++) var += (v9[i] - m) * (v9[i] - m);
    var /= 9;
    const float level = p->slope * m + p->intercept;
    const float n = (level > 0 ? level : 0) / frames, x0 = rows[1][x];
    if (p->texture > 0 && var > p->texture * n) return x0;
    const float r = p->strength * n;
    const float g = var > r ? (var - r) / var : 0;
    return m + g * (x0 - m);
}

int evn_raw_denoise_channel(uint16_t *planes, const uint16_t *kept, int32_t width, int32_t height, int32_t channels,
                            int32_t ch, const evn_raw_denoise_params *p, float *rows3) {
    const int w = width, h = height, c = channels;
    if (ch < 0 || ch >= c) return -1;
    if (w < 1 || h < 1 || !(p->strength > 0)) return 0;
    // The original rows y - 1, y and y + 1: row y is written back before y + 1 is read.
    float *orig[3] = {rows3, rows3 + w, rows3 + 2 * w};
    load_row(planes, w, c, ch, 0, orig[1]);
    if (h > 1) load_row(planes, w, c, ch, 1, orig[2]);
    for (int y = 0; y < h; y++) {
        // Mirrored: above row 0 is row 1, below the last the one before it.
        const float *rows[3] = {y == 0 ? (h > 1 ? orig[2] : orig[1]) : orig[0], orig[1],
                                y == h - 1 ? (h > 1 ? orig[0] : orig[1]) : orig[2]};
        uint16_t *d = planes + ((ptrdiff_t)y * w) * c + ch;
        const uint16_t *k = kept ? kept + (ptrdiff_t)y * w : NULL;
        for (int x = 0; x < w; x++) {
            const float out = lee(rows, x, w, k && k[x] > 1 ? (float)k[x] : 1, p);
            d[(ptrdiff_t)x * c] = out <= 0 ? 0 : out >= 65535 ? 65535 : (uint16_t)lrintf(out);
        }
        // Shift the ring: the rows y and y + 1 become y - 1 and y; y + 2 is read.
        float *t = orig[0];
        orig[0] = orig[1], orig[1] = orig[2], orig[2] = t;
        if (y + 2 < h) load_row(planes, w, c, ch, y + 2, orig[2]);
    }
    return 0;
}
