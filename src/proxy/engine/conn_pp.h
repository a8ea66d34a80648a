/*
 * conn_pp: a connection's PROXY-protocol step. Behind a [proxy-protocol-listener] the
 * balancer's header comes first (brief 6.1): conn_pp_take reads it from the handshake
 * bytes and checks the client address it carries against the access lists (the socket's
 * peer is the balancer, so server.c's check at accept is skipped). Toward the fronting
 * host, conn_pp_build writes the PROXY v2 header for [domain-fronting] proxy-protocol
 * (brief 6.2) from what the balancer said, else from the client socket.
 *
 * A connection's step state is struct conn_pp (c->hs->pp, handshake-time), written by
 * conn_pp.c only.
 * Thread-safety: the worker thread of the connection.
 */
#ifndef TGPROXY_CONN_PP_H
#define TGPROXY_CONN_PP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/wire/proxyproto.h"

struct conn_worker;
struct sockaddr;

struct conn_pp {
    struct proxyproto_addr addr; /* what the header said (family 0 = use the socket) */
    bool done;                   /* the listener's header was consumed (if configured) */
    bool peer_known;             /* peer holds the socket's peer address, from accept */
    uint8_t peer[16];            /* as conn_pp_client_ip gives it (IPv4 as ::ffff:a.b.c.d) */
};

enum conn_pp_step {
    CONN_PP_MORE,    /* the header is not complete yet */
    CONN_PP_DONE,    /* consumed: *used bytes of hs were the header */
    CONN_PP_BAD,     /* missing or malformed: a trusted balancer's bytes are not fronted */
    CONN_PP_REFUSED, /* the client address is refused by [defense.*list] (counted) */
};

/* Keep the socket's peer address that accept returned (a copy costs no system call later);
   NULL or another family: none, the socket is asked when one is needed. */
void conn_pp_accepted(struct conn_pp *pp, const struct sockaddr *peer);
/* The listener's header at hs[0..len) on worker w. */
enum conn_pp_step conn_pp_take(struct conn_pp *pp, struct conn_worker *w, const uint8_t *hs,
                               size_t len, size_t *used);
/* The client's addresses: the header's, else the peer and local address of socket cfd.
   False when neither is known. */
bool conn_pp_source(const struct conn_pp *pp, int cfd, struct proxyproto_addr *a);
/* The client's address as 16 bytes (IPv4 as ::ffff:a.b.c.d): the header's, else the peer
   kept at accept, else the socket's (conn_pp_source); false when unknown. For [limits] by
   address, the key-scan hints and the addresses seen per secret. */
bool conn_pp_client_ip(const struct conn_pp *pp, int cfd, uint8_t ip[16]);
/* PROXY v2 header for the fronting host into out[0..PROXYPROTO_BUILD_MAX): its length, or 0
   when no address is known. */
size_t conn_pp_build(const struct conn_pp *pp, int cfd, uint8_t *out);

#endif
