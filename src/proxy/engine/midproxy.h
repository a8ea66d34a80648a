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
 * A client is attached by its owner (engine/mprelay.c for a daemon's connection, a test
 * driving the pool directly): midproxy_client_attach() gives it a connection id and a
 * connection; the owner splits the client's transport framing and hands each packet to
 * midproxy_client_send() (one RPC_PROXY_REQ, built in place in the connection's output
 * queue); answers come back through the worker's `ops`: each RPC_PROXY_ANS as the packet,
 * in place in the session's buffer (the owner frames, encrypts and writes it to the client
 * itself, no copy when the client's socket takes it), quick acks as the token, and the end
 * of a client (RPC_CLOSE_EXT, its connection failed, the buffering policy) as `closed`.
 *
 * Buffering policy (one slow client never stalls the others): the middle-proxy socket is
 * always read, and an answer is always taken from it. The owner reports how many bytes of
 * answers it holds for its client, unsent (the `answer` callback's return,
 * midproxy_client_drained()). A client holding more than `client_buf_max` is closed; and
 * while the clients of the worker together hold more than `buf_total`, the one holding the
 * most (the slowest) is closed, until they are under it again. A closed client is
 * cancelled on its middle proxy (RPC_CLOSE_CONN) and counted (slow_closed). Toward the
 * middle proxy, a connection with more than MIDPROXY_OUT_HIGH bytes unsent marks itself
 * paused: its owners stop reading their clients until `resume` (below a quarter of it).
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

#define MIDPROXY_OUT_HIGH (1u << 20) /* bytes unsent to a middle proxy before its clients pause */
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
    size_t client_buf_max; /* answers held for one client (0 = 8 MiB) */
    size_t buf_total;      /* answers held for all the worker's clients (0 = 64 MiB) */
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
    uint64_t held;         /* bytes of answers the owners hold now */
    uint64_t closed_by_mp; /* RPC_CLOSE_EXT */
    uint64_t quickacks;
    uint64_t fallbacks; /* tagged clients sent direct: no connection of their DC up */
};

struct mpx_conn;
struct stats;
struct stats_dc;
struct midproxy_client;
struct midproxy_client_ops;

struct midproxy_worker {
    struct loop *loop;
    struct midproxy_cfg cfg;
    struct mpx_conn *conns; /* cfg.conf's DCs x per_dc */
    size_t nconns;
    struct midproxy_client **slots;        /* client by connection-id slot (mpclient.c) */
    size_t nslots, slot_hint;              /* slot_hint: below it every slot is taken */
    const struct midproxy_client_ops *ops; /* the owners' callbacks (set before attaching) */
    uint32_t id_salt;
    struct loop_tq tq;
    struct loop_timer tick;
    struct midproxy_stats st;
    uint32_t start_time;
    struct stats *stats;  /* the worker's counters (stats.h: mp_*), or NULL */
    struct stats_dc *dcs; /* the worker's per-DC counters (mp_up), or NULL */
    bool retired;         /* midproxy_retire: no new clients, no reconnects */
    uint64_t held_shown;  /* mpclient.c's: st.held as the mp_held gauge last showed it */
    bool warned_private;  /* the private-address warning was logged */
};

/* Set up mw on loop with cfg (copied) and start connecting. 0 or -errno. */
int midproxy_init(struct midproxy_worker *mw, struct loop *loop, const struct midproxy_cfg *cfg);
/* End every client (`closed`) and close every connection. NULL-safe. */
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

/* Why the pool ended a client (midproxy_client_ops.closed). */
enum midproxy_end {
    MIDPROXY_END_CLOSED = 1, /* RPC_CLOSE_EXT: the middle proxy closed it */
    MIDPROXY_END_CONN,       /* its middle-proxy connection failed */
    MIDPROXY_END_SLOW,       /* the buffering policy */
    MIDPROXY_END_GONE,       /* the owner could not write to its client (answer said -1) */
};

/* A client on the pool. The owner allocates it (zeroed) and keeps it until it is detached
   (midproxy_client_detach, or `closed`); the pool's fields are the pool's. */
struct midproxy_client {
    struct mpx_conn *mc;                 /* NULL: not attached */
    struct midproxy_client *prev, *next; /* mc's clients */
    uint64_t id;
    uint32_t tag;          /* the client's transport (OBFS2_TAG_*) */
    uint32_t held;         /* bytes of answers its owner holds unsent */
    const uint8_t *ad_tag; /* MPRPC_AD_TAG_LEN bytes, the owner's (outlives the client), or NULL */
    struct mprpc_addr client, proxy;
};

/* What the pool hands the owners of its clients. Each may close other clients (never the
   pool's connections) but none may detach cl from inside. */
struct midproxy_client_ops {
    /*
     * An answer for cl: pkt[0..n) (n a multiple of 4) in the session's buffer, which the
     * owner may change in place until it returns. Returns the bytes of answers it holds for
     * cl now (unsent to the client), or -1: the client's socket failed (the pool then
     * cancels cl on the middle proxy and ends it as MIDPROXY_END_GONE).
     */
    long (*answer)(struct midproxy_client *cl, uint8_t *pkt, size_t n);
    /* A quick ack: the token to hand the client (as RPC_SIMPLE_ACK carries it). Returns as
       answer does. */
    long (*ack)(struct midproxy_client *cl, uint32_t confirm);
    /* The pool ended cl (detached already: nothing more is sent for it); the owner frees it. */
    void (*closed)(struct midproxy_client *cl, enum midproxy_end why);
    /* cl's connection drained: read the client again. */
    void (*resume)(struct midproxy_client *cl);
};

/*
 * Attach cl (zeroed; the owner's fields set: tag, ad_tag, client, proxy) to a READY
 * connection of dc. 0, or -EAGAIN when no connection of dc is ready (the caller may go
 * direct), -ENOMEM.
 */
int midproxy_client_attach(struct midproxy_worker *mw, struct midproxy_client *cl, int16_t dc);

/* The client's packet pkt[0..n) (a multiple of 4, at least 4) as one RPC_PROXY_REQ, queued
   on cl's connection; quickack: the client asked for one. 0, or -1 (no memory: close cl). */
int midproxy_client_send(struct midproxy_worker *mw, struct midproxy_client *cl, const uint8_t *pkt,
                         size_t n, bool quickack);
/* Send what the packets queued: call once after a batch. A socket error is left for the
   connection's own event (which ends its clients then, never from inside this call). */
void midproxy_client_flush(struct midproxy_worker *mw, struct midproxy_client *cl);
/* Is cl's connection over MIDPROXY_OUT_HIGH (stop reading the client until `resume`)? */
bool midproxy_client_paused(const struct midproxy_client *cl);
/* The owner now holds `held` bytes of answers for cl (it wrote some to the client). */
void midproxy_client_drained(struct midproxy_worker *mw, struct midproxy_client *cl, size_t held);
/* The client went away: cancel it on the middle proxy (RPC_CLOSE_CONN). NULL-safe; a client
   not attached (ended by the pool) is left alone. */
void midproxy_client_detach(struct midproxy_worker *mw, struct midproxy_client *cl);

/* An address as RPC_PROXY_REQ carries it, from a sockaddr (AF_INET or AF_INET6). */
void midproxy_addr(struct mprpc_addr *a, const struct sockaddr *sa);

#endif
