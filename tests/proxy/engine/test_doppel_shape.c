/*
 * proxy/doppel_shape: the doppelganger end to end, in two halves that meet in a profile.
 *
 * The scout: a local HTTPS site (OpenSSL, a certificate made here and trusted through
 * SSL_CERT_FILE) answers each GET with records of known lengths after known gaps. The gaps
 * are in virtual time: the site moves a clock before each record and waits until the scout
 * stamped it (the scout's clock is injected and counts its reads), so the scout must see
 * every gap exactly; the lengths are exact anyway. Also: an untrusted certificate fails
 * with the site (never the path) in the message, a stopped fetch ends at once, and the raid
 * thread publishes what it learned to the live profile.
 *
 * The shaper: one worker driven by this thread in virtual time (loop_set_clock), a real
 * FakeTLS client (its handshake on a helper thread) and the fake DC echoing. With the
 * learned profile, the records toward the client follow it: their gaps match the learned
 * Weibull within a KS-style band (virtual milliseconds, so the band allows the loop's
 * 1 ms rounding) and their lengths the learned quantiles; every byte arrives, in order. The
 * latency cap holds against a profile of huge gaps, and a bulk transfer (4 MiB) is delayed
 * no more than its delay budget while arriving byte-exact. Last, a whole server: its raid
 * thread runs against the site while its workers shape a client's echo.
 */
#include "tgtest.h"

#include "proxy/engine/conn.h"
#include "proxy/engine/conn_int.h"
#include "proxy/wire/doppel.h"
#include "proxy/services/doh.h"
#include "proxy/services/doppel_fetch.h"
#include "proxy/daemon/server.h"
#include "doh_server.h"
#include "proxy_client.h"
#include "proxy_harness.h"
#include "proxy_load.h"
#include "proxy_util.h"

#include <errno.h>
#include <math.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#define CONNS     10 /* fetches of one raid */
#define PER_CONN  60 /* records per response: 40 in phase 0, 20 in phase 1 */
#define NREC      (CONNS * PER_CONN)
#define TLS13_TAG 17 /* a TLS 1.3 record's length over its payload: type byte + AEAD tag */

static const uint16_t body_lens[] = {1000, 1500, 2000, 3000};
static const struct doppel_weibull site_gaps = {1.5, 8.0}; /* the site's rhythm, ms */

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* ---- the site ---- */

struct site {
    SSL_CTX *ctx;
    int lfd;
    uint16_t port;
    pthread_t th;
    int stop;        /* atomic */
    bool lockstep;   /* move the clock and wait for the scout's stamp per record */
    uint64_t now_us; /* atomic: the virtual clock */
    uint64_t stamps; /* atomic: times the scout read the clock */
    size_t served;   /* responses (site thread) */
    uint32_t gap_us[NREC];
    uint16_t len[NREC]; /* payload per record; record 0 of a response is its HTTP header */
    char hdr[CONNS][160];
};

/* The scout's clock: read the time, then count the read, so the site (which moves the
   clock once it sees the count) cannot move it in between. */
static uint64_t site_clock(void *ud)
{
    struct site *s = ud;
    uint64_t t = __atomic_load_n(&s->now_us, __ATOMIC_ACQUIRE);
    __atomic_add_fetch(&s->stamps, 1, __ATOMIC_ACQ_REL);
    return t;
}

/* The records: gaps from site_gaps, body lengths from body_lens, fixed seed. */
static void site_pattern(struct site *s)
{
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (size_t c = 0; c < CONNS; c++) {
        size_t body = 0;
        for (size_t i = 1; i < PER_CONN; i++) {
            size_t k = c * PER_CONN + i;
            s->len[k] = body_lens[rng_next(&r) % 4];
            double u = ((double)(rng_next(&r) >> 11) + 1) * 0x1p-53;
            s->gap_us[k] = (uint32_t)(doppel_draw(&site_gaps, u) * 1000) + 1;
            body += s->len[k];
        }
        int n = snprintf(s->hdr[c], sizeof s->hdr[c],
                         "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                         "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                         body);
        s->len[c * PER_CONN] = (uint16_t)n;
        s->gap_us[c * PER_CONN] = 1000;
    }
}

