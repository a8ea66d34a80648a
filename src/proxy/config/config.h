/*
 * config: tgproxy's runtime configuration, loaded from TOML (mtg-compatible keys).
 *
 * A struct config is the whole, validated configuration of one proxy process. It is filled
 * by config_load_file() / config_parse() from a TOML document (see toml.h) or built field by
 * field by the command line (`tgproxy simple-run`), after config_init() set every default.
 * docs/tgproxy.md lists every key, its default and the mtg compatibility table;
 * examples/tgproxy.example.toml documents the same keys and is loaded by a test.
 *
 * Invariants after a successful load (the engine may rely on them without re-checking):
 *   - nlisten >= 1; every listen address is a numeric IPv4 or IPv6 address (port 0 means
 *     "let the kernel pick", for tests);
 *   - nsecrets >= 1; labels are unique, non-empty, at most CONFIG_LABEL_MAX - 1 bytes of
 *     [A-Za-z0-9_.-]; two entries may share a key (one key served as ee, dd and classic);
 *   - each [dcs] entry has 1..CONFIG_MAX_DC_ADDRS addresses; ids are unique, at most one
 *     entry has is_default set; an address whose host is not an IP literal has
 *     resolved == false and is resolved by the engine when needed (nothing touches the
 *     network at load time);
 *   - every duration is > 0, in the unit its name says (_ms, _s); every size is in bytes;
 *   - fronting.addr (when fronting.resolved) already carries fronting.port.
 *
 * Ownership: config_init() sets defaults and owns nothing; arrays (listen, secrets, dcs) are
 * allocated with tg__malloc by the loader and released by config_cleanup(). A struct config
 * is not copyable by assignment (pointers are shared); pass it by const pointer.
 * Thread-safety: a loaded config is immutable and may be read from any number of threads.
 * Secrets: the key bytes live in secrets[i].secret; config never logs or prints them, and
 * error messages name the label and position, never the secret text.
 */
#ifndef TGPROXY_CONFIG_H
#define TGPROXY_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "proxy/wire/mpconf.h"
#include "proxy/wire/secret.h"
#include "proxy/wire/socks5.h"
#include "proxy/wire/value.h"

#define CONFIG_LABEL_MAX    64 /* bytes, including the NUL */
#define CONFIG_HOST_MAX     VALUE_HOST_MAX
#define CONFIG_MAX_LISTEN   16  /* bind-to addresses */
#define CONFIG_MAX_SECRETS  4096 /* secrets of a generation: [secrets] and the API's */
#define CONFIG_MAX_WORKERS  256 /* `workers`; also the cap when 0 picks the CPU count */
#define CONFIG_MAX_DCS      64  /* entries in [dcs] */
#define CONFIG_MAX_DC_ADDRS 16  /* addresses per [dcs] entry */
#define CONFIG_MAX_PROXIES  16  /* [network] proxies */
#define CONFIG_URL_MAX      512 /* [network] dns, bytes with the NUL */
#define CONFIG_IP_MAX       48  /* an IP literal as text, with the NUL */
#define CONFIG_ERR_MAX      512 /* suggested size of the err buffers below */
#define CONFIG_PATH_MAX     128 /* [stats.prometheus] http-path, including the NUL */
#define CONFIG_PREFIX_MAX   64  /* metric-prefix, including the NUL */
#define CONFIG_FILE_MAX     256 /* [limits] state-file path, including the NUL */
#define CONFIG_MSS_CLAMP_DEFAULT 256 /* [defense] mss-clamp = true */
#define CONFIG_DOPPEL_URLS  8   /* [defense.doppelganger] urls */
#define CONFIG_DOPPEL_ULEN  256 /* one of those urls, including the NUL */

#define CONFIG_API_ALLOW_MAX 1024 /* [api] allow: CIDRs, one per line, with the NUL */

#define CONFIG_SOURCE_MAX  1024 /* an access-list file path or URL, including the NUL */
#define CONFIG_MAX_SOURCES 64   /* files + urls of one access list */

/* [stats.statsd] tag-format: how labels ride on a statsd line. */
enum config_tag_format {
    CONFIG_TAGS_DATADOG = 0,  /* name:1|c|#secret:a,dc:2 */
    CONFIG_TAGS_INFLUXDB = 1, /* name,secret=a,dc=2:1|c */
    CONFIG_TAGS_GRAPHITE = 2, /* name;secret=a;dc=2:1|c */
};

