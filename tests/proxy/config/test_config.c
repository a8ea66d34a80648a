/*
 * test_config: TOML -> struct config (src/proxy/config/config.c): defaults, every key, mtg
 * compatibility (a full mtg-style file), the shipped example, and one row per validation
 * error with its file:line:col. No secret may appear in any error or warning.
 */
#include "tgtest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/log.h"
#include "proxy/config/config.h"

#define EE_A     "eeb00ebb678bf4d454a4ae053927ceb06e6578616d706c652e636f6d"
#define EE_A_B64 "7rAOu2eL9NRUpK4FOSfOsG5leGFtcGxlLmNvbQ"
#define DD_A     "ddb00ebb678bf4d454a4ae053927ceb06e"
#define KEY_A    "b00ebb678bf4d454a4ae053927ceb06e"
#define KEY_B    "1949df8b670929662c3368b1a46e53ae"
#define BASE     "bind-to = \"127.0.0.1:1\"\n"
#define SEC      "[secrets]\nm = \"" EE_A "\"\n"

static const uint8_t key_a[16] = {0xb0, 0x0e, 0xbb, 0x67, 0x8b, 0xf4, 0xd4, 0x54,
                                  0xa4, 0xae, 0x05, 0x39, 0x27, 0xce, 0xb0, 0x6e};

struct warnings {
    int n;
    char all[4096];
};

static void collect(void *user, const char *msg)
{
    struct warnings *w = user;
    size_t used = strlen(w->all);
    snprintf(w->all + used, sizeof w->all - used, "%s\n", msg);
    w->n++;
}

static int load(struct config *cfg, const char *text, char *err, size_t cap, struct warnings *w)
{
    config_init(cfg);
    return config_parse(cfg, "c.toml", text, strlen(text), err, cap, collect, w);
}

static void test_minimal_and_defaults(void **state)
{
    (void)state;
    struct config cfg;
    struct warnings w = {0};
    char err[512];
    assert_int_equal(load(&cfg, "bind-to = \"127.0.0.1:8443\"\n[secrets]\nmain = \"" EE_A "\"\n",
                          err, sizeof err, &w),
                     0);
    assert_int_equal(cfg.nlisten, 1);
    assert_string_equal(cfg.listen[0].text, "127.0.0.1:8443");
    const struct sockaddr_in *sin = (const struct sockaddr_in *)(const void *)&cfg.listen[0].addr;
    assert_int_equal(sin->sin_family, AF_INET);
    assert_int_equal(ntohs(sin->sin_port), 8443);
    assert_int_equal(cfg.listen[0].addr_len, sizeof(struct sockaddr_in));
    assert_int_equal(cfg.nsecrets, 1);
    assert_string_equal(cfg.secrets[0].label, "main");
    assert_int_equal(cfg.secrets[0].secret.kind, SECRET_EE);
    assert_memory_equal(cfg.secrets[0].secret.key, key_a, 16);
    assert_string_equal(cfg.secrets[0].secret.domain, "example.com");
    /* Defaults documented in config.h. */
    assert_int_equal(cfg.prefer_ip, CONFIG_PREFER_IPV6);
    assert_int_equal(cfg.tolerate_time_skewness_s, 120);
    assert_false(cfg.allow_fallback_on_unknown_dc);
    assert_true(cfg.fast_mode);
    assert_true(cfg.dynamic_records);
    assert_int_equal(cfg.concurrency, 8192);
    assert_int_equal(cfg.workers, 0);
    assert_string_equal(cfg.fronting.host, "");
    assert_int_equal(cfg.fronting.port, 443);
    assert_int_equal(cfg.timeout.tcp_ms, 10000);
    assert_int_equal(cfg.timeout.idle_ms, 300000);
    assert_int_equal(cfg.timeout.handshake_ms, 10000);
    assert_int_equal(cfg.timeout.fronting_ms, 5000);
    assert_true(cfg.keepalive.enabled);
    assert_true(cfg.antireplay.enabled);
    assert_int_equal(cfg.antireplay.window_s, 300);
    assert_int_equal(cfg.log_level, TG__LOG_INFO);
    assert_int_equal(cfg.ndcs, 0);
    assert_null(config_dc_find(&cfg, 2));
    assert_string_equal(cfg.public_host, "");
    assert_int_equal(cfg.public_port, 0);
    assert_int_equal(w.n, 0);
    config_cleanup(&cfg);
}

static const char full_doc[] = "bind-to = [\"0.0.0.0:443\", \"[::]:443\", \"[::1]:8443\"]\n"
                               "public-host = \"proxy.example.org\"\n"
                               "public-port = 8443\n"
                               "workers = 4\n"
                               "concurrency = 100\n"
                               "prefer-ip = \"only-ipv4\"\n"
                               "tolerate-time-skewness = \"1m30s\"\n"
                               "allow-fallback-on-unknown-dc = true\n"
                               "test-dcs = true\n"
                               "fast-mode = false\n"
                               "dynamic-record-sizing = false\n"
                               "proxy-protocol-listener = true\n"
                               "log-level = \"warn\"\n"
                               "debug = true\n"
                               "buffer-size = \"8kib\"\n"
                               "max-inflight = 65536\n"
                               "bulk-budget = \"1mib\"\n"
                               "[secrets]\n"
                               "tls = \"" EE_A_B64 "\"\n"
                               "padded = \"" DD_A "\"\n"
                               "classic = \"" KEY_A "\"\n"
                               "other = \"" KEY_B "\"\n"
                               "split = { key = \"" KEY_A "\", domain = \"www.example.org\" }\n"
                               "bare = { key = \"" KEY_B "\" }\n"
                               "[dcs]\n"
                               "2 = [\"149.154.167.51:443\", \"[2001:67c:4e8:f002::a]:443\"]\n"
                               "-2 = \"dc2-media.example.net:443\"\n"
                               "10002 = [\"127.0.0.1:9002\"]\n"
                               "default = [\"127.0.0.1:9000\"]\n"
                               "[domain-fronting]\n"
                               "host = \"127.0.0.1\"\n"
                               "port = 8444\n"
                               "proxy-protocol = true\n"
                               "[network.timeout]\n"
                               "tcp = \"2s\"\n"
                               "idle = 60\n"
                               "handshake = \"2500ms\"\n"
                               "fronting = \"1.5s\"\n"
                               "[network.keep-alive]\n"
                               "disabled = true\n"
                               "idle = \"30s\"\n"
                               "interval = 10\n"
                               "count = 3\n"
                               "[defense.anti-replay]\n"
                               "enabled = false\n"
                               "max-entries = 4096\n"
                               "window = \"10m\"\n";

static void test_every_key(void **state)
{
    (void)state;
    struct config cfg;
    struct warnings w = {0};
    char err[512];
    int rc = load(&cfg, full_doc, err, sizeof err, &w);
    if (rc != 0)
        fail_msg("%s", err);
    assert_int_equal(cfg.nlisten, 3);
    assert_string_equal(cfg.listen[1].text, "[::]:443");
    assert_int_equal(cfg.listen[1].addr.ss_family, AF_INET6);
    assert_string_equal(cfg.listen[2].text, "[::1]:8443");
    assert_string_equal(cfg.public_host, "proxy.example.org");
    assert_int_equal(cfg.public_port, 8443);
    assert_int_equal(cfg.workers, 4);
    assert_int_equal(cfg.concurrency, 100);
    assert_int_equal(cfg.prefer_ip, CONFIG_ONLY_IPV4);
    assert_int_equal(cfg.tolerate_time_skewness_s, 90);
    assert_true(cfg.allow_fallback_on_unknown_dc);
    assert_true(cfg.use_test_dcs);
    assert_false(cfg.fast_mode);
    assert_false(cfg.dynamic_records);
    assert_true(cfg.proxy_protocol_listener);
    assert_int_equal(cfg.log_level, TG__LOG_WARN); /* log-level wins over debug */
    assert_int_equal(cfg.buffer_size, 8192);
    assert_int_equal(cfg.max_inflight, 65536);
    assert_int_equal(cfg.bulk_budget, 1 << 20);
    assert_int_equal(cfg.secrets[0].secret.kind, SECRET_EE);
    assert_int_equal(cfg.secrets[1].secret.kind, SECRET_DD);
    assert_int_equal(cfg.secrets[2].secret.kind, SECRET_CLASSIC);
    /* One key served three ways. */
    assert_memory_equal(cfg.secrets[0].secret.key, cfg.secrets[2].secret.key, 16);
    assert_memory_equal(cfg.secrets[1].secret.key, key_a, 16);
    assert_string_equal(cfg.secrets[3].label, "other");
    /* Key and domain given separately (brief 1.2). */
    assert_int_equal(cfg.nsecrets, 6);
    assert_int_equal(cfg.secrets[4].secret.kind, SECRET_EE);
    assert_memory_equal(cfg.secrets[4].secret.key, key_a, 16);
    assert_string_equal(cfg.secrets[4].secret.domain, "www.example.org");
    assert_int_equal(cfg.secrets[4].secret.domain_len, 15);
    assert_int_equal(cfg.secrets[5].secret.kind, SECRET_CLASSIC);

    assert_int_equal(cfg.ndcs, 4);
    const struct config_dc *dc2 = config_dc_find(&cfg, 2);
    assert_non_null(dc2);
    assert_int_equal(dc2->id, 2);
    assert_int_equal(dc2->naddrs, 2);
    assert_true(dc2->addrs[0].resolved);
    assert_int_equal(dc2->addrs[1].addr.ss_family, AF_INET6);
    assert_int_equal(dc2->addrs[1].port, 443);
    const struct config_dc *media = config_dc_find(&cfg, -2);
    assert_int_equal(media->id, -2);
    assert_false(media->addrs[0].resolved); /* a name: resolved later by the engine */
    assert_string_equal(media->addrs[0].host, "dc2-media.example.net");
    assert_int_equal(config_dc_find(&cfg, 10002)->addrs[0].port, 9002);
    const struct config_dc *other = config_dc_find(&cfg, 4);
    assert_true(other->is_default);
    assert_int_equal(other->addrs[0].port, 9000);

    assert_string_equal(cfg.fronting.host, "127.0.0.1");
    assert_true(cfg.fronting.resolved);
    assert_int_equal(cfg.fronting.port, 8444);
    const struct sockaddr_in *fr = (const struct sockaddr_in *)(const void *)&cfg.fronting.addr;
    assert_int_equal(ntohs(fr->sin_port), 8444);
    assert_true(cfg.fronting.proxy_protocol);
    assert_int_equal(cfg.timeout.tcp_ms, 2000);
    assert_int_equal(cfg.timeout.idle_ms, 60000);
    assert_int_equal(cfg.timeout.handshake_ms, 2500);
    assert_int_equal(cfg.timeout.fronting_ms, 1500);
    assert_false(cfg.keepalive.enabled);
    assert_int_equal(cfg.keepalive.idle_s, 30);
    assert_int_equal(cfg.keepalive.interval_s, 10);
    assert_int_equal(cfg.keepalive.count, 3);
    assert_false(cfg.antireplay.enabled);
    assert_int_equal(cfg.antireplay.max_entries, 4096);
    assert_int_equal(cfg.antireplay.window_s, 600);
    assert_int_equal(w.n, 0);
    config_cleanup(&cfg);
}

