/*
 * conn_pp: the PROXY-protocol step of a connection. See conn_pp.h.
 */
#include "proxy/engine/conn_pp.h"

#include "proxy/engine/conn.h"
#include "proxy/services/acl.h"

#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

/* The client's addresses for the PROXY v2 header toward the fronting host: what the
   balancer's header said, else the client socket's peer and local address. */
bool conn_pp_source(const struct conn_pp *pp, int cfd, struct proxyproto_addr *a)
{
    if (pp->addr.family) {
        *a = pp->addr;
        return true;
    }
    struct sockaddr_storage src = {0},
                            dst = {0}; /* zeroed: the analyzer cannot see the kernel fill them */
    socklen_t sl = sizeof src, dl = sizeof dst;
    if (getpeername(cfd, (struct sockaddr *)&src, &sl) < 0 ||
        getsockname(cfd, (struct sockaddr *)&dst, &dl) < 0 || src.ss_family != dst.ss_family)
        return false;
    memset(a, 0, sizeof *a);
    if (src.ss_family == AF_INET) {
        const struct sockaddr_in *s4 = (const void *)&src, *d4 = (const void *)&dst;
        memcpy(a->src, &s4->sin_addr, 4);
        memcpy(a->dst, &d4->sin_addr, 4);
        a->src_port = s4->sin_port;
        a->dst_port = d4->sin_port;
    } else if (src.ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const void *)&src, *d6 = (const void *)&dst;
        memcpy(a->src, &s6->sin6_addr, 16);
        memcpy(a->dst, &d6->sin6_addr, 16);
        a->src_port = s6->sin6_port;
        a->dst_port = d6->sin6_port;
    } else {
        return false;
    }
    a->family = (uint8_t)src.ss_family;
    return true;
}

void conn_pp_accepted(struct conn_pp *pp, const struct sockaddr *peer)
{
    pp->peer_known = false;
    if (peer && peer->sa_family == AF_INET) {
        memset(pp->peer, 0, 16);
        pp->peer[10] = pp->peer[11] = 0xff;
        memcpy(pp->peer + 12, &((const struct sockaddr_in *)(const void *)peer)->sin_addr, 4);
        pp->peer_known = true;
    } else if (peer && peer->sa_family == AF_INET6) {
        memcpy(pp->peer, &((const struct sockaddr_in6 *)(const void *)peer)->sin6_addr, 16);
        pp->peer_known = true;
    }
}

bool conn_pp_client_ip(const struct conn_pp *pp, int cfd, uint8_t ip[16])
{
    struct proxyproto_addr a = {0};
    if (!pp->addr.family && pp->peer_known) {
        memcpy(ip, pp->peer, 16);
        return true;
    }
    if (!conn_pp_source(pp, cfd, &a))
        return false;
    memset(ip, 0, 16);
    ip[10] = ip[11] = 0xff;
    memcpy(a.family == AF_INET ? ip + 12 : ip, a.src, a.family == AF_INET ? 4 : 16);
    return true;
}

size_t conn_pp_build(const struct conn_pp *pp, int cfd, uint8_t *out)
{
    struct proxyproto_addr a;
    return conn_pp_source(pp, cfd, &a) ? proxyproto_build_v2(&a, out) : 0;
}

/* With a PROXY-protocol listener the socket's peer is the balancer: the access lists check
   the client address its header carries, before any client byte is looked at. */
static bool refused(const struct conn_pp *pp, struct conn_worker *w)
{
    struct acl *acl = __atomic_load_n(&w->sh->acl, __ATOMIC_ACQUIRE); /* a reload may set it */
    struct sockaddr_storage ss = {0};
    if (!acl || !pp->addr.family)
        return false; /* no lists, or a LOCAL header (the balancer's own health check) */
    if (pp->addr.family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)(void *)&ss;
        a->sin_family = AF_INET;
        memcpy(&a->sin_addr, pp->addr.src, 4);
    } else {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)(void *)&ss;
        a->sin6_family = AF_INET6;
        memcpy(&a->sin6_addr, pp->addr.src, 16);
    }
    enum acl_verdict v = acl_check(acl, w->acl.reader, (struct sockaddr *)&ss);
    if (v == ACL_BLOCKED)
        stats_add(&w->stats, acl_blocked, 1);
    else if (v == ACL_NOT_ALLOWED)
        stats_add(&w->stats, acl_not_allowed, 1);
    return v != ACL_PASS;
}

enum conn_pp_step conn_pp_take(struct conn_pp *pp, struct conn_worker *w, const uint8_t *hs,
                               size_t len, size_t *used)
{
    *used = 0;
    int r = proxyproto_parse(hs, len, used, &pp->addr);
    if (r == PROXYPROTO_MORE)
        return CONN_PP_MORE;
    if (r == PROXYPROTO_BAD)
        return CONN_PP_BAD;
    if (refused(pp, w))
        return CONN_PP_REFUSED;
    pp->done = true;
    return CONN_PP_DONE;
}
