/*
 * doh: DNS over HTTPS with a TTL cache. See doh.h.
 * Invariants: d->mu guards cache[], pool[] and the counters, and is never held while a
 * request runs; a handle taken from the pool belongs to one thread until it is put back.
 * Cache entries hold only answers (addresses, NODATA, NXDOMAIN), never failures.
 */
#include "proxy/services/doh.h"

#include "core/alloc.h"
#include "core/clock.h"
#include "core/str.h"
#include "proxy/services/dnsnet.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#define CT_DNS "application/dns-message"

/* One (name, type) answer. */
struct doh_entry {
    char name[DNSMSG_NAME_MAX];
    uint16_t qtype; /* 0 = free slot */
    int8_t status;  /* DOH_OK, DOH_NODATA or DOH_NXDOMAIN */
    uint8_t n;
    struct dnsmsg_addr a[DNSMSG_MAX_ADDRS];
    uint64_t expires_ms; /* on doh_now_ms's clock */
};

struct doh {
    enum doh_kind kind;
    char url[CONFIG_URL_MAX];
    char where[CONFIG_HOST_MAX + 24]; /* "DoH host:port" for messages */
    char host[CONFIG_HOST_MAX], ip[CONFIG_IP_MAX];
    uint16_t port;
    SSL_CTX *tls; /* DNS over TLS: the client context */
    char connect_to[CONFIG_IP_MAX + 8];
    long connect_ms, timeout_ms;
    struct curl_slist *headers, *pin;
    pthread_mutex_t mu;
    CURL *pool[DOH_POOL_MAX];
    size_t npool;
    struct dnsnet_tls_conn tpool[DOH_POOL_MAX]; /* idle DNS-over-TLS connections */
    size_t ntpool;
    uint64_t queries, hits;
    struct doh_entry cache[DOH_CACHE_MAX];
};

/* One type's outcome, before merging. */
struct part {
    int status;
    size_t n;
    struct dnsmsg_addr a[DNSMSG_MAX_ADDRS];
    uint32_t ttl_s;
};

static uint64_t (*clock_hook)(void);

uint64_t doh_now_ms(void)
{
    return clock_hook ? clock_hook() : tg__now_ms();
}

void doh_set_clock(uint64_t (*fn)(void))
{
    clock_hook = fn;
}

/* ---- cache (d->mu held) ---- */

static struct doh_entry *cache_find(struct doh *d, const char *name, uint16_t qtype)
{
    for (size_t i = 0; i < DOH_CACHE_MAX; i++)
        if (d->cache[i].qtype == qtype && strcmp(d->cache[i].name, name) == 0)
            return &d->cache[i];
    return NULL;
}

/* A fresh answer for (name, qtype) into *p. */
static bool cache_get(struct doh *d, const char *name, uint16_t qtype, uint64_t now, struct part *p)
{
    const struct doh_entry *e = cache_find(d, name, qtype);
    if (!e || now >= e->expires_ms)
        return false;
    p->status = e->status;
    p->n = e->n;
    memcpy(p->a, e->a, sizeof p->a);
    uint64_t left = (e->expires_ms - now + 999) / 1000;
    p->ttl_s = (uint32_t)left;
    return true;
}

static uint32_t clamp_ttl(const struct part *p)
{
    uint32_t t = p->ttl_s;
    if (p->status == DOH_OK)
        return t < DOH_TTL_MIN_S ? DOH_TTL_MIN_S : t > DOH_TTL_MAX_S ? DOH_TTL_MAX_S : t;
    if (t == 0)
        t = DOH_NEG_TTL_DEFAULT_S;
    return t < DOH_TTL_MIN_S ? DOH_TTL_MIN_S : t > DOH_NEG_TTL_MAX_S ? DOH_NEG_TTL_MAX_S : t;
}

/* Keep an answer: in its own slot, else a free or expired one, else the one that expires
   first. */
