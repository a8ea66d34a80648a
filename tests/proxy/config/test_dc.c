/* Tests for proxy/dc: the built-in table of brief 3.4, media/CDN/test rules, unknown ids,
 * fallback, and the [dcs] override priorities. */
#include "tgtest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>

#include "proxy/config/dc.h"

/* "ip" text of address i of a resolved target; checks port 443. */
static const char *addr_text(const struct dc_target *t, size_t i)
{
    static char buf[INET6_ADDRSTRLEN];
    const struct sockaddr_storage *ss = &t->addrs[i];
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        assert_int_equal(ntohs(a->sin_port), 443);
        assert_int_equal(t->addr_lens[i], sizeof(*a));
        inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    } else {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        assert_int_equal(ss->ss_family, AF_INET6);
        assert_int_equal(ntohs(a->sin6_port), 443);
        assert_int_equal(t->addr_lens[i], sizeof(*a));
        inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
    }
    return buf;
}

static void expect(const struct dc_options *o, int32_t dc, const char *v4, const char *v6)
{
    struct dc_target t;
    assert_int_equal(dc_resolve(o, dc, &t), 0);
    assert_null(t.override);
    assert_false(t.fell_back);
    assert_int_equal(t.id, dc);
    assert_true(t.naddrs >= 2);
    assert_string_equal(addr_text(&t, 0), v4);
    assert_string_equal(addr_text(&t, t.naddrs - 1), v6);
}

static void test_builtin_table(void **state)
{
    (void)state;
    struct dc_options o = {0};
    static const struct {
        int32_t id;
        const char *v4, *v6;
    } want[] = {
        {1, "149.154.175.50", "2001:b28:f23d:f001::a"},
        {2, "149.154.167.51", "2001:67c:4e8:f002::a"},
        {3, "149.154.175.100", "2001:b28:f23d:f003::a"},
        {4, "149.154.167.91", "2001:67c:4e8:f004::a"},
        {5, "149.154.171.5", "2001:b28:f23f:f005::a"},
        {203, "91.105.192.100", "2a0a:f280:203:a:5000::100"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        expect(&o, want[i].id, want[i].v4, want[i].v6);
        expect(&o, -want[i].id, want[i].v4, want[i].v6); /* media: same addresses */
    }
    struct dc_target t;
    assert_int_equal(dc_resolve(&o, 2, &t), 0);
    assert_int_equal(t.naddrs, 3);
    assert_string_equal(addr_text(&t, 1), "95.161.76.100");
    assert_int_equal(dc_resolve(&o, 1, &t), 0);
    assert_int_equal(t.naddrs, 2);
}

static void test_test_dcs(void **state)
{
    (void)state;
    struct dc_options o = {0};
    struct dc_target t;
    for (int32_t id = 10001; id <= 10003; id++) {
        assert_int_equal(dc_resolve(&o, id, &t), -ENOENT);
        assert_int_equal(dc_table_id(id, false), 0);
        assert_int_equal(dc_table_id(-id, true), id);
    }
    o.use_test_dcs = true;
    expect(&o, 10001, "149.154.175.10", "2001:b28:f23d:f001::e");
    expect(&o, 10002, "149.154.167.40", "2001:67c:4e8:f002::e");
    expect(&o, -10002, "149.154.167.40", "2001:67c:4e8:f002::e");
    expect(&o, 10003, "149.154.175.117", "2001:b28:f23d:f003::e");
    assert_int_equal(dc_resolve(&o, 10004, &t), -ENOENT);
}

static void test_unknown_and_fallback(void **state)
{
    (void)state;
    static const int32_t unknown[] = {0, 6, -6, 202, 204, 10000, 10004, 32767, -32768, 1000};
    struct dc_options o = {.use_test_dcs = true};
    struct dc_target t;
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
        assert_int_equal(dc_resolve(&o, unknown[i], &t), -ENOENT);
    o.fallback = true;
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        assert_int_equal(dc_resolve(&o, unknown[i], &t), 0);
        assert_true(t.fell_back);
        assert_int_equal(t.id, 2);
        assert_string_equal(addr_text(&t, 0), "149.154.167.51");
    }
    assert_int_equal(dc_resolve(&o, -4, &t), 0);
    assert_false(t.fell_back);
    assert_int_equal(t.id, -4);
    struct sockaddr_storage ss[DC_BUILTIN_MAX];
    socklen_t lens[DC_BUILTIN_MAX];
    assert_int_equal(dc_builtin(42, ss, lens, DC_BUILTIN_MAX), 0);
    assert_int_equal(dc_builtin(4, ss, lens, 1), 1); /* cap respected */
    assert_int_equal(lens[0], sizeof(struct sockaddr_in));
    assert_memory_equal(&ss[0], &t.addrs[0], sizeof(struct sockaddr_in)); /* -4's, the same */
    assert_int_equal(dc_builtin(2, ss, lens, DC_BUILTIN_MAX), 3);
    assert_int_equal(lens[2], sizeof(struct sockaddr_in6));
}

