/*
 * dnsmsg: RFC 1035 query builder and answer parser for DNS over HTTPS. See dnsmsg.h.
 */
#include "proxy/wire/dnsmsg.h"

#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#define HDR 12

static uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static char lower(char ch)
{
    return ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch;
}

size_t dnsmsg_query(uint8_t *out, size_t cap, uint16_t id, const char *name, uint16_t qtype)
{
    size_t len = strlen(name);
    if (len > 0 && name[len - 1] == '.')
        len--;
    if (len == 0 || len > 253 || cap < HDR + len + 2 + 4)
        return 0;
    memset(out, 0, HDR);
    out[0] = (uint8_t)(id >> 8), out[1] = (uint8_t)id;
    out[2] = 0x01; /* RD */
    out[5] = 1;    /* QDCOUNT */
    size_t k = HDR;
    for (size_t i = 0; i < len;) {
        size_t j = i;
        while (j < len && name[j] != '.')
            j++;
        if (j == i || j - i > 63)
            return 0; /* empty or over-long label */
        out[k++] = (uint8_t)(j - i);
        for (; i < j; i++) {
            char ch = name[i];
            if (ch <= ' ' || ch == 0x7f)
                return 0;
            out[k++] = (uint8_t)ch;
        }
        i = j + 1;
    }
    out[k++] = 0;
    out[k++] = (uint8_t)(qtype >> 8), out[k++] = (uint8_t)qtype;
    out[k++] = 0, out[k++] = DNSMSG_CLASS_IN;
    return k;
}

/*
 * The name at m[off], lower-cased text without the final dot, into out (DNSMSG_NAME_MAX).
 * *end = the offset after the name where it was written (after its first pointer). Every
 * pointer must point before the segment it is read from, so the walk always moves back.
 */
static int read_name(const uint8_t *m, size_t n, size_t off, char *out, size_t *end)
{
    size_t pos = off, seg = off, len = 0;
    int hops = 0;
    *end = 0;
    out[0] = '\0';
    for (;;) {
        if (pos >= n)
            return DNSMSG_E_SHORT;
        uint8_t c = m[pos];
        if (c == 0) {
            if (!*end)
                *end = pos + 1;
            out[len] = '\0';
            return 0;
        }
        if ((c & 0xc0) == 0xc0) {
            if (pos + 1 >= n)
                return DNSMSG_E_SHORT;
            size_t target = (size_t)(c & 0x3f) << 8 | m[pos + 1];
            if (target >= seg || ++hops > DNSMSG_MAX_HOPS)
                return DNSMSG_E_NAME;
            if (!*end)
                *end = pos + 2;
            pos = seg = target;
            continue;
        }
        if (c & 0xc0)
            return DNSMSG_E_NAME; /* extended label types (RFC 6891 0x40) are not names */
        if (pos + 1 + c > n)
            return DNSMSG_E_SHORT;
        if (len + (len > 0) + c > 253)
            return DNSMSG_E_NAME;
        if (len > 0)
            out[len++] = '.';
        for (size_t i = 0; i < c; i++)
            out[len++] = lower((char)m[pos + 1 + i]);
        pos += 1 + (size_t)c;
    }
}

/* name (as asked: any case, final dot optional) equals decoded (lower case, no dot). */
static int same_name(const char *name, const char *decoded)
{
    size_t a = strlen(name), b = strlen(decoded);
    if (a > 0 && name[a - 1] == '.')
        a--;
    if (a != b)
        return 0;
    for (size_t i = 0; i < a; i++)
        if (lower(name[i]) != decoded[i])
            return 0;
    return 1;
}

/* One resource record's fixed fields. */
struct rr {
    char owner[DNSMSG_NAME_MAX];
    uint16_t type, cls;
    uint32_t ttl;
    size_t rdata, rdlen; /* offset and length of RDATA */
};

