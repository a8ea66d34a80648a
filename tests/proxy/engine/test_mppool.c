/*
 * proxy/engine/midproxy: a worker's middle-proxy pool on a loop driven by this thread,
 * against tgproxy-fakemp (a separate process) relaying to the fake DC. The test is the
 * clients' owner (as mprelay.c is in the daemon): packets up through midproxy_client_send,
 * answers, acks and ends recorded from the pool's callbacks. Checked: the pool comes up (2
 * connections), clients of every transport get every byte back, the ad tag and the
 * client's address reach the middle proxy, many clients share the two connections, a quick
 * ack comes back as the client's token, a client detached is cancelled on the middle proxy,
 * a slow reader is closed by the buffering policy while another client on the same
 * connection goes on, slow clients over the worker's budget lose the one holding most, and
 * a middle proxy killed mid-stream ends its clients and is reconnected when it is back.
 */
#include "tgtest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include "daemon_fx.h"
#include "proxy/engine/loop.h"
#include "proxy/engine/midproxy.h"
#include "proxy/wire/crypto.h"
#include "proxy/wire/mtframe.h"
#include "proxy/wire/obfs2.h"
#include "proxy_fakedc.h"
#include "proxy_fakemp.h"

struct fx {
    struct dfx d;
    struct fakedc *dc;
    uint16_t dcport;
    char secret_path[128];
    uint8_t secret[128];
    struct loop loop;
    struct midproxy_worker mw;
};

static void fakemp_start(struct fx *f, uint16_t port)
{
    pfmp_start(&f->d, f->secret_path, f->dcport, port, NULL);
}

static size_t buf_total; /* the next fx_start's budget over all clients (0 = default) */

static void fx_start(struct fx *f, unsigned per_dc, size_t client_buf_max)
{
    memset(f, 0, sizeof *f);
    f->dc = fakedc_start(&f->dcport);
    assert_non_null(f->dc);
    dfx_init(&f->d, "midproxy");
    dfx_path(&f->d, "proxy-secret", f->secret_path, sizeof f->secret_path);
    for (size_t i = 0; i < sizeof f->secret; i++)
        f->secret[i] = (uint8_t)(i * 11 + 5);
    pfmp_secret(f->secret_path, f->secret, sizeof f->secret);
    fakemp_start(f, 0);
    assert_int_equal(loop_init(&f->loop), 0);
    struct midproxy_cfg cfg = {.secret_len = sizeof f->secret,
                               .per_dc = per_dc,
                               .client_buf_max = client_buf_max,
                               .buf_total = buf_total};
    memcpy(cfg.secret, f->secret, sizeof f->secret);
    char conf[128], err[128];
    snprintf(conf, sizeof conf, "default 2;\nproxy_for 2 127.0.0.1:%u;\n", f->d.port);
    assert_int_equal(mpconf_parse(conf, strlen(conf), &cfg.conf, err, sizeof err), 0);
    assert_int_equal(midproxy_init(&f->mw, &f->loop, &cfg), 0);
}

static void fx_stop(struct fx *f)
{
    midproxy_cleanup(&f->mw);
    loop_cleanup(&f->loop);
    assert_int_equal(dfx_stop(&f->d, SIGTERM), 0);
    dfx_done(&f->d);
    fakedc_stop(f->dc);
}

/* Run the loop until cond holds (bounded: the loop's own waits, at most ~20 s in all). */
static bool pump_until(struct fx *f, bool (*cond)(struct fx *, void *), void *arg)
{
    for (int i = 0; i < 2000; i++) {
        if (cond(f, arg))
            return true;
        loop_run_once(&f->loop, 10);
    }
    return cond(f, arg);
}

static bool ups(struct fx *f, void *arg)
{
    return f->mw.st.up == (uint64_t)(uintptr_t)arg;
}

/* One client as its owner (mprelay.c in the daemon) drives it: packets up through
   midproxy_client_send, answers and acks recorded as the callbacks get them. A slow client
   never drains: it holds every answer. */
