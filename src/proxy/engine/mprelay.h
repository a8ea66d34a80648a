/*
 * mprelay: a client connection's data path in middle-proxy mode, in place of relay.c's
 * (docs/proxy-engine.md, "Middle-proxy data path").
 *
 * An authenticated connection whose secret has an ad tag is attached to its worker's
 * middle-proxy pool (midproxy.h) and has no DC socket: one socket per client.
 *
 *   up    client bytes read into a pool buffer, TLS records unwrapped (FakeTLS), the client
 *         cipher decrypted in place, split by the client's transport framing (abridged,
 *         intermediate, padded intermediate: wire/mtframe) and each packet copied once,
 *         into its RPC_PROXY_REQ in the middle-proxy connection's output queue (which the
 *         pool frames, CRCs and CBC-encrypts in place). A packet not yet whole waits in the
 *         client's own buffer, sized to it. While that connection is paused (too much
 *         unsent) the client is not read.
 *   down  each RPC_PROXY_ANS, still in the session's buffer, gets the client's transport
 *         header (and 0..3 random padding bytes for padded intermediate), is encrypted
 *         with the client cipher in place and written with one sendmsg, in ApplicationData
 *         records (dynamic record sizing as relay.c's) for FakeTLS: no copy and no extra
 *         descriptor. What the socket does not take waits in the client's output queue
 *         (heap, freed once sent), which the pool's buffering policy bounds.
 *
 * Not here: the doppelganger's shaping of record times (a middle-proxy client's records
 * follow the answers as they come), fast mode (the pool always re-encrypts).
 *
 * Thread-safety: worker thread only.
 */
#ifndef TGPROXY_MPRELAY_H
#define TGPROXY_MPRELAY_H

#include <sys/socket.h>

#include "proxy/engine/conn_int.h"
#include "proxy/wire/obfs2.h"

/*
 * c has authenticated (oc: its keys; c->c2p keyed past the 64-byte header; c->hs->buf holds the
 * header and what came with it, TLS-unwrapped): attach it to the worker's pool with the ad
 * tag (MPRPC_AD_TAG_LEN bytes, the generation's) and the client's and proxy's addresses.
 * 1: attached (the caller enters RELAY, then calls mprelay_go); 0: no connection of its DC
 * is ready (nothing changed: the caller may go direct); -1: no memory (nothing changed).
 */
int mprelay_start(struct conn *c, const struct obfs2_client *oc, const uint8_t *ad_tag,
                  const struct sockaddr *client, const struct sockaddr *proxy);

/* Relay from now on: the bytes that came with the header go up, the client is read. c may
   be closed when it returns. */
void mprelay_go(struct conn *c);

/* Connection teardown: cancel the client on its middle proxy and free its state. */
void mprelay_release(struct conn *c);

#endif
