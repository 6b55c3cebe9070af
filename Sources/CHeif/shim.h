// libheif, opened on first use rather than linked: loading it and its codecs (libde265, x265,
// aom, dav1d) with the program cost about 3 ms of every command's start, HEIF or not. Each
// evn_heif_* calls the libheif function of the same name, found with dlsym the first time;
// evn_heif_available() says whether the library and every function are there (call it first).
#include <libheif/heif.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

static inline void *evn_heif_library(void) {
    static void *library;
    void *l = __atomic_load_n(&library, __ATOMIC_ACQUIRE);
    if (!l) {
        l = dlopen("libheif.so.1", RTLD_NOW | RTLD_LOCAL);
        if (l) __atomic_store_n(&library, l, __ATOMIC_RELEASE);
    }
    return l;
}

// The function's address in the library (its type is the header's), or NULL.
#define EVN_HEIF_POINTER(name)                                                                                         \
    static inline __typeof__(&name) evn_heif_pointer_##name(void) {                                                    \
        static __typeof__(&name) function;                                                                             \
        __typeof__(&name) f = __atomic_load_n(&function, __ATOMIC_ACQUIRE);                                            \
        if (!f) {                                                                                                      \
            void *l = evn_heif_library();                                                                              \
            f = l ? (__typeof__(&name))dlsym(l, #name) : NULL;                                                         \
            if (f) __atomic_store_n(&function, f, __ATOMIC_RELEASE);                                                   \
        }                                                                                                              \
        return f;                                                                                                      \
    }
#define EVN_HEIF(ret, name, params, args)                                                                              \
    EVN_HEIF_POINTER(name)                                                                                             \
    static inline ret evn_##name params { return evn_heif_pointer_##name() args; }
#define EVN_HEIF_VOID(name, params, args)                                                                              \
    EVN_HEIF_POINTER(name)                                                                                             \
    static inline void evn_##name params { evn_heif_pointer_##name() args; }

EVN_HEIF(struct heif_context *, heif_context_alloc, (void), ())
EVN_HEIF_VOID(heif_context_free, (struct heif_context * a0), (a0))
EVN_HEIF(struct heif_error, heif_context_get_primary_image_handle,
         (struct heif_context * a0, struct heif_image_handle **a1), (a0, a1))
EVN_HEIF(struct heif_error, heif_context_read_from_memory_without_copy,
         (struct heif_context * a0, const void *a1, size_t a2, const struct heif_reading_options *a3), (a0, a1, a2, a3))
EVN_HEIF(struct heif_error, heif_decode_image,
         (const struct heif_image_handle *a0, struct heif_image **a1, enum heif_colorspace a2, enum heif_chroma a3,
          const struct heif_decoding_options *a4),
         (a0, a1, a2, a3, a4))
EVN_HEIF(struct heif_decoding_options *, heif_decoding_options_alloc, (void), ())
EVN_HEIF_VOID(heif_decoding_options_free, (struct heif_decoding_options * a0), (a0))
EVN_HEIF_VOID(heif_depth_representation_info_free, (const struct heif_depth_representation_info *a0), (a0))
EVN_HEIF(int, heif_image_get_bits_per_pixel_range, (const struct heif_image *a0, enum heif_channel a1), (a0, a1))
EVN_HEIF(int, heif_image_get_height, (const struct heif_image *a0, enum heif_channel a1), (a0, a1))
EVN_HEIF(const uint8_t *, heif_image_get_plane_readonly, (const struct heif_image *a0, enum heif_channel a1, int *a2),
         (a0, a1, a2))
EVN_HEIF(int, heif_image_get_width, (const struct heif_image *a0, enum heif_channel a1), (a0, a1))
EVN_HEIF_VOID(heif_image_handle_free_auxiliary_types, (const struct heif_image_handle *a0, const char **a1), (a0, a1))
EVN_HEIF(struct heif_error, heif_image_handle_get_auxiliary_image_handle,
         (const struct heif_image_handle *a0, heif_item_id a1, struct heif_image_handle **a2), (a0, a1, a2))
EVN_HEIF(struct heif_error, heif_image_handle_get_auxiliary_type, (const struct heif_image_handle *a0, const char **a1),
         (a0, a1))
EVN_HEIF(struct heif_error, heif_image_handle_get_depth_image_handle,
         (const struct heif_image_handle *a0, heif_item_id a1, struct heif_image_handle **a2), (a0, a1, a2))
EVN_HEIF(int, heif_image_handle_get_depth_image_representation_info,
         (const struct heif_image_handle *a0, heif_item_id a1, const struct heif_depth_representation_info **a2),
         (a0, a1, a2))
EVN_HEIF(int, heif_image_handle_get_height, (const struct heif_image_handle *a0), (a0))
EVN_HEIF(int, heif_image_handle_get_list_of_auxiliary_image_IDs,
         (const struct heif_image_handle *a0, int a1, heif_item_id *a2, int a3), (a0, a1, a2, a3))
