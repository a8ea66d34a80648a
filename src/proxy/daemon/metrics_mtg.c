/*
 * metrics_mtg: mtg's metric names and labels, for [stats.prometheus] names = "mtg" (see
 * metrics.h). Each family is computed from the same counters as tgproxy's own; the table
 * in docs/tgproxy.md ("mtg's metric names") says which. Labels tgproxy does not track
 * (ip_family, telegram_ip, dc) are left out: in Prometheus a missing label is the empty
 * value, so sums and rates over them still work.
 *
 * mtg's counters have no _total in the classic text format and get one in OpenMetrics,
 * which current Prometheus asks mtg for; this page is the classic format, so each counter
 * is served under both names and a dashboard finds whichever spelling it stored.
 */
#include "proxy/daemon/metrics.h"

#include <stdio.h>
#include <string.h>

#include "proxy/daemon/server.h"
#include "proxy/engine/stats.h"
#include "proxy/services/acl.h"

/* The counters mtg's families are made of, from one snapshot. */
struct mtg_view {
    struct stats tot;
    uint64_t auth_active, auth_up, auth_down; /* authenticated connections: mtg's telegram_* */
    uint64_t list_ranges[2];                  /* by enum acl_list_kind */
};

struct family {
    const char *name, *help;
    enum metric_type type;
    const char *lkey;
};

static int emit_family(metrics_emit_fn emit, void *user, const struct family *f, size_t nvals,
                       const char *const *lvals, const double *vals)
{
    int rc = 0;
    /* a counter twice: as mtg's classic page named it, then as OpenMetrics names it */
    for (int pass = 0; rc == 0 && pass < (f->type == METRIC_COUNTER ? 2 : 1); pass++) {
        char name[64];
        snprintf(name, sizeof name, "%s%s", f->name, pass ? "_total" : "");
        for (size_t i = 0; rc == 0 && i < nvals; i++) {
            struct metric_sample m = {.family = name,
                                      .suffix = "",
                                      .help = f->help,
                                      .type = f->type,
                                      .first = i == 0,
                                      .nlabels = f->lkey ? 1 : 0,
                                      .label_key = {f->lkey},
                                      .label_val = {lvals ? lvals[i] : NULL},
                                      .value = vals[i]};
            rc = emit(user, &m);
        }
    }
    return rc;
}

static void view(const struct server *s, struct mtg_view *v)
{
    memset(v, 0, sizeof *v);
    server_stats(s, &v->tot);
    for (size_t i = 0; i < server_secret_count(s); i++) {
        struct stats_secret ss;
        server_secret_stats(s, i, &ss);
        v->auth_active += ss.active;
        v->auth_up += ss.bytes_up;
        v->auth_down += ss.bytes_down;
    }
    for (int k = ACL_ALLOW; k <= ACL_BLOCK; k++) {
        struct acl_list_stats st;
        acl_stats(server_acl(s), (enum acl_list_kind)k, &st);
        v->list_ranges[k == ACL_BLOCK] = st.ranges;
    }
}

int metrics_collect_mtg(const struct server *s, metrics_emit_fn emit, void *user)
{
    static const struct family fams[] = {
        {"client_connections",
         "mtg name: client connections open now (tgproxy client_connections_active).", METRIC_GAUGE,
         NULL},
        {"telegram_connections",
         "mtg name: authenticated connections open now, each with its DC connection.", METRIC_GAUGE,
         NULL},
        {"domain_fronting_connections", "mtg name: connections relaying to the fronting host now.",
         METRIC_GAUGE, NULL},
        {"telegram_traffic", "mtg name: bytes relayed for authenticated connections, by direction.",
         METRIC_COUNTER, "direction"},
        {"domain_fronting_traffic",
         "mtg name: bytes relayed for fronted connections, by direction.", METRIC_COUNTER,
         "direction"},
        {"domain_fronting", "mtg name: connections relayed to the fronting host.", METRIC_COUNTER,
         NULL},
        {"concurrency_limited", "mtg name: connections closed at accept by the concurrency limit.",
         METRIC_COUNTER, NULL},
        {"ip_blocklisted", "mtg name: connections refused by an access list, by list.",
         METRIC_COUNTER, "ip_list"},
        {"replay_attacks", "mtg name: replayed handshakes (fronted).", METRIC_COUNTER, NULL},
        {"iplist_size", "mtg name: address ranges in an access list now, by list.", METRIC_GAUGE,
         "ip_list"},
    };
    static const char *const dirs[] = {"to_client", "from_client"};
    static const char *const lists[] = {"allowlist", "blocklist"};
    struct mtg_view v;
    view(s, &v);
    const struct stats *t = &v.tot;
    const double vals[][2] = {
        {(double)t->active},
        {(double)v.auth_active},
        {(double)t->front_active},
        {(double)v.auth_down, (double)v.auth_up},
        {(double)t->front_bytes_down, (double)t->front_bytes_up},
        {(double)t->fronted},
        {(double)t->rejected_limit},
        {(double)t->acl_not_allowed, (double)t->acl_blocked},
        {(double)t->hs_replay},
        {(double)v.list_ranges[0], (double)v.list_ranges[1]},
    };
    const char *const *labels[] = {NULL, NULL, NULL, dirs, dirs, NULL, NULL, lists, NULL, lists};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof fams / sizeof fams[0]; i++)
        rc = emit_family(emit, user, &fams[i], fams[i].lkey ? 2 : 1, labels[i], vals[i]);
    return rc;
}
