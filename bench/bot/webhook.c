/*
 * bench webhook: updates accepted per second by the webhook server (plain HTTP on
 * 127.0.0.1, one keep-alive connection, fixtures/botapi/small_update.json, a no-op handler),
 * next to the floor of a bare libmicrohttpd server that answers 200 without looking at the
 * request, driven by the same raw-socket client. Also prints the process CPU time per 10k
 * updates (server and client together; the floor line shows the client and bare server).
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <pthread.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "tgbot/dispatch.h"
#include "tgbot/updates.h"

struct client {
    int fd;
    char *req;
    size_t req_len;
    char buf[4096];
    uint64_t ok;
};

static int connect_local(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("bench webhook: connect");
        exit(1);
    }
    return fd;
}

/* Send one request, read one response (headers plus Content-Length bytes). */
static void one_request(void *p)
{
    struct client *c = p;
    if (write(c->fd, c->req, c->req_len) != (ssize_t)c->req_len) {
        perror("bench webhook: write");
        exit(1);
    }
    size_t have = 0;
    char *end = NULL;
    while (!end) {
        ssize_t n = read(c->fd, c->buf + have, sizeof c->buf - 1 - have);
        if (n <= 0) {
            fprintf(stderr, "bench webhook: connection closed\n");
            exit(1);
        }
        have += (size_t)n;
        c->buf[have] = '\0';
        end = strstr(c->buf, "\r\n\r\n");
    }
    const char *cl = strcasestr(c->buf, "content-length:");
    size_t body = cl ? strtoul(cl + 15, NULL, 10) : 0;
    size_t need = (size_t)(end + 4 - c->buf) + body;
    while (have < need) {
        ssize_t n = read(c->fd, c->buf, sizeof c->buf - 1);
        if (n <= 0)
            exit(1);
        have += (size_t)n;
    }
    c->ok += strncmp(c->buf, "HTTP/1.1 200", 12) == 0;
}

static enum MHD_Result bare(void *cls, struct MHD_Connection *c, const char *url,
                            const char *method, const char *version, const char *data, size_t *size,
                            void **con_cls)
{
    (void)cls, (void)url, (void)method, (void)version, (void)data;
    if (!*con_cls) {
        *con_cls = (void *)1;
        return MHD_YES;
    }
    if (*size) {
        *size = 0;
        return MHD_YES;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    enum MHD_Result rc = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return rc;
}

static tg_status noop(tg_hctx *h, void *user)
{
    (void)h, (void)user;
    return TG_OK;
}

static void make_request(struct client *c, const char *body, size_t len)
{
    c->req = tg__malloc(len + 512);
    int n = snprintf(c->req, len + 512,
                     "POST /hook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                     "\r\nX-Telegram-Bot-Api-Secret-Token: bench-secret\r\nContent-Length: %zu"
                     "\r\n\r\n%s",
                     len, body);
    c->req_len = (size_t)n;
}

#define NCONN    4
#define PER_CONN 5000

struct load {
    uint16_t port;
    const char *body;
    size_t len;
    uint64_t ok;
};

static void *load_thread(void *arg)
{
    struct load *l = arg;
    struct client c = {.fd = connect_local(l->port)};
    make_request(&c, l->body, l->len);
    for (int i = 0; i < PER_CONN; i++)
        one_request(&c);
    l->ok = c.ok;
    close(c.fd);
    tg__free(c.req);
    return NULL;
}

/* NCONN keep-alive connections at once: aggregate updates per second. */
static void throughput(const char *name, uint16_t port, const char *body, size_t len)
{
    pthread_t t[NCONN];
    struct load l[NCONN];
    uint64_t cpu0 = tg__process_cpu_ns(), t0 = tg__now_ns(), ok = 0;
    for (int i = 0; i < NCONN; i++) {
        l[i] = (struct load){.port = port, .body = body, .len = len};
        pthread_create(&t[i], NULL, load_thread, &l[i]);
    }
    for (int i = 0; i < NCONN; i++) {
        pthread_join(t[i], NULL);
        ok += l[i].ok;
    }
    double secs = (double)(tg__now_ns() - t0) / 1e9;
    double cpu_ms = (double)(tg__process_cpu_ns() - cpu0) / 1e6;
    printf("bench=%s_%dconn updates_per_s=%.0f cpu_ms_per_10k=%.1f ok=%llu commit=%s\n", name,
           NCONN, (double)ok / secs, cpu_ms * 10000.0 / (double)(NCONN * PER_CONN),
           (unsigned long long)ok, tg__bench_commit());
}

static void cpu_per_10k(const char *name, tg__bench_fn fn, void *ctx)
{
    uint64_t cpu0 = tg__process_cpu_ns(), t0 = tg__now_ns();
    for (int i = 0; i < 10000; i++)
        fn(ctx);
    uint64_t cpu = tg__process_cpu_ns() - cpu0, wall = tg__now_ns() - t0;
    printf("# %s: %.0f updates/s, %.1f ms CPU per 10k updates\n", name, 1e13 / (double)wall,
           (double)cpu / 1e6);
}

int main(void)
{
    size_t len;
    char *body = tg__bench_fixture("fixtures/botapi/small_update.json", &len);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct MHD_Daemon *m =
        MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO, 0, NULL, NULL, bare, NULL,
                         MHD_OPTION_SOCK_ADDR, &a, MHD_OPTION_THREAD_POOL_SIZE, 2u, MHD_OPTION_END);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(m, MHD_DAEMON_INFO_BIND_PORT);
    struct client fc = {.fd = connect_local(info->port)};
    make_request(&fc, body, len);

    tg_router *r = tg_router_new();
    tg_router_on_kind(r, TG_UPDATE_MESSAGE, noop, NULL);
    tg_dispatcher *d =
        tg_dispatcher_new(NULL, r, &(tg_dispatcher_options){.workers = 2, .queue_capacity = 4096});
    tg_webhook *w = tg_webhook_start(d, &(tg_webhook_options){.host = "127.0.0.1",
                                                              .port = -1,
                                                              .path = "/hook",
                                                              .secret_token = "bench-secret",
                                                              .queue_wait_ms = 1000});
    if (!d || !w) {
        fprintf(stderr, "bench webhook: %s\n", tg_webhook_errmsg());
        return 1;
    }
    struct client wc = {.fd = connect_local(tg_webhook_port(w))};
    make_request(&wc, body, len);

    tg__bench_result floor, res;
    tg__bench_run("mhd_bare_200", one_request, &fc, &floor);
    tg__bench_report(&floor, NULL);
    tg__bench_run("webhook_ingest_small_update", one_request, &wc, &res);
    tg__bench_report(&res, &floor);
    cpu_per_10k("mhd_bare_200", one_request, &fc);
    cpu_per_10k("webhook_ingest_small_update", one_request, &wc);
    throughput("mhd_bare_200", info->port, body, len);
    throughput("webhook_ingest", tg_webhook_port(w), body, len);
    tg_dispatcher_wait_idle(d, 60000);
    tg_dispatcher_stats st;
    tg_dispatcher_get_stats(d, &st);
    printf("# handled %llu updates, %llu rejected by the queue\n", (unsigned long long)st.handled,
           (unsigned long long)st.rejected);
    tg__bench_table();
    int bad = wc.ok == 0 || st.handled == 0;
    close(fc.fd);
    close(wc.fd);
    tg_webhook_stop(w);
    tg_dispatcher_free(d);
    tg_router_free(r);
    MHD_stop_daemon(m);
    tg__free(fc.req);
    tg__free(wc.req);
    tg__free(body);
    return bad;
}
