/*
 * acl: access lists, their publication and their updater. See acl.h.
 *
 * Invariants: list[k].cur is NULL (list off) or a finished netset no writer touches again;
 * a netset is freed only after publish() saw every reader's busy flag down once after the
 * swap; src[i].last is touched only under mu (the writers' lock); the updater thread sleeps
 * on tmu/cv and takes mu only to copy the sources and to commit, never across file reads or
 * downloads (those run on its copy, and a commit is dropped when acl->gen moved meanwhile),
 * and never holding tmu then (lock order: mu, then tmu). acl_refresh holds mu for its whole
 * build, downloads included (it is the caller's synchronous rebuild).
 */
#include "proxy/services/acl.h"

#include "core/alloc.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/readfile.h"
#include "proxy/services/httpsget.h"
#include "proxy/wire/netset.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define POLL_MS 200 /* how often a download loop looks at the stop flag */

struct acl_source {
    struct config_iplist_source cfg;
    struct netset *last; /* last good ranges; NULL before the first success */
};

struct acl_list {
    bool enabled;
    struct acl_source *src;
    size_t nsrc;
    uint32_t conc, update_each_s;
    uint64_t due_ms;     /* next update (monotonic); under tmu */
    struct netset *cur;  /* published (atomic) */
    uint64_t ranges;     /* netset_count(cur) (atomic) */
    uint64_t ok, failed; /* (atomic) */
};

/* One reader's flag, alone in 64 bytes so two workers' flags never share a cache line. */
struct acl_reader {
    uint32_t busy;
    char pad[60];
};

struct acl {
    struct acl_list list[2];
    struct acl_reader *readers;
    size_t nreaders;
    pthread_mutex_t mu; /* writers */
    uint64_t gen;       /* under mu: bumped when acl_refresh/acl_apply change the lists */
    pthread_mutex_t tmu;
    pthread_cond_t cv;
    bool stop, kick; /* under tmu; stop is also read atomically by downloads */
    bool thread;
    pthread_t th;
    uint32_t http_ms; /* [network.timeout] http at start: a download's connect and stall bound */
    char *perr;       /* acl_probe: the first failure goes here instead of the log */
    size_t perrlen;
};

static const char *const list_names[2] = {"allowlist", "blocklist"};

const char *acl_list_name(enum acl_list_kind k)
{
    return list_names[k == ACL_BLOCK];
}

void acl_worker_init(struct acl_worker *aw, size_t reader)
{
    aw->reader = reader;
}

/* ---- the hot path and publication ---- */

enum acl_verdict acl_check(struct acl *acl, size_t reader, const struct sockaddr *sa)
{
    if (!acl)
        return ACL_PASS;
    uint32_t *busy = &acl->readers[reader].busy;
    __atomic_store_n(busy, 1, __ATOMIC_SEQ_CST);
    const struct netset *allow = __atomic_load_n(&acl->list[ACL_ALLOW].cur, __ATOMIC_SEQ_CST);
    const struct netset *block = __atomic_load_n(&acl->list[ACL_BLOCK].cur, __ATOMIC_SEQ_CST);
    enum acl_verdict v = ACL_PASS;
    if (allow && !netset_has(allow, sa))
        v = ACL_NOT_ALLOWED;
    else if (block && netset_has(block, sa))
        v = ACL_BLOCKED;
    __atomic_store_n(busy, 0, __ATOMIC_RELEASE);
    return v;
}

/* Swap ns in (NULL = list off), wait out the readers that may hold the old set, free it. */
static void publish(struct acl *acl, struct acl_list *l, struct netset *ns)
{
    struct netset *old = __atomic_exchange_n(&l->cur, ns, __ATOMIC_SEQ_CST);
    __atomic_store_n(&l->ranges, (uint64_t)netset_count(ns), __ATOMIC_RELAXED);
    for (size_t r = 0; r < acl->nreaders; r++)
        while (__atomic_load_n(&acl->readers[r].busy, __ATOMIC_SEQ_CST))
            sched_yield(); /* a reader is inside one lookup: nanoseconds */
    netset_free(old);
}

/* ---- sources ---- */

