/*
 * proxy_fakedc: fake DC, one epoll thread. See proxy_fakedc.h.
 * Invariant: a connection holds its 64 KiB buffer only while bytes wait to be written.
 */
#include "proxy_fakedc.h"

#include "proxy_util.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define DC_BUF ((size_t)64 * 1024)

enum dcmd { CMD_NONE, CMD_ECHO, CMD_SINK, CMD_SRCE, CMD_IDLE, CMD_SINKA, CMD_SRCW };

struct dconn {
    int fd;
    uint8_t hdr[64 + FAKEDC_CMD_LEN];
    size_t hlen;
    struct pctr dec, enc;
    enum dcmd cmd;
    uint32_t seed;
    uint64_t count, done; /* SINK/SRCE progress */
    uint64_t acked;       /* SNKA: bytes acknowledged so far */
    uint64_t credit;      /* SRCW: bytes the client allows so far */
    uint8_t cbuf[8];      /* SRCW: a credit being received */
    size_t cbn;
    uint8_t *buf;         /* pending output */
    size_t off, len;
    bool eof, sink_failed;
    uint32_t mask;
    struct dconn *prev, *next; /* all connections, so stop can free them */
};

struct fakedc {
    int lfd, epfd, wakefd;
    pthread_t th;
    struct dconn *conns;
    struct fakedc_counters c; /* updated with atomics */
    pthread_mutex_t mu;       /* guards last_reply */
    uint8_t last_reply[48];
};

#define CADD(d, f, n) __atomic_add_fetch(&(d)->c.f, (n), __ATOMIC_RELAXED)

void fakedc_cmd(uint8_t out[FAKEDC_CMD_LEN], const char verb[4], uint32_t seed, uint64_t count)
{
    memcpy(out, verb, 4);
    for (int i = 0; i < 4; i++)
        out[4 + i] = (uint8_t)(seed >> (8 * i));
    for (int i = 0; i < 8; i++)
        out[8 + i] = (uint8_t)(count >> (8 * i));
}

static void set_mask(struct fakedc *d, struct dconn *c, uint32_t mask)
{
    if (c->mask == mask)
        return;
    struct epoll_event ev = {.events = mask, .data.ptr = c};
    epoll_ctl(d->epfd, EPOLL_CTL_MOD, c->fd, &ev);
    c->mask = mask;
}

static void dconn_free(struct fakedc *d, struct dconn *c)
{
    epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    if (c->prev)
        c->prev->next = c->next;
    else
        d->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pctr_cleanup(&c->dec);
    pctr_cleanup(&c->enc);
    free(c->buf);
    free(c);
    __atomic_sub_fetch(&d->c.open, 1, __ATOMIC_RELAXED);
}

/* Write pending output; returns -1 on a dead socket, 0 otherwise. */
static int flush(struct fakedc *d, struct dconn *c)
{
    while (c->off < c->len) {
        ssize_t w = send(c->fd, c->buf + c->off, c->len - c->off, MSG_NOSIGNAL);
        if (w < 0 && errno == EAGAIN)
            break;
        if (w <= 0)
            return -1;
        c->off += (size_t)w;
    }
    if (c->off == c->len) {
        free(c->buf);
        c->buf = NULL;
        c->off = c->len = 0;
    }
    return 0;
}

/* Queue plaintext p (n bytes, n <= DC_BUF - len) for sending, encrypted. */
static int queue_out(struct dconn *c, const uint8_t *p, size_t n)
{
    if (!c->buf) {
        c->buf = malloc(DC_BUF);
        if (!c->buf)
            return -1;
    }
    memcpy(c->buf + c->len, p, n);
    pctr_apply(&c->enc, c->buf + c->len, n);
    c->len += n;
    return 0;
}

static int start_cmd(struct fakedc *d, struct dconn *c)
{
    uint8_t *cmd = c->hdr + 64;
    pctr_apply(&c->dec, cmd, FAKEDC_CMD_LEN);
    c->seed =
        (uint32_t)cmd[4] | (uint32_t)cmd[5] << 8 | (uint32_t)cmd[6] << 16 | (uint32_t)cmd[7] << 24;
    c->count = 0;
    for (int i = 7; i >= 0; i--)
        c->count = c->count << 8 | cmd[8 + i];
    if (!memcmp(cmd, "ECHO", 4))
        c->cmd = CMD_ECHO;
    else if (!memcmp(cmd, "SINK", 4))
        c->cmd = CMD_SINK;
    else if (!memcmp(cmd, "SRCE", 4))
        c->cmd = CMD_SRCE;
    else if (!memcmp(cmd, "IDLE", 4))
        c->cmd = CMD_IDLE;
    else if (!memcmp(cmd, "SNKA", 4))
        c->cmd = CMD_SINKA;
    else if (!memcmp(cmd, "SRCW", 4))
        c->cmd = CMD_SRCW;
    else
        return -1;
    return 0;
}

