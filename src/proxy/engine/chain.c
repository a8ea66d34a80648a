/*
 * chain: SOCKS5 upstream attempts of the connector's DC requests, on the worker's loop.
 * See chain.h.
 */
#include "proxy/engine/chain.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "core/alloc.h"
#include "core/log.h"
#include "proxy/engine/conn.h"
#include "proxy/config/dc.h"
#include "proxy/wire/socks5.h"

#define CHAIN_MAX_ATTEMPTS 255 /* r->addr_i is 8 bits */

struct chain {
    struct socks5_client cl;
    uint32_t start; /* the upstream of attempt 0 */
};

bool chain_enabled(const struct config *cfg)
{
    return cfg->nproxies > 0;
}

void chain_free(struct upstream_req *r)
{
    if (r->chain) {
        memset(r->chain, 0, sizeof *r->chain); /* holds a copy of the credentials' bytes */
        tg__free(r->chain);
        r->chain = NULL;
    }
}

/* The i-th DC target: IP addresses first (prefer-ip order), then [dcs] host names. */
static bool dc_target_at(const struct config *cfg, int32_t dc, unsigned i,
                         struct sockaddr_storage *ss, struct socks5_target *t)
{
    socklen_t len;
    memset(t, 0, sizeof *t);
    unsigned nip = 0;
    while (upstream_dc_addr(cfg, dc, nip, ss, &len) == 0 && nip <= i)
        nip++;
    if (i < nip) {
        if (upstream_dc_addr(cfg, dc, i, ss, &len) != 0)
            return false;
        t->sa = (const struct sockaddr *)ss;
        return true;
    }
    struct dc_options o;
    struct dc_target dt;
    dc_options_from_config(&o, cfg);
    if (dc_resolve(&o, dc, &dt) < 0 || !dt.override)
        return false;
    unsigned k = nip;
    for (size_t j = 0; j < dt.override->naddrs; j++) {
        const struct value_hostport *hp = &dt.override->addrs[j];
        if (hp->resolved)
            continue;
        if (k++ == i) {
            t->host = hp->host;
            t->port = hp->port;
            return true;
        }
    }
    return false;
}

static void chain_log(struct upstream_req *r, const struct socks5_upstream *up, const char *why)
{
    struct conn_worker *w = r->w;
    if (!tg__ratelimit_allow(&w->rl, w->loop.now_ms))
        return;
    char name[VALUE_HOST_MAX + 32];
    socks5_url_format(up, name, sizeof name);
    tg__log(NULL, TG__LOG_WARN, "dc %d: upstream %s: %s", r->dc, name, why);
}

static const struct socks5_upstream *attempt_upstream(const struct upstream_req *r)
{
    const struct config *cfg = r->cfg;
    return &cfg->proxies[(r->chain->start + r->addr_i) % cfg->nproxies];
}

int chain_try(struct upstream_req *r)
{
    struct conn_worker *w = r->w;
    const struct config *cfg = r->cfg;
    if (!r->chain) {
        r->chain = tg__calloc(1, sizeof *r->chain);
        if (!r->chain) {
            r->why = UPSTREAM_WHY_ERROR;
            return UPSTREAM_UNREACHABLE;
        }
        r->chain->start = w->chain.rr++;
    }
    for (; r->addr_i < CHAIN_MAX_ATTEMPTS; r->addr_i++) {
        struct sockaddr_storage ss;
        struct socks5_target t;
        if (!dc_target_at(cfg, r->dc, r->addr_i / cfg->nproxies, &ss, &t))
            break;
        const struct socks5_upstream *up = attempt_upstream(r);
        if (socks5_client_init(&r->chain->cl, up, &t) != SOCKS5_SEND)
            continue; /* a host name too long for SOCKS5: the next attempt */
        int rc = upstream_chain_connect(r, &up->addr.addr, up->addr.addr_len);
        if (rc == 0)
            return 0;
        chain_log(r, up, strerror(-rc));
    }
    if (r->why == UPSTREAM_WHY_NONE) /* not one attempt could start */
        r->why = UPSTREAM_WHY_NO_ADDRESS;
    return UPSTREAM_UNREACHABLE;
}