/* An mtg v2 config as mtg's own example writes it, keys in mtg's order. */
static const char mtg_doc[] = "debug = true\n"
                              "secret = \"" EE_A "\"\n"
                              "bind-to = \"0.0.0.0:3128\"\n"
                              "proxy-protocol-listener = false\n"
                              "concurrency = 8192\n"
                              "prefer-ip = \"prefer-ipv6\"\n"
                              "public-ipv4 = \"203.0.113.7\"\n"
                              "public-ipv6 = \"2001:db8::1\"\n"
                              "auto-update = false\n"
                              "domain-fronting-port = 8443\n"
                              "domain-fronting-ip = \"10.0.0.10\"\n"
                              "tolerate-time-skewness = \"5s\"\n"
                              "allow-fallback-on-unknown-dc = false\n"
                              "[domain-fronting]\n"
                              "port = 443\n"
                              "proxy-protocol = false\n"
                              "[network]\n"
                              "doh-ip = \"1.1.1.1\"\n"
                              "proxies = [\n"
                              "    # \"socks5://user:password@host:port\"\n"
                              "]\n"
                              "[network.timeout]\n"
                              "tcp = \"5s\"\n"
                              "http = \"10s\"\n"
                              "idle = \"1m\"\n"
                              "[network.keep-alive]\n"
                              "disabled = false\n"
                              "idle = \"15s\"\n"
                              "interval = \"15s\"\n"
                              "count = 9\n"
                              "[defense.anti-replay]\n"
                              "enabled = true\n"
                              "max-size = \"1mib\"\n"
                              "error-rate = 0.001\n"
                              "[defense.blocklist]\n"
                              "enabled = true\n"
                              "download-concurrency = 2\n"
                              "urls = [\n"
                              "    \"https://iplists.firehol.org/files/firehol_level1.netset\",\n"
                              "]\n"
                              "update-each = \"24h\"\n"
                              "[defense.allowlist]\n"
                              "enabled = false\n"
                              "download-concurrency = 2\n"
                              "urls = []\n"
                              "update-each = \"24h\"\n"
                              "[stats.statsd]\n"
                              "enabled = false\n"
                              "address = \"127.0.0.1:8888\"\n"
                              "metric-prefix = \"mtg\"\n"
                              "tag-format = \"datadog\"\n"
                              "[stats.prometheus]\n"
                              "enabled = true\n"
                              "bind-to = \"127.0.0.1:3129\"\n"
                              "http-path = \"/\"\n"
                              "metric-prefix = \"mtg\"\n"
                              "[defense.doppelganger]\n"
                              "urls = [\"https://example.com/\"]\n"
                              "repeats-per-raid = 10\n"
                              "raid-each = \"6h\"\n"
                              "drs = false\n";

static void test_mtg_config(void **state)
{
    (void)state;
    struct config cfg;
    struct warnings w = {0};
    char err[512];
    int rc = load(&cfg, mtg_doc, err, sizeof err, &w);
    if (rc != 0)
        fail_msg("%s", err);
    assert_int_equal(cfg.nsecrets, 1);
    assert_string_equal(cfg.secrets[0].label, "default");
    assert_memory_equal(cfg.secrets[0].secret.key, key_a, 16);
    assert_string_equal(cfg.listen[0].text, "0.0.0.0:3128");
    assert_int_equal(cfg.log_level, TG__LOG_DEBUG);
    assert_int_equal(cfg.tolerate_time_skewness_s, 5);
    assert_string_equal(cfg.public_host, "203.0.113.7");
    /* [domain-fronting] port wins over the deprecated top-level key; ip still applies. */
    assert_int_equal(cfg.fronting.port, 443);
    assert_string_equal(cfg.fronting.host, "10.0.0.10");
    assert_true(cfg.fronting.resolved);
    assert_int_equal(cfg.timeout.tcp_ms, 5000);
    assert_int_equal(cfg.timeout.idle_ms, 60000);
    assert_int_equal(cfg.timeout.http_ms, 10000);
    /* doh-ip alone is mtg's https://IP: DNS over HTTPS to that address */
    assert_string_equal(cfg.dns.url, "https://1.1.1.1/dns-query");
    assert_string_equal(cfg.dns.host, "1.1.1.1");
    assert_int_equal(cfg.dns.port, 443);
    assert_true(cfg.keepalive.enabled);
    /* [stats.*] are supported: mtg's keys and values carry over */
    assert_true(cfg.prometheus.enabled);
    assert_string_equal(cfg.prometheus.bind.host, "127.0.0.1");
    assert_int_equal(cfg.prometheus.bind.port, 3129);
    assert_string_equal(cfg.prometheus.path, "/");
    assert_string_equal(cfg.prometheus.prefix, "mtg");
    assert_false(cfg.statsd.enabled);
    assert_int_equal(cfg.statsd.addr.port, 8888);
    assert_string_equal(cfg.statsd.prefix, "mtg");
    assert_int_equal(cfg.statsd.tag_format, CONFIG_TAGS_DATADOG);
    /* [defense.blocklist] / [defense.allowlist] are supported with mtg's keys */
    assert_true(cfg.blocklist.enabled);
    assert_int_equal(cfg.blocklist.nsources, 1);
    assert_true(cfg.blocklist.sources[0].is_url);
    assert_string_equal(cfg.blocklist.sources[0].text,
                        "https://iplists.firehol.org/files/firehol_level1.netset");
    assert_int_equal(cfg.blocklist.download_concurrency, 2);
    assert_int_equal(cfg.blocklist.update_each_s, 86400);
    assert_false(cfg.allowlist.enabled);
    assert_int_equal(cfg.allowlist.nsources, 0);
    /* [defense.doppelganger] is supported: the table turns shaping on */
    assert_true(cfg.doppel.enabled);
    assert_int_equal(cfg.doppel.nurls, 1);
    assert_string_equal(cfg.doppel.urls[0], "https://example.com/");
    assert_int_equal(cfg.doppel.repeats, 10);
    assert_int_equal(cfg.doppel.raid_s, 6 * 3600);
    assert_false(cfg.doppel.drs);
    /* Ignored keys are reported with their position, one warning each. */
    static const char *const expect[] = {
        "c.toml:9:1: auto-update: accepted for mtg compatibility but ignored",
        "c.toml:10:1: domain-fronting-port: deprecated mtg spelling: write `port`",
        "c.toml:11:1: domain-fronting-ip: deprecated mtg spelling: write `ip`",
        "c.toml:33:1: defense.anti-replay.max-size: accepted",
        "c.toml:34:1: defense.anti-replay.error-rate: accepted",
    };
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++)
        if (!strstr(w.all, expect[i]))
            fail_msg("missing warning \"%s\" in:\n%s", expect[i], w.all);
    assert_int_equal(w.n, (int)(sizeof expect / sizeof expect[0]));
    assert_null(strstr(w.all, KEY_A));
    config_cleanup(&cfg);
}

/* Older mtg spellings apply when the current ones are absent, with a warning. */
static void test_mtg_deprecated_keys(void **state)
{
    (void)state;
    struct config cfg;
    struct warnings w = {0};
    char err[512];
    int rc = load(&cfg,
                  BASE "domain-fronting-port = 8443\ndomain-fronting-proxy-protocol = true\n"
                       "cloak-port = 8443\n" SEC "[network.public-ip]\nipv4 = \"\"\n"
                       "ipv6 = \"2001:db8::7\"\n",
                  err, sizeof err, &w);
    if (rc != 0)
        fail_msg("%s", err);
    assert_int_equal(cfg.fronting.port, 8443);
    assert_true(cfg.fronting.proxy_protocol);
    assert_string_equal(cfg.fronting.host, "");
    assert_string_equal(cfg.public_host, "2001:db8::7");
    /* Each deprecated spelling is reported (tgproxy doctor fails on them). */
    assert_int_equal(w.n, 3);
    assert_non_null(strstr(w.all, "domain-fronting-proxy-protocol: deprecated mtg spelling"));
    assert_non_null(strstr(w.all, "cloak-port: deprecated mtg spelling"));
    config_cleanup(&cfg);
}

