/* midproxy: a worker's middle-proxy pool: its connections (midproxy.h; the clients on
   them are mpclient.c's, midproxy_int.h says who writes what). */
#include "proxy/engine/midproxy_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/log.h"
#include "proxy/services/mpsource.h"
#include "proxy/wire/crypto.h"
#include "proxy/wire/mpframe.h"

static void dc_up(struct midproxy_worker *mw, int16_t dc, int delta)
{
    if (!mw->dcs)
        return;
    uint64_t *g = &mw->dcs[stats_dc_slot(dc)].mp_up;
    __atomic_store_n(g, __atomic_load_n(g, __ATOMIC_RELAXED) + (uint64_t)(int64_t)delta,
                     __ATOMIC_RELAXED);
}

int mpx_bq_reserve(struct bq *q, size_t n)
{
    if (q->off && q->off == q->len)
        q->off = q->len = 0;
    if (q->len + n <= q->cap)
        return 0;
    /* move the unsent bytes down only when that frees at least as much as it moves (else
       a queue the socket drains slowly would be moved for every message added) */
    if (q->off && q->off >= q->len - q->off) {
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

void mpx_bq_free(struct bq *q)
{
    tg__free(q->b);
    memset(q, 0, sizeof *q);
}

/* Write what q holds to fd: 0 (all or EAGAIN), -1 on a socket error. */
int mpx_bq_flush(struct bq *q, int fd)
{
    while (mpx_bq_pending(q)) {
        ssize_t w = send(fd, q->b + q->off, mpx_bq_pending(q), MSG_NOSIGNAL);
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

static void on_conn_io(struct loop *l, struct loop_io *io, unsigned ev);

/* ---- connections ---- */

void mpx_conn_interest(struct mpx_conn *mc)
{
    unsigned mask = LOOP_READ;
    if (mc->state == MPX_CONNECTING || mpx_bq_pending(&mc->out))
        mask |= LOOP_WRITE;
    loop_io_set(mc->mw->loop, &mc->io, mask);
}

int mpx_conn_flush(struct mpx_conn *mc)
{
    if (mpx_bq_flush(&mc->out, mc->io.fd) != 0)
        return -1;
    mc->last_out_ms = mc->mw->loop->now_ms;
    if (mc->paused && mpx_bq_pending(&mc->out) < MIDPROXY_OUT_HIGH / 4)
        mpx_clients_resume(mc);
    mpx_conn_interest(mc);
    return 0;
}

static int sess_send(void *ud, const uint8_t *p, size_t n)
{
    struct mpx_conn *mc = ud;
    if (mpx_bq_reserve(&mc->out, n) != 0)
        return -1;
    memcpy(mc->out.b + mc->out.len, p, n);
    mc->out.len += n;
    return 0;
}

/* Room for a message of n bytes at the end of mc->out: returns where it goes (8 bytes in). */
uint8_t *mpx_msg_begin(struct mpx_conn *mc, size_t n)
{
    if (mpx_bq_reserve(&mc->out, mpsess_wrap_size(n)) != 0)
        return NULL;
    return mc->out.b + mc->out.len + 8;
}

int mpx_msg_end(struct mpx_conn *mc, size_t n)
{
    size_t w = mpsess_wrap(&mc->sess, mc->out.b + mc->out.len, mc->out.cap - mc->out.len, n);
    if (w == 0)
        return -1;
    mc->out.len += w;
    mc->mw->st.frames_out++;
    COUNT(mc->mw, mp_frames_up, 1);
    return 0;
}

int mpx_send_short(struct mpx_conn *mc, const uint8_t *m, size_t n)
{
    uint8_t *p = mpx_msg_begin(mc, n);
    if (!p)
        return -1;
    memcpy(p, m, n);
    return mpx_msg_end(mc, n);
}

static int sess_msg(void *ud, const struct mprpc_msg *m, const uint8_t *p, size_t n)
{
    struct mpx_conn *mc = ud;
    struct midproxy_worker *mw = mc->mw;
    mw->st.frames_in++;
    COUNT(mw, mp_frames_down, 1);
    if (m->kind == MPRPC_K_PROXY_ANS || m->kind == MPRPC_K_SIMPLE_ACK ||
        m->kind == MPRPC_K_CLOSE_EXT) /* p is the session's own buffer, not const */
        return mpx_client_msg(mc, m, (uint8_t *)(uintptr_t)p, n);
    return 0; /* pong, close_conn, unknown: nothing to do */
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
        mpx_conn_fail(mc, 0);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&ss, len) != 0 && errno != EINPROGRESS) {
        close(fd);
        mpx_conn_fail(mc, 0);
        return;
    }
    mc->state = MPX_CONNECTING;
    mc->last_in_ms = mw->loop->now_ms;
    if (loop_io_add(mw->loop, &mc->io, fd, LOOP_WRITE | LOOP_READ, on_conn_io) != 0) {
        close(fd);
        mpx_conn_fail(mc, 0);
    }
}

/* The key derivation uses our socket's own address: behind NAT, the middle proxy sees
   another and every handshake fails. Said once per pool when the address is private. */
static void warn_private(struct midproxy_worker *mw, const struct mpcrypto_end *local)
{
    if (mw->warned_private || !mpsource_ip_private(local->family, local->ip))
        return;
    mw->warned_private = true;
    char ip[64];
    inet_ntop(local->family, local->ip, ip, sizeof ip);
    tg__log(NULL, TG__LOG_WARN,
            "middle-proxy: this server's address toward the middle proxies is %s, a private "
            "one: behind NAT every handshake fails; set public-ipv4 / public-ipv6 or "
            "[middle-proxy] public-ip-url (docs/tgproxy.md)",
            ip);
}

/* Connected: begin the session. */
static void conn_connected(struct mpx_conn *mc)
{
    struct midproxy_worker *mw = mc->mw;
    struct sockaddr_storage me, peer;
    socklen_t ml = sizeof me, pl = sizeof peer;
    if (getsockname(mc->io.fd, (struct sockaddr *)&me, &ml) != 0 ||
        getpeername(mc->io.fd, (struct sockaddr *)&peer, &pl) != 0) {
        mpx_conn_fail(mc, 0);
        return;
    }
    struct mpsess_cfg sc = {
        .secret = mw->cfg.secret, .secret_len = mw->cfg.secret_len, .now = (uint32_t)time(NULL)};
    mpcrypto_end_from(&sc.local, &me);
    mpcrypto_end_from(&sc.remote, &peer);
    if (sc.local.family == AF_INET && mw->cfg.have_public4)
        memcpy(sc.local.ip, mw->cfg.public4, 4);
    else if (sc.local.family == AF_INET6 && mw->cfg.have_public6)
        memcpy(sc.local.ip, mw->cfg.public6, 16);
    else
        warn_private(mw, &sc.local);
    crypto_random(sc.nonce, sizeof sc.nonce);
    mprpc_pid(sc.pid, sc.local.ip, sc.local.port, (uint16_t)getpid(), mw->start_time);
    uint8_t first[64];
    size_t n;
    if (mpsess_start(&mc->sess, &sc, first, sizeof first, &n) != 0 ||
        sess_send(mc, first, n) != 0) {
        mpx_conn_fail(mc, MPSESS_E_CRYPTO);
        return;
    }
    mc->state = MPX_HANDSHAKE;
    if (mpx_conn_flush(mc) != 0)
        mpx_conn_fail(mc, 0);
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
            mpx_conn_fail(mc, 0);
            return;
        }
        conn_connected(mc);
        return;
    }
    if (ev & LOOP_READ || ev & LOOP_ERROR) {
        enum { READ_MAX = 65536 };
        for (int rounds = 0; rounds < 16; rounds++) {
            /* straight into the session's buffer (no copy) */
            uint8_t *buf = mpsess_space(&mc->sess, READ_MAX);
            if (!buf) {
                mpx_conn_fail(mc, MPSESS_E_NOMEM);
                return;
            }
            ssize_t r = recv(io->fd, buf, READ_MAX, 0);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                break;
            if (r <= 0) {
                mpx_conn_fail(mc, 0);
                return;
            }
            mc->last_in_ms = l->now_ms;
            struct mpsess_sink sink = {.ud = mc, .send = sess_send, .msg = sess_msg};
            bool was_ready = mc->sess.state == MPSESS_READY;
            if (mpsess_commit(&mc->sess, (size_t)r, &sink) != 0) {
                mpx_conn_fail(mc, mc->sess.why ? (int)mc->sess.why : MPSESS_E_MESSAGE);
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
            if ((size_t)r < READ_MAX)
                break;
        }
    }
    if (mpx_conn_flush(mc) != 0)
        mpx_conn_fail(mc, 0);
}

/* Close mc and end every client on it; retry later. why: an mpsess_why, 0 = the socket. */
/* Close mc's socket and session; it is idle after. */
static void conn_close(struct mpx_conn *mc)
{
    if (mc->io.fd >= 0) {
        int fd = mc->io.fd;
        loop_io_del(mc->mw->loop, &mc->io);
        close(fd);
    }
    mc->io.fd = -1;
    mpsess_cleanup(&mc->sess);
    mpx_bq_free(&mc->out);
    mc->state = MPX_IDLE;
}

void mpx_conn_fail(struct mpx_conn *mc, int why)
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
    mpx_clients_drop(mc);
    conn_close(mc);
    mc->backoff_ms = mc->backoff_ms ? (mc->backoff_ms >= 32000 ? 32000 : mc->backoff_ms * 2) : 1000;
    mc->retry_at_ms = mw->loop->now_ms + mc->backoff_ms;
}

