/*
 * mpsess: tgproxy's side of one connection to a middle proxy, as a state machine over bytes
 * (docs/proxy-protocol-notes.md, "Middle-proxy mode"): the nonce exchange, the keys, the
 * encrypted handshake, then frames both ways. It does no I/O: the caller feeds it what the
 * socket gave and sends what it hands out, so the engine's loop, the tests and a fuzzer all
 * drive the same code.
 *
 *   mpsess_start()  the nonce frame to send first
 *   mpsess_feed()   bytes from the middle proxy (or mpsess_space + mpsess_commit: read
 *                   straight into the session's buffer): during the handshake it answers through
 *                   sink->send (the handshake frame); once ready it hands each message to
 *                   sink->msg and answers pings itself (sink->send)
 *   mpsess_wrap()   frame, pad and encrypt one outgoing message in place
 *
 * Memory: the struct and one reassembly buffer (grown to the largest frame seen, at most
 * max_frame), plus the two CBC contexts. Thread-safety: one thread at a time per session.
 */
#ifndef TGPROXY_MPSESS_H
#define TGPROXY_MPSESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/wire/mpcrypto.h"
#include "proxy/wire/mprpc.h"

enum mpsess_state {
    MPSESS_NONCE_SENT = 0, /* waiting for the server's RPC_NONCE */
    MPSESS_HS_SENT,        /* keys derived, our RPC_HANDSHAKE sent, waiting for its answer */
    MPSESS_READY,          /* messages flow */
    MPSESS_FAILED,         /* a fatal error: close the connection (why says which) */
};

/* Why a session failed (metrics: handshake failures by reason). */
enum mpsess_why {
    MPSESS_OK = 0,
    MPSESS_E_FRAME,     /* a frame with a bad length or CRC, or over max_frame */
    MPSESS_E_SEQ,       /* a frame out of sequence */
    MPSESS_E_NONCE,     /* the answer is not a valid RPC_NONCE for our secret and schema */
    MPSESS_E_KEYS,      /* the first encrypted frame did not decrypt to a valid frame: the
                           proxy secret or the public address is wrong */
    MPSESS_E_HANDSHAKE, /* not an RPC_HANDSHAKE, or not naming us as its peer */
    MPSESS_E_REFUSED,   /* RPC_HANDSHAKE_ERROR from the middle proxy */
    MPSESS_E_MESSAGE,   /* a known message with a bad length */
    MPSESS_E_NOMEM,
    MPSESS_E_CRYPTO,
};

struct mpsess_cfg {
    const uint8_t *secret; /* the proxy secret (32..256 bytes); read during mpsess_start only */
    size_t secret_len;
    struct mpcrypto_end local;  /* our address as the middle proxy sees it (public, behind NAT) */
    struct mpcrypto_end remote; /* the middle proxy's */
    uint32_t now;               /* Unix seconds: the nonce's timestamp */
    uint8_t nonce[16];          /* fresh random bytes */
    uint8_t pid[MPRPC_PID_LEN]; /* our process id as the handshake names it */
    size_t max_frame;           /* largest frame accepted (0 = MPFRAME_MAX) */
};

/* Where a session's output and messages go. */
struct mpsess_sink {
    void *ud;
    /* bytes to send to the middle proxy, in order; 0, or -1 to stop feeding (error) */
    int (*send)(void *ud, const uint8_t *p, size_t n);
    /* one message after the handshake (never a ping: those are answered); payload p[0..n)
       is the whole message (m->off / m->len index into it); 0, or -1 to stop feeding */
    int (*msg)(void *ud, const struct mprpc_msg *m, const uint8_t *p, size_t n);
};

struct mpsess {
    enum mpsess_state state;
    enum mpsess_why why;
    int32_t out_seq, in_seq;
    struct mpcbc enc, dec;
    uint8_t tail[16]; /* ciphertext short of a block */
    size_t tail_len;
    uint8_t *buf; /* plaintext not yet parsed: buf[off..len) (compacted only for room) */
    size_t off, len, cap;
    size_t max_frame;
    uint8_t nonce[16], pid[MPRPC_PID_LEN];
    uint32_t ts;
    uint32_t key_select;
    struct mpcrypto_end local, remote;
    uint8_t secret[MPCRYPTO_SECRET_MAX]; /* kept until the keys are derived, then wiped */
    size_t secret_len;
    uint64_t frames_in, frames_out;
};

/* Names for logs and metric labels: "frame", "sequence", "nonce", "keys", ... */
const char *mpsess_why_name(enum mpsess_why why);

/*
 * Begin: s is set up and the nonce frame written to out[0..*n) (cap >= 64). 0, or -1 (bad
 * cfg: secret length, address families; s->why).
 */
int mpsess_start(struct mpsess *s, const struct mpsess_cfg *cfg, uint8_t *out, size_t cap,
                 size_t *n);

/* Feed in[0..n) from the middle proxy. 0, or -1: failed (s->state MPSESS_FAILED, s->why) or
   stopped by the sink. */
int mpsess_feed(struct mpsess *s, const uint8_t *in, size_t n, const struct mpsess_sink *sink);

/*
 * The same without the copy: mpsess_space() gives room for up to n bytes inside the
 * session's own buffer (NULL: failed or no memory, s->why), the caller reads the socket
 * straight into it, then mpsess_commit() takes the k <= n bytes it got, as mpsess_feed
 * would. Nothing else may touch s in between.
 */
uint8_t *mpsess_space(struct mpsess *s, size_t n);
int mpsess_commit(struct mpsess *s, size_t k, const struct mpsess_sink *sink);

/* Bytes mpsess_wrap needs for a message of n bytes: 8 before it, the CRC and padding after. */
size_t mpsess_wrap_size(size_t n);
/*
 * The message is at buf[8..8+n); write its frame around it, pad and encrypt it, all in
 * buf[0..cap) (cap >= mpsess_wrap_size(n)). Only when ready. The frame's length, or 0.
 */
size_t mpsess_wrap(struct mpsess *s, uint8_t *buf, size_t cap, size_t n);

/* Free the buffer and the ciphers, wipe the keys. NULL-safe, idempotent. */
void mpsess_cleanup(struct mpsess *s);

#endif
