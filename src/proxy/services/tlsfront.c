/* tlsfront: see tlsfront.h. */
#include "proxy/services/tlsfront.h"

#include "core/alloc.h"
#include "core/atomicfile.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/readfile.h"
#include "core/str.h"
#include "proxy/services/doh.h"
#include "proxy/services/tlsscout.h"
#include "proxy/wire/crypto.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define TLSFRONT_FLIGHTS TLSPROFILE_MAX_LENS /* flights one refresh keeps (connections <= 64) */

struct domain {
    struct tlsfront_status st;
    struct tlsprofile prof; /* valid when st.shape != TLSFRONT_DEFAULT */
};

struct tlsfront {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* wakes the thread: stop, or a reload */
    int stop;          /* under mu */
    bool wake;         /* under mu: refresh now */
    /* what the refresh needs, under mu (a reload replaces it) */
    uint32_t refresh_s, connections, timeout_ms;
    char front_host[CONFIG_HOST_MAX]; /* "" = each domain itself */
    uint16_t front_port;
    bool front_pp; /* [domain-fronting] proxy-protocol: the site expects a PROXY header */
    bool front_resolved;
    struct sockaddr_storage front_addr;
    socklen_t front_addr_len;
    enum config_prefer_ip prefer;
    char state_file[CONFIG_FILE_MAX];
    struct doh *doh;
    struct domain *dom; /* TLSFRONT_MAX_DOMAINS */
    size_t ndom;
    struct tlsfront_set *cur; /* under mu */
    uint64_t seq;             /* atomic; written under mu */
    uint64_t rounds;          /* atomic */
    pthread_t th;
    bool th_on;
};

const char *tlsfront_shape_name(enum tlsfront_shape s)
{
    return s == TLSFRONT_LEARNED ? "learned" : s == TLSFRONT_STORED ? "stored" : "default";
}

void tlsfront_state_file(const struct config *cfg, char *out, size_t cap)
{
    out[0] = '\0';
    if (cfg->tls_front.state_file[0]) {
        tg__strlcpy(out, cfg->tls_front.state_file, cap);
        return;
    }
    const char *sd = getenv("STATE_DIRECTORY"); /* systemd's StateDirectory=, maybe a list */
    if (sd && sd[0] == '/') {
        size_t n = strcspn(sd, ":");
        if (n + sizeof "/tls-front" <= cap)
            snprintf(out, cap, "%.*s/tls-front", (int)n, sd);
    }
}

/* ---- the published set ---- */

uint64_t tlsfront_seq(const struct tlsfront *t)
{
    return __atomic_load_n(&t->seq, __ATOMIC_ACQUIRE);
}

struct tlsfront_set *tlsfront_acquire(struct tlsfront *t)
{
    pthread_mutex_lock(&t->mu);
    struct tlsfront_set *s = t->cur;
    __atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&t->mu);
    return s;
}

void tlsfront_set_unref(struct tlsfront_set *s)
{
    if (s && __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) == 0)
        tg__free(s);
}

const struct tlsprofile *tlsfront_set_find(const struct tlsfront_set *s, const char *domain,
                                           size_t len)
{
    for (size_t i = 0; s && i < s->n; i++)
        if (strlen(s->p[i].domain) == len && strncasecmp(s->p[i].domain, domain, len) == 0)
            return &s->p[i];
    return NULL;
}

/* Publish the domains' profiles as a new set (under mu). 0 or -ENOMEM (the old set stays). */
static int publish_locked(struct tlsfront *t)
{
    size_t n = 0;
    for (size_t i = 0; i < t->ndom; i++)
        n += t->dom[i].st.shape != TLSFRONT_DEFAULT;
    struct tlsfront_set *s = tg__calloc(1, sizeof *s + n * sizeof s->p[0]);
    if (!s)
        return -ENOMEM;
    s->refs = 1;
    for (size_t i = 0; i < t->ndom; i++)
        if (t->dom[i].st.shape != TLSFRONT_DEFAULT)
            s->p[s->n++] = t->dom[i].prof;
    s->seq = t->seq + 1;
    struct tlsfront_set *old = t->cur;
    t->cur = s;
    __atomic_store_n(&t->seq, s->seq, __ATOMIC_RELEASE);
    tlsfront_set_unref(old);
    return 0;
}

