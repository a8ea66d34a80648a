/*
 * The learned FakeTLS answer through the daemon (issue 23, [defense.tls-front]): `tgproxy run`
 * fronting to a real TLS server on 127.0.0.1 that the test starts (OpenSSL's s_server and
 * GnuTLS's gnutls-serv, TLS 1.3, a three-certificate RSA chain: tests/support/tls_front.h).
 *
 * Shape comparison, per front: 50 handshakes to the site directly and 50 FakeTLS handshakes
 * through tgproxy, each with the same Telegram-client ClientHello shape (chrome_hello, valid
 * for the secret). tgproxy's answers are verified as the clients verify them (HMAC-SHA256
 * over the client random and the exact answer bytes, then CCS and one ApplicationData
 * record). Both are read the way a passive observer sees them (tlsflight_parse; TCP data
 * segments from TCP_INFO) and compared:
 *   - ServerHello extension order and lengths, cipher, key-share group and length:
 *     identical in every answer;
 *   - encrypted bytes on the wire (the records after the CCS, headers included): the
 *     ranges of the two samples overlap and the medians are within the +-32-byte jitter;
 *     the two-sample Kolmogorov-Smirnov distance is printed (a site whose length is
 *     constant gives about 0.5 against a jitter that is never constant);
 *   - the TCP segments of the flight: the most common count is the same (with mss-clamp
 *     off: the clamp cuts what tgproxy sends into 256-byte segments, a difference doctor
 *     reports).
 *
 * Lifecycle, on one daemon: a refresh (SIGHUP) while handshakes run, every answer still
 * verifying; the front replaced by the other implementation (the answer follows after the
 * refresh); the front gone (the last good profile kept, the failure counted in
 * tls_front_refresh_failures_total); a restart with the front still gone answering with the
 * stored profile (tls_front_shape{shape="stored"}) from its first handshake.
 *
 * A site behind [domain-fronting] proxy-protocol (it refuses a connection without a PROXY v2
 * header): the refresh's probes send the header, and the profile is learned.
 */
#include "tgtest.h"

#include "core/str.h"
#include "daemon_fx.h"
#include "proxy/wire/crypto.h"
#include "proxy/wire/tlsprofile.h"
#include "pp_site.h"
#include "prom.h"
#include "proxy_client.h"
#include "proxy_tcpinfo.h"
#include "proxy_util.h"
#include "tls_front.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define SHOTS   50
#define QUIET   150 /* ms without bytes that end a site's flight (as the prober) */
#define DOMAIN  "example.com"

static const uint8_t key[16] = {0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x87, 0x98,
                                0xa9, 0xba, 0xcb, 0xdc, 0xed, 0xfe, 0x0f, 0x10};

/* One handshake as an observer sees it. */
struct shot {
    struct tlsflight f;
    uint32_t enc_wire; /* bytes of the records after the CCS, headers included */
    long segs;         /* TCP data segments of the flight */
};

/* Read a flight into buf: until the three-record answer is whole (want_answer) or QUIET ms
   pass without bytes. seg[] = the reads. Returns the bytes. */
static size_t read_flight(int fd, uint8_t *buf, size_t cap, uint32_t *seg, size_t *nseg,
                          bool want_answer)
{
    size_t n = 0;
    *nseg = 0;
    for (;;) {
        if (want_answer) { /* SH record, CCS, one AD record: whole? */
            size_t at = 0;
            int recs = 0;
            while (recs < 3 && at + 5 <= n) {
                size_t l = (size_t)buf[at + 3] << 8 | buf[at + 4];
                if (at + 5 + l > n)
                    break;
                at += 5 + l;
                recs++;
            }
            if (recs == 3)
                return n;
        }
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int rc = poll(&pf, 1, n && !want_answer ? QUIET : 10000);
        if (rc == 0)
            return n;
        assert_true(rc == 1);
        ssize_t k = recv(fd, buf + n, cap - n, 0);
        if (k <= 0)
            return n;
        if (*nseg < TLSFLIGHT_MAX_SEG)
            seg[(*nseg)++] = (uint32_t)k;
        else
            seg[*nseg - 1] += (uint32_t)k;
        n += (size_t)k;
        assert_true(n < cap);
    }
}

