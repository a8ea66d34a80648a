/* mprpc: middle-proxy RPC messages (mprpc.h). */
#include "proxy/wire/mprpc.h"

#include <netinet/in.h>
#include <string.h>

#include "proxy/wire/obfs2.h"

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p)
{
    return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

static uint8_t *wr32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16),
    p[3] = (uint8_t)(v >> 24);
    return p + 4;
}

static uint8_t *wr64(uint8_t *p, uint64_t v)
{
    return wr32(wr32(p, (uint32_t)v), (uint32_t)(v >> 32));
}

size_t mprpc_nonce_build(uint8_t out[MPRPC_NONCE_LEN], const struct mprpc_nonce *n)
{
    uint8_t *p = wr32(wr32(wr32(wr32(out, MPRPC_NONCE), n->key_select), n->schema), n->ts);
    memcpy(p, n->nonce, 16);
    return MPRPC_NONCE_LEN;
}

int mprpc_nonce_parse(const uint8_t *p, size_t n, struct mprpc_nonce *out)
{
    memset(out, 0, sizeof *out);
    if (n != MPRPC_NONCE_LEN || rd32(p) != MPRPC_NONCE)
        return -1;
    out->key_select = rd32(p + 4);
    out->schema = rd32(p + 8);
    out->ts = rd32(p + 12);
    memcpy(out->nonce, p + 16, 16);
    return 0;
}

size_t mprpc_handshake_build(uint8_t out[MPRPC_HANDSHAKE_LEN], const struct mprpc_handshake *h)
{
    uint8_t *p = wr32(wr32(out, MPRPC_HANDSHAKE), h->flags);
    memcpy(p, h->sender, MPRPC_PID_LEN);
    memcpy(p + MPRPC_PID_LEN, h->peer, MPRPC_PID_LEN);
    return MPRPC_HANDSHAKE_LEN;
}

int mprpc_handshake_parse(const uint8_t *p, size_t n, struct mprpc_handshake *out, int32_t *err)
{
    memset(out, 0, sizeof *out);
    *err = 0;
    if (n >= 8 && rd32(p) == MPRPC_HANDSHAKE_ERROR) {
        *err = (int32_t)rd32(p + 4);
        return 1;
    }
    if (n != MPRPC_HANDSHAKE_LEN || rd32(p) != MPRPC_HANDSHAKE)
        return -1;
    out->flags = rd32(p + 4);
    memcpy(out->sender, p + 8, MPRPC_PID_LEN);
    memcpy(out->peer, p + 8 + MPRPC_PID_LEN, MPRPC_PID_LEN);
    return 0;
}

size_t mprpc_handshake_error_build(uint8_t out[MPRPC_HS_ERROR_LEN], int32_t code,
                                   const uint8_t sender[MPRPC_PID_LEN])
{
    memcpy(wr32(wr32(out, MPRPC_HANDSHAKE_ERROR), (uint32_t)code), sender, MPRPC_PID_LEN);
    return MPRPC_HS_ERROR_LEN;
}

void mprpc_pid(uint8_t out[MPRPC_PID_LEN], const uint8_t ip4[4], uint16_t port, uint16_t pid,
               uint32_t utime)
{
    /* the address as a host-order integer stored little-endian: its bytes reversed */
    out[0] = ip4[3], out[1] = ip4[2], out[2] = ip4[1], out[3] = ip4[0];
    out[4] = (uint8_t)port, out[5] = (uint8_t)(port >> 8);
    out[6] = (uint8_t)pid, out[7] = (uint8_t)(pid >> 8);
    wr32(out + 8, utime);
}

void mprpc_addr_set(struct mprpc_addr *a, int family, const void *ip, uint16_t port)
{
    memset(a, 0, sizeof *a);
    if (family == AF_INET6) {
        memcpy(a->ip, ip, 16);
    } else {
        a->ip[10] = a->ip[11] = 0xff;
        memcpy(a->ip + 12, ip, 4);
    }
    a->port = port;
}

bool mprpc_addr_is_v4(const struct mprpc_addr *a)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(a->ip, prefix, 12) == 0;
}

size_t mprpc_req_head(uint8_t out[MPRPC_REQ_HEAD_MAX], const struct mprpc_req *r)
{
    uint32_t flags = r->flags & ~(MPRPC_F_HAS_AD_TAG | 0x4u);
    if (r->has_tag)
        flags |= MPRPC_F_HAS_AD_TAG;
    uint8_t *p = wr64(wr32(wr32(out, MPRPC_PROXY_REQ), flags), r->conn_id);
    memcpy(p, r->client.ip, 16);
    p = wr32(p + 16, r->client.port);
    memcpy(p, r->proxy.ip, 16);
    p = wr32(p + 16, r->proxy.port);
    if (r->has_tag) {
        /* extra: its size, then TL_PROXY_TAG and the tag as a TL string (length byte,
           16 bytes, 3 zero bytes to the next word) */
        p = wr32(wr32(p, 24), MPRPC_TL_PROXY_TAG);
        *p++ = MPRPC_AD_TAG_LEN;
        memcpy(p, r->ad_tag, MPRPC_AD_TAG_LEN);
        p += MPRPC_AD_TAG_LEN;
        memset(p, 0, 3);
        p += 3;
    }
    return (size_t)(p - out);
}

/* A TL string at p[0..n): its bytes at *s, *slen long; returns the bytes it takes (a
   multiple of 4), or 0 when it does not fit. */