static void cache_put(struct doh *d, const char *name, uint16_t qtype, const struct part *p,
                      uint64_t now)
{
    struct doh_entry *e = cache_find(d, name, qtype);
    for (size_t i = 0; !e && i < DOH_CACHE_MAX; i++)
        if (!d->cache[i].qtype || d->cache[i].expires_ms <= now)
            e = &d->cache[i];
    if (!e) { /* full of live answers: the one that expires first goes */
        e = &d->cache[0];
        for (size_t i = 1; i < DOH_CACHE_MAX; i++)
            if (d->cache[i].expires_ms < e->expires_ms)
                e = &d->cache[i];
    }
    tg__strlcpy(e->name, name, sizeof e->name);
    e->qtype = qtype;
    e->status = (int8_t)p->status;
    e->n = (uint8_t)p->n;
    memcpy(e->a, p->a, sizeof e->a);
    e->expires_ms = now + (uint64_t)p->ttl_s * 1000;
}

void doh_flush(struct doh *d)
{
    pthread_mutex_lock(&d->mu);
    memset(d->cache, 0, sizeof d->cache);
    pthread_mutex_unlock(&d->mu);
}

void doh_counts(struct doh *d, uint64_t *queries, uint64_t *hits)
{
    pthread_mutex_lock(&d->mu);
    *queries = d->queries;
    *hits = d->hits;
    pthread_mutex_unlock(&d->mu);
}

/* ---- transport ---- */

struct body {
    uint8_t *p;
    size_t n;
    bool over; /* more than DOH_MSG_MAX bytes came */
};

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct body *b = ud;
    size_t n = size * nmemb;
    if (n > DOH_MSG_MAX - b->n) {
        b->over = true;
        return 0; /* curl stops with CURLE_WRITE_ERROR */
    }
    memcpy(b->p + b->n, ptr, n);
    b->n += n;
    return n;
}

/* A handle from the pool, or a new one with the options every request shares. */
static CURL *handle_get(struct doh *d)
{
    pthread_mutex_lock(&d->mu);
    CURL *c = d->npool ? d->pool[--d->npool] : NULL;
    pthread_mutex_unlock(&d->mu);
    if (c)
        return c;
    if (!(c = curl_easy_init()))
        return NULL;
    curl_easy_setopt(c, CURLOPT_URL, d->url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, d->connect_ms);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, d->timeout_ms);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, d->headers);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "tgproxy");
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    if (d->pin)
        curl_easy_setopt(c, CURLOPT_CONNECT_TO, d->pin);
    if (getenv("SSL_CERT_FILE"))
        curl_easy_setopt(c, CURLOPT_CAINFO, getenv("SSL_CERT_FILE"));
    if (getenv("SSL_CERT_DIR"))
        curl_easy_setopt(c, CURLOPT_CAPATH, getenv("SSL_CERT_DIR"));
    return c;
}

static void handle_put(struct doh *d, CURL *c)
{
    pthread_mutex_lock(&d->mu);
    if (d->npool < DOH_POOL_MAX) {
        d->pool[d->npool++] = c;
        c = NULL;
    }
    pthread_mutex_unlock(&d->mu);
    curl_easy_cleanup(c);
}

static const char *type_name(uint16_t qtype)
{
    return qtype == DNSMSG_TYPE_A ? "A" : "AAAA";
}

/* POST q[0..qn) and check the HTTP side of the answer, which lands in *b. 0 or a status. */
static int post(struct doh *d, CURL *c, const uint8_t *q, size_t qn, struct body *b, char *err,
                size_t errlen)
{
    char cerr[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, (const char *)q);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)qn);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
    CURLcode rc = curl_easy_perform(c);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL);
    if (b->over) {
        snprintf(err, errlen, "answer larger than %d bytes", DOH_MSG_MAX);
        return DOH_E_HTTP;
    }
    if (rc != CURLE_OK) {
        snprintf(err, errlen, "%s", cerr[0] ? cerr : curl_easy_strerror(rc));
        return DOH_E_TRANSPORT;
    }
    long code = 0;
    char *ct = NULL;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
    if (code != 200) {
        snprintf(err, errlen, "HTTP status %ld, expected 200", code);
        return DOH_E_HTTP;
    }
    if (!ct || strncasecmp(ct, CT_DNS, sizeof CT_DNS - 1) != 0) {
        snprintf(err, errlen, "answer is %.60s, expected " CT_DNS, ct ? ct : "without a type");
        return DOH_E_HTTP;
    }
    return 0;
}