/* [stats.*] values are checked: each bad one is refused with its position and the rule. */
static void test_stats_keys(void **state)
{
    (void)state;
    static const struct {
        const char *doc, *want;
    } bad[] = {
        {"[stats.statsd]\nenabled = true\n", "stats.statsd: enabled without an address"},
        {"[stats.statsd]\naddress = \"statsd.example:8125\"\n", "expected an IP address"},
        {"[stats.statsd]\ntag-format = \"json\"\n", "expected \"datadog\", \"influxdb\""},
        {"[stats.prometheus]\nhttp-path = \"metrics\"\n", "expected a URL path"},
        {"[stats.prometheus]\nmetric-prefix = \"9x\"\n", "not starting with a digit"},
        {"[stats.prometheus]\nmetric-prefix = \"a-b\"\n", "[A-Za-z0-9_]"},
        {"[stats.prometheus]\nnames = \"prometheus\"\n", "expected \"tgproxy\""},
        {"[stats.prometheus]\nbind-to = \"127.0.0.1\"\n", "missing port"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct config cfg;
        char doc[512], err[512];
        snprintf(doc, sizeof doc, BASE SEC "%s", bad[i].doc);
        assert_int_equal(load(&cfg, doc, err, sizeof err, NULL), -EINVAL);
        if (!strstr(err, bad[i].want) || !strstr(err, "c.toml:"))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err, bad[i].want);
        config_cleanup(&cfg);
    }
    struct config cfg;
    char err[512];
    assert_int_equal(load(&cfg,
                          BASE SEC "[stats.statsd]\nenabled = true\naddress = \"[::1]:8125\"\n"
                                   "tag-format = \"graphite\"\nflush-interval = \"500ms\"\n"
                                   "[stats.prometheus]\nhttp-path = \"/metrics\"\n",
                          err, sizeof err, NULL),
                     0);
    assert_true(cfg.statsd.enabled);
    assert_int_equal(cfg.statsd.tag_format, CONFIG_TAGS_GRAPHITE);
    assert_int_equal(cfg.statsd.flush_ms, 500);
    assert_int_equal(cfg.statsd.addr.addr.ss_family, AF_INET6);
    assert_false(cfg.prometheus.enabled); /* off unless asked */
    assert_string_equal(cfg.prometheus.path, "/metrics");
    assert_string_equal(cfg.prometheus.prefix, "tgproxy");
    assert_false(cfg.prometheus.mtg_names); /* tgproxy's names unless asked */
    config_cleanup(&cfg);
    assert_int_equal(
        load(&cfg, BASE SEC "[stats.prometheus]\nnames = \"mtg\"\n", err, sizeof err, NULL), 0);
    assert_true(cfg.prometheus.mtg_names);
    config_cleanup(&cfg);
}

static void test_example_config_loads(void **state)
{
    (void)state;
    struct config cfg;
    struct warnings w = {0};
    char err[512];
    config_init(&cfg);
    int rc = config_load_file(&cfg, TGKIT_SOURCE_DIR "/examples/tgproxy.example.toml", err,
                              sizeof err, collect, &w);
    if (rc != 0)
        fail_msg("%s", err);
    /* no key ignored or deprecated; a checkout made under umask 022 is readable by others,
       and says so */
    struct stat st;
    assert_int_equal(stat(TGKIT_SOURCE_DIR "/examples/tgproxy.example.toml", &st), 0);
    bool exposed = (st.st_mode & (S_IRGRP | S_IROTH)) != 0;
    assert_int_equal(w.n, exposed ? 1 : 0);
    if (exposed)
        assert_non_null(strstr(w.all, "is readable by other users and holds secrets"));
    /* The example sets every option to its default: compare with config_init's values. */
    struct config def;
    config_init(&def);
    assert_int_equal(cfg.nlisten, 2);
    assert_int_equal(cfg.nsecrets, 1);
    assert_int_equal(cfg.workers, def.workers);
    assert_int_equal(cfg.concurrency, def.concurrency);
    assert_int_equal(cfg.prefer_ip, def.prefer_ip);
    assert_int_equal(cfg.tolerate_time_skewness_s, def.tolerate_time_skewness_s);
    assert_int_equal(cfg.allow_fallback_on_unknown_dc, def.allow_fallback_on_unknown_dc);
    assert_int_equal(cfg.use_test_dcs, def.use_test_dcs);
    assert_int_equal(cfg.fast_mode, def.fast_mode);
    assert_int_equal(cfg.dynamic_records, def.dynamic_records);
    assert_int_equal(cfg.proxy_protocol_listener, def.proxy_protocol_listener);
    assert_int_equal(cfg.log_level, def.log_level);
    assert_int_equal(cfg.buffer_size, def.buffer_size);
    assert_int_equal(cfg.max_inflight, def.max_inflight);
    assert_int_equal(cfg.bulk_budget, def.bulk_budget);
    assert_int_equal(def.bulk_budget, 4 << 20);
    assert_int_equal(cfg.fronting.port, def.fronting.port);
    assert_int_equal(cfg.fronting.proxy_protocol, def.fronting.proxy_protocol);
    assert_memory_equal(&cfg.timeout, &def.timeout, sizeof def.timeout);
    assert_memory_equal(&cfg.keepalive, &def.keepalive, sizeof def.keepalive);
    assert_memory_equal(&cfg.antireplay, &def.antireplay, sizeof def.antireplay);
    assert_int_equal(cfg.ndcs, 0);
    /* the metrics tables are there too, at their defaults (an operator looks for them) */
    assert_memory_equal(&cfg.prometheus, &def.prometheus, sizeof def.prometheus);
    assert_memory_equal(&cfg.statsd, &def.statsd, sizeof def.statsd);
    config_cleanup(&cfg);
    config_cleanup(&def);
}

/* a socket path longer than sockaddr_un's 108 bytes */
#define LONG_PATH                                                                                  \
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"             \
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

/* [fleet]: the Redis address forms, and each bad value refused with its position and
   without repeating the password. */
static void test_fleet_keys(void **state)
{
    (void)state;
    static const struct {
        const char *doc, *want;
    } bad[] = {
        {"[fleet]\nredis = \"http://1.2.3.4:6379\"\n", "expected redis://IP:PORT"},
        {"[fleet]\nredis = \"redis://cache.local:6379\"\n", "host names are not looked up"},
        {"[fleet]\nredis = \"redis://s3cret@127.0.0.1:6379\"\n", "expected user:password@"},
        {"[fleet]\nredis = \"redis://:s3cret@127.0.0.1:99999\"\n", "bad port"},
        {"[fleet]\nredis = \"unix:///" LONG_PATH "\"\n", "socket path of at most"},
        {"[fleet]\ntimeout = \"2s\"\n", "out of range"},
        {"[fleet]\nlease = \"500ms\"\n", "out of range"},
        {"[fleet]\nkey-prefix = \"a b\"\n", "printable characters"},
        {"[fleet]\nredis = 6379\n", "expected a string"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct config cfg;
        char doc[1024], err[512];
        snprintf(doc, sizeof doc, BASE SEC "%s", bad[i].doc);
        assert_int_equal(load(&cfg, doc, err, sizeof err, NULL), -EINVAL);
        if (!strstr(err, bad[i].want) || !strstr(err, "c.toml:5:") || !strstr(err, "fleet"))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err, bad[i].want);
        assert_null(strstr(err, "s3cret"));
        config_cleanup(&cfg);
    }
    struct config cfg;
    char err[512];
    assert_int_equal(load(&cfg, BASE SEC "[fleet]\nredis = \"redis://:s3cret@127.0.0.1\"\n", err,
                          sizeof err, NULL),
                     0);
    assert_true(cfg.fleet.enabled && !cfg.fleet.unix_socket);
    assert_string_equal(cfg.fleet.host, "127.0.0.1");
    assert_int_equal(cfg.fleet.port, 6379);
    assert_string_equal(cfg.fleet.password, "s3cret");
    assert_string_equal(cfg.fleet.user, "");
    assert_int_equal(cfg.fleet.timeout_ms, 50);
    assert_int_equal(cfg.fleet.lease_ms, 15000);
    assert_string_equal(cfg.fleet.prefix, "tgproxy:");
    config_cleanup(&cfg);
    assert_int_equal(load(&cfg,
                          BASE SEC "[fleet]\nredis = \"redis://u:p@[::1]:7000\"\n"
                                   "timeout = \"100ms\"\nkey-prefix = \"eu1:\"\nlease = \"1m\"\n",
                          err, sizeof err, NULL),
                     0);
    assert_string_equal(cfg.fleet.host, "::1");
    assert_int_equal(cfg.fleet.port, 7000);
    assert_string_equal(cfg.fleet.user, "u");
    assert_int_equal(cfg.fleet.timeout_ms, 100);
    assert_int_equal(cfg.fleet.lease_ms, 60000);
    assert_string_equal(cfg.fleet.prefix, "eu1:");
    config_cleanup(&cfg);
    assert_int_equal(
        load(&cfg, BASE SEC "[fleet]\nredis = \"unix:///run/redis.sock\"\n", err, sizeof err, NULL),
        0);
    assert_true(cfg.fleet.enabled && cfg.fleet.unix_socket);
    assert_string_equal(cfg.fleet.host, "/run/redis.sock");
    config_cleanup(&cfg);
    assert_int_equal(load(&cfg, BASE SEC, err, sizeof err, NULL), 0);
    assert_false(cfg.fleet.enabled); /* off without the table */
    config_cleanup(&cfg);
}

