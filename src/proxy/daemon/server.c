/*
 * server: workers, listeners, signals. See server.h.
 * Invariant: every worker's listeners bind the same addresses and ports (SO_REUSEPORT);
 * listener sockets are created by server_start and owned by their worker afterwards.
 */
#include "proxy/daemon/server.h"

#include "core/alloc.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/str.h"
#include "proxy/services/acl.h"
#include "proxy/services/mpsource.h"
#include "proxy/engine/fleet.h"
#include "proxy/engine/antireplay.h"
#include "proxy/engine/conn.h"
#include "proxy/wire/crypto.h"
#include "proxy/engine/generation.h"
#include "proxy/engine/limits.h"
#include "proxy/engine/seen.h"
#include "proxy/daemon/api.h"
#include "proxy/daemon/apistore.h"
#include "proxy/daemon/metrics.h"
#include "proxy/daemon/sdnotify.h"
#include "proxy/config/quotafile.h"
#include "proxy/daemon/statsd.h"
#include "proxy/engine/upstream.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ACCEPT_BURST    64  /* accepts per readiness event, per listener */
#define ACCEPT_PAUSE_MS 100 /* back-off when out of file descriptors */
#define FDS_PER_CONN    2   /* the client's socket and the DC's or the fronting host's */
#define FDS_PER_WORKER  4   /* epoll, its wake eventfd, the resolver pipe (2) */
#define FDS_SLACK       32  /* stdio, the resolver threads' sockets, OpenSSL's /dev/urandom */
#define NOFILE_FALLBACK ((rlim_t)1 << 20) /* when the hard limit is "unlimited" */
#define DRAIN_POLL_MS   100               /* how often a drain checks whether connections remain */

struct worker {
    struct conn_worker cw;
    struct server *srv;
    pthread_t th;
    int lfd[CONFIG_MAX_LISTEN];
    struct loop_io lis[CONFIG_MAX_LISTEN];
    struct loop_tq tq_pause;
    struct loop_timer pause; /* re-enables the listeners after EMFILE or the limit */
    tg__ratelimit limit_rl;  /* the "concurrency limit reached" line */
    int ctl_fd;              /* eventfd: the controlling thread asks this worker to drain */
    struct loop_io ctl;
    int init_rc;
    bool started;
};

struct server {
    const struct config *cfg;
    struct conn_shared sh;
    struct worker *w;
    size_t nw;
    uint16_t port[CONFIG_MAX_LISTEN];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t ready;             /* workers past init */
    struct stats_secret *sec; /* nw x GEN_LABELS_MAX per-secret counters, by label slot */
    double start_time;        /* Unix seconds */
    struct metrics *metrics;  /* [stats.prometheus] page, or NULL */
    struct statsd *statsd;    /* [stats.statsd] pusher, or NULL */
    struct api *api;          /* [api] control API, or NULL */
    pthread_mutex_t reload_mu; /* one reload at a time: SIGHUP and the API's changes */
    uint64_t reloads[2];      /* atomic: reloads refused [0] and applied [1] */
    bool last_reload_ok;      /* atomic: the last reload was applied (true before any) */
    double last_ok_time;      /* atomic (as bits): Unix seconds of the last applied reload,
                                 or of the start */
    bool draining;            /* atomic: workers stop accepting (server_drain) */
    struct acl *acl;          /* [defense.allowlist] / [defense.blocklist], or NULL */
    bool state_ready;         /* [limits] state-file was read (or tried): save it at stop */
    bool mp_wake;             /* atomic: workers run: a documents change wakes them */
};

static void listeners_set(struct worker *w, unsigned mask)
{
    for (size_t i = 0; i < w->srv->cfg->nlisten; i++)
        if (w->lfd[i] >= 0)
            loop_io_set(&w->cw.loop, &w->lis[i], mask);
}

/* Drain: close this worker's listeners (connections still in their accept queues are reset;
   with every worker's closed, new connections are refused). Open connections run on. */
static void listeners_close(struct worker *w)
{
    loop_timer_stop(&w->pause);
    for (size_t i = 0; i < w->srv->cfg->nlisten; i++) {
        loop_io_del(&w->cw.loop, &w->lis[i]);
        if (w->lfd[i] >= 0)
            close(w->lfd[i]);
        w->lfd[i] = -1;
    }
}

static void on_ctl(struct loop *l, struct loop_io *io, unsigned events)
{
    (void)l;
    (void)events;
    struct worker *w = (struct worker *)(void *)((char *)io - offsetof(struct worker, ctl));
    uint64_t n;
    if (read(w->ctl_fd, &n, sizeof n) < 0 && errno != EAGAIN)
        return;
    if (__atomic_load_n(&w->srv->draining, __ATOMIC_ACQUIRE))
        listeners_close(w);
    conn_worker_revoke_sweep(&w->cw); /* server_revoke may have asked */
    if (__atomic_load_n(&w->cw.sh->mpsrc, __ATOMIC_ACQUIRE)) {
        conn_worker_refresh(&w->cw); /* a reload's generation, which syncs the pool */
        conn_worker_mp_sync(&w->cw); /* the middle-proxy documents may have changed */
    }
}

static void on_pause_end(struct loop *l, struct loop_timer *t)
{
    (void)l;
    struct worker *w = (struct worker *)(void *)((char *)t - offsetof(struct worker, pause));
    listeners_set(w, LOOP_READ);
}

