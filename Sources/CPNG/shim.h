// libpng reports errors with longjmp, which Swift cannot catch. These static inline helpers keep
// every setjmp inside one C frame that stays alive for the whole libpng call, and turn a libpng
// error into a return code plus a message. They hold no state of their own.
#include <png.h>
#include <zlib.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

typedef struct evn_png_io {
    png_structp png;
    png_infop info;
    const unsigned char *data;   // reading: the encoded file
    size_t size, pos;
    unsigned char *out;          // writing: malloc'd, grown as needed, caller frees
    size_t out_size, out_cap;
    char error[256];
} evn_png_io;

static void evn_png_error_fn(png_structp png, png_const_charp msg) {
    evn_png_io *io = (evn_png_io *)png_get_error_ptr(png);
    strncpy(io->error, msg ? msg : "libpng error", sizeof(io->error) - 1);
    io->error[sizeof(io->error) - 1] = 0;
    png_longjmp(png, 1);
}
static void evn_png_warning_fn(png_structp png, png_const_charp msg) { (void)png; (void)msg; }

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
    io->data = data; io->size = size;
    io->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, io, evn_png_error_fn, evn_png_warning_fn);
    if (!io->png) { strcpy(io->error, "out of memory"); return -1; }
    io->info = png_create_info_struct(io->png);
    if (!io->info) { strcpy(io->error, "out of memory"); return -1; }
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
    io->png = NULL; io->info = NULL;
}

static void evn_png_write_fn(png_structp png, png_bytep src, size_t n) {
    evn_png_io *io = (evn_png_io *)png_get_io_ptr(png);
    if (io->out_cap - io->out_size < n) {
        size_t cap = io->out_cap ? io->out_cap : 65536;
        while (cap - io->out_size < n) cap *= 2;
        unsigned char *grown = (unsigned char *)realloc(io->out, cap);
        if (!grown) png_error(png, "out of memory while encoding PNG");
        io->out = grown; io->out_cap = cap;
    }
    memcpy(io->out + io->out_size, src, n);
    io->out_size += n;
}
static void evn_png_flush_fn(png_structp png) { (void)png; }

// A PNG written in parts (the image data compressed by the caller, in pieces at once): the
// header and metadata chunks through libpng, then chunks the caller gives, then IEND.