/* A certificate for IP 127.0.0.1 and DNS doppel.test, self-signed, written to path as PEM
   (its key to key_path, when given); ctx gets both. */
static void make_cert(SSL_CTX *ctx, const char *path, const char *key_path)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *crt = X509_new();
    assert_non_null(key);
    X509_set_version(crt, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(crt), (long)getpid());
    X509_gmtime_adj(X509_getm_notBefore(crt), -60);
    X509_gmtime_adj(X509_getm_notAfter(crt), 3600);
    X509_NAME *nm = X509_get_subject_name(crt);
    X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_ASC, (const unsigned char *)"doppel test", -1, -1,
                               0);
    X509_set_issuer_name(crt, nm);
    X509_set_pubkey(crt, key);
    X509V3_CTX v3;
    X509V3_set_ctx(&v3, crt, crt, NULL, NULL, 0);
    X509_EXTENSION *san =
        X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, "IP:127.0.0.1,DNS:doppel.test");
    X509_EXTENSION *bc = X509V3_EXT_conf_nid(NULL, &v3, NID_basic_constraints, "critical,CA:TRUE");
    assert_true(san && bc && X509_add_ext(crt, san, -1) && X509_add_ext(crt, bc, -1));
    X509_EXTENSION_free(san);
    X509_EXTENSION_free(bc);
    assert_true(X509_sign(crt, key, EVP_sha256()) > 0);
    if (ctx)
        assert_true(SSL_CTX_use_certificate(ctx, crt) == 1 &&
                    SSL_CTX_use_PrivateKey(ctx, key) == 1);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(PEM_write_X509(f, crt) == 1);
    fclose(f);
    if (key_path) {
        assert_non_null(f = fopen(key_path, "w"));
        assert_true(PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL) == 1);
        fclose(f);
    }
    X509_free(crt);
    EVP_PKEY_free(key);
}

/* Wait (bounded) until the scout stamped want records. */
struct stamps_want {
    struct site *s;
    uint64_t want;
};

static bool stamped(void *arg)
{
    const struct stamps_want *w = arg;
    return __atomic_load_n(&w->s->stamps, __ATOMIC_ACQUIRE) >= w->want;
}

static void await_stamps(struct site *s, uint64_t want)
{
    struct stamps_want w = {s, want};
    tgtest_wait_until(stamped, &w, 5000);
}

static void serve(struct site *s, SSL *ssl)
{
    char req[2048];
    size_t got = 0;
    while (got < sizeof req - 1) {
        int n = SSL_read(ssl, req + got, (int)(sizeof req - 1 - got));
        if (n <= 0)
            return;
        got += (size_t)n;
        req[got] = '\0';
        if (strstr(req, "\r\n\r\n"))
            break;
    }
    static uint8_t body[3000];
    memset(body, 'x', sizeof body);
    size_t c = s->served++ % CONNS;
    uint64_t base = __atomic_load_n(&s->stamps, __ATOMIC_ACQUIRE);
    for (size_t i = 0; i < PER_CONN; i++) {
        size_t k = c * PER_CONN + i;
        if (s->lockstep)
            __atomic_add_fetch(&s->now_us, s->gap_us[k], __ATOMIC_ACQ_REL);
        const void *p = i == 0 ? (const void *)s->hdr[c] : body;
        if (SSL_write(ssl, p, s->len[k]) != s->len[k])
            return;
        if (s->lockstep)
            await_stamps(s, base + i + 1);
    }
    char tail[64];
    while (SSL_read(ssl, tail, sizeof tail) > 0) /* until the scout closes (no close_notify */
        ;                                        /* from us: it would be one more record) */
}

