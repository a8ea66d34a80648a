/*
 * socks5_server: a loopback SOCKS5 proxy for tests, one thread per client. See socks5_server.h.
 *
 * Invariants: every socket is non-blocking and every wait is a poll that also watches the
 * stop eventfd (written once at stop and never read, so it stays readable for every thread);
 * records and counters change only under the server's mutex; the client list belongs to the
 * accept thread until it has been joined, then to socks5_server_stop.
 */
#include "socks5_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/clock.h"

#define RELAY_BUF    ((size_t)16 * 1024) /* bytes buffered per direction */
#define POLL_SLICE   1000                /* ms: longest single poll; the stop fd cuts it short */
#define MAX_RECORDS  4096                /* records kept; later requests are not recorded */
#define SOCKS_VER    0x05                /* RFC 1928 section 3 */
#define METHOD_NONE  0x00                /* no authentication required */
#define METHOD_USER  0x02                /* username/password (RFC 1929) */
#define METHOD_NOACC 0xFF                /* no acceptable methods */
#define AUTH_VER     0x01                /* RFC 1929 sub-negotiation version */

struct dir {
    int from, to;
    bool up; /* client -> target */
    bool eof, shut;
    size_t off, len;
    unsigned char buf[RELAY_BUF];
};

struct client {
    socks5_server *s;
    int fd, target;
    size_t rec; /* record index, or SIZE_MAX when not recorded */
    pthread_t th;
    int done; /* set (atomically) when the thread is about to return */
    struct dir d[2];
    struct client *next;
};

struct socks5_server {
    int lfd, stopfd;
    uint16_t port;
    socks5_mode mode;
    pthread_t th;
    pthread_mutex_t mu; /* guards everything below */
    socks5_record *recs;
    size_t nrecs, cap;
    size_t conns, greetings, auth_failures;
    char user[256], pass[256]; /* "" = no authentication */
    struct client *clients;    /* accept thread only */
};

/* ---- waiting ---- */

static bool stopping(socks5_server *s)
{
    struct pollfd p = {.fd = s->stopfd, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

/* Wait until fd is ready for events or the deadline passes. 1 ready, 0 timeout/stop/error. */
static int wait_fd(socks5_server *s, int fd, short events, uint64_t deadline_ms)
{
    for (int i = 0; i < 1000; i++) {
        uint64_t now = tg__now_ms();
        if (now >= deadline_ms)
            return 0;
        uint64_t left = deadline_ms - now;
        struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = s->stopfd, .events = POLLIN}};
        int n = poll(p, 2, left > POLL_SLICE ? POLL_SLICE : (int)left);
        if (n < 0 && errno != EINTR)
            return 0;
        if (n > 0 && p[1].revents)
            return 0;
        if (n > 0 && p[0].revents)
            return 1;
    }
    return 0;
}

/* Move exactly n bytes (out: send buf, else receive into it) within SOCKS5_IO_TIMEOUT_MS.
 * 0 on success, -1 on EOF, error, timeout or stop. */
static int io_full(socks5_server *s, int fd, void *buf, size_t n, bool out)
{
    uint64_t deadline = tg__now_ms() + SOCKS5_IO_TIMEOUT_MS;
    size_t done = 0;
    while (done < n) {
        char *p = (char *)buf + done;
        ssize_t r = out ? send(fd, p, n - done, MSG_NOSIGNAL) : recv(fd, p, n - done, 0);
        if (r > 0) {
            done += (size_t)r;
            continue;
        }
        if (r == 0 || (errno != EAGAIN && errno != EINTR))
            return -1;
        if (!wait_fd(s, fd, out ? POLLOUT : POLLIN, deadline))
            return -1;
    }
    return 0;
}

static int read_full(socks5_server *s, int fd, void *buf, size_t n)
{
    return io_full(s, fd, buf, n, false);
}

static int write_full(socks5_server *s, int fd, const void *buf, size_t n)
{
    return io_full(s, fd, (void *)buf, n, true);
}

/* ---- records ---- */

