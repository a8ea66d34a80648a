/*
 * tlsprofile: the learned FakeTLS answer (issue 23). Site flights are built here byte by
 * byte (a TLS 1.3 ServerHello, CCS, then the encrypted handshake in several records, cut
 * into TCP reads as the site cut them) and summarised into a profile; the answer built from
 * it is verified as Telegram clients verify it (HMAC over the exact bytes) and read back
 * with the recorded-flight parser (a NIST-curve key share checked as a point of its curve by
 * OpenSSL); the stored form round-trips and its parser refuses bad
 * files with the line and the reason.
 */
#include "tgtest.h"

#include "proxy_bytes.h"

#include "proxy/wire/crypto.h"
#include "proxy/wire/faketls.h"
#include "proxy/wire/tlsprofile.h"

#include <errno.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

static const uint8_t sid[32] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6,
                                7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22};

/* A site's flight: ServerHello (key_share first when ks_first), CCS, then nenc encrypted
   records of len[i]; *sh_ccs = the offset after the CCS. */
static void flight(struct pbytes *b, bool ks_first, uint16_t cipher, size_t nenc, const size_t *len,
                   size_t *sh_ccs)
{
    pb_server_hello(b, sid, ks_first, cipher);
    pb_put8(b, 20), pb_put16(b, 0x0303), pb_put16(b, 1), pb_put8(b, 1);
    *sh_ccs = b->n;
    for (size_t r = 0; r < nenc; r++) {
        pb_put8(b, 23), pb_put16(b, 0x0303), pb_put16(b, len[r]);
        for (size_t i = 0; i < len[r]; i++)
            pb_put8(b, (uint8_t)(i * 7));
    }
}

/* A gnutls-like site: key_share first, SH+CCS in one segment, five records in the next
   (split), or both read at once. */
static void parse_split(struct tlsflight *f, size_t extra, bool split)
{
    static const size_t lens[5] = {10, 1900, 300, 53, 0};
    size_t l[5];
    memcpy(l, lens, sizeof l);
    l[4] = 53 + extra;
    struct pbytes b = {0};
    size_t cut;
    flight(&b, true, 0x1301, 5, l, &cut);
    uint32_t seg[2] = {(uint32_t)cut, (uint32_t)(b.n - cut)}, one = (uint32_t)b.n;
    char err[160];
    assert_int_equal(
        tlsflight_parse(b.b, b.n, split ? seg : &one, split ? 2 : 1, sid, 32, f, err, sizeof err),
        0);
}

static void gnutls_profile(struct tlsprofile *p)
{
    static struct tlsflight f[3];
    parse_split(&f[0], 0, true);
    parse_split(&f[1], 16, true);
    parse_split(&f[2], 0, false); /* a slow read saw both segments as one */
    char err[160];
    assert_int_equal(tlsprofile_build("example.com", f, 3, 1764640000, p, err, sizeof err), 0);
}

static void test_build_from_flights(void **state)
{
    (void)state;
    struct tlsprofile p;
    gnutls_profile(&p);
    assert_string_equal(p.domain, "example.com");
    assert_int_equal(p.probes, 3);
    assert_int_equal(p.cipher, 0x1301);
    assert_true(p.sid_echo);
    assert_true(p.ccs);
    assert_int_equal(p.next, 2);
    assert_int_equal(p.ext[0].type, 51);
    assert_int_equal(p.ext[0].len, 36);
    assert_int_equal(p.ext[1].type, 43);
    assert_int_equal(p.group, 0x001d);
    assert_int_equal(p.key_len, 32);
    assert_int_equal(p.selected, 0x0304);
    assert_int_equal(p.nenc_min, 5);
    assert_int_equal(p.nenc_max, 5);
    assert_int_equal(p.nlens, 3);
    uint32_t wire = 10 + 1900 + 300 + 53 + 53 + 5 * 5;
    assert_int_equal(p.lens[0], wire);
    assert_int_equal(p.lens[1], wire + 16);
    assert_int_equal(p.lens[2], wire);
    /* two of three probes saw the split: it wins, and its cut is after the CCS */
    assert_string_equal(p.pattern, "SH+CCS|AD+AD+AD+AD+AD");
    assert_int_equal(p.ncuts, 1);
    /* ServerHello record 5 + 4 + 118 (version, random, session id, cipher, compression,
       46 bytes of extensions), then the CCS record (6) */
    assert_int_equal(p.cuts[0], 5 + 4 + 118 + 6);
    assert_int_equal(tlsprofile_diff(&p), TLSFLIGHT_DIFF_RECORDS);
    char text[1024];
    assert_non_null(strstr(tlsprofile_diff_text(tlsprofile_diff(&p), text, sizeof text),
                           "several records"));
}