/* prefer-ip: mtg's values, same meaning. */
enum config_prefer_ip {
    CONFIG_PREFER_IPV4 = 0, /* "prefer-ipv4": try IPv4 addresses first, then IPv6 */
    CONFIG_PREFER_IPV6 = 1, /* "prefer-ipv6" (default, as mtg) */
    CONFIG_ONLY_IPV4 = 2,   /* "only-ipv4" */
    CONFIG_ONLY_IPV6 = 3,   /* "only-ipv6" */
};

/* One listening socket (bind-to): always numeric. */
struct config_listen {
    struct sockaddr_storage addr;
    socklen_t addr_len;
    char text[CONFIG_HOST_MAX + 8]; /* canonical "1.2.3.4:443" or "[::1]:443", for logs */
};

/* [limits.LABEL]: per-secret limits; every field 0 = no limit (the default). */
struct config_limits {
    uint32_t max_connections;     /* max-connections: open client connections at once */
    uint32_t max_unique_ips;      /* max-unique-ips: distinct client IPs within the window */
    uint32_t unique_ips_window_s; /* unique-ips-window; 0 = the default, 3600 */
    uint64_t quota;               /* quota: bytes relayed, both directions, per period */
    uint32_t quota_reset_s;       /* quota-reset: period length; 0 = the quota never resets */
    int64_t expires;              /* expires: Unix seconds (RFC 3339 time or date); 0 = never */
};

/* One entry of [secrets] (mtg's single `secret` becomes label "default"). */
struct config_secret {
    char label[CONFIG_LABEL_MAX]; /* safe to log */
    struct secret secret;         /* never log */
    struct config_limits limits;  /* from [limits.<label>] */
    int8_t ad_tag_mode;           /* [ad-tags]: 0 = the top-level ad-tag, 1 = ad_tag, -1 = none */
    uint8_t ad_tag[16];
};

/* One source of an access list: a local file or an https:// URL. */
struct config_iplist_source {
    bool is_url;
    char text[CONFIG_SOURCE_MAX]; /* the path or URL as written */
};

/* [defense.blocklist] / [defense.allowlist] (mtg's keys; acl.h applies them). */
struct config_iplist {
    bool enabled;                         /* default false */
    struct config_iplist_source *sources; /* in the file's order; enabled => >= 1 */
    size_t nsources;
    uint32_t download_concurrency; /* parallel downloads; default 1 (as mtg) */
    uint32_t update_each_s;        /* re-read files and re-download urls; default 21600 (6 h) */
};

/* One [dcs] entry: an override of a DC's addresses. */
struct config_dc {
    int32_t id;      /* signed DC id (-2 = media DC 2, 10002 = test DC 2); 0 if is_default */
    bool is_default; /* key "default": used for every id without its own entry */
    size_t naddrs;   /* 1..CONFIG_MAX_DC_ADDRS, tried in order (after prefer-ip sorting) */
    struct value_hostport addrs[CONFIG_MAX_DC_ADDRS];
};

struct config {
    /* Where this config came from ("<cmdline>" for simple-run), for messages. */
    char source[CONFIG_HOST_MAX];

    /* bind-to: a string or an array of strings. Default: none (required). */
    struct config_listen *listen;
    size_t nlisten;

    /* [secrets] label = "secret", and/or mtg's top-level secret. Required, >= 1. */
    struct config_secret *secrets;
    size_t nsecrets;

    /* [dcs]: overrides of the built-in DC table; empty by default. */
    struct config_dc *dcs;
    size_t ndcs;
    bool use_test_dcs; /* test-dcs: route ids 10001..10003 to the test table (default false) */

    /* [network] proxies: SOCKS5 upstreams for DC connections (round-robin, failover to the
       next on error); empty = direct. Each is an IP literal with a port; user/pass decoded
       (never logged). The fronting connection always goes direct. */
    struct socks5_upstream *proxies;
    size_t nproxies;

    /* [network] dns / doh-ip: resolve [dcs] and fronting host names through DNS over HTTPS
       (RFC 8484), DNS over TLS or plain UDP DNS instead of the system resolver (doh.h).
       url "" = the system resolver (default). */
    struct {
        char url[CONFIG_URL_MAX];   /* "https://host[:port]/path", "tls://host[:port]" or
                                       "udp://ip[:port]" (canonical; no user info) */
        char host[CONFIG_HOST_MAX]; /* the URL's host, without brackets */
        uint16_t port;              /* the URL's port: 443, 853 or 53 unless given */
        char ip[CONFIG_IP_MAX];     /* doh-ip: connect here instead of resolving host; "" none */
    } dns;

