/*
 * doppel_fetch: the scout's fetches, raids and the live profile. See doppel_fetch.h.
 */
#include "proxy/services/doppel_fetch.h"

#include <curl/curl.h>
#include <errno.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <arpa/inet.h>

#include "core/alloc.h"
#include "core/log.h"
#include "proxy/services/doh.h"

#define FETCH_UA                                                                                   \
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 "     \
    "Safari/537.36"

struct fetch {
    const struct doppel_fetch_opts *o;
    struct doppel_sample *out;
    size_t cap, *n;
    uint32_t idx; /* application records seen on this fetch's connections */
    size_t bytes; /* body bytes */
    bool cut;     /* stopped by the size bound */
    size_t first; /* *n at the start */
};

static uint64_t mono_us(void *ud)
{
    (void)ud;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* OpenSSL's message callback: a record header read after the handshake is one sample. */
static void on_msg(int write_p, int version, int content_type, const void *buf, size_t len,
                   SSL *ssl, void *arg)
{
    (void)version;
    struct fetch *f = arg;
    const uint8_t *h = buf;
    if (write_p || content_type != SSL3_RT_HEADER || len < 5 || h[0] != SSL3_RT_APPLICATION_DATA ||
        !SSL_is_init_finished(ssl))
        return;
    uint64_t t = f->o->clock ? f->o->clock(f->o->clock_ud) : mono_us(NULL);
    if (*f->n < f->cap)
        f->out[(*f->n)++] =
            (struct doppel_sample){.t_us = t,
                                   .len = (uint16_t)(h[3] << 8 | h[4]),
                                   .idx = (uint16_t)(f->idx < UINT16_MAX ? f->idx : UINT16_MAX)};
    f->idx++;
}

static CURLcode on_ssl_ctx(CURL *c, void *ctx, void *arg)
{
    (void)c;
    SSL_CTX_set_msg_callback(ctx, on_msg);
    SSL_CTX_set_msg_callback_arg(ctx, arg);
    return CURLE_OK;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *arg)
{
    (void)p;
    struct fetch *f = arg;
    f->bytes += size * nmemb;
    if (f->bytes > DOPPEL_FETCH_MAX_BYTES) {
        f->cut = true;
        return 0; /* enough of this page: the transfer ends with a write error */
    }
    return size * nmemb;
}

static int on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a, (void)b, (void)c, (void)d;
    const struct fetch *f = arg;
    return f->o->stop && __atomic_load_n(f->o->stop, __ATOMIC_ACQUIRE);
}

/* "https://host[:port]" of url, for messages (a path or query may carry tokens). */
static void url_site(const char *url, char *out, size_t cap)
{
    const char *h = strstr(url, "://");
    h = h ? h + 3 : url;
    size_t n = strcspn(h, "/?#");
    snprintf(out, cap, "https://%.*s", (int)(n > 200 ? 200 : n), h);
}

/* host and port of an https url (host without brackets); false when it has none. */
static bool url_host(const char *url, char *host, size_t cap, unsigned *port)
{
    const char *h = strstr(url, "://");
    h = h ? h + 3 : url;
    size_t n = strcspn(h, "/?#");
    const char *at = memchr(h, '@', n); /* user info is not part of the host */
    if (at) {
        n -= (size_t)(at + 1 - h);
        h = at + 1;
    }
    const char *end = h + n, *colon = NULL;
    if (*h == '[') {
        const char *rb = memchr(h, ']', n);
        if (!rb)
            return false;
        colon = rb + 1 < end && rb[1] == ':' ? rb + 1 : NULL;
        h++;
        n = (size_t)(rb - h);
    } else {
        colon = memchr(h, ':', n);
        n = colon ? (size_t)(colon - h) : n;
    }
    *port = colon ? (unsigned)strtoul(colon + 1, NULL, 10) : 443;
    if (n == 0 || n >= cap || *port == 0 || *port > 65535)
        return false;
    memcpy(host, h, n);
    host[n] = '\0';
    return true;
}

/* With [network] dns: "host:port:addr,addr" for CURLOPT_RESOLVE, or NULL (an IP literal,
   or no resolver: libcurl resolves). *rc = -EIO with err filled when the name fails. */
