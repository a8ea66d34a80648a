/* mpsource: the middle-proxy documents and their updater thread (mpsource.h). */
#include "proxy/services/mpsource.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/atomicfile.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/readfile.h"
#include "core/str.h"
#include "proxy/services/httpsget.h"
#include "proxy/wire/crypto.h"

/* What the updater reads: the sources as configured. */
struct mpsrc_cfg {
    char src[MPSRC_N][CONFIG_SOURCE_MAX];
    char state_dir[CONFIG_FILE_MAX];
    uint32_t update_s, http_ms;
};

/* The current value of every document (under mu), and how it stands. */
struct mpsrc_val {
    uint8_t secret[256];
    size_t secret_len;
    struct mpconf v4, v6;
    bool has[MPSRC_N];
    int ip_family;
    uint8_t ip[16];
};

struct mpsource {
    pthread_mutex_t mu; /* cfg, val, docs, stats */
    struct mpsrc_cfg cfg;
    uint64_t cfg_gen; /* +1 per mpsource_apply */
    struct mpsrc_val val;
    struct mpdocs *docs;
    uint64_t seq;
    struct mpsource_stats st;
    void (*changed)(void *);
    void *ud;
    pthread_mutex_t tmu; /* the updater's wait */
    pthread_cond_t cv;
    bool stop, kick; /* under tmu (stop also read atomically by a download) */
    pthread_t th;
    bool started;
};

static const char *const names[MPSRC_N] = {"proxy-secret", "proxy-config", "proxy-config-v6",
                                           "public-ip"};

const char *mpsource_name(enum mpsource_kind k)
{
    return (unsigned)k < MPSRC_N ? names[k] : "?";
}

/* ---- documents ---- */

int mpsource_check_secret(const uint8_t *p, size_t n, char *err, size_t errlen)
{
    (void)p;
    if (n < 32 || n > 256) {
        snprintf(err, errlen, "%zu bytes, expected 32..256 (Telegram's is 128 bytes, binary)", n);
        return -1;
    }
    return 0;
}

int mpsource_parse_ip(const uint8_t *p, size_t n, int *family, uint8_t ip[16], char *err,
                      size_t errlen)
{
    while (n && (p[0] == ' ' || p[0] == '\t' || p[0] == '\r' || p[0] == '\n'))
        p++, n--;
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r' || p[n - 1] == '\n'))
        n--;
    char text[64];
    if (n == 0 || n >= sizeof text) {
        snprintf(err, errlen, "expected an IP address as the whole answer, got %zu bytes", n);
        return -1;
    }
    memcpy(text, p, n);
    text[n] = '\0';
    memset(ip, 0, 16);
    if (inet_pton(AF_INET, text, ip) == 1) {
        *family = AF_INET;
        return 0;
    }
    if (inet_pton(AF_INET6, text, ip) == 1) {
        *family = AF_INET6;
        return 0;
    }
    snprintf(err, errlen, "expected an IPv4 or IPv6 address as the whole answer");
    return -1;
}