struct cli {
    struct midproxy_client cl; /* first */
    struct fx *f;
    bool slow;
    long held;
    uint8_t got[1 << 16]; /* payload bytes received (a slow client only counts them) */
    size_t got_len;
    uint32_t acks[4];
    size_t nacks;
    bool eof;
    enum midproxy_end why;
};

static long on_answer(struct midproxy_client *cl, uint8_t *pkt, size_t n)
{
    struct cli *c = (struct cli *)(void *)cl;
    assert_true(n % 4 == 0);
    if (!c->slow) {
        assert_true(c->got_len + n <= sizeof c->got);
        memcpy(c->got + c->got_len, pkt, n);
    }
    c->got_len += n;
    if (c->slow)
        c->held += (long)n;
    return c->held;
}

static long on_ack(struct midproxy_client *cl, uint32_t confirm)
{
    struct cli *c = (struct cli *)(void *)cl;
    c->acks[c->nacks++ & 3] = confirm;
    return c->held;
}

static void on_closed(struct midproxy_client *cl, enum midproxy_end why)
{
    struct cli *c = (struct cli *)(void *)cl;
    assert_null(cl->mc);
    c->eof = true;
    c->why = why;
}

static void on_resume(struct midproxy_client *cl)
{
    (void)cl;
}

static const struct midproxy_client_ops ops = {
    .answer = on_answer, .ack = on_ack, .closed = on_closed, .resume = on_resume};

static void cli_attach(struct fx *f, struct cli *c, uint32_t tag, const uint8_t *ad_tag,
                       uint16_t cport)
{
    memset(c, 0, sizeof *c);
    c->f = f;
    c->cl.tag = tag;
    c->cl.ad_tag = ad_tag;
    struct sockaddr_in cl = {.sin_family = AF_INET, .sin_port = htons(cport)};
    struct sockaddr_in px = {.sin_family = AF_INET, .sin_port = htons(443)};
    inet_pton(AF_INET, "203.0.113.9", &cl.sin_addr);
    inet_pton(AF_INET, "198.51.100.4", &px.sin_addr);
    midproxy_addr(&c->cl.client, (struct sockaddr *)&cl);
    midproxy_addr(&c->cl.proxy, (struct sockaddr *)&px);
    f->mw.ops = &ops;
    assert_int_equal(midproxy_client_attach(&f->mw, &c->cl, 2), 0);
}

/* A packet up (quick ack as asked), sent at once. */
static void cli_packet(struct cli *c, const void *p, size_t n, bool quickack)
{
    assert_int_equal(midproxy_client_send(&c->f->mw, &c->cl, p, n, quickack), 0);
    midproxy_client_flush(&c->f->mw, &c->cl);
}

static void cli_close(struct cli *c)
{
    midproxy_client_detach(&c->f->mw, &c->cl);
}

struct many {
    struct cli *c;
    size_t n, want;
};

static bool all_got(struct fx *f, void *arg)
{
    (void)f;
    struct many *m = arg;
    for (size_t i = 0; i < m->n; i++) {
        if (m->c[i].got_len < m->want)
            return false;
    }
    return true;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(i * 7 + seed * 13 + (i >> 8));
}

