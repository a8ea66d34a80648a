/*
 * dnsmsg: DNS messages in RFC 1035 wire format, for DNS over HTTPS (RFC 8484 carries them
 * as application/dns-message): the query for one name and type, and the answer's A / AAAA
 * addresses with their TTL.
 *
 * dnsmsg_parse() checks that the message answers the query (same id, QR set, opcode 0, not
 * truncated, the question echoed), follows the CNAME chain from the asked name (at most
 * DNSMSG_MAX_CNAMES links), collects the addresses of the asked type owned by the last name
 * of the chain, and takes the smallest TTL of the records used. A negative answer (NXDOMAIN,
 * or no address) carries the negative-caching TTL of RFC 2308 when the authority section
 * has an SOA: min(SOA TTL, SOA MINIMUM). Names are decoded with compression pointers, which
 * must point strictly backwards (so no loop is possible) and at most DNSMSG_MAX_HOPS per
 * name; every read is bounds-checked.
 *
 * Pure computation over caller buffers: no I/O, no allocation. Thread-safety: reentrant.
 * Fuzzed by fuzz/proxy_dnsmsg.
 */
#ifndef TGPROXY_DNSMSG_H
#define TGPROXY_DNSMSG_H

#include <stddef.h>
#include <stdint.h>

#define DNSMSG_TYPE_A     1
#define DNSMSG_TYPE_CNAME 5
#define DNSMSG_TYPE_SOA   6
#define DNSMSG_TYPE_AAAA  28
#define DNSMSG_CLASS_IN   1

#define DNSMSG_NAME_MAX   255            /* text form, without the root's dot, plus NUL: 253 + 2 */
#define DNSMSG_QUERY_MAX  (12 + 255 + 4) /* header + longest wire name + QTYPE/QCLASS */
#define DNSMSG_MAX_ADDRS  8              /* addresses kept per answer */
#define DNSMSG_MAX_CNAMES 8              /* CNAME links followed */
#define DNSMSG_MAX_HOPS   32             /* compression pointers followed per name */

/* Results of dnsmsg_parse; failures are negative. */
enum dnsmsg_status {
    DNSMSG_OK = 0,           /* at least one address */
    DNSMSG_NODATA = 1,       /* the name exists but has no address of this type */
    DNSMSG_NXDOMAIN = 2,     /* the name does not exist (RCODE 3) */
    DNSMSG_E_SHORT = -1,     /* a field runs past the end of the message */
    DNSMSG_E_HEADER = -2,    /* not a response, other opcode, or id mismatch */
    DNSMSG_E_TRUNCATED = -3, /* TC set: the answer is incomplete */
    DNSMSG_E_RCODE = -4,     /* a server failure or refusal (RCODE other than 0 and 3) */
    DNSMSG_E_QUESTION = -5,  /* the question is not the one asked */
    DNSMSG_E_NAME = -6,      /* a bad name: label type, pointer forward or looping, too long */
};

struct dnsmsg_addr {
    uint8_t family; /* AF_INET or AF_INET6 */
    uint8_t addr[16];
};

struct dnsmsg_answer {
    size_t n; /* addresses in a[] */
    struct dnsmsg_addr a[DNSMSG_MAX_ADDRS];
    uint32_t ttl;  /* seconds: smallest TTL used; negative-caching TTL, 0 if none given */
    uint8_t rcode; /* RCODE of the response */
};

/*
 * A query with recursion desired for name (text, with or without the final dot; labels
 * 1..63 bytes, at most 253 bytes in all) and qtype, class IN, into out[0..cap). The id
 * is the caller's (RFC 8484 recommends 0 for cache-friendly GET requests). Returns the
 * length, or 0 when name is not a valid host name for DNS or cap is too small.
 */
size_t dnsmsg_query(uint8_t *out, size_t cap, uint16_t id, const char *name, uint16_t qtype);

/*
 * The answer in m[0..n) to the query (id, name, qtype). Returns an enum dnsmsg_status;
 * *out is filled for DNSMSG_OK, NODATA and NXDOMAIN, zeroed otherwise.
 */
int dnsmsg_parse(const uint8_t *m, size_t n, uint16_t id, const char *name, uint16_t qtype,
                 struct dnsmsg_answer *out);

/* A short reason for a status. Never NULL. */
const char *dnsmsg_strerror(int status);

#endif
