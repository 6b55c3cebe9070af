// The robust merge's second look where the frames split (SigmaClipKernel, see evanesco_kernels.h):
// the largest group of frames that agree, where it outnumbers every other group and the
// median-centred clip landed away from it. Scalar: it runs on the few pixels whose frames split.
#include "evanesco_kernels.h"

// The densest window [lo, lo + width] over one sample's n sorted values (`stride` apart), its
// count in *best, the most any window `wide` wide that does not overlap it holds in *second, and
// how many lie within one width of it on either side in *close.
static float densest_window(const float *s, ptrdiff_t stride, int32_t n, float width, float wide, int32_t *best,
                            int32_t *second, int32_t *close) {
    int32_t most = 0, hi = 0;
    float lo = s[0];
    for (int32_t i = 0; i < n; i++) {
        const float start = s[(ptrdiff_t)i * stride];
        while (hi < n && s[(ptrdiff_t)hi * stride] - start <= width) hi++;
        if (hi - i > most) {
            most = hi - i;
            lo = start;
        }
    }
    int32_t other = 0;
    hi = 0;
    for (int32_t i = 0; i < n; i++) {
        const float start = s[(ptrdiff_t)i * stride];
        while (hi < n && s[(ptrdiff_t)hi * stride] - start <= wide) hi++;
        const int disjoint = start > lo + width || start + wide < lo;
        if (disjoint && hi - i > other) other = hi - i;
    }
    int32_t near = 0;
    for (int32_t i = 0; i < n; i++) {
        const float v = s[(ptrdiff_t)i * stride];
        near += (v >= lo - width && v < lo) || (v > lo + width && v <= lo + 2 * width);
    }
    *best = most;
    *second = other;
    *close = near;
    return lo;
}

ptrdiff_t evn_largest_group(const evn_clip_tile *t, ptrdiff_t channels, const float *sorted, const int32_t *counts,
                            const evn_group_params *p, float *work, float *out) {
    if (channels < 1 || channels > 4) return -1;
    const ptrdiff_t c = channels, pixels = t->pixels;
    float *means = work, *found = work + pixels * c;
    for (ptrdiff_t px = 0; px < pixels; px++) found[px] = 0;
    for (ptrdiff_t px = 0; px < pixels; px++) {
        const ptrdiff_t j0 = px * c;
        const int32_t n = counts[j0];
        int32_t need = (int32_t)(p->min_share * (float)n + 0.999f);
        if (need < p->min_group) need = p->min_group;
        if (n < need) continue;
        int split = 0;
        for (ptrdiff_t ch = 0; ch < c; ch++) split |= t->thresholds[j0 + ch] > p->gate;
        if (!split) continue;
        float lo[4];
        int clear = 1;
        for (ptrdiff_t ch = 0; ch < c && clear; ch++) {
            int32_t best, second, close;
            lo[ch] = densest_window(sorted + j0 + ch, t->stride, n, p->width, p->wide, &best, &second, &close);
            clear = best >= need && best > second && 2 * close < best;
        }
        if (!clear) continue;
        float sum[4] = {0, 0, 0, 0};
        int32_t members = 0;
        const float *v = t->values + j0;
        const unsigned char *ok = t->valid + px;
        for (ptrdiff_t k = 0; k < t->frames; k++, v += t->stride, ok += pixels) {
            if (!*ok) continue;
            int inside = 1;
            for (ptrdiff_t ch = 0; ch < c; ch++) inside &= v[ch] >= lo[ch] && v[ch] <= lo[ch] + p->width;
            if (!inside) continue;
            members++;
            for (ptrdiff_t ch = 0; ch < c; ch++) sum[ch] += v[ch];
        }
        if (members < need) continue;
        float far = 0;
        for (ptrdiff_t ch = 0; ch < c; ch++) {
            means[j0 + ch] = sum[ch] / (float)members;
            const float d = out[j0 + ch] - means[j0 + ch];
            far = far > (d < 0 ? -d : d) ? far : (d < 0 ? -d : d);
        }
        found[px] = far > 0.5f * p->width;
    }
    // Only runs of at least min_run pixels: someone passing covers many, while a pixel alone is
    // more likely a few frames that happened to agree.
    ptrdiff_t changed = 0;
    for (ptrdiff_t px = 0; px < pixels;) {
        if (found[px] == 0) {
            px++;
            continue;
        }
        ptrdiff_t end = px;
        while (end < pixels && found[end] != 0) end++;
        if (end - px >= p->min_run) {
            for (ptrdiff_t q = px; q < end; q++)
                for (ptrdiff_t ch = 0; ch < c; ch++) out[q * c + ch] = means[q * c + ch];
            changed += end - px;
        }
        px = end;
    }
    return changed;
}