static size_t record_add(socks5_server *s, const socks5_record *r)
{
    size_t idx = SIZE_MAX;
    pthread_mutex_lock(&s->mu);
    if (s->nrecs == s->cap && s->cap < MAX_RECORDS) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        socks5_record *p = tg__realloc(s->recs, cap * sizeof *p);
        if (p) {
            s->recs = p;
            s->cap = cap;
        }
    }
    if (s->nrecs < s->cap) {
        idx = s->nrecs++;
        s->recs[idx] = *r;
    }
    pthread_mutex_unlock(&s->mu);
    return idx;
}

static void record_reply(struct client *c, int reply)
{
    if (c->rec == SIZE_MAX)
        return;
    pthread_mutex_lock(&c->s->mu);
    c->s->recs[c->rec].reply = reply;
    pthread_mutex_unlock(&c->s->mu);
}

static void record_bytes(struct client *c, bool up, const unsigned char *p, size_t n)
{
    if (c->rec == SIZE_MAX)
        return;
    pthread_mutex_lock(&c->s->mu);
    socks5_record *r = &c->s->recs[c->rec];
    if (!up) {
        r->bytes_down += n;
    } else {
        size_t room = SOCKS5_HEAD_KEEP - r->head_len;
        memcpy(r->head + r->head_len, p, n < room ? n : room);
        r->head_len += n < room ? n : room;
        r->bytes_up += n;
    }
    pthread_mutex_unlock(&c->s->mu);
}

/* ---- handshake ---- */

/* Username/password sub-negotiation (RFC 1929). 0: accepted; -1: refused or I/O failure. */
static int authenticate(struct client *c, const char *user, const char *pass)
{
    unsigned char ver_len[2], got_user[256], plen, got_pass[256];
    if (read_full(c->s, c->fd, ver_len, 2) != 0 || ver_len[0] != AUTH_VER ||
        read_full(c->s, c->fd, got_user, ver_len[1]) != 0 ||
        read_full(c->s, c->fd, &plen, 1) != 0 || read_full(c->s, c->fd, got_pass, plen) != 0)
        return -1;
    bool ok = ver_len[1] == strlen(user) && memcmp(got_user, user, ver_len[1]) == 0 &&
              plen == strlen(pass) && memcmp(got_pass, pass, plen) == 0;
    unsigned char reply[2] = {AUTH_VER, ok ? 0x00 : 0x01};
    if (!ok) {
        pthread_mutex_lock(&c->s->mu);
        c->s->auth_failures++;
        pthread_mutex_unlock(&c->s->mu);
    }
    return write_full(c->s, c->fd, reply, 2) == 0 && ok ? 0 : -1;
}

/* Greeting (RFC 1928 section 3). 0: a method chosen (and passed); -1: close the connection. */
static int greeting(struct client *c)
{
    unsigned char hdr[2], methods[255];
    if (read_full(c->s, c->fd, hdr, 2) != 0 || hdr[0] != SOCKS_VER)
        return -1;
    if (hdr[1] == 0 || read_full(c->s, c->fd, methods, hdr[1]) != 0)
        return -1;
    if (c->s->mode == SOCKS5_CLOSE_AFTER_GREETING)
        return -1;
    char user[256], pass[256];
    pthread_mutex_lock(&c->s->mu);
    memcpy(user, c->s->user, sizeof user);
    memcpy(pass, c->s->pass, sizeof pass);
    pthread_mutex_unlock(&c->s->mu);
    unsigned char want = user[0] ? METHOD_USER : METHOD_NONE;
    bool ok = memchr(methods, want, hdr[1]) != NULL;
    unsigned char reply[2] = {SOCKS_VER, ok ? want : METHOD_NOACC};
    if (write_full(c->s, c->fd, reply, 2) != 0 || !ok)
        return -1;
    if (want == METHOD_USER && authenticate(c, user, pass) != 0)
        return -1;
    pthread_mutex_lock(&c->s->mu);
    c->s->greetings++;
    pthread_mutex_unlock(&c->s->mu);
    return 0;
}

/* SOCKS5_HANG_AFTER_REQUEST: say nothing until the client closes, stop, or SOCKS5_HANG_MS. */
static void hang(struct client *c)
{
    uint64_t deadline = tg__now_ms() + SOCKS5_HANG_MS;
    unsigned char sink[256];
    for (int i = 0; i < 10000 && wait_fd(c->s, c->fd, POLLIN, deadline); i++) {
        ssize_t r = recv(c->fd, sink, sizeof sink, 0);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
            return;
    }
}