static struct curl_slist *doh_pin(const char *url, const struct doppel_fetch_opts *o,
                                  const char *site, char *err, size_t errlen, int *rc)
{
    char host[CONFIG_HOST_MAX], line[CONFIG_HOST_MAX + 16 + DOH_MAX_ADDRS * 48];
    unsigned port = 0;
    uint8_t tmp[16];
    *rc = 0;
    if (!o->doh || !url_host(url, host, sizeof host, &port) || inet_pton(AF_INET, host, tmp) == 1 ||
        inet_pton(AF_INET6, host, tmp) == 1)
        return NULL;
    struct doh_result res;
    if (doh_resolve(o->doh, host, o->prefer, &res) != DOH_OK) {
        snprintf(err, errlen, "%s: DNS through [network] dns: %s", site, res.err);
        *rc = -EIO;
        return NULL;
    }
    int k = snprintf(line, sizeof line, "%s:%u:", host, port);
    for (size_t i = 0; i < res.n && k > 0 && (size_t)k < sizeof line - 48; i++) {
        char a[INET6_ADDRSTRLEN];
        bool v6 = res.a[i].family == AF_INET6;
        inet_ntop(v6 ? AF_INET6 : AF_INET, res.a[i].addr, a, sizeof a);
        k += snprintf(line + k, sizeof line - (size_t)k, "%s%s%s%s", i ? "," : "", v6 ? "[" : "", a,
                      v6 ? "]" : "");
    }
    struct curl_slist *l = curl_slist_append(NULL, line);
    if (!l) {
        snprintf(err, errlen, "%s: out of memory", site);
        *rc = -EIO;
    }
    return l;
}

static void fetch_setopts(CURL *c, const char *url, struct fetch *f, const char *ca_file,
                          const char *ca_dir)
{
    const struct doppel_fetch_opts *o = f->o;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 3L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)(o->connect_ms ? o->connect_ms : 10000));
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)DOPPEL_FETCH_MAX_MS);
    curl_easy_setopt(c, CURLOPT_USERAGENT, FETCH_UA);
    curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(c, CURLOPT_SSL_CTX_FUNCTION, on_ssl_ctx);
    curl_easy_setopt(c, CURLOPT_SSL_CTX_DATA, f);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, f);
    if (ca_file && *ca_file)
        curl_easy_setopt(c, CURLOPT_CAINFO, ca_file);
    if (ca_dir && *ca_dir)
        curl_easy_setopt(c, CURLOPT_CAPATH, ca_dir);
}

int doppel_fetch(const char *url, const struct doppel_fetch_opts *o, struct doppel_sample *out,
                 size_t cap, size_t *n, char *err, size_t errlen)
{
    char site[256];
    url_site(url, site, sizeof site);
    struct fetch f = {.o = o, .out = out, .cap = cap, .n = n, .first = *n};
    int pin_rc = 0;
    struct curl_slist *pin = doh_pin(url, o, site, err, errlen, &pin_rc);
    if (pin_rc)
        return pin_rc;
    CURL *c = curl_easy_init();
    if (!c) {
        curl_slist_free_all(pin);
        snprintf(err, errlen, "%s: cannot make a libcurl handle", site);
        return -EIO;
    }
    fetch_setopts(c, url, &f, getenv("SSL_CERT_FILE"), getenv("SSL_CERT_DIR"));
    curl_easy_setopt(c, CURLOPT_RESOLVE, pin);
    CURLcode rc = curl_easy_perform(c);
    curl_easy_cleanup(c);
    curl_slist_free_all(pin);
    if (rc == CURLE_ABORTED_BY_CALLBACK) {
        snprintf(err, errlen, "%s: stopped", site);
        return -ECANCELED;
    }
    bool bounded = (rc == CURLE_WRITE_ERROR && f.cut) || rc == CURLE_OPERATION_TIMEDOUT;
    if (rc == CURLE_OK || (bounded && f.idx > 0))
        return 0;
    snprintf(err, errlen, "%s: %s", site, curl_easy_strerror(rc));
    return -EIO;
}

/* ---- the live profile and the raid thread ---- */

struct doppel_live {
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* signalled by _free to end a wait between raids */
    struct doppel_profile prof; /* under mu */
    uint64_t gen;               /* atomic; written under mu */
    int stop;                   /* atomic */
    uint64_t raids, failed;     /* atomic */
    const struct config *cfg;
    struct doh *doh;               /* [network] dns, or NULL (borrowed) */
    struct doppel_sample *samples; /* a raid's records (raid thread only) */
    pthread_t th;
    bool th_on;
};