static int read_header(struct fakedc *d, struct dconn *c)
{
    ssize_t r = recv(c->fd, c->hdr + c->hlen, sizeof c->hdr - c->hlen, 0);
    if (r < 0 && errno == EAGAIN)
        return 0;
    if (r <= 0)
        return -1;
    size_t before = c->hlen;
    c->hlen += (size_t)r;
    if (before < 64 && c->hlen >= 64) {
        uint8_t tag;
        int16_t dc;
        if (pobfs_dc_accept(c->hdr, &tag, &dc, &c->dec, &c->enc) < 0) {
            CADD(d, headers_bad, 1);
            return -1;
        }
        CADD(d, headers_ok, 1);
        uint8_t kiv[48];
        pobfs_reply_keyiv(c->hdr, NULL, kiv);
        pthread_mutex_lock(&d->mu);
        memcpy(d->last_reply, kiv, sizeof kiv);
        pthread_mutex_unlock(&d->mu);
        __atomic_store_n(&d->c.last_dc, dc, __ATOMIC_RELAXED);
        __atomic_store_n(&d->c.last_tag, (uint32_t)tag * 0x01010101u, __ATOMIC_RELAXED);
    }
    if (c->hlen == sizeof c->hdr && start_cmd(d, c) < 0) {
        CADD(d, headers_bad, 1);
        return -1;
    }
    return 0;
}

static void put_le64(uint8_t out[8], uint64_t v)
{
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le64(const uint8_t in[8])
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | in[i];
    return v;
}

static void sink_bytes(struct fakedc *d, struct dconn *c, const uint8_t *p, size_t n)
{
    uint64_t take = c->count - c->done < n ? c->count - c->done : n;
    if (take && pstream_check(c->seed, c->done, p, (size_t)take) >= 0)
        c->sink_failed = true;
    c->done += take;
    if (c->cmd == CMD_SINKA && take &&
        (c->done == c->count || c->done / FAKEDC_ACK_STEP != c->acked / FAKEDC_ACK_STEP)) {
        uint8_t ack[8];
        put_le64(ack, c->done);
        queue_out(c, ack, sizeof ack);
        c->acked = c->done;
    }
    if (take && c->done == c->count) {
        queue_out(c, (const uint8_t *)(c->sink_failed ? "SINK-BAD" : "SINK-OK!"), 8);
        if (c->sink_failed)
            CADD(d, sink_bad, 1);
        else
            CADD(d, sink_ok, 1);
        c->cmd = CMD_ECHO;
        if (n > take)
            queue_out(c, p + take, n - (size_t)take);
    }
}

/* SRCW: decrypted bytes from the client are 8-byte credits. */
static void credit_bytes(struct dconn *c, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        c->cbuf[c->cbn++] = p[i];
        if (c->cbn < sizeof c->cbuf)
            continue;
        c->cbn = 0;
        uint64_t v = get_le64(c->cbuf);
        if (v > c->credit)
            c->credit = v;
    }
}

/* Readable after the command: returns -1 to close. */
static int on_data(struct fakedc *d, struct dconn *c)
{
    uint8_t tmp[DC_BUF - 8];
    /* what a read may queue: the echo, or for SNKA also an ack and the verdict */
    size_t reserve = c->cmd == CMD_SINKA ? 16 : 0;
    size_t room = c->cmd == CMD_ECHO || c->cmd == CMD_SINK || c->cmd == CMD_SINKA
                      ? (sizeof tmp > c->len + reserve ? sizeof tmp - c->len - reserve : 0)
                      : sizeof tmp;
    if (room == 0)
        return 0;
    ssize_t r = recv(c->fd, tmp, room, 0);
    if (r < 0 && errno == EAGAIN)
        return 0;
    if (r <= 0) {
        c->eof = true;
        return 0;
    }
    pctr_apply(&c->dec, tmp, (size_t)r);
    CADD(d, bytes_in, (uint64_t)r);
    if (c->cmd == CMD_ECHO)
        return queue_out(c, tmp, (size_t)r);
    if (c->cmd == CMD_SINK || c->cmd == CMD_SINKA)
        sink_bytes(d, c, tmp, (size_t)r);
    else if (c->cmd == CMD_SRCW)
        credit_bytes(c, tmp, (size_t)r);
    return 0;
}

static void fill_source(struct dconn *c)
{
    uint64_t limit = c->cmd == CMD_SRCW ? (c->credit < c->count ? c->credit : c->count) : c->count;
    if ((c->cmd != CMD_SRCE && c->cmd != CMD_SRCW) || c->len || c->done >= limit)
        return;
    uint8_t tmp[DC_BUF];
    size_t k = limit - c->done < DC_BUF ? (size_t)(limit - c->done) : DC_BUF;
    pstream_fill(c->seed, c->done, tmp, k);
    c->done += k;
    queue_out(c, tmp, k);
}