/* The ClientHello a Telegram client sends (a Chrome-like TLS 1.3 hello, the prober's own
   shape: tlsflight_client_hello), made valid for key as brief 4.3 says: the random is
   HMAC-SHA256(key, the record with a zero random), its last four bytes XORed with the time. */
static size_t chrome_hello(uint8_t *out, size_t cap)
{
    uint8_t rnd[TLSFLIGHT_HELLO_RND];
    assert_int_equal(crypto_random(rnd, sizeof rnd), 0);
    memset(rnd, 0, 32);
    size_t n = tlsflight_client_hello(out, cap, DOMAIN, rnd);
    assert_true(n > 0);
    uint8_t mac[32];
    struct crypto_part part = {out, n};
    assert_int_equal(crypto_hmac_sha256(key, 16, &part, 1, mac), 0);
    uint32_t t = (uint32_t)time(NULL);
    for (int i = 0; i < 4; i++)
        mac[28 + i] ^= (uint8_t)(t >> (8 * i));
    memcpy(out + 11, mac, 32);
    return n;
}

/* A handshake with port: the site (proxy false) or tgproxy, whose answer is verified as the
   Telegram clients verify it. */
static void handshake(uint16_t port, bool proxy, struct shot *s)
{
    static uint8_t buf[TLSFLIGHT_RECORDING_MAX];
    uint8_t hello[600];
    size_t hl = chrome_hello(hello, sizeof hello);
    int fd = psock_connect(port, 5000);
    assert_true(fd >= 0);
    assert_int_equal(psock_write_all(fd, hello, hl), 0);
    uint32_t seg[TLSFLIGHT_MAX_SEG];
    size_t nseg = 0, n = read_flight(fd, buf, sizeof buf, seg, &nseg, proxy);
    s->segs = ptcp_data_segs_in(fd);
    close(fd);
    assert_true(s->segs >= 1);
    if (proxy) {
        uint8_t got[32], mac[32];
        memcpy(got, buf + 11, 32);
        memset(buf + 11, 0, 32);
        struct crypto_part parts[] = {{hello + 11, 32}, {buf, n}};
        assert_int_equal(crypto_hmac_sha256(key, 16, parts, 2, mac), 0);
        assert_memory_equal(got, mac, 32);
        memcpy(buf + 11, got, 32);
        size_t shl = 5 + ((size_t)buf[3] << 8 | buf[4]);
        assert_memory_equal(buf + shl, "\x14\x03\x03\x00\x01\x01\x17\x03\x03", 9);
    }
    char err[160];
    if (tlsflight_parse(buf, n, seg, nseg, hello + 44, 32, &s->f, err, sizeof err) != 0)
        fail_msg("%s answer: %s", proxy ? "tgproxy" : "site", err);
    assert_true(s->f.sid_echo);
    assert_true(s->f.ccs);
    s->enc_wire = s->f.enc_total + 5 * (uint32_t)s->f.nenc;
    if (proxy)
        assert_int_equal(s->f.nenc, 1);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Two-sample Kolmogorov-Smirnov distance of sorted a[0..n), b[0..m). */
static double ks(const uint32_t *a, size_t n, const uint32_t *b, size_t m)
{
    size_t i = 0, j = 0;
    double d = 0;
    while (i < n && j < m) {
        uint32_t v = a[i] < b[j] ? a[i] : b[j];
        while (i < n && a[i] == v)
            i++;
        while (j < m && b[j] == v)
            j++;
        double e = (double)i / (double)n - (double)j / (double)m;
        if (e < 0)
            e = -e;
        if (e > d)
            d = e;
    }
    return d;
}

static long mode_of(const long *v, size_t n)
{
    long best = v[0];
    size_t votes = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        for (size_t j = 0; j < n; j++)
            k += v[j] == v[i];
        if (k > votes)
            best = v[i], votes = k;
    }
    return best;
}

