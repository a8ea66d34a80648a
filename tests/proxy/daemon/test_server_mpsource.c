/*
 * Middle-proxy documents downloaded by the built daemon (services/mpsource.c): tgproxy's
 * [middle-proxy] proxy-secret and proxy-config are https:// URLs of a local HTTPS server
 * (tests/support/docsrv.h, its own CA through SSL_CERT_FILE), with tgproxy-fakemp and the
 * fake DC behind, all on 127.0.0.1.
 *
 *   - rotation: the served proxy secret and list change (a new fake middle proxy, with the new
 *     secret, on another port); a refresh takes them, the pool reconnects with the new secret
 *     and new clients get through; the stored copies in state-dir are the new documents;
 *   - a failing refresh (HTTP 500, a secret of the wrong size) keeps the last good copy,
 *     warns, and counts it in middle_proxy_source_failures_total;
 *   - a restart with the HTTPS server gone starts from the stored copies and serves; a start
 *     with no copy anywhere sends tagged clients direct until the documents download;
 *   - a reload (SIGHUP) changing [middle-proxy] connections rebuilds the pool while a client
 *     on the old one keeps working, and the old connection closes when that client ends;
 *     a reload removing a secret's tag sends its new clients direct; a reload pointing
 *     proxy-config at another list moves the pool to that list's middle proxy;
 *   - the public address detected through public-ip-url (the document server answers
 *     203.0.113.7): the fake middle proxy, told the proxy's side is 203.0.113.7 behind NAT
 *     (--client-addr), completes the handshake only with keys derived from that address, and
 *     sees it as the proxy address of each client.
 */
#include "tgtest.h"

#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include "core/str.h"
#include "daemon_fx.h"
#include "docsrv.h"
#include "proxy_client.h"
#include "proxy_fakedc.h"
#include "proxy_fakemp.h"
#include "prom.h"

#define TAG  "c0ffee00c0ffee00c0ffee00c0ffee00"
#define TAG2 "2222333344445555666677778888aaaa"

struct env {
    struct fakedc *dc;
    uint16_t dc_port;
    struct docsrv *docs;
    struct dfx mp, d;
    char secret_path[128], state[128];
    uint8_t key[16], key2[16];
    char conf_path[128];
    const char *want; /* metrics_show: the line to wait for */
};

static void secret_of(uint8_t *s, int seed)
{
    for (int i = 0; i < 128; i++)
        s[i] = (uint8_t)(i * 29 + seed);
}

/* A fake middle proxy with secret `seed`; the document server serves that secret and a list
   naming the fake's port. */
static void mp_start(struct env *e, int seed)
{
    uint8_t secret[128];
    secret_of(secret, seed);
    pfmp_secret(e->secret_path, secret, sizeof secret);
    pfmp_start(&e->mp, e->secret_path, e->dc_port, 0, NULL);
    char conf[128];
    int n = snprintf(conf, sizeof conf, "default 2;\nproxy_for 2 127.0.0.1:%u;\n", e->mp.port);
    docsrv_serve(e->docs, "/config", 200, conf, (size_t)n, 0);
    docsrv_serve(e->docs, "/secret", 200, secret, sizeof secret, 0);
}

static void write_cfg(struct env *e)
{
    char su[96], cu[96], mp_lines[256];
    docsrv_url(e->docs, "/secret", su, sizeof su);
    docsrv_url(e->docs, "/config", cu, sizeof cu);
    snprintf(mp_lines, sizeof mp_lines,
             "state-dir = \"%s\"\nupdate-each = \"1s\"\nfallback-direct = false\n", e->state);
    pfmp_daemon_config(&e->d, TAG, e->key, e->dc_port, su, cu, mp_lines, true);
}

/* The metrics page, checked by prom_scrape.py (which holds each family to its docs row). */
static char *scrape(struct env *e)
{
    char *out = prom_scrape_local(dfx_log_port(&e->d, "[stats.prometheus] serving"));
    assert_non_null(out);
    return out;
}

/* A tagged dd client through the middle proxy (fallback-direct is off: only that way). */
static bool echo_works(void *arg)
{
    struct env *e = arg;
    return pfmp_echo_framed(e->d.port, PCLI_DD, e->key) == 0;
}

static bool stored_is(const char *state, const char *name, const void *want, size_t n)
{
    char path[192];
    snprintf(path, sizeof path, "%s/%s", state, name);
    size_t len = 0;
    char *got = tgtest_read_file(path, &len);
    bool ok = got && len == n && memcmp(got, want, n) == 0;
    free(got);
    return ok;
}