/* Stop accepting for ACCEPT_PAUSE_MS (then listeners_set resumes). */
static void pause_accepts(struct worker *w)
{
    listeners_set(w, 0);
    loop_timer_start(&w->cw.loop, &w->tq_pause, &w->pause, on_pause_end);
}

/* At the concurrency limit: leave new connections in the kernel's accept queue, as a busy
   server does, instead of accepting and closing them with nothing sent (a prober could
   tell). Rechecked every ACCEPT_PAUSE_MS. */
static bool at_limit(struct worker *w)
{
    const struct conn_shared *sh = w->cw.sh;
    if (__atomic_load_n(&sh->active, __ATOMIC_RELAXED) < sh->concurrency)
        return false;
    stats_add(&w->cw.stats, limit_pauses, 1);
    if (tg__ratelimit_allow(&w->limit_rl, w->cw.loop.now_ms))
        tg__log(NULL, TG__LOG_INFO,
                "concurrency limit %u reached: new connections wait in the accept queue",
                sh->concurrency);
    pause_accepts(w);
    return true;
}

/* The access lists, at accept and before anything is read: a refused client is closed
   unread and unanswered, as mtg does (fronting it would spend a connection to the fronting
   host on every scanner the lists exist to shed). Behind a PROXY-protocol listener the peer
   is the balancer: conn.c checks the header's client address instead. */
static bool admit(struct worker *w, int fd, const struct sockaddr *sa)
{
    struct acl *acl = __atomic_load_n(&w->srv->acl, __ATOMIC_ACQUIRE); /* a reload may set it */
    if (!acl || w->cw.gen->cfg->proxy_protocol_listener)
        return true;
    enum acl_verdict v = acl_check(acl, w->cw.acl.reader, sa);
    if (v == ACL_PASS)
        return true;
    if (v == ACL_BLOCKED)
        stats_add(&w->cw.stats, acl_blocked, 1);
    else
        stats_add(&w->cw.stats, acl_not_allowed, 1);
    close(fd);
    return false;
}

static void on_listen(struct loop *l, struct loop_io *io, unsigned events)
{
    (void)events;
    struct worker *w = (struct worker *)(void *)((char *)l - offsetof(struct worker, cw.loop));
    /* Woken for this listener alone, the worker was idle: its queue almost always holds
       just the one connection, and accepting on to EAGAIN would cost a system call for
       nothing (issue 30). One more already queued keeps the listener ready, so the next
       epoll_wait returns at once with it; a busy loop (several events) takes a burst. */
    int burst = loop_batch_size(l) > 1 ? ACCEPT_BURST : 1;
    for (int i = 0; i < burst && !loop_stopping(l) && !at_limit(w); i++) {
        struct sockaddr_storage peer;
        socklen_t plen = sizeof peer;
        int fd = accept4(io->fd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            conn_worker_refresh(&w->cw); /* admit reads the generation's config */
            if (admit(w, fd, (struct sockaddr *)&peer))
                conn_accept_peer(&w->cw, fd, (struct sockaddr *)&peer);
            continue;
        }
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            if (tg__ratelimit_allow(&w->cw.rl, l->now_ms))
                tg__log(NULL, TG__LOG_WARN, "accept: %s; pausing %d ms", strerror(errno),
                        ACCEPT_PAUSE_MS);
            pause_accepts(w);
        }
        return; /* EAGAIN, or a per-connection error such as ECONNABORTED */
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct server *s = w->srv;
    int rc = conn_worker_init(&w->cw, &s->sh);
    conn_worker_attach(&w->cw, (size_t)(w - s->w), s->sec + (size_t)(w - s->w) * GEN_LABELS_MAX,
                       GEN_LABELS_MAX);
    tg__ratelimit_init(&w->limit_rl, 0.1, 1); /* one line per 10 s at most */
    if (rc == 0)
        rc = loop_tq_add(&w->cw.loop, &w->tq_pause, ACCEPT_PAUSE_MS);
    if (rc == 0)
        rc = loop_io_add(&w->cw.loop, &w->ctl, w->ctl_fd, LOOP_READ, on_ctl);
    for (size_t i = 0; rc == 0 && i < s->cfg->nlisten; i++)
        rc = loop_io_add(&w->cw.loop, &w->lis[i], w->lfd[i], LOOP_READ, on_listen);
    pthread_mutex_lock(&s->mu);
    w->init_rc = rc;
    s->ready++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (rc == 0) {
        rc = loop_run(&w->cw.loop);
        if (rc < 0)
            tg__log(NULL, TG__LOG_ERROR, "worker: event loop failed: %s", strerror(-rc));
    }
    listeners_close(w);
    loop_io_del(&w->cw.loop, &w->ctl);
    conn_worker_cleanup(&w->cw);
    return NULL;
}

