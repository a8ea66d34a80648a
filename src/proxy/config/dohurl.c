/*
 * dohurl: [network] dns and doh-ip values. See dohurl.h.
 */
#include "proxy/config/dohurl.h"

#include "core/str.h"
#include "proxy/wire/value.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#define DEFAULT_PATH "/dns-query" /* RFC 8484 examples; what public DoH servers serve */
#define FORMS        "https://HOST[:PORT][/PATH], tls://HOST[:PORT], udp://IP[:PORT] or an IP"

static int why_set(char *why, size_t whylen, const char *msg)
{
    if (why && whylen)
        snprintf(why, whylen, "%s", msg);
    return -EINVAL;
}

int doh_ip_parse(const char *s, size_t n, char *ip, char *why, size_t whylen)
{
    struct sockaddr_storage ss;
    socklen_t len;
    ip[0] = '\0';
    if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
        s++;
        n -= 2;
    }
    if (!value_parse_ip(s, n, &ss, &len))
        return why_set(why, whylen, "not an IP address, expected e.g. 1.1.1.1 or 2606:4700::1111");
    const void *a =
        ss.ss_family == AF_INET
            ? (const void *)&((const struct sockaddr_in *)(const void *)&ss)->sin_addr
            : (const void *)&((const struct sockaddr_in6 *)(const void *)&ss)->sin6_addr;
    if (!inet_ntop(ss.ss_family, a, ip, CONFIG_IP_MAX))
        return why_set(why, whylen, "not an IP address");
    return 0;
}

/* The scheme of s[0..n) ("" when it has none), lower case, into out[0..16). */
static size_t url_scheme(const char *s, size_t n, char out[16])
{
    out[0] = '\0';
    for (size_t i = 0; i + 2 < n && i < 15; i++) {
        if (s[i] == ':' && s[i + 1] == '/' && s[i + 2] == '/') {
            for (size_t k = 0; k < i; k++)
                out[k] = (char)(s[k] >= 'A' && s[k] <= 'Z' ? s[k] + 32 : s[k]);
            out[i] = '\0';
            return i + 3;
        }
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')))
            break;
    }
    return 0;
}

/* A path of printable ASCII without '?', '#', braces (URI templates) or spaces. */
static bool path_ok(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] <= ' ' || p[i] > '~' || strchr("?#{}\\\"", p[i]))
            return false;
    return true;
}

/* The authority a[0..n) ("host", "host:port", "[v6]", "[v6]:port") into host and port
   (defport when none is given). */
static int url_authority(const char *a, size_t n, uint16_t defport, char *host, uint16_t *port,
                         char *why, size_t whylen)
{
    char hp_text[CONFIG_HOST_MAX + 16];
    bool has_port = n > 0 && a[n - 1] != ']' && memchr(a, ':', n) &&
                    (a[0] == '[' || memchr(a, ':', n) == memrchr(a, ':', n));
    if (n == 0 || n + 7 >= sizeof hp_text)
        return why_set(why, whylen, "the URL has no host, or one too long, expected " FORMS);
    if (a[0] != '[' && memchr(a, ':', n) != memrchr(a, ':', n))
        return why_set(why, whylen,
                       "an IPv6 address must be in brackets, expected e.g. "
                       "https://[2606:4700::1111]/dns-query");
    snprintf(hp_text, sizeof hp_text, "%.*s", (int)n, a);
    if (!has_port)
        snprintf(hp_text + n, sizeof hp_text - n, ":%u", (unsigned)defport);
    struct value_hostport hp;
    char verr[160];
    if (value_hostport_parse(hp_text, strlen(hp_text), &hp, verr, sizeof verr) != 0) {
        if (why && whylen)
            snprintf(why, whylen, "bad host or port in the URL: %s", verr);
        return -EINVAL;
    }
    if (hp.port == 0)
        return why_set(why, whylen, "port 0 in the URL, expected 1..65535");
    tg__strlcpy(host, hp.host, CONFIG_HOST_MAX);
    *port = hp.port;
    return 0;
}

