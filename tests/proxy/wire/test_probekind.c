/*
 * probekind and probeshape (issue 23, `tgproxy probe`): the probe kinds' bytes are what
 * they claim (the keyed hellos pass or fail faketls_validate for the reason they name), a
 * genuine FakeTLS answer is told from any other, and the comparisons call two answers the
 * same exactly when nothing but a TLS server's randomness tells them apart.
 */
#include "tgtest.h"

#include "proxy/wire/faketls.h"
#include "proxy/wire/probekind.h"
#include "proxy/wire/probeshape.h"
#include "proxy/wire/tlsflight.h"

#include <time.h>

static const uint8_t key[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static uint8_t rnd[TLSFLIGHT_HELLO_RND];
static uint8_t buf[PROBEKIND_BYTES_MAX];

static size_t kind_index(const char *name)
{
    for (size_t i = 0; i < probekind_count(); i++)
        if (strcmp(probekind_get(i)->name, name) == 0)
            return i;
    fail_msg("no probe kind '%s'", name);
    return 0;
}

static enum faketls_verdict validate(const uint8_t *h, size_t n, int64_t now)
{
    struct faketls_hello hello;
    const char *why = NULL;
    assert_int_equal(faketls_parse_hello(h, n, &hello, &why), FAKETLS_OK);
    struct faketls_key k = {.domain = "example.com", .domain_len = 11};
    memcpy(k.key, key, 16);
    struct faketls_policy pol = {.now = now, .past_s = 120, .future_s = 120};
    struct faketls_match m;
    return faketls_validate(&hello, &k, 1, &pol, &m);
}

static void test_kinds_build(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof rnd; i++)
        rnd[i] = (uint8_t)(i * 7 + 3);
    int64_t now = (int64_t)time(NULL);
    struct probekind_ctx with = {"example.com", key, now, rnd},
                         without = {"example.com", NULL, now, rnd};
    assert_true(probekind_count() >= 20);
    for (size_t i = 0; i < probekind_count(); i++) {
        const struct probekind *k = probekind_get(i);
        size_t n = probekind_bytes(i, &with, buf, sizeof buf);
        assert_true(n != (size_t)-1 && n <= PROBEKIND_BYTES_MAX);
        if (k->flags & PROBEKIND_KEY)
            assert_true(probekind_bytes(i, &without, buf, sizeof buf) == (size_t)-1);
        assert_true(probekind_bytes(i, &with, buf, 16) == (size_t)-1); /* cap too small */
    }
    assert_null(probekind_get(probekind_count()));
    assert_int_equal(probekind_bytes(kind_index("silent"), &with, buf, sizeof buf), 0);
    assert_int_equal(
        probekind_bytes(kind_index("hello record length 16385"), &with, buf, sizeof buf),
        5 + 16385);
    size_t n = probekind_bytes(kind_index("HTTP GET /"), &with, buf, sizeof buf);
    assert_int_equal(n, strlen("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"));
    /* the keyed hellos fail validation for the reason each names, the replayed one passes */
    n = probekind_bytes(kind_index("right key, foreign SNI"), &with, buf, sizeof buf);
    assert_int_equal(validate(buf, n, now), FAKETLS_BAD_SNI);
    n = probekind_bytes(kind_index("right key, 1 h old"), &with, buf, sizeof buf);
    assert_int_equal(validate(buf, n, now), FAKETLS_BAD_TIME);
    n = probekind_bytes(kind_index("right key, 1 h ahead"), &with, buf, sizeof buf);
    assert_int_equal(validate(buf, n, now), FAKETLS_BAD_TIME);
    size_t r = kind_index("replayed valid hello");
    assert_true(probekind_get(r)->flags & PROBEKIND_REPLAY);
    n = probekind_bytes(r, &with, buf, sizeof buf);
    assert_int_equal(validate(buf, n, now), FAKETLS_ACCEPT);
    n = probekind_bytes(kind_index("ClientHello, unknown key"), &with, buf, sizeof buf);
    assert_int_equal(n, TLSFLIGHT_HELLO_LEN);
    assert_int_equal(validate(buf, n, now), FAKETLS_BAD_DIGEST);
}

/* What a client checks: the answer faketls_server_hello builds is genuine, any change or
   another key is not, and a short or other-shaped answer is not. */
