/*
 * doctor: `tgproxy doctor CONFIG.toml`, one line per check (see doctor.h).
 *
 * Network checks are bounded: TCP connects run in parallel on non-blocking sockets under
 * one deadline, the TLS handshake and the HTTPS request carry their own timeouts, and
 * nothing is retried. Every socket opened here is closed before the check returns.
 */
#include "proxy/daemon/doctor.h"

#include "proxy/daemon/apistore.h"
#include "proxy/daemon/doctor_mp.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "proxy/services/acl.h"
#include "proxy/config/config.h"
#include "proxy/config/dc.h"
#include "proxy/services/doh.h"
#include "proxy/services/tlsscout.h"
#include "proxy/wire/tlsprofile.h"
#include "proxy/daemon/server.h"
#include "proxy/wire/socks5.h"
#include "proxy/wire/value.h"

#define TIMEOUT_MAX_MS 5000 /* no single check waits longer than this */
#define MAX_ADDRS      16   /* addresses kept per resolved name */
#define MAX_DOMAINS    8    /* distinct FakeTLS domains checked */
#define ADDR_TEXT      (CONFIG_HOST_MAX + 8)
#define DATE_MAX       64

static const int32_t dc_ids[] = {1, 2, 3, 4, 5, 203, 10001, 10002, 10003};
#define NDC_IDS (sizeof dc_ids / sizeof dc_ids[0])

struct doctor {
    FILE *out;
    const struct config *cfg;
    unsigned failed;
    unsigned warnings; /* harmless findings: ignored or deprecated mtg keys */
    unsigned findings; /* every line the loader reported (warnings included) */
};

/* A set of addresses for one name. */
struct addrs {
    size_t n;
    struct sockaddr_storage a[MAX_ADDRS];
    socklen_t len[MAX_ADDRS];
};

/* One non-blocking connect. fd stays open after a success, for the caller. */
struct probe {
    struct sockaddr_storage addr;
    socklen_t len;
    int fd;
    int err;  /* 0 connected, else errno (ETIMEDOUT when the deadline passed) */
    long ms;  /* time to connect */
    int slot; /* which DC / target it belongs to */
};

__attribute__((format(printf, 4, 5))) static void report(struct doctor *d, bool ok,
                                                         const char *what, const char *fmt, ...)
{
    va_list ap;
    fprintf(d->out, "%s %s: ", ok ? "\u2713" : "\u2717", what);
    va_start(ap, fmt);
    vfprintf(d->out, fmt, ap);
    va_end(ap);
    fputc('\n', d->out);
    if (!ok)
        d->failed++;
}

/* A warning: "! what: ...", counted apart from failures (--strict exits 2 on one). */
__attribute__((format(printf, 3, 4))) static void report_warn(struct doctor *d, const char *what,
                                                              const char *fmt, ...)
{
    va_list ap;
    fprintf(d->out, "! %s: ", what);
    va_start(ap, fmt);
    vfprintf(d->out, fmt, ap);
    va_end(ap);
    fputc('\n', d->out);
    d->warnings++;
}

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static unsigned cap_ms(uint32_t ms)
{
    return ms > TIMEOUT_MAX_MS ? TIMEOUT_MAX_MS : ms;
}

/* "1.2.3.4:443", "[::1]:443"; with_port false: "1.2.3.4", "::1". */
static const char *addr_text(const struct sockaddr_storage *sa, socklen_t len, bool with_port,
                             char *buf, size_t cap)
{
    char host[INET6_ADDRSTRLEN + 20], serv[8]; /* numeric: an address, a %scope, a port */
    if (getnameinfo((const struct sockaddr *)sa, len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        snprintf(buf, cap, "?");
    else if (!with_port)
        snprintf(buf, cap, "%s", host);
    else
        snprintf(buf, cap, sa->ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, serv);
    return buf;
}

static bool family_allowed(const struct config *cfg, int family)
{
    if (cfg->prefer_ip == CONFIG_ONLY_IPV4)
        return family == AF_INET;
    if (cfg->prefer_ip == CONFIG_ONLY_IPV6)
        return family == AF_INET6;
    return true;
}

static void addrs_add(struct addrs *as, const struct sockaddr_storage *sa, socklen_t len)
{
    if (as->n < MAX_ADDRS) {
        as->a[as->n] = *sa;
        as->len[as->n++] = len;
    }
}

/* [network] dns: names are resolved as the engine would, through DoH (NULL = the system
   resolver). doctor runs on one thread, so this lives for one doctor_run. */
static struct doh *doctor_doh;

/* host through DoH into as (appended, every family). 0, or -1 with err filled. */
static int resolve_doh(const char *host, uint16_t port, struct addrs *as, char *err, size_t errlen)
{
    struct doh_result res;
    if (doh_resolve(doctor_doh, host, CONFIG_PREFER_IPV6, &res) != DOH_OK) {
        snprintf(err, errlen, "cannot resolve %.200s: %.280s", host, res.err);
        return -1;
    }
    for (size_t i = 0; i < res.n; i++) {
        struct sockaddr_storage ss = {0};
        socklen_t len = sizeof(struct sockaddr_in6);
        ss.ss_family = res.a[i].family;
        if (ss.ss_family == AF_INET) {
            memcpy(&((struct sockaddr_in *)(void *)&ss)->sin_addr, res.a[i].addr, 4);
            len = sizeof(struct sockaddr_in);
        } else {
            memcpy(&((struct sockaddr_in6 *)(void *)&ss)->sin6_addr, res.a[i].addr, 16);
        }
        value_set_port(&ss, port);
        addrs_add(as, &ss, len);
    }
    return 0;
}

/* host into as (appended): getaddrinfo, or DoH when configured. 0, or an error code with
   err filled. */
static int resolve(const char *host, uint16_t port, struct addrs *as, char *err, size_t errlen)
{
    struct sockaddr_storage lit;
    socklen_t litlen;
    if (doctor_doh && !value_parse_ip(host, strlen(host), &lit, &litlen))
        return resolve_doh(host, port, as, err, errlen);
    char serv[8];
    snprintf(serv, sizeof serv, "%u", port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, serv, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(rc));
        return rc;
    }
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        struct sockaddr_storage ss;
        memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
        addrs_add(as, &ss, ai->ai_addrlen);
    }
    freeaddrinfo(res);
    return 0;
}

