/*
 * bench async: 10,000 sendMessage calls against a local mock Bot API server, the same run
 * measuring
 *  - the asynchronous client (tgbot/async.h) on one thread, its built-in epoll loop, with
 *    1, 16 and 256 calls in flight (connections: as many as in flight, at most 64);
 *  - the blocking API over the lean transport on 1, 8 and 64 threads (a ctx each);
 *  - the floor: a raw blocking socket writing the request bytes and reading the answer (its
 *    length known), no HTTP or JSON work, one call at a time.
 * Each row: calls per second (wall), client CPU per call (user + system of the client
 * process: the server runs in a process of its own), allocations per call once warm (the
 * malloc hook, client process) and the client's peak RSS. Every scenario runs in a fresh
 * child process after 1,000 warm-up calls, so its peak RSS is its own.
 *
 * The server: a child process with two epoll threads (SO_REUSEPORT listeners) answering
 * fixtures/botapi/sendmessage_response.json with keep-alive; it allocates nothing per
 * request. Real clients' behaviour: every call is a full sendMessage (params encoded, the
 * answer's Message decoded).
 *
 * Environment: TGKIT_BENCH_CALLS overrides the 10,000 calls (e.g. 2000 for a smoke run).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "core/alloc.h"
#include "core/allochook.h"
#include "core/clock.h"
#include "tgbot/tgbot.h"

#define TOKEN  "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_"
#define BODY   "{\"chat_id\":42,\"text\":\"hello\"}"
#define WARMUP 1000
#define SCONN  512 /* server connections per thread at most */

static char response[2048];
static size_t response_len;
static uint16_t port;

/* ---- the server (its own process) ---- */

struct sc {
    int fd;
    size_t have;
    char buf[8192];
};

/* Answer every whole request in c->buf; -1 to close. */
static int serve(struct sc *c)
{
    for (;;) {
        char *end = c->have ? memmem(c->buf, c->have, "\r\n\r\n", 4) : NULL;
        if (!end)
            return c->have == sizeof c->buf ? -1 : 0;
        size_t head = (size_t)(end - c->buf) + 4, clen = 0;
        for (char *l = c->buf; l && l < end; l = memchr(l, '\n', (size_t)(end - l))) {
            l += (*l == '\n');
            if (strncasecmp(l, "Content-Length:", 15) == 0)
                clen = strtoul(l + 15, NULL, 10);
        }
        if (c->have < head + clen)
            return 0;
        if (write(c->fd, response, response_len) != (ssize_t)response_len)
            return -1;
        memmove(c->buf, c->buf + head + clen, c->have - head - clen);
        c->have -= head + clen;
    }
}

static void *server_thread(void *p)
{
    int lfd = (int)(intptr_t)p;
    int ep = epoll_create1(0);
    static _Thread_local struct sc conns[SCONN];
    for (int i = 0; i < SCONN; i++)
        conns[i].fd = -1;
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = UINT32_MAX};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    for (;;) {
        struct epoll_event evs[64];
        int n = epoll_wait(ep, evs, 64, -1);
        for (int i = 0; i < n; i++) {
            uint32_t k = evs[i].data.u32;
            if (k == UINT32_MAX) {
                int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
                int slot = 0;
                while (fd >= 0 && slot < SCONN && conns[slot].fd >= 0)
                    slot++;
                if (fd < 0 || slot == SCONN) {
                    if (fd >= 0)
                        close(fd);
                    continue;
                }
                int one = 1;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                conns[slot].fd = fd;
                conns[slot].have = 0;
                struct epoll_event ce = {.events = EPOLLIN, .data.u32 = (uint32_t)slot};
                epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ce);
                continue;
            }
            struct sc *c = &conns[k];
            ssize_t r = read(c->fd, c->buf + c->have, sizeof c->buf - c->have);
            if (r > 0) {
                c->have += (size_t)r;
                if (serve(c) == 0)
                    continue;
            } else if (r < 0 && errno == EAGAIN) {
                continue;
            }
            epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
            close(c->fd);
            c->fd = -1;
        }
    }
    return NULL;
}