static void test_answer_genuine(void **state)
{
    (void)state;
    uint8_t hello[TLSFLIGHT_HELLO_LEN], ans[FAKETLS_SERVER_HELLO_MAX];
    size_t hl =
        probekind_signed_hello(hello, sizeof hello, "example.com", key, (int64_t)time(NULL), rnd);
    assert_int_equal(hl, TLSFLIGHT_HELLO_LEN);
    struct faketls_hello h;
    const char *why = NULL;
    assert_int_equal(faketls_parse_hello(hello, hl, &h, &why), FAKETLS_OK);
    struct faketls_answer a = {.cipher = h.cipher, .appdata_len = 2800};
    int n = faketls_server_hello(&h, key, &a, ans, sizeof ans);
    assert_true(n > 0);
    assert_true(probekind_answer_genuine(hello, hl, ans, (size_t)n, key));
    uint8_t other[16] = {9};
    assert_false(probekind_answer_genuine(hello, hl, ans, (size_t)n, other));
    assert_false(probekind_answer_genuine(hello, hl, ans, (size_t)n - 1, key));
    ans[100] ^= 1;
    assert_false(probekind_answer_genuine(hello, hl, ans, (size_t)n, key));
    ans[100] ^= 1;
    ans[5 + 128 + 1] = 0x15; /* the second record is not a CCS */
    assert_false(probekind_answer_genuine(hello, hl, ans, (size_t)n, key));
    assert_false(probekind_answer_genuine(hello, hl, ans, 3, key));
}

static struct probekind_obs obs(const void *b, size_t n, enum probekind_end end, long end_ms)
{
    return (struct probekind_obs){
        .bytes = b, .n = n, .total = n, .end = end, .end_ms = end_ms, .first_ms = n ? 5 : -1};
}

static const struct probekind tls_kind = {"t", PROBEKIND_TLS, false, NULL};
static const struct probekind raw_kind = {"r", 0, false, NULL};

static void test_compare_tls(void **state)
{
    (void)state;
    /* SH(60) CCS AD(2800): the same server, another signature length */
    static uint8_t a[5 + 60 + 6 + 5 + 2800], b[5 + 60 + 6 + 5 + 2808], c[sizeof b];
    for (int k = 0; k < 2; k++) {
        uint8_t *p = k ? b : a;
        size_t ad = k ? 2808 : 2800;
        memset(p, k ? 0x55 : 0xaa, k ? sizeof b : sizeof a);
        memcpy(p, "\x16\x03\x03\x00\x3c", 5);
        memcpy(p + 65, "\x14\x03\x03\x00\x01\x01", 6);
        p[71] = 0x17, p[72] = 3, p[73] = 3, p[74] = (uint8_t)(ad >> 8), p[75] = (uint8_t)ad;
    }
    struct probekind_obs s = obs(a, sizeof a, PROBEKIND_OPEN, 1000);
    struct probekind_obs v = obs(b, sizeof b, PROBEKIND_OPEN, 1000);
    assert_int_equal(probekind_compare(&tls_kind, &s, &v, 500), 0);
    char t[PROBEKIND_SHAPE_MAX];
    assert_string_equal(probekind_shape(a, sizeof a, true, t, sizeof t), "16/60 14/1 17/~2800");
    /* beyond the slack: another certificate chain */
    memcpy(c, b, sizeof c);
    c[74] = (uint8_t)((2800 + PROBEKIND_ENC_SLACK + 1) >> 8);
    c[75] = (uint8_t)(2800 + PROBEKIND_ENC_SLACK + 1);
    v = obs(c, sizeof c, PROBEKIND_OPEN, 1000);
    assert_int_equal(probekind_compare(&tls_kind, &s, &v, 500), PROBEKIND_DIFF_BYTES);
    /* alerts compare in full */
    static const uint8_t al1[] = {0x15, 3, 1, 0, 2, 2, 0x28}, al2[] = {0x15, 3, 1, 0, 2, 2, 0x32};
    s = obs(al1, sizeof al1, PROBEKIND_FIN, 3);
    v = obs(al2, sizeof al2, PROBEKIND_FIN, 3);
    assert_int_equal(probekind_compare(&tls_kind, &s, &v, 500), PROBEKIND_DIFF_BYTES);
    assert_string_equal(probekind_shape(al1, sizeof al1, true, t, sizeof t), "15/2:0228");
    v = obs(al1, sizeof al1, PROBEKIND_RST, 3);
    assert_int_equal(probekind_compare(&tls_kind, &s, &v, 500), PROBEKIND_DIFF_END);
    /* nothing vs an alert */
    v = obs(NULL, 0, PROBEKIND_FIN, 3);
    assert_int_equal(probekind_compare(&tls_kind, &s, &v, 500), PROBEKIND_DIFF_BYTES);
    assert_string_equal(probekind_shape(NULL, 0, true, t, sizeof t), "-");
}

