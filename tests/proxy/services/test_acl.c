/*
 * proxy/acl: [defense.allowlist] and [defense.blocklist] end to end.
 *
 * The lists alone: files (verdicts for both families, the two lists combined), a bad file
 * refused with file:line at start and on refresh while the old list keeps serving, a reload
 * through acl_apply. Downloads from a local HTTPS server (libmicrohttpd over GnuTLS, with a
 * self-signed certificate for "localhost" made by the openssl CLI and trusted through
 * SSL_CERT_FILE): two URLs fetched in parallel by the updater thread, then refreshes where
 * one URL answers 404, bad text or an untrusted certificate and keeps its previous ranges;
 * a reload (acl_apply) while the updater's download is held by the server returns at once,
 * and the stale download answered afterwards does not overwrite what the reload built.
 * The engine: a real tgproxy (tests/support harness) closing 127.0.0.2 at accept, unread,
 * while 127.0.0.1 relays; the client address of a PROXY header checked the same way; list
 * updates applied again and again while relays run, every relayed byte verified.
 */
#include "tgtest.h"

#include "core/alloc.h"
#include "core/log.h"
#include "proxy/services/acl.h"
#include "proxy/daemon/metrics.h"
#include "proxy/wire/netset.h"
#include "proxy_harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

struct fx {
    char dir[64];
    char crt[128], key[128], other[128];
    char *crt_pem, *key_pem;
    struct MHD_Daemon *https;
    uint16_t https_port;
    pthread_mutex_t mu;
    char body[2][256]; /* what /a and /b serve */
    int status[2];
    int hits[2];
    bool holding, release; /* /h: the handler holds its answer until release (under mu) */
    pthread_cond_t cv;     /* signalled on release */
};

static struct fx *F;

/* ---- helpers ---- */

__attribute__((format(printf, 2, 3))) static void write_file(const char *path, const char *fmt, ...)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    assert_int_equal(fclose(f), 0);
}

static enum acl_verdict check(struct acl *acl, const char *ip)
{
    struct sockaddr_storage ss = {0};
    if (strchr(ip, ':')) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        assert_int_equal(inet_pton(AF_INET6, ip, &a->sin6_addr), 1);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        assert_int_equal(inet_pton(AF_INET, ip, &a->sin_addr), 1);
    }
    return acl_check(acl, 0, (struct sockaddr *)&ss);
}

/* Add sources to a config list (freed by config_cleanup). */
static void list_set(struct config_iplist *l, bool enabled, const char *const *src, size_t n)
{
    tg__free(l->sources);
    l->sources = tg__calloc(n ? n : 1, sizeof *l->sources);
    assert_non_null(l->sources);
    l->nsources = n;
    l->enabled = enabled;
    for (size_t i = 0; i < n; i++) {
        l->sources[i].is_url = strncmp(src[i], "https://", 8) == 0;
        snprintf(l->sources[i].text, sizeof l->sources[i].text, "%s", src[i]);
    }
}

static void path_in(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", F->dir, name);
}

/* ---- the HTTPS list server ---- */

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *size, void **ctx)
{
    (void)method, (void)version, (void)data, (void)size, (void)ctx;
    struct fx *f = cls;
    int k = strcmp(url, "/a") == 0 ? 0 : strcmp(url, "/b") == 0 ? 1 : -1;
    char body[256] = "";
    int status = 404;
    pthread_mutex_lock(&f->mu);
    if (strcmp(url, "/h") == 0) { /* a stalled list server: answers when the test says so */
        f->holding = true;
        while (!f->release)
            pthread_cond_wait(&f->cv, &f->mu);
        f->holding = false;
        snprintf(body, sizeof body, "198.51.100.77\n");
        status = 200;
    }
    if (k >= 0) {
        memcpy(body, f->body[k], sizeof body);
        status = f->status[k];
        f->hits[k]++;
    }
    pthread_mutex_unlock(&f->mu);
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return rc;
}

static void serve(int k, int status, const char *body)
{
    pthread_mutex_lock(&F->mu);
    F->status[k] = status;
    snprintf(F->body[k], sizeof F->body[k], "%s", body);
    pthread_mutex_unlock(&F->mu);
}

