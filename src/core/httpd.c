/*
 * httpd: libmicrohttpd daemons on poll/epoll with connection limits and a request deadline
 * kept by a watchdog thread. See httpd.h for the contract and the invariant.
 */
#include "core/httpd.h"

#include "core/alloc.h"
#include "core/clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <time.h>

/* One connection's place in the deadline queue; its socket context in MHD. */
struct track {
    struct track *prev, *next;
    int fd;
    bool queued;       /* in the queue (under mu) */
    unsigned calls;    /* access handler calls for the current request (MHD's thread only) */
    uint64_t deadline; /* tg__now_ms() */
};

struct tg__httpd {
    struct MHD_Daemon *mhd;
    MHD_AccessHandlerCallback handler;
    void *handler_cls;
    MHD_RequestCompletedCallback completed;
    void *completed_cls;
    uint32_t timeout_ms;
    uint16_t port;
    atomic_ullong expired;
    pthread_mutex_t mu; /* guards the queue and stop */
    pthread_cond_t cv;
    struct track *head, *tail; /* by deadline, earliest first */
    bool stop;
    bool watching; /* the watchdog thread runs */
    pthread_t watchdog;
};

/* ---- the deadline queue (under mu) ---- */

static void unqueue(struct tg__httpd *h, struct track *t)
{
    if (!t->queued)
        return;
    *(t->prev ? &t->prev->next : &h->head) = t->next;
    *(t->next ? &t->next->prev : &h->tail) = t->prev;
    t->prev = t->next = NULL;
    t->queued = false;
}

/* (Re)start t's deadline now. Every deadline is now + the same timeout, so the queue stays
   ordered by appending. */
static void arm(struct tg__httpd *h, struct track *t)
{
    if (!h->timeout_ms)
        return;
    pthread_mutex_lock(&h->mu);
    unqueue(h, t);
    t->deadline = tg__now_ms() + h->timeout_ms;
    t->prev = h->tail;
    *(h->tail ? &h->tail->next : &h->head) = t;
    h->tail = t;
    t->queued = true;
    if (h->head == t)
        pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

static void disarm(struct tg__httpd *h, struct track *t)
{
    if (!h->timeout_ms)
        return;
    pthread_mutex_lock(&h->mu);
    unqueue(h, t);
    pthread_mutex_unlock(&h->mu);
}

static void *watchdog_main(void *arg)
{
    struct tg__httpd *h = arg;
    pthread_mutex_lock(&h->mu);
    while (!h->stop) {
        uint64_t now = tg__now_ms();
        struct track *t = h->head;
        if (!t) {
            pthread_cond_wait(&h->cv, &h->mu);
        } else if (t->deadline <= now) {
            /* MHD has not reported t closed (it would have left the queue), so t->fd is
               still its socket: shut it down, and MHD closes the connection */
            unqueue(h, t);
            atomic_fetch_add(&h->expired, 1); /* counted before the peer can see the close */
            shutdown(t->fd, SHUT_RDWR);
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t wait_ms = t->deadline - now;
            ts.tv_sec += (time_t)(wait_ms / 1000);
            ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&h->cv, &h->mu, &ts);
        }
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* ---- MHD callbacks ---- */

static struct track *track_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct tg__httpd *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        struct track *t = *socket_context;
        if (t) {
            disarm(h, t);
            tg__free(t);
            *socket_context = NULL;
        }
        return;
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct track *t = h->timeout_ms ? tg__calloc(1, sizeof *t) : NULL;
    if (h->timeout_ms && (!t || !ci)) {
        /* a connection without a deadline is what the deadline is for: refuse it */
        if (ci)
            shutdown(ci->connect_fd, SHUT_RDWR);
        tg__free(t);
        return;
    }
    if (t) {
        t->fd = ci->connect_fd;
        *socket_context = t;
        arm(h, t);
    }
}

/* The request is in once the handler is called again with no body bytes (MHD's last call
   for a request); from then on the handler's own time does not count. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *data_size, void **con_cls)
{
    struct tg__httpd *h = cls;
    struct track *t = track_of(c);
    if (t && t->calls++ > 0 && *data_size == 0)
        disarm(h, t);
    return h->handler(h->handler_cls, c, url, method, version, data, data_size, con_cls);
}

/* The request is over: the connection's next one (keep-alive) starts its deadline now. */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct tg__httpd *h = cls;
    struct track *t = track_of(c);
    if (t) {
        t->calls = 0;
        arm(h, t);
    }
    if (h->completed)
        h->completed(h->completed_cls, c, con_cls, toe);
}

