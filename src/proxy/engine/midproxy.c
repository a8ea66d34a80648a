/* midproxy: a worker's middle-proxy pool and its client bridges (midproxy.h). */
#include "proxy/engine/midproxy.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "proxy/engine/stats.h"
#include "proxy/wire/crypto.h"
#include "proxy/wire/mpframe.h"
#include "proxy/wire/mpsess.h"
#include "proxy/wire/mtframe.h"
#include "proxy/wire/obfs2.h"

enum mpx_state { MPX_IDLE, MPX_CONNECTING, MPX_HANDSHAKE, MPX_READY };

/* The worker's counters, when the pool runs inside one (tests run it bare). */
#define COUNT(mw, field, n)                                                                        \
    do {                                                                                           \
        if ((mw)->stats)                                                                           \
            stats_add((mw)->stats, field, n);                                                      \
    } while (0)
#define UNCOUNT(mw, field, n)                                                                      \
    do {                                                                                           \
        if ((mw)->stats)                                                                           \
            stats_sub((mw)->stats, field, n);                                                      \
    } while (0)

static void dc_up(struct midproxy_worker *mw, int16_t dc, int delta)
{
    if (!mw->dcs)
        return;
    uint64_t *g = &mw->dcs[stats_dc_slot(dc)].mp_up;
    __atomic_store_n(g, __atomic_load_n(g, __ATOMIC_RELAXED) + (uint64_t)(int64_t)delta,
                     __ATOMIC_RELAXED);
}

/* A growable byte queue: unsent bytes are b[off..len). */
struct bq {
    uint8_t *b;
    size_t off, len, cap;
};

struct mpx_conn {
    struct midproxy_worker *mw;
    int16_t dc;
    size_t target; /* index into cfg.conf.proxies */
    enum mpx_state state;
    struct loop_io io;
    struct mpsess sess;
    struct bq out;
    uint64_t retry_at_ms, last_in_ms, last_out_ms;
    uint32_t backoff_ms;
    size_t nbridges;
    bool paused; /* its bridges are not read (out over MIDPROXY_OUT_HIGH) */
};

struct mpx_bridge {
    struct midproxy_worker *mw;
    struct mpx_conn *mc;
    uint64_t id;
    size_t slot;
    struct loop_io io;
    bool have_header;
    uint32_t tag;
    struct crypto_ctr dec, enc; /* the relay's DC leg, seen from the DC's side */
    uint8_t head[64];
    size_t head_len;
    struct bq in;  /* decrypted client bytes short of a packet */
    struct bq out; /* encrypted bytes toward the relay not yet written */
    struct mprpc_req req;
};

static int bq_reserve(struct bq *q, size_t n)
{
    if (q->off && q->off == q->len)
        q->off = q->len = 0;
    if (q->len + n <= q->cap)
        return 0;
    if (q->off) {
        memmove(q->b, q->b + q->off, q->len - q->off);
        q->len -= q->off;
        q->off = 0;
        if (q->len + n <= q->cap)
            return 0;
    }
    size_t cap = q->cap ? q->cap : 4096;
    while (cap < q->len + n)
        cap *= 2;
    uint8_t *b = tg__realloc(q->b, cap);
    if (!b)
        return -ENOMEM;
    q->b = b, q->cap = cap;
    return 0;
}

static void bq_free(struct bq *q)
{
    tg__free(q->b);
    memset(q, 0, sizeof *q);
}

static size_t bq_pending(const struct bq *q)
{
    return q->len - q->off;
}

