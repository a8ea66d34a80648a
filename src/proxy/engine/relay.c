/*
 * relay: the data path. See relay.h.
 *
 * Invariants: dir[d].buf != NULL iff dir[d].off < dir[d].len (a drained direction returns its
 * buffer at once); a source is readable-interested only while its direction is drained and
 * has not seen EOF; shut is set only after eof and a full drain.
 */
#include "proxy/engine/relay.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define PUMP_ROUNDS 4 /* reads per event and direction, for fairness between connections */

/* Dynamic record sizing toward FakeTLS clients (brief 4.9; the sizes teleproxy and mtg
   use): like a TLS server warming up, 40 records of at most 1450 payload bytes, then 20 of
   4096, then full 16384-byte records; again from small after a second with nothing sent. */
#define DYN_SMALL    1450
#define DYN_SMALL_N  40
#define DYN_MID      4096
#define DYN_MID_N    20
#define DYN_RESET_MS 1000

/* Payload limit of the i-th record toward the client since the last reset. */
static size_t rec_limit(const struct conn *c, uint32_t i)
{
    if (!c->gen->dyn_records || i >= DYN_SMALL_N + DYN_MID_N)
        return RELAY_TLS_MAX_PAYLOAD;
    return i < DYN_SMALL_N ? DYN_SMALL : DYN_MID;
}

/* Records toward this client may be shaped by the doppelganger (shape.h). */
static bool shapeable(const struct conn *c)
{
    return conn_w(c)->shape.live && c->tls && c->state == CONN_RELAY;
}

/* ... and are: the connection has its shaping state (taken at its first shaped read). */
static bool shaping(const struct conn *c)
{
    return c->shape && shapeable(c);
}

/* Payload limit of the i-th record slot since the last reset, shaped or not. */
static uint16_t slot_size(struct conn *c, uint32_t i)
{
    size_t lim = rec_limit(c, i);
    return (uint16_t)(shaping(c) ? shape_size(&conn_w(c)->shape, i, (uint32_t)lim) : lim);
}

static void on_shape_tick(struct loop *l, struct loop_timer *t);

size_t relay_record_next(struct conn *c)
{
    if (conn_ms_since(c, c->recs_ms) >= DYN_RESET_MS)
        c->recs = 0; /* a quiet second: start small again */
    size_t lim = rec_limit(c, c->recs);
    c->recs = c->recs + 1 ? c->recs + 1 : c->recs;
    c->recs_ms = (uint32_t)conn_w(c)->loop.now_ms;
    return lim;
}

static void dir_release(struct conn *c, struct relay_dir *r)
{
    conn_dir_put(conn_w(c), r);
}

void relay_release(struct conn *c)
{
    if (c->shape) {
        loop_timer_stop(&c->shape->s.timer);
        tg__pool_put(&conn_w(c)->shape_pool, c->shape);
        c->shape = NULL;
    }
    dir_release(c, &c->dir[DIR_UP]);
    dir_release(c, &c->dir[DIR_DOWN]);
}

/* A socket error on fd: remember a reset by its peer (fronting passes it on, conn.c). */
static void note_reset(struct conn *c, int fd, int err)
{
    if ((err == ECONNRESET || err == EPIPE) && c->reset_by == CONN_RESET_NONE)
        c->reset_by = (uint8_t)(fd == c->cfd ? CONN_RESET_CLIENT : CONN_RESET_UPSTREAM);
}

/* Write what is pending in direction d. 0 (drained or blocked) or -errno. */
static int flush(struct conn *c, int d)
{
    struct relay_dir *r = &c->dir[d];
    int fd = d == DIR_UP ? c->ufd : c->cfd;
    bool shaped = d == DIR_DOWN && shaping(c);
    while (r->off < r->len) {
        uint32_t end = r->len;
        if (shaped) {
            bool wait = false;
            end = shape_release(&conn_w(c)->shape, &c->shape->s, r->buf, r->off, r->len,
                                conn_w(c)->loop.now_ms, &conn_w(c)->stats, &wait);
            if (wait) {
                if (!loop_timer_active(&c->shape->s.timer))
                    loop_timer_start(&conn_w(c)->loop, &conn_w(c)->shape.tq, &c->shape->s.timer,
                                     on_shape_tick);
                return 0; /* the tick brings us back */
            }
        }
        ssize_t w = send(fd, r->buf + r->off, end - r->off, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EAGAIN && shaped)
                shape_blocked(&c->shape->s);
            if (errno == EAGAIN || errno == EINTR)
                return errno == EAGAIN ? 0 : flush(c, d);
            note_reset(c, fd, errno);
            return -errno;
        }
        r->off += (uint32_t)w;
    }
    dir_release(c, r);
    return 0;
}