static void on_event(struct fakedc *d, struct dconn *c, uint32_t ev)
{
    if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        int rc = c->hlen < sizeof c->hdr ? read_header(d, c) : on_data(d, c);
        if (rc < 0)
            goto close;
    }
    fill_source(c);
    uint64_t pending = c->len - c->off;
    if (flush(d, c) < 0)
        goto close;
    CADD(d, bytes_out, pending - (c->len - c->off));
    fill_source(c);
    if (c->eof && c->len == 0 && !(c->cmd == CMD_SRCE && c->done < c->count))
        goto close; /* a source finishes its stream even after the client's FIN */
    bool full = c->len >= DC_BUF / 2;
    uint32_t mask = (c->eof || full ? 0 : EPOLLIN) | (c->len ? EPOLLOUT : 0);
    set_mask(d, c, mask);
    return;
close:
    dconn_free(d, c);
}

static void on_accept(struct fakedc *d)
{
    for (int i = 0; i < 64; i++) {
        int fd = accept4(d->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        struct dconn *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->mask = EPOLLIN;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
            close(fd);
            free(c);
            continue;
        }
        c->next = d->conns;
        if (d->conns)
            d->conns->prev = c;
        d->conns = c;
        CADD(d, accepted, 1);
        CADD(d, open, 1);
    }
}

static void *dc_thread(void *arg)
{
    struct fakedc *d = arg;
    struct epoll_event evs[128];
    for (;;) {
        int n = epoll_wait(d->epfd, evs, 128, -1);
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n; i++) {
            if (evs[i].data.ptr == &d->wakefd)
                return NULL;
            if (evs[i].data.ptr == &d->lfd)
                on_accept(d);
            else
                on_event(d, evs[i].data.ptr, evs[i].events);
        }
    }
    return NULL;
}

static struct fakedc *start_on(uint16_t *port, bool v6)
{
    struct fakedc *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    *port = 0;
    pthread_mutex_init(&d->mu, NULL);
    d->lfd = v6 ? psock_listen6(port, 4096) : psock_listen(port, 4096);
    d->epfd = epoll_create1(EPOLL_CLOEXEC);
    d->wakefd = eventfd(0, EFD_CLOEXEC);
    if (d->lfd < 0 || d->epfd < 0 || d->wakefd < 0)
        goto fail;
    psock_set_nonblock(d->lfd, true);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &d->lfd};
    struct epoll_event wev = {.events = EPOLLIN, .data.ptr = &d->wakefd};
    if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, d->lfd, &ev) < 0 ||
        epoll_ctl(d->epfd, EPOLL_CTL_ADD, d->wakefd, &wev) < 0)
        goto fail;
    if (pthread_create(&d->th, NULL, dc_thread, d) != 0)
        goto fail;
    return d;
fail:
    if (d->lfd >= 0)
        close(d->lfd);
    if (d->epfd >= 0)
        close(d->epfd);
    if (d->wakefd >= 0)
        close(d->wakefd);
    pthread_mutex_destroy(&d->mu);
    free(d);
    return NULL;
}

struct fakedc *fakedc_start(uint16_t *port)
{
    return start_on(port, false);
}

struct fakedc *fakedc_start6(uint16_t *port)
{
    return start_on(port, true);
}

void fakedc_stop(struct fakedc *d)
{
    if (!d)
        return;
    uint64_t one = 1;
    ssize_t w = write(d->wakefd, &one, sizeof one);
    (void)w;
    pthread_join(d->th, NULL);
    while (d->conns)
        dconn_free(d, d->conns);
    close(d->lfd);
    close(d->epfd);
    close(d->wakefd);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

void fakedc_last_reply_keyiv(struct fakedc *d, uint8_t out[48])
{
    pthread_mutex_lock(&d->mu);
    memcpy(out, d->last_reply, sizeof d->last_reply);
    pthread_mutex_unlock(&d->mu);
}

struct fakedc_counters fakedc_counters(struct fakedc *d)
{
    struct fakedc_counters c;
    c.accepted = __atomic_load_n(&d->c.accepted, __ATOMIC_RELAXED);
    c.open = __atomic_load_n(&d->c.open, __ATOMIC_RELAXED);
    c.headers_ok = __atomic_load_n(&d->c.headers_ok, __ATOMIC_RELAXED);
    c.headers_bad = __atomic_load_n(&d->c.headers_bad, __ATOMIC_RELAXED);
    c.sink_ok = __atomic_load_n(&d->c.sink_ok, __ATOMIC_RELAXED);
    c.sink_bad = __atomic_load_n(&d->c.sink_bad, __ATOMIC_RELAXED);
    c.bytes_in = __atomic_load_n(&d->c.bytes_in, __ATOMIC_RELAXED);
    c.bytes_out = __atomic_load_n(&d->c.bytes_out, __ATOMIC_RELAXED);
    c.last_dc = __atomic_load_n(&d->c.last_dc, __ATOMIC_RELAXED);
    c.last_tag = __atomic_load_n(&d->c.last_tag, __ATOMIC_RELAXED);
    return c;
}
