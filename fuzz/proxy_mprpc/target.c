/*
 * Fuzz target: the middle-proxy RPC message parsers. Byte 0 picks one: the nonce, the
 * handshake (or its error), RPC_PROXY_REQ (the fake middle proxy's side) or any other message
 * (tgproxy's side). Variable parts must lie inside the input; whatever parses is built again
 * and must parse back to the same fields.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/wire/mprpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    uint8_t mode = data[0] & 3;
    data++, size--;
    uint8_t out[MPRPC_REQ_HEAD_MAX];
    if (mode == 0) {
        struct mprpc_nonce n, back;
        if (mprpc_nonce_parse(data, size, &n) == 0) {
            mprpc_nonce_build(out, &n);
            if (memcmp(out, data, MPRPC_NONCE_LEN) != 0 ||
                mprpc_nonce_parse(out, MPRPC_NONCE_LEN, &back) != 0 || memcmp(&n, &back, sizeof n))
                abort();
        }
    } else if (mode == 1) {
        struct mprpc_handshake h;
        int32_t err;
        int r = mprpc_handshake_parse(data, size, &h, &err);
        if (r == 0) {
            mprpc_handshake_build(out, &h);
            if (memcmp(out, data, MPRPC_HANDSHAKE_LEN) != 0)
                abort();
        } else if (r != 1 && r != -1) {
            abort();
        }
    } else if (mode == 2) {
        struct mprpc_req r, back;
        if (mprpc_req_parse(data, size, &r) == 0) {
            if (r.off > size || r.len != size - r.off)
                abort();
            size_t n = mprpc_req_head(out, &r);
            if (n > MPRPC_REQ_HEAD_MAX || mprpc_req_parse(out, n, &back) != 0 ||
                back.conn_id != r.conn_id || back.has_tag != r.has_tag || back.len != 0 ||
                memcmp(&back.client, &r.client, sizeof r.client) ||
                memcmp(&back.proxy, &r.proxy, sizeof r.proxy) ||
                (r.has_tag && memcmp(back.ad_tag, r.ad_tag, MPRPC_AD_TAG_LEN)))
                abort();
        }
    } else {
        struct mprpc_msg m, back;
        if (mprpc_parse(data, size, &m) == 0) {
            size_t n = 0;
            switch (m.kind) {
            case MPRPC_K_PROXY_ANS:
                if (m.off != 16 || m.off + m.len != size)
                    abort();
                n = mprpc_ans_head(out, m.flags, m.conn_id);
                break;
            case MPRPC_K_SIMPLE_ACK:
                n = mprpc_simple_ack(out, m.conn_id, m.confirm);
                break;
            case MPRPC_K_CLOSE_EXT:
                n = mprpc_close_ext(out, m.conn_id);
                break;
            case MPRPC_K_CLOSE_CONN:
                n = mprpc_close_conn(out, m.conn_id);
                break;
            case MPRPC_K_PING:
                n = mprpc_ping(out, m.ping_id);
                break;
            case MPRPC_K_PONG:
                n = mprpc_pong(out, m.ping_id);
                break;
            case MPRPC_K_UNKNOWN:
                return 0;
            }
            if (n > size || memcmp(out, data, n) != 0 || mprpc_parse(out, n, &back) != 0 ||
                back.kind != m.kind)
                abort();
        }
    }
    return 0;
}
