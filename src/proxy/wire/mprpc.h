/*
 * mprpc: the messages inside middle-proxy frames (docs/proxy-protocol-notes.md, "Middle-proxy
 * mode"): the handshake (RPC_NONCE, RPC_HANDSHAKE, RPC_HANDSHAKE_ERROR), a client's packet
 * going up (RPC_PROXY_REQ), what comes back (RPC_PROXY_ANS, RPC_SIMPLE_ACK, RPC_CLOSE_EXT),
 * a client going away (RPC_CLOSE_CONN) and keepalives (RPC_PING, RPC_PONG).
 *
 * Every integer is little-endian; a message's first word is its type. Builders write into
 * caller buffers of the documented size and return the length; parsers read p[0..n) (one
 * frame's payload) and fill a struct, pointing into p for variable parts. Both sides are
 * here: tgproxy is the client of a middle proxy, tests/support's fake middle proxy the server.
 *
 * Pure computation: no I/O, no allocation. Thread-safety: reentrant. Fuzzed by
 * fuzz/proxy_mprpc.
 */
#ifndef TGPROXY_MPRPC_H
#define TGPROXY_MPRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Type words (LE32 values). */
#define MPRPC_NONCE           0x7acb87aau
#define MPRPC_HANDSHAKE       0x7682eef5u
#define MPRPC_HANDSHAKE_ERROR 0x6a27bedau
#define MPRPC_PROXY_REQ       0x36cef1eeu
#define MPRPC_PROXY_ANS       0x4403da0du
#define MPRPC_SIMPLE_ACK      0x3bac409bu
#define MPRPC_CLOSE_EXT       0x5eb634a2u
#define MPRPC_CLOSE_CONN      0x1fcf425du
#define MPRPC_PING            0x5730a2dfu
#define MPRPC_PONG            0x8430eaa7u
#define MPRPC_TL_PROXY_TAG    0xdb1e26aeu

#define MPRPC_CRYPTO_AES 1u /* the nonce's crypto schema tgproxy speaks */

/* RPC_PROXY_REQ flags. */
#define MPRPC_F_NOT_ENCRYPTED 0x2u        /* the payload starts with auth_key_id 0 */
#define MPRPC_F_HAS_AD_TAG    0x8u        /* extra carries TL_PROXY_TAG */
#define MPRPC_F_MAGIC         0x1000u     /* the client speaks MTProto transport framing */
#define MPRPC_F_EXTMODE2      0x20000u    /* an obfuscated2 client */
#define MPRPC_F_PAD           0x8000000u  /* padded intermediate */
#define MPRPC_F_INTERMEDIATE  0x20000000u /* intermediate or padded intermediate */
#define MPRPC_F_ABRIDGED      0x40000000u
#define MPRPC_F_QUICKACK      0x80000000u /* the client asked for a quick ack */

#define MPRPC_NONCE_LEN     32 /* type, key selector, schema, timestamp, nonce[16] */
#define MPRPC_HANDSHAKE_LEN 32 /* type, flags, sender pid[12], peer pid[12] */
#define MPRPC_HS_ERROR_LEN  20 /* type, error code, sender pid[12] */
#define MPRPC_PID_LEN       12 /* ip (LE32), port (LE16), pid (LE16), start time (LE32) */
#define MPRPC_AD_TAG_LEN    16
#define MPRPC_REQ_HEAD_MAX  84 /* RPC_PROXY_REQ before the payload, with an ad tag */
#define MPRPC_SHORT_MAX     16 /* any of the fixed-size answers, ping or pong */

struct mprpc_nonce {
    uint32_t key_select; /* the proxy secret's first four bytes, as LE32 */
    uint32_t schema;     /* MPRPC_CRYPTO_AES */
    uint32_t ts;         /* the sender's clock, Unix seconds (mod 2^32) */
    uint8_t nonce[16];
};

struct mprpc_handshake {
    uint32_t flags; /* 0: CRC32 framing (bit 11 would ask for CRC32-C; never sent) */
    uint8_t sender[MPRPC_PID_LEN], peer[MPRPC_PID_LEN];
};

/* An address as RPC_PROXY_REQ carries it: IPv6 or IPv4-mapped (::ffff:a.b.c.d), port. */
struct mprpc_addr {
    uint8_t ip[16];
    uint32_t port;
};

struct mprpc_req {
    uint32_t flags;   /* MPRPC_F_* */
    uint64_t conn_id; /* the client's id on this middle-proxy connection */
    struct mprpc_addr client, proxy;
    bool has_tag;
    uint8_t ad_tag[MPRPC_AD_TAG_LEN];
    size_t off, len; /* the client's packet at p[off..off+len) (parse only) */
};

enum mprpc_kind {
    MPRPC_K_UNKNOWN = 0, /* a type this file does not know: the caller ignores it */
    MPRPC_K_PROXY_ANS,
    MPRPC_K_SIMPLE_ACK,
    MPRPC_K_CLOSE_EXT,
    MPRPC_K_CLOSE_CONN,
    MPRPC_K_PING,
    MPRPC_K_PONG,
};