/* Write what q holds to fd: 0 (all or EAGAIN), -1 on a socket error. */
static int bq_flush(struct bq *q, int fd)
{
    while (bq_pending(q)) {
        ssize_t w = send(fd, q->b + q->off, bq_pending(q), MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (w <= 0)
            return -1;
        q->off += (size_t)w;
    }
    q->off = q->len = 0;
    return 0;
}

static void conn_fail(struct mpx_conn *mc, int why);
static void bridge_free(struct mpx_bridge *b, bool tell_mp);
static void on_conn_io(struct loop *l, struct loop_io *io, unsigned ev);
static void on_bridge_io(struct loop *l, struct loop_io *io, unsigned ev);

/* ---- connections ---- */

static void conn_interest(struct mpx_conn *mc)
{
    unsigned mask = LOOP_READ;
    if (mc->state == MPX_CONNECTING || bq_pending(&mc->out))
        mask |= LOOP_WRITE;
    loop_io_set(mc->mw->loop, &mc->io, mask);
}

static void bridges_resume(struct mpx_conn *mc)
{
    struct midproxy_worker *mw = mc->mw;
    mc->paused = false;
    for (size_t i = 0; i < mw->nslots; i++)
        if (mw->slots[i] && mw->slots[i]->mc == mc)
            loop_io_set(mw->loop, &mw->slots[i]->io,
                        LOOP_READ | (bq_pending(&mw->slots[i]->out) ? LOOP_WRITE : 0));
}

static int conn_flush(struct mpx_conn *mc)
{
    if (bq_flush(&mc->out, mc->io.fd) != 0)
        return -1;
    mc->last_out_ms = mc->mw->loop->now_ms;
    if (mc->paused && bq_pending(&mc->out) < MIDPROXY_OUT_HIGH / 4)
        bridges_resume(mc);
    conn_interest(mc);
    return 0;
}

static int sess_send(void *ud, const uint8_t *p, size_t n)
{
    struct mpx_conn *mc = ud;
    if (bq_reserve(&mc->out, n) != 0)
        return -1;
    memcpy(mc->out.b + mc->out.len, p, n);
    mc->out.len += n;
    return 0;
}

/* Room for a message of n bytes at the end of mc->out: returns where it goes (8 bytes in). */
static uint8_t *conn_msg_begin(struct mpx_conn *mc, size_t n)
{
    if (bq_reserve(&mc->out, mpsess_wrap_size(n)) != 0)
        return NULL;
    return mc->out.b + mc->out.len + 8;
}

static int conn_msg_end(struct mpx_conn *mc, size_t n)
{
    size_t w = mpsess_wrap(&mc->sess, mc->out.b + mc->out.len, mc->out.cap - mc->out.len, n);
    if (w == 0)
        return -1;
    mc->out.len += w;
    mc->mw->st.frames_out++;
    COUNT(mc->mw, mp_frames_up, 1);
    return 0;
}

static int conn_send_short(struct mpx_conn *mc, const uint8_t *m, size_t n)
{
    uint8_t *p = conn_msg_begin(mc, n);
    if (!p)
        return -1;
    memcpy(p, m, n);
    return conn_msg_end(mc, n);
}

static struct mpx_bridge *bridge_of(struct midproxy_worker *mw, uint64_t id)
{
    size_t slot = (size_t)(uint32_t)id;
    if (slot >= mw->nslots || !mw->slots[slot] || mw->slots[slot]->id != id)
        return NULL;
    return mw->slots[slot];
}

static int bridge_push(struct mpx_bridge *b, uint8_t *p, size_t n);

static int sess_msg(void *ud, const struct mprpc_msg *m, const uint8_t *p, size_t n)
{
    (void)n;
    struct mpx_conn *mc = ud;
    struct midproxy_worker *mw = mc->mw;
    mw->st.frames_in++;
    COUNT(mw, mp_frames_down, 1);
    struct mpx_bridge *b = NULL;
    if (m->kind == MPRPC_K_PROXY_ANS || m->kind == MPRPC_K_SIMPLE_ACK ||
        m->kind == MPRPC_K_CLOSE_EXT) {
        b = bridge_of(mw, m->conn_id);
        if (b && b->mc != mc)
            b = NULL;
        if (!b) { /* a client we no longer have: tell the middle proxy, as MTProxy does */
            if (m->kind == MPRPC_K_CLOSE_EXT)
                return 0;
            uint8_t cc[MPRPC_SHORT_MAX];
            return conn_send_short(mc, cc, mprpc_close_conn(cc, m->conn_id));
        }
    }
    switch (m->kind) {
    case MPRPC_K_PROXY_ANS: {
        if (m->len == 0 || m->len % 4 != 0)
            return 0;
        size_t pad = b->tag == OBFS2_TAG_PADDED ? crypto_random_range(0, 4) : 0;
        uint8_t head[MTFRAME_HEAD_MAX];
        size_t hl = mtframe_head(b->tag, m->len, pad, head);
        if (hl == 0)
            return 0;
        size_t total = hl + m->len + pad;
        if (bq_pending(&b->out) + total > mw->cfg.client_buf_max) {
            mw->st.slow_closed++;
            COUNT(mw, mp_slow_closed, 1);
            bridge_free(b, true);
            return 0;
        }
        if (bq_reserve(&b->out, total) != 0) {
            bridge_free(b, true);
            return 0;
        }
        uint8_t *d = b->out.b + b->out.len;
        memcpy(d, head, hl);
        memcpy(d + hl, p + m->off, m->len);
        if (pad)
            crypto_random(d + hl + m->len, pad);
        return bridge_push(b, d, total);
    }
    case MPRPC_K_SIMPLE_ACK: {
        if (bq_reserve(&b->out, 4) != 0)
            return 0;
        uint8_t *d = b->out.b + b->out.len;
        mtframe_ack(b->tag, m->confirm, d);
        mw->st.quickacks++;
        COUNT(mw, mp_quickacks, 1);
        return bridge_push(b, d, 4);
    }
    case MPRPC_K_CLOSE_EXT:
        mw->st.closed_by_mp++;
        bridge_free(b, false);
        return 0;
    default: /* pong, close_conn, unknown: nothing to do */
        return 0;
    }
}

static void conn_start(struct mpx_conn *mc)
{
    struct midproxy_worker *mw = mc->mw;
    const struct mpconf_proxy *t = &mw->cfg.conf.proxies[mc->target];
    struct sockaddr_storage ss;
    socklen_t len;
    memset(&ss, 0, sizeof ss);
    if (t->family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)(void *)&ss;
        a->sin6_family = AF_INET6, a->sin6_port = htons(t->port);
        memcpy(&a->sin6_addr, t->ip, 16);
        len = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)(void *)&ss;
        a->sin_family = AF_INET, a->sin_port = htons(t->port);
        memcpy(&a->sin_addr, t->ip, 4);
        len = sizeof *a;
    }
    mw->st.connects++;
    int fd = socket(t->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        conn_fail(mc, 0);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&ss, len) != 0 && errno != EINPROGRESS) {
        close(fd);
        conn_fail(mc, 0);
        return;
    }
    mc->state = MPX_CONNECTING;
    mc->last_in_ms = mw->loop->now_ms;
    if (loop_io_add(mw->loop, &mc->io, fd, LOOP_WRITE | LOOP_READ, on_conn_io) != 0) {
        close(fd);
        conn_fail(mc, 0);
    }
}