static void probe_finish(struct probe *p, int err, long start)
{
    p->err = err;
    p->ms = now_ms() - start;
    if (err != 0 && p->fd >= 0) {
        close(p->fd);
        p->fd = -1;
    }
}

static void probes_start(struct probe *p, size_t n, long start)
{
    for (size_t i = 0; i < n; i++) {
        p[i].err = EINPROGRESS;
        p[i].fd = socket(p[i].addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (p[i].fd < 0)
            probe_finish(&p[i], errno, start);
        else if (connect(p[i].fd, (const struct sockaddr *)&p[i].addr, p[i].len) == 0)
            probe_finish(&p[i], 0, start);
        else if (errno != EINPROGRESS)
            probe_finish(&p[i], errno, start);
    }
}

/* Connect to every probe at once; each ends connected, refused, or ETIMEDOUT. */
static int probes_run(struct probe *p, size_t n, unsigned timeout_ms)
{
    long start = now_ms(), deadline = start + timeout_ms;
    struct pollfd *pfd = tg__malloc(n * sizeof *pfd + 1);
    size_t *idx = tg__malloc(n * sizeof *idx + 1);
    if (!pfd || !idx) {
        tg__free(pfd);
        tg__free(idx);
        return -ENOMEM;
    }
    probes_start(p, n, start);
    for (;;) {
        size_t np = 0;
        for (size_t i = 0; i < n; i++)
            if (p[i].err == EINPROGRESS) {
                pfd[np] = (struct pollfd){.fd = p[i].fd, .events = POLLOUT};
                idx[np++] = i;
            }
        long left = deadline - now_ms();
        if (np == 0 || left <= 0 || poll(pfd, np, (int)left) < 0) {
            for (size_t k = 0; k < np; k++)
                probe_finish(&p[idx[k]], ETIMEDOUT, start);
            break;
        }
        for (size_t k = 0; k < np; k++) {
            if (!pfd[k].revents)
                continue;
            int e = 0;
            socklen_t el = sizeof e;
            if (getsockopt(pfd[k].fd, SOL_SOCKET, SO_ERROR, &e, &el) != 0)
                e = errno;
            probe_finish(&p[idx[k]], e, start);
        }
    }
    tg__free(pfd);
    tg__free(idx);
    return 0;
}

static void probes_close(struct probe *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i].fd >= 0) {
            close(p[i].fd);
            p[i].fd = -1;
        }
}

/* ---- config ---- */

/* The loader's findings: an ignored or deprecated mtg key is a warning (it changes nothing
   about who may connect or where traffic goes), anything else a failure. */
static void on_warning(void *user, const char *msg)
{
    struct doctor *d = user;
    d->findings++;
    if (config_warning_harmless(msg))
        report_warn(d, "config", "%s", msg);
    else
        report(d, false, "config", "%s", msg);
}

/* ---- DCs ---- */

/* The addresses tgproxy would try for DC id, honouring only-ipv4 / only-ipv6. */
static int dc_addrs(const struct config *cfg, int32_t id, struct addrs *as, char *err,
                    size_t errlen)
{
    struct dc_options o;
    struct dc_target t;
    dc_options_from_config(&o, cfg);
    if (dc_resolve(&o, id, &t) != 0) {
        snprintf(err, errlen, "not in the table");
        return -ENOENT;
    }
    struct addrs all = {0};
    if (!t.override)
        for (size_t i = 0; i < t.naddrs; i++)
            addrs_add(&all, &t.addrs[i], t.addr_lens[i]);
    for (size_t i = 0; t.override && i < t.override->naddrs; i++) {
        const struct value_hostport *hp = &t.override->addrs[i];
        if (hp->resolved)
            addrs_add(&all, &hp->addr, hp->addr_len);
        else if (resolve(hp->host, hp->port, &all, err, errlen) != 0)
            return -EHOSTUNREACH;
    }
    for (size_t i = 0; i < all.n; i++)
        if (family_allowed(cfg, all.a[i].ss_family))
            addrs_add(as, &all.a[i], all.len[i]);
    if (as->n == 0)
        snprintf(err, errlen, "no address allowed by prefer-ip = %s",
                 config_prefer_ip_name(cfg->prefer_ip));
    return as->n ? 0 : -EHOSTUNREACH;
}

