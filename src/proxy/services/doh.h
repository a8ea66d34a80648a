/*
 * doh: host names resolved through DNS over HTTPS (RFC 8484), for `[network] dns` and
 * `doh-ip` (mtg's keys), in place of the system resolver. mtg's other two forms of `dns`
 * go through the same cache and checks: DNS over TLS (tls://HOST, RFC 7858) and plain DNS
 * over UDP (udp://IP or a bare IP), whose transports are in dnsnet.c.
 *
 * A struct doh is shared by every thread that resolves: the engine's resolver threads
 * (upstream.c) and doctor. doh_resolve() asks for A and/or AAAA records as prefer-ip says
 * (only-ipv4: A, only-ipv6: AAAA, else both, the preferred family first), each as one POST
 * of an application/dns-message body (RFC 1035 wire format, a random id, recursion desired)
 * to the configured URL, and checks the answer with dnsmsg_parse (same id and question,
 * CNAME chains followed within the answer, at most DNSMSG_MAX_CNAMES links).
 *
 * Cache: answers are kept per (name, type), at most DOH_CACHE_MAX of them, for their TTL
 * clamped to DOH_TTL_MIN_S..DOH_TTL_MAX_S; a name that does not exist, or has no address of
 * a type, for its negative TTL (RFC 2308) clamped to DOH_TTL_MIN_S..DOH_NEG_TTL_MAX_S
 * (DOH_NEG_TTL_DEFAULT_S when the server gives none). Server failures and transport errors
 * are not cached here (the engine holds a failure for UPSTREAM_DNS_NEG_TTL_MS per worker).
 * When the cache is full, the entry that expires first is replaced.
 *
 * Transport: libcurl, HTTPS only, redirects not followed, the connect bounded by
 * [network.timeout] tcp and each request by [network.timeout] http. With doh-ip the
 * connection goes to that address while TLS still checks the URL's host name, so no other
 * resolver is needed. Easy handles are kept in a small pool and reused (their connections
 * and TLS sessions with them), since resolver threads are short-lived; so are DNS-over-TLS
 * connections (a query on one the server closed meanwhile is sent again on a new one). CA certificates:
 * the system's store, or SSL_CERT_FILE / SSL_CERT_DIR when set (as doctor does).
 *
 * Errors say what, where and why ("DoH 127.0.0.1:8443: A example.org: NXDOMAIN"); they name
 * the server by host and port, never by the whole URL.
 *
 * Thread-safety: doh_new/doh_free from one thread; doh_resolve and doh_counts from any
 * number of threads at once (one mutex guards the cache, the pool and the counters; it is
 * never held during a request).
 */
#ifndef TGPROXY_DOH_H
#define TGPROXY_DOH_H

#include <stddef.h>
#include <stdint.h>

#include "proxy/config/config.h"
#include "proxy/config/dohurl.h" /* enum doh_kind, the URL parsers */
#include "proxy/wire/dnsmsg.h"

#define DOH_CACHE_MAX         256   /* (name, type) answers kept */
#define DOH_POOL_MAX          8     /* idle curl handles kept for reuse */
#define DOH_TTL_MIN_S         5     /* shorter TTLs are raised to this (seconds) */
#define DOH_TTL_MAX_S         3600  /* longer TTLs are cut to this */
#define DOH_NEG_TTL_MAX_S     60    /* a negative answer is kept at most this long */
#define DOH_NEG_TTL_DEFAULT_S 10    /* ... and this long when the server gives no SOA */
#define DOH_MSG_MAX           65535 /* bytes: the largest DNS message */
#define DOH_MAX_ADDRS         (2 * DNSMSG_MAX_ADDRS)
#define DOH_ERR_MAX           512

/* Results of doh_resolve; failures are negative. */
enum doh_status {
    DOH_OK = 0,           /* at least one address */
    DOH_NODATA = 1,       /* the name exists but has no address of the asked types */
    DOH_NXDOMAIN = 2,     /* the name does not exist */
    DOH_E_NAME = -1,      /* not a host name DNS can carry */
    DOH_E_TRANSPORT = -2, /* connect, TLS (certificate included) or timeout */
    DOH_E_HTTP = -3,      /* an HTTP status other than 200, or not application/dns-message */
    DOH_E_ANSWER = -4,    /* the DNS message is malformed or does not answer the query */
    DOH_E_SERVER = -5,    /* the DNS server failed or refused (SERVFAIL, REFUSED, ...) */
    DOH_E_NOMEM = -6,
};

struct doh_result {
    size_t n;
    struct dnsmsg_addr a[DOH_MAX_ADDRS]; /* in prefer-ip order */
    uint32_t ttl_ms;                     /* how long the answer may be used from now */
    char err[DOH_ERR_MAX];               /* for a status other than DOH_OK: what went wrong */
};

struct doh;

/*
 * A resolver for cfg's [network] dns (which must be set: cfg->dns.url[0] != 0). Copies what
 * it needs from cfg. NULL with err filled when libcurl cannot be set up.
 */
struct doh *doh_new(const struct config *cfg, char *err, size_t errlen);
/* Closes the pooled connections. NULL-safe. No doh_resolve may be running. */
void doh_free(struct doh *d);

/*
 * The addresses of name (a host name, not an IP literal), from the cache or the server:
 * A and/or AAAA as prefer says. Blocks the calling thread for at most the connect plus
 * request timeouts per type asked. Returns an enum doh_status; *out is always filled (n = 0
 * and err set unless DOH_OK).
 */
int doh_resolve(struct doh *d, const char *name, enum config_prefer_ip prefer,
                struct doh_result *out);

/* Requests sent to the server and answers taken from the cache, so far. */
void doh_counts(struct doh *d, uint64_t *queries, uint64_t *hits);

/* Drop every cached answer (tests, benchmarks). */
void doh_flush(struct doh *d);

/* The clock the cache (and the engine's per-worker copies of DoH answers) runs on:
   monotonic milliseconds, or the test's clock. */
uint64_t doh_now_ms(void);
/* Tests only: replace that clock (NULL restores it). Set it before resolvers run. */
void doh_set_clock(uint64_t (*fn)(void));

#endif