static void end_of(const struct sockaddr_storage *ss, struct mpcrypto_end *e)
{
    memset(e, 0, sizeof *e);
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)(const void *)ss;
        e->family = AF_INET6;
        memcpy(e->ip, &a->sin6_addr, 16);
        e->port = ntohs(a->sin6_port);
    } else {
        const struct sockaddr_in *a = (const struct sockaddr_in *)(const void *)ss;
        e->family = AF_INET;
        memcpy(e->ip, &a->sin_addr, 4);
        e->port = ntohs(a->sin_port);
    }
}

/* Connected: begin the session. */
static void conn_connected(struct mpx_conn *mc)
{
    struct midproxy_worker *mw = mc->mw;
    struct sockaddr_storage me, peer;
    socklen_t ml = sizeof me, pl = sizeof peer;
    if (getsockname(mc->io.fd, (struct sockaddr *)&me, &ml) != 0 ||
        getpeername(mc->io.fd, (struct sockaddr *)&peer, &pl) != 0) {
        conn_fail(mc, 0);
        return;
    }
    struct mpsess_cfg sc = {
        .secret = mw->cfg.secret, .secret_len = mw->cfg.secret_len, .now = (uint32_t)time(NULL)};
    end_of(&me, &sc.local);
    end_of(&peer, &sc.remote);
    if (sc.local.family == AF_INET && mw->cfg.have_public4)
        memcpy(sc.local.ip, mw->cfg.public4, 4);
    crypto_random(sc.nonce, sizeof sc.nonce);
    mprpc_pid(sc.pid, sc.local.ip, sc.local.port, (uint16_t)getpid(), mw->start_time);
    uint8_t first[64];
    size_t n;
    if (mpsess_start(&mc->sess, &sc, first, sizeof first, &n) != 0 ||
        sess_send(mc, first, n) != 0) {
        conn_fail(mc, MPSESS_E_CRYPTO);
        return;
    }
    mc->state = MPX_HANDSHAKE;
    if (conn_flush(mc) != 0)
        conn_fail(mc, 0);
}