struct bad_case {
    const char *text;
    const char *where; /* message prefix */
    const char *why;   /* a fragment of the reason */
};

static const struct bad_case bad_cases[] = {
    {BASE "colour = 1\n" SEC, "c.toml:2:1: colour: ", "unknown key, expected a key documented"},
    {BASE "secrett = 1\n" SEC, "c.toml:2:1: secrett: ", "unknown key (did you mean 'secret'?)"},
    {BASE SEC "[network.timeout]\ntcpp = \"1s\"\n",
     "c.toml:5:1: network.timeout.tcpp: ", "expected one of: tcp, idle, handshake"},
    {BASE SEC "[network]\ntimeout = 5\n",
     "c.toml:5:11: network.timeout: ", "expected a table, got integer"},
    {"bind-to = \"localhost:443\"\n" SEC, "c.toml:1:11: bind-to: ", "expected an IP address"},
    {"bind-to = \"127.0.0.1\"\n" SEC, "c.toml:1:11: bind-to: ", "missing port"},
    {"bind-to = \"::1:443\"\n" SEC, "c.toml:1:11: bind-to: ", "without brackets"},
    {"bind-to = \"[::1]443\"\n" SEC, "c.toml:1:11: bind-to: ", "[IPv6]:PORT"},
    {"bind-to = \"1.2.3.4:65536\"\n" SEC, "c.toml:1:11: bind-to: ", "bad port"},
    {"bind-to = \":443\"\n" SEC, "c.toml:1:11: bind-to: ", "missing host"},
    {"bind-to = [\"1.2.3.4:1\", \"1.2.3.4:1\"]\n" SEC, "c.toml:1:25: bind-to: ", "listed twice"},
    {"bind-to = []\n" SEC, "c.toml:1:11: bind-to: ", "empty array"},
    {"bind-to = 443\n" SEC, "c.toml:1:11: bind-to: ", "got integer"},
    {BASE "[secrets]\nm = \"ee0102\"\n", "c.toml:3:5: secrets.m: ", "bad secret"},
    {BASE "[secrets]\nm = \"zz" KEY_A "\"\n", "c.toml:3:5: secrets.m: ", "bad secret"},
    {BASE "[secrets]\n\"bad label\" = \"" EE_A "\"\n",
     "c.toml:3:1: secrets.bad label: ", "bad label"},
    {BASE "secret = \"" EE_A "\"\n[secrets]\ndefault = \"" DD_A "\"\n",
     "c.toml:4:1: secrets.default: ", "used twice"},
    {BASE "[secrets]\nm = 5\n", "c.toml:3:5: secrets.m: ", "expected a string"},
    {BASE SEC "[secrets.x]\n", "c.toml:4:10: secrets.x: ", "no key, expected { key ="},
    {BASE "[secrets]\nm = { key = \"" EE_A "\" }\n",
     "c.toml:3:13: secrets.m.key: ", "16-byte key alone"},
    {BASE "[secrets]\nm = { key = \"" KEY_A "\", domain = \"1.2.3.4\" }\n",
     "c.toml:3:58: secrets.m.domain: ", "expected a DNS name"},
    {BASE "[secrets]\nm = { key = \"" KEY_A "\", sni = \"a.com\" }\n",
     "c.toml:3:49: secrets.m.sni: ", "expected one of: key, domain"},
    {BASE "secret = { key = 5 }\n", "c.toml:2:18: secret.key: ", "expected a string"},
    {BASE "prefer-ip = \"ipv4\"\n" SEC, "c.toml:2:13: prefer-ip: ", "\"only-ipv6\""},
    {BASE "tolerate-time-skewness = \"500ms\"\n" SEC,
     "c.toml:2:26: tolerate-time-skewness: ", "out of range"},
    {BASE "tolerate-time-skewness = \"1.5s\"\n" SEC,
     "c.toml:2:26: tolerate-time-skewness: ", "whole number of seconds"},
    {BASE "tolerate-time-skewness = \"5 s\"\n" SEC,
     "c.toml:2:26: tolerate-time-skewness: ", "bad duration"},
    {BASE "tolerate-time-skewness = true\n" SEC,
     "c.toml:2:26: tolerate-time-skewness: ", "expected a duration"},
    {BASE "fast-mode = \"no\"\n" SEC, "c.toml:2:13: fast-mode: ", "expected true or false"},
    {BASE "fast-mode = 0\n" SEC, "c.toml:2:13: fast-mode: ", "got integer"},
    {BASE "dynamic-record-sizing = \"on\"\n" SEC,
     "c.toml:2:25: dynamic-record-sizing: ", "expected true or false"},
    {BASE "concurrency = 0\n" SEC, "c.toml:2:15: concurrency: ", "0 is out of range"},
    {BASE "workers = -1\n" SEC, "c.toml:2:11: workers: ", "out of range, expected 0..256"},
    {BASE "log-level = \"loud\"\n" SEC, "c.toml:2:13: log-level: ", "unknown level"},
    {BASE "buffer-size = \"16 kb\"\n" SEC, "c.toml:2:15: buffer-size: ", "bad size"},
    {BASE "buffer-size = 100\n" SEC, "c.toml:2:15: buffer-size: ", "size out of range"},
    {BASE "debug = \"yes\"\n" SEC, "c.toml:2:9: debug: ", "expected true or false"},
    {BASE "public-host = \"bad host!\"\n" SEC, "c.toml:2:15: public-host: ", "not a host name"},
    {BASE "public-ipv4 = \"::1\"\n" SEC, "c.toml:2:15: public-ipv4: ", "IPv4"},
    {BASE "ad-tag = \"0123\"\n" SEC, "c.toml:2:10: ad-tag: ", "4 hex digits, expected 32"},
    {BASE "ad-tag = \"zz23456789abcdef0123456789abcdef\"\n" SEC,
     "c.toml:2:10: ad-tag: ", "expected 32 hex digits"},
    {BASE "ad-tag = \"0123456789abcdef0123456789abcdef\"\n" SEC,
     "c.toml: ", "expected a [middle-proxy] table"},
    {BASE SEC "[ad-tags]\nnobody = \"\"\n",
     "c.toml:5:1: ad-tags.nobody: ", "no secret has this label"},
    {BASE SEC "[middle-proxy]\nproxy-secret = \"http://core.telegram.org/getProxySecret\"\n",
     "c.toml:5:16: middle-proxy.proxy-secret: ", "expected https://"},
    {BASE SEC "[middle-proxy]\nproxy-config = \"ftp://example.com/list\"\n",
     "c.toml:5:16: middle-proxy.proxy-config: ", "expected an https:// URL or a file path"},
    {BASE SEC "[middle-proxy]\npublic-ip-url = \"/etc/ip\"\n",
     "c.toml:5:17: middle-proxy.public-ip-url: ", "expected an https:// URL"},
    {BASE SEC "[middle-proxy]\nstate-dir = \"relative\"\n",
     "c.toml:5:13: middle-proxy.state-dir: ", "expected an absolute directory"},
    {BASE SEC "[middle-proxy]\nupdate-each = \"0s\"\n",
     "c.toml:5:15: middle-proxy.update-each: ", "out of range"},
    {BASE SEC "[middle-proxy]\nconnections = 0\n",
     "c.toml:5:15: middle-proxy.connections: ", "out of range"},
    {BASE SEC "[dcs]\nfoo = [\"1.2.3.4:443\"]\n", "c.toml:5:1: dcs.foo: ", "bad DC id"},
    {BASE SEC "[dcs]\n0 = [\"1.2.3.4:443\"]\n", "c.toml:5:1: dcs.0: ", "bad DC id"},
    {BASE SEC "[dcs]\n99999 = [\"1.2.3.4:443\"]\n", "c.toml:5:1: dcs.99999: ", "bad DC id"},
    {BASE SEC "[dcs]\n2 = []\n", "c.toml:5:5: dcs.2: ", "empty array"},
    {BASE SEC "[dcs]\n2 = [\"1.2.3.4:0\"]\n", "c.toml:5:6: dcs.2: ", "port 0"},
    {BASE SEC "[dcs]\n2 = [\"1.2.3.4:443\", 7]\n", "c.toml:5:21: dcs.2: ", "expected a string"},
    {BASE SEC "[dcs]\n2 = \"1.2.3.4:1\"\n02 = \"1.2.3.4:2\"\n",
     "c.toml:6:1: dcs.02: ", "listed twice"},
    {BASE SEC "[domain-fronting]\nhost = \"a.example\"\nip = \"1.2.3.4\"\n",
     "c.toml:6:1: domain-fronting.ip: ", "only one of them"},
    {BASE SEC "[domain-fronting]\nip = \"a.example\"\n",
     "c.toml:5:6: domain-fronting.ip: ", "IPv4 or IPv6"},
    {BASE SEC "[domain-fronting]\nport = 70000\n",
     "c.toml:5:8: domain-fronting.port: ", "out of range"},
    {BASE SEC "[network]\nproxies = [\"socks5://u:p@h:1\"]\n",
     "c.toml:5:12: network.proxies: ", "must be an IP address"},
    {BASE SEC "[network]\nproxies = [\"\", \"http://1.2.3.4:1\"]\n",
     "c.toml:5:16: network.proxies: ", "starting with socks5://"},
    {BASE SEC "[network]\nproxies = [\"socks5://1.2.3.4\"]\n",
     "c.toml:5:12: network.proxies: ", "host:port"},
    {BASE SEC "[network]\nproxies = [\"socks5://u:%zz@1.2.3.4:1\"]\n",
     "c.toml:5:12: network.proxies: ", "bad password"},
    {BASE SEC "[network]\nproxies = [5]\n", "c.toml:5:12: network.proxies: ", "expected a string"},
    {BASE SEC "[defense.allowlist]\nenabled = true\n",
     "c.toml:4:10: defense.allowlist: ", "enabled with no lists"},
    {BASE SEC "[defense.blocklist]\nurls = [\"http://example.com/l.netset\"]\n",
     "c.toml:5:9: defense.blocklist.urls: ", "expected an https:// URL or a local file path"},
    {BASE SEC "[defense.blocklist]\nfiles = \"/etc/l.netset\"\n",
     "c.toml:5:9: defense.blocklist.files: ", "expected an array of strings"},
    {BASE SEC "[defense.blocklist]\nfiles = [\"\"]\n",
     "c.toml:5:10: defense.blocklist.files: ", "expected a file path of 1..1023 bytes"},
    {BASE SEC "[defense.blocklist]\ndownload-concurrency = 0\n",
     "c.toml:5:24: defense.blocklist.download-concurrency: ", "out of range"},
    {BASE SEC "[defense.allowlist]\nupdate-each = \"0s\"\n",
     "c.toml:5:15: defense.allowlist.update-each: ", "out of range"},
    {BASE SEC "[defense.blocklist]\nurl = []\n",
     "c.toml:5:1: defense.blocklist.url: ", "unknown key"},
    {BASE SEC "[network.timeout]\nidle = \"0s\"\n",
     "c.toml:5:8: network.timeout.idle: ", "out of range"},
    {BASE SEC "[network.keep-alive]\ncount = 1000\n",
     "c.toml:5:9: network.keep-alive.count: ", "out of range"},
    {BASE "max-inflight = 16384\nbuffer-size = 32768\n" SEC, "c.toml: ", "max-inflight"},
    {BASE "workers = 1024\n" SEC,
     "c.toml:2:11: workers: ", "1024 is out of range, expected 0..256"},
    {BASE "workers = 257\n" SEC, "c.toml:2:11: workers: ", "257 is out of range, expected 0..256"},
    {BASE "tolerate-time-skewness = \"12s\"\n" SEC "[defense.anti-replay]\nwindow = \"10s\"\n",
     "c.toml:6:1: defense.anti-replay.window: ", "at least 26s"},
    {BASE SEC "[defense.anti-replay]\nwindow = \"200s\"\n",
     "c.toml:5:1: defense.anti-replay.window: ", "tolerate-time-skewness = 120 s (default)"},
    {BASE "tolerate-time-skewness = \"12s\"\n" SEC "[defense]\nanti-replay.window = 25\n",
     "c.toml:6:13: defense.anti-replay.window: ", "(c.toml:2)"},
    {BASE "workers = \"4\"\n" SEC, "c.toml:2:11: workers: ", "expected an integer, got string"},
    {BASE "log-level = \"in\\u0000fo\"\n" SEC, "c.toml:2:13: log-level: ", "NUL character"},
    {BASE SEC "[network.timeout]\nidle = 99999999\n",
     "c.toml:5:8: network.timeout.idle: ", "expected 1..86400 seconds"},
    {BASE "buffer-size = true\n" SEC, "c.toml:2:15: buffer-size: ", "expected a size"},
    {BASE "bulk-budget = \"1gib\"\n" SEC, "c.toml:2:15: bulk-budget: ", "size out of range"},
    {BASE SEC "[dcs]\n2 = 5\n", "c.toml:5:5: dcs.2: ", "expected an array of \"HOST:PORT\""},
    {BASE SEC "[dcs]\n2 = [\"1:1\",\"1:2\",\"1:3\",\"1:4\",\"1:5\",\"1:6\",\"1:7\",\"1:8\",\"1:9\","
              "\"1:10\",\"1:11\",\"1:12\",\"1:13\",\"1:14\",\"1:15\",\"1:16\",\"1:17\"]\n",
     "c.toml:5:109: dcs.2: ", "too many addresses"},
    {BASE SEC "[dcs]\n2 = [\"bad_host!:1\"]\n", "c.toml:5:6: dcs.2: ", "not a host name"},
    {BASE SEC "[network]\nproxies = \"socks5://h:1\"\n",
     "c.toml:5:11: network.proxies: ", "expected an array"},
    {BASE "domain-fronting-ip = \"host.example\"\n" SEC,
     "c.toml:2:22: domain-fronting-ip: ", "expected an IPv4 or IPv6 address"},
    {BASE "[network.public-ip]\nipv6 = \"1.2.3.4\"\n" SEC,
     "c.toml:3:8: network.public-ip.ipv6: ", "expected an IPv6 address"},
    {BASE SEC "[limits.x]\nmax-connections = 2\n",
     "c.toml:4:9: limits.x: ", "no secret has this label"},
    {BASE SEC "[limits.m]\nexpires = \"2027-02-30\"\n",
     "c.toml:5:11: limits.m.expires: ", "bad time"},
    {BASE SEC "[limits.m]\nexpires = \"2027-01-01T00:00:00\"\n",
     "c.toml:5:11: limits.m.expires: ", "RFC 3339"},
    {BASE SEC "[limits.m]\nexpires = 2027\n",
     "c.toml:5:11: limits.m.expires: ", "expected an RFC 3339 time or date string"},
    {BASE SEC "[limits.m]\nmax-connections = 0\n",
     "c.toml:5:19: limits.m.max-connections: ", "out of range"},
    {BASE SEC "[limits.m]\nmax-conections = 1\n",
     "c.toml:5:1: limits.m.max-conections: ", "did you mean 'max-connections'"},
    {BASE SEC "[limits.m]\nmax-unique-ips = 0\n",
     "c.toml:5:18: limits.m.max-unique-ips: ", "out of range"},
    {BASE SEC "[limits.m]\nunique-ips-window = \"1.5s\"\n",
     "c.toml:5:21: limits.m.unique-ips-window: ", "whole number of seconds"},
    {BASE SEC "[limits.m]\nquota = 0\n", "c.toml:5:9: limits.m.quota: ", "bad quota"},
    {BASE SEC "[limits.m]\nquota = \"10 gb\"\n", "c.toml:5:9: limits.m.quota: ", "bad quota"},
    {BASE SEC "[limits.m]\nquota = true\n", "c.toml:5:9: limits.m.quota: ", "expected a size"},
    {BASE SEC "[limits]\nstate-file = 5\n",
     "c.toml:5:14: limits.state-file: ", "expected a file path string"},
    {BASE SEC "[limits]\nstate-interval = \"0s\"\n",
     "c.toml:5:18: limits.state-interval: ", "out of range"},
    {BASE SEC "[limits]\nstate = \"x\"\n",
     "c.toml:5:1: limits.state: ", "expected a [limits.LABEL] table, state-file or state-interval"},
    {BASE "drain-timeout = \"2h\"\n" SEC, "c.toml:2:17: drain-timeout: ", "out of range"},
    {BASE SEC "[limits.m]\nquota-reset = \"400d\"\n",
     "c.toml:5:15: limits.m.quota-reset: ", "bad duration"},
    {BASE SEC "[limits.m]\nquota-reset = \"0s\"\n",
     "c.toml:5:15: limits.m.quota-reset: ", "out of range"},
    {BASE "limits = 5\n" SEC, "c.toml:2:10: limits: ", "expected a table"},
    {BASE SEC "[defense.doppelganger]\nurls = [\"http://a.example/\"]\n",
     "c.toml:5:9: defense.doppelganger.urls: ", "https:// URL"},
    {BASE SEC "[defense.doppelganger]\nurls = \"https://a.example/\"\n",
     "c.toml:5:8: defense.doppelganger.urls: ", "expected an array"},
    {BASE SEC "[defense.doppelganger]\nrepeats-per-raid = 0\n",
     "c.toml:5:20: defense.doppelganger.repeats-per-raid: ", "out of range"},
    {BASE SEC "[defense.doppelganger]\nmax-delay = \"2s\"\n",
     "c.toml:5:13: defense.doppelganger.max-delay: ", "out of range"},
    {BASE SEC "[defense]\nmss-clamp = 50\n", "c.toml:5:13: defense.mss-clamp: ", "out of range"},
    {BASE SEC "[defense]\nmss-clamp = \"256\"\n",
     "c.toml:5:13: defense.mss-clamp: ", "a boolean or a segment size"},
    {SEC, "c.toml: ", "no listen address"},
    {BASE, "c.toml: ", "no secret"},
    {BASE "a = [1\n", "c.toml:2:5: ", "unterminated array"},
};

