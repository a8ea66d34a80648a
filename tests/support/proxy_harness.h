/*
 * proxy_harness: tgproxy running in-process on 127.0.0.1 with a fake DC and a recording
 * fronting host, for the integration tests and the benchmarks.
 *
 * pharness_start() builds a struct config by hand (as `tgproxy simple-run` would): one
 * listener on 127.0.0.1:0, the chosen secrets (all with the same 16-byte key, labels "tls",
 * "dd", "classic"), [dcs] default = the fake DC, [domain-fronting] = the fronting stand-in,
 * and starts the engine with server_start(). pharness_stop() undoes everything.
 *
 * Ownership: struct pharness is caller storage. Thread-safety: start/stop from one thread.
 */
#ifndef TGKIT_TEST_PROXY_HARNESS_H
#define TGKIT_TEST_PROXY_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#include "proxy/config/config.h"
#include "proxy/daemon/server.h"
#include "proxy_client.h"
#include "proxy_fakedc.h"
#include "proxy_front.h"
#include "proxy_proc.h"

#define PHARNESS_DOMAIN "example.com"

struct pharness_opts {
    bool ee, dd, classic;  /* secrets to configure; none set = ee only */
    uint32_t handshake_ms; /* 0 = config default */
    uint32_t idle_ms;
    uint32_t tcp_ms;
    uint32_t concurrency;        /* 0 = config default */
    uint32_t workers;            /* 0 = 2 */
    bool no_front;               /* no fronting host (only valid without ee) */
    bool dc_closed_port;         /* [dcs] default points at a port nobody listens on */
    bool no_fakedc;              /* do not start the fake DC ([dcs] must be set by caller) */
    uint16_t dc_port;            /* with no_fakedc: where [dcs] default points */
    int log_level;               /* 0 = TG__LOG_WARN */
    bool fork_server;            /* run the engine in a child process (benchmarks): srv stays
                                    NULL, proc is the child */
    uint32_t antireplay_entries; /* 0 = config default */
    bool pp_listener;            /* proxy-protocol-listener = true */
    bool pp_front;               /* [domain-fronting] proxy-protocol = true */
    bool front_by_name;          /* fronting host given as a name to resolve ("127.0.0.1",
                                    so the lookup never leaves the machine) */
    bool no_fast_mode;           /* fast-mode = false */
    uint32_t bulk_budget;        /* bulk-budget in bytes; 0 = config default */
    bool no_dynamic_records;     /* dynamic-record-sizing = false */
    bool doppel;                 /* [defense.doppelganger] with the built-in profile */
    int32_t mss_clamp;           /* [defense] mss-clamp: 0 = config default (which leaves
                                    the harness's loopback listener unclamped), -1 = off, or
                                    the segment size, with mss-clamp-loopback on so that the
                                    harness's listener is clamped as a public one is */
    const char *dc_host;         /* [dcs] default names the fake DC by this host name (e.g.
                                    "localhost", resolved by the engine) instead of 127.0.0.1 */
    int32_t extra_dc;            /* with extra_dc_addr: one more [dcs] entry for this id */
    const char *extra_dc_addr;   /* "host:port" of that entry */
    const char *proxies[4];      /* [network] proxies: socks5:// URLs, NULL-terminated */
    struct config_limits limits; /* [limits.LABEL] given to every secret; zero = none */
    bool prometheus;             /* [stats.prometheus] on 127.0.0.1:0 (server_metrics_port) */
    uint16_t statsd_port;        /* [stats.statsd] to 127.0.0.1:this port; 0 = off */
    uint32_t statsd_flush_ms;    /* flush-interval; 0 = config default */
    int statsd_tags;             /* enum config_tag_format */
    bool api;                    /* [api] on 127.0.0.1:api_port (a free port picked here: a
                                    forked engine cannot report it), no token, its state
                                    file in a private directory */
    uint32_t more_secrets;       /* that many more ee secrets ("s0".., random keys, domain
                                    PHARNESS_DOMAIN): an operator's many API-made secrets */
    bool midproxy;               /* middle-proxy mode: every secret gets an ad tag, and the
                                    middle proxy is a tgproxy-fakemp (a child process, --raw)
                                    in front of the fake DC ([middle-proxy] connections = 2) */
};

struct pharness {
    struct config cfg;
    struct fakedc *dc;
    uint16_t dc_port;
    struct pfront *front;
    uint16_t front_port;
    struct server *srv;
    struct pproc proc; /* with fork_server */
    uint16_t port;
    uint8_t key[16];
    struct pproc mp; /* with midproxy: the fake middle proxy */
    char mp_dir[64]; /* its secret, list and log */
    uint16_t api_port; /* with api */
    char api_dir[64];  /* with api: the state file's directory */
};

int pharness_start(struct pharness *h, const struct pharness_opts *o);
/* pharness_start without the engine: the fake DC, the fronting host and h->cfg only (for
   tests that drive a worker themselves, tests/proxy/engine/test_conn_vt.c). pharness_stop undoes.
 */
int pharness_prepare(struct pharness *h, const struct pharness_opts *o);
void pharness_stop(struct pharness *h);

/* The index of a struct stats counter, as stats_value reads it. */
#define PHARNESS_STAT(field) (offsetof(struct stats, field) / sizeof(uint64_t))
/* Wait (bounded by timeout_ms: tgtest_wait_until) until the engine's counter at index i
   is at least want. */
bool pharness_wait_stat(struct server *s, size_t i, uint64_t want, int timeout_ms);
/* ... until no connection is open (the active gauge is 0). */
bool pharness_wait_idle(struct server *s, int timeout_ms);
/* A fresh config (config_init) with h's listener and secrets, for a reload test to add
   to and pass to server_reload. 0 or -errno; the caller config_cleanup()s it. */
int pharness_reload_base(const struct pharness *h, struct config *cfg);
/* Client options for this proxy in a mode (key, SNI = PHARNESS_DOMAIN, dc 2). */
struct pcli_opts pharness_client(const struct pharness *h, enum pcli_mode mode);

#endif
