// A PNG's image data in pieces (see evanesco_encode.h): each piece of rows filtered and deflated
// on its own, on any core, and the pieces joined into IDAT chunks that hold one zlib stream.
#include "evanesco_encode.h"
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

int evn_png_encode_piece(const uint8_t *image, size_t row_bytes, size_t bpp, int sixteen, size_t y0, size_t y1,
                         int filter, int level, int last, evn_png_piece *piece) {
    piece->data = NULL;
    piece->length = -1;
    piece->adler = 1;
    piece->filtered = (y1 - y0) * (row_bytes + 1);
    const size_t n = piece->filtered, cap = evn_deflate_piece_bound(n);
    uint8_t *raw = malloc(n ? n : 1), *out = malloc(cap);
    if (!raw || !out || evn_png_filter_rows(image, row_bytes, bpp, sixteen, y0, y1, filter, raw) != 0) {
        free(raw);
        free(out);
        return -1;
    }
    piece->adler = evn_adler32(1, raw, n);
    long length = evn_deflate_piece(raw, n, out, cap, level, last);
    // A stream the walk could not follow (it never has been): zlib joins pieces natively.
    if (length < 0) length = evn_deflate_piece_zlib(raw, n, out, cap, level > 9 ? 9 : level, last);
    free(raw);
    if (length < 0) {
        free(out);
        return -1;
    }
    piece->data = out;
    piece->length = length;
    return 0;
}

size_t evn_png_idat_size(const evn_png_piece *pieces, size_t count) {
    size_t total = 2 + 4; // zlib header and Adler-32
    for (size_t k = 0; k < count; k++) total += 12 + (size_t)pieces[k].length;
    return total;
}

static void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

size_t evn_png_write_idat(const evn_png_piece *pieces, size_t count, int level, uint8_t *out) {
    // CMF 0x78: deflate, 32 KB window. FLG: FLEVEL (0 fastest, 1 fast, 2 default, 3 best), no
    // dictionary, FCHECK making CMF * 256 + FLG a multiple of 31.
    const unsigned flevel = level <= 1 ? 0 : level <= 5 ? 1 : level == 6 ? 2 : 3;
    const unsigned flg = (flevel << 6) + (31 - ((0x78u * 256 + (flevel << 6)) % 31)) % 31;
    uLong adler = pieces[0].adler;
    for (size_t k = 1; k < count; k++) adler = adler32_combine(adler, pieces[k].adler, (z_off_t)pieces[k].filtered);
    uint8_t *p = out;
    for (size_t k = 0; k < count; k++) {
        const size_t length = (size_t)pieces[k].length + (k == 0 ? 2 : 0) + (k == count - 1 ? 4 : 0);
        put32(p, (uint32_t)length);
        uint8_t *body = p + 4;
        memcpy(body, "IDAT", 4);
        uint8_t *d = body + 4;
        if (k == 0) {
            *d++ = 0x78;
            *d++ = (uint8_t)flg;
        }
        memcpy(d, pieces[k].data, (size_t)pieces[k].length);
        d += pieces[k].length;
        if (k == count - 1) {
            put32(d, (uint32_t)adler);
            d += 4;
        }
        put32(d, evn_crc32(0, body, length + 4));
        p = d + 4;
    }
    return (size_t)(p - out);
}