static int setup(void **state)
{
    (void)state;
    F = calloc(1, sizeof *F);
    assert_non_null(F);
    pthread_mutex_init(&F->mu, NULL);
    pthread_cond_init(&F->cv, NULL);
    snprintf(F->dir, sizeof F->dir, "/tmp/tgtest-acl-XXXXXX");
    assert_non_null(mkdtemp(F->dir));
    path_in(F->crt, sizeof F->crt, "crt.pem");
    path_in(F->key, sizeof F->key, "key.pem");
    path_in(F->other, sizeof F->other, "other.pem");
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
             "-keyout key.pem -out crt.pem -days 2 -subj /CN=localhost "
             "-addext subjectAltName=DNS:localhost >/dev/null 2>&1",
             F->dir);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, /* another self-signed certificate: a CA that did not sign ours */
             "cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
             "-keyout other.key -out other.pem -days 2 -subj /CN=localhost "
             "-addext subjectAltName=DNS:localhost >/dev/null 2>&1",
             F->dir);
    assert_int_equal(system(cmd), 0);
    F->crt_pem = tgtest_read_file(F->crt, NULL);
    F->key_pem = tgtest_read_file(F->key, NULL);
    assert_non_null(F->crt_pem);
    assert_non_null(F->key_pem);
    struct sockaddr_in sa = psock_addr(0);
    F->https = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_TLS, 0, NULL, NULL,
                                on_request, F, MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_HTTPS_MEM_CERT,
                                F->crt_pem, MHD_OPTION_HTTPS_MEM_KEY, F->key_pem,
                                MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
    assert_non_null(F->https);
    F->https_port = MHD_get_daemon_info(F->https, MHD_DAEMON_INFO_BIND_PORT)->port;
    setenv("SSL_CERT_FILE", F->crt, 1);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    MHD_stop_daemon(F->https);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", F->dir);
    (void)system(cmd);
    free(F->crt_pem);
    free(F->key_pem);
    pthread_mutex_destroy(&F->mu);
    pthread_cond_destroy(&F->cv);
    free(F);
    return 0;
}

/* ---- the lists alone ---- */

static void test_files_and_verdicts(void **state)
{
    (void)state;
    char allow[128], block[128], err[512] = "";
    path_in(allow, sizeof allow, "allow.netset");
    path_in(block, sizeof block, "block.netset");
    write_file(allow, "# ours\n10.0.0.0/8\n2001:db8::/32\n");
    write_file(block, "10.0.0.66\r\n10.1.0.0-10.1.255.255 # a range\n2001:db8::bad\n");
    struct config cfg;
    config_init(&cfg);
    list_set(&cfg.blocklist, true, (const char *[]){block}, 1);
    struct acl *acl = NULL;
    assert_int_equal(acl_new(&cfg, 1, &acl, err, sizeof err), 0);
    assert_int_equal(check(acl, "10.0.0.66"), ACL_BLOCKED);
    assert_int_equal(check(acl, "10.1.7.7"), ACL_BLOCKED);
    assert_int_equal(check(acl, "10.0.0.65"), ACL_PASS);
    assert_int_equal(check(acl, "192.0.2.1"), ACL_PASS); /* no allowlist: everyone else */
    assert_int_equal(check(acl, "2001:db8::bad"), ACL_BLOCKED);
    assert_int_equal(check(acl, "::ffff:10.0.0.66"), ACL_BLOCKED); /* v4-mapped = IPv4 */
    acl_free(acl);

    /* both lists: the allowlist first, then the blocklist (mtg's rule) */
    list_set(&cfg.allowlist, true, (const char *[]){allow}, 1);
    assert_int_equal(acl_new(&cfg, 1, &acl, err, sizeof err), 0);
    assert_int_equal(check(acl, "10.2.3.4"), ACL_PASS);
    assert_int_equal(check(acl, "10.0.0.66"), ACL_BLOCKED);
    assert_int_equal(check(acl, "192.0.2.1"), ACL_NOT_ALLOWED);
    assert_int_equal(check(acl, "2001:db8::1"), ACL_PASS);
    assert_int_equal(check(acl, "2001:db9::1"), ACL_NOT_ALLOWED);
    struct acl_list_stats st;
    acl_stats(acl, ACL_BLOCK, &st);
    assert_true(st.enabled);
    assert_int_equal(st.ranges, 3);
    assert_int_equal(st.updates_ok, 1);
    acl_stats(acl, ACL_ALLOW, &st);
    assert_int_equal(st.ranges, 2);
    acl_free(acl);

    /* no list enabled: no acl at all, and a NULL acl lets everyone in */
    cfg.allowlist.enabled = cfg.blocklist.enabled = false;
    acl = (struct acl *)1;
    assert_int_equal(acl_new(&cfg, 1, &acl, err, sizeof err), 0);
    assert_null(acl);
    assert_int_equal(check(NULL, "10.0.0.66"), ACL_PASS);
    config_cleanup(&cfg);
}

