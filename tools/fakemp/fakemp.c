/*
 * tgproxy-fakemp: a fake Telegram middle proxy, for tgproxy's tests and for trying
 * middle-proxy mode offline (docs/tgproxy.md, "A fake middle proxy").
 *
 * It speaks the server side of the middle-proxy protocol (docs/proxy-protocol-notes.md):
 * the RPC_NONCE exchange with the proxy secret it is given, the AES-256-CBC handshake, then
 * RPC_PROXY_REQ from each client multiplexed on the connection. Each new connection id gets
 * its own TCP connection to the DC address on the command line, opened with an obfuscated2
 * header (the client's transport tag, the DC index given) as a direct-mode proxy would;
 * packets go to the DC and the DC's bytes come back as RPC_PROXY_ANS. A quick-ack request
 * is answered with RPC_SIMPLE_ACK (the token: the packet's last word with bit 31 set); the
 * DC closing sends RPC_CLOSE_EXT; RPC_CLOSE_CONN closes the DC connection; pings are answered.
 *
 * Every event is one line on stdout (for tests to wait for and count):
 *   tgproxy-fakemp: listening on ADDR (port N)
 *   handshake ok from IP:PORT        / handshake failed from IP:PORT: REASON
 *   client ID tag HEX|none from IP:PORT via IP:PORT flags 0xF
 *   quickack ID | close-conn ID | close-ext ID | ping from IP:PORT
 * The proxy secret itself is never printed.
 *
 * One thread per middle-proxy connection (poll over it and its clients' DC sockets); writes
 * block, which is fine for a test double.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "proxy/wire/crypto.h"
#include "proxy/wire/mpcrypto.h"
#include "proxy/wire/mpframe.h"
#include "proxy/wire/mprpc.h"
#include "proxy/wire/mtframe.h"
#include "proxy/wire/obfs2.h"

#define MAX_CLIENTS 4096
#define ANS_CHUNK   (64 * 1024)

static struct {
    uint8_t secret[MPCRYPTO_SECRET_MAX];
    size_t secret_len;
    struct sockaddr_storage dc;
    socklen_t dc_len;
    int16_t dc_index;
    bool raw;       /* DC leg: packets' bytes alone (the test fake DC), not re-framed */
    bool no_clock;  /* accept any nonce timestamp */
    bool have_peer; /* --client-addr: the address the proxy claims (NAT) */
    struct mpcrypto_end peer;
    pthread_mutex_t out_lock;
} g = {.dc_index = 2, .out_lock = PTHREAD_MUTEX_INITIALIZER};

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&g.out_lock);
    vprintf(fmt, ap);
    putchar('\n');
    fflush(stdout);
    pthread_mutex_unlock(&g.out_lock);
    va_end(ap);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: tgproxy-fakemp --listen IP:PORT --secret-file FILE --dc IP:PORT\n"
            "                      [--dc-index N] [--raw] [--any-clock] [--client-addr IP]\n");
    exit(2);
}

static int parse_addr(const char *s, struct sockaddr_storage *ss, socklen_t *len)
{
    char host[128];
    const char *colon = strrchr(s, ':');
    if (colon == NULL || (size_t)(colon - s) >= sizeof host)
        return -1;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    char *h = host;
    if (h[0] == '[') {
        h++;
        h[strlen(h) - 1] = '\0';
    }
    long port = strtol(colon + 1, NULL, 10);
    if (port < 0 || port > 65535)
        return -1;
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, h, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET, a4->sin_port = htons((uint16_t)port);
        *len = sizeof *a4;
    } else if (inet_pton(AF_INET6, h, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6, a6->sin6_port = htons((uint16_t)port);
        *len = sizeof *a6;
    } else {
        return -1;
    }
    return 0;
}