static void on_conn_io(struct loop *l, struct loop_io *io, unsigned ev)
{
    struct mpx_conn *mc = (struct mpx_conn *)(void *)((char *)io - offsetof(struct mpx_conn, io));
    struct midproxy_worker *mw = mc->mw;
    if (mc->state == MPX_CONNECTING) {
        int err = 0;
        socklen_t el = sizeof err;
        if (!(ev & (LOOP_WRITE | LOOP_ERROR)))
            return;
        if (getsockopt(io->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
            conn_fail(mc, 0);
            return;
        }
        conn_connected(mc);
        return;
    }
    if (ev & LOOP_READ || ev & LOOP_ERROR) {
        uint8_t buf[65536];
        for (int rounds = 0; rounds < 16; rounds++) {
            ssize_t r = recv(io->fd, buf, sizeof buf, 0);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                break;
            if (r <= 0) {
                conn_fail(mc, 0);
                return;
            }
            mc->last_in_ms = l->now_ms;
            struct mpsess_sink sink = {.ud = mc, .send = sess_send, .msg = sess_msg};
            bool was_ready = mc->sess.state == MPSESS_READY;
            if (mpsess_feed(&mc->sess, buf, (size_t)r, &sink) != 0) {
                conn_fail(mc, mc->sess.why ? (int)mc->sess.why : MPSESS_E_MESSAGE);
                return;
            }
            if (!was_ready && mc->sess.state == MPSESS_READY) {
                mc->state = MPX_READY;
                mc->backoff_ms = 0;
                mw->st.ready++;
                mw->st.up++;
                COUNT(mw, mp_ready, 1);
                dc_up(mw, mc->dc, 1);
            }
            if ((size_t)r < sizeof buf)
                break;
        }
    }
    if (conn_flush(mc) != 0)
        conn_fail(mc, 0);
}

/* Close mc and every bridge on it; retry later. why: an mpsess_why, 0 = the socket. */
static void conn_fail(struct mpx_conn *mc, int why)
{
    struct midproxy_worker *mw = mc->mw;
    if (mc->state == MPX_READY) {
        mw->st.up--;
        dc_up(mw, mc->dc, -1);
    } else if (why >= 0 && why < 10) {
        mw->st.hs_fail[why]++;
    }
    if (why == 0)
        COUNT(mw, mp_fail_connect, 1);
    else if (why == MPSESS_E_KEYS)
        COUNT(mw, mp_fail_keys, 1);
    else if (why == MPSESS_E_REFUSED)
        COUNT(mw, mp_fail_refused, 1);
    else
        COUNT(mw, mp_fail_protocol, 1);
    for (size_t i = 0; i < mw->nslots && mc->nbridges; i++)
        if (mw->slots[i] && mw->slots[i]->mc == mc)
            bridge_free(mw->slots[i], false);
    if (mc->io.fd >= 0) {
        int fd = mc->io.fd;
        loop_io_del(mw->loop, &mc->io);
        close(fd);
    }
    mc->io.fd = -1;
    mpsess_cleanup(&mc->sess);
    bq_free(&mc->out);
    mc->state = MPX_IDLE;
    mc->paused = false;
    mc->backoff_ms = mc->backoff_ms ? (mc->backoff_ms >= 32000 ? 32000 : mc->backoff_ms * 2) : 1000;
    mc->retry_at_ms = mw->loop->now_ms + mc->backoff_ms;
}

static void on_tick(struct loop *l, struct loop_timer *t)
{
    struct midproxy_worker *mw =
        (struct midproxy_worker *)(void *)((char *)t - offsetof(struct midproxy_worker, tick));
    for (size_t i = 0; i < mw->nconns; i++) {
        struct mpx_conn *mc = &mw->conns[i];
        if (mc->state == MPX_IDLE && l->now_ms >= mc->retry_at_ms) {
            conn_start(mc);
            continue;
        }
        if (mc->state == MPX_IDLE)
            continue;
        if (l->now_ms - mc->last_in_ms >= mw->cfg.dead_ms) {
            conn_fail(mc, 0);
            continue;
        }
        if (mc->state == MPX_READY && l->now_ms - mc->last_in_ms >= mw->cfg.ping_ms &&
            l->now_ms - mc->last_out_ms >= mw->cfg.ping_ms / 2) {
            uint8_t m[MPRPC_SHORT_MAX];
            uint64_t id;
            crypto_random(&id, sizeof id);
            if (conn_send_short(mc, m, mprpc_ping(m, id)) != 0 || conn_flush(mc) != 0)
                conn_fail(mc, 0);
        }
    }
    loop_timer_start(l, &mw->tq, &mw->tick, on_tick);
}

/* ---- bridges ---- */

static void bridge_interest(struct mpx_bridge *b)
{
    unsigned mask = b->mc && b->mc->paused ? 0 : LOOP_READ;
    if (bq_pending(&b->out))
        mask |= LOOP_WRITE;
    loop_io_set(b->mw->loop, &b->io, mask);
}

/* Encrypt p[0..n) (the end of b->out) toward the relay and write what can be written. */
static int bridge_push(struct mpx_bridge *b, uint8_t *p, size_t n)
{
    crypto_ctr_apply(&b->enc, p, n);
    b->out.len += n;
    if (bq_flush(&b->out, b->io.fd) != 0) {
        bridge_free(b, true);
        return 0;
    }
    if (!bq_pending(&b->out))
        bq_free(&b->out);
    bridge_interest(b);
    return 0;
}

static void bridge_free(struct mpx_bridge *b, bool tell_mp)
{
    struct midproxy_worker *mw = b->mw;
    if (tell_mp && b->mc && b->mc->state == MPX_READY) {
        uint8_t cc[MPRPC_SHORT_MAX];
        if (conn_send_short(b->mc, cc, mprpc_close_conn(cc, b->id)) == 0)
            conn_interest(b->mc);
    }
    if (b->mc)
        b->mc->nbridges--;
    mw->slots[b->slot] = NULL;
    mw->st.clients--;
    UNCOUNT(mw, mp_clients, 1);
    if (b->io.fd >= 0) {
        int fd = b->io.fd;
        loop_io_del(mw->loop, &b->io);
        close(fd);
    }
    crypto_ctr_cleanup(&b->dec);
    crypto_ctr_cleanup(&b->enc);
    bq_free(&b->in);
    bq_free(&b->out);
    tg__free(b);
}

/* The relay's DC header is complete: the keys both ways, the client's transport tag. */
static int bridge_header(struct mpx_bridge *b)
{
    uint8_t rev[48], plain[64];
    for (int i = 0; i < 48; i++)
        rev[i] = b->head[55 - i];
    if (crypto_ctr_init(&b->dec, b->head + 8, b->head + 40) != 0 ||
        crypto_ctr_apply2(&b->dec, b->head, plain, 64) != 0 ||
        crypto_ctr_init(&b->enc, rev, rev + 32) != 0)
        return -1;
    b->tag = (uint32_t)plain[56] | (uint32_t)plain[57] << 8 | (uint32_t)plain[58] << 16 |
             (uint32_t)plain[59] << 24;
    if (b->tag != OBFS2_TAG_ABRIDGED && b->tag != OBFS2_TAG_INTERMEDIATE &&
        b->tag != OBFS2_TAG_PADDED)
        return -1;
    b->have_header = true;
    return 0;
}

/* Whole packets in b->in go up as RPC_PROXY_REQ. */
static int bridge_packets(struct mpx_bridge *b)
{
    struct mpx_conn *mc = b->mc;
    for (;;) {
        struct mtframe_pkt pk;
        int r = mtframe_next(b->tag, b->in.b + b->in.off, bq_pending(&b->in), 0, &pk, NULL);
        if (r == MTFRAME_BAD)
            return -1;
        if (r == MTFRAME_MORE) {
            if (!bq_pending(&b->in))
                bq_free(&b->in); /* an idle client holds no buffer */
            return 0;
        }
        const uint8_t *pkt = b->in.b + b->in.off + pk.off;
        bool unenc = pk.len >= 8 && memcmp(pkt, "\0\0\0\0\0\0\0\0", 8) == 0;
        b->req.flags = mprpc_req_flags(b->tag, b->req.has_tag, pk.quickack, unenc);
        size_t hl_max = MPRPC_REQ_HEAD_MAX;
        uint8_t *d = conn_msg_begin(mc, hl_max + pk.len);
        if (!d)
            return -1;
        pkt = b->in.b + b->in.off + pk.off; /* b->in did not move; mc->out may have */
        size_t hl = mprpc_req_head(d, &b->req);
        memcpy(d + hl, pkt, pk.len);
        if (conn_msg_end(mc, hl + pk.len) != 0)
            return -1;
        b->in.off += pk.consumed;
    }
}

static void on_bridge_io(struct loop *l, struct loop_io *io, unsigned ev)
{
    (void)l;
    struct mpx_bridge *b =
        (struct mpx_bridge *)(void *)((char *)io - offsetof(struct mpx_bridge, io));
    if (ev & LOOP_WRITE) {
        if (bq_flush(&b->out, io->fd) != 0) {
            bridge_free(b, true);
            return;
        }
        if (!bq_pending(&b->out))
            bq_free(&b->out);
    }
    if (ev & (LOOP_READ | LOOP_ERROR)) {
        uint8_t buf[16384];
        ssize_t r = recv(io->fd, buf, sizeof buf, 0);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            bridge_interest(b);
            return;
        }
        if (r <= 0) { /* the client went away: cancel it on the middle proxy */
            bridge_free(b, true);
            return;
        }
        size_t n = (size_t)r, at = 0;
        if (!b->have_header) {
            size_t k = 64 - b->head_len < n ? 64 - b->head_len : n;
            memcpy(b->head + b->head_len, buf, k);
            b->head_len += k;
            at = k;
            if (b->head_len == 64 && bridge_header(b) != 0) {
                bridge_free(b, true);
                return;
            }
        }
        if (at < n) {
            if (bq_reserve(&b->in, n - at) != 0) {
                bridge_free(b, true);
                return;
            }
            uint8_t *d = b->in.b + b->in.len;
            crypto_ctr_apply2(&b->dec, buf + at, d, n - at);
            b->in.len += n - at;
            if (bridge_packets(b) != 0) {
                bridge_free(b, true);
                return;
            }
            struct mpx_conn *mc = b->mc;
            if (conn_flush(mc) != 0) {
                conn_fail(mc, 0);
                return;
            }
            if (bq_pending(&mc->out) > MIDPROXY_OUT_HIGH)
                mc->paused = true;
        }
    }
    bridge_interest(b);
}