/* ---- retired pools (midproxy.h: pool generations) ---- */

/* A retired pool's connection: closed once no client is left on it (not counted as a
   failure), and never reconnected. */
static void retired_tick(struct mpx_conn *mc)
{
    struct midproxy_worker *mw = mc->mw;
    mc->retry_at_ms = UINT64_MAX;
    if (mc->state == MPX_IDLE || mc->nclients)
        return;
    if (mc->state == MPX_READY) {
        mw->st.up--;
        dc_up(mw, mc->dc, -1);
    }
    conn_close(mc);
}

void midproxy_retire(struct midproxy_worker *mw)
{
    mw->retired = true;
    for (size_t i = 0; i < mw->nconns; i++)
        retired_tick(&mw->conns[i]);
}

bool midproxy_drained(const struct midproxy_worker *mw)
{
    for (size_t i = 0; i < mw->nconns; i++)
        if (mw->conns[i].state != MPX_IDLE)
            return false;
    return mw->retired;
}

static void on_tick(struct loop *l, struct loop_timer *t)
{
    struct midproxy_worker *mw =
        (struct midproxy_worker *)(void *)((char *)t - offsetof(struct midproxy_worker, tick));
    for (size_t i = 0; i < mw->nconns; i++) {
        struct mpx_conn *mc = &mw->conns[i];
        if (mw->retired) {
            retired_tick(mc);
            if (mc->state == MPX_IDLE)
                continue;
        }
        if (mc->state == MPX_IDLE && l->now_ms >= mc->retry_at_ms) {
            conn_start(mc);
            continue;
        }
        if (mc->state == MPX_IDLE)
            continue;
        if (l->now_ms - mc->last_in_ms >= mw->cfg.dead_ms) {
            mpx_conn_fail(mc, 0);
            continue;
        }
        if (mc->state == MPX_READY && l->now_ms - mc->last_in_ms >= mw->cfg.ping_ms &&
            l->now_ms - mc->last_out_ms >= mw->cfg.ping_ms / 2) {
            uint8_t m[MPRPC_SHORT_MAX];
            uint64_t id;
            crypto_random(&id, sizeof id);
            if (mpx_send_short(mc, m, mprpc_ping(m, id)) != 0 || mpx_conn_flush(mc) != 0)
                mpx_conn_fail(mc, 0);
        }
    }
    loop_timer_start(l, &mw->tq, &mw->tick, on_tick);
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
    if (!mw->cfg.buf_total)
        mw->cfg.buf_total = 64u << 20;
    if (!mw->cfg.ping_ms)
        mw->cfg.ping_ms = 5000;
    if (!mw->cfg.dead_ms)
        mw->cfg.dead_ms = 60000;
    mw->start_time = (uint32_t)time(NULL);
    crypto_random(&mw->id_salt, sizeof mw->id_salt);
    /* per_dc connections for each DC, round-robin over that DC's middle proxies */
    mw->conns = tg__malloc(sizeof *mw->conns * (mw->cfg.conf.n * mw->cfg.per_dc + 1));
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
    mpx_clients_cleanup(mw);
    for (size_t i = 0; i < mw->nconns; i++) {
        struct mpx_conn *mc = &mw->conns[i];
        if (mc->io.fd >= 0) {
            loop_io_del(mw->loop, &mc->io);
            close(mc->io.fd);
        }
        mpsess_cleanup(&mc->sess);
        mpx_bq_free(&mc->out);
    }
    loop_timer_stop(&mw->tick);
    loop_tq_del(mw->loop, &mw->tq);
    tg__free(mw->conns);
    memset(mw->cfg.secret, 0, sizeof mw->cfg.secret);
    mw->loop = NULL;
}

size_t midproxy_conn_clients(const struct midproxy_worker *mw, size_t i)
{
    return i < mw->nconns ? mw->conns[i].nclients : 0;
}

bool midproxy_ready(const struct midproxy_worker *mw, int16_t dc)
{
    for (size_t i = 0; i < mw->nconns; i++)
        if (mw->conns[i].dc == dc && mw->conns[i].state == MPX_READY)
            return true;
    return false;
}

struct mpx_conn *mpx_conn_pick(struct midproxy_worker *mw, int16_t dc)
{
    struct mpx_conn *best = NULL;
    for (size_t i = 0; i < mw->nconns; i++) {
        struct mpx_conn *mc = &mw->conns[i];
        if (mc->dc == dc && mc->state == MPX_READY && (!best || mc->nclients < best->nclients))
            best = mc;
    }
    return best;
}