static void test_bad_file(void **state)
{
    (void)state;
    char block[128], err[512] = "";
    path_in(block, sizeof block, "bad.netset");
    write_file(block, "# list\n1.2.3.4\n1.2.3.400\n");
    struct config cfg;
    config_init(&cfg);
    list_set(&cfg.blocklist, true, (const char *[]){block}, 1);
    struct acl *acl = NULL;
    /* at start: refused with file:line */
    assert_int_equal(acl_new(&cfg, 1, &acl, err, sizeof err), -EINVAL);
    assert_null(acl);
    char want[256];
    snprintf(want, sizeof want, "blocklist: %s:3: \"1.2.3.400\": expected an IPv4", block);
    if (!strstr(err, want))
        fail_msg("err \"%s\", want \"%s\"", err, want);
    /* a missing file too */
    char missing[128];
    path_in(missing, sizeof missing, "missing.netset");
    list_set(&cfg.blocklist, true, (const char *[]){missing}, 1);
    assert_int_equal(acl_new(&cfg, 1, &acl, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "missing.netset: cannot open: No such file"));

    /* on refresh: refused, and the old list keeps serving */
    write_file(block, "1.2.3.4\n");
    list_set(&cfg.blocklist, true, (const char *[]){block}, 1);
    assert_int_equal(acl_new(&cfg, 1, &acl, err, sizeof err), 0);
    assert_int_equal(check(acl, "1.2.3.4"), ACL_BLOCKED);
    write_file(block, "5.6.7.8\n\n5.6.7.8/40\n");
    err[0] = '\0';
    assert_int_equal(acl_refresh(acl, err, sizeof err), -EINVAL);
    snprintf(want, sizeof want, "blocklist: %s:3: \"5.6.7.8/40\": prefix length", block);
    if (!strstr(err, want))
        fail_msg("err \"%s\", want \"%s\"", err, want);
    assert_int_equal(check(acl, "1.2.3.4"), ACL_BLOCKED);
    assert_int_equal(check(acl, "5.6.7.8"), ACL_PASS);
    write_file(block, "5.6.7.8\n");
    assert_int_equal(acl_refresh(acl, err, sizeof err), 0);
    assert_int_equal(check(acl, "1.2.3.4"), ACL_PASS);
    assert_int_equal(check(acl, "5.6.7.8"), ACL_BLOCKED);

    /* a reload: a bad new file changes nothing; a good config replaces the lists */
    char other[128];
    path_in(other, sizeof other, "other.netset");
    write_file(other, "9.9.9.9\nnot-an-address\n");
    struct config c2;
    config_init(&c2);
    list_set(&c2.blocklist, true, (const char *[]){other}, 1);
    assert_int_equal(acl_apply(acl, &c2, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "other.netset:2: \"not-an-address\""));
    assert_int_equal(check(acl, "5.6.7.8"), ACL_BLOCKED);
    write_file(other, "9.9.9.9\n");
    list_set(&c2.allowlist, true, (const char *[]){other, block}, 2);
    assert_int_equal(acl_apply(acl, &c2, err, sizeof err), 0);
    config_cleanup(&c2);                                  /* the acl keeps its own copy */
    assert_int_equal(check(acl, "5.6.7.8"), ACL_PASS);    /* allowed, not blocked */
    assert_int_equal(check(acl, "9.9.9.9"), ACL_BLOCKED); /* allowed, then blocked */
    assert_int_equal(check(acl, "1.1.1.1"), ACL_NOT_ALLOWED);
    config_init(&c2); /* and off again */
    assert_int_equal(acl_apply(acl, &c2, err, sizeof err), 0);
    assert_int_equal(check(acl, "9.9.9.9"), ACL_PASS);
    acl_free(acl);
    config_cleanup(&cfg);
}

/* A list of 100,000 ranges (FireHOL's big lists are this size): every listed range holds,
   the gaps between them do not. */
