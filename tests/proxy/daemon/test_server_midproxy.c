/*
 * Middle-proxy mode through the built daemon: tgproxy (`tgproxy run`) -> tgproxy-fakemp ->
 * the fake DC, all on 127.0.0.1. FakeTLS, dd and classic clients with a tagged secret get
 * every byte back through the middle proxy, which logs their ad tag (top-level or the
 * secret's own from [ad-tags]) and their address; a secret whose [ad-tags] entry is "" stays
 * direct in the same process; a reload that gives it a tag moves its new clients to the
 * middle proxy; and with the middle proxy gone, tagged clients fall back to direct. A secret
 * made over the control API with an `ad_tag` goes through the middle proxy with its tag,
 * a PATCH of the tag moves its new clients to the new one, and `""` sends them direct.
 */
#include "tgtest.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <unistd.h>

#include "core/str.h"
#include "daemon_fx.h"
#include "proxy_client.h"
#include "proxy_fakedc.h"
#include "proxy_fakemp.h"
#include "prom.h"

#define TAG_TOP "c0ffee00c0ffee00c0ffee00c0ffee00"
#define TAG_OWN "11112222333344445555666677778888"
#define TAG_API "abcdef00abcdef00abcdef00abcdef00"
#define TAG_NEW "0123456789abcdef0123456789abcdef"

struct env {
    struct fakedc *dc;
    uint16_t dc_port;
    struct dfx mp, d; /* the fake middle proxy, the daemon */
    char secret_path[128], conf_path[128], state_path[128];
    uint8_t k_dd[16], k_tls[16], k_classic[16], k_own[16];
};

static void write_cfg(struct env *e, const char *plain_tag)
{
    char dd[33], tls[33], cl[33], own[33];
    tg__hex_encode(dd, e->k_dd, 16);
    tg__hex_encode(tls, e->k_tls, 16);
    tg__hex_encode(cl, e->k_classic, 16);
    tg__hex_encode(own, e->k_own, 16);
    dfx_config(&e->d,
               "bind-to = \"127.0.0.1:0\"\n"
               "workers = 1\n"
               "ad-tag = \"" TAG_TOP "\"\n"
               "[secrets]\n"
               "dd = \"dd%s\"\n"
               "tls = { key = \"%s\", domain = \"example.com\" }\n"
               "plain = \"%s\"\n"
               "own = \"dd%s\"\n"
               "[ad-tags]\n"
               "plain = \"%s\"\n"
               "own = \"" TAG_OWN "\"\n"
               "[dcs]\n"
               "default = [\"127.0.0.1:%u\"]\n"
               "[middle-proxy]\n"
               "proxy-secret = \"%s\"\n"
               "proxy-config = \"%s\"\n"
               "connections = 2\n"
               "[stats.prometheus]\n"
               "enabled = true\n"
               "bind-to = \"127.0.0.1:0\"\n"
               "[api]\n"
               "enabled = true\n"
               "bind-to = \"127.0.0.1:0\"\n"
               "state-file = \"%s\"\n",
               dd, tls, cl, own, plain_tag, e->dc_port, e->secret_path, e->conf_path,
               e->state_path);
}

static void env_start(struct env *e)
{
    memset(e, 0, sizeof *e);
    e->dc = fakedc_start(&e->dc_port);
    assert_non_null(e->dc);
    for (int i = 0; i < 16; i++) {
        e->k_dd[i] = (uint8_t)(i + 1), e->k_tls[i] = (uint8_t)(i + 40);
        e->k_classic[i] = (uint8_t)(i + 90), e->k_own[i] = (uint8_t)(i + 150);
    }
    dfx_init(&e->mp, "mp-fakemp");
    dfx_init(&e->d, "mp-daemon");
    dfx_path(&e->mp, "proxy-secret", e->secret_path, sizeof e->secret_path);
    dfx_path(&e->mp, "proxy-config", e->conf_path, sizeof e->conf_path);
    dfx_path(&e->mp, "api.json", e->state_path, sizeof e->state_path);
    uint8_t secret[128];
    for (int i = 0; i < 128; i++)
        secret[i] = (uint8_t)(i * 29 + 3);
    pfmp_secret(e->secret_path, secret, sizeof secret);
    pfmp_start(&e->mp, e->secret_path, e->dc_port, 0, NULL);
    char conf[128];
    snprintf(conf, sizeof conf, "default 2;\nproxy_for 2 127.0.0.1:%u;\n", e->mp.port);
    dfx_write(e->conf_path, conf);
    write_cfg(e, "");
    dfx_run(&e->d, DFX_TGPROXY);
    dfx_wait_log(&e->mp, "handshake ok from 127.0.0.1:", 2); /* the worker's two connections */
}