bool mpsource_ip_private(int family, const uint8_t *ip)
{
    if (family == AF_INET)
        return ip[0] == 10 || (ip[0] == 172 && (ip[1] & 0xf0) == 16) ||
               (ip[0] == 192 && ip[1] == 168) || (ip[0] == 100 && (ip[1] & 0xc0) == 64) ||
               (ip[0] == 169 && ip[1] == 254);
    if (ip[0] == 0 && memcmp(ip, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0)
        return mpsource_ip_private(AF_INET, ip + 12);
    return (ip[0] & 0xfe) == 0xfc || (ip[0] == 0xfe && (ip[1] & 0xc0) == 0x80);
}

/* Parse a document of kind k into v (only that kind's fields). 0 or -1 with err. */
static int parse_doc(enum mpsource_kind k, const uint8_t *p, size_t n, struct mpsrc_val *v,
                     char *err, size_t errlen)
{
    switch (k) {
    case MPSRC_SECRET:
        if (mpsource_check_secret(p, n, err, errlen) != 0)
            return -1;
        memset(v->secret, 0, sizeof v->secret);
        memcpy(v->secret, p, n);
        v->secret_len = n;
        return 0;
    case MPSRC_CONFIG:
    case MPSRC_CONFIG6:
        return mpconf_parse((const char *)p, n, k == MPSRC_CONFIG ? &v->v4 : &v->v6, err, errlen);
    case MPSRC_IP:
        return mpsource_parse_ip(p, n, &v->ip_family, v->ip, err, errlen);
    default:
        return -1;
    }
}

/* Is kind k's value in a the same as in b? */
static bool same_doc(enum mpsource_kind k, const struct mpsrc_val *a, const struct mpsrc_val *b)
{
    if (a->has[k] != b->has[k])
        return false;
    switch (k) {
    case MPSRC_SECRET:
        return a->secret_len == b->secret_len && memcmp(a->secret, b->secret, a->secret_len) == 0;
    case MPSRC_CONFIG:
        return memcmp(&a->v4, &b->v4, sizeof a->v4) == 0;
    case MPSRC_CONFIG6:
        return memcmp(&a->v6, &b->v6, sizeof a->v6) == 0;
    default:
        return a->ip_family == b->ip_family && memcmp(a->ip, b->ip, 16) == 0;
    }
}

static void copy_doc(enum mpsource_kind k, struct mpsrc_val *to, const struct mpsrc_val *from)
{
    to->has[k] = from->has[k];
    switch (k) {
    case MPSRC_SECRET:
        memcpy(to->secret, from->secret, sizeof to->secret);
        to->secret_len = from->secret_len;
        break;
    case MPSRC_CONFIG:
        to->v4 = from->v4;
        break;
    case MPSRC_CONFIG6:
        to->v6 = from->v6;
        break;
    default:
        to->ip_family = from->ip_family;
        memcpy(to->ip, from->ip, 16);
    }
}

void mpdocs_unref(struct mpdocs *d)
{
    if (d && __atomic_sub_fetch(&d->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        crypto_wipe(d->secret, sizeof d->secret);
        tg__free(d);
    }
}

/* Publish src->val as the next documents (under mu). false: out of memory (old ones stay). */
static bool publish_locked(struct mpsource *src)
{
    struct mpdocs *d = tg__calloc(1, sizeof *d);
    if (!d)
        return false;
    const struct mpsrc_val *v = &src->val;
    d->refs = 1;
    d->seq = ++src->seq;
    if (v->has[MPSRC_SECRET]) {
        memcpy(d->secret, v->secret, sizeof d->secret);
        d->secret_len = v->secret_len;
    }
    d->has_v4 = v->has[MPSRC_CONFIG];
    d->has_v6 = v->has[MPSRC_CONFIG6];
    if (d->has_v4)
        d->v4 = v->v4;
    if (d->has_v6)
        d->v6 = v->v6;
    if (v->has[MPSRC_IP]) {
        d->has_ip4 = v->ip_family == AF_INET;
        d->has_ip6 = v->ip_family == AF_INET6;
        memcpy(d->has_ip4 ? d->ip4 : d->ip6, v->ip, d->has_ip4 ? 4 : 16);
    }
    struct mpdocs *old = src->docs;
    __atomic_store_n(&src->docs, d, __ATOMIC_RELEASE);
    mpdocs_unref(old);
    return true;
}

struct mpdocs *mpsource_docs(struct mpsource *src)
{
    if (!src)
        return NULL;
    pthread_mutex_lock(&src->mu);
    struct mpdocs *d = src->docs;
    if (d)
        __atomic_add_fetch(&d->refs, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&src->mu);
    return d;
}

uint64_t mpsource_seq(struct mpsource *src)
{
    if (!src)
        return 0;
    pthread_mutex_lock(&src->mu);
    uint64_t s = src->docs ? src->docs->seq : 0;
    pthread_mutex_unlock(&src->mu);
    return s;
}

void mpsource_stats(struct mpsource *src, struct mpsource_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!src)
        return;
    pthread_mutex_lock(&src->mu);
    *out = src->st;
    pthread_mutex_unlock(&src->mu);
}

/* Does DC dc have a middle proxy of family f in c? */
static bool dc_has(const struct mpconf *c, int16_t dc, int f)
{
    for (size_t i = 0; c && i < c->n; i++)
        if (c->proxies[i].dc == dc && c->proxies[i].family == f)
            return true;
    return false;
}

void mpdocs_merge(const struct mpdocs *d, enum config_prefer_ip prefer, struct mpconf *out)
{
    memset(out, 0, sizeof *out);
    const struct mpconf *l[2] = {d->has_v4 ? &d->v4 : NULL, d->has_v6 ? &d->v6 : NULL};
    const struct mpconf *head = l[0] ? l[0] : l[1];
    if (head) {
        out->has_default = head->has_default;
        out->default_dc = head->default_dc;
        out->timeout_ms = head->timeout_ms;
        out->min_connections = head->min_connections;
        out->max_connections = head->max_connections;
    }
    /* by address family, whichever list an entry came from: a DC's IPv4 middle proxies, or
       its IPv6 ones when it has none (only-*: that family alone) */
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; l[k] && i < l[k]->n && out->n < MPCONF_MAX; i++) {
            const struct mpconf_proxy *p = &l[k]->proxies[i];
            bool want = p->family == AF_INET ? prefer != CONFIG_ONLY_IPV6
                                             : prefer == CONFIG_ONLY_IPV6 ||
                                                   (prefer != CONFIG_ONLY_IPV4 &&
                                                    !dc_has(l[0], p->dc, AF_INET) &&
                                                    !dc_has(l[1], p->dc, AF_INET));
            bool dup = false;
            for (size_t j = 0; j < out->n && !dup; j++)
                dup = memcmp(&out->proxies[j], p, sizeof *p) == 0;
            if (want && !dup)
                out->proxies[out->n++] = *p;
        }
    }
}