/* The canonical URL: scheme://host[:port]path, the port only when not the scheme's own. */
static int url_canon(char *url, const char *scheme, const char *host, uint16_t port,
                     uint16_t defport, const char *path, size_t plen, char *why, size_t whylen)
{
    bool v6 = strchr(host, ':') != NULL;
    char portbuf[8] = "";
    if (port != defport)
        snprintf(portbuf, sizeof portbuf, ":%u", (unsigned)port);
    int w = snprintf(url, CONFIG_URL_MAX, "%s://%s%s%s%s%.*s", scheme, v6 ? "[" : "", host,
                     v6 ? "]" : "", portbuf, (int)plen, path);
    if (w >= 0 && w < CONFIG_URL_MAX && plen == 0 && strcmp(scheme, "https") == 0)
        w = snprintf(url + w, CONFIG_URL_MAX - (size_t)w, "%s", DEFAULT_PATH) + w;
    if (w < 0 || w >= CONFIG_URL_MAX)
        return why_set(why, whylen, "the URL is too long");
    return 0;
}

static int url_parse(const char *s, size_t n, char *url, char *host, uint16_t *port, char *why,
                     size_t whylen)
{
    char scheme[16];
    size_t off = url_scheme(s, n, scheme);
    if (off == 0) { /* mtg: a bare IP is plain DNS over UDP */
        char ip[CONFIG_IP_MAX];
        if (doh_ip_parse(s, n, ip, NULL, 0) != 0)
            return why_set(why, whylen, "neither a URL nor an IP address, expected " FORMS);
        tg__strlcpy(host, ip, CONFIG_HOST_MAX);
        *port = 53;
        return url_canon(url, "udp", host, 53, 53, "", 0, why, whylen);
    }
    uint16_t defport = strcmp(scheme, "https") == 0 ? 443
                       : strcmp(scheme, "tls") == 0 ? 853
                       : strcmp(scheme, "udp") == 0 ? 53
                                                    : 0;
    if (!defport)
        return why_set(why, whylen, "unsupported scheme, expected " FORMS);
    const char *a = s + off, *end = s + n;
    size_t alen = 0;
    while (a + alen < end && !strchr("/?#", a[alen]))
        alen++;
    if (memchr(a, '@', alen))
        return why_set(
            why, whylen,
            "user info in the URL is not supported (not repeated here), expected " FORMS);
    if (url_authority(a, alen, defport, host, port, why, whylen) != 0)
        return -EINVAL;
    const char *path = a + alen;
    size_t plen = (size_t)(end - path);
    if (plen && path[0] != '/')
        return why_set(why, whylen, "a query or fragment is not supported, expected " FORMS);
    if (plen && defport != 443)
        return why_set(why, whylen,
                       "a path is only for https://, expected tls://HOST[:PORT] "
                       "or udp://IP[:PORT]");
    if (!path_ok(path, plen))
        return why_set(why, whylen,
                       "the path has a space, control character, '?', '#' or braces, expected "
                       "a plain path such as /dns-query");
    struct sockaddr_storage lit;
    socklen_t litlen;
    if (defport == 53 && !value_parse_ip(host, strlen(host), &lit, &litlen))
        return why_set(why, whylen,
                       "plain DNS needs the server's IP address, expected udp://IP[:PORT]");
    return url_canon(url, scheme, host, *port, defport, path, plen, why, whylen);
}

int doh_url_parse(const char *s, size_t n, char *url, char *host, uint16_t *port, char *why,
                  size_t whylen)
{
    url[0] = host[0] = '\0';
    *port = 0;
    if (url_parse(s, n, url, host, port, why, whylen) == 0)
        return 0;
    url[0] = host[0] = '\0'; /* nothing half-filled */
    *port = 0;
    return -EINVAL;
}

enum doh_kind doh_url_kind(const char *url)
{
    return strncmp(url, "https:", 6) == 0 ? DOH_KIND_HTTPS
           : strncmp(url, "tls:", 4) == 0 ? DOH_KIND_TLS
                                          : DOH_KIND_UDP;
}