    enum config_prefer_ip prefer_ip;   /* default CONFIG_PREFER_IPV6 */
    uint32_t tolerate_time_skewness_s; /* FakeTLS timestamp window, ± seconds; default 120 */
    bool allow_fallback_on_unknown_dc; /* unknown DC -> DC 2 instead of close; default false */
    bool dynamic_records; /* dynamic-record-sizing: small records toward the client first
                             (1450 x 40, 4096 x 20, then 16384), again after 1 s quiet */
    bool fast_mode;       /* fast-mode (brief 3.3): the DC header carries the client's reply keys,
                             so DC -> client bytes pass without re-encryption; default true */

    uint32_t concurrency;      /* max simultaneous client connections; default 8192 */
    uint32_t drain_timeout_ms; /* drain-timeout: on SIGTERM/SIGINT, how long open connections
                                  may run on once accepting stopped; 0 = none; default 30000 */
    uint32_t workers; /* 0..CONFIG_MAX_WORKERS threads; 0 = online CPUs, capped (default) */

    /* [domain-fronting]: where failed handshakes go. host "" = the secret's own domain. */
    struct {
        char host[CONFIG_HOST_MAX]; /* `ip` or `host` key; "" = the ee secret's domain */
        uint16_t port;              /* default 443 */
        bool resolved;              /* host is an IP literal: addr is valid */
        struct sockaddr_storage addr;
        socklen_t addr_len;
        bool proxy_protocol; /* send a PROXY v2 header first; default false */
    } fronting;

    /* [network.timeout], milliseconds. */
    struct {
        uint32_t tcp_ms;       /* DC connect, per address; default 10000 */
        uint32_t idle_ms;      /* relay idle, either direction resets; default 300000 */
        uint32_t handshake_ms; /* accept -> obfs2 header parsed; default 10000 */
        uint32_t fronting_ms;  /* connect to the fronting host; default 5000 */
        uint32_t http_ms;      /* one DNS-over-HTTPS request, all included; default 10000 */
    } timeout;

    /* [network.keep-alive]: TCP keepalive on both legs. */
    struct {
        bool enabled;        /* default true (mtg's `disabled = false`) */
        uint32_t idle_s;     /* default 15 */
        uint32_t interval_s; /* default 15 */
        uint32_t count;      /* default 9 */
    } keepalive;

    /* [defense.anti-replay] */
    struct {
        bool enabled;         /* default true */
        uint32_t max_entries; /* default 1048576 (bounded cache) */
        uint32_t window_s;    /* default max(300, config_replay_window_min(skew)) */
    } antireplay;

    /* [defense.blocklist] and [defense.allowlist]: client addresses closed at accept. */
    struct config_iplist blocklist, allowlist;

    /* [defense] mss-clamp: TCP_MAXSEG on the public listeners before listen(), so the SYN-ACK
       announces it and clients' kernels cut the ClientHello into segments; 0 = off. Never on
       the metrics listener. CONFIG_MSS_CLAMP_DEFAULT when `true` or unset. A listener on a
       loopback address is clamped only with mss_clamp_loopback (config_listen_clamp). */
    uint32_t mss_clamp;
    bool mss_clamp_loopback; /* [defense] mss-clamp-loopback; false */

    bool proxy_protocol_listener; /* expect a PROXY v1/v2 header from the listener; false */

    /* Links printed by `tgproxy access`: "" / 0 = take them from the first bind-to. */
    char public_host[CONFIG_HOST_MAX];
    uint16_t public_port;
    /* mtg's public-ipv4 / public-ipv6 ([network.public-ip] ipv4 / ipv6) as written, "" = unset;
       public-host defaults to the first of them. `access --json` prints one link set each. */
    char public_ipv4[CONFIG_HOST_MAX], public_ipv6[CONFIG_HOST_MAX];

    int log_level; /* TG__LOG_*; default TG__LOG_INFO ("debug = true" -> DEBUG) */

    uint32_t buffer_size;  /* bytes per pooled I/O buffer; default 16384 */
    uint32_t max_inflight; /* bytes buffered per direction before backpressure;
                              default 1048576 */
    uint32_t bulk_budget;  /* bytes of 64 KiB bulk buffers one worker may hold; 0 = none;
                              default 4 MiB */

