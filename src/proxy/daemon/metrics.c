/*
 * metrics: the metric table, the collector and the Prometheus page. See metrics.h.
 * Invariant: rows of one family are adjacent in METRICS_LIST (the text format wants a
 * family's samples together, after its one HELP and TYPE line).
 */
#include "proxy/daemon/metrics.h"

#include "core/alloc.h"
#include "core/clock.h"
#include "core/httpd.h"
#include "core/log.h"
#include "core/str.h"
#include "proxy/services/acl.h"
#include "proxy/services/mpsource.h"
#include "proxy/services/tlsfront.h"
#include "proxy/daemon/server.h"
#include "proxy/engine/generation.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <microhttpd.h>
#include <stdio.h>
#include <string.h>

#ifndef TGKIT_VERSION_STRING
#define TGKIT_VERSION_STRING "0"
#endif

/* X(family, type, help, label key, label value, struct stats field); key NULL = no label.
   X##_HS(field, help) is a failed-handshake reason (stats.h STATS_HS_LIST): one
   handshakes_total row, outcome = the field without its "hs_". */
#define METRICS_LIST(X)                                                                            \
    X("client_connections_total", METRIC_COUNTER, "Client connections accepted.", NULL, NULL,      \
      accepted)                                                                                    \
    X("client_connections_active", METRIC_GAUGE, "Client connections open now.", NULL, NULL,       \
      active)                                                                                      \
    X("connections_rejected_total", METRIC_COUNTER,                                                \
      "Connections closed at accept by the concurrency limit.", NULL, NULL, rejected_limit)        \
    X("accept_pauses_total", METRIC_COUNTER, "Times accepting paused at the concurrency limit.",   \
      NULL, NULL, limit_pauses)                                                                    \
    X("acl_refused_connections_total", METRIC_COUNTER,                                             \
      "Connections closed unread because of an access list, by list.", "list", "blocklist",        \
      acl_blocked)                                                                                 \
    X("acl_refused_connections_total", METRIC_COUNTER, "", "list", "allowlist", acl_not_allowed)   \
    X("handshakes_total", METRIC_COUNTER, "Client handshakes by outcome.", "outcome", "ok",        \
      handshake_ok)                                                                                \
    STATS_HS_LIST(X##_HS)                                                                          \
    X("handshakes_total", METRIC_COUNTER, "", "outcome", "timeout", handshake_timeout)             \
    X("limits_hit_total", METRIC_COUNTER,                                                          \
      "Handshakes fronted because their secret is over a limit, by limit.", "limit", "expires",    \
      limit_expired)                                                                               \
    X("limits_hit_total", METRIC_COUNTER, "", "limit", "max_connections", limit_connections)       \
    X("limits_hit_total", METRIC_COUNTER, "", "limit", "max_unique_ips", limit_unique_ips)         \
    X("limits_hit_total", METRIC_COUNTER, "", "limit", "quota", limit_quota)                       \
    X("fronted_connections_total", METRIC_COUNTER,                                                 \
      "Connections relayed to the fronting host (failed handshakes).", NULL, NULL, fronted)        \
    X("fronted_connections_active", METRIC_GAUGE,                                                  \
      "Connections relaying to the fronting host now.", NULL, NULL, front_active)                  \
    X("fronting_self_refused_total", METRIC_COUNTER,                                               \
      "Connections not fronted because the fronting address is this proxy.", NULL, NULL,           \
      front_self)                                                                                  \
    X("traffic_bytes_total", METRIC_COUNTER,                                                       \
      "Bytes relayed (relayed and fronted; up to date within 10 s).", "direction", "to_upstream",  \
      bytes_up)                                                                                    \
    X("traffic_bytes_total", METRIC_COUNTER, "", "direction", "to_client", bytes_down)             \
    X("buffers_in_use", METRIC_GAUGE, "I/O buffers held by connections.", NULL, NULL, bufs)        \
    X("bulk_buffers_in_use", METRIC_GAUGE, "64 KiB bulk buffers held by connections.", NULL, NULL, \
      bulk)                                                                                        \
    X("antireplay_early_evictions_total", METRIC_COUNTER,                                          \
      "Anti-replay entries dropped before their window ended.", NULL, NULL,                        \
      replay_early_evictions)                                                                      \
    X("doppel_shaped_records_total", METRIC_COUNTER,                                               \
      "Records toward FakeTLS clients timed by the doppelganger shaper.", NULL, NULL,              \
      shaped_records)                                                                              \
    X("doppel_delay_seconds_total", METRIC_COUNTER,                                                \
      "Seconds the doppelganger shaper held records back, summed.", NULL, NULL, shape_delay_ms)    \
    X("fleet_redis_checks_total", METRIC_COUNTER,                                                  \
      "Handshakes the [fleet] Redis answered within its timeout.", NULL, NULL, fleet_checks)       \
    X("fleet_redis_fallbacks_total", METRIC_COUNTER,                                               \
      "[fleet] checks decided on local state (Redis away, erring or too slow).", NULL, NULL,       \
      fleet_fallbacks)                                                                             \
    X("fleet_redis_replays_total", METRIC_COUNTER,                                                 \
      "Hellos the [fleet] Redis had already seen (fronted).", NULL, NULL, fleet_replays)           \
    X("middle_proxy_handshakes_total", METRIC_COUNTER,                                             \
      "Middle-proxy connections that completed their handshake.", NULL, NULL, mp_ready)            \
    X("middle_proxy_failures_total", METRIC_COUNTER,                                               \
      "Middle-proxy connections that failed, by reason.", "reason", "connect", mp_fail_connect)    \
    X("middle_proxy_failures_total", METRIC_COUNTER, "", "reason", "keys", mp_fail_keys)           \
    X("middle_proxy_failures_total", METRIC_COUNTER, "", "reason", "refused", mp_fail_refused)     \
    X("middle_proxy_failures_total", METRIC_COUNTER, "", "reason", "protocol", mp_fail_protocol)   \
    X("middle_proxy_frames_total", METRIC_COUNTER, "RPC frames exchanged with middle proxies.",    \
      "direction", "up", mp_frames_up)                                                             \
    X("middle_proxy_frames_total", METRIC_COUNTER, "", "direction", "down", mp_frames_down)        \
    X("middle_proxy_clients_active", METRIC_GAUGE, "Clients multiplexed over middle proxies now.", \
      NULL, NULL, mp_clients)                                                                      \
    X("middle_proxy_fallbacks_total", METRIC_COUNTER,                                              \
      "Tagged clients sent direct: no middle-proxy connection of their DC was up.", NULL, NULL,    \
      mp_fallbacks)                                                                                \
    X("middle_proxy_slow_clients_closed_total", METRIC_COUNTER,                                    \
      "Middle-proxy clients closed for being more than client-buffer behind.", NULL, NULL,         \
      mp_slow_closed)                                                                              \
    X("middle_proxy_quick_acks_total", METRIC_COUNTER, "Quick acks relayed from middle proxies.",  \
      NULL, NULL, mp_quickacks)                                                                    \
    X("middle_proxy_client_buffer_bytes", METRIC_GAUGE,                                            \
      "Bytes of middle-proxy answers waiting for clients that read slowly.", NULL, NULL, mp_held) \
    X("middle_proxy_client_buffer_peak_bytes", METRIC_GAUGE,                                       \
      "The most middle_proxy_client_buffer_bytes has been (per worker, summed).", NULL, NULL,      \
      mp_held_peak)

struct row {
    const char *family, *help, *lkey, *lval;
    enum metric_type type;
    size_t field; /* index into struct stats */
    double scale; /* value = field x scale */
};

/* Counters kept in milliseconds are exported in seconds: Prometheus wants base units. */
#define ROW_SCALE(f)                                                                               \
    (offsetof(struct stats, f) == offsetof(struct stats, shape_delay_ms) ? 0.001 : 1)
#define ROW(fam, ty, hl, lk, lv, f)                                                                \
    {fam, hl, lk, lv, ty, offsetof(struct stats, f) / sizeof(uint64_t), ROW_SCALE(f)},
#define ROW_HS(f, hl) ROW("handshakes_total", METRIC_COUNTER, "", "outcome", &#f[3], f)
static const struct row rows[] = {METRICS_LIST(ROW)};
#undef ROW_HS
#undef ROW
#undef ROW_SCALE

#define END_NAME(name, help) #name,
static const char *const end_names[] = {STATS_END_LIST(END_NAME)};
#undef END_NAME

struct walk {
    metrics_emit_fn emit;
    void *user;
    const char *last; /* family of the previous sample */
};

static int put(struct walk *w, struct metric_sample *m)
{
    m->first = !w->last || strcmp(w->last, m->family) != 0;
    w->last = m->family;
    return w->emit(w->user, m);
}

static int put1(struct walk *w, const char *fam, enum metric_type t, const char *help,
                const char *k, const char *v, double value)
{
    struct metric_sample m = {.family = fam, .help = help, .type = t, .value = value};
    if (k) {
        m.nlabels = 1;
        m.label_key[0] = k;
        m.label_val[0] = v;
    }
    return put(w, &m);
}

static int collect_totals(struct walk *w, const struct server *s)
{
    struct stats all;
    server_stats(s, &all);
    const struct stats *tot = &all;
    int rc = 0;
    const char *help = "";
    for (size_t i = 0; rc == 0 && i < sizeof rows / sizeof rows[0]; i++) {
        help = rows[i].help[0] ? rows[i].help : help;
        rc = put1(w, rows[i].family, rows[i].type, help, rows[i].lkey, rows[i].lval,
                  (double)stats_value(tot, rows[i].field) * rows[i].scale);
    }
    for (size_t i = 0; rc == 0 && i < sizeof end_names / sizeof end_names[0]; i++)
        rc = put1(w, "connection_ends_total", METRIC_COUNTER, "Connections closed, by reason.",
                  "reason", end_names[i] + 4, (double)stats_value(tot, STATS_END_INDEX(i + 1)));
    return rc;
}

/* The DCs shown: the ids the table knows (the test DCs only with test-dcs), then "other". */
static bool dc_shown(const struct config *cfg, size_t slot, char *label, size_t cap)
{
    int32_t id = stats_dc_id(slot);
    if (slot == STATS_DC_OTHER)
        snprintf(label, cap, "other");
    else
        snprintf(label, cap, "%d", (int)id);
    return id <= 10000 || cfg->use_test_dcs;
}

/* DC connect time: one histogram per DC (cumulative buckets, +Inf = count). */
static int collect_dc_time(struct walk *w, const struct server *s)
{
    int rc = 0;
    for (size_t slot = 0; rc == 0 && slot < STATS_DC_SLOTS; slot++) {
        char dc[16], le[24];
        if (!dc_shown(server_config(s), slot, dc, sizeof dc))
            continue;
        struct stats_dc d;
        server_dc_stats(s, slot, &d);
        struct metric_sample m = {
            .family = "dc_connect_duration_seconds",
            .help = "Time from the start of a DC connect to its establishment (through a "
                    "SOCKS5 upstream: to its CONNECT reply), by DC.",
            .type = METRIC_HISTOGRAM,
            .suffix = "_bucket",
            .nlabels = 2,
            .label_key = {"dc", "le"},
            .label_val = {dc, le}};
        uint64_t cum = 0;
        for (size_t i = 0; rc == 0 && i <= STATS_DC_NLE; i++) {
            cum += d.le[i];
            if (i < STATS_DC_NLE)
                snprintf(le, sizeof le, "%g", (double)stats_dc_le_ms(i) / 1000);
            else
                snprintf(le, sizeof le, "+Inf");
            m.value = (double)cum;
            rc = put(w, &m);
        }
        m.nlabels = 1;
        m.suffix = "_sum";
        m.value = (double)d.sum_ms / 1000;
        if (rc == 0)
            rc = put(w, &m);
        m.suffix = "_count";
        m.value = (double)cum;
        if (rc == 0)
            rc = put(w, &m);
    }
    return rc;
}

/* Middle-proxy connections ready, by DC (only with [middle-proxy]). */
static int collect_mp_up(struct walk *w, const struct server *s)
{
    int rc = 0;
    if (!server_config(s)->mp.enabled)
        return 0;
    for (size_t slot = 0; rc == 0 && slot < STATS_DC_SLOTS; slot++) {
        char dc[16];
        if (!dc_shown(server_config(s), slot, dc, sizeof dc))
            continue;
        struct stats_dc d;
        server_dc_stats(s, slot, &d);
        struct metric_sample m = {.family = "middle_proxy_connections_up",
                                  .help = "Middle-proxy connections ready, by DC.",
                                  .type = METRIC_GAUGE,
                                  .nlabels = 1,
                                  .label_key = {"dc"},
                                  .label_val = {dc},
                                  .value = (double)d.mp_up};
        rc = put(w, &m);
    }
    return rc;
}

/* [middle-proxy] documents: how old the copy in use is, failed and taken refreshes, by source
   (only configured sources; the age only once there is a copy). */
static int collect_mp_sources(struct walk *w, const struct server *s)
{
    struct mpsource *src = server_mpsource(s);
    if (!src)
        return 0;
    struct mpsource_stats st;
    mpsource_stats(src, &st);
    static const struct {
        const char *family, *help;
        enum metric_type type;
    } fam[3] = {
        {"middle_proxy_source_age_seconds",
         "Age of the middle-proxy document copy in use, by source.", METRIC_GAUGE},
        {"middle_proxy_source_failures_total",
         "Middle-proxy document refreshes that failed (the last good copy kept), by source.",
         METRIC_COUNTER},
        {"middle_proxy_source_updates_total",
         "New middle-proxy document copies taken into use, by source.", METRIC_COUNTER},
    };
    double now = (double)tg__wall_s();
    int rc = 0;
    for (int f = 0; rc == 0 && f < 3; f++) {
        for (int k = 0; rc == 0 && k < MPSRC_N; k++) {
            if (!st.used[k] || (f == 0 && st.ok_time[k] <= 0))
                continue;
            double v = f == 0   ? (now > st.ok_time[k] ? now - st.ok_time[k] : 0)
                       : f == 1 ? (double)st.failures[k]
                                : (double)st.updates[k];
            rc = put1(w, fam[f].family, fam[f].type, fam[f].help, "source",
                      mpsource_name((enum mpsource_kind)k), v);
        }
    }
    return rc;
}

/* DC connect failures by DC and by the reason of the last address tried. */
static int collect_dc_fail(struct walk *w, const struct server *s)
{
    int rc = 0;
    for (size_t slot = 0; rc == 0 && slot < STATS_DC_SLOTS; slot++) {
        char dc[16];
        if (!dc_shown(server_config(s), slot, dc, sizeof dc))
            continue;
        struct stats_dc d;
        server_dc_stats(s, slot, &d);
        for (size_t i = 0; rc == 0 && i < STATS_DC_FAIL_COUNT; i++) {
            struct metric_sample m = {
                .family = "dc_connect_failures_total",
                .help = "DC connects that failed on every address, by DC and by the reason "
                        "the last address failed.",
                .nlabels = 2,
                .label_key = {"dc", "reason"},
                .label_val = {dc, stats_dc_fail_name(i)},
                .value = (double)d.fail[i]};
            rc = put(w, &m);
        }
    }
    return rc;
}

/* By label: every label seen since start (reloads add labels; a removed secret's counters
   stay, frozen), so series continue across reloads. */
static int collect_secrets(struct walk *w, const struct server *s)
{
    size_t n = server_secret_count(s);
    int rc = 0;
    for (int pass = 0; rc == 0 && pass < 4; pass++) {
        for (size_t i = 0; rc == 0 && i < n; i++) {
            struct stats_secret ss;
            server_secret_stats(s, i, &ss);
            struct metric_sample m = {
                .nlabels = 1, .label_key = {"secret"}, .label_val = {server_secret_label(s, i)}};
            if (pass == 0) {
                m.family = "secret_connections_total";
                m.help = "Authenticated client connections, by secret label.";
                m.value = (double)ss.conns;
            } else if (pass == 1) {
                m.family = "secret_connections_active";
                m.help = "Authenticated client connections open now, by secret label.";
                m.type = METRIC_GAUGE;
                m.value = (double)ss.active;
            } else {
                m.family = "secret_traffic_bytes_total";
                m.help = "Bytes relayed for authenticated connections (within 10 s), by "
                         "secret label and direction.";
                m.nlabels = 2;
                m.label_key[1] = "direction";
                m.label_val[1] = pass == 2 ? "to_upstream" : "to_client";
                m.value = (double)(pass == 2 ? ss.bytes_up : ss.bytes_down);
            }
            rc = put(w, &m);
        }
    }
    return rc;
}

/* Limit hits by secret label (limits_hit_total says which limit); then the secret's
   handshakes by outcome, its unique client addresses and when it was last used (the numbers
   the control API's /stats gives; the addresses themselves are never on this page). */
static int collect_secret_limits(struct walk *w, const struct server *s)
{
    int rc = 0;
    size_t n = server_secret_count(s);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        struct stats_secret ss;
        server_secret_stats(s, i, &ss);
        rc = put1(w, "secret_limits_hit_total", METRIC_COUNTER,
                  "Handshakes fronted or relays ended by one of the secret's limits, by secret "
                  "label.",
                  "secret", server_secret_label(s, i), (double)ss.limits_hit);
    }
    static const char *const outcome[] = {"ok", "stale", "replay", "limit", "other"};
    for (size_t k = 0; rc == 0 && k < 5; k++)
        for (size_t i = 0; rc == 0 && i < n; i++) {
            struct stats_secret ss;
            server_secret_stats(s, i, &ss);
            const uint64_t v[] = {ss.conns, ss.hs_stale, ss.hs_replay, ss.hs_limit, ss.hs_other};
            struct metric_sample m = {
                .family = "secret_handshakes_total",
                .help = "Client handshakes that named the secret (its key matched), by secret "
                        "label and outcome.",
                .nlabels = 2,
                .label_key = {"outcome", "secret"},
                .label_val = {outcome[k], server_secret_label(s, i)},
                .value = (double)v[k]};
            rc = put(w, &m);
        }
    /* the window of each label's unique addresses: its unique-ips-window, else an hour */
    struct gen *g = server_gen((struct server *)s);
    uint32_t *win = n ? tg__calloc(n, sizeof *win) : NULL;
    for (size_t i = 0; win && i < g->cfg->nsecrets; i++)
        if (g->slot[i] < n)
            win[g->slot[i]] = g->cfg->secrets[i].limits.unique_ips_window_s;
    gen_unref(g);
    for (int pass = 0; rc == 0 && pass < 2; pass++)
        for (size_t i = 0; rc == 0 && i < n; i++) {
            int64_t last = 0;
            size_t ips = server_secret_seen(s, i, win ? win[i] : 0, NULL, 0, &last);
            rc = pass == 0 ? put1(w, "secret_unique_ips", METRIC_GAUGE,
                                  "Distinct client addresses that authenticated with the secret "
                                  "within its unique-ips-window (an hour by default; at most "
                                  "256 are tracked), by secret label.",
                                  "secret", server_secret_label(s, i), (double)ips)
                           : put1(w, "secret_last_seen_seconds", METRIC_GAUGE,
                                  "Unix time of the secret's last authenticated handshake (0 = "
                                  "never), by secret label.",
                                  "secret", server_secret_label(s, i), (double)last);
        }
    tg__free(win);
    return rc;
}