/* pp: the fronted site expects a PROXY v2 header ([domain-fronting] proxy-protocol). */
static void write_config(const struct dfx *d, uint16_t front_port, const char *state, bool pp)
{
    char hex[33], dom[2 * sizeof DOMAIN];
    tg__hex_encode(hex, key, 16);
    tg__hex_encode(dom, DOMAIN, strlen(DOMAIN));
    dfx_config(d,
               "bind-to = \"127.0.0.1:0\"\n"
               "workers = 2\n"
               "log-level = \"info\"\n"
               "[secrets]\n"
               "main = \"ee%s%s\"\n"
               "[dcs]\n"
               "default = [\"127.0.0.1:9\"]\n"
               "[domain-fronting]\n"
               "host = \"127.0.0.1\"\n"
               "port = %u\n"
               "proxy-protocol = %s\n"
               "[defense]\n"
               /* the clamp's 256-byte MSS applies to what tgproxy sends too: the answer would
                  leave in 256-byte segments where the site sends one or two (doctor says so) */
               "mss-clamp = false\n"
               "[defense.tls-front]\n"
               "connections = 8\n"
               "state-file = \"%s\"\n"
               "[stats.prometheus]\n"
               "enabled = true\n"
               "bind-to = \"127.0.0.1:0\"\n",
               hex, dom, (unsigned)front_port, pp ? "true" : "false", state);
}

/* The daemon in d (dir name) fronting to 127.0.0.1:front_port, its state file in its own
   directory, once it learned the domain's profile. */
static void run_learned(struct dfx *d, const char *name, uint16_t front_port, bool pp)
{
    dfx_init(d, name);
    char state[128];
    dfx_path(d, "tls-front", state, sizeof state);
    write_config(d, front_port, state, pp);
    dfx_run(d, DFX_TGPROXY);
    dfx_wait_log(d, "tls-front: " DOMAIN ": learned", 1);
}

/* The metrics page (prom_scrape: an independent parser that holds every family to its
   docs row) holds line. */
static void expect_metric(const struct dfx *d, const char *line)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/",
             (unsigned)dfx_log_port(d, "[stats.prometheus] serving"));
    char *page = calloc(1, 1 << 20);
    assert_non_null(page);
    assert_int_equal(prom_scrape(url, "tgproxy", page, 1 << 20), 0);
    if (!strstr(page, line))
        fail_msg("metrics page lacks \"%s\":%s", line, page);
    free(page);
}

/* The proxy's answers have the ServerHello shape of site flight f. */
static void same_hello(const struct tlsflight *site, const struct tlsflight *ours)
{
    assert_int_equal(ours->cipher, site->cipher);
    assert_int_equal(ours->next, site->next);
    for (size_t e = 0; e < site->next; e++) {
        assert_int_equal(ours->ext[e].type, site->ext[e].type);
        assert_int_equal(ours->ext[e].len, site->ext[e].len);
    }
    assert_int_equal(ours->group, site->group);
    assert_int_equal(ours->key_len, site->key_len);
    assert_int_equal(ours->version, site->version);
}

