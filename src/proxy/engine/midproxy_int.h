/*
 * midproxy_int: what the middle-proxy pool's two files share (midproxy.h says what the pool
 * does).
 *
 *   midproxy.c  the connections: connect, the session (mpsess), pings, backoff, the pick of
 *               a connection for a new client, init and cleanup. Its inputs are the proxy
 *               secret, the middle-proxy list and the pool size (struct midproxy_cfg).
 *   mpclient.c  the clients on those connections: their ids, their packets going up as
 *               RPC_PROXY_REQ, the answers, quick acks and closes coming down, the
 *               buffering policy.
 *
 * Each file writes only its own fields: midproxy.c everything in struct mpx_conn but
 * clients, nclients and paused, and the connection half of struct midproxy_worker;
 * mpclient.c the client table (slots, slot_hint), clients, nclients, paused, the client
 * counters and the pool's fields of struct midproxy_client.
 *
 * Thread-safety: worker thread only.
 */
#ifndef TGPROXY_MIDPROXY_INT_H
#define TGPROXY_MIDPROXY_INT_H

#include "proxy/engine/midproxy.h"
#include "proxy/engine/stats.h"
#include "proxy/wire/mpsess.h"

enum mpx_state { MPX_IDLE, MPX_CONNECTING, MPX_HANDSHAKE, MPX_READY };

/* The worker's counters, when the pool runs inside one (tests run it bare). */
#define COUNT(mw, field, n)                                                                        \
    do {                                                                                           \
        if ((mw)->stats)                                                                           \
            stats_add((mw)->stats, field, n);                                                      \
    } while (0)
#define UNCOUNT(mw, field, n)                                                                      \
    do {                                                                                           \
        if ((mw)->stats)                                                                           \
            stats_sub((mw)->stats, field, n);                                                      \
    } while (0)

/* A growable byte queue: unsent bytes are b[off..len). */
struct bq {
    uint8_t *b;
    size_t off, len, cap;
};

/* Room for n more bytes at b[len..). 0 or -ENOMEM. */
int mpx_bq_reserve(struct bq *q, size_t n);
void mpx_bq_free(struct bq *q);
static inline size_t mpx_bq_pending(const struct bq *q)
{
    return q->len - q->off;
}
/* Write what q holds to fd: 0 (all or EAGAIN), -1 on a socket error. */
int mpx_bq_flush(struct bq *q, int fd);

struct mpx_conn {
    struct midproxy_worker *mw;
    int16_t dc;
    size_t target; /* index into cfg.conf.proxies */
    enum mpx_state state;
    struct loop_io io;
    struct mpsess sess;
    struct bq out;
    uint64_t retry_at_ms, last_in_ms, last_out_ms;
    uint32_t backoff_ms;
    struct midproxy_client *clients; /* mpclient.c's: the clients on this connection */
    size_t nclients;                 /* mpclient.c's */
    bool paused; /* mpclient.c's: its clients are not read (out over MIDPROXY_OUT_HIGH) */
};

/* ---- midproxy.c, for mpclient.c ---- */

/* The READY connection of dc with the fewest clients, or NULL. */
struct mpx_conn *mpx_conn_pick(struct midproxy_worker *mw, int16_t dc);
/* Re-arm mc's interest (WRITE while it has bytes to send). */
void mpx_conn_interest(struct mpx_conn *mc);
/* Send what mc->out holds; 0, or -1: the socket failed (the caller calls mpx_conn_fail). */
int mpx_conn_flush(struct mpx_conn *mc);
/* Close mc and every client on it; retry later. why: an mpsess_why, 0 = the socket. */
void mpx_conn_fail(struct mpx_conn *mc, int why);
/* Room for a message of n bytes at the end of mc->out: where it goes (8 bytes in), or NULL. */
uint8_t *mpx_msg_begin(struct mpx_conn *mc, size_t n);
/* Frame and encrypt the n-byte message mpx_msg_begin placed. 0 or -1. */
int mpx_msg_end(struct mpx_conn *mc, size_t n);
/* A short message m[0..n) queued in one go. 0 or -1. */
int mpx_send_short(struct mpx_conn *mc, const uint8_t *m, size_t n);

/* ---- mpclient.c, for midproxy.c ---- */

/* A message for a client (RPC_PROXY_ANS, RPC_SIMPLE_ACK, RPC_CLOSE_EXT) on mc; p[0..n) is
   the whole message, which the client side may change in place. 0, or -1 to fail mc. */
int mpx_client_msg(struct mpx_conn *mc, const struct mprpc_msg *m, uint8_t *p, size_t n);
/* mc failed: close every client on it (the middle proxy is gone: nothing is sent). */
void mpx_clients_drop(struct mpx_conn *mc);
/* mc's output drained below the low mark: read its clients again. */
void mpx_clients_resume(struct mpx_conn *mc);
/* Pool teardown: close every client, free the table. */
void mpx_clients_cleanup(struct midproxy_worker *mw);

#endif