/* One listening socket for cfg->listen[i]; port overrides the configured port when set. */
static int open_listener(const struct config *cfg, const struct config_listen *l, uint16_t port,
                         uint16_t *bound)
{
    struct sockaddr_storage ss;
    memcpy(&ss, &l->addr, l->addr_len);
    if (port && ss.ss_family == AF_INET)
        ((struct sockaddr_in *)(void *)&ss)->sin_port = htons(port);
    else if (port && ss.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)(void *)&ss)->sin6_port = htons(port);
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    if (ss.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    /* accepted sockets inherit TCP_NODELAY and the keepalive settings: set them once here
       instead of five setsockopt calls per connection */
    upstream_tune(fd, cfg);
    /* [defense] mss-clamp: the SYN-ACK announces this MSS, so a client's kernel cuts its
       ClientHello (~517 bytes) into segments and no single one carries ALPN and
       signature_algorithms beside the SNI; accepted sockets inherit it (both directions).
       Not on a loopback listener unless mss-clamp-loopback (config_listen_clamp). */
    int mss = (int)config_listen_clamp(cfg, l);
    if (mss && setsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, sizeof mss) < 0) {
        int err = -errno;
        tg__log(NULL, TG__LOG_ERROR, "listen %s: [defense] mss-clamp = %d: setsockopt: %s",
                l->text, mss, strerror(errno));
        close(fd);
        return err;
    }
    socklen_t len = l->addr_len;
    if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 4096) < 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    *bound = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)(void *)&ss)->sin_port
                                           : ((struct sockaddr_in6 *)(void *)&ss)->sin6_port);
    return fd;
}

static int open_listeners(struct server *s)
{
    const struct config *cfg = s->cfg;
    for (size_t i = 0; i < cfg->nlisten; i++) {
        for (size_t k = 0; k < s->nw; k++) {
            uint16_t bound = 0;
            int fd = open_listener(cfg, &cfg->listen[i], s->port[i], &bound);
            if (fd < 0) {
                tg__log(NULL, TG__LOG_ERROR, "listen %s: %s", cfg->listen[i].text, strerror(-fd));
                return fd;
            }
            s->w[k].lfd[i] = fd;
            s->port[i] = bound;
        }
        if (cfg->mss_clamp && !config_listen_clamp(cfg, &cfg->listen[i]))
            tg__log(NULL, TG__LOG_INFO,
                    "listen %s: [defense] mss-clamp left off: a loopback listener answers "
                    "only this host (a local front's listener is what clients' kernels see); "
                    "mss-clamp-loopback = true applies it",
                    cfg->listen[i].text);
    }
    return 0;
}

/* Split the secrets into FakeTLS keys and plain obfs2 candidates. */
/* The endpoints that reach our listeners (bound ports), for the fronting loop check. */
static int self_init(struct server *s)
{
    const struct config *cfg = s->cfg;
    struct sockaddr_storage ls[CONFIG_MAX_LISTEN];
    for (size_t i = 0; i < cfg->nlisten; i++) {
        memcpy(&ls[i], &cfg->listen[i].addr, sizeof ls[i]);
        uint16_t port = htons(s->port[i]);
        if (ls[i].ss_family == AF_INET)
            ((struct sockaddr_in *)(void *)&ls[i])->sin_port = port;
        else
            ((struct sockaddr_in6 *)(void *)&ls[i])->sin6_port = port;
    }
    int rc = selfaddr_init(&s->sh.self, ls, cfg->nlisten);
    if (rc == -ENOMEM)
        return rc;
    if (rc < 0) { /* without the interface list, the listeners' own addresses still count */
        tg__log(NULL, TG__LOG_WARN,
                "getifaddrs: %s; only the bind-to addresses count as "
                "this proxy's own when checking the fronting host",
                strerror(-rc));
        if ((rc = selfaddr_build(&s->sh.self, ls, cfg->nlisten, NULL)) < 0)
            return rc;
    }
    upstream_check_self(&s->sh, cfg);
    return 0;
}

/* [defense.*list]: read the list files now (a bad one stops the start, with file:line). */
static int acl_start(struct server *s)
{
    char err[CONFIG_ERR_MAX];
    int rc = acl_new(s->cfg, s->nw, &s->acl, err, sizeof err);
    if (rc < 0)
        tg__log(NULL, TG__LOG_ERROR, "%s", err);
    s->sh.acl = s->acl;
    return rc;
}

static size_t worker_count(const struct config *cfg)
{
    long n = cfg->workers ? (long)cfg->workers : sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > CONFIG_MAX_WORKERS ? CONFIG_MAX_WORKERS : (size_t)n;
}

uint64_t server_fds_needed(const struct config *cfg, size_t nworkers)
{
    if (nworkers == 0)
        nworkers = worker_count(cfg);
    return (uint64_t)FDS_PER_CONN * cfg->concurrency + nworkers * (cfg->nlisten + FDS_PER_WORKER) +
           FDS_SLACK;
}

/* Raise the open-files soft limit to the hard one (each connection holds FDS_PER_CONN
   descriptors), and warn when even that cannot hold `concurrency` connections: accepts
   would fail with EMFILE and pause, fronting would fail for lack of a socket. */
static void nofile_raise(const struct config *cfg, size_t nw)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    rlim_t before = rl.rlim_cur;
    if (rl.rlim_cur != rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0 && rl.rlim_max == RLIM_INFINITY &&
            before < NOFILE_FALLBACK) {
            rl.rlim_cur = NOFILE_FALLBACK; /* "unlimited" is above fs.nr_open: ask less */
            (void)setrlimit(RLIMIT_NOFILE, &rl);
        }
        if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
            rl.rlim_cur = before;
    }
    uint64_t need = server_fds_needed(cfg, nw);
    if (rl.rlim_cur != before)
        tg__log(NULL, TG__LOG_INFO, "open files limit raised from %llu to %llu",
                (unsigned long long)before, (unsigned long long)rl.rlim_cur);
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need)
        tg__log(NULL, TG__LOG_WARN,
                "open files limit %llu (hard limit %llu) cannot hold concurrency = %u "
                "connections (about %llu descriptors: %d per connection plus listeners): "
                "accepts will pause and fronting will fail under load; raise the hard limit "
                "(ulimit -Hn, systemd LimitNOFILE=) or lower concurrency",
                (unsigned long long)rl.rlim_cur,
                (unsigned long long)(rl.rlim_max == RLIM_INFINITY ? rl.rlim_cur : rl.rlim_max),
                cfg->concurrency, (unsigned long long)need, FDS_PER_CONN);
}

