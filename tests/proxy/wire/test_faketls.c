/* Tests for proxy/faketls: every case of faketls.json and mtg's client hellos, truncation at
 * every length, structural corruption, the record reader and writer. */
#include "tgtest.h"

#include <errno.h>

#include "core/str.h"
#include "proxy/engine/antireplay.h"
#include "proxy/wire/crypto.h"
#include "proxy/wire/faketls.h"
#include "proxy/wire/obfs2.h"
#include "proxy_client.h"
#include "proxy_vectors.h"

static json_t *vec;
static uint8_t key_a[16];

static int setup(void **state)
{
    (void)state;
    vec = pv_load("vectors/faketls.json");
    size_t n;
    uint8_t *k = pv_hex(vec, "secret_hex", &n);
    memcpy(key_a, k, 16);
    free(k);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    json_decref(vec);
    return 0;
}

static void assert_hex_eq(const uint8_t *got, size_t got_n, json_t *v, const char *path)
{
    size_t n;
    uint8_t *want = pv_hex(v, path, &n);
    if (got_n != n || memcmp(got, want, n) != 0) {
        free(want);
        fail_msg("mismatch at %s (len %zu vs %zu)", path, got_n, n);
    }
    free(want);
}

static struct faketls_policy policy_at(int64_t now)
{
    return (struct faketls_policy){.now = now, .past_s = 120, .future_s = 120};
}

static struct faketls_key key_for(const uint8_t k[16], const char *domain)
{
    struct faketls_key fk = {.domain = domain,
                             .domain_len = strlen(domain),
                             .domain_hash = faketls_domain_hash(domain, strlen(domain))};
    memcpy(fk.key, k, 16);
    return fk;
}

static void test_valid_hello(void **state)
{
    (void)state;
    size_t n;
    uint8_t *hello = pv_hex(vec, "valid/hello_hex", &n);
    assert_int_equal(n, pv_int(vec, "valid/hello_len"));
    size_t rec_len;
    assert_int_equal(faketls_peek(hello, n, &rec_len), FAKETLS_OK);
    assert_int_equal(rec_len, n);
    struct faketls_hello h;
    const char *why = "x";
    assert_int_equal(faketls_parse_hello(hello, n, &h, &why), FAKETLS_OK);
    assert_null(why);
    assert_hex_eq(h.random, 32, vec, "valid/client_random_hex");
    assert_hex_eq(h.session_id, h.session_id_len, vec, "valid/session_id_hex");
    assert_int_equal(h.cipher, 0x1301);
    assert_int_equal(h.first_suite, 0x1301);
    assert_true(h.has_sni);
    assert_int_equal(h.nsni, 1);
    assert_int_equal(h.sni[0].len, strlen(pv_str(vec, "valid/sni/0")));
    assert_memory_equal(hello + h.sni[0].off, pv_str(vec, "valid/sni/0"), h.sni[0].len);
    assert_hex_eq(h.random, FAKETLS_REPLAY_KEY_LEN, vec, "valid/replay_key_first16_of_random_hex");
    /* intermediate values: HMAC over the zeroed record, XOR = zeros || LE ts */
    size_t zn;
    uint8_t *zeroed = pv_hex(vec, "valid/hello_with_zero_random_hex", &zn);
    uint8_t m[32];
    struct crypto_part part = {zeroed, zn};
    assert_int_equal(crypto_hmac_sha256(key_a, 16, &part, 1, m), 0);
    assert_hex_eq(m, 32, vec, "valid/hmac_of_zeroed_hex");
    free(zeroed);
    struct faketls_key k = key_for(key_a, pv_str(vec, "domain"));
    struct faketls_policy pol = policy_at(pv_int(vec, "now"));
    struct faketls_match match;
    assert_int_equal(faketls_validate(&h, &k, 1, &pol, &match), FAKETLS_ACCEPT);
    assert_int_equal(match.index, 0);
    assert_int_equal(match.timestamp, pv_int(vec, "valid/timestamp"));
    assert_int_equal(match.skew, 0);
    /* window edges: exactly +-120 s accepted, 121 s refused */
    pol.now = pv_int(vec, "now") + 120;
    assert_int_equal(faketls_validate(&h, &k, 1, &pol, &match), FAKETLS_ACCEPT);
    pol.now = pv_int(vec, "now") - 120;
    assert_int_equal(faketls_validate(&h, &k, 1, &pol, &match), FAKETLS_ACCEPT);
    pol.now = pv_int(vec, "now") + 121;
    assert_int_equal(faketls_validate(&h, &k, 1, &pol, &match), FAKETLS_BAD_TIME);
    assert_int_equal(match.skew, -121);
    pol.now = pv_int(vec, "now") - 121;
    assert_int_equal(faketls_validate(&h, &k, 1, &pol, &match), FAKETLS_BAD_TIME);
    free(hello);
}

/* Several keys: the matching one is found wherever it sits; the SNI picks among keys that
 * share K but differ in domain; the domain compare ignores ASCII case. */
