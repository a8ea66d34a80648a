/*
 * mpframe: the frame layer of the middle-proxy (RPC) connection (docs/proxy-protocol-notes.md,
 * "Middle-proxy mode").
 *
 * One frame: LE32 total length (12 + payload) | LE32 signed sequence number | payload |
 * LE32 CRC32 (IEEE, as zlib's crc32) of everything before it. The payload is a whole number of
 * 4-byte words. A sender may put padding words (LE32 4: "04 00 00 00") between frames; once
 * the stream is encrypted (AES-256-CBC) it pads each write to a multiple of 16 bytes that way.
 * Sequence numbers count frames per direction from -2: the nonce is -2, the handshake -1, the
 * first RPC message 0.
 *
 * mpframe_parse() reads the plaintext stream: it skips padding words, then says "need more",
 * "bad" (with a reason) or "complete": the payload's place and the bytes consumed, so the
 * caller drops them and calls again. It checks the length and the CRC; the sequence number is
 * returned for the caller to compare with the one it expects. mpframe_build() writes a frame.
 *
 * Pure computation over caller buffers: no I/O, no allocation, reads only b[0..n).
 * Thread-safety: reentrant. Fuzzed by fuzz/proxy_mpframe.
 */
#ifndef TGPROXY_MPFRAME_H
#define TGPROXY_MPFRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MPFRAME_OVERHEAD 12u        /* length, sequence number, CRC */
#define MPFRAME_MAX      (1u << 24) /* largest frame either side accepts by default */
#define MPFRAME_PAD_WORD 4u         /* a padding word's value */

enum { MPFRAME_MORE = 0, MPFRAME_OK = 1, MPFRAME_BAD = -1 };

struct mpframe {
    int32_t seq;     /* the frame's sequence number */
    size_t off, len; /* payload at b[off..off+len) */
    size_t consumed; /* padding before the frame plus the frame itself */
};

/* CRC32 (IEEE 802.3, reflected, as zlib's crc32()); pass 0 to start, the result to go on. */
uint32_t mpframe_crc32(uint32_t crc, const void *p, size_t n);
/* The same by tables alone: what mpframe_crc32 does without PCLMULQDQ (tests hold the two
   equal). */
uint32_t mpframe_crc32_portable(uint32_t crc, const void *p, size_t n);

/*
 * The first frame of b[0..n) after any padding words. max_len bounds the total length
 * (0 = MPFRAME_MAX). MPFRAME_OK fills *out; MPFRAME_MORE: a valid prefix (out->consumed is
 * the padding skipped so far, which the caller may drop); MPFRAME_BAD: a length that is not a
 * multiple of 4, under 12 or over max_len, or a CRC mismatch; *why (may be NULL) then names
 * it in a few words (a static string).
 */
int mpframe_parse(const uint8_t *b, size_t n, size_t max_len, struct mpframe *out,
                  const char **why);

/* Bytes mpframe_build writes for a payload of n bytes: 12 + n, rounded up to 16 with pad16. */
size_t mpframe_size(size_t n, bool pad16);

/*
 * Write the frame carrying payload[0..n) with sequence number seq into out[0..cap), then,
 * with pad16, padding words until the length written is a multiple of 16. payload may point
 * into out + 8 (the builder moves nothing: it writes the header before it and the CRC after).
 * Returns the bytes written, or 0 when n is not a multiple of 4, the frame would exceed
 * MPFRAME_MAX, or cap is too small.
 */
size_t mpframe_build(uint8_t *out, size_t cap, int32_t seq, const void *payload, size_t n,
                     bool pad16);

#endif