static void dc_report(struct doctor *d, int32_t id, const struct probe *p, size_t n)
{
    char what[32], a[ADDR_TEXT];
    snprintf(what, sizeof what, "DC %d", (int)id);
    const struct probe *first = NULL;
    for (size_t i = 0; i < n; i++)
        if (p[i].slot == (int)id && (!first || (first->err != 0 && p[i].err == 0)))
            first = &p[i];
    if (first && first->err == 0)
        report(d, true, what, "%s answered in %ld ms",
               addr_text(&first->addr, first->len, true, a, sizeof a), first->ms);
    else if (first)
        report(d, false, what, "no address answered (%s: %s)",
               addr_text(&first->addr, first->len, true, a, sizeof a), strerror(first->err));
}

static int check_dcs(struct doctor *d)
{
    struct probe *p = tg__malloc(NDC_IDS * MAX_ADDRS * sizeof *p);
    if (!p)
        return -ENOMEM;
    size_t n = 0;
    for (size_t k = 0; k < NDC_IDS; k++) {
        if (dc_ids[k] > 10000 && !d->cfg->use_test_dcs)
            continue;
        struct addrs as = {0};
        char err[CONFIG_ERR_MAX], what[32];
        if (dc_addrs(d->cfg, dc_ids[k], &as, err, sizeof err) != 0) {
            snprintf(what, sizeof what, "DC %d", (int)dc_ids[k]);
            report(d, false, what, "%s", err);
            continue;
        }
        for (size_t i = 0; i < as.n; i++)
            p[n++] = (struct probe){.addr = as.a[i], .len = as.len[i], .slot = dc_ids[k]};
    }
    int rc = probes_run(p, n, cap_ms(d->cfg->timeout.tcp_ms));
    for (size_t k = 0; rc == 0 && k < NDC_IDS; k++)
        dc_report(d, dc_ids[k], p, n);
    probes_close(p, n);
    tg__free(p);
    return rc;
}

/* ---- DCs through SOCKS5 upstreams ---- */

/* Run the SOCKS5 negotiation for target on the connected, blocking fd. */
static bool socks5_negotiate(int fd, const struct socks5_upstream *up,
                             const struct sockaddr_storage *target, char *err, size_t errlen)
{
    struct socks5_client c;
    struct socks5_target t = {.sa = (const struct sockaddr *)target};
    int st = socks5_client_init(&c, up, &t);
    /* Bounded: every turn sends a request or consumes at least one byte of a reply of at
       most SOCKS5_REPLY_MAX, and every read carries the socket's timeout. */
    while (st == SOCKS5_SEND || st == SOCKS5_MORE) {
        if (st == SOCKS5_SEND) {
            size_t n = 0;
            const uint8_t *req = socks5_client_pending(&c, &n);
            if (send(fd, req, n, MSG_NOSIGNAL) != (ssize_t)n) {
                snprintf(err, errlen, "sending to the upstream: %s", strerror(errno));
                return false;
            }
        }
        uint8_t b[SOCKS5_REPLY_MAX];
        ssize_t r = recv(fd, b, sizeof b, 0);
        if (r <= 0) {
            snprintf(err, errlen, "the upstream %s",
                     r == 0 ? "closed the connection" : strerror(errno));
            return false;
        }
        size_t used = 0;
        st = socks5_client_feed(&c, b, (size_t)r, &used);
    }
    if (st != SOCKS5_CONNECTED)
        snprintf(err, errlen, "%s", socks5_strerror(st, &c));
    return st == SOCKS5_CONNECTED;
}

