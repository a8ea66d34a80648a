/*
 * proxy/wire middle-proxy codecs against vectors/middle_proxy.json (gen_midproxy_vectors.py,
 * written from the protocol notes, not from this code) and vectors/transport_framing.json:
 * CRC32 frames (mpframe), RPC messages (mprpc), key derivation and the CBC streams (mpcrypto),
 * and the client transport splitter (mtframe). Parsers are also fed every prefix (each must
 * say "need more") and broken inputs (each must say "bad", with a reason).
 */
#include "tgtest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>

#include "proxy/wire/mpcrypto.h"
#include "proxy/wire/mpframe.h"
#include "proxy/wire/mprpc.h"
#include "proxy/wire/mtframe.h"
#include "proxy/wire/obfs2.h"
#include "proxy_vectors.h"

static void assert_bytes(const uint8_t *got, size_t n, const uint8_t *want, size_t wn)
{
    assert_int_equal(n, wn);
    assert_memory_equal(got, want, n);
}

static void test_crc32(void **state)
{
    (void)state;
    json_t *v = pv_load("vectors/middle_proxy.json");
    json_t *c;
    size_t i;
    json_array_foreach(pv_need(v, "crc32"), i, c)
    {
        size_t n;
        uint8_t *d = pv_hex(c, "data_hex", &n);
        assert_int_equal(mpframe_crc32(0, d, n), (uint32_t)pv_int(c, "crc32"));
        if (n > 3) /* in two parts */
            assert_int_equal(mpframe_crc32(mpframe_crc32(0, d, 3), d + 3, n - 3),
                             (uint32_t)pv_int(c, "crc32"));
        free(d);
    }
    json_decref(v);
}

/* A long buffer, split at every offset around the 8-byte steps: the value Python's
   zlib.crc32 gives (bytes ((i * 131 + 7) ^ (i >> 3)) & 0xff for i < 4099). */
static void test_crc32_long(void **state)
{
    (void)state;
    static uint8_t d[4099];
    for (size_t i = 0; i < sizeof d; i++)
        d[i] = (uint8_t)((i * 131 + 7) ^ (i >> 3));
    assert_int_equal(mpframe_crc32(0, d, sizeof d), 0xee1c691cu);
    for (size_t k = 0; k < 40; k++)
        assert_int_equal(mpframe_crc32(mpframe_crc32(0, d, k), d + k, sizeof d - k), 0xee1c691cu);
    assert_int_equal(mpframe_crc32(0, d + 1, 0), 0);
    assert_int_equal(mpframe_crc32_portable(0, d, sizeof d), 0xee1c691cu);
    /* the fast path (PCLMULQDQ where the CPU has it) and the tables agree at every length
       and alignment around its 16- and 64-byte steps */
    for (size_t off = 0; off < 17; off++)
        for (size_t n = 0; n + off <= 1100; n += n < 300 ? 1 : 37)
            assert_int_equal(mpframe_crc32(0x1234567u, d + off, n),
                             mpframe_crc32_portable(0x1234567u, d + off, n));
}

/* Parse one frame at b: OK, every prefix MORE, and the payload as expected. */
static struct mpframe parse_whole(const uint8_t *b, size_t n)
{
    struct mpframe f;
    const char *why;
    for (size_t k = 0; k < n; k++) {
        int r = mpframe_parse(b, k, 0, &f, &why);
        if (r != MPFRAME_MORE) {
            /* a prefix that ends right after the frame but before its padding is complete */
            assert_int_equal(r, MPFRAME_OK);
            assert_true(k >= f.consumed);
        }
    }
    assert_int_equal(mpframe_parse(b, n, 0, &f, &why), MPFRAME_OK);
    return f;
}

