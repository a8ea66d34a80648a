/*
 * proxy/wire/mpconf: Telegram's middle-proxy list (getProxyConfig / getProxyConfigV6) in the
 * form it is served, and every way a file can be wrong, each refused with its line.
 */
#include "tgtest.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include "proxy/wire/mpconf.h"

static const char v4[] = "# force_probability 10 10\n"
                         "default 2;\n"
                         "proxy_for 1 149.154.175.50:8888;\n"
                         "proxy_for -1 149.154.175.50:8888;\n"
                         "proxy_for 2 149.154.161.144:8888;\n"
                         "proxy_for 2 149.154.162.38:80; # a comment after\n"
                         "proxy_for -2 149.154.164.250:8888;\n"
                         "proxy_for\t4   91.108.4.136:8888 ;\r\n"
                         "proxy_for 203 91.105.192.100:8888;\n";

static const char v6[] = "default 2;\n"
                         "proxy_for 1 [2001:b28:f23d:f001::d]:8888;\n"
                         "proxy_for 2 [2001:67c:04e8:f002::d]:80;\n";

static void test_served_forms(void **state)
{
    (void)state;
    struct mpconf c;
    char err[256];
    assert_int_equal(mpconf_parse(v4, strlen(v4), &c, err, sizeof err), 0);
    assert_int_equal(c.n, 7);
    assert_true(c.has_default);
    assert_int_equal(c.default_dc, 2);
    assert_int_equal(c.proxies[1].dc, -1);
    assert_int_equal(c.proxies[3].port, 80);
    uint8_t ip[4];
    inet_pton(AF_INET, "149.154.162.38", ip);
    assert_memory_equal(c.proxies[3].ip, ip, 4);
    assert_int_equal(c.proxies[3].family, AF_INET);
    assert_int_equal(c.proxies[6].dc, 203);
    size_t idx[8];
    assert_int_equal(mpconf_for(&c, 2, idx, 8), 2);
    assert_int_equal(idx[0], 2);
    assert_int_equal(idx[1], 3);
    assert_int_equal(mpconf_for(&c, 2, idx, 1), 1);
    assert_int_equal(mpconf_for(&c, 5, idx, 8), 0);

    assert_int_equal(mpconf_parse(v6, strlen(v6), &c, err, sizeof err), 0);
    assert_int_equal(c.n, 2);
    assert_int_equal(c.proxies[1].family, AF_INET6);
    uint8_t ip6[16];
    inet_pton(AF_INET6, "2001:67c:4e8:f002::d", ip6);
    assert_memory_equal(c.proxies[1].ip, ip6, 16);

    const char tuned[] = "timeout 300; min_connections 2; max_connections 8; proxy 10.0.0.1:1;";
    assert_int_equal(mpconf_parse(tuned, strlen(tuned), &c, err, sizeof err), 0);
    assert_int_equal(c.timeout_ms, 300);
    assert_int_equal(c.min_connections, 2);
    assert_int_equal(c.max_connections, 8);
    assert_int_equal(c.proxies[0].dc, 0);
    assert_false(c.has_default);
}

static void refused(const char *text, const char *want)
{
    struct mpconf c;
    char err[256];
    assert_int_equal(mpconf_parse(text, strlen(text), &c, err, sizeof err), -1);
    if (strstr(err, want) == NULL)
        fail_msg("'%s': got '%s', want '%s'", text, err, want);
}

static void test_refusals(void **state)
{
    (void)state;
    refused("", "line 1: no middle proxy");
    refused("# nothing\ndefault 2;\n", "line 3: no middle proxy");
    refused("proxy_for 2 149.154.161.144:8888\nproxy_for 3 1.2.3.4:5;", "line 2: expected ';'");
    refused("proxy_for 2 core.telegram.org:8888;", "'core.telegram.org' is not an IPv4");
    refused("proxy_for 2 2001:db8::1:8888;", "is not an IPv4 address or an IPv6 address");
    refused("proxy_for 2 [1.2.3.4]:8888;", "is not an IPv4");
    refused("proxy_for 2 1.2.3.4:0;", "port out of range");
    refused("proxy_for 2 1.2.3.4:65536;", "port out of range");
    refused("proxy_for 2 1.2.3.4:80x;", "bad port");
    refused("proxy_for 2 1.2.3.4;", "expected ADDR:PORT");
    refused("proxy_for 40000 1.2.3.4:80;", "a DC id 40000 out of range");
    refused("proxy_for two 1.2.3.4:80;", "expected a DC id");
    refused("timeout 5; proxy 1.2.3.4:80;", "a timeout in ms 5 out of range");
    refused("proxy_four 2 1.2.3.4:80;", "unknown statement 'proxy_four'");
    refused(";", "unknown statement ';'");
    refused("\x01\x02 2;", "unknown statement '?"
                           "?'");
    char big[MPCONF_MAX * 32 + 64];
    size_t at = 0;
    for (int i = 0; i <= MPCONF_MAX; i++)
        at += (size_t)snprintf(big + at, sizeof big - at, "proxy_for 2 10.0.0.%d:1;\n", i % 250);
    refused(big, "more than 256 middle proxies");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_served_forms),
        cmocka_unit_test(test_refusals),
    };
    return tgtest_result(cmocka_run_group_tests(tests, NULL, NULL));
}
