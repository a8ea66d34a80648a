/*
 * proxy/value: host:port, bare hosts, durations and sizes as the config file and the
 * command line write them. Table-driven: each row is an input and what it must give.
 */
#include "tgtest.h"

#include "proxy/wire/value.h"

#include <arpa/inet.h>
#include <errno.h>

static void test_durations(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int rc;
        uint64_t ms;
    } d[] = {
        {"10s", 0, 10000},
        {"500ms", 0, 500},
        {"1m", 0, 60000},
        {"1h", 0, 3600000},
        {"1m30s", 0, 90000},
        {"1.5s", 0, 1500},
        {"2h45m", 0, 9900000},
        {"1500us", 0, 1},
        {"999999ns", 0, 0},
        {"0.25m", 0, 15000},
        {"10", -EINVAL, 0},
        {"s", -EINVAL, 0},
        {"", -EINVAL, 0},
        {"10x", -EINVAL, 0},
        {"-1s", -EINVAL, 0},
        {"1 s", -EINVAL, 0},
        {"1sm", -EINVAL, 0},
        {"99999999999999999999h", -EINVAL, 0},
        {"5124095576h", -EINVAL, 0},
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        uint64_t ms = 12345;
        int rc = value_duration_ms(d[i].s, strlen(d[i].s), &ms);
        if (rc != d[i].rc || (rc == 0 && ms != d[i].ms))
            fail_msg("duration \"%s\": rc %d ms %llu", d[i].s, rc, (unsigned long long)ms);
    }
}

static void test_sizes(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int rc;
        uint64_t n;
    } z[] = {
        {"4096", 0, 4096},
        {"4kb", 0, 4096},
        {"16KiB", 0, 16384},
        {"1mib", 0, 1048576},
        {"2M", 0, 2097152},
        {"1gb", 0, 1073741824},
        {"7b", 0, 7},
        {"kb", -EINVAL, 0},
        {"1tb", -EINVAL, 0},
        {"1 kb", -EINVAL, 0},
        {"", -EINVAL, 0},
        {"99999999999999999999", -EINVAL, 0},
        {"17179869184gb", -EINVAL, 0},
    };
    for (size_t i = 0; i < sizeof z / sizeof z[0]; i++) {
        uint64_t n = 12345;
        int rc = value_size_bytes(z[i].s, strlen(z[i].s), &n);
        if (rc != z[i].rc || (rc == 0 && n != z[i].n))
            fail_msg("size \"%s\": rc %d n %llu", z[i].s, rc, (unsigned long long)n);
    }
}

struct hp_case {
    const char *text;
    int rc;
    const char *host; /* as kept, without brackets */
    uint16_t port;
    bool resolved;
    const char *canon; /* value_format_addr of a resolved one */
};