static void test_frames_and_handshake(void **state)
{
    (void)state;
    json_t *v = pv_load("vectors/middle_proxy.json");
    size_t slen;
    uint8_t *secret = pv_hex(v, "proxy_secret_hex", &slen);
    assert_int_equal(slen, 128);
    json_t *s;
    size_t i;
    json_array_foreach(pv_need(v, "sessions"), i, s)
    {
        size_t n, m;
        uint8_t *nc = pv_hex(s, "nonce_client_hex", &n), *ns = pv_hex(s, "nonce_server_hex", &n);
        uint32_t ts = (uint32_t)pv_int(s, "client_ts");

        /* the client's nonce, framed at -2 both without and with padding */
        struct mprpc_nonce no = {.schema = MPRPC_CRYPTO_AES, .ts = ts};
        memcpy(&no.key_select, secret, 4); /* LE word of the first four bytes */
        memcpy(no.nonce, nc, 16);
        uint8_t msg[MPRPC_NONCE_LEN], fr[64];
        assert_int_equal(mprpc_nonce_build(msg, &no), MPRPC_NONCE_LEN);
        uint8_t *want = pv_hex(s, "client_nonce_frame_hex", &m);
        assert_bytes(fr, mpframe_build(fr, sizeof fr, -2, msg, sizeof msg, false), want, m);
        free(want);
        want = pv_hex(s, "client_nonce_frame_padded_hex", &m);
        assert_bytes(fr, mpframe_build(fr, sizeof fr, -2, msg, sizeof msg, true), want, m);
        struct mpframe f = parse_whole(want, m);
        assert_int_equal(f.seq, -2);
        assert_int_equal(f.len, MPRPC_NONCE_LEN);
        free(want);

        /* the server's nonce parses */
        want = pv_hex(s, "server_nonce_frame_hex", &m);
        f = parse_whole(want, m);
        struct mprpc_nonce sn;
        assert_int_equal(mprpc_nonce_parse(want + f.off, f.len, &sn), 0);
        assert_int_equal(sn.schema, MPRPC_CRYPTO_AES);
        assert_int_equal(sn.ts, ts + 1);
        assert_memory_equal(sn.nonce, ns, 16);
        assert_memory_equal(&sn.key_select, secret, 4);
        free(want);

        /* keys, from both sides */
        struct mpcrypto_end srv = {0}, clt = {0};
        const char *sip = pv_str(s, "server_addr/ip"), *cip = pv_str(s, "client_addr/ip");
        srv.family = clt.family = strchr(sip, ':') ? AF_INET6 : AF_INET;
        assert_int_equal(inet_pton(srv.family, sip, srv.ip), 1);
        assert_int_equal(inet_pton(clt.family, cip, clt.ip), 1);
        srv.port = (uint16_t)pv_int(s, "server_addr/port");
        clt.port = (uint16_t)pv_int(s, "client_addr/port");
        struct mpcrypto_keys ck, sk;
        assert_int_equal(mpcrypto_derive(true, ns, nc, ts, &srv, &clt, secret, slen, &ck), 0);
        assert_int_equal(mpcrypto_derive(false, ns, nc, ts, &srv, &clt, secret, slen, &sk), 0);
        uint8_t *k = pv_hex(s, "client_to_server_key_hex", &m);
        assert_bytes(ck.enc_key, 32, k, m);
        assert_memory_equal(sk.dec_key, k, 32);
        free(k);
        k = pv_hex(s, "client_to_server_iv_hex", &m);
        assert_bytes(ck.enc_iv, 16, k, m);
        assert_memory_equal(sk.dec_iv, k, 16);
        free(k);
        k = pv_hex(s, "server_to_client_key_hex", &m);
        assert_bytes(ck.dec_key, 32, k, m);
        assert_memory_equal(sk.enc_key, k, 32);
        free(k);
        k = pv_hex(s, "server_to_client_iv_hex", &m);
        assert_bytes(ck.dec_iv, 16, k, m);
        assert_memory_equal(sk.enc_iv, k, 16);
        free(k);

        /* client's handshake and first RPC_PROXY_REQ: built, framed, encrypted in one chain */
        size_t pl;
        uint8_t *pid = pv_hex(s, "client_pid_hex", &pl);
        struct mprpc_handshake hs = {0};
        memcpy(hs.sender, pid, 12);
        uint8_t hsm[MPRPC_HANDSHAKE_LEN], wire[512];
        mprpc_handshake_build(hsm, &hs);
        size_t at = mpframe_build(wire, sizeof wire, -1, hsm, sizeof hsm, true);
        want = pv_hex(s, "client_handshake_plain_hex", &m);
        assert_bytes(wire, at, want, m);
        free(want);
        uint8_t *req = pv_hex(s, "proxy_req_plain_hex", &m);
        memcpy(wire + at, req, m);
        size_t total = at + m;
        free(req);
        struct mpcbc enc = {0}, dec = {0};
        assert_int_equal(mpcbc_init(&enc, ck.enc_key, ck.enc_iv, true), 0);
        assert_int_equal(mpcbc_apply(&enc, wire, wire, at), 0); /* two calls: state carries */
        assert_int_equal(mpcbc_apply(&enc, wire + at, wire + at, total - at), 0);
        want = pv_hex(s, "client_wire_hex", &m);
        assert_bytes(wire, total, want, m);
        /* the server side decrypts it */
        assert_int_equal(mpcbc_init(&dec, sk.dec_key, sk.dec_iv, false), 0);
        assert_int_equal(mpcbc_apply(&dec, wire, wire, 16), 0);
        assert_int_equal(mpcbc_apply(&dec, wire + 16, wire + 16, total - 16), 0);
        f = parse_whole(wire, at);
        assert_int_equal(f.seq, -1);
        struct mprpc_handshake got;
        int32_t err;
        assert_int_equal(mprpc_handshake_parse(wire + f.off, f.len, &got, &err), 0);
        assert_memory_equal(got.sender, pid, 12);
        assert_int_equal(mpframe_parse(wire + at, total - at, 0, &f, NULL), MPFRAME_OK);
        assert_int_equal(f.seq, 0);
        struct mprpc_req r;
        assert_int_equal(mprpc_req_parse(wire + at + f.off, f.len, &r), 0);
        assert_true(r.has_tag);
        assert_int_equal(r.conn_id, 0x1122334455667788ull);
        free(want);
        mpcbc_cleanup(&enc);
        mpcbc_cleanup(&dec);
        mpcbc_cleanup(&dec); /* idempotent */

        /* the server's side: decrypt what it sent, with the client's keys */
        want = pv_hex(s, "server_wire_hex", &m);
        assert_int_equal(mpcbc_init(&dec, ck.dec_key, ck.dec_iv, false), 0);
        assert_int_equal(mpcbc_apply(&dec, want, want, m), 0);
        mpcbc_cleanup(&dec);
        f = parse_whole(want, MPFRAME_OVERHEAD + MPRPC_HANDSHAKE_LEN + 4);
        assert_int_equal(f.seq, -1);
        assert_int_equal(mprpc_handshake_parse(want + f.off, f.len, &got, &err), 0);
        assert_memory_equal(got.peer, pid, 12);
        size_t used = f.consumed;
        assert_int_equal(mpframe_parse(want + used, m - used, 0, &f, NULL), MPFRAME_OK);
        assert_int_equal(f.seq, 0);
        struct mprpc_msg a;
        assert_int_equal(mprpc_parse(want + used + f.off, f.len, &a), 0);
        assert_int_equal(a.kind, MPRPC_K_PROXY_ANS);
        assert_int_equal(a.conn_id, 0x1122334455667788ull);
        assert_int_equal(a.len, 40);
        free(want);
        free(pid);
        free(nc);
        free(ns);
    }
    free(secret);
    json_decref(v);
}