static void compare_front(bool gnutls)
{
    struct tfront_pki pki;
    tfront_pki_make(&pki, DOMAIN, 2048);
    struct tfront site;
    tfront_start(&site, &pki, gnutls);
    struct dfx d;
    run_learned(&d, "tlsfront", site.port, false);

    static struct shot direct[SHOTS], ours[SHOTS];
    for (int i = 0; i < SHOTS; i++)
        handshake(site.port, false, &direct[i]);
    for (int i = 0; i < SHOTS; i++)
        handshake(d.port, true, &ours[i]);
    uint32_t a[SHOTS], b[SHOTS];
    long sa[SHOTS], sb[SHOTS];
    for (int i = 0; i < SHOTS; i++) {
        same_hello(&direct[0].f, &direct[i].f); /* the site itself answers one shape */
        same_hello(&direct[0].f, &ours[i].f);
        a[i] = direct[i].enc_wire;
        b[i] = ours[i].enc_wire;
        sa[i] = direct[i].segs;
        sb[i] = ours[i].segs;
    }
    qsort(a, SHOTS, sizeof a[0], cmp_u32);
    qsort(b, SHOTS, sizeof b[0], cmp_u32);
    double dist = ks(a, SHOTS, b, SHOTS);
    long med = (long)b[SHOTS / 2] - (long)a[SHOTS / 2];
    char pat_site[128], pat_ours[128], exts[128] = "";
    size_t w = 0;
    for (size_t e = 0; e < direct[0].f.next; e++)
        w += (size_t)snprintf(exts + w, sizeof exts - w, "%s%u/%u", e ? "," : "",
                              direct[0].f.ext[e].type, direct[0].f.ext[e].len);
    print_message("%s vs tgproxy (%d handshakes each): cipher %04x, extensions %s, group %04x/%u "
                  "(identical in all)\n",
                  gnutls ? "gnutls-serv" : "s_server", SHOTS, direct[0].f.cipher, exts, direct[0].f.group,
                  direct[0].f.key_len);
    print_message("  encrypted wire bytes: site %u..%u, tgproxy %u..%u, medians %+ld, KS distance "
                  "%.2f\n",
                  a[0], a[SHOTS - 1], b[0], b[SHOTS - 1], med, dist);
    print_message("  TCP data segments (most common): site %ld, tgproxy %ld; reads: site %s, "
                  "tgproxy %s\n",
                  mode_of(sa, SHOTS), mode_of(sb, SHOTS),
                  tlsflight_segments(&direct[0].f, pat_site, sizeof pat_site),
                  tlsflight_segments(&ours[0].f, pat_ours, sizeof pat_ours));
    assert_true(b[0] <= a[SHOTS - 1] && a[0] <= b[SHOTS - 1]); /* the ranges overlap */
    assert_true(med >= -TLSPROFILE_JITTER && med <= TLSPROFILE_JITTER);
    assert_true(b[SHOTS - 1] > b[0]); /* never one constant length */
    /* tgproxy writes the site's cuts with one send() each, but a busy host may merge two
       writes into one segment while the first is still queued (TCP autocorking): the TSan
       stage of CI saw the site's 2 segments arrive as 1 in most of tgproxy's handshakes. So
       the pattern must be there, in some of the 50, and never more segments than the site. */
    size_t like_site = 0;
    for (int i = 0; i < SHOTS; i++) {
        like_site += sb[i] == mode_of(sa, SHOTS);
        assert_true(sb[i] <= mode_of(sa, SHOTS) + 1);
    }
    print_message("  tgproxy handshakes in the site's segment count: %zu of %d\n", like_site,
                  SHOTS);
    assert_true(like_site > 0);
    expect_metric(&d, "tgproxy_tls_front_shape{domain=" DOMAIN ",shape=learned} 1");

    assert_int_equal(dfx_stop(&d, SIGTERM), 0);
    dfx_done(&d);
    tfront_stop(&site);
    tfront_pki_free(&pki);
}

static void test_openssl_front(void **state)
{
    (void)state;
    compare_front(false);
}

static void test_gnutls_front(void **state)
{
    (void)state;
    compare_front(true);
}

/* Every answer has site's extension order (43 first for s_server, 51 first for gnutls). */
static void answers_like(uint16_t port, uint16_t first_ext, int n)
{
    for (int i = 0; i < n; i++) {
        struct shot s;
        handshake(port, true, &s);
        assert_int_equal(s.f.ext[0].type, first_ext);
    }
}

static void test_lifecycle(void **state)
{
    (void)state;
    struct tfront_pki pki;
    tfront_pki_make(&pki, DOMAIN, 2048);
    struct tfront site;
    tfront_start(&site, &pki, false);
    uint16_t port = site.port;
    struct dfx d;
    run_learned(&d, "tlsfront-life", port, false);
    answers_like(d.port, TLSFLIGHT_EXT_SUPPORTED_VERSIONS, 5);

    /* a refresh while handshakes run: every answer verifies, before, during and after */
    dfx_signal(&d, SIGHUP);
    int during = 0;
    while (dfx_log_count(&d, "tls-front: " DOMAIN ": learned") < 2 && during < 3000) {
        answers_like(d.port, TLSFLIGHT_EXT_SUPPORTED_VERSIONS, 1);
        during++;
    }
    dfx_wait_log(&d, "tls-front: " DOMAIN ": learned", 2);
    print_message("refresh: %d handshakes answered while it ran\n", during);
    assert_true(during > 0);

    /* the front changes shape: gnutls-serv on the same port; after a refresh, its order */
    tfront_stop(&site);
    tfront_start_on(&site, &pki, true, port);
    dfx_signal(&d, SIGHUP);
    dfx_wait_log(&d, "tls-front: " DOMAIN ": learned", 3);
    answers_like(d.port, TLSFLIGHT_EXT_KEY_SHARE, 5);
    expect_metric(&d, "tgproxy_tls_front_refreshes_total{domain=" DOMAIN "} 3");

    /* the front goes away: the refresh fails, counted; the last good profile stays */
    tfront_stop(&site);
    dfx_signal(&d, SIGHUP);
    dfx_wait_log(&d, "tls-front: " DOMAIN ": refresh failed", 1);
    answers_like(d.port, TLSFLIGHT_EXT_KEY_SHARE, 5);
    expect_metric(&d, "tgproxy_tls_front_refresh_failures_total{domain=" DOMAIN "} 1");
    expect_metric(&d, "tgproxy_tls_front_shape{domain=" DOMAIN ",shape=learned} 1");

    /* a restart with the front still away: the stored profile answers at once */
    assert_int_equal(dfx_stop(&d, SIGTERM), 0);
    dfx_run(&d, DFX_TGPROXY);
    dfx_wait_log(&d, "tls-front: 1 stored profile(s)", 1);
    answers_like(d.port, TLSFLIGHT_EXT_KEY_SHARE, 5);
    expect_metric(&d, "tgproxy_tls_front_shape{domain=" DOMAIN ",shape=stored} 1");

    assert_int_equal(dfx_stop(&d, SIGTERM), 0);
    dfx_done(&d);
    tfront_pki_free(&pki);
}

