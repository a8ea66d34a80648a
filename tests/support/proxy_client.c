/* proxy_client: test client for tgproxy. See proxy_client.h. */
#include "proxy_client.h"

#include "proxy_fakedc.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HELLO_LEN 517
#define REC_MAX   16384

static void put16(uint8_t *p, size_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

/* Extensions of a small, well-formed hello; padding fills it to total bytes. */
static size_t hello_body(uint8_t *p, const char *sni, size_t total)
{
    size_t n = 0;
    static const uint8_t suites[] = {0x0a, 0x0a, 0x13, 0x01, 0x13, 0x02, 0x13, 0x03, 0xc0, 0x2b};
    put16(p + n, sizeof suites);
    memcpy(p + n + 2, suites, sizeof suites);
    n += 2 + sizeof suites;
    p[n++] = 1; /* compression methods: null */
    p[n++] = 0;
    size_t ext_len_at = n;
    n += 2;
    if (sni) {
        size_t sl = strlen(sni);
        put16(p + n, 0x0000);
        put16(p + n + 2, sl + 5);
        put16(p + n + 4, sl + 3);
        p[n + 6] = 0;
        put16(p + n + 7, sl);
        memcpy(p + n + 9, sni, sl);
        n += 9 + sl;
    }
    static const uint8_t versions[] = {0x00, 0x2b, 0x00, 0x03, 0x02, 0x03, 0x04};
    memcpy(p + n, versions, sizeof versions);
    n += sizeof versions;
    static const uint8_t ks[] = {0x00, 0x33, 0x00, 0x26, 0x00, 0x24, 0x00, 0x1d, 0x00, 0x20};
    memcpy(p + n, ks, sizeof ks);
    RAND_bytes(p + n + sizeof ks, 32);
    n += sizeof ks + 32;
    /* 76 bytes precede p in the record (header 5, type and length 4, version 2, random 32,
       session id 1 + 32); the padding extension (4 + pad) fills it to total. */
    size_t pad = total - 76 - n - 4;
    put16(p + n, 0x0015);
    put16(p + n + 2, pad);
    memset(p + n + 4, 0, pad);
    n += 4 + pad;
    put16(p + ext_len_at, n - ext_len_at - 2);
    return n;
}

size_t pcli_hello(uint8_t *out, size_t cap, const uint8_t key[16], const char *sni, int64_t ts)
{
    return pcli_hello_sized(out, cap, key, sni, ts, HELLO_LEN);
}

size_t pcli_hello_sized(uint8_t *out, size_t cap, const uint8_t key[16], const char *sni,
                        int64_t ts, size_t len)
{
    if (cap < len || len < HELLO_LEN || len > 5 + REC_MAX || (sni && strlen(sni) > 255))
        return 0;
    uint8_t *p = out;
    p[0] = 0x16, p[1] = 0x03, p[2] = 0x01;
    p[5] = 0x01;
    p[9] = 0x03, p[10] = 0x03;
    memset(p + 11, 0, 32);
    p[43] = 32;
    RAND_bytes(p + 44, 32);
    size_t body = hello_body(p + 76, sni, len);
    size_t total = 76 + body;
    put16(p + 3, total - 5);
    p[6] = 0;
    put16(p + 7, total - 9);
    uint8_t mac[32];
    unsigned int ml = 0;
    HMAC(EVP_sha256(), key, 16, p, total, mac, &ml);
    uint32_t t = (uint32_t)ts;
    for (int i = 0; i < 4; i++)
        mac[28 + i] ^= (uint8_t)(t >> (8 * i));
    memcpy(p + 11, mac, 32);
    return total;
}

/* Read the 3-record answer and verify its random. */
static int read_server_hello(struct pcli *c, const uint8_t *hello, const uint8_t key[16])
{
    uint8_t buf[5 + 512 + 6 + 5 + 16384];
    size_t n = 0;
    int rc = psock_read_all(c->fd, buf, 5);
    if (rc < 0)
        return rc;
    size_t l1 = (size_t)buf[3] << 8 | buf[4];
    if (buf[0] != 0x16 || buf[1] != 3 || buf[2] != 3 || l1 > 512 || l1 < 38)
        return -EPROTO;
    n = 5 + l1 + 6 + 5;
    if ((rc = psock_read_all(c->fd, buf + 5, n - 5)) < 0)
        return rc;
    uint8_t *ccs = buf + 5 + l1;
    static const uint8_t want[] = {0x14, 0x03, 0x03, 0x00, 0x01, 0x01, 0x17, 0x03, 0x03};
    if (memcmp(ccs, want, sizeof want) != 0)
        return -EPROTO;
    size_t l3 = (size_t)ccs[9] << 8 | ccs[10];
    if (l3 > 16384)
        return -EPROTO;
    if ((rc = psock_read_all(c->fd, buf + n, l3)) < 0)
        return rc;
    n += l3;
    uint8_t srv_random[32], mac[32];
    memcpy(srv_random, buf + 11, 32);
    memset(buf + 11, 0, 32);
    /* HMAC(K, client_random || answer with zeroed random): one contiguous message */
    static _Thread_local uint8_t msg[32 + sizeof buf];
    memcpy(msg, hello + 11, 32);
    memcpy(msg + 32, buf, n);
    unsigned int ml = 0;
    HMAC(EVP_sha256(), key, 16, msg, 32 + n, mac, &ml);
    return memcmp(mac, srv_random, 32) == 0 ? 0 : -EPROTO;
}

/* Frame (TLS) and write plaintext already encrypted in p. */
static int write_framed(struct pcli *c, const uint8_t *p, size_t n)
{
    if (!c->tls)
        return psock_write_all(c->fd, p, n);
    uint8_t rec[5 + REC_MAX];
    while (n > 0) {
        size_t k = n < c->max_record ? n : c->max_record;
        rec[0] = 0x17, rec[1] = 3, rec[2] = 3;
        put16(rec + 3, k);
        memcpy(rec + 5, p, k);
        int rc = psock_write_all(c->fd, rec, 5 + k);
        if (rc < 0)
            return rc;
        p += k;
        n -= k;
    }
    return 0;
}

static int tls_start(struct pcli *c, const struct pcli_opts *o)
{
    uint8_t hello[HELLO_LEN];
    size_t hl =
        pcli_hello(hello, sizeof hello, o->key, o->sni, (int64_t)time(NULL) + o->time_skew_s);
    int rc = 0;
    size_t step = o->split ? o->split : hl;
    for (size_t at = 0; rc == 0 && at < hl; at += step) {
        size_t k = hl - at < step ? hl - at : step;
        rc = psock_write_all(c->fd, hello + at, k);
        if (rc == 0 && at + k < hl && o->between)
            o->between(c->fd, o->between_arg);
    }
    if (rc == 0)
        rc = read_server_hello(c, hello, o->key);
    if (rc == 0)
        rc = psock_write_all(c->fd, "\x14\x03\x03\x00\x01\x01", 6);
    return rc;
}

int pcli_connect(struct pcli *c, uint16_t port, const struct pcli_opts *o)
{
    *c = (struct pcli){.fd = -1};
    c->timeout_ms = o->timeout_ms ? o->timeout_ms : 10000;
    c->max_record = o->max_record ? o->max_record : 2878;
    if (c->max_record > REC_MAX)
        c->max_record = REC_MAX;
    c->tls = o->mode == PCLI_TLS;
    c->framed = o->framed;
    c->fd = psock_connect_from(o->src_ip, port, c->timeout_ms);
    if (c->fd < 0)
        return c->fd;
    int rc = o->prefix_len ? psock_write_all(c->fd, o->prefix, o->prefix_len) : 0;
    if (rc == 0 && c->tls)
        rc = tls_start(c, o);
    if (rc < 0)
        goto fail;
    uint8_t tag = o->mode == PCLI_CLASSIC ? (o->tag ? o->tag : PTAG_ABRIDGED) : PTAG_PADDED;
    if (o->mode == PCLI_DIRECT && o->tag)
        tag = o->tag;
    uint8_t wire[64];
    rc = pobfs_client_header(wire, o->mode == PCLI_DIRECT ? NULL : o->key, tag, o->dc, &c->enc,
                             &c->dec);
    if (rc < 0) {
        rc = -EIO;
        goto fail;
    }
    pobfs_reply_keyiv(wire, o->mode == PCLI_DIRECT ? NULL : o->key, c->reply_keyiv);
    if (!c->tls && o->split > 0 && o->split < 64) {
        rc = psock_write_all(c->fd, wire, o->split);
        if (rc == 0 && o->between)
            o->between(c->fd, o->between_arg);
        if (rc == 0)
            rc = psock_write_all(c->fd, wire + o->split, 64 - o->split);
    } else {
        rc = write_framed(c, wire, 64);
    }
    if (rc < 0)
        goto fail;
    return 0;
fail:
    pcli_close(c);
    return rc;
}

static void le32_put(uint8_t out[4], uint32_t v)
{
    for (int i = 0; i < 4; i++)
        out[i] = (uint8_t)(v >> (8 * i));
}

static int send_plain(struct pcli *c, const void *p, size_t n);

int pcli_send(struct pcli *c, const void *p, size_t n)
{
    if (c->framed) { /* one packet: its intermediate-style length first */
        uint8_t h[4];
        if (n % 4 != 0 || n == 0 || n >= (1u << 24))
            return -EINVAL;
        le32_put(h, (uint32_t)n);
        int rc = send_plain(c, h, 4);
        if (rc < 0)
            return rc;
    }
    return send_plain(c, p, n);
}

static int send_plain(struct pcli *c, const void *p, size_t n)
{
    uint8_t tmp[8192];
    const uint8_t *b = p;
    while (n > 0) {
        size_t k = n < sizeof tmp ? n : sizeof tmp;
        memcpy(tmp, b, k);
        pctr_apply(&c->enc, tmp, k);
        int rc = write_framed(c, tmp, k);
        if (rc < 0)
            return rc;
        b += k;
        n -= k;
    }
    return 0;
}

/* Strip TLS record headers from buf[0..n) in place; returns payload bytes or -EPROTO. */
static ssize_t unwrap(struct pcli *c, uint8_t *buf, size_t n)
{
    size_t in = 0, out = 0;
    while (in < n) {
        if (c->rleft == 0) {
            c->rhdr[c->rhdr_n++] = buf[in++];
            if (c->rhdr_n < 5)
                continue;
            c->rhdr_n = 0;
            if (c->rhdr[0] != 0x17 || c->rhdr[1] != 3 || c->rhdr[2] != 3)
                return -EPROTO;
            c->rleft = (size_t)c->rhdr[3] << 8 | c->rhdr[4];
            if (c->rleft > REC_MAX)
                return -EPROTO; /* the brief: proxy records <= 16384 bytes */
            continue;
        }
        size_t k = n - in < c->rleft ? n - in : c->rleft;
        memmove(buf + out, buf + in, k);
        in += k;
        out += k;
        c->rleft -= k;
    }
    return (ssize_t)out;
}

/* Framed: drop packet headers and padding from the plaintext buf[0..n) in place; returns the
   payload bytes left (a quick-ack token, bit 31, is dropped too). */
static ssize_t unframe(struct pcli *c, uint8_t *buf, size_t n)
{
    size_t in = 0, out = 0;
    while (in < n) {
        if (c->fleft == 0 && c->fpad == 0) {
            c->fhdr[c->fhdr_n++] = buf[in++];
            if (c->fhdr_n < 4)
                continue;
            c->fhdr_n = 0;
            uint32_t len = (uint32_t)c->fhdr[0] | (uint32_t)c->fhdr[1] << 8 |
                           (uint32_t)c->fhdr[2] << 16 | (uint32_t)c->fhdr[3] << 24;
            if (len & 0x80000000u)
                continue; /* a quick-ack token, not a length */
            c->fleft = len & ~3u;
            c->fpad = len & 3u;
            continue;
        }
        if (c->fleft == 0) { /* padded intermediate: 1..3 bytes after the packet */
            size_t k = n - in < c->fpad ? n - in : c->fpad;
            in += k;
            c->fpad -= k;
            continue;
        }
        size_t k = n - in < c->fleft ? n - in : c->fleft;
        memmove(buf + out, buf + in, k);
        in += k;
        out += k;
        c->fleft -= k;
    }
    return (ssize_t)out;
}

/* One recv, unwrapped and decrypted; may return 0 payload bytes without EOF (-EAGAIN). */
static ssize_t recv_some(struct pcli *c, uint8_t *p, size_t n)
{
    ssize_t r = recv(c->fd, p, n, 0);
    if (r < 0)
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    if (r == 0)
        return 0;
    ssize_t k = c->tls ? unwrap(c, p, (size_t)r) : r;
    if (k < 0)
        return k;
    if (k == 0)
        return -EAGAIN;
    pctr_apply(&c->dec, p, (size_t)k);
    if (c->framed && (k = unframe(c, p, (size_t)k)) == 0)
        return -EAGAIN;
    return k;
}

ssize_t pcli_recv(struct pcli *c, void *p, size_t n)
{
    for (int guard = 0; guard < 1000000; guard++) {
        ssize_t k = recv_some(c, p, n);
        if (k == -EAGAIN) {
            struct pollfd pf = {.fd = c->fd, .events = POLLIN};
            if (poll(&pf, 1, c->timeout_ms) == 0)
                return -ETIMEDOUT;
            continue;
        }
        return k;
    }
    return -EPROTO;
}

int pcli_recv_all(struct pcli *c, void *p, size_t n)
{
    uint8_t *b = p;
    while (n > 0) {
        ssize_t k = pcli_recv(c, b, n);
        if (k <= 0)
            return k == 0 ? -EPIPE : (int)k;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

void pcli_close(struct pcli *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    pctr_cleanup(&c->enc);
    pctr_cleanup(&c->dec);
}

/* Outgoing side of a streaming transfer: encrypted, framed bytes waiting for the socket. */
/* Outgoing bytes: up to OUTQ_PAYLOAD of stream per fill; with FakeTLS cut into records of at
   most max_record payload bytes, several per send() as a client with a buffered TLS layer
   writes them (one record per send would make the load generator, not the proxy, the
   bottleneck, and loopback segments unrealistically small). */
#define OUTQ_PAYLOAD 65536
struct outq {
    uint8_t buf[OUTQ_PAYLOAD + 5 * 64 + 4];
    uint8_t plain[OUTQ_PAYLOAD + 4]; /* framed: the packet (length, stream bytes) */
    size_t off, len;
};

/* Queue up to k stream bytes from pos; returns how many were queued (> 0 for k > 0). */
static size_t outq_fill(struct pcli *c, struct outq *q, uint32_t seed, uint64_t pos, size_t k)
{
    size_t done = 0, at = 0;
    if (k > OUTQ_PAYLOAD)
        k = OUTQ_PAYLOAD;
    if (c->framed) { /* one packet per fill: a multiple of 4 (the totals are) */
        /* whole records must fit the queue */
        while (c->tls && k > c->max_record &&
               k + 4 + 5 * ((k + 4 + c->max_record - 1) / c->max_record) > sizeof q->buf)
            k -= c->max_record;
        k &= ~(size_t)3;
        if (k == 0)
            return 0; /* a total that is not a multiple of 4: the caller fails (-EINVAL) */
        le32_put(q->plain, (uint32_t)k);
        pstream_fill(seed, pos, q->plain + 4, k);
        size_t n = k + 4;
        while (done < n) {
            size_t r = !c->tls || n - done < c->max_record ? n - done : c->max_record;
            uint8_t *h = q->buf + at;
            size_t hl = c->tls ? 5 : 0;
            memcpy(h + hl, q->plain + done, r);
            pctr_apply(&c->enc, h + hl, r);
            if (c->tls) {
                h[0] = 0x17, h[1] = 3, h[2] = 3;
                put16(h + 3, r);
            }
            at += hl + r;
            done += r;
        }
        q->off = 0;
        q->len = at;
        return k;
    }
    if (!c->tls) {
        pstream_fill(seed, pos, q->buf, k);
        pctr_apply(&c->enc, q->buf, k);
        done = at = k;
    }
    while (c->tls && done < k && at + 5 < sizeof q->buf) {
        size_t r = k - done < c->max_record ? k - done : c->max_record;
        if (r > sizeof q->buf - at - 5)
            r = sizeof q->buf - at - 5;
        uint8_t *h = q->buf + at;
        pstream_fill(seed, pos + done, h + 5, r);
        pctr_apply(&c->enc, h + 5, r);
        h[0] = 0x17, h[1] = 3, h[2] = 3;
        put16(h + 3, r);
        at += 5 + r;
        done += r;
    }
    q->off = 0;
    q->len = at;
    return done;
}

/* Interleaved send of total bytes and, when verify_echo, receive + verify of the echo. */
static int stream(struct pcli *c, uint32_t seed, uint64_t total, size_t chunk, bool echo)
{
    struct outq *q = malloc(sizeof *q);
    uint8_t *rb = malloc(65536);
    uint64_t sent = 0, got = 0;
    int rc = q && rb ? 0 : -ENOMEM;
    if (q)
        q->off = q->len = 0;
    psock_set_nonblock(c->fd, true);
    while (rc == 0 && (got < (echo ? total : 0) || sent < total || q->off < q->len)) {
        bool want_out = sent < total || q->off < q->len;
        struct pollfd pf = {.fd = c->fd, .events = (short)(POLLIN | (want_out ? POLLOUT : 0))};
        if (poll(&pf, 1, c->timeout_ms) <= 0) {
            rc = -ETIMEDOUT;
            break;
        }
        if (pf.revents & POLLOUT) {
            if (q->off == q->len && sent < total) {
                size_t k = total - sent < chunk ? (size_t)(total - sent) : chunk;
                size_t f = outq_fill(c, q, seed, sent, k);
                if (f == 0) {
                    rc = -EINVAL;
                    break;
                }
                sent += f;
            }
            ssize_t w = send(c->fd, q->buf + q->off, q->len - q->off, MSG_NOSIGNAL);
            if (w < 0 && errno != EAGAIN)
                rc = -errno;
            else if (w > 0)
                q->off += (size_t)w;
        }
        if (rc == 0 && (pf.revents & (POLLIN | POLLHUP | POLLERR)) && echo) {
            ssize_t k = recv_some(c, rb, 65536);
            if (k == 0)
                rc = -EPIPE;
            else if (k > 0 && pstream_check(seed, got, rb, (size_t)k) >= 0)
                rc = -EBADMSG;
            else if (k > 0)
                got += (uint64_t)k;
            else if (k != -EAGAIN)
                rc = (int)k;
        }
    }
    psock_set_nonblock(c->fd, false);
    free(q);
    free(rb);
    return rc;
}

int pcli_echo(struct pcli *c, uint32_t seed, uint64_t total, size_t chunk)
{
    uint8_t cmd[FAKEDC_CMD_LEN];
    fakedc_cmd(cmd, "ECHO", seed, total);
    int rc = pcli_send(c, cmd, sizeof cmd);
    return rc < 0 ? rc : stream(c, seed, total, chunk ? chunk : OUTQ_PAYLOAD, true);
}

int pcli_sink(struct pcli *c, uint32_t seed, uint64_t total, size_t chunk)
{
    uint8_t cmd[FAKEDC_CMD_LEN], ans[8];
    fakedc_cmd(cmd, "SINK", seed, total);
    int rc = pcli_send(c, cmd, sizeof cmd);
    if (rc == 0)
        rc = stream(c, seed, total, chunk ? chunk : OUTQ_PAYLOAD, false);
    if (rc == 0)
        rc = pcli_recv_all(c, ans, sizeof ans);
    if (rc == 0 && memcmp(ans, "SINK-OK!", 8) != 0)
        rc = -EBADMSG;
    return rc;
}

int pcli_source(struct pcli *c, uint32_t seed, uint64_t total)
{
    uint8_t cmd[FAKEDC_CMD_LEN];
    fakedc_cmd(cmd, "SRCE", seed, total);
    int rc = pcli_send(c, cmd, sizeof cmd);
    uint8_t *rb = malloc(65536);
    if (!rb)
        return -ENOMEM;
    for (uint64_t got = 0; rc == 0 && got < total;) {
        size_t want = total - got < 65536 ? (size_t)(total - got) : 65536;
        ssize_t k = pcli_recv(c, rb, want);
        if (k <= 0)
            rc = k == 0 ? -EPIPE : (int)k;
        else if (pstream_check(seed, got, rb, (size_t)k) >= 0)
            rc = -EBADMSG;
        else
            got += (uint64_t)k;
    }
    free(rb);
    return rc;
}

/* ---- transfers with a bounded number of bytes in flight ---- */

static void le64_put(uint8_t out[8], uint64_t v)
{
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(v >> (8 * i));
}

/* Acknowledgements of an SNKA upload, read as 8-byte units: counts, then the verdict. */
struct acks {
    uint8_t u[8];
    size_t un;
    uint64_t acked;
    int verdict; /* 0 = not yet, 1 = SINK-OK!, -1 = anything else */
};

static int acks_feed(struct acks *a, const uint8_t *p, size_t n, uint64_t sent, uint64_t total)
{
    for (size_t i = 0; i < n && !a->verdict; i++) {
        a->u[a->un++] = p[i];
        if (a->un < 8)
            continue;
        a->un = 0;
        if (a->acked == total) {
            a->verdict = memcmp(a->u, "SINK-OK!", 8) == 0 ? 1 : -1;
            continue;
        }
        uint64_t v = 0;
        for (int k = 7; k >= 0; k--)
            v = v << 8 | a->u[k];
        if (v <= a->acked || v > sent)
            return -EPROTO; /* acknowledges nothing new, or bytes never sent */
        a->acked = v;
    }
    return 0;
}

/* Send the next chunk if the window allows and the queue is empty, then write. */
static int window_send(struct pcli *c, struct outq *q, uint32_t seed, uint64_t *sent,
                       uint64_t total, uint64_t room, size_t chunk)
{
    if (q->off == q->len && *sent < total && room > 0) {
        uint64_t k = total - *sent < chunk ? total - *sent : chunk;
        k = k < room ? k : room;
        *sent += outq_fill(c, q, seed, *sent, (size_t)k);
    }
    if (q->off == q->len)
        return 0;
    ssize_t w = send(c->fd, q->buf + q->off, q->len - q->off, MSG_NOSIGNAL);
    if (w < 0 && errno != EAGAIN)
        return -errno;
    if (w > 0)
        q->off += (size_t)w;
    return 0;
}

int pcli_sink_window(struct pcli *c, uint32_t seed, uint64_t total, uint64_t window)
{
    uint8_t cmd[FAKEDC_CMD_LEN], rb[4096];
    fakedc_cmd(cmd, "SNKA", seed, total);
    int rc = pcli_send(c, cmd, sizeof cmd);
    struct outq *q = malloc(sizeof *q);
    if (!q)
        return -ENOMEM;
    q->off = q->len = 0;
    size_t chunk = OUTQ_PAYLOAD;
    struct acks a = {.verdict = 0};
    uint64_t sent = 0;
    psock_set_nonblock(c->fd, true);
    while (rc == 0 && !a.verdict) {
        uint64_t room = window - (sent - a.acked);
        bool want_out = q->off < q->len || (sent < total && room > 0);
        struct pollfd pf = {.fd = c->fd, .events = (short)(POLLIN | (want_out ? POLLOUT : 0))};
        if (poll(&pf, 1, c->timeout_ms) <= 0) {
            rc = -ETIMEDOUT;
            break;
        }
        if (pf.revents & POLLOUT)
            rc = window_send(c, q, seed, &sent, total, room, chunk);
        if (rc == 0 && (pf.revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t k = recv_some(c, rb, sizeof rb);
            if (k == 0)
                rc = -EPIPE;
            else if (k > 0)
                rc = acks_feed(&a, rb, (size_t)k, sent, total);
            else if (k != -EAGAIN)
                rc = (int)k;
        }
    }
    psock_set_nonblock(c->fd, false);
    free(q);
    return rc == 0 && a.verdict != 1 ? -EBADMSG : rc;
}

int pcli_source_window(struct pcli *c, uint32_t seed, uint64_t total, uint64_t window)
{
    uint8_t msg[FAKEDC_CMD_LEN + 8];
    uint64_t credit = total < window ? total : window;
    fakedc_cmd(msg, "SRCW", seed, total);
    le64_put(msg + FAKEDC_CMD_LEN, credit);
    int rc = pcli_send(c, msg, sizeof msg);
    uint8_t *rb = malloc(65536);
    if (!rb)
        return -ENOMEM;
    for (uint64_t got = 0; rc == 0 && got < total;) {
        size_t want = total - got < 65536 ? (size_t)(total - got) : 65536;
        ssize_t k = pcli_recv(c, rb, want);
        if (k <= 0) {
            rc = k == 0 ? -EPIPE : (int)k;
        } else if (got + (uint64_t)k > credit || pstream_check(seed, got, rb, (size_t)k) >= 0) {
            rc = -EBADMSG; /* past the credit, or wrong bytes */
        } else {
            got += (uint64_t)k;
            /* top the window up once a step of it has been used, not per read */
            if (credit < total && got + window - credit >= FAKEDC_ACK_STEP) {
                credit = got + window < total ? got + window : total;
                le64_put(msg, credit);
                rc = pcli_send(c, msg, 8);
            }
        }
    }
    free(rb);
    return rc;
}