/* DNS over TLS: on an idle pooled connection if there is one (once more on a new one when
   the server closed it meanwhile), else on a new one; kept for the next query after. */
static int tls_exchange(struct doh *d, const struct dnsnet_target *t, const uint8_t *q, size_t qn,
                        struct body *b, char *err, size_t errlen)
{
    struct dnsnet_tls_conn c = {.fd = -1};
    pthread_mutex_lock(&d->mu);
    bool reused = d->ntpool > 0;
    if (reused)
        c = d->tpool[--d->ntpool];
    pthread_mutex_unlock(&d->mu);
    for (;;) {
        if (!reused && dnsnet_tls_open(t, d->tls, (uint32_t)d->connect_ms, (uint32_t)d->timeout_ms,
                                       &c, err, errlen) != 0)
            return DOH_E_TRANSPORT;
        if (dnsnet_tls_exchange(&c, q, qn, b->p, DOH_MSG_MAX, &b->n, (uint32_t)d->timeout_ms, err,
                                errlen) == 0)
            break;
        dnsnet_tls_close(&c);
        if (!reused)
            return DOH_E_TRANSPORT;
        reused = false;
    }
    pthread_mutex_lock(&d->mu);
    bool kept = d->ntpool < DOH_POOL_MAX;
    if (kept)
        d->tpool[d->ntpool++] = c;
    pthread_mutex_unlock(&d->mu);
    if (!kept)
        dnsnet_tls_close(&c);
    return 0;
}

/* One query to the server, its answer in *b: over HTTPS (a pooled curl handle), TLS or
   UDP. 0 or a failure status with err filled. */
static int exchange(struct doh *d, uint16_t id, const uint8_t *q, size_t qn, struct body *b,
                    char *err, size_t errlen)
{
    struct dnsnet_target t = {.host = d->host, .port = d->port, .ip = d->ip};
    int rc;
    switch (d->kind) {
    case DOH_KIND_TLS:
        return tls_exchange(d, &t, q, qn, b, err, errlen);
    case DOH_KIND_UDP:
        rc = dnsnet_udp(&t, id, q, qn, b->p, DOH_MSG_MAX, &b->n, (uint32_t)d->timeout_ms, err,
                        errlen);
        return rc == 0 ? 0 : DOH_E_TRANSPORT;
    case DOH_KIND_HTTPS:
    default:
        break;
    }
    CURL *c = handle_get(d);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return DOH_E_NOMEM;
    }
    rc = post(d, c, q, qn, b, err, errlen);
    handle_put(d, c);
    return rc;
}

/* The dnsmsg result of a parsed answer as a part. */
static int part_from(int st, const struct dnsmsg_answer *ans, struct part *p, char *err,
                     size_t errlen)
{
    switch (st) {
    case DNSMSG_OK:
    case DNSMSG_NODATA:
    case DNSMSG_NXDOMAIN:
        p->status = st == DNSMSG_OK ? DOH_OK : st == DNSMSG_NODATA ? DOH_NODATA : DOH_NXDOMAIN;
        p->n = ans->n;
        memcpy(p->a, ans->a, sizeof p->a);
        p->ttl_s = ans->ttl;
        p->ttl_s = clamp_ttl(p);
        return p->status;
    case DNSMSG_E_RCODE:
        snprintf(err, errlen, "the server answered RCODE %u (%s)", (unsigned)ans->rcode,
                 ans->rcode == 2   ? "SERVFAIL"
                 : ans->rcode == 5 ? "REFUSED"
                                   : "failure");
        return DOH_E_SERVER;
    default:
        snprintf(err, errlen, "bad answer: %s", dnsmsg_strerror(st));
        return DOH_E_ANSWER;
    }
}

