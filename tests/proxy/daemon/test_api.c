/*
 * The [api] control API over real HTTP (libcurl) on 127.0.0.1 and ::1, answers parsed with
 * jansson (an independent JSON implementation): access rules and every error code, secrets
 * made over the API completing real FakeTLS and dd handshakes against the engine, disable /
 * enable / rotate / reset-quota, restart and reload keeping API changes and hand edits, and
 * 100 concurrent API writes beside reloads leaving a valid state file with every change;
 * two proxies in one [fleet] on a real redis-server sharing the API's secrets.
 */
#include "tgtest.h"

#include "proxy_client.h"
#include "proxy_fakedc.h"
#include "proxy_front.h"
#include "prom.h"
#include "proxy_harness.h"
#include "proxy_proc.h"
#include "redis_server.h"
#include "slowloris.h"
#include "wait.h"
#include "proxy/daemon/apistore.h"
#include "proxy/daemon/server.h"
#include "core/log.h"

#include <curl/curl.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TOKEN  "t0k3n-for-the-api-test"
#define BINARY TGKIT_BINARY_DIR "/tgproxy"

struct env {
    char dir[64], conf[128], token[128], state[128];
    struct fakedc *dc;
    uint16_t dc_port;
    struct pfront *front;
    uint16_t front_port;
    struct config cfg;
    struct server *srv;
    uint16_t port, api;
    bool v6;
    pid_t pid; /* served by the built daemon (env_spawn), not server_start */
    char log[128];
};

struct reply {
    long status;
    char *body;
    size_t len;
    char etag[64];
};

static size_t on_body(char *p, size_t sz, size_t n, void *u)
{
    struct reply *r = u;
    r->body = realloc(r->body, r->len + sz * n + 1);
    memcpy(r->body + r->len, p, sz * n);
    r->len += sz * n;
    r->body[r->len] = '\0';
    return sz * n;
}

static size_t on_header(char *p, size_t sz, size_t n, void *u)
{
    struct reply *r = u;
    if (strncasecmp(p, "ETag: ", 6) == 0) {
        size_t k = sz * n - 6;
        while (k && (p[6 + k - 1] == '\r' || p[6 + k - 1] == '\n'))
            k--;
        snprintf(r->etag, sizeof r->etag, "%.*s", (int)k, p + 6);
    }
    return sz * n;
}

/* One request; token NULL = no Authorization header. */
static struct reply http(const struct env *e, const char *method, const char *path,
                         const char *token, const char *body, const char *if_match)
{
    struct reply r = {0};
    CURL *c = curl_easy_init();
    assert_non_null(c);
    char url[256], auth[256], im[128];
    snprintf(url, sizeof url, "http://%s:%u%s", e->v6 ? "[::1]" : "127.0.0.1", (unsigned)e->api,
             path);
    struct curl_slist *h = NULL;
    if (token) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        h = curl_slist_append(h, auth);
    }
    if (if_match) {
        snprintf(im, sizeof im, "If-Match: %s", if_match);
        h = curl_slist_append(h, im);
    }
    if (body)
        h = curl_slist_append(h, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 20000L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    CURLcode rc = curl_easy_perform(c);
    if (rc != CURLE_OK)
        fail_msg("%s %s: %s", method, path, curl_easy_strerror(rc));
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (!r.body)
        r.body = calloc(1, 1);
    return r;
}

/* The answer must be the envelope: ok true with data, or ok false with an error code. */
static json_t *envelope(const struct reply *r, long want_status, const char *want_code)
{
    if (r->status != want_status)
        fail_msg("status %ld, want %ld: %s", r->status, want_status, r->body);
    json_error_t je;
    json_t *j = json_loads(r->body, 0, &je);
    if (!j)
        fail_msg("not JSON (%s): %s", je.text, r->body);
    json_t *ok = json_object_get(j, "ok");
    assert_true(json_is_boolean(ok));
    if (want_code) {
        assert_true(json_is_false(ok));
        const char *code = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
        if (!code || strcmp(code, want_code) != 0)
            fail_msg("error code %s, want %s", code ? code : "(none)", want_code);
        assert_non_null(json_string_value(json_object_get(json_object_get(j, "error"), "message")));
    } else {
        assert_true(json_is_true(ok));
        assert_non_null(json_object_get(j, "data"));
    }
    return j;
}

static void expect(const struct env *e, const char *method, const char *path, const char *token,
                   const char *body, long status, const char *code)
{
    struct reply r = http(e, method, path, token, body, NULL);
    json_decref(envelope(&r, status, code));
    free(r.body);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    chmod(path, mode);
}

