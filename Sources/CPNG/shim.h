// libpng reports errors with longjmp, which Swift cannot catch. These static inline helpers keep
// every setjmp inside one C frame that stays alive for the whole libpng call, and turn a libpng
// error into a return code plus a message. They hold no state of their own.
#include <png.h>
#include <zlib.h>
#include <libdeflate.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

typedef struct evn_png_io {
    png_structp png;
    png_infop info;
    const unsigned char *data; // reading: the encoded file
    size_t size, pos;
    unsigned char *out; // writing: malloc'd, grown as needed, caller frees
    size_t out_size, out_cap;
    char error[256];
} evn_png_io;

static void evn_png_error_fn(png_structp png, png_const_charp msg) {
    evn_png_io *io = (evn_png_io *)png_get_error_ptr(png);
    strncpy(io->error, msg ? msg : "libpng error", sizeof(io->error) - 1);
    io->error[sizeof(io->error) - 1] = 0;
    png_longjmp(png, 1);
}
static void evn_png_warning_fn(png_structp png, png_const_charp msg) {
    (void)png;
    (void)msg;
}

static void evn_png_read_fn(png_structp png, png_bytep dst, size_t n) {
    evn_png_io *io = (evn_png_io *)png_get_io_ptr(png);
    if (io->size - io->pos < n) png_error(png, "file is truncated (unexpected end of PNG data)");
    memcpy(dst, io->data + io->pos, n);
    io->pos += n;
}

