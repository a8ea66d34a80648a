/*
 * netset: the netset parser, the sort-and-merge and the binary search. See netset.h.
 * Invariant: once finished, lo4/hi4 (and lo6/hi6) hold disjoint, non-adjacent ranges in
 * increasing order, lo <= hi, so the last range starting at or below an address is the only
 * one that can hold it.
 */
#include "proxy/wire/netset.h"

#include "core/alloc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct netset *netset_new(void)
{
    return tg__calloc(1, sizeof(struct netset));
}

void netset_free(struct netset *ns)
{
    if (!ns)
        return;
    tg__free(ns->lo4);
    tg__free(ns->hi4);
    tg__free(ns->lo6);
    tg__free(ns->hi6);
    tg__free(ns);
}

/* ---- 128-bit helpers ---- */

static int u128_cmp(struct netset_u128 a, struct netset_u128 b)
{
    if (a.hi != b.hi)
        return a.hi < b.hi ? -1 : 1;
    return a.lo < b.lo ? -1 : a.lo > b.lo;
}

static struct netset_u128 u128_load(const uint8_t b[16])
{
    struct netset_u128 v = {0, 0};
    for (int i = 0; i < 8; i++) {
        v.hi = v.hi << 8 | b[i];
        v.lo = v.lo << 8 | b[8 + i];
    }
    return v;
}

/* Bits below the top `prefix` bits, as a mask (prefix 0..128). */
static struct netset_u128 u128_host_mask(unsigned prefix)
{
    struct netset_u128 m;
    m.hi = prefix >= 64 ? 0 : (prefix == 0 ? UINT64_MAX : UINT64_MAX >> prefix);
    m.lo = prefix >= 128 ? 0 : (prefix <= 64 ? UINT64_MAX : UINT64_MAX >> (prefix - 64));
    return m;
}

/* ---- appending ---- */

static int grow(void **p, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 64;
    if (nc > NETSET_MAX_RANGES)
        nc = NETSET_MAX_RANGES;
    void *q = tg__realloc(*p, nc * elem);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = nc;
    return 0;
}

static int add4(struct netset *ns, uint32_t lo, uint32_t hi)
{
    if (ns->n4 + ns->n6 >= NETSET_MAX_RANGES)
        return -E2BIG;
    size_t c = ns->cap4;
    if (grow((void **)&ns->lo4, &c, ns->n4, sizeof *ns->lo4) != 0 ||
        grow((void **)&ns->hi4, &ns->cap4, ns->n4, sizeof *ns->hi4) != 0)
        return -ENOMEM;
    ns->lo4[ns->n4] = lo;
    ns->hi4[ns->n4++] = hi;
    return 0;
}

static int add6(struct netset *ns, struct netset_u128 lo, struct netset_u128 hi)
{
    if (ns->n4 + ns->n6 >= NETSET_MAX_RANGES)
        return -E2BIG;
    size_t c = ns->cap6;
    if (grow((void **)&ns->lo6, &c, ns->n6, sizeof *ns->lo6) != 0 ||
        grow((void **)&ns->hi6, &ns->cap6, ns->n6, sizeof *ns->hi6) != 0)
        return -ENOMEM;
    ns->lo6[ns->n6] = lo;
    ns->hi6[ns->n6++] = hi;
    return 0;
}

int netset_add_all(struct netset *dst, const struct netset *src)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < src->n4; i++)
        rc = add4(dst, src->lo4[i], src->hi4[i]);
    for (size_t i = 0; rc == 0 && i < src->n6; i++)
        rc = add6(dst, src->lo6[i], src->hi6[i]);
    return rc;
}

/* ---- parsing ---- */

/* One parsed address: family 4 or 6, value as a number. */
struct addr {
    int family;
    uint32_t v4;
    struct netset_u128 v6;
};

static int line_err(char *err, size_t errlen, const char *name, size_t line, const char *tok,
                    size_t toklen, const char *fmt, ...) __attribute__((format(printf, 7, 8)));