static void test_multi_key(void **state)
{
    (void)state;
    size_t n;
    uint8_t *hello = pv_hex(vec, "valid/hello_hex", &n);
    uint8_t *kb = pv_hex(vec, "negatives/0/built_with_secret_hex", &n);
    struct faketls_hello h;
    assert_int_equal(faketls_parse_hello(hello, 517, &h, NULL), FAKETLS_OK);
    struct faketls_key keys[4] = {key_for(kb, "example.com"), key_for(key_a, "other.org"),
                                  key_for(key_a, "EXAMPLE.com"), key_for(kb, "x.org")};
    struct faketls_policy pol = policy_at(pv_int(vec, "now"));
    struct faketls_match m;
    assert_int_equal(faketls_validate(&h, keys, 4, &pol, &m), FAKETLS_ACCEPT);
    assert_int_equal(m.index, 2);
    /* keys[1] signed it but names another domain: never tried, so the digest fails */
    assert_int_equal(faketls_validate(&h, keys, 2, &pol, &m), FAKETLS_BAD_DIGEST);
    assert_false(m.matched);
    assert_int_equal(m.digests, 1);
    /* no key names the SNI: refused on it without any HMAC */
    assert_int_equal(faketls_validate(&h, keys + 1, 1, &pol, &m), FAKETLS_BAD_SNI);
    assert_false(m.matched);
    assert_int_equal(m.digests, 0);
    pol.accept_sni_mismatch = true;
    assert_int_equal(faketls_validate(&h, keys, 2, &pol, &m), FAKETLS_ACCEPT);
    assert_int_equal(faketls_validate(&h, keys, 1, &pol, &m), FAKETLS_BAD_DIGEST);
    assert_int_equal(faketls_validate(&h, keys, 0, &pol, &m), FAKETLS_BAD_DIGEST);
    assert_string_equal(faketls_verdict_name(FAKETLS_BAD_SNI), "sni-mismatch");
    free(hello);
    free(kb);
}

static void test_hello_segments_and_truncation(void **state)
{
    (void)state;
    size_t n, n0, n1;
    uint8_t *hello = pv_hex(vec, "valid/hello_hex", &n);
    uint8_t *s0 = pv_hex(vec, "valid/hello_tcp_segments_hex/0", &n0);
    uint8_t *s1 = pv_hex(vec, "valid/hello_tcp_segments_hex/1", &n1);
    assert_int_equal(n0 + n1, n);
    struct faketls_hello h;
    const char *why;
    assert_int_equal(faketls_parse_hello(s0, n0, &h, &why), FAKETLS_NEED_MORE);
    uint8_t *joined = malloc(n + 100);
    memcpy(joined, s0, n0);
    memcpy(joined + n0, s1, n1);
    memset(joined + n, 0x17, 100); /* bytes after the record are not part of it */
    assert_int_equal(faketls_parse_hello(joined, n + 100, &h, &why), FAKETLS_OK);
    assert_int_equal(h.len, n);
    /* every strict prefix asks for more and never reads past it (ASan checks the copy) */
    for (size_t len = 0; len < n; len++) {
        uint8_t *pre = malloc(len ? len : 1);
        memcpy(pre, hello, len);
        assert_int_equal(faketls_parse_hello(pre, len, &h, &why), FAKETLS_NEED_MORE);
        free(pre);
    }
    free(joined);
    free(s0);
    free(s1);
    free(hello);
}

/* Shrinking the record (and handshake) length at every value cuts the structure short:
 * each must be refused (BAD, or bad digest), never accepted or crash. */
static void test_hello_structural_corruption(void **state)
{
    (void)state;
    size_t n;
    uint8_t *hello = pv_hex(vec, "valid/hello_hex", &n);
    struct faketls_key k = key_for(key_a, "example.com");
    struct faketls_policy pol = policy_at(pv_int(vec, "now"));
    for (size_t ll = 0; ll < n - 5; ll++) {
        uint8_t *c = malloc(5 + ll + 1);
        memcpy(c, hello, 5 + ll);
        c[3] = (uint8_t)(ll >> 8);
        c[4] = (uint8_t)ll;
        size_t hs = ll >= 4 ? ll - 4 : 0;
        if (5 + ll > 8) {
            c[6] = (uint8_t)(hs >> 16);
            c[7] = (uint8_t)(hs >> 8);
            c[8] = (uint8_t)hs;
        }
        struct faketls_hello h;
        const char *why = NULL;
        enum faketls_status st = faketls_parse_hello(c, 5 + ll, &h, &why);
        if (st == FAKETLS_OK) {
            struct faketls_match m;
            assert_int_not_equal(faketls_validate(&h, &k, 1, &pol, &m), FAKETLS_ACCEPT);
        } else {
            assert_int_equal(st, FAKETLS_BAD);
            assert_non_null(why);
        }
        free(c);
    }
    /* mismatched handshake length, wrong handshake type, session id > 32 */
    uint8_t *c = malloc(n);
    struct faketls_hello h;
    const char *why;
    memcpy(c, hello, n);
    c[8] ^= 1;
    assert_int_equal(faketls_parse_hello(c, n, &h, &why), FAKETLS_BAD);
    memcpy(c, hello, n);
    c[5] = 0x02;
    assert_int_equal(faketls_parse_hello(c, n, &h, &why), FAKETLS_BAD);
    memcpy(c, hello, n);
    c[43] = 33;
    assert_int_equal(faketls_parse_hello(c, n, &h, &why), FAKETLS_BAD);
    assert_non_null(strstr(why, "session id"));
    free(c);
    free(hello);
}

