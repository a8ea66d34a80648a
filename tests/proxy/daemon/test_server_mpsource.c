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
 *   - a restart with the HTTPS server gone starts from the stored copies and serves.
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

#define TAG "c0ffee00c0ffee00c0ffee00c0ffee00"

struct env {
    struct fakedc *dc;
    uint16_t dc_port;
    struct docsrv *docs;
    struct dfx mp, d;
    char secret_path[128], state[128];
    uint8_t key[16];
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
    char key[33], su[96], cu[96];
    tg__hex_encode(key, e->key, 16);
    docsrv_url(e->docs, "/secret", su, sizeof su);
    docsrv_url(e->docs, "/config", cu, sizeof cu);
    dfx_config(&e->d,
               "bind-to = \"127.0.0.1:0\"\n"
               "workers = 1\n"
               "ad-tag = \"" TAG "\"\n"
               "[secrets]\n"
               "dd = \"dd%s\"\n"
               "[dcs]\n"
               "default = [\"127.0.0.1:%u\"]\n"
               "[middle-proxy]\n"
               "proxy-secret = \"%s\"\n"
               "proxy-config = \"%s\"\n"
               "state-dir = \"%s\"\n"
               "update-each = \"1s\"\n"
               "fallback-direct = false\n"
               "[stats.prometheus]\n"
               "enabled = true\n"
               "bind-to = \"127.0.0.1:0\"\n",
               key, e->dc_port, su, cu, e->state);
}

static char *scrape(struct env *e)
{
    uint16_t port = dfx_log_port(&e->d, "[stats.prometheus] serving");
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 %s/tests/proxy/prom_scrape.py http://127.0.0.1:%u/ tgproxy "
             "%s/docs/tgproxy.md",
             TGKIT_SOURCE_DIR, (unsigned)port, TGKIT_SOURCE_DIR);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *out = calloc(1, 1 << 20);
    assert_non_null(out);
    out[0] = '\n';
    size_t n = fread(out + 1, 1, (1 << 20) - 2, p);
    out[1 + n] = '\0';
    assert_int_equal(pclose(p), 0);
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

static void test_refresh_store_restart(void **state)
{
    (void)state;
    struct env e;
    memset(&e, 0, sizeof e);
    e.dc = fakedc_start(&e.dc_port);
    assert_non_null(e.dc);
    for (int i = 0; i < 16; i++)
        e.key[i] = (uint8_t)(i + 7);
    e.docs = docsrv_start();
    dfx_init(&e.mp, "mps-fakemp");
    dfx_init(&e.d, "mps-daemon");
    dfx_path(&e.mp, "proxy-secret", e.secret_path, sizeof e.secret_path);
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

    assert_int_equal(dfx_stop(&e.d, SIGTERM), 0);
    dfx_done(&e.d);
    assert_int_equal(dfx_stop(&e.mp, SIGTERM), 0);
    dfx_done(&e.mp);
    fakedc_stop(e.dc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refresh_store_restart),
    };
    return tgtest_result(cmocka_run_group_tests(tests, NULL, NULL));
}