/* ---- the state file ---- */

static void store_locked(struct tlsfront *t)
{
    if (!t->state_file[0])
        return;
    struct tlsprofile *p = tg__malloc(t->ndom * sizeof *p + 1);
    size_t cap = 1024 + t->ndom * 2048;
    char *text = tg__malloc(cap);
    size_t n = 0;
    for (size_t i = 0; p && i < t->ndom; i++)
        if (t->dom[i].st.shape != TLSFRONT_DEFAULT)
            p[n++] = t->dom[i].prof;
    size_t len = p && text ? tlsprofile_format(p, n, text, cap) : 0;
    char err[CONFIG_FILE_MAX + 128];
    if (!len)
        tg__log(NULL, TG__LOG_WARN, "tls-front: %s not written: out of memory", t->state_file);
    else if (tg__atomic_write(t->state_file, text, len, 0600, err, sizeof err) != 0)
        tg__log(NULL, TG__LOG_WARN, "tls-front: profiles not stored: %s", err);
    tg__free(p);
    tg__free(text);
}

/* Read the state file into the domains it names (at start, before any probe). */
static void load_stored(struct tlsfront *t)
{
    if (!t->state_file[0])
        return;
    char *text = NULL, why[CONFIG_FILE_MAX + 200];
    size_t len = 0, n = 0;
    int rc = tg__read_file(t->state_file, TLSPROFILE_FILE_MAX, TG__READ_NOFOLLOW, &text, &len,
                           NULL, why, sizeof why);
    if (rc == -ENOENT)
        return; /* nothing stored yet */
    struct tlsprofile *p = rc == 0 ? tg__malloc(TLSFRONT_MAX_DOMAINS * sizeof *p) : NULL;
    if (rc == 0 && !p) {
        rc = -ENOMEM;
        snprintf(why, sizeof why, "%s: out of memory", t->state_file);
    }
    if (rc == 0) {
        char perr[160];
        rc = tlsprofile_parse(text, len, p, TLSFRONT_MAX_DOMAINS, &n, perr, sizeof perr);
        if (rc != 0)
            snprintf(why, sizeof why, "%s: %s", t->state_file, perr);
    }
    if (rc != 0) {
        tg__log(NULL, TG__LOG_WARN, "tls-front: %s; profiles are learned anew", why);
    } else {
        size_t used = 0;
        for (size_t i = 0; i < t->ndom; i++)
            for (size_t j = 0; j < n; j++)
                if (strcasecmp(t->dom[i].st.domain, p[j].domain) == 0) {
                    t->dom[i].prof = p[j];
                    memcpy(t->dom[i].prof.domain, t->dom[i].st.domain, TLSPROFILE_DOMAIN_MAX);
                    t->dom[i].st.shape = TLSFRONT_STORED;
                    t->dom[i].st.learned_s = p[j].learned_s;
                    t->dom[i].st.diff = tlsprofile_diff(&p[j]);
                    memcpy(t->dom[i].st.pattern, p[j].pattern, TLSPROFILE_PATTERN);
                    used++;
                }
        tg__log(NULL, TG__LOG_INFO, "tls-front: %zu stored profile(s) from %s in use", used,
                t->state_file);
    }
    tg__free(text);
    tg__free(p);
}

/* ---- probing ---- */

