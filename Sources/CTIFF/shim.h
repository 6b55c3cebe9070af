// libtiff reports errors through a printf-style callback with a va_list; these static inline
// helpers format the message into a caller-owned buffer, and serve a TIFF from memory.
#include <tiffio.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct evn_tiff_io {
    const unsigned char *data;
    toff_t size, pos;
    char error[256];
} evn_tiff_io;

static int evn_tiff_error_handler(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap) {
    (void)tif;
    (void)module;
    evn_tiff_io *io = (evn_tiff_io *)user;
    if (io && io->error[0] == 0) vsnprintf(io->error, sizeof(io->error), fmt, ap);
    return 1;
}
static int evn_tiff_warning_handler(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap) {
    (void)tif;
    (void)user;
    (void)module;
    (void)fmt;
    (void)ap;
    return 1;
}

static tmsize_t evn_tiff_read(thandle_t h, void *buf, tmsize_t n) {
    evn_tiff_io *io = (evn_tiff_io *)h;
    if (n < 0) return -1;
    toff_t left = io->pos < io->size ? io->size - io->pos : 0;
    toff_t take = (toff_t)n < left ? (toff_t)n : left;
    memcpy(buf, io->data + io->pos, (size_t)take);
    io->pos += take;
    return (tmsize_t)take;
}
static tmsize_t evn_tiff_write(thandle_t h, void *buf, tmsize_t n) {
    (void)h;
    (void)buf;
    (void)n;
    return -1;
}
static toff_t evn_tiff_seek(thandle_t h, toff_t off, int whence) {
    evn_tiff_io *io = (evn_tiff_io *)h;
    toff_t base = whence == SEEK_CUR ? io->pos : whence == SEEK_END ? io->size : 0;
    io->pos = base + off;
    return io->pos;
}
static int evn_tiff_close(thandle_t h) {
    (void)h;
    return 0;
}
static toff_t evn_tiff_size(thandle_t h) { return ((evn_tiff_io *)h)->size; }
static int evn_tiff_map(thandle_t h, void **base, toff_t *size) {
    (void)h;
    (void)base;
    (void)size;
    return 0;
}
static void evn_tiff_unmap(thandle_t h, void *base, toff_t size) {
    (void)h;
    (void)base;
    (void)size;
}

/// Opens a TIFF held in memory (read only); errors land in io->error.
static inline TIFF *evn_tiff_open_memory(evn_tiff_io *io, const unsigned char *data, size_t size) {
    memset(io, 0, sizeof(*io));
    io->data = data;
    io->size = size;
    TIFFOpenOptions *opts = TIFFOpenOptionsAlloc();
    TIFFOpenOptionsSetErrorHandlerExtR(opts, evn_tiff_error_handler, io);
    TIFFOpenOptionsSetWarningHandlerExtR(opts, evn_tiff_warning_handler, io);
    TIFF *tif = TIFFClientOpenExt("memory", "rm", (thandle_t)io, evn_tiff_read, evn_tiff_write, evn_tiff_seek,
                                  evn_tiff_close, evn_tiff_size, evn_tiff_map, evn_tiff_unmap, opts);
    TIFFOpenOptionsFree(opts);
    return tif;
}

/// Opens a file for writing; errors land in io->error.
static inline TIFF *evn_tiff_open_write(evn_tiff_io *io, const char *path) {
    memset(io, 0, sizeof(*io));
    TIFFOpenOptions *opts = TIFFOpenOptionsAlloc();
    TIFFOpenOptionsSetErrorHandlerExtR(opts, evn_tiff_error_handler, io);
    TIFFOpenOptionsSetWarningHandlerExtR(opts, evn_tiff_warning_handler, io);
    TIFF *tif = TIFFOpenExt(path, "w", opts);
    TIFFOpenOptionsFree(opts);
    return tif;
}

// TIFFGetField and TIFFSetField are variadic, which Swift cannot call: typed wrappers.
static inline int evn_tiff_get_u16(TIFF *t, uint32_t tag, uint16_t *v) { return TIFFGetField(t, tag, v); }
static inline int evn_tiff_get_u32(TIFF *t, uint32_t tag, uint32_t *v) { return TIFFGetField(t, tag, v); }
static inline int evn_tiff_get_u16_defaulted(TIFF *t, uint32_t tag, uint16_t *v) {
    return TIFFGetFieldDefaulted(t, tag, v);
}
static inline int evn_tiff_get_bytes(TIFF *t, uint32_t tag, uint32_t *count, void **data) {
    return TIFFGetField(t, tag, count, data);
}
static inline int evn_tiff_get_colormap(TIFF *t, uint16_t **r, uint16_t **g, uint16_t **b) {
    return TIFFGetField(t, TIFFTAG_COLORMAP, r, g, b);
}
static inline int evn_tiff_set_u16(TIFF *t, uint32_t tag, uint16_t v) { return TIFFSetField(t, tag, (int)v); }
static inline int evn_tiff_set_u32(TIFF *t, uint32_t tag, uint32_t v) { return TIFFSetField(t, tag, v); }
static inline int evn_tiff_set_bytes(TIFF *t, uint32_t tag, uint32_t count, const void *data) {
    return TIFFSetField(t, tag, count, data);
}
static inline int evn_tiff_set_extra_alpha(TIFF *t) {
    uint16_t extra = EXTRASAMPLE_UNASSALPHA;
    return TIFFSetField(t, TIFFTAG_EXTRASAMPLES, 1, &extra);
}