/* 1 when every worker's [fleet] connection is up (each worker's fleet_up gauge is 0 or 1). */
static double fleet_all_up(const struct server *s)
{
    for (size_t k = 0; k < server_workers(s); k++) {
        struct stats st;
        server_worker_stats(s, k, &st);
        if (!st.fleet_up)
            return 0;
    }
    return 1;
}

static int collect_process(struct walk *w, const struct server *s)
{
    char num[24];
    int rc = 0;
    for (size_t k = 0; rc == 0 && k < server_workers(s); k++) {
        struct stats st;
        server_worker_stats(s, k, &st);
        snprintf(num, sizeof num, "%zu", k);
        rc = put1(w, "worker_connections_active", METRIC_GAUGE,
                  "Client connections open now, by worker thread.", "worker", num,
                  (double)st.active);
    }
    uint64_t ins = 0, hits = 0, cap = 0;
    server_replay_counts(s, &ins, &hits, &cap);
    if (rc == 0)
        rc = put1(w, "antireplay_inserts_total", METRIC_COUNTER,
                  "Handshakes recorded in the anti-replay cache.", NULL, NULL, (double)ins);
    if (rc == 0)
        rc = put1(w, "antireplay_hits_total", METRIC_COUNTER,
                  "Handshakes found in the anti-replay cache (replays, fronted).", NULL, NULL,
                  (double)hits);
    if (rc == 0)
        rc = put1(w, "antireplay_capacity_entries", METRIC_GAUGE,
                  "Entries the anti-replay cache holds room for now.", NULL, NULL, (double)cap);
    if (rc == 0 && server_config(s)->fleet.enabled)
        rc = put1(w, "fleet_redis_up", METRIC_GAUGE,
                  "1 when every worker's [fleet] Redis connection is up, else 0.", NULL, NULL,
                  fleet_all_up(s));
    if (rc == 0)
        rc = put1(w, "antireplay_entries", METRIC_GAUGE,
                  "Handshakes in the anti-replay cache now (recorded within its window).", NULL,
                  NULL, (double)server_replay_live(s));
    if (rc == 0)
        rc = put1(w, "build_info", METRIC_GAUGE, "Always 1; the version is a label.", "version",
                  TGKIT_VERSION_STRING, 1);
    if (rc == 0)
        rc = put1(w, "start_time_seconds", METRIC_GAUGE, "When the proxy started, in Unix seconds.",
                  NULL, NULL, server_start_time(s));
    return rc;
}