static void *site_main(void *arg)
{
    struct site *s = arg;
    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
        struct pollfd p = {.fd = s->lfd, .events = POLLIN};
        if (poll(&p, 1, 20) <= 0)
            continue;
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        struct timeval tv = {.tv_sec = 5};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        SSL *ssl = SSL_new(s->ctx);
        SSL_set_fd(ssl, fd);
        if (SSL_accept(ssl) == 1)
            serve(s, ssl);
        SSL_free(ssl);
        close(fd);
    }
    return NULL;
}

static char cert_path[64], key_path[64];

static struct site *site_start(bool lockstep)
{
    struct site *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->lockstep = lockstep;
    s->now_us = 1000000;
    site_pattern(s);
    s->ctx = SSL_CTX_new(TLS_server_method());
    SSL_CTX_set_min_proto_version(s->ctx, TLS1_3_VERSION);
    SSL_CTX_set_num_tickets(s->ctx, 0); /* tickets would be records the pattern lacks */
    snprintf(cert_path, sizeof cert_path, "/tmp/tgkit-doppel-%d.pem", (int)getpid());
    snprintf(key_path, sizeof key_path, "/tmp/tgkit-doppel-%d.key", (int)getpid());
    make_cert(s->ctx, cert_path, key_path);
    setenv("SSL_CERT_FILE", cert_path, 1);
    s->lfd = psock_listen(&s->port, 16);
    assert_true(s->lfd >= 0);
    assert_int_equal(pthread_create(&s->th, NULL, site_main, s), 0);
    return s;
}

static void site_stop(struct site *s)
{
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
    pthread_join(s->th, NULL);
    close(s->lfd);
    SSL_CTX_free(s->ctx);
    unlink(cert_path);
    unlink(key_path);
    unsetenv("SSL_CERT_FILE");
    free(s);
}

static void site_url(const struct site *s, char *out, size_t cap)
{
    snprintf(out, cap, "https://127.0.0.1:%u/private/token-abc?q=1", (unsigned)s->port);
}

/* One raid of CONNS fetches in lockstep; samples[NREC], checked against the pattern. */
static void lockstep_raid(struct site *s, struct doppel_sample *smp)
{
    char url[128], err[320];
    site_url(s, url, sizeof url);
    struct doppel_fetch_opts o = {.clock = site_clock, .clock_ud = s};
    size_t n = 0;
    for (int c = 0; c < CONNS; c++) {
        int rc = doppel_fetch(url, &o, smp, NREC, &n, err, sizeof err);
        if (rc != 0)
            fail_msg("fetch %d: %d %s", c, rc, err);
    }
    assert_int_equal(n, NREC);
    for (size_t i = 0; i < NREC; i++) {
        assert_int_equal(smp[i].idx, i % PER_CONN);
        assert_int_equal(smp[i].len, s->len[i] + TLS13_TAG);
        if (smp[i].idx)
            assert_int_equal(smp[i].t_us - smp[i - 1].t_us, s->gap_us[i]);
    }
}

