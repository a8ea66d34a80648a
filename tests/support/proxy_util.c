/* proxy_util: test-side protocol helpers on plain OpenSSL. See proxy_util.h. */
#include "proxy_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static uint64_t splitmix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint8_t pstream_byte_block(uint64_t seed, uint64_t pos, uint64_t *blk, uint64_t *val)
{
    uint64_t b = pos >> 3;
    if (b != *blk) {
        *blk = b;
        *val = splitmix(b ^ seed);
    }
    return (uint8_t)(*val >> ((pos & 7) * 8));
}

void pstream_fill(uint64_t seed, uint64_t off, uint8_t *dst, size_t n)
{
    uint64_t blk = UINT64_MAX, val = 0;
    size_t i = 0;
    for (; i < n && ((off + i) & 7); i++)
        dst[i] = pstream_byte_block(seed, off + i, &blk, &val);
    for (; i + 8 <= n; i += 8) {
        uint64_t v = splitmix(((off + i) >> 3) ^ seed);
        memcpy(dst + i, &v, 8); /* little-endian hosts only, like the test machines */
    }
    for (; i < n; i++)
        dst[i] = pstream_byte_block(seed, off + i, &blk, &val);
}

long long pstream_check(uint64_t seed, uint64_t off, const uint8_t *p, size_t n)
{
    uint8_t tmp[4096];
    for (size_t done = 0; done < n;) {
        size_t k = n - done < sizeof tmp ? n - done : sizeof tmp;
        pstream_fill(seed, off + done, tmp, k);
        if (memcmp(tmp, p + done, k) != 0) {
            for (size_t i = 0; i < k; i++)
                if (tmp[i] != p[done + i])
                    return (long long)(done + i);
        }
        done += k;
    }
    return -1;
}

int pctr_init(struct pctr *c, const uint8_t key[32], const uint8_t iv[16])
{
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    if (!ctx)
        return -1;
    if (EVP_EncryptInit_ex(ctx, EVP_aes_256_ctr(), NULL, key, iv) != 1) {
        EVP_CIPHER_CTX_free(ctx);
        return -1;
    }
    c->ctx = ctx;
    return 0;
}

void pctr_apply(struct pctr *c, uint8_t *p, size_t n)
{
    while (n > 0) {
        int k = n > (1u << 30) ? (1 << 30) : (int)n;
        int outl = 0;
        EVP_EncryptUpdate(c->ctx, p, &outl, p, k);
        p += k;
        n -= (size_t)k;
    }
}

void pctr_cleanup(struct pctr *c)
{
    if (c && c->ctx) {
        EVP_CIPHER_CTX_free(c->ctx);
        c->ctx = NULL;
    }
}

static void sha256_2(const uint8_t *a, size_t an, const uint8_t *b, size_t bn, uint8_t out[32])
{
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    unsigned int len = 0;
    EVP_DigestInit_ex(m, EVP_sha256(), NULL);
    EVP_DigestUpdate(m, a, an);
    EVP_DigestUpdate(m, b, bn);
    EVP_DigestFinal_ex(m, out, &len);
    EVP_MD_CTX_free(m);
}

/* Brief 2.1: bytes 0..7 of a header sent in clear must not look like another transport. */
static bool forbidden_prefix(const uint8_t h[8])
{
    static const uint32_t bad[] = {0x44414548u, 0x54534f50u, 0x20544547u, 0x4954504fu,
                                   0xeeeeeeeeu, 0xddddddddu, 0x02010316u};
    uint32_t a = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
    uint32_t b = (uint32_t)h[4] | (uint32_t)h[5] << 8 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 24;
    if (h[0] == 0xef || b == 0)
        return true;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (a == bad[i])
            return true;
    return false;
}

/* Keys of both directions from header h; key NULL = raw prekeys. */
static int derive(const uint8_t h[64], const uint8_t *key, struct pctr *enc, struct pctr *dec)
{
    uint8_t r[48], k1[32], k2[32];
    for (int i = 0; i < 48; i++)
        r[i] = h[55 - i];
    if (key) {
        sha256_2(h + 8, 32, key, 16, k1);
        sha256_2(r, 32, key, 16, k2);
    } else {
        memcpy(k1, h + 8, 32);
        memcpy(k2, r, 32);
    }
    if (pctr_init(enc, k1, h + 40) < 0)
        return -1;
    if (pctr_init(dec, k2, r + 32) < 0) {
        pctr_cleanup(enc);
        return -1;
    }
    return 0;
}

void pobfs_reply_keyiv(const uint8_t wire[64], const uint8_t *key, uint8_t out[48])
{
    uint8_t r[48];
    for (int i = 0; i < 48; i++)
        r[i] = wire[55 - i];
    if (key)
        sha256_2(r, 32, key, 16, out);
    else
        memcpy(out, r, 32);
    memcpy(out + 32, r + 32, 16);
}