static void test_peek(void **state)
{
    (void)state;
    size_t n, rl;
    uint8_t *probe = pv_hex(vec, "negatives/7/first_bytes_hex", &n);
    assert_string_equal(pv_str(vec, "negatives/7/name"), "plain_http_probe");
    assert_int_equal(faketls_peek(probe, n, &rl), FAKETLS_BAD);
    assert_int_equal(faketls_peek(probe, 1, &rl), FAKETLS_BAD);
    free(probe);
    const uint8_t ok[5] = {0x16, 0x03, 0x01, 0x02, 0x00};
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(faketls_peek(ok, i, &rl), FAKETLS_NEED_MORE);
    assert_int_equal(faketls_peek(ok, 5, &rl), FAKETLS_OK);
    assert_int_equal(rl, 517);
    uint8_t b[5] = {0x16, 0x03, 0x01, 0x01, 0xff}; /* 511 */
    assert_int_equal(faketls_peek(b, 5, &rl), FAKETLS_BAD);
    b[3] = 0x40, b[4] = 0x00; /* 16384 */
    assert_int_equal(faketls_peek(b, 5, &rl), FAKETLS_OK);
    b[4] = 0x01; /* 16385 */
    assert_int_equal(faketls_peek(b, 5, &rl), FAKETLS_BAD);
    b[2] = 0x03; /* 16 03 03: not a ClientHello record version */
    assert_int_equal(faketls_peek(b, 3, &rl), FAKETLS_BAD);
}

static void test_negatives(void **state)
{
    (void)state;
    json_t *negs = pv_need(vec, "negatives");
    size_t i;
    json_t *c;
    int checked = 0;
    struct antireplay *ar = antireplay_new(1024, 300);
    assert_non_null(ar);
    json_array_foreach(negs, i, c)
    {
        const char *name = pv_str(c, "name");
        if (!pv_get(c, "hello_hex"))
            continue; /* the HTTP probe: test_peek */
        size_t n, kn;
        uint8_t *hello = pv_hex(c, "hello_hex", &n);
        uint8_t *k = pv_hex(c, "validate_with_secret_hex", &kn);
        struct faketls_key key = key_for(k, pv_str(vec, "domain"));
        struct faketls_policy pol = policy_at(pv_int(c, "now"));
        struct faketls_hello h;
        struct faketls_match m;
        assert_int_equal(faketls_parse_hello(hello, n, &h, NULL), FAKETLS_OK);
        enum faketls_verdict v = faketls_validate(&h, &key, 1, &pol, &m);
        const char *reason = pv_str(c, "reason");
        if (!strcmp(reason, "hmac_mismatch")) {
            assert_int_equal(v, FAKETLS_BAD_DIGEST);
        } else if (!strcmp(reason, "timestamp_out_of_window")) {
            assert_int_equal(v, FAKETLS_BAD_TIME);
            assert_int_equal(m.timestamp, pv_int(c, "timestamp_in_hello"));
        } else if (!strcmp(reason, "sni_mismatch")) {
            assert_int_equal(v, FAKETLS_BAD_SNI);
        } else if (!strcmp(reason, "sni_absent")) {
            assert_int_equal(v, FAKETLS_ACCEPT);
            assert_false(h.has_sni);
        } else if (!strcmp(reason, "replay")) {
            assert_int_equal(v, FAKETLS_ACCEPT);
            uint64_t t = (uint64_t)pv_int(c, "now");
            assert_false(antireplay_add(ar, ANTIREPLAY_TLS, h.random, 16, t - 5));
            assert_true(antireplay_seen(ar, ANTIREPLAY_TLS, h.random, 16, t));
            assert_true(antireplay_add(ar, ANTIREPLAY_TLS, h.random, 16, t));
        } else {
            fail_msg("negative %s has unknown reason %s", name, reason);
        }
        checked++;
        free(hello);
        free(k);
    }
    assert_int_equal(checked, 7);
    antireplay_free(ar);
}

