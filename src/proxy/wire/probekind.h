/*
 * probekind: the active-probing suite as data (issue 23, `tgproxy probe`), and how two
 * answers to one probe are compared.
 *
 * A prober that suspects a FakeTLS proxy sends it bytes a genuine client never sends and
 * compares what comes back with what the site the proxy claims to be answers to the same
 * bytes. probekind_get() lists the kinds (the ones tests/proxy/daemon/test_probing.c checks
 * one by one): silence, single bytes, HTTP requests to the TLS port, alerts and
 * ApplicationData before any hello, SSLv2 and TLS 1.2 hellos, truncated and oversized
 * hellos, a half-close, a ClientHello that no key signed, and with the secret: the right key
 * with a foreign SNI or a timestamp an hour off, and a replayed valid hello.
 * probekind_bytes() builds a kind's bytes.
 *
 * probekind_compare() takes what the site and the proxy answered (struct probekind_obs: the
 * bytes, FIN / RST / still open, when) and says what differs, as PROBEKIND_DIFF_* bits:
 * bytes (exactly, except where a TLS server's randomness makes two answers differ: then
 * record types, lengths of plaintext records, alerts in full, and encrypted lengths within
 * PROBEKIND_ENC_SLACK; an HTTP answer's Date-like headers), how it ended, the timing class
 * of the end and of the first byte (probekind_tclass: at once, after a delay, or still
 * open when the wait ran out), and whether bytes after a FIN drew a reset.
 * probekind_shape() is the normalised text the table prints and the comparison reads.
 *
 * Pure: no I/O, no allocation. Reentrant. The answers are a network peer's bytes: every
 * length is checked against the buffer (fuzz/proxy_probekind).
 */
#ifndef TGPROXY_PROBEKIND_H
#define TGPROXY_PROBEKIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROBEKIND_BYTES_MAX (5 + 16385) /* the largest probe (an oversized hello) */
#define PROBEKIND_ENC_SLACK 16          /* encrypted record lengths that count as equal */
#define PROBEKIND_SHAPE_MAX 256         /* probekind_shape() text, NUL included */

/* kind flags */
#define PROBEKIND_TLS    0x01u /* the answer is compared as TLS records (a TLS server's) */
#define PROBEKIND_KEY    0x02u /* needs the secret (skipped without one) */
#define PROBEKIND_REPLAY 0x04u /* send the bytes once to the proxy first (a replay) */
#define PROBEKIND_SILENT 0x08u /* the prober says nothing or stops halfway: a timer ends it */

struct probekind {
    const char *name; /* short, for the table */
    unsigned flags;
    bool shut_wr;          /* half-close after sending */
    const char *after_eof; /* sent once the peer's FIN came (NULL = none) */
};

/* What a probe's bytes are built from. */
struct probekind_ctx {
    const char *sni;    /* the front's domain (hellos' SNI, HTTP Host) */
    const uint8_t *key; /* 16 bytes of the secret, or NULL */
    int64_t now;        /* wall-clock seconds (hello timestamps) */
    const uint8_t *rnd; /* TLSFLIGHT_HELLO_RND fresh random bytes for hellos */
};

size_t probekind_count(void);
const struct probekind *probekind_get(size_t i); /* NULL past the end */

/* Kind i's bytes into out (cap >= PROBEKIND_BYTES_MAX); the length (0 for the silent
   prober), or (size_t)-1 when the kind needs what c lacks (a key) or sni is too long. */
size_t probekind_bytes(size_t i, const struct probekind_ctx *c, uint8_t *out, size_t cap);

/*
 * A FakeTLS ClientHello: the probe hello (tlsflight_client_hello shape) for sni with its
 * random set to HMAC-SHA256(key, hello with a zero random) with ts XORed into the last 4
 * bytes (brief 4.1), as a Telegram client signs it. rnd as for tlsflight_client_hello.
 * Returns the length, or 0 (sni too long, cap short, no HMAC).
 */
size_t probekind_signed_hello(uint8_t *out, size_t cap, const char *sni, const uint8_t key[16],
                              int64_t ts, const uint8_t *rnd);

/*
 * Does answer a[0..n) (the first records a proxy sent to hello[0..hl)) carry the server
 * random a genuine FakeTLS proxy with key computes: HMAC(key, client random || the
 * ServerHello, CCS and ApplicationData records with the random zeroed) (brief 4.7)? What
 * clients check; false for a fronted (the site's) answer or a short one.
 */
bool probekind_answer_genuine(const uint8_t *hello, size_t hl, const uint8_t *a, size_t n,
                              const uint8_t key[16]);

/* ---- comparing two answers ---- */

enum probekind_end { PROBEKIND_OPEN, PROBEKIND_FIN, PROBEKIND_RST };

struct probekind_obs {
    const uint8_t *bytes; /* the answer as kept */
    size_t n;             /* bytes kept */
    size_t total;         /* bytes received (>= n) */
    enum probekind_end end;
    long end_ms;   /* the FIN / RST, after the probe's last byte left; the wait when open */
    long first_ms; /* the first byte, after the probe's last byte left; -1 = none */
    bool reset_after_eof;
};

enum probekind_tclass { PROBEKIND_T_NOW, PROBEKIND_T_LATER, PROBEKIND_T_OPEN };

#define PROBEKIND_DIFF_BYTES 0x01u
#define PROBEKIND_DIFF_END   0x02u /* FIN / RST / open */
#define PROBEKIND_DIFF_TIME  0x04u /* when it ended */
#define PROBEKIND_DIFF_FIRST 0x08u /* when the first byte came */
#define PROBEKIND_DIFF_RESET 0x10u /* a reset after the FIN on one side only */

/* The timing class of ms after the probe's last byte: at once below now_ms, else later.
   (-1: none.) */
enum probekind_tclass probekind_tclass(long ms, long now_ms);
const char *probekind_end_name(enum probekind_end e);

/* The normalised answer: "-" (nothing), TLS records "16/122 14/1 17/~2810 15/2:0228" (types,
   lengths, "~" for an encrypted length, alerts' bytes), an HTTP answer's status line,
   header names and body length, else "N bytes XXXXXXXX..." (hex). Into out (cap > 0). */
const char *probekind_shape(const uint8_t *b, size_t n, bool tls, char *out, size_t cap);

/*
 * PROBEKIND_DIFF_* bits of what tells site and proxy apart. now_ms: the bound of "at once"
 * (the caller adds the round trips it measured); two times match when both are at once or
 * within max(1000 ms, 25%) of each other (jitter explains that much, not a timer's worth).
 */
unsigned probekind_compare(const struct probekind *k, const struct probekind_obs *site,
                           const struct probekind_obs *proxy, long now_ms);

#endif