static const uint8_t file_key[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

static void write_conf(struct env *e, const char *extra_secrets, const char *api_extra)
{
    char hex[33], text[4096];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", file_key[i]);
    snprintf(text, sizeof text,
             "bind-to = \"127.0.0.1:0\"\n"
             "[secrets]\n"
             "file1 = \"ee%s%s\"\n%s"
             "[dcs]\ndefault = \"127.0.0.1:%u\"\n"
             "[domain-fronting]\nhost = \"127.0.0.1\"\nport = %u\n"
             "[defense.tls-front]\nenabled = false\n" /* no probes to the stand-in front */
             "[api]\nenabled = true\nbind-to = \"%s\"\ntoken-file = \"%s\"\n"
             "state-file = \"%s\"\nmax-body = 2048\nauth-failures-per-minute = 6\n%s",
             hex, "6578616d706c652e636f6d" /* example.com */, extra_secrets ? extra_secrets : "",
             (unsigned)e->dc_port, (unsigned)e->front_port, e->v6 ? "[::1]:0" : "127.0.0.1:0",
             e->token, e->state, api_extra ? api_extra : "");
    write_file(e->conf, text, 0600);
}

static void env_start(struct env *e)
{
    char err[CONFIG_ERR_MAX];
    config_init(&e->cfg);
    if (apistore_config_load(&e->cfg, e->conf, err, sizeof err, NULL, NULL) != 0)
        fail_msg("config: %s", err);
    assert_int_equal(server_start(&e->cfg, &e->srv), 0);
    e->port = server_port(e->srv, 0);
    e->api = server_api_port(e->srv);
    assert_true(e->api != 0);
}

static void env_stop_server(struct env *e)
{
    server_stop(e->srv);
    e->srv = NULL;
    config_cleanup(&e->cfg);
}

/* Files, fake DC and front of an instance, not started. */
static void env_prepare(struct env *e, bool v6, const char *api_extra)
{
    memset(e, 0, sizeof *e);
    e->v6 = v6;
    snprintf(e->dir, sizeof e->dir, "/tmp/tgtest-api-XXXXXX");
    assert_non_null(mkdtemp(e->dir));
    snprintf(e->conf, sizeof e->conf, "%s/proxy.toml", e->dir);
    snprintf(e->token, sizeof e->token, "%s/api.token", e->dir);
    snprintf(e->state, sizeof e->state, "%s/api.json", e->dir);
    write_file(e->token, TOKEN "\n", 0600);
    assert_non_null(e->dc = fakedc_start(&e->dc_port));
    assert_non_null(e->front = pfront_start(&e->front_port));
    write_conf(e, NULL, api_extra);
}

static void env_init(struct env *e, bool v6, const char *api_extra)
{
    env_prepare(e, v6, api_extra);
    env_start(e);
}

static bool reaped(void *arg)
{
    return waitpid(*(pid_t *)arg, NULL, WNOHANG) != 0;
}

/* As env_init, but served by the built daemon (`tgproxy run FILE`): another process, as
   the servers of a real fleet are. Its ports come from its log. */
static void env_spawn(struct env *e, const char *api_extra)
{
    env_prepare(e, false, api_extra);
    snprintf(e->log, sizeof e->log, "%s/proxy.log", e->dir);
    char *argv[] = {(char *)BINARY, (char *)"run", e->conf, NULL};
    e->pid = pproc_spawn_logged(argv, e->log);
    assert_true(e->pid > 0);
    if (pproc_log_wait(e->log, "listening on", 1) != 0)
        fail_msg("%s: the daemon never served (see %s)", BINARY, e->log);
    assert_int_equal(pproc_log_port(e->log, "listening on", &e->port), 0);
    assert_int_equal(pproc_log_port(e->log, "[api] serving", &e->api), 0);
}

static void env_done(struct env *e)
{
    if (e->pid > 0) {
        kill(e->pid, SIGTERM);
        if (!tgtest_wait_until(reaped, &e->pid, 10000)) {
            kill(e->pid, SIGKILL);
            waitpid(e->pid, NULL, 0);
        }
        assert_int_equal(pproc_log_count(e->log, TOKEN), 0); /* never in its log */
        unlink(e->log);
    } else {
        env_stop_server(e);
    }
    fakedc_stop(e->dc);
    pfront_stop(e->front);
    unlink(e->conf);
    unlink(e->token);
    unlink(e->state);
    rmdir(e->dir);
}

static void hex_key(const char *secret_hex, uint8_t key[16])
{
    assert_true(strlen(secret_hex) >= 2 + 32 || strlen(secret_hex) == 32);
    const char *k = strlen(secret_hex) == 32 ? secret_hex : secret_hex + 2;
    for (int i = 0; i < 16; i++) {
        unsigned v;
        assert_int_equal(sscanf(k + 2 * i, "%2x", &v), 1);
        key[i] = (uint8_t)v;
    }
}

/* A whole handshake and an echo with key in mode: 0, or the failing step's error. */
static int relay_once(const struct env *e, enum pcli_mode mode, const uint8_t key[16])
{
    struct pcli c;
    struct pcli_opts o = {
        .mode = mode, .key = key, .sni = "example.com", .dc = 2, .timeout_ms = 5000};
    int rc = pcli_connect(&c, e->port, &o);
    if (rc == 0)
        rc = pcli_echo(&c, 7, 5000, 0);
    pcli_close(&c);
    return rc;
}

/* Create a secret; its key (from the answer's "key") into key. */
static void create(const struct env *e, const char *body, uint8_t key[16])
{
    struct reply r = http(e, "POST", "/v1/secrets", TOKEN, body, NULL);
    json_t *j = envelope(&r, 201, NULL);
    json_t *d = json_object_get(j, "data");
    const char *k = json_string_value(json_object_get(d, "key"));
    assert_non_null(k);
    hex_key(k, key);
    const char *tme = json_string_value(json_object_get(json_object_get(d, "links"), "tme"));
    assert_non_null(tme);
    assert_non_null(strstr(tme, "https://t.me/proxy?server=127.0.0.1&port="));
    assert_non_null(strstr(tme, k)); /* the link carries the same secret */
    assert_true(r.etag[0] == '"');
    json_decref(j);
    free(r.body);
}

static json_t *get_data(const struct env *e, const char *path, struct reply *keep)
{
    struct reply r = http(e, "GET", path, TOKEN, NULL, NULL);
    json_t *j = envelope(&r, 200, NULL);
    if (keep)
        *keep = r;
    else
        free(r.body);
    json_t *d = json_incref(json_object_get(j, "data"));
    json_decref(j);
    return d;
}

static json_int_t stat_of(const struct env *e, const char *label, const char *field)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/secrets/%s/stats", label);
    json_t *d = get_data(e, path, NULL);
    json_int_t v = json_integer_value(json_object_get(d, field));
    json_decref(d);
    return v;
}

static bool listed(const struct env *e, const char *label, bool *disabled)
{
    json_t *d = get_data(e, "/v1/secrets", NULL);
    json_t *list = json_object_get(d, "secrets"), *it;
    size_t i;
    bool found = false;
    json_array_foreach(list, i, it)
    {
        if (strcmp(json_string_value(json_object_get(it, "label")), label) == 0) {
            found = true;
            if (disabled)
                *disabled = json_is_true(json_object_get(it, "disabled"));
        }
    }
    json_decref(d);
    return found;
}

