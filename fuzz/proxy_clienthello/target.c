/*
 * Fuzz target: FakeTLS ClientHello parser and validator (proxy/faketls).
 *
 * Each input is tried as is, then with its digest fixed up for a known key and "now" (so
 * the fuzzer reaches the time / SNI / cipher checks and the ServerHello builder, which an
 * HMAC would otherwise wall off). Invariants are checked with abort(): parse results stay
 * inside the record, a fixed-up hello never fails on the digest or the time (it is refused
 * on its SNI without any HMAC only when it names other hosts), never costs more than one
 * HMAC for the one key, and the answer has the length the brief's layout gives.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/wire/crypto.h"
#include "proxy/wire/faketls.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t key[16] = {0xb0, 0x0e, 0xbb, 0x67, 0x8b, 0xf4, 0xd4, 0x54,
                                0xa4, 0xae, 0x05, 0x39, 0x27, 0xce, 0xb0, 0x6e};
#define NOW 1700000000

static void check_parse(const struct faketls_hello *h, size_t size)
{
    if (h->len > size || h->len < FAKETLS_HDR_LEN + FAKETLS_HELLO_MIN || h->session_id_len > 32 ||
        h->nsni > FAKETLS_MAX_SNI)
        abort();
    for (size_t i = 0; i < h->nsni; i++)
        if (h->sni[i].off + h->sni[i].len > h->len || h->sni[i].len == 0)
            abort();
    if (h->cipher && (h->cipher < 0x1301 || h->cipher > 0x1303))
        abort();
}

/* Write the digest this key expects, with timestamp NOW, into a copy of the record. */
static void fix_digest(uint8_t *rec, size_t len)
{
    uint8_t m[32];
    memset(rec + FAKETLS_RANDOM_OFF, 0, 32);
    struct crypto_part part = {rec, len};
    if (crypto_hmac_sha256(key, 16, &part, 1, m) != 0)
        abort();
    uint32_t ts = NOW;
    for (int i = 0; i < 4; i++)
        m[28 + i] ^= (uint8_t)(ts >> (8 * i));
    memcpy(rec + FAKETLS_RANDOM_OFF, m, 32);
}

static void answer(const struct faketls_hello *h)
{
    static uint8_t out[FAKETLS_SERVER_HELLO_MAX];
    static const uint8_t pub[32] = {9};
    static const uint8_t filler[64];
    struct faketls_answer a = {
        .cipher = h->cipher, .x25519_pub = pub, .appdata = filler, .appdata_len = sizeof filler};
    int n = faketls_server_hello(h, key, &a, out, sizeof out);
    if (n != (int)(106 + h->session_id_len + sizeof filler))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct faketls_hello h;
    struct faketls_key k = {.domain = "example.com", .domain_len = 11};
    struct faketls_policy pol = {.now = NOW, .past_s = 120, .future_s = 120};
    struct faketls_match m;
    size_t rec_len = 0;
    memcpy(k.key, key, 16);
    enum faketls_status peek = faketls_peek(data, size, &rec_len);
    enum faketls_status st = faketls_parse_hello(data, size, &h, NULL);
    if (st == FAKETLS_NEED_MORE &&
        !(peek == FAKETLS_NEED_MORE || (peek == FAKETLS_OK && size < rec_len)))
        abort();
    if (st != FAKETLS_OK)
        return 0;
    if (peek != FAKETLS_OK || h.len != rec_len)
        abort();
    check_parse(&h, size);
    faketls_validate(&h, &k, 1, &pol, &m);

    uint8_t *copy = malloc(h.len);
    if (!copy)
        return 0;
    memcpy(copy, data, h.len);
    fix_digest(copy, h.len);
    if (faketls_parse_hello(copy, h.len, &h, NULL) != FAKETLS_OK)
        abort(); /* the random is not structural */
    enum faketls_verdict v = faketls_validate(&h, &k, 1, &pol, &m);
    if (m.digests > 1)
        abort();
    if (v == FAKETLS_BAD_SNI ? m.matched || m.digests != 0 || !h.has_sni
                             : v == FAKETLS_BAD_DIGEST || v == FAKETLS_BAD_TIME ||
                                   v == FAKETLS_INTERNAL || !m.matched || m.timestamp != NOW)
        abort();
    if (v == FAKETLS_ACCEPT)
        answer(&h);
    /* the same key as a hint (engine/keyscan.h): the same verdict, never a second HMAC;
       hint_only without a hint hashes nothing */
    struct faketls_match mh;
    pol.hint = 1;
    if (faketls_validate(&h, &k, 1, &pol, &mh) != v || mh.digests != m.digests ||
        faketls_candidates(&h, &k, 1, &pol) != m.digests)
        abort();
    pol.hint = 0;
    pol.hint_only = true;
    v = faketls_validate(&h, &k, 1, &pol, &mh);
    if (mh.digests != 0 || mh.matched || (v != FAKETLS_BAD_DIGEST && v != FAKETLS_BAD_SNI))
        abort();
    free(copy);
    return 0;
}