static void test_large_list(void **state)
{
    (void)state;
    enum { N = 100000 };
    char path[128], err[512];
    path_in(path, sizeof path, "large.netset");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (uint32_t i = 0; i < N; i++) { /* 1.0.0.0 + i * 64: a /30 every 64 addresses */
        uint32_t a = 0x01000000u + i * 64;
        fprintf(f, "%u.%u.%u.%u/30 # entry %u\n", a >> 24, a >> 16 & 255, a >> 8 & 255, a & 255, i);
    }
    assert_int_equal(fclose(f), 0);
    struct config cfg;
    config_init(&cfg);
    list_set(&cfg.blocklist, true, (const char *[]){path}, 1);
    struct acl *acl = NULL;
    assert_int_equal(acl_new(&cfg, 1, &acl, err, sizeof err), 0);
    struct acl_list_stats st;
    acl_stats(acl, ACL_BLOCK, &st);
    assert_int_equal(st.ranges, N);
    for (uint32_t i = 0; i < N; i += 7) {
        uint32_t a = 0x01000000u + i * 64;
        struct sockaddr_in sa = {.sin_family = AF_INET};
        for (uint32_t d = 0; d < 6; d++) { /* 0..3 inside, 4 and 5 in the gap */
            sa.sin_addr.s_addr = htonl(a + d);
            enum acl_verdict want = d < 4 ? ACL_BLOCKED : ACL_PASS;
            if (acl_check(acl, 0, (struct sockaddr *)&sa) != want)
                fail_msg("entry %u + %u: verdict %d", i, d, !want);
        }
        sa.sin_addr.s_addr = htonl(a - 1);
        assert_int_equal(acl_check(acl, 0, (struct sockaddr *)&sa), ACL_PASS);
    }
    acl_free(acl);
    config_cleanup(&cfg);
}

/* ---- downloads ---- */

static void url(char *out, size_t cap, const char *p)
{
    snprintf(out, cap, "https://localhost:%u%s", (unsigned)F->https_port, p);
}

/* The blocklist's stats (into *st) show at least want builds. */
struct updates_want {
    struct acl *acl;
    struct acl_list_stats *st;
    uint64_t want;
};

static bool updates_reached(void *arg)
{
    struct updates_want *w = arg;
    acl_stats(w->acl, ACL_BLOCK, w->st);
    return w->st->updates_ok >= w->want;
}

static void test_https_lists(void **state)
{
    (void)state;
    char ua[128], ub[128], err[512] = "";
    url(ua, sizeof ua, "/a");
    url(ub, sizeof ub, "/b");
    serve(0, 200, "# list a\n198.51.100.0/24\n");
    serve(1, 200, "203.0.113.7\n2001:db8:7::/48\n");
    struct config cfg;
    config_init(&cfg);
    list_set(&cfg.blocklist, true, (const char *[]){ua, ub}, 2);
    cfg.blocklist.download_concurrency = 2;
    struct acl *acl = NULL;
    assert_int_equal(acl_new(&cfg, 1, &acl, err, sizeof err), 0);
    /* the updater thread downloads both at once; wait for its build (bounded) */
    struct acl_list_stats st = {0};
    struct updates_want uw = {acl, &st, 2};
    tgtest_wait_until(updates_reached, &uw, 10000);
    assert_int_equal(st.updates_ok, 2); /* the build at start (no files: empty) and this one */
    assert_int_equal(st.updates_failed, 0);
    assert_int_equal(st.ranges, 3);
    assert_int_equal(check(acl, "198.51.100.200"), ACL_BLOCKED);
    assert_int_equal(check(acl, "203.0.113.7"), ACL_BLOCKED);
    assert_int_equal(check(acl, "2001:db8:7:1::1"), ACL_BLOCKED);
    assert_int_equal(check(acl, "203.0.113.8"), ACL_PASS);

    /* /a is gone (404), /b changed: /a keeps its ranges, /b's are replaced */
    serve(0, 404, "");
    serve(1, 200, "203.0.113.9\n");
    assert_int_equal(acl_refresh(acl, err, sizeof err), 0);
    assert_int_equal(check(acl, "198.51.100.1"), ACL_BLOCKED);
    assert_int_equal(check(acl, "203.0.113.7"), ACL_PASS);
    assert_int_equal(check(acl, "203.0.113.9"), ACL_BLOCKED);
    acl_stats(acl, ACL_BLOCK, &st);
    assert_int_equal(st.updates_failed, 1);

    /* bad text from /b: its previous ranges stay */
    serve(0, 200, "198.51.100.0/24\n");
    serve(1, 200, "203.0.113.10\nnonsense\n");
    assert_int_equal(acl_refresh(acl, err, sizeof err), 0);
    assert_int_equal(check(acl, "203.0.113.9"), ACL_BLOCKED);
    assert_int_equal(check(acl, "203.0.113.10"), ACL_PASS);

    /* a certificate nobody trusts: both downloads fail, nothing changes */
    serve(1, 200, "203.0.113.11\n");
    setenv("SSL_CERT_FILE", F->other, 1);
    assert_int_equal(acl_refresh(acl, err, sizeof err), 0);
    setenv("SSL_CERT_FILE", F->crt, 1);
    assert_int_equal(check(acl, "203.0.113.9"), ACL_BLOCKED);
    assert_int_equal(check(acl, "203.0.113.11"), ACL_PASS);
    acl_stats(acl, ACL_BLOCK, &st);
    assert_int_equal(st.updates_failed, 4);
    acl_free(acl);
    config_cleanup(&cfg);
}