static void test_overrides(void **state)
{
    (void)state;
    struct config_dc dcs[4];
    memset(dcs, 0, sizeof dcs);
    dcs[0].id = 2;
    dcs[0].naddrs = 1;
    strcpy(dcs[0].addrs[0].host, "10.0.0.2");
    dcs[1].id = -2;
    dcs[1].naddrs = 1;
    strcpy(dcs[1].addrs[0].host, "10.0.0.22");
    dcs[2].id = 10002;
    dcs[2].naddrs = 1;
    strcpy(dcs[2].addrs[0].host, "test.example");
    struct dc_options o = {.overrides = dcs, .noverrides = 3};
    struct dc_target t;
    assert_int_equal(dc_resolve(&o, 2, &t), 0);
    assert_ptr_equal(t.override, &dcs[0]);
    assert_int_equal(t.naddrs, 0);
    assert_int_equal(dc_resolve(&o, -2, &t), 0);
    assert_ptr_equal(t.override, &dcs[1]); /* exact beats +N */
    /* test id overridden even with test DCs off: overrides come first */
    assert_int_equal(dc_resolve(&o, 10002, &t), 0);
    assert_ptr_equal(t.override, &dcs[2]);
    assert_int_equal(dc_resolve(&o, -10002, &t), 0);
    assert_ptr_equal(t.override, &dcs[2]); /* media of an override */
    assert_int_equal(dc_resolve(&o, 3, &t), 0);
    assert_null(t.override); /* built-in */
    assert_int_equal(dc_resolve(&o, 77, &t), -ENOENT);
    /* media -2 without its own entry uses +2's */
    o.noverrides = 1;
    assert_int_equal(dc_resolve(&o, -2, &t), 0);
    assert_ptr_equal(t.override, &dcs[0]);
    /* a default entry catches everything else, unknown ids included */
    dcs[3].is_default = true;
    dcs[3].naddrs = 1;
    strcpy(dcs[3].addrs[0].host, "127.0.0.1");
    memmove(&dcs[1], &dcs[3], sizeof dcs[3]); /* [0] = 2, [1] = default */
    o.noverrides = 2;
    assert_int_equal(dc_resolve(&o, 2, &t), 0);
    assert_ptr_equal(t.override, &dcs[0]);
    int32_t others[] = {1, -1, 3, 203, 10002, 0, 77, -32768};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        assert_int_equal(dc_resolve(&o, others[i], &t), 0);
        assert_ptr_equal(t.override, &dcs[1]);
        assert_false(t.fell_back);
    }
    assert_null(dc_override(NULL, 0, 2));
}

static void test_options_from_config(void **state)
{
    (void)state;
    struct config cfg;
    memset(&cfg, 0, sizeof cfg);
    struct config_dc one = {.id = 4, .naddrs = 1};
    cfg.dcs = &one;
    cfg.ndcs = 1;
    cfg.use_test_dcs = true;
    cfg.allow_fallback_on_unknown_dc = true;
    struct dc_options o;
    dc_options_from_config(&o, &cfg);
    assert_ptr_equal(o.overrides, &one);
    assert_int_equal(o.noverrides, 1);
    assert_true(o.use_test_dcs);
    assert_true(o.fallback);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_table),        cmocka_unit_test(test_test_dcs),
        cmocka_unit_test(test_unknown_and_fallback), cmocka_unit_test(test_overrides),
        cmocka_unit_test(test_options_from_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
