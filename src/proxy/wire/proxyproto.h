/*
 * proxyproto: the PROXY protocol (HAProxy's, versions 1 and 2; brief 6.1 and 6.2).
 *
 * proxyproto_parse() reads the header a trusted balancer puts before a client's bytes: v1
 * text (at most 107 bytes, CRLF included) or v2 binary (at most 1024 bytes accepted). It is
 * fed the bytes read so far and says "need more", "bad" or "complete, this long", so the
 * caller can call it again after each read. proxyproto_build_v2() writes the v2 header
 * tgproxy sends in front of the bytes it replays to a fronting host.
 *
 * Pure computation over caller buffers: no I/O, no allocation, reads only b[0..n).
 * Thread-safety: reentrant. Fuzzed by fuzz/proxy_proxyproto.
 */
#ifndef TGPROXY_PROXYPROTO_H
#define TGPROXY_PROXYPROTO_H

#include <stddef.h>
#include <stdint.h>

#define PROXYPROTO_V1_MAX    107  /* v1 line, CRLF included */
#define PROXYPROTO_V2_MAX    1024 /* v2: header + addresses + TLVs we accept */
#define PROXYPROTO_BUILD_MAX 52   /* longest header proxyproto_build_v2 writes (TCP6) */

enum { PROXYPROTO_MORE = 0, PROXYPROTO_OK = 1, PROXYPROTO_BAD = -1 };

/*
 * The client addresses a PROXY header names. family 0 = none: v1 "UNKNOWN", v2 LOCAL or an
 * unspecified address family; the socket's own addresses apply then. Addresses and ports in
 * network byte order (4 bytes used for AF_INET).
 */
struct proxyproto_addr {
    uint8_t family; /* 0, AF_INET or AF_INET6 */
    uint8_t src[16], dst[16];
    uint16_t src_port, dst_port;
};

/*
 * The header at the start of b[0..n). PROXYPROTO_OK with its length in *len and the
 * addresses in *out (out may be NULL; *out is zeroed first whatever the result),
 * PROXYPROTO_MORE for a valid prefix of a header, PROXYPROTO_BAD otherwise: not a PROXY
 * header, a v1 line longer than PROXYPROTO_V1_MAX or with a control byte, a v1 TCP4/TCP6
 * line whose addresses or ports do not parse or do not match the family, a v2 header with
 * an unknown version, command or family, a length over PROXYPROTO_V2_MAX, or too short
 * for its addresses. A v1 UNKNOWN line is OK whatever follows the word (family 0).
 */
int proxyproto_parse(const uint8_t *b, size_t n, size_t *len, struct proxyproto_addr *out);

/*
 * A v2 PROXY header (command PROXY, TCP over a->family) naming a's addresses, written to
 * out[0..PROXYPROTO_BUILD_MAX). Returns its length (28 for IPv4, 52 for IPv6), or 0 when
 * a->family is neither AF_INET nor AF_INET6 (nothing written).
 */
size_t proxyproto_build_v2(const struct proxyproto_addr *a, uint8_t *out);

#endif
