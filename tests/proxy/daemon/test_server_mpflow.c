/*
 * How client bytes flow in middle-proxy mode, through the built daemon: tgproxy (`tgproxy
 * run`) -> tgproxy-fakemp (one or two of them) -> the fake DC, all on 127.0.0.1.
 *
 *   - 1,000 clients at once over the worker's two middle-proxy connections, every byte
 *     checked both ways;
 *   - a quick ack asked for comes back as the client's token, before the answer;
 *   - a client that closes is cancelled on its middle proxy (the fake logs close-conn with
 *     the id it gave that client);
 *   - a middle proxy killed mid-stream: its clients are closed (they read the end, not a
 *     hang), the clients on the other one go on, new clients go to the other one; with both
 *     gone clients go direct; one restarted, new clients go through it again;
 *   - a client that never reads beside fast ones: the fast ones get every byte, the slow one
 *     is closed once client-buffer is behind, and what tgproxy holds for slow clients
 *     (middle_proxy_client_buffer_bytes) never exceeds the budgets.
 */
#include "tgtest.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/str.h"
#include "daemon_fx.h"
#include "prom.h"
#include "proxy/wire/mtframe.h"
#include "proxy/wire/obfs2.h"
#include "proxy_client.h"
#include "proxy_fakedc.h"
#include "proxy_fakemp.h"

#define TAG "c0ffee00c0ffee00c0ffee00c0ffee00"

struct env {
    struct fakedc *dc;
    uint16_t dc_port;
    struct dfx mp[2], d; /* the fake middle proxies, the daemon */
    int nmp;
    char secret_path[128], conf_path[128];
    uint8_t key[16];
};

/* extra: more [middle-proxy] lines. */
static void env_start(struct env *e, int nmp, int connections, const char *extra)
{
    memset(e, 0, sizeof *e);
    e->nmp = nmp;
    e->dc = fakedc_start(&e->dc_port);
    assert_non_null(e->dc);
    for (int i = 0; i < 16; i++)
        e->key[i] = (uint8_t)(i * 7 + 3);
    dfx_init(&e->mp[0], "mpf-fakemp0");
    if (nmp > 1)
        dfx_init(&e->mp[1], "mpf-fakemp1");
    dfx_init(&e->d, "mpf-daemon");
    dfx_path(&e->d, "proxy-secret", e->secret_path, sizeof e->secret_path);
    dfx_path(&e->d, "proxy-config", e->conf_path, sizeof e->conf_path);
    uint8_t secret[128];
    for (int i = 0; i < 128; i++)
        secret[i] = (uint8_t)(i * 31 + 9);
    pfmp_secret(e->secret_path, secret, sizeof secret);
    char conf[256];
    size_t at = (size_t)snprintf(conf, sizeof conf, "default 2;\n");
    for (int i = 0; i < nmp; i++) {
        pfmp_start(&e->mp[i], e->secret_path, e->dc_port, 0, NULL);
        at += (size_t)snprintf(conf + at, sizeof conf - at, "proxy_for 2 127.0.0.1:%u;\n",
                               e->mp[i].port);
    }
    dfx_write(e->conf_path, conf);
    char mp_lines[256];
    snprintf(mp_lines, sizeof mp_lines, "connections = %d\n%s", connections, extra ? extra : "");
    pfmp_daemon_config(&e->d, TAG, e->key, e->dc_port, e->secret_path, e->conf_path, mp_lines,
                       true);
    dfx_run(&e->d, DFX_TGPROXY);
    /* every connection up: with two fakes, the two connections are one on each */
    for (int i = 0; i < nmp; i++)
        dfx_wait_log(&e->mp[i], "handshake ok from 127.0.0.1:", connections / nmp);
}

static void env_stop(struct env *e)
{
    assert_int_equal(dfx_stop(&e->d, SIGTERM), 0);
    dfx_done(&e->d);
    for (int i = 0; i < e->nmp; i++) {
        if (e->mp[i].pid)
            assert_int_equal(dfx_stop(&e->mp[i], SIGTERM), 0);
        dfx_done(&e->mp[i]);
    }
    fakedc_stop(e->dc);
}

/* One sample of the daemon's metrics page (prom.h: an independent parser that also holds
   every family to its docs row): the value of one sample ("name{...}"), NAN if absent. */
static double metric(struct env *e, const char *key)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/",
             (unsigned)dfx_log_port(&e->d, "[stats.prometheus] serving"));
    static char page[1 << 20];
    char name[160];
    snprintf(name, sizeof name, "tgproxy_%s", key);
    assert_int_equal(prom_scrape(url, "tgproxy", page, sizeof page), 0);
    return prom_sample(page, name);
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(i * 7 + seed * 13 + (i >> 8) + (seed >> 8));
}