struct apply_job {
    struct acl *acl;
    const struct config *cfg;
    int rc, done; /* done: atomic */
    char err[512];
};

static void *apply_thread(void *arg)
{
    struct apply_job *j = arg;
    j->rc = acl_apply(j->acl, j->cfg, j->err, sizeof j->err);
    __atomic_store_n(&j->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static bool server_holding(void)
{
    pthread_mutex_lock(&F->mu);
    bool h = F->holding;
    pthread_mutex_unlock(&F->mu);
    return h;
}

/* A reload while the updater's download stalls: acl_apply does not wait for the network,
   and the stale download, answered afterwards, does not overwrite what the reload built. */
static bool holding(void *unused)
{
    (void)unused;
    return server_holding();
}

static bool apply_done(void *job)
{
    return __atomic_load_n(&((struct apply_job *)job)->done, __ATOMIC_SEQ_CST);
}

static void test_apply_during_stalled_download(void **state)
{
    (void)state;
    char uh[128], ub[128], file[128], err[512] = "";
    url(uh, sizeof uh, "/h");
    url(ub, sizeof ub, "/b");
    path_in(file, sizeof file, "reload.netset");
    write_file(file, "192.0.2.1\n");
    serve(1, 404, ""); /* the new config's URL fails: its source would keep stale ranges */
    pthread_mutex_lock(&F->mu);
    F->release = false;
    F->hits[1] = 0;
    pthread_mutex_unlock(&F->mu);
    struct config a, b;
    config_init(&a);
    config_init(&b);
    a.timeout.http_ms = 600000; /* curl never gives up on the stall by itself during the test */
    list_set(&a.blocklist, true, (const char *[]){uh}, 1);
    list_set(&b.blocklist, true, (const char *[]){ub, file}, 2);
    struct acl *acl = NULL;
    assert_int_equal(acl_new(&a, 1, &acl, err, sizeof err), 0);
    assert_true(tgtest_wait_until(holding, NULL, 30000)); /* the updater's download arrives */

    struct apply_job j = {.acl = acl, .cfg = &b};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, apply_thread, &j), 0);
    tgtest_wait_until(apply_done, &j, 30000);
    /* the apply finished while the server still holds the download's answer (asserted
       after the release, so a failure does not leave the server holding) */
    bool returned = __atomic_load_n(&j.done, __ATOMIC_SEQ_CST) && server_holding();
    struct acl_list_stats st;
    acl_stats(acl, ACL_BLOCK, &st);
    uint64_t ok = st.updates_ok;
    bool built = check(acl, "192.0.2.1") == ACL_BLOCKED;

    pthread_mutex_lock(&F->mu);
    F->release = true;
    pthread_cond_broadcast(&F->cv);
    pthread_mutex_unlock(&F->mu);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_true(returned);
    assert_true(built);
    assert_int_equal(j.rc, 0);
    /* the stale result is dropped; then the new config's URL is fetched (404) and built */
    struct updates_want uw = {acl, &st, ok + 1};
    tgtest_wait_until(updates_reached, &uw, 30000);
    assert_int_equal(st.updates_ok, ok + 1);
    assert_int_equal(st.updates_failed, 1);
    pthread_mutex_lock(&F->mu);
    assert_int_equal(F->hits[1], 1);
    pthread_mutex_unlock(&F->mu);
    assert_int_equal(check(acl, "198.51.100.77"), ACL_PASS); /* the stale download's range */
    assert_int_equal(check(acl, "192.0.2.1"), ACL_BLOCKED);
    assert_int_equal(st.ranges, 1);
    acl_free(acl);
    config_cleanup(&a);
    config_cleanup(&b);
}

