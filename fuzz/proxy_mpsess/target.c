/*
 * Fuzz target: a middle-proxy session (mpsess_feed) reading what a middle proxy sends.
 * Byte 0: bit 0 picks the input's place: 0 = the raw stream from the first byte (the
 * plaintext nonce phase, then whatever follows decrypted as it comes); 1 = a valid server
 * nonce first, then the rest taken as the server's *plaintext* frames, which the target
 * encrypts with the server's keys (so the fuzzer reaches the handshake and the messages).
 * Bits 1..3 pick the feeding step (1..8 bytes, or all at once). Invariants: a failed
 * session says why and stays failed; a session's output is whole padded frames.
 */
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/wire/mpframe.h"
#include "proxy/wire/mpsess.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int sink_send(void *ud, const uint8_t *p, size_t n)
{
    (void)p;
    size_t *total = ud;
    if (n % 16 != 0 && *total > 0) /* after the nonce everything is whole CBC blocks */
        abort();
    *total += n;
    return 0;
}

static int sink_msg(void *ud, const struct mprpc_msg *m, const uint8_t *p, size_t n)
{
    (void)ud, (void)p;
    if (m->kind == MPRPC_K_PING || m->off + m->len > n)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    uint8_t mode = data[0];
    data++, size--;
    uint8_t secret[64];
    for (size_t i = 0; i < sizeof secret; i++)
        secret[i] = (uint8_t)(i * 5 + 1);
    struct mpsess_cfg cfg = {.secret = secret, .secret_len = sizeof secret, .now = 1700000000};
    cfg.local.family = cfg.remote.family = AF_INET;
    cfg.local.ip[0] = 10, cfg.local.ip[3] = 1, cfg.local.port = 40000;
    cfg.remote.ip[0] = 10, cfg.remote.ip[3] = 2, cfg.remote.port = 8888;
    memset(cfg.nonce, 0x11, 16);
    memset(cfg.pid, 0x22, 12);
    struct mpsess s;
    uint8_t out[64];
    size_t n, sent = 0;
    if (mpsess_start(&s, &cfg, out, sizeof out, &n) != 0)
        abort();
    struct mpsess_sink sink = {.ud = &sent, .send = sink_send, .msg = sink_msg};
    sent = n;
    uint8_t *feed = NULL;
    size_t flen = size;
    if (mode & 1) {
        /* the server's nonce, then its frames encrypted with the server's keys */
        uint8_t sn[64];
        struct mprpc_nonce no = {.schema = MPRPC_CRYPTO_AES, .ts = 1700000001};
        memcpy(&no.key_select, secret, 4);
        memset(no.nonce, 0x33, 16);
        mprpc_nonce_build(sn + 8, &no);
        size_t snl = mpframe_build(sn, sizeof sn, -2, sn + 8, MPRPC_NONCE_LEN, false);
        struct mpcrypto_keys k;
        if (mpcrypto_derive(false, no.nonce, cfg.nonce, cfg.now, &cfg.remote, &cfg.local, secret,
                            sizeof secret, &k) != 0)
            abort();
        struct mpcbc enc = {0};
        if (mpcbc_init(&enc, k.enc_key, k.enc_iv, true) != 0)
            abort();
        flen = snl + ((size + 15) & ~(size_t)15);
        feed = calloc(1, flen ? flen : 1);
        memcpy(feed, sn, snl);
        memcpy(feed + snl, data, size);
        for (size_t at = snl + size; at < flen; at++)
            feed[at] = (at % 4 == snl % 4) ? 4 : 0; /* pad with padding words */
        mpcbc_apply(&enc, feed + snl, feed + snl, flen - snl);
        mpcbc_cleanup(&enc);
    } else {
        feed = malloc(size ? size : 1);
        memcpy(feed, data, size);
    }
    size_t step = ((mode >> 1) & 7) + 1;
    if (((mode >> 1) & 7) == 7)
        step = flen ? flen : 1;
    int r = 0;
    for (size_t at = 0; at < flen && r == 0; at += step) {
        size_t k = flen - at < step ? flen - at : step;
        r = mpsess_feed(&s, feed + at, k, &sink);
    }
    if (r != 0 && (s.state != MPSESS_FAILED || s.why == MPSESS_OK ||
                   mpsess_feed(&s, feed, flen, &sink) != -1))
        abort();
    mpsess_cleanup(&s);
    free(feed);
    return 0;
}