    /* [limits] state-file, state-interval: where quota use is kept across restarts
       (quotafile.h), written every state-interval and at shutdown; "" = not kept (default).
       state-interval default 60000. */
    char limits_state_file[CONFIG_FILE_MAX];
    uint32_t limits_state_interval_ms;

    /* [stats.prometheus]: the metrics page (metrics.h). Off by default. */
    struct {
        bool enabled;
        struct value_hostport bind;     /* bind-to, numeric; default 127.0.0.1:3129 (as mtg) */
        char path[CONFIG_PATH_MAX];     /* http-path, starts with '/'; default "/" (as mtg) */
        char prefix[CONFIG_PREFIX_MAX]; /* metric-prefix, [a-zA-Z_][a-zA-Z0-9_]*; "tgproxy" */
        bool mtg_names; /* names = "mtg": mtg's metric names and labels too; "tgproxy" (false) */
    } prometheus;

    /* [defense.doppelganger]: records toward FakeTLS clients shaped like the fronting site's
       (doppel.h, shape.h). Off unless the table is in the file. */
    struct {
        bool enabled; /* the table is present and `enabled` is not false */
        size_t nurls; /* urls: https:// pages raided to learn from; 0 = built-in profile */
        char urls[CONFIG_DOPPEL_URLS][CONFIG_DOPPEL_ULEN];
        uint32_t repeats;  /* repeats-per-raid: fetches of every url per raid; default 10 */
        uint32_t raid_s;   /* raid-each: seconds between raids; default 21600 (6 h, as mtg) */
        bool drs;          /* drs: dynamic record sizing (on if this or dynamic_records is) */
        uint32_t delay_ms; /* max-delay (tgproxy's): cap on the delay added to one record; 20 */
    } doppel;

    /* [defense.tls-front]: FakeTLS answers shaped like the fronting site's first flight
       (services/tlsfront.h): probed at start and every refresh, per SNI domain. On by
       default whenever ee secrets are served. */
    struct {
        bool enabled;                     /* default true */
        uint32_t refresh_s;               /* refresh: default 21600 (6 h), jittered +-10 % */
        uint32_t connections;             /* probes per domain and refresh: 8 (1..64) */
        uint32_t timeout_ms;              /* one probe, connect to the end of the flight: 5000 */
        char state_file[CONFIG_FILE_MAX]; /* "" = $STATE_DIRECTORY/tls-front, else not kept */
    } tls_front;

    /* [stats.statsd]: the same metrics pushed over UDP (statsd.h). Off by default. */
    struct {
        bool enabled;
        struct value_hostport addr;        /* address, numeric host:port; required when enabled */
        char prefix[CONFIG_PREFIX_MAX];    /* metric-prefix; default "tgproxy" */
        enum config_tag_format tag_format; /* tag-format; default datadog */
        uint32_t flush_ms;                 /* flush-interval; default 10000 (tgproxy's own key) */
    } statsd;

    /* Middle-proxy mode (docs/tgproxy.md): ad-tag (top level, 16 bytes as 32 hex digits),
       [ad-tags] per label, and [middle-proxy]. A secret with a tag goes through Telegram's
       middle proxies; without one it stays direct. */
    bool has_ad_tag;
    uint8_t ad_tag[16];
    struct {
        bool enabled; /* the [middle-proxy] table is present */
        /* Sources (services/mpsource.h): an https:// URL or a local file path each; "" = none
           (proxy-config-v6 only). Defaults: Telegram's getProxySecret, getProxyConfig and,
           when proxy-config is Telegram's, getProxyConfigV6. */
        char secret_path[CONFIG_SOURCE_MAX];  /* proxy-secret */
        char config_path[CONFIG_SOURCE_MAX];  /* proxy-config (IPv4 middle proxies) */
        char config6_path[CONFIG_SOURCE_MAX]; /* proxy-config-v6 */
        char ip_url[CONFIG_SOURCE_MAX];       /* public-ip-url: answers our address; "" = off */
        char state_dir[CONFIG_FILE_MAX];      /* where downloaded copies are kept */
        uint32_t update_s;                    /* update-each: refresh interval; default 1 day */
        uint32_t connections;                 /* per DC and worker; default 2 */
        bool fallback_direct;                 /* no middle proxy up: go direct; default true */
        uint32_t client_buffer;               /* answers held for one client; default 8 MiB */
        uint32_t buffer_total;                /* for all clients, split by worker; 256 MiB */
        uint8_t secret[256];                  /* read from a secret *file* at load (never log) */
        size_t secret_len;                    /* 0 when proxy-secret is a URL */
        struct mpconf conf, conf6; /* read from config files at load (n = 0 for URLs) */
    } mp;

