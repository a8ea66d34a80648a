/*
 * obfs2: Telegram's "obfuscated2" transport obfuscation (brief sections 2 and 3).
 *
 * Client leg: obfs2_parse_client() authenticates the client's 64-byte init header against
 * a list of candidate keys (each with the protocol tags its connection kind allows, brief
 * 2.4) and leaves the caller's decrypt stream positioned right after the header (keystream
 * offset 64), as the relay needs it. The keys for the proxy->client direction come back in
 * the result; start that stream at offset 0 with crypto_ctr_init().
 *
 * DC leg: obfs2_dc_header() builds the proxy's own header towards the DC (no secret, keys
 * are raw header bytes, bytes 0..7 obey the forbidden-prefix rules as sent, tag and signed
 * DC index copied from the client per brief section 9 #2) and sets up both DC-leg streams.
 * With fast mode the header's key material is chosen so the DC encrypts its replies with
 * exactly the keystream the client expects: DC->client bytes are then copied without
 * decrypting or re-encrypting (brief 3.3, "fast mode"); the DC->proxy stream is not needed.
 *
 * Everything here is pure computation over caller buffers: no I/O, no allocation besides
 * the OpenSSL contexts inside the caller's struct crypto_ctr objects.
 * Thread-safety: reentrant; each connection owns its crypto_ctr objects.
 */
#ifndef TGPROXY_OBFS2_H
#define TGPROXY_OBFS2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/wire/crypto.h"
#include "proxy/wire/secret.h"

#define OBFS2_HEADER_LEN     64
#define OBFS2_REPLAY_KEY_LEN 48 /* header bytes 8..56 (brief 2.7) */

/* Protocol tags as LE32 of header bytes 56..59. */
#define OBFS2_TAG_ABRIDGED     0xefefefefu
#define OBFS2_TAG_INTERMEDIATE 0xeeeeeeeeu
#define OBFS2_TAG_PADDED       0xddddddddu

/* Bit set of tags a candidate key accepts. */
enum {
    OBFS2_ALLOW_ABRIDGED = 1u << 0,
    OBFS2_ALLOW_INTERMEDIATE = 1u << 1,
    OBFS2_ALLOW_PADDED = 1u << 2,
};

enum obfs2_status {
    OBFS2_OK = 0,    /* authenticated; result filled */
    OBFS2_NEED_MORE, /* fewer than 64 bytes so far */
    OBFS2_BAD,       /* no candidate key yields an allowed tag: authentication failure */
    OBFS2_ERROR,     /* OpenSSL or allocation failure (not the client's fault) */
};

/* Both directions of one leg, from the proxy's point of view. */
struct obfs2_keys {
    uint8_t dec_key[32], dec_iv[16]; /* bytes arriving at the proxy on this leg */
    uint8_t enc_key[32], enc_iv[16]; /* bytes the proxy sends on this leg */
};

struct obfs2_candidate {
    uint8_t key[16]; /* the secret's K */
    unsigned tags;   /* OBFS2_ALLOW_* */
};

struct obfs2_client {
    size_t match;           /* index of the candidate that authenticated */
    uint32_t tag;           /* OBFS2_TAG_* */
    int16_t dc;             /* signed DC index (negative = media) */
    struct obfs2_keys keys; /* dec = client->proxy, enc = proxy->client */
    uint8_t replay_key[OBFS2_REPLAY_KEY_LEN];
};

typedef int (*obfs2_random_fn)(void *user, uint8_t *buf, size_t n); /* 0 or -errno */

/* Tags a secret kind allows on a plain TCP connection or inside FakeTLS (brief 2.4):
   plain: classic -> ef/ee, dd -> dd, ee -> none; TLS: ee -> dd, others -> none. */
unsigned obfs2_tags_for(enum secret_kind kind, bool in_tls);

/* Client-leg key schedule with secret (brief 2.2) for header w. 0 or -EIO. */
int obfs2_client_keys(const uint8_t w[64], const uint8_t secret[16], struct obfs2_keys *out);

/*
 * Authenticate the client's header: the first 64 bytes of buf (len may be less: NEED_MORE).
 * Candidates are tried in order; the first whose decryption yields a tag it allows wins.
 * dec   caller's stream (zeroed or reusable); on OBFS2_OK it decrypts client bytes from
 *       offset 64 on. On other results its state is unspecified (re-init before use).
 * Returns an obfs2_status; *out is filled on OBFS2_OK only.
 */
enum obfs2_status obfs2_parse_client(const uint8_t *buf, size_t len,
                                     const struct obfs2_candidate *cands, size_t ncands,
                                     struct crypto_ctr *dec, struct obfs2_client *out);

/* Whether the 8 clear bytes that start a header may be sent (brief 2.1 forbidden prefixes,
   including "OPTI" per section 9 #27). */
bool obfs2_prefix_ok(const uint8_t first8[8]);
/* Whether b[0..n) (any n, even < 8) may still start a header a client sends in the clear:
   false once the bytes already show a forbidden prefix (brief 2.1). Every client applies
   the rule outside FakeTLS, so the engine fronts such bytes at once (an HTTP request, a
   TLS record) instead of waiting for 64 bytes. Pure. */
bool obfs2_prefix_possible(const uint8_t *b, size_t n);

/*
 * Build the proxy's header towards the DC (brief 3.2).
 *
 * tag, dc     the client's values, copied unchanged.
 * fast        NULL, or the client leg's keys to enable fast mode (H[8..56) =
 *             rev(enc_key || enc_iv) of the client leg, so DC replies need no re-encryption).
 * rnd, user   randomness source (NULL = crypto_random); drawn 64 bytes at a time until the
 *             clear prefix passes obfs2_prefix_ok() (at most 1000 draws, then -EIO).
 * wire        out: the 64 bytes to send to the DC.
 * keys        out (may be NULL): enc = proxy->DC, dec = DC->proxy.
 * enc, dec    caller's streams; enc is left at offset 64 (ready for relayed client bytes),
 *             dec at offset 0. dec may be NULL (fast mode does not need it).
 * Returns 0, -EIO (RNG/OpenSSL) or -ENOMEM.
 */
int obfs2_dc_header(uint32_t tag, int16_t dc, const struct obfs2_keys *fast, obfs2_random_fn rnd,
                    void *user, uint8_t wire[64], struct obfs2_keys *keys, struct crypto_ctr *enc,
                    struct crypto_ctr *dec);

/* Name of a tag for logs: "abridged", "intermediate", "padded-intermediate" or "unknown". */
const char *obfs2_tag_name(uint32_t tag);

#endif