/* The target's first address in prefer-ip order. 0 or -1 with err set. */
static int resolve(struct tlsfront *t, const char *host, uint16_t port, enum config_prefer_ip pref,
                   struct sockaddr_storage *ss, socklen_t *len, char *err, size_t errlen)
{
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        *len = sizeof *v4;
        return 0;
    }
    if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        *len = sizeof *v6;
        return 0;
    }
    if (t->doh) {
        struct doh_result *r = tg__malloc(sizeof *r);
        if (!r) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        int rc = doh_resolve(t->doh, host, pref, r);
        if (rc != DOH_OK || r->n == 0) {
            snprintf(err, errlen, "%s does not resolve through [network] dns: %s", host, r->err);
            tg__free(r);
            return -1;
        }
        if (r->a[0].family == AF_INET) {
            v4->sin_family = AF_INET;
            v4->sin_port = htons(port);
            memcpy(&v4->sin_addr, r->a[0].addr, 4);
            *len = sizeof *v4;
        } else {
            v6->sin6_family = AF_INET6;
            v6->sin6_port = htons(port);
            memcpy(&v6->sin6_addr, r->a[0].addr, 16);
            *len = sizeof *v6;
        }
        tg__free(r);
        return 0;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    hints.ai_family = pref == CONFIG_ONLY_IPV4 ? AF_INET : pref == CONFIG_ONLY_IPV6 ? AF_INET6 : 0;
    int rc = getaddrinfo(host, NULL, &hints, &ai);
    if (rc != 0) {
        snprintf(err, errlen, "%s does not resolve: %s", host, gai_strerror(rc));
        return -1;
    }
    int want = pref == CONFIG_PREFER_IPV4 ? AF_INET : AF_INET6;
    const struct addrinfo *pick = ai;
    for (const struct addrinfo *a = ai; a; a = a->ai_next)
        if (a->ai_family == want) {
            pick = a;
            break;
        }
    memcpy(ss, pick->ai_addr, pick->ai_addrlen);
    *len = (socklen_t)pick->ai_addrlen;
    if (ss->ss_family == AF_INET)
        v4->sin_port = htons(port);
    else
        v6->sin6_port = htons(port);
    freeaddrinfo(ai);
    return 0;
}

/* What one domain's refresh needs, copied under mu so the probes run without it. */
struct job {
    char domain[TLSPROFILE_DOMAIN_MAX];
    char host[CONFIG_HOST_MAX];
    uint16_t port;
    bool resolved;
    struct sockaddr_storage addr;
    socklen_t addr_len;
    enum config_prefer_ip prefer;
    uint32_t connections, timeout_ms;
    bool proxy_v2;
};

/* Probe one domain: 0 with *out built (*all_merged: no probe read the site's segments apart),
   or -1 with err. */
static int refresh_one(struct tlsfront *t, const struct job *j, struct tlsflight *fl,
                       struct tlsprofile *out, bool *all_merged, char *err, size_t errlen)
{
    struct sockaddr_storage ss = j->addr;
    socklen_t sl = j->addr_len;
    if (!j->resolved && resolve(t, j->host, j->port, j->prefer, &ss, &sl, err, errlen) != 0)
        return -1;
    struct tlsscout_opts o = {.timeout_ms = (int)j->timeout_ms, .proxy_v2 = j->proxy_v2};
    size_t ok = 0, exact = 0;
    char why[256] = "";
    /* when every probe read the site's segments merged (a busy host), as many again may
       find one that read them apart (bounded: the profile keeps TLSFRONT_FLIGHTS) */
    for (uint32_t i = 0; i < 2 * j->connections && ok < TLSFRONT_FLIGHTS; i++) {
        if (i >= j->connections && (exact > 0 || ok == 0))
            break;
        pthread_mutex_lock(&t->mu);
        int stop = t->stop;
        pthread_mutex_unlock(&t->mu);
        if (stop)
            return -1;
        if (tlsscout_probe((struct sockaddr *)&ss, sl, j->domain, &o, &fl[ok], why, sizeof why) ==
            0)
            exact += !fl[ok++].seg_merged;
    }
    *all_merged = exact == 0;
    if (!ok) {
        snprintf(err, errlen, "no probe of %u answered: %s", (unsigned)j->connections, why);
        return -1;
    }
    if (tlsprofile_build(j->domain, fl, ok, tg__wall_s(), out, why, sizeof why) != 0) {
        snprintf(err, errlen, "%s", why);
        return -1;
    }
    return 0;
}