static int listener(uint16_t want, uint16_t *got)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(want)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 1024) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
        perror("bench_bot_async: server");
        exit(1);
    }
    *got = ntohs(sa.sin_port);
    return fd;
}

static pid_t server_start(void)
{
    uint16_t p2;
    int l1 = listener(0, &port), l2 = listener(port, &p2);
    pid_t pid = fork();
    if (pid == 0) {
        pthread_t t;
        pthread_create(&t, NULL, server_thread, (void *)(intptr_t)l2);
        server_thread((void *)(intptr_t)l1);
        _exit(0);
    }
    close(l1);
    close(l2);
    return pid;
}

/* ---- measurements ---- */

struct row {
    char name[48];
    double calls_per_s;
    double cpu_us_per_call;
    double allocs_per_call;
    long peak_rss_kb;
    uint32_t connections;
};

struct phase {
    uint64_t t0_ns, allocs0;
    struct rusage ru0;
};

static double tv_us(struct timeval tv)
{
    return (double)tv.tv_sec * 1e6 + (double)tv.tv_usec;
}

static void phase_start(struct phase *p)
{
    getrusage(RUSAGE_SELF, &p->ru0);
    p->allocs0 = tg__allochook_allocs();
    p->t0_ns = tg__now_ns();
}

static void phase_end(const struct phase *p, int calls, struct row *r)
{
    uint64_t t1 = tg__now_ns();
    uint64_t allocs = tg__allochook_allocs() - p->allocs0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = tv_us(ru.ru_utime) - tv_us(p->ru0.ru_utime) + tv_us(ru.ru_stime) -
                 tv_us(p->ru0.ru_stime);
    r->calls_per_s = calls / ((double)(t1 - p->t0_ns) / 1e9);
    r->cpu_us_per_call = cpu / calls;
    r->allocs_per_call = tg__allochook_active() ? (double)allocs / calls : -1;
    r->peak_rss_kb = ru.ru_maxrss;
}

static char base_url[64];

static tg_bot *bot_open(void)
{
    tg_bot *bot = tg_bot_new(TOKEN, &(tg_bot_options){.base_url = base_url,
                                                       .transport = tg_transport_lean(),
                                                       .log_level = TG_LOG_ERROR});
    if (!bot) {
        fprintf(stderr, "bench_bot_async: %s\n", tg_bot_new_errmsg());
        exit(1);
    }
    return bot;
}

/* raw socket floor */
static void run_raw(int calls, struct row *r)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        exit(1);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char req[512], buf[2048];
    size_t rl = (size_t)snprintf(req, sizeof req,
                                 "POST /bot%s/sendMessage HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n"
                                 "User-Agent: tgbot/%s\r\nContent-Type: application/json\r\n"
                                 "Content-Length: %zu\r\n\r\n%s",
                                 TOKEN, (unsigned)port, tg_version(), strlen(BODY), BODY);
    struct phase ph;
    for (int i = -WARMUP; i < calls; i++) {
        if (i == 0)
            phase_start(&ph);
        if (write(fd, req, rl) != (ssize_t)rl)
            exit(1);
        for (size_t got = 0; got < response_len;) {
            ssize_t n = read(fd, buf, sizeof buf);
            if (n <= 0)
                exit(1);
            got += (size_t)n;
        }
    }
    phase_end(&ph, calls, r);
    r->connections = 1;
    close(fd);
}

/* the async client on this thread */
struct adrv {
    tg_async *a;
    int submitted, done, target, failed;
    tg_send_message_params p;
};

static void on_sent(tg_async *a, const tg_async_result *r, tg_message *m, void *user);

static void submit(struct adrv *d)
{
    d->submitted++;
    if (tg_async_send_message(d->a, &d->p, on_sent, d) == 0) {
        fprintf(stderr, "bench_bot_async: submit refused\n");
        exit(1);
    }
}

