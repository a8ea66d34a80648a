/*
 * proxy/netset: the FireHOL netset parser and the range lookup. Table-driven parse cases
 * (what each line covers, and the file:line error for each bad one), then the lookup
 * against a brute-force scan of the unmerged ranges, on random overlapping IPv4 and IPv6
 * ranges, probing every range edge and random addresses.
 */
#include "tgtest.h"

#include "proxy/wire/netset.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>

static uint32_t ip4(const char *s)
{
    struct in_addr a;
    assert_int_equal(inet_pton(AF_INET, s, &a), 1);
    return ntohl(a.s_addr);
}

static struct netset *parse_ok(const char *text)
{
    struct netset *ns = netset_new();
    assert_non_null(ns);
    char err[256] = "";
    int rc = netset_parse(ns, "t.netset", text, strlen(text), err, sizeof err);
    if (rc != 0)
        fail_msg("%s: rc %d: %s", text, rc, err);
    assert_int_equal(netset_finish(ns), 0);
    return ns;
}

static bool has6(const struct netset *ns, const char *s)
{
    uint8_t b[16];
    assert_int_equal(inet_pton(AF_INET6, s, b), 1);
    return netset_has6(ns, b);
}

static void test_entries(void **state)
{
    (void)state;
    static const struct {
        const char *text, *in, *out; /* in: an address covered; out: one not covered */
    } t[] = {
        {"1.2.3.4\n", "1.2.3.4", "1.2.3.5"},
        {"10.0.0.0/8", "10.255.255.255", "11.0.0.0"},
        {"10.1.2.3/8\n", "10.0.0.0", "9.255.255.255"}, /* host bits cleared */
        {"0.0.0.0/0", "255.255.255.255", NULL},
        {"192.168.1.0/24 # lan\n", "192.168.1.77", "192.168.2.0"},
        {"# header\n\n   \t\n5.6.7.8/32\r\n", "5.6.7.8", "5.6.7.9"},
        {"1.1.1.0-1.1.1.9", "1.1.1.9", "1.1.1.10"},
        {"\t  8.8.8.8  \t# dns\r\n", "8.8.8.8", "8.8.4.4"},
        {"255.255.255.255", "255.255.255.255", "255.255.255.254"},
        {"1.0.0.0/31\n1.0.0.2/31\n1.0.0.4", "1.0.0.4", "1.0.0.5"}, /* adjacent: merged */
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct netset *ns = parse_ok(t[i].text);
        if (!netset_has4(ns, ip4(t[i].in)))
            fail_msg("%s: %s not covered", t[i].text, t[i].in);
        if (t[i].out && netset_has4(ns, ip4(t[i].out)))
            fail_msg("%s: %s covered", t[i].text, t[i].out);
        netset_free(ns);
    }
    struct netset *ns = parse_ok("1.0.0.0/31\n1.0.0.2/31\n1.0.0.4\n1.0.0.3\n");
    assert_int_equal(netset_count(ns), 1); /* merged into 1.0.0.0-1.0.0.4 */
    netset_free(ns);
}

static void test_ipv6(void **state)
{
    (void)state;
    struct netset *ns = parse_ok("2001:db8::/32\n::1\nfe80::1-fe80::ff\n"
                                 "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff\n" /* inside: merged */
                                 "::ffff:0:0/96 # v4-mapped entries stay IPv6\n"
                                 "ff00::/8\n::/128\n");
    assert_true(has6(ns, "2001:db8::"));
    assert_true(has6(ns, "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"));
    assert_false(has6(ns, "2001:db9::"));
    assert_false(has6(ns, "2001:db7:ffff:ffff:ffff:ffff:ffff:ffff"));
    assert_true(has6(ns, "::1"));
    assert_false(has6(ns, "::2"));
    assert_true(has6(ns, "::"));
    assert_true(has6(ns, "fe80::80"));
    assert_false(has6(ns, "fe80::100"));
    assert_true(has6(ns, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"));
    assert_false(netset_has4(ns, ip4("1.2.3.4"))); /* the families are separate tables */
    assert_int_equal(ns->n6, 5);                   /* :: and ::1 touch: one range */
    netset_free(ns);

    /* a socket address: IPv4, IPv6 and v4-mapped IPv6 (counted as IPv4) */
    ns = parse_ok("127.0.0.2\n::1\n");
    struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000002)};
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6};
    assert_true(netset_has(ns, (struct sockaddr *)&a4));
    a4.sin_addr.s_addr = htonl(0x7f000001);
    assert_false(netset_has(ns, (struct sockaddr *)&a4));
    inet_pton(AF_INET6, "::1", &a6.sin6_addr);
    assert_true(netset_has(ns, (struct sockaddr *)&a6));
    inet_pton(AF_INET6, "::ffff:127.0.0.2", &a6.sin6_addr);
    assert_true(netset_has(ns, (struct sockaddr *)&a6));
    inet_pton(AF_INET6, "::ffff:127.0.0.1", &a6.sin6_addr);
    assert_false(netset_has(ns, (struct sockaddr *)&a6));
    struct sockaddr un = {.sa_family = AF_UNIX};
    assert_false(netset_has(ns, &un));
    netset_free(ns);

    ns = parse_ok(""); /* empty: nothing covered, no crash */
    assert_false(has6(ns, "::1"));
    assert_false(netset_has4(ns, 0));
    netset_free(ns);
}