/* Start every worker thread and wait until each has initialised. 0 or -errno. */
static int start_workers(struct server *s)
{
    int rc = 0;
    for (size_t k = 0; k < s->nw; k++) {
        s->w[k].srv = s;
        if (pthread_create(&s->w[k].th, NULL, worker_main, &s->w[k]) != 0) {
            rc = -EAGAIN;
            break;
        }
        s->w[k].started = true;
    }
    pthread_mutex_lock(&s->mu);
    size_t want = 0;
    for (size_t k = 0; k < s->nw; k++)
        want += s->w[k].started;
    while (s->ready < want)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    for (size_t k = 0; k < s->nw && rc == 0; k++)
        rc = s->w[k].started ? s->w[k].init_rc : rc;
    return rc;
}

/* The state file's entries, each PERIOD_END checked against its secret's quota-reset (a
   later one would keep a spent quota from resetting): a count, or -errno with err filled. */
static int state_read(const struct config *cfg, struct quotafile_entry *e, char *err, size_t errlen)
{
    const char *path = cfg->limits_state_file;
    int n = quotafile_load(path, e, QUOTAFILE_MAX_ENTRIES, err, errlen);
    int64_t now = tg__wall_s();
    for (int k = 0; k < n; k++)
        for (size_t i = 0; i < cfg->nsecrets; i++)
            if (strcmp(cfg->secrets[i].label, e[k].label) == 0 && cfg->secrets[i].limits.quota &&
                quotafile_check_period(path, &e[k], now, cfg->secrets[i].limits.quota_reset_s, err,
                                       errlen) != 0)
                return -EINVAL;
    return n;
}

/* [limits] state-file at start: restore each secret's quota use by label. A missing file is
   a first start; a bad one is a warning, and every quota starts from zero. */
static void state_load(struct server *s)
{
    const struct gen *g = s->sh.gen; /* no worker yet */
    const char *path = g->cfg->limits_state_file;
    if (!path[0])
        return;
    char err[CONFIG_ERR_MAX], bad[CONFIG_FILE_MAX + 8];
    struct quotafile_entry *e = tg__calloc(QUOTAFILE_MAX_ENTRIES, sizeof *e);
    int n = e ? state_read(g->cfg, e, err, sizeof err) : -ENOMEM;
    if (n == -ENOENT)
        tg__log(NULL, TG__LOG_INFO, "quota state: %s does not exist yet; quotas start from zero",
                path);
    else if (n < 0)
        tg__log(NULL, TG__LOG_WARN,
                "quota state: %s; every quota starts from zero (the file is kept as %s.bad "
                "and rewritten at the next save)",
                n == -ENOMEM ? "out of memory" : err, path);
    if (n == -EINVAL && snprintf(bad, sizeof bad, "%s.bad", path) < (int)sizeof bad)
        (void)rename(path, bad); /* for the operator to look at; best effort */
    size_t restored = 0;
    for (int k = 0; k < n; k++)
        for (size_t i = 0; i < g->cfg->nsecrets; i++)
            if (strcmp(g->cfg->secrets[i].label, e[k].label) == 0 &&
                g->cfg->secrets[i].limits.quota) {
                limits_quota_set(g->limits, i, e[k].used, e[k].period_end);
                restored++;
            }
    if (n >= 0)
        tg__log(NULL, TG__LOG_INFO, "quota state: %zu of %d entries restored from %s", restored, n,
                path);
    tg__free(e);
}

/* Write the quota use of the current generation's secrets to its state-file (if any). */
static void state_save(struct server *s)
{
    struct gen *g = conn_shared_gen(&s->sh);
    const struct config *cfg = g->cfg;
    struct quotafile_entry *e = NULL;
    size_t n = 0;
    if (cfg->limits_state_file[0] && (e = tg__calloc(cfg->nsecrets + 1, sizeof *e))) {
        for (size_t i = 0; i < cfg->nsecrets; i++)
            if (limits_quota_get(g->limits, i, &e[n].used, &e[n].period_end)) {
                tg__strlcpy(e[n].label, cfg->secrets[i].label, sizeof e[n].label);
                n++;
            }
        char err[CONFIG_ERR_MAX];
        if (quotafile_save(cfg->limits_state_file, e, n, err, sizeof err) < 0)
            tg__log(NULL, TG__LOG_WARN, "quota state: %s", err);
    }
    tg__free(e);
    gen_unref(g);
}

static void workers_wake(struct server *s, const char *why);

/* mpsource's changed(): every worker rebuilds its pool from the new documents. */
static void mp_changed(void *ud)
{
    struct server *s = ud;
    if (__atomic_load_n(&s->mp_wake, __ATOMIC_ACQUIRE))
        workers_wake(s, "middle-proxy documents");
}

/* [middle-proxy]: the documents' source, seeded now (files, stored copies), so the workers
   build their pools from it at once. */
static int mp_source_start(struct server *s, const struct config *cfg)
{
    char err[CONFIG_ERR_MAX];
    struct mpsource *src = NULL;
    int rc = mpsource_new(cfg, mp_changed, s, &src, err, sizeof err);
    if (rc < 0)
        tg__log(NULL, TG__LOG_ERROR, "%s", err);
    else
        __atomic_store_n(&s->sh.mpsrc, src, __ATOMIC_RELEASE);
    return rc;
}

