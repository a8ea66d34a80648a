/*
 * tlsscout against real TLS servers on 127.0.0.1 (issue 23): OpenSSL's s_server and
 * GnuTLS's gnutls-serv (two independent implementations), TLS 1.3, serving a chain of three
 * RSA certificates (root, intermediate, leaf: 2048-bit keys) that the test makes with the
 * openssl command. Each is probed 8 times with Telegram-like ClientHellos; the recorded
 * flights must parse and show what a TLS 1.3 server in middlebox-compatibility mode sends:
 * the session id echoed, a TLS 1.3 suite, supported_versions = 0304, an x25519 key share of
 * 32 bytes, a ChangeCipherSpec, and encrypted bytes enough for the certificate chain. The
 * shapes seen are printed (they go into the notes). A site that expects a PROXY v2
 * header answers a probe that sends one and refuses one that does not.
 */
#include "tgtest.h"

#include "proxy/services/tlsscout.h"
#include "proxy/wire/crypto.h"
#include "proxy/wire/faketls.h"
#include "pp_site.h"
#include "proxy_client.h"
#include "proxy_util.h"
#include "tls_front.h"

#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define PROBES 8

/* The FakeTLS answer tgproxy builds from the site's flight, to a Telegram client's hello:
   verified as the clients verify it (the HMAC over the three records), then recorded as the
   prober records the site, and compared with the site's shape. */
static void answer_like(const struct tlsflight *site, unsigned want_diff, const char *who)
{
    static const uint8_t key[16] = {7, 6, 5, 4, 3, 2, 1, 0, 9, 8, 7, 6, 5, 4, 3, 2};
    uint8_t hello[600], ans[FAKETLS_SERVER_HELLO_MAX];
    size_t hl = pcli_hello(hello, sizeof hello, key, "example.com", (int64_t)time(NULL));
    struct faketls_hello h;
    const char *why = NULL;
    assert_int_equal(faketls_parse_hello(hello, hl, &h, &why), FAKETLS_OK);
    struct faketls_answer a = {.cipher = h.cipher};
    int jitter = (int)crypto_random_range(0, 65) - 32;
    assert_int_equal(tlsflight_answer(site, jitter, &a), want_diff);
    int n = faketls_server_hello(&h, key, &a, ans, sizeof ans);
    assert_true(n > 0);
    /* the clients' check: HMAC(secret, client random || answer with its random zeroed) */
    uint8_t got[32], mac[32];
    memcpy(got, ans + 11, 32);
    memset(ans + 11, 0, 32);
    struct crypto_part parts[] = {{hello + 11, 32}, {ans, (size_t)n}};
    assert_int_equal(crypto_hmac_sha256(key, 16, parts, 2, mac), 0);
    assert_memory_equal(got, mac, 32);
    memcpy(ans + 11, got, 32);
    struct tlsflight f;
    char err[160];
    if (tlsflight_parse(ans, (size_t)n, NULL, 0, h.session_id, h.session_id_len, &f, err,
                        sizeof err) != 0)
        fail_msg("%s: answer: %s", who, err);
    assert_int_equal(f.cipher, site->cipher);
    assert_int_equal(f.next, site->next);
    for (size_t i = 0; i < f.next; i++) {
        assert_int_equal(f.ext[i].type, site->ext[i].type);
        assert_int_equal(f.ext[i].len, site->ext[i].len);
    }
    assert_int_equal(f.group, site->group);
    assert_int_equal(f.key_len, site->key_len);
    assert_true(f.sid_echo);
    assert_true(f.ccs);
    assert_int_equal(f.nenc, 1);
    long d = (long)f.enc_total - (long)site->enc_total;
    assert_true(d >= -32 && d <= 32);
}