/* ---- fetching ---- */

struct fetch {
    struct mpsource_body *b;
    size_t cap;
    bool over;
    const bool *stop; /* NULL = never abandoned */
};

static size_t on_data(char *p, size_t size, size_t nmemb, void *ud)
{
    struct fetch *f = ud;
    size_t n = size * nmemb;
    if (f->b->len + n > MPSOURCE_MAX_BYTES) {
        f->over = true;
        return 0;
    }
    if (f->b->len + n + 1 > f->cap) {
        size_t nc = f->cap ? f->cap : 4096;
        while (nc < f->b->len + n + 1)
            nc *= 2;
        uint8_t *q = tg__realloc(f->b->data, nc);
        if (!q)
            return 0;
        f->b->data = q;
        f->cap = nc;
    }
    memcpy(f->b->data + f->b->len, p, n);
    f->b->len += n;
    f->b->data[f->b->len] = '\0';
    return n;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *ud)
{
    struct fetch *f = ud;
    size_t n = size * nmemb;
    if (n > 5 && n < 128 && strncasecmp(p, "date:", 5) == 0) {
        char v[128];
        memcpy(v, p + 5, n - 5);
        v[n - 5] = '\0';
        time_t t = curl_getdate(v, NULL);
        f->b->date = t > 0 ? (int64_t)t : 0;
    }
    return n;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a, (void)b, (void)c, (void)d;
    struct fetch *f = ud;
    return f->stop && __atomic_load_n(f->stop, __ATOMIC_RELAXED) ? 1 : 0;
}

static int read_local(const char *path, struct mpsource_body *b, char *err, size_t errlen)
{
    char *buf;
    size_t len;
    struct stat st;
    memset(b, 0, sizeof *b); /* callers free it on either outcome */
    if (tg__read_file(path, MPSOURCE_MAX_BYTES, 0, &buf, &len, &st, err, errlen) != 0)
        return -1;
    b->data = (uint8_t *)buf;
    b->len = len;
    b->date = (int64_t)st.st_mtime;
    return 0;
}