int server_start(const struct config *cfg, struct server **out)
{
    *out = NULL;
    if (crypto_init() < 0)
        return -EIO;
    struct server *s = tg__calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->cfg = cfg;
    s->nw = worker_count(cfg);
    nofile_raise(cfg, s->nw);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_mutex_init(&s->reload_mu, NULL);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    s->start_time = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    s->last_ok_time = s->start_time;
    s->w = tg__calloc(s->nw, sizeof *s->w);
    s->sec = tg__calloc(s->nw * GEN_LABELS_MAX, sizeof *s->sec);
    s->last_reload_ok = true;
    int rc = s->w && s->sec ? 0 : -ENOMEM;
    for (size_t k = 0; s->w && k < s->nw; k++) { /* before anything can fail: server_stop */
        for (size_t i = 0; i < CONFIG_MAX_LISTEN; i++)
            s->w[k].lfd[i] = -1;
        s->w[k].ctl_fd = -1;
    }
    for (size_t k = 0; rc == 0 && k < s->nw; k++)
        if ((s->w[k].ctl_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
            rc = -errno;
    if (rc == 0)
        rc = conn_shared_init(&s->sh, s->cfg);
    if (rc == 0)
        rc = acl_start(s);
    if (rc == 0)
        state_load(s);
    if (rc == 0)
        rc = open_listeners(s);
    if (rc == 0)
        rc = self_init(s);
    if (rc == 0 && cfg->mp.enabled)
        rc = mp_source_start(s, cfg);
    if (rc == 0)
        rc = start_workers(s);
    if (rc == 0) { /* from here a change wakes them; one wake covers a change during init */
        __atomic_store_n(&s->mp_wake, true, __ATOMIC_RELEASE);
        if (s->sh.mpsrc)
            workers_wake(s, "middle-proxy documents");
    }
    if (rc == 0 && cfg->prometheus.enabled)
        rc = metrics_start(s, &s->metrics);
    if (rc == 0 && cfg->statsd.enabled)
        rc = statsd_start(s, &s->statsd);
    if (rc == 0 && cfg->api.enabled)
        rc = api_start(s, &s->api);
    s->state_ready = rc == 0; /* a start that failed never overwrites the state file */
    if (rc < 0) {
        server_stop(s);
        return rc;
    }
    *out = s;
    return 0;
}

uint16_t server_port(const struct server *s, size_t i)
{
    return i < s->cfg->nlisten ? s->port[i] : 0;
}

void server_stats(const struct server *s, struct stats *out)
{
    memset(out, 0, sizeof *out);
    for (size_t k = 0; k < s->nw; k++)
        stats_sum(out, &s->w[k].cw.stats);
}

size_t server_workers(const struct server *s)
{
    return s->nw;
}

const struct config *server_config(const struct server *s)
{
    return s->cfg;
}

void server_worker_stats(const struct server *s, size_t k, struct stats *out)
{
    memset(out, 0, sizeof *out);
    if (k < s->nw)
        stats_sum(out, &s->w[k].cw.stats);
}

size_t server_secret_count(const struct server *s)
{
    return gen_labels_count(&s->sh.labels);
}

const char *server_secret_label(const struct server *s, size_t i)
{
    return gen_labels_name(&s->sh.labels, (uint32_t)i);
}

void server_secret_stats(const struct server *s, size_t i, struct stats_secret *out)
{
    memset(out, 0, sizeof *out);
    for (size_t k = 0; i < GEN_LABELS_MAX && k < s->nw; k++)
        stats_secret_sum(out, &s->sec[k * GEN_LABELS_MAX + i]);
}

void server_fleet_quota_reset(struct server *s, uint32_t slot)
{
    fleet_quota_reset(s->sh.fleet, slot);
}

size_t server_secret_seen(const struct server *s, size_t i, uint32_t window_s,
                          struct seen_addr *out, size_t max, int64_t *last)
{
    return seen_get(s->sh.seen, (uint32_t)i, tg__wall_s(), window_s ? window_s : 3600, out, max,
                    last);
}

void server_dc_stats(const struct server *s, size_t slot, struct stats_dc *out)
{
    memset(out, 0, sizeof *out);
    for (size_t k = 0; slot < STATS_DC_SLOTS && k < s->nw; k++)
        stats_dc_sum(out, &s->w[k].cw.dcs[slot]);
}

void server_replay_counts(const struct server *s, uint64_t *inserts, uint64_t *replays,
                          uint64_t *capacity)
{
    struct antireplay_stats st;
    antireplay_get_stats(s->sh.replay, &st); /* zeros when disabled */
    *inserts = st.inserts;
    *replays = st.replays;
    *capacity = st.capacity;
}

uint64_t server_replay_live(const struct server *s)
{
    return antireplay_live(s->sh.replay, tg__now_ms() / 1000); /* the workers' clock */
}

double server_start_time(const struct server *s)
{
    return s->start_time;
}

/* Wake every worker through its control eventfd (on_ctl). */
static void workers_wake(struct server *s, const char *why)
{
    uint64_t one = 1;
    for (size_t k = 0; k < s->nw; k++)
        if (s->w[k].started && write(s->w[k].ctl_fd, &one, sizeof one) < 0)
            tg__log(NULL, TG__LOG_WARN, "%s: cannot wake worker %zu: %s", why, k, strerror(errno));
}

void server_revoke(struct server *s, const char *label)
{
    struct gen *g = conn_shared_gen(&s->sh);
    uint64_t seq = g->seq;
    gen_unref(g);
    uint32_t n = gen_labels_count(&s->sh.labels);
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(gen_labels_name(&s->sh.labels, i), label) == 0)
            conn_shared_revoke(&s->sh, i, seq);
    workers_wake(s, "revoke");
}

void server_drain(struct server *s)
{
    __atomic_store_n(&s->draining, true, __ATOMIC_RELEASE);
    (void)sdnotify_send("STOPPING=1\nSTATUS=draining: accepting stopped, open connections run on");
    workers_wake(s, "drain");
}

uint32_t server_active(const struct server *s)
{
    return __atomic_load_n(&s->sh.active, __ATOMIC_RELAXED);
}

struct mpsource *server_mpsource(const struct server *s)
{
    return __atomic_load_n(&s->sh.mpsrc, __ATOMIC_ACQUIRE); /* a reload may set it */
}

struct acl *server_acl(const struct server *s)
{
    return __atomic_load_n(&s->acl, __ATOMIC_ACQUIRE); /* a reload may set it */
}

struct tlsfront *server_tlsfront(const struct server *s)
{
    return s->sh.tlsfront; /* set before the workers start, freed after they stop */
}

uint16_t server_metrics_port(const struct server *s)
{
    return metrics_port(s->metrics);
}

uint16_t server_api_port(const struct server *s)
{
    return api_port(s->api);
}

void server_stop(struct server *s)
{
    if (!s)
        return;
    api_stop(s->api); /* first: it reloads and reads the workers' counters */
    s->api = NULL;
    statsd_stop(s->statsd); /* before the workers go: both read their counters */
    metrics_stop(s->metrics);
    s->statsd = NULL;
    s->metrics = NULL;
    for (size_t k = 0; s->w && k < s->nw; k++)
        if (s->w[k].started)
            loop_stop(&s->w[k].cw.loop);
    for (size_t k = 0; s->w && k < s->nw; k++) {
        if (s->w[k].started)
            pthread_join(s->w[k].th, NULL);
        for (size_t i = 0; i < CONFIG_MAX_LISTEN; i++)
            if (s->w[k].lfd[i] >= 0)
                close(s->w[k].lfd[i]);
        if (s->w[k].ctl_fd >= 0)
            close(s->w[k].ctl_fd);
    }
    if (s->state_ready) /* every connection is closed: its bytes are charged */
        state_save(s);
    mpsource_free(s->sh.mpsrc); /* after the workers: they read its documents */
    s->sh.mpsrc = NULL;
    conn_shared_cleanup(&s->sh);
    acl_free(s->acl); /* after the workers: they were its readers */
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->reload_mu);
    tg__free(s->w);
    tg__free(s->sec);
    tg__free(s);
}