EVN_HEIF(int, heif_image_handle_get_list_of_depth_image_IDs,
         (const struct heif_image_handle *a0, heif_item_id *a1, int a2), (a0, a1, a2))
EVN_HEIF(int, heif_image_handle_get_list_of_metadata_block_IDs,
         (const struct heif_image_handle *a0, const char *a1, heif_item_id *a2, int a3), (a0, a1, a2, a3))
EVN_HEIF(int, heif_image_handle_get_luma_bits_per_pixel, (const struct heif_image_handle *a0), (a0))
EVN_HEIF(struct heif_error, heif_image_handle_get_metadata,
         (const struct heif_image_handle *a0, heif_item_id a1, void *a2), (a0, a1, a2))
EVN_HEIF(size_t, heif_image_handle_get_metadata_size, (const struct heif_image_handle *a0, heif_item_id a1), (a0, a1))
EVN_HEIF(int, heif_image_handle_get_number_of_auxiliary_images, (const struct heif_image_handle *a0, int a1), (a0, a1))
EVN_HEIF(int, heif_image_handle_get_number_of_depth_images, (const struct heif_image_handle *a0), (a0))
EVN_HEIF(int, heif_image_handle_get_number_of_metadata_blocks, (const struct heif_image_handle *a0, const char *a1),
         (a0, a1))
EVN_HEIF(struct heif_error, heif_image_handle_get_raw_color_profile, (const struct heif_image_handle *a0, void *a1),
         (a0, a1))
EVN_HEIF(size_t, heif_image_handle_get_raw_color_profile_size, (const struct heif_image_handle *a0), (a0))
EVN_HEIF(int, heif_image_handle_get_width, (const struct heif_image_handle *a0), (a0))
EVN_HEIF(int, heif_image_handle_has_alpha_channel, (const struct heif_image_handle *a0), (a0))
EVN_HEIF_VOID(heif_image_handle_release, (const struct heif_image_handle *a0), (a0))
EVN_HEIF_VOID(heif_image_release, (const struct heif_image *a0), (a0))

/// Non-zero when libheif could be opened and has every function above.
static inline int evn_heif_available(void) {
    return evn_heif_pointer_heif_context_alloc() != NULL && evn_heif_pointer_heif_context_free() != NULL &&
           evn_heif_pointer_heif_context_get_primary_image_handle() != NULL &&
           evn_heif_pointer_heif_context_read_from_memory_without_copy() != NULL &&
           evn_heif_pointer_heif_decode_image() != NULL && evn_heif_pointer_heif_decoding_options_alloc() != NULL &&
           evn_heif_pointer_heif_decoding_options_free() != NULL &&
           evn_heif_pointer_heif_depth_representation_info_free() != NULL &&
           evn_heif_pointer_heif_image_get_bits_per_pixel_range() != NULL &&
           evn_heif_pointer_heif_image_get_height() != NULL &&
           evn_heif_pointer_heif_image_get_plane_readonly() != NULL &&
           evn_heif_pointer_heif_image_get_width() != NULL &&
           evn_heif_pointer_heif_image_handle_free_auxiliary_types() != NULL &&
           evn_heif_pointer_heif_image_handle_get_auxiliary_image_handle() != NULL &&
           evn_heif_pointer_heif_image_handle_get_auxiliary_type() != NULL &&
           evn_heif_pointer_heif_image_handle_get_depth_image_handle() != NULL &&
           evn_heif_pointer_heif_image_handle_get_depth_image_representation_info() != NULL &&
           evn_heif_pointer_heif_image_handle_get_height() != NULL &&
           evn_heif_pointer_heif_image_handle_get_list_of_auxiliary_image_IDs() != NULL &&
           evn_heif_pointer_heif_image_handle_get_list_of_depth_image_IDs() != NULL &&
           evn_heif_pointer_heif_image_handle_get_list_of_metadata_block_IDs() != NULL &&
           evn_heif_pointer_heif_image_handle_get_luma_bits_per_pixel() != NULL &&
           evn_heif_pointer_heif_image_handle_get_metadata() != NULL &&
           evn_heif_pointer_heif_image_handle_get_metadata_size() != NULL &&
           evn_heif_pointer_heif_image_handle_get_number_of_auxiliary_images() != NULL &&
           evn_heif_pointer_heif_image_handle_get_number_of_depth_images() != NULL &&
           evn_heif_pointer_heif_image_handle_get_number_of_metadata_blocks() != NULL &&
           evn_heif_pointer_heif_image_handle_get_raw_color_profile() != NULL &&
           evn_heif_pointer_heif_image_handle_get_raw_color_profile_size() != NULL &&
           evn_heif_pointer_heif_image_handle_get_width() != NULL &&
           evn_heif_pointer_heif_image_handle_has_alpha_channel() != NULL &&
           evn_heif_pointer_heif_image_handle_release() != NULL && evn_heif_pointer_heif_image_release() != NULL;
}