/* Configuration reloads (SIGHUP), as Prometheus reports its own. */
static int collect_reload(struct walk *w, const struct server *s)
{
    uint64_t ok = 0, failed = 0;
    bool last_ok = true;
    double when = 0;
    server_reload_counts(s, &ok, &failed, &last_ok, &when);
    static const char help[] = "Configuration reloads (SIGHUP), by result.";
    int rc = put1(w, "config_reloads_total", METRIC_COUNTER, help, "result", "ok", (double)ok);
    if (rc == 0)
        rc = put1(w, "config_reloads_total", METRIC_COUNTER, help, "result", "failed",
                  (double)failed);
    if (rc == 0)
        rc = put1(w, "config_last_reload_successful", METRIC_GAUGE,
                  "1 when the last reload was applied (or none was tried), 0 when it was refused.",
                  NULL, NULL, last_ok ? 1 : 0);
    if (rc == 0)
        rc = put1(w, "config_last_reload_success_timestamp_seconds", METRIC_GAUGE,
                  "When the running configuration was applied (last reload, else the start), "
                  "in Unix seconds.",
                  NULL, NULL, when);
    return rc;
}

/* [defense.*list]: size and update counts of each list (zeros for a list that is off). */
static int collect_acl(struct walk *w, const struct server *s)
{
    static const struct {
        const char *family, *help;
        enum metric_type type;
    } fam[3] = {
        {"acl_ranges", "Address ranges in an access list now (after merging), by list.",
         METRIC_GAUGE},
        {"acl_updates_total", "Access-list builds published (start, updates, reloads), by list.",
         METRIC_COUNTER},
        {"acl_source_failures_total",
         "Access-list files or downloads that failed (their previous ranges kept), by list.",
         METRIC_COUNTER},
    };
    int rc = 0;
    for (int f = 0; rc == 0 && f < 3; f++) {
        for (int k = ACL_ALLOW; rc == 0 && k <= ACL_BLOCK; k++) {
            struct acl_list_stats st;
            acl_stats(server_acl(s), (enum acl_list_kind)k, &st);
            uint64_t v = f == 0 ? st.ranges : f == 1 ? st.updates_ok : st.updates_failed;
            rc = put1(w, fam[f].family, fam[f].type, fam[f].help, "list",
                      acl_list_name((enum acl_list_kind)k), (double)v);
        }
    }
    return rc;
}

