/*
 * services/mpsource.c's pure parts: which middle proxies a pool uses by prefer-ip (IPv4 per
 * DC, IPv6 only where a DC has no IPv4 one, only-* one family), the "what is my IP" answer,
 * the proxy secret's size, and which addresses count as private (no public address
 * detection from the socket). The downloads, the stored copies and the refresh run in the
 * daemon test (tests/proxy/daemon/test_server_mpsource.c).
 */
#include "tgtest.h"

#include <arpa/inet.h>

#include "proxy/services/mpsource.h"

static struct mpdocs docs;

static void lists(const char *v4, const char *v6)
{
    char err[256];
    memset(&docs, 0, sizeof docs);
    if (v4)
        assert_int_equal(mpconf_parse(v4, strlen(v4), &docs.v4, err, sizeof err), 0);
    if (v6)
        assert_int_equal(mpconf_parse(v6, strlen(v6), &docs.v6, err, sizeof err), 0);
    docs.has_v4 = v4 != NULL, docs.has_v6 = v6 != NULL;
}

/* How many of out's proxies are of dc and family f. */
static size_t count(const struct mpconf *c, int16_t dc, int f)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n; i++)
        n += c->proxies[i].dc == dc && c->proxies[i].family == f;
    return n;
}

static void test_merge(void **state)
{
    (void)state;
    static struct mpconf out;
    lists("default 2;\nproxy_for 1 192.0.2.1:8888;\nproxy_for 2 192.0.2.2:8888;\n"
          "proxy_for 2 192.0.2.3:8888;\n",
          "proxy_for 1 [2001:db8::1]:8888;\nproxy_for 5 [2001:db8::5]:8888;\n");
    mpdocs_merge(&docs, CONFIG_PREFER_IPV6, &out); /* mtg's default still reaches DC 1 over v4 */
    assert_int_equal(out.n, 4);
    assert_int_equal(count(&out, 1, AF_INET), 1);
    assert_int_equal(count(&out, 1, AF_INET6), 0);
    assert_int_equal(count(&out, 2, AF_INET), 2);
    assert_int_equal(count(&out, 5, AF_INET6), 1); /* only IPv6 there: taken */
    assert_true(out.has_default);
    assert_int_equal(out.default_dc, 2);
    mpdocs_merge(&docs, CONFIG_ONLY_IPV4, &out);
    assert_int_equal(out.n, 3);
    assert_int_equal(count(&out, 5, AF_INET6), 0);
    mpdocs_merge(&docs, CONFIG_ONLY_IPV6, &out);
    assert_int_equal(out.n, 2);
    assert_int_equal(count(&out, 1, AF_INET6) + count(&out, 5, AF_INET6), 2);
    /* one file with both families, given twice: each proxy once */
    lists("proxy_for 3 [2001:db8::3]:8888;\nproxy_for 3 192.0.2.30:8888;\n",
          "proxy_for 3 [2001:db8::3]:8888;\n");
    mpdocs_merge(&docs, CONFIG_PREFER_IPV4, &out);
    assert_int_equal(out.n, 1);
    assert_int_equal(out.proxies[0].family, AF_INET);
    mpdocs_merge(&docs, CONFIG_ONLY_IPV6, &out);
    assert_int_equal(out.n, 1);
    /* no list at all: no proxy */
    memset(&docs, 0, sizeof docs);
    mpdocs_merge(&docs, CONFIG_PREFER_IPV4, &out);
    assert_int_equal(out.n, 0);
}

static void test_ip_and_secret(void **state)
{
    (void)state;
    char err[128];
    int f = 0;
    uint8_t ip[16];
    const char *a = "  203.0.113.7\r\n";
    assert_int_equal(mpsource_parse_ip((const uint8_t *)a, strlen(a), &f, ip, err, sizeof err), 0);
    assert_int_equal(f, AF_INET);
    assert_memory_equal(ip, "\xcb\x00\x71\x07", 4);
    a = "2001:db8::7\n";
    assert_int_equal(mpsource_parse_ip((const uint8_t *)a, strlen(a), &f, ip, err, sizeof err), 0);
    assert_int_equal(f, AF_INET6);
    const char *bad[] = {"", "\n", "203.0.113.7 extra", "<html>203.0.113.7</html>", "1.2.3",
                         "203.0.113.777"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_int_equal(
            mpsource_parse_ip((const uint8_t *)bad[i], strlen(bad[i]), &f, ip, err, sizeof err),
            -1);
        assert_non_null(strstr(err, "expected"));
    }
    uint8_t s[300] = {0};
    assert_int_equal(mpsource_check_secret(s, 128, err, sizeof err), 0);
    assert_int_equal(mpsource_check_secret(s, 31, err, sizeof err), -1);
    assert_non_null(strstr(err, "31 bytes, expected 32..256"));
    assert_int_equal(mpsource_check_secret(s, 257, err, sizeof err), -1);
}

static bool priv(const char *text)
{
    uint8_t ip[16];
    int f = strchr(text, ':') ? AF_INET6 : AF_INET;
    assert_int_equal(inet_pton(f, text, ip), 1);
    return mpsource_ip_private(f, ip);
}

static void test_private(void **state)
{
    (void)state;
    const char *yes[] = {"10.1.2.3",  "172.16.0.1", "172.31.255.255", "192.168.1.1",
                         "100.64.0.1", "169.254.9.9", "fd00::1", "fe80::1", "::ffff:10.0.0.1"};
    const char *no[] = {"203.0.113.7", "172.32.0.1", "100.128.0.1", "8.8.8.8",
                        "127.0.0.1",   "2001:db8::1", "::1",       "::ffff:8.8.8.8"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        if (!priv(yes[i]))
            fail_msg("%s should count as private", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        if (priv(no[i]))
            fail_msg("%s should not count as private", no[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_ip_and_secret),
        cmocka_unit_test(test_private),
    };
    return tgtest_result(cmocka_run_group_tests(tests, NULL, NULL));
}