/* The record at *off; *off moves past it. */
static int read_rr(const uint8_t *m, size_t n, size_t *off, struct rr *r)
{
    size_t p;
    int rc = read_name(m, n, *off, r->owner, &p);
    if (rc < 0)
        return rc;
    if (p + 10 > n)
        return DNSMSG_E_SHORT;
    r->type = rd16(m + p);
    r->cls = rd16(m + p + 2);
    r->ttl = rd32(m + p + 4);
    if (r->ttl > 0x7fffffffu) /* RFC 2181 8: a TTL with the top bit set means 0 */
        r->ttl = 0;
    r->rdlen = rd16(m + p + 8);
    r->rdata = p + 10;
    if (r->rdata + r->rdlen > n)
        return DNSMSG_E_SHORT;
    *off = r->rdata + r->rdlen;
    return 0;
}

/* The parse position and counts after the header and question. */
struct msg {
    const uint8_t *m;
    size_t n, an_off;
    uint16_t an, ns;
};

static int check_header(const uint8_t *m, size_t n, uint16_t id, const char *name, uint16_t qtype,
                        struct msg *g, uint8_t *rcode)
{
    if (n < HDR)
        return DNSMSG_E_SHORT;
    if (rd16(m) != id || !(m[2] & 0x80) || ((m[2] >> 3) & 0x0f) != 0)
        return DNSMSG_E_HEADER;
    if (m[2] & 0x02)
        return DNSMSG_E_TRUNCATED;
    *rcode = m[3] & 0x0f;
    if (*rcode != 0 && *rcode != 3)
        return DNSMSG_E_RCODE;
    if (rd16(m + 4) != 1)
        return DNSMSG_E_QUESTION;
    char q[DNSMSG_NAME_MAX];
    size_t p;
    int rc = read_name(m, n, HDR, q, &p);
    if (rc < 0)
        return rc;
    if (p + 4 > n)
        return DNSMSG_E_SHORT;
    if (!same_name(name, q) || rd16(m + p) != qtype || rd16(m + p + 2) != DNSMSG_CLASS_IN)
        return DNSMSG_E_QUESTION;
    *g = (struct msg){.m = m, .n = n, .an_off = p + 4, .an = rd16(m + 6), .ns = rd16(m + 8)};
    return 0;
}

static uint32_t min32(uint32_t a, uint32_t b)
{
    return a < b ? a : b;
}

/* Follow the CNAME chain from cur (in place); *ttl = the smallest TTL of its links. */
static int follow_cnames(const struct msg *g, char *cur, uint32_t *ttl)
{
    for (int links = 0;; links++) {
        size_t off = g->an_off;
        int found = 0;
        struct rr r;
        for (uint16_t i = 0; i < g->an && !found; i++) {
            int rc = read_rr(g->m, g->n, &off, &r);
            if (rc < 0)
                return rc;
            found =
                r.type == DNSMSG_TYPE_CNAME && r.cls == DNSMSG_CLASS_IN && same_name(cur, r.owner);
        }
        if (!found)
            return 0;
        if (links >= DNSMSG_MAX_CNAMES)
            return DNSMSG_E_NAME;
        size_t end;
        char target[DNSMSG_NAME_MAX];
        int rc = read_name(g->m, r.rdata + r.rdlen, r.rdata, target, &end);
        if (rc < 0)
            return rc;
        memcpy(cur, target, sizeof target);
        *ttl = min32(*ttl, r.ttl);
    }
}

/* Addresses of qtype owned by cur; then the offset after the answer section in *after. */
static int collect(const struct msg *g, const char *cur, uint16_t qtype, struct dnsmsg_answer *out,
                   uint32_t *ttl, size_t *after)
{
    size_t off = g->an_off, want = qtype == DNSMSG_TYPE_A ? 4 : 16;
    for (uint16_t i = 0; i < g->an; i++) {
        struct rr r;
        int rc = read_rr(g->m, g->n, &off, &r);
        if (rc < 0)
            return rc;
        if (r.type != qtype || r.cls != DNSMSG_CLASS_IN || r.rdlen != want ||
            !same_name(cur, r.owner) || out->n >= DNSMSG_MAX_ADDRS)
            continue;
        struct dnsmsg_addr *a = &out->a[out->n++];
        a->family = qtype == DNSMSG_TYPE_A ? AF_INET : AF_INET6;
        memcpy(a->addr, g->m + r.rdata, want);
        *ttl = min32(*ttl, r.ttl);
    }
    *after = off;
    return 0;
}