/* One round: every domain, then publish and store what changed. */
static void round_all(struct tlsfront *t, struct tlsflight *fl)
{
    pthread_mutex_lock(&t->mu);
    size_t n = t->ndom;
    pthread_mutex_unlock(&t->mu);
    bool changed = false;
    for (size_t i = 0; i < n; i++) {
        struct job j;
        pthread_mutex_lock(&t->mu);
        if (t->stop || i >= t->ndom) {
            pthread_mutex_unlock(&t->mu);
            break;
        }
        memcpy(j.domain, t->dom[i].st.domain, sizeof j.domain);
        tg__strlcpy(j.host, t->front_host[0] ? t->front_host : j.domain, sizeof j.host);
        j.port = t->front_port;
        j.resolved = t->front_host[0] && t->front_resolved;
        j.addr = t->front_addr;
        j.addr_len = t->front_addr_len;
        j.prefer = t->prefer;
        j.connections = t->connections;
        j.timeout_ms = t->timeout_ms;
        j.proxy_v2 = t->front_pp;
        pthread_mutex_unlock(&t->mu);
        struct tlsprofile p;
        char err[1024];
        bool all_merged = false;
        int rc = refresh_one(t, &j, fl, &p, &all_merged, err, sizeof err);
        pthread_mutex_lock(&t->mu);
        /* the domain list may have changed meanwhile (a reload): find it by name */
        struct domain *d = NULL;
        for (size_t k = 0; k < t->ndom; k++)
            if (strcmp(t->dom[k].st.domain, j.domain) == 0)
                d = &t->dom[k];
        /* d points into t->dom, which a reload may free as soon as mu is let go: what the
         * log line below needs is read now */
        bool known = d != NULL, was_default = d && d->st.shape == TLSFRONT_DEFAULT;
        if (d && rc == 0) {
            d->prof = p;
            d->st.shape = TLSFRONT_LEARNED;
            d->st.learned_s = p.learned_s;
            d->st.refreshes++;
            d->st.diff = tlsprofile_diff(&p);
            memcpy(d->st.pattern, p.pattern, TLSPROFILE_PATTERN);
            d->st.last_error[0] = '\0';
            changed = true;
        } else if (d && !t->stop) {
            d->st.failures++;
            tg__strlcpy(d->st.last_error, err, sizeof d->st.last_error);
        }
        pthread_mutex_unlock(&t->mu);
        if (rc == 0)
            tg__log(NULL, TG__LOG_INFO,
                    "tls-front: %s: learned from %u probes: cipher %04x, segments %s, "
                    "encrypted %u..%u records%s",
                    j.domain, (unsigned)p.probes, p.cipher, p.pattern, p.nenc_min, p.nenc_max,
                    all_merged ? " (every probe's reads merged segments: the pattern "
                                 "may lack a cut the site makes)"
                               : "");
        else if (known)
            tg__log(NULL, TG__LOG_WARN, "tls-front: %s: refresh failed (%s); %s", j.domain, err,
                    was_default ? "answering with the default shape"
                                : "keeping the last good profile");
    }
    pthread_mutex_lock(&t->mu);
    if (changed && !t->stop && publish_locked(t) == 0)
        store_locked(t);
    pthread_mutex_unlock(&t->mu);
    __atomic_add_fetch(&t->rounds, 1, __ATOMIC_RELEASE);
}

static void *refresh_main(void *arg)
{
    struct tlsfront *t = arg;
    struct tlsflight *fl = tg__malloc(TLSFRONT_FLIGHTS * sizeof *fl);
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        t->wake = false;
        pthread_mutex_unlock(&t->mu);
        if (fl)
            round_all(t, fl);
        pthread_mutex_lock(&t->mu);
        uint32_t r = 0;
        (void)crypto_random(&r, sizeof r);
        uint64_t wait_ms = (uint64_t)t->refresh_s * 1000;
        wait_ms = wait_ms * 9 / 10 + (r % (wait_ms / 5 + 1)); /* +-10 % */
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += (time_t)(wait_ms / 1000);
        until.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        while (!t->stop && !t->wake && pthread_cond_timedwait(&t->cv, &t->mu, &until) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&t->mu);
    tg__free(fl);
    return NULL;
}

/* ---- set-up ---- */