static void test_server_response(void **state)
{
    (void)state;
    size_t n, pn, an, sn;
    uint8_t *hello = pv_hex(vec, "valid/hello_hex", &n);
    uint8_t *pub = pv_hex(vec, "server_response/server_x25519_public_hex", &pn);
    uint8_t *scalar = pv_hex(vec, "server_response/server_x25519_scalar_hex", &sn);
    uint8_t *app = pv_hex(vec, "server_response/appdata_hex", &an);
    assert_int_equal(an, pv_int(vec, "server_response/appdata_len"));
    uint8_t derived[32];
    assert_int_equal(crypto_x25519_public(scalar, derived), 0);
    assert_memory_equal(derived, pub, 32);
    free(scalar);
    scalar = pv_hex(vec, "valid/client_x25519_scalar_hex", &sn);
    assert_int_equal(crypto_x25519_public(scalar, derived), 0);
    assert_hex_eq(derived, 32, vec, "valid/client_x25519_public_hex");
    struct faketls_hello h;
    assert_int_equal(faketls_parse_hello(hello, n, &h, NULL), FAKETLS_OK);
    struct faketls_answer a = {
        .cipher = h.cipher, .x25519_pub = pub, .appdata = app, .appdata_len = an};
    uint8_t out[FAKETLS_SERVER_HELLO_MAX];
    int len = faketls_server_hello(&h, key_a, &a, out, sizeof out);
    assert_true(len > 0);
    assert_hex_eq(out, (size_t)len, vec, "server_response/response_hex");
    assert_hex_eq(out + 11, 32, vec, "server_response/server_random_hex");
    assert_int_equal(out[127], 0x14);
    assert_int_equal(faketls_server_hello(&h, key_a, &a, out, (size_t)len - 1), -ENOSPC);
    /* versions-first order: same length, extensions swapped */
    a.versions_first = true;
    assert_int_equal(faketls_server_hello(&h, key_a, &a, out, sizeof out), len);
    assert_memory_equal(out + 81, "\x00\x2b\x00\x02\x03\x04\x00\x33", 8);
    /* random filler: length in [2500, 4700), record header agrees */
    struct faketls_answer r = {.cipher = 0x1301};
    for (int i = 0; i < 20; i++) {
        len = faketls_server_hello(&h, key_a, &r, out, sizeof out);
        assert_true(len >= 138 + 2500 && len < 138 + 4700);
        assert_int_equal((out[136] << 8 | out[137]) + 138, len);
    }
    r.appdata_len = FAKETLS_RECORD_MAX_OUT + 1;
    assert_int_equal(faketls_server_hello(&h, key_a, &r, out, sizeof out), -EINVAL);
    free(hello);
    free(pub);
    free(scalar);
    free(app);
}

/* Feed bytes through a reader in the given chunks; collect payload. */
static enum faketls_rec feed(struct faketls_reader *r, const uint8_t *b, size_t n,
                             const size_t *chunks, size_t nchunks, uint8_t *out, size_t *out_n)
{
    enum faketls_rec st = FAKETLS_REC_NEED_MORE;
    size_t at = 0;
    *out_n = 0;
    for (size_t i = 0; at < n; i++) {
        size_t c = nchunks ? chunks[i % nchunks] : n;
        if (c > n - at)
            c = n - at;
        uint8_t *piece = malloc(c);
        memcpy(piece, b + at, c);
        size_t got;
        st = faketls_reader_strip(r, piece, c, &got);
        memcpy(out + *out_n, piece, got);
        *out_n += got;
        free(piece);
        at += c;
        if (st != FAKETLS_REC_NEED_MORE)
            break;
    }
    return st;
}

static void check_flight(const char *path, const size_t *chunks, size_t nchunks)
{
    size_t n, sn;
    uint8_t *b = pv_hex(vec, path, &n);
    uint8_t *stream = pv_hex(vec, "first_client_flight/record_payload_stream_hex", &sn);
    uint8_t *out = malloc(n);
    struct faketls_reader r;
    faketls_reader_init(&r, 0);
    size_t got;
    assert_int_equal(feed(&r, b, n, chunks, nchunks, out, &got), FAKETLS_REC_NEED_MORE);
    assert_int_equal(got, sn);
    assert_memory_equal(out, stream, sn);
    /* the payload stream carries the obfs2 header of obfs2 case 1 and its first frame */
    struct obfs2_candidate cand = {.tags = obfs2_tags_for(SECRET_EE, true)};
    memcpy(cand.key, key_a, 16);
    struct crypto_ctr dec = {0};
    struct obfs2_client cl;
    assert_int_equal(obfs2_parse_client(out, got, &cand, 1, &dec, &cl), OBFS2_OK);
    assert_int_equal(cl.dc, pv_int(vec, "first_client_flight/expected_dc"));
    assert_int_equal(cl.tag, OBFS2_TAG_PADDED);
    assert_int_equal(crypto_ctr_apply(&dec, out + 64, got - 64), 0);
    assert_hex_eq(out + 64, got - 64, vec, "first_client_flight/expected_plain_after_header_hex");
    crypto_ctr_cleanup(&dec);
    free(out);
    free(stream);
    free(b);
}

static void test_client_flight(void **state)
{
    (void)state;
    static const size_t ones[] = {1}, odd[] = {3, 7, 2, 64, 1};
    check_flight("first_client_flight/bytes_hex", NULL, 0);
    check_flight("first_client_flight/bytes_hex", ones, 1);
    check_flight("first_client_flight/bytes_hex", odd, 5);
    check_flight("first_client_flight/alternative_two_records_hex", NULL, 0);
    check_flight("first_client_flight/alternative_two_records_hex", odd, 5);
    check_flight("first_client_flight/alternative_header_split_hex", NULL, 0);
    check_flight("first_client_flight/alternative_header_split_hex", ones, 1);
    /* the segments as captured */
    json_t *segs = pv_need(vec, "first_client_flight/tcp_segments_hex");
    size_t sn, i, total = 0, chunks[8];
    uint8_t *all = malloc(4096);
    json_t *s;
    json_array_foreach(segs, i, s)
    {
        uint8_t *p = pv_unhex(json_string_value(s), &sn);
        memcpy(all + total, p, sn);
        total += sn;
        chunks[i] = sn;
        free(p);
    }
    size_t n;
    uint8_t *whole = pv_hex(vec, "first_client_flight/bytes_hex", &n);
    assert_int_equal(total, n);
    assert_memory_equal(all, whole, n);
    free(whole);
    free(all);
    check_flight("first_client_flight/bytes_hex", chunks, i);
}

