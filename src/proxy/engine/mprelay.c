/*
 * mprelay: the middle-proxy data path of a client connection. See mprelay.h.
 *
 * Invariants: r->in holds plaintext short of one packet (in_len > 0) or nothing (freed);
 * r->out holds client-ready bytes (encrypted, in records for FakeTLS) not yet written, or
 * nothing (freed); while out holds bytes every new answer is queued behind them; the pool
 * knows out's length (midproxy_client.held) after every change.
 */
#include "proxy/engine/mprelay.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "core/alloc.h"
#include "proxy/engine/midproxy.h"
#include "proxy/engine/relay.h"
#include "proxy/wire/crypto.h"
#include "proxy/wire/faketls.h"
#include "proxy/wire/mprpc.h"
#include "proxy/wire/mtframe.h"

#define READ_ROUNDS 4     /* reads per event, for fairness between connections */
#define IN_MIN      16384 /* room a read into a partial packet's buffer gets at least */
#define IOV_BATCH   64    /* iovecs per sendmsg */

struct mprelay {
    struct midproxy_client cl;  /* first: the pool's view */
    struct midproxy_worker *mw; /* the pool it was attached to (maybe retired since) */
    struct conn *c;
    uint8_t *in; /* plaintext short of a packet */
    size_t in_len, in_cap;
    uint8_t *out; /* bytes for the client not yet written: out[off..len) */
    size_t off, len, cap;
    uint8_t *first; /* from start to go: the handshake buffer (header, what came with it) */
    size_t first_len;
};

static struct mprelay *of(struct midproxy_client *cl)
{
    return (struct mprelay *)(void *)cl;
}

static size_t pending(const struct mprelay *r)
{
    return r->len - r->off;
}

static int grow(uint8_t **b, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 4096;
    while (n < need)
        n *= 2;
    uint8_t *p = tg__realloc(*b, n);
    if (!p)
        return -1;
    *b = p, *cap = n;
    return 0;
}

/* The client's interest: READ unless its connection is paused, WRITE while bytes wait.
   (epoll_ctl on a registered socket does not fail but for ENOMEM: the next event retries.) */
static void arm(struct mprelay *r)
{
    unsigned mask = midproxy_client_paused(&r->cl) ? 0u : LOOP_READ;
    if (pending(r))
        mask |= LOOP_WRITE;
    (void)loop_io_set(&conn_w(r->c)->loop, &r->c->cli, mask);
}

/* ---- down: answers toward the client ---- */

/* Queue iov[0..k) after its first `skip` bytes (what the socket did not take). */
static int queue(struct mprelay *r, const struct iovec *iov, int k, size_t skip)
{
    size_t n = 0;
    for (int i = 0; i < k; i++)
        n += iov[i].iov_len;
    if (r->off && r->off == r->len)
        r->off = r->len = 0;
    if (r->off > r->cap / 2) { /* compact before growing */
        memmove(r->out, r->out + r->off, r->len - r->off);
        r->len -= r->off;
        r->off = 0;
    }
    if (grow(&r->out, &r->cap, r->len + n - skip) != 0)
        return -1;
    for (int i = 0; i < k; i++) {
        size_t l = iov[i].iov_len, s = skip < l ? skip : l;
        skip -= s;
        memcpy(r->out + r->len, (const uint8_t *)iov[i].iov_base + s, l - s);
        r->len += l - s;
    }
    return 0;
}

/* Write iov[0..k) to the client, or queue it behind what waits. 0, or -1: the socket
   failed (or no memory). */