static void test_errors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const struct bad_case *c = &bad_cases[i];
        struct config cfg;
        struct warnings w = {0};
        char err[512] = "";
        int rc = load(&cfg, c->text, err, sizeof err, &w);
        if (rc != -EINVAL || strncmp(err, c->where, strlen(c->where)) != 0 ||
            !strstr(err, c->why) || !strstr(err, "expected"))
            fail_msg("case %zu: rc %d, message \"%s\"; wanted \"%s...%s\"", i, rc, err, c->where,
                     c->why);
        /* Secrets never reach an error message, whichever part of them. */
        assert_null(strstr(err, KEY_A));
        assert_null(strstr(err, "b00ebb67"));
        assert_null(strstr(w.all, KEY_A));
        /* A failed load leaves an empty, initialised config. */
        assert_int_equal(cfg.nlisten, 0);
        assert_int_equal(cfg.nsecrets, 0);
        assert_null(cfg.secrets);
        config_cleanup(&cfg);
    }
}

/* A secret pasted where it does not belong (a bare line, a key, a label, a table name, a
   value a message quotes; each @ of a place) never comes back in the error, in any of its
   forms: on a reload that error is logged before the file's secrets are in the log's scrub
   list. */
static void test_errors_never_echo_secrets(void **state)
{
    (void)state;
    static const char *const forms[] = {
        KEY_A, /* classic */
        DD_A,
        EE_A,
        "EEB00EBB678BF4D454A4AE053927CEB06E6578616D706C652E636F6D",
        EE_A_B64,
        "7rAOu2eL9NRUpK4FOSfOsG5leGFtcGxlLmNvbQ==", /* padded */
        "sA67Z4v01FSkrgU5J86w",                     /* base64url of the key, cut short */
        "eeb00ebb678bf4d454a4ae05",                 /* hex, cut short */
    };
    static const char *const places[] = {
        "[secrets]\n@\n",
        "[secrets]\n@ = \"" EE_A "\"\n",
        "[secrets]\n\"@\" = \"" EE_A "\"\n",
        "[secrets]\nmain = \"" EE_A "\"\n@ = 1\n",
        "[secrets]\nmain = \"" EE_A "\"\n@ = \"x\"\n@ = \"y\"\n",
        "@\n",
        "@ = \"127.0.0.1:443\"\n",
        "[@]\nx = 1\n",
        "[secrets]\nmain = \"" EE_A "\"\n[limits.@]\nmax-connections = 1\n",
        "[secrets]\nmain = \"" EE_A "\"\n[domain-fronting]\nhost = \"@:443\"\n",
        "[secrets]\nmain = \"" EE_A "\"\n[network]\nproxies = [\"socks5://@\"]\n",
        "log-level = \"@\"\n",
    };
    for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++) {
        for (size_t p = 0; p < sizeof places / sizeof places[0]; p++) {
            char text[1024], err[512] = "";
            const char *form = forms[f];
            size_t n = (size_t)snprintf(text, sizeof text, "bind-to = \"127.0.0.1:8443\"\n");
            for (const char *t = places[p]; *t && n + strlen(form) + 2 < sizeof text; t++)
                n += (size_t)snprintf(text + n, sizeof text - n, "%.*s", *t == '@' ? 80 : 1,
                                      *t == '@' ? form : t);
            struct config cfg;
            struct warnings w = {0};
            int rc = load(&cfg, text, err, sizeof err, &w);
            if (rc == 0)
                fail_msg("form %zu, place %zu: loaded", f, p);
            for (size_t k = 0; k + 8 <= strlen(form); k++)
                if (memmem(err, strlen(err), form + k, 8) ||
                    memmem(w.all, strlen(w.all), form + k, 8))
                    fail_msg("form %zu, place %zu: \"%s\"", f, p, err);
            config_cleanup(&cfg);
        }
    }
}