/* Parse text into a fresh finished set. 0 or -EINVAL / -E2BIG / -ENOMEM (err filled). */
static int parse_source(const char *name, const char *text, size_t len, struct netset **out,
                        char *err, size_t errlen)
{
    *out = NULL;
    struct netset *ns = netset_new();
    if (!ns) {
        snprintf(err, errlen, "%s: out of memory", name);
        return -ENOMEM;
    }
    int rc = netset_parse(ns, name, text, len, err, errlen);
    if (rc == 0 && (rc = netset_finish(ns)) != 0)
        snprintf(err, errlen, "%s: out of memory", name);
    if (rc != 0) {
        netset_free(ns);
        return rc;
    }
    *out = ns;
    return 0;
}

/* Read and parse a list file. 0 or -errno (err: "path: why" or "path:LINE: why"). Opened
   non-blocking by core/readfile: a FIFO at the path fails at once instead of holding the
   reload in open(). */
static int load_file(const char *path, struct netset **out, char *err, size_t errlen)
{
    *out = NULL;
    char *buf;
    size_t size;
    int rc = tg__read_file(path, ACL_MAX_BYTES, 0, &buf, &size, NULL, err, errlen);
    if (rc != 0)
        return -EINVAL;
    rc = parse_source(path, buf, size, out, err, errlen);
    tg__free(buf);
    return rc;
}

/* ---- downloads ---- */

struct dl {
    CURL *h;
    size_t idx; /* source index */
    char *buf;
    size_t len, cap;
    bool over; /* past ACL_MAX_BYTES */
    char eb[CURL_ERROR_SIZE];
};

static size_t on_body(char *p, size_t size, size_t n, void *user)
{
    struct dl *d = user;
    size_t add = size * n;
    if (add > ACL_MAX_BYTES - d->len) {
        d->over = true;
        return 0; /* aborts the transfer */
    }
    if (d->len + add > d->cap) {
        size_t nc = d->cap ? d->cap : 65536;
        while (nc < d->len + add)
            nc *= 2;
        char *q = tg__realloc(d->buf, nc);
        if (!q)
            return 0;
        d->buf = q;
        d->cap = nc;
    }
    memcpy(d->buf + d->len, p, add);
    d->len += add;
    return add;
}

static CURL *dl_handle(struct dl *d, const char *url, uint32_t http_ms)
{
    long total_ms = http_ms > ACL_FETCH_MS ? (long)http_ms : ACL_FETCH_MS;
    CURL *h = curl_easy_init();
    if (!h)
        return NULL;
    /* http bounds the connect and any stall; a long list may take longer while it flows */
    httpsget_setup(h, url, http_ms, total_ms, (curl_off_t)ACL_MAX_BYTES);
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, d);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, d->eb);
    curl_easy_setopt(h, CURLOPT_PRIVATE, d);
    return h;
}

/* url for messages: user info ("https://user:token@host/...") shown as "***@". */
static const char *url_shown(const char *url, char *buf, size_t cap)
{
    const char *host = strstr(url, "://");
    host = host ? host + 3 : url;
    size_t end = strcspn(host, "/?#");
    const char *at = memchr(host, '@', end);
    if (!at)
        return url;
    snprintf(buf, cap, "%.*s***%s", (int)(host - url), url, at);
    return buf;
}

/* A finished transfer: its ranges into fresh[d->idx], or a warning (for acl_probe: the
   first failure into acl->perr). */
static void dl_done(struct acl *acl, struct acl_list *l, const char *what, struct dl *d,
                    CURLcode res, struct netset **fresh)
{
    char shown[CONFIG_SOURCE_MAX + 4];
    const char *url = url_shown(l->src[d->idx].cfg.text, shown, sizeof shown);
    long status = 0;
    curl_easy_getinfo(d->h, CURLINFO_RESPONSE_CODE, &status);
    char err[512];
    if (res == CURLE_OK && status == 200 &&
        parse_source(url, d->buf ? d->buf : "", d->len, &fresh[d->idx], err, sizeof err) == 0)
        return;
    if (res == CURLE_OK && status != 200)
        snprintf(err, sizeof err, "%.300s: HTTP status %ld, expected 200", url, status);
    else if (res != CURLE_OK)
        snprintf(err, sizeof err, "%.300s: download failed: %.180s", url,
                 d->over    ? "larger than the 64 MiB a list may have"
                 : d->eb[0] ? d->eb
                            : curl_easy_strerror(res));
    if (acl->perr) {
        if (!acl->perr[0])
            snprintf(acl->perr, acl->perrlen, "%s", err);
        return;
    }
    __atomic_add_fetch(&l->failed, 1, __ATOMIC_RELAXED);
    tg__log(NULL, TG__LOG_WARN, "%s: %s; keeping its previous ranges", what, err);
}