/* A fresh env: the fake DC, client keys, the fake middle proxy's and the daemon's dirs
   ("NAME-fakemp", "NAME"), a document server when docs. */
static void env_begin(struct env *e, const char *name, bool docs)
{
    char mp[48];
    memset(e, 0, sizeof *e);
    e->dc = fakedc_start(&e->dc_port);
    assert_non_null(e->dc);
    for (int i = 0; i < 16; i++)
        e->key[i] = (uint8_t)(i + 7), e->key2[i] = (uint8_t)(i + 77);
    e->docs = docs ? docsrv_start() : NULL;
    snprintf(mp, sizeof mp, "%s-fakemp", name);
    dfx_init(&e->mp, mp);
    dfx_init(&e->d, name);
    dfx_path(&e->mp, "proxy-secret", e->secret_path, sizeof e->secret_path);
    dfx_path(&e->mp, "proxy-config", e->conf_path, sizeof e->conf_path);
}

/* Stop and remove everything env_begin started (the daemon and the fake must run). */
static void env_end(struct env *e)
{
    assert_int_equal(dfx_stop(&e->d, SIGTERM), 0);
    dfx_done(&e->d);
    assert_int_equal(dfx_stop(&e->mp, SIGTERM), 0);
    dfx_done(&e->mp);
    docsrv_stop(e->docs);
    fakedc_stop(e->dc);
}

static void test_refresh_store_restart(void **state)
{
    (void)state;
    struct env e;
    env_begin(&e, "mps", true);
    tg__strlcpy(e.state, e.d.dir, sizeof e.state); /* dfx_done removes the stored copies */
    e.d.quiet = true; /* its log could quote a URL; never the secret, but keep it short */
    mp_start(&e, 3);
    write_cfg(&e);
    dfx_run(&e.d, DFX_TGPROXY);
    dfx_wait_log(&e.mp, "handshake ok from 127.0.0.1:", 2);
    assert_true(tgtest_wait_until(echo_works, &e, DFX_WAIT_MS));
    dfx_wait_log(&e.mp, "tag " TAG " from 127.0.0.1:", 1);
    uint8_t s1[128];
    secret_of(s1, 3);
    assert_true(stored_is(e.state, "proxy-secret", s1, sizeof s1));

    /* rotation: the secret and the list change; the old middle proxy goes away */
    assert_int_equal(dfx_stop(&e.mp, SIGTERM), 0);
    dfx_done(&e.mp);
    dfx_init(&e.mp, "mps-fakemp2");
    dfx_path(&e.mp, "proxy-secret", e.secret_path, sizeof e.secret_path);
    mp_start(&e, 101);
    dfx_wait_log(&e.d, "middle-proxy: proxy-secret changed", 1);
    dfx_wait_log(&e.mp, "handshake ok from 127.0.0.1:", 2); /* the new secret's keys */
    assert_true(tgtest_wait_until(echo_works, &e, DFX_WAIT_MS));
    dfx_wait_log(&e.mp, "tag " TAG " from 127.0.0.1:", 1);
    uint8_t s2[128];
    secret_of(s2, 101);
    assert_true(stored_is(e.state, "proxy-secret", s2, sizeof s2));
    assert_int_equal(dfx_log_count(&e.mp, "handshake failed"), 0);

    /* failing refreshes: an error status and a secret of the wrong size keep the copies */
    docsrv_serve(e.docs, "/config", 500, "oops", 4, 0);
    docsrv_serve(e.docs, "/secret", 200, "short", 5, 0);
    dfx_wait_log(&e.d, "proxy-config: https://127.0.0.1:", 1);
    dfx_wait_log(&e.d, "HTTP status 500, expected 200; keeping the copy in use", 1);
    dfx_wait_log(&e.d, "5 bytes, expected 32..256", 1);
    assert_true(echo_works(&e));
    assert_true(stored_is(e.state, "proxy-secret", s2, sizeof s2));
    char *page = scrape(&e);
    if (strstr(page, "\ntgproxy_middle_proxy_source_failures_total{source=proxy-config} 0\n") ||
        !strstr(page, "\ntgproxy_middle_proxy_source_failures_total{source=proxy-config} ") ||
        !strstr(page, "\ntgproxy_middle_proxy_source_age_seconds{source=proxy-secret} ") ||
        !strstr(page, "\ntgproxy_middle_proxy_source_updates_total{source=proxy-secret} 2\n"))
        fail_msg("metrics page lacks the source failures, age or updates:\n%s", page);
    free(page);

    /* a restart without the document server: the stored copies */
    assert_int_equal(dfx_stop(&e.d, SIGTERM), 0);
    docsrv_stop(e.docs);
    e.docs = NULL;
    int before = dfx_log_count(&e.mp, "handshake ok from 127.0.0.1:");
    dfx_run(&e.d, DFX_TGPROXY);
    dfx_wait_log(&e.d, "proxy-secret: starting with the stored copy", 1);
    dfx_wait_log(&e.d, "proxy-config: starting with the stored copy", 1);
    dfx_wait_log(&e.mp, "handshake ok from 127.0.0.1:", before + 2);
    assert_true(tgtest_wait_until(echo_works, &e, DFX_WAIT_MS));
    assert_int_equal(dfx_log_count(&e.d, "no copy yet"), 0);

    env_end(&e);
}