static void test_access_and_errors(void **state)
{
    (void)state;
    struct env e;
    env_init(&e, false, NULL);
    expect(&e, "GET", "/v1/health", NULL, NULL, 200, NULL); /* no token needed */
    expect(&e, "GET", "/v1/ready", NULL, NULL, 200, NULL);
    expect(&e, "GET", "/v1/info", NULL, NULL, 401, "unauthorized");
    expect(&e, "GET", "/v1/info", "wrong-token", NULL, 401, "unauthorized");
    expect(&e, "GET", "/v1/info", TOKEN "x", NULL, 401, "unauthorized");
    expect(&e, "GET", "/v1/info", TOKEN, NULL, 200, NULL);
    expect(&e, "GET", "/v1/nothing", TOKEN, NULL, 404, "not_found");
    expect(&e, "GET", "/v1/secrets/nobody", TOKEN, NULL, 404, "not_found");
    expect(&e, "POST", "/v1/secrets/nobody/disable", TOKEN, NULL, 404, "not_found");
    expect(&e, "DELETE", "/v1/info", TOKEN, NULL, 405, "method_not_allowed");
    expect(&e, "GET", "/v1/reload", TOKEN, NULL, 405, "method_not_allowed");
    expect(&e, "PUT", "/v1/secrets", TOKEN, NULL, 405, "method_not_allowed");
    char big[4096];
    memset(big, ' ', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    big[0] = '{';
    big[sizeof big - 2] = '}';
    expect(&e, "POST", "/v1/secrets", TOKEN, big, 413, "too_large");
    expect(&e, "POST", "/v1/secrets", TOKEN, "{\"label\":", 400, "bad_json");
    expect(&e, "POST", "/v1/secrets", TOKEN, "{\"label\":\"a\",\"label\":\"b\"}", 400, "bad_json");
    expect(&e, "POST", "/v1/secrets", TOKEN, "{\"label\":\"<img src=x>\",\"kind\":\"dd\"}", 400,
           "bad_request");
    expect(&e, "POST", "/v1/secrets", TOKEN, "{\"label\":\"file1\",\"kind\":\"dd\"}", 409,
           "exists");
    expect(&e, "POST", "/v1/secrets/file1/rotate", TOKEN, NULL, 409, "file_owned");
    /* a stale If-Match */
    uint8_t key[16];
    create(&e, "{\"label\":\"bob\",\"kind\":\"dd\"}", key);
    struct reply r;
    json_decref(get_data(&e, "/v1/secrets/bob", &r));
    char etag[64];
    snprintf(etag, sizeof etag, "%s", r.etag);
    free(r.body);
    r = http(&e, "PATCH", "/v1/secrets/bob", TOKEN, "{\"limits\":{\"max-connections\":5}}",
             "\"999\"");
    json_decref(envelope(&r, 409, "revision_mismatch"));
    free(r.body);
    r = http(&e, "PATCH", "/v1/secrets/bob", TOKEN, "{\"limits\":{\"max-connections\":5}}", etag);
    json_t *j = envelope(&r, 200, NULL);
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(json_object_get(j, "data"), "limits"), "max-connections")),
                     5);
    json_decref(j);
    free(r.body);
    r = http(&e, "PATCH", "/v1/secrets/bob", TOKEN, "{}", etag); /* etag is stale now */
    json_decref(envelope(&r, 409, "revision_mismatch"));
    free(r.body);
    /* the token is never in the log or an answer */
    r = http(&e, "GET", "/v1/info", "guess", NULL, NULL);
    assert_null(strstr(r.body, "guess"));
    free(r.body);
    /* drain: ready goes 503 */
    expect(&e, "POST", "/v1/drain", NULL, NULL, 401, "unauthorized");
    expect(&e, "POST", "/v1/drain", TOKEN, NULL, 202, NULL);
    expect(&e, "GET", "/v1/ready", NULL, NULL, 503, "not_ready");
    /* failed logins: after auth-failures-per-minute (6) of them, 429 even for the right token */
    bool limited = false;
    for (int i = 0; i < 16 && !limited; i++) {
        r = http(&e, "GET", "/v1/info", "bad", NULL, NULL);
        limited = r.status == 429;
        free(r.body);
    }
    assert_true(limited);
    expect(&e, "GET", "/v1/info", TOKEN, NULL, 429, "too_many_failures");
    expect(&e, "GET", "/v1/health", NULL, NULL, 200, NULL);
    env_done(&e);
}

static void test_allow_and_v6(void **state)
{
    (void)state;
    struct env e;
    env_init(&e, true, NULL); /* API on [::1], default allow (loopback) */
    expect(&e, "GET", "/v1/info", TOKEN, NULL, 200, NULL);
    uint8_t key[16];
    create(&e, "{\"label\":\"six\",\"kind\":\"ee\",\"domain\":\"example.com\"}", key);
    assert_int_equal(relay_once(&e, PCLI_TLS, key), 0);
    env_done(&e);
    env_init(&e, false, "allow = [\"127.0.0.2/32\", \"10.0.0.0/8\"]\n");
    expect(&e, "GET", "/v1/health", TOKEN, NULL, 403, "forbidden");
    expect(&e, "GET", "/v1/info", TOKEN, NULL, 403, "forbidden");
    env_done(&e);
}

/* Slow clients cannot hold the API: 32 trickling connections from one address (its
   share; a 33rd is closed at accept) and 16 from each of 4 more are held while an API call
   from 127.0.0.1 is answered; and a connection trickling a byte every 0.5 s, which the
   10 s idle timeout alone never closes, is cut once its request is 10 s overdue. */
static void test_slow_clients(void **state)
{
    (void)state;
    struct env e;
    env_init(&e, false, NULL);
    static struct slow s;
    memset(&s, 0, sizeof s);
    slow_open(&s, "127.0.0.2", e.api, 32);
    assert_true(slow_refused("127.0.0.2", e.api));
    for (int i = 3; i <= 6; i++) {
        char ip[16];
        snprintf(ip, sizeof ip, "127.0.0.%d", i);
        slow_open(&s, ip, e.api, 16);
    }
    expect(&e, "GET", "/v1/health", TOKEN, NULL, 200, NULL);
    assert_int_equal(slow_round(&s, 0), 0); /* all 96 still held */
    slow_close(&s);
    slow_open(&s, "127.0.0.7", e.api, 1);
    slow_until_cut(&s, 500, 40);
    slow_close(&s);
    env_done(&e);
}