static void mp_connect(struct env *e, struct pcli *c)
{
    struct pcli_opts o = {.mode = PCLI_DD, .key = e->key, .dc = 2};
    assert_int_equal(pcli_connect(c, e->d.port, &o), 0);
}

/* The fake DC's ECHO through the middle proxy: c sends the command. */
static void start_echo(struct pcli *c)
{
    uint8_t cmd[FAKEDC_CMD_LEN];
    fakedc_cmd(cmd, "ECHO", 0, 0);
    assert_int_equal(pfmp_send_packet(c, OBFS2_TAG_PADDED, cmd, sizeof cmd), 0);
}

/* One round: n bytes (seed) up as one packet, the same back. 0, or -1 (closed, wrong). */
static int round_trip(struct pcli *c, size_t n, unsigned seed)
{
    uint8_t data[4096], back[4096];
    assert_true(n <= sizeof data && n % 4 == 0);
    fill(data, n, seed);
    if (pfmp_send_packet(c, OBFS2_TAG_PADDED, data, n) != 0 ||
        pfmp_recv_packets(c, OBFS2_TAG_PADDED, back, n) != 0)
        return -1;
    return memcmp(back, data, n) == 0 ? 0 : -1;
}

static void test_thousand_clients(void **state)
{
    (void)state;
    struct env e;
    env_start(&e, 1, 2, NULL);
    dfx_wait_log(&e.mp[0], "handshake ok from 127.0.0.1:", 2);
    enum { N = 1000, BYTES = 512 };
    struct pcli *c = calloc(N, sizeof *c);
    assert_non_null(c);
    /* all of them open and talking at once, then every answer read and checked */
    for (int k = 0; k < N; k++) {
        mp_connect(&e, &c[k]);
        start_echo(&c[k]);
        uint8_t data[BYTES];
        fill(data, BYTES, (unsigned)k);
        assert_int_equal(pfmp_send_packet(&c[k], OBFS2_TAG_PADDED, data, BYTES), 0);
    }
    for (int k = 0; k < N; k++) {
        uint8_t data[BYTES], back[BYTES];
        fill(data, BYTES, (unsigned)k);
        assert_int_equal(pfmp_recv_packets(&c[k], OBFS2_TAG_PADDED, back, BYTES), 0);
        assert_memory_equal(back, data, BYTES);
    }
    /* a second round on each, the other way round, while all are still open */
    for (int k = N - 1; k >= 0; k--)
        assert_int_equal(round_trip(&c[k], 256, (unsigned)k + 5000), 0);
    dfx_wait_log(&e.mp[0], "client ", N);
    assert_int_equal(dfx_log_count(&e.mp[0], "handshake ok"), 2); /* two connections, no more */
    assert_true(metric(&e, "middle_proxy_clients_active{}") == N);
    assert_true(metric(&e, "middle_proxy_connections_up{dc=2}") == 2);
    for (int k = 0; k < N; k++)
        pcli_close(&c[k]);
    free(c);
    dfx_wait_log(&e.mp[0], "close-conn ", N); /* each one cancelled on the middle proxy */
    env_stop(&e);
}

/* The id the fake middle proxy gave the last client it saw ("client ID tag ..."). */
static unsigned long long last_client_id(struct env *e, int i)
{
    char *log = dfx_log(&e->mp[i]), *at = log, *hit = NULL;
    while ((at = strstr(at, "client ")) != NULL)
        hit = at++;
    assert_non_null(hit);
    unsigned long long id = strtoull(hit + 7, NULL, 16);
    free(log);
    return id;
}

static void test_quickack_and_close(void **state)
{
    (void)state;
    struct env e;
    env_start(&e, 1, 2, NULL);
    struct pcli c;
    mp_connect(&e, &c);
    start_echo(&c);
    assert_int_equal(round_trip(&c, 64, 1), 0);
    /* a packet with the quick-ack bit: the token (the fake answers with the packet's last
       word, bit 31 set) comes first, then the echo */
    uint8_t data[128], buf[4 + 128], h[MTFRAME_HEAD_MAX];
    fill(data, sizeof data, 77);
    size_t hl = mtframe_head(OBFS2_TAG_PADDED, sizeof data, 0, h);
    h[3] |= 0x80;
    memcpy(buf, h, hl);
    memcpy(buf + hl, data, sizeof data);
    assert_int_equal(pcli_send(&c, buf, hl + sizeof data), 0);
    uint8_t tok[4];
    assert_int_equal(pcli_recv_all(&c, tok, 4), 0);
    uint8_t want[4];
    memcpy(want, data + sizeof data - 4, 4);
    want[3] |= 0x80;
    assert_memory_equal(tok, want, 4);
    uint8_t back[128];
    assert_int_equal(pfmp_recv_packets(&c, OBFS2_TAG_PADDED, back, sizeof back), 0);
    assert_memory_equal(back, data, sizeof back);
    dfx_wait_log(&e.mp[0], "quickack ", 1);
    assert_true(metric(&e, "middle_proxy_quick_acks_total{}") == 1);
    /* the client closes: the fake hears RPC_CLOSE_CONN for that client's id */
    char line[64];
    snprintf(line, sizeof line, "close-conn %016llx", last_client_id(&e, 0));
    assert_int_equal(dfx_log_count(&e.mp[0], line), 0);
    pcli_close(&c);
    dfx_wait_log(&e.mp[0], line, 1);
    env_stop(&e);
}