/* A tie between patterns goes to the one with more segments (reads only merge). */
static void test_pattern_tie_prefers_split(void **state)
{
    (void)state;
    static struct tlsflight f[2];
    parse_split(&f[0], 0, false);
    parse_split(&f[1], 0, true);
    struct tlsprofile p;
    assert_int_equal(tlsprofile_build("a.example", f, 2, 1, &p, NULL, 0), 0);
    assert_string_equal(p.pattern, "SH+CCS|AD+AD+AD+AD+AD");
}

/* A busy host: the reads of most probes merged the site's two segments (TCP_INFO counted
   two segments in one read), one probe read them apart. The merged majority must not win:
   the pattern is the one read apart, with its cut. */
static void test_merged_reads_do_not_vote(void **state)
{
    (void)state;
    static struct tlsflight f[5];
    uint32_t two[1] = {2}; /* one read, two wire segments */
    for (int i = 0; i < 4; i++) {
        parse_split(&f[i], 0, false);
        tlsflight_mark_merged(&f[i], two, 65483); /* loopback's MSS: one segment would do */
        assert_true(f[i].seg_merged);
    }
    parse_split(&f[4], 0, true);
    uint32_t apart[2] = {1, 1};
    tlsflight_mark_merged(&f[4], apart, 65483);
    assert_false(f[4].seg_merged);
    struct tlsprofile p;
    assert_int_equal(tlsprofile_build("a.example", f, 5, 1, &p, NULL, 0), 0);
    assert_int_equal(p.probes, 5);
    assert_string_equal(p.pattern, "SH+CCS|AD+AD+AD+AD+AD");
    assert_int_equal(p.ncuts, 1);
    assert_int_equal(p.cuts[0], 5 + 4 + 118 + 6);
    /* without the counts the merged majority wins, as before */
    for (int i = 0; i < 5; i++)
        f[i].seg_merged = false;
    assert_int_equal(tlsprofile_build("a.example", f, 5, 1, &p, NULL, 0), 0);
    assert_string_equal(p.pattern, "SH+CCS+AD+AD+AD+AD+AD");

    /* what counts as merged: more segments than the read's bytes need at that MSS, across a
       record boundary. A 2,400-byte read in two full 1,448-byte segments is the path's. */
    struct tlsflight g;
    parse_split(&g, 0, false);
    tlsflight_mark_merged(&g, two, (uint32_t)(g.seg_len[0] + 1) / 2);
    assert_false(g.seg_merged);
    tlsflight_mark_merged(&g, NULL, 65483); /* no counts: nothing known */
    assert_false(g.seg_merged);
    tlsflight_mark_merged(&g, two, 0);
    assert_false(g.seg_merged);
    uint32_t three[1] = {3};
    tlsflight_mark_merged(&g, three, (uint32_t)(g.seg_len[0] + 1) / 2);
    assert_true(g.seg_merged);
    /* a read inside one record (no boundary in it) hides no record-aligned cut, however
       many segments it took */
    static const size_t lens[5] = {10, 1900, 300, 53, 53};
    struct pbytes b = {0};
    size_t cut;
    flight(&b, true, 0x1301, 5, lens, &cut);
    uint32_t seg[3] = {(uint32_t)cut + 15 + 100, 500, 0};
    seg[2] = (uint32_t)b.n - seg[0] - seg[1];
    struct tlsflight h;
    char err[160];
    assert_int_equal(tlsflight_parse(b.b, b.n, seg, 3, sid, 32, &h, err, sizeof err), 0);
    uint32_t inner[3] = {1, 4, 1};
    tlsflight_mark_merged(&h, inner, 65483);
    assert_false(h.seg_merged);
    inner[2] = 2; /* the last read holds three record boundaries */
    tlsflight_mark_merged(&h, inner, 65483);
    assert_true(h.seg_merged);
}