/* Send the pending request whole (at most SOCKS5_REQ_MAX bytes on a socket that has sent
   nothing else: it fits the empty send buffer). NULL, or the reason it failed. */
static const char *send_pending(struct upstream_req *r)
{
    size_t n = 0;
    const uint8_t *p = socks5_client_pending(&r->chain->cl, &n);
    ssize_t k = send(r->uio->io.fd, p, n, MSG_NOSIGNAL);
    if (k == (ssize_t)n)
        return NULL;
    return k < 0 ? strerror(errno) : "short send of a SOCKS5 request";
}

/* The attempt failed at the SOCKS5 level: kind is UPSTREAM_WHY_UPSTREAM_REFUSED for a
   failure reply to CONNECT, else UPSTREAM_WHY_UPSTREAM_ERROR. */
static void attempt_failed(struct upstream_req *r, const char *why, enum upstream_why kind)
{
    r->why = (uint8_t)kind;
    chain_log(r, attempt_upstream(r), why);
    upstream_chain_failed(r); /* drops the socket, tries attempt addr_i + 1 */
}

/* Read what the upstream sent, without taking bytes past the end of its reply: peek, feed,
   then consume only what the parser used. Returns the parser's status. */
static int read_reply(struct upstream_req *r, const char **why)
{
    uint8_t b[SOCKS5_REPLY_MAX];
    ssize_t n = recv(r->uio->io.fd, b, sizeof b, MSG_PEEK);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return SOCKS5_MORE;
    if (n <= 0) {
        *why = n == 0 ? "closed during the SOCKS5 negotiation" : strerror(errno);
        return SOCKS5_E_STATE;
    }
    size_t used = 0;
    int st = socks5_client_feed(&r->chain->cl, b, (size_t)n, &used);
    if (used > 0 && recv(r->uio->io.fd, b, used, 0) != (ssize_t)used) {
        *why = "lost bytes of a SOCKS5 reply";
        return SOCKS5_E_STATE;
    }
    *why = socks5_strerror(st, &r->chain->cl);
    return st;
}

static void on_upstream_reply(struct loop *l, struct loop_io *io, unsigned events)
{
    (void)l;
    (void)events;
    struct upstream_req *r = ((struct upstream_io *)(void *)io)->req;
    for (int i = 0; i < 4; i++) { /* greeting, auth, connect: at most three replies */
        const char *why = NULL;
        int st = read_reply(r, &why);
        if (st == SOCKS5_MORE)
            return;
        if (st == SOCKS5_SEND && (why = send_pending(r)) == NULL)
            continue;
        if (st == SOCKS5_CONNECTED) {
            upstream_chain_done(r);
            return;
        }
        char msg[128];
        if (st == SOCKS5_E_REPLY) {
            snprintf(msg, sizeof msg, "CONNECT failed: %s (reply %u)", why,
                     (unsigned)r->chain->cl.rep);
            why = msg;
        }
        attempt_failed(r, why,
                       st == SOCKS5_E_REPLY ? UPSTREAM_WHY_UPSTREAM_REFUSED
                                            : UPSTREAM_WHY_UPSTREAM_ERROR);
        return;
    }
}

void chain_timeout(struct upstream_req *r)
{
    if (!r->chain || r->uio->io.fd < 0)
        return;
    chain_log(r, attempt_upstream(r),
              r->uio->io.cb == on_upstream_reply ? "no SOCKS5 answer within [network.timeout] tcp"
                                                 : "connect timed out ([network.timeout] tcp)");
}

void chain_connected(struct upstream_req *r)
{
    const char *why = send_pending(r);
    if (why) {
        attempt_failed(r, why, UPSTREAM_WHY_UPSTREAM_ERROR);
        return;
    }
    r->uio->io.cb = on_upstream_reply;
    if (loop_io_set(&r->w->loop, &r->uio->io, LOOP_READ) < 0)
        attempt_failed(r, "cannot watch the upstream socket", UPSTREAM_WHY_ERROR);
}