/* Connect to upstream up and ask it for target. */
static bool socks5_probe(const struct doctor *d, const struct socks5_upstream *up,
                         const struct sockaddr_storage *target, char *err, size_t errlen)
{
    struct probe p = {.addr = up->addr.addr, .len = up->addr.addr_len};
    unsigned ms = cap_ms(d->cfg->timeout.tcp_ms);
    if (probes_run(&p, 1, ms) != 0 || p.err != 0) {
        snprintf(err, errlen, "cannot reach the upstream: %s", strerror(p.err ? p.err : ENOMEM));
        probes_close(&p, 1);
        return false;
    }
    int fl = fcntl(p.fd, F_GETFL);
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    if (fl >= 0)
        fcntl(p.fd, F_SETFL, fl & ~O_NONBLOCK);
    setsockopt(p.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(p.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    bool ok = socks5_negotiate(p.fd, up, target, err, errlen);
    probes_close(&p, 1);
    return ok;
}

/* With [network] proxies, tgproxy reaches DCs only through them: check each pair. */
static void check_dcs_socks5(struct doctor *d)
{
    for (size_t u = 0; u < d->cfg->nproxies; u++) {
        const struct socks5_upstream *up = &d->cfg->proxies[u];
        char url[CONFIG_HOST_MAX + 16];
        socks5_url_format(up, url, sizeof url); /* never the user info */
        for (size_t k = 0; k < NDC_IDS; k++) {
            if (dc_ids[k] > 10000 && !d->cfg->use_test_dcs)
                continue;
            struct addrs as = {0};
            char err[CONFIG_ERR_MAX], what[CONFIG_HOST_MAX + 32], a[ADDR_TEXT];
            snprintf(what, sizeof what, "DC %d via %s", (int)dc_ids[k], url);
            if (dc_addrs(d->cfg, dc_ids[k], &as, err, sizeof err) != 0)
                report(d, false, what, "%s", err);
            else if (socks5_probe(d, up, &as.a[0], err, sizeof err))
                report(d, true, what, "%s answered",
                       addr_text(&as.a[0], as.len[0], true, a, sizeof a));
            else
                report(d, false, what, "%s: %s", addr_text(&as.a[0], as.len[0], true, a, sizeof a),
                       err);
        }
    }
}

/* ---- fronting ---- */

/* Where failed handshakes for domain go: the [domain-fronting] host, else domain. */
static int fronting_addrs(const struct config *cfg, const char *domain, struct addrs *as, char *err,
                          size_t errlen)
{
    if (cfg->fronting.resolved) {
        addrs_add(as, &cfg->fronting.addr, cfg->fronting.addr_len);
        return 0;
    }
    const char *host = cfg->fronting.host[0] ? cfg->fronting.host : domain;
    return resolve(host, cfg->fronting.port, as, err, errlen) != 0 ? -EHOSTUNREACH : 0;
}

/* Connect to the first fronting address that answers; its fd, or -1 with err filled. */
static int fronting_connect(struct doctor *d, const char *domain, char *where, size_t wlen,
                            char *err, size_t errlen)
{
    struct addrs as = {0};
    if (fronting_addrs(d->cfg, domain, &as, err, errlen) != 0)
        return -1;
    struct probe p[MAX_ADDRS];
    for (size_t i = 0; i < as.n; i++)
        p[i] = (struct probe){.addr = as.a[i], .len = as.len[i]};
    int fd = -1;
    if (probes_run(p, as.n, cap_ms(d->cfg->timeout.fronting_ms)) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < as.n && fd < 0; i++)
        if (p[i].err == 0) {
            fd = p[i].fd;
            p[i].fd = -1;
            addr_text(&p[i].addr, p[i].len, true, where, wlen);
        }
    if (fd < 0)
        snprintf(err, errlen, "%s: %s", addr_text(&p[0].addr, p[0].len, true, where, wlen),
                 strerror(p[0].err));
    probes_close(p, as.n);
    return fd;
}

/* Why a handshake failed: the verify result when the chain was refused, else the error. */
static void tls_reason(SSL *ssl, int ret, char *err, size_t errlen)
{
    long v = SSL_get_verify_result(ssl);
    unsigned long e = ERR_peek_last_error();
    if (v != X509_V_OK)
        snprintf(err, errlen, "certificate refused: %s", X509_verify_cert_error_string(v));
    else if (e)
        snprintf(err, errlen, "TLS handshake failed: %s", ERR_reason_error_string(e));
    else if (SSL_get_error(ssl, ret) == SSL_ERROR_SYSCALL && errno)
        snprintf(err, errlen, "TLS handshake failed: %s", strerror(errno));
    else
        snprintf(err, errlen, "TLS handshake failed: connection closed");
    ERR_clear_error();
}

/* TLS handshake with SNI domain over fd; verifies the chain and the host name. */
static bool tls_verify(int fd, const char *domain, unsigned timeout_ms, char *err, size_t errlen)
{
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL *ssl = ctx ? SSL_new(ctx) : NULL;
    bool ok = false;
    if (!ssl || SSL_CTX_set_default_verify_paths(ctx) != 1) {
        snprintf(err, errlen, "cannot set up OpenSSL");
        goto out;
    }
    SSL_set_verify(ssl, SSL_VERIFY_PEER, NULL);
    if (SSL_set_tlsext_host_name(ssl, domain) != 1 || SSL_set1_host(ssl, domain) != 1 ||
        SSL_set_fd(ssl, fd) != 1) {
        snprintf(err, errlen, "cannot set up OpenSSL for this name");
        goto out;
    }
    int ret = SSL_connect(ssl);
    ok = ret == 1;
    if (!ok)
        tls_reason(ssl, ret, err, errlen);
    else
        snprintf(err, errlen, "%s", SSL_get_version(ssl));
out:
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    return ok;
}

static void check_tls(struct doctor *d, const char *domain)
{
    char what[CONFIG_HOST_MAX + 16], where[ADDR_TEXT], err[CONFIG_ERR_MAX];
    snprintf(what, sizeof what, "fronting (%s)", domain);
    int fd = fronting_connect(d, domain, where, sizeof where, err, sizeof err);
    if (fd < 0) {
        report(d, false, what, "not reachable: %s", err);
        return;
    }
    /* fronting_connect left the socket non-blocking; the handshake wants blocking I/O. */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    if (tls_verify(fd, domain, cap_ms(d->cfg->timeout.fronting_ms), err, sizeof err))
        report(d, true, what, "%s answers %s with a certificate valid for %s", where, err, domain);
    else
        report(d, false, what, "%s: %s", where, err);
    close(fd);
}

/* ---- SNI-DNS match ---- */

static bool same_ip(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return false;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)(const void *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)(const void *)b)->sin_addr.s_addr;
    return memcmp(&((const struct sockaddr_in6 *)(const void *)a)->sin6_addr,
                  &((const struct sockaddr_in6 *)(const void *)b)->sin6_addr,
                  sizeof(struct in6_addr)) == 0;
}

