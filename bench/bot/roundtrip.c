/*
 * bench roundtrip: a sendMessage round trip through libtgbot (encode params, POST over a
 * kept-alive connection, read the answer, decode the Message, reset the arena) against a
 * local server answering fixtures/botapi/sendmessage_response.json.
 *
 * Floors, measured in the same run against the same server:
 *  - raw_socket: a blocking socket writing the same request bytes and reading the response
 *    (its length is known) without parsing anything;
 *  - bare_curl: one reused curl easy handle doing the same POST with no JSON work.
 * Also measured: the same tg_send_message through a transport that answers from memory, i.e.
 * encode + call path + envelope + decode alone, which does not depend on the machine's load.
 * Also printed: process CPU time per op of each (client + server threads; steadier than wall
 * time on a shared machine) and the connections the server accepted per scenario (libtgbot
 * must open 1).
 *
 * libtgbot is measured over both built-in transports: libcurl (the default) and the lean one
 * (tg_transport_lean(): one sendmsg per request, the answer parsed in place, no allocation).
 *
 * Every scenario of a pass is measured ROUNDS times round-robin and keeps its fastest median
 * (a shared machine's load only adds time; interleaving spreads what remains evenly).
 *
 * Two passes: unpinned, then every thread pinned to CPU 0 (on 2-vCPU VMs a cross-CPU wake-up
 * costs ~20 us and swamps the rest; the pinned figure is the headline). The server is a tiny
 * HTTP/1.1 responder, one thread per connection, that allocates nothing per request.
 *
 * Then the same over TLS (pinned): the server speaks TLS through libssl with a certificate
 * made at start (P-256, for 127.0.0.1, trusted by the clients through ca_file), and the floor
 * is a raw OpenSSL client: one SSL_write of the request bytes, SSL_read until the known
 * length, no parsing. Rows: that floor, libtgbot over libcurl, libtgbot over lean.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "tgbot/api.h"
#include "tgbot/tgbot.h"

#define TOKEN   "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_"
#define BODY    "{\"chat_id\":42,\"text\":\"hello\"}"
#define CPU_OPS 3000 /* ops per CPU-time measurement */
#define ROUNDS  3    /* interleaved measurements per scenario; the fastest median is kept */

struct server {
    int lfd;
    uint16_t port;
    pthread_t accept_thread;
    atomic_bool stop;
    atomic_int accepted;
    atomic_int active;
    char response[1024];
    size_t response_len;
    SSL_CTX *tls; /* NULL: plain HTTP */
};

static struct server srv;

/* The server side of one connection: plain or TLS. */
struct sconn {
    int fd;
    SSL *ssl;
};

static ssize_t sconn_read(struct sconn *c, char *p, size_t n)
{
    if (!c->ssl)
        return read(c->fd, p, n);
    int r = SSL_read(c->ssl, p, (int)n);
    return r > 0 ? r : -1;
}

static bool sconn_write(struct sconn *c, const char *p, size_t n)
{
    if (!c->ssl)
        return write(c->fd, p, n) == (ssize_t)n;
    return SSL_write(c->ssl, p, (int)n) == (int)n;
}

static void *serve_conn(void *p)
{
    struct sconn c = {.fd = (int)(intptr_t)p};
    char buf[16384];
    size_t have = 0;
    if (srv.tls) {
        c.ssl = SSL_new(srv.tls);
        SSL_set_fd(c.ssl, c.fd);
        if (SSL_accept(c.ssl) != 1)
            goto out;
    }
    for (;;) {
        char *end = have ? memmem(buf, have, "\r\n\r\n", 4) : NULL;
        if (end) {
            size_t head = (size_t)(end - buf) + 4, clen = 0;
            for (char *l = buf; l && l < end; l = memchr(l, '\n', (size_t)(end - l))) {
                l += (*l == '\n');
                if (strncasecmp(l, "Content-Length:", 15) == 0)
                    clen = strtoul(l + 15, NULL, 10);
            }
            if (have >= head + clen) {
                if (!sconn_write(&c, srv.response, srv.response_len))
                    break;
                memmove(buf, buf + head + clen, have - head - clen);
                have -= head + clen;
                continue;
            }
        }
        if (have == sizeof buf)
            break;
        ssize_t n = sconn_read(&c, buf + have, sizeof buf - have);
        if (n <= 0)
            break;
        have += (size_t)n;
    }
out:
    SSL_free(c.ssl);
    close(c.fd);
    atomic_fetch_sub(&srv.active, 1);
    return NULL;
}