/* ---- start / stop ---- */

unsigned tg__httpd_fd_share(unsigned divisor, unsigned lo, unsigned hi)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || divisor == 0)
        return hi;
    rlim_t n = rl.rlim_cur / divisor;
    return n < lo ? lo : n > hi ? hi : (unsigned)n;
}

static int start_watchdog(struct tg__httpd *h)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&h->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (rc == 0 && (rc = pthread_mutex_init(&h->mu, NULL)) != 0)
        pthread_cond_destroy(&h->cv);
    if (rc == 0 && h->timeout_ms &&
        (rc = pthread_create(&h->watchdog, NULL, watchdog_main, h)) == 0)
        h->watching = true;
    return rc;
}

static struct MHD_Daemon *start_mhd(struct tg__httpd *h, const struct tg__httpd_opts *o)
{
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
    if (o->addr->sa_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    if (o->log)
        flags |= MHD_USE_ERROR_LOG;
    bool tls = o->cert_pem && o->key_pem;
    if (tls)
        flags |= MHD_USE_TLS;
    unsigned max = o->max_connections ? o->max_connections : tg__httpd_fd_share(2, 16, 65536);
    /* the logger first: libmicrohttpd warns about any option that comes before it */
    return MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, o->log, o->log_cls,
        MHD_OPTION_SOCK_ADDR, o->addr, MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_CONNECTION_LIMIT, max,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, o->per_ip, MHD_OPTION_CONNECTION_TIMEOUT,
        o->idle_timeout_s, MHD_OPTION_THREAD_POOL_SIZE, o->threads > 1 ? o->threads : 0u,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, o->memory_limit ? o->memory_limit : (size_t)32 * 1024,
        tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, o->cert_pem, MHD_OPTION_HTTPS_MEM_KEY,
        o->key_pem, MHD_OPTION_END);
}

struct tg__httpd *tg__httpd_start(const struct tg__httpd_opts *o)
{
    struct tg__httpd *h = tg__calloc(1, sizeof *h);
    if (!h)
        return errno = ENOMEM, NULL;
    h->handler = o->handler;
    h->handler_cls = o->handler_cls;
    h->completed = o->completed;
    h->completed_cls = o->completed_cls;
    h->timeout_ms = o->request_timeout_ms;
    int rc = start_watchdog(h);
    if (rc != 0) {
        tg__free(h);
        return errno = rc, NULL;
    }
    errno = 0;
    h->mhd = start_mhd(h, o);
    if (!h->mhd) {
        int err = errno ? errno : EADDRINUSE;
        tg__httpd_stop(h);
        return errno = err, NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di ? di->port : 0;
    return h;
}

void tg__httpd_stop(struct tg__httpd *h)
{
    if (!h)
        return;
    if (h->mhd)
        MHD_stop_daemon(h->mhd); /* reports every connection closed: the queue empties */
    if (h->watching) {
        pthread_mutex_lock(&h->mu);
        h->stop = true;
        pthread_cond_signal(&h->cv);
        pthread_mutex_unlock(&h->mu);
        pthread_join(h->watchdog, NULL);
    }
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    tg__free(h);
}

uint16_t tg__httpd_port(const struct tg__httpd *h)
{
    return h ? h->port : 0;
}

unsigned tg__httpd_connections(const struct tg__httpd *h)
{
    const union MHD_DaemonInfo *di =
        h ? MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_CURRENT_CONNECTIONS) : NULL;
    return di ? di->num_connections : 0;
}

uint64_t tg__httpd_expired(const struct tg__httpd *h)
{
    return h ? atomic_load(&h->expired) : 0;
}
