/*
 * tgproxy-fakemp (tools/fakemp), the fake middle proxy the middle-proxy tests stand on, driven
 * by a small blocking middle-proxy client written here from the wire codecs, to the fake DC
 * (tests/support/proxy_fakedc.h) on 127.0.0.1: the handshake with the right secret, a refused
 * wrong secret and a refused wrong address (what NAT without a public address looks like),
 * packets of two clients multiplexed on one connection echoed by the DC byte for byte, the
 * ad tag and the addresses in the fake's log, a quick ack, a ping, RPC_CLOSE_CONN closing the
 * DC side, and RPC_CLOSE_EXT when the DC goes away. (The independent check, mtprotoproxy's
 * middle-proxy client through the fake, was run by hand: docs/tgproxy.md.)
 */
#include "tgtest.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "daemon_fx.h"
#include "proxy/wire/crypto.h"
#include "proxy/wire/mpcrypto.h"
#include "proxy/wire/mpframe.h"
#include "proxy/wire/mprpc.h"
#include "proxy/wire/mpsess.h"
#include "proxy/wire/obfs2.h"
#include "proxy_fakedc.h"
#include "proxy_fakemp.h"

struct mpc {
    int fd;
    struct mpcbc enc, dec;
    int32_t out_seq, in_seq;
    bool encrypted;
    uint8_t buf[1 << 17]; /* decrypted, not yet parsed */
    size_t len;
};

