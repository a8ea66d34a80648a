/*
 * proxy/engine/midproxy: a worker's middle-proxy pool on a loop driven by this thread,
 * against tgproxy-fakemp (a separate process) relaying to the fake DC. The test plays the
 * relay on each bridge fd: the obfuscated2 DC header, then the client's packets in its
 * transport framing, DC-leg encrypted; and reads the answers back the same way. Checked:
 * the pool comes up (2 connections), clients of every transport get every byte back, the
 * ad tag and the client's address reach the middle proxy, many clients share the two
 * connections, a quick ack comes back as the client's token, a bridge closed by the client
 * is cancelled on the middle proxy, a slow reader is closed by the buffering policy while
 * another client on the same connection goes on, and a middle proxy killed mid-stream
 * closes its clients and is reconnected when it is back.
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
    struct midproxy_cfg cfg = {
        .secret_len = sizeof f->secret, .per_dc = per_dc, .client_buf_max = client_buf_max};
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

/* One client as the relay would drive a bridge. */
struct cli {
    int fd;
    uint32_t tag;
    struct crypto_ctr enc, dec;
    uint8_t rx[1 << 16]; /* decrypted, not yet a whole packet */
    size_t rx_len;
    uint8_t got[1 << 16]; /* payload bytes received */
    size_t got_len;
    uint32_t acks[4];
    size_t nacks;
    bool eof;
};

static void cli_attach(struct fx *f, struct cli *c, uint32_t tag, const uint8_t *ad_tag,
                       uint16_t cport)
{
    memset(c, 0, sizeof *c);
    c->tag = tag;
    struct sockaddr_in cl = {.sin_family = AF_INET, .sin_port = htons(cport)};
    struct sockaddr_in px = {.sin_family = AF_INET, .sin_port = htons(443)};
    inet_pton(AF_INET, "203.0.113.9", &cl.sin_addr);
    inet_pton(AF_INET, "198.51.100.4", &px.sin_addr);
    c->fd = midproxy_attach(&f->mw, 2, ad_tag, (struct sockaddr *)&cl, (struct sockaddr *)&px);
    assert_true(c->fd >= 0);
    uint8_t wire[64];
    assert_int_equal(obfs2_dc_header(tag, 2, NULL, NULL, NULL, wire, NULL, &c->enc, &c->dec), 0);
    assert_int_equal(write(c->fd, wire, 64), 64);
}

/* A packet in the client's framing (quick-ack bit as asked), encrypted, written. */
static void cli_packet(struct cli *c, const void *p, size_t n, bool quickack)
{
    uint8_t buf[8192];
    size_t h = mtframe_head(c->tag, n, 0, buf);
    assert_true(h > 0 && h + n <= sizeof buf);
    if (quickack)
        buf[h == 1 ? 0 : 3] |= 0x80;
    memcpy(buf + h, p, n);
    assert_int_equal(crypto_ctr_apply(&c->enc, buf, h + n), 0);
    assert_int_equal(write(c->fd, buf, h + n), (ssize_t)(h + n));
}

/* Read what is there (non-blocking), splitting packets and quick-ack tokens. */
static void cli_read(struct cli *c)
{
    for (;;) {
        uint8_t buf[16384];
        ssize_t r = read(c->fd, buf, sizeof buf);
        if (r == 0)
            c->eof = true;
        if (r <= 0)
            return;
        assert_int_equal(crypto_ctr_apply(&c->dec, buf, (size_t)r), 0);
        assert_true(c->rx_len + (size_t)r <= sizeof c->rx);
        memcpy(c->rx + c->rx_len, buf, (size_t)r);
        c->rx_len += (size_t)r;
        size_t at = 0;
        for (;;) {
            if (c->rx_len - at >= 4 && c->tag != OBFS2_TAG_ABRIDGED && (c->rx[at + 3] & 0x80)) {
                memcpy(&c->acks[c->nacks++ & 3], c->rx + at, 4); /* a token, not a length */
                at += 4;
                continue;
            }
            struct mtframe_pkt p;
            if (mtframe_next(c->tag, c->rx + at, c->rx_len - at, 0, &p, NULL) != MTFRAME_OK)
                break;
            assert_true(c->got_len + p.len <= sizeof c->got);
            memcpy(c->got + c->got_len, c->rx + at + p.off, p.len);
            c->got_len += p.len;
            at += p.consumed;
        }
        memmove(c->rx, c->rx + at, c->rx_len - at);
        c->rx_len -= at;
    }
}

static void cli_close(struct cli *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    crypto_ctr_cleanup(&c->enc);
    crypto_ctr_cleanup(&c->dec);
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
        cli_read(&m->c[i]);
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
    assert_memory_equal(&c[1].acks[0], &last, 4);
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
    cli_read(&m->c[1]);
    return f->mw.st.slow_closed == 1 && m->c[1].got_len >= m->want;
}

static bool eof_all(struct fx *f, void *arg)
{
    (void)f;
    struct many *m = arg;
    for (size_t i = 0; i < m->n; i++) {
        cli_read(&m->c[i]);
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
    /* the slow one was closed (its fd sees EOF once drained), and cancelled upstream */
    dfx_wait_log(&f.d, "close-conn", 1);
    assert_int_equal(f.mw.st.clients, 1);
    assert_int_equal(f.mw.st.up, 1); /* the connection itself is fine */
    cli_close(&c[0]);
    cli_close(&c[1]);
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
    struct sockaddr_in a = {.sin_family = AF_INET};
    assert_int_equal(midproxy_attach(&f.mw, 2, NULL, (struct sockaddr *)&a, (struct sockaddr *)&a),
                     -EAGAIN);
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
        cmocka_unit_test(test_clients_tags_acks),
        cmocka_unit_test(test_thousand_clients),
        cmocka_unit_test(test_slow_reader),
        cmocka_unit_test(test_mp_restart),
    };
    return tgtest_result(cmocka_run_group_tests(tests, NULL, NULL));
}