/* One request for (name, qtype). Returns the part's status; err says why for failures. */
static int query(struct doh *d, const char *name, uint16_t qtype, struct part *p, char *err,
                 size_t errlen)
{
    uint8_t q[DNSMSG_QUERY_MAX];
    uint16_t id = 0;
    if (getrandom(&id, sizeof id, 0) != sizeof id)
        id = (uint16_t)tg__now_ns();
    size_t qn = dnsmsg_query(q, sizeof q, id, name, qtype);
    if (qn == 0) {
        snprintf(err, errlen, "not a host name DNS can carry");
        return DOH_E_NAME;
    }
    struct body b = {.p = tg__malloc(DOH_MSG_MAX)};
    if (!b.p) {
        snprintf(err, errlen, "out of memory");
        return DOH_E_NOMEM;
    }
    pthread_mutex_lock(&d->mu);
    d->queries++;
    pthread_mutex_unlock(&d->mu);
    int st = exchange(d, id, q, qn, &b, err, errlen);
    if (st == 0) {
        struct dnsmsg_answer ans;
        int ps = dnsmsg_parse(b.p, b.n, id, name, qtype, &ans);
        if (ps == DNSMSG_E_RCODE) /* parse zeroes the answer; the code is in the header */
            ans.rcode = b.n >= 4 ? (uint8_t)(b.p[3] & 0x0f) : 0;
        st = part_from(ps, &ans, p, err, errlen);
    }
    tg__free(b.p);
    return st;
}

/* One type, from the cache or the server. */
static int one_type(struct doh *d, const char *name, uint16_t qtype, struct part *p, char *err,
                    size_t errlen)
{
    memset(p, 0, sizeof *p);
    pthread_mutex_lock(&d->mu);
    bool hit = cache_get(d, name, qtype, doh_now_ms(), p);
    d->hits += hit;
    pthread_mutex_unlock(&d->mu);
    if (hit)
        return p->status;
    int st = query(d, name, qtype, p, err, errlen);
    p->status = st;
    if (st >= 0) {
        pthread_mutex_lock(&d->mu);
        cache_put(d, name, qtype, p, doh_now_ms());
        pthread_mutex_unlock(&d->mu);
    }
    return st;
}

/* The types to ask, in prefer-ip order. */
static size_t types_for(enum config_prefer_ip prefer, uint16_t t[2])
{
    switch (prefer) {
    case CONFIG_ONLY_IPV4:
        t[0] = DNSMSG_TYPE_A;
        return 1;
    case CONFIG_ONLY_IPV6:
        t[0] = DNSMSG_TYPE_AAAA;
        return 1;
    case CONFIG_PREFER_IPV4:
        t[0] = DNSMSG_TYPE_A;
        t[1] = DNSMSG_TYPE_AAAA;
        return 2;
    case CONFIG_PREFER_IPV6:
    default:
        t[0] = DNSMSG_TYPE_AAAA;
        t[1] = DNSMSG_TYPE_A;
        return 2;
    }
}

/* How much a failed type says: a failure beats NXDOMAIN, which beats NODATA. */
static int rank(int st)
{
    return st < 0 ? 3 : st == DOH_NXDOMAIN ? 2 : 1;
}

