/*
 * faketls: the TLS 1.3 look-alike wrapper used with ee secrets (brief section 4).
 *
 * Pieces, in connection order (brief 4.1):
 *   faketls_peek()          S0: do the first bytes start a ClientHello record of an
 *                           acceptable size (16 03 01, 512 <= LL <= 16384)?
 *   faketls_parse_hello()   S1: structural parse of the whole record (every length checked
 *                           against its parent): random, session id, cipher suites, SNI.
 *   faketls_validate()      S2: SNI policy first as an index (only keys the SNI policy
 *                           admits are tried: one HMAC for a hello naming one key's domain,
 *                           none for a foreign SNI), then digest (HMAC-SHA256, constant-time
 *                           compare, every admitted key evaluated, at most
 *                           FAKETLS_DIGEST_BUDGET bytes hashed per hello), timestamp
 *                           window, TLS 1.3 suite. The caller then does the replay check on
 *                           hello.random[0..16) (antireplay.h) before answering.
 *   faketls_server_hello()  S3: ServerHello + ChangeCipherSpec + ApplicationData with the
 *                           server random = HMAC(K, client_random || answer-with-zero-random)
 *                           (brief 4.7). Randomness (X25519 key, filler) is injectable.
 *   faketls_reader_*()      S4/S5: client->proxy records after the handshake, incremental
 *                           over caller buffers: split headers, several records per read,
 *                           CCS ignored anywhere, empty records skipped, alert = close,
 *                           any other type, bad version or oversize = error.
 *   faketls_record_header(), faketls_wrap(): proxy->client ApplicationData records of at
 *                           most 16384 payload bytes (brief 4.9).
 *
 * No I/O and no allocation (OpenSSL's own HMAC context aside); parsers only read inside
 * the buffers they are given. Thread-safety: reentrant; a reader belongs to one connection.
 * Deviation (see docs/proxy-protocol-notes.md): the reader rejects records longer than
 * max_len, default FAKETLS_RECORD_MAX_IN = 16640 (RFC 8446's ciphertext limit, above iOS's
 * 16408), instead of accepting any 16-bit length; pass 65535 for the brief's behaviour.
 */
#ifndef TGPROXY_FAKETLS_H
#define TGPROXY_FAKETLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FAKETLS_HDR_LEN        5
#define FAKETLS_HELLO_MIN      512 /* ClientHello record payload bounds (brief 4.1) */
#define FAKETLS_HELLO_MAX      16384
#define FAKETLS_RANDOM_OFF     11 /* client/server random offset in the record */
#define FAKETLS_REPLAY_KEY_LEN 16 /* replay key: random[0..16) (brief 5.1) */
#define FAKETLS_MAX_SNI        8  /* host names kept from one server_name extension */
/* Bytes of HMAC input one hello may cost: every key for hellos up to 4 KiB with 256 keys
   (real clients send 0.5-2 KB), 63 keys for a 16 KiB one. */
#define FAKETLS_DIGEST_BUDGET  ((size_t)1 << 20)
#define FAKETLS_RECORD_MAX_OUT 16384 /* proxy->client payload per record (brief 4.9) */
#define FAKETLS_RECORD_MAX_IN  16640 /* default client->proxy record limit */
#define FAKETLS_APPDATA_MIN    2500  /* default filler length range [min, max) (4.7) */
#define FAKETLS_APPDATA_MAX    4700
/* Largest ServerHello answer: record of 90 + 32, CCS, ApplicationData header + 16384. */
#define FAKETLS_SERVER_HELLO_MAX (5 + 90 + 32 + 6 + 5 + 16384)

enum faketls_status {
    FAKETLS_OK = 0,
    FAKETLS_NEED_MORE, /* a prefix of something acceptable: read more */
    FAKETLS_BAD,       /* not acceptable: mask (before the ServerHello) */
};

struct faketls_name {
    size_t off; /* offset of the host name in the record */
    size_t len;
};

struct faketls_hello {
    const uint8_t *rec; /* borrowed: the record (header included) */
    size_t len;         /* 5 + LL */
    uint8_t random[32]; /* as received (digest with the timestamp XORed in) */
    uint8_t session_id[32];
    uint8_t session_id_len; /* 0..32 */
    uint16_t cipher;        /* first of 1301/1302/1303 offered; 0 if none */
    uint16_t first_suite;   /* first non-GREASE suite offered (0 if none) */
    bool has_sni;           /* a server_name extension is present */
    size_t nsni;            /* host_name entries kept (<= FAKETLS_MAX_SNI) */
    struct faketls_name sni[FAKETLS_MAX_SNI];
};

