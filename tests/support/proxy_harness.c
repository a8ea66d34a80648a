/* proxy_harness: in-process tgproxy + fake DC + fronting host. See proxy_harness.h. */
#include "proxy_harness.h"

#include "ports.h"

#include "core/alloc.h"
#include "core/log.h"
#include "core/str.h"
#include "proxy/wire/mpconf.h"
#include "wait.h"

#include <arpa/inet.h>
#include <errno.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void hostport_local(struct value_hostport *hp, uint16_t port)
{
    memset(hp, 0, sizeof *hp);
    tg__strlcpy(hp->host, "127.0.0.1", sizeof hp->host);
    hp->port = port;
    hp->resolved = true;
    struct sockaddr_in a = psock_addr(port);
    memcpy(&hp->addr, &a, sizeof a);
    hp->addr_len = sizeof a;
}

static int add_secret(struct pharness *h, const char *label, enum secret_kind kind)
{
    struct secret s = {.kind = kind};
    memcpy(s.key, h->key, 16);
    if (kind == SECRET_EE) {
        tg__strlcpy(s.domain, PHARNESS_DOMAIN, sizeof s.domain);
        s.domain_len = (uint8_t)strlen(PHARNESS_DOMAIN);
    }
    char err[256];
    int rc = config_add_secret(&h->cfg, label, &s, err, sizeof err);
    if (rc < 0)
        fprintf(stderr, "pharness: %s\n", err);
    return rc;
}

/* A port that refuses connections: bind one, then close it. */
static uint16_t closed_port(void)
{
    uint16_t port = 0;
    int fd = psock_listen(&port, 1);
    if (fd >= 0)
        close(fd);
    return port;
}

/* One more [dcs] entry, id -> "host:port" (parsed as the config loader would). */
static int add_dc(struct config *cfg, int32_t id, const char *addr)
{
    struct config_dc *d = tg__realloc(cfg->dcs, (cfg->ndcs + 1) * sizeof *d);
    if (!d)
        return -ENOMEM;
    cfg->dcs = d;
    d = &cfg->dcs[cfg->ndcs];
    memset(d, 0, sizeof *d);
    d->id = id;
    d->naddrs = 1;
    char err[256];
    if (value_hostport_parse(addr, strlen(addr), &d->addrs[0], err, sizeof err) < 0) {
        fprintf(stderr, "pharness: %s: %s\n", addr, err);
        return -EINVAL;
    }
    cfg->ndcs++;
    return 0;
}

#ifndef TGKIT_BINARY_DIR
#error "the harness runs the build's tgproxy-fakemp: define TGKIT_BINARY_DIR"
#endif

/* Middle-proxy mode: a proxy secret, tgproxy-fakemp on it in front of the fake DC, the
   list naming it, and the config as the loader would leave it ([middle-proxy] with both
   files read, a top-level ad tag). */