/* Transform n freshly read bytes at buf in place (for FakeTLS downloads n payload bytes in
   read_wrapped()'s slots); returns bytes to send, -2 for a bad record or alert from the
   client, -1 when a cipher failed. */
static long transform(struct conn *c, int d, uint8_t *buf, size_t n, const uint16_t *lens)
{
    if (c->state == CONN_FRONT_RELAY)
        return (long)n;
    if (d == DIR_UP) {
        size_t k = n;
        if (c->tls && faketls_reader_strip(&c->rd, buf, n, &k) != FAKETLS_REC_NEED_MORE) {
            /* an alert or a bad record: close (brief 4.8); bytes before it are dropped
               with the connection, as the client asked to end it */
            return -2;
        }
        if (k && (crypto_ctr_apply(&c->c2p, buf, k) < 0 || crypto_ctr_apply(&c->p2dc, buf, k) < 0))
            return -1;
        return (long)k;
    }
    if (!c->tls || c->state != CONN_RELAY)
        return !c->fast && (crypto_ctr_apply(&c->rx->dc2p, buf, n) < 0 ||
                            crypto_ctr_apply(&c->rx->p2c, buf, n) < 0)
                   ? -1
                   : (long)n;
    /* records laid out by read_wrapped(): [hdr][payload]...[hdr][payload rest], each slot
       as long as that record's size limit */
    size_t out = 0;
    uint32_t i = 0;
    while (n > 0) {
        size_t lim = lens[i++];
        size_t k = n < lim ? n : lim;
        uint8_t *p = buf + out + RELAY_TLS_HEADROOM;
        if (!c->fast &&
            (crypto_ctr_apply(&c->rx->dc2p, p, k) < 0 || crypto_ctr_apply(&c->rx->p2c, p, k) < 0))
            return -1;
        faketls_record_header(buf + out, k);
        out += RELAY_TLS_HEADROOM + k;
        n -= k;
    }
    c->recs = c->recs + i < c->recs ? UINT32_MAX : c->recs + i;
    c->recs_ms = (uint32_t)conn_w(c)->loop.now_ms;
    return (long)out;
}

/*
 * Read DC bytes straight into record slots: one readv fills as many records as the buffer
 * holds, each payload placed after a 5-byte gap for its header, so a 64 KiB buffer moves
 * four 16 KiB records per read and per send with no copy. With dynamic record sizing the
 * slots follow rec_limit() (small records first, as TLS servers send them). Returns payload
 * bytes read; *cap = what the slots could take.
 */
static ssize_t read_wrapped(struct conn *c, int fd, uint8_t *buf, size_t size, size_t *cap,
                            uint16_t *lens)
{
    struct iovec iov[RELAY_MAX_SLOTS];
    int k = 0;
    *cap = 0;
    if (conn_ms_since(c, c->recs_ms) >= DYN_RESET_MS)
        c->recs = 0; /* a quiet second: start small again */
    /* whole slots only after the first, so a buffer's tail never makes a runt record */
    for (size_t at = 0; k < RELAY_MAX_SLOTS; k++) {
        size_t lim = lens[k] = slot_size(c, c->recs + (uint32_t)k);
        if (k > 0 && at + RELAY_TLS_HEADROOM + lim > size)
            break;
        size_t room = size - at - RELAY_TLS_HEADROOM;
        iov[k].iov_base = buf + at + RELAY_TLS_HEADROOM;
        iov[k].iov_len = room < lim ? room : lim;
        *cap += iov[k].iov_len;
        at += RELAY_TLS_HEADROOM + lim;
    }
    return readv(fd, iov, k);
}