static void write_reload_cfg(struct env *e, unsigned conns, const char *b_tag)
{
    char k1[33], k2[33];
    tg__hex_encode(k1, e->key, 16);
    tg__hex_encode(k2, e->key2, 16);
    dfx_config(&e->d,
               "bind-to = \"127.0.0.1:0\"\n"
               "workers = 1\n"
               "ad-tag = \"" TAG "\"\n"
               "[secrets]\n"
               "a = \"dd%s\"\n"
               "b = \"dd%s\"\n"
               "[ad-tags]\n"
               "b = \"%s\"\n"
               "[dcs]\n"
               "default = [\"127.0.0.1:%u\"]\n"
               "[middle-proxy]\n"
               "proxy-secret = \"%s\"\n"
               "proxy-config = \"%s\"\n"
               "connections = %u\n"
               "[stats.prometheus]\n"
               "enabled = true\n"
               "bind-to = \"127.0.0.1:0\"\n",
               k1, k2, b_tag, e->dc_port, e->secret_path, e->conf_path, conns);
}

static bool metrics_show(void *arg)
{
    struct env *e = arg;
    char *page = scrape(e);
    bool ok = strstr(page, e->want) != NULL;
    free(page);
    return ok;
}

static void wait_metric(struct env *e, const char *line)
{
    e->want = line;
    if (!tgtest_wait_until(metrics_show, e, DFX_WAIT_MS)) {
        char *page = scrape(e);
        fail_msg("metrics never showed %s:\n%s", line, page);
    }
}