/* ---- reload (SIGHUP) ---- */

/* Settings a running server cannot change: a reload keeps the running value and says so. */
#define RESTART_KEY(name, field)                                                                   \
    {                                                                                              \
        name, offsetof(struct config, field), sizeof(((struct config *)0)->field)                  \
    }
static const struct {
    const char *name;
    size_t off, len;
} restart_keys[] = {
    RESTART_KEY("workers", workers),
    RESTART_KEY("concurrency", concurrency),
    RESTART_KEY("buffer-size", buffer_size),
    RESTART_KEY("bulk-budget", bulk_budget),
    RESTART_KEY("[defense] mss-clamp", mss_clamp),
    RESTART_KEY("[defense] mss-clamp-loopback", mss_clamp_loopback),
    RESTART_KEY("[defense.anti-replay]", antireplay),
    RESTART_KEY("[defense.doppelganger]", doppel),
    /* the service is made at start or not at all, and reads its file once (tlsfront.h);
       a reload applies refresh, connections and timeout */
    RESTART_KEY("[defense.tls-front] enabled", tls_front.enabled),
    RESTART_KEY("[defense.tls-front] state-file", tls_front.state_file),
    RESTART_KEY("[stats.prometheus]", prometheus),
    RESTART_KEY("[stats.statsd]", statsd),
    RESTART_KEY("[network] dns / doh-ip", dns),
    RESTART_KEY("[network.timeout] http", timeout.http_ms),
    RESTART_KEY("[fleet]", fleet),
    RESTART_KEY("[api]", api),
};

static bool same_listeners(const struct config *a, const struct config *b)
{
    if (a->nlisten != b->nlisten)
        return false;
    for (size_t i = 0; i < a->nlisten; i++)
        if (a->listen[i].addr_len != b->listen[i].addr_len ||
            memcmp(&a->listen[i].addr, &b->listen[i].addr, a->listen[i].addr_len) != 0)
            return false;
    return true;
}

static void reload_count(struct server *s, bool ok)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double now = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    __atomic_add_fetch(&s->reloads[ok], 1, __ATOMIC_RELAXED);
    __atomic_store_n(&s->last_reload_ok, ok, __ATOMIC_RELAXED);
    if (ok)
        __atomic_store(&s->last_ok_time, &now, __ATOMIC_RELAXED);
}

/* [defense.*list] from a reloaded file: rebuilt from its files (a bad one refuses the
   reload, the running lists stay); the first list a reload enables creates the acl. */
