/*
 * proxy_fleet: two tgproxy processes sharing one real redis-server ([fleet]), for the
 * fleet tests.
 *
 * pfleet_start() starts a redis-server (redis_server.h) and the proxy harness (fake DC,
 * recording fronting host; proxy_harness.h), then runs proxy A in this process
 * (server_start: its counters and metrics page are at hand) and proxy B as the built
 * daemon (`tgproxy run FILE`, spawned, with a TOML file written for it: the same secret
 * labelled "tls", the same limits, DC, fronting host and Redis, and [stats.prometheus] on
 * a port of its own). B's counters are read from its metrics page, as an operator would.
 * Both listen on their own port.
 *
 * Ownership: struct pfleet is caller storage; pfleet_stop undoes everything (NULL-safe on a
 * zeroed struct). Thread-safety: one controlling thread.
 */
#ifndef TGKIT_TEST_PROXY_FLEET_H
#define TGKIT_TEST_PROXY_FLEET_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proxy_harness.h"
#include "redis_server.h"

#define PFLEET_HELLO_MAX 600

struct pfleet {
    tgtest_redis redis;
    struct pharness h; /* A: h.srv in this process; fake DC and fronting host */
    pid_t pid_b;       /* B: the daemon */
    uint16_t port_a, port_b, metrics_b;
    uint32_t workers; /* per proxy */
    char dir[64];     /* B's config and log */
};

/* [fleet] of both proxies; zero fields take the config defaults. */
struct pfleet_opts {
    uint32_t timeout_ms, lease_ms;
};

/* o: harness options (workers, limits; fork_server is ignored; ee secret only). 0 or -1. */
int pfleet_start(struct pfleet *f, const struct pharness_opts *o, const struct pfleet_opts *fo);
void pfleet_stop(struct pfleet *f);

/* Counters of A (in-process) and B (the fleet_*, limit_* and handshake fields, from its
   metrics page). 0 or -1. */
int pfleet_stats(struct pfleet *f, struct stats *a, struct stats *b);
/* A sample of B's metrics page (name without the tgproxy_ prefix, labels included as on
   the page), or -1 when absent. */
double pfleet_metric_b(struct pfleet *f, const char *sample);
/* Wait until every worker of both proxies has its Redis connection up (up = true) or down
   (up = false), at most timeout_ms. 0 or -1. */
int pfleet_wait_up(struct pfleet *f, bool up, int timeout_ms);

/* Send hello to port on a new connection (from src_ip, NULL = any). 1 when the proxy
   answered with a TLS handshake record, 0 when it fronted it (the fronting host's banner
   came back), -1 otherwise. */
int pfleet_hello(uint16_t port, const char *src_ip, const uint8_t *hello, size_t n);

/* One try of the cross-process replay: a new hello answered by A, then the same bytes sent
   to B. 1: B fronted it and counted a fleet replay; 0: B answered it, and some check of
   the two fell back to local state (a slow Redis: try again); -1: anything else. The hello
   sent goes to hello[0..*n) (PFLEET_HELLO_MAX bytes). */
int pfleet_cross_replay(struct pfleet *f, uint8_t *hello, size_t *n);

#endif