static void test_errors(void **state)
{
    (void)state;
    static const struct {
        const char *text, *err;
    } t[] = {
        {"1.2.3.4\n1.2.3\n", "list.txt:2: \"1.2.3\": expected an IPv4 or IPv6 address"},
        {"1.2.3.4/33", "list.txt:1: \"1.2.3.4/33\": prefix length must be 0..32 for IPv4"},
        {"::1/129", "list.txt:1: \"::1/129\": prefix length must be 0..128 for IPv6"},
        {"1.2.3.4/", "list.txt:1: \"1.2.3.4/\": prefix length"},
        {"1.2.3.4/-1", "list.txt:1: \"1.2.3.4/-1\": expected a range"},
        {"1.2.3.4/ 8", "list.txt:1: \"1.2.3.4/ 8\": expected one address"},
        {"# c\n\n1.2.3.4 5.6.7.8", "list.txt:3: \"1.2.3.4 5.6.7.8\": expected one address"},
        {"1.2.3.9-1.2.3.1", "list.txt:1: \"1.2.3.9-1.2.3.1\": the range's first address is above"},
        {"1.2.3.4-::1", "list.txt:1: \"1.2.3.4-::1\": a range's two ends must be of one family"},
        {"example.com", "list.txt:1: \"example.com\": expected an IPv4 or IPv6"},
        {"01.2.3.4", "list.txt:1: \"01.2.3.4\": expected an IPv4"},
        {"1.2.3.4\r\n\x01\x02", "list.txt:2: \"??\": expected"},
        {"1.2.3.4/8/8", "list.txt:1: \"1.2.3.4/8/8\": prefix length"},
        {"::1::2", "list.txt:1: \"::1::2\": expected"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct netset *ns = netset_new();
        char err[256] = "";
        int rc = netset_parse(ns, "list.txt", t[i].text, strlen(t[i].text), err, sizeof err);
        if (rc != -EINVAL || strncmp(err, t[i].err, strlen(t[i].err)) != 0)
            fail_msg("%zu: rc %d err \"%s\", expected \"%s...\"", i, rc, err, t[i].err);
        netset_free(ns);
    }
    /* an over-long entry is refused before it is looked at */
    char longline[400];
    memset(longline, '1', sizeof longline - 1);
    longline[sizeof longline - 1] = '\0';
    struct netset *ns = netset_new();
    char err[256];
    assert_int_equal(netset_parse(ns, "l", longline, strlen(longline), err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "l:1: \"1111"));
    assert_non_null(strstr(err, "...\": entry longer than 128 bytes"));
    netset_free(ns);
}

/* xorshift64*: a reproducible stream for the random cases. */
static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static void test_random_v4(void **state)
{
    (void)state;
    enum { N = 3000, PROBES = 20000 };
    uint32_t *lo = malloc(N * sizeof *lo), *hi = malloc(N * sizeof *hi);
    assert_non_null(lo);
    assert_non_null(hi);
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    struct netset *ns = netset_new();
    char line[64], err[128];
    for (size_t i = 0; i < N; i++) {
        /* a small address space (2^20) so ranges overlap and touch often */
        uint32_t a = (uint32_t)(rnd(&seed) & 0xfffff), len = (uint32_t)(rnd(&seed) % 300);
        lo[i] = a;
        hi[i] = a + len;
        struct in_addr x = {htonl(lo[i])}, y = {htonl(hi[i])};
        char s1[16], s2[16];
        inet_ntop(AF_INET, &x, s1, sizeof s1);
        inet_ntop(AF_INET, &y, s2, sizeof s2);
        int n = snprintf(line, sizeof line, "%s-%s\n", s1, s2);
        assert_int_equal(netset_parse(ns, "r", line, (size_t)n, err, sizeof err), 0);
    }
    assert_int_equal(netset_finish(ns), 0);
    assert_true(ns->n4 <= N);
    for (size_t k = 0; k < ns->n4; k++) /* disjoint, ordered, not adjacent */
        assert_true(ns->lo4[k] <= ns->hi4[k] && (k == 0 || ns->hi4[k - 1] + 1 < ns->lo4[k]));
    for (size_t p = 0; p < PROBES + 3 * N; p++) {
        uint32_t x = p < PROBES              ? (uint32_t)(rnd(&seed) % 0x100200)
                     : (p - PROBES) % 3 == 0 ? lo[(p - PROBES) / 3]
                     : (p - PROBES) % 3 == 1 ? hi[(p - PROBES) / 3] + 1
                                             : lo[(p - PROBES) / 3] - 1;
        bool want = false;
        for (size_t i = 0; i < N && !want; i++)
            want = x >= lo[i] && x <= hi[i];
        if (netset_has4(ns, x) != want)
            fail_msg("0x%08x: lookup %d, brute force %d", x, !want, want);
    }
    netset_free(ns);
    free(lo);
    free(hi);
}

static void test_random_v6(void **state)
{
    (void)state;
    enum { N = 1000, PROBES = 5000 };
    uint8_t(*base)[16] = malloc(N * sizeof *base);
    int *plen = malloc(N * sizeof *plen);
    assert_non_null(base);
    assert_non_null(plen);
    uint64_t seed = 12345;
    struct netset *ns = netset_new();
    for (size_t i = 0; i < N; i++) {
        memset(base[i], 0, 16);
        base[i][0] = 0x20;
        base[i][1] = (uint8_t)(rnd(&seed) & 3); /* a few /16s so prefixes nest */
        for (int b = 2; b < 16; b++)
            base[i][b] = (uint8_t)rnd(&seed);
        plen[i] = 16 + (int)(rnd(&seed) % 113);
        char s[INET6_ADDRSTRLEN], line[80], err[128];
        inet_ntop(AF_INET6, base[i], s, sizeof s);
        int n = snprintf(line, sizeof line, "%s/%d\n", s, plen[i]);
        assert_int_equal(netset_parse(ns, "r6", line, (size_t)n, err, sizeof err), 0);
        for (int b = plen[i]; b < 128; b++) /* keep the network address for the oracle */
            base[i][b / 8] &= (uint8_t) ~(0x80 >> (b % 8));
    }
    assert_int_equal(netset_finish(ns), 0);
    for (size_t p = 0; p < PROBES + N; p++) {
        uint8_t x[16];
        if (p < PROBES) {
            x[0] = 0x20;
            x[1] = (uint8_t)(rnd(&seed) & 3);
            for (int b = 2; b < 16; b++)
                x[b] = (uint8_t)rnd(&seed);
        } else {
            memcpy(x, base[p - PROBES], 16);
        }
        bool want = false;
        for (size_t i = 0; i < N && !want; i++) {
            bool in = true;
            for (int b = 0; b < plen[i] && in; b++)
                in = ((x[b / 8] ^ base[i][b / 8]) & (0x80 >> (b % 8))) == 0;
            want = in;
        }
        if (netset_has6(ns, x) != want)
            fail_msg("probe %zu: lookup %d, brute force %d", p, !want, want);
    }
    netset_free(ns);
    free(base);
    free(plen);
}

static void test_add_all(void **state)
{
    (void)state;
    struct netset *a = parse_ok("1.0.0.0/24\n::1\n"), *b = parse_ok("1.0.1.0/24\n::2\n");
    struct netset *u = netset_new();
    assert_int_equal(netset_add_all(u, a), 0);
    assert_int_equal(netset_add_all(u, b), 0);
    assert_int_equal(netset_finish(u), 0);
    assert_int_equal(u->n4, 1); /* 1.0.0.0/23 */
    assert_int_equal(u->n6, 1); /* ::1-::2 */
    assert_true(netset_has4(u, ip4("1.0.1.255")));
    netset_free(a);
    netset_free(b);
    netset_free(u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_entries),   cmocka_unit_test(test_ipv6),
        cmocka_unit_test(test_errors),    cmocka_unit_test(test_random_v4),
        cmocka_unit_test(test_random_v6), cmocka_unit_test(test_add_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
