/*
 * Evanesco's C interface: the library (burst stacking, depth photos, portrait effects, background
 * replacement, image files) for programs that are not written in Swift. The Python package
 * (python/ in the repository) is built on it.
 *
 * Conventions, the same for every function:
 * - Every function but evn_free, evn_version and evn_backdrop_free returns an evn_status: EVN_OK
 *   (0) or the kind of failure. On failure `*message`, when `message` is not NULL, receives the
 *   library's one-line explanation; nothing aborts the process and nothing is written to stderr.
 * - Whatever the library returns through a pointer (a message, a JSON text, an image's samples,
 *   an array of images) was allocated by it and is released with evn_free, once. On failure the
 *   outputs are left NULL / zeroed, so there is nothing to free but the message.
 * - Settings are passed as a JSON object (NULL or "" for the defaults) whose keys and values are
 *   the library's own declarations, which evn_settings lists: an unknown key or a value out of
 *   range is refused by name (EVN_ERROR_SETTING).
 * - Images are described by evn_image: the strides let a caller pass a view of its own memory
 *   (a crop, a channel-last array, a flipped array) without copying it first. The library reads
 *   the caller's samples once and never keeps the pointer.
 * - The functions can be called from several threads at once; an evn_backdrop is used by one
 *   thread at a time.
 */
#ifndef EVANESCO_H
#define EVANESCO_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What went wrong; the message says exactly what. */
typedef enum evn_status {
    EVN_OK = 0,
    /* A setting is unknown, of the wrong type or out of range (the key is named). */
    EVN_ERROR_SETTING = 1,
    /* An argument is not usable: a NULL pointer, an image of a wrong shape or sample type. */
    EVN_ERROR_ARGUMENT = 2,
    /* A file could not be read or written (missing, unreadable, damaged, exists already). */
    EVN_ERROR_FILE = 3,
    /* The input cannot be processed as asked (frames of different sizes, a photo with no depth,
       a burst too small to align, ...). */
    EVN_ERROR_INPUT = 4,
    /* The progress callback asked to stop; nothing was returned. */
    EVN_ERROR_CANCELLED = 5,
    /* Anything else the library reported. */
    EVN_ERROR_OTHER = 6
} evn_status;

/* How one sample is stored. */
typedef enum evn_sample_type { EVN_UINT8 = 1, EVN_UINT16 = 2, EVN_FLOAT32 = 3 } evn_sample_type;

/*
 * An image: `height` rows of `width` pixels of `channels` samples (1 grey or a plane, 3 RGB,
 * 4 RGBA). Sample c of pixel (x, y) is at
 *     (char *)data + y * row_stride + x * pixel_stride + c * channel_stride
 * with the strides in bytes. A stride of 0 means the contiguous value (row_stride = width *
 * pixel_stride, pixel_stride = channels * sample size, channel_stride = sample size). Images the
 * library returns are always contiguous, with the strides filled in; free `data` with evn_free.
 */
typedef struct evn_image {
    void *data;
    int64_t width;
    int64_t height;
    int64_t channels;
    int64_t row_stride;
    int64_t pixel_stride;
    int64_t channel_stride;
    int32_t sample_type; /* an evn_sample_type */
} evn_image;

/*
 * Progress of long work: the stage ("decode", "align", "merge", ...), units done and the total.
 * Called on the library's worker threads, possibly on several at once. Return 0 to go on and
 * anything else to stop: the call then returns EVN_ERROR_CANCELLED soon after.
 */
typedef int32_t (*evn_progress_fn)(void *context, const char *stage, int64_t done, int64_t total);

/* The library's version, as "1.4.0"; a static string, not to be freed. */
const char *evn_version(void);

/* Releases anything the library returned (NULL is allowed). */
void evn_free(void *pointer);

/*
 * The settings a kind of call takes, as JSON: an array of declarations, each with its "key",
 * "kind" (number, size, choice, toggle, text), "default" (null when computed), "minimum",
 * "maximum", "unit", "integer", "choices" and "summary". Kinds: "stack", "portrait", "backdrop",
 * "write".
 */
evn_status evn_settings(const char *kind, char **json, char **message);

/* Reads an image file (JPEG, PNG, TIFF, HEIC, PFM, and camera raws finished); `*info` receives
   its format, bit depth and size as JSON (may be NULL). */
evn_status evn_read_image(const char *path, evn_image *image, char **info, char **message);

/* Writes an image atomically; the format follows the extension. Settings ("write"): quality,
   bitDepth, overwrite (off: an existing file is refused), compression. */
evn_status evn_write_image(const char *path, const evn_image *image, const char *settings, char **message);

/*
 * Aligns and merges a burst: either `frame_count` images in memory (all one size and sample type)
 * or `path_count` files (images, a video, camera raws), not both. Settings: "stack". The merged
 * image goes to `*result`, the report (the command line's --report) to `*report` (may be NULL).
 */
evn_status evn_stack(const evn_image *frames, int64_t frame_count, const char *const *paths, int64_t path_count,
                     const char *settings, evn_progress_fn progress, void *context, evn_image *result, char **report,
                     char **message);

/*
 * Reads the depth of a portrait photo: `*map` receives the map as float32 in its own units (the
 * JSON in `*info` says which: kind, units, accuracy, source, ...). When `mattes` is not NULL it
 * receives an array of `*matte_count` images (the portrait, hair, skin, teeth and glasses mattes
 * the file holds, in the order `*info` lists them); free each image's data and then the array.
 */
evn_status evn_read_depth(const char *path, evn_image *map, evn_image **mattes, int64_t *matte_count, char **info,
                          char **message);

/*
 * Renders a portrait effect (spotlight, highlight, focal or lens blur, the focus mask; settings:
 * "portrait") on a photo and its depth. Either `path` (a portrait photo with its depth, its
 * matte used when it has one) or `photo` with `depth`: a one-channel float32 map of `depth_kind`
 * ("depth" in metres or "disparity" in 1/m) whose size may differ from the photo's.
 */
evn_status evn_portrait(const char *path, const evn_image *photo, const evn_image *depth, const char *depth_kind,
                        const char *settings, evn_image *result, char **report, char **message);

/* A background replacement session: state carried from frame to frame (face, temporal blend). */
typedef struct evn_backdrop evn_backdrop;

/* Starts a session; settings: "backdrop". `background` may be NULL (black); `cascade` is a face
   cascade file, NULL for opencv-data's default. */
evn_status evn_backdrop_new(const char *settings, const evn_image *background, const char *cascade,
                            evn_backdrop **session, char **message);

/* Cuts the subject out of one colour frame with its depth frame (metres as float32, millimetres
   as uint16) and composites it over the background; `*info` receives the frame's details. */
evn_status evn_backdrop_process(evn_backdrop *session, const evn_image *color, const evn_image *depth,
                                evn_image *result, char **info, char **message);

/* Ends a session (NULL is allowed). */
void evn_backdrop_free(evn_backdrop *session);

#ifdef __cplusplus
}
#endif

#endif