/* A site behind [domain-fronting] proxy-protocol refuses connections without a PROXY v2
   header (pp_site.h): the refresh's probes send one too, so the profile is learned. */
static void test_proxy_protocol_front(void **state)
{
    (void)state;
    struct tfront_pki pki;
    tfront_pki_make(&pki, DOMAIN, 2048);
    struct tfront site;
    tfront_start(&site, &pki, false);
    struct pp_site pp;
    pp_site_start(&pp, site.port);
    struct dfx d;
    run_learned(&d, "tlsfront-pp", pp.port, true);
    answers_like(d.port, TLSFLIGHT_EXT_SUPPORTED_VERSIONS, 3);
    unsigned with, without;
    pp_site_counts(&pp, &with, &without, NULL);
    assert_true(with >= 8); /* connections = 8 probes */
    assert_int_equal(without, 0);
    assert_int_equal(dfx_stop(&d, SIGTERM), 0);
    dfx_done(&d);
    pp_site_stop(&pp);
    tfront_stop(&site);
    tfront_pki_free(&pki);
}

/* Without a profile (the front never answered, the stored file damaged), today's answer. */
static void test_no_profile_answers_as_before(void **state)
{
    (void)state;
    int port = tgtest_listen_port(); /* nothing listens there */
    struct dfx d;
    dfx_init(&d, "tlsfront-none");
    char state_file[128];
    dfx_path(&d, "tls-front", state_file, sizeof state_file);
    write_config(&d, (uint16_t)port, state_file, false);
    dfx_write(state_file, "not a profile\n"); /* a damaged state file: logged, ignored */
    dfx_run(&d, DFX_TGPROXY);
    dfx_wait_log(&d, "line 1: not a tgproxy tls-front file", 1);
    dfx_wait_log(&d, "tls-front: " DOMAIN ": refresh failed", 1);
    for (int i = 0; i < 5; i++) {
        struct shot s;
        handshake(d.port, true, &s);
        /* the fixed answer: key_share first, 2500..4700 bytes of filler */
        assert_int_equal(s.f.ext[0].type, TLSFLIGHT_EXT_KEY_SHARE);
        assert_true(s.f.enc_total >= 2500 && s.f.enc_total < 4700);
    }
    expect_metric(&d, "tgproxy_tls_front_shape{domain=" DOMAIN ",shape=default} 1");
    size_t len = 0; /* nothing learned, nothing written */
    char *kept = tgtest_read_file(state_file, &len);
    assert_non_null(kept);
    assert_string_equal(kept, "not a profile\n");
    free(kept);
    assert_int_equal(dfx_stop(&d, SIGTERM), 0);
    dfx_done(&d);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openssl_front),
        cmocka_unit_test(test_gnutls_front),
        cmocka_unit_test(test_lifecycle),
        cmocka_unit_test(test_no_profile_answers_as_before),
        cmocka_unit_test(test_proxy_protocol_front),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