static int fetch_stoppable(const char *source, uint32_t http_ms, const bool *stop,
                           struct mpsource_body *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!config_is_url(source))
        return read_local(source, out, err, errlen);
    CURL *h = curl_easy_init();
    if (!h) {
        snprintf(err, errlen, "cannot start a download (libcurl)");
        return -1;
    }
    struct fetch f = {.b = out, .stop = stop};
    char eb[CURL_ERROR_SIZE] = "";
    long total_ms = 4L * http_ms + 10000;
    httpsget_setup(h, source, http_ms, total_ms, (curl_off_t)MPSOURCE_MAX_BYTES);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &f);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &f);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &f);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, eb);
    uint64_t t0 = tg__now_ms();
    CURLcode res = curl_easy_perform(h);
    out->elapsed_s = (double)(tg__now_ms() - t0) / 1000;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
    curl_easy_cleanup(h);
    if (res == CURLE_OK && out->status == 200) {
        if (!out->data && !(out->data = tg__calloc(1, 1))) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        return 0;
    }
    if (res == CURLE_OK)
        snprintf(err, errlen, "HTTP status %ld, expected 200", out->status);
    else
        snprintf(err, errlen, "download failed: %.200s",
                 f.over ? "larger than 1 MiB" : eb[0] ? eb : curl_easy_strerror(res));
    int64_t date = out->date;
    long status = out->status;
    mpsource_body_free(out);
    out->date = date, out->status = status; /* doctor still reads the clock from an error */
    return -1;
}

int mpsource_fetch(const char *source, uint32_t http_ms, struct mpsource_body *out, char *err,
                   size_t errlen)
{
    return fetch_stoppable(source, http_ms, NULL, out, err, errlen);
}

void mpsource_body_free(struct mpsource_body *b)
{
    if (b->data) {
        crypto_wipe(b->data, b->len);
        tg__free(b->data);
    }
    memset(b, 0, sizeof *b);
}

/* ---- the stored copies ---- */

static void stored_path(const struct mpsrc_cfg *c, enum mpsource_kind k, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", c->state_dir, names[k]);
}

/* ---- refreshing ---- */

/* Take kind k's document b (from where, "the stored copy" or the source) into fresh. */
static int take(enum mpsource_kind k, const struct mpsource_body *b, struct mpsrc_val *fresh,
                char *err, size_t errlen)
{
    if (parse_doc(k, b->data, b->len, fresh, err, errlen) != 0)
        return -1;
    fresh->has[k] = true;
    return 0;
}

/* Apply fresh's kinds marked in got to src (under mu); publish and true when one changed. */
static bool merge_locked(struct mpsource *src, const struct mpsrc_val *fresh, const bool *got,
                         const double *when)
{
    bool changed = false;
    for (int k = 0; k < MPSRC_N; k++) {
        if (!got[k])
            continue;
        src->st.ok_time[k] = when[k];
        if (same_doc((enum mpsource_kind)k, &src->val, fresh))
            continue;
        copy_doc((enum mpsource_kind)k, &src->val, fresh);
        if (src->st.updates[k]++)
            tg__log(NULL, TG__LOG_INFO, "middle-proxy: %s changed: the new copy is in use",
                    names[k]);
        changed = true;
    }
    return changed && publish_locked(src);
}

static void notify(struct mpsource *src, bool changed)
{
    if (changed && src->changed)
        src->changed(src->ud);
}

static bool stopping(struct mpsource *src)
{
    return __atomic_load_n(&src->stop, __ATOMIC_RELAXED);
}