/* " (DNS over ...)" when names go through [network] dns, else "". */
static const char *via_text(const struct config *cfg)
{
    if (!doctor_doh)
        return "";
    switch (doh_url_kind(cfg->dns.url)) {
    case DOH_KIND_TLS:
        return " (DNS over TLS)";
    case DOH_KIND_UDP:
        return " (DNS over UDP)";
    case DOH_KIND_HTTPS:
    default:
        return " (DNS over HTTPS)";
    }
}

static void check_sni_dns(struct doctor *d, const char *domain)
{
    char what[CONFIG_HOST_MAX + 16], err[CONFIG_ERR_MAX], a[ADDR_TEXT], b[ADDR_TEXT];
    snprintf(what, sizeof what, "SNI-DNS (%s)", domain);
    struct addrs sni = {0}, front = {0};
    if (resolve(domain, 0, &sni, err, sizeof err) != 0 ||
        fronting_addrs(d->cfg, domain, &front, err, sizeof err) != 0) {
        report(d, false, what, "%s", err);
        return;
    }
    for (size_t i = 0; i < sni.n; i++)
        for (size_t j = 0; j < front.n; j++)
            if (same_ip(&sni.a[i], &front.a[j])) {
                report(d, true, what, "resolves%s to %s, where failed handshakes are fronted",
                       via_text(d->cfg), addr_text(&sni.a[i], sni.len[i], false, a, sizeof a));
                return;
            }
    report(d, false, what,
           "resolves%s to %s but failed handshakes go to %s: a prober comparing the two "
           "sees a proxy",
           via_text(d->cfg), addr_text(&sni.a[0], sni.len[0], false, a, sizeof a),
           addr_text(&front.a[0], front.len[0], false, b, sizeof b));
}

/* ---- clock ---- */

static size_t on_header(char *buf, size_t size, size_t n, void *user)
{
    char *date = user;
    size_t len = size * n;
    if (len > 5 && strncasecmp(buf, "Date:", 5) == 0) {
        size_t k = len - 5 < DATE_MAX - 1 ? len - 5 : DATE_MAX - 1;
        memcpy(date, buf + 5, k);
        date[k] = '\0';
        date[strcspn(date, "\r\n")] = '\0';
    }
    return len;
}

/* HEAD https://domain:port/ at the fronting host; its Date header into date. */
static bool fetch_date(const struct config *cfg, const char *domain, char *date, char *err,
                       size_t errlen)
{
    char url[CONFIG_HOST_MAX + 32], to[2 * CONFIG_HOST_MAX + 32];
    const char *fh = cfg->fronting.host;
    snprintf(url, sizeof url, "https://%s:%u/", domain, cfg->fronting.port);
    snprintf(to, sizeof to, strchr(fh, ':') ? "%s:%u:[%s]:%u" : "%s:%u:%s:%u", domain,
             cfg->fronting.port, fh, cfg->fronting.port);
    CURL *c = curl_easy_init();
    struct curl_slist *connect_to = fh[0] ? curl_slist_append(NULL, to) : NULL;
    if (!c || (fh[0] && !connect_to)) {
        snprintf(err, errlen, "cannot set up libcurl");
        curl_slist_free_all(connect_to);
        curl_easy_cleanup(c);
        return false;
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)cap_ms(cfg->timeout.fronting_ms));
    curl_easy_setopt(c, CURLOPT_CONNECT_TO, connect_to);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, date);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "tgproxy-doctor");
    /* libcurl has its own CA default; follow OpenSSL's variables as the TLS check does. */
    if (getenv("SSL_CERT_FILE"))
        curl_easy_setopt(c, CURLOPT_CAINFO, getenv("SSL_CERT_FILE"));
    if (getenv("SSL_CERT_DIR"))
        curl_easy_setopt(c, CURLOPT_CAPATH, getenv("SSL_CERT_DIR"));
    CURLcode rc = curl_easy_perform(c);
    if (rc != CURLE_OK)
        snprintf(err, errlen, "HEAD %s: %s", url, curl_easy_strerror(rc));
    else if (!date[0])
        snprintf(err, errlen, "HEAD %s: no Date header in the reply", url);
    curl_slist_free_all(connect_to);
    curl_easy_cleanup(c);
    return rc == CURLE_OK && date[0];
}