/* [network] proxies: URLs decoded into upstreams; passwords never in messages. */
static void test_proxies(void **state)
{
    (void)state;
    struct config cfg;
    struct warnings w = {0};
    char err[512] = "";
    assert_int_equal(load(&cfg,
                          BASE SEC "[network]\nproxies = [\"\", \"socks5://127.0.0.1:1080\", "
                                   "\"socks5://us%40r:pa%3Ass@[::1]:9050/\"]\n",
                          err, sizeof err, &w),
                     0);
    assert_int_equal(cfg.nproxies, 2);
    assert_false(cfg.proxies[0].auth);
    assert_int_equal(cfg.proxies[0].addr.port, 1080);
    assert_true(cfg.proxies[1].auth);
    assert_string_equal(cfg.proxies[1].addr.host, "::1");
    assert_string_equal(cfg.proxies[1].user, "us@r");
    assert_string_equal(cfg.proxies[1].pass, "pa:ss");
    assert_int_equal(w.n, 0);
    config_cleanup(&cfg);
    /* Errors point at the element and never quote the credentials. */
    const char *bad[] = {
        BASE SEC "[network]\nproxies = [\"socks5://user:hunter22@proxy.example:1\"]\n",
        BASE SEC "[network]\nproxies = [\"socks5://user:hunter22%@1.2.3.4:1\"]\n",
        BASE SEC "[network]\nproxies = [\"socks5://user:hunter22@1.2.3.4:0\"]\n",
        BASE SEC "[network]\nproxies = [\"socks5://user:hunter22@1.2.3.4:1/x\"]\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(load(&cfg, bad[i], err, sizeof err, &w), -EINVAL);
        assert_non_null(strstr(err, "c.toml:5:12: network.proxies: "));
        assert_null(strstr(err, "hunter22"));
        assert_int_equal(cfg.nproxies, 0);
        config_cleanup(&cfg);
    }
    /* At most CONFIG_MAX_PROXIES. */
    char text[2048];
    int n = snprintf(text, sizeof text, "%s", BASE SEC "[network]\nproxies = [");
    for (int i = 0; i <= CONFIG_MAX_PROXIES; i++)
        n += snprintf(text + n, sizeof text - (size_t)n, "\"socks5://10.0.0.%d:1080\",", i + 1);
    snprintf(text + n, sizeof text - (size_t)n, "]\n");
    assert_int_equal(load(&cfg, text, err, sizeof err, &w), -EINVAL);
    assert_non_null(strstr(err, "too many upstream proxies"));
    config_cleanup(&cfg);
}

/* [network] dns and doh-ip: DoH URLs in canonical form; the other forms mtg knows are
   refused with a reason, and user info never reaches the message. */
static void test_dns(void **state)
{
    (void)state;
    static const struct {
        const char *dns, *ip, *url, *host;
        uint16_t port;
    } good[] = {
        {"https://1.1.1.1", "", "https://1.1.1.1/dns-query", "1.1.1.1", 443},
        {"HTTPS://dns.google/resolve", "", "https://dns.google/resolve", "dns.google", 443},
        {"https://[2606:4700::1111]:8443", "", "https://[2606:4700::1111]:8443/dns-query",
         "2606:4700::1111", 8443},
        {"https://cloudflare-dns.com/dns-query", "1.1.1.1", "https://cloudflare-dns.com/dns-query",
         "cloudflare-dns.com", 443},
        {"", "[2620:fe::fe]", "https://[2620:fe::fe]/dns-query", "2620:fe::fe", 443},
        {"1.1.1.1", "", "udp://1.1.1.1", "1.1.1.1", 53}, /* mtg: a bare IP is plain DNS */
        {"udp://[2620:fe::fe]:5353", "", "udp://[2620:fe::fe]:5353", "2620:fe::fe", 5353},
        {"TLS://dns.google", "8.8.8.8", "tls://dns.google", "dns.google", 853},
        {"tls://1.1.1.1:853", "", "tls://1.1.1.1", "1.1.1.1", 853},
        {"", "", "", "", 0},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, BASE SEC "[network]\ndns = \"%s\"\ndoh-ip = \"%s\"\n",
                 good[i].dns, good[i].ip);
        struct config cfg;
        struct warnings w = {0};
        char err[512] = "";
        if (load(&cfg, text, err, sizeof err, &w) != 0)
            fail_msg("case %zu: %s", i, err);
        assert_string_equal(cfg.dns.url, good[i].url);
        assert_string_equal(cfg.dns.host, good[i].host);
        assert_int_equal(cfg.dns.port, good[i].port);
        assert_int_equal(w.n, 0);
        config_cleanup(&cfg);
    }
    static const struct {
        const char *line, *why;
    } bad[] = {
        {"dns = \"xx\"", "neither a URL nor an IP address"},
        {"dns = \"1.1.1.1/xxx\"", "neither a URL nor an IP address"},
        {"dns = \"udp://dns.google\"", "needs the server's IP address"},
        {"dns = \"tls://1.1.1.1/xx\"", "a path is only for https://"},
        {"dns = \"udp://1.1.1.1/xcv\"", "a path is only for https://"},
        {"dns = \"tls://user:hunter22@1.1.1.1\"", "user info"},
        {"dns = \"dns://hahaha\"", "unsupported scheme"},
        {"dns = \"http://1.1.1.1/dns-query\"", "unsupported scheme"},
        {"dns = \"https://user:hunter22@1.1.1.1/\"", "user info"},
        {"dns = \"https://1.1.1.1/dns-query?dns=x\"", "braces"},
        {"dns = \"https://1.1.1.1?x=hunter22\"", "query or fragment"},
        {"dns = \"https://1.1.1.1/dns-query{?dns}\"", "braces"},
        {"dns = \"https://2606:4700::1111/\"", "brackets"},
        {"dns = \"https://1.1.1.1:0/\"", "port"},
        {"dns = \"https://bad_host!/\"", "host"},
        {"dns = \"https:///dns-query\"", "no host"},
        {"dns = 5", "expected a string"},
        {"doh-ip = \"dns.google\"", "not an IP address"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, BASE SEC "[network]\n%s\n", bad[i].line);
        struct config cfg;
        struct warnings w = {0};
        char err[512] = "";
        int rc = load(&cfg, text, err, sizeof err, &w);
        if (rc != -EINVAL || !strstr(err, "c.toml:5:") || !strstr(err, bad[i].why) ||
            !strstr(err, "expected") || strstr(err, "hunter22"))
            fail_msg("case %zu: rc %d, \"%s\"; wanted \"%s\"", i, rc, err, bad[i].why);
        config_cleanup(&cfg);
    }
}