/* [defense.tls-front]: each SNI domain's answer shape, profile age and refresh counts. */
static int collect_tlsfront(struct walk *w, const struct server *s)
{
    struct tlsfront *t = server_tlsfront(s);
    if (!t)
        return 0;
    struct tlsfront_status *st = tg__calloc(TLSFRONT_MAX_DOMAINS, sizeof *st);
    if (!st)
        return -ENOMEM;
    size_t n = tlsfront_status(t, st, TLSFRONT_MAX_DOMAINS);
    if (n > TLSFRONT_MAX_DOMAINS)
        n = TLSFRONT_MAX_DOMAINS;
    int64_t now = tg__wall_s();
    int rc = 0;
    for (int f = 0; f < 4 && rc == 0; f++) {
        for (size_t i = 0; i < n && rc == 0; i++) {
            struct metric_sample m = {.nlabels = 1,
                                      .label_key = {"domain"},
                                      .label_val = {st[i].domain}};
            if (f == 0) {
                for (int k = TLSFRONT_DEFAULT; k <= TLSFRONT_LEARNED && rc == 0; k++) {
                    struct metric_sample g = {
                        .family = "tls_front_shape",
                        .help = "1 for the FakeTLS answer shape each SNI domain uses now.",
                        .type = METRIC_GAUGE,
                        .nlabels = 2,
                        .label_key = {"domain", "shape"},
                        .label_val = {st[i].domain, tlsfront_shape_name((enum tlsfront_shape)k)},
                        .value = st[i].shape == (enum tlsfront_shape)k};
                    rc = put(w, &g);
                }
                continue;
            }
            if (f == 1) {
                if (st[i].shape == TLSFRONT_DEFAULT)
                    continue;
                m.family = "tls_front_profile_age_seconds";
                m.help = "Seconds since the refresh that made the domain's profile in use.";
                m.type = METRIC_GAUGE;
                m.value = now > st[i].learned_s ? (double)(now - st[i].learned_s) : 0;
            } else if (f == 2) {
                m.family = "tls_front_refreshes_total";
                m.help = "Front refreshes that learned a profile, by SNI domain.";
                m.type = METRIC_COUNTER;
                m.value = (double)st[i].refreshes;
            } else {
                m.family = "tls_front_refresh_failures_total";
                m.help = "Front refreshes that failed (the last good profile kept), by SNI domain.";
                m.type = METRIC_COUNTER;
                m.value = (double)st[i].failures;
            }
            rc = put(w, &m);
        }
    }
    tg__free(st);
    return rc;
}

