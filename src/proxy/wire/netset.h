/*
 * netset: FireHOL netset / ipset text -> sorted, merged address ranges, and the lookup.
 *
 * The format (https://iplists.firehol.org, what mtg's [defense.blocklist] reads): one entry
 * per line, an IPv4 or IPv6 address ("1.2.3.4", "2001:db8::1"), a CIDR ("10.0.0.0/8",
 * "2001:db8::/32") or a range of one family ("1.2.3.0-1.2.3.99", as iprange accepts).
 * "#" starts a comment (whole line or after the entry), blank lines and surrounding spaces,
 * tabs and CRs are ignored. Host bits set under a CIDR mask are cleared ("10.1.2.3/8" is
 * 10.0.0.0/8), as iprange does. Anything else is an error naming the source and line.
 *
 * A struct netset is built in two steps: netset_parse() (any number of times: each call
 * appends) or netset_add_all(), then netset_finish(), which sorts the ranges and merges
 * overlapping and adjacent ones, so the IPv4 and IPv6 tables are disjoint and ordered and
 * netset_has*() is one binary search over them (O(log n), no allocation, no lock). A finished
 * netset is never changed again: it is read-only and may be read by any number of threads.
 *
 * Parsers do no I/O: the caller reads files or downloads (acl.c). This file is fuzzed
 * (fuzz/proxy_netset).
 *
 * Ownership: netset_new() returns a set freed with netset_free() (NULL-safe). Text and names
 * passed in are borrowed for the call. Thread-safety: building is single-threaded; a
 * finished set is immutable.
 */
#ifndef TGPROXY_NETSET_H
#define TGPROXY_NETSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define NETSET_MAX_RANGES (1u << 24) /* entries per set, both families (256 MiB of IPv6) */
#define NETSET_LINE_MAX   128        /* bytes of one entry after trimming comments/space */

/* An IPv6 address as a 128-bit number, most significant half first. */
struct netset_u128 {
    uint64_t hi, lo;
};

struct netset {
    uint32_t *lo4, *hi4; /* IPv4 ranges [lo4[i], hi4[i]], host byte order */
    size_t n4, cap4;
    struct netset_u128 *lo6, *hi6;
    size_t n6, cap6;
    bool finished; /* sorted and merged: lookups allowed, no more appends */
};

struct netset *netset_new(void);
void netset_free(struct netset *ns); /* NULL-safe */

/*
 * Append the entries of a netset text (len bytes, need not be NUL-terminated) to ns, which
 * must not be finished yet.
 *
 * name  the source for messages ("/etc/tgproxy/block.netset", an URL), borrowed.
 * err   on failure, one line: "name:LINE: what and why" (the entry quoted, at most 64
 *       bytes, unprintable bytes shown as '?').
 * Returns 0; -EINVAL for a bad line (ns keeps the lines before it: the caller discards ns);
 * -E2BIG past NETSET_MAX_RANGES; -ENOMEM.
 */
int netset_parse(struct netset *ns, const char *name, const char *text, size_t len, char *err,
                 size_t errlen);

/* Append every range of src (finished or not) to dst (not finished). 0, -E2BIG or -ENOMEM. */
int netset_add_all(struct netset *dst, const struct netset *src);

/* Sort and merge; shrink the arrays to fit. ns is read-only afterwards. 0 or -ENOMEM (then
   ns is unusable for lookups: free it). */
int netset_finish(struct netset *ns);

/* Membership in a finished set. addr4 in host byte order; addr6 16 bytes, network order. */
bool netset_has4(const struct netset *ns, uint32_t addr4);
bool netset_has6(const struct netset *ns, const uint8_t addr6[16]);
/* A socket address (AF_INET, or AF_INET6 where a v4-mapped address counts as IPv4);
   false for any other family. */
bool netset_has(const struct netset *ns, const struct sockaddr *sa);

/* Ranges after merging (finished), per family. */
static inline size_t netset_count(const struct netset *ns)
{
    return ns ? ns->n4 + ns->n6 : 0;
}

#endif
