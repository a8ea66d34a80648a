/* mpclient: the clients on a worker's middle-proxy connections (midproxy_int.h). */
#include "proxy/engine/midproxy_int.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/alloc.h"
#include "proxy/wire/crypto.h"
#include "proxy/wire/mtframe.h"
#include "proxy/wire/obfs2.h"

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

static void bridge_free(struct mpx_bridge *b, bool tell_mp);
static void on_bridge_io(struct loop *l, struct loop_io *io, unsigned ev);
static int bridge_push(struct mpx_bridge *b, uint8_t *p, size_t n);

static struct mpx_bridge *bridge_of(struct midproxy_worker *mw, uint64_t id)
{
    size_t slot = (size_t)(uint32_t)id;
    if (slot >= mw->nslots || !mw->slots[slot] || mw->slots[slot]->id != id)
        return NULL;
    return mw->slots[slot];
}

void mpx_clients_resume(struct mpx_conn *mc)
{
    struct midproxy_worker *mw = mc->mw;
    mc->paused = false;
    for (size_t i = 0; i < mw->nslots; i++)
        if (mw->slots[i] && mw->slots[i]->mc == mc)
            loop_io_set(mw->loop, &mw->slots[i]->io,
                        LOOP_READ | (mpx_bq_pending(&mw->slots[i]->out) ? LOOP_WRITE : 0));
}

void mpx_clients_drop(struct mpx_conn *mc)
{
    struct midproxy_worker *mw = mc->mw;
    for (size_t i = 0; i < mw->nslots && mc->nclients; i++)
        if (mw->slots[i] && mw->slots[i]->mc == mc)
            bridge_free(mw->slots[i], false);
    mc->paused = false;
}

void mpx_clients_cleanup(struct midproxy_worker *mw)
{
    for (size_t i = 0; i < mw->nslots; i++)
        if (mw->slots[i])
            bridge_free(mw->slots[i], false);
    tg__free(mw->slots);
    mw->slots = NULL;
    mw->nslots = 0;
}

int mpx_client_msg(struct mpx_conn *mc, const struct mprpc_msg *m, uint8_t *p, size_t n)
{
    (void)n;
    struct midproxy_worker *mw = mc->mw;
    struct mpx_bridge *b = bridge_of(mw, m->conn_id);
    if (b && b->mc != mc)
        b = NULL;
    if (!b) { /* a client we no longer have: tell the middle proxy, as MTProxy does */
        if (m->kind == MPRPC_K_CLOSE_EXT)
            return 0;
        uint8_t cc[MPRPC_SHORT_MAX];
        return mpx_send_short(mc, cc, mprpc_close_conn(cc, m->conn_id));
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
        if (mpx_bq_pending(&b->out) + total > mw->cfg.client_buf_max) {
            mw->st.slow_closed++;
            COUNT(mw, mp_slow_closed, 1);
            bridge_free(b, true);
            return 0;
        }
        if (mpx_bq_reserve(&b->out, total) != 0) {
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
        if (mpx_bq_reserve(&b->out, 4) != 0)
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
    default:
        return 0;
    }
}


static void bridge_interest(struct mpx_bridge *b)
{
    unsigned mask = b->mc && b->mc->paused ? 0 : LOOP_READ;
    if (mpx_bq_pending(&b->out))
        mask |= LOOP_WRITE;
    loop_io_set(b->mw->loop, &b->io, mask);
}

/* Encrypt p[0..n) (the end of b->out) toward the relay and write what can be written. */
static int bridge_push(struct mpx_bridge *b, uint8_t *p, size_t n)
{
    crypto_ctr_apply(&b->enc, p, n);
    b->out.len += n;
    if (mpx_bq_flush(&b->out, b->io.fd) != 0) {
        bridge_free(b, true);
        return 0;
    }
    if (!mpx_bq_pending(&b->out))
        mpx_bq_free(&b->out);
    bridge_interest(b);
    return 0;
}

static void bridge_free(struct mpx_bridge *b, bool tell_mp)
{
    struct midproxy_worker *mw = b->mw;
    if (tell_mp && b->mc && b->mc->state == MPX_READY) {
        uint8_t cc[MPRPC_SHORT_MAX];
        if (mpx_send_short(b->mc, cc, mprpc_close_conn(cc, b->id)) == 0)
            mpx_conn_interest(b->mc);
    }
    if (b->mc)
        b->mc->nclients--;
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
    mpx_bq_free(&b->in);
    mpx_bq_free(&b->out);
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
        int r = mtframe_next(b->tag, b->in.b + b->in.off, mpx_bq_pending(&b->in), 0, &pk, NULL);
        if (r == MTFRAME_BAD)
            return -1;
        if (r == MTFRAME_MORE) {
            if (!mpx_bq_pending(&b->in))
                mpx_bq_free(&b->in); /* an idle client holds no buffer */
            return 0;
        }
        const uint8_t *pkt = b->in.b + b->in.off + pk.off;
        bool unenc = pk.len >= 8 && memcmp(pkt, "\0\0\0\0\0\0\0\0", 8) == 0;
        b->req.flags = mprpc_req_flags(b->tag, b->req.has_tag, pk.quickack, unenc);
        size_t hl_max = MPRPC_REQ_HEAD_MAX;
        uint8_t *d = mpx_msg_begin(mc, hl_max + pk.len);
        if (!d)
            return -1;
        pkt = b->in.b + b->in.off + pk.off; /* b->in did not move; mc->out may have */
        size_t hl = mprpc_req_head(d, &b->req);
        memcpy(d + hl, pkt, pk.len);
        if (mpx_msg_end(mc, hl + pk.len) != 0)
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
        if (mpx_bq_flush(&b->out, io->fd) != 0) {
            bridge_free(b, true);
            return;
        }
        if (!mpx_bq_pending(&b->out))
            mpx_bq_free(&b->out);
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
            if (mpx_bq_reserve(&b->in, n - at) != 0) {
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
            if (mpx_conn_flush(mc) != 0) {
                mpx_conn_fail(mc, 0);
                return;
            }
            if (mpx_bq_pending(&mc->out) > MIDPROXY_OUT_HIGH)
                mc->paused = true;
        }
    }
    bridge_interest(b);
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
    struct mpx_conn *best = mpx_conn_pick(mw, dc);
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
    else if (mw->cfg.have_public6 && !mprpc_addr_is_v4(&b->req.proxy))
        memcpy(b->req.proxy.ip, mw->cfg.public6, 16);
    b->io.fd = -1;
    if (loop_io_add(mw->loop, &b->io, sv[1], LOOP_READ, on_bridge_io) != 0) {
        close(sv[0]), close(sv[1]);
        tg__free(b);
        return -ENOMEM;
    }
    mw->slots[slot] = b;
    best->nclients++;
    mw->st.clients++;
    mw->st.attached++;
    COUNT(mw, mp_clients, 1);
    return sv[0];
}