static void end_of(const struct sockaddr_storage *ss, struct mpcrypto_end *e)
{
    memset(e, 0, sizeof *e);
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)ss;
        if (IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr)) {
            e->family = AF_INET;
            memcpy(e->ip, a6->sin6_addr.s6_addr + 12, 4);
        } else {
            e->family = AF_INET6;
            memcpy(e->ip, &a6->sin6_addr, 16);
        }
        e->port = ntohs(a6->sin6_port);
    } else {
        const struct sockaddr_in *a4 = (const struct sockaddr_in *)ss;
        e->family = AF_INET;
        memcpy(e->ip, &a4->sin_addr, 4);
        e->port = ntohs(a4->sin_port);
    }
}

static const char *end_str(const struct mpcrypto_end *e, char *buf, size_t cap)
{
    char ip[INET6_ADDRSTRLEN];
    inet_ntop(e->family, e->ip, ip, sizeof ip);
    snprintf(buf, cap, e->family == AF_INET6 ? "[%s]:%u" : "%s:%u", ip, e->port);
    return buf;
}

static const char *rpc_addr_str(const struct mprpc_addr *a, char *buf, size_t cap)
{
    char ip[INET6_ADDRSTRLEN];
    if (mprpc_addr_is_v4(a)) {
        inet_ntop(AF_INET, a->ip + 12, ip, sizeof ip);
        snprintf(buf, cap, "%s:%u", ip, (unsigned)a->port);
    } else {
        inet_ntop(AF_INET6, a->ip, ip, sizeof ip);
        snprintf(buf, cap, "[%s]:%u", ip, (unsigned)a->port);
    }
    return buf;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

struct client {
    uint64_t id;
    int fd; /* to the DC; -1 = free slot */
    uint32_t tag;
    struct crypto_ctr enc, dec;
    uint8_t carry[4]; /* raw mode: DC bytes short of a whole word */
    size_t ncarry;
    uint8_t *rbuf; /* framed mode: DC bytes not yet a whole packet */
    size_t rlen;
};

struct mpconn {
    int fd;
    char peer_s[64];
    struct mpcbc enc, dec;
    int32_t out_seq, in_seq;
    uint8_t *in;    /* ciphertext not yet decrypted (< 16 bytes) */
    uint8_t *plain; /* decrypted, not yet parsed */
    size_t in_len, plain_len, plain_cap;
    bool encrypted;
    struct client *cl;
    size_t ncl;
    uint8_t *out; /* scratch for one frame */
    size_t out_cap;
};

/* Send one RPC message: head[0..hn) then body[0..bn), framed, padded and encrypted. */
static int mp_send(struct mpconn *m, const uint8_t *head, size_t hn, const uint8_t *body, size_t bn)
{
    size_t need = mpframe_size(hn + bn, true);
    if (need > m->out_cap) {
        uint8_t *o = realloc(m->out, need);
        if (o == NULL)
            return -1;
        m->out = o, m->out_cap = need;
    }
    memcpy(m->out + 8, head, hn);
    if (bn)
        memcpy(m->out + 8 + hn, body, bn);
    size_t n = mpframe_build(m->out, m->out_cap, m->out_seq++, m->out + 8, hn + bn, m->encrypted);
    if (n == 0)
        return -1;
    if (m->encrypted && mpcbc_apply(&m->enc, m->out, m->out, n) != 0)
        return -1;
    return write_all(m->fd, m->out, n);
}

/* Read more from the middle-proxy socket into m->plain; 0, or -1 on EOF or error. */
static int mp_fill(struct mpconn *m)
{
    uint8_t buf[65536];
    ssize_t r = recv(m->fd, buf, sizeof buf, 0);
    if (r < 0 && errno == EINTR)
        return 0;
    if (r <= 0)
        return -1;
    size_t n = (size_t)r;
    if (m->plain_len + m->in_len + n > m->plain_cap) {
        size_t cap = (m->plain_len + m->in_len + n) * 2;
        uint8_t *p = realloc(m->plain, cap);
        if (p == NULL)
            return -1;
        m->plain = p, m->plain_cap = cap;
    }
    if (!m->encrypted) {
        memcpy(m->plain + m->plain_len, buf, n);
        m->plain_len += n;
        return 0;
    }
    /* whole blocks only: the remainder waits in m->in */
    memcpy(m->in + m->in_len, buf, n < 16 - m->in_len ? n : 16 - m->in_len);
    size_t first = n < 16 - m->in_len ? n : 16 - m->in_len;
    m->in_len += first;
    if (m->in_len < 16)
        return 0;
    if (mpcbc_apply(&m->dec, m->in, m->plain + m->plain_len, 16) != 0)
        return -1;
    m->plain_len += 16;
    m->in_len = 0;
    size_t rest = n - first, whole = rest & ~(size_t)15;
    if (whole && mpcbc_apply(&m->dec, buf + first, m->plain + m->plain_len, whole) != 0)
        return -1;
    m->plain_len += whole;
    memcpy(m->in, buf + first + whole, rest - whole);
    m->in_len = rest - whole;
    return 0;
}

/* The next whole frame's payload: 1 (at *p, *n; valid until the next call), 0 need more,
   -1 bad (logged). */
static int mp_frame(struct mpconn *m, const uint8_t **p, size_t *n, size_t *drop)
{
    struct mpframe f;
    const char *why;
    int r = mpframe_parse(m->plain, m->plain_len, 0, &f, &why);
    if (r == MPFRAME_BAD) {
        say("frame error from %s: %s", m->peer_s, why);
        return -1;
    }
    if (r == MPFRAME_MORE)
        return 0;
    if (f.seq != m->in_seq) {
        say("frame error from %s: sequence %d, expected %d", m->peer_s, f.seq, m->in_seq);
        return -1;
    }
    m->in_seq++;
    *p = m->plain + f.off;
    *n = f.len;
    *drop = f.consumed;
    return 1;
}

static void mp_drop(struct mpconn *m, size_t n)
{
    memmove(m->plain, m->plain + n, m->plain_len - n);
    m->plain_len -= n;
}

/* Wait for a whole frame (the handshake phase: nothing else to poll). */
static int mp_next(struct mpconn *m, const uint8_t **p, size_t *n, size_t *drop)
{
    for (;;) {
        int r = mp_frame(m, p, n, drop);
        if (r != 0)
            return r;
        if (mp_fill(m) != 0)
            return -1;
    }
}

static int handshake(struct mpconn *m)
{
    const uint8_t *p;
    size_t n, drop;
    if (mp_next(m, &p, &n, &drop) != 1)
        return -1;
    struct mprpc_nonce cn;
    if (mprpc_nonce_parse(p, n, &cn) != 0) {
        say("handshake failed from %s: not a nonce", m->peer_s);
        return -1;
    }
    mp_drop(m, drop);
    uint32_t want_sel;
    memcpy(&want_sel, g.secret, 4);
    if (cn.key_select != want_sel) {
        say("handshake failed from %s: unknown key selector", m->peer_s);
        return -1;
    }
    if (cn.schema != MPRPC_CRYPTO_AES) {
        say("handshake failed from %s: crypto schema %u", m->peer_s, cn.schema);
        return -1;
    }
    uint32_t now = (uint32_t)time(NULL);
    if (!g.no_clock && ((int32_t)(now - cn.ts) > 30 || (int32_t)(cn.ts - now) > 30)) {
        say("handshake failed from %s: clock skew", m->peer_s);
        return -1;
    }
    struct mprpc_nonce sn = {.key_select = want_sel, .schema = MPRPC_CRYPTO_AES, .ts = now};
    if (crypto_random(sn.nonce, 16) != 0)
        return -1;
    uint8_t msg[MPRPC_NONCE_LEN];
    mprpc_nonce_build(msg, &sn);
    if (mp_send(m, msg, sizeof msg, NULL, 0) != 0)
        return -1;

    struct sockaddr_storage me, peer;
    socklen_t ml = sizeof me, pl = sizeof peer;
    getsockname(m->fd, (struct sockaddr *)&me, &ml);
    getpeername(m->fd, (struct sockaddr *)&peer, &pl);
    struct mpcrypto_end srv, clt;
    end_of(&me, &srv);
    end_of(&peer, &clt);
    if (g.have_peer) {
        uint16_t port = clt.port;
        clt = g.peer;
        clt.port = port;
    }
    struct mpcrypto_keys k;
    if (mpcrypto_derive(false, sn.nonce, cn.nonce, cn.ts, &srv, &clt, g.secret, g.secret_len, &k) !=
            0 ||
        mpcbc_init(&m->enc, k.enc_key, k.enc_iv, true) != 0 ||
        mpcbc_init(&m->dec, k.dec_key, k.dec_iv, false) != 0) {
        say("handshake failed from %s: keys", m->peer_s);
        return -1;
    }
    memset(&k, 0, sizeof k);
    m->encrypted = true;
    /* padding words after the nonce were still plaintext (mtprotoproxy pads its nonce frame
       to 16 bytes, MTProxy does not); bytes after them are ciphertext: decrypt them now */
    size_t pad = 0;
    while (m->plain_len - pad >= 4 && m->plain[pad] == MPFRAME_PAD_WORD && m->plain[pad + 1] == 0 &&
           m->plain[pad + 2] == 0 && m->plain[pad + 3] == 0)
        pad += 4;
    mp_drop(m, pad);
    if (m->plain_len) {
        size_t whole = m->plain_len & ~(size_t)15;
        if (whole && mpcbc_apply(&m->dec, m->plain, m->plain, whole) != 0)
            return -1;
        memcpy(m->in, m->plain + whole, m->plain_len - whole);
        m->in_len = m->plain_len - whole;
        m->plain_len = whole;
    }
    if (mp_next(m, &p, &n, &drop) != 1) {
        say("handshake failed from %s: no valid encrypted frame (wrong secret or address?)",
            m->peer_s);
        return -1;
    }
    struct mprpc_handshake ch;
    int32_t err;
    if (mprpc_handshake_parse(p, n, &ch, &err) != 0) {
        say("handshake failed from %s: not a handshake", m->peer_s);
        return -1;
    }
    mp_drop(m, drop);
    struct mprpc_handshake sh = {.flags = 0};
    uint8_t ip4[4] = {127, 0, 0, 1};
    mprpc_pid(sh.sender, ip4, srv.port, (uint16_t)getpid(), now);
    memcpy(sh.peer, ch.sender, MPRPC_PID_LEN);
    uint8_t hs[MPRPC_HANDSHAKE_LEN];
    mprpc_handshake_build(hs, &sh);
    if (mp_send(m, hs, sizeof hs, NULL, 0) != 0)
        return -1;
    say("handshake ok from %s", m->peer_s);
    return 0;
}

static struct client *client_find(struct mpconn *m, uint64_t id)
{
    for (size_t i = 0; i < m->ncl; i++)
        if (m->cl[i].fd >= 0 && m->cl[i].id == id)
            return &m->cl[i];
    return NULL;
}

static void client_close(struct client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    crypto_ctr_cleanup(&c->enc);
    crypto_ctr_cleanup(&c->dec);
    free(c->rbuf);
    c->rbuf = NULL;
    c->rlen = c->ncarry = 0;
}

static uint32_t tag_of(uint32_t flags)
{
    if (flags & MPRPC_F_ABRIDGED)
        return OBFS2_TAG_ABRIDGED;
    if (flags & MPRPC_F_PAD)
        return OBFS2_TAG_PADDED;
    return OBFS2_TAG_INTERMEDIATE;
}

static struct client *client_open(struct mpconn *m, const struct mprpc_req *r)
{
    struct client *c = NULL;
    for (size_t i = 0; i < m->ncl && c == NULL; i++)
        if (m->cl[i].fd < 0)
            c = &m->cl[i];
    if (c == NULL) {
        if (m->ncl == MAX_CLIENTS)
            return NULL;
        c = &m->cl[m->ncl++];
    }
    memset(c, 0, sizeof *c);
    c->fd = -1;
    c->id = r->conn_id;
    c->tag = tag_of(r->flags);
    int fd = socket(g.dc.ss_family, SOCK_STREAM, 0);
    if (fd < 0)
        return NULL;
    if (connect(fd, (struct sockaddr *)&g.dc, g.dc_len) != 0) {
        close(fd);
        return NULL;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    uint8_t wire[64];
    if (obfs2_dc_header(c->tag, g.dc_index, NULL, NULL, NULL, wire, NULL, &c->enc, &c->dec) != 0 ||
        write_all(fd, wire, 64) != 0) {
        close(fd);
        return NULL;
    }
    c->fd = fd;
    return c;
}

/* The client's packet toward the DC: re-framed in its transport, or bare with --raw. */
static int to_dc(struct client *c, const struct mprpc_req *r, const uint8_t *pkt, size_t n)
{
    uint8_t *buf = malloc(n + MTFRAME_HEAD_MAX);
    if (buf == NULL)
        return -1;
    size_t h = 0;
    if (!g.raw) {
        h = mtframe_head(c->tag, n, 0, buf);
        if (h == 0) {
            free(buf);
            return -1;
        }
        if (r->flags & MPRPC_F_QUICKACK)
            buf[h == 1 ? 0 : 3] |= 0x80;
    }
    memcpy(buf + h, pkt, n);
    int rc = crypto_ctr_apply(&c->enc, buf, h + n) == 0 ? write_all(c->fd, buf, h + n) : -1;
    free(buf);
    return rc;
}

static int on_req(struct mpconn *m, const uint8_t *p, size_t n)
{
    struct mprpc_req r;
    if (mprpc_req_parse(p, n, &r) != 0) {
        say("bad RPC_PROXY_REQ from %s", m->peer_s);
        return -1;
    }
    struct client *c = client_find(m, r.conn_id);
    if (c == NULL) {
        char tag[33] = "none", a[80], b[80];
        if (r.has_tag)
            for (int i = 0; i < 16; i++)
                snprintf(tag + 2 * i, 3, "%02x", r.ad_tag[i]);
        say("client %016llx tag %s from %s via %s flags 0x%x", (unsigned long long)r.conn_id, tag,
            rpc_addr_str(&r.client, a, sizeof a), rpc_addr_str(&r.proxy, b, sizeof b), r.flags);
        c = client_open(m, &r);
        if (c == NULL) {
            uint8_t ce[MPRPC_SHORT_MAX];
            say("close-ext %016llx (DC unreachable)", (unsigned long long)r.conn_id);
            return mp_send(m, ce, mprpc_close_ext(ce, r.conn_id), NULL, 0);
        }
    }
    if (r.len == 0 || r.len % 4 != 0) {
        say("bad packet length %zu from %016llx", r.len, (unsigned long long)r.conn_id);
        return 0;
    }
    if (to_dc(c, &r, p + r.off, r.len) != 0) {
        uint64_t id = c->id;
        client_close(c);
        uint8_t ce[MPRPC_SHORT_MAX];
        say("close-ext %016llx", (unsigned long long)id);
        return mp_send(m, ce, mprpc_close_ext(ce, id), NULL, 0);
    }
    if (r.flags & MPRPC_F_QUICKACK) {
        const uint8_t *w = p + r.off + r.len - 4;
        uint32_t confirm =
            ((uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 | (uint32_t)w[3] << 24) |
            0x80000000u;
        uint8_t sa[MPRPC_SHORT_MAX];
        say("quickack %016llx", (unsigned long long)r.conn_id);
        return mp_send(m, sa, mprpc_simple_ack(sa, r.conn_id, confirm), NULL, 0);
    }
    return 0;
}

static int on_frame(struct mpconn *m, const uint8_t *p, size_t n)
{
    struct mprpc_msg msg;
    if (n >= 4 && p[0] == 0xee && p[1] == 0xf1 && p[2] == 0xce && p[3] == 0x36)
        return on_req(m, p, n);
    if (mprpc_parse(p, n, &msg) != 0) {
        say("bad RPC message from %s", m->peer_s);
        return -1;
    }
    uint8_t out[MPRPC_SHORT_MAX];
    switch (msg.kind) {
    case MPRPC_K_CLOSE_CONN: {
        struct client *c = client_find(m, msg.conn_id);
        say("close-conn %016llx", (unsigned long long)msg.conn_id);
        if (c)
            client_close(c);
        return 0;
    }
    case MPRPC_K_PING:
        say("ping from %s", m->peer_s);
        return mp_send(m, out, mprpc_pong(out, msg.ping_id), NULL, 0);
    case MPRPC_K_PONG:
        return 0;
    default:
        say("unexpected RPC type 0x%08x from %s", msg.type, m->peer_s);
        return 0;
    }
}

/* Bytes from the DC for client c: as RPC_PROXY_ANS. 0, or -1 when the DC closed. */
static int from_dc(struct mpconn *m, struct client *c)
{
    uint8_t *buf = malloc(ANS_CHUNK + 8);
    if (buf == NULL)
        return -1;
    memcpy(buf, c->carry, c->ncarry);
    ssize_t r = recv(c->fd, buf + c->ncarry, ANS_CHUNK, 0);
    if (r <= 0) {
        free(buf);
        return r < 0 && errno == EINTR ? 0 : -1;
    }
    crypto_ctr_apply(&c->dec, buf + c->ncarry, (size_t)r);
    uint8_t head[MPRPC_SHORT_MAX];
    mprpc_ans_head(head, 0, c->id);
    int rc = 0;
    if (g.raw) {
        size_t n = c->ncarry + (size_t)r, whole = n & ~(size_t)3;
        if (whole)
            rc = mp_send(m, head, 16, buf, whole);
        c->ncarry = n - whole;
        memcpy(c->carry, buf + whole, c->ncarry);
    } else {
        uint8_t *nb = realloc(c->rbuf, c->rlen + (size_t)r);
        if (nb == NULL) {
            free(buf);
            return -1;
        }
        c->rbuf = nb;
        memcpy(c->rbuf + c->rlen, buf, (size_t)r);
        c->rlen += (size_t)r;
        size_t at = 0;
        for (;;) {
            struct mtframe_pkt pk;
            int s = mtframe_next(c->tag, c->rbuf + at, c->rlen - at, 0, &pk, NULL);
            if (s == MTFRAME_BAD) {
                rc = -1;
                break;
            }
            if (s == MTFRAME_MORE)
                break;
            if (mp_send(m, head, 16, c->rbuf + at + pk.off, pk.len) != 0) {
                rc = -1;
                break;
            }
            at += pk.consumed;
        }
        memmove(c->rbuf, c->rbuf + at, c->rlen - at);
        c->rlen -= at;
    }
    free(buf);
    return rc;
}

static void *serve(void *arg)
{
    struct mpconn *m = arg;
    m->in = malloc(16);
    m->cl = calloc(MAX_CLIENTS, sizeof *m->cl);
    struct pollfd *pf = calloc(MAX_CLIENTS + 1, sizeof *pf);
    size_t *idx = calloc(MAX_CLIENTS + 1, sizeof *idx);
    if (m->in == NULL || m->cl == NULL || pf == NULL || idx == NULL || handshake(m) != 0)
        goto out;
    for (;;) {
        const uint8_t *p;
        size_t n, drop;
        int r;
        while ((r = mp_frame(m, &p, &n, &drop)) == 1) {
            if (on_frame(m, p, n) != 0)
                goto out;
            mp_drop(m, drop);
        }
        if (r < 0)
            goto out;
        size_t np = 0;
        pf[np].fd = m->fd, pf[np].events = POLLIN, np++;
        for (size_t i = 0; i < m->ncl; i++)
            if (m->cl[i].fd >= 0) {
                pf[np].fd = m->cl[i].fd, pf[np].events = POLLIN;
                idx[np++] = i;
            }
        if (poll(pf, np, -1) < 0 && errno != EINTR)
            goto out;
        if (pf[0].revents && mp_fill(m) != 0)
            goto out;
        for (size_t k = 1; k < np; k++) {
            if (!pf[k].revents)
                continue;
            struct client *c = &m->cl[idx[k]];
            if (from_dc(m, c) != 0) {
                uint64_t id = c->id;
                client_close(c);
                uint8_t ce[MPRPC_SHORT_MAX];
                say("close-ext %016llx", (unsigned long long)id);
                if (mp_send(m, ce, mprpc_close_ext(ce, id), NULL, 0) != 0)
                    goto out;
            }
        }
    }
out:
    say("connection from %s closed", m->peer_s);
    for (size_t i = 0; m->cl && i < m->ncl; i++)
        client_close(&m->cl[i]);
    close(m->fd);
    mpcbc_cleanup(&m->enc);
    mpcbc_cleanup(&m->dec);
    free(m->in), free(m->plain), free(m->out), free(m->cl), free(pf), free(idx), free(m);
    return NULL;
}

static void on_term(int sig)
{
    (void)sig;
    _exit(0); /* a test double: nothing to flush but stdout, which say() flushes per line */
}

static int read_secret(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "tgproxy-fakemp: %s: %s\n", path, strerror(errno));
        return -1;
    }
    uint8_t extra;
    g.secret_len = fread(g.secret, 1, sizeof g.secret, f);
    bool more = fread(&extra, 1, 1, f) == 1;
    fclose(f);
    if (more || g.secret_len < MPCRYPTO_SECRET_MIN) {
        fprintf(stderr, "tgproxy-fakemp: %s: a proxy secret is %d..%d bytes (binary)\n", path,
                MPCRYPTO_SECRET_MIN, MPCRYPTO_SECRET_MAX);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *listen_s = NULL, *secret_s = NULL, *dc_s = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--listen") == 0 && v)
            listen_s = v, i++;
        else if (strcmp(a, "--secret-file") == 0 && v)
            secret_s = v, i++;
        else if (strcmp(a, "--dc") == 0 && v)
            dc_s = v, i++;
        else if (strcmp(a, "--dc-index") == 0 && v)
            g.dc_index = (int16_t)strtol(v, NULL, 10), i++;
        else if (strcmp(a, "--raw") == 0)
            g.raw = true;
        else if (strcmp(a, "--any-clock") == 0)
            g.no_clock = true;
        else if (strcmp(a, "--client-addr") == 0 && v) {
            g.have_peer = true;
            g.peer.family = strchr(v, ':') ? AF_INET6 : AF_INET;
            if (inet_pton(g.peer.family, v, g.peer.ip) != 1)
                usage();
            i++;
        } else
            usage();
    }
    struct sockaddr_storage ls;
    socklen_t ll;
    if (!listen_s || !secret_s || !dc_s || parse_addr(listen_s, &ls, &ll) != 0 ||
        parse_addr(dc_s, &g.dc, &g.dc_len) != 0)
        usage();
    if (read_secret(secret_s) != 0)
        return 1;
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_term);
    signal(SIGINT, on_term);
    int lfd = socket(ls.ss_family, SOCK_STREAM, 0), one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&ls, ll) != 0 || listen(lfd, 512) != 0) {
        fprintf(stderr, "tgproxy-fakemp: listen on %s: %s\n", listen_s, strerror(errno));
        return 1;
    }
    struct sockaddr_storage bound;
    socklen_t bl = sizeof bound;
    getsockname(lfd, (struct sockaddr *)&bound, &bl);
    struct mpcrypto_end be;
    end_of(&bound, &be);
    char bs[80];
    say("tgproxy-fakemp: listening on %s (port %u)", end_str(&be, bs, sizeof bs), be.port);
    pthread_attr_t detached;
    pthread_attr_init(&detached);
    pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED);
    for (;;) {
        struct sockaddr_storage peer;
        socklen_t pl = sizeof peer;
        int fd = accept(lfd, (struct sockaddr *)&peer, &pl);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE)
                continue;
            return 1;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct mpconn *m = calloc(1, sizeof *m);
        if (m == NULL) {
            close(fd);
            continue;
        }
        m->fd = fd;
        m->out_seq = m->in_seq = -2;
        struct mpcrypto_end pe;
        end_of(&peer, &pe);
        end_str(&pe, m->peer_s, sizeof m->peer_s);
        /* created detached: a pthread_detach after the create races a thread that ends first
           and a SIGTERM in between (TSan reports the finished, unjoined thread as a leak) */
        pthread_t t;
        if (pthread_create(&t, &detached, serve, m) != 0) {
            close(fd);
            free(m);
            continue;
        }
    }
}