/* One message after the handshake, either direction except RPC_PROXY_REQ. */
struct mprpc_msg {
    enum mprpc_kind kind;
    uint32_t type;    /* the type word as read */
    uint32_t flags;   /* PROXY_ANS */
    uint64_t conn_id; /* PROXY_ANS, SIMPLE_ACK, CLOSE_EXT, CLOSE_CONN */
    uint32_t confirm; /* SIMPLE_ACK: the token to hand the client */
    uint64_t ping_id; /* PING, PONG */
    size_t off, len;  /* PROXY_ANS: the packet for the client at p[off..off+len) */
};

/* Write n (MPRPC_NONCE_LEN bytes). */
size_t mprpc_nonce_build(uint8_t out[MPRPC_NONCE_LEN], const struct mprpc_nonce *n);
/* 0, or -1 when p is not a 32-byte RPC_NONCE (the schema is the caller's to check). */
int mprpc_nonce_parse(const uint8_t *p, size_t n, struct mprpc_nonce *out);

size_t mprpc_handshake_build(uint8_t out[MPRPC_HANDSHAKE_LEN], const struct mprpc_handshake *h);
/*
 * 0 for a 32-byte RPC_HANDSHAKE (filled into *out); 1 for an RPC_HANDSHAKE_ERROR (at least
 * 8 bytes: its code in *err); -1 otherwise.
 */
int mprpc_handshake_parse(const uint8_t *p, size_t n, struct mprpc_handshake *out, int32_t *err);
size_t mprpc_handshake_error_build(uint8_t out[MPRPC_HS_ERROR_LEN], int32_t code,
                                   const uint8_t sender[MPRPC_PID_LEN]);

/* A pid: IPv4 in network order, port, pid and time as the fields say. */
void mprpc_pid(uint8_t out[MPRPC_PID_LEN], const uint8_t ip4[4], uint16_t port, uint16_t pid,
               uint32_t utime);

/* The address from a sockaddr-style pair: family AF_INET (4 bytes) or AF_INET6 (16). */
void mprpc_addr_set(struct mprpc_addr *a, int family, const void *ip, uint16_t port);
/* Is a an IPv4-mapped address? Its 4 bytes are then at a->ip + 12. */
bool mprpc_addr_is_v4(const struct mprpc_addr *a);

/*
 * RPC_PROXY_REQ up to the payload, written to out[0..MPRPC_REQ_HEAD_MAX): r's fields; the
 * ad tag (and flag MPRPC_F_HAS_AD_TAG) when r->has_tag. Returns the length (56 without a tag,
 * 84 with one); the caller sends the client's packet right after it.
 */
size_t mprpc_req_head(uint8_t out[MPRPC_REQ_HEAD_MAX], const struct mprpc_req *r);
/*
 * Parse an RPC_PROXY_REQ (the middle proxy's side). The extra block is walked when a flag
 * announces it (0x8 or 0x4): its LE32 byte count, a multiple of 4 and within the message, then
 * TL objects of which TL_PROXY_TAG (a TL string) is read and others end the walk. 0, or -1 on
 * a wrong type, a message too short or an extra block that does not fit.
 */
int mprpc_req_parse(const uint8_t *p, size_t n, struct mprpc_req *out);

/*
 * Flags for a client of transport tag `tag` (OBFS2_TAG_*), with or without an ad tag, asking
 * for a quick ack or not, whose packet is unencrypted (auth_key_id 0). 0 for an unknown tag.
 */
uint32_t mprpc_req_flags(uint32_t tag, bool has_tag, bool quickack, bool not_encrypted);

/*
 * Any message but RPC_PROXY_REQ and the handshake. A known type with a wrong length is -1;
 * an unknown type is 0 with kind MPRPC_K_UNKNOWN; a message under 4 bytes is -1.
 */
int mprpc_parse(const uint8_t *p, size_t n, struct mprpc_msg *out);

/* Builders for the fixed messages (and the head of RPC_PROXY_ANS, 16 bytes before its packet).
   Each returns the length written to out[0..MPRPC_SHORT_MAX). */
size_t mprpc_ans_head(uint8_t out[MPRPC_SHORT_MAX], uint32_t flags, uint64_t conn_id);
size_t mprpc_simple_ack(uint8_t out[MPRPC_SHORT_MAX], uint64_t conn_id, uint32_t confirm);
size_t mprpc_close_ext(uint8_t out[MPRPC_SHORT_MAX], uint64_t conn_id);
size_t mprpc_close_conn(uint8_t out[MPRPC_SHORT_MAX], uint64_t conn_id);
size_t mprpc_ping(uint8_t out[MPRPC_SHORT_MAX], uint64_t ping_id);
size_t mprpc_pong(uint8_t out[MPRPC_SHORT_MAX], uint64_t ping_id);

#endif