/* One key the proxy accepts for FakeTLS (an ee secret). */
struct faketls_key {
    uint8_t key[16];
    const char *domain; /* borrowed; compared ASCII case-insensitively with the SNI */
    size_t domain_len;
    uint32_t domain_hash; /* faketls_domain_hash(domain), or 0: then bytes only (slower) */
    uint32_t id;          /* the caller's name for the key (engine/keyscan.h hints); unused here */
};

/* Case-insensitive hash of a domain (never 0): set it in faketls_key.domain_hash so a hello
   is matched against many keys' domains with one compare each. */
uint32_t faketls_domain_hash(const void *domain, size_t len);

struct faketls_policy {
    int64_t now;              /* wall-clock seconds (injectable for tests) */
    uint32_t past_s;          /* accept ts >= now - past_s (brief: 120) */
    uint32_t future_s;        /* accept ts <= now + future_s (brief: 120) */
    bool accept_sni_mismatch; /* default false: SNI present but no name equals the domain */
    bool reject_missing_sni;  /* default false: a hello without SNI is accepted */
    /* When the SNI leaves many candidates (none without SNI: every key; or many secrets
       sharing its domain), these let the caller bound what a hello costs
       (engine/keyscan.h): */
    size_t hint;    /* 1 + the index of a key to try first (the key this client's address
                       last authenticated with); 0 = none */
    bool hint_only; /* hash that key alone (none without a hint), not every candidate */
};

enum faketls_verdict {
    FAKETLS_ACCEPT = 0,
    FAKETLS_BAD_DIGEST, /* no key produces the digest */
    FAKETLS_BAD_TIME,   /* digest fine, timestamp outside the window (skew in the match) */
    FAKETLS_BAD_SNI,    /* digest and time fine, SNI policy refused */
    FAKETLS_BAD_CIPHER, /* no TLS 1.3 cipher suite offered */
    FAKETLS_INTERNAL,   /* OpenSSL failure */
};

struct faketls_match {
    size_t index;       /* key that matched (valid when matched) */
    uint32_t timestamp; /* LE32 of (random XOR digest)[28..32) (valid when matched) */
    int64_t skew;       /* timestamp - now (valid when matched) */
    bool matched;       /* a key produced the digest (ACCEPT, BAD_TIME, BAD_CIPHER) */
    size_t digests;     /* HMACs computed for this hello */
};

/* Static name of a verdict for debug logs ("accept", "bad-digest", ...). */
const char *faketls_verdict_name(enum faketls_verdict v);

/* S0. On FAKETLS_OK *record_len = 5 + LL. FAKETLS_BAD as soon as a byte disagrees. */
enum faketls_status faketls_peek(const uint8_t *buf, size_t len, size_t *record_len);

/*
 * S1. Parse the ClientHello record at the start of buf (bytes past the record are
 * ignored). NEED_MORE until the whole record is there; BAD with *why (static text) on any
 * structural error. out->rec points into buf.
 */
enum faketls_status faketls_parse_hello(const uint8_t *buf, size_t len, struct faketls_hello *out,
                                        const char **why);

/*
 * S2. Validate a parsed hello against keys[0..n). Only keys the SNI policy admits are
 * tried (a key whose domain the SNI does not name is skipped unless accept_sni_mismatch;
 * every key is admitted for a hello without SNI unless reject_missing_sni), in order, at
 * most max(1, FAKETLS_DIGEST_BUDGET / h->len) of them. pol->hint's key, when the policy
 * admits it, is tried first and, when it accepts, alone; pol->hint_only hashes nothing
 * else (no HMAC at all without an admitted hint: BAD_DIGEST). Verdicts: ACCEPT; BAD_TIME or
 * BAD_CIPHER for a key that produced the digest; BAD_SNI when n > 0 and the policy admits
 * no key (no HMAC computed, out->matched false); else BAD_DIGEST.
 */