/* RFC 2308 negative-caching TTL from an SOA in the authority section at off (0 if none). */
static int negative_ttl(const struct msg *g, size_t off, uint32_t *ttl)
{
    *ttl = 0;
    for (uint16_t i = 0; i < g->ns; i++) {
        struct rr r;
        int rc = read_rr(g->m, g->n, &off, &r);
        if (rc < 0)
            return rc;
        if (r.type != DNSMSG_TYPE_SOA || r.cls != DNSMSG_CLASS_IN)
            continue;
        char skip[DNSMSG_NAME_MAX];
        size_t p, lim = r.rdata + r.rdlen;
        if ((rc = read_name(g->m, lim, r.rdata, skip, &p)) < 0 ||
            (rc = read_name(g->m, lim, p, skip, &p)) < 0)
            return rc;
        if (p + 20 > lim)
            return DNSMSG_E_SHORT;
        uint32_t minimum = rd32(g->m + p + 16);
        *ttl = min32(r.ttl, minimum > 0x7fffffffu ? 0 : minimum);
        return 0;
    }
    return 0;
}

int dnsmsg_parse(const uint8_t *m, size_t n, uint16_t id, const char *name, uint16_t qtype,
                 struct dnsmsg_answer *out)
{
    memset(out, 0, sizeof *out);
    struct msg g;
    uint8_t rcode = 0;
    int rc = check_header(m, n, id, name, qtype, &g, &rcode);
    if (rc < 0)
        return rc;
    char cur[DNSMSG_NAME_MAX];
    size_t nl = strlen(name), after = 0;
    if (nl > 0 && name[nl - 1] == '.')
        nl--;
    if (nl >= sizeof cur)
        return DNSMSG_E_QUESTION;
    for (size_t i = 0; i < nl; i++)
        cur[i] = lower(name[i]);
    cur[nl] = '\0';
    uint32_t ttl = UINT32_MAX;
    if ((rc = follow_cnames(&g, cur, &ttl)) < 0 ||
        (rc = collect(&g, cur, qtype, out, &ttl, &after)) < 0)
        goto fail;
    out->rcode = rcode;
    if (out->n > 0 && rcode == 0) {
        out->ttl = ttl;
        return DNSMSG_OK;
    }
    out->n = 0;
    if ((rc = negative_ttl(&g, after, &out->ttl)) < 0)
        goto fail;
    return rcode == 3 ? DNSMSG_NXDOMAIN : DNSMSG_NODATA;
fail:
    memset(out, 0, sizeof *out);
    return rc;
}

const char *dnsmsg_strerror(int status)
{
    switch (status) {
    case DNSMSG_OK:
        return "ok";
    case DNSMSG_NODATA:
        return "no address of that type";
    case DNSMSG_NXDOMAIN:
        return "no such name (NXDOMAIN)";
    case DNSMSG_E_SHORT:
        return "DNS message cut short";
    case DNSMSG_E_HEADER:
        return "not the response to this query (id, QR or opcode)";
    case DNSMSG_E_TRUNCATED:
        return "DNS response truncated (TC)";
    case DNSMSG_E_RCODE:
        return "DNS server failure or refusal";
    case DNSMSG_E_QUESTION:
        return "DNS response answers another question";
    case DNSMSG_E_NAME:
        return "bad name in DNS message (label type, pointer or length)";
    default:
        return "unknown DNS status";
    }
}