/// Starts a PNG in io->out: signature, IHDR, and iCCP/eXIf when given. Returns 0 on success;
/// on failure io->out is freed and io->error says why.
static inline int evn_png_write_head(evn_png_io *io, unsigned width, unsigned height, int channels, int depth,
                                     const unsigned char *icc, unsigned icc_len,
                                     const unsigned char *exif, unsigned exif_len) {
    memset(io, 0, sizeof(*io));
    io->png = png_create_write_struct(PNG_LIBPNG_VER_STRING, io, evn_png_error_fn, evn_png_warning_fn);
    if (!io->png) { strcpy(io->error, "out of memory"); return -1; }
    io->info = png_create_info_struct(io->png);
    if (!io->info) { png_destroy_write_struct(&io->png, NULL); strcpy(io->error, "out of memory"); return -1; }
    if (setjmp(png_jmpbuf(io->png))) {
        png_destroy_write_struct(&io->png, &io->info);
        free(io->out); io->out = NULL; io->out_size = 0;
        return -1;
    }
    png_set_write_fn(io->png, io, evn_png_write_fn, evn_png_flush_fn);
    int color = channels == 1 ? PNG_COLOR_TYPE_GRAY : channels == 2 ? PNG_COLOR_TYPE_GRAY_ALPHA
              : channels == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_RGB_ALPHA;
    png_set_IHDR(io->png, io->info, width, height, depth, color, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_set_benign_errors(io->png, 1);   // an invalid ICC profile is dropped, not fatal
    if (icc && icc_len) png_set_iCCP(io->png, io->info, "icc", PNG_COMPRESSION_TYPE_BASE, icc, icc_len);
    if (exif && exif_len) png_set_eXIf_1(io->png, io->info, exif_len, (png_bytep)exif);
    png_write_info(io->png, io->info);
    return 0;
}

/// Encodes rows of `channels` (1, 2, 3, 4) samples of `depth` (8 or 16, host order) bits into
/// io->out (free() it), libpng choosing each row's filter and compressing at zlib `level`: the
/// slower levels (the fast ones are written in pieces by the caller, see evn_png_write_head).
/// icc/exif may be NULL. Returns 0 on success.
static inline int evn_png_write(evn_png_io *io, unsigned char **rows, unsigned width, unsigned height,
                                int channels, int depth, int level,
                                const unsigned char *icc, unsigned icc_len,
                                const unsigned char *exif, unsigned exif_len) {
    if (evn_png_write_head(io, width, height, channels, depth, icc, icc_len, exif, exif_len) != 0) return -1;
    if (setjmp(png_jmpbuf(io->png))) {
        png_destroy_write_struct(&io->png, &io->info);
        free(io->out); io->out = NULL; io->out_size = 0;
        return -1;
    }
    png_set_compression_level(io->png, level);   // the image data's, deflated from the first row on
    if (depth == 16) png_set_swap(io->png);
    png_write_image(io->png, rows);
    png_write_end(io->png, io->info);
    png_destroy_write_struct(&io->png, &io->info);
    return 0;
}

/// Appends one chunk (`name`: 4 letters) after evn_png_write_head. Returns 0 on success; on
/// failure io->out is freed, the struct destroyed and io->error says why.
static inline int evn_png_write_chunk(evn_png_io *io, const char *name, const unsigned char *data, size_t length) {
    if (setjmp(png_jmpbuf(io->png))) {
        png_destroy_write_struct(&io->png, &io->info);
        free(io->out); io->out = NULL; io->out_size = 0;
        return -1;
    }
    png_write_chunk(io->png, (png_const_bytep)name, data, length);
    return 0;
}

/// Frees libpng's state after the last chunk (io->out stays: the caller frees it).
static inline void evn_png_write_done(evn_png_io *io) {
    if (io->png) png_destroy_write_struct(&io->png, &io->info);
    io->png = NULL; io->info = NULL;
}

/// Raw deflate (no header or check value) of `n` bytes into `out` (`cap` bytes: at least
/// evn_deflate_bound(n)), ending with a sync flush (a piece that more follow) or as the last
/// block of the stream (`last`). Returns the bytes written, or -1.
static inline long evn_deflate_raw(const unsigned char *in, size_t n, unsigned char *out, size_t cap,
                                   int level, int rle, int last) {
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (deflateInit2(&z, level, Z_DEFLATED, -15, 8, rle ? Z_RLE : Z_DEFAULT_STRATEGY) != Z_OK) return -1;
    z.next_in = (Bytef *)in; z.avail_in = (uInt)n;
    z.next_out = out; z.avail_out = (uInt)cap;
    int r = deflate(&z, last ? Z_FINISH : Z_SYNC_FLUSH);
    long written = (long)(cap - z.avail_out);
    int ok = last ? r == Z_STREAM_END : (r == Z_OK && z.avail_in == 0 && z.avail_out > 0);
    deflateEnd(&z);
    return ok ? written : -1;
}

/// Room for evn_deflate_raw's output of `n` bytes (zlib's bound for stored blocks, and the flush).
static inline size_t evn_deflate_bound(size_t n) { return n + n / 8 + (n >> 14) * 5 + 64; }

static inline unsigned long evn_adler32(unsigned long adler, const unsigned char *p, size_t n) {
    return adler32_z(adler, p, n);
}
static inline unsigned long evn_adler32_combine(unsigned long a, unsigned long b, size_t n2) {
    return adler32_combine(a, b, (z_off_t)n2);
}