static bool stopping(struct acl *acl)
{
    return __atomic_load_n(&acl->stop, __ATOMIC_RELAXED);
}

/* Start the next URL source from *next, if any. */
static int dl_start(CURLM *m, const struct acl *acl, struct acl_list *l, struct dl *dls,
                    size_t *next)
{
    while (*next < l->nsrc && !l->src[*next].cfg.is_url)
        (*next)++;
    if (*next >= l->nsrc)
        return 0;
    struct dl *d = &dls[*next];
    d->idx = (*next)++;
    d->h = dl_handle(d, l->src[d->idx].cfg.text, acl->http_ms);
    if (!d->h || curl_multi_add_handle(m, d->h) != CURLM_OK) {
        curl_easy_cleanup(d->h);
        d->h = NULL;
        return -ENOMEM;
    }
    return 1;
}

/* Download every URL source of l, download-concurrency at a time, into fresh[]. */
static void fetch_urls(struct acl *acl, struct acl_list *l, const char *what, struct netset **fresh)
{
    CURLM *m = curl_multi_init();
    struct dl *dls = tg__calloc(l->nsrc, sizeof *dls);
    size_t next = 0, running = 0;
    while (m && dls && !stopping(acl)) {
        while (running < l->conc && dl_start(m, acl, l, dls, &next) > 0)
            running++;
        if (running == 0)
            break;
        int still = 0, q = 0;
        curl_multi_perform(m, &still);
        for (CURLMsg *msg; (msg = curl_multi_info_read(m, &q)) != NULL;) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            struct dl *d = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&d);
            dl_done(acl, l, what, d, msg->data.result, fresh);
            curl_multi_remove_handle(m, d->h);
            curl_easy_cleanup(d->h);
            d->h = NULL;
            running--;
        }
        if (running > 0)
            curl_multi_poll(m, NULL, 0, POLL_MS, NULL);
    }
    for (size_t i = 0; dls && i < l->nsrc; i++) {
        if (dls[i].h) { /* stopped or out of memory: abandoned */
            curl_multi_remove_handle(m, dls[i].h);
            curl_easy_cleanup(dls[i].h);
        }
        tg__free(dls[i].buf);
    }
    tg__free(dls);
    if (m)
        curl_multi_cleanup(m);
}

/* ---- building a list ---- */

/*
 * New ranges for every source of l into fresh[] (NULL = keep the source's last ranges).
 * strict: a bad file is an error (-EINVAL, err filled); otherwise it is logged and kept.
 * download: fetch the URLs now; otherwise they keep their last ranges.
 */
static int stage(struct acl *acl, struct acl_list *l, const char *what, bool strict, bool download,
                 struct netset **fresh, char *err, size_t errlen)
{
    for (size_t i = 0; i < l->nsrc; i++) {
        if (l->src[i].cfg.is_url)
            continue;
        char why[512];
        int rc = load_file(l->src[i].cfg.text, &fresh[i], why, sizeof why);
        if (rc == -ENOMEM || (rc != 0 && strict)) {
            snprintf(err, errlen, "%s: %.480s", what, why);
            return rc;
        }
        if (rc != 0) {
            __atomic_add_fetch(&l->failed, 1, __ATOMIC_RELAXED);
            tg__log(NULL, TG__LOG_ERROR, "%s: %s; keeping its previous ranges", what, why);
        }
    }
    if (download)
        fetch_urls(acl, l, what, fresh);
    return 0;
}

/* Adopt fresh[] as the sources' ranges, publish their union. 0 or -ENOMEM (old list kept;
   fresh[] is consumed either way). */
