/*
 * proxy/dnsmsg: the DNS query builder and answer parser (RFC 1035 wire format, as DNS over
 * HTTPS carries it). Responses are assembled here record by record, with compression
 * pointers where a real server puts them, and each is checked for the exact status,
 * addresses and TTL; malformed ones for the exact reason.
 */
#include "tgtest.h"

#include "proxy/wire/dnsmsg.h"

#include <arpa/inet.h>

/* A response being assembled. */
struct msgb {
    uint8_t b[1024];
    size_t n;
};

static void put(struct msgb *m, const void *p, size_t n)
{
    assert_true(m->n + n <= sizeof m->b);
    memcpy(m->b + m->n, p, n);
    m->n += n;
}

static void put16(struct msgb *m, uint16_t v)
{
    uint8_t b[2] = {(uint8_t)(v >> 8), (uint8_t)v};
    put(m, b, 2);
}

static void put32(struct msgb *m, uint32_t v)
{
    put16(m, (uint16_t)(v >> 16));
    put16(m, (uint16_t)v);
}

static void put_name(struct msgb *m, const char *name)
{
    for (const char *s = name; *s;) {
        const char *dot = strchr(s, '.');
        size_t n = dot ? (size_t)(dot - s) : strlen(s);
        uint8_t len = (uint8_t)n;
        put(m, &len, 1);
        put(m, s, n);
        s += n + (dot ? 1 : 0);
    }
    put(m, "", 1);
}

/* Header + the question (example.com, qtype), as the server echoes it (offset 12). */
static void start(struct msgb *m, uint16_t id, uint16_t flags, uint16_t qtype, uint16_t an,
                  uint16_t ns)
{
    m->n = 0;
    put16(m, id), put16(m, flags), put16(m, 1), put16(m, an), put16(m, ns), put16(m, 0);
    put_name(m, "example.com");
    put16(m, qtype), put16(m, DNSMSG_CLASS_IN);
}

/* A record whose owner is a pointer (0 = the question's name) or a full name. */
static void rr(struct msgb *m, const char *owner, uint16_t type, uint32_t ttl, const void *rd,
               size_t rdlen)
{
    if (owner)
        put_name(m, owner);
    else
        put16(m, 0xc00c);
    put16(m, type), put16(m, DNSMSG_CLASS_IN), put32(m, ttl), put16(m, (uint16_t)rdlen);
    put(m, rd, rdlen);
}

static const uint8_t v4[4] = {93, 184, 216, 34}, v4b[4] = {10, 0, 0, 1};