static int cmp_u16(const void *a, const void *b)
{
    return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

static void test_scout_learns_site(void **state)
{
    (void)state;
    struct site *s = site_start(true);
    static struct doppel_sample smp[NREC];
    lockstep_raid(s, smp);
    struct doppel_profile p;
    doppel_profile_default(&p);
    assert_int_equal(doppel_learn(smp, NREC, &p), 0);
    /* gaps: the fit of exactly the site's gaps, and near the site's model */
    static double gaps[NREC];
    size_t ng = 0;
    for (size_t i = 0; i < NREC; i++)
        if (i % PER_CONN)
            gaps[ng++] = s->gap_us[i] / 1000.0;
    struct doppel_weibull want;
    assert_int_equal(doppel_fit(gaps, ng, &want), 0);
    assert_true(p.gaps_learned && p.gap.k == want.k && p.gap.lambda_ms == want.lambda_ms);
    assert_true(fabs(p.gap.k - site_gaps.k) < 0.15 * site_gaps.k);
    assert_true(fabs(p.gap.lambda_ms - site_gaps.lambda_ms) < 0.1 * site_gaps.lambda_ms);
    /* sizes: phase 0's quantiles are those of the wire lengths of records 0..39 */
    assert_int_equal(p.phases, 2);
    static uint16_t ph0[NREC];
    size_t m = 0;
    for (size_t i = 0; i < NREC; i++)
        if (i % PER_CONN < 40)
            ph0[m++] = (uint16_t)(s->len[i] + TLS13_TAG);
    qsort(ph0, m, sizeof ph0[0], cmp_u16);
    for (unsigned j = 0; j <= DOPPEL_SIZE_Q; j++)
        assert_int_equal(p.size_q[0][j], ph0[(m - 1) * j / DOPPEL_SIZE_Q]);
    site_stop(s);
}

/* An untrusted certificate fails the fetch; the message names the site, never the path. */
static void test_scout_verifies_cert(void **state)
{
    (void)state;
    struct site *s = site_start(false);
    char other[64], url[128], err[320] = "";
    snprintf(other, sizeof other, "/tmp/tgkit-doppel-other-%d.pem", (int)getpid());
    make_cert(NULL, other, NULL);
    setenv("SSL_CERT_FILE", other, 1);
    site_url(s, url, sizeof url);
    static struct doppel_sample smp[NREC];
    size_t n = 0;
    struct doppel_fetch_opts o = {0};
    assert_int_equal(doppel_fetch(url, &o, smp, NREC, &n, err, sizeof err), -EIO);
    assert_int_equal(n, 0);
    char site[64];
    snprintf(site, sizeof site, "https://127.0.0.1:%u: ", (unsigned)s->port);
    if (strncmp(err, site, strlen(site)) != 0 || strstr(err, "token") || strstr(err, "private"))
        fail_msg("message: %s", err);
    assert_non_null(strstr(err, "certificate"));
    /* a stopped scout does not fetch at all */
    int stop = 1;
    o.stop = &stop;
    setenv("SSL_CERT_FILE", cert_path, 1);
    assert_int_equal(doppel_fetch(url, &o, smp, NREC, &n, err, sizeof err), -ECANCELED);
    unlink(other);
    site_stop(s);
}

/* With [network] dns the url's name goes to that server, never the system resolver: a name
   it knows is fetched, one it does not fails the fetch with the DNS error. */
static void test_scout_resolves_through_dns(void **state)
{
    (void)state;
    struct site *s = site_start(false);
    char *crt = tgtest_read_file(cert_path, NULL), *key = tgtest_read_file(key_path, NULL);
    assert_true(crt && key);
    static const struct dohsrv_record recs[] = {{"doppel.test", 1, "127.0.0.1", 60, 0}};
    uint16_t dport = 0;
    struct dohsrv *d = dohsrv_start(&(struct dohsrv_opts){.addr = "127.0.0.1",
                                                          .crt_pem = crt,
                                                          .key_pem = key,
                                                          .records = recs,
                                                          .nrecords = 1,
                                                          .udp = true},
                                    &dport);
    assert_non_null(d);
    struct config cfg;
    config_init(&cfg);
    char dns[64], why[128], err[320] = "", url[128];
    int n = snprintf(dns, sizeof dns, "udp://127.0.0.1:%u", (unsigned)dohsrv_udp_port(d));
    assert_int_equal(
        doh_url_parse(dns, (size_t)n, cfg.dns.url, cfg.dns.host, &cfg.dns.port, why, sizeof why),
        0);
    struct doh *doh = doh_new(&cfg, err, sizeof err);
    assert_non_null(doh);
    struct doppel_fetch_opts o = {.doh = doh, .prefer = CONFIG_PREFER_IPV4};
    static struct doppel_sample smp[NREC];
    size_t got = 0;
    snprintf(url, sizeof url, "https://doppel.test:%u/page", (unsigned)s->port);
    if (doppel_fetch(url, &o, smp, NREC, &got, err, sizeof err) != 0)
        fail_msg("fetch: %s", err);
    assert_int_equal(got, PER_CONN);
    assert_true(dohsrv_queries_for(d, "doppel.test") >= 1);
    snprintf(url, sizeof url, "https://unknown.test:%u/page", (unsigned)s->port);
    assert_int_equal(doppel_fetch(url, &o, smp, NREC, &got, err, sizeof err), -EIO);
    assert_non_null(strstr(err, "https://unknown.test"));
    assert_non_null(strstr(err, "DNS"));
    assert_true(dohsrv_queries_for(d, "unknown.test") >= 1);
    doh_free(doh);
    config_cleanup(&cfg);
    dohsrv_stop(d);
    free(crt);
    free(key);
    site_stop(s);
}

/* The raid thread fetches at start and publishes: generation 2, the site's sizes. */
static bool second_profile(void *live)
{
    return doppel_live_gen(live) >= 2;
}

static void test_raid_thread_publishes(void **state)
{
    (void)state;
    struct site *s = site_start(false);
    struct config cfg;
    config_init(&cfg);
    cfg.doppel.enabled = true;
    cfg.doppel.nurls = 1;
    site_url(s, cfg.doppel.urls[0], sizeof cfg.doppel.urls[0]);
    cfg.doppel.repeats = 2;
    struct doppel_live *l = doppel_live_new(&cfg, NULL);
    assert_non_null(l);
    tgtest_wait_until(second_profile, l, 10000);
    struct doppel_profile p;
    assert_int_equal(doppel_live_get(l, &p), 2);
    assert_int_equal(p.phases, 2);
    assert_int_equal(p.size_q[1][0], 1000 + TLS13_TAG);
    assert_int_equal(p.size_q[1][DOPPEL_SIZE_Q], 3000 + TLS13_TAG);
    uint64_t raids = 0, failed = 9;
    doppel_live_counts(l, &raids, &failed);
    assert_int_equal(raids, 1);
    assert_int_equal(failed, 0);
    doppel_live_free(l); /* wakes the thread from its six-hour wait */
    config_cleanup(&cfg);
    site_stop(s);
}

/* ---- the shaper: a worker on this thread in virtual time ---- */

struct env {
    struct pharness h;
    struct conn_shared sh;
    struct conn_worker w;
    uint64_t now; /* virtual ms */
    int lfd;
    uint16_t lport;
    struct loop_io lio;
    struct pcli c;
};

static uint64_t env_clock(void *ud)
{
    return __atomic_load_n(&((struct env *)ud)->now, __ATOMIC_ACQUIRE);
}

static void on_listen(struct loop *l, struct loop_io *io, unsigned events)
{
    (void)l, (void)events;
    struct env *e = (struct env *)(void *)((char *)io - offsetof(struct env, lio));
    int fd = accept4(e->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    int one = 1; /* as tgproxy's listeners (server.c): a held record leaves when released */
    if (fd >= 0 && setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0)
        conn_accept(&e->w, fd);
    else if (fd >= 0)
        close(fd);
}

struct helper {
    struct env *e;
    int rc;
    int done;      /* atomic */
    uint64_t echo; /* > 0: then echo this many bytes (pcli_echo) */
};

static void *helper_main(void *arg)
{
    struct helper *hp = arg;
    struct pcli_opts o = pharness_client(&hp->e->h, PCLI_TLS);
    o.max_record = 16384;
    hp->rc =
        hp->echo ? pcli_echo(&hp->e->c, 7, hp->echo, 0) : pcli_connect(&hp->e->c, hp->e->lport, &o);
    __atomic_store_n(&hp->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Run a client step on a helper thread while this thread runs the worker (tick: one
   virtual ms per iteration). Bounded. */
static int env_helper(struct env *e, uint64_t echo, bool tick)
{
    struct helper hp = {.e = e, .echo = echo};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, helper_main, &hp), 0);
    for (int i = 0; i < 200000 && !__atomic_load_n(&hp.done, __ATOMIC_ACQUIRE); i++) {
        if (tick)
            __atomic_add_fetch(&e->now, 1, __ATOMIC_RELEASE);
        assert_int_equal(loop_run_once(&e->w.loop, 1), 0);
    }
    pthread_join(th, NULL);
    return hp.rc;
}

static void env_start(struct env *e, const struct doppel_profile *p, uint32_t delay_ms, bool echo)
{
    memset(e, 0, sizeof *e);
    assert_int_equal(pharness_prepare(&e->h, &(struct pharness_opts){.ee = true}), 0);
    e->h.cfg.doppel.enabled = true;
    e->h.cfg.doppel.delay_ms = delay_ms;
    assert_int_equal(conn_shared_init(&e->sh, &e->h.cfg), 0);
    doppel_live_publish(e->sh.doppel, p);
    assert_int_equal(conn_worker_init(&e->w, &e->sh), 0);
    e->now = 1000000;
    loop_set_clock(&e->w.loop, env_clock, e);
    e->lfd = psock_listen(&e->lport, 16);
    assert_true(e->lfd >= 0);
    assert_int_equal(loop_io_add(&e->w.loop, &e->lio, e->lfd, LOOP_READ, on_listen), 0);
    assert_int_equal(env_helper(e, 0, false), 0);
    if (!echo)
        return;
    uint8_t cmd[FAKEDC_CMD_LEN];
    fakedc_cmd(cmd, "ECHO", 1, 0);
    assert_int_equal(pcli_send(&e->c, cmd, sizeof cmd), 0);
}

static void env_stop(struct env *e)
{
    pcli_close(&e->c);
    loop_io_del(&e->w.loop, &e->lio);
    conn_worker_cleanup(&e->w);
    conn_shared_cleanup(&e->sh);
    close(e->lfd);
    pharness_stop(&e->h);
}

struct rec {
    uint64_t at_ms; /* virtual time it was read */
    uint16_t len;
};

/* Read whole records that arrived, stamping them with the virtual now; decrypt into
   out[*got..) and return how many records were appended to r. */
static size_t read_records(struct env *e, struct rec *r, size_t cap, uint8_t *out, size_t *got)
{
    size_t n = 0;
    uint8_t hdr[5];
    while (n < cap && recv(e->c.fd, hdr, 5, MSG_PEEK | MSG_DONTWAIT) == 5) {
        size_t len = (size_t)hdr[3] << 8 | hdr[4];
        assert_int_equal(hdr[0], 0x17);
        assert_int_equal(psock_read_all(e->c.fd, hdr, 5), 0);
        assert_int_equal(psock_read_all(e->c.fd, out + *got, len), 0);
        pctr_apply(&e->c.dec, out + *got, len);
        *got += len;
        r[n++] = (struct rec){.at_ms = e->now, .len = (uint16_t)len};
    }
    return n;
}

/* Send one message of len bytes (pattern by seed) and collect its echo's records: the
   clock moves 1 ms whenever the shaper holds a record, otherwise I/O is waited for. */
static size_t exchange(struct env *e, uint32_t seed, size_t len, struct rec *r, size_t cap)
{
    static uint8_t msg[16384], back[16384 + 16384];
    for (size_t i = 0; i < len; i++)
        msg[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
    assert_int_equal(pcli_send(&e->c, msg, len), 0);
    size_t got = 0, n = 0;
    for (int i = 0; i < 20000 && got < len; i++) {
        struct conn *c = tg__slab_first(&e->w.conn_slab); /* the only one */
        bool held = c && c->shape && loop_timer_active(&c->shape->s.timer);
        if (held)
            __atomic_add_fetch(&e->now, 1, __ATOMIC_RELEASE);
        assert_int_equal(loop_run_once(&e->w.loop, held ? 0 : 2), 0);
        n += read_records(e, r + n, cap - n, back, &got);
    }
    assert_int_equal(got, len);
    assert_memory_equal(back, msg, len); /* every byte, in order */
    return n;
}

/* Weibull CDF */
static double wcdf(const struct doppel_weibull *w, double x)
{
    return x <= 0 ? 0 : 1 - exp(-pow(x / w->lambda_ms, w->k));
}

#define MSGS 140

static void test_shaper_follows_learned_profile(void **state)
{
    (void)state;
    struct site *s = site_start(true);
    static struct doppel_sample smp[NREC];
    lockstep_raid(s, smp);
    site_stop(s);
    struct doppel_profile p;
    doppel_profile_default(&p);
    assert_int_equal(doppel_learn(smp, NREC, &p), 0);

    struct env e;
    env_start(&e, &p, 1000, true);
    static struct rec r[64];
    static double gaps[MSGS * 16];
    static uint16_t lens[MSGS * 16];
    size_t ng = 0, nl = 0;
    for (uint32_t m = 0; m < MSGS; m++) {
        __atomic_add_fetch(&e.now, 1500, __ATOMIC_RELEASE); /* a quiet second: a new burst */
        size_t n = exchange(&e, m, 8000, r, 64);
        for (size_t i = 0; i + 1 < n; i++) {
            lens[nl++] = r[i].len; /* the last record of a message holds what was left */
            gaps[ng++] = (double)(r[i + 1].at_ms - r[i].at_ms);
        }
    }
    assert_true(ng > 300);
    assert_true(e.w.stats.shaped_records >= ng);
    /* gaps: observed (whole virtual ms) within 1 ms of the drawn ones, so the empirical CDF
       at x lies between the model's at x - 1 and x + 1, give or take the sampling error */
    for (int x = 0; x <= 40; x++) {
        size_t le = 0;
        for (size_t i = 0; i < ng; i++)
            le += gaps[i] <= x;
        double f = (double)le / ng, lo = wcdf(&p.gap, x - 1) - 0.08,
               hi = wcdf(&p.gap, x + 1) + 0.08;
        if (f < lo || f > hi)
            fail_msg("gaps: F(%d) = %.3f outside [%.3f, %.3f] (n %zu)", x, f, lo, hi, ng);
    }
    /* lengths: the empirical CDF of the site's phase-0 records at each of its lengths */
    static const uint16_t site_len[] = {1000 + TLS13_TAG, 1500 + TLS13_TAG, 2000 + TLS13_TAG,
                                        3000 + TLS13_TAG};
    for (size_t v = 0; v < 4; v++) {
        size_t le = 0, sle = 0, sn = 0;
        for (size_t i = 0; i < nl; i++)
            le += lens[i] <= site_len[v];
        for (size_t i = 0; i < NREC; i++)
            if (i % PER_CONN < 40 && (sn++, 1))
                sle += smp[i].len <= site_len[v];
        double f = (double)le / nl, want = (double)sle / sn;
        if (fabs(f - want) > 0.12)
            fail_msg("lengths: F(%u) = %.3f, the site's %.3f", site_len[v], f, want);
    }
    env_stop(&e);
}

/* A worker whose profile draws gaps of seconds, with max-delay 5 ms, echoing. */
static void env_slow_site(struct env *e)
{
    struct doppel_profile p;
    doppel_profile_default(&p);
    p.gap = (struct doppel_weibull){1.0, 5000.0};
    env_start(e, &p, 5, true);
}

/* Gaps of seconds, max-delay 5 ms: every record leaves within 6 ms of its bytes' arrival. */
static void test_shaper_latency_cap(void **state)
{
    (void)state;
    struct env e;
    env_slow_site(&e);
    static struct rec r[64];
    for (uint32_t m = 0; m < 20; m++) {
        __atomic_add_fetch(&e.now, 1500, __ATOMIC_RELEASE);
        size_t n = exchange(&e, m, 6000, r, 64);
        assert_true(n >= 3); /* dynamic sizing: 1450-byte records at most */
        uint64_t spread = r[n - 1].at_ms - r[0].at_ms;
        if (spread < 5 || spread > 6)
            fail_msg("message %u: records spread over %llu ms", m, (unsigned long long)spread);
    }
    assert_true(e.w.stats.shape_delay_ms >= 20 * 5);
    env_stop(&e);
}

/* One-record messages: 6 ms apart (more than max-delay) they leave at once, 2 ms apart they
   wait for their gap (up to the cap). */
static void test_shaper_spares_sparse_records(void **state)
{
    (void)state;
    struct env e;
    env_slow_site(&e);
    static struct rec r[8];
    __atomic_add_fetch(&e.now, 1500, __ATOMIC_RELEASE);
    for (uint32_t m = 0; m < 10; m++) {
        __atomic_add_fetch(&e.now, 6, __ATOMIC_RELEASE);
        uint64_t sent = e.now;
        assert_int_equal(exchange(&e, m, 100, r, 8), 1);
        assert_int_equal(r[0].at_ms, sent);
    }
    assert_int_equal(e.w.stats.shape_delay_ms, 0);
    __atomic_add_fetch(&e.now, 2, __ATOMIC_RELEASE);
    uint64_t sent = e.now;
    assert_int_equal(exchange(&e, 99, 100, r, 8), 1);
    assert_true(r[0].at_ms > sent && r[0].at_ms <= sent + 5);
    env_stop(&e);
}

/* A bulk transfer is paced at most its budget (SHAPE_BUDGET_MS at the start, 1 ms per
   SHAPE_EARN_MS after) and arrives byte-exact. */
static void test_shaper_spares_bulk(void **state)
{
    (void)state;
    struct doppel_profile p;
    doppel_profile_default(&p);
    struct env e;
    env_start(&e, &p, 20, false);
    uint64_t t0 = e.now;
    assert_int_equal(env_helper(&e, 4 << 20, true), 0); /* pcli_echo verifies every byte */
    uint64_t bound = SHAPE_BUDGET_MS + (e.now - t0) / SHAPE_EARN_MS + SHAPE_TICK_MS;
    if (e.w.stats.shape_delay_ms > bound)
        fail_msg("held %llu ms of %llu", (unsigned long long)e.w.stats.shape_delay_ms,
                 (unsigned long long)(e.now - t0));
    env_stop(&e);
}

/* The whole server: a raid thread started with it against the site, workers shaping a
   FakeTLS client's round trips and relaying a bulk echo byte-exact, and a stop that ends
   the raid thread whatever it is doing. */
static void test_server_learns_and_shapes(void **state)
{
    (void)state;
    struct site *s = site_start(false);
    struct pharness h;
    assert_int_equal(pharness_prepare(&h, &(struct pharness_opts){.ee = true}), 0);
    h.cfg.doppel.enabled = true;
    h.cfg.doppel.nurls = 1;
    site_url(s, h.cfg.doppel.urls[0], sizeof h.cfg.doppel.urls[0]);
    h.cfg.doppel.repeats = 3;
    assert_int_equal(server_start(&h.cfg, &h.srv), 0);
    h.port = server_port(h.srv, 0);
    struct pcli_opts o = pharness_client(&h, PCLI_TLS);
    double p50, p99; /* round trips: every echo is a small read, never bulk */
    assert_int_equal(pload_rtt(h.port, &o, 200, 0, &p50, &p99), 0);
    struct pcli c;
    assert_int_equal(pcli_connect(&c, h.port, &o), 0);
    assert_int_equal(pcli_echo(&c, 3, 1 << 20, 3000), 0); /* and a bulk echo, byte-exact */
    pcli_close(&c);
    struct stats st;
    server_stats(h.srv, &st);
    assert_true(st.shaped_records > 0);
    pharness_stop(&h);
    site_stop(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scout_learns_site),
        cmocka_unit_test(test_scout_verifies_cert),
        cmocka_unit_test(test_scout_resolves_through_dns),
        cmocka_unit_test(test_raid_thread_publishes),
        cmocka_unit_test(test_shaper_follows_learned_profile),
        cmocka_unit_test(test_shaper_latency_cap),
        cmocka_unit_test(test_shaper_spares_sparse_records),
        cmocka_unit_test(test_shaper_spares_bulk),
        cmocka_unit_test(test_server_learns_and_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