static void env_stop(struct env *e)
{
    assert_int_equal(dfx_stop(&e->d, SIGTERM), 0);
    dfx_done(&e->d);
    if (e->mp.pid)
        assert_int_equal(dfx_stop(&e->mp, SIGTERM), 0);
    dfx_done(&e->mp);
    fakedc_stop(e->dc);
}

/* The metrics page through prom_scrape.py (prom.h: an independent parser that also holds
   every family to its row in docs/tgproxy.md): its canonical lines, malloc'ed. */
static char *scrape(struct env *e)
{
    char *out = prom_scrape_local(dfx_log_port(&e->d, "[stats.prometheus] serving"));
    assert_non_null(out);
    return out;
}

/* Through the middle proxy: the fake DC's ECHO as packets of the client's framing, every
   byte back (proxy_fakemp.h). */
static void echo_framed(struct env *e, enum pcli_mode mode, const uint8_t *key)
{
    assert_int_equal(pfmp_echo_framed(e->d.port, (int)mode, key), 0);
}

/* Direct: the fake DC sees the client's own stream (no framing), as without middle proxies. */
static void echo_direct(struct env *e, enum pcli_mode mode, const uint8_t *key)
{
    struct pcli c;
    struct pcli_opts o = {.mode = mode, .key = key, .dc = 2, .sni = "example.com"};
    assert_int_equal(pcli_connect(&c, e->d.port, &o), 0);
    assert_int_equal(pcli_echo(&c, 7, 64 * 1024, 0), 0);
    pcli_close(&c);
}

/* A dd client's raw ECHO works: its connection went direct (until the worker sees its
   middle-proxy connections gone, a client still attached to one is closed). */
static bool direct_works(void *arg)
{
    struct env *e = arg;
    struct pcli c;
    struct pcli_opts o = {.mode = PCLI_DD, .key = e->k_dd, .dc = 2};
    if (pcli_connect(&c, e->d.port, &o) != 0)
        return false;
    int rc = pcli_echo(&c, 9, 4096, 0);
    pcli_close(&c);
    return rc == 0;
}

static void test_tagged_and_direct(void **state)
{
    (void)state;
    struct env e;
    env_start(&e);
    echo_framed(&e, PCLI_DD, e.k_dd);
    dfx_wait_log(&e.mp, "tag " TAG_TOP " from 127.0.0.1:", 1);
    echo_framed(&e, PCLI_TLS, e.k_tls);
    dfx_wait_log(&e.mp, "tag " TAG_TOP " from 127.0.0.1:", 2);
    echo_framed(&e, PCLI_DD, e.k_own);
    dfx_wait_log(&e.mp, "tag " TAG_OWN " from 127.0.0.1:", 1);
    char *page = scrape(&e);
    if (!strstr(page, "\ntgproxy_middle_proxy_connections_up{dc=2} 2\n") ||
        !strstr(page, "\ntgproxy_middle_proxy_handshakes_total{} 2\n") ||
        !strstr(page, "\ntgproxy_middle_proxy_clients_active{} ") ||
        !strstr(page, "\ntgproxy_middle_proxy_frames_total{direction=up} "))
        fail_msg("metrics page lacks the middle-proxy families:\n%s", page);
    free(page);
    /* [ad-tags] plain = "": direct, in the same process */
    uint64_t before = fakedc_counters(e.dc).accepted;
    echo_direct(&e, PCLI_CLASSIC, e.k_classic);
    assert_int_equal(dfx_log_count(&e.mp, "client "), 3);
    assert_true(fakedc_counters(e.dc).accepted > before);

    /* a reload gives "plain" a tag: its new clients go through the middle proxy */
    write_cfg(&e, TAG_OWN);
    dfx_signal(&e.d, SIGHUP);
    dfx_wait_log(&e.d, "reload: ", 1);
    echo_framed(&e, PCLI_CLASSIC, e.k_classic);
    dfx_wait_log(&e.mp, "tag " TAG_OWN " from 127.0.0.1:", 2);
    dfx_wait_log(&e.mp, "flags 0x40021008", 1); /* abridged, tagged */

    /* the middle proxy goes away: tagged clients fall back to direct */
    assert_int_equal(dfx_stop(&e.mp, SIGTERM), 0);
    assert_true(tgtest_wait_until(direct_works, &e, DFX_WAIT_MS));
    page = scrape(&e);
    if (!strstr(page, "\ntgproxy_middle_proxy_connections_up{dc=2} 0\n") ||
        strstr(page, "\ntgproxy_middle_proxy_fallbacks_total{} 0\n") ||
        strstr(page, "\ntgproxy_middle_proxy_failures_total{reason=connect} 0\n"))
        fail_msg("after the middle proxy went: no fallback or failure counted:\n%s", page);
    free(page);
    echo_direct(&e, PCLI_DD, e.k_dd);
    env_stop(&e);
}