static void test_secrets_lifecycle(void **state)
{
    (void)state;
    struct env e;
    env_init(&e, false, NULL);
    uint8_t tls[16], dd[16];
    create(&e,
           "{\"label\":\"alice\",\"kind\":\"ee\",\"domain\":\"example.com\","
           "\"limits\":{\"quota\":100000000}}",
           tls);
    create(&e,
           "{\"label\":\"dan\",\"kind\":\"dd\",\"ad_tag\":\"00112233445566778899AABBCCDDEEFF\"}",
           dd);
    expect(&e, "POST", "/v1/secrets", TOKEN, "{\"label\":\"t\",\"kind\":\"dd\",\"ad_tag\":\"12\"}",
           400, "bad_request");
    json_t *dj = get_data(&e, "/v1/secrets/dan", NULL);
    assert_string_equal(json_string_value(json_object_get(dj, "ad_tag")),
                        "00112233445566778899aabbccddeeff");
    json_decref(dj);
    struct apistore st0;
    char err0[CONFIG_ERR_MAX];
    assert_int_equal(apistore_load(&st0, e.state, err0, sizeof err0), 0);
    assert_int_equal(apistore_find(&st0, "dan")->ad_tag_mode, 1);
    assert_int_equal(apistore_find(&st0, "dan")->ad_tag[15], 0xff);
    apistore_cleanup(&st0);
    assert_int_equal(relay_once(&e, PCLI_TLS, tls), 0);
    assert_int_equal(relay_once(&e, PCLI_DD, dd), 0);
    assert_int_equal(relay_once(&e, PCLI_TLS, file_key), 0);
    assert_true(pharness_wait_idle(e.srv, 10000));
    assert_int_equal(stat_of(&e, "alice", "connections_total"), 1);
    assert_int_equal(stat_of(&e, "dan", "connections_total"), 1);
    assert_true(stat_of(&e, "alice", "bytes_to_client") >= 5000);
    assert_true(stat_of(&e, "alice", "quota_used") >= 10000);
    /* reset-quota */
    expect(&e, "POST", "/v1/secrets/alice/reset-quota", TOKEN, NULL, 200, NULL);
    assert_int_equal(stat_of(&e, "alice", "quota_used"), 0);
    expect(&e, "POST", "/v1/secrets/dan/reset-quota", TOKEN, NULL, 409, "no_quota");
    /* QR images */
    struct reply r = http(&e, "GET", "/v1/secrets/alice/qr.svg", TOKEN, NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_true(strncmp(r.body, "<svg", 4) == 0 && strstr(r.body, "</svg>"));
    free(r.body);
    r = http(&e, "GET", "/v1/secrets/alice/qr.png", TOKEN, NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_true(r.len > 100 && memcmp(r.body, "\x89PNG\r\n\x1a\n", 8) == 0);
    free(r.body);
    /* disable: a live relay of the secret is closed, the next handshake is fronted; a relay
       of another secret runs on; enable brings it back */
    struct pcli live, other;
    struct pcli_opts lo = {
        .mode = PCLI_TLS, .key = tls, .sni = "example.com", .dc = 2, .timeout_ms = 10000};
    assert_int_equal(pcli_connect(&live, e.port, &lo), 0);
    assert_int_equal(pcli_echo(&live, 1, 1000, 0), 0);
    lo.key = file_key;
    assert_int_equal(pcli_connect(&other, e.port, &lo), 0);
    uint8_t idle[FAKEDC_CMD_LEN];
    fakedc_cmd(idle, "IDLE", 0, 0);
    assert_int_equal(pcli_send(&other, idle, sizeof idle), 0);
    expect(&e, "POST", "/v1/secrets/alice/disable", TOKEN, NULL, 200, NULL);
    uint8_t one;
    ssize_t got = pcli_recv(&live, &one, 1); /* closed by the proxy, not timed out */
    if (got != 0 && got != -ECONNRESET)
        fail_msg("the disabled secret's relay: recv %zd, want EOF or a reset", got);
    pcli_close(&live);
    assert_int_equal(stat_of(&e, "file1", "connections_active"), 1);
    assert_int_equal(pcli_send(&other, "more", 4), 0);
    assert_int_equal(stat_of(&e, "file1", "connections_active"), 1);
    pcli_close(&other);
    assert_true(pharness_wait_idle(e.srv, 10000));
    bool dis = false;
    assert_true(listed(&e, "alice", &dis) && dis);
    size_t fronted = pfront_count(e.front);
    assert_true(relay_once(&e, PCLI_TLS, tls) != 0);
    assert_true(pfront_count(e.front) == fronted + 1);
    expect(&e, "POST", "/v1/secrets/alice/enable", TOKEN, NULL, 200, NULL);
    assert_int_equal(relay_once(&e, PCLI_TLS, tls), 0);
    /* a file secret can be disabled (and enabled) too */
    expect(&e, "POST", "/v1/secrets/file1/disable", TOKEN, NULL, 200, NULL);
    assert_true(relay_once(&e, PCLI_TLS, file_key) != 0);
    expect(&e, "POST", "/v1/secrets/file1/enable", TOKEN, NULL, 200, NULL);
    assert_int_equal(relay_once(&e, PCLI_TLS, file_key), 0);
    /* rotate: the old key stops, the new one (from /link) works */
    expect(&e, "POST", "/v1/secrets/dan/rotate", TOKEN, NULL, 200, NULL);
    assert_true(relay_once(&e, PCLI_DD, dd) != 0);
    json_t *d = get_data(&e, "/v1/secrets/dan/link", NULL);
    const char *tg = json_string_value(json_object_get(d, "tg"));
    assert_non_null(tg);
    const char *sec = strstr(tg, "secret=");
    assert_non_null(sec);
    uint8_t dd2[16];
    hex_key(sec + 7, dd2);
    json_decref(d);
    assert_true(memcmp(dd, dd2, 16) != 0);
    assert_int_equal(relay_once(&e, PCLI_DD, dd2), 0);
    /* restart: API changes stay; a hand edit then a reload: both stay */
    env_stop_server(&e);
    env_start(&e);
    assert_true(listed(&e, "alice", NULL) && listed(&e, "dan", NULL));
    assert_int_equal(relay_once(&e, PCLI_DD, dd2), 0);
    write_conf(&e, "hand = \"dd0f0e0d0c0b0a09080706050403020100\"\n", NULL);
    assert_int_equal(server_reload_file(e.srv, e.conf), 0);
    assert_true(listed(&e, "hand", NULL) && listed(&e, "alice", NULL) && listed(&e, "dan", NULL));
    expect(&e, "POST", "/v1/reload", TOKEN, NULL, 200, NULL);
    /* delete */
    expect(&e, "DELETE", "/v1/secrets/alice", TOKEN, NULL, 200, NULL);
    assert_false(listed(&e, "alice", NULL));
    assert_true(relay_once(&e, PCLI_TLS, tls) != 0);
    /* info lists the recent reloads, newest first */
    d = get_data(&e, "/v1/info", NULL);
    json_t *recent = json_object_get(json_object_get(d, "reloads"), "recent");
    assert_true(json_array_size(recent) >= 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(recent, 0), "origin")),
                        "api");
    json_decref(d);
    env_done(&e);
}

/* 100 API writes from 10 threads, with reloads (SIGHUP's path) running beside them. */
struct writer {
    struct env *e;
    int id;
    int failures;
    int *written; /* atomic: writes done by every writer */
};

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    for (int i = 0; i < 10; i++) {
        char body[128];
        snprintf(body, sizeof body, "{\"label\":\"w%d-%d\",\"kind\":\"dd\"}", w->id, i);
        struct reply r = http(w->e, "POST", "/v1/secrets", TOKEN, body, NULL);
        w->failures += r.status != 201;
        free(r.body);
        __atomic_add_fetch(w->written, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

struct hupper {
    struct env *e;
    int written; /* atomic */
    int n, failed;
};

/* A reload after each API write (a mutex is not fair: reloading in a tight loop would
   starve the API thread rather than interleave with it). */
static void *hup_main(void *arg)
{
    struct hupper *h = arg;
    int seen = 0;
    while (seen < 100) {
        int now = __atomic_load_n(&h->written, __ATOMIC_ACQUIRE);
        if (now == seen) {
            sched_yield();
            continue;
        }
        seen = now;
        h->failed += server_reload_file(h->e->srv, h->e->conf) != 0;
        h->n++;
    }
    return NULL;
}

static void test_concurrent_writes(void **state)
{
    (void)state;
    struct env e;
    env_init(&e, false, NULL);
    pthread_t th[10], hup;
    struct writer w[10];
    struct hupper h = {.e = &e};
    assert_int_equal(pthread_create(&hup, NULL, hup_main, &h), 0);
    for (int i = 0; i < 10; i++) {
        w[i] = (struct writer){.e = &e, .id = i, .written = &h.written};
        assert_int_equal(pthread_create(&th[i], NULL, writer_main, &w[i]), 0);
    }
    for (int i = 0; i < 10; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].failures, 0);
    }
    pthread_join(hup, NULL);
    assert_true(h.n > 0);
    assert_int_equal(h.failed, 0);
    struct apistore st;
    char err[CONFIG_ERR_MAX];
    assert_int_equal(apistore_load(&st, e.state, err, sizeof err), 0);
    assert_int_equal(st.n, 100);
    for (int i = 0; i < 10; i++)
        for (int k = 0; k < 10; k++) {
            char label[32];
            snprintf(label, sizeof label, "w%d-%d", i, k);
            assert_non_null(apistore_find(&st, label));
        }
    apistore_cleanup(&st);
    json_t *d = get_data(&e, "/v1/secrets", NULL);
    assert_int_equal(json_array_size(json_object_get(d, "secrets")), 101);
    json_decref(d);
    print_message("100 API writes beside %d reloads\n", h.n);
    env_done(&e);
}


