/*
 * mpclient: the clients on a worker's middle-proxy connections (midproxy.h says what a
 * client's owner does, midproxy_int.h which fields are whose).
 *
 * A client's id: its slot in mw->slots in the low 32 bits, random high 32 bits (an answer
 * for a slot reused since finds no owner and is answered with RPC_CLOSE_CONN, as MTProxy
 * does). Each connection lists its clients (prev/next), so a failing connection ends its
 * own and a drained one resumes its own without a walk over the table.
 */
#include "proxy/engine/midproxy_int.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "core/alloc.h"
#include "proxy/wire/crypto.h"

static struct midproxy_client *client_of(struct midproxy_worker *mw, uint64_t id)
{
    size_t slot = (size_t)(uint32_t)id;
    if (slot >= mw->nslots || !mw->slots[slot] || mw->slots[slot]->id != id)
        return NULL;
    return mw->slots[slot];
}

/* cl's owner holds `held` bytes of answers now (the pool's sum; the gauge follows at
   publish_held, once the policy has run, so it never shows a sum over the budget). */
static void set_held(struct midproxy_worker *mw, struct midproxy_client *cl, size_t held)
{
    mw->st.held = mw->st.held - cl->held + held;
    cl->held = (uint32_t)held;
}

static void publish_held(struct midproxy_worker *mw)
{
    if (mw->st.held >= mw->held_shown)
        COUNT(mw, mp_held, mw->st.held - mw->held_shown);
    else
        UNCOUNT(mw, mp_held, mw->held_shown - mw->st.held);
    mw->held_shown = mw->st.held;
    if (mw->stats) { /* the worker's high-water mark, over all its pools */
        uint64_t now = __atomic_load_n(&mw->stats->mp_held, __ATOMIC_RELAXED),
                 peak = __atomic_load_n(&mw->stats->mp_held_peak, __ATOMIC_RELAXED);
        if (now > peak)
            stats_add(mw->stats, mp_held_peak, now - peak);
    }
}

/* Take cl off its connection and out of the table; the owner is not told. */
static void unlink_client(struct midproxy_worker *mw, struct midproxy_client *cl)
{
    struct mpx_conn *mc = cl->mc;
    if (!mc)
        return;
    if (cl->prev)
        cl->prev->next = cl->next;
    else
        mc->clients = cl->next;
    if (cl->next)
        cl->next->prev = cl->prev;
    cl->prev = cl->next = NULL;
    mc->nclients--;
    size_t slot = (size_t)(uint32_t)cl->id;
    mw->slots[slot] = NULL;
    if (slot < mw->slot_hint)
        mw->slot_hint = slot;
    set_held(mw, cl, 0);
    publish_held(mw);
    cl->mc = NULL;
    mw->st.clients--;
    UNCOUNT(mw, mp_clients, 1);
}

/* End cl from the pool's side: cancel it on its middle proxy when asked (tell_mp), then the
   owner frees it. */
static void end_client(struct midproxy_worker *mw, struct midproxy_client *cl, bool tell_mp,
                       enum midproxy_end why)
{
    struct mpx_conn *mc = cl->mc;
    if (tell_mp && mc && mc->state == MPX_READY) {
        uint8_t cc[MPRPC_SHORT_MAX];
        if (mpx_send_short(mc, cc, mprpc_close_conn(cc, cl->id)) == 0)
            mpx_conn_interest(mc);
    }
    unlink_client(mw, cl);
    mw->ops->closed(cl, why);
}

static void slow_close(struct midproxy_worker *mw, struct midproxy_client *cl)
{
    mw->st.slow_closed++;
    COUNT(mw, mp_slow_closed, 1);
    end_client(mw, cl, true, MIDPROXY_END_SLOW);
}

/* cl now holds `held` bytes: the buffering policy (midproxy.h). cl may be ended. */
static void account(struct midproxy_worker *mw, struct midproxy_client *cl, long held)
{
    if (held < 0) { /* the client's socket failed */
        end_client(mw, cl, true, MIDPROXY_END_GONE);
        return;
    }
    if ((size_t)held > mw->cfg.client_buf_max) {
        slow_close(mw, cl);
        return;
    }
    set_held(mw, cl, (size_t)held);
    /* over the worker's budget: the client holding the most is the slowest; end it, and so
       on until under (a walk over the table, only while over) */
    while (mw->st.held > mw->cfg.buf_total) {
        struct midproxy_client *worst = NULL;
        for (size_t i = 0; i < mw->nslots; i++)
            if (mw->slots[i] && (!worst || mw->slots[i]->held > worst->held))
                worst = mw->slots[i];
        if (!worst || !worst->held)
            break;
        slow_close(mw, worst);
    }
    publish_held(mw);
}

int mpx_client_msg(struct mpx_conn *mc, const struct mprpc_msg *m, uint8_t *p, size_t n)
{
    (void)n;
    struct midproxy_worker *mw = mc->mw;
    struct midproxy_client *cl = client_of(mw, m->conn_id);
    if (cl && cl->mc != mc)
        cl = NULL;
    if (!cl) { /* a client we no longer have: tell the middle proxy, as MTProxy does */
        if (m->kind == MPRPC_K_CLOSE_EXT)
            return 0;
        uint8_t cc[MPRPC_SHORT_MAX];
        return mpx_send_short(mc, cc, mprpc_close_conn(cc, m->conn_id));
    }
    switch (m->kind) {
    case MPRPC_K_PROXY_ANS:
        if (m->len == 0 || m->len % 4 != 0)
            return 0;
        account(mw, cl, mw->ops->answer(cl, p + m->off, m->len));
        return 0;
    case MPRPC_K_SIMPLE_ACK:
        mw->st.quickacks++;
        COUNT(mw, mp_quickacks, 1);
        account(mw, cl, mw->ops->ack(cl, m->confirm));
        return 0;
    case MPRPC_K_CLOSE_EXT:
        mw->st.closed_by_mp++;
        end_client(mw, cl, false, MIDPROXY_END_CLOSED);
        return 0;
    default:
        return 0;
    }
}

