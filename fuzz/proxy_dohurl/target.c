/*
 * fuzz target: the [network] dns URL (https://, tls://, udp://, a bare IP) and doh-ip
 * parsers (doh_url_parse, doh_ip_parse in src/proxy/config/dohurl.c), which read the config file.
 * Byte 0 picks the parser, the rest is the value. Checks the round trip: an accepted URL's
 * canonical form parses again to the same URL, host and port; a refused one leaves the
 * outputs empty with a reason; a canonical doh-ip parses to itself.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/config/config.h"
#include "proxy/config/dohurl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_url(const char *s, size_t n)
{
    char url[CONFIG_URL_MAX], host[CONFIG_HOST_MAX], why[256] = "";
    uint16_t port = 1;
    if (doh_url_parse(s, n, url, host, &port, why, sizeof why) != 0) {
        if (url[0] || host[0] || port || !why[0])
            abort();
        return;
    }
    bool scheme_ok = strncmp(url, "https://", 8) == 0 || strncmp(url, "tls://", 6) == 0 ||
                     strncmp(url, "udp://", 6) == 0;
    if (!scheme_ok || !host[0] || port == 0 || strlen(url) >= sizeof url)
        abort();
    char url2[CONFIG_URL_MAX], host2[CONFIG_HOST_MAX];
    uint16_t port2 = 0;
    if (doh_url_parse(url, strlen(url), url2, host2, &port2, why, sizeof why) != 0 ||
        strcmp(url, url2) != 0 || strcmp(host, host2) != 0 || port != port2)
        abort();
}

static void check_ip(const char *s, size_t n)
{
    char ip[CONFIG_IP_MAX], ip2[CONFIG_IP_MAX], why[128] = "";
    if (doh_ip_parse(s, n, ip, why, sizeof why) != 0) {
        if (ip[0] || !why[0])
            abort();
        return;
    }
    if (doh_ip_parse(ip, strlen(ip), ip2, why, sizeof why) != 0 || strcmp(ip, ip2) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 1024)
        return 0;
    char *s = malloc(size); /* not NUL-terminated: the parsers take a length */
    if (!s)
        return 0;
    memcpy(s, data + 1, size - 1);
    if (data[0] & 1)
        check_ip(s, size - 1);
    else
        check_url(s, size - 1);
    free(s);
    return 0;
}