static void *accept_loop(void *p)
{
    (void)p;
    struct pollfd pfd = {.fd = srv.lfd, .events = POLLIN};
    while (!atomic_load(&srv.stop)) {
        if (poll(&pfd, 1, 50) <= 0)
            continue;
        int fd = accept(srv.lfd, NULL, NULL);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        atomic_fetch_add(&srv.accepted, 1);
        atomic_fetch_add(&srv.active, 1);
        pthread_t t;
        pthread_create(&t, NULL, serve_conn, (void *)(intptr_t)fd);
        pthread_detach(t);
    }
    return NULL;
}

static void server_start(const char *fixture, size_t len, SSL_CTX *tls)
{
    srv.tls = tls;
    srv.response_len = (size_t)snprintf(srv.response, sizeof srv.response,
                                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                        "Content-Length: %zu\r\n\r\n%s",
                                        len, fixture);
    srv.lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    if (bind(srv.lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(srv.lfd, 16) != 0 ||
        getsockname(srv.lfd, (struct sockaddr *)&sa, &sl) != 0) {
        perror("roundtrip: server");
        exit(1);
    }
    srv.port = ntohs(sa.sin_port);
    atomic_store(&srv.stop, false);
    pthread_create(&srv.accept_thread, NULL, accept_loop, NULL);
}

static void server_stop(void)
{
    atomic_store(&srv.stop, true);
    pthread_join(srv.accept_thread, NULL);
    close(srv.lfd);
    for (int i = 0; i < 2000 && atomic_load(&srv.active) > 0; i++)
        usleep(1000); /* connection threads end when their clients close */
}

/* ---- raw socket floor ---- */

struct raw {
    int fd;
    char req[512];
    size_t req_len;
};

static void raw_op(void *p)
{
    struct raw *r = p;
    char buf[1024];
    size_t got = 0;
    if (write(r->fd, r->req, r->req_len) != (ssize_t)r->req_len)
        exit(1);
    while (got < srv.response_len) {
        ssize_t n = read(r->fd, buf, sizeof buf);
        if (n <= 0)
            exit(1);
        got += (size_t)n;
    }
    tg__bench_sink(got);
}

static void raw_open(struct raw *r)
{
    r->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(srv.port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(r->fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        exit(1);
    int one = 1;
    setsockopt(r->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* the bytes libcurl sends for tg_send_message */
    r->req_len = (size_t)snprintf(r->req, sizeof r->req,
                                  "POST /bot%s/sendMessage HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n"
                                  "User-Agent: tgbot/%s\r\nAccept: */*\r\n"
                                  "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                                  TOKEN, (unsigned)srv.port, tg_version(), strlen(BODY), BODY);
}

/* ---- bare curl floor ---- */

static size_t discard(char *p, size_t s, size_t n, void *u)
{
    (void)p, (void)u;
    tg__bench_sink(s * n);
    return s * n;
}

static void curl_op(void *p)
{
    if (curl_easy_perform(p) != CURLE_OK)
        exit(1);
}

static CURL *curl_open(char *url, struct curl_slist *hdr)
{
    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, BODY);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(BODY));
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    return h;
}

/* ---- libtgbot ---- */

static void tg_op(void *p)
{
    tg_ctx *ctx = p;
    tg_message *m;
    tg_status st = tg_send_message(
        ctx, &(tg_send_message_params){.chat_id = tg_chat_id_int(42), .text = "hello"}, &m);
    if (st != TG_OK) {
        fprintf(stderr, "roundtrip: %s\n", tg_ctx_errmsg(ctx));
        exit(1);
    }
    tg__bench_sink((uint64_t)m->message_id);
    tg_ctx_reset(ctx);
}

/* Process CPU time per op (client and server threads together) over n ops: unlike wall time,
 * it barely moves when other work shares the machine. */
static double cpu_ns_per_op(tg__bench_fn fn, void *ctx, int n)
{
    uint64_t t0 = tg__process_cpu_ns();
    for (int i = 0; i < n; i++)
        fn(ctx);
    return (double)(tg__process_cpu_ns() - t0) / n;
}

/* ---- libtgbot without the network: what our call path costs on its own ---- */

static void *mem_conn_new(void *user, const tg_bot *bot)
{
    (void)bot;
    return user;
}

static void mem_conn_free(void *conn)
{
    (void)conn;
}

static void mem_perform(void *conn, const tg_http_request *req, tg_http_result *res,
                        bool (*cancelled)(void *), void *cancel_user)
{
    const char *body = strstr(conn, "\r\n\r\n") + 4; /* the server's canned answer */
    (void)cancelled, (void)cancel_user;
    res->status = TG_OK;
    res->http_status = 200;
    res->sent = true;
    req->write(req->write_user, body, strlen(body));
}

static void call_path_only(void)
{
    tg_transport tp = {mem_conn_new, mem_perform, mem_conn_free, srv.response};
    tg_bot *bot = tg_bot_new(TOKEN, &(tg_bot_options){.transport = &tp});
    tg_ctx *ctx = tg_ctx_new(bot);
    tg__bench_result r;
    tg__bench_run("roundtrip_tgbot_call_path_no_network", tg_op, ctx, &r);
    tg__bench_report(&r, NULL);
    tg_ctx_free(ctx);
    tg_bot_free(bot);
}

/* ---- the passes: every scenario measured ROUNDS times, interleaved ---- */

struct scen {
    const char *name; /* without the pass's tag */
    tg__bench_fn fn;
    void *ctx;
    tg__bench_result r; /* the fastest of the ROUNDS medians */
    double cpu_ns;
    int accepted; /* connections the server accepted for it (warm-up op) */
};

/* Warm each scenario with one op (counting the connections it opened), then measure them
 * round-robin ROUNDS times and keep each one's fastest median: other processes' load only
 * ever adds time, and interleaving spreads the load that remains over all scenarios alike. */
static void measure_all(struct scen *sc, size_t n, const char *tag)
{
    for (size_t i = 0; i < n; i++) {
        int before = atomic_load(&srv.accepted);
        sc[i].fn(sc[i].ctx);
        sc[i].accepted += atomic_load(&srv.accepted) - before;
    }
    for (int round = 0; round < ROUNDS; round++) {
        for (size_t i = 0; i < n; i++) {
            tg__bench_result r;
            char name[64];
            snprintf(name, sizeof name, "%s_%s", sc[i].name, tag);
            tg__bench_run(name, sc[i].fn, sc[i].ctx, &r);
            if (round == 0 || r.ns_per_op < sc[i].r.ns_per_op)
                sc[i].r = r;
        }
    }
    for (size_t i = 0; i < n; i++)
        sc[i].cpu_ns = cpu_ns_per_op(sc[i].fn, sc[i].ctx, CPU_OPS);
    for (size_t i = 0; i < n; i++)
        tg__bench_report(&sc[i].r, i ? &sc[0].r : NULL);
}

/* A ctx of a new bot over transport tp (NULL = libcurl) against base. */
static tg_ctx *ctx_open(const char *base, const tg_transport *tp, const char *ca_file)
{
    tg_bot *bot =
        tg_bot_new(TOKEN, &(tg_bot_options){.base_url = base, .transport = tp, .ca_file = ca_file});
    tg_ctx *ctx = bot ? tg_ctx_new(bot) : NULL;
    if (!ctx) {
        fprintf(stderr, "roundtrip: %s\n", bot ? "no memory" : tg_bot_new_errmsg());
        exit(1);
    }
    return ctx;
}

static tg_ctx_stats ctx_close(tg_ctx *ctx)
{
    tg_ctx_stats st;
    tg_bot *bot = tg_ctx_bot(ctx);
    tg_ctx_get_stats(ctx, &st);
    tg_ctx_free(ctx);
    tg_bot_free(bot);
    return st;
}

static void pass(const char *tag)
{
    char url[128], base[64];
    struct raw raw;
    int c0 = atomic_load(&srv.accepted);
    raw_open(&raw);
    snprintf(url, sizeof url, "http://127.0.0.1:%u/bot%s/sendMessage", (unsigned)srv.port, TOKEN);
    snprintf(base, sizeof base, "http://127.0.0.1:%u", (unsigned)srv.port);
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    CURL *h = curl_open(url, hdr);
    tg_ctx *tg = ctx_open(base, NULL, NULL), *lean = ctx_open(base, tg_transport_lean(), NULL);
    struct scen sc[] = {
        {.name = "roundtrip_raw_socket", .fn = raw_op, .ctx = &raw},
        {.name = "roundtrip_bare_curl", .fn = curl_op, .ctx = h},
        {.name = "roundtrip_tgbot", .fn = tg_op, .ctx = tg},
        {.name = "roundtrip_tgbot_lean", .fn = tg_op, .ctx = lean},
    };
    sc[0].accepted = atomic_load(&srv.accepted) - c0; /* raw may be counted already */
    measure_all(sc, 4, tag);
    int total = atomic_load(&srv.accepted) - c0;
    tg_ctx_stats tst = ctx_close(tg), lst = ctx_close(lean);
    curl_easy_cleanup(h);
    curl_slist_free_all(hdr);
    close(raw.fd);
    printf("bench=roundtrip_tgbot_vs_curl_%s ratio=%.2f lean_vs_curl=%.2f\n", tag,
           sc[2].r.ns_per_op / sc[1].r.ns_per_op, sc[3].r.ns_per_op / sc[1].r.ns_per_op);
    printf("bench=roundtrip_cpu_%s raw_socket_cpu_ns=%.0f bare_curl_cpu_ns=%.0f "
           "tgbot_cpu_ns=%.0f lean_cpu_ns=%.0f tgbot_vs_raw=%.2f lean_vs_raw=%.2f "
           "tgbot_vs_curl=%.2f\n",
           tag, sc[0].cpu_ns, sc[1].cpu_ns, sc[2].cpu_ns, sc[3].cpu_ns, sc[2].cpu_ns / sc[0].cpu_ns,
           sc[3].cpu_ns / sc[0].cpu_ns, sc[2].cpu_ns / sc[1].cpu_ns);
    printf("bench=roundtrip_connections_%s raw_socket=%d bare_curl=%d tgbot=%d lean=%d "
           "whole_pass=%d tgbot_calls=%llu tgbot_transport_connects=%llu lean_calls=%llu "
           "lean_transport_connects=%llu\n",
           tag, sc[0].accepted, sc[1].accepted, sc[2].accepted, sc[3].accepted, total,
           (unsigned long long)tst.calls, (unsigned long long)tst.connects,
           (unsigned long long)lst.calls, (unsigned long long)lst.connects);
}

/* ---- TLS: a certificate for 127.0.0.1, the raw OpenSSL floor, libtgbot over both ---- */

/* A self-signed P-256 certificate for IP 127.0.0.1, written as PEM to cert_path (the clients'
 * ca_file). Returns the server's SSL_CTX. */
static SSL_CTX *tls_server_ctx(const char *cert_path)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    X509_NAME *name = X509_NAME_new();
    if (!key || !x || !name)
        exit(1);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"127.0.0.1", -1, -1,
                               0);
    X509_set_subject_name(x, name);
    X509_set_issuer_name(x, name);
    X509_set_pubkey(x, key);
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
    X509_EXTENSION *san = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, "IP:127.0.0.1");
    X509_EXTENSION *bc = X509V3_EXT_conf_nid(NULL, &v3, NID_basic_constraints, "critical,CA:TRUE");
    if (!san || !bc || !X509_add_ext(x, san, -1) || !X509_add_ext(x, bc, -1) ||
        !X509_sign(x, key, EVP_sha256()))
        exit(1);
    FILE *f = fopen(cert_path, "w");
    if (!f || PEM_write_X509(f, x) != 1 || fclose(f) != 0)
        exit(1);
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx || SSL_CTX_use_certificate(ctx, x) != 1 || SSL_CTX_use_PrivateKey(ctx, key) != 1)
        exit(1);
    X509_EXTENSION_free(san);
    X509_EXTENSION_free(bc);
    X509_NAME_free(name);
    X509_free(x);
    EVP_PKEY_free(key);
    return ctx;
}

