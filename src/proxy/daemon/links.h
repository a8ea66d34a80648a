/*
 * links: the tg://proxy and https://t.me/proxy links for a secret, and a terminal QR code.
 *
 * Links follow the brief (section 1.3): parameters server, port, secret in that order;
 * server percent-encoded (an IPv6 literal becomes "2001%3Adb8%3A%3A1", no brackets, as mtg
 * does); the secret in hex by default or base64url without padding on request.
 *
 * The QR code comes from libqrencode (error correction level M) and is drawn with Unicode
 * half blocks, two modules per character cell, light modules as ink: on the usual dark
 * terminal background a phone sees dark-on-light. A quiet zone of LINKS_QR_QUIET modules
 * surrounds it.
 *
 * Output of these functions contains the secret on purpose (it is what the operator hands
 * to users): callers print it to stdout only, never to logs.
 * Thread-safety: reentrant; libqrencode is built thread-safe on Debian.
 */
#ifndef TGPROXY_LINKS_H
#define TGPROXY_LINKS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/buf.h"
#include "proxy/wire/secret.h"

#define LINKS_QR_QUIET 2 /* modules of blank border around the symbol */

enum links_kind { LINKS_TG = 0, LINKS_TME = 1 };

/*
 * Append the link for s served at host:port to b (no newline).
 * host  a DNS name, IPv4 or IPv6 literal (without brackets), borrowed.
 * Returns 0, -EINVAL (empty host, port 0, secret not formattable) or -ENOMEM.
 */
int links_format(tg__buf *b, enum links_kind kind, const char *host, uint16_t port,
                 const struct secret *s, bool base64);

/*
 * Append a QR code of text to b: one line per two module rows, each ending in '\n'.
 * Returns 0, -ERANGE (text too long for a QR code), -EINVAL or -ENOMEM.
 */
int links_qr(tg__buf *b, const char *text);

/* Where clients reach the proxy, for links_access_json: "ipv4" / "ipv6" hold IP literals
   (mtg's keys), "host" a DNS name (tgproxy's addition). host NULL = none of that kind. */
enum links_where { LINKS_IPV4, LINKS_IPV6, LINKS_HOST, LINKS_WHERE_COUNT };
struct links_endpoint {
    const char *host;
    uint16_t port;
};

/*
 * Append, for scripts, the JSON document mtg's `access` prints (two-space indent, then a
 * newline): for each endpoint with a host, {"ip", "port", "tg_url", "tg_qrcode", "tme_url",
 * "tme_qrcode"} under "ipv4", "ipv6" ("host" for a name: its "ip" is the name); "secret":
 * {"hex", "base64"} of the first secret by label (links use it too); with more than one
 * secret, "secrets": {label: {"hex", "base64"}} for all, labels sorted. *_qrcode are mtg's
 * api.qrserver.com image URLs of the link (left out when qr is false). Links carry the
 * secret in hex, or base64url when base64. labels[i] / secrets[i] for i < n (n >= 1).
 * Returns 0, -EINVAL (a secret cannot be formatted, n 0) or -ENOMEM.
 */
int links_access_json(tg__buf *b, const struct links_endpoint ep[LINKS_WHERE_COUNT],
                      const char *const *labels, const struct secret *const *secrets, size_t n,
                      bool base64, bool qr);

#endif