/// Opens `data` and reads the header. Transforms are set so that rows come out as 8- or 16-bit
/// (host byte order) grey, RGB or RGBA. Returns 0 on success.
static inline int evn_png_read_begin(evn_png_io *io, const unsigned char *data, size_t size) {
    memset(io, 0, sizeof(*io));
    io->data = data;
    io->size = size;
    io->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, io, evn_png_error_fn, evn_png_warning_fn);
    if (!io->png) {
        strcpy(io->error, "out of memory");
        return -1;
    }
    io->info = png_create_info_struct(io->png);
    if (!io->info) {
        strcpy(io->error, "out of memory");
        return -1;
    }
    if (setjmp(png_jmpbuf(io->png))) return -1;
    png_set_user_limits(io->png, 0x7fffffff, 0x7fffffff);
    png_set_read_fn(io->png, io, evn_png_read_fn);
    png_read_info(io->png, io->info);
    int color = png_get_color_type(io->png, io->info);
    int depth = png_get_bit_depth(io->png, io->info);
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(io->png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(io->png);
    if (png_get_valid(io->png, io->info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(io->png);
    if (color == PNG_COLOR_TYPE_GRAY_ALPHA ||
        (color == PNG_COLOR_TYPE_GRAY && png_get_valid(io->png, io->info, PNG_INFO_tRNS)))
        png_set_gray_to_rgb(io->png);
    if (depth == 16) png_set_swap(io->png);
    png_set_interlace_handling(io->png);
    png_read_update_info(io->png, io->info);
    return 0;
}

/// Decodes every row into `rows` (one pointer a row). Returns 0 on success.
static inline int evn_png_read_rows(evn_png_io *io, unsigned char **rows) {
    if (setjmp(png_jmpbuf(io->png))) return -1;
    png_read_image(io->png, rows);
    png_read_end(io->png, io->info);
    return 0;
}

static inline void evn_png_read_end(evn_png_io *io) {
    if (io->png) png_destroy_read_struct(&io->png, io->info ? &io->info : NULL, NULL);
    io->png = NULL;
    io->info = NULL;
}

static void evn_png_write_fn(png_structp png, png_bytep src, size_t n) {
    evn_png_io *io = (evn_png_io *)png_get_io_ptr(png);
    if (io->out_cap - io->out_size < n) {
        size_t cap = io->out_cap ? io->out_cap : 65536;
        while (cap - io->out_size < n) cap *= 2;
        unsigned char *grown = (unsigned char *)realloc(io->out, cap);
        if (!grown) png_error(png, "out of memory while encoding PNG");
        io->out = grown;
        io->out_cap = cap;
    }
    memcpy(io->out + io->out_size, src, n);
    io->out_size += n;
}
static void evn_png_flush_fn(png_structp png) { (void)png; }

// A PNG written in parts: the header and metadata chunks through libpng, then the image data
// the caller compresses in pieces (CKernels' evn_png_write_idat), then IEND.

/// Starts a PNG in io->out: signature, IHDR, and iCCP/eXIf when given. Returns 0 on success;
/// on failure io->out is freed and io->error says why.
static inline int evn_png_write_head(evn_png_io *io, unsigned width, unsigned height, int channels, int depth,
                                     const unsigned char *icc, unsigned icc_len, const unsigned char *exif,
                                     unsigned exif_len) {
    memset(io, 0, sizeof(*io));
    io->png = png_create_write_struct(PNG_LIBPNG_VER_STRING, io, evn_png_error_fn, evn_png_warning_fn);
    if (!io->png) {
        strcpy(io->error, "out of memory");
        return -1;
    }
    io->info = png_create_info_struct(io->png);
    if (!io->info) {
        png_destroy_write_struct(&io->png, NULL);
        strcpy(io->error, "out of memory");
        return -1;
    }
    if (setjmp(png_jmpbuf(io->png))) {
        png_destroy_write_struct(&io->png, &io->info);
        free(io->out);
        io->out = NULL;
        io->out_size = 0;
        return -1;
    }
    png_set_write_fn(io->png, io, evn_png_write_fn, evn_png_flush_fn);
    int color = channels == 1   ? PNG_COLOR_TYPE_GRAY
                : channels == 2 ? PNG_COLOR_TYPE_GRAY_ALPHA
                : channels == 3 ? PNG_COLOR_TYPE_RGB
                                : PNG_COLOR_TYPE_RGB_ALPHA;
    png_set_IHDR(io->png, io->info, width, height, depth, color, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    png_set_benign_errors(io->png, 1); // an invalid ICC profile is dropped, not fatal
    if (icc && icc_len) png_set_iCCP(io->png, io->info, "icc", PNG_COMPRESSION_TYPE_BASE, icc, icc_len);
    if (exif && exif_len) png_set_eXIf_1(io->png, io->info, exif_len, (png_bytep)exif);
    png_write_info(io->png, io->info);
    return 0;
}

/// Frees libpng's state after the head (io->out stays: the caller frees it).
static inline void evn_png_write_done(evn_png_io *io) {
    if (io->png) png_destroy_write_struct(&io->png, &io->info);
    io->png = NULL;
    io->info = NULL;
}

// The plain PNGs bursts are made of (8- or 16-bit grey, RGB or RGBA, not interlaced, no
// transparency chunk, no colour profile or EXIF), read without libpng: the chunks checked
// (CRCs, order), the image data inflated in one call by libdeflate (about twice zlib's speed)
// straight to its known size, the rows unfiltered. Anything else, and any file this path finds
// fault with, is left to libpng, which reads the rest and says what is wrong with a bad file.

static inline uint32_t evn_png_be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

typedef unsigned char evn_png_u8x16 __attribute__((ext_vector_type(16)));

/// The Sub filter undone for 3- and 4-byte pixels (8-bit RGB, RGBA), a prefix sum at a stride of
/// one pixel: 4 pixels a step, summed within the vector in two shifted adds, plus the previous
/// step's last pixel. The same bytes as one at a time (additions modulo 256 in either order).
static inline void evn_png_unsub(const unsigned char *src, unsigned char *dst, size_t n, size_t bpp) {
    const evn_png_u8x16 zero = 0;
    evn_png_u8x16 carry = 0;
    size_t i = 0;
    if (bpp == 3) {
        for (; i + 16 <= n; i += 12) {
            evn_png_u8x16 x;
            memcpy(&x, src + i, 16);
            x += __builtin_shufflevector(x, zero, 16, 16, 16, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12);
            x += __builtin_shufflevector(x, zero, 16, 16, 16, 16, 16, 16, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9);
            x += carry;
            memcpy(dst + i, &x, 12);
            carry = __builtin_shufflevector(x, x, 9, 10, 11, 9, 10, 11, 9, 10, 11, 9, 10, 11, 9, 10, 11, 9);
        }
    } else if (bpp == 4) {
        for (; i + 16 <= n; i += 16) {
            evn_png_u8x16 x;
            memcpy(&x, src + i, 16);
            x += __builtin_shufflevector(x, zero, 16, 16, 16, 16, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11);
            x += __builtin_shufflevector(x, zero, 16, 16, 16, 16, 16, 16, 16, 16, 0, 1, 2, 3, 4, 5, 6, 7);
            x += carry;
            memcpy(dst + i, &x, 16);
            carry = __builtin_shufflevector(x, x, 12, 13, 14, 15, 12, 13, 14, 15, 12, 13, 14, 15, 12, 13, 14, 15);
        }
    }
    for (; i < n; i++) dst[i] = (unsigned char)(src[i] + (i >= bpp ? dst[i - bpp] : 0));
}

/// Undoes one row's filter (`type` 0-4) of `n` bytes, `bpp` bytes a pixel: `dst` from `src`
/// (which may be `dst`) and the unfiltered row above, `prev` (zeros for the first row).
static inline void evn_png_unfilter(int type, const unsigned char *src, unsigned char *dst, const unsigned char *prev,
                                    size_t n, size_t bpp) {
    size_t i;
    switch (type) {
    case 0:
        if (src != dst) memcpy(dst, src, n);
        break;
    case 1:
        if (bpp == 3 || bpp == 4) {
            evn_png_unsub(src, dst, n, bpp);
            break;
        }
        for (i = 0; i < bpp && i < n; i++) dst[i] = src[i];
        for (; i < n; i++) dst[i] = (unsigned char)(src[i] + dst[i - bpp]);
        break;
    case 2:
        for (i = 0; i < n; i++) dst[i] = (unsigned char)(src[i] + prev[i]);
        break;
    case 3:
        for (i = 0; i < bpp && i < n; i++) dst[i] = (unsigned char)(src[i] + (prev[i] >> 1));
        for (; i < n; i++) dst[i] = (unsigned char)(src[i] + ((dst[i - bpp] + prev[i]) >> 1));
        break;
    default: // 4, Paeth: the one of left, above, upper left nearest left + above - upper left
        for (i = 0; i < bpp && i < n; i++) dst[i] = (unsigned char)(src[i] + prev[i]);
        for (; i < n; i++) {
            int a = dst[i - bpp], b = prev[i], c = prev[i - bpp];
            int pa = abs(b - c), pb = abs(a - c), pc = abs(a + b - 2 * c);
            int p = (pa <= pb && pa <= pc) ? a : (pb <= pc ? b : c);
            dst[i] = (unsigned char)(src[i] + p);
        }
        break;
    }
}

/// Decodes `data` (a whole PNG file) into `out`: `height` rows of `width` pixels of `channels`
/// (1, 3 or 4) samples of `depth` (8 or 16, host byte order) bits, rows contiguous. Returns 0
/// when `out` holds the image, 1 when the file is not one this path reads or something in it
/// is wrong (nothing is said: the caller reads it with libpng), -1 when memory runs out.
static inline int evn_png_fast_read(const unsigned char *data, size_t size, unsigned char *out, size_t width,
                                    size_t height, int channels, int depth) {
    static const unsigned char signature[8] = {137, 80, 78, 71, 13, 10, 26, 10};
    int colour = channels == 1 ? 0 : channels == 3 ? 2 : channels == 4 ? 6 : -1;
    if (colour < 0 || (depth != 8 && depth != 16) || width == 0 || height == 0) return 1;
    if (size < 8 || memcmp(data, signature, 8) != 0) return 1;
    size_t bpp = (size_t)channels * (size_t)(depth / 8);
    if (width > (SIZE_MAX - 1) / bpp) return 1;
    size_t rowBytes = width * bpp, filtered = rowBytes + 1;
    if (filtered > SIZE_MAX / height) return 1;
    // The chunks: IHDR first and as expected, IDATs in one run, IEND; every CRC right.
    size_t pos = 8, idatBytes = 0, idatChunks = 0;
    const unsigned char *firstIDAT = NULL;
    int run = 0; // IDATs: 0 none yet, 1 in their run, 2 after it
    for (int chunk = 0;; chunk++) {
        if (size - pos < 12) return 1;
        uint32_t length = evn_png_be32(data + pos);
        const unsigned char *type = data + pos + 4, *body = data + pos + 8;
        if (length > 0x7fffffffu || length > size - pos - 12) return 1;
        if ((uint32_t)libdeflate_crc32(0, type, (size_t)length + 4) != evn_png_be32(body + length)) return 1;
        if (chunk == 0) {
            if (memcmp(type, "IHDR", 4) != 0 || length != 13) return 1;
            if (evn_png_be32(body) != width || evn_png_be32(body + 4) != height || body[8] != depth ||
                body[9] != colour || body[10] != 0 || body[11] != 0 || body[12] != 0)
                return 1;
        } else if (memcmp(type, "IDAT", 4) == 0) {
            if (run == 2) return 1;
            if (run == 0) firstIDAT = body;
            run = 1;
            idatBytes += length;
            idatChunks++;
        } else {
            if (run == 1) run = 2;
            if (memcmp(type, "IEND", 4) == 0) break;
            // A critical chunk other than a suggested palette before the data, or an ancillary
            // chunk that changes how the pixels or the metadata read: libpng's.
            if (!(type[0] & 0x20) && !(memcmp(type, "PLTE", 4) == 0 && colour != 0 && run == 0)) return 1;
            if (memcmp(type, "tRNS", 4) == 0 || memcmp(type, "iCCP", 4) == 0 || memcmp(type, "eXIf", 4) == 0) return 1;
        }
        pos += 12 + (size_t)length;
    }
    if (idatChunks == 0) return 1;
    // The zlib stream: in place when it is one chunk, else gathered.
    unsigned char *gathered = NULL;
    const unsigned char *stream = firstIDAT;
    if (idatChunks > 1) {
        gathered = (unsigned char *)malloc(idatBytes ? idatBytes : 1);
        if (!gathered) return -1;
        size_t p = firstIDAT - data - 8, o = 0;
        while (o < idatBytes) {
            uint32_t length = evn_png_be32(data + p);
            memcpy(gathered + o, data + p + 8, length);
            o += length;
            p += 12 + (size_t)length;
        }
        stream = gathered;
    }
    size_t rawSize = filtered * height;
    unsigned char *raw = (unsigned char *)malloc(rawSize);
    unsigned char *zero = (unsigned char *)calloc(rowBytes, 1);
    struct libdeflate_decompressor *inflater = libdeflate_alloc_decompressor();
    int status = -1;
    if (raw && zero && inflater) {
        status =
            libdeflate_zlib_decompress(inflater, stream, idatBytes, raw, rawSize, NULL) == LIBDEFLATE_SUCCESS ? 0 : 1;
    }
    if (inflater) libdeflate_free_decompressor(inflater);
    free(gathered);
    for (size_t y = 0; status == 0 && y < height; y++) {
        const unsigned char *row = raw + y * filtered;
        if (row[0] > 4) {
            status = 1;
            break;
        }
        if (depth == 8) {
            unsigned char *dst = out + y * rowBytes;
            evn_png_unfilter(row[0], row + 1, dst, y ? dst - rowBytes : zero, rowBytes, bpp);
        } else {
            // Unfiltered in place (the filters work on the big-endian bytes), then swapped.
            unsigned char *at = raw + y * filtered + 1;
            evn_png_unfilter(row[0], at, at, y ? at - filtered : zero, rowBytes, bpp);
            unsigned char *dst = out + y * rowBytes;
            for (size_t i = 0; i < rowBytes; i += 2) {
                uint16_t v = (uint16_t)(at[i] << 8 | at[i + 1]);
                memcpy(dst + i, &v, 2);
            }
        }
    }
    free(raw);
    free(zero);
    return status;
}
