/*
 * test_client_socks: the client's SOCKS5 proxy path end to end, against the loopback SOCKS5
 * server (tests/support/socks5_server.h) in front of the fake Bot API server.
 *
 * socks5h:// hands the host name to the proxy (address type domain), socks5:// resolves it
 * first (address type IPv4); both carry getMe and sendMessage, and the proxy must have seen
 * the CONNECT to the fake server's port. A proxy that hangs up after the greeting gives a
 * transport error that names the failure. A raw client checks the server's own replies
 * (unsupported command, address type, method; names it will not resolve; refused targets)
 * and the relay, so a broken test server cannot pass for a working client.
 */
#include "tgtest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "bot_server.h"
#include "socks5_server.h"
#include "tgbot/api.h"
#include "tgbot/tgbot.h"

#define TOKEN  "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_"
#define SECRET "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_"
#define GETME  "{\"ok\":true,\"result\":{\"id\":7,\"is_bot\":true,\"first_name\":\"Bot\"}}"
#define SENT                                                                                       \
    "{\"ok\":true,\"result\":{\"message_id\":5,\"date\":1,\"chat\":{\"id\":42,\"type\":"           \
    "\"private\"},\"text\":\"hi\"}}"

/* ---- fixture: fake Bot API server + SOCKS5 server ---- */

struct fx {
    bot_server *api;
    socks5_server *socks;
    bot_logcap cap;
};

static int setup_mode(void **state, socks5_mode mode)
{
    struct fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    bot_logcap_init(&f->cap);
    f->api = bot_server_start(TOKEN);
    assert_non_null(f->api);
    bot_server_set_reply(f->api, "getMe", 200, GETME);
    bot_server_set_reply(f->api, "sendMessage", 200, SENT);
    f->socks = socks5_server_start(mode);
    assert_non_null(f->socks);
    *state = f;
    return 0;
}

static int setup(void **state)
{
    return setup_mode(state, SOCKS5_NORMAL);
}

static int setup_hangup(void **state)
{
    return setup_mode(state, SOCKS5_CLOSE_AFTER_GREETING);
}

static int teardown(void **state)
{
    struct fx *f = *state;
    socks5_server_stop(f->socks);
    bot_server_stop(f->api);
    bot_logcap_free(&f->cap);
    free(f);
    return 0;
}

/* A bot whose every request goes through the SOCKS5 server, talking to base_url. */
static tg_bot *socks_bot(struct fx *f, bool remote_dns, const char *base_url, tg_retry_policy retry)
{
    char proxy[64];
    socks5_server_url(f->socks, remote_dns, proxy, sizeof proxy);
    tg_bot *bot = tg_bot_new(TOKEN, &(tg_bot_options){.base_url = base_url,
                                                      .proxy = proxy,
                                                      .timeout_ms = 5000,
                                                      .connect_timeout_ms = 2000,
                                                      .retry = retry,
                                                      .log = bot_logcap_sink,
                                                      .log_user = &f->cap,
                                                      .log_level = TG_LOG_TRACE});
    assert_non_null(bot);
    return bot;
}

/* getMe and sendMessage through the bot; the fake server must have answered both. */
static void get_me_and_send(struct fx *f, tg_bot *bot)
{
    tg_ctx *ctx = tg_ctx_new(bot);
    assert_non_null(ctx);
    tg_user *me = NULL;
    assert_int_equal(tg_get_me(ctx, &me), TG_OK);
    assert_int_equal(me->id, 7);
    assert_string_equal(me->first_name, "Bot");
    tg_message *m = NULL;
    tg_status st = tg_send_message(
        ctx, &(tg_send_message_params){.chat_id = tg_chat_id_int(42), .text = "hi"}, &m);
    assert_int_equal(st, TG_OK);
    assert_int_equal(m->message_id, 5);
    assert_string_equal(m->text, "hi");
    assert_int_equal(bot_server_count(f->api, "getMe"), 1);
    assert_int_equal(bot_server_count(f->api, "sendMessage"), 1);
    const bot_request *r = bot_server_last(f->api);
    assert_string_equal(r->path, "/bot<TOKEN>/sendMessage");
    assert_string_equal(r->body, "{\"chat_id\":42,\"text\":\"hi\"}");
    tg_ctx_free(ctx);
}

/* Every record is a successful CONNECT to the fake server with the address type atyp, and
 * the tunnel carried the calls (the first one starts with the getMe request line). */