uint64_t doppel_live_gen(const struct doppel_live *l)
{
    return __atomic_load_n(&l->gen, __ATOMIC_ACQUIRE);
}

uint64_t doppel_live_get(struct doppel_live *l, struct doppel_profile *out)
{
    pthread_mutex_lock(&l->mu);
    *out = l->prof;
    uint64_t g = l->gen;
    pthread_mutex_unlock(&l->mu);
    return g;
}

void doppel_live_publish(struct doppel_live *l, const struct doppel_profile *p)
{
    pthread_mutex_lock(&l->mu);
    l->prof = *p;
    __atomic_store_n(&l->gen, l->gen + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&l->mu);
}

void doppel_live_counts(const struct doppel_live *l, uint64_t *raids, uint64_t *failed)
{
    *raids = __atomic_load_n(&l->raids, __ATOMIC_RELAXED);
    *failed = __atomic_load_n(&l->failed, __ATOMIC_RELAXED);
}

/* Every url, repeats times; then refit and publish. */
static void raid(struct doppel_live *l)
{
    const struct config *cfg = l->cfg;
    struct doppel_fetch_opts o = {.connect_ms = cfg->timeout.tcp_ms,
                                  .doh = l->doh,
                                  .prefer = cfg->prefer_ip,
                                  .stop = &l->stop};
    size_t n = 0, fails = 0;
    char err[320] = "";
    for (uint32_t r = 0; r < cfg->doppel.repeats; r++) {
        for (size_t u = 0; u < cfg->doppel.nurls; u++) {
            int rc = doppel_fetch(cfg->doppel.urls[u], &o, l->samples, DOPPEL_MAX_SAMPLES, &n, err,
                                  sizeof err);
            if (rc == -ECANCELED)
                return;
            fails += rc != 0;
        }
    }
    __atomic_add_fetch(&l->failed, fails, __ATOMIC_RELAXED);
    struct doppel_profile p;
    doppel_live_get(l, &p);
    if (doppel_learn(l->samples, n, &p) == 0)
        doppel_live_publish(l, &p);
    __atomic_add_fetch(&l->raids, 1, __ATOMIC_RELAXED);
    if (fails)
        tg__log(NULL, TG__LOG_WARN, "doppelganger: %zu fetches failed, last: %s", fails, err);
    tg__log(NULL, TG__LOG_INFO,
            "doppelganger: raid done: %zu records; gaps %s (k=%.3f lambda=%.3f ms), sizes %s", n,
            p.gaps_learned ? "learned" : "built-in", p.gap.k, p.gap.lambda_ms,
            p.phases ? "learned" : "built-in");
}

static void *raid_main(void *arg)
{
    struct doppel_live *l = arg;
    pthread_mutex_lock(&l->mu);
    while (!l->stop) {
        pthread_mutex_unlock(&l->mu);
        raid(l);
        pthread_mutex_lock(&l->mu);
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += (time_t)l->cfg->doppel.raid_s;
        while (!l->stop && pthread_cond_timedwait(&l->cv, &l->mu, &until) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static int live_thread(struct doppel_live *l)
{
    int rc;
    if (!l->cfg->doppel.nurls || !l->cfg->doppel.repeats)
        return 0;
    if (!(l->samples = tg__malloc(DOPPEL_MAX_SAMPLES * sizeof *l->samples)))
        return -ENOMEM;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return -EIO;
    if ((rc = pthread_create(&l->th, NULL, raid_main, l)) != 0) {
        curl_global_cleanup();
        return -rc;
    }
    l->th_on = true;
    return 0;
}

struct doppel_live *doppel_live_new(const struct config *cfg, struct doh *doh)
{
    struct doppel_live *l = tg__calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->cfg = cfg;
    l->doh = doh;
    doppel_profile_default(&l->prof);
    l->gen = 1;
    pthread_mutex_init(&l->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (live_thread(l) != 0) {
        pthread_cond_destroy(&l->cv);
        pthread_mutex_destroy(&l->mu);
        tg__free(l->samples);
        tg__free(l);
        return NULL;
    }
    return l;
}

void doppel_live_free(struct doppel_live *l)
{
    if (!l)
        return;
    if (l->th_on) {
        pthread_mutex_lock(&l->mu);
        __atomic_store_n(&l->stop, 1, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->th, NULL);
        curl_global_cleanup();
    }
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    tg__free(l->samples);
    tg__free(l);
}