static int start_midproxy(struct pharness *h)
{
    struct config *cfg = &h->cfg;
    snprintf(h->mp_dir, sizeof h->mp_dir, "/tmp/tgkit-pharness-mp-XXXXXX");
    if (!mkdtemp(h->mp_dir))
        return -errno;
    char secret_path[96], conf_path[96], log[96], dc[32];
    snprintf(secret_path, sizeof secret_path, "%s/proxy-secret", h->mp_dir);
    snprintf(conf_path, sizeof conf_path, "%s/proxy-config", h->mp_dir);
    snprintf(log, sizeof log, "%s/log", h->mp_dir);
    snprintf(dc, sizeof dc, "127.0.0.1:%u", (unsigned)h->dc_port);
    uint8_t secret[128];
    if (RAND_bytes(secret, sizeof secret) != 1)
        return -EIO;
    FILE *f = fopen(secret_path, "wb");
    if (!f || fwrite(secret, 1, sizeof secret, f) != sizeof secret || fclose(f) != 0)
        return -EIO;
    char *argv[] = {TGKIT_BINARY_DIR "/tgproxy-fakemp",
                    "--listen",
                    "127.0.0.1:0",
                    "--secret-file",
                    secret_path,
                    "--dc",
                    dc,
                    "--raw",
                    NULL};
    h->mp = (struct pproc){.pid = -1, .cmd = -1, .resp = -1};
    h->mp.pid = pproc_spawn_logged(argv, log);
    if (h->mp.pid < 0 || pproc_log_wait(log, "listening on", 1) < 0 ||
        pproc_log_port(log, "listening on", &h->mp.port) < 0)
        return -EIO;
    char conf[96];
    int n = snprintf(conf, sizeof conf, "default 2;\nproxy_for 2 127.0.0.1:%u;\n",
                     (unsigned)h->mp.port);
    char err[128];
    if (mpconf_parse(conf, (size_t)n, &cfg->mp.conf, err, sizeof err) != 0)
        return -EINVAL;
    cfg->mp.enabled = true;
    tg__strlcpy(cfg->mp.secret_path, secret_path, sizeof cfg->mp.secret_path);
    tg__strlcpy(cfg->mp.config_path, conf_path, sizeof cfg->mp.config_path);
    cfg->mp.config6_path[0] = '\0';
    memcpy(cfg->mp.secret, secret, sizeof secret);
    cfg->mp.secret_len = sizeof secret;
    f = fopen(conf_path, "w");
    if (!f || fwrite(conf, 1, (size_t)n, f) != (size_t)n || fclose(f) != 0)
        return -EIO;
    cfg->has_ad_tag = true;
    memset(cfg->ad_tag, 0x5a, sizeof cfg->ad_tag);
    return 0;
}

static void stop_midproxy(struct pharness *h)
{
    if (!h->mp_dir[0])
        return;
    pproc_stop(&h->mp);
    const char *names[] = {"proxy-secret", "proxy-config", "log"};
    for (size_t i = 0; i < 3; i++) {
        char p[96];
        snprintf(p, sizeof p, "%s/%s", h->mp_dir, names[i]);
        unlink(p);
    }
    rmdir(h->mp_dir);
    h->mp_dir[0] = '\0';
}