static int commit(struct acl *acl, struct acl_list *l, const char *what, struct netset **fresh)
{
    for (size_t i = 0; i < l->nsrc; i++) {
        if (fresh[i]) {
            netset_free(l->src[i].last);
            l->src[i].last = fresh[i];
            fresh[i] = NULL;
        }
    }
    struct netset *u = netset_new();
    int rc = u ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < l->nsrc; i++)
        rc = l->src[i].last ? netset_add_all(u, l->src[i].last) : 0;
    if (rc == 0)
        rc = netset_finish(u);
    if (rc != 0) {
        netset_free(u);
        const char *why = rc == -E2BIG ? "too many ranges" : "out of memory";
        if (acl->perr)
            snprintf(acl->perr, acl->perrlen, "cannot merge the lists: %s", why);
        else
            tg__log(NULL, TG__LOG_ERROR, "%s: cannot merge the lists (%s); keeping the old one",
                    what, why);
        return rc == -E2BIG ? -EINVAL : rc;
    }
    publish(acl, l, u);
    __atomic_add_fetch(&l->ok, 1, __ATOMIC_RELAXED);
    if (!acl->perr)
        tg__log(NULL, TG__LOG_INFO, "%s: %zu range%s from %zu list%s", what, netset_count(u),
                netset_count(u) == 1 ? "" : "s", l->nsrc, l->nsrc == 1 ? "" : "s");
    return 0;
}

static void free_fresh(struct netset **fresh, size_t n)
{
    for (size_t i = 0; fresh && i < n; i++)
        netset_free(fresh[i]);
    tg__free(fresh);
}

/* Rebuild both enabled lists under mu: stage both, then commit both (strict: all or none). */
static int rebuild(struct acl *acl, bool strict, bool download, char *err, size_t errlen)
{
    struct netset **fresh[2] = {NULL, NULL};
    int rc = 0;
    for (int k = 0; k < 2 && rc == 0; k++) {
        struct acl_list *l = &acl->list[k];
        if (!l->enabled)
            continue;
        fresh[k] = tg__calloc(l->nsrc ? l->nsrc : 1, sizeof *fresh[k]);
        rc = fresh[k] ? stage(acl, l, list_names[k], strict, download, fresh[k], err, errlen)
                      : -ENOMEM;
    }
    for (int k = 0; k < 2 && rc == 0; k++)
        if (fresh[k])
            rc = commit(acl, &acl->list[k], list_names[k], fresh[k]);
    for (int k = 0; k < 2; k++)
        free_fresh(fresh[k], acl->list[k].nsrc);
    return rc;
}

/* ---- the updater thread ---- */

/* A copy of l's settings and sources (no ranges) that the updater builds from without mu.
   Under mu. 0 or -ENOMEM. */
static int list_snapshot(const struct acl_list *l, struct acl_list *s)
{
    memset(s, 0, sizeof *s);
    s->src = tg__calloc(l->nsrc ? l->nsrc : 1, sizeof *s->src);
    if (!s->src)
        return -ENOMEM;
    for (size_t i = 0; i < l->nsrc; i++)
        s->src[i].cfg = l->src[i].cfg;
    s->nsrc = l->nsrc;
    s->enabled = l->enabled;
    s->conc = l->conc;
    return 0;
}

/*
 * Rebuild the due lists: snapshot their sources under mu, read and download them without
 * it (a reload or stop never waits for the network), then commit under mu only if no
 * writer changed the sources meanwhile (acl->gen); otherwise the result is dropped: that
 * writer built the lists itself and scheduled the next download.
 */