/* The client is ended: it reads EOF or a reset, never a hang (its recv times out at 10 s). */
static bool ended(struct pcli *c)
{
    /* Before the end come whatever both kernels still buffer: the client's receive buffer
       and tgproxy's send buffer, which TCP autotuning may have grown to megabytes (a busy
       machine leaves more of it unread). Bounded by bytes, not by a few reads. */
    uint8_t b[65536];
    for (int i = 0; i < 1024; i++) { /* at most 64 MiB */
        ssize_t r = pcli_recv(c, b, sizeof b);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
            return true;
        if (r < 0)
            return false;
    }
    return false;
}

struct direct_arg {
    struct env *e;
};

/* A tagged client works and went direct: the fake DC saw a connection of its own. */
static bool direct_works(void *arg)
{
    struct direct_arg *a = arg;
    struct pcli c;
    struct pcli_opts o = {.mode = PCLI_DD, .key = a->e->key, .dc = 2};
    if (pcli_connect(&c, a->e->d.port, &o) != 0)
        return false;
    int rc = pcli_echo(&c, 9, 4096, 0);
    pcli_close(&c);
    return rc == 0;
}

struct mp_arg {
    struct env *e;
    int i, before;
};

/* A new client's echo works through fake i (its log shows one more client). */
static bool via_mp(void *arg)
{
    struct mp_arg *a = arg;
    struct pcli c;
    mp_connect(a->e, &c);
    start_echo(&c);
    int rc = round_trip(&c, 512, 3);
    pcli_close(&c);
    return rc == 0 && dfx_log_count(&a->e->mp[a->i], "client ") > a->before;
}

static void test_mp_killed_and_restarted(void **state)
{
    (void)state;
    struct env e;
    env_start(&e, 2, 2, NULL); /* one connection to each fake */
    enum { N = 12 };
    struct pcli c[N];
    for (int k = 0; k < N; k++) {
        mp_connect(&e, &c[k]);
        start_echo(&c[k]);
        assert_int_equal(round_trip(&c[k], 1024, (unsigned)k), 0);
    }
    int on0 = dfx_log_count(&e.mp[0], "client "), on1 = dfx_log_count(&e.mp[1], "client ");
    assert_int_equal(on0 + on1, N);
    assert_true(on0 >= 1 && on1 >= 1); /* the pool spread them */
    /* fake 0 dies mid-stream: its clients end, fake 1's go on byte for byte */
    uint16_t port0 = e.mp[0].port;
    kill(e.mp[0].pid, SIGKILL);
    assert_int_equal(waitpid(e.mp[0].pid, NULL, 0), e.mp[0].pid);
    e.mp[0].pid = 0;
    int alive = 0, gone = 0;
    for (int k = 0; k < N; k++) {
        if (round_trip(&c[k], 2048, (unsigned)k + 100) == 0)
            alive++;
        else {
            assert_true(ended(&c[k]));
            gone++;
        }
    }
    assert_int_equal(alive, on1);
    assert_int_equal(gone, on0);
    /* new clients go to fake 1 */
    for (int k = 0; k < 4; k++) {
        struct mp_arg a = {.e = &e, .i = 1, .before = dfx_log_count(&e.mp[1], "client ")};
        assert_true(via_mp(&a));
    }
    /* both gone: tagged clients fall back to direct */
    for (int k = 0; k < N; k++)
        pcli_close(&c[k]);
    assert_int_equal(dfx_stop(&e.mp[1], SIGTERM), 0);
    struct direct_arg da = {.e = &e};
    assert_true(tgtest_wait_until(direct_works, &da, DFX_WAIT_MS));
    assert_true(metric(&e, "middle_proxy_fallbacks_total{}") >= 1);
    /* fake 0 back on its port: the pool reconnects (backoff) and new clients use it */
    dfx_done(&e.mp[0]);
    dfx_init(&e.mp[0], "mpf-fakemp0b");
    pfmp_start(&e.mp[0], e.secret_path, e.dc_port, port0, NULL);
    dfx_wait_log(&e.mp[0], "handshake ok from 127.0.0.1:", 1);
    struct mp_arg a = {.e = &e, .i = 0, .before = 0};
    assert_true(tgtest_wait_until(via_mp, &a, DFX_WAIT_MS));
    env_stop(&e);
}

