// Deflate in pieces that join into one stream (see evanesco_encode.h). libdeflate compresses a
// buffer in one call, about twice zlib's speed at a better ratio, but always ends it with a final
// block. To let the next piece follow, the stream is walked block by block (headers, Huffman
// tables and symbols; nothing is inflated) to find that final block; its BFINAL bit is cleared
// and an empty stored block brings the stream to a byte boundary, as zlib's sync flush does.
// pigz joins zlib pieces the same way; the walk is what libdeflate's one-call interface needs.
#include "evanesco_encode.h"
#include <libdeflate.h>
#include <zlib.h>
#include <stdlib.h>
#include <string.h>

// ---- Reading bits, least significant first (RFC 1951, 3.1.1) ----

typedef struct {
    const uint8_t *p;
    size_t n, next; // bytes, and the next byte to load
    uint64_t buf;   // bits loaded and not consumed, the next one lowest
    unsigned count; // how many
} bit_reader;

/// Loads whole bytes while at least 8 bits of room remain; past the end it loads zeros and counts
/// them, so `position` can tell a stream that ran out.
static inline void refill(bit_reader *r) {
    while (r->count <= 56) {
        const uint64_t b = r->next < r->n ? r->p[r->next] : 0;
        r->buf |= b << r->count;
        r->next++;
        r->count += 8;
    }
}

static inline size_t position(const bit_reader *r) { return r->next * 8 - r->count; }

static inline uint32_t take(bit_reader *r, unsigned k) {
    if (r->count < k) refill(r);
    const uint32_t v = (uint32_t)(r->buf & ((1ull << k) - 1));
    r->buf >>= k;
    r->count -= k;
    return v;
}

static inline void seek(bit_reader *r, size_t bit) {
    r->next = bit / 8;
    r->buf = 0;
    r->count = 0;
    refill(r);
    r->buf >>= bit % 8;
    r->count -= (unsigned)(bit % 8);
}

// ---- Canonical Huffman codes: a 10-bit lookup table for the short codes (entry: symbol << 4 |
// length; 0: a longer code or none), and the canonical count/symbol lists for the rest ----

enum { MAX_BITS = 15, PRIMARY_BITS = 10 };

typedef struct {
    uint16_t table[1u << PRIMARY_BITS];
    /// The walk's view of the same short codes: the bits a symbol takes with its extra bits, and
    /// WALK_MATCH for a length (a distance follows); 0 for a longer code, end-of-block or a
    /// symbol that is not allowed (the walk's slow path).
    uint8_t walk[1u << PRIMARY_BITS];
    uint16_t per_length[MAX_BITS + 1];
    uint16_t symbols[320]; // in canonical order: by length, then by symbol
} huffman;

/// Builds the tables for `count` code lengths. Returns -1 for an over-subscribed set. An empty set
/// builds tables with no codes (a block that uses no distances may send one).
/// - Complexity: O(count + 2^PRIMARY_BITS), small next to a block's symbols.
static int build(huffman *h, const uint8_t *lengths, unsigned count) {
    unsigned next[MAX_BITS + 2] = {0}, offset[MAX_BITS + 2] = {0};
    memset(h->per_length, 0, sizeof h->per_length);
    for (unsigned s = 0; s < count; s++) h->per_length[lengths[s]]++;
    h->per_length[0] = 0;
    int left = 1;
    for (unsigned len = 1; len <= MAX_BITS; len++) {
        left = left * 2 - (int)h->per_length[len];
        if (left < 0) return -1;
    }
    for (unsigned len = 1, code = 0; len <= MAX_BITS; len++) {
        code = (code + h->per_length[len - 1]) << 1;
        next[len] = code;
        offset[len + 1] = offset[len] + h->per_length[len];
    }
    memset(h->table, 0, sizeof h->table);
    for (unsigned s = 0; s < count; s++) {
        const unsigned len = lengths[s];
        if (!len) continue;
        h->symbols[offset[len]++] = (uint16_t)s;
        if (len > PRIMARY_BITS) {
            next[len]++;
            continue;
        }
        unsigned code = next[len]++, reversed = 0;
        for (unsigned i = 0; i < len; i++) {
            reversed = (reversed << 1) | (code & 1);
            code >>= 1;
        }
        for (unsigned k = reversed; k < (1u << PRIMARY_BITS); k += 1u << len) h->table[k] = (uint16_t)(s << 4 | len);
    }
    return 0;
}

/// A code longer than the table's bits, read a bit at a time (codes are sent most significant bit
/// first): the symbol, or -1. Needs MAX_BITS bits in the buffer.
static int decode_long(bit_reader *r, const huffman *h) {
    unsigned code = 0, first = 0, index = 0;
    uint64_t bits = r->buf;
    for (unsigned len = 1; len <= MAX_BITS; len++) {
        code |= (unsigned)(bits & 1);
        bits >>= 1;
        const unsigned count = h->per_length[len];
        if (code - first < count) {
            r->buf >>= len;
            r->count -= len;
            return h->symbols[index + (code - first)];
        }
        index += count;
        first += count;
        first <<= 1;
        code <<= 1;
    }
    return -1;
}