/* The page's families, in the order they appear on it. */
static int (*const collectors[])(struct walk *, const struct server *) = {
    collect_totals,  collect_dc_time,       collect_dc_fail, collect_mp_up,    collect_mp_sources,
    collect_secrets, collect_secret_limits, collect_reload,  collect_acl,      collect_tlsfront,
    collect_process,
};

int metrics_collect(const struct server *s, metrics_emit_fn emit, void *user)
{
    struct walk w = {.emit = emit, .user = user};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof collectors / sizeof collectors[0]; i++)
        rc = collectors[i](&w, s);
    return rc;
}

/* ---- Prometheus text format ---- */

int metrics_format_value(double v, char *out, size_t cap)
{
    if (isnan(v))
        return snprintf(out, cap, "NaN");
    if (isinf(v))
        return snprintf(out, cap, v > 0 ? "+Inf" : "-Inf");
    /* whole numbers within int64_t (counters, gauges, bucket counts) as integers */
    if (v > -9.2e18 && v < 9.2e18 && v == (double)(int64_t)v)
        return snprintf(out, cap, "%lld", (long long)(int64_t)v);
    return tg__fmt_double(v, out, cap);
}

struct render {
    tg__buf *out;
    const char *prefix;
};

static int put_label_value(tg__buf *b, const char *v)
{
    int rc = 0;
    for (; *v && rc == 0; v++)
        rc = *v == '\\'   ? tg__buf_puts(b, "\\\\")
             : *v == '"'  ? tg__buf_puts(b, "\\\"")
             : *v == '\n' ? tg__buf_puts(b, "\\n")
                          : tg__buf_putc(b, *v);
    return rc;
}