static void test_proxy_req(void **state)
{
    (void)state;
    json_t *v = pv_load("vectors/middle_proxy.json");
    json_t *c;
    size_t i;
    json_array_foreach(pv_need(v, "proxy_req"), i, c)
    {
        struct mprpc_req r = {0};
        r.flags = (uint32_t)pv_int(c, "flags");
        r.conn_id = (uint64_t)pv_int(c, "conn_id");
        const char *cip = pv_str(c, "client_ip"), *pip = pv_str(c, "proxy_ip");
        uint8_t ip[16];
        int fam = strchr(cip, ':') ? AF_INET6 : AF_INET;
        assert_int_equal(inet_pton(fam, cip, ip), 1);
        mprpc_addr_set(&r.client, fam, ip, (uint16_t)pv_int(c, "client_port"));
        assert_int_equal(mprpc_addr_is_v4(&r.client), fam == AF_INET);
        assert_int_equal(inet_pton(fam, pip, ip), 1);
        mprpc_addr_set(&r.proxy, fam, ip, (uint16_t)pv_int(c, "proxy_port"));
        size_t tl, pl, m;
        uint8_t *tag = pv_hex(c, "ad_tag_hex", &tl), *pay = pv_hex(c, "payload_hex", &pl);
        uint8_t *want = pv_hex(c, "message_hex", &m);
        r.has_tag = tl == 16;
        if (r.has_tag)
            memcpy(r.ad_tag, tag, 16);
        uint8_t out[MPRPC_REQ_HEAD_MAX + 64];
        size_t hl = mprpc_req_head(out, &r);
        assert_int_equal(hl, r.has_tag ? 84 : 56);
        memcpy(out + hl, pay, pl);
        assert_bytes(out, hl + pl, want, m);

        struct mprpc_req back;
        assert_int_equal(mprpc_req_parse(want, m, &back), 0);
        assert_int_equal(back.flags, r.flags);
        assert_int_equal(back.conn_id, r.conn_id);
        assert_memory_equal(&back.client, &r.client, sizeof r.client);
        assert_memory_equal(&back.proxy, &r.proxy, sizeof r.proxy);
        assert_int_equal(back.has_tag, r.has_tag);
        if (r.has_tag)
            assert_memory_equal(back.ad_tag, tag, 16);
        assert_bytes(want + back.off, back.len, pay, pl);
        /* an extra block that does not fit */
        if (r.has_tag) {
            want[56] = 0xff;
            assert_int_equal(mprpc_req_parse(want, m, &back), -1);
        }
        assert_int_equal(mprpc_req_parse(want, 55, &back), -1);
        free(tag), free(pay), free(want);
    }
    /* flags from the transport */
    assert_int_equal(mprpc_req_flags(OBFS2_TAG_PADDED, true, false, false),
                     MPRPC_F_HAS_AD_TAG | MPRPC_F_MAGIC | MPRPC_F_EXTMODE2 | MPRPC_F_INTERMEDIATE |
                         MPRPC_F_PAD);
    assert_int_equal(mprpc_req_flags(OBFS2_TAG_ABRIDGED, true, true, true),
                     0x8u | 0x1000u | 0x20000u | 0x40000000u | 0x80000000u | 0x2u);
    assert_int_equal(mprpc_req_flags(0x12345678, true, false, false), 0);
    json_decref(v);
}