static int line_err(char *err, size_t errlen, const char *name, size_t line, const char *tok,
                    size_t toklen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return -EINVAL;
    char q[65];
    size_t n = toklen < 64 ? toklen : 64;
    for (size_t i = 0; i < n; i++)
        q[i] = tok[i] >= 0x20 && tok[i] < 0x7f ? tok[i] : '?';
    q[n] = '\0';
    int k = snprintf(err, errlen, "%s:%zu: \"%s%s\": ", name, line, q, toklen > 64 ? "..." : "");
    if (k >= 0 && (size_t)k < errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

/* Parse s[0..n) as one IPv4 or IPv6 address. true on success. */
static bool parse_addr(const char *s, size_t n, struct addr *a)
{
    char buf[INET6_ADDRSTRLEN + 1];
    if (n == 0 || n >= sizeof buf)
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (memchr(buf, ':', n)) {
        uint8_t b[16];
        if (inet_pton(AF_INET6, buf, b) != 1)
            return false;
        a->family = 6;
        a->v6 = u128_load(b);
        return true;
    }
    struct in_addr in;
    if (inet_pton(AF_INET, buf, &in) != 1)
        return false;
    a->family = 4;
    a->v4 = ntohl(in.s_addr);
    return true;
}

/* "/N": decimal, 1..3 digits, no sign. -1 when malformed. */
static int parse_prefix(const char *s, size_t n)
{
    if (n == 0 || n > 3)
        return -1;
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* A CIDR "addr/prefix": the range it covers (host bits cleared). */
static int add_cidr(struct netset *ns, const struct addr *a, int prefix)
{
    if (a->family == 4) {
        uint32_t host = prefix >= 32 ? 0 : (prefix == 0 ? UINT32_MAX : UINT32_MAX >> prefix);
        return add4(ns, a->v4 & ~host, a->v4 | host);
    }
    struct netset_u128 m = u128_host_mask((unsigned)prefix);
    struct netset_u128 lo = {a->v6.hi & ~m.hi, a->v6.lo & ~m.lo};
    struct netset_u128 hi = {a->v6.hi | m.hi, a->v6.lo | m.lo};
    return add6(ns, lo, hi);
}

struct where {
    const char *name;
    size_t line;
    char *err;
    size_t errlen;
};

static int add_range(struct netset *ns, const struct where *w, const char *t, size_t n,
                     const char *dash)
{
    struct addr a, b;
    if (!parse_addr(t, (size_t)(dash - t), &a) ||
        !parse_addr(dash + 1, n - (size_t)(dash - t) - 1, &b))
        return line_err(w->err, w->errlen, w->name, w->line, t, n,
                        "expected a range FIRST-LAST of two IPv4 or two IPv6 addresses");
    if (a.family != b.family)
        return line_err(w->err, w->errlen, w->name, w->line, t, n,
                        "a range's two ends must be of one family (IPv4 or IPv6)");
    bool ok = a.family == 4 ? a.v4 <= b.v4 : u128_cmp(a.v6, b.v6) <= 0;
    if (!ok)
        return line_err(w->err, w->errlen, w->name, w->line, t, n,
                        "the range's first address is above its last");
    return a.family == 4 ? add4(ns, a.v4, b.v4) : add6(ns, a.v6, b.v6);
}

/* One trimmed, non-empty entry t[0..n). */
static int parse_entry(struct netset *ns, const struct where *w, const char *t, size_t n)
{
    if (n > NETSET_LINE_MAX)
        return line_err(w->err, w->errlen, w->name, w->line, t, n, "entry longer than %d bytes",
                        NETSET_LINE_MAX);
    for (size_t i = 0; i < n; i++)
        if (t[i] == ' ' || t[i] == '\t')
            return line_err(w->err, w->errlen, w->name, w->line, t, n,
                            "expected one address, CIDR or range per line");
    const char *dash = memchr(t, '-', n);
    if (dash)
        return add_range(ns, w, t, n, dash);
    const char *slash = memchr(t, '/', n);
    size_t alen = slash ? (size_t)(slash - t) : n;
    struct addr a;
    if (!parse_addr(t, alen, &a))
        return line_err(w->err, w->errlen, w->name, w->line, t, n,
                        "expected an IPv4 or IPv6 address, CIDR (ADDR/PREFIX) or range");
    int max = a.family == 4 ? 32 : 128, prefix = max;
    if (slash) {
        prefix = parse_prefix(slash + 1, n - alen - 1);
        if (prefix < 0 || prefix > max)
            return line_err(w->err, w->errlen, w->name, w->line, t, n,
                            "prefix length must be 0..%d for IPv%d", max, a.family);
    }
    return add_cidr(ns, &a, prefix);
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

int netset_parse(struct netset *ns, const char *name, const char *text, size_t len, char *err,
                 size_t errlen)
{
    struct where w = {name, 0, err, errlen};
    size_t pos = 0;
    while (pos < len) {
        const char *line = text + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - line) : len - pos;
        pos += n + (nl != NULL);
        w.line++;
        const char *hash = memchr(line, '#', n);
        if (hash)
            n = (size_t)(hash - line);
        while (n > 0 && is_space(line[n - 1]))
            n--;
        while (n > 0 && is_space(*line))
            line++, n--;
        if (n == 0)
            continue;
        int rc = parse_entry(ns, &w, line, n);
        if (rc == -E2BIG && err && errlen)
            snprintf(err, errlen, "%s:%zu: more than %u ranges in one list", name, w.line,
                     NETSET_MAX_RANGES);
        else if (rc == -ENOMEM && err && errlen)
            snprintf(err, errlen, "%s:%zu: out of memory", name, w.line);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* ---- sort and merge ---- */

struct r4 {
    uint32_t lo, hi;
};
struct r6 {
    struct netset_u128 lo, hi;
};

static int cmp4(const void *a, const void *b)
{
    const struct r4 *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int cmp6(const void *a, const void *b)
{
    const struct r6 *x = a, *y = b;
    return u128_cmp(x->lo, y->lo);
}

/* Shrink an array to n elements (keeps it when realloc fails or n is 0). */
static void *shrink(void *p, size_t n, size_t elem)
{
    void *q = n ? tg__realloc(p, n * elem) : NULL;
    return q ? q : p;
}

static int finish4(struct netset *ns)
{
    if (ns->n4 == 0)
        return 0;
    struct r4 *r = tg__malloc(ns->n4 * sizeof *r);
    size_t n = 0;
    if (!r)
        return -ENOMEM;
    for (size_t i = 0; i < ns->n4; i++)
        r[i] = (struct r4){ns->lo4[i], ns->hi4[i]};
    qsort(r, ns->n4, sizeof *r, cmp4);
    for (size_t i = 0; i < ns->n4; i++) {
        /* merge when overlapping or adjacent (hi + 1 == lo; hi == UINT32_MAX covers all) */
        if (n > 0 && (ns->hi4[n - 1] == UINT32_MAX || r[i].lo <= ns->hi4[n - 1] + 1)) {
            if (r[i].hi > ns->hi4[n - 1])
                ns->hi4[n - 1] = r[i].hi;
            continue;
        }
        ns->lo4[n] = r[i].lo;
        ns->hi4[n++] = r[i].hi;
    }
    tg__free(r);
    ns->n4 = n;
    ns->lo4 = shrink(ns->lo4, ns->n4, sizeof *ns->lo4);
    ns->hi4 = shrink(ns->hi4, ns->n4, sizeof *ns->hi4);
    ns->cap4 = ns->n4;
    return 0;
}

static bool u128_is_max(struct netset_u128 v)
{
    return v.hi == UINT64_MAX && v.lo == UINT64_MAX;
}

static struct netset_u128 u128_inc(struct netset_u128 v)
{
    v.lo++;
    v.hi += v.lo == 0;
    return v;
}

static int finish6(struct netset *ns)
{
    if (ns->n6 == 0)
        return 0;
    struct r6 *r = tg__malloc(ns->n6 * sizeof *r);
    size_t n = 0;
    if (!r)
        return -ENOMEM;
    for (size_t i = 0; i < ns->n6; i++)
        r[i] = (struct r6){ns->lo6[i], ns->hi6[i]};
    qsort(r, ns->n6, sizeof *r, cmp6);
    for (size_t i = 0; i < ns->n6; i++) {
        if (n > 0 &&
            (u128_is_max(ns->hi6[n - 1]) || u128_cmp(r[i].lo, u128_inc(ns->hi6[n - 1])) <= 0)) {
            if (u128_cmp(r[i].hi, ns->hi6[n - 1]) > 0)
                ns->hi6[n - 1] = r[i].hi;
            continue;
        }
        ns->lo6[n] = r[i].lo;
        ns->hi6[n++] = r[i].hi;
    }
    tg__free(r);
    ns->n6 = n;
    ns->lo6 = shrink(ns->lo6, ns->n6, sizeof *ns->lo6);
    ns->hi6 = shrink(ns->hi6, ns->n6, sizeof *ns->hi6);
    ns->cap6 = ns->n6;
    return 0;
}

int netset_finish(struct netset *ns)
{
    int rc = finish4(ns);
    if (rc == 0)
        rc = finish6(ns);
    ns->finished = rc == 0;
    return rc;
}

/* ---- lookup ---- */

bool netset_has4(const struct netset *ns, uint32_t x)
{
    size_t n = ns->n4, base = 0;
    const uint32_t *lo = ns->lo4;
    if (n == 0 || x < lo[0])
        return false;
    /* the last lo <= x: halve the window without a data-dependent branch */
    while (n > 1) {
        size_t half = n / 2;
        base = lo[base + half] <= x ? base + half : base;
        n -= half;
    }
    return x <= ns->hi4[base];
}

bool netset_has6(const struct netset *ns, const uint8_t addr6[16])
{
    struct netset_u128 x = u128_load(addr6);
    size_t n = ns->n6, base = 0;
    const struct netset_u128 *lo = ns->lo6;
    if (n == 0 || u128_cmp(x, lo[0]) < 0)
        return false;
    while (n > 1) {
        size_t half = n / 2;
        base = u128_cmp(lo[base + half], x) <= 0 ? base + half : base;
        n -= half;
    }
    return u128_cmp(x, ns->hi6[base]) <= 0;
}

bool netset_has(const struct netset *ns, const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return netset_has4(ns,
                           ntohl(((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr));
    if (sa->sa_family != AF_INET6)
        return false;
    const uint8_t *b = ((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr.s6_addr;
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(b, mapped, sizeof mapped) == 0)
        return netset_has4(ns, (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 |
                                   (uint32_t)b[14] << 8 | b[15]);
    return netset_has6(ns, b);
}