/* A FakeTLS relay of key from src_ip with the hello's clock off by skew_s: 0 or an error. */
static int relay_from(const struct env *e, const uint8_t key[16], const char *src_ip,
                      int64_t skew_s)
{
    struct pcli c;
    struct pcli_opts o = {.mode = PCLI_TLS, .key = key, .sni = "example.com", .dc = 2,
                          .timeout_ms = 5000, .src_ip = src_ip, .time_skew_s = skew_s};
    int rc = pcli_connect(&c, e->port, &o);
    if (rc == 0)
        rc = pcli_echo(&c, 7, 100, 0);
    pcli_close(&c);
    return rc;
}

/* Per-secret stats: unique client addresses (and which, newest first), handshakes by
   outcome, last seen; the same numbers on the Prometheus page. */
static void test_secret_stats(void **state)
{
    (void)state;
    struct env e;
    env_init(&e, false, "[stats.prometheus]\nenabled = true\nbind-to = \"127.0.0.1:0\"\n");
    uint8_t key[16];
    create(&e, "{\"label\":\"eve\",\"kind\":\"ee\",\"domain\":\"example.com\"}", key);
    json_t *d = get_data(&e, "/v1/secrets/eve/stats", NULL);
    assert_int_equal(json_integer_value(json_object_get(d, "unique_ips")), 0);
    assert_true(json_is_null(json_object_get(d, "last_seen")));
    assert_null(json_object_get(d, "clients"));
    json_decref(d);
    int64_t t0 = (int64_t)time(NULL);
    assert_int_equal(relay_from(&e, key, "127.0.0.1", 0), 0);
    assert_int_equal(relay_from(&e, key, "127.0.0.1", 0), 0);
    assert_int_equal(relay_from(&e, key, "127.0.0.2", 0), 0);
    assert_true(relay_from(&e, key, "127.0.0.3", 100000) != 0); /* stale: fronted */
    assert_true(pharness_wait_idle(e.srv, 10000));
    d = get_data(&e, "/v1/secrets/eve/stats", NULL);
    assert_int_equal(json_integer_value(json_object_get(d, "unique_ips")), 2);
    assert_true(json_integer_value(json_object_get(d, "last_seen")) >= t0);
    json_t *hs = json_object_get(d, "handshakes");
    assert_int_equal(json_integer_value(json_object_get(hs, "ok")), 3);
    assert_int_equal(json_integer_value(json_object_get(hs, "stale")), 1);
    assert_int_equal(json_integer_value(json_object_get(hs, "replay")), 0);
    json_t *cl = json_object_get(d, "clients");
    assert_int_equal(json_array_size(cl), 2);
    const char *a0 = json_string_value(json_object_get(json_array_get(cl, 0), "address")),
               *a1 = json_string_value(json_object_get(json_array_get(cl, 1), "address"));
    assert_true(a0 && a1); /* newest first, to the second: both in one second here */
    assert_true((strcmp(a0, "127.0.0.1") == 0 && strcmp(a1, "127.0.0.2") == 0) ||
                (strcmp(a0, "127.0.0.2") == 0 && strcmp(a1, "127.0.0.1") == 0));
    assert_true(json_integer_value(json_object_get(json_array_get(cl, 0), "last_seen")) >= t0);
    json_decref(d);
    /* the list carries the numbers, not the addresses */
    d = get_data(&e, "/v1/secrets", NULL);
    json_t *it;
    size_t i;
    bool found = false;
    json_array_foreach(json_object_get(d, "secrets"), i, it)
    {
        if (strcmp(json_string_value(json_object_get(it, "label")), "eve") != 0)
            continue;
        found = true;
        json_t *st = json_object_get(it, "stats");
        assert_int_equal(json_integer_value(json_object_get(st, "unique_ips")), 2);
        assert_null(json_object_get(st, "clients"));
    }
    assert_true(found);
    json_decref(d);
    /* the Prometheus page: the same numbers, never an address */
    static char page[1 << 18];
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/", (unsigned)server_metrics_port(e.srv));
    assert_int_equal(prom_scrape(url, "tgproxy", page, sizeof page), 0);
    assert_true(prom_sample(page, "tgproxy_secret_unique_ips{secret=eve}") == 2);
    assert_true(prom_sample(page, "tgproxy_secret_handshakes_total{outcome=ok,secret=eve}") == 3);
    assert_true(prom_sample(page, "tgproxy_secret_handshakes_total{outcome=stale,secret=eve}") == 1);
    assert_true(prom_sample(page, "tgproxy_secret_last_seen_seconds{secret=eve}") >= (double)t0);
    assert_null(strstr(page, "127.0.0.2"));
    env_done(&e);
}

/* 1,000 secrets made over the API (ee ones sharing one domain, dd ones): all listed, with
   stats; the last ee one completes a FakeTLS handshake (found by a scan of the 500 ee keys,
   then remembered), a dd one too, and a client remembered before a change (a reload) is
   still remembered after it. */
static void test_thousand_secrets(void **state)
{
    (void)state;
    struct env e;
    env_init(&e, false, NULL);
    static uint8_t keys[1000][16];
    for (int i = 0; i < 1000; i++) {
        char body[160];
        if (i % 2)
            snprintf(body, sizeof body, "{\"label\":\"u%04d\",\"kind\":\"dd\"}", i);
        else
            snprintf(body, sizeof body,
                     "{\"label\":\"u%04d\",\"kind\":\"ee\",\"domain\":\"example.com\"}", i);
        create(&e, body, keys[i]);
    }
    json_t *d = get_data(&e, "/v1/secrets", NULL);
    assert_int_equal(json_array_size(json_object_get(d, "secrets")), 1001);
    json_decref(d);
    d = get_data(&e, "/v1/info", NULL);
    assert_int_equal(json_integer_value(json_object_get(d, "secrets")), 1001);
    json_decref(d);
    struct stats before, after;
    server_stats(e.srv, &before);
    assert_int_equal(relay_once(&e, PCLI_TLS, keys[998]), 0);
    assert_int_equal(relay_once(&e, PCLI_TLS, keys[998]), 0);
    assert_int_equal(relay_once(&e, PCLI_DD, keys[999]), 0);
    expect(&e, "POST", "/v1/secrets/u0001/disable", TOKEN, NULL, 200, NULL); /* a reload */
    assert_int_equal(relay_once(&e, PCLI_TLS, keys[998]), 0);
    server_stats(e.srv, &after);
    assert_int_equal(after.handshake_ok - before.handshake_ok, 4);
    assert_int_equal(after.scan_capped, before.scan_capped);
    assert_true(pharness_wait_idle(e.srv, 10000));
    assert_int_equal(stat_of(&e, "u0998", "connections_total"), 3);
    env_done(&e);
}