static void test_clients_tags_acks(void **state)
{
    (void)state;
    struct fx f;
    fx_start(&f, 2, 0);
    assert_true(pump_until(&f, ups, (void *)(uintptr_t)2));
    dfx_wait_log(&f.d, "handshake ok", 2);

    uint8_t tag[16];
    memset(tag, 0xc3, 16);
    static struct cli c[3];
    uint32_t tags[3] = {OBFS2_TAG_PADDED, OBFS2_TAG_INTERMEDIATE, OBFS2_TAG_ABRIDGED};
    uint8_t cmd[FAKEDC_CMD_LEN], data[3][2048];
    fakedc_cmd(cmd, "ECHO", 0, 0);
    for (int k = 0; k < 3; k++) {
        cli_attach(&f, &c[k], tags[k], k == 2 ? NULL : tag, (uint16_t)(41000 + k));
        cli_packet(&c[k], cmd, sizeof cmd, false);
        fill(data[k], sizeof data[k], (unsigned)k);
        cli_packet(&c[k], data[k], 1024, false);
        cli_packet(&c[k], data[k] + 1024, 1024, k == 1); /* client 1 asks for a quick ack */
    }
    struct many m = {.c = c, .n = 3, .want = 2048};
    assert_true(pump_until(&f, all_got, &m));
    for (int k = 0; k < 3; k++) {
        assert_int_equal(c[k].got_len, 2048);
        assert_memory_equal(c[k].got, data[k], 2048);
    }
    /* the quick ack: the fake's token (the packet's last word, bit 31) as the client reads it */
    assert_int_equal(c[1].nacks, 1);
    uint32_t last;
    memcpy(&last, data[1] + 2044, 4);
    last |= 0x80000000u;
    assert_int_equal(c[1].acks[0], last);
    assert_int_equal(f.mw.st.quickacks, 1);
    dfx_wait_log(&f.d,
                 "tag c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3 from 203.0.113.9:41000 via "
                 "198.51.100.4:443 flags 0x28021008",
                 1);
    dfx_wait_log(&f.d, "tag none from 203.0.113.9:41002 via 198.51.100.4:443 flags 0x40021000", 1);
    /* the two connections share the clients */
    assert_true(midproxy_conn_clients(&f.mw, 0) >= 1 && midproxy_conn_clients(&f.mw, 1) >= 1);

    /* a client going away is cancelled on the middle proxy */
    cli_close(&c[0]);
    for (int i = 0; i < 50 && dfx_log_count(&f.d, "close-conn") == 0; i++)
        loop_run_once(&f.loop, 10);
    dfx_wait_log(&f.d, "close-conn", 1);
    assert_int_equal(f.mw.st.clients, 2);
    cli_close(&c[1]);
    cli_close(&c[2]);
    fx_stop(&f);
}

static void test_thousand_clients(void **state)
{
    (void)state;
    struct fx f;
    fx_start(&f, 2, 0);
    assert_true(pump_until(&f, ups, (void *)(uintptr_t)2));
    enum { N = 1000, BYTES = 512 };
    struct cli *c = calloc(N, sizeof *c);
    uint8_t cmd[FAKEDC_CMD_LEN], data[BYTES];
    fakedc_cmd(cmd, "ECHO", 0, 0);
    for (int k = 0; k < N; k++) {
        cli_attach(&f, &c[k], k % 3 == 0 ? OBFS2_TAG_ABRIDGED : OBFS2_TAG_PADDED, NULL,
                   (uint16_t)(20000 + k));
        cli_packet(&c[k], cmd, sizeof cmd, false);
        fill(data, BYTES, (unsigned)k);
        cli_packet(&c[k], data, BYTES, false);
        if (k % 50 == 49)
            loop_run_once(&f.loop, 0); /* let the pool read as the clients arrive */
    }
    struct many m = {.c = c, .n = N, .want = BYTES};
    assert_true(pump_until(&f, all_got, &m));
    for (int k = 0; k < N; k++) {
        fill(data, BYTES, (unsigned)k);
        assert_int_equal(c[k].got_len, BYTES);
        assert_memory_equal(c[k].got, data, BYTES);
    }
    assert_int_equal(f.mw.st.clients, N);
    assert_int_equal(midproxy_conn_clients(&f.mw, 0) + midproxy_conn_clients(&f.mw, 1), N);
    assert_true(midproxy_conn_clients(&f.mw, 0) >= N / 4 &&
                midproxy_conn_clients(&f.mw, 1) >= N / 4);
    for (int k = 0; k < N; k++)
        cli_close(&c[k]);
    free(c);
    fx_stop(&f);
}