static void test_reload_pool_and_tags(void **state)
{
    (void)state;
    struct env e;
    env_begin(&e, "mpr", false);
    uint8_t secret[128];
    secret_of(secret, 9);
    pfmp_secret(e.secret_path, secret, sizeof secret);
    pfmp_start(&e.mp, e.secret_path, e.dc_port, 0, NULL);
    char conf[128];
    snprintf(conf, sizeof conf, "default 2;\nproxy_for 2 127.0.0.1:%u;\n", e.mp.port);
    dfx_write(e.conf_path, conf);
    write_reload_cfg(&e, 1, TAG2);
    dfx_run(&e.d, DFX_TGPROXY);
    dfx_wait_log(&e.mp, "handshake ok from 127.0.0.1:", 1);
    wait_metric(&e, "\ntgproxy_middle_proxy_connections_up{dc=2} 1\n");

    /* a client on the first pool, half-way through its conversation */
    struct pcli c;
    struct pcli_opts o = {.mode = PCLI_DD, .key = e.key, .dc = 2};
    assert_int_equal(pcli_connect(&c, e.d.port, &o), 0);
    uint32_t tag = pfmp_tag(PCLI_DD);
    uint8_t cmd[FAKEDC_CMD_LEN], data[2048], back[2048];
    fakedc_cmd(cmd, "ECHO", 0, 0);
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 7 + 1);
    assert_int_equal(pfmp_send_packet(&c, tag, cmd, sizeof cmd), 0);
    assert_int_equal(pfmp_send_packet(&c, tag, data, 1024), 0);
    assert_int_equal(pfmp_recv_packets(&c, tag, back, 1024), 0);
    dfx_wait_log(&e.mp, "tag " TAG " from 127.0.0.1:", 1);

    /* three connections per DC: a new pool of three, the old connection kept for the client */
    write_reload_cfg(&e, 3, TAG2);
    dfx_signal(&e.d, SIGHUP);
    dfx_wait_log(&e.d, "reload: ", 1);
    dfx_wait_log(&e.mp, "handshake ok from 127.0.0.1:", 4);
    wait_metric(&e, "\ntgproxy_middle_proxy_connections_up{dc=2} 4\n");
    assert_int_equal(pfmp_send_packet(&c, tag, data + 1024, 1024), 0);
    assert_int_equal(pfmp_recv_packets(&c, tag, back + 1024, 1024), 0);
    assert_memory_equal(back, data, sizeof data);
    pcli_close(&c); /* the old pool's last client: its connection goes */
    wait_metric(&e, "\ntgproxy_middle_proxy_connections_up{dc=2} 3\n");
    assert_int_equal(pfmp_echo_framed(e.d.port, PCLI_DD, e.key2), 0);
    dfx_wait_log(&e.mp, "tag " TAG2 " from 127.0.0.1:", 1);

    /* b's tag removed: its new clients go direct; a's still go through the middle proxy */
    write_reload_cfg(&e, 3, "");
    dfx_signal(&e.d, SIGHUP);
    dfx_wait_log(&e.d, "reload: ", 2);
    int clients = dfx_log_count(&e.mp, "client ");
    uint64_t direct = fakedc_counters(e.dc).accepted;
    assert_int_equal(pcli_connect(&c, e.d.port, &(struct pcli_opts){.mode = PCLI_DD, .key = e.key2, .dc = 2}), 0);
    assert_int_equal(pcli_echo(&c, 5, 4096, 0), 0); /* the fake DC's own stream: direct */
    pcli_close(&c);
    assert_true(fakedc_counters(e.dc).accepted > direct);
    assert_int_equal(dfx_log_count(&e.mp, "client "), clients);
    assert_int_equal(pfmp_echo_framed(e.d.port, PCLI_DD, e.key), 0);
    dfx_wait_log(&e.mp, "client ", clients + 1);
    assert_int_equal(dfx_log_count(&e.mp, "handshake ok from 127.0.0.1:"), 4); /* pool kept */

    /* proxy-config names another file, listing a second middle proxy: the pool moves there */
    struct dfx mp2;
    dfx_init(&mp2, "mpr-fakemp2");
    pfmp_start(&mp2, e.secret_path, e.dc_port, 0, NULL);
    dfx_path(&mp2, "proxy-config", e.conf_path, sizeof e.conf_path);
    snprintf(conf, sizeof conf, "default 2;\nproxy_for 2 127.0.0.1:%u;\n", mp2.port);
    dfx_write(e.conf_path, conf);
    write_reload_cfg(&e, 3, "");
    dfx_signal(&e.d, SIGHUP);
    dfx_wait_log(&e.d, "reload: ", 3);
    dfx_wait_log(&mp2, "handshake ok from 127.0.0.1:", 3);
    assert_true(tgtest_wait_until(echo_works, &e, DFX_WAIT_MS));
    dfx_wait_log(&mp2, "tag " TAG " from 127.0.0.1:", 1);
    assert_int_equal(dfx_stop(&mp2, SIGTERM), 0);
    dfx_done(&mp2);

    env_end(&e);
}

static void test_public_ip_detected(void **state)
{
    (void)state;
    struct env e;
    env_begin(&e, "mpip", true);
    docsrv_serve(e.docs, "/ip", 200, "203.0.113.7\n", 12, 0);
    uint8_t secret[128];
    secret_of(secret, 5);
    pfmp_secret(e.secret_path, secret, sizeof secret);
    const char *nat[] = {"--client-addr", "203.0.113.7", NULL};
    pfmp_start(&e.mp, e.secret_path, e.dc_port, 0, nat);
    char conf[128], ip_url[96], lines[256];
    snprintf(conf, sizeof conf, "default 2;\nproxy_for 2 127.0.0.1:%u;\n", e.mp.port);
    dfx_write(e.conf_path, conf);
    docsrv_url(e.docs, "/ip", ip_url, sizeof ip_url);
    snprintf(lines, sizeof lines,
             "public-ip-url = \"%s\"\nstate-dir = \"%s\"\nfallback-direct = false\n", ip_url,
             e.d.dir);
    pfmp_daemon_config(&e.d, TAG, e.key, e.dc_port, e.secret_path, e.conf_path, lines, false);
    dfx_run(&e.d, DFX_TGPROXY);
    dfx_wait_log(&e.mp, "handshake ok from 127.0.0.1:", 2);
    assert_true(tgtest_wait_until(echo_works, &e, DFX_WAIT_MS));
    dfx_wait_log(&e.mp, " via 203.0.113.7:", 1);
    assert_true(docsrv_hits(e.docs, "/ip") >= 1);
    assert_true(stored_is(e.d.dir, "public-ip", "203.0.113.7\n", 12));
    assert_int_equal(dfx_stop(&e.d, SIGTERM), 0);

    /* the control: without the detected address the same fake refuses every handshake */
    int failed = dfx_log_count(&e.mp, "handshake failed");
    snprintf(lines, sizeof lines, "state-dir = \"%s\"\nfallback-direct = false\n", e.d.dir);
    pfmp_daemon_config(&e.d, TAG, e.key, e.dc_port, e.secret_path, e.conf_path, lines, false);
    int ok = dfx_log_count(&e.mp, "handshake ok from 127.0.0.1:");
    dfx_run(&e.d, DFX_TGPROXY);
    dfx_wait_log(&e.mp, "handshake failed", failed + 2);
    assert_int_equal(dfx_log_count(&e.mp, "handshake ok from 127.0.0.1:"), ok);

    env_end(&e);
}

