/*
 * obfs2: obfuscated2 header parsing and building (see obfs2.h, brief sections 2-3).
 */
#include "proxy/wire/obfs2.h"

#include <errno.h>
#include <string.h>

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* out[i] = in[n-1-i]; in and out must not overlap. */
static void reverse(uint8_t *out, const uint8_t *in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = in[n - 1 - i];
}

static unsigned tag_bit(uint32_t tag)
{
    switch (tag) {
    case OBFS2_TAG_ABRIDGED:
        return OBFS2_ALLOW_ABRIDGED;
    case OBFS2_TAG_INTERMEDIATE:
        return OBFS2_ALLOW_INTERMEDIATE;
    case OBFS2_TAG_PADDED:
        return OBFS2_ALLOW_PADDED;
    default:
        return 0;
    }
}

const char *obfs2_tag_name(uint32_t tag)
{
    switch (tag) {
    case OBFS2_TAG_ABRIDGED:
        return "abridged";
    case OBFS2_TAG_INTERMEDIATE:
        return "intermediate";
    case OBFS2_TAG_PADDED:
        return "padded-intermediate";
    default:
        return "unknown";
    }
}

unsigned obfs2_tags_for(enum secret_kind kind, bool in_tls)
{
    if (in_tls)
        return kind == SECRET_EE ? OBFS2_ALLOW_PADDED : 0;
    if (kind == SECRET_DD)
        return OBFS2_ALLOW_PADDED;
    if (kind == SECRET_CLASSIC)
        return OBFS2_ALLOW_ABRIDGED | OBFS2_ALLOW_INTERMEDIATE;
    return 0;
}

int obfs2_client_keys(const uint8_t w[64], const uint8_t secret[16], struct obfs2_keys *out)
{
    uint8_t r[48];
    reverse(r, w + 8, 48);
    struct crypto_part dec[2] = {{w + 8, 32}, {secret, 16}};
    struct crypto_part enc[2] = {{r, 32}, {secret, 16}};
    int rc = crypto_sha256(dec, 2, out->dec_key);
    if (rc == 0)
        rc = crypto_sha256(enc, 2, out->enc_key);
    memcpy(out->dec_iv, w + 40, 16);
    memcpy(out->enc_iv, r + 32, 16);
    crypto_wipe(r, sizeof r);
    return rc;
}

/* Try one candidate: derive the decrypt key, run the whole header through dec. */
static enum obfs2_status try_candidate(const uint8_t w[64], const struct obfs2_candidate *c,
                                       struct crypto_ctr *dec, uint8_t plain[64])
{
    uint8_t key[32];
    struct crypto_part parts[2] = {{w + 8, 32}, {c->key, 16}};
    enum obfs2_status st = OBFS2_ERROR;
    if (crypto_sha256(parts, 2, key) != 0)
        goto out;
    if (crypto_ctr_init(dec, key, w + 40) != 0 || crypto_ctr_apply2(dec, w, plain, 64) != 0)
        goto out;
    st = (tag_bit(le32(plain + 56)) & c->tags) ? OBFS2_OK : OBFS2_BAD;
out:
    crypto_wipe(key, sizeof key);
    return st;
}

enum obfs2_status obfs2_parse_client(const uint8_t *buf, size_t len,
                                     const struct obfs2_candidate *cands, size_t ncands,
                                     struct crypto_ctr *dec, struct obfs2_client *out)
{
    uint8_t plain[64];
    enum obfs2_status st = OBFS2_BAD;
    if (len < OBFS2_HEADER_LEN)
        return OBFS2_NEED_MORE;
    for (size_t i = 0; i < ncands; i++) {
        st = try_candidate(buf, &cands[i], dec, plain);
        if (st == OBFS2_ERROR)
            break;
        if (st != OBFS2_OK)
            continue;
        if (obfs2_client_keys(buf, cands[i].key, &out->keys) != 0) {
            st = OBFS2_ERROR;
            break;
        }
        out->match = i;
        out->tag = le32(plain + 56);
        out->dc = (int16_t)(uint16_t)(plain[60] | plain[61] << 8);
        memcpy(out->replay_key, buf + 8, OBFS2_REPLAY_KEY_LEN);
        break;
    }
    crypto_wipe(plain, sizeof plain);
    return ncands == 0 ? OBFS2_BAD : st;
}

bool obfs2_prefix_ok(const uint8_t h[8])
{
    return obfs2_prefix_possible(h, 8);
}

bool obfs2_prefix_possible(const uint8_t *h, size_t n)
{
    static const uint32_t bad_first[] = {
        0x44414548u, /* HEAD */
        0x54534f50u, /* POST */
        0x20544547u, /* "GET " */
        0x4954504fu, /* OPTI */
        0xeeeeeeeeu, /* intermediate */
        0xddddddddu, /* padded intermediate */
        0x02010316u, /* 16 03 01 02: TLS ClientHello */
    };
    if (n >= 1 && h[0] == 0xef)
        return false;
    uint32_t w0 = n >= 4 ? le32(h) : 0;
    for (size_t i = 0; n >= 4 && i < sizeof bad_first / sizeof bad_first[0]; i++)
        if (w0 == bad_first[i])
            return false;
    return n < 8 || le32(h + 4) != 0;
}

static int default_random(void *user, uint8_t *buf, size_t n)
{
    (void)user;
    return crypto_random(buf, n);
}

/* Draw H until its clear prefix is acceptable. */
static int draw_header(obfs2_random_fn rnd, void *user, uint8_t h[64])
{
    for (int tries = 0; tries < 1000; tries++) {
        int rc = rnd(user, h, 64);
        if (rc != 0)
            return rc < 0 ? rc : -EIO;
        if (obfs2_prefix_ok(h))
            return 0;
    }
    return -EIO;
}

int obfs2_dc_header(uint32_t tag, int16_t dc, const struct obfs2_keys *fast, obfs2_random_fn rnd,
                    void *user, uint8_t wire[64], struct obfs2_keys *keys, struct crypto_ctr *enc,
                    struct crypto_ctr *dec)
{
    uint8_t h[64], r[48], enc_h[64];
    struct obfs2_keys k;
    int rc = draw_header(rnd ? rnd : default_random, user, h);
    if (rc != 0)
        goto out;
    if (fast) {
        uint8_t kv[48];
        memcpy(kv, fast->enc_key, 32);
        memcpy(kv + 32, fast->enc_iv, 16);
        reverse(h + 8, kv, 48);
        crypto_wipe(kv, sizeof kv);
    }
    put_le32(h + 56, tag);
    h[60] = (uint8_t)((uint16_t)dc & 0xff);
    h[61] = (uint8_t)((uint16_t)dc >> 8);
    memcpy(k.enc_key, h + 8, 32);
    memcpy(k.enc_iv, h + 40, 16);
    reverse(r, h + 8, 48);
    memcpy(k.dec_key, r, 32);
    memcpy(k.dec_iv, r + 32, 16);
    if ((rc = crypto_ctr_init(enc, k.enc_key, k.enc_iv)) != 0 ||
        (rc = crypto_ctr_apply2(enc, h, enc_h, 64)) != 0)
        goto out;
    if (dec && (rc = crypto_ctr_init(dec, k.dec_key, k.dec_iv)) != 0)
        goto out;
    memcpy(wire, h, 56);
    memcpy(wire + 56, enc_h + 56, 8);
    if (keys)
        *keys = k;
out:
    crypto_wipe(h, sizeof h);
    crypto_wipe(r, sizeof r);
    crypto_wipe(enc_h, sizeof enc_h);
    crypto_wipe(&k, sizeof k);
    return rc;
}