static void probe_site(bool gnutls)
{
    struct tfront_pki p;
    tfront_pki_make(&p, "example.com", 2048);
    struct tfront s;
    tfront_start(&s, &p, gnutls);
    struct sockaddr_in a = psock_addr(s.port);
    for (int i = 0; i < PROBES; i++) {
        struct tlsflight f;
        char err[256] = "";
        int rc = tlsscout_probe((struct sockaddr *)&a, sizeof a, "example.com",
                                &(struct tlsscout_opts){.timeout_ms = 10000}, &f, err,
                                sizeof err);
        if (rc != 0)
            fail_msg("%s probe %d: %s", gnutls ? "gnutls" : "openssl", i, err);
        assert_false(f.hrr);
        assert_true(f.sid_echo);
        assert_true(f.cipher >= 0x1301 && f.cipher <= 0x1303);
        assert_int_equal(f.version, 0x0304);
        assert_int_equal(f.group, 0x001d);
        assert_int_equal(f.key_len, 32);
        assert_true(f.ccs);
        assert_true(f.nenc >= 1);
        assert_true(f.enc_total > 2000); /* two or three RSA certificates at least */
        assert_false(f.truncated);
        /* neither packs its encrypted flight into one record; gnutls-serv writes SH+CCS
           apart, which a read sees unless both parts arrived before it (a slow prober:
           read boundaries are a lower bound of the segmentation), so that bit follows
           what was seen */
        answer_like(&f, TLSFLIGHT_DIFF_RECORDS | (f.nseg > 1 ? TLSFLIGHT_DIFF_SEGMENTS : 0),
                    gnutls ? "gnutls-serv" : "s_server");
        char segs[128], exts[128] = "";
        size_t w = 0;
        for (size_t e = 0; e < f.next; e++)
            w += (size_t)snprintf(exts + w, sizeof exts - w, "%s%u/%u", e ? "," : "",
                                  f.ext[e].type, f.ext[e].len);
        print_message("%s: cipher %04x exts %s enc %zu records %u bytes segments %s\n",
                      gnutls ? "gnutls-serv" : "s_server", f.cipher, exts, f.nenc,
                      f.enc_total, tlsflight_segments(&f, segs, sizeof segs));
    }
    tfront_stop(&s);
    tfront_pki_free(&p);
}

static void test_openssl_s_server(void **state)
{
    (void)state;
    probe_site(false);
}

static void test_gnutls_serv(void **state)
{
    (void)state;
    probe_site(true);
}

/* A site that expects a PROXY v2 header (pp_site.h, in front of s_server): a probe with
   proxy_v2 is answered, naming this host's own address; one without is refused unanswered. */
static void test_proxy_v2_site(void **state)
{
    (void)state;
    struct tfront_pki p;
    tfront_pki_make(&p, "example.com", 2048);
    struct tfront s;
    tfront_start(&s, &p, false);
    struct pp_site pp;
    pp_site_start(&pp, s.port);
    struct sockaddr_in a = psock_addr(pp.port);
    struct tlsflight f;
    char err[256] = "", src[64];
    assert_true(tlsscout_probe((struct sockaddr *)&a, sizeof a, "example.com",
                               &(struct tlsscout_opts){.timeout_ms = 10000}, &f, err,
                               sizeof err) < 0);
    unsigned with, without;
    pp_site_counts(&pp, &with, &without, NULL);
    assert_int_equal(with, 0);
    assert_int_equal(without, 1);
    int rc = tlsscout_probe((struct sockaddr *)&a, sizeof a, "example.com",
                            &(struct tlsscout_opts){.timeout_ms = 10000, .proxy_v2 = true}, &f, err,
                            sizeof err);
    if (rc != 0)
        fail_msg("probe with a PROXY header: %s", err);
    assert_int_equal(f.version, 0x0304);
    assert_true(f.enc_total > 2000);
    pp_site_counts(&pp, &with, &without, src);
    assert_int_equal(with, 1);
    assert_int_equal(without, 1);
    assert_int_equal(strncmp(src, "127.0.0.1:", 10), 0);
    pp_site_stop(&pp);
    tfront_stop(&s);
    tfront_pki_free(&p);
}

/* Nothing listening: a clear error naming the step. */
static void test_refused(void **state)
{
    (void)state;
    int port = tgtest_listen_port();
    struct sockaddr_in a = psock_addr((uint16_t)port);
    struct tlsflight f;
    char err[256] = "";
    assert_true(tlsscout_probe((struct sockaddr *)&a, sizeof a, "example.com", NULL, &f, err,
                               sizeof err) < 0);
    assert_non_null(strstr(err, "connect"));
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openssl_s_server),
        cmocka_unit_test(test_gnutls_serv),
        cmocka_unit_test(test_proxy_v2_site),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