static void test_query(void **state)
{
    (void)state;
    uint8_t q[DNSMSG_QUERY_MAX];
    size_t n = dnsmsg_query(q, sizeof q, 0xbeef, "Example.com.", DNSMSG_TYPE_AAAA);
    static const uint8_t want[] = {0xbe, 0xef, 0x01, 0x00, 0,   1,   0,   0,   0,   0,
                                   0,    0,    7,    'E',  'x', 'a', 'm', 'p', 'l', 'e',
                                   3,    'c',  'o',  'm',  0,   0,   28,  0,   1};
    assert_int_equal(n, sizeof want);
    assert_memory_equal(q, want, n);
    char label64[80], long_name[300];
    memset(label64, 'a', 64), label64[64] = '\0';
    for (size_t i = 0; i < 127; i++)
        memcpy(long_name + 2 * i, "a.", 2);
    long_name[253] = 'a', long_name[254] = '\0'; /* 254 characters: one too many */
    const char *bad[] = {"", ".", "a..b", label64, long_name, "sp ace.com"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(dnsmsg_query(q, sizeof q, 1, bad[i], DNSMSG_TYPE_A), 0);
    long_name[253] = '\0'; /* 253 characters, the most there may be */
    assert_true(dnsmsg_query(q, sizeof q, 1, long_name, DNSMSG_TYPE_A) > 0);
    assert_int_equal(dnsmsg_query(q, 20, 1, "example.com", DNSMSG_TYPE_A), 0);
}

static void test_answers(void **state)
{
    (void)state;
    struct msgb m;
    struct dnsmsg_answer a;
    /* Two A records behind compression pointers; the TTL is the smaller one. */
    start(&m, 7, 0x8180, DNSMSG_TYPE_A, 2, 0);
    rr(&m, NULL, DNSMSG_TYPE_A, 300, v4, 4);
    rr(&m, NULL, DNSMSG_TYPE_A, 60, v4b, 4);
    assert_int_equal(dnsmsg_parse(m.b, m.n, 7, "EXAMPLE.com.", DNSMSG_TYPE_A, &a), DNSMSG_OK);
    assert_int_equal(a.n, 2);
    assert_int_equal(a.ttl, 60);
    assert_int_equal(a.a[0].family, AF_INET);
    assert_memory_equal(a.a[0].addr, v4, 4);
    assert_memory_equal(a.a[1].addr, v4b, 4);
    /* CNAME chain, the address record first, the CNAME after it; a stray A of another name
       and a record of the wrong size are ignored. */
    start(&m, 8, 0x8180, DNSMSG_TYPE_A, 4, 0);
    rr(&m, "edge.cdn.net", DNSMSG_TYPE_A, 30, v4b, 4);
    rr(&m, "other.net", DNSMSG_TYPE_A, 1, v4, 4);
    rr(&m, "edge.cdn.net", DNSMSG_TYPE_A, 5, v4, 3);
    struct msgb target = {0};
    put_name(&target, "edge.cdn.net");
    rr(&m, NULL, DNSMSG_TYPE_CNAME, 600, target.b, target.n);
    assert_int_equal(dnsmsg_parse(m.b, m.n, 8, "example.com", DNSMSG_TYPE_A, &a), DNSMSG_OK);
    assert_int_equal(a.n, 1);
    assert_memory_equal(a.a[0].addr, v4b, 4);
    assert_int_equal(a.ttl, 30);
    /* AAAA, with a TTL whose top bit is set (RFC 2181: 0). */
    uint8_t v6[16];
    inet_pton(AF_INET6, "2001:db8::1", v6);
    start(&m, 9, 0x8180, DNSMSG_TYPE_AAAA, 1, 0);
    rr(&m, NULL, DNSMSG_TYPE_AAAA, 0x80000000u, v6, 16);
    assert_int_equal(dnsmsg_parse(m.b, m.n, 9, "example.com", DNSMSG_TYPE_AAAA, &a), DNSMSG_OK);
    assert_int_equal(a.a[0].family, AF_INET6);
    assert_memory_equal(a.a[0].addr, v6, 16);
    assert_int_equal(a.ttl, 0);
}

static void test_negative(void **state)
{
    (void)state;
    struct msgb m, soa = {0};
    struct dnsmsg_answer a;
    put16(&soa, 0xc00c); /* MNAME: a pointer to the question (RDATA may compress) */
    put_name(&soa, "hostmaster.example.com");
    put32(&soa, 1), put32(&soa, 2), put32(&soa, 3), put32(&soa, 4), put32(&soa, 120);
    start(&m, 1, 0x8183, DNSMSG_TYPE_A, 0, 1);
    rr(&m, NULL, DNSMSG_TYPE_SOA, 900, soa.b, soa.n);
    assert_int_equal(dnsmsg_parse(m.b, m.n, 1, "example.com", DNSMSG_TYPE_A, &a), DNSMSG_NXDOMAIN);
    assert_int_equal(a.ttl, 120);
    assert_int_equal(a.n, 0);
    start(&m, 1, 0x8180, DNSMSG_TYPE_A, 1, 1);
    static const uint8_t zero16[16] = {0};
    rr(&m, NULL, DNSMSG_TYPE_AAAA, 5, zero16, 16); /* other type only */
    rr(&m, NULL, DNSMSG_TYPE_SOA, 30, soa.b, soa.n);
    assert_int_equal(dnsmsg_parse(m.b, m.n, 1, "example.com", DNSMSG_TYPE_A, &a), DNSMSG_NODATA);
    assert_int_equal(a.ttl, 30);
    start(&m, 1, 0x8180, DNSMSG_TYPE_A, 0, 0);
    assert_int_equal(dnsmsg_parse(m.b, m.n, 1, "example.com", DNSMSG_TYPE_A, &a), DNSMSG_NODATA);
    assert_int_equal(a.ttl, 0);
}

static void test_malformed(void **state)
{
    (void)state;
    struct msgb m;
    struct dnsmsg_answer a;
    start(&m, 2, 0x8180, DNSMSG_TYPE_A, 1, 0);
    rr(&m, NULL, DNSMSG_TYPE_A, 1, v4, 4);
    assert_int_equal(dnsmsg_parse(m.b, m.n, 3, "example.com", DNSMSG_TYPE_A, &a), DNSMSG_E_HEADER);
    assert_int_equal(dnsmsg_parse(m.b, m.n, 2, "example.org", DNSMSG_TYPE_A, &a),
                     DNSMSG_E_QUESTION);
    assert_int_equal(dnsmsg_parse(m.b, m.n, 2, "example.com", DNSMSG_TYPE_AAAA, &a),
                     DNSMSG_E_QUESTION);
    for (size_t cut = 0; cut < m.n; cut++) { /* every prefix is cut short, never read past */
        int r = dnsmsg_parse(m.b, cut, 2, "example.com", DNSMSG_TYPE_A, &a);
        assert_true(r == DNSMSG_E_SHORT);
        assert_int_equal(a.n, 0);
    }
    m.b[2] = 0x00; /* a query, not a response */
    assert_int_equal(dnsmsg_parse(m.b, m.n, 2, "example.com", DNSMSG_TYPE_A, &a), DNSMSG_E_HEADER);
    m.b[2] = 0x82; /* TC */
    assert_int_equal(dnsmsg_parse(m.b, m.n, 2, "example.com", DNSMSG_TYPE_A, &a),
                     DNSMSG_E_TRUNCATED);
    m.b[2] = 0x81, m.b[3] = 0x82; /* SERVFAIL */
    assert_int_equal(dnsmsg_parse(m.b, m.n, 2, "example.com", DNSMSG_TYPE_A, &a), DNSMSG_E_RCODE);
    /* A pointer to itself, a forward pointer, two pointers that point at each other. */
    static const uint16_t owners[] = {0xc000 | 29, 0xc000 | 40};
    for (size_t i = 0; i < 2; i++) {
        start(&m, 2, 0x8180, DNSMSG_TYPE_A, 1, 0);
        put16(&m, owners[i]);
        put16(&m, DNSMSG_TYPE_A), put16(&m, 1), put32(&m, 1), put16(&m, 4), put(&m, v4, 4);
        assert_int_equal(dnsmsg_parse(m.b, m.n, 2, "example.com", DNSMSG_TYPE_A, &a),
                         DNSMSG_E_NAME);
    }
    start(&m, 2, 0x8180, DNSMSG_TYPE_A, 2, 0);
    put16(&m, 0xc000 | 45); /* at 29: points at the next record's owner, at 45 */
    put16(&m, DNSMSG_TYPE_A), put16(&m, 1), put32(&m, 1), put16(&m, 4), put(&m, v4, 4);
    put16(&m, 0xc000 | 29); /* at 45: back at 29 */
    put16(&m, DNSMSG_TYPE_A), put16(&m, 1), put32(&m, 1), put16(&m, 4), put(&m, v4, 4);
    assert_int_equal(dnsmsg_parse(m.b, m.n, 2, "example.com", DNSMSG_TYPE_A, &a), DNSMSG_E_NAME);
    /* A CNAME loop: example.com -> a.net -> example.com. */
    struct msgb t1 = {0}, t2 = {0};
    put_name(&t1, "a.net");
    put_name(&t2, "example.com");
    start(&m, 2, 0x8180, DNSMSG_TYPE_A, 2, 0);
    rr(&m, NULL, DNSMSG_TYPE_CNAME, 1, t1.b, t1.n);
    rr(&m, "a.net", DNSMSG_TYPE_CNAME, 1, t2.b, t2.n);
    assert_int_equal(dnsmsg_parse(m.b, m.n, 2, "example.com", DNSMSG_TYPE_A, &a), DNSMSG_E_NAME);
    assert_non_null(dnsmsg_strerror(DNSMSG_E_NAME));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_query),
        cmocka_unit_test(test_answers),
        cmocka_unit_test(test_negative),
        cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