static int build_config(struct pharness *h, const struct pharness_opts *o)
{
    struct config *cfg = &h->cfg;
    char err[256];
    if (config_add_listen(cfg, "127.0.0.1:0", 11, err, sizeof err) < 0)
        return -EINVAL;
    bool ee = o->ee || (!o->dd && !o->classic);
    int rc = 0;
    if (ee)
        rc = add_secret(h, "tls", SECRET_EE);
    if (rc == 0 && o->dd)
        rc = add_secret(h, "dd", SECRET_DD);
    if (rc == 0 && o->classic)
        rc = add_secret(h, "classic", SECRET_CLASSIC);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < cfg->nsecrets; i++)
        cfg->secrets[i].limits = o->limits;
    cfg->dcs = tg__calloc(1, sizeof *cfg->dcs);
    if (!cfg->dcs)
        return -ENOMEM;
    cfg->ndcs = 1;
    cfg->dcs[0].is_default = true;
    cfg->dcs[0].naddrs = 1;
    uint16_t dcp = o->dc_closed_port ? closed_port() : o->no_fakedc ? o->dc_port : h->dc_port;
    hostport_local(&cfg->dcs[0].addrs[0], dcp);
    if (o->dc_host) {
        struct value_hostport *hp = &cfg->dcs[0].addrs[0];
        memset(hp, 0, sizeof *hp);
        tg__strlcpy(hp->host, o->dc_host, sizeof hp->host);
        hp->port = dcp;
    }
    if (o->extra_dc_addr && add_dc(cfg, o->extra_dc, o->extra_dc_addr) < 0)
        return -EINVAL;
    for (size_t i = 0; i < 4 && o->proxies[i]; i++) {
        struct socks5_upstream *p = tg__realloc(cfg->proxies, (i + 1) * sizeof *p);
        if (!p)
            return -ENOMEM;
        cfg->proxies = p;
        if (socks5_url_parse(o->proxies[i], strlen(o->proxies[i]), &p[i], err, sizeof err) < 0)
            return -EINVAL;
        cfg->nproxies = i + 1;
    }
    cfg->prefer_ip = CONFIG_PREFER_IPV4;
    if (!o->no_front) {
        struct value_hostport hp;
        hostport_local(&hp, h->front_port);
        tg__strlcpy(cfg->fronting.host, hp.host, sizeof cfg->fronting.host);
        cfg->fronting.port = hp.port;
        cfg->fronting.resolved = !o->front_by_name;
        cfg->fronting.addr = hp.addr;
        cfg->fronting.addr_len = hp.addr_len;
    }
    if (o->handshake_ms)
        cfg->timeout.handshake_ms = o->handshake_ms;
    if (o->idle_ms)
        cfg->timeout.idle_ms = o->idle_ms;
    if (o->tcp_ms)
        cfg->timeout.tcp_ms = o->tcp_ms;
    if (o->concurrency)
        cfg->concurrency = o->concurrency;
    cfg->workers = o->workers ? o->workers : 2;
    cfg->proxy_protocol_listener = o->pp_listener;
    cfg->fast_mode = !o->no_fast_mode;
    cfg->dynamic_records = !o->no_dynamic_records;
    if (o->mss_clamp)
        cfg->mss_clamp = o->mss_clamp < 0 ? 0 : (uint32_t)o->mss_clamp;
    cfg->mss_clamp_loopback = o->mss_clamp > 0;
    cfg->doppel.enabled = o->doppel; /* built-in profile: no urls, nothing fetched */
    if (o->bulk_budget)
        cfg->bulk_budget = o->bulk_budget;
    cfg->fronting.proxy_protocol = o->pp_front;
    if (o->antireplay_entries)
        cfg->antireplay.max_entries = o->antireplay_entries;
    for (uint32_t i = 0; rc == 0 && i < o->more_secrets; i++) {
        struct secret sec = {.kind = SECRET_EE, .domain_len = sizeof PHARNESS_DOMAIN - 1};
        memcpy(sec.domain, PHARNESS_DOMAIN, sizeof PHARNESS_DOMAIN - 1);
        char label[16];
        snprintf(label, sizeof label, "s%u", (unsigned)i);
        if (RAND_bytes(sec.key, sizeof sec.key) != 1 ||
            config_add_secret(cfg, label, &sec, err, sizeof err) < 0)
            return -EINVAL;
    }
    if (o->api) {
        char a[32];
        int port = tgtest_listen_port(), n = snprintf(a, sizeof a, "127.0.0.1:%d", port);
        snprintf(h->api_dir, sizeof h->api_dir, "/tmp/tgkit-api-XXXXXX");
        if (port <= 0 || !mkdtemp(h->api_dir) ||
            value_hostport_parse(a, (size_t)n, &cfg->api.bind, NULL, 0) != 0)
            return -EINVAL;
        h->api_port = (uint16_t)port;
        cfg->api.enabled = true;
        snprintf(cfg->api.state_file, sizeof cfg->api.state_file, "%s/api.json", h->api_dir);
    }
    cfg->prometheus.enabled = o->prometheus;
    if (o->prometheus && value_hostport_parse("127.0.0.1:0", 11, &cfg->prometheus.bind, NULL, 0))
        return -EINVAL;
    if (o->statsd_port) {
        char a[32];
        int n = snprintf(a, sizeof a, "127.0.0.1:%u", (unsigned)o->statsd_port);
        if (value_hostport_parse(a, (size_t)n, &cfg->statsd.addr, NULL, 0) != 0)
            return -EINVAL;
        cfg->statsd.enabled = true;
        cfg->statsd.tag_format = (enum config_tag_format)o->statsd_tags;
        if (o->statsd_flush_ms)
            cfg->statsd.flush_ms = o->statsd_flush_ms;
    }
    cfg->log_level = o->log_level ? o->log_level : TG__LOG_WARN;
    const char *env = getenv("TGPROXY_TEST_LOG"); /* e.g. "debug" while investigating */
    if (env && tg__log_level_parse(env) >= 0)
        cfg->log_level = tg__log_level_parse(env);
    return 0;
}

