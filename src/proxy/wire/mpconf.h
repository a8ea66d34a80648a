/*
 * mpconf: the middle-proxy list as Telegram publishes it (getProxyConfig, getProxyConfigV6;
 * docs/proxy-protocol-notes.md, "Middle-proxy mode").
 *
 * Statements end with ';'; '#' starts a comment to the end of the line; blanks separate
 * words. Statements:
 *   proxy_for DC ADDR:PORT;   a middle proxy of DC (signed: -2 = DC 2's media cluster)
 *   proxy ADDR:PORT;          one of DC 0 (MTProxy's old form)
 *   default DC;               the DC a client with an unknown index goes to
 *   timeout MS; min_connections N; max_connections N;   MTProxy's tuning: checked, kept
 * ADDR is an IPv4 literal or an IPv6 literal in brackets; host names are refused (the file
 * Telegram serves has none, and loading never touches the network).
 *
 * Pure computation: no I/O, no allocation (the result is a fixed-size struct).
 * Thread-safety: reentrant. Fuzzed by fuzz/proxy_mpconf.
 */
#ifndef TGPROXY_MPCONF_H
#define TGPROXY_MPCONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MPCONF_MAX 256 /* middle proxies in one file (Telegram's lists about 20) */

struct mpconf_proxy {
    int16_t dc;
    uint8_t family; /* AF_INET or AF_INET6 */
    uint8_t ip[16]; /* network order; 4 bytes used for AF_INET */
    uint16_t port;
};

struct mpconf {
    struct mpconf_proxy proxies[MPCONF_MAX];
    size_t n;
    bool has_default;
    int16_t default_dc;
    uint32_t timeout_ms, min_connections, max_connections; /* 0 = not in the file */
};

/*
 * Parse text[0..n) into *out (zeroed first). 0, or -1 with a message naming the line and the
 * problem in err[0..errlen) (a statement other than the above, a DC outside -32768..32767, an
 * address that is not an IP literal, a port outside 1..65535, a missing ';', more than
 * MPCONF_MAX proxies, or a file without any proxy).
 */
int mpconf_parse(const char *text, size_t n, struct mpconf *out, char *err, size_t errlen);

/* The proxies of dc in out (their indexes into c->proxies, up to cap); how many. */
size_t mpconf_for(const struct mpconf *c, int16_t dc, size_t *out, size_t cap);

#endif
