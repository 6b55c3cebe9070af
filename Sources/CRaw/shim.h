// LibRaw's C API (the thread-safe libraw_r), with helpers that copy what a reader needs out of
// libraw_data_t into one flat struct: Swift would see its fixed arrays as tuples of thousands of
// elements. LibRaw reports data errors through a callback that prints to stderr by default; the
// handler here records the first one instead.
#include <libraw/libraw.h>
#include <string.h>

typedef struct evn_raw_meta {
    int raw_width, raw_height, width, height, top_margin, left_margin;
    int colors, is_foveon, flip;
    unsigned filters, dng_version;
    int has_bayer, has_color3, has_color4, has_float;
    /// Black level at each of the 2x2 positions of the visible area (row-major), all terms added.
    float black[4];
    float white;
    float cam_mul[4], pre_mul[4];
    float cam_xyz[4][3];
    float rgb_cam[3][4];
    int dng_color_count;
    int illuminant[2];
    float color_matrix[2][4][3];
    float forward_matrix[2][3][4];
    float as_shot_neutral[4];
    float baseline_exposure;
    float iso, shutter, aperture, focal_length;
    long long timestamp;
    char make[64], model[64], software[64], unique_model[64];
    char cdesc[5];
} evn_raw_meta;

typedef struct evn_raw_errors {
    int data_errors;
    int first_offset;
} evn_raw_errors;

static void evn_raw_data_error(void *data, const char *file, const int offset) {
    (void)file;
    evn_raw_errors *e = (evn_raw_errors *)data;
    if (e->data_errors++ == 0) e->first_offset = offset;
}

/// A LibRaw handle whose data errors are recorded in `errors` (not printed), and whose
/// allocations are capped at `max_mb`.
static inline libraw_data_t *evn_raw_init(evn_raw_errors *errors, unsigned max_mb) {
    libraw_data_t *lr = libraw_init(0);
    if (!lr) return NULL;
    memset(errors, 0, sizeof(*errors));
    libraw_set_dataerror_handler(lr, evn_raw_data_error, errors);
    if (max_mb > 0) lr->params.max_raw_memory_mb = max_mb;
    return lr;
}

/// The colour (0 R, 1 G, 2 B, 3 second green) at a visible-area position, as LibRaw's FC().
static inline int evn_raw_fc(unsigned filters, int row, int col) {
    return (int)((filters >> ((((row << 1) & 14) | (col & 1)) << 1)) & 3);
}

static inline void evn_raw_read_meta(const libraw_data_t *lr, evn_raw_meta *m) {
    memset(m, 0, sizeof(*m));
    const libraw_image_sizes_t *s = &lr->sizes;
    m->raw_width = s->raw_width;
    m->raw_height = s->raw_height;
    m->width = s->width;
    m->height = s->height;
    m->top_margin = s->top_margin;
    m->left_margin = s->left_margin;
    m->flip = s->flip;
    m->colors = lr->idata.colors;
    m->is_foveon = (int)lr->idata.is_foveon;
    m->filters = lr->idata.filters;
    m->dng_version = lr->idata.dng_version;
    m->has_bayer = lr->rawdata.raw_image != NULL;
    m->has_color3 = lr->rawdata.color3_image != NULL;
    m->has_color4 = lr->rawdata.color4_image != NULL;
    m->has_float =
        lr->rawdata.float_image != NULL || lr->rawdata.float3_image != NULL || lr->rawdata.float4_image != NULL;
    const libraw_colordata_t *c = &lr->color;
    for (int p = 0; p < 4; p++) {
        int row = p >> 1, col = p & 1;
        int colour = m->filters ? evn_raw_fc(m->filters, row, col) : p % 3;
        float b = (float)c->black + (float)c->cblack[colour];
        unsigned pr = c->cblack[4], pc = c->cblack[5];
        if (pr > 0 && pc > 0 && pr * pc <= LIBRAW_CBLACK_SIZE - 6)
            b += (float)c->cblack[6 + (row % pr) * pc + (col % pc)];
        m->black[p] = b;
    }
    m->white = (float)c->maximum;
    for (int i = 0; i < 4; i++) {
        m->cam_mul[i] = c->cam_mul[i];
        m->pre_mul[i] = c->pre_mul[i];
        for (int j = 0; j < 3; j++) m->cam_xyz[i][j] = c->cam_xyz[i][j];
    }
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) m->rgb_cam[i][j] = c->rgb_cam[i][j];
    for (int k = 0; k < 2; k++) {
        const libraw_dng_color_t *d = &c->dng_color[k];
        if (!d->parsedfields) continue;
        m->illuminant[k] = d->illuminant;
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 3; j++) m->color_matrix[k][i][j] = d->colormatrix[i][j];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) m->forward_matrix[k][i][j] = d->forwardmatrix[i][j];
        m->dng_color_count = k + 1;
    }
    for (int i = 0; i < 4; i++) m->as_shot_neutral[i] = c->dng_levels.asshotneutral[i];
    m->baseline_exposure = c->dng_levels.baseline_exposure;
    m->iso = lr->other.iso_speed;
    m->shutter = lr->other.shutter;
    m->aperture = lr->other.aperture;
    m->focal_length = lr->other.focal_len;
    m->timestamp = (long long)lr->other.timestamp;
    memcpy(m->make, lr->idata.make, 63);
    memcpy(m->model, lr->idata.model, 63);
    memcpy(m->software, lr->idata.software, 63);
    memcpy(m->unique_model, c->UniqueCameraModel, 63);
    memcpy(m->cdesc, lr->idata.cdesc, 4);
}

/// Copies the visible area of the Bayer data (16-bit samples) into `out` (width x height).
static inline void evn_raw_copy_visible(const libraw_data_t *lr, unsigned short *out) {
    const libraw_image_sizes_t *s = &lr->sizes;
    size_t pitch = s->raw_pitch / 2;
    for (int y = 0; y < s->height; y++)
        memcpy(out + (size_t)y * s->width, lr->rawdata.raw_image + (size_t)(y + s->top_margin) * pitch + s->left_margin,
               (size_t)s->width * 2);
}

/// Copies the visible area of 3-colour linear data (a LinearRaw DNG) into `out` (width x height x 3).
static inline void evn_raw_copy_visible3(const libraw_data_t *lr, unsigned short *out) {
    const libraw_image_sizes_t *s = &lr->sizes;
    size_t pitch = s->raw_pitch / 6;
    for (int y = 0; y < s->height; y++)
        memcpy(out + (size_t)y * s->width * 3,
               lr->rawdata.color3_image + (size_t)(y + s->top_margin) * pitch + s->left_margin, (size_t)s->width * 6);
}

/// Copies the first three colours of 4-colour linear data into `out` (width x height x 3).
static inline void evn_raw_copy_visible4(const libraw_data_t *lr, unsigned short *out) {
    const libraw_image_sizes_t *s = &lr->sizes;
    size_t pitch = s->raw_pitch / 8;
    for (int y = 0; y < s->height; y++) {
        const unsigned short(*row)[4] = lr->rawdata.color4_image + (size_t)(y + s->top_margin) * pitch + s->left_margin;
        unsigned short *o = out + (size_t)y * s->width * 3;
        for (int x = 0; x < s->width; x++) {
            o[3 * x] = row[x][0];
            o[3 * x + 1] = row[x][1];
            o[3 * x + 2] = row[x][2];
        }
    }
}