/* ---- [fleet]: two proxies, one Redis, one set of API secrets ---- */

struct fleet_wait {
    const struct env *e;
    const char *label;
    int want; /* 1 listed (and enabled), 0 absent, 2 listed disabled */
};

static bool fleet_sees(void *arg)
{
    const struct fleet_wait *w = arg;
    bool dis = false, in = listed(w->e, w->label, &dis);
    return w->want == 0 ? !in : w->want == 2 ? in && dis : in && !dis;
}

static void wait_listed(const struct env *e, const char *label, int want)
{
    struct fleet_wait w = {e, label, want};
    if (!tgtest_wait_until(fleet_sees, &w, 15000))
        fail_msg("%s: %s never became %s", e->dir, label,
                 want == 0 ? "absent" : want == 2 ? "disabled" : "listed");
}

struct fleet_sum {
    const struct env *e;
    const char *label;
    json_int_t want;
    json_int_t got, instances;
};

static bool fleet_summed(void *arg)
{
    struct fleet_sum *f = arg;
    char path[128];
    snprintf(path, sizeof path, "/v1/secrets/%s/stats?scope=fleet", f->label);
    json_t *d = get_data(f->e, path, NULL);
    f->got = json_integer_value(json_object_get(d, "connections_total"));
    f->instances = json_integer_value(json_object_get(d, "instances"));
    json_decref(d);
    return f->got == f->want && f->instances == 2;
}

struct fleet_create {
    const struct env *e;
    const char *body;
    uint8_t key[16];
    long status;
};

/* One try at a create that Redis's absence refuses (503); any other refusal fails. */
static bool fleet_create_ok(void *arg)
{
    struct fleet_create *f = arg;
    struct reply r = http(f->e, "POST", "/v1/secrets", TOKEN, f->body, NULL);
    f->status = r.status;
    if (r.status == 201) {
        json_t *j = envelope(&r, 201, NULL);
        hex_key(json_string_value(json_object_get(json_object_get(j, "data"), "key")), f->key);
        json_decref(j);
    } else if (r.status != 503) {
        fail_msg("create: %ld %s", r.status, r.body);
    }
    free(r.body);
    return f->status == 201;
}

/* A relay of key at e's port, held open (an echo done). */
static void hold(const struct env *e, struct pcli *c, const uint8_t key[16])
{
    struct pcli_opts lo = {
        .mode = PCLI_TLS, .key = key, .sni = "example.com", .dc = 2, .timeout_ms = 10000};
    assert_int_equal(pcli_connect(c, e->port, &lo), 0);
    assert_int_equal(pcli_echo(c, 1, 1000, 0), 0);
}

static void expect_closed(struct pcli *c, const char *who)
{
    uint8_t one;
    ssize_t got = pcli_recv(c, &one, 1); /* closed by the proxy, not timed out */
    if (got != 0 && got != -ECONNRESET)
        fail_msg("%s: the disabled secret's relay: recv %zd, want EOF or a reset", who, got);
    pcli_close(c);
}

/* A real redis-server for a fleet test, and the [fleet] section naming it. */
static void fleet_redis(tgtest_redis *rs, char *fleet, size_t cap, const char *prefix)
{
    if (!tgtest_redis_available())
        fail_msg("redis-server is not installed (make deps)");
    assert_int_equal(tgtest_redis_start(rs), 0);
    snprintf(fleet, cap, "[fleet]\nredis = \"redis://127.0.0.1:%u\"\nkey-prefix = \"%s\"\n",
             (unsigned)rs->port, prefix);
}

static void test_fleet(void **state)
{
    (void)state;
    tgtest_redis rs;
    char fleet[160];
    fleet_redis(&rs, fleet, sizeof fleet, "apitest:");
    struct env a, b;
    env_init(&a, false, fleet);
    env_init(&b, false, fleet);
    /* made at A, served at B */
    uint8_t key[16];
    create(&a, "{\"label\":\"alice\",\"kind\":\"ee\",\"domain\":\"example.com\"}", key);
    wait_listed(&b, "alice", 1);
    assert_int_equal(relay_once(&b, PCLI_TLS, key), 0);
    assert_int_equal(relay_once(&a, PCLI_TLS, key), 0);
    /* stats for the whole fleet: A's relay and B's */
    assert_true(pharness_wait_idle(a.srv, 10000) && pharness_wait_idle(b.srv, 10000));
    struct fleet_sum fs = {&a, "alice", 2, 0, 0};
    if (!tgtest_wait_until(fleet_summed, &fs, 15000))
        fail_msg("scope=fleet: connections_total %lld over %lld instances, want 2 over 2",
                 (long long)fs.got, (long long)fs.instances);
    assert_int_equal(stat_of(&a, "alice", "connections_total"), 1); /* scope=local: A alone */
    json_t *d = get_data(&b, "/v1/secrets?scope=fleet", NULL);
    assert_int_equal(json_integer_value(json_object_get(d, "instances")), 2);
    json_decref(d);
    expect(&a, "GET", "/v1/secrets/alice/stats?scope=moon", TOKEN, NULL, 400, "bad_request");
    /* a change at B made on what A wrote: B's next write does not lose A's secret */
    uint8_t kb[16];
    create(&b, "{\"label\":\"bob\",\"kind\":\"dd\"}", kb);
    wait_listed(&a, "bob", 1);
    assert_true(listed(&b, "alice", NULL));
    /* a disable at A closes the secret's relays at A and at B */
    struct pcli ra, rb;
    hold(&a, &ra, key);
    hold(&b, &rb, key);
    expect(&a, "POST", "/v1/secrets/alice/disable", TOKEN, NULL, 200, NULL);
    expect_closed(&ra, "A");
    expect_closed(&rb, "B");
    wait_listed(&b, "alice", 2);
    assert_true(relay_once(&b, PCLI_TLS, key) != 0);
    expect(&b, "POST", "/v1/secrets/alice/enable", TOKEN, NULL, 200, NULL);
    wait_listed(&a, "alice", 1);
    assert_int_equal(relay_once(&a, PCLI_TLS, key), 0);
    /* Redis away: both serve what they last saw; changes and fleet numbers are refused */
    tgtest_redis_kill(&rs);
    assert_int_equal(relay_once(&a, PCLI_TLS, key), 0);
    assert_int_equal(relay_once(&b, PCLI_TLS, key), 0);
    assert_int_equal(relay_once(&b, PCLI_DD, kb), 0);
    expect(&a, "POST", "/v1/secrets", TOKEN, "{\"label\":\"carol\",\"kind\":\"dd\"}", 503,
           "fleet_unavailable");
    expect(&a, "GET", "/v1/secrets/alice/stats?scope=fleet", TOKEN, NULL, 503,
           "fleet_unavailable");
    /* and across a restart without Redis (the state file kept the fleet's secrets) */
    env_stop_server(&b);
    env_start(&b);
    assert_int_equal(relay_once(&b, PCLI_TLS, key), 0);
    /* Redis back, empty: the instances seed it again, and changes flow */
    assert_int_equal(tgtest_redis_restart(&rs), 0);
    struct fleet_create fc = {&a, "{\"label\":\"carol\",\"kind\":\"dd\"}", {0}, 0};
    if (!tgtest_wait_until(fleet_create_ok, &fc, 15000)) /* until A's link is back */
        fail_msg("create after the outage: still %ld", fc.status);
    const uint8_t *kc = fc.key;
    wait_listed(&b, "carol", 1);
    assert_true(listed(&b, "alice", NULL) && listed(&b, "bob", NULL));
    assert_int_equal(relay_once(&b, PCLI_DD, kc), 0);
    /* a delete at B: gone at A */
    expect(&b, "DELETE", "/v1/secrets/bob", TOKEN, NULL, 200, NULL);
    wait_listed(&a, "bob", 0);
    assert_true(relay_once(&a, PCLI_DD, kb) != 0);
    env_done(&a);
    env_done(&b);
    tgtest_redis_stop(&rs);
}