struct raw_tls {
    struct raw raw;
    SSL_CTX *ctx;
    SSL *ssl;
};

static void raw_tls_op(void *p)
{
    struct raw_tls *t = p;
    char buf[1024];
    size_t got = 0;
    if (SSL_write(t->ssl, t->raw.req, (int)t->raw.req_len) != (int)t->raw.req_len)
        exit(1);
    while (got < srv.response_len) {
        int n = SSL_read(t->ssl, buf, sizeof buf);
        if (n <= 0)
            exit(1);
        got += (size_t)n;
    }
    tg__bench_sink(got);
}

static void raw_tls_open(struct raw_tls *t, const char *ca_file)
{
    raw_open(&t->raw);
    t->ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
    if (SSL_CTX_load_verify_locations(t->ctx, ca_file, NULL) != 1)
        exit(1);
    t->ssl = SSL_new(t->ctx);
    SSL_set_fd(t->ssl, t->raw.fd);
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), "127.0.0.1");
    if (SSL_connect(t->ssl) != 1) {
        ERR_print_errors_fp(stderr);
        exit(1);
    }
}

static void raw_tls_close(struct raw_tls *t)
{
    SSL_free(t->ssl);
    SSL_CTX_free(t->ctx);
    close(t->raw.fd);
}

static void tls_pass(const char *fixture, size_t len)
{
    char cert[] = "/tmp/tgbench-cert-XXXXXX", url[64];
    int fd = mkstemp(cert);
    if (fd < 0)
        exit(1);
    close(fd);
    server_start(fixture, len, tls_server_ctx(cert));
    struct raw_tls raw;
    int c0 = atomic_load(&srv.accepted);
    raw_tls_open(&raw, cert);
    snprintf(url, sizeof url, "https://127.0.0.1:%u", (unsigned)srv.port);
    tg_ctx *tg = ctx_open(url, NULL, cert), *lean = ctx_open(url, tg_transport_lean(), cert);
    struct scen sc[] = {
        {.name = "roundtrip_tls_raw_openssl", .fn = raw_tls_op, .ctx = &raw},
        {.name = "roundtrip_tls_tgbot", .fn = tg_op, .ctx = tg},
        {.name = "roundtrip_tls_tgbot_lean", .fn = tg_op, .ctx = lean},
    };
    sc[0].accepted = atomic_load(&srv.accepted) - c0;
    measure_all(sc, 3, "pinned");
    int total = atomic_load(&srv.accepted) - c0;
    tg_ctx_stats lst = ctx_close(lean);
    ctx_close(tg);
    raw_tls_close(&raw);
    printf("bench=roundtrip_tls_cpu_pinned raw_openssl_cpu_ns=%.0f tgbot_cpu_ns=%.0f "
           "lean_cpu_ns=%.0f tgbot_vs_raw=%.2f lean_vs_raw=%.2f\n",
           sc[0].cpu_ns, sc[1].cpu_ns, sc[2].cpu_ns, sc[1].cpu_ns / sc[0].cpu_ns,
           sc[2].cpu_ns / sc[0].cpu_ns);
    printf("bench=roundtrip_tls_connections_pinned raw_openssl=%d tgbot=%d lean=%d whole_pass=%d "
           "lean_transport_connects=%llu\n",
           sc[0].accepted, sc[1].accepted, sc[2].accepted, total, (unsigned long long)lst.connects);
    SSL_CTX *sctx = srv.tls;
    server_stop();
    SSL_CTX_free(sctx);
    unlink(cert);
}

int main(void)
{
    size_t len;
    char *fixture = tg__bench_fixture("fixtures/botapi/sendmessage_response.json", &len);
    curl_global_init(CURL_GLOBAL_DEFAULT);

    server_start(fixture, len, NULL);
    call_path_only();
    pass("unpinned");
    server_stop();

    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        perror("roundtrip: cannot pin to CPU 0");
    server_start(fixture, len, NULL); /* its threads inherit the pinning */
    pass("pinned");
    server_stop();
    tls_pass(fixture, len);

    tg__bench_table();
    tg__free(fixture);
    curl_global_cleanup();
    return 0;
}
