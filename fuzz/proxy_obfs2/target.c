/*
 * Fuzz target: the obfuscated2 header parser and the DC header builder (proxy/obfs2).
 *
 * Input: a 64-byte client header (then any following bytes as relayed traffic). Parsed
 * with the vector secret under two tag policies; on success the tag must be one the
 * candidate allows and the traffic decrypts without error. The rest of the input then
 * serves as the "random" source for the DC header builder, whose clear prefix must always
 * pass the forbidden-prefix rules and whose encrypted tag/dc must decrypt back.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/wire/obfs2.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct src {
    const uint8_t *p;
    size_t n, at;
};

static int from_input(void *user, uint8_t *buf, size_t n)
{
    struct src *s = user;
    if (s->n - s->at < n)
        return -1;
    memcpy(buf, s->p + s->at, n);
    s->at += n;
    return 0;
}

static void build_dc(const struct obfs2_client *cl, const uint8_t *rest, size_t n)
{
    struct src s = {rest, n, 0};
    uint8_t wire[64], plain[64];
    struct obfs2_keys keys;
    struct crypto_ctr enc = {0}, dec = {0}, check = {0};
    if (obfs2_dc_header(cl->tag, cl->dc, (n & 1) ? &cl->keys : NULL, from_input, &s, wire, &keys,
                        &enc, &dec) == 0) {
        if (!obfs2_prefix_ok(wire))
            abort();
        if (crypto_ctr_init(&check, keys.enc_key, keys.enc_iv) != 0 ||
            crypto_ctr_apply2(&check, wire, plain, 64) != 0)
            abort();
        uint32_t tag = (uint32_t)plain[56] | (uint32_t)plain[57] << 8 | (uint32_t)plain[58] << 16 |
                       (uint32_t)plain[59] << 24;
        if (tag != cl->tag || (int16_t)(uint16_t)(plain[60] | plain[61] << 8) != cl->dc)
            abort();
    }
    crypto_ctr_cleanup(&enc);
    crypto_ctr_cleanup(&dec);
    crypto_ctr_cleanup(&check);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint8_t key[16] = {0xb0, 0x0e, 0xbb, 0x67, 0x8b, 0xf4, 0xd4, 0x54,
                                    0xa4, 0xae, 0x05, 0x39, 0x27, 0xce, 0xb0, 0x6e};
    struct obfs2_candidate c[2] = {{.tags = OBFS2_ALLOW_PADDED},
                                   {.tags = OBFS2_ALLOW_ABRIDGED | OBFS2_ALLOW_INTERMEDIATE}};
    memcpy(c[0].key, key, 16);
    memcpy(c[1].key, key, 16);
    struct crypto_ctr dec = {0};
    struct obfs2_client cl;
    enum obfs2_status st = obfs2_parse_client(data, size, c, 2, &dec, &cl);
    if ((st == OBFS2_NEED_MORE) != (size < 64))
        abort();
    if (st == OBFS2_OK) {
        if (cl.match > 1 || !(cl.tag == OBFS2_TAG_PADDED ? cl.match == 0 : cl.match == 1))
            abort();
        if (memcmp(cl.replay_key, data + 8, OBFS2_REPLAY_KEY_LEN) != 0)
            abort();
        uint8_t *rest = malloc(size - 64 + 1);
        if (rest) {
            memcpy(rest, data + 64, size - 64);
            if (crypto_ctr_apply(&dec, rest, size - 64) != 0)
                abort();
            free(rest);
        }
    }
    crypto_ctr_cleanup(&dec);
    /* A forbidden prefix stays forbidden as bytes arrive: monotone in n, and equal to
       obfs2_prefix_ok at 8 bytes. */
    for (size_t n = 1; n <= size && n <= 8; n++)
        if (!obfs2_prefix_possible(data, n - 1) && obfs2_prefix_possible(data, n))
            abort();
    if (size >= 8 && obfs2_prefix_possible(data, 8) != obfs2_prefix_ok(data))
        abort();
    /* Builder: pretend the header authenticated as some tag/dc taken from the input. */
    if (size >= 64) {
        struct obfs2_client fake = {.tag = OBFS2_TAG_PADDED,
                                    .dc = (int16_t)(uint16_t)(data[60] | data[61] << 8)};
        if (st == OBFS2_OK)
            fake = cl;
        build_dc(&fake, data + 64, size - 64);
    }
    return 0;
}