static size_t tl_string(const uint8_t *p, size_t n, const uint8_t **s, size_t *slen)
{
    if (n < 4)
        return 0;
    size_t head = 1, len = p[0];
    if (len == 254) {
        head = 4;
        len = (size_t)p[1] | (size_t)p[2] << 8 | (size_t)p[3] << 16;
    } else if (len == 255) {
        return 0;
    }
    size_t total = (head + len + 3) & ~(size_t)3;
    if (total > n)
        return 0;
    *s = p + head;
    *slen = len;
    return total;
}

int mprpc_req_parse(const uint8_t *p, size_t n, struct mprpc_req *out)
{
    memset(out, 0, sizeof *out);
    if (n < 56 || rd32(p) != MPRPC_PROXY_REQ)
        return -1;
    out->flags = rd32(p + 4);
    out->conn_id = rd64(p + 8);
    memcpy(out->client.ip, p + 16, 16);
    out->client.port = rd32(p + 32);
    memcpy(out->proxy.ip, p + 36, 16);
    out->proxy.port = rd32(p + 52);
    size_t at = 56;
    if (out->flags & (MPRPC_F_HAS_AD_TAG | 0x4u)) {
        if (n - at < 4)
            return -1;
        uint32_t extra = rd32(p + at);
        at += 4;
        if (extra % 4 != 0 || extra > n - at)
            return -1;
        const uint8_t *e = p + at, *end = p + at + extra;
        while (end - e >= 4 && rd32(e) == MPRPC_TL_PROXY_TAG) {
            const uint8_t *s;
            size_t slen, used = tl_string(e + 4, (size_t)(end - e - 4), &s, &slen);
            if (used == 0)
                return -1;
            if (slen == MPRPC_AD_TAG_LEN) {
                out->has_tag = true;
                memcpy(out->ad_tag, s, MPRPC_AD_TAG_LEN);
            }
            e += 4 + used;
        }
        at += extra;
    }
    out->off = at;
    out->len = n - at;
    return 0;
}

uint32_t mprpc_req_flags(uint32_t tag, bool has_tag, bool quickack, bool not_encrypted)
{
    uint32_t f = MPRPC_F_MAGIC | MPRPC_F_EXTMODE2;
    switch (tag) {
    case OBFS2_TAG_ABRIDGED:
        f |= MPRPC_F_ABRIDGED;
        break;
    case OBFS2_TAG_INTERMEDIATE:
        f |= MPRPC_F_INTERMEDIATE;
        break;
    case OBFS2_TAG_PADDED:
        f |= MPRPC_F_INTERMEDIATE | MPRPC_F_PAD;
        break;
    default:
        return 0;
    }
    if (has_tag)
        f |= MPRPC_F_HAS_AD_TAG;
    if (quickack)
        f |= MPRPC_F_QUICKACK;
    if (not_encrypted)
        f |= MPRPC_F_NOT_ENCRYPTED;
    return f;
}

int mprpc_parse(const uint8_t *p, size_t n, struct mprpc_msg *out)
{
    memset(out, 0, sizeof *out);
    if (n < 4)
        return -1;
    out->type = rd32(p);
    switch (out->type) {
    case MPRPC_PROXY_ANS:
        if (n < 16)
            return -1;
        out->kind = MPRPC_K_PROXY_ANS;
        out->flags = rd32(p + 4);
        out->conn_id = rd64(p + 8);
        out->off = 16;
        out->len = n - 16;
        return 0;
    case MPRPC_SIMPLE_ACK:
        if (n != 16)
            return -1;
        out->kind = MPRPC_K_SIMPLE_ACK;
        out->conn_id = rd64(p + 4);
        out->confirm = rd32(p + 12);
        return 0;
    case MPRPC_CLOSE_EXT:
    case MPRPC_CLOSE_CONN:
        if (n != 12)
            return -1;
        out->kind = out->type == MPRPC_CLOSE_EXT ? MPRPC_K_CLOSE_EXT : MPRPC_K_CLOSE_CONN;
        out->conn_id = rd64(p + 4);
        return 0;
    case MPRPC_PING:
    case MPRPC_PONG:
        if (n != 12)
            return -1;
        out->kind = out->type == MPRPC_PING ? MPRPC_K_PING : MPRPC_K_PONG;
        out->ping_id = rd64(p + 4);
        return 0;
    default:
        out->kind = MPRPC_K_UNKNOWN;
        return 0;
    }
}

size_t mprpc_ans_head(uint8_t out[MPRPC_SHORT_MAX], uint32_t flags, uint64_t conn_id)
{
    wr64(wr32(wr32(out, MPRPC_PROXY_ANS), flags), conn_id);
    return 16;
}

size_t mprpc_simple_ack(uint8_t out[MPRPC_SHORT_MAX], uint64_t conn_id, uint32_t confirm)
{
    wr32(wr64(wr32(out, MPRPC_SIMPLE_ACK), conn_id), confirm);
    return 16;
}

static size_t type_id(uint8_t *out, uint32_t type, uint64_t id)
{
    wr64(wr32(out, type), id);
    return 12;
}

size_t mprpc_close_ext(uint8_t out[MPRPC_SHORT_MAX], uint64_t conn_id)
{
    return type_id(out, MPRPC_CLOSE_EXT, conn_id);
}

size_t mprpc_close_conn(uint8_t out[MPRPC_SHORT_MAX], uint64_t conn_id)
{
    return type_id(out, MPRPC_CLOSE_CONN, conn_id);
}

size_t mprpc_ping(uint8_t out[MPRPC_SHORT_MAX], uint64_t ping_id)
{
    return type_id(out, MPRPC_PING, ping_id);
}

size_t mprpc_pong(uint8_t out[MPRPC_SHORT_MAX], uint64_t ping_id)
{
    return type_id(out, MPRPC_PONG, ping_id);
}
