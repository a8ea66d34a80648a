/* proxy_fleet: two tgproxy processes on one redis-server. See proxy_fleet.h. */
#include "proxy_fleet.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/str.h"
#include "proxy_util.h"
#include "wait.h"

#define BINARY TGKIT_BINARY_DIR "/tgproxy"

/* A port nobody listens on right now (listen on 0, read it back, close). */
static uint16_t free_port(void)
{
    uint16_t port = 0;
    int fd = psock_listen(&port, 1);
    if (fd >= 0)
        close(fd);
    return fd >= 0 ? port : 0;
}

/* cfg's secrets as B's [secrets] and [limits.LABEL] (the harness gives all one key). */
static void secrets_b(FILE *fp, const struct pfleet *f)
{
    const struct config *cfg = &f->h.cfg;
    char hex[33], dom[2 * sizeof PHARNESS_DOMAIN + 1];
    tg__hex_encode(hex, f->h.key, 16);
    tg__hex_encode(dom, PHARNESS_DOMAIN, sizeof PHARNESS_DOMAIN - 1);
    fprintf(fp, "[secrets]\n");
    for (size_t i = 0; i < cfg->nsecrets; i++) {
        enum secret_kind k = cfg->secrets[i].secret.kind;
        fprintf(fp, "%s = \"%s%s%s\"\n", cfg->secrets[i].label,
                k == SECRET_EE   ? "ee"
                : k == SECRET_DD ? "dd"
                                 : "",
                hex, k == SECRET_EE ? dom : "");
    }
    for (size_t i = 0; i < cfg->nsecrets; i++) {
        const struct config_limits *l = &cfg->secrets[i].limits;
        if (!l->max_connections && !l->max_unique_ips && !l->quota)
            continue;
        fprintf(fp, "[limits.%s]\n", cfg->secrets[i].label);
        if (l->max_connections)
            fprintf(fp, "max-connections = %u\n", l->max_connections);
        if (l->max_unique_ips)
            fprintf(fp, "max-unique-ips = %u\nunique-ips-window = %u\n", l->max_unique_ips,
                    l->unique_ips_window_s ? l->unique_ips_window_s : 3600);
        if (l->quota)
            fprintf(fp, "quota = %llu\n", (unsigned long long)l->quota);
    }
}

static int write_config_b(struct pfleet *f, const char *path)
{
    const struct config *cfg = &f->h.cfg;
    FILE *fp = fopen(path, "w");
    if (!fp)
        return -1;
    fprintf(fp,
            "bind-to = \"127.0.0.1:%u\"\nworkers = %u\nlog-level = \"info\"\n"
            "[dcs]\ndefault = \"127.0.0.1:%u\"\n"
            "[domain-fronting]\nhost = \"127.0.0.1\"\nport = %u\n"
            "[defense.tls-front]\nenabled = false\n" /* no probes to the stand-in front */
            "[stats.prometheus]\nenabled = true\nbind-to = \"127.0.0.1:%u\"\n",
            f->port_b, f->workers, f->h.dc_port, f->h.front_port, f->metrics_b);
    fprintf(fp,
            "[fleet]\nredis = \"redis://127.0.0.1:%u\"\ntimeout = \"%ums\"\nlease = "
            "\"%ums\"\n",
            f->redis.port, cfg->fleet.timeout_ms, cfg->fleet.lease_ms);
    secrets_b(fp, f);
    return fclose(fp) == 0 ? 0 : -1;
}

static bool b_serving(void *arg)
{
    return pfleet_metric_b(arg, "build_info{version") >= 0;
}

static int spawn_b(struct pfleet *f, const char *cfg_path)
{
    char log[96];
    snprintf(log, sizeof log, "%s/b.log", f->dir);
    char *argv[] = {(char *)BINARY, (char *)"run", (char *)cfg_path, NULL};
    f->pid_b = pproc_spawn_logged(argv, log);
    if (f->pid_b <= 0) {
        f->pid_b = 0;
        return -1;
    }
    return tgtest_wait_until(b_serving, f, 10000) ? 0 : -1; /* its metrics page answers */
}

int pfleet_start(struct pfleet *f, const struct pharness_opts *o, const struct pfleet_opts *fo)
{
    memset(f, 0, sizeof *f);
    struct pharness_opts ho = *o;
    ho.fork_server = false;
    f->workers = ho.workers ? ho.workers : 2;
    snprintf(f->dir, sizeof f->dir, "/tmp/tgtest-pfleet-XXXXXX");
    if (!mkdtemp(f->dir) || tgtest_redis_start(&f->redis) != 0)
        goto fail;
    if (pharness_prepare(&f->h, &ho) < 0)
        goto fail;
    struct config *cfg = &f->h.cfg;
    cfg->fleet.enabled = true;
    tg__strlcpy(cfg->fleet.host, "127.0.0.1", sizeof cfg->fleet.host);
    cfg->fleet.port = f->redis.port;
    if (fo->timeout_ms)
        cfg->fleet.timeout_ms = fo->timeout_ms;
    if (fo->lease_ms)
        cfg->fleet.lease_ms = fo->lease_ms;
    char path[96];
    snprintf(path, sizeof path, "%s/b.toml", f->dir);
    f->port_b = free_port();
    f->metrics_b = free_port();
    if (!f->port_b || !f->metrics_b || write_config_b(f, path) != 0 || spawn_b(f, path) != 0)
        goto fail;
    if (server_start(cfg, &f->h.srv) < 0)
        goto fail;
    f->port_a = server_port(f->h.srv, 0);
    f->h.port = f->port_a;
    return 0;
fail:
    pfleet_stop(f);
    return -1;
}

