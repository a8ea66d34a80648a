/*
 * proxy/wire/mpsess: tgproxy's side of a middle-proxy connection against the sessions of
 * vectors/middle_proxy.json (independent generator): with the vector's nonce, pid and
 * addresses the session must send exactly the vector's bytes (nonce frame, encrypted
 * handshake, a wrapped RPC_PROXY_REQ) and read the server's bytes, fed whole and cut at
 * every size, to the answer they carry. Then each failure with its reason: a wrong secret
 * (keys), a foreign nonce, a handshake error, a frame out of sequence, a bad message; and a
 * ping answered by a pong.
 */
#include "tgtest.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include "proxy/wire/mpframe.h"
#include "proxy/wire/mpsess.h"
#include "proxy_vectors.h"

struct rec {
    uint8_t sent[1024];
    size_t sent_len;
    int msgs;
    struct mprpc_msg last;
    uint8_t last_payload[256];
    size_t last_len;
};

static int rec_send(void *ud, const uint8_t *p, size_t n)
{
    struct rec *r = ud;
    assert_true(r->sent_len + n <= sizeof r->sent);
    memcpy(r->sent + r->sent_len, p, n);
    r->sent_len += n;
    return 0;
}

static int rec_msg(void *ud, const struct mprpc_msg *m, const uint8_t *p, size_t n)
{
    (void)n;
    struct rec *r = ud;
    r->msgs++;
    r->last = *m;
    assert_true(m->len <= sizeof r->last_payload);
    memcpy(r->last_payload, p + m->off, m->len);
    r->last_len = m->len;
    return 0;
}

struct vs {
    json_t *doc, *s;
    uint8_t secret[128];
    struct mpsess_cfg cfg;
};

static void load(struct vs *v, size_t which)
{
    v->doc = pv_load("vectors/middle_proxy.json");
    v->s = json_array_get(pv_need(v->doc, "sessions"), which);
    assert_non_null(v->s);
    size_t n;
    uint8_t *sec = pv_hex(v->doc, "proxy_secret_hex", &n);
    memcpy(v->secret, sec, 128);
    free(sec);
    memset(&v->cfg, 0, sizeof v->cfg);
    v->cfg.secret = v->secret;
    v->cfg.secret_len = 128;
    const char *cip = pv_str(v->s, "client_addr/ip"), *sip = pv_str(v->s, "server_addr/ip");
    v->cfg.local.family = v->cfg.remote.family = strchr(cip, ':') ? AF_INET6 : AF_INET;
    assert_int_equal(inet_pton(v->cfg.local.family, cip, v->cfg.local.ip), 1);
    assert_int_equal(inet_pton(v->cfg.remote.family, sip, v->cfg.remote.ip), 1);
    v->cfg.local.port = (uint16_t)pv_int(v->s, "client_addr/port");
    v->cfg.remote.port = (uint16_t)pv_int(v->s, "server_addr/port");
    v->cfg.now = (uint32_t)pv_int(v->s, "client_ts");
    uint8_t *nonce = pv_hex(v->s, "nonce_client_hex", &n),
            *pid = pv_hex(v->s, "client_pid_hex", &n);
    memcpy(v->cfg.nonce, nonce, 16);
    memcpy(v->cfg.pid, pid, 12);
    free(nonce), free(pid);
}

static const struct mpsess_sink *sink_of(struct rec *r)
{
    static struct mpsess_sink k;
    k = (struct mpsess_sink){.ud = r, .send = rec_send, .msg = rec_msg};
    return &k;
}

/* Start s and feed the server's nonce and first encrypted bytes, cut into pieces of step. */
static void run_to_ready(struct vs *v, struct mpsess *s, struct rec *r, size_t step)
{
    uint8_t out[64];
    size_t n, m;
    assert_int_equal(mpsess_start(s, &v->cfg, out, sizeof out, &n), 0);
    uint8_t *want = pv_hex(v->s, "client_nonce_frame_hex", &m);
    assert_int_equal(n, m);
    assert_memory_equal(out, want, m);
    free(want);
    uint8_t *sn = pv_hex(v->s, "server_nonce_frame_hex", &n);
    uint8_t *sw = pv_hex(v->s, "server_wire_hex", &m);
    uint8_t *all = malloc(n + m);
    memcpy(all, sn, n);
    memcpy(all + n, sw, m);
    for (size_t at = 0; at < n + m; at += step) {
        size_t k = n + m - at < step ? n + m - at : step;
        assert_int_equal(mpsess_feed(s, all + at, k, sink_of(r)), 0);
    }
    free(all), free(sn), free(sw);
}

