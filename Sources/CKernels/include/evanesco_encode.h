// Lossless writing's hot loops: PNG row filters and TIFF predictors (one body, portable and AVX2),
// and deflate in pieces that join into one stream, so a large image is compressed on every core.
#ifndef EVANESCO_ENCODE_H
#define EVANESCO_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// PNG's filter types (PNG 1.2, section 6), and EVN_PNG_ADAPTIVE: per row, the filter whose
/// output has the smallest sum of absolute values taken as signed bytes (libpng's heuristic).
enum {
    EVN_PNG_NONE = 0,
    EVN_PNG_SUB = 1,
    EVN_PNG_UP = 2,
    EVN_PNG_AVERAGE = 3,
    EVN_PNG_PAETH = 4,
    EVN_PNG_ADAPTIVE = 5
};

/// Filters rows y0..<y1 of an interleaved image (`row_bytes` bytes a row, rows back to back;
/// `bpp` bytes a pixel; `sixteen`: 16-bit samples in host order, written big-endian as PNG
/// stores them) into `out`: each row its filter-type byte then `row_bytes` filtered bytes.
/// Row y0 is filtered against row y0 - 1 of the image, as in the whole image's stream.
/// Returns 0, or -1 when scratch memory could not be had.
/// - Complexity: O((y1 - y0) * row_bytes); five passes a row for EVN_PNG_ADAPTIVE.
int evn_png_filter_rows(const uint8_t *image, size_t row_bytes, size_t bpp, int sixteen, size_t y0, size_t y1,
                        int filter, uint8_t *out);
int evn_png_filter_rows_portable(const uint8_t *image, size_t row_bytes, size_t bpp, int sixteen, size_t y0, size_t y1,
                                 int filter, uint8_t *out);
int evn_png_filter_rows_avx2(const uint8_t *image, size_t row_bytes, size_t bpp, int sixteen, size_t y0, size_t y1,
                             int filter, uint8_t *out);

/// TIFF's horizontal predictor (Predictor = 2) for `rows` rows of `row_samples` samples (8-bit:
/// `bits` 8, 16-bit host order: 16), `spp` samples a pixel: each sample minus the same channel of
/// the pixel before, into `out` (same layout as the input).
void evn_tiff_predict_rows(const void *image, size_t row_samples, size_t spp, int bits, size_t rows, void *out);

/// Upper bound of evn_deflate_piece's output for `n` input bytes.
size_t evn_deflate_piece_bound(size_t n);

/// Compresses `n` bytes as raw deflate with libdeflate at `level` (1...12) into `out` (room for
/// evn_deflate_piece_bound(n) bytes). With `last` zero the stream is left open: its final block is
/// marked not final and an empty stored block brings it to a byte boundary (zlib's sync flush),
/// so the next piece's stream follows it directly and the pieces read as one deflate stream.
/// Returns the length, or -1 (no memory, or an output this code could not walk: the caller may
/// fall back to zlib).
/// - Complexity: libdeflate's time, plus one walk over the compressed blocks' symbols when
///   `last` is zero (about a twentieth of compressing them).
long evn_deflate_piece(const uint8_t *in, size_t n, uint8_t *out, size_t cap, int level, int last);

/// Walks a raw deflate stream of `n` bytes: on success returns 0 and sets `final_bit` to the bit
/// offset of the final block's BFINAL bit and `end_bit` to the bit just past that block; -1 when
/// the stream is malformed or ends early. Exposed for tests.
int evn_deflate_find_final(const uint8_t *stream, size_t n, size_t *final_bit, size_t *end_bit);

/// zlib at `level` (0...9) for the same job as evn_deflate_piece: raw deflate ending on a sync
/// flush, or as the stream's end when `last`. The fallback when evn_deflate_piece returns -1.
/// `cap` at least evn_deflate_piece_bound(n). Returns the length or -1.
long evn_deflate_piece_zlib(const uint8_t *in, size_t n, uint8_t *out, size_t cap, int level, int last);

/// One piece of a PNG's image data: rows y0..<y1 filtered and deflated.
typedef struct evn_png_piece {
    /// malloc'd raw deflate bytes (free() them); NULL with length -1 on failure.
    uint8_t *data;
    long length;
    /// Adler-32 of the piece's filtered bytes, and how many there are.
    uint32_t adler;
    size_t filtered;
} evn_png_piece;

/// Filters rows y0..<y1 (see evn_png_filter_rows) and deflates them at libdeflate `level`
/// (see evn_deflate_piece), `last` for the image's last piece. Returns 0, or -1 (no memory).
int evn_png_encode_piece(const uint8_t *image, size_t row_bytes, size_t bpp, int sixteen, size_t y0, size_t y1,
                         int filter, int level, int last, evn_png_piece *piece);

/// Bytes of the IDAT chunks evn_png_write_idat writes for these pieces.
size_t evn_png_idat_size(const evn_png_piece *pieces, size_t count);

/// Writes the image data as IDAT chunks into `out`: one zlib stream (header, the pieces in
/// order, the Adler-32 of all filtered bytes), one chunk a piece, each with its CRC. `level` sets
/// the header's FLEVEL hint. Returns the bytes written (evn_png_idat_size).
size_t evn_png_write_idat(const evn_png_piece *pieces, size_t count, int level, uint8_t *out);

/// Adler-32 (zlib's check value) of `n` bytes, continuing `adler` (libdeflate's).
uint32_t evn_adler32(uint32_t adler, const uint8_t *p, size_t n);

/// CRC-32 (PNG's and gzip's) of `n` bytes, continuing `crc` (libdeflate's).
uint32_t evn_crc32(uint32_t crc, const uint8_t *p, size_t n);

/// A zlib stream (2-byte header, data, Adler-32) of `n` bytes, one piece with libdeflate, for a
/// TIFF Deflate strip. Returns the length or -1.
long evn_zlib_compress(const uint8_t *in, size_t n, uint8_t *out, size_t cap, int level);

/// Upper bound of evn_zlib_compress's output.
size_t evn_zlib_bound(size_t n);

#ifdef __cplusplus
}
#endif

#endif