static int render_one(void *user, const struct metric_sample *m)
{
    struct render *r = user;
    tg__buf *b = r->out;
    int rc = 0;
    static const char *const types[] = {"counter", "gauge", "histogram"};
    if (m->first)
        rc = tg__buf_printf(b, "# HELP %s_%s %s\n# TYPE %s_%s %s\n", r->prefix, m->family, m->help,
                            r->prefix, m->family, types[m->type]);
    /* counters are exposed under their family name: it already ends in _total */
    if (rc == 0)
        rc = tg__buf_printf(b, "%s_%s%s", r->prefix, m->family, m->suffix ? m->suffix : "");
    for (size_t i = 0; rc == 0 && i < m->nlabels; i++) {
        rc = tg__buf_printf(b, "%s%s=\"", i ? "," : "{", m->label_key[i]);
        if (rc == 0)
            rc = put_label_value(b, m->label_val[i]);
        if (rc == 0)
            rc = tg__buf_putc(b, '"');
    }
    if (rc == 0 && m->nlabels)
        rc = tg__buf_putc(b, '}');
    char num[32];
    metrics_format_value(m->value, num, sizeof num);
    if (rc == 0)
        rc = tg__buf_printf(b, " %s\n", num);
    return rc;
}

int metrics_render(const struct server *s, const char *prefix, tg__buf *out)
{
    struct render r = {.out = out, .prefix = prefix};
    int rc = metrics_collect(s, render_one, &r);
    if (rc == 0 && server_config(s)->prometheus.mtg_names)
        rc = metrics_collect_mtg(s, render_one, &r);
    return rc == 0 ? 0 : -ENOMEM;
}