/* ---- the pool ---- */

int midproxy_init(struct midproxy_worker *mw, struct loop *loop, const struct midproxy_cfg *cfg)
{
    memset(mw, 0, sizeof *mw);
    mw->loop = loop;
    mw->cfg = *cfg;
    if (!mw->cfg.per_dc)
        mw->cfg.per_dc = 2;
    if (!mw->cfg.client_buf_max)
        mw->cfg.client_buf_max = 8u << 20;
    if (!mw->cfg.ping_ms)
        mw->cfg.ping_ms = 5000;
    if (!mw->cfg.dead_ms)
        mw->cfg.dead_ms = 60000;
    mw->start_time = (uint32_t)time(NULL);
    crypto_random(&mw->id_salt, sizeof mw->id_salt);
    /* per_dc connections for each DC, round-robin over that DC's middle proxies */
    mw->conns = tg__malloc(sizeof *mw->conns * mw->cfg.conf.n * mw->cfg.per_dc);
    if (!mw->conns)
        return -ENOMEM;
    for (size_t i = 0; i < mw->cfg.conf.n; i++) {
        int16_t dc = mw->cfg.conf.proxies[i].dc;
        bool seen = false;
        for (size_t j = 0; j < i; j++)
            seen |= mw->cfg.conf.proxies[j].dc == dc;
        if (seen)
            continue;
        size_t idx[MPCONF_MAX];
        size_t k = mpconf_for(&mw->cfg.conf, dc, idx, MPCONF_MAX);
        for (unsigned c = 0; c < mw->cfg.per_dc; c++) {
            struct mpx_conn *mc = &mw->conns[mw->nconns++];
            memset(mc, 0, sizeof *mc);
            mc->mw = mw;
            mc->dc = dc;
            mc->target = idx[c % k];
            mc->io.fd = -1;
        }
    }
    int rc = loop_tq_add(loop, &mw->tq, MIDPROXY_TICK_MS);
    if (rc != 0) {
        tg__free(mw->conns);
        mw->conns = NULL;
        return rc;
    }
    for (size_t i = 0; i < mw->nconns; i++)
        conn_start(&mw->conns[i]);
    loop_timer_start(loop, &mw->tq, &mw->tick, on_tick);
    return 0;
}