    /* [fleet]: anti-replay and [limits] shared with other tgproxy processes through one
       Redis server (fleet.h). Off unless `redis` is set. */
    struct {
        bool enabled;                   /* redis = "..." was given */
        bool unix_socket;               /* unix:///path: path in host, port 0 */
        char host[CONFIG_HOST_MAX];     /* IP literal (redis://) or socket path (unix://) */
        uint16_t port;                  /* redis:// port; default 6379 */
        char user[CONFIG_LABEL_MAX];    /* redis://user:password@...; "" = none */
        char password[CONFIG_HOST_MAX]; /* never logged; "" = no AUTH */
        uint32_t timeout_ms;            /* timeout: the most a handshake waits; default 50 */
        uint32_t lease_ms;              /* lease: a dead process's counts expire; default 15000 */
        char prefix[CONFIG_PREFIX_MAX]; /* key-prefix; default "tgproxy:" */
    } fleet;

    /* [api]: the control API and web panel (src/proxy/daemon/api.h, docs/api.md). Off by
       default. Loading refuses a bind-to beyond loopback without a token-file, and an
       enabled API without a state-file. */
    struct {
        bool enabled;
        struct value_hostport bind;          /* bind-to, numeric; default 127.0.0.1:9443 */
        char token_file[CONFIG_FILE_MAX];    /* bearer token, a 0600 file; "" = no token */
        char state_file[CONFIG_FILE_MAX];    /* the API's own secrets (apistore.h); required */
        char allow[CONFIG_API_ALLOW_MAX];    /* allow: CIDRs, '\n'-joined; default loopback */
        uint32_t max_body;                   /* max-body: request body bytes; default 65536 */
        uint32_t auth_failures;              /* auth-failures-per-minute, per address; 10 */
    } api;
};

/* Warning sink for keys that are accepted but ignored (mtg keys we do not implement), msg
 * "file:line:col: ...", and from config_load_file for a file other users can read, msg
 * "file is readable by other users ...". Never contains a secret. NULL sink = log (warn). */
typedef void (*config_warn_fn)(void *user, const char *msg);

/* Is msg (a config_warn_fn message) a harmless one: an mtg key tgproxy accepts and ignores,
 * or a deprecated mtg spelling of a key it maps? Those change nothing about who may
 * connect or where traffic goes; `tgproxy doctor` reports them as warnings, not failures.
 * Every other warning (a file others can read, ...) is not harmless. */
bool config_warning_harmless(const char *msg);

/* True the first time this process passes msg, false for a repeat: the loader's warnings
 * are reported once per run, not again at every reload of the same file. Thread-safe. */
bool config_warning_first(const char *msg);

/*
 * Fill cfg with every default listed above. Owns nothing afterwards; safe to cleanup.
 */
void config_init(struct config *cfg);

/*
 * Release the arrays and reset cfg to zero. NULL-safe; cfg may be re-initialised after.
 */
void config_cleanup(struct config *cfg);

/*
 * Parse a TOML document into cfg, which must be fresh from config_init() (entries would
 * otherwise be appended to what is there).
 *
 * name  used only in messages ("file:line:col: ..."), borrowed.
 * text  the document, len bytes, borrowed; need not be NUL-terminated.
 * err   on failure, receives one line: where, what, expected; never the secret text.
 * warn  called once per accepted-but-ignored key; NULL logs at warn level.
 * Returns 0, -EINVAL (bad document or value; err filled) or -ENOMEM. On failure cfg is
 * left initialised-and-empty (as after config_cleanup + config_init). No I/O, no DNS.
 */
int config_parse(struct config *cfg, const char *name, const char *text, size_t len, char *err,
                 size_t errlen, config_warn_fn warn, void *warn_user);

/*
 * Read the file at path and config_parse() it. Only a regular file is read: the path is
 * opened non-blocking, so a FIFO (or a device) there is refused at once instead of holding
 * the caller in open(); -EINVAL with err naming what is there. A file group or others can
 * read gets a warning through warn once it has loaded. Returns as config_parse, plus
 * -errno from open/read (err says which file and why).
 */