static void check_clock(struct doctor *d, const char *domain)
{
    char date[DATE_MAX] = "", err[CONFIG_ERR_MAX];
    if (!domain) {
        report(d, true, "clock", "no FakeTLS secret: client timestamps are not checked");
        return;
    }
    if (!fetch_date(d->cfg, domain, date, err, sizeof err)) {
        report(d, false, "clock", "%s", err);
        return;
    }
    time_t theirs = curl_getdate(date, NULL);
    if (theirs == (time_t)-1) {
        report(d, false, "clock", "%s sent a Date header that is not an HTTP date", domain);
        return;
    }
    long long skew = (long long)time(NULL) - (long long)theirs;
    long long tol = d->cfg->tolerate_time_skewness_s;
    /* The header has whole seconds: allow one more. */
    bool ok = skew <= tol + 1 && skew >= -tol - 1;
    report(d, ok, "clock", "%lld s %s %s's Date header (tolerance \u00b1%lld s)%s",
           skew < 0 ? -skew : skew, skew < 0 ? "behind" : "ahead of", domain, tol,
           ok ? "" : ": FakeTLS clients will be refused; fix the clock (NTP)");
}

/* ---- access lists ---- */

/* One enabled list: every file reads and parses, every URL downloads (HTTPS, certificate
   verified) and parses, as `run` would load them. An allowlist with no range would refuse
   every client. */
static void check_acl(struct doctor *d, const struct config_iplist *c, enum acl_list_kind k)
{
    struct acl_probe p;
    char err[600];
    const char *name = acl_list_name(k);
    uint32_t http_ms = cap_ms(d->cfg->timeout.http_ms);
    if (acl_probe(c, http_ms, &p, err, sizeof err) != 0) {
        report(d, false, name, "%s", err);
        return;
    }
    bool ok = k == ACL_BLOCK || p.ranges > 0;
    report(d, ok, name, "%zu file%s and %zu URL%s load: %llu range%s%s", p.files,
           p.files == 1 ? "" : "s", p.urls, p.urls == 1 ? "" : "s", (unsigned long long)p.ranges,
           p.ranges == 1 ? "" : "s", ok ? "" : ": every client would be refused");
}

/* ---- host limits ---- */

static void check_nofile(struct doctor *d)
{
    struct rlimit rl;
    uint64_t need = server_fds_needed(d->cfg, 0);
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        report(d, false, "open files", "getrlimit: %s", strerror(errno));
        return;
    }
    if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need)
        report(d, true, "open files", "hard limit %llu holds concurrency = %u (needs %llu)",
               (unsigned long long)rl.rlim_max, d->cfg->concurrency, (unsigned long long)need);
    else
        report(d, false, "open files",
               "hard limit %llu is below the %llu that concurrency = %u needs: raise it "
               "(systemd LimitNOFILE=, ulimit -Hn) or lower concurrency",
               (unsigned long long)rl.rlim_max, (unsigned long long)need, d->cfg->concurrency);
}

/* what ("bind-to 1.2.3.4:443") can be bound and listened on now. */
static void check_bind(struct doctor *d, const char *what, const struct sockaddr_storage *addr,
                       socklen_t addr_len)
{
    int one = 1, e = 0;
    int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        e = errno;
    else {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (addr->ss_family == AF_INET6)
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        if (bind(fd, (const struct sockaddr *)addr, addr_len) != 0 || listen(fd, 1) != 0)
            e = errno;
        close(fd);
    }
    if (e == 0)
        report(d, true, what, "can be bound");
    else
        report(d, false, what, "%s%s", strerror(e),
               e == EADDRINUSE ? " (is a proxy already running there?)"
               : e == EACCES   ? " (a port below 1024 needs CAP_NET_BIND_SERVICE)"
                               : "");
}

/* ---- probing with dd / classic secrets ---- */

/* With a dd or classic secret, junk shorter than a 64-byte obfs2 header stays undecided;
   it reaches the site at once only over an early fronting connection, which needs a
   fronting host that does not depend on the secret tried (conn.c, upstream.c). What stays
   visible either way is said on the line (docs/tgproxy.md, "Probing"). */
static void check_plain_probing(struct doctor *d, size_t ndom)
{
    const struct config *cfg = d->cfg;
    size_t nplain = 0;
    for (size_t i = 0; i < cfg->nsecrets; i++)
        nplain += cfg->secrets[i].secret.kind != SECRET_EE;
    if (!nplain)
        return;
    unsigned hs_s = (cfg->timeout.handshake_ms + 999) / 1000;
    if (!cfg->fronting.host[0] && !cfg->fronting.resolved && ndom != 1) {
        if (ndom == 0)
            report(d, false, "probing (dd/classic)",
                   "no fronting host: a probe is read and dropped until the handshake "
                   "timeout (%u s), then closed, which no web site does; set "
                   "[domain-fronting]",
                   hs_s);
        else
            report(d, false, "probing (dd/classic)",
                   "the ee secrets name %zu domains and [domain-fronting] is not set: bytes "
                   "shorter than a 64-byte obfs2 header reach the site only at the handshake "
                   "timeout (%u s), so its answer comes late; set [domain-fronting]",
                   ndom, hs_s);
        return;
    }
    report(d, true, "probing (dd/classic)",
           "%zu secret(s) without TLS: short probes reach the fronting site at once and its "
           "answer comes back at once; not hidden: a client's bytes are not TLS (visible to "
           "anyone watching the traffic), and a genuine client whose 64-byte header arrives "
           "in two segments, the site answering the first, is fronted (it retries); prefer "
           "ee secrets",
           nplain);
}

/* ---- [fleet] ---- */

