/* proxy_fleet: two tgproxy processes on one redis-server. See proxy_fleet.h. */
#include "proxy_fleet.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/str.h"
#include "proxy_util.h"

int pfleet_start(struct pfleet *f, const struct pharness_opts *o, uint32_t fleet_timeout_ms,
                 bool no_fleet)
{
    memset(f, 0, sizeof *f);
    f->b = (struct pproc){.pid = -1, .cmd = -1, .resp = -1};
    struct pharness_opts ho = *o;
    ho.fork_server = false;
    f->workers = ho.workers ? ho.workers : 2;
    if (!no_fleet && tgtest_redis_start(&f->redis) != 0)
        return -1;
    if (pharness_prepare(&f->h, &ho) < 0)
        goto fail;
    struct config *cfg = &f->h.cfg;
    if (!no_fleet) {
        cfg->fleet.enabled = true;
        tg__strlcpy(cfg->fleet.host, "127.0.0.1", sizeof cfg->fleet.host);
        cfg->fleet.port = f->redis.port;
        if (fleet_timeout_ms)
            cfg->fleet.timeout_ms = fleet_timeout_ms;
    }
    if (pproc_proxy_start(&f->b, cfg) < 0) /* before A's threads exist */
        goto fail;
    f->port_b = f->b.port;
    if (server_start(cfg, &f->h.srv) < 0)
        goto fail;
    f->port_a = server_port(f->h.srv, 0);
    f->h.port = f->port_a;
    return 0;
fail:
    pfleet_stop(f);
    return -1;
}

void pfleet_stop(struct pfleet *f)
{
    pproc_stop(&f->b);
    pharness_stop(&f->h);
    if (f->redis.pid > 0)
        tgtest_redis_stop(&f->redis);
    memset(f, 0, sizeof *f);
}

int pfleet_stats(struct pfleet *f, struct stats *a, struct stats *b)
{
    struct pproc_report r;
    if (pproc_report(&f->b, &r) != 0)
        return -1;
    server_stats(f->h.srv, a);
    *b = r.st;
    return 0;
}

int pfleet_wait_up(struct pfleet *f, bool up, int timeout_ms)
{
    uint64_t want = up ? f->workers : 0;
    for (int waited = 0; waited <= timeout_ms; waited += 20) {
        struct stats a, b;
        if (pfleet_stats(f, &a, &b) != 0)
            return -1;
        if (a.fleet_up == want && b.fleet_up == want)
            return 0;
        nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL);
    }
    return -1;
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