static char logged[4096]; /* under F->mu */

static void log_capture(void *user, int level, const char *msg)
{
    (void)user, (void)level;
    pthread_mutex_lock(&F->mu);
    size_t n = strlen(logged);
    snprintf(logged + n, sizeof logged - n, "%s\n", msg);
    pthread_mutex_unlock(&F->mu);
}

/* Credentials in a list URL never reach the log. */
static void test_url_credentials_not_logged(void **state)
{
    (void)state;
    char u[160], err[512];
    snprintf(u, sizeof u, "https://lists:s3cret-token@localhost:%u/missing",
             (unsigned)F->https_port);
    struct config cfg;
    config_init(&cfg);
    list_set(&cfg.blocklist, true, (const char *[]){u}, 1);
    logged[0] = '\0';
    tg__log_default()->sink = log_capture;
    struct acl *acl = NULL;
    assert_int_equal(acl_new(&cfg, 1, &acl, err, sizeof err), 0);
    assert_int_equal(acl_refresh(acl, err, sizeof err), 0);
    acl_free(acl); /* joins the updater: nothing logs after this */
    tg__log_default()->sink = NULL;
    assert_non_null(strstr(logged, "https://***@localhost:"));
    assert_non_null(strstr(logged, "/missing: HTTP status 404"));
    assert_null(strstr(logged, "s3cret"));
    config_cleanup(&cfg);
}

/* An update's log line counts ranges and lists in words that agree with the numbers. */
static void test_update_line_plurals(void **state)
{
    (void)state;
    char one[128], two[128], err[512];
    path_in(one, sizeof one, "one.netset");
    path_in(two, sizeof two, "two.netset");
    write_file(one, "192.0.2.1\n");
    write_file(two, "198.51.100.0/24\n203.0.113.0/24\n");
    struct config cfg;
    config_init(&cfg);
    for (int pass = 0; pass < 2; pass++) {
        list_set(&cfg.blocklist, true, (const char *[]){one, two}, pass ? 2 : 1);
        logged[0] = '\0';
        tg__log_default()->sink = log_capture;
        struct acl *acl = NULL;
        assert_int_equal(acl_new(&cfg, 1, &acl, err, sizeof err), 0);
        assert_int_equal(acl_refresh(acl, err, sizeof err), 0);
        acl_free(acl);
        tg__log_default()->sink = NULL;
        const char *want =
            pass ? "blocklist: 3 ranges from 2 lists\n" : "blocklist: 1 range from 1 list\n";
        if (!strstr(logged, want))
            fail_msg("expected \"%s\" in the log:\n%s", want, logged);
    }
    config_cleanup(&cfg);
}

/* ---- the engine ---- */

/* Start tgproxy with lists: harness config, then the lists, then the engine. */
static void start(struct pharness *h, struct pharness_opts *o, const char *block, const char *allow)
{
    assert_int_equal(pharness_prepare(h, o), 0);
    if (block)
        list_set(&h->cfg.blocklist, true, (const char *[]){block}, 1);
    if (allow)
        list_set(&h->cfg.allowlist, true, (const char *[]){allow}, 1);
    assert_int_equal(server_start(&h->cfg, &h->srv), 0);
    h->port = server_port(h->srv, 0);
}

/* A client from src_ip that sends nothing: the proxy closes it without reading. */
static void expect_closed_unread(struct pharness *h, const char *src_ip)
{
    int fd = psock_connect_from(src_ip, h->port, 10000);
    assert_true(fd >= 0);
    char b[16];
    ssize_t n = recv(fd, b, sizeof b, 0);
    assert_true(n == 0 || (n < 0 && errno == ECONNRESET));
    close(fd);
}

static void echo_from(struct pharness *h, const char *src_ip, uint64_t bytes)
{
    struct pcli c;
    struct pcli_opts o = pharness_client(h, PCLI_TLS);
    o.src_ip = src_ip;
    assert_int_equal(pcli_connect(&c, h->port, &o), 0);
    assert_int_equal(pcli_echo(&c, 11, bytes, 0), 0);
    pcli_close(&c);
}

static int count_refused(void *user, const struct metric_sample *m)
{
    uint64_t *n = user;
    if (strcmp(m->family, "acl_refused_connections_total") == 0 &&
        strcmp(m->label_val[0], "blocklist") == 0)
        n[0] = (uint64_t)m->value;
    if (strcmp(m->family, "acl_ranges") == 0 && strcmp(m->label_val[0], "blocklist") == 0)
        n[1] = (uint64_t)m->value;
    return 0;
}