static void assert_connects(struct fx *f, uint8_t atyp, const char *host)
{
    size_t n = socks5_server_nrecords(f->socks);
    assert_true(n >= 1 && n <= 2); /* keep-alive: normally one tunnel for both calls */
    assert_int_equal(socks5_server_connections(f->socks), n);
    uint64_t down = 0;
    for (size_t i = 0; i < n; i++) {
        socks5_record r;
        assert_true(socks5_server_record(f->socks, i, &r));
        assert_int_equal(r.cmd, SOCKS5_CMD_CONNECT);
        assert_int_equal(r.atyp, atyp);
        assert_string_equal(r.host, host);
        assert_int_equal(r.port, bot_server_port(f->api));
        assert_int_equal(r.reply, SOCKS5_REP_OK);
        assert_true(r.bytes_up > 0);
        down += r.bytes_down;
        if (i == 0) {
            /* the token travels only inside the tunnel, in the request line */
            static const char line[] = "POST /bot" TOKEN "/getMe HTTP/1.1\r\n";
            assert_true(r.head_len > sizeof line);
            assert_true(memcmp(r.head, line, sizeof line - 1) == 0);
        }
    }
    assert_true(down > 0);
}

static void assert_no_secret(struct fx *f, tg_bot *bot)
{
    for (size_t i = 0; i < socks5_server_nrecords(f->socks); i++) {
        socks5_record r;
        assert_true(socks5_server_record(f->socks, i, &r));
        assert_null(strstr(r.host, SECRET));
    }
    tg_bot_log(bot, TG_LOG_WARN, "end of test");
    pthread_mutex_lock(&f->cap.mu);
    assert_true(f->cap.lines > 3);
    assert_null(f->cap.text ? strstr(f->cap.text, SECRET) : NULL);
    pthread_mutex_unlock(&f->cap.mu);
}

static void test_socks5h_sends_host_name(void **state)
{
    struct fx *f = *state;
    /* a name, not an IP literal: curl hands literals to the proxy as addresses */
    char base[64];
    snprintf(base, sizeof base, "http://localhost:%u", (unsigned)bot_server_port(f->api));
    tg_bot *bot = socks_bot(f, true, base, (tg_retry_policy){.max_attempts = 1});
    get_me_and_send(f, bot);
    assert_connects(f, SOCKS5_ATYP_DOMAIN, "localhost");
    pthread_mutex_lock(&f->cap.mu);
    assert_non_null(f->cap.text);
    assert_non_null(strstr(f->cap.text, "POST /bot[REDACTED]/getMe"));
    pthread_mutex_unlock(&f->cap.mu);
    assert_no_secret(f, bot);
    tg_bot_free(bot);
}

static void test_socks5_sends_ipv4(void **state)
{
    struct fx *f = *state;
    tg_bot *bot = socks_bot(f, false, bot_server_url(f->api), (tg_retry_policy){.max_attempts = 1});
    get_me_and_send(f, bot);
    assert_connects(f, SOCKS5_ATYP_IPV4, "127.0.0.1");
    assert_no_secret(f, bot);
    tg_bot_free(bot);
}

static void test_proxy_hangs_up_after_greeting(void **state)
{
    struct fx *f = *state;
    tg_bot *bot = socks_bot(f, true, bot_server_url(f->api),
                            (tg_retry_policy){.max_attempts = 2, .backoff_base_ms = 1});
    tg_ctx *ctx = tg_ctx_new(bot);
    assert_int_equal(tg_get_me(ctx, NULL), TG_ERR_TRANSPORT);
    const tg_error_info *e = tg_ctx_error(ctx);
    assert_int_equal(e->status, TG_ERR_TRANSPORT);
    assert_int_equal(e->transport_code, 97); /* CURLE_PROXY: the SOCKS handshake failed */
    assert_int_equal(e->http_status, 0);
    assert_int_equal(e->attempts, 2); /* nothing was sent: retried like a refused connect */
    const char *msg = tg_ctx_errmsg(ctx);
    assert_non_null(strstr(msg, "getMe: cannot connect: "));
    if (!strstr(msg, "proxy"))
        fail_msg("errmsg does not name the proxy step: %s", msg);
    assert_non_null(strstr(msg, "(transport code 97)"));
    assert_null(strstr(msg, SECRET));
    /* one connection per attempt, each closed after the greeting, no request recorded */
    assert_int_equal(socks5_server_connections(f->socks), 2);
    assert_int_equal(socks5_server_greetings(f->socks), 0);
    assert_int_equal(socks5_server_nrecords(f->socks), 0);
    assert_int_equal(bot_server_nrequests(f->api), 0);
    /* the ctx stays usable: the same failure again, cleanly */
    assert_int_equal(
        tg_send_message(ctx, &(tg_send_message_params){.chat_id = tg_chat_id_int(1), .text = "x"},
                        NULL),
        TG_ERR_TRANSPORT);
    assert_non_null(strstr(tg_ctx_errmsg(ctx), "sendMessage: cannot connect: "));
    assert_no_secret(f, bot);
    tg_ctx_free(ctx);
    tg_bot_free(bot);
}

/* ---- the server itself, through a raw socket ---- */