/* Read once from the source of d. >0 bytes queued, 0 nothing (EAGAIN/EOF), -errno. */
static int read_once(struct conn *c, int d, bool *more)
{
    struct relay_dir *r = &c->dir[d];
    int fd = d == DIR_UP ? c->cfd : c->ufd;
    bool wrap = d == DIR_DOWN && c->tls && c->state == CONN_RELAY;
    if (!r->buf) {
        /* a flow whose last read filled its buffer gets a bulk one while the budget lasts */
        r->big = r->bulk && (r->buf = conn_big_get(conn_w(c))) != NULL;
        if (!r->buf && !(r->buf = conn_buf_get(conn_w(c))))
            return -ENOMEM;
    }
    size_t cap = r->big ? conn_w(c)->sh->big_size : conn_w(c)->sh->buf_size;
    uint16_t lens[RELAY_MAX_SLOTS];
    bool quiet = conn_ms_since(c, c->recs_ms) >= DYN_RESET_MS;
    /* the shaping state, at the first read that may be shaped (no memory: unshaped) */
    if (wrap && shapeable(c) && !c->shape && (c->shape = tg__pool_get(&conn_w(c)->shape_pool))) {
        memset(c->shape, 0, sizeof *c->shape);
        c->shape->c = c;
    }
    if (wrap && shaping(c))
        shape_refresh(&conn_w(c)->shape);
    ssize_t n = wrap ? read_wrapped(c, fd, r->buf, cap, &cap, lens) : recv(fd, r->buf, cap, 0);
    *more = n == (ssize_t)cap;
    r->bulk = *more;
    if (r->big && n > 0)
        stats_add(&conn_w(c)->stats, bulk_reads, 1);
    if (n <= 0) {
        dir_release(c, r);
        if (n == 0)
            r->eof = true;
        else if (errno != EAGAIN && errno != EINTR) {
            note_reset(c, fd, errno);
            return -errno;
        }
        return 0;
    }
    conn_touch(c);
    conn_count_bytes(c, d, (uint64_t)n);
    long out = transform(c, d, r->buf, (size_t)n, lens);
    if (out < 0)
        return out == -2 ? -EBADMSG : -EPROTO;
    if (out == 0) {
        dir_release(c, r);
        return 1; /* only framing was read; more may follow */
    }
    r->off = 0;
    r->len = (uint32_t)out;
    if (wrap && shaping(c))
        shape_read(&c->shape->s, quiet, *more, conn_w(c)->loop.now_ms);
    return 1;
}

/* Move bytes in direction d until blocked, drained, or PUMP_ROUNDS reads. 0 or -errno. */
static int pump(struct conn *c, int d)
{
    struct relay_dir *r = &c->dir[d];
    for (int i = 0; i < PUMP_ROUNDS; i++) {
        int rc = flush(c, d);
        if (rc < 0 || r->buf)
            return rc; /* error, or the destination is full: wait for WRITE */
        if (r->eof)
            break;
        bool more = false;
        rc = read_once(c, d, &more);
        if (rc < 0)
            return rc;
        if (rc == 0 || !more)
            break; /* a short read drained the socket: save the EAGAIN round trip */
    }
    int rc = flush(c, d);
    if (rc == 0 && r->eof && !r->buf && !r->shut) {
        shutdown(d == DIR_UP ? c->ufd : c->cfd, SHUT_WR);
        r->shut = true;
        if (d == DIR_DOWN && !c->dir[DIR_UP].shut)
            conn_relay_event(c, RELAY_EV_SITE_FIN); /* conn.c decides what a FIN means */
    }
    return rc;
}

static unsigned want(const struct conn *c, int src_dir, int dst_dir)
{
    const struct relay_dir *s = &c->dir[src_dir], *t = &c->dir[dst_dir];
    /* bytes the shaper holds back wait for its tick, not for the socket */
    bool held = dst_dir == DIR_DOWN && c->shape && loop_timer_active(&c->shape->s.timer);
    return (!s->eof && !s->buf ? LOOP_READ : 0u) | (t->buf && !held ? LOOP_WRITE : 0u);
}

/*
 * Register fd with the interest it needs now. A hung-up socket keeps reporting HUP whatever
 * the mask, so while nothing is wanted from it (finished, or not read because its bytes
 * wait for the other side) it leaves the epoll set, and comes back once it is wanted again.
 */