static size_t on_body(char *p, size_t sz, size_t n, void *u)
{
    char *b = u;
    size_t have = strlen(b), k = sz * n;
    if (have + k < 4096) {
        memcpy(b + have, p, k);
        b[have + k] = '\0';
    }
    return sz * n;
}

/* One control API call (no token: the API is on loopback): the status; the body in out. */
static long api_call(struct env *e, const char *method, const char *path, const char *body,
                     char out[4096])
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s",
             (unsigned)dfx_log_port(&e->d, "[api] serving"), path);
    out[0] = '\0';
    CURL *c = curl_easy_init();
    assert_non_null(c);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 20000L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return status;
}

/* ad_tag over the control API: made with one, PATCHed to another, then to none. */
static void test_api_ad_tag(void **state)
{
    (void)state;
    struct env e;
    env_start(&e);
    char out[4096];
    long st = api_call(&e, "POST", "/v1/secrets",
                       "{\"label\":\"viaapi\",\"kind\":\"dd\",\"ad_tag\":\"" TAG_API "\"}", out);
    if (st != 201)
        fail_msg("create: %ld %s", st, out);
    json_t *j = json_loads(out, 0, NULL);
    assert_non_null(j);
    const char *k = json_string_value(json_object_get(json_object_get(j, "data"), "key"));
    assert_non_null(k);
    uint8_t key[16];
    assert_int_equal(tg__hex_decode(key, 16, k + 2, 32), 16);
    json_decref(j);
    echo_framed(&e, PCLI_DD, key);
    dfx_wait_log(&e.mp, "tag " TAG_API " from 127.0.0.1:", 1);
    st = api_call(&e, "PATCH", "/v1/secrets/viaapi", "{\"ad_tag\":\"" TAG_NEW "\"}", out);
    if (st != 200 || !strstr(out, "\"ad_tag\":\"" TAG_NEW "\""))
        fail_msg("PATCH ad_tag: %ld %s", st, out);
    echo_framed(&e, PCLI_DD, key);
    dfx_wait_log(&e.mp, "tag " TAG_NEW " from 127.0.0.1:", 1);
    assert_int_equal(dfx_log_count(&e.mp, "tag " TAG_API " from"), 1);
    st = api_call(&e, "PATCH", "/v1/secrets/viaapi", "{\"ad_tag\":\"\"}", out);
    if (st != 200 || !strstr(out, "\"ad_tag\":\"\""))
        fail_msg("PATCH ad_tag none: %ld %s", st, out);
    int clients = dfx_log_count(&e.mp, "client ");
    uint64_t before = fakedc_counters(e.dc).accepted;
    echo_direct(&e, PCLI_DD, key); /* no tag: direct */
    assert_int_equal(dfx_log_count(&e.mp, "client "), clients);
    assert_true(fakedc_counters(e.dc).accepted > before);
    assert_int_equal(api_call(&e, "PATCH", "/v1/secrets/viaapi", "{\"ad_tag\":\"zz\"}", out), 400);
    env_stop(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tagged_and_direct),
        cmocka_unit_test(test_api_ad_tag),
    };
    return tgtest_result(cmocka_run_group_tests(tests, NULL, NULL));
}
