/*
 * mtframe: MTProto transport framing inside a client's obfuscated2 stream (brief section 7),
 * which middle-proxy mode must split into packets (a direct-mode relay never looks).
 *
 *   abridged (ef)             len/4 as one byte (< 0x7f) or 0x7f + LE24; then the packet.
 *                             Bit 7 of the first byte asks for a quick ack.
 *   intermediate (ee)         LE32 len; then the packet. Bit 31 asks for a quick ack.
 *   padded intermediate (dd)  LE32 len (bit 31 as above); len bytes of packet and random
 *                             padding. As the official proxy does, the first len & ~3 bytes
 *                             go to the middle proxy (flag "pad" tells it padding may
 *                             follow); the last len % 4 are dropped.
 *
 * mtframe_next() finds the first packet of b[0..n): "need more", "bad" or where it is.
 * mtframe_head() writes the header of a packet going back to the client, mtframe_ack() the
 * 4-byte quick-ack token sent in place of a packet (abridged clients get it byte-reversed).
 *
 * Pure computation over caller buffers: no I/O, no allocation, reads only b[0..n).
 * Thread-safety: reentrant. Fuzzed by fuzz/proxy_mtframe.
 */
#ifndef TGPROXY_MTFRAME_H
#define TGPROXY_MTFRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MTFRAME_MAX      (1u << 24) /* largest packet accepted by default */
#define MTFRAME_HEAD_MAX 4

enum { MTFRAME_MORE = 0, MTFRAME_OK = 1, MTFRAME_BAD = -1 };

struct mtframe_pkt {
    size_t off, len; /* the packet at b[off..off+len): a multiple of 4, at least 4 */
    size_t consumed; /* header + packet + padding */
    bool quickack;   /* the client asked for a quick ack */
};

/*
 * The first packet of b[0..n) for transport tag `tag` (OBFS2_TAG_*). max_len bounds the
 * packet (0 = MTFRAME_MAX). MTFRAME_BAD: an unknown tag, a zero length, an abridged length in
 * the long form under 0x7f (an overlong encoding), a length that is not a multiple of 4
 * (unpadded transports), under 4 after the padding is dropped, or over max_len; *why (may be
 * NULL) names it.
 */
int mtframe_next(uint32_t tag, const uint8_t *b, size_t n, size_t max_len, struct mtframe_pkt *out,
                 const char **why);

/*
 * The header of a packet of len bytes (a multiple of 4) followed by pad bytes of padding
 * (padded intermediate only: 0..3; others 0), written to out[0..MTFRAME_HEAD_MAX). Returns its
 * length (1 or 4), or 0 for an unknown tag, a bad len or a pad the transport does not take.
 */
size_t mtframe_head(uint32_t tag, size_t len, size_t pad, uint8_t out[MTFRAME_HEAD_MAX]);

/* The quick-ack token for `confirm` (as RPC_SIMPLE_ACK carries it) in the client's framing. */
void mtframe_ack(uint32_t tag, uint32_t confirm, uint8_t out[4]);

#endif