/* cfg's fronting target, timings and domains into t (under mu, or before the thread). */
static void take_config(struct tlsfront *t, const struct config *cfg)
{
    t->refresh_s = cfg->tls_front.refresh_s;
    t->connections = cfg->tls_front.connections > 64 ? 64 : cfg->tls_front.connections;
    t->timeout_ms = cfg->tls_front.timeout_ms;
    tg__strlcpy(t->front_host, cfg->fronting.host, sizeof t->front_host);
    t->front_port = cfg->fronting.port;
    t->front_pp = cfg->fronting.proxy_protocol;
    t->front_resolved = cfg->fronting.resolved;
    t->front_addr = cfg->fronting.addr;
    t->front_addr_len = cfg->fronting.addr_len;
    t->prefer = cfg->prefer_ip;
    /* domains: kept by name (their profile and counts survive a reload), new ones added */
    struct domain *old = t->dom;
    size_t nold = t->ndom;
    /* 64 slots of 1.2 KB for the few domains a config names: only the used ones resident */
    struct domain *nd = tg__calloc_table(TLSFRONT_MAX_DOMAINS, sizeof *nd);
    if (!nd)
        return; /* keep the old list */
    size_t n = 0;
    for (size_t i = 0; i < cfg->nsecrets && n < TLSFRONT_MAX_DOMAINS; i++) {
        const struct secret *s = &cfg->secrets[i].secret;
        if (s->kind != SECRET_EE || !s->domain[0])
            continue;
        bool dup = false;
        for (size_t k = 0; k < n && !dup; k++)
            dup = strcasecmp(nd[k].st.domain, s->domain) == 0;
        if (dup)
            continue;
        for (size_t k = 0; k < nold; k++)
            if (strcasecmp(old[k].st.domain, s->domain) == 0)
                nd[n] = old[k];
        tg__strlcpy(nd[n].st.domain, s->domain, sizeof nd[n].st.domain);
        n++;
    }
    t->dom = nd;
    t->ndom = n;
    tg__free_table(old, TLSFRONT_MAX_DOMAINS, sizeof *old);
}

struct tlsfront *tlsfront_new(const struct config *cfg, struct doh *doh, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!cfg->tls_front.enabled)
        return NULL; /* with no ee secret yet it idles: a reload may add some */
    struct tlsfront *t = tg__calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "tls-front: out of memory");
        return NULL;
    }
    t->doh = doh;
    pthread_mutex_init(&t->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->cv, &ca);
    pthread_condattr_destroy(&ca);
    take_config(t, cfg);
    tlsfront_state_file(cfg, t->state_file, sizeof t->state_file);
    if (t->dom)
        load_stored(t);
    int rc = t->dom ? publish_locked(t) : -ENOMEM;
    if (rc == 0)
        rc = -pthread_create(&t->th, NULL, refresh_main, t);
    if (rc != 0) {
        snprintf(err, errlen, "tls-front: %s", strerror(-rc));
        tlsfront_free(t);
        return NULL;
    }
    t->th_on = true;
    return t;
}

void tlsfront_free(struct tlsfront *t)
{
    if (!t)
        return;
    if (t->th_on) {
        pthread_mutex_lock(&t->mu);
        t->stop = 1;
        pthread_cond_broadcast(&t->cv);
        pthread_mutex_unlock(&t->mu);
        pthread_join(t->th, NULL);
    }
    tlsfront_set_unref(t->cur);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    tg__free_table(t->dom, TLSFRONT_MAX_DOMAINS, sizeof *t->dom);
    tg__free(t);
}

void tlsfront_update(struct tlsfront *t, const struct config *cfg)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    take_config(t, cfg);
    t->wake = true;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

size_t tlsfront_status(struct tlsfront *t, struct tlsfront_status *out, size_t cap)
{
    pthread_mutex_lock(&t->mu);
    size_t n = t->ndom;
    for (size_t i = 0; i < n && i < cap; i++)
        out[i] = t->dom[i].st;
    pthread_mutex_unlock(&t->mu);
    return n;
}

uint64_t tlsfront_rounds(const struct tlsfront *t)
{
    return __atomic_load_n(&t->rounds, __ATOMIC_ACQUIRE);
}
