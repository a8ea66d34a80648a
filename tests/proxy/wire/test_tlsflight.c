/*
 * tlsflight: parsing a recorded server first flight (issue 23). Flights are built here
 * byte by byte in the shapes real servers send: a TLS 1.3 ServerHello with the session id
 * echoed, x25519 and supported_versions, CCS, then the encrypted handshake in one record
 * (gnutls-like) or four (OpenSSL writes each message in its own), in one TCP read or with
 * the ServerHello alone in the first.
 */
#include "tgtest.h"

#include "proxy_bytes.h"

#include "proxy/wire/faketls.h"
#include "proxy/wire/tlsflight.h"

#include <errno.h>

static const uint8_t sid[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};

/* ServerHello record (pb_server_hello): supported_versions then key_share, or reversed. */
static void server_hello(struct pbytes *b, bool reversed, uint16_t cipher)
{
    pb_server_hello(b, sid, reversed, cipher);
}

static void record(struct pbytes *b, uint8_t type, size_t len)
{
    pb_put8(b, type), pb_put16(b, 0x0303), pb_put16(b, len);
    for (size_t i = 0; i < len; i++)
        pb_put8(b, (uint8_t)i);
}

static void test_openssl_like_flight(void **state)
{
    (void)state;
    struct pbytes b = {0};
    server_hello(&b, false, 0x1302);
    size_t sh = b.n;
    record(&b, 20, 1);
    b.b[b.n - 1] = 1;
    record(&b, 23, 23);   /* EncryptedExtensions */
    record(&b, 23, 2900); /* Certificate */
    record(&b, 23, 281);  /* CertificateVerify */
    record(&b, 23, 53);   /* Finished */
    uint32_t seg[] = {(uint32_t)sh, (uint32_t)(b.n - sh)};
    struct tlsflight f;
    char err[160];
    assert_int_equal(tlsflight_parse(b.b, b.n, seg, 2, sid, 32, &f, err, sizeof err), 0);
    assert_int_equal(f.legacy_version, 0x0303);
    assert_false(f.hrr);
    assert_int_equal(f.sid_len, 32);
    assert_true(f.sid_echo);
    assert_int_equal(f.cipher, 0x1302);
    assert_int_equal(f.next, 2);
    assert_int_equal(f.ext[0].type, 43);
    assert_int_equal(f.ext[0].len, 2);
    assert_int_equal(f.ext[1].type, 51);
    assert_int_equal(f.ext[1].len, 36);
    assert_int_equal(f.version, 0x0304);
    assert_int_equal(f.group, 0x001d);
    assert_int_equal(f.key_len, 32);
    assert_true(f.sh_record_only);
    assert_int_equal(f.sh_record_len, sh - 5);
    assert_int_equal(f.nrec, 6);
    assert_true(f.ccs);
    assert_int_equal(f.nenc, 4);
    assert_int_equal(f.enc_total, 23 + 2900 + 281 + 53);
    assert_false(f.truncated);
    assert_false(f.alert);
    char text[64];
    assert_string_equal(tlsflight_segments(&f, text, sizeof text), "SH|CCS+AD+AD+AD+AD");
    /* another client session id: no echo */
    uint8_t other[32] = {0};
    assert_int_equal(tlsflight_parse(b.b, b.n, seg, 2, other, 32, &f, err, sizeof err), 0);
    assert_false(f.sid_echo);
}

/* One encrypted record, the certificate read cut in the middle of it. */
static void test_packed_flight_cut_reads(void **state)
{
    (void)state;
    struct pbytes b = {0};
    server_hello(&b, true, 0x1301);
    record(&b, 20, 1);
    b.b[b.n - 1] = 1;
    size_t before = b.n;
    record(&b, 23, 3300);
    uint32_t seg[] = {(uint32_t)before + 1000, (uint32_t)(b.n - before - 1000)};
    struct tlsflight f;
    char err[160];
    assert_int_equal(tlsflight_parse(b.b, b.n, seg, 2, sid, 32, &f, err, sizeof err), 0);
    assert_int_equal(f.ext[0].type, 51); /* order kept */
    assert_int_equal(f.ext[1].type, 43);
    assert_int_equal(f.nenc, 1);
    assert_int_equal(f.enc_total, 3300);
    assert_true(f.seg_cuts[0]);
    assert_false(f.seg_cuts[1]);
    char text[64];
    assert_string_equal(tlsflight_segments(&f, text, sizeof text), "SH+CCS+AD~|~");
    /* recorded only partly: truncated, not an error */
    assert_int_equal(tlsflight_parse(b.b, before + 1000, NULL, 0, sid, 32, &f, err, sizeof err),
                     0);
    assert_true(f.truncated);
    assert_int_equal(f.nenc, 1);
}

static void test_hello_retry_request(void **state)
{
    (void)state;
    static const uint8_t hrr[32] = {0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11,
                                    0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
                                    0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e,
                                    0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c};
    struct pbytes b = {0};
    server_hello(&b, false, 0x1301);
    memcpy(b.b + 11, hrr, 32);
    struct tlsflight f;
    char err[160];
    assert_int_equal(tlsflight_parse(b.b, b.n, NULL, 0, sid, 32, &f, err, sizeof err), 0);
    assert_true(f.hrr);
}