int pobfs_client_header(uint8_t wire[64], const uint8_t *key, uint8_t tag, int16_t dc,
                        struct pctr *enc, struct pctr *dec)
{
    uint8_t h[64];
    for (int tries = 0; tries < 1000; tries++) {
        if (RAND_bytes(h, sizeof h) != 1)
            return -1;
        if (!forbidden_prefix(h))
            break;
    }
    memset(h + 56, tag, 4);
    h[60] = (uint8_t)((uint16_t)dc & 0xff);
    h[61] = (uint8_t)((uint16_t)dc >> 8);
    if (derive(h, key, enc, dec) < 0)
        return -1;
    uint8_t e[64];
    memcpy(e, h, 64);
    pctr_apply(enc, e, 64);
    memcpy(wire, h, 56);
    memcpy(wire + 56, e + 56, 8);
    return 0;
}

int pobfs_dc_accept(const uint8_t wire[64], uint8_t *tag, int16_t *dc, struct pctr *dec,
                    struct pctr *enc)
{
    /* The DC decrypts with the sender's "enc" keys and replies with its "dec" keys. */
    if (derive(wire, NULL, dec, enc) < 0)
        return -1;
    uint8_t p[64];
    memcpy(p, wire, 64);
    pctr_apply(dec, p, 64);
    if (!(p[56] == p[57] && p[57] == p[58] && p[58] == p[59]) ||
        (p[56] != PTAG_ABRIDGED && p[56] != PTAG_INTERMEDIATE && p[56] != PTAG_PADDED)) {
        pctr_cleanup(dec);
        pctr_cleanup(enc);
        return -1;
    }
    *tag = p[56];
    *dc = (int16_t)(uint16_t)(p[60] | p[61] << 8);
    return 0;
}

struct sockaddr_in psock_addr(uint16_t port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

int psock_addr_parse(const char *ip, uint16_t port, struct sockaddr_storage *ss, socklen_t *len)
{
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)(void *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)(void *)ss;
    if (inet_pton(AF_INET, ip, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons(port);
        *len = sizeof *a4;
        return 0;
    }
    if (inet_pton(AF_INET6, ip, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons(port);
        *len = sizeof *a6;
        return 0;
    }
    return -EINVAL;
}

int psock_listen(uint16_t *port, int backlog)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = psock_addr(*port);
    socklen_t len = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, backlog) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

/* A socket of type bound to 127.0.0.1 on a free port (into *port); fd or -errno. */
static int bound_socket(int type, uint16_t *port)
{
    int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_in a = psock_addr(0);
    socklen_t len = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

int psock_udp_bind(uint16_t *port)
{
    return bound_socket(SOCK_DGRAM, port);
}

int psock_refusing(uint16_t *port)
{
    return bound_socket(SOCK_STREAM, port); /* never listening: a SYN gets a reset */
}

int psock_listen6(uint16_t *port, int backlog)
{
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    struct sockaddr_in6 a = {
        .sin6_family = AF_INET6, .sin6_addr = in6addr_loopback, .sin6_port = htons(*port)};
    socklen_t len = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, backlog) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    *port = ntohs(a.sin6_port);
    return fd;
}

int psock_connect6(uint16_t port, int timeout_ms)
{
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in6 a = {
        .sin6_family = AF_INET6, .sin6_addr = in6addr_loopback, .sin6_port = htons(port)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    return fd;
}

int psock_connect(uint16_t port, int timeout_ms)
{
    return psock_connect_from(NULL, port, timeout_ms);
}

int psock_connect_from(const char *src_ip, uint16_t port, int timeout_ms)
{
    bool v6 = src_ip && strchr(src_ip, ':'); /* an IPv6 source reaches [::1]:port */
    struct sockaddr_storage dst, src;
    socklen_t dlen = 0, slen = 0;
    if (psock_addr_parse(v6 ? "::1" : "127.0.0.1", port, &dst, &dlen) != 0 ||
        (src_ip && psock_addr_parse(src_ip, 0, &src, &slen) != 0))
        return -EINVAL;
    int fd = socket(dst.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if ((src_ip && bind(fd, (struct sockaddr *)&src, slen) < 0) ||
        connect(fd, (struct sockaddr *)&dst, dlen) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    return fd;
}

int psock_write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EPIPE;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

int psock_read_all(int fd, void *p, size_t n)
{
    uint8_t *b = p;
    while (n > 0) {
        ssize_t r = recv(fd, b, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? -errno : -EPIPE;
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

int psock_set_nonblock(int fd, bool on)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return -errno;
    fl = on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
    return fcntl(fd, F_SETFL, fl) < 0 ? -errno : 0;
}