static int arm(struct loop *l, struct loop_io *io, int fd, unsigned mask, bool hup)
{
    if (hup && mask == 0) {
        loop_io_del(l, io);
        return 0;
    }
    if (io->fd >= 0)
        return loop_io_set(l, io, mask);
    return mask && fd >= 0 ? loop_io_add(l, io, fd, mask, io->cb) : 0;
}

/* Re-arm interest after a pump; ends the connection when both directions are done. */
static void settle(struct conn *c, struct loop_io *hup)
{
    struct relay_dir *u = &c->dir[DIR_UP], *dn = &c->dir[DIR_DOWN];
    if (u->shut && dn->shut) {
        conn_relay_event(c, RELAY_EV_DONE);
        return;
    }
    struct loop *l = &conn_w(c)->loop;
    if (hup) {
        /* The peer of this socket is gone both ways: keep it only while it still has bytes
           for us; a direction still writing to it can never finish. */
        bool src_done = hup == &c->cli ? u->eof : dn->eof;
        bool dst_done = hup == &c->cli ? dn->shut : u->shut;
        if (src_done && !dst_done) {
            int fd = hup == &c->cli ? c->cfd : c->ufd, err = 0;
            socklen_t el = sizeof err;
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0)
                note_reset(c, fd, err);
            conn_relay_event(c, RELAY_EV_RESET);
            return;
        }
    }
    if (arm(l, &c->cli, c->cfd, want(c, DIR_UP, DIR_DOWN), hup == &c->cli) < 0 ||
        arm(l, &c->uio.io, c->ufd, want(c, DIR_DOWN, DIR_UP), hup == &c->uio.io) < 0)
        conn_relay_event(c, RELAY_EV_RESET);
}

static void on_io(struct conn *c, struct loop_io *io, unsigned events)
{
    /* io is the source of one direction and the destination of the other: flush toward it
       when it became writable, read from it when it became readable. No speculative reads,
       so a one-way exchange costs no EAGAIN round trip on the idle side. */
    int src = io == &c->cli ? DIR_UP : DIR_DOWN;
    int rc = 0;
    stats_add(&conn_w(c)->stats, relay_events, 1);
    if (events & (LOOP_WRITE | LOOP_ERROR))
        rc = pump(c, !src);
    if (rc == 0 && (events & (LOOP_READ | LOOP_ERROR)))
        rc = pump(c, src);
    if (rc < 0) {
        conn_relay_event(c, rc == -ENOMEM    ? RELAY_EV_NOMEM
                            : rc == -EBADMSG ? RELAY_EV_PROTO
                                             : RELAY_EV_RESET);
        return;
    }
    settle(c, (events & LOOP_ERROR) ? io : NULL);
}

/* A record held back by the shaper may be due: send what is, read on, re-arm. */
static void on_shape_tick(struct loop *l, struct loop_timer *t)
{
    (void)l;
    struct conn *c =
        ((struct conn_shape *)(void *)((char *)t - offsetof(struct conn_shape, s.timer)))->c;
    int rc = pump(c, DIR_DOWN);
    if (rc < 0) {
        conn_relay_event(c, rc == -ENOMEM ? RELAY_EV_NOMEM : RELAY_EV_RESET);
        return;
    }
    settle(c, NULL);
}

void relay_on_client(struct loop *l, struct loop_io *io, unsigned events)
{
    (void)l;
    struct conn *c = (struct conn *)(void *)((char *)io - offsetof(struct conn, cli));
    on_io(c, io, events);
}

void relay_on_upstream(struct loop *l, struct loop_io *io, unsigned events)
{
    (void)l;
    struct conn *c = (struct conn *)(void *)((char *)io - offsetof(struct conn, uio.io));
    on_io(c, io, events);
}

void relay_start(struct conn *c)
{
    c->cli.cb = relay_on_client;
    c->uio.io.cb = relay_on_upstream;
    conn_touch(c);
    /* send what was queued for the upstream (header, early bytes), then settle interest on
       both sockets. The client is not read here: the handshake read it until a read came
       back short (or turned its READ interest off with bytes waiting), so a read now finds
       nothing but EAGAIN, and epoll reports whatever it sends next (issue 30) */
    int rc = flush(c, DIR_UP);
    if (rc < 0) {
        conn_relay_event(c, RELAY_EV_RESET); /* c is gone */
        return;
    }
    settle(c, NULL); /* c may be gone */
}