static void test_hostport_table(void **state)
{
    (void)state;
    static const struct hp_case cases[] = {
        {"[2001:db8::1]:443", 0, "2001:db8::1", 443, true, "[2001:db8::1]:443"},
        {"1.2.3.4:80", 0, "1.2.3.4", 80, true, "1.2.3.4:80"},
        {"0.0.0.0:0", 0, "0.0.0.0", 0, true, "0.0.0.0:0"},
        {"[::]:65535", 0, "::", 65535, true, "[::]:65535"},
        {"www.example.com:8443", 0, "www.example.com", 8443, false, NULL},
        {"under_score.example:1", 0, "under_score.example", 1, false, NULL},
        {"a..b:1", -EINVAL, NULL, 0, false, NULL},
        {".a:1", -EINVAL, NULL, 0, false, NULL},
        {"-a:1", -EINVAL, NULL, 0, false, NULL},
        {"a b:1", -EINVAL, NULL, 0, false, NULL},
        {"[::1]:", -EINVAL, NULL, 0, false, NULL},
        {"[::1]", -EINVAL, NULL, 0, false, NULL},
        {"[::1:80", -EINVAL, NULL, 0, false, NULL},
        {"::1:80", -EINVAL, NULL, 0, false, NULL},
        {"1.2.3.4:+1", -EINVAL, NULL, 0, false, NULL},
        {"1.2.3.4:65536", -EINVAL, NULL, 0, false, NULL},
        {"1.2.3.4:123456", -EINVAL, NULL, 0, false, NULL},
        {"1.2.3.4", -EINVAL, NULL, 0, false, NULL},
        {":443", -EINVAL, NULL, 0, false, NULL},
        {"[1.2.3.4]:1", -EINVAL, NULL, 0, false, NULL},
        {"", -EINVAL, NULL, 0, false, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct hp_case *t = &cases[i];
        struct value_hostport hp;
        char err[256] = "";
        int rc = value_hostport_parse(t->text, strlen(t->text), &hp, err, sizeof err);
        if (rc != t->rc)
            fail_msg("hostport \"%s\": rc %d, want %d (%s)", t->text, rc, t->rc, err);
        if (rc != 0) {
            if (!err[0])
                fail_msg("hostport \"%s\": no reason given", t->text);
            continue;
        }
        assert_string_equal(hp.host, t->host);
        assert_int_equal(hp.port, t->port);
        assert_int_equal(hp.resolved, t->resolved);
        if (!t->resolved) {
            assert_int_equal(hp.addr_len, 0);
            continue;
        }
        char text[64];
        value_format_addr(&hp.addr, text, sizeof text);
        assert_string_equal(text, t->canon);
    }
}

/* Input that is not NUL-terminated is read only up to its length. */
static void test_hostport_length_bound(void **state)
{
    (void)state;
    struct value_hostport hp;
    char err[256];
    assert_int_equal(value_hostport_parse("10.0.0.1:80junk", 11, &hp, err, sizeof err), 0);
    assert_int_equal(hp.port, 80);
    assert_int_equal(value_host_parse(&hp, "example.comX", 11, NULL, 0), 0);
    assert_string_equal(hp.host, "example.com");
}

static void test_bare_host_and_ip(void **state)
{
    (void)state;
    struct value_hostport hp;
    char err[256];
    assert_int_equal(value_host_parse(&hp, "::1", 3, err, sizeof err), 0);
    assert_true(hp.resolved);
    assert_int_equal(hp.addr.ss_family, AF_INET6);
    assert_int_equal(value_host_parse(&hp, "::g", 3, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "IPv6"));
    char big[VALUE_HOST_MAX + 1];
    memset(big, 'a', sizeof big);
    assert_int_equal(value_host_parse(&hp, big, sizeof big, err, sizeof err), -EINVAL);
    struct sockaddr_storage sa;
    socklen_t len = 0;
    assert_false(value_parse_ip("192.0.2.256", 11, &sa, &len));
    assert_false(value_parse_ip("", 0, &sa, &len));
    assert_true(value_parse_ip("192.0.2.1", 9, &sa, &len));
    assert_int_equal(len, sizeof(struct sockaddr_in));
    value_set_port(&sa, 8443);
    char text[64];
    value_format_addr(&sa, text, sizeof text);
    assert_string_equal(text, "192.0.2.1:8443");
    sa.ss_family = AF_UNIX;
    value_format_addr(&sa, text, sizeof text);
    assert_string_equal(text, "?");
}

/* The one loopback test (the config's mss-clamp and API bind rules, selfaddr, doctor). */
static void test_addr_loopback(void **state)
{
    (void)state;
    static const struct {
        const char *ip;
        bool loopback;
    } cases[] = {
        {"127.0.0.1", true},
        {"127.255.255.254", true},
        {"127.3.2.1", true},
        {"126.255.255.255", false},
        {"128.0.0.1", false},
        {"0.0.0.0", false},
        {"192.0.2.1", false},
        {"::1", true},
        {"::", false},
        {"::2", false},
        {"::ffff:127.0.0.1", true},
        {"::ffff:127.9.9.9", true},
        {"::ffff:128.0.0.1", false},
        {"::127.0.0.1", false},
        {"fe80::1", false},
        {"2001:db8::1", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct sockaddr_storage sa;
        socklen_t len;
        assert_true(value_parse_ip(cases[i].ip, strlen(cases[i].ip), &sa, &len));
        if (value_addr_loopback((const struct sockaddr *)&sa) != cases[i].loopback)
            fail_msg("%s: loopback %d, want %d", cases[i].ip, !cases[i].loopback,
                     cases[i].loopback);
    }
    struct sockaddr_storage un = {.ss_family = AF_UNIX};
    assert_false(value_addr_loopback((const struct sockaddr *)&un));
}

static void test_rfc3339(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int rc;
        int64_t t;
    } d[] = {
        {"1970-01-01", 0, 0},
        {"2027-01-31", 0, 1801353600},
        {"2026-12-31T23:59:59Z", 0, 1798761599},
        {"2024-02-29T12:00:00+02:00", 0, 1709200800},
        {"2024-02-29t12:00:00.123-05:30", 0, 1709227800},
        {"2024-02-29 00:00:00z", 0, 1709164800},
        {"2016-12-31T23:59:60Z", 0, 1483228799}, /* leap second as :59 */
        {"2000-02-29", 0, 951782400},
        {"9999-12-31T23:59:59Z", 0, 253402300799},
        {"", -EINVAL, 0},
        {"2023-02-29", -EINVAL, 0},
        {"2100-02-29", -EINVAL, 0},
        {"2024-13-01", -EINVAL, 0},
        {"2024-00-10", -EINVAL, 0},
        {"2024-01-32", -EINVAL, 0},
        {"2024-04-31", -EINVAL, 0},
        {"1969-12-31", -EINVAL, 0},
        {"2024-1-01", -EINVAL, 0},
        {"2024-01-01X", -EINVAL, 0},
        {"2024-01-01T", -EINVAL, 0},
        {"2024-01-01T24:00:00Z", -EINVAL, 0},
        {"2024-01-01T12:61:00Z", -EINVAL, 0},
        {"2024-01-01T12:00:61Z", -EINVAL, 0},
        {"2024-01-01T12:00:00", -EINVAL, 0},   /* no offset */
        {"2024-01-01T12:00Z", -EINVAL, 0},     /* no seconds */
        {"2024-01-01T12:00:00.Z", -EINVAL, 0}, /* empty fraction */
        {"2024-01-01T12:00:00Z ", -EINVAL, 0}, /* trailing byte */
        {"2024-01-01T12:00:00+2:00", -EINVAL, 0},
        {"2024-01-01T12:00:00+24:00", -EINVAL, 0},
        {"2024-01-01T12:00:00+01:60", -EINVAL, 0},
        {"2024-01-01T12:00:00+0100", -EINVAL, 0},
        {"+2024-01-01", -EINVAL, 0},
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        int64_t t = -1;
        int rc = value_rfc3339(d[i].s, strlen(d[i].s), &t);
        if (rc != d[i].rc || (rc == 0 && t != d[i].t))
            fail_msg("%s: rc %d t %lld, expected rc %d t %lld", d[i].s, rc, (long long)t, d[i].rc,
                     (long long)d[i].t);
    }
    int64_t t = 0; /* the length bounds the parse: no NUL needed */
    assert_int_equal(value_rfc3339("2027-01-31T00:00:00Zjunk", 20, &t), 0);
    assert_int_equal(t, 1801353600);
    assert_int_equal(value_rfc3339(NULL, 0, &t), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_durations),        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_hostport_table),   cmocka_unit_test(test_hostport_length_bound),
        cmocka_unit_test(test_bare_host_and_ip), cmocka_unit_test(test_rfc3339),
        cmocka_unit_test(test_addr_loopback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