static int raw_connect(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct timeval tv = {.tv_sec = 2}; /* bounds every read: a hang fails the test */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

static void raw_send(int fd, const void *p, size_t n)
{
    assert_int_equal(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* Read exactly n bytes (bounded by the receive timeout). */
static void raw_recv(int fd, void *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, (char *)p + got, n - got, 0);
        assert_true(r > 0);
        got += (size_t)r;
    }
}

static void raw_expect_eof(int fd)
{
    char c;
    ssize_t r = recv(fd, &c, 1, 0);
    if (r != 0)
        fail_msg("expected the proxy to close the connection: recv gave %zd (%s)", r,
                 r < 0 ? strerror(errno) : "data");
}

/* Greeting with method 0x00, answered {5, 0}. */
static int raw_greeted(uint16_t port)
{
    int fd = raw_connect(port);
    unsigned char ans[2];
    raw_send(fd, "\x05\x01\x00", 3);
    raw_recv(fd, ans, 2);
    assert_int_equal(ans[0], 5);
    assert_int_equal(ans[1], 0);
    return fd;
}

/* A bound socket that does not listen: connecting to it is refused. Returns its fd. */
static int refusing_port(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    *port = ntohs(sa.sin_port);
    return fd;
}

static void test_server_refusals(void **state)
{
    struct fx *f = *state;
    uint16_t closed_port;
    int closed_fd = refusing_port(&closed_port);
    unsigned char cp[2] = {(unsigned char)(closed_port >> 8), (unsigned char)closed_port};
    unsigned char api[2] = {(unsigned char)(bot_server_port(f->api) >> 8),
                            (unsigned char)bot_server_port(f->api)};
    char refused[10] = {5, 1, 0, 1, 127, 0, 0, 1};
    memcpy(refused + 8, cp, 2);
    char bind_cmd[10] = {5, 2, 0, 1, 127, 0, 0, 1};
    memcpy(bind_cmd + 8, api, 2);
    const struct {
        const char *what;
        const char *req;
        size_t len;
        int rep;
        uint8_t cmd, atyp;
        const char *host;
    } cases[] = {
        {"udp associate", "\x05\x03\x00\x01\x7f\x00\x00\x01\x00\x35", 10, SOCKS5_REP_BAD_CMD,
         SOCKS5_CMD_UDP, SOCKS5_ATYP_IPV4, "127.0.0.1"},
        {"ipv6", "\x05\x01\x00\x04", 4, SOCKS5_REP_BAD_ATYP, 1, SOCKS5_ATYP_IPV6, ""},
        {"atyp 9", "\x05\x01\x00\x09", 4, SOCKS5_REP_BAD_ATYP, 1, 9, ""},
        {"a name it will not resolve",
         "\x05\x01\x00\x03\x0b"
         "example.com\x00\x50",
         18, SOCKS5_REP_HOST_UNREACH, 1, SOCKS5_ATYP_DOMAIN, "example.com"},
        {"off the machine", "\x05\x01\x00\x01\x0a\x00\x00\x01\x00\x50", 10, SOCKS5_REP_NOT_ALLOWED,
         1, SOCKS5_ATYP_IPV4, "10.0.0.1"},
        {"refused", refused, 10, SOCKS5_REP_REFUSED, 1, SOCKS5_ATYP_IPV4, "127.0.0.1"},
        {"bind", bind_cmd, 10, SOCKS5_REP_BAD_CMD, SOCKS5_CMD_BIND, SOCKS5_ATYP_IPV4, "127.0.0.1"},
    };
    size_t ncases = sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < ncases; i++) {
        int fd = raw_greeted(socks5_server_port(f->socks));
        unsigned char ans[10];
        raw_send(fd, cases[i].req, cases[i].len);
        raw_recv(fd, ans, sizeof ans);
        if (ans[1] != cases[i].rep)
            fail_msg("%s: reply %d, expected %d", cases[i].what, ans[1], cases[i].rep);
        assert_int_equal(ans[0], 5);
        assert_int_equal(ans[3], SOCKS5_ATYP_IPV4);
        raw_expect_eof(fd);
        close(fd);
        socks5_record r;
        assert_true(socks5_server_record(f->socks, i, &r));
        assert_int_equal(r.reply, cases[i].rep);
        assert_int_equal(r.cmd, cases[i].cmd);
        assert_int_equal(r.atyp, cases[i].atyp);
        assert_string_equal(r.host, cases[i].host);
    }
    assert_int_equal(socks5_server_nrecords(f->socks), ncases);
    assert_int_equal(socks5_server_connections(f->socks), ncases);
    close(closed_fd);
}

/* No acceptable method: {5, 0xFF}, then closed; a wrong version: closed at once. Neither
 * gets as far as a request record. */