static void test_compare_http_and_raw(void **state)
{
    (void)state;
    static const char h1[] = "HTTP/1.1 400 Bad Request\r\nServer: nginx\r\nDate: Mon, 01 Dec "
                             "2026 10:00:00 GMT\r\nContent-Length: 3\r\n\r\nbad";
    static const char h2[] = "HTTP/1.1 400 Bad Request\r\nServer: nginx\r\nDate: Mon, 01 Dec "
                             "2026 10:00:07 GMT\r\nContent-Length: 3\r\n\r\nbad";
    static const char h3[] = "HTTP/1.1 400 Bad Request\r\nServer: tgproxy\r\nDate: Mon, 01 Dec "
                             "2026 10:00:07 GMT\r\nContent-Length: 3\r\n\r\nbad";
    struct probekind_obs s = obs(h1, sizeof h1 - 1, PROBEKIND_FIN, 2);
    struct probekind_obs v = obs(h2, sizeof h2 - 1, PROBEKIND_FIN, 2);
    assert_int_equal(probekind_compare(&raw_kind, &s, &v, 500), 0);
    v = obs(h3, sizeof h3 - 1, PROBEKIND_FIN, 2);
    assert_int_equal(probekind_compare(&raw_kind, &s, &v, 500), PROBEKIND_DIFF_BYTES);
    char t[PROBEKIND_SHAPE_MAX];
    assert_string_equal(probekind_shape((const uint8_t *)h1, sizeof h1 - 1, true, t, sizeof t),
                        "HTTP/1.1 400 Bad Request; Server Date Content-Length; body 3");
    /* raw bytes: exactly */
    s = obs("abc", 3, PROBEKIND_FIN, 2);
    v = obs("abd", 3, PROBEKIND_FIN, 2);
    assert_int_equal(probekind_compare(&raw_kind, &s, &v, 500), PROBEKIND_DIFF_BYTES);
    v = obs("abc", 3, PROBEKIND_FIN, 2);
    assert_int_equal(probekind_compare(&raw_kind, &s, &v, 500), 0);
    assert_string_equal(probekind_shape((const uint8_t *)"abc", 3, false, t, sizeof t),
                        "3 bytes 616263");
    /* a reset after the close on one side only */
    v.reset_after_eof = true;
    assert_int_equal(probekind_compare(&raw_kind, &s, &v, 500), PROBEKIND_DIFF_RESET);
}

static void test_timing_classes(void **state)
{
    (void)state;
    struct probekind_obs s = obs(NULL, 0, PROBEKIND_FIN, 20), v = obs(NULL, 0, PROBEKIND_FIN, 450);
    assert_int_equal(probekind_compare(&raw_kind, &s, &v, 500), 0); /* both at once */
    v.end_ms = 3000;                                                /* at once vs a timer */
    assert_int_equal(probekind_compare(&raw_kind, &s, &v, 500), PROBEKIND_DIFF_TIME);
    s.end_ms = 3600; /* two timers within 1 s */
    assert_int_equal(probekind_compare(&raw_kind, &s, &v, 500), 0);
    s.end_ms = 60000; /* 60 s vs 3 s */
    assert_int_equal(probekind_compare(&raw_kind, &s, &v, 500), PROBEKIND_DIFF_TIME);
    s.end_ms = 3600;
    v.end = PROBEKIND_OPEN; /* a close vs none: the end kind says it */
    assert_int_equal(probekind_compare(&raw_kind, &s, &v, 500), PROBEKIND_DIFF_END);
    /* the first byte's class */
    s = obs("x", 1, PROBEKIND_FIN, 5000);
    v = obs("x", 1, PROBEKIND_FIN, 5000);
    v.first_ms = 4000;
    assert_int_equal(probekind_compare(&raw_kind, &s, &v, 500), PROBEKIND_DIFF_FIRST);
    assert_int_equal(probekind_tclass(-1, 500), PROBEKIND_T_OPEN);
    assert_int_equal(probekind_tclass(499, 500), PROBEKIND_T_NOW);
    assert_int_equal(probekind_tclass(500, 500), PROBEKIND_T_LATER);
}

