/*
 * proxyproto: PROXY protocol v1/v2 parsing and v2 building; see proxyproto.h.
 * Reference: HAProxy's proxy-protocol.txt (v1 section 2.1, v2 section 2.2).
 */
#include "proxy/wire/proxyproto.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

static const uint8_t pp_v2_sig[12] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
                                      0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a};

/* v2 addresses of a complete header b[0..total) (cmd, family already checked). */
static void pp_v2_addr(const uint8_t *b, struct proxyproto_addr *out)
{
    unsigned cmd = b[12] & 0x0f, fam = b[13] >> 4;
    if (cmd != 1 || (fam != 1 && fam != 2))
        return; /* LOCAL, or AF_UNSPEC: the socket's addresses apply */
    size_t alen = fam == 1 ? 4 : 16;
    out->family = fam == 1 ? AF_INET : AF_INET6;
    memcpy(out->src, b + 16, alen);
    memcpy(out->dst, b + 16 + alen, alen);
    memcpy(&out->src_port, b + 16 + 2 * alen, 2);
    memcpy(&out->dst_port, b + 18 + 2 * alen, 2);
}

static int pp_v2(const uint8_t *b, size_t n, size_t *len, struct proxyproto_addr *out)
{
    if (n < 16)
        return PROXYPROTO_MORE;
    size_t total = 16 + ((size_t)b[14] << 8 | b[15]);
    unsigned ver = b[12] >> 4, cmd = b[12] & 0x0f, fam = b[13] >> 4;
    if (ver != 2 || cmd > 1 || fam > 2 || total > PROXYPROTO_V2_MAX ||
        (cmd == 1 && fam == 1 && total < 16 + 12) || (cmd == 1 && fam == 2 && total < 16 + 36))
        return PROXYPROTO_BAD;
    *len = total;
    if (n < total)
        return PROXYPROTO_MORE;
    pp_v2_addr(b, out);
    return PROXYPROTO_OK;
}

/* Decimal port 0..65535 of exactly n digits. */
static bool pp_port(const char *s, size_t n, uint16_t *out)
{
    unsigned v = 0;
    if (n == 0 || n > 5)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v > 65535)
        return false;
    *out = htons((uint16_t)v);
    return true;
}

/* "SRC DST SPORT DPORT" of a v1 TCP4/TCP6 line (s[0..n), CRLF excluded). */
static bool pp_v1_fields(const char *s, size_t n, int family, struct proxyproto_addr *out)
{
    const char *f[4];
    size_t fl[4], k = 0, start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != ' ')
            continue;
        if (k == 4 || i == start)
            return false; /* a fifth field, or an empty one (double space) */
        f[k] = s + start;
        fl[k++] = i - start;
        start = i + 1;
    }
    if (k != 4 || !pp_port(f[2], fl[2], &out->src_port) || !pp_port(f[3], fl[3], &out->dst_port))
        return false;
    for (int j = 0; j < 2; j++) {
        char ip[48]; /* the longest IPv6 text is 45 bytes */
        if (fl[j] >= sizeof ip)
            return false;
        memcpy(ip, f[j], fl[j]);
        ip[fl[j]] = '\0';
        if (inet_pton(family, ip, j == 0 ? out->src : out->dst) != 1)
            return false;
    }
    out->family = (uint8_t)family;
    return true;
}

/* A complete v1 line b[0..line) ending in CRLF. */
static int pp_v1_line(const uint8_t *b, size_t line, struct proxyproto_addr *out)
{
    /* each protocol word must fit in the line before its CRLF (fuzzer-found) */
    if (line >= 6 + 7 + 2 && memcmp(b + 6, "UNKNOWN", 7) == 0)
        return PROXYPROTO_OK; /* the rest of the line is ignored (spec 2.1); the socket's addresses
                               */
    if (line < 6 + 5 + 2 || (memcmp(b + 6, "TCP4 ", 5) != 0 && memcmp(b + 6, "TCP6 ", 5) != 0))
        return PROXYPROTO_BAD;
    int family = b[9] == '4' ? AF_INET : AF_INET6;
    struct proxyproto_addr a;
    memset(&a, 0, sizeof a);
    if (!pp_v1_fields((const char *)b + 11, line - 2 - 11, family, &a))
        return PROXYPROTO_BAD;
    *out = a;
    return PROXYPROTO_OK;
}

int proxyproto_parse(const uint8_t *b, size_t n, size_t *len, struct proxyproto_addr *out)
{
    struct proxyproto_addr scratch;
    if (!out)
        out = &scratch;
    memset(out, 0, sizeof *out);
    size_t k = n < sizeof pp_v2_sig ? n : sizeof pp_v2_sig;
    if (memcmp(b, pp_v2_sig, k) == 0)
        return pp_v2(b, n, len, out);
    static const char v1[] = "PROXY ";
    k = n < 6 ? n : 6;
    if (memcmp(b, v1, k) != 0)
        return PROXYPROTO_BAD;
    for (size_t i = 1; i < n && i < PROXYPROTO_V1_MAX; i++) {
        if (b[i - 1] == '\r' && b[i] == '\n') {
            *len = i + 1;
            return pp_v1_line(b, i + 1, out);
        }
        if (b[i] != '\r' && (b[i] < 0x20 || b[i] > 0x7e))
            return PROXYPROTO_BAD;
    }
    return n >= PROXYPROTO_V1_MAX ? PROXYPROTO_BAD : PROXYPROTO_MORE;
}

size_t proxyproto_build_v2(const struct proxyproto_addr *a, uint8_t *out)
{
    if (a->family != AF_INET && a->family != AF_INET6)
        return 0;
    size_t alen = a->family == AF_INET ? 4 : 16;
    memcpy(out, pp_v2_sig, sizeof pp_v2_sig);
    out[12] = 0x21;                               /* version 2, PROXY */
    out[13] = a->family == AF_INET ? 0x11 : 0x21; /* TCP over IPv4 / IPv6 */
    out[14] = 0;
    out[15] = (uint8_t)(2 * alen + 4);
    memcpy(out + 16, a->src, alen);
    memcpy(out + 16 + alen, a->dst, alen);
    memcpy(out + 16 + 2 * alen, &a->src_port, 2);
    memcpy(out + 18 + 2 * alen, &a->dst_port, 2);
    return 16 + 2 * alen + 4;
}
