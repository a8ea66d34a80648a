/* Tests for proxy/obfs2 and proxy/crypto: obfs2_client_handshake.json, proxy_to_dc.json and
 * mtg's client-handshake snapshots, plus negative and edge cases. */
#include "tgtest.h"

#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "core/str.h"
#include "proxy/wire/crypto.h"
#include "proxy/wire/obfs2.h"
#include "proxy_vectors.h"

static void assert_hex_eq(const uint8_t *got, json_t *v, const char *path)
{
    size_t n;
    uint8_t *want = pv_hex(v, path, &n);
    if (memcmp(got, want, n) != 0) {
        free(want);
        fail_msg("mismatch at %s", path);
    }
    free(want);
}

static struct obfs2_candidate cand_from(json_t *c, const char *path, unsigned tags)
{
    struct obfs2_candidate cand = {.tags = tags};
    size_t n;
    uint8_t *k = pv_hex(c, path, &n);
    assert_int_equal(n, 16);
    memcpy(cand.key, k, 16);
    free(k);
    return cand;
}

static const unsigned ALL_TAGS =
    OBFS2_ALLOW_ABRIDGED | OBFS2_ALLOW_INTERMEDIATE | OBFS2_ALLOW_PADDED;

/* Relay continuity: client bytes after the header decrypt with the same stream. */
static void check_traffic(json_t *c, struct crypto_ctr *dec, const struct obfs2_keys *keys)
{
    size_t n, m;
    uint8_t *wire = pv_hex(c, "client_to_proxy_after_header/wire_hex", &n);
    uint8_t *plain = pv_hex(c, "client_to_proxy_after_header/plain_hex", &m);
    assert_int_equal(n, m);
    /* in two uneven chunks: stream position must carry over */
    assert_int_equal(crypto_ctr_apply(dec, wire, 3), 0);
    assert_int_equal(crypto_ctr_apply(dec, wire + 3, n - 3), 0);
    assert_memory_equal(wire, plain, n);
    free(wire);
    free(plain);

    struct crypto_ctr enc = {0};
    assert_int_equal(crypto_ctr_init(&enc, keys->enc_key, keys->enc_iv), 0);
    plain = pv_hex(c, "proxy_to_client_first_bytes/plain_hex", &n);
    assert_int_equal(crypto_ctr_apply(&enc, plain, n), 0);
    assert_hex_eq(plain, c, "proxy_to_client_first_bytes/wire_hex");
    free(plain);
    crypto_ctr_cleanup(&enc);
}

static void test_client_vectors(void **state)
{
    (void)state;
    json_t *v = pv_load("vectors/obfs2_client_handshake.json");
    json_t *cases = pv_need(v, "cases");
    size_t i, accepted = 0, rejected = 0;
    json_t *c;
    json_array_foreach(cases, i, c)
    {
        size_t n;
        uint8_t *w = pv_hex(c, "wire_header_hex", &n);
        assert_int_equal(n, 64);
        struct obfs2_candidate cand = cand_from(c, "proxy_secret_hex", ALL_TAGS);
        struct obfs2_keys keys;
        assert_int_equal(obfs2_client_keys(w, cand.key, &keys), 0);
        struct crypto_ctr dec = {0};
        struct obfs2_client out;
        enum obfs2_status st = obfs2_parse_client(w, n, &cand, 1, &dec, &out);
        if (strcmp(pv_str(c, "expected"), "accept") == 0) {
            assert_hex_eq(keys.dec_key, c, "derived/client_to_proxy_key_hex");
            assert_hex_eq(keys.dec_iv, c, "derived/client_to_proxy_iv_hex");
            assert_hex_eq(keys.enc_key, c, "derived/proxy_to_client_key_hex");
            assert_hex_eq(keys.enc_iv, c, "derived/proxy_to_client_iv_hex");
            assert_int_equal(st, OBFS2_OK);
            assert_int_equal(out.match, 0);
            assert_int_equal(out.dc, pv_int(c, "dc"));
            uint8_t tag[4] = {(uint8_t)out.tag, (uint8_t)(out.tag >> 8), (uint8_t)(out.tag >> 16),
                              (uint8_t)(out.tag >> 24)};
            assert_hex_eq(tag, c, "decrypted_tag_hex");
            assert_memory_equal(out.replay_key, w + 8, 48);
            assert_memory_equal(&out.keys, &keys, sizeof keys);
            check_traffic(c, &dec, &out.keys);
            accepted++;
        } else {
            assert_int_equal(st, OBFS2_BAD);
            rejected++;
        }
        crypto_ctr_cleanup(&dec);
        free(w);
    }
    assert_int_equal(accepted, 4);
    assert_int_equal(rejected, 1);
    json_decref(v);
}