static void test_vectors(void **state)
{
    (void)state;
    for (size_t which = 0; which < 2; which++) {
        size_t steps[] = {1, 3, 16, 17, 1000};
        for (size_t si = 0; si < sizeof steps / sizeof steps[0]; si++) {
            struct vs v;
            load(&v, which);
            struct mpsess s;
            struct rec r = {0};
            run_to_ready(&v, &s, &r, steps[si]);
            assert_int_equal(s.state, MPSESS_READY);
            /* it sent the handshake: the first 48 bytes of the client's wire */
            size_t m;
            uint8_t *cw = pv_hex(v.s, "client_wire_hex", &m);
            assert_int_equal(r.sent_len, 48);
            assert_memory_equal(r.sent, cw, 48);
            /* and read the answer */
            assert_int_equal(r.msgs, 1);
            assert_int_equal(r.last.kind, MPRPC_K_PROXY_ANS);
            assert_int_equal(r.last.conn_id, 0x1122334455667788ull);
            assert_int_equal(r.last_len, 40);
            /* our RPC_PROXY_REQ, wrapped, is the rest of the client's wire */
            size_t pl;
            uint8_t *plain = pv_hex(v.s, "proxy_req_plain_hex", &pl);
            uint32_t len;
            memcpy(&len, plain, 4);
            uint8_t buf[512];
            memcpy(buf + 8, plain + 8, len - 12);
            size_t w = mpsess_wrap(&s, buf, sizeof buf, len - 12);
            assert_int_equal(w, m - 48);
            assert_memory_equal(buf, cw + 48, w);
            assert_int_equal(mpsess_wrap_size(len - 12), w);
            free(plain), free(cw);
            mpsess_cleanup(&s);
            mpsess_cleanup(&s);
            json_decref(v.doc);
        }
    }
}

/* The server's side, to make frames the session must refuse. */
struct srv {
    struct mpcbc enc;
    int32_t seq;
};

static void srv_init(struct srv *sv, struct vs *v)
{
    size_t n;
    uint8_t *k = pv_hex(v->s, "server_to_client_key_hex", &n),
            *iv = pv_hex(v->s, "server_to_client_iv_hex", &n);
    memset(sv, 0, sizeof *sv);
    assert_int_equal(mpcbc_init(&sv->enc, k, iv, true), 0);
    sv->seq = -1;
    free(k), free(iv);
}

static size_t srv_frame(struct srv *sv, const uint8_t *p, size_t n, uint8_t *out, int32_t seq_off)
{
    size_t w = mpframe_build(out, 512, sv->seq + seq_off, p, n, true);
    sv->seq++;
    assert_int_equal(mpcbc_apply(&sv->enc, out, out, w), 0);
    return w;
}

static void start_and_nonce(struct vs *v, struct mpsess *s, struct rec *r)
{
    uint8_t out[64];
    size_t n;
    assert_int_equal(mpsess_start(s, &v->cfg, out, sizeof out, &n), 0);
    uint8_t *sn = pv_hex(v->s, "server_nonce_frame_hex", &n);
    assert_int_equal(mpsess_feed(s, sn, n, sink_of(r)), 0);
    free(sn);
    assert_int_equal(s->state, MPSESS_HS_SENT);
}