/* ---- the HTTP page ---- */

struct metrics {
    struct tg__httpd *httpd;
    const struct server *srv;
    uint16_t port;
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *type,
                             const char *text, size_t n)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(n, (void *)(uintptr_t)text, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, "Allow", "GET, HEAD");
    enum MHD_Result rc = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
    (void)version;
    (void)upload_data;
    (void)con_cls;
    struct metrics *m = cls;
    const struct config *cfg = server_config(m->srv);
    if (*upload_size)
        return MHD_NO; /* a scrape has no body */
    static const char text[] = "text/plain; charset=utf-8";
    if (strcmp(url, cfg->prometheus.path) != 0)
        return reply(c, MHD_HTTP_NOT_FOUND, text, "not found\n", 10);
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, text, "only GET\n", 9);
    tg__buf b;
    tg__buf_init(&b, 16u << 20);
    if (metrics_render(m->srv, cfg->prometheus.prefix, &b) != 0) {
        tg__buf_cleanup(&b);
        return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, text, "out of memory\n", 14);
    }
    enum MHD_Result rc =
        reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", b.data, b.len);
    tg__buf_cleanup(&b);
    return rc;
}

/* libmicrohttpd's own messages, at debug level: the failures that matter are logged by
   metrics_start with the configured address (MHD names the port it was given, 0). */