static void update_due(struct acl *acl)
{
    bool due[2] = {false, false};
    uint64_t now = tg__now_ms();
    pthread_mutex_lock(&acl->tmu);
    for (int k = 0; k < 2; k++) {
        struct acl_list *l = &acl->list[k];
        if (l->enabled && l->due_ms <= now) {
            due[k] = true;
            l->due_ms = now + (uint64_t)l->update_each_s * 1000;
        }
    }
    pthread_mutex_unlock(&acl->tmu);
    struct acl_list snap[2];
    struct netset **fresh[2] = {NULL, NULL};
    memset(snap, 0, sizeof snap);
    pthread_mutex_lock(&acl->mu);
    uint64_t gen = acl->gen;
    for (int k = 0; k < 2; k++)
        if (due[k] && acl->list[k].enabled && list_snapshot(&acl->list[k], &snap[k]) == 0)
            fresh[k] = tg__calloc(snap[k].nsrc ? snap[k].nsrc : 1, sizeof *fresh[k]);
    pthread_mutex_unlock(&acl->mu);
    int rc = 0;
    char err[512];
    for (int k = 0; k < 2; k++) {
        if (fresh[k] && rc == 0) /* lenient: fails only for memory */
            rc = stage(acl, &snap[k], list_names[k], false, true, fresh[k], err, sizeof err);
        __atomic_add_fetch(&acl->list[k].failed, snap[k].failed, __ATOMIC_RELAXED);
    }
    pthread_mutex_lock(&acl->mu);
    bool same = acl->gen == gen;
    for (int k = 0; k < 2 && rc == 0 && same; k++)
        if (fresh[k])
            rc = commit(acl, &acl->list[k], list_names[k], fresh[k]);
    pthread_mutex_unlock(&acl->mu);
    if (!same)
        tg__log(NULL, TG__LOG_INFO, "access lists changed during an update; its result dropped");
    for (int k = 0; k < 2; k++) {
        free_fresh(fresh[k], snap[k].nsrc);
        tg__free(snap[k].src);
    }
}

static void *updater_main(void *arg)
{
    struct acl *acl = arg;
    pthread_mutex_lock(&acl->tmu);
    while (!acl->stop) {
        uint64_t now = tg__now_ms(), due = UINT64_MAX;
        for (int k = 0; k < 2; k++)
            if (acl->list[k].enabled && acl->list[k].due_ms < due)
                due = acl->list[k].due_ms;
        if (due > now && !acl->kick) {
            uint64_t wait = due == UINT64_MAX ? 3600000 : due - now;
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_sec += (time_t)(wait / 1000);
            ts.tv_nsec += (long)(wait % 1000) * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&acl->cv, &acl->tmu, &ts);
            continue;
        }
        acl->kick = false;
        pthread_mutex_unlock(&acl->tmu);
        update_due(acl);
        pthread_mutex_lock(&acl->tmu);
    }
    pthread_mutex_unlock(&acl->tmu);
    return NULL;
}

/* ---- life cycle ---- */

static void list_clear(struct acl_list *l)
{
    for (size_t i = 0; i < l->nsrc; i++)
        netset_free(l->src[i].last);
    tg__free(l->src);
    l->src = NULL;
    l->nsrc = 0;
}

/* l's settings from c; sources whose text matches one of old[] take its last ranges (moved
   out of old when move, else shared). */
static int list_take(struct acl_list *l, const struct config_iplist *c, struct acl_source *old,
                     size_t nold, bool move)
{
    l->src = tg__calloc(c->nsources ? c->nsources : 1, sizeof *l->src);
    if (!l->src)
        return -ENOMEM;
    l->nsrc = c->nsources;
    l->enabled = c->enabled;
    l->conc = c->download_concurrency ? c->download_concurrency : 1;
    l->update_each_s = c->update_each_s ? c->update_each_s : 6 * 3600;
    for (size_t i = 0; i < c->nsources; i++) {
        l->src[i].cfg = c->sources[i];
        for (size_t j = 0; j < nold; j++) {
            if (old[j].last && old[j].cfg.is_url == c->sources[i].is_url &&
                strcmp(old[j].cfg.text, c->sources[i].text) == 0) {
                l->src[i].last = old[j].last;
                if (move)
                    old[j].last = NULL;
                break;
            }
        }
    }
    return 0;
}

/* Due times after a build: lists with URLs never downloaded are due now. Under mu (or
   before the updater runs): src[i].last is the writers'. */
static void schedule(struct acl *acl, bool kick)
{
    uint64_t now = tg__now_ms();
    pthread_mutex_lock(&acl->tmu);
    for (int k = 0; k < 2; k++) {
        struct acl_list *l = &acl->list[k];
        bool pending = false;
        for (size_t i = 0; l->enabled && i < l->nsrc; i++)
            pending |= l->src[i].cfg.is_url && !l->src[i].last;
        l->due_ms = pending ? now : now + (uint64_t)l->update_each_s * 1000;
    }
    acl->kick |= kick;
    pthread_cond_signal(&acl->cv);
    pthread_mutex_unlock(&acl->tmu);
}