/* A start with no copy anywhere (the server answers 503, state-dir is empty): tagged clients
   go direct (fallback-direct) and are counted; once the documents download, the pool comes
   up and they go through the middle proxy. */
static void test_no_copy_then_recovery(void **state)
{
    (void)state;
    struct env e;
    env_begin(&e, "mpnc", true);
    uint8_t secret[128];
    secret_of(secret, 21);
    pfmp_secret(e.secret_path, secret, sizeof secret);
    pfmp_start(&e.mp, e.secret_path, e.dc_port, 0, NULL);
    docsrv_serve(e.docs, "/secret", 503, "busy", 4, 0);
    docsrv_serve(e.docs, "/config", 503, "busy", 4, 0);
    tg__strlcpy(e.state, e.d.dir, sizeof e.state);
    char su[96], cu[96], lines[256];
    docsrv_url(e.docs, "/secret", su, sizeof su);
    docsrv_url(e.docs, "/config", cu, sizeof cu);
    snprintf(lines, sizeof lines, "state-dir = \"%s\"\nupdate-each = \"1s\"\n", e.state);
    pfmp_daemon_config(&e.d, TAG, e.key, e.dc_port, su, cu, lines, true);
    dfx_run(&e.d, DFX_TGPROXY);
    dfx_wait_log(&e.d, "proxy-secret: https://127.0.0.1:", 1);
    dfx_wait_log(&e.d, "HTTP status 503, expected 200; no copy yet", 1);
    struct pcli c;
    struct pcli_opts o = {.mode = PCLI_DD, .key = e.key, .dc = 2};
    assert_int_equal(pcli_connect(&c, e.d.port, &o), 0);
    assert_int_equal(pcli_echo(&c, 3, 4096, 0), 0); /* the fake DC's own stream: direct */
    pcli_close(&c);
    char *page = scrape(&e);
    if (!(prom_sample(page, "tgproxy_middle_proxy_fallbacks_total{}") >= 1) ||
        strstr(page, "\ntgproxy_middle_proxy_source_age_seconds{source=proxy-secret} "))
        fail_msg("a tagged client without documents: no fallback counted, or an age:\n%s", page);
    free(page);
    assert_int_equal(dfx_log_count(&e.mp, "client "), 0);

    /* the documents arrive: the next refresh brings the pool up */
    char conf[128];
    int n = snprintf(conf, sizeof conf, "default 2;\nproxy_for 2 127.0.0.1:%u;\n", e.mp.port);
    docsrv_serve(e.docs, "/config", 200, conf, (size_t)n, 0);
    docsrv_serve(e.docs, "/secret", 200, secret, sizeof secret, 0);
    dfx_wait_log(&e.mp, "handshake ok from 127.0.0.1:", 2);
    assert_true(tgtest_wait_until(echo_works, &e, DFX_WAIT_MS));
    dfx_wait_log(&e.mp, "tag " TAG " from 127.0.0.1:", 1);
    env_end(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refresh_store_restart),
        cmocka_unit_test(test_reload_pool_and_tags),
        cmocka_unit_test(test_public_ip_detected),
        cmocka_unit_test(test_no_copy_then_recovery),
    };
    return tgtest_result(cmocka_run_group_tests(tests, NULL, NULL));
}