struct slow_arg {
    struct env *e;
    double max_held;
};

/* The slow client was closed by the policy; samples what tgproxy holds meanwhile. */
static bool slow_closed(void *arg)
{
    struct slow_arg *a = arg;
    double held = metric(a->e, "middle_proxy_client_buffer_bytes{}");
    if (held > a->max_held)
        a->max_held = held;
    return metric(a->e, "middle_proxy_slow_clients_closed_total{}") >= 1;
}

static void test_slow_reader(void **state)
{
    (void)state;
    struct env e;
    /* one connection, so the slow client shares it with the fast ones */
    env_start(&e, 1, 1, "client-buffer = \"256kib\"\nbuffer-total = \"1mib\"\n");
    struct pcli slow, fast[8];
    mp_connect(&e, &slow);
    int small = 16384; /* the slow client's kernel buffer: small, so tgproxy's fills */
    setsockopt(slow.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    uint8_t cmd[FAKEDC_CMD_LEN];
    fakedc_cmd(cmd, "SRCE", 11, 256u << 20);
    assert_int_equal(pfmp_send_packet(&slow, OBFS2_TAG_PADDED, cmd, sizeof cmd), 0);
    for (int k = 0; k < 8; k++) {
        mp_connect(&e, &fast[k]);
        start_echo(&fast[k]);
    }
    /* the fast clients go on, byte for byte, while the slow one falls behind */
    struct slow_arg sa = {.e = &e};
    for (int r = 0; r < 40; r++)
        for (int k = 0; k < 8; k++)
            assert_int_equal(round_trip(&fast[k], 4096, (unsigned)(r * 8 + k)), 0);
    assert_true(tgtest_wait_until(slow_closed, &sa, DFX_WAIT_MS));
    dfx_wait_log(&e.mp[0], "close-conn ", 1); /* cancelled on the middle proxy */
    assert_true(sa.max_held <= 256 * 1024);
    /* never more than one client's client-buffer held (the budget was never needed) */
    double peak = metric(&e, "middle_proxy_client_buffer_peak_bytes{}");
    assert_true(peak > 0 && peak <= 256 * 1024);
    /* the slow client reads what its socket held, then the end */
    assert_true(ended(&slow));
    for (int k = 0; k < 8; k++)
        assert_int_equal(round_trip(&fast[k], 4096, (unsigned)k + 999), 0);
    assert_true(metric(&e, "middle_proxy_connections_up{dc=2}") == 1);
    assert_true(metric(&e, "middle_proxy_slow_clients_closed_total{}") == 1);
    pcli_close(&slow);
    for (int k = 0; k < 8; k++)
        pcli_close(&fast[k]);
    env_stop(&e);
}

struct held_arg {
    struct env *e;
};

static bool holds_some(void *arg)
{
    struct held_arg *a = arg;
    return metric(a->e, "middle_proxy_client_buffer_bytes{}") > 0;
}

/* A client that reads late: what waited in tgproxy for it reaches it once it reads (the
   socket's writability brings the rest). */
static void test_late_reader(void **state)
{
    (void)state;
    struct env e;
    env_start(&e, 1, 1, NULL);
    struct pcli c;
    mp_connect(&e, &c);
    int small = 16384;
    setsockopt(c.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    enum { TOTAL = 4 << 20 };
    uint8_t cmd[FAKEDC_CMD_LEN];
    fakedc_cmd(cmd, "SRCE", 21, TOTAL);
    assert_int_equal(pfmp_send_packet(&c, OBFS2_TAG_PADDED, cmd, sizeof cmd), 0);
    struct held_arg ha = {.e = &e};
    assert_true(tgtest_wait_until(holds_some, &ha, DFX_WAIT_MS)); /* its socket is full */
    c.framed = true; /* read the answers as packets from here on */
    static uint8_t buf[65536];
    for (uint64_t got = 0; got < TOTAL;) {
        ssize_t k = pcli_recv(&c, buf, sizeof buf);
        assert_true(k > 0);
        assert_true(pstream_check(21, got, buf, (size_t)k) < 0);
        got += (uint64_t)k;
    }
    assert_true(metric(&e, "middle_proxy_client_buffer_bytes{}") == 0);
    pcli_close(&c);
    env_stop(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thousand_clients),
        cmocka_unit_test(test_quickack_and_close),
        cmocka_unit_test(test_mp_killed_and_restarted),
        cmocka_unit_test(test_slow_reader),
        cmocka_unit_test(test_late_reader),
    };
    return tgtest_result(cmocka_run_group_tests(tests, NULL, NULL));
}