static int tcp_connect(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    struct timeval tv = {.tv_sec = 20};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

/* Pad the plaintext nonce frame to 16 bytes, as mtprotoproxy does (MTProxy does not). */
static bool pad_nonce;

static void mpc_send(struct mpc *c, const uint8_t *p, size_t n)
{
    uint8_t out[4096];
    size_t w = mpframe_build(out, sizeof out, c->out_seq++, p, n, c->encrypted || pad_nonce);
    assert_true(w > 0);
    if (c->encrypted)
        assert_int_equal(mpcbc_apply(&c->enc, out, out, w), 0);
    assert_int_equal(send(c->fd, out, w, MSG_NOSIGNAL), (ssize_t)w);
}

/* The next frame's payload copied to out (returns its length), or -1 on EOF / a bad frame. */
static ssize_t mpc_recv(struct mpc *c, uint8_t *out, size_t cap)
{
    for (;;) {
        struct mpframe f;
        int r = mpframe_parse(c->buf, c->len, 0, &f, NULL);
        if (r == MPFRAME_BAD)
            return -1;
        if (r == MPFRAME_OK) {
            assert_int_equal(f.seq, c->in_seq);
            c->in_seq++;
            assert_true(f.len <= cap);
            memcpy(out, c->buf + f.off, f.len);
            memmove(c->buf, c->buf + f.consumed, c->len - f.consumed);
            c->len -= f.consumed;
            return (ssize_t)f.len;
        }
        /* encrypted: read whole blocks only (the fake sends whole blocks) */
        uint8_t tmp[16];
        size_t want = c->encrypted ? 16 : 1, got = 0;
        while (got < want) {
            ssize_t n = recv(c->fd, tmp + got, want - got, 0);
            if (n <= 0)
                return -1;
            got += (size_t)n;
        }
        if (c->encrypted)
            assert_int_equal(mpcbc_apply(&c->dec, tmp, tmp, 16), 0);
        assert_true(c->len + want <= sizeof c->buf);
        memcpy(c->buf + c->len, tmp, want);
        c->len += want;
    }
}

/* Connect and handshake as tgproxy would; returns 0, or -1 when the fake refused. */
static int mpc_open(struct mpc *c, uint16_t port, const uint8_t *secret, size_t slen,
                    const uint8_t *claim_ip4)
{
    memset(c, 0, sizeof *c);
    c->fd = tcp_connect(port);
    c->out_seq = c->in_seq = -2;
    struct mprpc_nonce n = {.schema = MPRPC_CRYPTO_AES, .ts = (uint32_t)time(NULL)};
    memcpy(&n.key_select, secret, 4);
    assert_int_equal(crypto_random(n.nonce, 16), 0);
    uint8_t m[64];
    mpc_send(c, m, mprpc_nonce_build(m, &n));
    ssize_t got = mpc_recv(c, m, sizeof m);
    if (got < 0)
        return -1;
    struct mprpc_nonce sn;
    assert_int_equal(mprpc_nonce_parse(m, (size_t)got, &sn), 0);
    struct sockaddr_in me, peer;
    socklen_t l1 = sizeof me, l2 = sizeof peer;
    getsockname(c->fd, (struct sockaddr *)&me, &l1);
    getpeername(c->fd, (struct sockaddr *)&peer, &l2);
    struct mpcrypto_end srv = {.family = AF_INET, .port = ntohs(peer.sin_port)};
    struct mpcrypto_end clt = {.family = AF_INET, .port = ntohs(me.sin_port)};
    memcpy(srv.ip, &peer.sin_addr, 4);
    memcpy(clt.ip, claim_ip4 ? (const void *)claim_ip4 : (const void *)&me.sin_addr, 4);
    struct mpcrypto_keys k;
    assert_int_equal(mpcrypto_derive(true, sn.nonce, n.nonce, n.ts, &srv, &clt, secret, slen, &k),
                     0);
    assert_int_equal(mpcbc_init(&c->enc, k.enc_key, k.enc_iv, true), 0);
    assert_int_equal(mpcbc_init(&c->dec, k.dec_key, k.dec_iv, false), 0);
    c->encrypted = true;
    struct mprpc_handshake h = {0};
    uint8_t ip4[4] = {127, 0, 0, 1};
    mprpc_pid(h.sender, ip4, clt.port, 77, n.ts);
    mpc_send(c, m, mprpc_handshake_build(m, &h));
    got = mpc_recv(c, m, sizeof m);
    if (got < 0)
        return -1;
    struct mprpc_handshake back;
    int32_t err;
    assert_int_equal(mprpc_handshake_parse(m, (size_t)got, &back, &err), 0);
    assert_memory_equal(back.peer, h.sender, MPRPC_PID_LEN);
    return 0;
}

static void mpc_close(struct mpc *c)
{
    close(c->fd);
    mpcbc_cleanup(&c->enc);
    mpcbc_cleanup(&c->dec);
}

static void req(struct mpc *c, uint64_t id, const uint8_t *tag, bool quickack, const void *pkt,
                size_t n)
{
    struct mprpc_req r = {.conn_id = id, .has_tag = tag != NULL};
    r.flags = mprpc_req_flags(OBFS2_TAG_INTERMEDIATE, tag != NULL, quickack, false);
    uint8_t ip[4] = {203, 0, 113, 7}, me[4] = {198, 51, 100, 1};
    mprpc_addr_set(&r.client, AF_INET, ip, 40000 + (uint16_t)(id & 0xff));
    mprpc_addr_set(&r.proxy, AF_INET, me, 443);
    if (tag)
        memcpy(r.ad_tag, tag, 16);
    uint8_t m[2048];
    size_t h = mprpc_req_head(m, &r);
    assert_true(h + n <= sizeof m);
    memcpy(m + h, pkt, n);
    mpc_send(c, m, h + n);
}

/* The next message that is not for another purpose; parsed into *msg, payload into out. */
static void next_msg(struct mpc *c, struct mprpc_msg *msg, uint8_t *out, size_t *n)
{
    static uint8_t m[1 << 17];
    ssize_t got = mpc_recv(c, m, sizeof m);
    assert_true(got >= 0);
    assert_int_equal(mprpc_parse(m, (size_t)got, msg), 0);
    if (out) {
        memcpy(out, m + msg->off, msg->len);
        *n = msg->len;
    }
}

struct fx {
    struct dfx d;
    struct fakedc *dc;
    char secret_path[128];
    uint8_t secret[128];
};

static void fx_start(struct fx *f, const char *extra, const char *extra2)
{
    uint16_t dcport;
    f->dc = fakedc_start(&dcport);
    assert_non_null(f->dc);
    dfx_init(&f->d, "fakemp");
    dfx_path(&f->d, "proxy-secret", f->secret_path, sizeof f->secret_path);
    for (size_t i = 0; i < sizeof f->secret; i++)
        f->secret[i] = (uint8_t)(i * 7 + 3);
    pfmp_secret(f->secret_path, f->secret, sizeof f->secret);
    const char *more[] = {extra, extra2, NULL};
    pfmp_start(&f->d, f->secret_path, dcport, 0, more);
}

static void fx_stop(struct fx *f)
{
    assert_int_equal(dfx_stop(&f->d, SIGTERM), 0);
    dfx_done(&f->d);
    fakedc_stop(f->dc);
}

static bool dc_one_open(void *arg)
{
    return fakedc_counters(arg).open == 1;
}

static void test_relay_tags_acks(void **state)
{
    (void)state;
    struct fx f;
    fx_start(&f, NULL, NULL);
    struct mpc c;
    assert_int_equal(mpc_open(&c, f.d.port, f.secret, sizeof f.secret, NULL), 0);
    dfx_wait_log(&f.d, "handshake ok from 127.0.0.1:", 1);

    uint8_t tag[16];
    for (int i = 0; i < 16; i++)
        tag[i] = (uint8_t)(0xa0 + i);
    /* two clients on one connection, each an ECHO session at the fake DC */
    uint8_t cmd[FAKEDC_CMD_LEN], data[2][256], back[1 << 17];
    for (int k = 0; k < 2; k++) {
        fakedc_cmd(cmd, "ECHO", 0, 0);
        req(&c, 0x1000 + (uint64_t)k, k == 0 ? tag : NULL, false, cmd, sizeof cmd);
        for (size_t i = 0; i < sizeof data[k]; i++)
            data[k][i] = (uint8_t)(i * 13 + (size_t)k * 101);
    }
    req(&c, 0x1000, tag, false, data[0], sizeof data[0]);
    req(&c, 0x1001, NULL, true, data[1], sizeof data[1]);
    size_t got[2] = {0, 0};
    bool acked = false;
    for (int rounds = 0; rounds < 100 && (got[0] < 256 || got[1] < 256 || !acked); rounds++) {
        struct mprpc_msg m;
        size_t n = 0;
        next_msg(&c, &m, back, &n);
        if (m.kind == MPRPC_K_SIMPLE_ACK) {
            assert_int_equal(m.conn_id, 0x1001);
            /* the fake's token: the packet's last word with bit 31 set */
            uint32_t last;
            memcpy(&last, data[1] + 252, 4);
            assert_int_equal(m.confirm, last | 0x80000000u);
            acked = true;
            continue;
        }
        assert_int_equal(m.kind, MPRPC_K_PROXY_ANS);
        int k = m.conn_id == 0x1000 ? 0 : 1;
        assert_int_equal(m.conn_id, 0x1000 + (uint64_t)k);
        assert_true(got[k] + n <= 256);
        assert_memory_equal(back, data[k] + got[k], n);
        got[k] += n;
    }
    assert_int_equal(got[0], 256);
    assert_int_equal(got[1], 256);
    assert_true(acked);
    dfx_wait_log(&f.d,
                 "client 0000000000001000 tag a0a1a2a3a4a5a6a7a8a9aaabacadaeaf from "
                 "203.0.113.7:40000 via 198.51.100.1:443 flags 0x20021008",
                 1);
    dfx_wait_log(&f.d, "client 0000000000001001 tag none from 203.0.113.7:40001", 1);
    dfx_wait_log(&f.d, "quickack 0000000000001001", 1);

    /* ping */
    uint8_t p[MPRPC_SHORT_MAX];
    mpc_send(&c, p, mprpc_ping(p, 0x55aa));
    struct mprpc_msg m;
    next_msg(&c, &m, NULL, NULL);
    assert_int_equal(m.kind, MPRPC_K_PONG);
    assert_int_equal(m.ping_id, 0x55aa);

    /* the proxy closes client 0: the fake DC sees the connection go */
    struct fakedc_counters before = fakedc_counters(f.dc);
    assert_int_equal(before.open, 2);
    mpc_send(&c, p, mprpc_close_conn(p, 0x1000));
    dfx_wait_log(&f.d, "close-conn 0000000000001000", 1);
    assert_true(tgtest_wait_until(dc_one_open, f.dc, DFX_WAIT_MS));
    mpc_close(&c);
    fx_stop(&f);
}

static void test_dc_gone_sends_close_ext(void **state)
{
    (void)state;
    struct fx f;
    fx_start(&f, NULL, NULL);
    struct mpc c;
    assert_int_equal(mpc_open(&c, f.d.port, f.secret, sizeof f.secret, NULL), 0);
    uint8_t cmd[FAKEDC_CMD_LEN];
    fakedc_cmd(cmd, "SRCE", 9, 64); /* 64 bytes, then the DC keeps the connection */
    req(&c, 0x77, NULL, false, cmd, sizeof cmd);
    size_t got = 0;
    uint8_t back[1 << 17];
    while (got < 64) {
        struct mprpc_msg m;
        size_t n;
        next_msg(&c, &m, back, &n);
        assert_int_equal(m.kind, MPRPC_K_PROXY_ANS);
        got += n;
    }
    assert_int_equal(got, 64);
    fakedc_stop(f.dc); /* every DC connection closes */
    f.dc = NULL;
    struct mprpc_msg m;
    next_msg(&c, &m, NULL, NULL);
    assert_int_equal(m.kind, MPRPC_K_CLOSE_EXT);
    assert_int_equal(m.conn_id, 0x77);
    mpc_close(&c);
    fx_stop(&f);
}

static void test_refusals(void **state)
{
    (void)state;
    struct fx f;
    fx_start(&f, NULL, NULL);
    /* another secret with the same key selector: the keys differ, the handshake fails */
    uint8_t wrong[128];
    memcpy(wrong, f.secret, sizeof wrong);
    wrong[100] ^= 1;
    struct mpc c;
    assert_int_equal(mpc_open(&c, f.d.port, wrong, sizeof wrong, NULL), -1);
    mpc_close(&c);
    dfx_wait_log(&f.d, "no valid encrypted frame", 1);
    /* a client claiming another address than the fake sees (NAT, no public address set) */
    uint8_t nat[4] = {192, 0, 2, 44};
    assert_int_equal(mpc_open(&c, f.d.port, f.secret, sizeof f.secret, nat), -1);
    mpc_close(&c);
    dfx_wait_log(&f.d, "no valid encrypted frame", 2);
    /* another key selector */
    wrong[0] ^= 1;
    assert_int_equal(mpc_open(&c, f.d.port, wrong, sizeof wrong, NULL), -1);
    mpc_close(&c);
    dfx_wait_log(&f.d, "unknown key selector", 1);
    assert_int_equal(dfx_log_count(&f.d, "handshake ok"), 0);
    /* the log never holds the secret */
    char hex[9];
    snprintf(hex, sizeof hex, "%02x%02x%02x%02x", f.secret[4], f.secret[5], f.secret[6],
             f.secret[7]);
    assert_int_equal(dfx_log_count(&f.d, hex), 0);
    fx_stop(&f);
}

/* mpsess (tgproxy's session code) through the fake to the fake DC: the same path the engine
   takes, over a blocking socket */
struct sess_rx {
    int fd;
    uint8_t got[4096];
    size_t len;
};

static int sess_send(void *ud, const uint8_t *p, size_t n)
{
    struct sess_rx *x = ud;
    return send(x->fd, p, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

static int sess_msg(void *ud, const struct mprpc_msg *m, const uint8_t *p, size_t n)
{
    (void)n;
    struct sess_rx *x = ud;
    assert_int_equal(m->kind, MPRPC_K_PROXY_ANS);
    assert_true(x->len + m->len <= sizeof x->got);
    memcpy(x->got + x->len, p + m->off, m->len);
    x->len += m->len;
    return 0;
}

static void test_session_through_fake(void **state)
{
    (void)state;
    struct fx f;
    fx_start(&f, NULL, NULL);
    struct sess_rx x = {.fd = tcp_connect(f.d.port)};
    struct sockaddr_in me, peer;
    socklen_t l1 = sizeof me, l2 = sizeof peer;
    getsockname(x.fd, (struct sockaddr *)&me, &l1);
    getpeername(x.fd, (struct sockaddr *)&peer, &l2);
    struct mpsess_cfg cfg = {
        .secret = f.secret, .secret_len = sizeof f.secret, .now = (uint32_t)time(NULL)};
    cfg.local.family = cfg.remote.family = AF_INET;
    memcpy(cfg.local.ip, &me.sin_addr, 4);
    memcpy(cfg.remote.ip, &peer.sin_addr, 4);
    cfg.local.port = ntohs(me.sin_port);
    cfg.remote.port = ntohs(peer.sin_port);
    assert_int_equal(crypto_random(cfg.nonce, 16), 0);
    uint8_t ip4[4] = {127, 0, 0, 1};
    mprpc_pid(cfg.pid, ip4, cfg.local.port, 99, cfg.now);
    struct mpsess s;
    uint8_t out[2048];
    size_t n;
    assert_int_equal(mpsess_start(&s, &cfg, out, sizeof out, &n), 0);
    assert_int_equal(send(x.fd, out, n, 0), (ssize_t)n);
    struct mpsess_sink sink = {.ud = &x, .send = sess_send, .msg = sess_msg};
    uint8_t in[4096];
    while (s.state != MPSESS_READY) {
        ssize_t r = recv(x.fd, in, sizeof in, 0);
        assert_true(r > 0);
        assert_int_equal(mpsess_feed(&s, in, (size_t)r, &sink), 0);
    }
    dfx_wait_log(&f.d, "handshake ok", 1);
    /* an ECHO session and 1 KiB through it */
    uint8_t data[1024], cmd[FAKEDC_CMD_LEN];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 31 + 7);
    fakedc_cmd(cmd, "ECHO", 0, 0);
    const uint8_t *pkts[2] = {cmd, data};
    size_t lens[2] = {sizeof cmd, sizeof data};
    for (int k = 0; k < 2; k++) {
        struct mprpc_req r = {.conn_id = 42, .has_tag = true};
        r.flags = mprpc_req_flags(OBFS2_TAG_PADDED, true, false, false);
        uint8_t cl[4] = {198, 18, 0, 9};
        mprpc_addr_set(&r.client, AF_INET, cl, 5555);
        mprpc_addr_set(&r.proxy, AF_INET, ip4, 443);
        memset(r.ad_tag, 0x5a, 16);
        size_t h = mprpc_req_head(out + 8, &r);
        memcpy(out + 8 + h, pkts[k], lens[k]);
        size_t w = mpsess_wrap(&s, out, sizeof out, h + lens[k]);
        assert_true(w > 0);
        assert_int_equal(send(x.fd, out, w, 0), (ssize_t)w);
    }
    while (x.len < sizeof data) {
        ssize_t r = recv(x.fd, in, sizeof in, 0);
        assert_true(r > 0);
        assert_int_equal(mpsess_feed(&s, in, (size_t)r, &sink), 0);
    }
    assert_int_equal(x.len, sizeof data);
    assert_memory_equal(x.got, data, sizeof data);
    dfx_wait_log(&f.d,
                 "client 000000000000002a tag 5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a from "
                 "198.18.0.9:5555 via 127.0.0.1:443 flags 0x28021008",
                 1);
    mpsess_cleanup(&s);
    close(x.fd);
    fx_stop(&f);
}

static void test_padded_nonce(void **state)
{
    (void)state;
    /* padding words after the plaintext nonce are not ciphertext (found by running
       mtprotoproxy's middle-proxy client through the fake) */
    struct fx f;
    fx_start(&f, NULL, NULL);
    struct mpc c;
    pad_nonce = true;
    assert_int_equal(mpc_open(&c, f.d.port, f.secret, sizeof f.secret, NULL), 0);
    pad_nonce = false;
    mpc_close(&c);
    dfx_wait_log(&f.d, "handshake ok", 1);
    fx_stop(&f);
}

static void test_nat_address(void **state)
{
    (void)state;
    /* told the proxy's public address, the fake derives the keys with it: a client that
       claims that address is accepted, one that claims its socket's address is not */
    struct fx f;
    fx_start(&f, "--client-addr", "192.0.2.44");
    uint8_t nat[4] = {192, 0, 2, 44};
    struct mpc c;
    assert_int_equal(mpc_open(&c, f.d.port, f.secret, sizeof f.secret, nat), 0);
    mpc_close(&c);
    assert_int_equal(mpc_open(&c, f.d.port, f.secret, sizeof f.secret, NULL), -1);
    mpc_close(&c);
    dfx_wait_log(&f.d, "handshake ok", 1);
    dfx_wait_log(&f.d, "no valid encrypted frame", 1);
    fx_stop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relay_tags_acks), cmocka_unit_test(test_dc_gone_sends_close_ext),
        cmocka_unit_test(test_refusals),        cmocka_unit_test(test_nat_address),
        cmocka_unit_test(test_padded_nonce),    cmocka_unit_test(test_session_through_fake),
    };
    return tgtest_result(cmocka_run_group_tests(tests, NULL, NULL));
}
