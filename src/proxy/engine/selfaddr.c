/*
 * selfaddr: the endpoints of this proxy's own listeners. See selfaddr.h.
 * Invariant: every entry holds a normalised address (never v4-mapped) and a non-zero
 * family; a wildcard listener contributes one entry per host address of its family plus
 * the unspecified address. The host's addresses (port 0) follow the listeners' room in the
 * same allocation.
 */
#include "proxy/engine/selfaddr.h"

#include "core/alloc.h"
#include "proxy/wire/value.h"

#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <string.h>

void selfaddr_normalize(struct sockaddr_storage *ss, socklen_t *len)
{
    if (ss->ss_family != AF_INET6)
        return;
    const struct sockaddr_in6 *a6 = (const void *)ss;
    if (!IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr))
        return;
    struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = a6->sin6_port};
    memcpy(&a4.sin_addr, a6->sin6_addr.s6_addr + 12, 4);
    memset(ss, 0, sizeof *ss);
    memcpy(ss, &a4, sizeof a4);
    if (len)
        *len = sizeof a4;
}

/* Family, address bytes and port of sa, normalised; false for other families. */
static bool split(const struct sockaddr *sa, int *family, uint8_t addr[16], uint16_t *port)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    if (sa->sa_family == AF_INET)
        memcpy(&ss, sa, sizeof(struct sockaddr_in));
    else if (sa->sa_family == AF_INET6)
        memcpy(&ss, sa, sizeof(struct sockaddr_in6));
    else
        return false;
    selfaddr_normalize(&ss, NULL);
    memset(addr, 0, 16);
    *family = ss.ss_family;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const void *)&ss;
        memcpy(addr, &a->sin_addr, 4);
        *port = a->sin_port;
    } else {
        const struct sockaddr_in6 *a = (const void *)&ss;
        memcpy(addr, &a->sin6_addr, 16);
        *port = a->sin6_port;
    }
    return true;
}

static bool is_unspecified(const uint8_t addr[16])
{
    static const uint8_t zero[16];
    return memcmp(addr, zero, 16) == 0;
}

static void add(struct selfaddr *s, size_t cap, int family, const uint8_t addr[16], uint16_t port)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->e[i].family == family && s->e[i].port == port && !memcmp(s->e[i].addr, addr, 16))
            return;
    if (s->n < cap) {
        struct selfaddr_entry *e = &s->e[s->n++];
        e->family = family;
        memcpy(e->addr, addr, 16);
        e->port = port;
    }
}

int selfaddr_build(struct selfaddr *s, const struct sockaddr_storage *listen, size_t n,
                   const struct ifaddrs *ifa)
{
    s->e = NULL;
    s->n = 0;
    s->host = NULL;
    s->nhost = 0;
    size_t nif = 0;
    for (const struct ifaddrs *i = ifa; i; i = i->ifa_next)
        nif++;
    size_t cap = n * (nif + 1);
    if (cap + nif == 0)
        return 0;
    s->e = tg__calloc(cap + nif, sizeof *s->e);
    if (!s->e)
        return -ENOMEM;
    for (size_t k = 0; k < n; k++) {
        int fam;
        uint8_t addr[16];
        uint16_t port;
        if (!split((const struct sockaddr *)&listen[k], &fam, addr, &port))
            continue;
        add(s, cap, fam, addr, port);
        if (!is_unspecified(addr))
            continue;
        /* wildcard: every address of the host in that family */
        for (const struct ifaddrs *i = ifa; i; i = i->ifa_next) {
            int ifam;
            uint8_t iaddr[16];
            uint16_t unused;
            if (i->ifa_addr && split(i->ifa_addr, &ifam, iaddr, &unused) && ifam == fam)
                add(s, cap, fam, iaddr, port);
        }
    }
    /* the host's addresses, any port, after the listeners' room (never v4-mapped) */
    struct selfaddr_entry *h = s->e + cap;
    for (const struct ifaddrs *i = ifa; i; i = i->ifa_next) {
        struct selfaddr_entry *e = &h[s->nhost];
        uint16_t unused;
        if (i->ifa_addr && split(i->ifa_addr, &e->family, e->addr, &unused))
            s->nhost++;
    }
    s->host = h;
    return 0;
}

int selfaddr_init(struct selfaddr *s, const struct sockaddr_storage *listen, size_t n)
{
    struct ifaddrs *ifa = NULL;
    if (getifaddrs(&ifa) < 0) {
        int err = -errno;
        s->e = NULL;
        s->n = 0;
        return err;
    }
    int rc = selfaddr_build(s, listen, n, ifa);
    freeifaddrs(ifa);
    return rc;
}

void selfaddr_cleanup(struct selfaddr *s)
{
    tg__free(s->e);
    s->e = NULL;
    s->n = 0;
    s->host = NULL;
    s->nhost = 0;
}

bool selfaddr_has(const struct selfaddr *s, const struct sockaddr *sa)
{
    int fam;
    uint8_t addr[16];
    uint16_t port;
    if (!s || !split(sa, &fam, addr, &port))
        return false;
    bool any = is_unspecified(addr); /* 0.0.0.0 / :: connect to the local host */
    for (size_t i = 0; i < s->n; i++) {
        const struct selfaddr_entry *e = &s->e[i];
        if (e->port == port && (any || (e->family == fam && !memcmp(e->addr, addr, 16))))
            return true;
    }
    return false;
}

bool selfaddr_local(const struct selfaddr *s, const struct sockaddr *sa)
{
    int fam;
    uint8_t addr[16];
    uint16_t port;
    if (!split(sa, &fam, addr, &port))
        return false;
    if (value_addr_loopback(sa) || is_unspecified(addr))
        return true;
    for (size_t i = 0; s && i < s->nhost; i++)
        if (s->host[i].family == fam && !memcmp(s->host[i].addr, addr, 16))
            return true;
    return false;
}