/// The next symbol, or -1 where the bits match no code.
static inline int decode(bit_reader *r, const huffman *h) {
    if (r->count < MAX_BITS) refill(r);
    const uint16_t e = h->table[r->buf & ((1u << PRIMARY_BITS) - 1)];
    if (!e) return decode_long(r, h);
    r->buf >>= e & 15;
    r->count -= e & 15;
    return e >> 4;
}

static const uint8_t length_extra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                         2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const uint8_t order[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};

/// Reads a dynamic block's code lengths (RFC 1951, 3.2.7) and builds its two tables.
static int read_tables(bit_reader *r, huffman *lit, huffman *dist, huffman *scratch) {
    const unsigned hlit = take(r, 5) + 257, hdist = take(r, 5) + 1, hclen = take(r, 4) + 4;
    if (hlit > 286 || hdist > 30) return -1;
    uint8_t lengths[320] = {0}, code_lengths[19] = {0};
    for (unsigned i = 0; i < hclen; i++) code_lengths[order[i]] = (uint8_t)take(r, 3);
    if (build(scratch, code_lengths, 19) != 0) return -1;
    for (unsigned i = 0; i < hlit + hdist;) {
        const int s = decode(r, scratch);
        if (s < 0) return -1;
        if (s < 16) {
            lengths[i++] = (uint8_t)s;
            continue;
        }
        unsigned repeat;
        uint8_t value = 0;
        if (s == 16) {
            if (i == 0) return -1;
            value = lengths[i - 1];
            repeat = 3 + take(r, 2);
        } else if (s == 17) repeat = 3 + take(r, 3);
        else repeat = 11 + take(r, 7);
        if (i + repeat > hlit + hdist) return -1;
        while (repeat--) lengths[i++] = value;
    }
    if (lengths[256] == 0) return -1;
    if (build(lit, lengths, hlit) != 0 || build(dist, lengths + hlit, hdist) != 0) return -1;
    return 0;
}

enum { WALK_MATCH = 0x40 };

/// Fills `walk` from `table`: `lengths` for the literal/length code, otherwise the distance code.
static void build_walk(huffman *h, int lengths) {
    for (unsigned i = 0; i < (1u << PRIMARY_BITS); i++) {
        const unsigned e = h->table[i], s = e >> 4, len = e & 15;
        uint8_t w = 0; // 0: no short code, the slow path
        if (!e) w = 0;
        else if (lengths)
            w = s < 256                  ? (uint8_t)len
                : (s >= 257 && s <= 285) ? (uint8_t)((len + length_extra[s - 257]) | WALK_MATCH)
                                         : 0;
        else w = s <= 29 ? (uint8_t)(len + (s >= 4 ? s / 2 - 1 : 0)) : 0;
        h->walk[i] = w;
    }
}

static inline void skip(bit_reader *r, unsigned k) {
    r->buf >>= k;
    r->count -= k;
}

/// A distance code and its extra bits, through the slow path; 0, or -1.
static int skip_distance(bit_reader *r, const huffman *dist) {
    const int d = decode(r, dist);
    if (d < 0 || d > 29) return -1;
    skip(r, d >= 4 ? (unsigned)d / 2 - 1 : 0);
    return 0;
}

/// Consumes one block's symbols up to and including end-of-block; 0, or -1 for a malformed block.
/// No symbol values are needed, only their lengths, so a literal or a whole length/distance pair
/// is two table reads and no branch on which it was (one refill of at least 56 bits covers the
/// longest pair, 15 + 5 + 15 + 13 bits); long codes and end-of-block take the slow path.
static int walk_symbols(bit_reader *r, const huffman *lit, const huffman *dist) {
    const uint64_t mask = (1u << PRIMARY_BITS) - 1;
    const size_t limit = r->n * 8;
    for (;;) {
        if (r->next + 8 <= r->n) {
            uint64_t word;
            memcpy(&word, r->p + r->next, 8);
            r->buf |= word << r->count;
            r->next += (63 - r->count) >> 3;
            r->count |= 56;
        } else {
            // Past the end the reader sees zeros, which may well decode: stop there.
            if (position(r) > limit) return -1;
            refill(r);
        }
        const unsigned e = lit->walk[r->buf & mask];
        if (__builtin_expect(e != 0, 1)) {
            skip(r, e & 31);
            if (!(e & WALK_MATCH)) continue;
            const unsigned d = dist->walk[r->buf & mask];
            if (__builtin_expect(!d, 0)) {
                if (skip_distance(r, dist) != 0) return -1;
                continue;
            }
            skip(r, d);
            continue;
        }
        const int s = decode(r, lit);
        if (s < 0 || s > 285) return -1;
        if (s == 256) return position(r) > limit ? -1 : 0;
        if (s < 256) continue;
        skip(r, length_extra[s - 257]);
        if (skip_distance(r, dist) != 0) return -1;
    }
}