/* Whether an IP literal is a loopback address (value_addr_loopback). */
static bool is_loopback(const char *host)
{
    struct sockaddr_storage ss;
    socklen_t len;
    return value_parse_ip(host, strlen(host), &ss, &len) &&
           value_addr_loopback((const struct sockaddr *)&ss);
}

/* The Redis link is plain TCP (hiredis 0.14 has no TLS): whoever sits on it can answer for
 * Redis. Its replies are bounded in memory (core/rbound.h), not in trust: a warning (it does
 * not fail the run) when the link leaves this host. */
/* [api]: the state file loads; which of its secrets are served and which the file shadows. */
static void check_api(struct doctor *d)
{
    struct apistore st;
    char err[CONFIG_ERR_MAX];
    if (apistore_load(&st, d->cfg->api.state_file, err, sizeof err) != 0) {
        report(d, false, "[api] state-file", "%s", err);
        return;
    }
    size_t own = 0, disabled = 0;
    for (size_t i = 0; i < st.n; i++) {
        bool in_file = false;
        for (size_t k = 0; k < d->cfg->nsecrets && !in_file; k++)
            in_file = strcmp(d->cfg->secrets[k].label, st.e[i].label) == 0;
        disabled += st.e[i].disabled;
        if (st.e[i].has_secret && in_file)
            report_warn(d, "[api] state-file",
                        "secret '%s' made over the API is shadowed by the one of the same label "
                        "in the configuration file (the file wins; delete one of them)",
                        st.e[i].label);
        else if (st.e[i].has_secret)
            own++;
    }
    report(d, true, "[api] state-file",
           "%s: %zu secret(s) made over the API merged with the file's, %zu disabled",
           d->cfg->api.state_file, own, disabled);
    apistore_cleanup(&st);
}

static void check_fleet(struct doctor *d)
{
    const char *h = d->cfg->fleet.host;
    if (d->cfg->fleet.unix_socket)
        report(d, true, "fleet redis", "unix:%s: the link stays on this host", h);
    else if (is_loopback(h))
        report(d, true, "fleet redis", "%s: a loopback address: the link stays on this host", h);
    else
        report_warn(d, "fleet redis",
                    "%s is not on this host and the link is plain TCP: whoever can reach or "
                    "intercept it answers for Redis (replays, limits); keep Redis on a private "
                    "network you trust, or tunnel it through TLS (stunnel: docs/fleet.md)",
                    h);
}

/* doctor_mp.c's lines, in this file's format. */
static void mp_line(void *ud, enum doctor_mark m, const char *what, const char *text)
{
    struct doctor *d = ud;
    if (m == DOCTOR_WARN)
        report_warn(d, what, "%s", text);
    else
        report(d, m == DOCTOR_OK, what, "%s", text);
}

/* ---- entry ---- */

/* [defense.tls-front]: what of the site's first flight the learned answer cannot copy. The
   site is probed as the refresh thread probes it (three Telegram-like hellos). */
#define DOCTOR_TLS_PROBES 3
static void check_tls_front(struct doctor *d, const char *domain)
{
    char what[TLSPROFILE_DOMAIN_MAX + 16], err[512], where[CONFIG_HOST_MAX + 8] = "";
    snprintf(what, sizeof what, "tls-front (%s)", domain);
    struct addrs as = {0};
    struct tlsflight *fl = tg__calloc(DOCTOR_TLS_PROBES, sizeof *fl);
    if (!fl) {
        report(d, false, what, "out of memory");
        return;
    }
    size_t ok = 0;
    if (fronting_addrs(d->cfg, domain, &as, err, sizeof err) == 0 && as.n) {
        addr_text(&as.a[0], as.len[0], true, where, sizeof where);
        struct tlsscout_opts o = {.timeout_ms = (int)cap_ms(d->cfg->tls_front.timeout_ms),
                                  .proxy_v2 = d->cfg->fronting.proxy_protocol};
        for (int i = 0; i < DOCTOR_TLS_PROBES; i++)
            ok += tlsscout_probe((struct sockaddr *)&as.a[0], as.len[0], domain, &o, &fl[ok], err,
                                 sizeof err) == 0;
    }
    struct tlsprofile p;
    char why[256];
    if (!ok) {
        report_warn(d, what,
                    "the site's first flight cannot be learned (%s): FakeTLS clients get the "
                    "fixed answer, or the profile stored by an earlier run",
                    err);
    } else if (tlsprofile_build(domain, fl, ok, 0, &p, why, sizeof why) != 0) {
        report_warn(d, what, "%s answers, but not in a shape to copy (%s): FakeTLS clients get "
                             "the fixed answer", where, why);
    } else {
        char text[1536];
        unsigned diff = tlsprofile_diff(&p);
        if (diff == 0)
            report(d, true, what,
                   "%s: the answer copies the site's first flight (cipher %04x, %zu extensions "
                   "in order, one encrypted record of %u bytes, segments %s)",
                   where, p.cipher, p.next, (unsigned)p.lens[0], p.pattern);
        else
            report_warn(d, what, "%s (segments %s): what the answer cannot copy: %s", where,
                        p.pattern, tlsprofile_diff_text(diff, text, sizeof text));
    }
    tg__free(fl);
}