static bool slow_closed(struct fx *f, void *arg)
{
    struct many *m = arg;
    return f->mw.st.slow_closed == 1 && m->c[1].got_len >= m->want;
}

static bool eof_all(struct fx *f, void *arg)
{
    (void)f;
    struct many *m = arg;
    for (size_t i = 0; i < m->n; i++) {
        if (!m->c[i].eof)
            return false;
    }
    return true;
}

static void test_slow_reader(void **state)
{
    (void)state;
    /* one connection, so both clients share it; 256 KiB beyond the socketpair for each */
    struct fx f;
    fx_start(&f, 1, 256 * 1024);
    assert_true(pump_until(&f, ups, (void *)(uintptr_t)1));
    static struct cli c[2];
    uint8_t cmd[FAKEDC_CMD_LEN], data[1024];
    /* client 0 asks the DC for 16 MiB and never reads; client 1 echoes 64 KiB meanwhile */
    cli_attach(&f, &c[0], OBFS2_TAG_INTERMEDIATE, NULL, 30000);
    c[0].slow = true;
    fakedc_cmd(cmd, "SRCE", 3, 16u << 20);
    cli_packet(&c[0], cmd, sizeof cmd, false);
    cli_attach(&f, &c[1], OBFS2_TAG_INTERMEDIATE, NULL, 30001);
    fakedc_cmd(cmd, "ECHO", 0, 0);
    cli_packet(&c[1], cmd, sizeof cmd, false);
    for (int i = 0; i < 64; i++) {
        fill(data, sizeof data, (unsigned)i);
        cli_packet(&c[1], data, sizeof data, false);
    }
    struct many m = {.c = c, .n = 2, .want = 64 * 1024};
    assert_true(pump_until(&f, slow_closed, &m));
    assert_int_equal(c[1].got_len, 64 * 1024);
    for (int i = 0; i < 64; i++) {
        fill(data, sizeof data, (unsigned)i);
        assert_memory_equal(c[1].got + i * 1024, data, 1024);
    }
    /* the slow one was closed as slow, past its 256 KiB, and cancelled upstream */
    assert_true(c[0].eof);
    assert_int_equal(c[0].why, MIDPROXY_END_SLOW);
    assert_true(c[0].got_len > 256 * 1024 && c[0].got_len < 16u << 20);
    assert_int_equal(f.mw.st.held, 0);
    dfx_wait_log(&f.d, "close-conn", 1);
    assert_int_equal(f.mw.st.clients, 1);
    assert_int_equal(f.mw.st.up, 1); /* the connection itself is fine */
    cli_close(&c[0]);
    cli_close(&c[1]);
    fx_stop(&f);
}

/* Slow clients together over the worker's budget: the one holding the most is closed, the
   smaller one keeps its answers, and a fast client beside them gets every byte. */
