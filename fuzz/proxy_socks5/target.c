/*
 * Fuzz target: the SOCKS5 client's reply parser (socks5_client_feed) and the socks5:// URL
 * parser. Byte 0 picks the case: bit 0 = with credentials, bit 1 = IPv6 target, bit 2 = URL.
 * The replies are fed whole and again one byte at a time: both must end the same way,
 * consume the same bytes, and never consume more than given.
 */
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/wire/socks5.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Run the negotiation over data; *total = bytes consumed. Returns the final status. */
static int run(const struct socks5_upstream *up, const struct socks5_target *t, const uint8_t *data,
               size_t size, size_t step, size_t *total)
{
    struct socks5_client c;
    int r = socks5_client_init(&c, up, t);
    *total = 0;
    while (r >= 0 && r != SOCKS5_CONNECTED && *total < size) {
        size_t n = size - *total < step ? size - *total : step, used = 0;
        r = socks5_client_feed(&c, data + *total, n, &used);
        if (used > n || (r == SOCKS5_MORE && used != n))
            abort();
        *total += used;
        size_t plen = 0;
        socks5_client_pending(&c, &plen);
        if (plen > SOCKS5_REQ_MAX || (r == SOCKS5_SEND) != (plen > 0))
            abort();
    }
    if (socks5_strerror(r, &c) == NULL)
        abort();
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    uint8_t mode = data[0];
    data++, size--;
    if (mode & 4) {
        struct socks5_upstream up;
        char err[256];
        if (socks5_url_parse((const char *)data, size, &up, err, sizeof err) == 0 &&
            (up.addr.port == 0 || (up.auth && up.user_len == 0)))
            abort();
        return 0;
    }
    struct socks5_upstream up;
    memset(&up, 0, sizeof up);
    if (mode & 1) {
        up.auth = true;
        memcpy(up.user, "u", 2), up.user_len = 1;
        memcpy(up.pass, "p", 2), up.pass_len = 1;
    }
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons(443)};
    struct socks5_target t = {.host = "example.org", .port = 443};
    if (mode & 2)
        t.sa = (const struct sockaddr *)&a6, t.host = NULL;
    size_t whole = 0, bytewise = 0;
    int r1 = run(&up, &t, data, size, size, &whole);
    int r2 = run(&up, &t, data, size, 1, &bytewise);
    if (r1 != r2 || whole != bytewise)
        abort();
    return 0;
}