void midproxy_cleanup(struct midproxy_worker *mw)
{
    if (!mw || !mw->loop)
        return;
    for (size_t i = 0; i < mw->nslots; i++)
        if (mw->slots[i])
            bridge_free(mw->slots[i], false);
    for (size_t i = 0; i < mw->nconns; i++) {
        struct mpx_conn *mc = &mw->conns[i];
        if (mc->io.fd >= 0) {
            loop_io_del(mw->loop, &mc->io);
            close(mc->io.fd);
        }
        mpsess_cleanup(&mc->sess);
        bq_free(&mc->out);
    }
    loop_timer_stop(&mw->tick);
    loop_tq_del(mw->loop, &mw->tq);
    tg__free(mw->conns);
    tg__free(mw->slots);
    memset(mw->cfg.secret, 0, sizeof mw->cfg.secret);
    mw->loop = NULL;
}

size_t midproxy_conn_clients(const struct midproxy_worker *mw, size_t i)
{
    return i < mw->nconns ? mw->conns[i].nbridges : 0;
}

bool midproxy_ready(const struct midproxy_worker *mw, int16_t dc)
{
    for (size_t i = 0; i < mw->nconns; i++)
        if (mw->conns[i].dc == dc && mw->conns[i].state == MPX_READY)
            return true;
    return false;
}