/* Read DST.ADDR and DST.PORT of a known address type into r. 0 or -1 (I/O failure). */
static int read_address(struct client *c, socks5_record *r)
{
    unsigned char a[4 + 2], len, name[255 + 2];
    if (r->atyp == SOCKS5_ATYP_IPV4) {
        if (read_full(c->s, c->fd, a, sizeof a) != 0)
            return -1;
        inet_ntop(AF_INET, a, r->host, sizeof r->host);
        r->port = (uint16_t)(a[4] << 8 | a[5]);
        return 0;
    }
    if (read_full(c->s, c->fd, &len, 1) != 0 || len == 0 ||
        read_full(c->s, c->fd, name, (size_t)len + 2) != 0)
        return -1;
    memcpy(r->host, name, len);
    r->host[len] = '\0';
    r->port = (uint16_t)(name[len] << 8 | name[len + 1]);
    return 0;
}

/* Where to connect for r, without any DNS: "localhost", IPv4 literals, loopback only.
 * Returns SOCKS5_REP_OK with *to filled, or the reply code that refuses it. */
static int resolve(const socks5_record *r, struct sockaddr_in *to)
{
    *to = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(r->port)};
    if (r->atyp == SOCKS5_ATYP_DOMAIN && strcasecmp(r->host, "localhost") == 0)
        to->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    else if (inet_pton(AF_INET, r->host, &to->sin_addr) != 1)
        return SOCKS5_REP_HOST_UNREACH; /* a name it will not look up */
    if ((ntohl(to->sin_addr.s_addr) >> 24) != 127)
        return SOCKS5_REP_NOT_ALLOWED; /* never leave the machine */
    return SOCKS5_REP_OK;
}

static int errno_to_reply(int err)
{
    switch (err) {
    case ECONNREFUSED:
        return SOCKS5_REP_REFUSED;
    case ENETUNREACH:
        return SOCKS5_REP_NET_UNREACH;
    case EHOSTUNREACH:
    case ETIMEDOUT:
        return SOCKS5_REP_HOST_UNREACH;
    default:
        return SOCKS5_REP_FAILURE;
    }
}

/* Non-blocking connect bounded by SOCKS5_IO_TIMEOUT_MS. Returns SOCKS5_REP_OK (c->target
 * set) or the failure's reply code. */
static int connect_target(struct client *c, const struct sockaddr_in *to)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return SOCKS5_REP_FAILURE;
    int err = 0;
    if (connect(fd, (const struct sockaddr *)to, sizeof *to) != 0) {
        err = errno;
        if (err == EINPROGRESS) {
            socklen_t len = sizeof err;
            err = ETIMEDOUT;
            if (wait_fd(c->s, fd, POLLOUT, tg__now_ms() + SOCKS5_IO_TIMEOUT_MS))
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        }
    }
    if (err != 0) {
        close(fd);
        return errno_to_reply(err);
    }
    c->target = fd;
    return SOCKS5_REP_OK;
}

/* Reply (RFC 1928 section 6) with BND.ADDR/BND.PORT of the outgoing socket, zeros on error. */
static int send_reply(struct client *c, int rep)
{
    unsigned char out[10] = {SOCKS_VER, (unsigned char)rep, 0x00, SOCKS5_ATYP_IPV4};
    struct sockaddr_in bnd = {0};
    socklen_t len = sizeof bnd;
    if (rep == SOCKS5_REP_OK && getsockname(c->target, (struct sockaddr *)&bnd, &len) == 0) {
        memcpy(out + 4, &bnd.sin_addr, 4);
        memcpy(out + 8, &bnd.sin_port, 2);
    }
    record_reply(c, rep);
    return write_full(c->s, c->fd, out, sizeof out);
}