static void on_sent(tg_async *a, const tg_async_result *r, tg_message *m, void *user)
{
    struct adrv *d = user;
    (void)a;
    d->done++;
    if (r->status != TG_OK || !m || m->message_id == 0) {
        if (d->failed++ == 0)
            fprintf(stderr, "bench_bot_async: %s\n", tg_ctx_errmsg(r->ctx));
    }
    if (d->submitted < d->target)
        submit(d);
}

static void run_async(int calls, int inflight, struct row *r)
{
    tg_bot *bot = bot_open();
    uint32_t conns = inflight < 64 ? (uint32_t)inflight : 64;
    struct adrv d = {.a = tg_async_new(bot, &(tg_async_options){.max_connections = conns}),
                     .p = {.chat_id = tg_chat_id_int(42), .text = "hello"}};
    if (!d.a)
        exit(1);
    struct phase ph;
    /* warm-up: as many calls as measured later in flight, so slots and buffers exist */
    d.target = WARMUP;
    for (int i = 0; i < inflight && d.submitted < d.target; i++)
        submit(&d);
    tg_async_run(d.a);
    d.submitted = d.done = 0;
    d.target = calls;
    phase_start(&ph);
    for (int i = 0; i < inflight && d.submitted < d.target; i++)
        submit(&d);
    tg_async_run(d.a);
    phase_end(&ph, calls, r);
    if (d.failed || d.done != calls) {
        fprintf(stderr, "bench_bot_async: %d of %d calls failed\n", d.failed, d.done);
        exit(1);
    }
    tg_async_stats st;
    tg_async_get_stats(d.a, &st);
    r->connections = st.peak_connections;
    tg_async_free(d.a);
    tg_bot_free(bot);
}

/* the blocking API on n threads */
struct bthr {
    tg_bot *bot;
    int calls;
    pthread_barrier_t *go;
    int failed;
};

static void *blocking_thread(void *p)
{
    struct bthr *t = p;
    tg_ctx *ctx = tg_ctx_new(t->bot);
    tg_send_message_params prm = {.chat_id = tg_chat_id_int(42), .text = "hello"};
    for (int phase = 0; phase < 2; phase++) {
        int n = phase == 0 ? WARMUP / 8 + 1 : t->calls;
        pthread_barrier_wait(t->go); /* phase start */
        for (int i = 0; i < n; i++) {
            tg_message *m = NULL;
            if (tg_send_message(ctx, &prm, &m) != TG_OK || !m)
                t->failed++;
            tg_ctx_reset(ctx);
        }
        pthread_barrier_wait(t->go); /* phase end */
    }
    tg_ctx_free(ctx);
    return NULL;
}

static void run_blocking(int calls, int nthreads, struct row *r)
{
    tg_bot *bot = bot_open();
    pthread_t th[64];
    struct bthr t[64];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)nthreads + 1);
    for (int i = 0; i < nthreads; i++) {
        t[i] = (struct bthr){.bot = bot, .calls = calls / nthreads + (i < calls % nthreads),
                             .go = &go};
        pthread_create(&th[i], NULL, blocking_thread, &t[i]);
    }
    struct phase ph;
    pthread_barrier_wait(&go); /* warm-up */
    pthread_barrier_wait(&go);
    phase_start(&ph);
    pthread_barrier_wait(&go); /* measured */
    pthread_barrier_wait(&go);
    phase_end(&ph, calls, r);
    int failed = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(th[i], NULL);
        failed += t[i].failed;
    }
    if (failed) {
        fprintf(stderr, "bench_bot_async: %d blocking calls failed\n", failed);
        exit(1);
    }
    r->connections = (uint32_t)nthreads;
    pthread_barrier_destroy(&go);
    tg_bot_free(bot);
}