/* One round: every configured source fetched or read, checked, stored, taken. */
static void refresh(struct mpsource *src)
{
    pthread_mutex_lock(&src->mu);
    struct mpsrc_cfg c = src->cfg;
    uint64_t cfg_gen = src->cfg_gen;
    pthread_mutex_unlock(&src->mu);
    struct mpsrc_val *fresh = tg__calloc(1, sizeof *fresh);
    if (!fresh)
        return;
    bool got[MPSRC_N] = {false};
    double when[MPSRC_N] = {0};
    for (int k = 0; k < MPSRC_N && !stopping(src); k++) {
        if (!c.src[k][0])
            continue;
        char err[512], path[CONFIG_FILE_MAX + 32];
        struct mpsource_body b;
        int rc = fetch_stoppable(c.src[k], c.http_ms, &src->stop, &b, err, sizeof err);
        if (rc == 0)
            rc = take((enum mpsource_kind)k, &b, fresh, err, sizeof err);
        if (rc != 0) {
            if (stopping(src))
                break;
            pthread_mutex_lock(&src->mu);
            src->st.failures[k]++;
            bool have = src->val.has[k];
            double age = have ? (double)tg__wall_s() - src->st.ok_time[k] : 0;
            pthread_mutex_unlock(&src->mu);
            if (have)
                tg__log(NULL, TG__LOG_WARN,
                        "middle-proxy: %s: %.300s: %s; keeping the copy in use (%.0f s old)",
                        names[k], c.src[k], err, age);
            else
                tg__log(NULL, TG__LOG_WARN,
                        "middle-proxy: %s: %.300s: %s; no copy yet (retrying in %d s)", names[k],
                        c.src[k], err, MPSOURCE_RETRY_S);
            mpsource_body_free(&b);
            continue;
        }
        got[k] = true;
        when[k] = (double)tg__wall_s();
        if (config_is_url(c.src[k])) { /* the stored copy, when it differs */
            struct mpsource_body old;
            stored_path(&c, (enum mpsource_kind)k, path, sizeof path);
            char e2[512];
            bool same = read_local(path, &old, e2, sizeof e2) == 0 && old.len == b.len &&
                        memcmp(old.data, b.data, b.len) == 0;
            mpsource_body_free(&old);
            if (!same && tg__atomic_write(path, b.data, b.len, 0600, e2, sizeof e2) != 0)
                tg__log(NULL, TG__LOG_WARN,
                        "middle-proxy: %s: cannot store the copy (%s); it is used, but a restart "
                        "without network will not have it ([middle-proxy] state-dir)",
                        names[k], e2);
        }
        mpsource_body_free(&b);
    }
    pthread_mutex_lock(&src->mu);
    /* a reload that changed the sources meanwhile wins (its refresh comes next) */
    bool changed = !stopping(src) && cfg_gen == src->cfg_gen && merge_locked(src, fresh, got, when);
    pthread_mutex_unlock(&src->mu);
    crypto_wipe(fresh, sizeof *fresh);
    tg__free(fresh);
    notify(src, changed);
}

/* Does a needed document lack a copy (proxy secret, or both lists)? */
static bool missing(struct mpsource *src)
{
    pthread_mutex_lock(&src->mu);
    bool m = (src->cfg.src[MPSRC_SECRET][0] && !src->val.has[MPSRC_SECRET]) ||
             (!src->val.has[MPSRC_CONFIG] && !src->val.has[MPSRC_CONFIG6]);
    uint32_t every = src->cfg.update_s;
    pthread_mutex_unlock(&src->mu);
    return m && every > MPSOURCE_RETRY_S;
}

static void *updater(void *arg)
{
    struct mpsource *src = arg;
    pthread_mutex_lock(&src->tmu);
    while (!src->stop) {
        src->kick = false;
        pthread_mutex_unlock(&src->tmu);
        refresh(src);
        pthread_mutex_lock(&src->mu);
        uint64_t every_ms = (uint64_t)src->cfg.update_s * 1000;
        pthread_mutex_unlock(&src->mu);
        if (missing(src))
            every_ms = (uint64_t)MPSOURCE_RETRY_S * 1000;
        /* jitter: a tenth either way, so a fleet of proxies does not fetch in step */
        uint32_t tenth = (uint32_t)(every_ms / 10);
        uint64_t wait_ms = every_ms - tenth + crypto_random_range(0, 2 * tenth + 1);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += (time_t)(wait_ms / 1000);
        ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L)
            ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_mutex_lock(&src->tmu);
        while (!src->stop && !src->kick)
            if (pthread_cond_timedwait(&src->cv, &src->tmu, &ts) == ETIMEDOUT)
                break;
    }
    pthread_mutex_unlock(&src->tmu);
    return NULL;
}

