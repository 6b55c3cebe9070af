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

// ---- DNG writing ----
// libtiff knows most DNG tags; ForwardMatrix1/2 (DNG 1.2) and NoiseProfile (1.3) it does not,
// so they are registered on the handle before they are set.
static const TIFFFieldInfo evn_dng_extra_fields[] = {
    {50964, -1, -1, TIFF_SRATIONAL, FIELD_CUSTOM, 1, 1, (char *)"ForwardMatrix1"},
    {50965, -1, -1, TIFF_SRATIONAL, FIELD_CUSTOM, 1, 1, (char *)"ForwardMatrix2"},
    {51041, -1, -1, TIFF_DOUBLE, FIELD_CUSTOM, 1, 1, (char *)"NoiseProfile"},
};

/// What a DNG carries besides its samples.
typedef struct evn_dng_info {
    uint32_t width, height;
    /// 1: a Bayer CFA (`cfa`, 0 red 1 green 2 blue, row-major 2x2); 3: LinearRaw.
    uint16_t samples_per_pixel;
    uint8_t cfa[4];
    float black[4];
    uint32_t white;
    float color_matrix1[9], color_matrix2[9], forward_matrix1[9], forward_matrix2[9];
    int has_color_matrix2, has_forward_matrix1, has_forward_matrix2;
    uint16_t illuminant1, illuminant2;
    float as_shot_neutral[3];
    float baseline_exposure;
    double noise_profile[6];
    int noise_values;
    uint16_t orientation;
    const char *make, *model, *unique_model, *software, *description, *datetime;
    float iso, exposure_time, f_number, focal_length;
} evn_dng_info;