/* Run one scenario in a child process (its own peak RSS); the row comes back by a pipe. */
static void scenario(struct row *r, const char *name, int kind, int n, int calls)
{
    int pfd[2];
    if (pipe(pfd) != 0)
        exit(1);
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        struct row x = {0};
        if (kind == 0)
            run_raw(calls, &x);
        else if (kind == 1)
            run_async(calls, n, &x);
        else
            run_blocking(calls, n, &x);
        ssize_t w = write(pfd[1], &x, sizeof x);
        _exit(w == (ssize_t)sizeof x ? 0 : 1);
    }
    close(pfd[1]);
    ssize_t got = read(pfd[0], r, sizeof *r);
    int status = 0;
    waitpid(pid, &status, 0);
    close(pfd[0]);
    if (got != (ssize_t)sizeof *r || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench_bot_async: scenario %s failed\n", name);
        exit(1);
    }
    snprintf(r->name, sizeof r->name, "%s", name);
}

int main(void)
{
    size_t len;
    char *fixture = tg__bench_fixture("fixtures/botapi/sendmessage_response.json", &len);
    response_len = (size_t)snprintf(response, sizeof response,
                                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                    "Content-Length: %zu\r\n\r\n%s",
                                    len, fixture);
    tg__free(fixture);
    const char *ce = getenv("TGKIT_BENCH_CALLS");
    int calls = ce && atoi(ce) > 0 ? atoi(ce) : 10000;
    pid_t srv = server_start();
    snprintf(base_url, sizeof base_url, "http://127.0.0.1:%u", (unsigned)port);

    static const struct {
        const char *name;
        int kind, n;
    } plan[] = {
        {"raw_socket_floor", 0, 1},  {"async_inflight_1", 1, 1},  {"async_inflight_16", 1, 16},
        {"async_inflight_256", 1, 256}, {"blocking_threads_1", 2, 1}, {"blocking_threads_8", 2, 8},
        {"blocking_threads_64", 2, 64},
    };
    enum { NPLAN = sizeof plan / sizeof plan[0] };
    struct row rows[NPLAN];
    for (int i = 0; i < NPLAN; i++)
        scenario(&rows[i], plan[i].name, plan[i].kind, plan[i].n, calls);
    kill(srv, SIGKILL);
    waitpid(srv, NULL, 0);

    const struct row *floor = &rows[0];
    for (int i = 0; i < NPLAN; i++) {
        const struct row *r = &rows[i];
        printf("bench=%s calls=%d calls_per_s=%.0f cpu_us_per_call=%.2f allocs_per_call=%.2f "
               "peak_rss_kb=%ld connections=%u floor=%s cpu_ratio=%.2f commit=%s\n",
               r->name, calls, r->calls_per_s, r->cpu_us_per_call, r->allocs_per_call,
               r->peak_rss_kb, r->connections, floor->name,
               r->cpu_us_per_call / floor->cpu_us_per_call, tg__bench_commit());
    }
    printf("\n%-22s %12s %14s %12s %13s %6s %10s\n", "scenario", "calls/s", "CPU us/call",
           "allocs/call", "peak RSS KiB", "conns", "CPU/floor");
    for (int i = 0; i < NPLAN; i++) {
        const struct row *r = &rows[i];
        printf("%-22s %12.0f %14.2f %12.2f %13ld %6u %10.2f\n", r->name, r->calls_per_s,
               r->cpu_us_per_call, r->allocs_per_call, r->peak_rss_kb, r->connections,
               r->cpu_us_per_call / floor->cpu_us_per_call);
    }
    const struct row *a256 = &rows[3], *b64 = &rows[6];
    printf("\ngoal: one async thread (256 in flight) vs 64 blocking threads: throughput %.2fx "
           "(want >= 1), CPU per call %.2fx (want <= 0.5), allocations per call %.2f (want 0)\n",
           a256->calls_per_s / b64->calls_per_s, a256->cpu_us_per_call / b64->cpu_us_per_call,
           a256->allocs_per_call);
    return 0;
}