int pharness_prepare(struct pharness *h, const struct pharness_opts *o)
{
    memset(h, 0, sizeof *h);
    h->proc = (struct pproc){.pid = -1, .cmd = -1, .resp = -1};
    config_init(&h->cfg);
    h->cfg.tls_front.enabled = false; /* no probes to the stand-in front */
    if (RAND_bytes(h->key, sizeof h->key) != 1)
        return -EIO;
    if (!o->no_fakedc && !(h->dc = fakedc_start(&h->dc_port)))
        goto fail;
    if (!o->no_front && !(h->front = pfront_start(&h->front_port)))
        goto fail;
    if (build_config(h, o) < 0)
        goto fail;
    if (o->midproxy && start_midproxy(h) < 0)
        goto fail;
    if (tg__log_default()->level != h->cfg.log_level) /* no write while others may read */
        tg__log_default()->level = h->cfg.log_level;
    return 0;
fail:
    pharness_stop(h);
    return -1;
}

int pharness_start(struct pharness *h, const struct pharness_opts *o)
{
    if (pharness_prepare(h, o) < 0)
        return -1;
    if (o->fork_server) {
        if (pproc_proxy_start(&h->proc, &h->cfg) < 0)
            goto fail;
        h->port = h->proc.port;
        return 0;
    }
    if (server_start(&h->cfg, &h->srv) < 0)
        goto fail;
    h->port = server_port(h->srv, 0);
    return 0;
fail:
    pharness_stop(h);
    return -1;
}

void pharness_stop(struct pharness *h)
{
    server_stop(h->srv);
    pproc_stop(&h->proc);
    fakedc_stop(h->dc);
    pfront_stop(h->front);
    stop_midproxy(h);
    config_cleanup(&h->cfg);
    if (h->api_dir[0]) {
        char state[96];
        snprintf(state, sizeof state, "%s/api.json", h->api_dir);
        unlink(state);
        rmdir(h->api_dir);
    }
    memset(h, 0, sizeof *h);
}

int pharness_reload_base(const struct pharness *h, struct config *cfg)
{
    char err[CONFIG_ERR_MAX];
    const char *l = h->cfg.listen[0].text;
    config_init(cfg);
    cfg->tls_front = h->cfg.tls_front;
    cfg->workers = h->cfg.workers; /* restart-only: kept, so a reload warns about nothing */
    cfg->log_level = h->cfg.log_level;
    int rc = config_add_listen(cfg, l, strlen(l), err, sizeof err);
    for (size_t i = 0; rc == 0 && i < h->cfg.nsecrets; i++)
        rc = config_add_secret(cfg, h->cfg.secrets[i].label, &h->cfg.secrets[i].secret, err,
                               sizeof err);
    return rc;
}

struct pcli_opts pharness_client(const struct pharness *h, enum pcli_mode mode)
{
    return (struct pcli_opts){
        .mode = mode, .key = h->key, .sni = PHARNESS_DOMAIN, .dc = 2, .timeout_ms = 10000};
}

struct stat_want {
    struct server *s;
    size_t i;
    uint64_t want;
    bool idle;
};

static bool stat_reached(void *arg)
{
    const struct stat_want *w = arg;
    struct stats st;
    server_stats(w->s, &st);
    return w->idle ? st.active == 0 : stats_value(&st, w->i) >= w->want;
}

bool pharness_wait_stat(struct server *s, size_t i, uint64_t want, int timeout_ms)
{
    struct stat_want w = {s, i, want, false};
    return tgtest_wait_until(stat_reached, &w, timeout_ms);
}

bool pharness_wait_idle(struct server *s, int timeout_ms)
{
    struct stat_want w = {s, 0, 0, true};
    return tgtest_wait_until(stat_reached, &w, timeout_ms);
}