/* Request (RFC 1928 section 4). 0: connected to the target, relay; -1: close. */
static int request(struct client *c)
{
    unsigned char hdr[4];
    socks5_record r = {.reply = -1};
    if (read_full(c->s, c->fd, hdr, 4) != 0 || hdr[0] != SOCKS_VER)
        return -1;
    r.cmd = hdr[1];
    r.atyp = hdr[3];
    bool known = r.atyp == SOCKS5_ATYP_IPV4 || r.atyp == SOCKS5_ATYP_DOMAIN;
    if (known && read_address(c, &r) != 0)
        return -1;
    c->rec = record_add(c->s, &r);
    if (!known) {
        send_reply(c, SOCKS5_REP_BAD_ATYP); /* DST.ADDR length unknown: nothing more to read */
        return -1;
    }
    if (r.cmd != SOCKS5_CMD_CONNECT) {
        send_reply(c, SOCKS5_REP_BAD_CMD);
        return -1;
    }
    if (c->s->mode == SOCKS5_HANG_AFTER_REQUEST) {
        hang(c);
        return -1;
    }
    struct sockaddr_in to = {0};
    int rep = c->s->mode == SOCKS5_REFUSE_CONNECT ? SOCKS5_REP_REFUSED : resolve(&r, &to);
    if (rep == SOCKS5_REP_OK)
        rep = connect_target(c, &to);
    if (send_reply(c, rep) != 0 || rep != SOCKS5_REP_OK)
        return -1;
    return 0;
}

/* ---- relay ---- */

/* Move bytes for one direction after poll said from/to is ready. -1 on a dead socket. */
static int dir_step(struct client *c, struct dir *d, short rev_from, short rev_to)
{
    if (d->len == 0 && !d->eof && (rev_from & (POLLIN | POLLHUP | POLLERR))) {
        ssize_t r = recv(d->from, d->buf, RELAY_BUF, 0);
        if (r > 0) {
            d->off = 0;
            d->len = (size_t)r;
            record_bytes(c, d->up, d->buf, d->len);
        } else if (r == 0) {
            d->eof = true;
        } else if (errno != EAGAIN && errno != EINTR) {
            return -1;
        }
    }
    if (d->len > 0 && (rev_to & (POLLOUT | POLLERR | POLLHUP))) {
        ssize_t w = send(d->to, d->buf + d->off, d->len, MSG_NOSIGNAL);
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return -1;
        if (w > 0) {
            d->off += (size_t)w;
            d->len -= (size_t)w;
        }
    }
    if (d->eof && d->len == 0 && !d->shut) {
        shutdown(d->to, SHUT_WR); /* pass the half-close on */
        d->shut = true;
    }
    return 0;
}

/* Relay until both directions have ended, a socket dies, or the server stops. */
static void relay(struct client *c)
{
    c->d[0].from = c->d[1].to = c->fd;
    c->d[0].to = c->d[1].from = c->target;
    c->d[0].up = true;
    while (!(c->d[0].shut && c->d[1].shut)) {
        struct pollfd p[5] = {{.fd = c->s->stopfd, .events = POLLIN}};
        for (int i = 0; i < 2; i++) {
            struct dir *d = &c->d[i];
            bool rd = d->len == 0 && !d->eof, wr = d->len > 0;
            /* fd -1: poll skips the entry, so an idle side cannot wake the loop */
            p[1 + 2 * i] = (struct pollfd){.fd = rd ? d->from : -1, .events = POLLIN};
            p[2 + 2 * i] = (struct pollfd){.fd = wr ? d->to : -1, .events = POLLOUT};
        }
        int n = poll(p, 5, POLL_SLICE);
        if (n < 0 && errno != EINTR)
            return;
        if (n <= 0)
            continue;
        if (p[0].revents)
            return;
        for (int i = 0; i < 2; i++)
            if (dir_step(c, &c->d[i], p[1 + 2 * i].revents, p[2 + 2 * i].revents) != 0)
                return;
    }
}