/* [limits.LABEL] may come before [secrets]; labels without a table get no limits. */
static void test_limits(void **state)
{
    (void)state;
    struct config cfg;
    struct warnings w = {0};
    char err[512] = "";
    static const char doc[] =
        BASE "[limits.b]\nmax-connections = 10\nexpires = \"2027-01-31\"\n"
             "[limits.a]\nexpires = \"2027-01-31T12:00:00+02:00\"\nmax-unique-ips = 3\n"
             "unique-ips-window = \"10m\"\nquota = \"10gib\"\nquota-reset = \"720h\"\n"
             "[secrets]\na = \"" EE_A "\"\nb = \"" DD_A "\"\nc = \"" EE_A "\"\n";
    assert_int_equal(load(&cfg, doc, err, sizeof err, &w), 0);
    assert_int_equal(cfg.nsecrets, 3);
    assert_int_equal(cfg.secrets[0].limits.max_connections, 0);
    assert_int_equal(cfg.secrets[0].limits.expires, 1801353600 + 10 * 3600);
    assert_int_equal(cfg.secrets[0].limits.max_unique_ips, 3);
    assert_int_equal(cfg.secrets[0].limits.unique_ips_window_s, 600);
    assert_int_equal(cfg.secrets[1].limits.max_unique_ips, 0);
    assert_int_equal(cfg.secrets[0].limits.quota, 10ull << 30);
    assert_int_equal(cfg.secrets[0].limits.quota_reset_s, 720 * 3600);
    assert_int_equal(cfg.secrets[1].limits.quota, 0);
    assert_int_equal(cfg.secrets[1].limits.max_connections, 10);
    assert_int_equal(cfg.secrets[1].limits.expires, 1801353600);
    assert_int_equal(cfg.secrets[2].limits.max_connections, 0);
    assert_int_equal(cfg.secrets[2].limits.expires, 0);
    assert_int_equal(w.n, 0);
    config_cleanup(&cfg);
}

/* Access lists: files and urls (where mtg's local paths count as files), mtg's defaults. */
static void test_access_lists(void **state)
{
    (void)state;
    struct config cfg;
    struct warnings w = {0};
    char err[512] = "";
    static const char doc[] =
        BASE SEC "[defense.blocklist]\nenabled = true\nfiles = [\"/etc/a.netset\"]\n"
                 "urls = [\"https://lists.example/b.netset\", \"c.netset\"]\n"
                 "[defense.allowlist]\nenabled = true\nurls = [\"HTTPS://x.example/l\"]\n"
                 "download-concurrency = 4\nupdate-each = \"90s\"\n";
    if (load(&cfg, doc, err, sizeof err, &w) != 0)
        fail_msg("%s", err);
    assert_int_equal(cfg.blocklist.nsources, 3);
    assert_false(cfg.blocklist.sources[0].is_url);
    assert_true(cfg.blocklist.sources[1].is_url);
    assert_false(cfg.blocklist.sources[2].is_url);
    assert_string_equal(cfg.blocklist.sources[2].text, "c.netset");
    assert_int_equal(cfg.blocklist.download_concurrency, 1); /* mtg's defaults */
    assert_int_equal(cfg.blocklist.update_each_s, 6 * 3600);
    assert_true(cfg.allowlist.enabled);
    assert_true(cfg.allowlist.sources[0].is_url);
    assert_int_equal(cfg.allowlist.download_concurrency, 4);
    assert_int_equal(cfg.allowlist.update_each_s, 90);
    assert_int_equal(w.n, 0);
    config_cleanup(&cfg);
}

/* [defense] mss-clamp: on (256) unless said otherwise; true, false or a size. */
static void test_mss_clamp(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        uint32_t want;
    } cases[] = {
        {BASE SEC, CONFIG_MSS_CLAMP_DEFAULT},
        {BASE SEC "[defense]\nmss-clamp = false\n", 0},
        {BASE SEC "[defense]\nmss-clamp = true\n", 256},
        {BASE SEC "[defense]\nmss-clamp = 536\n", 536},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct config cfg;
        struct warnings w = {0};
        char err[512] = "";
        if (load(&cfg, cases[i].text, err, sizeof err, &w) != 0)
            fail_msg("case %zu: %s", i, err);
        assert_int_equal(cfg.mss_clamp, cases[i].want);
        config_cleanup(&cfg);
    }
    assert_int_equal(CONFIG_MSS_CLAMP_DEFAULT, 256);
}

/* Which listeners the clamp reaches: every one but those on a loopback address, which only
   this host's processes reach (a local front); mss-clamp-loopback = true clamps those too. */
static void test_mss_clamp_loopback(void **state)
{
    (void)state;
    static const struct {
        const char *bind, *defense;
        uint32_t want;
    } cases[] = {
        {"0.0.0.0:443", "", 256},
        {"192.0.2.1:443", "mss-clamp = 536\n", 536},
        {"[::]:443", "", 256},
        {"127.0.0.1:443", "", 0},
        {"127.3.2.1:443", "", 0},
        {"[::1]:443", "", 0},
        {"[::ffff:127.0.0.1]:443", "", 0}, /* IPv4 loopback, mapped */
        {"[::ffff:192.0.2.1]:443", "", 256},
        {"127.0.0.1:443", "mss-clamp-loopback = true\n", 256},
        {"[::1]:443", "mss-clamp = 300\nmss-clamp-loopback = true\n", 300},
        {"127.0.0.1:443", "mss-clamp = false\nmss-clamp-loopback = true\n", 0},
        {"0.0.0.0:443", "mss-clamp = false\n", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, "bind-to = \"%s\"\n" SEC "[defense]\n%s", cases[i].bind,
                 cases[i].defense);
        struct config cfg;
        struct warnings w = {0};
        char err[512] = "";
        if (load(&cfg, text, err, sizeof err, &w) != 0)
            fail_msg("case %zu: %s", i, err);
        assert_int_equal(cfg.nlisten, 1);
        if (config_listen_clamp(&cfg, &cfg.listen[0]) != cases[i].want)
            fail_msg("case %zu (%s, %s): clamp %u, want %u", i, cases[i].bind, cases[i].defense,
                     config_listen_clamp(&cfg, &cfg.listen[0]), cases[i].want);
        config_cleanup(&cfg);
    }
}

/* The replay window covers every replay the clock check lets through (2 x skew + 2 s). */
static void test_replay_window_covers_skew(void **state)
{
    (void)state;
    struct config cfg;
    struct warnings w = {0};
    char err[512] = "";
    /* Not set: derived from a large skew instead of the 300 s default. */
    assert_int_equal(load(&cfg, BASE "tolerate-time-skewness = \"1h\"\n" SEC, err, sizeof err, &w),
                     0);
    assert_int_equal(cfg.antireplay.window_s, 7202);
    config_cleanup(&cfg);
    /* Exactly long enough, and the default skew with the default window. */
    assert_int_equal(load(&cfg,
                          BASE "tolerate-time-skewness = \"12s\"\n" SEC
                               "[defense.anti-replay]\nwindow = 26\n",
                          err, sizeof err, &w),
                     0);
    assert_int_equal(cfg.antireplay.window_s, 26);
    config_cleanup(&cfg);
    assert_int_equal(load(&cfg, BASE SEC, err, sizeof err, &w), 0);
    assert_int_equal(cfg.antireplay.window_s, 300);
    /* Built configs (simple-run) are checked by config_validate too. */
    cfg.antireplay.window_s = 241;
    assert_int_equal(config_validate(&cfg, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "at least 242 s"));
    cfg.antireplay.enabled = false; /* no cache, nothing to cover */
    assert_int_equal(config_validate(&cfg, err, sizeof err), 0);
    config_cleanup(&cfg);
    /* A disabled cache may keep any window. */
    assert_int_equal(load(&cfg,
                          BASE SEC "[defense.anti-replay]\nenabled = false\nwindow = \"10s\"\n",
                          err, sizeof err, &w),
                     0);
    config_cleanup(&cfg);
}

static void test_builders(void **state)
{
    (void)state;
    struct config cfg;
    char err[256];
    struct secret s;
    config_init(&cfg);
    assert_int_equal(secret_parse(EE_A, strlen(EE_A), &s, err, sizeof err), 0);
    for (int i = 0; i < CONFIG_MAX_SECRETS; i++) {
        char label[16];
        snprintf(label, sizeof label, "s%d", i);
        assert_int_equal(config_add_secret(&cfg, label, &s, err, sizeof err), 0);
    }
    assert_int_equal(config_add_secret(&cfg, "one-more", &s, err, sizeof err), -ENOSPC);
    assert_int_equal(config_add_secret(&cfg, "", &s, err, sizeof err), -EINVAL);
    for (int i = 0; i < CONFIG_MAX_LISTEN; i++) {
        char a[32];
        int n = snprintf(a, sizeof a, "127.0.0.1:%d", 1000 + i);
        assert_int_equal(config_add_listen(&cfg, a, (size_t)n, err, sizeof err), 0);
    }
    assert_int_equal(config_add_listen(&cfg, "127.0.0.2:1", 11, err, sizeof err), -ENOSPC);
    assert_int_equal(config_validate(&cfg, err, sizeof err), 0);
    config_cleanup(&cfg);
    assert_null(cfg.secrets);
    config_cleanup(&cfg); /* idempotent */
    config_cleanup(NULL);
}