static void test_answers(void **state)
{
    (void)state;
    json_t *v = pv_load("vectors/middle_proxy.json");
    json_t *c;
    size_t i;
    json_array_foreach(pv_need(v, "answers"), i, c)
    {
        size_t m;
        uint8_t *want = pv_hex(c, "message_hex", &m);
        const char *kind = pv_str(c, "kind");
        struct mprpc_msg a;
        assert_int_equal(mprpc_parse(want, m, &a), 0);
        uint8_t out[MPRPC_SHORT_MAX + 64];
        size_t n = 0;
        if (strcmp(kind, "proxy_ans") == 0) {
            assert_int_equal(a.kind, MPRPC_K_PROXY_ANS);
            assert_int_equal(a.flags, pv_int(c, "flags"));
            n = mprpc_ans_head(out, a.flags, a.conn_id);
            memcpy(out + n, want + a.off, a.len);
            n += a.len;
        } else if (strcmp(kind, "simple_ack") == 0) {
            assert_int_equal(a.kind, MPRPC_K_SIMPLE_ACK);
            assert_int_equal(a.confirm, pv_int(c, "confirm"));
            n = mprpc_simple_ack(out, a.conn_id, a.confirm);
        } else if (strcmp(kind, "close_ext") == 0) {
            assert_int_equal(a.kind, MPRPC_K_CLOSE_EXT);
            n = mprpc_close_ext(out, a.conn_id);
        } else if (strcmp(kind, "close_conn") == 0) {
            assert_int_equal(a.kind, MPRPC_K_CLOSE_CONN);
            n = mprpc_close_conn(out, a.conn_id);
        } else if (strcmp(kind, "ping") == 0) {
            assert_int_equal(a.kind, MPRPC_K_PING);
            assert_int_equal(a.ping_id, (uint64_t)pv_int(c, "ping_id"));
            n = mprpc_ping(out, a.ping_id);
        } else if (strcmp(kind, "pong") == 0) {
            assert_int_equal(a.kind, MPRPC_K_PONG);
            n = mprpc_pong(out, a.ping_id);
        } else {
            fail_msg("unknown kind %s", kind);
        }
        if (a.kind != MPRPC_K_PING && a.kind != MPRPC_K_PONG)
            assert_int_equal(a.conn_id, (uint64_t)pv_int(c, "conn_id"));
        assert_bytes(out, n, want, m);
        /* fixed-size messages refuse other lengths */
        if (a.kind != MPRPC_K_PROXY_ANS)
            assert_int_equal(mprpc_parse(want, m - 4, &a), -1);
        free(want);
    }
    struct mprpc_msg a;
    uint8_t unknown[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    assert_int_equal(mprpc_parse(unknown, 8, &a), 0);
    assert_int_equal(a.kind, MPRPC_K_UNKNOWN);
    assert_int_equal(mprpc_parse(unknown, 3, &a), -1);
    /* handshake error */
    uint8_t pid[12] = {0}, e[MPRPC_HS_ERROR_LEN];
    mprpc_handshake_error_build(e, -4, pid);
    struct mprpc_handshake h;
    int32_t err;
    assert_int_equal(mprpc_handshake_parse(e, sizeof e, &h, &err), 1);
    assert_int_equal(err, -4);
    assert_int_equal(mprpc_handshake_parse(e, 7, &h, &err), -1);
    json_decref(v);
}

static void test_frame_errors(void **state)
{
    (void)state;
    uint8_t b[64], pay[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    struct mpframe f;
    const char *why;
    size_t n = mpframe_build(b, sizeof b, 5, pay, sizeof pay, false);
    assert_int_equal(n, 20);
    assert_int_equal(mpframe_parse(b, n, 0, &f, &why), MPFRAME_OK);
    assert_int_equal(f.seq, 5);
    b[9] ^= 1; /* payload byte */
    assert_int_equal(mpframe_parse(b, n, 0, &f, &why), MPFRAME_BAD);
    assert_string_equal(why, "frame CRC32 mismatch");
    b[9] ^= 1;
    assert_int_equal(mpframe_parse(b, n, 16, &f, &why), MPFRAME_BAD);
    assert_string_equal(why, "frame length over the limit");
    b[0] = 13;
    assert_int_equal(mpframe_parse(b, n, 0, &f, &why), MPFRAME_BAD);
    assert_string_equal(why, "frame length not a multiple of 4");
    b[0] = 8;
    assert_int_equal(mpframe_parse(b, n, 0, &f, &why), MPFRAME_BAD);
    assert_string_equal(why, "frame length under 12");
    /* padding words alone: need more, and they count as consumed */
    uint8_t padw[12] = {4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0};
    assert_int_equal(mpframe_parse(padw, sizeof padw, 0, &f, &why), MPFRAME_MORE);
    assert_int_equal(f.consumed, 12);
    /* the builder refuses what the format cannot carry */
    assert_int_equal(mpframe_build(b, sizeof b, 0, pay, 7, false), 0);
    assert_int_equal(mpframe_build(b, 19, 0, pay, 8, false), 0);
    assert_int_equal(mpframe_build(b, 31, 0, pay, 8, true), 0);
    assert_int_equal(mpframe_size(8, true), 32);
    /* payload already in place */
    memcpy(b + 8, pay, 8);
    assert_int_equal(mpframe_build(b, sizeof b, 1, b + 8, 8, true), 32);
    assert_int_equal(mpframe_parse(b, 32, 0, &f, &why), MPFRAME_OK);
    assert_memory_equal(b + f.off, pay, 8);
    /* bad derivation arguments */
    struct mpcrypto_end s4 = {.family = AF_INET}, c6 = {.family = AF_INET6};
    struct mpcrypto_keys k;
    uint8_t nonce[16] = {0}, secret[32] = {0};
    assert_int_equal(mpcrypto_derive(true, nonce, nonce, 0, &s4, &c6, secret, 32, &k), -EINVAL);
    assert_int_equal(mpcrypto_derive(true, nonce, nonce, 0, &s4, &s4, secret, 31, &k), -EINVAL);
    struct mpcbc cbc = {0};
    assert_int_equal(mpcbc_apply(&cbc, b, b, 16), -EINVAL);
    assert_int_equal(mpcbc_init(&cbc, secret, nonce, true), 0);
    assert_int_equal(mpcbc_apply(&cbc, b, b, 15), -EINVAL);
    mpcbc_cleanup(&cbc);
}

static uint32_t tag_of(const char *hex)
{
    return strcmp(hex, "efefefef") == 0   ? OBFS2_TAG_ABRIDGED
           : strcmp(hex, "eeeeeeee") == 0 ? OBFS2_TAG_INTERMEDIATE
                                          : OBFS2_TAG_PADDED;
}

static void test_transport(void **state)
{
    (void)state;
    json_t *v = pv_load("vectors/transport_framing.json");
    json_t *c;
    size_t i;
    json_array_foreach(pv_need(v, "examples"), i, c)
    {
        uint32_t tag = tag_of(pv_str(c, "tag"));
        size_t n, pl;
        uint8_t *framed = pv_hex(c, "framed_hex", &n), *pay = pv_hex(c, "payload_hex", &pl);
        struct mtframe_pkt p;
        const char *why;
        for (size_t k = 0; k < n; k++)
            assert_int_equal(mtframe_next(tag, framed, k, 0, &p, &why), MTFRAME_MORE);
        assert_int_equal(mtframe_next(tag, framed, n, 0, &p, &why), MTFRAME_OK);
        assert_int_equal(p.consumed, n);
        assert_int_equal(p.quickack, strstr(pv_str(c, "name"), "quickack") != NULL);
        size_t padlen = n - p.off - pl; /* the vector's padding */
        if (padlen <= 3) {
            assert_bytes(framed + p.off, p.len, pay, pl);
            /* and the header back, when it had no quick-ack bit */
            uint8_t h[MTFRAME_HEAD_MAX];
            if (!p.quickack)
                assert_bytes(h, mtframe_head(tag, pl, padlen, h), framed, p.off);
        } else {
            /* padding of 4 or more: the whole words go along (the official proxy's rule) */
            assert_int_equal(p.len, (n - p.off) & ~(size_t)3);
            assert_memory_equal(framed + p.off, pay, pl);
        }
        /* two packets back to back */
        uint8_t *two = malloc(2 * n);
        memcpy(two, framed, n);
        memcpy(two + n, framed, n);
        assert_int_equal(mtframe_next(tag, two, 2 * n, 0, &p, &why), MTFRAME_OK);
        assert_int_equal(mtframe_next(tag, two + p.consumed, 2 * n - p.consumed, 0, &p, &why),
                         MTFRAME_OK);
        assert_int_equal(p.consumed, n);
        free(two);
        free(framed), free(pay);
    }
    json_decref(v);

    struct mtframe_pkt p;
    const char *why;
    uint8_t overlong[4] = {0x7f, 0x10, 0, 0};
    assert_int_equal(mtframe_next(OBFS2_TAG_ABRIDGED, overlong, 4, 0, &p, &why), MTFRAME_BAD);
    assert_string_equal(why, "abridged length in an overlong encoding");
    uint8_t zero[4] = {0, 0, 0, 0};
    assert_int_equal(mtframe_next(OBFS2_TAG_INTERMEDIATE, zero, 4, 0, &p, &why), MTFRAME_BAD);
    assert_int_equal(mtframe_next(OBFS2_TAG_ABRIDGED, zero, 1, 0, &p, &why), MTFRAME_BAD);
    uint8_t odd[4] = {5, 0, 0, 0};
    assert_int_equal(mtframe_next(OBFS2_TAG_INTERMEDIATE, odd, 4, 0, &p, &why), MTFRAME_BAD);
    assert_int_equal(mtframe_next(OBFS2_TAG_PADDED, odd, 4, 0, &p, &why), MTFRAME_MORE);
    uint8_t tiny[4] = {3, 0, 0, 0};
    assert_int_equal(mtframe_next(OBFS2_TAG_PADDED, tiny, 4, 0, &p, &why), MTFRAME_BAD);
    uint8_t big[4] = {0, 0, 0, 0x02}; /* 32 MiB */
    assert_int_equal(mtframe_next(OBFS2_TAG_INTERMEDIATE, big, 4, 0, &p, &why), MTFRAME_BAD);
    assert_string_equal(why, "packet over the length limit");
    assert_int_equal(mtframe_next(0x01020304, big, 4, 0, &p, &why), MTFRAME_BAD);
    /* headers refuse what the transport cannot say */
    uint8_t h[4];
    assert_int_equal(mtframe_head(OBFS2_TAG_ABRIDGED, 6, 0, h), 0);
    assert_int_equal(mtframe_head(OBFS2_TAG_ABRIDGED, 8, 1, h), 0);
    assert_int_equal(mtframe_head(OBFS2_TAG_INTERMEDIATE, 8, 1, h), 0);
    assert_int_equal(mtframe_head(OBFS2_TAG_PADDED, 8, 4, h), 0);
    assert_int_equal(mtframe_head(OBFS2_TAG_ABRIDGED, 0x7f * 4, 0, h), 4);
    assert_int_equal(h[0], 0x7f);
    assert_int_equal(h[1], 0x7f);
    /* quick-ack tokens: abridged clients get the word reversed */
    mtframe_ack(OBFS2_TAG_ABRIDGED, 0x8a0b0c0d, h);
    assert_memory_equal(h, "\x8a\x0b\x0c\x0d", 4);
    mtframe_ack(OBFS2_TAG_PADDED, 0x8a0b0c0d, h);
    assert_memory_equal(h, "\x0d\x0c\x0b\x8a", 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32),
        cmocka_unit_test(test_crc32_long),
        cmocka_unit_test(test_frames_and_handshake),
        cmocka_unit_test(test_proxy_req),
        cmocka_unit_test(test_answers),
        cmocka_unit_test(test_frame_errors),
        cmocka_unit_test(test_transport),
    };
    return tgtest_result(cmocka_run_group_tests(tests, NULL, NULL));
}
