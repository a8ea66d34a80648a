/* Unit tests of the DC address order (src/proxy/engine/upstream.c): overrides, prefer-ip, media. */
#include "tgtest.h"

#include "proxy/config/config.h"
#include "proxy/engine/upstream.h"

#include <arpa/inet.h>
#include <errno.h>

static void add_dc(struct config *cfg, int32_t id, bool is_default, const char *const *addrs,
                   size_t n)
{
    struct config_dc *d = &cfg->dcs[cfg->ndcs++];
    memset(d, 0, sizeof *d);
    d->id = id;
    d->is_default = is_default;
    char err[128];
    for (size_t i = 0; i < n; i++)
        assert_int_equal(value_hostport_parse(addrs[i], strlen(addrs[i]), &d->addrs[d->naddrs++],
                                               err, sizeof err),
                         0);
}

/* "ip:port" of the i-th address for dc, or "" when there is none. */
static const char *nth(const struct config *cfg, int32_t dc, unsigned i)
{
    static char out[80];
    struct sockaddr_storage ss;
    socklen_t len;
    if (upstream_dc_addr(cfg, dc, i, &ss, &len) < 0)
        return "";
    char ip[INET6_ADDRSTRLEN];
    if (ss.ss_family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)(void *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
        snprintf(out, sizeof out, "%s:%u", ip, ntohs(a->sin_port));
    } else {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)(void *)&ss;
        inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip);
        snprintf(out, sizeof out, "[%s]:%u", ip, ntohs(a->sin6_port));
    }
    return out;
}

static void test_override_and_prefer_ip(void **state)
{
    (void)state;
    struct config cfg;
    config_init(&cfg);
    struct config_dc dcs[4];
    cfg.dcs = dcs;
    static const char *const two[] = {"10.0.0.2:443", "[2001:db8::2]:443", "10.0.0.3:8443"};
    static const char *const def[] = {"127.0.0.1:9999"};
    add_dc(&cfg, 2, false, two, 3);
    add_dc(&cfg, 0, true, def, 1);

    cfg.prefer_ip = CONFIG_PREFER_IPV6;
    assert_string_equal(nth(&cfg, 2, 0), "[2001:db8::2]:443");
    assert_string_equal(nth(&cfg, 2, 1), "10.0.0.2:443");
    assert_string_equal(nth(&cfg, 2, 2), "10.0.0.3:8443");
    assert_string_equal(nth(&cfg, 2, 3), "");

    cfg.prefer_ip = CONFIG_PREFER_IPV4;
    assert_string_equal(nth(&cfg, 2, 0), "10.0.0.2:443");
    assert_string_equal(nth(&cfg, 2, 1), "10.0.0.3:8443");
    assert_string_equal(nth(&cfg, 2, 2), "[2001:db8::2]:443");

    cfg.prefer_ip = CONFIG_ONLY_IPV6;
    assert_string_equal(nth(&cfg, 2, 0), "[2001:db8::2]:443");
    assert_string_equal(nth(&cfg, 2, 1), "");

    cfg.prefer_ip = CONFIG_ONLY_IPV4;
    assert_string_equal(nth(&cfg, -2, 1), "10.0.0.3:8443"); /* media DC -2 uses DC 2's entry */
    assert_string_equal(nth(&cfg, 5, 0), "127.0.0.1:9999"); /* default for the rest */
    assert_string_equal(nth(&cfg, 5, 1), "");
    cfg.dcs = NULL;
    cfg.ndcs = 0;
    config_cleanup(&cfg);
}

static void test_builtin_table_and_unknown(void **state)
{
    (void)state;
    struct config cfg;
    config_init(&cfg);
    cfg.prefer_ip = CONFIG_ONLY_IPV4;
    assert_string_equal(nth(&cfg, 2, 0), "149.154.167.51:443");
    assert_string_equal(nth(&cfg, -5, 0), "149.154.171.5:443");
    assert_string_equal(nth(&cfg, 999, 0), ""); /* unknown DC: close, no fallback */
    cfg.allow_fallback_on_unknown_dc = true;
    assert_string_equal(nth(&cfg, 999, 0), "149.154.167.51:443");
    cfg.prefer_ip = CONFIG_PREFER_IPV6;
    assert_string_equal(nth(&cfg, 1, 0), "[2001:b28:f23d:f001::a]:443");
    assert_string_equal(nth(&cfg, 1, 1), "149.154.175.50:443");
    config_cleanup(&cfg);
}

/* Host names are never resolved here (the engine's resolver threads do it): the pure
   address list holds the literals only, in order. */
static void test_names_skipped_without_worker(void **state)
{
    (void)state;
    struct config cfg;
    config_init(&cfg);
    struct config_dc dcs[1];
    cfg.dcs = dcs;
    static const char *const mixed[] = {"dc.example.net:443", "10.0.0.9:443", "localhost:1"};
    add_dc(&cfg, 3, false, mixed, 3);
    cfg.prefer_ip = CONFIG_PREFER_IPV4;
    assert_false(cfg.dcs[0].addrs[0].resolved);
    assert_string_equal(nth(&cfg, 3, 0), "10.0.0.9:443");
    assert_string_equal(nth(&cfg, 3, 1), "");
    cfg.dcs = NULL;
    cfg.ndcs = 0;
    config_cleanup(&cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_override_and_prefer_ip),
        cmocka_unit_test(test_builtin_table_and_unknown),
        cmocka_unit_test(test_names_skipped_without_worker),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