static void test_reader_errors(void **state)
{
    (void)state;
    struct faketls_reader r;
    size_t got;
    uint8_t b[64];
    /* alert closes, data before it is delivered */
    static const uint8_t alert[] = {0x17, 3, 3, 0, 2, 'h', 'i', 0x15, 3, 3, 0, 2, 1, 0};
    memcpy(b, alert, sizeof alert);
    faketls_reader_init(&r, 0);
    assert_null(faketls_reader_why(&r));
    assert_int_equal(faketls_reader_strip(&r, b, sizeof alert, &got), FAKETLS_REC_CLOSE);
    assert_string_equal(faketls_reader_why(&r), "client sent a TLS alert");
    assert_int_equal(got, 2);
    assert_memory_equal(b, "hi", 2);
    assert_int_equal(faketls_reader_strip(&r, b, 1, &got), FAKETLS_REC_CLOSE); /* sticky */
    /* handshake record after the handshake: error */
    static const uint8_t hs[] = {0x16, 3, 3, 0, 1, 1};
    memcpy(b, hs, sizeof hs);
    faketls_reader_init(&r, 0);
    assert_int_equal(faketls_reader_strip(&r, b, sizeof hs, &got), FAKETLS_REC_BAD);
    assert_string_equal(faketls_reader_why(&r), "unexpected TLS record type after the handshake");
    /* bad version, bad CCS length, bad CCS byte (after a good CCS and a split data record:
       the type of a record whose payload is still coming is its header's) */
    static const uint8_t ver[] = {0x17, 3, 1, 0, 1, 1};
    static const uint8_t ccs2[] = {0x14, 3, 3, 0, 2, 1, 1};
    static const uint8_t ccsx[] = {0x14, 3, 3, 0, 1, 1, 0x17, 3, 3, 0, 1, 'x', 0x14, 3, 3, 0, 1, 2};
    const uint8_t *bad[] = {ver, ccs2, ccsx};
    size_t badn[] = {sizeof ver, sizeof ccs2, sizeof ccsx};
    const char *badwhy[] = {"TLS record version is not 03 03",
                            "ChangeCipherSpec record is not 1 byte long",
                            "ChangeCipherSpec payload is not 01"};
    for (int i = 0; i < 3; i++) {
        memcpy(b, bad[i], badn[i]);
        faketls_reader_init(&r, 0);
        assert_int_equal(faketls_reader_strip(&r, b, badn[i], &got), FAKETLS_REC_BAD);
        assert_string_equal(faketls_reader_why(&r), badwhy[i]);
        assert_int_equal(got, i == 2 ? 1 : 0);
    }
    /* lengths: 16408 (iOS) and 16640 accepted, 16641 refused by default; 65535 with limit */
    uint8_t h5[5] = {0x17, 3, 3, 0, 0};
    size_t lens[] = {16408, 16640, 16641, 65535};
    int want[] = {FAKETLS_REC_NEED_MORE, FAKETLS_REC_NEED_MORE, FAKETLS_REC_BAD, FAKETLS_REC_BAD};
    for (int i = 0; i < 4; i++) {
        h5[3] = (uint8_t)(lens[i] >> 8), h5[4] = (uint8_t)lens[i];
        memcpy(b, h5, 5);
        faketls_reader_init(&r, 0);
        assert_int_equal(faketls_reader_strip(&r, b, 5, &got), want[i]);
        if (want[i] == FAKETLS_REC_BAD)
            assert_string_equal(faketls_reader_why(&r), "TLS record longer than the limit");
        else
            assert_null(faketls_reader_why(&r));
        faketls_reader_init(&r, 65535);
        assert_int_equal(faketls_reader_strip(&r, b, 5, &got), FAKETLS_REC_NEED_MORE);
        assert_int_equal(r.remaining, lens[i]);
    }
    /* empty records and CCS anywhere are skipped; several records per read */
    static const uint8_t mix[] = {0x17, 3, 3, 0, 0,   0x14, 3,    3, 0, 1, 1, 0x17,
                                  3,    3, 0, 1, 'a', 0x14, 3,    3, 0, 1, 1, 0x17,
                                  3,    3, 0, 2, 'b', 'c',  0x17, 3, 3, 0};
    memcpy(b, mix, sizeof mix);
    faketls_reader_init(&r, 0);
    assert_int_equal(faketls_reader_strip(&r, b, sizeof mix, &got), FAKETLS_REC_NEED_MORE);
    assert_int_equal(got, 3);
    assert_memory_equal(b, "abc", 3);
    assert_int_equal(r.hdr_have, 4); /* a split header is kept for the next read */
}