static int acl_reload(struct server *s, const struct config *cfg, char *err, size_t errlen)
{
    if (s->acl)
        return acl_apply(s->acl, cfg, err, errlen);
    struct acl *acl = NULL;
    int rc = acl_new(cfg, s->nw, &acl, err, errlen);
    if (rc == 0 && acl) {
        __atomic_store_n(&s->sh.acl, acl, __ATOMIC_RELEASE);
        __atomic_store_n(&s->acl, acl, __ATOMIC_RELEASE);
    }
    return rc;
}

/* A warning for each restart-only key the applied file changed (its running value stays). */
static void warn_restart_only(const struct config *run, const struct config *cfg)
{
    for (size_t i = 0; i < sizeof restart_keys / sizeof restart_keys[0]; i++)
        if (memcmp((const char *)run + restart_keys[i].off, (const char *)cfg + restart_keys[i].off,
                   restart_keys[i].len) != 0)
            tg__log(NULL, TG__LOG_WARN,
                    "reload: %s changed in %s; it takes effect at the next restart (the "
                    "running value stays)",
                    restart_keys[i].name, cfg->source);
}

int server_reload(struct server *s, struct config *cfg, char *err, size_t errlen)
{
    const struct config *run = s->cfg;
    int rc = config_validate(cfg, err, errlen);
    if (rc == 0 && !same_listeners(run, cfg)) {
        snprintf(err, errlen,
                 "%s: bind-to differs from the running listeners; a reload cannot add or "
                 "remove listen addresses (restart tgproxy to change bind-to)",
                 cfg->source);
        rc = -EINVAL;
    }
    if (rc == 0)
        rc = acl_reload(s, cfg, err, errlen);
    bool mp_new = false; /* the first [middle-proxy] a reload brings */
    if (rc == 0 && cfg->mp.enabled && !s->sh.mpsrc) {
        if ((rc = mp_source_start(s, cfg)) < 0)
            snprintf(err, errlen, "%s: [middle-proxy]: cannot start its updater", cfg->source);
        mp_new = rc == 0;
    }
    if (rc == 0) {
        rc = conn_shared_publish(&s->sh, cfg); /* cfg is the generation's from here */
        if (rc < 0)
            snprintf(err, errlen, "%s: out of memory", cfg->source);
    }
    if (rc == 0) {
        struct gen *g = conn_shared_gen(&s->sh);
        warn_restart_only(run, g->cfg);
        tg__logger_set_level(tg__log_default(), g->cfg->log_level);
        server_scrub_secrets(g->cfg);
        upstream_check_self(&s->sh, g->cfg);
        if (g->cfg->mp.enabled && !mp_new)
            mpsource_apply(s->sh.mpsrc, g->cfg); /* new sources, files re-read by the load */
        gen_unref(g);
        if (s->sh.mpsrc)
            workers_wake(s, "reload"); /* pools follow the new [middle-proxy] settings now */
    }
    reload_count(s, rc == 0);
    return rc;
}

void server_scrub_secrets(const struct config *cfg)
{
    char forms[SECRET_FORMS_MAX][SECRET_FORM_CAP];
    for (size_t i = 0; i < cfg->nsecrets; i++) {
        size_t n = secret_scrub_forms(&cfg->secrets[i].secret, forms);
        int rc = 0;
        for (size_t f = 0; f < n; f++) {
            int r = tg__logger_add_secret(tg__log_default(), forms[f], strlen(forms[f]));
            rc = rc ? rc : r;
        }
        if (rc != 0) /* names the label only: the key itself is what must not be logged */
            tg__log(NULL, TG__LOG_ERROR,
                    "secret '%s': cannot add it to the log's scrub list (%s); a log line "
                    "quoting it would not be redacted",
                    cfg->secrets[i].label, strerror(-rc));
    }
    crypto_wipe(forms, sizeof forms);
}

/* A reload's loader warnings go to the log, each once per run: the start already said it
   (cli.c), so a deprecated key is not repeated at every SIGHUP. */
static void reload_warn(void *user, const char *msg)
{
    (void)user;
    if (config_warning_first(msg))
        tg__log(NULL, TG__LOG_WARN, "%s", msg);
}

static int reload_file(struct server *s, const char *path, const char *origin, char *err,
                       size_t errlen);

/* systemd: READY=1 with a one-line STATUS (sdnotify.h). */
static void notify_ready(struct server *s)
{
    struct gen *g = conn_shared_gen(&s->sh);
    char msg[160];
    snprintf(msg, sizeof msg,
             "READY=1\nSTATUS=serving %zu secret(s) on %zu listener(s), generation %llu",
             g->cfg->nsecrets, s->cfg->nlisten, (unsigned long long)g->seq);
    gen_unref(g);
    (void)sdnotify_send(msg);
}

int server_reload_file_locked(struct server *s, const char *path, const char *origin, char *err,
                              size_t errlen)
{
    (void)sdnotify_reloading();
    int rc = reload_file(s, path, origin, err, errlen);
    notify_ready(s); /* applied or refused, the proxy serves on */
    return rc;
}

static int reload_file(struct server *s, const char *path, const char *origin, char *err,
                       size_t errlen)
{
    struct config cfg;
    config_init(&cfg);
    int rc = apistore_config_load(&cfg, path, err, errlen, reload_warn, NULL);
    if (rc == 0)
        rc = server_reload(s, &cfg, err, errlen);
    else
        reload_count(s, false);
    config_cleanup(&cfg);
    api_note_reload(s->api, rc == 0, origin, rc == 0 ? NULL : err);
    if (rc != 0) {
        tg__log(NULL, TG__LOG_ERROR, "reload refused, the running configuration stays: %s (%s)",
                err, origin);
        return rc;
    }
    struct gen *g = conn_shared_gen(&s->sh);
    tg__log(NULL, TG__LOG_INFO,
            "reload: %s applied (%s; generation %llu, secrets: %zu); open connections keep the "
            "configuration they started with",
            path, origin, (unsigned long long)g->seq, g->cfg->nsecrets);
    gen_unref(g);
    return 0;
}