static void test_budget(void **state)
{
    (void)state;
    struct fx f;
    buf_total = 512 * 1024;
    fx_start(&f, 1, 4u << 20);
    buf_total = 0;
    assert_true(pump_until(&f, ups, (void *)(uintptr_t)1));
    static struct cli c[3];
    uint8_t cmd[FAKEDC_CMD_LEN], data[1024];
    cli_attach(&f, &c[0], OBFS2_TAG_PADDED, NULL, 32000);
    c[0].slow = true;
    fakedc_cmd(cmd, "SRCE", 4, 2u << 20);
    cli_packet(&c[0], cmd, sizeof cmd, false);
    cli_attach(&f, &c[1], OBFS2_TAG_PADDED, NULL, 32001);
    c[1].slow = true;
    fakedc_cmd(cmd, "SRCE", 5, 100 * 1024);
    cli_packet(&c[1], cmd, sizeof cmd, false);
    cli_attach(&f, &c[2], OBFS2_TAG_ABRIDGED, NULL, 32002);
    fakedc_cmd(cmd, "ECHO", 0, 0);
    cli_packet(&c[2], cmd, sizeof cmd, false);
    for (int i = 0; i < 32; i++) {
        fill(data, sizeof data, (unsigned)i);
        cli_packet(&c[2], data, sizeof data, false);
    }
    for (int i = 0;
         i < 2000 && !(c[0].eof && c[1].got_len >= 100 * 1024 && c[2].got_len >= 32 * 1024); i++)
        loop_run_once(&f.loop, 10);
    assert_true(c[0].eof);
    assert_int_equal(c[0].why, MIDPROXY_END_SLOW);
    assert_false(c[1].eof);
    assert_int_equal(c[1].got_len, 100 * 1024);
    assert_int_equal(f.mw.st.held, 100 * 1024); /* the small one's, under the budget */
    assert_int_equal(f.mw.st.slow_closed, 1);
    assert_int_equal(c[2].got_len, 32 * 1024);
    for (int i = 0; i < 32; i++) {
        fill(data, sizeof data, (unsigned)i);
        assert_memory_equal(c[2].got + i * 1024, data, 1024);
    }
    cli_close(&c[1]);
    cli_close(&c[2]);
    assert_int_equal(f.mw.st.held, 0);
    fx_stop(&f);
}

static void test_mp_restart(void **state)
{
    (void)state;
    struct fx f;
    fx_start(&f, 2, 0);
    assert_true(pump_until(&f, ups, (void *)(uintptr_t)2));
    uint16_t port = f.d.port;
    static struct cli c[2];
    uint8_t cmd[FAKEDC_CMD_LEN];
    fakedc_cmd(cmd, "ECHO", 0, 0);
    for (int k = 0; k < 2; k++) {
        cli_attach(&f, &c[k], OBFS2_TAG_PADDED, NULL, (uint16_t)(31000 + k));
        cli_packet(&c[k], cmd, sizeof cmd, false);
    }
    /* killed mid-stream: its clients are closed, no connection is up, attaching refuses */
    assert_int_equal(dfx_stop(&f.d, SIGTERM), 0);
    struct many m = {.c = c, .n = 2};
    assert_true(pump_until(&f, eof_all, &m));
    assert_true(pump_until(&f, ups, (void *)(uintptr_t)0));
    assert_int_equal(f.mw.st.clients, 0);
    assert_int_equal(c[0].why, MIDPROXY_END_CONN);
    struct midproxy_client none = {.tag = OBFS2_TAG_PADDED};
    assert_int_equal(midproxy_client_attach(&f.mw, &none, 2), -EAGAIN);
    assert_false(midproxy_ready(&f.mw, 2));
    cli_close(&c[0]);
    cli_close(&c[1]);
    /* back on the same port: the pool reconnects (backoff from 1 s) and serves again */
    fakemp_start(&f, port);
    assert_true(pump_until(&f, ups, (void *)(uintptr_t)2));
    assert_true(midproxy_ready(&f.mw, 2));
    cli_attach(&f, &c[0], OBFS2_TAG_INTERMEDIATE, NULL, 31005);
    cli_packet(&c[0], cmd, sizeof cmd, false);
    uint8_t data[256];
    fill(data, sizeof data, 9);
    cli_packet(&c[0], data, sizeof data, false);
    struct many one = {.c = c, .n = 1, .want = sizeof data};
    assert_true(pump_until(&f, all_got, &one));
    assert_memory_equal(c[0].got, data, sizeof data);
    assert_true(f.mw.st.ready >= 4);
    cli_close(&c[0]);
    fx_stop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clients_tags_acks), cmocka_unit_test(test_thousand_clients),
        cmocka_unit_test(test_slow_reader),       cmocka_unit_test(test_budget),
        cmocka_unit_test(test_mp_restart),
    };
    return tgtest_result(cmocka_run_group_tests(tests, NULL, NULL));
}