static void test_writer(void **state)
{
    (void)state;
    size_t n, en;
    uint8_t *plain = pv_hex(vec, "proxy_to_client_after_handshake/plain_hex", &n);
    uint8_t *enc = pv_hex(vec, "proxy_to_client_after_handshake/obfs2_encrypted_hex", &en);
    /* the encryption is the proxy->client stream of obfs2 case 1 at offset 0 */
    json_t *ob = pv_load("vectors/obfs2_client_handshake.json");
    size_t wn;
    uint8_t *w = pv_hex(ob, "cases/0/wire_header_hex", &wn);
    struct obfs2_keys keys;
    assert_int_equal(obfs2_client_keys(w, key_a, &keys), 0);
    struct crypto_ctr c = {0};
    assert_int_equal(crypto_ctr_init(&c, keys.enc_key, keys.enc_iv), 0);
    assert_int_equal(crypto_ctr_apply(&c, plain, n), 0);
    assert_memory_equal(plain, enc, en);
    uint8_t out[64];
    assert_int_equal(faketls_wrap(enc, en, out, sizeof out), en + 5);
    assert_hex_eq(out, en + 5, vec, "proxy_to_client_after_handshake/as_one_tls_record_hex");
    assert_int_equal(faketls_wrap(enc, en, out, en + 4), (size_t)-1);
    assert_int_equal(faketls_wrap(enc, 0, out, 0), 0);
    /* 40000 bytes: 16384 + 16384 + 7232 */
    size_t big = 40000;
    uint8_t *in = malloc(big), *o = malloc(big + 15);
    for (size_t i = 0; i < big; i++)
        in[i] = (uint8_t)(i * 7);
    assert_int_equal(faketls_wrapped_len(big), big + 15);
    assert_int_equal(faketls_wrap(in, big, o, big + 15), big + 15);
    assert_memory_equal(o, "\x17\x03\x03\x40\x00", 5);
    assert_memory_equal(o + 5 + 16384, "\x17\x03\x03\x40\x00", 5);
    assert_memory_equal(o + 10 + 32768, "\x17\x03\x03\x1c\x40", 5);
    /* and the reader undoes it */
    struct faketls_reader r;
    faketls_reader_init(&r, 0);
    size_t got;
    assert_int_equal(faketls_reader_strip(&r, o, big + 15, &got), FAKETLS_REC_NEED_MORE);
    assert_int_equal(got, big);
    assert_memory_equal(o, in, big);
    free(in);
    free(o);
    crypto_ctr_cleanup(&c);
    free(w);
    json_decref(ob);
    free(plain);
    free(enc);
}

static void mtg_hello(const char *file, bool ok)
{
    json_t *v = pv_load(file);
    size_t n, rn, sn;
    const char *full = pv_str(v, "full");
    uint8_t *rec = malloc(strlen(full));
    n = tg__b64_decode(rec, strlen(full), full, strlen(full));
    assert_int_not_equal(n, TG__BAD_LEN);
    uint8_t rnd[40], sid[40];
    rn = tg__b64_decode(rnd, sizeof rnd, pv_str(v, "random"), strlen(pv_str(v, "random")));
    sn = tg__b64_decode(sid, sizeof sid, pv_str(v, "sessionId"), strlen(pv_str(v, "sessionId")));
    assert_int_equal(rn, 32);
    struct faketls_hello h;
    assert_int_equal(faketls_parse_hello(rec, n, &h, NULL), FAKETLS_OK);
    assert_memory_equal(h.random, rnd, 32);
    assert_int_equal(h.session_id_len, sn);
    if (ok) /* the bad hello differs from its json in a session id byte (offset 73) */
        assert_memory_equal(h.session_id, sid, sn);
    assert_int_equal(h.cipher, pv_int(v, "cipherSuite"));
    assert_int_equal(h.first_suite, pv_int(v, "cipherSuite"));
    const char *host = pv_str(v, "host");
    assert_int_equal(h.nsni, 1);
    assert_int_equal(h.sni[0].len, strlen(host));
    assert_memory_equal(rec + h.sni[0].off, host, strlen(host));
    uint8_t k[16];
    assert_int_equal(tg__hex_decode(k, 16, "367a189aee18fa31c190054efd4a8e95", 32), 16);
    struct faketls_key key = key_for(k, "storage.googleapis.com");
    struct faketls_policy pol = {.now = pv_int(v, "time")};
    struct faketls_match m;
    enum faketls_verdict verdict = faketls_validate(&h, &key, 1, &pol, &m);
    if (ok) {
        assert_int_equal(verdict, FAKETLS_ACCEPT);
        assert_int_equal(m.timestamp, pv_int(v, "time"));
    } else {
        assert_int_equal(verdict, FAKETLS_BAD_DIGEST);
    }
    free(rec);
    json_decref(v);
}

#define NKEYS 256
#define NOW   1700000000

struct many {
    uint8_t k[NKEYS][16];
    char dom[NKEYS][24];
    struct faketls_key keys[NKEYS];
    uint8_t hello[5 + FAKETLS_HELLO_MAX];
};

/* 256 keys; distinct domains dNNN.example unless same_domain. */
static void many_init(struct many *x, bool same_domain)
{
    for (int i = 0; i < NKEYS; i++) {
        memset(x->k[i], i + 1, 16);
        snprintf(x->dom[i], sizeof x->dom[i], "d%03d.example", same_domain ? 0 : i);
        x->keys[i] = key_for(x->k[i], x->dom[i]);
    }
}

