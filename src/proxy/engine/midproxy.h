/*
 * midproxy: a worker's pool of connections to Telegram's middle proxies (docs/tgproxy.md,
 * "Middle-proxy mode"; the protocol is docs/proxy-protocol-notes.md).
 *
 * Per worker, per DC of the middle-proxy list, `per_dc` long-lived connections are kept up:
 * connect, the session (wire/mpsess.c: nonce, keys, handshake), keepalive pings when quiet,
 * and on any failure every client on that connection is closed and the connection retried
 * with a doubling backoff (1 s .. 32 s). Clients are multiplexed over them as RPC_PROXY_REQ
 * with their own connection id, addresses and the ad tag.
 *
 * A client is attached as a *bridge*: midproxy_attach() returns one end of a socketpair that
 * the caller relays to exactly as it would to a DC socket (the obfuscated2 DC header first,
 * then the client's bytes, DC-leg encrypted). The pool reads the other end as a DC would
 * (header, decryption), splits the client's transport framing into packets (wire/mtframe)
 * and sends each up; answers come back framed in the client's transport and encrypted the
 * way the relay expects from a DC. So the relay, FakeTLS and backpressure toward the client
 * stay the direct path's.
 *
 * Buffering policy (one slow client never stalls the others): the middle-proxy socket is
 * always read; answers for a client wait in that client's bridge buffer, at most
 * `client_buf_max` bytes beyond what its socketpair holds; a client past that is closed
 * (RPC_CLOSE_CONN to the middle proxy) and counted. Toward the middle proxy, a bridge is not
 * read while its connection has more than MIDPROXY_OUT_HIGH bytes unsent.
 *
 * Thread-safety: worker thread only.
 */
#ifndef TGPROXY_MIDPROXY_H
#define TGPROXY_MIDPROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "proxy/engine/loop.h"
#include "proxy/wire/mpconf.h"
#include "proxy/wire/mpcrypto.h"
#include "proxy/wire/mprpc.h"

#define MIDPROXY_OUT_HIGH (1u << 20) /* bytes unsent to a middle proxy before bridges pause */
#define MIDPROXY_TICK_MS  1000

struct midproxy_cfg {
    uint8_t secret[MPCRYPTO_SECRET_MAX]; /* the proxy secret */
    size_t secret_len;
    struct mpconf conf; /* the middle-proxy list */
    unsigned per_dc;    /* connections per DC (0 = 2) */
    bool have_public4;  /* the public IPv4 the key derivation needs behind NAT */
    uint8_t public4[4];
    bool have_public6; /* the same for IPv6 (without: the socket's own address) */
    uint8_t public6[16];
    size_t client_buf_max; /* 0 = 8 MiB */
    uint32_t ping_ms;      /* ping a connection quiet this long (0 = 5000) */
    uint32_t dead_ms;      /* give a connection up after this long without a byte (0 = 60000) */
};

struct midproxy_stats {
    uint64_t up;              /* connections ready now */
    uint64_t connects, ready; /* attempts, handshakes completed */
    uint64_t hs_fail[10];     /* by enum mpsess_why; [0] = connect failures */
    uint64_t frames_out, frames_in;
    uint64_t clients;      /* attached now */
    uint64_t attached;     /* attached in all */
    uint64_t slow_closed;  /* clients closed by the buffering policy */
    uint64_t closed_by_mp; /* RPC_CLOSE_EXT */
    uint64_t quickacks;
    uint64_t fallbacks; /* tagged clients sent direct: no connection of their DC up */
};

struct mpx_conn;
struct stats;
struct stats_dc;
struct mpx_bridge;

struct midproxy_worker {
    struct loop *loop;
    struct midproxy_cfg cfg;
    struct mpx_conn *conns; /* cfg.conf's DCs x per_dc */
    size_t nconns;
    struct mpx_bridge **slots; /* bridge by connection-id slot */
    size_t nslots;
    uint32_t id_salt;
    struct loop_tq tq;
    struct loop_timer tick;
    struct midproxy_stats st;
    uint32_t start_time;
    struct stats *stats;  /* the worker's counters (stats.h: mp_*), or NULL */
    struct stats_dc *dcs; /* the worker's per-DC counters (mp_up), or NULL */
    bool retired;         /* midproxy_retire: no new clients, no reconnects */
    bool warned_private;  /* the private-address warning was logged */
};

/* Set up mw on loop with cfg (copied) and start connecting. 0 or -errno. */
int midproxy_init(struct midproxy_worker *mw, struct loop *loop, const struct midproxy_cfg *cfg);
/* Close every bridge and connection. NULL-safe. */
void midproxy_cleanup(struct midproxy_worker *mw);

/*
 * Pool generations (engine/worker.c): when the documents or [middle-proxy] settings change,
 * the worker builds a new pool for new clients and retires the old one, whose clients stay
 * on it until they end. A retired pool reconnects nothing and closes each connection that
 * has no client left; midproxy_drained() says when it can be cleaned up. A client belongs to
 * the pool it was attached to, which need not be the worker's current one.
 */
void midproxy_retire(struct midproxy_worker *mw);
bool midproxy_drained(const struct midproxy_worker *mw);

/* Clients on connection i (0..nconns): how the pool spread them (tests, metrics). */
size_t midproxy_conn_clients(const struct midproxy_worker *mw, size_t i);

/* Is some connection of dc ready? */
bool midproxy_ready(const struct midproxy_worker *mw, int16_t dc);

/*
 * Attach a client: its DC, ad tag (NULL = none), its address and the proxy address it
 * reached (sockaddr of AF_INET or AF_INET6). Returns the fd to relay to (the caller owns
 * it: closing it detaches the client), or -EAGAIN when no connection of dc is ready (the
 * caller may go direct), -ENOMEM, -EMFILE.
 */
int midproxy_attach(struct midproxy_worker *mw, int16_t dc, const uint8_t *ad_tag,
                    const struct sockaddr *client, const struct sockaddr *proxy);

#endif