/* ---- life ---- */

static void cfg_from(struct mpsrc_cfg *c, const struct config *cfg)
{
    memset(c, 0, sizeof *c);
    tg__strlcpy(c->src[MPSRC_SECRET], cfg->mp.secret_path, sizeof c->src[0]);
    tg__strlcpy(c->src[MPSRC_CONFIG], cfg->mp.config_path, sizeof c->src[0]);
    tg__strlcpy(c->src[MPSRC_CONFIG6], cfg->mp.config6_path, sizeof c->src[0]);
    tg__strlcpy(c->src[MPSRC_IP], cfg->mp.ip_url, sizeof c->src[0]);
    tg__strlcpy(c->state_dir, cfg->mp.state_dir, sizeof c->state_dir);
    c->update_s = cfg->mp.update_s ? cfg->mp.update_s : 86400;
    c->http_ms = cfg->timeout.http_ms ? cfg->timeout.http_ms : 10000;
}

/* What cfg's loader read from files, into fresh/got (file sources only). */
static void from_loaded(const struct config *cfg, const struct mpsrc_cfg *c,
                        struct mpsrc_val *fresh, bool *got, double *when)
{
    double now = (double)tg__wall_s();
    if (c->src[MPSRC_SECRET][0] && !config_is_url(c->src[MPSRC_SECRET]) && cfg->mp.secret_len) {
        memcpy(fresh->secret, cfg->mp.secret, cfg->mp.secret_len);
        fresh->secret_len = cfg->mp.secret_len;
        fresh->has[MPSRC_SECRET] = got[MPSRC_SECRET] = true;
        when[MPSRC_SECRET] = now;
    }
    if (c->src[MPSRC_CONFIG][0] && !config_is_url(c->src[MPSRC_CONFIG]) && cfg->mp.conf.n) {
        fresh->v4 = cfg->mp.conf;
        fresh->has[MPSRC_CONFIG] = got[MPSRC_CONFIG] = true;
        when[MPSRC_CONFIG] = now;
    }
    if (c->src[MPSRC_CONFIG6][0] && !config_is_url(c->src[MPSRC_CONFIG6]) && cfg->mp.conf6.n) {
        fresh->v6 = cfg->mp.conf6;
        fresh->has[MPSRC_CONFIG6] = got[MPSRC_CONFIG6] = true;
        when[MPSRC_CONFIG6] = now;
    }
}

/* URL sources begin with their stored copies (a bad one is a warning, and ignored). */
static void from_stored(const struct mpsrc_cfg *c, struct mpsrc_val *fresh, bool *got,
                        double *when)
{
    for (int k = 0; k < MPSRC_N; k++) {
        if (!config_is_url(c->src[k]))
            continue;
        char path[CONFIG_FILE_MAX + 32], err[512];
        stored_path(c, (enum mpsource_kind)k, path, sizeof path);
        struct mpsource_body b;
        if (access(path, F_OK) != 0)
            continue;
        if (read_local(path, &b, err, sizeof err) == 0 &&
            take((enum mpsource_kind)k, &b, fresh, err, sizeof err) == 0) {
            got[k] = true;
            when[k] = (double)b.date; /* its mtime: when it was downloaded */
            tg__log(NULL, TG__LOG_INFO,
                    "middle-proxy: %s: starting with the stored copy %s (%.0f s old) until "
                    "%.300s answers",
                    names[k], path, (double)tg__wall_s() - when[k], c->src[k]);
        } else {
            tg__log(NULL, TG__LOG_WARN, "middle-proxy: %s: the stored copy is unusable: %s",
                    names[k], err);
        }
        mpsource_body_free(&b);
    }
}