static void test_engine_closes_at_accept(void **state)
{
    (void)state;
    char block[128], allow[128];
    path_in(block, sizeof block, "engine-block.netset");
    write_file(block, "127.0.0.2\n");
    struct pharness h;
    struct pharness_opts o = {.ee = true, .handshake_ms = 30000};
    start(&h, &o, block, NULL);
    expect_closed_unread(&h, "127.0.0.2");
    echo_from(&h, "127.0.0.1", 1 << 20);
    echo_from(&h, "127.0.0.3", 4096);
    struct stats st;
    server_stats(h.srv, &st);
    assert_int_equal(st.acl_blocked, 1);
    assert_int_equal(st.acl_not_allowed, 0);
    assert_int_equal(st.accepted, 2); /* the refused client never became a connection */
    uint64_t m[2] = {0, 0};
    assert_int_equal(metrics_collect(h.srv, count_refused, m), 0);
    assert_int_equal(m[0], 1);
    assert_int_equal(m[1], 1);
    pharness_stop(&h);

    /* an allowlist of 127.0.0.1 only */
    path_in(allow, sizeof allow, "engine-allow.netset");
    write_file(allow, "127.0.0.1/32\n");
    start(&h, &o, NULL, allow);
    expect_closed_unread(&h, "127.0.0.2");
    echo_from(&h, "127.0.0.1", 4096);
    server_stats(h.srv, &st);
    assert_int_equal(st.acl_not_allowed, 1);
    assert_int_equal(st.acl_blocked, 0);
    pharness_stop(&h);
}

static void test_engine_proxy_protocol(void **state)
{
    (void)state;
    char block[128];
    path_in(block, sizeof block, "engine-pp.netset");
    write_file(block, "198.51.100.7\n");
    struct pharness h;
    struct pharness_opts o = {.ee = true, .pp_listener = true};
    start(&h, &o, block, NULL);
    static const char bad[] = "PROXY TCP4 198.51.100.7 127.0.0.1 40000 443\r\n";
    static const char good[] = "PROXY TCP4 198.51.100.8 127.0.0.1 40000 443\r\n";
    struct pcli c;
    struct pcli_opts co = pharness_client(&h, PCLI_TLS);
    co.prefix = bad;
    co.prefix_len = strlen(bad);
    assert_int_not_equal(pcli_connect(&c, h.port, &co), 0);
    pcli_close(&c);
    co.prefix = good;
    co.prefix_len = strlen(good);
    assert_int_equal(pcli_connect(&c, h.port, &co), 0);
    assert_int_equal(pcli_echo(&c, 3, 65536, 0), 0);
    pcli_close(&c);
    struct stats st;
    server_stats(h.srv, &st);
    assert_int_equal(st.acl_blocked, 1);
    assert_int_equal(st.end_acl, 1);
    pharness_stop(&h);
}

struct relay_job {
    struct pharness *h;
    uint32_t seed;
    int rc;
    int done; /* atomic */
};