static void test_malformed(void **state)
{
    (void)state;
    struct tlsflight f;
    char err[160];
    static const uint8_t alert[] = {21, 3, 3, 0, 2, 2, 40};
    assert_int_equal(tlsflight_parse(alert, sizeof alert, NULL, 0, NULL, 0, &f, err, sizeof err),
                     -EBADMSG);
    assert_true(f.alert);
    assert_non_null(strstr(err, "alert"));
    static const uint8_t http[] = "HTTP/1.1 400 Bad Request\r\n";
    assert_int_equal(tlsflight_parse(http, sizeof http - 1, NULL, 0, NULL, 0, &f, err, sizeof err),
                     -EBADMSG);
    assert_non_null(strstr(err, "offset 0"));
    struct pbytes b = {0};
    server_hello(&b, false, 0x1301);
    /* an extension overrunning the hello */
    struct pbytes c = b;
    c.b[c.n - 36 - 4 + 3] = 200;
    assert_int_equal(tlsflight_parse(c.b, c.n, NULL, 0, NULL, 0, &f, err, sizeof err), -EBADMSG);
    /* the ServerHello record cut short */
    assert_int_equal(tlsflight_parse(b.b, b.n - 1, NULL, 0, NULL, 0, &f, err, sizeof err),
                     -EBADMSG);
    /* segments that do not add up */
    uint32_t seg[] = {1, 2};
    assert_int_equal(tlsflight_parse(b.b, b.n, seg, 2, NULL, 0, &f, err, sizeof err), -EINVAL);
    /* too many records */
    c = b;
    for (int i = 0; i < TLSFLIGHT_MAX_REC; i++)
        record(&c, 23, 1);
    assert_int_equal(tlsflight_parse(c.b, c.n, NULL, 0, NULL, 0, &f, err, sizeof err), -E2BIG);
    /* every prefix parses or fails cleanly */
    for (size_t k = 0; k < b.n; k++)
        (void)tlsflight_parse(b.b, k, NULL, 0, sid, 32, &f, err, sizeof err);
}

/* The probe's ClientHello: 517 bytes, a well-formed hello (tgproxy's own parser reads it),
   SNI and session id as given, TLS 1.3 suites first, fresh GREASE each time. */
static void test_probe_client_hello(void **state)
{
    (void)state;
    uint8_t rnd[TLSFLIGHT_HELLO_RND], out[TLSFLIGHT_HELLO_LEN];
    for (size_t i = 0; i < sizeof rnd; i++)
        rnd[i] = (uint8_t)(i * 37 + 11);
    size_t n = tlsflight_client_hello(out, sizeof out, "www.example.org", rnd);
    assert_int_equal(n, TLSFLIGHT_HELLO_LEN);
    size_t rl = 0;
    assert_int_equal(faketls_peek(out, n, &rl), FAKETLS_OK);
    assert_int_equal(rl, n);
    struct faketls_hello h;
    const char *why = NULL;
    if (faketls_parse_hello(out, n, &h, &why) != FAKETLS_OK)
        fail_msg("probe hello: %s", why ? why : "?");
    assert_true(h.has_sni);
    assert_int_equal(h.nsni, 1);
    assert_int_equal(h.sni[0].len, 15);
    assert_memory_equal(out + h.sni[0].off, "www.example.org", 15);
    assert_int_equal(h.session_id_len, 32);
    assert_memory_equal(h.session_id, rnd + 32, 32);
    assert_memory_equal(h.random, rnd, 32);
    assert_int_equal(h.cipher, 0x1301);
    assert_int_equal(tlsflight_client_hello(out, 100, "x", rnd), 0);
    char longname[260];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    assert_int_equal(tlsflight_client_hello(out, sizeof out, longname, rnd), 0);
}

/* What the answer can copy of a flight, and what it says it cannot. */
static void test_answer_from_flight(void **state)
{
    (void)state;
    struct pbytes b = {0};
    server_hello(&b, false, 0x1302);
    record(&b, 20, 1);
    b.b[b.n - 1] = 1;
    record(&b, 23, 3000);
    struct tlsflight f;
    char err[160];
    assert_int_equal(tlsflight_parse(b.b, b.n, NULL, 0, sid, 32, &f, err, sizeof err), 0);
    struct faketls_answer a = {.cipher = 0x1301};
    assert_int_equal(tlsflight_answer(&f, 5, &a), 0); /* the whole shape */
    assert_int_equal(a.cipher, 0x1302);
    assert_true(a.versions_first);
    assert_int_equal(a.appdata_len, 3005);
    assert_int_equal(tlsflight_answer(&f, -1000, &a), 0);
    assert_int_equal(a.appdata_len, 3000 - 32); /* jitter bounded */
    struct tlsflight g = f;
    g.ccs = false, g.group = 0x0017, g.key_len = 65, g.sid_echo = false, g.cipher = 0xc02f;
    g.enc_total = 60000;
    a = (struct faketls_answer){.cipher = 0x1301};
    assert_int_equal(tlsflight_answer(&g, 0, &a), TLSFLIGHT_DIFF_NO_CCS | TLSFLIGHT_DIFF_GROUP |
                                                       TLSFLIGHT_DIFF_SESSION |
                                                       TLSFLIGHT_DIFF_CIPHER);
    assert_int_equal(a.cipher, 0x1301); /* kept */
    assert_int_equal(a.appdata_len, FAKETLS_RECORD_MAX_OUT);
    g = f;
    g.ext[g.next++] = (struct tlsflight_ext){41, 2}; /* pre_shared_key */
    assert_int_equal(tlsflight_answer(&g, 0, &a), TLSFLIGHT_DIFF_EXTS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openssl_like_flight),
        cmocka_unit_test(test_packed_flight_cut_reads),
        cmocka_unit_test(test_hello_retry_request),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_probe_client_hello),
        cmocka_unit_test(test_answer_from_flight),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