static void test_load_file_errors(void **state)
{
    (void)state;
    struct config cfg;
    char err[512];
    config_init(&cfg);
    assert_int_equal(
        config_load_file(&cfg, "/nonexistent/tgproxy.toml", err, sizeof err, NULL, NULL), -ENOENT);
    assert_non_null(strstr(err, "/nonexistent/tgproxy.toml: cannot open"));
    assert_int_equal(config_load_file(&cfg, "/", err, sizeof err, NULL, NULL), -EINVAL);
    assert_string_equal(err, "/: a directory, expected a regular file");
    config_cleanup(&cfg);
}

static void on_alarm(int sig)
{
    (void)sig;
}

/* A FIFO at the path is refused at once: opened blocking, open() would wait for a writer
   (on a reload, with the main thread and its signals). The alarm bounds the test: without
   SA_RESTART it interrupts a blocked open(), which then fails with EINTR, not EINVAL. */
static void test_load_file_fifo(void **state)
{
    (void)state;
    char dir[] = "/tmp/tgproxy-cfg-XXXXXX", path[64], err[512];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/tgproxy.toml", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    struct sigaction sa = {.sa_handler = on_alarm}, old;
    assert_int_equal(sigaction(SIGALRM, &sa, &old), 0);
    alarm(5);
    struct config cfg;
    config_init(&cfg);
    int rc = config_load_file(&cfg, path, err, sizeof err, NULL, NULL);
    alarm(0);
    sigaction(SIGALRM, &old, NULL);
    assert_int_equal(rc, -EINVAL);
    assert_non_null(strstr(err, "tgproxy.toml: a FIFO, expected a regular file"));
    config_cleanup(&cfg);
    unlink(path);
    rmdir(dir);
}

/* A config group or others can read loads, with a warning (it holds secrets). */
static void test_load_file_exposed(void **state)
{
    (void)state;
    char path[] = "/tmp/tgproxy-cfg-XXXXXX", err[512];
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    static const char text[] = "bind-to = \"127.0.0.1:8443\"\nsecret = \"" EE_A "\"\n";
    assert_int_equal(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd);
    static const mode_t modes[] = {0600, 0640, 0604, 0644};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        assert_int_equal(chmod(path, modes[i]), 0);
        struct config cfg;
        struct warnings w = {0};
        config_init(&cfg);
        assert_int_equal(config_load_file(&cfg, path, err, sizeof err, collect, &w), 0);
        assert_int_equal(w.n, modes[i] == 0600 ? 0 : 1);
        if (w.n)
            assert_non_null(strstr(w.all, "is readable by other users and holds secrets"));
        config_cleanup(&cfg);
    }
    unlink(path);
}

static void test_out_of_memory(void **state)
{
    (void)state;
    bool saw_nomem = false;
    for (uint64_t nth = 1; nth < 200; nth++) {
        struct config cfg;
        struct warnings w = {0};
        char err[512];
        config_init(&cfg);
        tg__alloc_fail_at(nth);
        int rc = config_parse(&cfg, "c.toml", full_doc, sizeof full_doc - 1, err, sizeof err,
                              collect, &w);
        tg__alloc_fail_at(0);
        assert_true(rc == 0 || rc == -ENOMEM);
        if (rc == -ENOMEM) {
            saw_nomem = true;
            assert_non_null(strstr(err, "out of memory"));
            assert_int_equal(cfg.nsecrets, 0);
        }
        config_cleanup(&cfg);
        if (rc == 0)
            break;
    }
    assert_true(saw_nomem);
}

/* Middle-proxy mode: the top-level tag, [ad-tags] overrides ("" = direct), [middle-proxy]
   with its two local files read at load, its defaults, and a bad list refused with its line. */
static void test_midproxy_keys(void **state)
{
    (void)state;
    char dir[] = "/tmp/tgkit-mpcfg-XXXXXX", sp[64], cp[64], text[1024], err[512];
    assert_non_null(mkdtemp(dir));
    snprintf(sp, sizeof sp, "%s/proxy-secret", dir);
    snprintf(cp, sizeof cp, "%s/proxy-config", dir);
    FILE *f = fopen(sp, "wb");
    assert_non_null(f);
    for (int i = 0; i < 128; i++)
        fputc(i, f);
    fclose(f);
    f = fopen(cp, "w");
    assert_non_null(f);
    fputs("default 2;\nproxy_for 2 127.0.0.1:8888;\nproxy_for -2 127.0.0.1:8889;\n", f);
    fclose(f);
    snprintf(text, sizeof text,
             BASE "ad-tag = \"0123456789ABCDEF0123456789abcdef\"\n"
                  "[secrets]\na = \"" EE_A "\"\nb = \"" DD_A "\"\nc = \"" KEY_A "\"\n"
                  "[ad-tags]\nb = \"ffeeddccbbaa99887766554433221100\"\nc = \"\"\n"
                  "[middle-proxy]\nproxy-secret = \"%s\"\nproxy-config = \"%s\"\n",
             sp, cp);
    struct config cfg;
    config_init(&cfg);
    assert_int_equal(config_parse(&cfg, "c.toml", text, strlen(text), err, sizeof err, NULL, NULL),
                     0);
    const uint8_t *t = config_ad_tag(&cfg, 0);
    assert_non_null(t);
    assert_memory_equal(t, "\x01\x23\x45\x67\x89\xab\xcd\xef", 8);
    t = config_ad_tag(&cfg, 1);
    assert_non_null(t);
    assert_int_equal(t[0], 0xff);
    assert_null(config_ad_tag(&cfg, 2));
    assert_null(config_ad_tag(&cfg, 3));
    assert_true(cfg.mp.enabled);
    assert_int_equal(cfg.mp.secret_len, 128);
    assert_int_equal(cfg.mp.secret[127], 127);
    assert_int_equal(cfg.mp.conf.n, 2);
    assert_int_equal(cfg.mp.connections, 2);
    assert_true(cfg.mp.fallback_direct);
    assert_int_equal(cfg.mp.client_buffer, 8u << 20);
    assert_int_equal(cfg.mp.update_s, 86400);
    assert_string_equal(cfg.mp.config6_path, ""); /* a list of one's own: no Telegram v6 list */
    assert_int_equal(cfg.mp.buffer_total, 256u << 20);
    config_cleanup(&cfg);

    /* [middle-proxy] alone: Telegram's three documents by URL, read by nobody at load */
    const char *bare = BASE "[secrets]\na = \"" EE_A "\"\n[middle-proxy]\nupdate-each = \"6h\"\n"
                            "state-dir = \"/srv/tgp\"\npublic-ip-url = \"https://ip.example/\"\n";
    config_init(&cfg);
    assert_int_equal(config_parse(&cfg, "c.toml", bare, strlen(bare), err, sizeof err, NULL, NULL),
                     0);
    assert_string_equal(cfg.mp.secret_path, "https://core.telegram.org/getProxySecret");
    assert_string_equal(cfg.mp.config_path, "https://core.telegram.org/getProxyConfig");
    assert_string_equal(cfg.mp.config6_path, "https://core.telegram.org/getProxyConfigV6");
    assert_string_equal(cfg.mp.ip_url, "https://ip.example/");
    assert_string_equal(cfg.mp.state_dir, "/srv/tgp");
    assert_int_equal(cfg.mp.update_s, 6 * 3600);
    assert_int_equal(cfg.mp.secret_len, 0);
    assert_int_equal(cfg.mp.conf.n, 0);
    config_cleanup(&cfg);

    /* a list that does not parse: the file, its line, why */
    f = fopen(cp, "w");
    assert_non_null(f);
    fputs("default 2;\nproxy_for 2 core.telegram.org:8888;\n", f);
    fclose(f);
    config_init(&cfg);
    assert_int_equal(config_parse(&cfg, "c.toml", text, strlen(text), err, sizeof err, NULL, NULL),
                     -EINVAL);
    assert_non_null(strstr(err, "middle-proxy.proxy-config: "));
    assert_non_null(strstr(err, "line 2: 'core.telegram.org' is not an IPv4"));
    config_cleanup(&cfg);
    /* a proxy secret of the wrong size, and a missing one */
    f = fopen(sp, "wb");
    assert_non_null(f);
    fputs("short", f);
    fclose(f);
    config_init(&cfg);
    assert_int_equal(config_parse(&cfg, "c.toml", text, strlen(text), err, sizeof err, NULL, NULL),
                     -EINVAL);
    assert_non_null(strstr(err, "5 bytes, expected 32..256"));
    config_cleanup(&cfg);
    unlink(sp);
    config_init(&cfg);
    assert_true(config_parse(&cfg, "c.toml", text, strlen(text), err, sizeof err, NULL, NULL) != 0);
    assert_non_null(strstr(err, "middle-proxy.proxy-secret: "));
    assert_non_null(strstr(err, "cannot open"));
    config_cleanup(&cfg);
    unlink(cp);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_minimal_and_defaults),
        cmocka_unit_test(test_every_key),
        cmocka_unit_test(test_mtg_config),
        cmocka_unit_test(test_mtg_deprecated_keys),
        cmocka_unit_test(test_stats_keys),
        cmocka_unit_test(test_fleet_keys),
        cmocka_unit_test(test_example_config_loads),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_errors_never_echo_secrets),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_access_lists),
        cmocka_unit_test(test_mss_clamp),
        cmocka_unit_test(test_mss_clamp_loopback),
        cmocka_unit_test(test_replay_window_covers_skew),
        cmocka_unit_test(test_proxies),
        cmocka_unit_test(test_dns),
        cmocka_unit_test(test_builders),
        cmocka_unit_test(test_load_file_errors),
        cmocka_unit_test(test_load_file_fifo),
        cmocka_unit_test(test_load_file_exposed),
        cmocka_unit_test(test_out_of_memory),
        cmocka_unit_test(test_midproxy_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