/* Validate a hello of len bytes built for key (or a foreign key if key < 0) with sni. */
static enum faketls_verdict many_check(struct many *x, int key, const char *sni, size_t len,
                                       struct faketls_match *m)
{
    static const uint8_t foreign[16] = {0xfe};
    size_t n =
        pcli_hello_sized(x->hello, sizeof x->hello, key < 0 ? foreign : x->k[key], sni, NOW, len);
    assert_int_equal(n, len);
    struct faketls_hello h;
    assert_int_equal(faketls_parse_hello(x->hello, n, &h, NULL), FAKETLS_OK);
    struct faketls_policy pol = policy_at(NOW);
    return faketls_validate(&h, x->keys, NKEYS, &pol, m);
}

/* With many secrets the SNI picks the keys to try: a junk hello costs the HMACs of the keys
   for the domain it names (one here), none for a foreign name; without SNI every key is
   tried, within FAKETLS_DIGEST_BUDGET bytes of hashing. */
static void test_many_keys_indexed_by_sni(void **state)
{
    (void)state;
    struct many *x = calloc(1, sizeof *x);
    assert_non_null(x);
    struct faketls_match m;
    many_init(x, false);
    assert_int_equal(many_check(x, 200, "d200.example", 517, &m), FAKETLS_ACCEPT);
    assert_int_equal(m.index, 200);
    assert_int_equal(m.digests, 1);
    assert_int_equal(many_check(x, 200, "D200.Example", 517, &m), FAKETLS_ACCEPT); /* case */
    assert_int_equal(faketls_domain_hash("D200.Example", 12),
                     faketls_domain_hash("d200.example", 12));
    x->keys[200].domain_hash = 0; /* without a hash the bytes decide alone */
    assert_int_equal(many_check(x, 200, "d200.example", 517, &m), FAKETLS_ACCEPT);
    assert_int_equal(m.digests, 1);
    assert_int_equal(many_check(x, -1, "d007.example", 517, &m), FAKETLS_BAD_DIGEST);
    assert_int_equal(m.digests, 1);
    assert_int_equal(many_check(x, -1, "d007.example", 5 + FAKETLS_HELLO_MAX, &m),
                     FAKETLS_BAD_DIGEST);
    assert_int_equal(m.digests, 1);
    assert_int_equal(many_check(x, 3, "nobody.example", 517, &m), FAKETLS_BAD_SNI);
    assert_int_equal(m.digests, 0);
    assert_false(m.matched);
    /* no SNI (some iOS clients): every key, so the last one is still found */
    assert_int_equal(many_check(x, NKEYS - 1, NULL, 517, &m), FAKETLS_ACCEPT);
    assert_int_equal(m.index, NKEYS - 1);
    assert_int_equal(m.digests, NKEYS);
    assert_int_equal(many_check(x, NKEYS - 1, NULL, 4096, &m), FAKETLS_ACCEPT);
    assert_int_equal(m.digests, NKEYS);
    /* a 16 KiB junk hello without SNI: bounded by the budget, not 256 x 16 KiB */
    assert_int_equal(many_check(x, -1, NULL, 5 + FAKETLS_HELLO_MAX, &m), FAKETLS_BAD_DIGEST);
    assert_int_equal(m.digests, FAKETLS_DIGEST_BUDGET / (5 + FAKETLS_HELLO_MAX));
    assert_true(m.digests * (5 + FAKETLS_HELLO_MAX) <= FAKETLS_DIGEST_BUDGET);
    /* every key with one domain: all of them are candidates, and the match is found */
    many_init(x, true);
    assert_int_equal(many_check(x, 100, "d000.example", 517, &m), FAKETLS_ACCEPT);
    assert_int_equal(m.index, 100);
    assert_int_equal(m.digests, NKEYS);
    free(x);
}

/* Issue 21 item 14: a hello many keys could sign (no SNI, or a shared domain) with a hint
   (the key its address last used) is checked against that key first, and alone when it
   accepts; hint_only hashes nothing else, whatever the hint gives. */
