/*
 * Fuzz target: the middle-proxy list parser (mpconf_parse). Whatever parses must hold only
 * what the format allows (a family, a port, at most MPCONF_MAX proxies, at least one), and a
 * failure must say why, with its line.
 */
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/wire/mpconf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct mpconf c;
    char err[256];
    if (mpconf_parse((const char *)data, size, &c, err, sizeof err) == 0) {
        if (c.n == 0 || c.n > MPCONF_MAX)
            abort();
        for (size_t i = 0; i < c.n; i++)
            if ((c.proxies[i].family != AF_INET && c.proxies[i].family != AF_INET6) ||
                c.proxies[i].port == 0)
                abort();
        size_t idx[MPCONF_MAX];
        if (mpconf_for(&c, c.proxies[0].dc, idx, MPCONF_MAX) == 0)
            abort();
    } else if (strncmp(err, "line ", 5) != 0) {
        abort();
    }
    return 0;
}