static void *client_main(void *arg)
{
    struct client *c = arg;
    if (greeting(c) == 0 && request(c) == 0)
        relay(c);
    close(c->fd);
    if (c->target >= 0)
        close(c->target);
    c->fd = c->target = -1;
    __atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* ---- accepting ---- */

/* Join and free the clients whose threads have returned. */
static void reap(socks5_server *s, bool all)
{
    struct client **pp = &s->clients;
    while (*pp) {
        struct client *c = *pp;
        if (!all && !__atomic_load_n(&c->done, __ATOMIC_ACQUIRE)) {
            pp = &c->next;
            continue;
        }
        pthread_join(c->th, NULL);
        *pp = c->next;
        tg__free(c);
    }
}

static void start_client(socks5_server *s, int fd)
{
    struct client *c = tg__calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return;
    }
    *c = (struct client){.s = s, .fd = fd, .target = -1, .rec = SIZE_MAX, .next = s->clients};
    if (pthread_create(&c->th, NULL, client_main, c) != 0) {
        close(fd);
        tg__free(c);
        return;
    }
    s->clients = c;
}

static void *accept_main(void *arg)
{
    socks5_server *s = arg;
    while (!stopping(s)) {
        struct pollfd p[2] = {{.fd = s->lfd, .events = POLLIN},
                              {.fd = s->stopfd, .events = POLLIN}};
        if (poll(p, 2, POLL_SLICE) <= 0 || p[1].revents)
            continue;
        int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        pthread_mutex_lock(&s->mu);
        s->conns++;
        pthread_mutex_unlock(&s->mu);
        reap(s, false);
        start_client(s, fd);
    }
    return NULL;
}

static int listen_loopback(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 64) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

socks5_server *socks5_server_start(socks5_mode mode)
{
    socks5_server *s = tg__calloc(1, sizeof *s);
    if (!s) {
        fprintf(stderr, "socks5_server: out of memory\n");
        return NULL;
    }
    s->mode = mode;
    s->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    s->lfd = listen_loopback(&s->port);
    pthread_mutex_init(&s->mu, NULL);
    if (s->stopfd < 0 || s->lfd < 0 || pthread_create(&s->th, NULL, accept_main, s) != 0) {
        fprintf(stderr, "socks5_server: cannot start on 127.0.0.1: %s\n", strerror(errno));
        if (s->stopfd >= 0)
            close(s->stopfd);
        if (s->lfd >= 0)
            close(s->lfd);
        pthread_mutex_destroy(&s->mu);
        tg__free(s);
        return NULL;
    }
    return s;
}

void socks5_server_stop(socks5_server *s)
{
    if (!s)
        return;
    uint64_t one = 1;
    if (write(s->stopfd, &one, sizeof one) != (ssize_t)sizeof one)
        fprintf(stderr, "socks5_server: cannot signal stop: %s\n", strerror(errno));
    pthread_join(s->th, NULL);
    reap(s, true);
    close(s->lfd);
    close(s->stopfd);
    pthread_mutex_destroy(&s->mu);
    tg__free(s->recs);
    tg__free(s);
}

static size_t locked_count(socks5_server *s, const size_t *field);

void socks5_server_require_auth(socks5_server *s, const char *user, const char *pass)
{
    pthread_mutex_lock(&s->mu);
    snprintf(s->user, sizeof s->user, "%s", user);
    snprintf(s->pass, sizeof s->pass, "%s", pass);
    pthread_mutex_unlock(&s->mu);
}

size_t socks5_server_auth_failures(socks5_server *s)
{
    return locked_count(s, &s->auth_failures);
}

uint16_t socks5_server_port(const socks5_server *s)
{
    return s->port;
}

void socks5_server_url(const socks5_server *s, bool remote_dns, char *out, size_t cap)
{
    snprintf(out, cap, "socks5%s://127.0.0.1:%u", remote_dns ? "h" : "", (unsigned)s->port);
}

static size_t locked_count(socks5_server *s, const size_t *field)
{
    pthread_mutex_lock(&s->mu);
    size_t n = *field;
    pthread_mutex_unlock(&s->mu);
    return n;
}

size_t socks5_server_connections(socks5_server *s)
{
    return locked_count(s, &s->conns);
}

size_t socks5_server_greetings(socks5_server *s)
{
    return locked_count(s, &s->greetings);
}

size_t socks5_server_nrecords(socks5_server *s)
{
    return locked_count(s, &s->nrecs);
}

bool socks5_server_record(socks5_server *s, size_t i, socks5_record *out)
{
    pthread_mutex_lock(&s->mu);
    bool ok = i < s->nrecs;
    if (ok)
        *out = s->recs[i];
    pthread_mutex_unlock(&s->mu);
    return ok;
}