static void test_no_sni_hint(void **state)
{
    (void)state;
    struct many *x = calloc(1, sizeof *x);
    assert_non_null(x);
    many_init(x, false);
    struct faketls_match m;
    struct faketls_hello h;
    struct faketls_policy pol = policy_at(NOW);
    size_t n = pcli_hello_sized(x->hello, sizeof x->hello, x->k[200], NULL, NOW, 517);
    assert_int_equal(faketls_parse_hello(x->hello, n, &h, NULL), FAKETLS_OK);
    pol.hint = 201; /* the right key: one HMAC */
    assert_int_equal(faketls_validate(&h, x->keys, NKEYS, &pol, &m), FAKETLS_ACCEPT);
    assert_int_equal(m.index, 200);
    assert_int_equal(m.digests, 1);
    pol.hint_only = true;
    assert_int_equal(faketls_validate(&h, x->keys, NKEYS, &pol, &m), FAKETLS_ACCEPT);
    assert_int_equal(m.digests, 1);
    pol.hint = 8; /* a wrong hint: then every other key, none twice */
    pol.hint_only = false;
    assert_int_equal(faketls_validate(&h, x->keys, NKEYS, &pol, &m), FAKETLS_ACCEPT);
    assert_int_equal(m.index, 200);
    assert_int_equal(m.digests, NKEYS);
    pol.hint_only = true; /* the wrong hint alone */
    assert_int_equal(faketls_validate(&h, x->keys, NKEYS, &pol, &m), FAKETLS_BAD_DIGEST);
    assert_false(m.matched);
    assert_int_equal(m.digests, 1);
    pol.hint = 0; /* no hint at all: no HMAC */
    assert_int_equal(faketls_validate(&h, x->keys, NKEYS, &pol, &m), FAKETLS_BAD_DIGEST);
    assert_int_equal(m.digests, 0);
    pol.hint = NKEYS + 1; /* out of range: ignored */
    assert_int_equal(faketls_validate(&h, x->keys, NKEYS, &pol, &m), FAKETLS_BAD_DIGEST);
    assert_int_equal(m.digests, 0);
    pol.hint = 201;
    pol.reject_missing_sni = true; /* the SNI policy still comes first */
    assert_int_equal(faketls_validate(&h, x->keys, NKEYS, &pol, &m), FAKETLS_BAD_SNI);
    assert_int_equal(m.digests, 0);
    /* with SNI, a hint the SNI does not admit is skipped */
    n = pcli_hello_sized(x->hello, sizeof x->hello, x->k[200], "d200.example", NOW, 517);
    assert_int_equal(faketls_parse_hello(x->hello, n, &h, NULL), FAKETLS_OK);
    pol = policy_at(NOW);
    assert_int_equal(faketls_candidates(&h, x->keys, NKEYS, &pol), 1);
    pol.hint = 8;
    assert_int_equal(faketls_validate(&h, x->keys, NKEYS, &pol, &m), FAKETLS_ACCEPT);
    assert_int_equal(m.index, 200);
    assert_int_equal(m.digests, 1);
    pol.hint_only = true; /* admitted keys exist, none hashed: a bad digest, not BAD_SNI */
    assert_int_equal(faketls_validate(&h, x->keys, NKEYS, &pol, &m), FAKETLS_BAD_DIGEST);
    assert_int_equal(m.digests, 0);
    /* many secrets sharing the SNI's domain: the hint works as without SNI */
    many_init(x, true);
    n = pcli_hello_sized(x->hello, sizeof x->hello, x->k[100], "d000.example", NOW, 517);
    assert_int_equal(faketls_parse_hello(x->hello, n, &h, NULL), FAKETLS_OK);
    pol = policy_at(NOW);
    assert_int_equal(faketls_candidates(&h, x->keys, NKEYS, &pol), NKEYS);
    pol.hint = 101;
    pol.hint_only = true;
    assert_int_equal(faketls_validate(&h, x->keys, NKEYS, &pol, &m), FAKETLS_ACCEPT);
    assert_int_equal(m.index, 100);
    assert_int_equal(m.digests, 1);
    pol.hint = 0;
    assert_int_equal(faketls_validate(&h, x->keys, NKEYS, &pol, &m), FAKETLS_BAD_DIGEST);
    assert_int_equal(m.digests, 0);
    n = pcli_hello_sized(x->hello, sizeof x->hello, x->k[100], "other.example", NOW, 517);
    assert_int_equal(faketls_parse_hello(x->hello, n, &h, NULL), FAKETLS_OK);
    assert_int_equal(faketls_candidates(&h, x->keys, NKEYS, &pol), 0);
    assert_int_equal(faketls_validate(&h, x->keys, NKEYS, &pol, &m), FAKETLS_BAD_SNI);
    n = pcli_hello_sized(x->hello, sizeof x->hello, x->k[100], NULL, NOW, 517);
    assert_int_equal(faketls_parse_hello(x->hello, n, &h, NULL), FAKETLS_OK);
    assert_int_equal(faketls_candidates(&h, x->keys, NKEYS, &pol), NKEYS);
    pol.reject_missing_sni = true;
    assert_int_equal(faketls_candidates(&h, x->keys, NKEYS, &pol), 0);
    free(x);
}

static void test_mtg_hellos(void **state)
{
    (void)state;
    static const char *const ok[] = {
        "vectors/mtg/client-hello-ok-19dfe38384b9884b.json",
        "vectors/mtg/client-hello-ok-48f8a72a56f3174a.json",
        "vectors/mtg/client-hello-ok-651054256093c6cd.json",
        "vectors/mtg/client-hello-ok-79d01ef18a9d2621.json",
        "vectors/mtg/client-hello-ok-7a5569f05b118145.json",
        "vectors/mtg/client-hello-ok-grease-first.json",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        mtg_hello(ok[i], true);
    mtg_hello("vectors/mtg/client-hello-bad-fa2e46cdb33e2a1b.json", false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_hello),
        cmocka_unit_test(test_multi_key),
        cmocka_unit_test(test_hello_segments_and_truncation),
        cmocka_unit_test(test_hello_structural_corruption),
        cmocka_unit_test(test_peek),
        cmocka_unit_test(test_negatives),
        cmocka_unit_test(test_server_response),
        cmocka_unit_test(test_client_flight),
        cmocka_unit_test(test_reader_errors),
        cmocka_unit_test(test_writer),
        cmocka_unit_test(test_mtg_hellos),
        cmocka_unit_test(test_many_keys_indexed_by_sni),
        cmocka_unit_test(test_no_sni_hint),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