enum faketls_verdict faketls_validate(const struct faketls_hello *h, const struct faketls_key *keys,
                                      size_t n, const struct faketls_policy *pol,
                                      struct faketls_match *out);
/* How many of keys[0..n) the SNI policy admits for h (each would cost faketls_validate one
   HMAC over the hello), for a caller that bounds the cost: no HMAC, a hash and length
   compare per key with a domain_hash (a hash collision counts one key too many). */
size_t faketls_candidates(const struct faketls_hello *h, const struct faketls_key *keys, size_t n,
                          const struct faketls_policy *pol);

struct faketls_answer {
    uint16_t cipher;           /* usually hello.cipher */
    const uint8_t *x25519_pub; /* 32 bytes; NULL = a fresh random one (keyshare_random) */
    const uint8_t *appdata;    /* filler bytes; NULL = random bytes */
    size_t appdata_len;        /* 0 = uniform random in [2500, 4700); max 16384 */
    bool versions_first;       /* extension order; default (false) key_share first */
};

/*
 * S3. Build the three-record answer for hello h and key into out (cap bytes).
 * Returns the length, -ENOSPC (cap short), -EINVAL (bad params) or -EIO.
 */
int faketls_server_hello(const struct faketls_hello *h, const uint8_t key[16],
                         const struct faketls_answer *a, uint8_t *out, size_t cap);

/* ---- client -> proxy records after the handshake ---- */

enum faketls_rec {
    FAKETLS_REC_DATA = 0,  /* a piece of ApplicationData payload is returned */
    FAKETLS_REC_NEED_MORE, /* buf consumed entirely; nothing more to return */
    FAKETLS_REC_CLOSE,     /* the client sent an alert: treat as closing */
    FAKETLS_REC_BAD,       /* protocol error: close (faketls_reader_why says what) */
};

/* 10 bytes: one sits in every relayed FakeTLS connection (issue 30). The current record's
   type is hdr[0] (the header stays until the next record's begins); the limit and what is
   left of a record fit 16 bits, as the wire's length field does. */
struct faketls_reader {
    uint16_t remaining; /* payload bytes left in the current record */
    uint16_t max_len;   /* record payload limit (at most 65535) */
    uint8_t hdr[FAKETLS_HDR_LEN];
    uint8_t hdr_have : 3; /* header bytes collected so far */
    uint8_t state : 2;    /* internal */
    uint8_t why : 3;      /* internal: the reason once CLOSE/BAD (faketls_reader_why) */
};

/* max_len 0 = FAKETLS_RECORD_MAX_IN. */
void faketls_reader_init(struct faketls_reader *r, size_t max_len);
/* Why the reader stopped (a static string) once it returned CLOSE or BAD, else NULL. */
const char *faketls_reader_why(const struct faketls_reader *r);

/*
 * Walk buf[*pos..len): on FAKETLS_REC_DATA, buf[*off .. *off + *n) is payload (n > 0) and
 * *pos is past it; call again for more. NEED_MORE when buf is used up. CLOSE and BAD are
 * sticky. Never reads outside buf[0..len).
 */
enum faketls_rec faketls_reader_next(struct faketls_reader *r, const uint8_t *buf, size_t len,
                                     size_t *pos, size_t *off, size_t *n);

/*
 * Convenience: strip all record framing from buf[0..len) in place, moving payload bytes to
 * the front; *out_len = payload bytes. Returns NEED_MORE (all consumed, normal case),
 * CLOSE or BAD (payload before the event is still in buf[0..*out_len)).
 */
enum faketls_rec faketls_reader_strip(struct faketls_reader *r, uint8_t *buf, size_t len,
                                      size_t *out_len);

/* ---- proxy -> client records ---- */

/* Write 17 03 03 BE16(n) into hdr; n must be <= FAKETLS_RECORD_MAX_OUT. */
void faketls_record_header(uint8_t hdr[FAKETLS_HDR_LEN], size_t n);
/* Bytes needed to wrap n payload bytes (records of at most FAKETLS_RECORD_MAX_OUT). */
size_t faketls_wrapped_len(size_t n);
/* Wrap in[0..n) into out; returns faketls_wrapped_len(n), or (size_t)-1 if cap is short.
   in and out must not overlap. n = 0 writes nothing. */
size_t faketls_wrap(const uint8_t *in, size_t n, uint8_t *out, size_t cap);

#endif