int doh_resolve(struct doh *d, const char *name, enum config_prefer_ip prefer,
                struct doh_result *out)
{
    memset(out, 0, sizeof *out);
    char key[DNSMSG_NAME_MAX]; /* the cache's spelling: lower case, no final dot */
    size_t kn = strlen(name);
    if (kn && name[kn - 1] == '.')
        kn--;
    if (kn >= sizeof key) {
        snprintf(out->err, sizeof out->err, "%.140s: %.120s...: name too long", d->where, name);
        return DOH_E_NAME;
    }
    for (size_t i = 0; i < kn; i++)
        key[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
    key[kn] = '\0';
    name = key;
    uint16_t t[2];
    size_t nt = types_for(prefer, t);
    int worst = 0; /* 0 = no failed type yet */
    uint32_t ttl_s = UINT32_MAX, neg_s = UINT32_MAX;
    for (size_t i = 0; i < nt; i++) {
        struct part p;
        char why[256] = "";
        int st = one_type(d, name, t[i], &p, why, sizeof why);
        if (st == DOH_OK) {
            for (size_t k = 0; k < p.n && out->n < DOH_MAX_ADDRS; k++)
                out->a[out->n++] = p.a[k];
            ttl_s = p.ttl_s < ttl_s ? p.ttl_s : ttl_s;
            continue;
        }
        if (st > 0)
            neg_s = p.ttl_s < neg_s ? p.ttl_s : neg_s;
        if (worst != 0 && rank(st) <= rank(worst))
            continue;
        worst = st;
        snprintf(out->err, sizeof out->err, "%.140s: %s %.120s: %.200s", d->where, type_name(t[i]),
                 name,
                 st == DOH_NXDOMAIN ? "NXDOMAIN (no such name)"
                 : st == DOH_NODATA ? "no address of this type"
                                    : why);
    }
    if (out->n) {
        out->err[0] = '\0';
        out->ttl_ms = ttl_s * 1000;
        return DOH_OK;
    }
    out->ttl_ms = worst > 0 ? neg_s * 1000 : 0;
    return worst;
}

/* ---- lifecycle ---- */

struct doh *doh_new(const struct config *cfg, char *err, size_t errlen)
{
    struct doh *d = tg__calloc(1, sizeof *d);
    if (!d || curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        tg__free(d);
        snprintf(err, errlen, "DoH: cannot set up libcurl");
        return NULL;
    }
    pthread_mutex_init(&d->mu, NULL);
    tg__strlcpy(d->url, cfg->dns.url, sizeof d->url);
    d->kind = doh_url_kind(cfg->dns.url);
    tg__strlcpy(d->host, cfg->dns.host, sizeof d->host);
    tg__strlcpy(d->ip, cfg->dns.ip, sizeof d->ip);
    d->port = cfg->dns.port;
    bool v6 = strchr(cfg->dns.host, ':') != NULL;
    snprintf(d->where, sizeof d->where, "%s %s%s%s:%u",
             d->kind == DOH_KIND_HTTPS ? "DoH"
             : d->kind == DOH_KIND_TLS ? "DoT"
                                       : "DNS",
             v6 ? "[" : "", cfg->dns.host, v6 ? "]" : "", (unsigned)cfg->dns.port);
    d->connect_ms = (long)cfg->timeout.tcp_ms;
    d->timeout_ms = (long)(cfg->timeout.http_ms ? cfg->timeout.http_ms : 10000);
    d->headers = curl_slist_append(NULL, "Content-Type: " CT_DNS);
    struct curl_slist *h2 = d->headers ? curl_slist_append(d->headers, "Accept: " CT_DNS) : NULL;
    bool ok = h2 != NULL;
    if (ok && cfg->dns.ip[0]) { /* "::IP:" = every host and port of the URL goes to IP */
        bool ip6 = strchr(cfg->dns.ip, ':') != NULL;
        snprintf(d->connect_to, sizeof d->connect_to, "::%s%s%s:", ip6 ? "[" : "", cfg->dns.ip,
                 ip6 ? "]" : "");
        ok = (d->pin = curl_slist_append(NULL, d->connect_to)) != NULL;
    }
    if (ok && d->kind == DOH_KIND_TLS) { /* verify store: the system's, or SSL_CERT_FILE/DIR */
        ok = (d->tls = SSL_CTX_new(TLS_client_method())) != NULL &&
             SSL_CTX_set_min_proto_version(d->tls, TLS1_2_VERSION) &&
             SSL_CTX_set_default_verify_paths(d->tls);
    }
    if (!ok) {
        doh_free(d);
        snprintf(err, errlen, "DNS resolver: out of memory");
        return NULL;
    }
    return d;
}

void doh_free(struct doh *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->npool; i++)
        curl_easy_cleanup(d->pool[i]);
    curl_slist_free_all(d->headers);
    curl_slist_free_all(d->pin);
    for (size_t i = 0; i < d->ntpool; i++)
        dnsnet_tls_close(&d->tpool[i]);
    SSL_CTX_free(d->tls);
    pthread_mutex_destroy(&d->mu);
    tg__free(d);
    curl_global_cleanup();
}