/* The answer, as a Telegram client checks it, then as a prober records it. */
static void test_answer_is_the_site_shape(void **state)
{
    (void)state;
    struct tlsprofile p;
    gnutls_profile(&p);
    static const uint8_t key[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    struct faketls_hello h = {.session_id_len = 32, .cipher = 0x1302};
    memcpy(h.session_id, sid, 32);
    for (int i = 0; i < 32; i++)
        h.random[i] = (uint8_t)(0x30 + i);
    size_t seen[128] = {0}, distinct = 0;
    for (int round = 0; round < 200; round++) {
        uint8_t out[TLSPROFILE_ANSWER_MAX];
        size_t cuts[TLSPROFILE_MAX_CUTS], ncuts = 0;
        int n = tlsprofile_answer(&p, &h, key, out, sizeof out, cuts, &ncuts);
        assert_true(n > 0);
        uint8_t got[32], mac[32];
        memcpy(got, out + 11, 32);
        memset(out + 11, 0, 32);
        struct crypto_part parts[] = {{h.random, 32}, {out, (size_t)n}};
        assert_int_equal(crypto_hmac_sha256(key, 16, parts, 2, mac), 0);
        assert_memory_equal(got, mac, 32);
        /* what each client checks after the ServerHello record: 14 03 03 00 01 01 17 03 03 */
        size_t shl = 5 + ((size_t)out[3] << 8 | out[4]);
        assert_memory_equal(out + shl, "\x14\x03\x03\x00\x01\x01\x17\x03\x03", 9);
        size_t adl = (size_t)out[shl + 9] << 8 | out[shl + 10];
        assert_int_equal(shl + 11 + adl, (size_t)n);
        struct tlsflight f;
        char err[160];
        assert_int_equal(tlsflight_parse(out, (size_t)n, NULL, 0, sid, 32, &f, err, sizeof err), 0);
        assert_int_equal(f.cipher, 0x1301); /* the site's, not the hello's first */
        assert_int_equal(f.next, 2);
        assert_int_equal(f.ext[0].type, 51);
        assert_int_equal(f.ext[1].type, 43);
        assert_int_equal(f.key_len, 32);
        assert_true(f.sid_echo);
        assert_int_equal(f.nenc, 1);
        long d = (long)(5 + adl) - (long)p.lens[0];
        assert_true(d >= -TLSPROFILE_JITTER && d <= TLSPROFILE_JITTER + 16);
        /* the site's cut after the CCS, in our bytes */
        assert_int_equal(ncuts, 1);
        assert_int_equal(cuts[0], shl + 6);
        size_t k = 0;
        while (k < distinct && seen[k] != adl)
            k++;
        if (k == distinct && distinct < 128)
            seen[distinct++] = adl;
    }
    assert_true(distinct > 20); /* never one constant length */
}

/* pt is a public key of curve (OpenSSL's decoding of the point, then its public-key check:
   the point lies on the curve and is not the identity). */
static bool point_on_curve(const char *curve, const uint8_t *pt, size_t n)
{
    OSSL_PARAM_BLD *b = OSSL_PARAM_BLD_new();
    assert_non_null(b);
    assert_int_equal(OSSL_PARAM_BLD_push_utf8_string(b, OSSL_PKEY_PARAM_GROUP_NAME, curve, 0), 1);
    assert_int_equal(OSSL_PARAM_BLD_push_octet_string(b, OSSL_PKEY_PARAM_PUB_KEY, pt, n), 1);
    OSSL_PARAM *prm = OSSL_PARAM_BLD_to_param(b);
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    EVP_PKEY *k = NULL;
    bool ok = prm && c && EVP_PKEY_fromdata_init(c) == 1 &&
              EVP_PKEY_fromdata(c, &k, EVP_PKEY_PUBLIC_KEY, prm) == 1;
    EVP_PKEY_CTX *v = ok ? EVP_PKEY_CTX_new_from_pkey(NULL, k, NULL) : NULL;
    ok = ok && v && EVP_PKEY_public_check(v) == 1;
    EVP_PKEY_CTX_free(v);
    EVP_PKEY_free(k);
    EVP_PKEY_CTX_free(c);
    OSSL_PARAM_free(prm);
    OSSL_PARAM_BLD_free(b);
    return ok;
}

/* A site whose key share is secp256r1, secp384r1 or secp521r1: the answer's share is a point
   of that curve (as an observer can check), fresh each time; not random bytes. */
static void test_answer_nist_key_share_is_a_point(void **state)
{
    (void)state;
    static const struct {
        uint16_t group;
        uint16_t len;
        const char *curve;
    } g[] = {{0x0017, 65, "P-256"}, {0x0018, 97, "P-384"}, {0x0019, 133, "P-521"}};
    static const uint8_t key[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    struct faketls_hello h = {.session_id_len = 32, .cipher = 0x1301};
    memcpy(h.session_id, sid, 32);
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        struct tlsprofile p;
        gnutls_profile(&p); /* key_share first */
        p.group = g[i].group;
        p.key_len = g[i].len;
        p.ext[0].len = (uint16_t)(4 + g[i].len);
        assert_int_equal(tlsprofile_diff(&p), TLSFLIGHT_DIFF_RECORDS); /* nothing to report */
        uint8_t prev[133] = {0};
        for (int round = 0; round < 8; round++) {
            uint8_t out[TLSPROFILE_ANSWER_MAX];
            size_t cuts[TLSPROFILE_MAX_CUTS], ncuts = 0;
            assert_true(tlsprofile_answer(&p, &h, key, out, sizeof out, cuts, &ncuts) > 0);
            /* record 5, handshake 4, version 2, random 32, session id 1 + 32, cipher 2,
               compression 1, extensions' length 2: key_share's type, length, group, length */
            const uint8_t *ks = out + 81;
            assert_int_equal(ks[0] << 8 | ks[1], 51);
            assert_int_equal(ks[4] << 8 | ks[5], g[i].group);
            assert_int_equal(ks[6] << 8 | ks[7], g[i].len);
            if (!point_on_curve(g[i].curve, ks + 8, g[i].len))
                fail_msg("the %s key share is not a point of the curve", g[i].curve);
            assert_memory_not_equal(ks + 8, prev, g[i].len); /* fresh each time */
            memcpy(prev, ks + 8, g[i].len);
        }
    }
    /* the check itself: random bytes after 04 are not a point */
    uint8_t junk[65];
    junk[0] = 0x04;
    for (int i = 1; i < 65; i++)
        junk[i] = (uint8_t)(i * 37 + 11);
    assert_false(point_on_curve("P-256", junk, sizeof junk));
}

static void test_store_round_trip(void **state)
{
    (void)state;
    struct tlsprofile p[2], q[4];
    gnutls_profile(&p[0]);
    p[1] = p[0];
    strcpy(p[1].domain, "other.example");
    p[1].ncuts = 0;
    char text[4096];
    size_t len = tlsprofile_format(p, 2, text, sizeof text);
    assert_true(len > 0);
    size_t n = 0;
    char err[160];
    assert_int_equal(tlsprofile_parse(text, len, q, 4, &n, err, sizeof err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(q[1].domain, "other.example");
    assert_int_equal(q[0].ncuts, 1);
    assert_int_equal(q[0].cuts[0], p[0].cuts[0]);
    assert_int_equal(q[1].ncuts, 0);
    assert_int_equal(q[0].nlens, 3);
    assert_memory_equal(q[0].lens, p[0].lens, 3 * sizeof p[0].lens[0]);
    assert_string_equal(q[0].pattern, p[0].pattern);
    assert_int_equal(q[0].learned_s, 1764640000);
    assert_int_equal(tlsprofile_format(p, 2, text, 100), 0); /* too small: nothing */
}

static void expect_bad(const char *text, const char *want)
{
    struct tlsprofile q[2];
    size_t n = 7;
    char err[160] = "";
    int rc = tlsprofile_parse(text, strlen(text), q, 2, &n, err, sizeof err);
    assert_true(rc < 0);
    assert_int_equal(n, 0);
    if (!strstr(err, want))
        fail_msg("\"%s\": got \"%s\", want \"%s\"", text, err, want);
}

#define HEAD "tgproxy-tls-front 1\ndomain a.example\n"
#define BODY                                                                                       \
    "learned 5\nprobes 1\nversion 0303\ncipher 1301\nsid-echo 1\nccs 1\n"                          \
    "ext 0033 36\next 002b 2\ngroup 001d 32\nselected 0304\nrecords 1 1\nlens 3000\ncuts\n"        \
    "pattern SH+CCS+AD\n"

static void test_store_refuses_bad_files(void **state)
{
    (void)state;
    struct tlsprofile q[2];
    size_t n = 0;
    char err[160];
    const char *good = HEAD BODY "end\n";
    assert_int_equal(tlsprofile_parse(good, strlen(good), q, 2, &n, err, sizeof err), 0);
    assert_int_equal(n, 1);
    expect_bad("", "line 0: empty file");
    expect_bad("hello\n", "line 1: not a tgproxy tls-front file");
    expect_bad(HEAD BODY, "no \"end\" line");
    expect_bad(HEAD "learned 5\nend\n", "line 4: profile incomplete");
    expect_bad(HEAD BODY "color blue\nend\n", "line 17: unknown line");
    expect_bad(HEAD "cipher 13x1\n", "line 3: four hex digits");
    expect_bad(HEAD "learned 5\nlearned 6\n", "line 4: a line given twice");
    expect_bad(HEAD "lens 5\n", "lens: each a byte count");
    expect_bad(HEAD "cuts 10 5\n", "cuts: increasing");
    expect_bad(HEAD "pattern SH<script>\n", "pattern: only");
    expect_bad("tgproxy-tls-front 1\ndomain a/b\n", "line 2: domain has a character");
    expect_bad(HEAD BODY "end\ndomain a.example\n", "line 18: a domain with two profiles");
    expect_bad("tgproxy-tls-front 1\ndomain a.example\n"
               "learned 5\nprobes 1\nversion 0303\ncipher 1301\nsid-echo 1\nccs 1\n"
               "ext 0033 40\next 002b 2\ngroup 001d 32\nselected 0304\nrecords 1 1\nlens 3000\n"
               "cuts\npattern SH\nend\n",
               "line 17: group's key length does not match");
    /* more profiles than room: E2BIG */
    const char *three = HEAD BODY "end\ndomain b.example\n" BODY "end\ndomain c.example\n" BODY
                                  "end\n";
    assert_int_equal(tlsprofile_parse(three, strlen(three), q, 2, &n, err, sizeof err), -E2BIG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build_from_flights),
        cmocka_unit_test(test_pattern_tie_prefers_split),
        cmocka_unit_test(test_merged_reads_do_not_vote),
        cmocka_unit_test(test_answer_is_the_site_shape),
        cmocka_unit_test(test_answer_nist_key_share_is_a_point),
        cmocka_unit_test(test_store_round_trip),
        cmocka_unit_test(test_store_refuses_bad_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
