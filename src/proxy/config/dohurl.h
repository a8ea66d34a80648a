/*
 * dohurl: the values of [network] dns and doh-ip (mtg's keys), checked and put in canonical
 * form for config.c and for the resolver (services/doh.c), which reaches the server by the
 * URL's scheme. Pure: no I/O, no allocation. Fuzzed by fuzz/proxy_dohurl.
 */
#ifndef TGPROXY_DOHURL_H
#define TGPROXY_DOHURL_H

#include <stddef.h>
#include <stdint.h>

#include "proxy/config/config.h"

/* How the server is reached, from the canonical URL's scheme. */
enum doh_kind { DOH_KIND_HTTPS, DOH_KIND_TLS, DOH_KIND_UDP };
enum doh_kind doh_url_kind(const char *url);

/*
 * [network] dns, as mtg accepts it: "https://HOST[:PORT][/PATH]" (an empty path means
 * /dns-query), "tls://HOST[:PORT]" (853), "udp://IP[:PORT]" (53) or a bare IP (plain DNS)
 * into url (canonical form, CONFIG_URL_MAX bytes), host (CONFIG_HOST_MAX bytes, no
 * brackets) and *port. User info, queries, fragments, a path outside https:// and a name
 * for plain DNS are refused. Pure: 0, or -EINVAL with why filled (why never repeats user
 * info).
 */
int doh_url_parse(const char *s, size_t n, char *url, char *host, uint16_t *port, char *why,
                  size_t whylen);

/* doh-ip: an IPv4 or IPv6 literal (brackets allowed) into its canonical text (CONFIG_IP_MAX
   bytes). 0 or -EINVAL with why filled. */
int doh_ip_parse(const char *s, size_t n, char *ip, char *why, size_t whylen);

#endif