__attribute__((format(printf, 2, 0))) static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[256];
    vsnprintf(msg, sizeof msg, fmt, ap);
    msg[strcspn(msg, "\n")] = '\0';
    tg__log(NULL, TG__LOG_DEBUG, "[stats.prometheus]: %s", msg);
}

/* The page's limits (docs/tgproxy.md, [stats.prometheus]): a scrape is one small GET, so a
   client gets 10 s for its request and 10 s of silence; 8 connections per address and a
   1/32 share of the open-files limit (32..256) in all, so trickling clients can neither
   hold the page nor take the descriptors the proxy's own connections need. */
#define METRICS_TIMEOUT_MS 10000
#define METRICS_PER_IP     8

int metrics_start(const struct server *s, struct metrics **out)
{
    const struct config *cfg = server_config(s);
    *out = NULL;
    struct metrics *m = tg__calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    m->srv = s;
    struct tg__httpd_opts o = {
        .addr = (const struct sockaddr *)&cfg->prometheus.bind.addr,
        .handler = on_request,
        .handler_cls = m,
        .max_connections = tg__httpd_fd_share(32, 32, 256),
        .per_ip = METRICS_PER_IP,
        .idle_timeout_s = METRICS_TIMEOUT_MS / 1000,
        .request_timeout_ms = METRICS_TIMEOUT_MS,
        .log = mhd_log,
    };
    m->httpd = tg__httpd_start(&o);
    if (!m->httpd) {
        int err = errno;
        char where[CONFIG_HOST_MAX + 8];
        value_format_addr(&cfg->prometheus.bind.addr, where, sizeof where);
        tg__log(NULL, TG__LOG_ERROR, "[stats.prometheus] bind-to %s: %s", where, strerror(err));
        tg__free(m);
        return -err;
    }
    m->port = tg__httpd_port(m->httpd) ? tg__httpd_port(m->httpd) : cfg->prometheus.bind.port;
    struct sockaddr_storage at = cfg->prometheus.bind.addr; /* with the port bound (bind-to :0) */
    char url[CONFIG_HOST_MAX + 8];
    value_set_port(&at, m->port);
    value_format_addr(&at, url, sizeof url);
    tg__log(NULL, TG__LOG_INFO, "[stats.prometheus] serving http://%s%s", url,
            cfg->prometheus.path);
    *out = m;
    return 0;
}

uint16_t metrics_port(const struct metrics *m)
{
    return m ? m->port : 0;
}

void metrics_stop(struct metrics *m)
{
    if (!m)
        return;
    tg__httpd_stop(m->httpd);
    tg__free(m);
}
