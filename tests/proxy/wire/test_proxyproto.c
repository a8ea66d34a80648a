/*
 * proxy/proxyproto: the PROXY protocol v1/v2 parser and the v2 builder, table-driven.
 * Every accepted header is also fed byte by byte (each prefix must say "need more"), and
 * every built header must parse back to the addresses it was built from.
 */
#include "tgtest.h"

#include "proxy/wire/proxyproto.h"

#include <arpa/inet.h>
#include <sys/socket.h>

struct pp_case {
    const char *name;
    const char *text; /* v1 text, or NULL when hex is set */
    const char *hex;  /* v2 bytes in hex */
    int want;
    uint8_t family;
    const char *src, *dst;
    uint16_t sport, dport;
};

#define SIG "0d0a0d0a000d0a515549540a"

/* designated, so the fields a case leaves out are zero */
#define V1(n, t, w)                                                                                \
    {                                                                                              \
        .name = (n), .text = (t), .want = (w)                                                      \
    }
#define V2(n, h, w)                                                                                \
    {                                                                                              \
        .name = (n), .hex = (h), .want = (w)                                                       \
    }
#define V1OK(n, t, f, s, d, sp, dp)                                                                \
    {                                                                                              \
        .name = (n), .text = (t), .want = PROXYPROTO_OK, .family = (f), .src = (s), .dst = (d),    \
        .sport = (sp), .dport = (dp)                                                               \
    }
#define V2OK(n, h, f, s, d, sp, dp)                                                                \
    {                                                                                              \
        .name = (n), .hex = (h), .want = PROXYPROTO_OK, .family = (f), .src = (s), .dst = (d),     \
        .sport = (sp), .dport = (dp)                                                               \
    }