static void *relay_thread(void *arg)
{
    struct relay_job *j = arg;
    struct pcli c;
    struct pcli_opts o = pharness_client(j->h, PCLI_TLS);
    j->rc = pcli_connect(&c, j->h->port, &o);
    if (j->rc == 0)
        j->rc = pcli_echo(&c, j->seed, 4u << 20, 16384); /* bytes verified by the client */
    pcli_close(&c);
    __atomic_store_n(&j->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void test_engine_update_during_relays(void **state)
{
    (void)state;
    enum { N = 8 };
    char block[128], err[512];
    path_in(block, sizeof block, "engine-live.netset");
    write_file(block, "192.0.2.0/24\n");
    struct pharness h;
    struct pharness_opts o = {.ee = true};
    start(&h, &o, block, NULL);
    struct acl *acl = server_acl(h.srv);
    assert_non_null(acl);
    struct relay_job jobs[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        jobs[i] = (struct relay_job){.h = &h, .seed = 100u + (uint32_t)i};
        assert_int_equal(pthread_create(&th[i], NULL, relay_thread, &jobs[i]), 0);
    }
    /* swap lists under the running relays: new lists every round, the last one blocking
       127.0.0.2 (relays already running are never checked again) */
    int rounds = 0;
    for (bool running = true; running && rounds < 2000; rounds++) {
        write_file(block, "192.0.2.0/24\n10.%d.0.0/16\n127.0.0.%d\n", rounds % 256, 2 + rounds % 2);
        assert_int_equal(acl_refresh(acl, err, sizeof err), 0);
        running = false;
        for (int i = 0; i < N; i++)
            running |= !__atomic_load_n(&jobs[i].done, __ATOMIC_ACQUIRE);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(jobs[i].rc, 0);
    }
    assert_true(rounds > 1);
    print_message("%d list updates while %d relays ran\n", rounds, N);
    write_file(block, "127.0.0.2\n");
    assert_int_equal(acl_refresh(acl, err, sizeof err), 0);
    expect_closed_unread(&h, "127.0.0.2");
    echo_from(&h, "127.0.0.1", 4096);
    struct acl_list_stats ls;
    acl_stats(acl, ACL_BLOCK, &ls);
    assert_int_equal(ls.updates_ok, (uint64_t)rounds + 2);
    pharness_stop(&h);
}

/* The running proxy's config as a TOML file, plus extra (the access lists). */
static void write_reload(const struct pharness *h, const char *path, const char *extra)
{
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", h->key[i]);
    char dom[2 * sizeof PHARNESS_DOMAIN];
    for (size_t i = 0; i < sizeof PHARNESS_DOMAIN - 1; i++)
        snprintf(dom + 2 * i, 3, "%02x", (unsigned char)PHARNESS_DOMAIN[i]);
    write_file(path,
               "bind-to = \"127.0.0.1:0\"\nworkers = 2\nprefer-ip = \"prefer-ipv4\"\n"
               "log-level = \"warn\"\n[secrets]\ntls = \"ee%s%s\"\n"
               "[dcs]\ndefault = \"127.0.0.1:%u\"\n"
               "[domain-fronting]\nip = \"127.0.0.1\"\nport = %u\n%s",
               hex, dom, (unsigned)h->dc_port, (unsigned)h->front_port, extra);
}

static void test_engine_reload(void **state)
{
    (void)state;
    char block[128], toml[128], extra[256];
    path_in(block, sizeof block, "reload-block.netset");
    path_in(toml, sizeof toml, "reload.toml");
    write_file(block, "127.0.0.2\n");
    struct pharness h;
    struct pharness_opts o = {.ee = true};
    assert_int_equal(pharness_start(&h, &o), 0);
    assert_null(server_acl(h.srv));
    echo_from(&h, "127.0.0.2", 4096);
    /* a reload turns the blocklist on */
    snprintf(extra, sizeof extra, "[defense.blocklist]\nenabled = true\nfiles = [\"%s\"]\n", block);
    write_reload(&h, toml, extra);
    assert_int_equal(server_reload_file(h.srv, toml), 0);
    assert_non_null(server_acl(h.srv));
    expect_closed_unread(&h, "127.0.0.2");
    echo_from(&h, "127.0.0.1", 4096);
    /* a reload whose list has a bad line is refused as a whole: the lists stay */
    char bad[128];
    path_in(bad, sizeof bad, "reload-bad.netset");
    write_file(bad, "127.0.0.3\n127.0.0.300\n");
    snprintf(extra, sizeof extra, "[defense.blocklist]\nenabled = true\nfiles = [\"%s\"]\n", bad);
    write_reload(&h, toml, extra);
    assert_int_equal(server_reload_file(h.srv, toml), -EINVAL);
    expect_closed_unread(&h, "127.0.0.2");
    echo_from(&h, "127.0.0.3", 4096);
    /* and off again */
    write_reload(&h, toml, "");
    assert_int_equal(server_reload_file(h.srv, toml), 0);
    echo_from(&h, "127.0.0.2", 4096);
    struct stats st;
    server_stats(h.srv, &st);
    assert_int_equal(st.acl_blocked, 2);
    pharness_stop(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_files_and_verdicts),
        cmocka_unit_test(test_bad_file),
        cmocka_unit_test(test_large_list),
        cmocka_unit_test(test_https_lists),
        cmocka_unit_test(test_url_credentials_not_logged),
        cmocka_unit_test(test_update_line_plurals),
        cmocka_unit_test(test_apply_during_stalled_download),
        cmocka_unit_test(test_engine_closes_at_accept),
        cmocka_unit_test(test_engine_proxy_protocol),
        cmocka_unit_test(test_engine_update_during_relays),
        cmocka_unit_test(test_engine_reload),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