static int put(struct mprelay *r, struct iovec *iov, int k)
{
    if (pending(r))
        return queue(r, iov, k, 0);
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)k};
    ssize_t s;
    do
        s = sendmsg(r->c->cfd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (s < 0 && errno == EINTR);
    if (s < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
        return -1;
    size_t sent = s > 0 ? (size_t)s : 0, all = 0;
    for (int i = 0; i < k; i++)
        all += iov[i].iov_len;
    return sent == all ? 0 : queue(r, iov, k, sent);
}

/*
 * The client-ready bytes of pieces p[0..np) (already encrypted, in stream order): for
 * FakeTLS split into records, each after its 5-byte header. Returns the bytes now waiting
 * for the client, or -1.
 */
static long emit(struct mprelay *r, const struct iovec *p, int np)
{
    struct conn *c = r->c;
    bool waiting = pending(r) > 0;
    struct iovec iov[IOV_BATCH];
    uint8_t hdr[IOV_BATCH / 2][FAKETLS_HDR_LEN];
    int k = 0, nh = 0, pi = 0;
    size_t po = 0, left = 0;
    for (int i = 0; i < np; i++)
        left += p[i].iov_len;
    conn_count_bytes(c, DIR_DOWN, left);
    while (left) {
        size_t rec = left;
        if (c->tls) {
            size_t lim = relay_record_next(c);
            rec = left < lim ? left : lim;
            faketls_record_header(hdr[nh], rec);
            iov[k++] = (struct iovec){.iov_base = hdr[nh++], .iov_len = FAKETLS_HDR_LEN};
        }
        left -= rec;
        while (rec) {
            size_t take = p[pi].iov_len - po < rec ? p[pi].iov_len - po : rec;
            iov[k++] = (struct iovec){.iov_base = (uint8_t *)p[pi].iov_base + po, .iov_len = take};
            po += take, rec -= take;
            if (po == p[pi].iov_len)
                pi++, po = 0;
        }
        /* a record takes at most 4 iovecs (header, transport header, packet, padding) */
        if (!left || k > IOV_BATCH - 5 || nh == IOV_BATCH / 2) {
            if (put(r, iov, k) != 0)
                return -1;
            k = nh = 0;
        }
    }
    conn_touch(c);
    if (!waiting && pending(r))
        arm(r); /* the socket is full: WRITE brings us back to drain */
    return (long)pending(r);
}

static long on_answer(struct midproxy_client *cl, uint8_t *pkt, size_t n)
{
    struct mprelay *r = of(cl);
    struct conn *c = r->c;
    uint8_t head[MTFRAME_HEAD_MAX], pad[3];
    size_t np = cl->tag == OBFS2_TAG_PADDED ? crypto_random_range(0, 4) : 0;
    size_t hl = mtframe_head(cl->tag, n, np, head);
    if (hl == 0)
        return (long)pending(r); /* a packet the client's framing cannot carry: dropped */
    if (np)
        crypto_random(pad, np);
    if (crypto_ctr_apply(&c->rx->p2c, head, hl) < 0 || crypto_ctr_apply(&c->rx->p2c, pkt, n) < 0 ||
        (np && crypto_ctr_apply(&c->rx->p2c, pad, np) < 0))
        return -1;
    struct iovec p[3] = {{head, hl}, {pkt, n}, {pad, np}};
    return emit(r, p, np ? 3 : 2);
}

static long on_ack(struct midproxy_client *cl, uint32_t confirm)
{
    struct mprelay *r = of(cl);
    uint8_t tok[4];
    mtframe_ack(cl->tag, confirm, tok);
    if (crypto_ctr_apply(&r->c->rx->p2c, tok, 4) < 0)
        return -1;
    struct iovec p[1] = {{tok, 4}};
    return emit(r, p, 1);
}

static void on_closed(struct midproxy_client *cl, enum midproxy_end why)
{
    struct conn *c = of(cl)->c;
    conn_relay_event(c, why == MIDPROXY_END_CLOSED ? RELAY_EV_DONE : RELAY_EV_RESET);
}

static void on_resume(struct midproxy_client *cl)
{
    arm(of(cl));
}

static const struct midproxy_client_ops ops = {
    .answer = on_answer, .ack = on_ack, .closed = on_closed, .resume = on_resume};

/* Write what waits for the client. 0, or -1: the socket failed. */
static int drain(struct mprelay *r)
{
    while (pending(r)) {
        ssize_t w = send(r->c->cfd, r->out + r->off, pending(r), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (w <= 0)
            return -1;
        r->off += (size_t)w;
        conn_touch(r->c);
    }
    if (!pending(r)) { /* an idle client holds no buffer */
        tg__free(r->out);
        r->out = NULL;
        r->off = r->len = r->cap = 0;
    }
    midproxy_client_drained(r->mw, &r->cl, pending(r));
    return 0;
}

/* ---- up: the client's packets toward the middle proxy ---- */

/* Send the whole packets of b[0..n) (plaintext), keep the rest in r->in. 0, or -1: a bad
   frame (*bad) or no memory. */
static int packets(struct mprelay *r, uint8_t *b, size_t n, bool *bad)
{
    struct midproxy_worker *mw = r->mw;
    size_t at = 0;
    int rc = 0;
    for (;;) {
        struct mtframe_pkt pk;
        int v = mtframe_next(r->cl.tag, b + at, n - at, 0, &pk, NULL);
        if (v == MTFRAME_BAD) {
            *bad = true;
            rc = -1;
            break;
        }
        if (v == MTFRAME_MORE)
            break;
        if (midproxy_client_send(mw, &r->cl, b + at + pk.off, pk.len, pk.quickack) != 0) {
            rc = -1;
            break;
        }
        at += pk.consumed;
    }
    if (at)
        midproxy_client_flush(mw, &r->cl);
    if (rc != 0)
        return rc;
    size_t rest = n - at;
    if (b == r->in) {
        memmove(r->in, r->in + at, rest);
    } else if (rest) {
        if (grow(&r->in, &r->in_cap, rest) != 0)
            return -1;
        memcpy(r->in, b + at, rest);
    }
    r->in_len = rest;
    if (!rest && r->in) { /* an idle client holds no buffer */
        tg__free(r->in);
        r->in = NULL;
        r->in_cap = 0;
    }
    return 0;
}

/* Read the client once. 1: bytes went up (read again), 0: nothing more now, or the
   connection was ended (*gone). */
static int read_once(struct mprelay *r, bool *gone)
{
    struct conn *c = r->c;
    uint8_t *dst, *pool = NULL;
    size_t room;
    if (r->in_len) { /* a packet under way: read on behind it */
        if (grow(&r->in, &r->in_cap, r->in_len + IN_MIN) != 0)
            goto nomem;
        dst = r->in + r->in_len;
        room = r->in_cap - r->in_len;
    } else {
        if (!(pool = conn_buf_get(conn_w(c))))
            goto nomem;
        dst = pool;
        room = conn_w(c)->sh->buf_size;
    }
    ssize_t n = recv(c->cfd, dst, room, 0);
    if (n <= 0) {
        conn_buf_put(conn_w(c), pool);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return 0;
        *gone = true; /* EOF or an error: the client went away (cancelled upstream) */
        conn_relay_event(c, n == 0 ? RELAY_EV_DONE : RELAY_EV_RESET);
        return 0;
    }
    conn_touch(c);
    conn_count_bytes(c, DIR_UP, (uint64_t)n);
    size_t k = (size_t)n;
    bool bad = false;
    if (c->tls && faketls_reader_strip(&c->rd, dst, (size_t)n, &k) != FAKETLS_REC_NEED_MORE)
        bad = true; /* an alert or a bad record: close (brief 4.8) */
    int rc = bad ? -1 : 0;
    if (!bad && k && crypto_ctr_apply(&c->c2p, dst, k) < 0)
        rc = -1;
    if (rc == 0)
        rc = pool ? packets(r, pool, k, &bad) : packets(r, r->in, r->in_len + k, &bad);
    conn_buf_put(conn_w(c), pool);
    if (rc != 0) {
        *gone = true;
        conn_relay_event(c, bad ? RELAY_EV_PROTO : RELAY_EV_NOMEM);
        return 0;
    }
    return (size_t)n == room ? 1 : 0;
nomem:
    *gone = true;
    conn_relay_event(c, RELAY_EV_NOMEM);
    return 0;
}

static void on_client(struct loop *l, struct loop_io *io, unsigned ev)
{
    (void)l;
    struct conn *c = (struct conn *)(void *)((char *)io - offsetof(struct conn, cli));
    struct mprelay *r = c->mp;
    stats_add(&conn_w(c)->stats, relay_events, 1);
    if ((ev & (LOOP_WRITE | LOOP_ERROR)) && drain(r) != 0) {
        conn_relay_event(c, RELAY_EV_RESET);
        return;
    }
    if (ev & (LOOP_READ | LOOP_ERROR)) {
        bool gone = false;
        /* a hung-up client is read even while paused: its EOF ends it */
        for (int i = 0; i < READ_ROUNDS && (!midproxy_client_paused(&r->cl) || (ev & LOOP_ERROR));
             i++)
            if (read_once(r, &gone) == 0)
                break;
        if (gone)
            return;
    }
    arm(r);
}

/* ---- life ---- */

int mprelay_start(struct conn *c, const struct obfs2_client *oc, const uint8_t *ad_tag,
                  const struct sockaddr *client, const struct sockaddr *proxy)
{
    struct midproxy_worker *mw = conn_w(c)->mp;
    if (oc->tag != OBFS2_TAG_ABRIDGED && oc->tag != OBFS2_TAG_INTERMEDIATE &&
        oc->tag != OBFS2_TAG_PADDED)
        return 0;
    struct mprelay *r = tg__malloc(sizeof *r);
    if (!r)
        return -1;
    memset(r, 0, sizeof *r);
    r->c = c;
    r->mw = mw;
    r->cl.tag = oc->tag;
    r->cl.ad_tag = ad_tag;
    midproxy_addr(&r->cl.client, client);
    midproxy_addr(&r->cl.proxy, proxy);
    mw->ops = &ops;
    int rc = midproxy_client_attach(mw, &r->cl, c->dc);
    /* the client leg's encrypting cipher lives in the pooled pair (conn_int.h) */
    struct conn_recrypt *rx = rc == 0 ? tg__pool_get(&conn_w(c)->recrypt_pool) : NULL;
    if (rx)
        memset(rx, 0, sizeof *rx);
    if (rc == 0 && (!rx || crypto_ctr_init(&rx->p2c, oc->keys.enc_key, oc->keys.enc_iv) != 0)) {
        midproxy_client_detach(mw, &r->cl);
        rc = -ENOMEM;
    }
    if (rc != 0) {
        if (rx) {
            crypto_ctr_cleanup(&rx->p2c);
            tg__pool_put(&conn_w(c)->recrypt_pool, rx);
        }
        tg__free(r);
        return rc == -EAGAIN ? 0 : -1;
    }
    c->rx = rx;
    c->mp = r;
    c->fast = false;
    r->first = c->hs->buf; /* RELAY holds no handshake buffer (conn_check) */
    r->first_len = c->hs->len;
    c->hs->buf = NULL;
    c->hs->len = 0;
    return 1;
}

void mprelay_go(struct conn *c)
{
    struct mprelay *r = c->mp;
    /* what came with the header: decrypted, then up as packets */
    uint8_t *p = r->first + OBFS2_HEADER_LEN;
    size_t n = r->first_len - OBFS2_HEADER_LEN;
    conn_count_bytes(c, DIR_UP, r->first_len);
    bool bad = false;
    int rc = n ? crypto_ctr_apply(&c->c2p, p, n) : 0;
    if (rc == 0 && n)
        rc = packets(r, p, n, &bad);
    conn_buf_put(conn_w(c), r->first);
    r->first = NULL;
    if (rc != 0) {
        conn_relay_event(c, bad ? RELAY_EV_PROTO : RELAY_EV_NOMEM);
        return;
    }
    c->cli.cb = on_client;
    conn_touch(c);
    arm(r);
}

void mprelay_release(struct conn *c)
{
    struct mprelay *r = c->mp;
    if (!r)
        return;
    midproxy_client_detach(r->mw, &r->cl);
    conn_buf_put(conn_w(c), r->first);
    tg__free(r->in);
    tg__free(r->out);
    tg__free(r);
    c->mp = NULL;
}