/* Tag policy (brief 2.4): the tag must be allowed for the candidate; the second candidate
 * with the same key but the right tag set wins; truncated headers ask for more. */
static void test_client_tag_policy(void **state)
{
    (void)state;
    json_t *v = pv_load("vectors/obfs2_client_handshake.json");
    json_t *c = pv_need(v, "cases/2"); /* abridged_dc5 */
    assert_string_equal(pv_str(c, "name"), "abridged_dc5");
    size_t n;
    uint8_t *w = pv_hex(c, "wire_header_hex", &n);
    struct obfs2_candidate cands[3];
    cands[0] = cand_from(c, "proxy_secret_hex", obfs2_tags_for(SECRET_DD, false));
    cands[1] = cand_from(c, "proxy_secret_hex", obfs2_tags_for(SECRET_EE, true));
    cands[2] = cand_from(c, "proxy_secret_hex", obfs2_tags_for(SECRET_CLASSIC, false));
    struct crypto_ctr dec = {0};
    struct obfs2_client out;
    assert_int_equal(obfs2_parse_client(w, n, cands, 2, &dec, &out), OBFS2_BAD);
    assert_int_equal(obfs2_parse_client(w, n, cands, 3, &dec, &out), OBFS2_OK);
    assert_int_equal(out.match, 2);
    assert_int_equal(out.tag, OBFS2_TAG_ABRIDGED);
    assert_string_equal(obfs2_tag_name(out.tag), "abridged");
    for (size_t len = 0; len < 64; len++)
        assert_int_equal(obfs2_parse_client(w, len, cands, 3, &dec, &out), OBFS2_NEED_MORE);
    assert_int_equal(obfs2_parse_client(w, n, cands, 0, &dec, &out), OBFS2_BAD);
    /* every single-bit flip in the encrypted tag/dc area is rejected or changes the dc */
    for (int bit = 0; bit < 32; bit++) {
        w[56 + bit / 8] ^= (uint8_t)(1u << (bit % 8));
        assert_int_equal(obfs2_parse_client(w, n, cands, 3, &dec, &out), OBFS2_BAD);
        w[56 + bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    crypto_ctr_cleanup(&dec);
    free(w);
    json_decref(v);
    assert_int_equal(obfs2_tags_for(SECRET_EE, false), 0);
    assert_int_equal(obfs2_tags_for(SECRET_DD, true), 0);
    assert_int_equal(obfs2_tags_for(SECRET_CLASSIC, true), 0);
}

static uint8_t *b64(const char *s, size_t *n)
{
    size_t len = strlen(s);
    uint8_t *out = malloc(len + 1);
    assert_non_null(out);
    *n = tg__b64_decode(out, len + 1, s, len);
    assert_int_not_equal(*n, TG__BAD_LEN);
    return out;
}

static void mtg_snapshot(const char *file)
{
    json_t *v = pv_load(file);
    size_t kn, wn, n, m;
    uint8_t *key = b64(pv_str(v, "secret"), &kn);
    uint8_t *w = b64(pv_str(v, "frame"), &wn);
    assert_int_equal(kn, 16);
    assert_int_equal(wn, 64);
    struct obfs2_candidate cand = {.tags = OBFS2_ALLOW_PADDED};
    memcpy(cand.key, key, 16);
    struct crypto_ctr dec = {0}, enc = {0};
    struct obfs2_client out;
    assert_int_equal(obfs2_parse_client(w, wn, &cand, 1, &dec, &out), OBFS2_OK);
    assert_int_equal(out.tag, OBFS2_TAG_PADDED);
    assert_int_equal(out.dc, pv_int(v, "dc"));
    uint8_t *cipher = b64(pv_str(v, "decrypted/cipher"), &n);
    uint8_t *text = b64(pv_str(v, "decrypted/text"), &m);
    assert_int_equal(n, m);
    assert_int_equal(crypto_ctr_apply(&dec, cipher, n), 0);
    assert_memory_equal(cipher, text, n);
    free(cipher);
    free(text);
    cipher = b64(pv_str(v, "encrypted/cipher"), &n);
    text = b64(pv_str(v, "encrypted/text"), &m);
    assert_int_equal(n, m);
    assert_int_equal(crypto_ctr_init(&enc, out.keys.enc_key, out.keys.enc_iv), 0);
    assert_int_equal(crypto_ctr_apply(&enc, text, m), 0);
    assert_memory_equal(cipher, text, n);
    free(cipher);
    free(text);
    crypto_ctr_cleanup(&dec);
    crypto_ctr_cleanup(&enc);
    free(key);
    free(w);
    json_decref(v);
}

static void test_mtg_snapshots(void **state)
{
    (void)state;
    mtg_snapshot("vectors/mtg/client-handshake-snapshot-4529d55776e2d427.json");
    mtg_snapshot("vectors/mtg/client-handshake-snapshot-585c944d672f60a2.json");
}

/* Deterministic randomness: hands out the queued 64-byte blocks in order. */
struct feed {
    const uint8_t *blocks[4];
    size_t n, next;
};

static int feed_random(void *user, uint8_t *buf, size_t n)
{
    struct feed *f = user;
    if (n != 64 || f->next >= f->n)
        return -EIO;
    memcpy(buf, f->blocks[f->next++], 64);
    return 0;
}

static struct obfs2_keys client_keys_case0(void)
{
    json_t *v = pv_load("vectors/obfs2_client_handshake.json");
    size_t n;
    uint8_t *w = pv_hex(v, "cases/0/wire_header_hex", &n);
    uint8_t *k = pv_hex(v, "cases/0/proxy_secret_hex", &n);
    struct obfs2_keys keys;
    assert_int_equal(obfs2_client_keys(w, k, &keys), 0);
    free(w);
    free(k);
    json_decref(v);
    return keys;
}

static void test_dc_vectors(void **state)
{
    (void)state;
    json_t *v = pv_load("vectors/proxy_to_dc.json");
    json_t *cases = pv_need(v, "cases");
    size_t i, n;
    json_t *c;
    struct obfs2_keys client = client_keys_case0();
    json_array_foreach(cases, i, c)
    {
        uint8_t *rnd = pv_hex(c, "random_64_hex", &n);
        uint8_t *tagb = pv_hex(c, "protocol_tag_hex", &n);
        uint32_t tag = (uint32_t)tagb[0] | (uint32_t)tagb[1] << 8 | (uint32_t)tagb[2] << 16 |
                       (uint32_t)tagb[3] << 24;
        bool fast = pv_get(c, "fast_mode_check") != NULL;
        struct feed f = {.blocks = {rnd}, .n = 1};
        uint8_t wire[64];
        struct obfs2_keys keys;
        struct crypto_ctr enc = {0}, dec = {0};
        assert_int_equal(obfs2_dc_header(tag, (int16_t)pv_int(c, "dc"), fast ? &client : NULL,
                                         feed_random, &f, wire, &keys, &enc, &dec),
                         0);
        assert_hex_eq(wire, c, "wire_header_hex");
        assert_hex_eq(keys.enc_key, c, "proxy_to_dc_key_hex");
        assert_hex_eq(keys.enc_iv, c, "proxy_to_dc_iv_hex");
        assert_hex_eq(keys.dec_key, c, "dc_to_proxy_key_hex");
        assert_hex_eq(keys.dec_iv, c, "dc_to_proxy_iv_hex");
        uint8_t *p = pv_hex(c, "proxy_to_dc_after_header/plain_hex", &n);
        assert_int_equal(crypto_ctr_apply(&enc, p, n), 0);
        assert_hex_eq(p, c, "proxy_to_dc_after_header/wire_hex");
        free(p);
        p = pv_hex(c, "dc_to_proxy_first_bytes/wire_hex", &n);
        if (fast) /* the DC's bytes are already what the client expects */
            assert_hex_eq(p, c, "fast_mode_check/dc_reply_wire_equals_what_client_expects_hex");
        assert_int_equal(crypto_ctr_apply(&dec, p, n), 0);
        assert_hex_eq(p, c, "dc_to_proxy_first_bytes/plain_hex");
        free(p);
        crypto_ctr_cleanup(&enc);
        crypto_ctr_cleanup(&dec);
        free(rnd);
        free(tagb);
    }
    assert_int_equal(i, 3);
    json_decref(v);
}

static void test_forbidden_prefixes(void **state)
{
    (void)state;
    json_t *v = pv_load("vectors/proxy_to_dc.json");
    json_t *checks = pv_need(v, "forbidden_prefix_checks");
    size_t i, n;
    json_t *c;
    json_array_foreach(checks, i, c)
    {
        uint8_t *p = pv_hex(c, "first8_hex", &n);
        assert_int_equal(n, 8);
        if (obfs2_prefix_ok(p) != json_is_true(pv_need(c, "allowed")))
            fail_msg("prefix check %zu (%s) wrong", i, pv_str(c, "note"));
        free(p);
    }
    assert_int_equal(i, 14);
    /* The builder redraws until the clear prefix is allowed. */
    uint8_t bad[64], good[64], wire[64];
    memset(bad, 0x11, 64);
    memcpy(bad, "GET ", 4);
    memset(good, 0x22, 64);
    struct feed f = {.blocks = {bad, bad, good}, .n = 3};
    struct crypto_ctr enc = {0};
    assert_int_equal(
        obfs2_dc_header(OBFS2_TAG_PADDED, -2, NULL, feed_random, &f, wire, NULL, &enc, NULL), 0);
    assert_int_equal(f.next, 3);
    assert_memory_equal(wire, good, 56);
    /* A source that never yields an allowed prefix fails instead of looping forever. */
    struct feed g = {.blocks = {bad}, .n = 1};
    assert_int_not_equal(
        obfs2_dc_header(OBFS2_TAG_PADDED, 2, NULL, feed_random, &g, wire, NULL, &enc, NULL), 0);
    crypto_ctr_cleanup(&enc);
    json_decref(v);
}

/* The header built with real randomness parses back (as a DC would) with tag and signed dc. */
static void test_dc_header_roundtrip(void **state)
{
    (void)state;
    for (int i = 0; i < 50; i++) {
        uint8_t wire[64];
        struct obfs2_keys keys;
        struct crypto_ctr enc = {0}, dec = {0};
        int16_t dc = (int16_t)(i % 2 ? -(i % 6) : 10000 + i);
        assert_int_equal(
            obfs2_dc_header(OBFS2_TAG_INTERMEDIATE, dc, NULL, NULL, NULL, wire, &keys, &enc, &dec),
            0);
        assert_true(obfs2_prefix_ok(wire));
        struct crypto_ctr d2 = {0};
        uint8_t p[64];
        assert_int_equal(crypto_ctr_init(&d2, wire + 8, wire + 40), 0);
        assert_int_equal(crypto_ctr_apply2(&d2, wire, p, 64), 0);
        assert_memory_equal(p + 56, "\xee\xee\xee\xee", 4);
        assert_int_equal((int16_t)(uint16_t)(p[60] | p[61] << 8), dc);
        crypto_ctr_cleanup(&enc);
        crypto_ctr_cleanup(&dec);
        crypto_ctr_cleanup(&d2);
    }
}

static void test_crypto_helpers(void **state)
{
    (void)state;
    uint8_t iv[16];
    memset(iv, 0xff, 16);
    crypto_ctr_iv_add(iv, 1);
    uint8_t zero[16] = {0};
    assert_memory_equal(iv, zero, 16);
    memset(iv, 0, 16);
    iv[15] = 0xfe;
    crypto_ctr_iv_add(iv, 0x103);
    assert_int_equal(iv[15], 0x01);
    assert_int_equal(iv[14], 0x02);
    /* starting at iv+4 equals skipping 64 bytes of the stream */
    uint8_t key[32], iv0[16], a[80] = {0}, b[16] = {0};
    for (int i = 0; i < 32; i++)
        key[i] = (uint8_t)i;
    memset(iv0, 0xff, 16); /* carry across all 128 bits */
    struct crypto_ctr c1 = {0}, c2 = {0};
    assert_int_equal(crypto_ctr_init(&c1, key, iv0), 0);
    assert_int_equal(crypto_ctr_apply(&c1, a, 80), 0);
    crypto_ctr_iv_add(iv0, 4);
    assert_int_equal(crypto_ctr_init(&c2, key, iv0), 0);
    assert_int_equal(crypto_ctr_apply(&c2, b, 16), 0);
    assert_memory_equal(a + 64, b, 16);
    crypto_ctr_cleanup(&c1);
    crypto_ctr_cleanup(&c2);
    crypto_ctr_cleanup(&c2); /* idempotent */
    assert_int_equal(crypto_ctr_apply(&c2, b, 1), -EINVAL);
    /* SHA-256("abc") */
    uint8_t h[32];
    struct crypto_part parts[2] = {{"a", 1}, {"bc", 2}};
    assert_int_equal(crypto_sha256(parts, 2, h), 0);
    char hex[65];
    tg__hex_encode(hex, h, 32);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    /* RFC 4231 test case 2 */
    struct crypto_part msg[1] = {{"what do ya want for nothing?", 28}};
    assert_int_equal(crypto_hmac_sha256("Jefe", 4, msg, 1, h), 0);
    tg__hex_encode(hex, h, 32);
    assert_string_equal(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    /* RFC 4231 test case 6: a key longer than the block is hashed first */
    uint8_t longkey[131];
    memset(longkey, 0xaa, sizeof longkey);
    struct crypto_part msg6[1] = {{"Test Using Larger Than Block-Size Key - Hash Key First", 54}};
    assert_int_equal(crypto_hmac_sha256(longkey, sizeof longkey, msg6, 1, h), 0);
    tg__hex_encode(hex, h, 32);
    assert_string_equal(hex, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    /* differential against OpenSSL's own HMAC over many key and message lengths */
    for (size_t kl = 0; kl <= 130; kl += 13) {
        for (size_t ml = 0; ml <= 300; ml += 37) {
            uint8_t hk[130], m[300], want[32];
            size_t wl = 0;
            assert_int_equal(crypto_random(hk, sizeof hk), 0);
            assert_int_equal(crypto_random(m, sizeof m), 0);
            struct crypto_part two[2] = {{m, ml / 2}, {m + ml / 2, ml - ml / 2}};
            assert_int_equal(crypto_hmac_sha256(hk, kl, two, 2, h), 0);
            assert_non_null(EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, hk, kl, m, ml, want,
                                      sizeof want, &wl));
            assert_int_equal(wl, 32);
            assert_memory_equal(h, want, 32);
        }
    }
    for (int i = 0; i < 1000; i++) {
        uint32_t r = crypto_random_range(2500, 4700);
        assert_true(r >= 2500 && r < 4700);
    }
    assert_int_equal(crypto_random_range(7, 7), 7);
}

/* Client side of obfs2 with a secret (what a Telegram app does, brief 2.1/2.2): the 64
 * bytes to send and the client's send stream, left at offset 64. */
static void client_header(const uint8_t secret[16], uint32_t tag, int16_t dc, uint8_t wire[64],
                          struct crypto_ctr *send)
{
    uint8_t h[64], key[32], enc[64];
    for (int i = 0; i < 64; i++)
        h[i] = (uint8_t)(i * 37 + tag + (uint16_t)dc);
    /* violate the forbidden-prefix rules: a proxy must still accept it (brief 2.1) */
    h[0] = 0xef;
    memset(h + 4, 0, 4);
    h[56] = (uint8_t)tag, h[57] = (uint8_t)(tag >> 8), h[58] = (uint8_t)(tag >> 16);
    h[59] = (uint8_t)(tag >> 24), h[60] = (uint8_t)dc, h[61] = (uint8_t)((uint16_t)dc >> 8);
    struct crypto_part parts[2] = {{h + 8, 32}, {secret, 16}};
    assert_int_equal(crypto_sha256(parts, 2, key), 0);
    assert_int_equal(crypto_ctr_init(send, key, h + 40), 0);
    assert_int_equal(crypto_ctr_apply2(send, h, enc, 64), 0);
    memcpy(wire, h, 56);
    memcpy(wire + 56, enc + 56, 8);
}

/* Every framing example of transport_framing.json crosses client -> proxy -> DC unchanged,
 * cut into odd chunks, with the DC seeing the client's tag (brief 7: the proxy is opaque). */
static void test_framing_transparent(void **state)
{
    (void)state;
    json_t *v = pv_load("vectors/transport_framing.json");
    json_t *ex = pv_need(v, "examples");
    static const uint8_t secret[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    size_t i, n, tn;
    json_t *e;
    json_array_foreach(ex, i, e)
    {
        uint8_t *framed = pv_hex(e, "framed_hex", &n);
        uint8_t *tagb = pv_hex(e, "tag", &tn);
        uint32_t tag = (uint32_t)tagb[0] | (uint32_t)tagb[1] << 8 | (uint32_t)tagb[2] << 16 |
                       (uint32_t)tagb[3] << 24;
        uint8_t wire[64], dcwire[64], plain[64];
        struct crypto_ctr csend = {0}, pdec = {0}, penc = {0}, dcdec = {0};
        client_header(secret, tag, -2, wire, &csend);
        struct obfs2_candidate cand = {.tags = ALL_TAGS};
        memcpy(cand.key, secret, 16);
        struct obfs2_client cl;
        assert_int_equal(obfs2_parse_client(wire, 64, &cand, 1, &pdec, &cl), OBFS2_OK);
        assert_int_equal(cl.tag, tag);
        assert_int_equal(cl.dc, -2);
        assert_int_equal(
            obfs2_dc_header(cl.tag, cl.dc, NULL, NULL, NULL, dcwire, NULL, &penc, NULL), 0);
        /* the DC reads our header without a secret */
        assert_int_equal(crypto_ctr_init(&dcdec, dcwire + 8, dcwire + 40), 0);
        assert_int_equal(crypto_ctr_apply2(&dcdec, dcwire, plain, 64), 0);
        assert_memory_equal(plain + 56, tagb, 4);
        uint8_t *buf = malloc(n);
        memcpy(buf, framed, n);
        assert_int_equal(crypto_ctr_apply(&csend, buf, n), 0);
        for (size_t at = 0, step = 1; at < n; at += step, step = step % 5 + 2) {
            size_t c = n - at < step ? n - at : step;
            assert_int_equal(crypto_ctr_apply(&pdec, buf + at, c), 0);
            assert_int_equal(crypto_ctr_apply(&penc, buf + at, c), 0);
        }
        assert_int_equal(crypto_ctr_apply(&dcdec, buf, n), 0);
        assert_memory_equal(buf, framed, n);
        free(buf);
        free(framed);
        free(tagb);
        crypto_ctr_cleanup(&csend);
        crypto_ctr_cleanup(&pdec);
        crypto_ctr_cleanup(&penc);
        crypto_ctr_cleanup(&dcdec);
    }
    assert_int_equal(i, 7);
    json_decref(v);
}

/* A parked stream resumes at exactly the same keystream position, aligned or not. On the
   EVP path it holds its thread's context until parked; on the AES-NI path never. */
static void test_ctr_park(void **state)
{
    (void)state;
    bool evp = !crypto_ctr_aesni();
    uint8_t key[32], iv[16], ref[200] = {0}, got[200] = {0};
    for (int i = 0; i < 32; i++)
        key[i] = (uint8_t)(i * 5 + 1);
    memset(iv, 0xff, 16);
    iv[0] = 0x7f; /* carries through the low bytes on resume */
    struct crypto_ctr a = {0}, b = {0};
    assert_int_equal(crypto_ctr_init(&a, key, iv), 0);
    assert_int_equal(crypto_ctr_apply(&a, ref, sizeof ref), 0);
    assert_int_equal(crypto_ctr_init(&b, key, iv), 0);
    static const size_t cuts[] = {0, 1, 15, 16, 17, 31, 64, 65, 100, 200};
    size_t at = 0;
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        assert_int_equal(crypto_ctr_apply(&b, got + at, cuts[i] - at), 0);
        at = cuts[i];
        assert_int_equal(b.pos, at);
        assert_int_equal(crypto_ctr_keyed(&b), evp);
        crypto_ctr_park(&b);
        assert_false(crypto_ctr_keyed(&b));
        crypto_ctr_park(&b); /* idempotent */
    }
    assert_memory_equal(got, ref, sizeof ref);
    crypto_ctr_cleanup(&a);
    crypto_ctr_cleanup(&b);
    assert_false(b.ready);
    assert_int_equal(crypto_ctr_apply(&b, got, 1), -EINVAL);
    crypto_ctr_park(NULL);
}

/* More streams than a thread has contexts (256), applied in turns of odd lengths: each
   stream loses its context to the others between turns and is re-keyed at its exact
   position; every one must equal its keystream computed in one go by a separate EVP
   context. Copying a stream by value must not let the copies share a position either. */
static void test_ctr_many_streams(void **state)
{
    (void)state;
    enum { N = 300, LEN = 97 * 5 };
    static struct crypto_ctr s[N];
    static uint8_t got[N][LEN];
    uint8_t key[32], iv[16];
    memset(s, 0, sizeof s);
    memset(got, 0, sizeof got);
    for (int i = 0; i < N; i++) {
        memset(key, i, 32);
        memset(iv, 0xff - i % 7, 16);
        assert_int_equal(crypto_ctr_init(&s[i], key, iv), 0);
    }
    for (size_t at = 0; at < LEN; at += 97) /* 97: every turn ends mid-block */
        for (int i = 0; i < N; i++)
            assert_int_equal(crypto_ctr_apply(&s[i], got[i] + at, 97), 0);
    for (int i = 0; i < N; i++) {
        uint8_t ref[LEN] = {0};
        int outl = 0;
        memset(key, i, 32);
        memset(iv, 0xff - i % 7, 16);
        EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
        assert_int_equal(EVP_EncryptInit_ex(x, EVP_aes_256_ctr(), NULL, key, iv), 1);
        assert_int_equal(EVP_EncryptUpdate(x, ref, &outl, ref, LEN), 1);
        EVP_CIPHER_CTX_free(x);
        assert_memory_equal(got[i], ref, LEN);
    }
    /* a copy and its original go on from the same position independently */
    struct crypto_ctr copy = s[0];
    uint8_t a[40] = {0}, b[40] = {0};
    assert_int_equal(crypto_ctr_apply(&s[0], a, sizeof a), 0);
    assert_int_equal(crypto_ctr_apply(&copy, b, sizeof b), 0);
    assert_memory_equal(a, b, sizeof a);
    crypto_ctr_cleanup(&copy);
    for (int i = 0; i < N; i++)
        crypto_ctr_cleanup(&s[i]);
    assert_false(crypto_ctr_keyed(&s[0]));
}

/* A forked child's next 64 bytes of rnd are not its parent's (the fork check). */
static void expect_child_differs(int (*rnd)(void *, size_t))
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        uint8_t c[64];
        int ok = rnd(c, sizeof c) == 0 && write(fds[1], c, sizeof c) == sizeof c;
        _exit(ok ? 0 : 1);
    }
    uint8_t parent[64], child[64];
    assert_int_equal(rnd(parent, sizeof parent), 0);
    assert_int_equal(read(fds[0], child, sizeof child), (ssize_t)sizeof child);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_memory_not_equal(parent, child, sizeof parent);
    close(fds[0]);
    close(fds[1]);
}

/* Small random requests come from a per-thread block: consecutive ones never repeat, a
   request crossing the block's end is served from a fresh block, and a forked child must
   not hand out the bytes its parent will (the block is emptied in the child). */
static void test_random_block(void **state)
{
    (void)state;
    uint8_t a[64], b[64], zero[64] = {0};
    assert_int_equal(crypto_random(a, 16), 0); /* the block is now partly used */
    for (int i = 0; i < 40; i++) {             /* 40 x 64 bytes: several refills */
        assert_int_equal(crypto_random(b, sizeof b), 0);
        assert_memory_not_equal(a, b, 16);
        assert_memory_not_equal(b, zero, sizeof b);
        memcpy(a, b, 16);
    }
    assert_int_equal(crypto_random(a, 7), 0);
    expect_child_differs(crypto_random);
}

/* The public keystream (crypto_random_public): no repeats across calls and re-keys (2 MiB
   in 4 KB requests cross the 1 MiB re-key twice), not all zero, a request of 0 bytes is
   fine, and a forked child does not repeat its parent's next bytes. */
static void test_random_public(void **state)
{
    (void)state;
    static uint8_t a[4096], b[4096], zero[4096];
    assert_int_equal(crypto_random_public(a, sizeof a), 0);
    for (int i = 0; i < 512; i++) {
        assert_int_equal(crypto_random_public(b, sizeof b), 0);
        assert_memory_not_equal(a, b, 32);
        assert_memory_not_equal(b + sizeof b - 32, zero, 32);
        memcpy(a, b, sizeof a);
    }
    assert_int_equal(crypto_random_public(a, 0), 0);
    expect_child_differs(crypto_random_public);
}

/* Fresh key shares differ every time and are never all zero. */
static void test_x25519_random(void **state)
{
    (void)state;
    uint8_t prev[32] = {0}, zero[32] = {0};
    for (int i = 0; i < 20; i++) {
        uint8_t pub[32];
        assert_int_equal(crypto_x25519_random_public(pub), 0);
        assert_memory_not_equal(pub, prev, 32);
        assert_memory_not_equal(pub, zero, 32);
        memcpy(prev, pub, 32);
    }
}

/* The same tests on the EVP path where the CPU has AES-NI (test_aesctr covers both). */
static int force_evp(void **state)
{
    (void)state;
    return crypto_ctr_force_evp(true) ? -1 : 0;
}

static int unforce_evp(void **state)
{
    (void)state;
    crypto_ctr_force_evp(false);
    return 0;
}

#define EVP_TEST(f) {#f "_evp", f, force_evp, unforce_evp, NULL}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_vectors),
        cmocka_unit_test(test_client_tag_policy),
        cmocka_unit_test(test_mtg_snapshots),
        cmocka_unit_test(test_dc_vectors),
        cmocka_unit_test(test_forbidden_prefixes),
        cmocka_unit_test(test_dc_header_roundtrip),
        cmocka_unit_test(test_crypto_helpers),
        cmocka_unit_test(test_x25519_random),
        cmocka_unit_test(test_ctr_park),
        cmocka_unit_test(test_ctr_many_streams),
        EVP_TEST(test_ctr_park),
        EVP_TEST(test_ctr_many_streams),
        EVP_TEST(test_framing_transparent),
        EVP_TEST(test_random_public),
        cmocka_unit_test(test_random_block),
        cmocka_unit_test(test_random_public),
        cmocka_unit_test(test_framing_transparent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