/* A flight: ServerHello with extensions in order, CCS, nenc encrypted records of total. */
static struct tlsflight flight(bool versions_first, size_t nenc, uint32_t total, bool split)
{
    struct tlsflight f = {.legacy_version = 0x0303,
                          .sid_len = 32,
                          .sid_echo = true,
                          .cipher = 0x1301,
                          .next = 2,
                          .version = 0x0304,
                          .group = 0x1d,
                          .key_len = 32,
                          .sh_record_len = 122,
                          .ccs = true,
                          .nenc = nenc,
                          .enc_total = total};
    f.ext[versions_first ? 0 : 1] = (struct tlsflight_ext){43, 2};
    f.ext[versions_first ? 1 : 0] = (struct tlsflight_ext){51, 36};
    f.nrec = 2 + nenc;
    f.rec[0] = (struct tlsflight_rec){22, 0x0303, 122};
    f.rec[1] = (struct tlsflight_rec){20, 0x0303, 1};
    for (size_t i = 0; i < nenc; i++)
        f.rec[2 + i] = (struct tlsflight_rec){23, 0x0303, (uint16_t)(total / nenc)};
    if (split) { /* SH+CCS | AD... */
        f.nseg = 2;
        f.seg_end_rec[0] = 1;
        f.seg_end_rec[1] = (uint8_t)(1 + nenc);
    } else {
        f.nseg = 1;
        f.seg_end_rec[0] = (uint8_t)(1 + nenc);
    }
    return f;
}

static const struct probeshape_row *row(const struct probeshape_row *rows, const char *feature)
{
    for (size_t i = 0; i < PROBESHAPE_ROWS; i++)
        if (strcmp(rows[i].feature, feature) == 0)
            return &rows[i];
    fail_msg("no row '%s'", feature);
    return NULL;
}

static void test_shape_compare(void **state)
{
    (void)state;
    struct probeshape_row rows[PROBESHAPE_ROWS];
    struct tlsflight site[3] = {flight(true, 4, 2810, false), flight(true, 4, 2810, false),
                                flight(true, 4, 2812, false)};
    /* the learned answer: one record of the site's length +-32, the site's order */
    struct tlsflight good[3] = {flight(true, 1, 2790, false), flight(true, 1, 2840, false),
                                flight(true, 1, 2801, false)};
    assert_int_equal(probeshape_compare(site, 3, good, 3, rows), 0);
    assert_int_equal(row(rows, "encrypted records")->verdict, PROBESHAPE_LIMIT);
    assert_string_equal(row(rows, "encrypted records")->site, "4");
    assert_string_equal(row(rows, "encrypted bytes")->site, "2810..2812");
    assert_string_equal(row(rows, "encrypted bytes")->proxy, "2790..2840");
    assert_string_equal(row(rows, "extensions (type/len)")->site, "43/2 51/36");
    assert_string_equal(row(rows, "reads up to data")->site, "SH+CCS+AD");
    /* today's answer: key_share first, 2500..4700 bytes */
    struct tlsflight today[3] = {flight(false, 1, 2600, false), flight(false, 1, 4400, false),
                                 flight(false, 1, 3100, false)};
    assert_int_equal(probeshape_compare(site, 3, today, 3, rows), 2);
    assert_int_equal(row(rows, "extensions (type/len)")->verdict, PROBESHAPE_DIFF);
    assert_int_equal(row(rows, "encrypted bytes")->verdict, PROBESHAPE_DIFF);
    /* a site that splits SH+CCS from the rest, an answer written at once */
    struct tlsflight split[2] = {flight(true, 5, 2876, true), flight(true, 5, 2876, true)};
    struct tlsflight one[2] = {flight(true, 1, 2870, false), flight(true, 1, 2880, false)};
    assert_int_equal(probeshape_compare(split, 2, one, 2, rows), 1);
    assert_int_equal(row(rows, "reads up to data")->verdict, PROBESHAPE_DIFF);
    assert_string_equal(row(rows, "reads up to data")->site, "SH+CCS|AD");
    /* a site whose length varies, an answer of one constant length */
    struct tlsflight vary[3] = {flight(true, 1, 2000, false), flight(true, 1, 2500, false),
                                flight(true, 1, 3000, false)};
    struct tlsflight fixed[3] = {flight(true, 1, 2500, false), flight(true, 1, 2500, false),
                                 flight(true, 1, 2500, false)};
    assert_int_equal(probeshape_compare(vary, 3, fixed, 3, rows), 1);
    assert_int_equal(row(rows, "encrypted bytes")->verdict, PROBESHAPE_DIFF);
    /* several records on the proxy's side too is no limit of FakeTLS: a difference */
    struct tlsflight two[1] = {flight(true, 2, 2810, false)};
    assert_int_equal(probeshape_compare(site, 3, two, 1, rows), 1);
    assert_int_equal(row(rows, "encrypted records")->verdict, PROBESHAPE_DIFF);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kinds_build),    cmocka_unit_test(test_answer_genuine),
        cmocka_unit_test(test_compare_tls),    cmocka_unit_test(test_compare_http_and_raw),
        cmocka_unit_test(test_timing_classes), cmocka_unit_test(test_shape_compare),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