static void addr_from(struct mprpc_addr *a, const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)(const void *)sa;
        mprpc_addr_set(a, AF_INET6, &s6->sin6_addr, ntohs(s6->sin6_port));
    } else {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)(const void *)sa;
        mprpc_addr_set(a, AF_INET, &s4->sin_addr, ntohs(s4->sin_port));
    }
}

int midproxy_attach(struct midproxy_worker *mw, int16_t dc, const uint8_t *ad_tag,
                    const struct sockaddr *client, const struct sockaddr *proxy)
{
    struct mpx_conn *best = NULL;
    for (size_t i = 0; i < mw->nconns; i++) {
        struct mpx_conn *mc = &mw->conns[i];
        if (mc->dc == dc && mc->state == MPX_READY && (!best || mc->nbridges < best->nbridges))
            best = mc;
    }
    if (!best)
        return -EAGAIN;
    size_t slot = 0;
    while (slot < mw->nslots && mw->slots[slot])
        slot++;
    if (slot == mw->nslots) {
        size_t n = mw->nslots ? mw->nslots * 2 : 64;
        struct mpx_bridge **s = tg__realloc(mw->slots, n * sizeof *s);
        if (!s)
            return -ENOMEM;
        memset(s + mw->nslots, 0, (n - mw->nslots) * sizeof *s);
        mw->slots = s, mw->nslots = n;
    }
    struct mpx_bridge *b = tg__malloc(sizeof *b);
    if (!b)
        return -ENOMEM;
    memset(b, 0, sizeof *b);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
        int e = -errno;
        tg__free(b);
        return e;
    }
    b->mw = mw;
    b->mc = best;
    b->slot = slot;
    uint32_t rnd;
    crypto_random(&rnd, sizeof rnd);
    b->id = (uint64_t)(rnd ^ mw->id_salt) << 32 | (uint32_t)slot;
    b->req.conn_id = b->id;
    b->req.has_tag = ad_tag != NULL;
    if (ad_tag)
        memcpy(b->req.ad_tag, ad_tag, MPRPC_AD_TAG_LEN);
    addr_from(&b->req.client, client);
    addr_from(&b->req.proxy, proxy);
    if (mw->cfg.have_public4 && mprpc_addr_is_v4(&b->req.proxy))
        memcpy(b->req.proxy.ip + 12, mw->cfg.public4, 4);
    b->io.fd = -1;
    if (loop_io_add(mw->loop, &b->io, sv[1], LOOP_READ, on_bridge_io) != 0) {
        close(sv[0]), close(sv[1]);
        tg__free(b);
        return -ENOMEM;
    }
    mw->slots[slot] = b;
    best->nbridges++;
    mw->st.clients++;
    mw->st.attached++;
    COUNT(mw, mp_clients, 1);
    return sv[0];
}