static int acl_alloc(size_t nreaders, struct acl **out)
{
    struct acl *acl = tg__calloc(1, sizeof *acl);
    if (!acl)
        return -ENOMEM;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) { /* counted: paired in acl_free */
        tg__free(acl);
        return -ENOMEM;
    }
    acl->nreaders = nreaders ? nreaders : 1;
    acl->readers = tg__calloc(acl->nreaders, sizeof *acl->readers);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&acl->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&acl->mu, NULL);
    pthread_mutex_init(&acl->tmu, NULL);
    *out = acl;
    return acl->readers ? 0 : -ENOMEM;
}

int acl_new(const struct config *cfg, size_t nreaders, struct acl **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!cfg->allowlist.enabled && !cfg->blocklist.enabled)
        return 0;
    struct acl *acl = NULL;
    int rc = acl_alloc(nreaders, &acl);
    if (rc == 0)
        acl->http_ms = cfg->timeout.http_ms ? cfg->timeout.http_ms : ACL_HTTP_MS;
    if (rc == 0)
        rc = list_take(&acl->list[ACL_ALLOW], &cfg->allowlist, NULL, 0, true);
    if (rc == 0)
        rc = list_take(&acl->list[ACL_BLOCK], &cfg->blocklist, NULL, 0, true);
    if (rc == 0)
        rc = rebuild(acl, true, false, err, errlen);
    if (rc == 0)
        schedule(acl, false); /* before the thread, which would otherwise see every list due */
    if (rc == 0 && pthread_create(&acl->th, NULL, updater_main, acl) != 0)
        rc = -EAGAIN;
    if (rc != 0) {
        if (rc == -ENOMEM && err && errlen)
            snprintf(err, errlen, "access lists: out of memory");
        acl_free(acl);
        return rc == -EAGAIN ? -ENOMEM : rc;
    }
    acl->thread = true;
    if (acl->list[ACL_ALLOW].enabled && netset_count(acl->list[ACL_ALLOW].cur) == 0)
        tg__log(NULL, TG__LOG_WARN,
                "allowlist: no ranges yet: every client is refused until a list loads");
    *out = acl;
    return 0;
}

void acl_free(struct acl *acl)
{
    if (!acl)
        return;
    pthread_mutex_lock(&acl->tmu);
    __atomic_store_n(&acl->stop, true, __ATOMIC_RELAXED);
    pthread_cond_signal(&acl->cv);
    pthread_mutex_unlock(&acl->tmu);
    if (acl->thread)
        pthread_join(acl->th, NULL);
    for (int k = 0; k < 2; k++) {
        netset_free(acl->list[k].cur);
        list_clear(&acl->list[k]);
    }
    curl_global_cleanup();
    pthread_mutex_destroy(&acl->mu);
    pthread_mutex_destroy(&acl->tmu);
    pthread_cond_destroy(&acl->cv);
    tg__free(acl->readers);
    tg__free(acl);
}

int acl_refresh(struct acl *acl, char *err, size_t errlen)
{
    if (!acl)
        return 0;
    pthread_mutex_lock(&acl->mu);
    int rc = rebuild(acl, true, true, err, errlen);
    if (rc == 0)
        acl->gen++; /* an update downloading meanwhile is older: it is dropped */
    if (rc == 0)
        schedule(acl, false); /* under mu: it reads the sources the updater writes */
    pthread_mutex_unlock(&acl->mu);
    return rc;
}

/* Does some source of nl hold ns (adopted from the list it replaces)? */
static bool adopted(const struct acl_list *nl, const struct netset *ns)
{
    for (size_t i = 0; i < nl->nsrc; i++)
        if (nl->src[i].last == ns)
            return true;
    return false;
}

/* Replace list k's settings and sources by nl's (old ranges not adopted are freed). */
static void list_swap(struct acl *acl, int k, struct acl_list *nl)
{
    struct acl_list *l = &acl->list[k];
    for (size_t i = 0; i < l->nsrc; i++)
        if (!adopted(nl, l->src[i].last))
            netset_free(l->src[i].last);
    tg__free(l->src);
    pthread_mutex_lock(&acl->tmu);
    l->src = nl->src;
    l->nsrc = nl->nsrc;
    l->enabled = nl->enabled;
    l->conc = nl->conc;
    l->update_each_s = nl->update_each_s;
    pthread_mutex_unlock(&acl->tmu);
}