/// Writes a DNG 1.4 (backward 1.1) at `path`: IFD0 holds the raw image (uncompressed 16-bit,
/// strips of 64 rows) with its colour tags, and an EXIF IFD the capture settings. Returns 1, or
/// 0 with the reason in io->error.
static inline int evn_dng_write(evn_tiff_io *io, const char *path, const evn_dng_info *d, const uint16_t *samples) {
    TIFF *t = evn_tiff_open_write(io, path);
    if (!t) return 0;
    TIFFMergeFieldInfo(t, evn_dng_extra_fields, 3);
    const uint8_t version[4] = {1, 4, 0, 0}, backward[4] = {1, 1, 0, 0};
    int ok = 1;
    ok &= TIFFSetField(t, TIFFTAG_SUBFILETYPE, 0);
    ok &= TIFFSetField(t, TIFFTAG_IMAGEWIDTH, d->width);
    ok &= TIFFSetField(t, TIFFTAG_IMAGELENGTH, d->height);
    ok &= TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, 16);
    ok &= TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, d->samples_per_pixel);
    ok &= TIFFSetField(t, TIFFTAG_COMPRESSION, COMPRESSION_NONE);
    ok &= TIFFSetField(t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    ok &= TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, 64);
    ok &= TIFFSetField(t, TIFFTAG_ORIENTATION, d->orientation);
    ok &= TIFFSetField(t, TIFFTAG_DNGVERSION, version);
    ok &= TIFFSetField(t, TIFFTAG_DNGBACKWARDVERSION, backward);
    if (d->make && d->make[0]) ok &= TIFFSetField(t, TIFFTAG_MAKE, d->make);
    if (d->model && d->model[0]) ok &= TIFFSetField(t, TIFFTAG_MODEL, d->model);
    ok &= TIFFSetField(t, TIFFTAG_UNIQUECAMERAMODEL, d->unique_model);
    if (d->software) ok &= TIFFSetField(t, TIFFTAG_SOFTWARE, d->software);
    if (d->description && d->description[0]) ok &= TIFFSetField(t, TIFFTAG_IMAGEDESCRIPTION, d->description);
    if (d->datetime && d->datetime[0]) ok &= TIFFSetField(t, TIFFTAG_DATETIME, d->datetime);
    if (d->samples_per_pixel == 1) {
        const uint16_t dim[2] = {2, 2};
        const uint8_t plane_colors[3] = {0, 1, 2};
        ok &= TIFFSetField(t, TIFFTAG_PHOTOMETRIC, 32803);
        ok &= TIFFSetField(t, TIFFTAG_CFAREPEATPATTERNDIM, dim);
        ok &= TIFFSetField(t, TIFFTAG_CFAPATTERN, 4, d->cfa);
        ok &= TIFFSetField(t, TIFFTAG_CFAPLANECOLOR, 3, plane_colors);
        ok &= TIFFSetField(t, TIFFTAG_CFALAYOUT, 1);
        ok &= TIFFSetField(t, TIFFTAG_BLACKLEVELREPEATDIM, dim);
        ok &= TIFFSetField(t, TIFFTAG_BLACKLEVEL, 4, d->black);
    } else {
        const uint16_t dim[2] = {1, 1};
        ok &= TIFFSetField(t, TIFFTAG_PHOTOMETRIC, 34892);
        ok &= TIFFSetField(t, TIFFTAG_BLACKLEVELREPEATDIM, dim);
        ok &= TIFFSetField(t, TIFFTAG_BLACKLEVEL, 3, d->black);
    }
    ok &= TIFFSetField(t, TIFFTAG_WHITELEVEL, 1, &d->white);
    ok &= TIFFSetField(t, TIFFTAG_COLORMATRIX1, 9, d->color_matrix1);
    ok &= TIFFSetField(t, TIFFTAG_CALIBRATIONILLUMINANT1, d->illuminant1);
    if (d->has_color_matrix2) {
        ok &= TIFFSetField(t, TIFFTAG_COLORMATRIX2, 9, d->color_matrix2);
        ok &= TIFFSetField(t, TIFFTAG_CALIBRATIONILLUMINANT2, d->illuminant2);
    }
    if (d->has_forward_matrix1) ok &= TIFFSetField(t, 50964, 9, d->forward_matrix1);
    if (d->has_forward_matrix2) ok &= TIFFSetField(t, 50965, 9, d->forward_matrix2);
    ok &= TIFFSetField(t, TIFFTAG_ASSHOTNEUTRAL, 3, d->as_shot_neutral);
    ok &= TIFFSetField(t, TIFFTAG_BASELINEEXPOSURE, (double)d->baseline_exposure);
    if (d->noise_values > 0) ok &= TIFFSetField(t, 51041, d->noise_values, d->noise_profile);
    ok &= TIFFSetField(t, TIFFTAG_EXIFIFD, (uint64_t)0);
    if (!ok) {
        if (!io->error[0]) snprintf(io->error, sizeof(io->error), "a DNG tag was refused");
        TIFFClose(t);
        return 0;
    }
    const size_t row = (size_t)d->width * d->samples_per_pixel;
    for (uint32_t y = 0, s = 0; y < d->height; y += 64, s++) {
        uint32_t rows = d->height - y < 64 ? d->height - y : 64;
        if (TIFFWriteEncodedStrip(t, s, (void *)(samples + (size_t)y * row), (tmsize_t)(row * rows * 2)) < 0) {
            TIFFClose(t);
            return 0;
        }
    }
    if (!TIFFWriteDirectory(t)) {
        TIFFClose(t);
        return 0;
    }
    // The EXIF IFD, then IFD0 rewritten with its offset.
    uint64_t exif_offset = 0;
    if (TIFFCreateEXIFDirectory(t) == 0) {
        const uint8_t exif_version[4] = {'0', '2', '3', '1'};
        TIFFSetField(t, EXIFTAG_EXIFVERSION, exif_version);
        if (d->exposure_time > 0) TIFFSetField(t, EXIFTAG_EXPOSURETIME, (double)d->exposure_time);
        if (d->f_number > 0) TIFFSetField(t, EXIFTAG_FNUMBER, (double)d->f_number);
        if (d->focal_length > 0) TIFFSetField(t, EXIFTAG_FOCALLENGTH, (double)d->focal_length);
        if (d->iso > 0) {
            uint16_t iso = d->iso > 65535 ? 65535 : (uint16_t)(d->iso + 0.5f);
            TIFFSetField(t, EXIFTAG_ISOSPEEDRATINGS, 1, &iso);
        }
        if (d->datetime && d->datetime[0]) TIFFSetField(t, EXIFTAG_DATETIMEORIGINAL, d->datetime);
        if (!TIFFWriteCustomDirectory(t, &exif_offset)) exif_offset = 0;
    }
    int done = exif_offset != 0 && TIFFSetDirectory(t, 0) && TIFFSetField(t, TIFFTAG_EXIFIFD, exif_offset) &&
               TIFFRewriteDirectory(t);
    TIFFClose(t);
    if (!done && !io->error[0]) snprintf(io->error, sizeof(io->error), "the EXIF directory could not be written");
    return done;
}