static const struct pp_case cases[] = {
    V1OK("v1 tcp4", "PROXY TCP4 1.2.3.4 5.6.7.8 1 65535\r\n", AF_INET, "1.2.3.4", "5.6.7.8", 1,
         65535),
    V1OK("v1 tcp6", "PROXY TCP6 ::1 ::2 80 443\r\n", AF_INET6, "::1", "::2", 80, 443),
    V1OK("v1 tcp6 mapped", "PROXY TCP6 ::ffff:1.2.3.4 ::2 80 443\r\n", AF_INET6, "::ffff:1.2.3.4",
         "::2", 80, 443),
    V1("v1 unknown", "PROXY UNKNOWN\r\n", PROXYPROTO_OK),
    V1("v1 unknown + rest", "PROXY UNKNOWN 1.2.3.4 garbage\r\n", PROXYPROTO_OK),
    V1("v1 port 65536", "PROXY TCP4 1.2.3.4 5.6.7.8 1 65536\r\n", PROXYPROTO_BAD),
    V1("v1 three fields", "PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", PROXYPROTO_BAD),
    V1("v1 five fields", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n", PROXYPROTO_BAD),
    V1("v1 double space", "PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n", PROXYPROTO_BAD),
    V1("v1 tcp4 with v6", "PROXY TCP4 ::1 ::2 1 2\r\n", PROXYPROTO_BAD),
    V1("v1 tcp6 with v4", "PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n", PROXYPROTO_BAD),
    V1("v1 negative port", "PROXY TCP4 1.2.3.4 5.6.7.8 1 -2\r\n", PROXYPROTO_BAD),
    V1("v1 no crlf yet", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2", PROXYPROTO_MORE),
    V1("v1 udp", "PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n", PROXYPROTO_BAD),
    V1("v1 control byte", "PROXY TCP4 1.2.3.4\t5.6.7.8 1 2\r\n", PROXYPROTO_BAD),
    V1("v1 short word", "PROXY TCP\r\n", PROXYPROTO_BAD),
    V1("not proxy", "GET / HTTP/1.1\r\n", PROXYPROTO_BAD),
    V1("empty", "", PROXYPROTO_MORE),
    V1("v1 too long",
       "PROXY UNKNOWN 0123456789012345678901234567890123456789012345678901234567890123456789"
       "01234567890123456789012345",
       PROXYPROTO_BAD),
    V2OK("v2 tcp4",
         SIG "2111000c"
             "01020304"
             "05060708"
             "0050"
             "01bb",
         AF_INET, "1.2.3.4", "5.6.7.8", 80, 443),
    V2OK("v2 tcp6",
         SIG "21210024"
             "20010db8000000000000000000000001"
             "20010db8000000000000000000000002"
             "1f90"
             "0016",
         AF_INET6, "2001:db8::1", "2001:db8::2", 8080, 22),
    V2OK("v2 tcp4 + tlv",
         SIG "21110010"
             "01020304"
             "05060708"
             "0050"
             "01bb"
             "04000100",
         AF_INET, "1.2.3.4", "5.6.7.8", 80, 443),
    V2("v2 local", SIG "20000000", PROXYPROTO_OK),
    V2("v2 unspec", SIG "21000000", PROXYPROTO_OK),
    V2("v2 version 1",
       SIG "1111000c"
           "01020304"
           "05060708"
           "0050"
           "01bb",
       PROXYPROTO_BAD),
    V2("v2 command 2",
       SIG "2211000c"
           "01020304"
           "05060708"
           "0050"
           "01bb",
       PROXYPROTO_BAD),
    V2("v2 family unix", SIG "21310000", PROXYPROTO_BAD),
    V2("v2 tcp4 too short",
       SIG "21110008"
           "01020304"
           "05060708",
       PROXYPROTO_BAD),
    V2("v2 tcp6 too short",
       SIG "2121000c"
           "01020304"
           "05060708"
           "0050"
           "01bb",
       PROXYPROTO_BAD),
    V2("v2 over 1024", SIG "211103f1", PROXYPROTO_BAD),
    V2("v2 incomplete",
       SIG "2111000c"
           "01020304",
       PROXYPROTO_MORE),
    V2("v2 sig prefix", "0d0a0d0a00", PROXYPROTO_MORE),
    V2("v2 bad sig", "0d0a0d0a010d0a515549540a2111000c", PROXYPROTO_BAD),
};

static size_t case_bytes(const struct pp_case *t, uint8_t *out, size_t cap)
{
    if (t->text) {
        size_t n = strlen(t->text);
        assert_true(n <= cap);
        memcpy(out, t->text, n);
        return n;
    }
    size_t n = strlen(t->hex) / 2;
    assert_true(n <= cap);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        assert_int_equal(sscanf(t->hex + 2 * i, "%2x", &v), 1);
        out[i] = (uint8_t)v;
    }
    return n;
}

static void check_addr(const struct pp_case *t, const struct proxyproto_addr *a)
{
    assert_int_equal(a->family, t->family);
    if (!t->family)
        return;
    uint8_t want[16];
    size_t alen = t->family == AF_INET ? 4 : 16;
    assert_int_equal(inet_pton(t->family, t->src, want), 1);
    assert_memory_equal(a->src, want, alen);
    assert_int_equal(inet_pton(t->family, t->dst, want), 1);
    assert_memory_equal(a->dst, want, alen);
    assert_int_equal(ntohs(a->src_port), t->sport);
    assert_int_equal(ntohs(a->dst_port), t->dport);
}

static void test_parse_table(void **state)
{
    (void)state;
    uint8_t b[256];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct pp_case *t = &cases[i];
        size_t n = case_bytes(t, b, sizeof b), len = 0;
        struct proxyproto_addr a;
        int r = proxyproto_parse(b, n, &len, &a);
        if (r != t->want)
            fail_msg("case %s: got %d, want %d", t->name, r, t->want);
        if (r != PROXYPROTO_OK)
            continue;
        assert_int_equal(len, n);
        check_addr(t, &a);
        for (size_t k = 0; k < n; k++) { /* every prefix of a header is "need more" */
            size_t l2 = 0;
            if (proxyproto_parse(b, k, &l2, NULL) != PROXYPROTO_MORE)
                fail_msg("case %s: prefix of %zu bytes is not MORE", t->name, k);
        }
    }
}

/* Bytes after a complete header are the client's: the length stops at the header. */
static void test_trailing_bytes_not_consumed(void **state)
{
    (void)state;
    static const char v1[] = "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n\x16\x03\x01";
    size_t len = 0;
    assert_int_equal(proxyproto_parse((const uint8_t *)v1, sizeof v1 - 1, &len, NULL),
                     PROXYPROTO_OK);
    assert_int_equal(len, sizeof v1 - 1 - 3);
}

static void test_build_round_trip(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct pp_case *t = &cases[i];
        if (t->want != PROXYPROTO_OK || !t->family)
            continue;
        uint8_t b[256];
        size_t n = case_bytes(t, b, sizeof b), len = 0;
        struct proxyproto_addr a, back;
        assert_int_equal(proxyproto_parse(b, n, &len, &a), PROXYPROTO_OK);
        uint8_t out[PROXYPROTO_BUILD_MAX];
        size_t k = proxyproto_build_v2(&a, out);
        assert_int_equal(k, t->family == AF_INET ? 28 : 52);
        assert_int_equal(out[12], 0x21);
        assert_int_equal(proxyproto_parse(out, k, &len, &back), PROXYPROTO_OK);
        assert_int_equal(len, k);
        check_addr(t, &back);
    }
    struct proxyproto_addr none = {0};
    uint8_t out[PROXYPROTO_BUILD_MAX];
    assert_int_equal(proxyproto_build_v2(&none, out), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_table),
        cmocka_unit_test(test_trailing_bytes_not_consumed),
        cmocka_unit_test(test_build_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
