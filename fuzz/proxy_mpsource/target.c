/*
 * Fuzz target: what services/mpsource.c takes from the network besides the lists'
 * grammar: a "what is my IP" answer (mpsource_parse_ip), a proxy secret's size check, and
 * the merge of an IPv4 and an IPv6 list by prefer-ip (mpdocs_merge). Input: a byte that
 * picks prefer-ip, then the IPv4 list, a NUL, the IPv6 list. An address that parses must be
 * one inet_ntop writes back; a merge must hold only proxies of its inputs, each DC's of one
 * family (only-*: that one), never more than MPCONF_MAX.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/services/mpsource.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool has(const struct mpconf *c, const struct mpconf_proxy *p)
{
    for (size_t i = 0; i < c->n; i++)
        if (memcmp(&c->proxies[i], p, sizeof *p) == 0)
            return true;
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256], text[64];
    int family = 0;
    uint8_t ip[16];
    if (mpsource_parse_ip(data, size, &family, ip, err, sizeof err) == 0) {
        if ((family != AF_INET && family != AF_INET6) || !inet_ntop(family, ip, text, sizeof text))
            abort();
        (void)mpsource_ip_private(family, ip);
    } else if (!err[0]) {
        abort();
    }
    if ((mpsource_check_secret(data, size, err, sizeof err) == 0) != (size >= 32 && size <= 256))
        abort();
    if (size < 1)
        return 0;
    static struct mpdocs d;
    static struct mpconf out;
    memset(&d, 0, sizeof d);
    const uint8_t *a = data + 1, *nul = memchr(a, 0, size - 1);
    size_t na = nul ? (size_t)(nul - a) : size - 1;
    d.has_v4 = mpconf_parse((const char *)a, na, &d.v4, err, sizeof err) == 0;
    if (nul)
        d.has_v6 = mpconf_parse((const char *)nul + 1, size - 1 - na - 1, &d.v6, err,
                                sizeof err) == 0;
    enum config_prefer_ip prefer = (enum config_prefer_ip)(data[0] % 4);
    mpdocs_merge(&d, prefer, &out);
    if (out.n > MPCONF_MAX)
        abort();
    for (size_t i = 0; i < out.n; i++) {
        if (!(d.has_v4 && has(&d.v4, &out.proxies[i])) && !(d.has_v6 && has(&d.v6, &out.proxies[i])))
            abort();
        if ((prefer == CONFIG_ONLY_IPV4 && out.proxies[i].family != AF_INET) ||
            (prefer == CONFIG_ONLY_IPV6 && out.proxies[i].family != AF_INET6))
            abort();
        for (size_t j = 0; j < out.n; j++) /* one family per DC */
            if (out.proxies[j].dc == out.proxies[i].dc &&
                out.proxies[j].family != out.proxies[i].family)
                abort();
    }
    return 0;
}