struct front_fail_wait {
    const struct env *e;
    json_int_t n;
};

static bool front_failed(void *arg)
{
    struct front_fail_wait *w = arg;
    json_t *d = get_data(w->e, "/v1/ready", NULL);
    w->n = json_integer_value(json_object_get(json_object_get(d, "fronting"), "connect_failures"));
    json_decref(d);
    return w->n >= 1;
}

/* /v1/ready reports the fronting host: not probed here (tls-front off), no failure; with
   the fronting host gone, a bad hello's fronting fails and is counted, and the proxy is
   still ready (its clients are served). */
static void test_ready_fronting(void **state)
{
    (void)state;
    struct env e;
    env_init(&e, false, NULL);
    json_t *d = get_data(&e, "/v1/ready", NULL);
    json_t *f = json_object_get(d, "fronting");
    assert_true(json_is_null(json_object_get(f, "reachable")));
    assert_true(json_is_null(json_object_get(f, "error")));
    assert_int_equal(json_integer_value(json_object_get(f, "connect_failures")), 0);
    json_decref(d);
    pfront_stop(e.front);
    e.front = NULL;
    static const uint8_t wrong[16] = {0xee};
    assert_true(relay_once(&e, PCLI_TLS, wrong) != 0);
    struct front_fail_wait w = {&e, 0};
    if (!tgtest_wait_until(front_failed, &w, 10000))
        fail_msg("the failed fronting was not counted (%lld)", (long long)w.n);
    assert_int_equal(relay_once(&e, PCLI_TLS, file_key), 0); /* still serving */
    env_done(&e);
}

/* A reload (SIGHUP's path, and POST /v1/reload) reads the token file again: a file that is
   refused (readable by others, empty, missing) leaves the token in use; a new one replaces
   it, and the old one is refused from then on. */
static void test_token_reload(void **state)
{
    (void)state;
    struct env e;
    env_init(&e, false, NULL);
    expect(&e, "GET", "/v1/info", TOKEN, NULL, 200, NULL);
    chmod(e.token, 0644);
    assert_int_equal(server_reload_file(e.srv, e.conf), 0);
    expect(&e, "GET", "/v1/info", TOKEN, NULL, 200, NULL);
    write_file(e.token, "", 0600);
    assert_int_equal(server_reload_file(e.srv, e.conf), 0);
    expect(&e, "GET", "/v1/info", TOKEN, NULL, 200, NULL);
    unlink(e.token);
    assert_int_equal(server_reload_file(e.srv, e.conf), 0);
    expect(&e, "GET", "/v1/info", TOKEN, NULL, 200, NULL);
    write_file(e.token, "n3w-t0k3n\n", 0600);
    assert_int_equal(server_reload_file(e.srv, e.conf), 0);
    expect(&e, "GET", "/v1/info", "n3w-t0k3n", NULL, 200, NULL);
    expect(&e, "GET", "/v1/info", TOKEN, NULL, 401, "unauthorized");
    write_file(e.token, TOKEN "\n", 0600);
    expect(&e, "POST", "/v1/reload", "n3w-t0k3n", NULL, 200, NULL);
    expect(&e, "GET", "/v1/info", TOKEN, NULL, 200, NULL);
    expect(&e, "GET", "/v1/info", "n3w-t0k3n", NULL, 401, "unauthorized");
    env_done(&e);
}

struct exit_wait {
    pid_t pid;
    int status;
};

static bool exited(void *arg)
{
    struct exit_wait *w = arg;
    return waitpid(w->pid, &w->status, WNOHANG) == w->pid;
}

/* The daemon run on e's files must refuse to start: a failure exit, its log naming want,
   and never the token (TOKEN, in the token file of some cases). */
static void refused(struct env *e, const char *want)
{
    snprintf(e->log, sizeof e->log, "%s/proxy.log", e->dir);
    char *argv[] = {(char *)BINARY, (char *)"run", e->conf, NULL};
    struct exit_wait w = {pproc_spawn_logged(argv, e->log), 0};
    assert_true(w.pid > 0);
    if (!tgtest_wait_until(exited, &w, 10000)) {
        kill(w.pid, SIGKILL);
        waitpid(w.pid, NULL, 0);
        fail_msg("the daemon started (want a refusal naming \"%s\")", want);
    }
    assert_true(WIFEXITED(w.status) && WEXITSTATUS(w.status) != 0);
    if (pproc_log_count(e->log, want) < 1)
        fail_msg("the refusal does not say \"%s\" (see %s)", want, e->log);
    assert_int_equal(pproc_log_count(e->log, TOKEN), 0);
    unlink(e->log);
    e->log[0] = '\0';
}

/* The token file and the API's reach, each refused at start with a message that says why
   and never quotes the token: a token file others can read, one that is missing, one that
   is empty, one that is a symbolic link, and an API beyond loopback without a token.
   (A reload reads the token file again: test_token_reload.) */