static bool b_reaped(void *arg)
{
    struct pfleet *f = arg;
    return waitpid(f->pid_b, NULL, WNOHANG) != 0;
}

void pfleet_stop(struct pfleet *f)
{
    if (f->pid_b > 0) {
        kill(f->pid_b, SIGTERM);
        if (!tgtest_wait_until(b_reaped, f, 5000)) {
            kill(f->pid_b, SIGKILL);
            waitpid(f->pid_b, NULL, 0);
        }
    }
    pharness_stop(&f->h);
    if (f->redis.pid > 0)
        tgtest_redis_stop(&f->redis);
    if (f->dir[0]) {
        char p[128];
        snprintf(p, sizeof p, "%s/b.toml", f->dir);
        unlink(p);
        snprintf(p, sizeof p, "%s/b.log", f->dir);
        unlink(p);
        rmdir(f->dir);
    }
    memset(f, 0, sizeof *f);
}

/* GET / from B's metrics page into buf (NUL-terminated). 0 or -1. */
static int scrape_b(struct pfleet *f, char *buf, size_t cap)
{
    int fd = psock_connect(f->metrics_b, 5000);
    if (fd < 0)
        return -1;
    static const char req[] = "GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    size_t n = 0;
    if (psock_write_all(fd, req, sizeof req - 1) == 0)
        for (ssize_t r; n + 1 < cap && (r = read(fd, buf + n, cap - 1 - n)) > 0;)
            n += (size_t)r;
    close(fd);
    buf[n] = '\0';
    return strstr(buf, " 200 ") ? 0 : -1;
}

/* The value of the first line starting with tgproxy_<sample> (sample ends in ' ' or
   names its labels, so it matches one series), or -1. */
static double sample_in(const char *page, const char *sample)
{
    char key[160];
    snprintf(key, sizeof key, "\ntgproxy_%s", sample);
    const char *p = strstr(page, key);
    if (!p)
        return -1;
    const char *end = strchr(p + 1, '\n'), *sp = NULL;
    for (const char *q = p + 1; q < (end ? end : p + strlen(p)); q++)
        sp = *q == ' ' ? q : sp;
    return sp ? strtod(sp + 1, NULL) : -1;
}

double pfleet_metric_b(struct pfleet *f, const char *sample)
{
    static char page[1 << 17];
    return scrape_b(f, page, sizeof page) == 0 ? sample_in(page, sample) : -1;
}

int pfleet_stats(struct pfleet *f, struct stats *a, struct stats *b)
{
    static char page[1 << 17];
    server_stats(f->h.srv, a);
    memset(b, 0, sizeof *b);
    if (scrape_b(f, page, sizeof page) != 0)
        return -1;
    static const struct {
        const char *sample;
        size_t field;
    } map[] = {
#define M(s, field) {s, offsetof(struct stats, field) / sizeof(uint64_t)}
        M("fleet_redis_checks_total ", fleet_checks),
        M("fleet_redis_fallbacks_total ", fleet_fallbacks),
        M("fleet_redis_replays_total ", fleet_replays),
        M("limits_hit_total{limit=\"max_connections\"}", limit_connections),
        M("limits_hit_total{limit=\"max_unique_ips\"}", limit_unique_ips),
        M("limits_hit_total{limit=\"quota\"}", limit_quota),
#undef M
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        double v = sample_in(page, map[i].sample);
        if (v < 0)
            return -1;
        ((uint64_t *)(void *)b)[map[i].field] = (uint64_t)v;
    }
    double up = sample_in(page, "fleet_redis_up ");
    b->fleet_up = up == 1 ? f->workers : 0; /* the page says all or not all */
    return 0;
}

struct up_want {
    struct pfleet *f;
    uint64_t want;
    bool broken; /* a report could not be read: stop waiting */
};

static bool both_up(void *arg)
{
    struct up_want *w = arg;
    struct stats a, b;
    if (pfleet_stats(w->f, &a, &b) != 0)
        return w->broken = true;
    return a.fleet_up == w->want && b.fleet_up == w->want;
}

int pfleet_wait_up(struct pfleet *f, bool up, int timeout_ms)
{
    struct up_want w = {f, up ? f->workers : 0, false};
    return tgtest_wait_until(both_up, &w, timeout_ms) && !w.broken ? 0 : -1;
}

int pfleet_hello(uint16_t port, const char *src_ip, const uint8_t *hello, size_t n)
{
    int fd = psock_connect_from(src_ip, port, 10000);
    if (fd < 0)
        return -1;
    uint8_t first[5] = {0};
    int rc = -1;
    if (psock_write_all(fd, hello, n) == 0 && psock_read_all(fd, first, sizeof first) == 0)
        rc = first[0] == 0x16 ? 1 : memcmp(first, PFRONT_BANNER, 5) == 0 ? 0 : -1;
    close(fd);
    return rc;
}

int pfleet_cross_replay(struct pfleet *f, uint8_t *hello, size_t *np)
{
    size_t n = *np =
        pcli_hello(hello, PFLEET_HELLO_MAX, f->h.key, PHARNESS_DOMAIN, (int64_t)time(NULL));
    struct stats a0, b0, a1, b1;
    if (pfleet_stats(f, &a0, &b0) != 0 || pfleet_hello(f->port_a, NULL, hello, n) != 1)
        return -1;
    int r = pfleet_hello(f->port_b, NULL, hello, n);
    if (pfleet_stats(f, &a1, &b1) != 0)
        return -1;
    bool fell_back =
        a1.fleet_fallbacks > a0.fleet_fallbacks || b1.fleet_fallbacks > b0.fleet_fallbacks;
    if (r == 1)
        return fell_back ? 0 : -1;
    return r == 0 && b1.fleet_replays == b0.fleet_replays + 1 ? 1 : -1;
}