int acl_apply(struct acl *acl, const struct config *cfg, char *err, size_t errlen)
{
    if (!acl)
        return 0;
    const struct config_iplist *c[2] = {&cfg->allowlist, &cfg->blocklist};
    struct acl_list nl[2];
    struct netset **fresh[2] = {NULL, NULL};
    memset(nl, 0, sizeof nl);
    pthread_mutex_lock(&acl->mu);
    int rc = 0;
    for (int k = 0; k < 2 && rc == 0; k++) {
        /* share (not move) the old ranges until the new settings are known to be good */
        rc = list_take(&nl[k], c[k], acl->list[k].src, acl->list[k].nsrc, false);
        if (rc == 0 && nl[k].enabled)
            fresh[k] = tg__calloc(nl[k].nsrc ? nl[k].nsrc : 1, sizeof *fresh[k]);
        if (rc == 0 && nl[k].enabled)
            rc = fresh[k] ? stage(acl, &nl[k], list_names[k], true, false, fresh[k], err, errlen)
                          : -ENOMEM;
    }
    for (int k = 0; k < 2; k++) {
        if (rc == 0) {
            list_swap(acl, k, &nl[k]);
            acl->gen++; /* an update downloading meanwhile used the old sources: dropped */
            if (acl->list[k].enabled)
                rc = commit(acl, &acl->list[k], list_names[k], fresh[k]);
            else
                publish(acl, &acl->list[k], NULL);
        } else {
            tg__free(nl[k].src); /* the shared ranges stay with the old list */
        }
        free_fresh(fresh[k], nl[k].nsrc);
    }
    if (rc == 0)
        schedule(acl, true); /* under mu: it reads the sources the updater writes */
    pthread_mutex_unlock(&acl->mu);
    return rc;
}

int acl_probe(const struct config_iplist *c, uint32_t http_ms, struct acl_probe *out, char *err,
              size_t errlen)
{
    memset(out, 0, sizeof *out);
    err[0] = '\0';
    struct acl *acl = NULL;
    struct netset **fresh = NULL;
    int rc = acl_alloc(1, &acl);
    struct acl_list *l = rc == 0 ? &acl->list[0] : NULL;
    if (rc == 0) {
        acl->http_ms = http_ms ? http_ms : ACL_HTTP_MS;
        acl->perr = err;
        acl->perrlen = errlen;
        rc = list_take(l, c, NULL, 0, true);
    }
    if (rc == 0)
        rc = (fresh = tg__calloc(l->nsrc ? l->nsrc : 1, sizeof *fresh)) ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < l->nsrc; i++) {
        if (!l->src[i].cfg.is_url)
            rc = load_file(l->src[i].cfg.text, &fresh[i], err, errlen);
        out->files += !l->src[i].cfg.is_url;
        out->urls += l->src[i].cfg.is_url;
    }
    if (rc == 0)
        fetch_urls(acl, l, "", fresh); /* a failure lands in err */
    if (rc == 0 && err[0])
        rc = -EINVAL;
    if (rc == 0)
        rc = commit(acl, l, "", fresh);
    if (rc == 0)
        out->ranges = netset_count(l->cur);
    if (rc == -ENOMEM && errlen)
        snprintf(err, errlen, "out of memory");
    free_fresh(fresh, l ? l->nsrc : 0);
    acl_free(acl);
    return rc;
}

void acl_stats(const struct acl *acl, enum acl_list_kind k, struct acl_list_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!acl)
        return;
    const struct acl_list *l = &acl->list[k == ACL_BLOCK];
    out->enabled = __atomic_load_n(&l->cur, __ATOMIC_RELAXED) != NULL;
    out->ranges = __atomic_load_n(&l->ranges, __ATOMIC_RELAXED);
    out->updates_ok = __atomic_load_n(&l->ok, __ATOMIC_RELAXED);
    out->updates_failed = __atomic_load_n(&l->failed, __ATOMIC_RELAXED);
}