/* mss-clamp also applies to what tgproxy sends: the answer leaves in clamp-sized segments. */
static void check_tls_front_clamp(struct doctor *d)
{
    bool clamped = false;
    for (size_t i = 0; i < d->cfg->nlisten; i++)
        clamped |= config_listen_clamp(d->cfg, &d->cfg->listen[i]) != 0;
    if (!clamped)
        return;
    report_warn(d, "tls-front segments",
                "mss-clamp = %u also cuts what tgproxy sends (Linux applies a listener's MSS to "
                "both directions): a 3 KB answer leaves in about %u segments where the site "
                "sends 1 or 2. mss-clamp = false copies the site's segments, at the price of "
                "the ClientHello's fingerprint (JA4) in one segment",
                (unsigned)d->cfg->mss_clamp, (unsigned)(3000 / d->cfg->mss_clamp + 1));
}

/* Distinct FakeTLS domains of the config, in order, at most MAX_DOMAINS. */
static size_t domains(const struct config *cfg, const char **out)
{
    size_t n = 0;
    for (size_t i = 0; i < cfg->nsecrets && n < MAX_DOMAINS; i++) {
        const char *dom = cfg->secrets[i].secret.domain;
        bool seen = !dom[0];
        for (size_t k = 0; k < n && !seen; k++)
            seen = strcmp(out[k], dom) == 0;
        if (!seen)
            out[n++] = dom;
    }
    return n;
}

static int run_checks(struct doctor *d)
{
    const char *dom[MAX_DOMAINS];
    size_t ndom = domains(d->cfg, dom);
    check_clock(d, ndom ? dom[0] : NULL);
    if (d->cfg->nproxies)
        check_dcs_socks5(d);
    else if (check_dcs(d) != 0)
        return -ENOMEM;
    for (size_t i = 0; i < ndom; i++)
        check_tls(d, dom[i]);
    if (!ndom)
        report(d, true, "fronting", "no FakeTLS secret: nothing is fronted");
    for (size_t i = 0; i < ndom; i++)
        check_sni_dns(d, dom[i]);
    if (d->cfg->tls_front.enabled && ndom) {
        for (size_t i = 0; i < ndom; i++)
            check_tls_front(d, dom[i]);
        check_tls_front_clamp(d);
    }
    check_plain_probing(d, ndom);
    if (d->cfg->blocklist.enabled)
        check_acl(d, &d->cfg->blocklist, ACL_BLOCK);
    if (d->cfg->allowlist.enabled)
        check_acl(d, &d->cfg->allowlist, ACL_ALLOW);
    if (d->cfg->fleet.enabled)
        check_fleet(d);
    if (d->cfg->mp.enabled)
        doctor_midproxy(d->cfg, mp_line, d);
    if (d->cfg->api.enabled)
        check_api(d);
    check_nofile(d);
    char what[CONFIG_HOST_MAX + 48];
    for (size_t i = 0; i < d->cfg->nlisten; i++) {
        snprintf(what, sizeof what, "bind-to %s", d->cfg->listen[i].text);
        check_bind(d, what, &d->cfg->listen[i].addr, d->cfg->listen[i].addr_len);
        if (d->cfg->mss_clamp && !config_listen_clamp(d->cfg, &d->cfg->listen[i]))
            report(d, true, "mss-clamp",
                   "left off on %s, a loopback address: only this host's processes "
                   "connect there (a local front, whose own listener's MSS is what clients' "
                   "kernels see); mss-clamp-loopback = true applies it",
                   d->cfg->listen[i].text);
    }
    if (d->cfg->prometheus.enabled) { /* `run` stops when the metrics page cannot bind */
        char where[CONFIG_HOST_MAX + 8];
        value_format_addr(&d->cfg->prometheus.bind.addr, where, sizeof where);
        snprintf(what, sizeof what, "[stats.prometheus] bind-to %s", where);
        check_bind(d, what, &d->cfg->prometheus.bind.addr, d->cfg->prometheus.bind.addr_len);
    }
    return 0;
}

int doctor_run(const char *path, FILE *out)
{
    return doctor_check(path, out, false);
}

int doctor_check(const char *path, FILE *out, bool strict)
{
    struct config cfg;
    struct doctor d = {.out = out, .cfg = &cfg};
    char err[CONFIG_ERR_MAX];
    config_init(&cfg);
    int rc = config_load_file(&cfg, path, err, sizeof err, on_warning, &d);
    if (rc != 0) {
        report(&d, false, "config", "%s", err);
        return rc == -ENOMEM ? EX_OSERR : EX_CONFIG;
    }
    if (!d.findings)
        report(&d, true, "config", "%s loads; no ignored or deprecated keys", path);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        config_cleanup(&cfg);
        return EX_OSERR;
    }
    if (cfg.dns.url[0] && !(doctor_doh = doh_new(&cfg, err, sizeof err)))
        report(&d, false, "DNS", "%s", err);
    rc = run_checks(&d);
    doh_free(doctor_doh);
    doctor_doh = NULL;
    curl_global_cleanup();
    config_cleanup(&cfg);
    fflush(out);
    if (rc != 0)
        return EX_OSERR;
    return d.failed ? DOCTOR_EXIT_FAILED : d.warnings && strict ? DOCTOR_EXIT_WARNINGS : 0;
}
