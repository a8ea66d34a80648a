/* mpsess: tgproxy's side of a middle-proxy connection (mpsess.h). */
#include "proxy/wire/mpsess.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/wire/mpframe.h"

const char *mpsess_why_name(enum mpsess_why why)
{
    switch (why) {
    case MPSESS_OK:
        return "ok";
    case MPSESS_E_FRAME:
        return "frame";
    case MPSESS_E_SEQ:
        return "sequence";
    case MPSESS_E_NONCE:
        return "nonce";
    case MPSESS_E_KEYS:
        return "keys";
    case MPSESS_E_HANDSHAKE:
        return "handshake";
    case MPSESS_E_REFUSED:
        return "refused";
    case MPSESS_E_MESSAGE:
        return "message";
    case MPSESS_E_NOMEM:
        return "nomem";
    case MPSESS_E_CRYPTO:
        return "crypto";
    }
    return "unknown";
}

static int failed(struct mpsess *s, enum mpsess_why why)
{
    s->state = MPSESS_FAILED;
    s->why = why;
    OPENSSL_cleanse(s->secret, sizeof s->secret);
    return -1;
}

int mpsess_start(struct mpsess *s, const struct mpsess_cfg *cfg, uint8_t *out, size_t cap,
                 size_t *n)
{
    memset(s, 0, sizeof *s);
    *n = 0;
    s->out_seq = s->in_seq = -2;
    s->max_frame = cfg->max_frame ? cfg->max_frame : MPFRAME_MAX;
    if (cfg->secret_len < MPCRYPTO_SECRET_MIN || cfg->secret_len > MPCRYPTO_SECRET_MAX ||
        cfg->local.family != cfg->remote.family || cap < 64)
        return failed(s, MPSESS_E_CRYPTO);
    memcpy(s->secret, cfg->secret, cfg->secret_len);
    s->secret_len = cfg->secret_len;
    memcpy(&s->key_select, cfg->secret, 4);
    memcpy(s->nonce, cfg->nonce, 16);
    memcpy(s->pid, cfg->pid, MPRPC_PID_LEN);
    s->ts = cfg->now;
    s->local = cfg->local;
    s->remote = cfg->remote;
    struct mprpc_nonce no = {.key_select = s->key_select, .schema = MPRPC_CRYPTO_AES, .ts = s->ts};
    memcpy(no.nonce, s->nonce, 16);
    mprpc_nonce_build(out + 8, &no);
    *n = mpframe_build(out, cap, s->out_seq++, out + 8, MPRPC_NONCE_LEN, false);
    s->frames_out++;
    return *n ? 0 : failed(s, MPSESS_E_CRYPTO);
}

size_t mpsess_wrap_size(size_t n)
{
    return mpframe_size(n, true);
}

size_t mpsess_wrap(struct mpsess *s, uint8_t *buf, size_t cap, size_t n)
{
    if (s->state != MPSESS_READY && s->state != MPSESS_HS_SENT)
        return 0;
    size_t w = mpframe_build(buf, cap, s->out_seq, buf + 8, n, true);
    if (w == 0 || mpcbc_apply(&s->enc, buf, buf, w) != 0)
        return 0;
    s->out_seq++;
    s->frames_out++;
    return w;
}

/* Room for n more bytes at the end of s->buf. */
static int reserve(struct mpsess *s, size_t n)
{
    if (s->len + n <= s->cap)
        return 0;
    if (s->off) { /* what was parsed makes room: move the rest to the front */
        memmove(s->buf, s->buf + s->off, s->len - s->off);
        s->len -= s->off;
        s->off = 0;
        if (s->len + n <= s->cap)
            return 0;
    }
    size_t cap = s->cap ? s->cap : 4096;
    while (cap < s->len + n)
        cap *= 2;
    uint8_t *b = realloc(s->buf, cap);
    if (b == NULL)
        return -1;
    s->buf = b, s->cap = cap;
    return 0;
}

static int send_msg(struct mpsess *s, const struct mpsess_sink *sink, const uint8_t *m, size_t n)
{
    uint8_t out[64];
    memcpy(out + 8, m, n);
    size_t w = mpsess_wrap(s, out, sizeof out, n);
    if (w == 0)
        return failed(s, MPSESS_E_CRYPTO);
    return sink->send(sink->ud, out, w);
}

/* The server's nonce arrived: derive the keys and send our handshake. */
static int on_nonce(struct mpsess *s, const uint8_t *p, size_t n, const struct mpsess_sink *sink)
{
    struct mprpc_nonce sn;
    if (mprpc_nonce_parse(p, n, &sn) != 0 || sn.key_select != s->key_select ||
        sn.schema != MPRPC_CRYPTO_AES)
        return failed(s, MPSESS_E_NONCE);
    struct mpcrypto_keys k;
    int rc = mpcrypto_derive(true, sn.nonce, s->nonce, s->ts, &s->remote, &s->local, s->secret,
                             s->secret_len, &k);
    OPENSSL_cleanse(s->secret, sizeof s->secret);
    if (rc == 0)
        rc = mpcbc_init(&s->enc, k.enc_key, k.enc_iv, true);
    if (rc == 0)
        rc = mpcbc_init(&s->dec, k.dec_key, k.dec_iv, false);
    OPENSSL_cleanse(&k, sizeof k);
    if (rc != 0)
        return failed(s, rc == -ENOMEM ? MPSESS_E_NOMEM : MPSESS_E_CRYPTO);
    s->state = MPSESS_HS_SENT;
    struct mprpc_handshake h = {.flags = 0};
    memcpy(h.sender, s->pid, MPRPC_PID_LEN);
    uint8_t m[MPRPC_HANDSHAKE_LEN];
    mprpc_handshake_build(m, &h);
    return send_msg(s, sink, m, sizeof m);
}