int config_load_file(struct config *cfg, const char *path, char *err, size_t errlen,
                     config_warn_fn warn, void *warn_user);

/*
 * Cross-field checks shared by the loader and simple-run: at least one listen address and
 * one secret, sane limits. Returns 0 or -EINVAL with err filled.
 */
int config_validate(const struct config *cfg, char *err, size_t errlen);

/*
 * Shortest anti-replay window that covers every replay the FakeTLS clock check lets
 * through: a hello is accepted while its timestamp is within +-skew of our clock, so one
 * first seen at t (timestamp up to t + skew) still passes until t + 2 x skew; 2 s more
 * cover the whole-second rounding of the wall clock (timestamps) and of the monotonic
 * clock (the cache). The loader derives the window from this when `window` is not set and
 * refuses a shorter explicit one; config_validate refuses it too.
 */
static inline uint32_t config_replay_window_min(uint32_t skew_s)
{
    return 2 * skew_s + 2;
}

/*
 * The [dcs] override for a DC id: the entry with that id, else the "default" entry, else
 * NULL (use the built-in table). Borrowed from cfg. Thread-safe (read-only).
 */
const struct config_dc *config_dc_find(const struct config *cfg, int32_t id);

/* Name of a prefer-ip value ("prefer-ipv6", ...), static. */
const char *config_prefer_ip_name(enum config_prefer_ip p);

/*
 * Builders shared by the TOML loader and `tgproxy simple-run` (arrays grow with tg__realloc).
 * Each returns 0, -EINVAL (err says why, never quoting a secret), -ENOSPC (over the
 * CONFIG_MAX_* cap) or -ENOMEM.
 *   config_add_listen: "ip:port" / "[ip6]:port", numeric only; duplicates rejected.
 *   config_add_secret: label [A-Za-z0-9_.-]{1,63}, unique; the secret is copied.
 */
/* The MSS a listener announces ([defense] mss-clamp), 0 for none: a listener on a loopback
   address (value_addr_loopback) answers only processes on this host, a local front whose own
   listener is what clients' kernels see, so it is clamped only with mss-clamp-loopback. */
uint32_t config_listen_clamp(const struct config *cfg, const struct config_listen *l);

int config_add_listen(struct config *cfg, const char *text, size_t len, char *err, size_t errlen);
/* The ad tag secret i is served with (16 bytes), or NULL: direct. */
const uint8_t *config_ad_tag(const struct config *cfg, size_t i);

/* [middle-proxy] defaults: Telegram's documents. */
#define CONFIG_MP_SECRET_URL  "https://core.telegram.org/getProxySecret"
#define CONFIG_MP_CONFIG_URL  "https://core.telegram.org/getProxyConfig"
#define CONFIG_MP_CONFIG6_URL "https://core.telegram.org/getProxyConfigV6"
/* Is a [middle-proxy] source an https:// URL (else a file path)? */
bool config_is_url(const char *source);

int config_add_secret(struct config *cfg, const char *label, const struct secret *s, char *err,
                      size_t errlen);
/* config_add_secret without the unique-label check, for a caller that knows the label is new
   (the API's state merge: its labels are unique and checked against the file's): adding n
   secrets costs n, not n^2 label compares. */
int config_append_secret(struct config *cfg, const char *label, const struct secret *s, char *err,
                         size_t errlen);

/*
 * The loader's key tables, for tools that document them (tools/man/toml-keys.c writes
 * tgproxy.toml(5) from them). kind: "" for a key parsed by its own function (a string, an
 * array or a table: see docs/tgproxy.md), else "bool", "integer", "duration" (min/max in
 * ms), "seconds", "size" (bytes); min/max are meaningful for the numeric kinds.
 * config_keys_foreach calls fn for every key of every table, in table order, and stops at
 * (returns) fn's first nonzero return.
 */
enum { CONFIG_KEY_PLAIN = 0, CONFIG_KEY_IGNORED, CONFIG_KEY_DEPRECATED };
struct config_key {
    const char *section; /* "" (top level), "network.timeout", "limits.LABEL", ... */
    const char *table;   /* the C table's name, for the drift check */
    const char *name;
    const char *kind;
    uint64_t min, max;
    int note; /* CONFIG_KEY_* */
};
typedef int (*config_key_fn)(const struct config_key *k, void *arg);
int config_keys_foreach(config_key_fn fn, void *arg);

#endif