static void test_server_refuses_greetings(void **state)
{
    struct fx *f = *state;
    int fd = raw_connect(socks5_server_port(f->socks));
    unsigned char ans[2];
    raw_send(fd, "\x05\x02\x01\x02", 4);
    raw_recv(fd, ans, 2);
    assert_int_equal(ans[0], 5);
    assert_int_equal(ans[1], 0xFF);
    raw_expect_eof(fd);
    close(fd);
    fd = raw_connect(socks5_server_port(f->socks));
    raw_send(fd, "\x04\x01\x00\x50\x7f\x00\x00\x01\x00", 9);
    char c;
    ssize_t r = recv(fd, &c, 1, 0); /* closed with our bytes unread: EOF or a reset */
    assert_true(r == 0 || (r < 0 && errno == ECONNRESET));
    close(fd);
    assert_int_equal(socks5_server_greetings(f->socks), 0);
    assert_int_equal(socks5_server_nrecords(f->socks), 0);
    assert_int_equal(socks5_server_connections(f->socks), 2);
}

/* CONNECT by name to a plain listener: the reply names the bound address, bytes go both
 * ways, and a half-close on one side reaches the other. */
static void test_server_relays(void **state)
{
    struct fx *f = *state;
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(lfd, 4), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
    uint16_t port = ntohs(sa.sin_port);

    int fd = raw_greeted(socks5_server_port(f->socks));
    unsigned char req[16] = {5, 1, 0, 3, 9, 'l', 'o', 'c', 'a', 'l', 'h', 'o', 's', 't'};
    req[14] = (unsigned char)(port >> 8);
    req[15] = (unsigned char)port;
    raw_send(fd, req, sizeof req);
    unsigned char ans[10];
    raw_recv(fd, ans, sizeof ans);
    assert_memory_equal(ans, "\x05\x00\x00\x01\x7f\x00\x00\x01", 8);
    int peer = accept(lfd, NULL, NULL);
    assert_true(peer >= 0);
    struct sockaddr_in pa;
    len = sizeof pa;
    assert_int_equal(getpeername(peer, (struct sockaddr *)&pa, &len), 0);
    assert_memory_equal(ans + 8, &pa.sin_port, 2); /* BND.PORT: the proxy's own end */

    struct timeval tv = {.tv_sec = 2};
    setsockopt(peer, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[32];
    raw_send(fd, "ping", 4);
    raw_recv(peer, buf, 4);
    assert_memory_equal(buf, "ping", 4);
    raw_send(peer, "pong!", 5);
    raw_recv(fd, buf, 5);
    assert_memory_equal(buf, "pong!", 5);
    shutdown(fd, SHUT_WR);
    raw_expect_eof(peer);
    raw_send(peer, "late", 4); /* the other direction still works after the half-close */
    raw_recv(fd, buf, 4);
    assert_memory_equal(buf, "late", 4);
    close(peer);
    raw_expect_eof(fd);
    close(fd);
    close(lfd);

    socks5_record r;
    assert_true(socks5_server_record(f->socks, 0, &r));
    assert_int_equal(r.atyp, SOCKS5_ATYP_DOMAIN);
    assert_string_equal(r.host, "localhost");
    assert_int_equal(r.port, port);
    assert_int_equal(r.reply, SOCKS5_REP_OK);
    assert_int_equal(r.bytes_up, 4);
    assert_int_equal(r.bytes_down, 9);
    assert_int_equal(r.head_len, 4);
    assert_memory_equal(r.head, "ping", 4);
}

/* stop while a tunnel is open and idle: returns (the test would time out otherwise). */
static void test_server_stops_with_open_tunnel(void **state)
{
    struct fx *f = *state;
    int fd = raw_greeted(socks5_server_port(f->socks));
    unsigned char req[10] = {5, 1, 0, 1, 127, 0, 0, 1};
    req[8] = (unsigned char)(bot_server_port(f->api) >> 8);
    req[9] = (unsigned char)bot_server_port(f->api);
    raw_send(fd, req, sizeof req);
    unsigned char ans[10];
    raw_recv(fd, ans, sizeof ans);
    assert_int_equal(ans[1], SOCKS5_REP_OK);
    int idle = raw_connect(socks5_server_port(f->socks)); /* accepted, still in the greeting */
    for (int i = 0; i < 2000 && socks5_server_connections(f->socks) < 2; i++)
        usleep(1000);
    assert_int_equal(socks5_server_connections(f->socks), 2);
    socks5_server_stop(f->socks);
    f->socks = NULL;
    raw_expect_eof(fd);
    raw_expect_eof(idle);
    close(fd);
    close(idle);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_socks5h_sends_host_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_socks5_sends_ipv4, setup, teardown),
        cmocka_unit_test_setup_teardown(test_proxy_hangs_up_after_greeting, setup_hangup, teardown),
        cmocka_unit_test_setup_teardown(test_server_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_refuses_greetings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_relays, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_stops_with_open_tunnel, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