int evn_deflate_find_final(const uint8_t *stream, size_t n, size_t *final_bit, size_t *end_bit) {
    huffman *tables = malloc(3 * sizeof(huffman));
    if (!tables) return -1;
    huffman *lit = tables, *dist = tables + 1, *lengths_code = tables + 2;
    bit_reader r = {stream, n, 0, 0, 0};
    refill(&r);
    int result = -1;
    for (;;) {
        const size_t header = position(&r);
        const unsigned final = take(&r, 1), type = take(&r, 2);
        if (type == 0) {
            const size_t aligned = (position(&r) + 7) & ~(size_t)7;
            seek(&r, aligned);
            const unsigned len = take(&r, 16), nlen = take(&r, 16);
            if ((len ^ 0xFFFF) != nlen) break;
            seek(&r, aligned + 32 + (size_t)len * 8);
        } else if (type == 3) {
            break;
        } else {
            if (type == 1) {
                uint8_t lengths[320];
                memset(lengths, 8, 144);
                memset(lengths + 144, 9, 112);
                memset(lengths + 256, 7, 24);
                memset(lengths + 280, 8, 8);
                memset(lengths + 288, 5, 30);
                if (build(lit, lengths, 288) != 0 || build(dist, lengths + 288, 30) != 0) break;
                build_walk(lit, 1);
                build_walk(dist, 0);
            } else if (read_tables(&r, lit, dist, lengths_code) != 0) {
                break;
            } else {
                build_walk(lit, 1);
                build_walk(dist, 0);
            }
            if (walk_symbols(&r, lit, dist) != 0) break;
        }
        if (position(&r) > n * 8) break;
        if (final) {
            *final_bit = header;
            *end_bit = position(&r);
            result = 0;
            break;
        }
    }
    free(tables);
    return result;
}

size_t evn_deflate_piece_bound(size_t n) {
    // libdeflate's bound for any level (stored blocks at worst), and the stored block appended.
    return libdeflate_deflate_compress_bound(NULL, n) + 8;
}

long evn_deflate_piece(const uint8_t *in, size_t n, uint8_t *out, size_t cap, int level, int last) {
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(level);
    if (!c) return -1;
    const size_t length = libdeflate_deflate_compress(c, in, n, out, cap > 8 ? cap - 8 : 0);
    libdeflate_free_compressor(c);
    if (length == 0) return -1;
    if (last) return (long)length;
    size_t final_bit, end_bit;
    if (evn_deflate_find_final(out, length, &final_bit, &end_bit) != 0 || (end_bit + 7) / 8 != length) return -1;
    out[final_bit / 8] &= (uint8_t) ~(1u << (final_bit % 8));
    // An empty stored block: three zero header bits at end_bit (the bits after it in its byte
    // cleared), zero padding to the byte boundary, LEN 0 and NLEN 0xFFFF.
    if (end_bit % 8) out[end_bit / 8] &= (uint8_t)((1u << (end_bit % 8)) - 1);
    size_t bytes = (end_bit + 3 + 7) / 8;
    if (bytes > length) out[length] = 0;
    out[bytes++] = 0;
    out[bytes++] = 0;
    out[bytes++] = 0xFF;
    out[bytes++] = 0xFF;
    return (long)bytes;
}

long evn_deflate_piece_zlib(const uint8_t *in, size_t n, uint8_t *out, size_t cap, int level, int last) {
    // zlib counts in 32-bit units; pieces are far smaller.
    if (n >= (1ull << 32) || cap >= (1ull << 32)) return -1;
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (deflateInit2(&z, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) return -1;
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    const int r = deflate(&z, last ? Z_FINISH : Z_SYNC_FLUSH);
    const long written = (long)(cap - z.avail_out);
    const int ok = last ? r == Z_STREAM_END : (r == Z_OK && z.avail_in == 0 && z.avail_out > 0);
    deflateEnd(&z);
    return ok ? written : -1;
}

uint32_t evn_adler32(uint32_t adler, const uint8_t *p, size_t n) { return libdeflate_adler32(adler, p, n); }

uint32_t evn_crc32(uint32_t crc, const uint8_t *p, size_t n) { return libdeflate_crc32(crc, p, n); }

size_t evn_zlib_bound(size_t n) { return libdeflate_zlib_compress_bound(NULL, n); }

long evn_zlib_compress(const uint8_t *in, size_t n, uint8_t *out, size_t cap, int level) {
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(level);
    if (!c) return -1;
    const size_t length = libdeflate_zlib_compress(c, in, n, out, cap);
    libdeflate_free_compressor(c);
    return length ? (long)length : -1;
}