static void test_failures(void **state)
{
    (void)state;
    struct vs v;
    struct mpsess s;
    struct rec r = {0};
    size_t n;

    /* another secret with the same selector: the server's first encrypted frame is noise */
    load(&v, 0);
    v.secret[77] ^= 1;
    memset(&r, 0, sizeof r);
    uint8_t out[64];
    assert_int_equal(mpsess_start(&s, &v.cfg, out, sizeof out, &n), 0);
    uint8_t *sn = pv_hex(v.s, "server_nonce_frame_hex", &n);
    assert_int_equal(mpsess_feed(&s, sn, n, sink_of(&r)), 0);
    free(sn);
    size_t m;
    uint8_t *sw = pv_hex(v.s, "server_wire_hex", &m);
    assert_int_equal(mpsess_feed(&s, sw, m, sink_of(&r)), -1);
    assert_int_equal(s.why, MPSESS_E_KEYS);
    assert_string_equal(mpsess_why_name(s.why), "keys");
    assert_int_equal(mpsess_feed(&s, sw, m, sink_of(&r)), -1); /* stays failed */
    free(sw);
    mpsess_cleanup(&s);
    json_decref(v.doc);

    /* a nonce for another selector */
    load(&v, 1);
    assert_int_equal(mpsess_start(&s, &v.cfg, out, sizeof out, &n), 0);
    sn = pv_hex(v.s, "server_nonce_frame_hex", &n);
    sn[12] ^= 1; /* key selector byte; fix the CRC so only the selector is wrong */
    uint32_t crc = mpframe_crc32(0, sn, n - 4);
    memcpy(sn + n - 4, &crc, 4);
    assert_int_equal(mpsess_feed(&s, sn, n, sink_of(&r)), -1);
    assert_int_equal(s.why, MPSESS_E_NONCE);
    free(sn);
    mpsess_cleanup(&s);

    /* a handshake error, a bad sequence, a bad message, and a ping */
    struct srv sv;
    uint8_t f[512], msg[64];
    uint8_t pid0[12] = {0};
    srv_init(&sv, &v);
    start_and_nonce(&v, &s, &r);
    n = srv_frame(&sv, msg, mprpc_handshake_error_build(msg, -4, pid0), f, 0);
    assert_int_equal(mpsess_feed(&s, f, n, sink_of(&r)), -1);
    assert_int_equal(s.why, MPSESS_E_REFUSED);
    mpsess_cleanup(&s), mpcbc_cleanup(&sv.enc);

    srv_init(&sv, &v);
    start_and_nonce(&v, &s, &r);
    struct mprpc_handshake h = {0};
    memcpy(h.peer, v.cfg.pid, 12);
    n = srv_frame(&sv, msg, mprpc_handshake_build(msg, &h), f, 0);
    assert_int_equal(mpsess_feed(&s, f, n, sink_of(&r)), 0);
    assert_int_equal(s.state, MPSESS_READY);
    memset(&r, 0, sizeof r);
    n = srv_frame(&sv, msg, mprpc_ping(msg, 0xabcdef), f, 0);
    assert_int_equal(mpsess_feed(&s, f, n, sink_of(&r)), 0);
    assert_int_equal(r.msgs, 0);
    assert_int_equal(r.sent_len, 32); /* one padded frame: the pong */
    memcpy(msg, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
    n = srv_frame(&sv, msg, 8, f, 0); /* an 8-byte message of an unknown type: handed on */
    assert_int_equal(mpsess_feed(&s, f, n, sink_of(&r)), 0);
    assert_int_equal(r.last.kind, MPRPC_K_UNKNOWN);
    n = srv_frame(&sv, msg, mprpc_close_ext(msg, 5) - 4, f, 0); /* CLOSE_EXT cut short */
    assert_int_equal(mpsess_feed(&s, f, n, sink_of(&r)), -1);
    assert_int_equal(s.why, MPSESS_E_MESSAGE);
    mpsess_cleanup(&s), mpcbc_cleanup(&sv.enc);

    srv_init(&sv, &v);
    start_and_nonce(&v, &s, &r);
    n = srv_frame(&sv, msg, mprpc_handshake_build(msg, &h), f, 1); /* sequence 0, not -1 */
    assert_int_equal(mpsess_feed(&s, f, n, sink_of(&r)), -1);
    assert_int_equal(s.why, MPSESS_E_SEQ);
    mpsess_cleanup(&s), mpcbc_cleanup(&sv.enc);

    srv_init(&sv, &v);
    start_and_nonce(&v, &s, &r);
    memset(h.peer, 0x55, 12); /* names someone else */
    n = srv_frame(&sv, msg, mprpc_handshake_build(msg, &h), f, 0);
    assert_int_equal(mpsess_feed(&s, f, n, sink_of(&r)), -1);
    assert_int_equal(s.why, MPSESS_E_HANDSHAKE);
    mpsess_cleanup(&s), mpcbc_cleanup(&sv.enc);
    json_decref(v.doc);

    /* bad configuration */
    load(&v, 0);
    v.cfg.secret_len = 16;
    assert_int_equal(mpsess_start(&s, &v.cfg, out, sizeof out, &n), -1);
    json_decref(v.doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_failures),
    };
    return tgtest_result(cmocka_run_group_tests(tests, NULL, NULL));
}