int server_reload_file(struct server *s, const char *path)
{
    char err[CONFIG_ERR_MAX];
    server_reload_lock(s);
    int rc = server_reload_file_locked(s, path, "SIGHUP", err, sizeof err);
    server_reload_unlock(s);
    return rc;
}

void server_reload_lock(struct server *s)
{
    pthread_mutex_lock(&s->reload_mu);
}

void server_reload_unlock(struct server *s)
{
    pthread_mutex_unlock(&s->reload_mu);
}

struct gen *server_gen(struct server *s)
{
    return conn_shared_gen(&s->sh);
}

bool server_draining(const struct server *s)
{
    return __atomic_load_n(&s->draining, __ATOMIC_ACQUIRE);
}

void server_reload_counts(const struct server *s, uint64_t *ok, uint64_t *failed, bool *last_ok,
                          double *last_ok_time)
{
    *ok = __atomic_load_n(&s->reloads[1], __ATOMIC_RELAXED);
    *failed = __atomic_load_n(&s->reloads[0], __ATOMIC_RELAXED);
    *last_ok = __atomic_load_n(&s->last_reload_ok, __ATOMIC_RELAXED);
    __atomic_load(&s->last_ok_time, last_ok_time, __ATOMIC_RELAXED);
}

/* The next signal of set; meanwhile the quota state is saved every state-interval. */
static int next_signal(struct server *s, const sigset_t *set)
{
    for (;;) {
        struct gen *g = conn_shared_gen(&s->sh);
        uint32_t every = g->cfg->limits_state_file[0] ? g->cfg->limits_state_interval_ms : 0;
        gen_unref(g);
        int sig = 0;
        if (!every) {
            if (sigwait(set, &sig) == 0)
                return sig;
            continue;
        }
        struct timespec ts = {.tv_sec = (time_t)(every / 1000),
                              .tv_nsec = (long)(every % 1000) * 1000000L};
        if ((sig = sigtimedwait(set, NULL, &ts)) > 0)
            return sig;
        if (errno == EAGAIN)
            state_save(s);
    }
}

/* After the first SIGINT/SIGTERM: stop accepting and wait, up to the current generation's
   drain-timeout, for open connections to end; a second signal ends the wait at once.
   server_stop closes whatever is still open. */
static void drain(struct server *s, const sigset_t *set, int sig)
{
    struct gen *g = conn_shared_gen(&s->sh);
    uint64_t timeout_ms = g->cfg->drain_timeout_ms;
    gen_unref(g);
    server_drain(s);
    tg__log(NULL, TG__LOG_INFO,
            "signal %d: shutting down: accepting stopped, %u connection(s) open; waiting up to "
            "%.1f s for them to end (drain-timeout; a second signal stops at once)",
            sig, server_active(s), (double)timeout_ms / 1000);
    uint64_t end = tg__now_ms() + timeout_ms;
    for (uint64_t now = tg__now_ms(); server_active(s) && now < end; now = tg__now_ms()) {
        uint64_t wait = end - now < DRAIN_POLL_MS ? end - now : DRAIN_POLL_MS;
        struct timespec ts = {.tv_sec = (time_t)(wait / 1000),
                              .tv_nsec = (long)(wait % 1000) * 1000000L};
        int got = sigtimedwait(set, NULL, &ts);
        if (got == SIGHUP)
            tg__log(NULL, TG__LOG_INFO, "SIGHUP while shutting down: not reloading");
        else if (got > 0) {
            tg__log(NULL, TG__LOG_INFO, "signal %d again: closing %u connection(s) now", got,
                    server_active(s));
            return;
        }
    }
    uint32_t left = server_active(s);
    if (left)
        tg__log(NULL, TG__LOG_INFO, "drain-timeout reached: closing %u connection(s)", left);
    else
        tg__log(NULL, TG__LOG_INFO, "every connection ended: shutting down");
}

int server_run(const struct config *cfg, const char *path)
{
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    /* Blocked before the workers exist, so they inherit the mask and only sigwait sees it. */
    pthread_sigmask(SIG_BLOCK, &set, &old);
    signal(SIGPIPE, SIG_IGN);
    tg__logger_set_level(tg__log_default(), cfg->log_level);
    struct server *s = NULL;
    int rc = server_start(cfg, &s);
    if (rc == 0) {
        for (size_t i = 0; i < cfg->nlisten; i++)
            tg__log(NULL, TG__LOG_INFO, "listening on %s (port %u) with %zu workers, fast-mode %s",
                    cfg->listen[i].text, (unsigned)s->port[i], s->nw,
                    cfg->fast_mode ? "on" : "off");
        notify_ready(s);
        int sig = 0;
        while ((sig = next_signal(s, &set)) == SIGHUP) {
            if (path)
                server_reload_file(s, path);
            else
                tg__log(NULL, TG__LOG_INFO,
                        "SIGHUP: nothing to re-read (simple-run has no configuration file)");
        }
        drain(s, &set, sig);
        server_stop(s);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}
