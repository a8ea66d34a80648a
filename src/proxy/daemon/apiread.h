/*
 * apiread: what the control API reads from outside, apart from libmicrohttpd so that it can
 * be fuzzed (fuzz/proxy_apiread): a request path's /v1/secrets/{label}[/{action}], a request
 * body's "limits" object, and another fleet instance's stats object as it published it in
 * Redis. Each reader takes any bytes: a bad one gives false or a message, never a crash.
 *
 * struct apiread_stats is a secret's numbers as /v1/secrets/{label}/stats shows them (the
 * fields of apiread_field, in order), summed over a fleet's instances; api.c fills the local
 * ones and writes the answer, apiread_peer_stats adds a peer's.
 */
#ifndef TGKIT_PROXY_DAEMON_APIREAD_H
#define TGKIT_PROXY_DAEMON_APIREAD_H

#include "proxy/config/config.h"
#include "proxy/engine/seen.h"
#include "proxy/wire/json.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One number of a secret's stats: a field with a group sits in that member object; max takes
   the largest over a fleet instead of the sum (a time); pre is what the writer puts before
   its value. The same as the Prometheus page's per-secret series (metrics.c). */
struct apiread_field {
    const char *group, *name;
    bool max;
    const char *pre;
    size_t pre_len;
};

#define SNUM_COUNT      12
#define SNUM_UNIQUE_IPS 5
#define SNUM_LAST_SEEN  6
extern const struct apiread_field apiread_field[SNUM_COUNT];

struct apiread_stats {
    uint64_t v[SNUM_COUNT];
    bool quota; /* the secret has a quota (served now) */
    uint64_t quota_limit, quota_used;
    int64_t quota_end;
    unsigned instances; /* how many instances answered (1 = this one alone) */
    /* this instance's client addresses in the window, newest first (addrs NULL: counted
       only) */
    const struct seen_addr *addrs;
    size_t naddrs;
    /* ?scope=fleet: the address hashes of every instance that published them (tg__malloc),
       and the counts of those that did not (an older version) */
    uint64_t *iph;
    size_t niph, capiph;
    uint64_t ips_unhashed;
    bool nomem;
};

/* Add another instance's stats object (its JSON text, as api.c's writer published it with
   the address hashes). Members it does not have (an older version) count as 0; a text that
   does not parse is skipped. Its address hashes go to n->iph for the union; without them its
   unique_ips is added as a count. Out of memory sets n->nomem. */
void apiread_peer_stats(struct apiread_stats *n, const char *text, size_t len);
/* One more address hash into n->iph (growing it; out of memory sets n->nomem). */
void apiread_iph_add(struct apiread_stats *n, uint64_t h);
/* Frees what the readers allocated in n (its iph). */
void apiread_stats_done(struct apiread_stats *n);
/* qsort's comparison of two uint64_t. */
int apiread_u64_cmp(const void *x, const void *y);

/* The request body's "limits" object o (NULL: none, nothing changes) into l: only the members
   given change; an unknown member, a non-integer, a negative value or one too big for its
   field gives -1 with the reason in why (for a 400). */
int apiread_limits(const struct json_val *o, struct config_limits *l, char *why, size_t whylen);

/* /v1/secrets/{label}[/{action}] split: label (at most cap - 1 bytes, NUL-terminated) and
 *action (after the slash, "" for none; within url); false when url is not that shape. */
bool apiread_secret_path(const char *url, char *label, size_t cap, const char **action);

#endif
