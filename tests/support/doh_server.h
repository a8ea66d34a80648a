/*
 * doh_server: a DNS-over-HTTPS server for tests (libmicrohttpd with TLS), answering from a
 * table. It accepts RFC 8484 POST requests only: Content-Type application/dns-message on the
 * path /dns-query (another path gets 404, another method 405, another type 415), and
 * records the form of the last request so a test can check what the client sent. On
 * request it also answers the same table over plain UDP and over TLS (RFC 7858: two-byte
 * length, then the message; one client at a time, each until it closes or is idle for 2 s),
 * on ports of their own.
 *
 * Answers, for a question (name, type):
 *   - a record of the table with rcode != 0 for that name: that RCODE, no answer (an SOA
 *     with ttl in the authority section when ttl > 0: RFC 2308 negative caching);
 *   - else CNAME records of the name are followed in the table (at most 16 links) and put
 *     in the answer, then every record of the asked type owned by the last name;
 *   - no record at all for the name: NXDOMAIN; records but none of that type: NODATA;
 *   - rcode DOHSRV_BAD_ID: a well-formed answer whose id is not the query's.
 *
 * Ownership: the table and cert/key are borrowed and must outlive the server. Thread-safety:
 * the counters may be read from any thread while the server runs.
 */
#ifndef TGKIT_TEST_DOH_SERVER_H
#define TGKIT_TEST_DOH_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Record rcodes that are not RCODEs but behaviours of the server for the record's name: */
#define DOHSRV_BAD_ID      255 /* answer with another id than the question's */
#define DOHSRV_DROP_FIRST  254 /* UDP: ignore the server's first question for it (lost) */
#define DOHSRV_CLOSE_AFTER 253 /* TLS: close the connection after answering for it */

struct dohsrv_record {
    const char *name; /* lower case, no final dot */
    uint16_t type;    /* 1 A, 28 AAAA, 5 CNAME (ignored when rcode != 0) */
    const char *data; /* IPv4 / IPv6 text, or the CNAME target */
    uint32_t ttl;
    uint8_t rcode; /* 0, or 2 SERVFAIL, 3 NXDOMAIN, 5 REFUSED, or a DOHSRV_ behaviour (the
                      name's other records then give the answer) */
};

struct dohsrv_opts {
    const char *addr;    /* "127.0.0.1" or "::1" */
    const char *crt_pem; /* server certificate and key (PEM) */
    const char *key_pem;
    const struct dohsrv_record *records;
    size_t nrecords;
    bool udp; /* also plain DNS over UDP on addr (dohsrv_udp_port) */
    bool dot; /* also DNS over TLS on addr (dohsrv_dot_port), with the same certificate */
};

struct dohsrv;

/* Start on addr, a free port into *port. NULL on failure. */
struct dohsrv *dohsrv_start(const struct dohsrv_opts *o, uint16_t *port);
void dohsrv_stop(struct dohsrv *s); /* NULL-safe */

/* Ports of the UDP and TLS listeners (0 when not asked for). */
uint16_t dohsrv_udp_port(const struct dohsrv *s);
uint16_t dohsrv_dot_port(const struct dohsrv *s);
/* TCP connections accepted so far (a client that keeps its connection alive opens one). */
unsigned dohsrv_connections(struct dohsrv *s);
/* UDP questions ignored on purpose (DOHSRV_DROP_FIRST). */
unsigned dohsrv_dropped(struct dohsrv *s);
/* DNS questions answered so far (all names), and those for one name. */
unsigned dohsrv_queries(struct dohsrv *s);
unsigned dohsrv_queries_for(struct dohsrv *s, const char *name);
/* The last request's form: "POST /dns-query ct=application/dns-message
   accept=application/dns-message type=1 name=example.org", "UDP type=1 name=..." or
   "TLS type=1 name=..." (into out[0..cap)). */
void dohsrv_last(struct dohsrv *s, char *out, size_t cap);

#endif