static void test_token_refusals(void **state)
{
    (void)state;
    struct env e;
    env_prepare(&e, false, NULL);
    chmod(e.token, 0644);
    refused(&e, "(chmod 600 it)");
    chmod(e.token, 0640);
    refused(&e, "(chmod 600 it)");
    unlink(e.token);
    refused(&e, e.token); /* missing: the message names the file */
    write_file(e.token, "", 0600);
    refused(&e, "expected one line of 1..511 printable characters");
    write_file(e.token, "\n\n", 0600);
    refused(&e, "expected one line of 1..511 printable characters");
    char real[160];
    snprintf(real, sizeof real, "%s/real.token", e.dir);
    write_file(real, TOKEN "\n", 0600);
    unlink(e.token);
    assert_int_equal(symlink(real, e.token), 0);
    refused(&e, "token-file");
    unlink(e.token);
    unlink(real);
    /* beyond loopback without a token-file */
    char text[1024];
    snprintf(text, sizeof text,
             "bind-to = \"127.0.0.1:0\"\n[secrets]\nfile1 = \"dd0102030405060708090a0b0c0d0e0f10\"\n"
             "[dcs]\ndefault = \"127.0.0.1:%u\"\n[defense.tls-front]\nenabled = false\n"
             "[api]\nenabled = true\nbind-to = \"0.0.0.0:0\"\nstate-file = \"%s\"\n",
             (unsigned)e.dc_port, e.state);
    write_file(e.conf, text, 0600);
    refused(&e, "bind-to beyond loopback without a token-file");
    write_file(e.token, TOKEN "\n", 0600); /* for env_done's unlink */
    env_done(&e);
}

struct fleet_ips {
    const struct env *e;
    json_int_t total, ips, instances;
};

/* scope=fleet stats of "q" at e: every relay of both servers counted (3), both answering. */
static bool fleet_counted(void *arg)
{
    struct fleet_ips *f = arg;
    json_t *d = get_data(f->e, "/v1/secrets/q/stats?scope=fleet", NULL);
    f->total = json_integer_value(json_object_get(d, "connections_total"));
    f->ips = json_integer_value(json_object_get(d, "unique_ips"));
    f->instances = json_integer_value(json_object_get(d, "instances"));
    json_decref(d);
    return f->total == 3 && f->instances == 2;
}

struct quota_count {
    const struct env *a, *b;
    uint16_t redis_port;
    long long redis, local;
};

/* Every byte A and B relayed for "q" has reached the fleet's count in Redis (the servers
   send theirs once a second), and it is over the quota. */
static bool quota_settled(void *arg)
{
    struct quota_count *q = arg;
    redisContext *c = redisConnect("127.0.0.1", q->redis_port);
    redisReply *r = c && !c->err ? redisCommand(c, "GET apiprocs:{q}:q:0") : NULL;
    q->redis = r && r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : -1;
    if (r)
        freeReplyObject(r);
    if (c)
        redisFree(c);
    q->local = stat_of(q->a, "q", "quota_used") + stat_of(q->b, "q", "quota_used");
    return q->redis == q->local && q->redis > 65536;
}

struct quota_wait {
    const struct env *e;
    const uint8_t *key;
    bool serve; /* wait until a relay works (true) or is refused (false) */
};

static bool quota_state(void *arg)
{
    const struct quota_wait *w = arg;
    return (relay_once(w->e, PCLI_TLS, w->key) == 0) == w->serve;
}

static void wait_quota(const struct env *e, const uint8_t *key, bool serve, const char *who)
{
    struct quota_wait w = {e, key, serve};
    if (!tgtest_wait_until(quota_state, &w, 15000))
        fail_msg("%s never %s the secret with the quota", who, serve ? "served" : "refused");
}

/* Two daemons (separate processes) in one [fleet] on a real redis-server:
   - unique_ips with scope=fleet is the union of the servers' client addresses: 127.0.0.1
     at both and 127.0.0.2 at A count 2, not 3;
   - reset-quota at B resets the fleet's count in Redis (B serves again at once) and A's own
     count of the bytes it relayed (A serves again once it sees the reset). */
static void test_fleet_daemons(void **state)
{
    (void)state;
    tgtest_redis rs;
    char fleet[160];
    fleet_redis(&rs, fleet, sizeof fleet, "apiprocs:");
    struct env a, b;
    env_spawn(&a, fleet);
    env_spawn(&b, fleet);
    uint8_t key[16];
    create(&a, "{\"label\":\"q\",\"kind\":\"ee\",\"domain\":\"example.com\","
               "\"limits\":{\"quota\":65536}}", key);
    wait_listed(&b, "q", 1);
    assert_int_equal(relay_from(&a, key, "127.0.0.1", 0), 0);
    assert_int_equal(relay_from(&b, key, "127.0.0.1", 0), 0);
    assert_int_equal(relay_from(&a, key, "127.0.0.2", 0), 0);
    struct fleet_ips fi = {&a, 0, 0, 0};
    if (!tgtest_wait_until(fleet_counted, &fi, 15000))
        fail_msg("scope=fleet: %lld connections over %lld instances, want 3 over 2",
                 (long long)fi.total, (long long)fi.instances);
    assert_int_equal(fi.ips, 2); /* a sum would say 3 */
    assert_int_equal(stat_of(&a, "q", "unique_ips"), 2); /* A's own: both addresses */
    assert_int_equal(stat_of(&b, "q", "unique_ips"), 1);
    /* the quota used up through A: A refuses at once, B once A's count reached Redis */
    struct pcli c;
    struct pcli_opts o = {
        .mode = PCLI_TLS, .key = key, .sni = "example.com", .dc = 2, .timeout_ms = 10000};
    assert_int_equal(pcli_connect(&c, a.port, &o), 0);
    (void)pcli_echo(&c, 3, 128 * 1024, 0); /* 256 KiB both ways; may be cut at the quota */
    pcli_close(&c);
    wait_quota(&a, key, false, "A");
    wait_quota(&b, key, false, "B");
    struct quota_count qc = {&a, &b, rs.port, 0, 0};
    if (!tgtest_wait_until(quota_settled, &qc, 15000)) /* else it would refill the new count */
        fail_msg("the fleet's quota count: %lld in Redis, %lld relayed", qc.redis, qc.local);
    expect(&b, "POST", "/v1/secrets/q/reset-quota", TOKEN, NULL, 200, NULL);
    assert_int_equal(relay_once(&b, PCLI_TLS, key), 0); /* the fleet's count is gone */
    wait_quota(&a, key, true, "A (after the reset at B)");
    assert_int_equal(stat_of(&a, "q", "quota_used") < 65536, 1);
    env_done(&a);
    env_done(&b);
    tgtest_redis_stop(&rs);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    tg__logger_set_level(tg__log_default(), TG__LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_access_and_errors), cmocka_unit_test(test_allow_and_v6),
        cmocka_unit_test(test_slow_clients),      cmocka_unit_test(test_secrets_lifecycle),
        cmocka_unit_test(test_concurrent_writes), cmocka_unit_test(test_fleet),
        cmocka_unit_test(test_thousand_secrets), cmocka_unit_test(test_secret_stats),
        cmocka_unit_test(test_fleet_daemons),     cmocka_unit_test(test_token_refusals),
        cmocka_unit_test(test_ready_fronting),    cmocka_unit_test(test_token_reload),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
