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

#endif