static int on_frame(struct mpsess *s, const uint8_t *p, size_t n, const struct mpsess_sink *sink)
{
    if (s->state == MPSESS_HS_SENT) {
        struct mprpc_handshake h;
        int32_t err;
        int r = mprpc_handshake_parse(p, n, &h, &err);
        if (r == 1)
            return failed(s, MPSESS_E_REFUSED);
        if (r != 0 || memcmp(h.peer, s->pid, MPRPC_PID_LEN) != 0)
            return failed(s, MPSESS_E_HANDSHAKE);
        s->state = MPSESS_READY;
        return 0;
    }
    struct mprpc_msg m;
    if (mprpc_parse(p, n, &m) != 0)
        return failed(s, MPSESS_E_MESSAGE);
    if (m.kind == MPRPC_K_PING) {
        uint8_t pong[MPRPC_SHORT_MAX];
        return send_msg(s, sink, pong, mprpc_pong(pong, m.ping_id));
    }
    return sink->msg(sink->ud, &m, p, n);
}

/* Parse and hand on every whole frame in s->buf; keep the rest. */
static int frames(struct mpsess *s, const struct mpsess_sink *sink)
{
    size_t at = s->off;
    int rc = 0;
    while (s->state != MPSESS_FAILED) {
        struct mpframe f;
        int r = mpframe_parse(s->buf + at, s->len - at, s->max_frame, &f, NULL);
        if (r == MPFRAME_MORE) {
            at += f.consumed; /* padding words */
            break;
        }
        if (r == MPFRAME_BAD) {
            /* the first encrypted frame is where a wrong secret or address shows */
            rc = failed(s, s->state == MPSESS_HS_SENT && s->in_seq == -1 ? MPSESS_E_KEYS
                                                                         : MPSESS_E_FRAME);
            break;
        }
        if (f.seq != s->in_seq) {
            rc = failed(s, MPSESS_E_SEQ);
            break;
        }
        s->in_seq++;
        s->frames_in++;
        bool was_plain = s->state == MPSESS_NONCE_SENT;
        rc = was_plain ? on_nonce(s, s->buf + at + f.off, f.len, sink)
                       : on_frame(s, s->buf + at + f.off, f.len, sink);
        at += f.consumed;
        if (rc != 0)
            break;
        if (was_plain) {
            /* what follows the nonce is ciphertext, but for padding words a sender may put
               after its plaintext nonce: hand it back to be decrypted */
            while (s->len - at >= 4 && s->buf[at] == MPFRAME_PAD_WORD && s->buf[at + 1] == 0 &&
                   s->buf[at + 2] == 0 && s->buf[at + 3] == 0)
                at += 4;
            size_t rest = s->len - at;
            uint8_t *tmp = NULL;
            if (rest) {
                tmp = malloc(rest);
                if (tmp == NULL)
                    return failed(s, MPSESS_E_NOMEM);
                memcpy(tmp, s->buf + at, rest);
            }
            s->off = s->len = 0;
            rc = rest ? mpsess_feed(s, tmp, rest, sink) : 0;
            free(tmp);
            return rc;
        }
    }
    /* no move: the next frame starts at off (reserve compacts when it needs the room) */
    if (at == s->len)
        s->off = s->len = 0;
    else
        s->off = at;
    return rc;
}

uint8_t *mpsess_space(struct mpsess *s, size_t n)
{
    if (s->state == MPSESS_FAILED)
        return NULL;
    /* before the keys the stream is plaintext; after, a remainder short of a block waits
       in tail and goes in front of what comes */
    size_t pre = s->state == MPSESS_NONCE_SENT ? 0 : s->tail_len;
    if (reserve(s, pre + n) != 0) {
        failed(s, MPSESS_E_NOMEM);
        return NULL;
    }
    uint8_t *dst = s->buf + s->len;
    memcpy(dst, s->tail, pre);
    return dst + pre;
}

int mpsess_commit(struct mpsess *s, size_t n, const struct mpsess_sink *sink)
{
    if (s->state == MPSESS_FAILED)
        return -1;
    if (s->state == MPSESS_NONCE_SENT) {
        s->len += n;
        return frames(s, sink);
    }
    /* whole blocks are decrypted in place; a remainder waits in tail */
    uint8_t *dst = s->buf + s->len;
    size_t total = s->tail_len + n, whole = total & ~(size_t)15;
    s->tail_len = total - whole;
    memcpy(s->tail, dst + whole, s->tail_len);
    if (whole && mpcbc_apply(&s->dec, dst, dst, whole) != 0)
        return failed(s, MPSESS_E_CRYPTO);
    s->len += whole;
    return frames(s, sink);
}

int mpsess_feed(struct mpsess *s, const uint8_t *in, size_t n, const struct mpsess_sink *sink)
{
    uint8_t *dst = mpsess_space(s, n);
    if (!dst)
        return -1;
    memcpy(dst, in, n);
    return mpsess_commit(s, n, sink);
}

void mpsess_cleanup(struct mpsess *s)
{
    if (s == NULL)
        return;
    mpcbc_cleanup(&s->enc);
    mpcbc_cleanup(&s->dec);
    if (s->buf) {
        OPENSSL_cleanse(s->buf, s->cap);
        free(s->buf);
    }
    s->buf = NULL;
    s->off = s->len = s->cap = 0;
    OPENSSL_cleanse(s->secret, sizeof s->secret);
}