void mpx_clients_resume(struct mpx_conn *mc)
{
    mc->paused = false;
    /* a resume callback may end other clients (never this connection): take next first */
    for (struct midproxy_client *cl = mc->clients, *next; cl; cl = next) {
        next = cl->next;
        mc->mw->ops->resume(cl);
    }
}

void mpx_clients_drop(struct mpx_conn *mc)
{
    while (mc->clients)
        end_client(mc->mw, mc->clients, false, MIDPROXY_END_CONN);
    mc->paused = false;
}

void mpx_clients_cleanup(struct midproxy_worker *mw)
{
    for (size_t i = 0; i < mw->nslots; i++)
        if (mw->slots[i])
            end_client(mw, mw->slots[i], false, MIDPROXY_END_CONN);
    tg__free(mw->slots);
    mw->slots = NULL;
    mw->nslots = mw->slot_hint = 0;
}

void midproxy_addr(struct mprpc_addr *a, const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)(const void *)sa;
        mprpc_addr_set(a, AF_INET6, &s6->sin6_addr, ntohs(s6->sin6_port));
    } else {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)(const void *)sa;
        mprpc_addr_set(a, AF_INET, &s4->sin_addr, ntohs(s4->sin_port));
    }
}

int midproxy_client_attach(struct midproxy_worker *mw, struct midproxy_client *cl, int16_t dc)
{
    struct mpx_conn *best = mpx_conn_pick(mw, dc);
    if (!best)
        return -EAGAIN;
    size_t slot = mw->slot_hint;
    while (slot < mw->nslots && mw->slots[slot])
        slot++;
    if (slot == mw->nslots) {
        size_t n = mw->nslots ? mw->nslots * 2 : 64;
        struct midproxy_client **s = tg__realloc(mw->slots, n * sizeof *s);
        if (!s)
            return -ENOMEM;
        memset(s + mw->nslots, 0, (n - mw->nslots) * sizeof *s);
        mw->slots = s, mw->nslots = n;
    }
    mw->slot_hint = slot + 1;
    uint32_t rnd;
    crypto_random(&rnd, sizeof rnd);
    cl->id = (uint64_t)(rnd ^ mw->id_salt) << 32 | (uint32_t)slot;
    cl->held = 0;
    if (mw->cfg.have_public4 && mprpc_addr_is_v4(&cl->proxy))
        memcpy(cl->proxy.ip + 12, mw->cfg.public4, 4);
    else if (mw->cfg.have_public6 && !mprpc_addr_is_v4(&cl->proxy))
        memcpy(cl->proxy.ip, mw->cfg.public6, 16);
    cl->mc = best;
    cl->prev = NULL;
    cl->next = best->clients;
    if (best->clients)
        best->clients->prev = cl;
    best->clients = cl;
    best->nclients++;
    mw->slots[slot] = cl;
    mw->st.clients++;
    mw->st.attached++;
    COUNT(mw, mp_clients, 1);
    return 0;
}

int midproxy_client_send(struct midproxy_worker *mw, struct midproxy_client *cl, const uint8_t *pkt,
                         size_t n, bool quickack)
{
    (void)mw;
    struct mpx_conn *mc = cl->mc;
    if (!mc)
        return -1;
    struct mprpc_req req;
    req.conn_id = cl->id;
    req.client = cl->client;
    req.proxy = cl->proxy;
    req.has_tag = cl->ad_tag != NULL;
    if (cl->ad_tag)
        memcpy(req.ad_tag, cl->ad_tag, MPRPC_AD_TAG_LEN);
    bool unenc = n >= 8 && memcmp(pkt, "\0\0\0\0\0\0\0\0", 8) == 0;
    req.flags = mprpc_req_flags(cl->tag, req.has_tag, quickack, unenc);
    uint8_t *d = mpx_msg_begin(mc, MPRPC_REQ_HEAD_MAX + n);
    if (!d)
        return -1;
    size_t hl = mprpc_req_head(d, &req);
    memcpy(d + hl, pkt, n);
    if (mpx_msg_end(mc, hl + n) != 0)
        return -1;
    if (mpx_bq_pending(&mc->out) > MIDPROXY_OUT_HIGH)
        mc->paused = true;
    return 0;
}

void midproxy_client_flush(struct midproxy_worker *mw, struct midproxy_client *cl)
{
    (void)mw;
    struct mpx_conn *mc = cl->mc;
    if (mc && mpx_conn_flush(mc) != 0)
        loop_io_set(mc->mw->loop, &mc->io, LOOP_READ | LOOP_WRITE); /* the error shows there */
}

bool midproxy_client_paused(const struct midproxy_client *cl)
{
    return cl->mc && cl->mc->paused;
}

void midproxy_client_drained(struct midproxy_worker *mw, struct midproxy_client *cl, size_t held)
{
    if (cl->mc) {
        set_held(mw, cl, held);
        publish_held(mw);
    }
}

void midproxy_client_detach(struct midproxy_worker *mw, struct midproxy_client *cl)
{
    if (!cl || !cl->mc)
        return;
    struct mpx_conn *mc = cl->mc;
    if (mc->state == MPX_READY) {
        uint8_t cc[MPRPC_SHORT_MAX];
        if (mpx_send_short(mc, cc, mprpc_close_conn(cc, cl->id)) == 0)
            mpx_conn_interest(mc);
    }
    unlink_client(mw, cl);
}