int mpsource_new(const struct config *cfg, void (*changed)(void *), void *ud,
                 struct mpsource **out, char *err, size_t errlen)
{
    *out = NULL;
    struct mpsource *src = tg__calloc(1, sizeof *src);
    struct mpsrc_val *fresh = tg__calloc(1, sizeof *fresh);
    if (!src || !fresh) {
        tg__free(src);
        tg__free(fresh);
        snprintf(err, errlen, "middle-proxy: out of memory");
        return -ENOMEM;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) { /* paired in mpsource_free */
        tg__free(src);
        tg__free(fresh);
        snprintf(err, errlen, "middle-proxy: libcurl failed to initialise");
        return -ENOMEM;
    }
    pthread_mutex_init(&src->mu, NULL);
    pthread_mutex_init(&src->tmu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&src->cv, &ca);
    pthread_condattr_destroy(&ca);
    cfg_from(&src->cfg, cfg);
    for (int k = 0; k < MPSRC_N; k++)
        src->st.used[k] = src->cfg.src[k][0] != '\0';
    bool got[MPSRC_N] = {false};
    double when[MPSRC_N] = {0};
    from_loaded(cfg, &src->cfg, fresh, got, when);
    from_stored(&src->cfg, fresh, got, when);
    pthread_mutex_lock(&src->mu);
    (void)merge_locked(src, fresh, got, when);
    pthread_mutex_unlock(&src->mu);
    crypto_wipe(fresh, sizeof *fresh);
    tg__free(fresh);
    src->changed = changed; /* set after the first publication: nothing to wake yet */
    src->ud = ud;
    if (pthread_create(&src->th, NULL, updater, src) != 0) {
        mpsource_free(src);
        snprintf(err, errlen, "middle-proxy: cannot start the updater thread");
        return -EAGAIN;
    }
    src->started = true;
    *out = src;
    return 0;
}

void mpsource_apply(struct mpsource *src, const struct config *cfg)
{
    if (!src)
        return;
    struct mpsrc_cfg c;
    cfg_from(&c, cfg);
    struct mpsrc_val *fresh = tg__calloc(1, sizeof *fresh);
    if (!fresh)
        return;
    bool got[MPSRC_N] = {false};
    double when[MPSRC_N] = {0};
    from_loaded(cfg, &c, fresh, got, when);
    pthread_mutex_lock(&src->mu);
    bool moved = false;
    for (int k = 0; k < MPSRC_N; k++) {
        moved |= strcmp(c.src[k], src->cfg.src[k]) != 0;
        src->st.used[k] = c.src[k][0] != '\0';
        if (!c.src[k][0] && src->val.has[k]) { /* a source turned off: its document goes */
            struct mpsrc_val none;
            memset(&none, 0, sizeof none);
            copy_doc((enum mpsource_kind)k, fresh, &none);
            got[k] = true;
        }
    }
    moved |= strcmp(c.state_dir, src->cfg.state_dir) != 0 || c.update_s != src->cfg.update_s;
    src->cfg = c;
    src->cfg_gen++;
    bool changed = merge_locked(src, fresh, got, when);
    pthread_mutex_unlock(&src->mu);
    crypto_wipe(fresh, sizeof *fresh);
    tg__free(fresh);
    notify(src, changed);
    if (moved) {
        pthread_mutex_lock(&src->tmu);
        src->kick = true;
        pthread_cond_signal(&src->cv);
        pthread_mutex_unlock(&src->tmu);
    }
}

void mpsource_free(struct mpsource *src)
{
    if (!src)
        return;
    if (src->started) {
        pthread_mutex_lock(&src->tmu);
        __atomic_store_n(&src->stop, true, __ATOMIC_RELAXED);
        pthread_cond_signal(&src->cv);
        pthread_mutex_unlock(&src->tmu);
        pthread_join(src->th, NULL);
    }
    mpdocs_unref(src->docs);
    pthread_mutex_destroy(&src->mu);
    pthread_mutex_destroy(&src->tmu);
    pthread_cond_destroy(&src->cv);
    crypto_wipe(src, sizeof *src);
    tg__free(src);
    curl_global_cleanup();
}
