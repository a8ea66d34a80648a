/* mpcrypto: middle-proxy key derivation and AES-256-CBC streams (mpcrypto.h). */
#include "proxy/wire/mpcrypto.h"

#include <errno.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <string.h>
#include <sys/socket.h>

/* nonces, ts, ips, ports, purpose, secret, nonce, two IPv6 addresses, nonce */
#define INPUT_MAX (16 + 16 + 4 + 4 + 2 + 6 + 4 + 2 + MPCRYPTO_SECRET_MAX + 16 + 32 + 16)

static int digest(const EVP_MD *md, const uint8_t *p, size_t n, uint8_t *out)
{
    return EVP_Digest(p, n, out, NULL, md, NULL) == 1 ? 0 : -EIO;
}

/* key and iv for the purpose written at s[42..48) */
static int one(const uint8_t *s, size_t n, uint8_t key[32], uint8_t iv[16])
{
    uint8_t md5[16];
    int r = digest(EVP_md5(), s + 1, n - 1, md5);
    if (r == 0)
        r = digest(EVP_sha1(), s, n, key + 12);
    if (r == 0)
        r = digest(EVP_md5(), s + 2, n - 2, iv);
    memcpy(key, md5, 12);
    OPENSSL_cleanse(md5, sizeof md5);
    return r;
}

static void reversed4(uint8_t *out, const uint8_t *ip)
{
    out[0] = ip[3], out[1] = ip[2], out[2] = ip[1], out[3] = ip[0];
}

int mpcrypto_derive(bool am_client, const uint8_t nonce_srv[16], const uint8_t nonce_clt[16],
                    uint32_t clt_ts, const struct mpcrypto_end *server,
                    const struct mpcrypto_end *client, const uint8_t *secret, size_t secret_len,
                    struct mpcrypto_keys *out)
{
    memset(out, 0, sizeof *out);
    if (server->family != client->family ||
        (server->family != AF_INET && server->family != AF_INET6) ||
        secret_len < MPCRYPTO_SECRET_MIN || secret_len > MPCRYPTO_SECRET_MAX)
        return -EINVAL;
    bool v6 = server->family == AF_INET6;
    uint8_t s[INPUT_MAX];
    memset(s, 0, 48 + 6);
    memcpy(s, nonce_srv, 16);
    memcpy(s + 16, nonce_clt, 16);
    s[32] = (uint8_t)clt_ts, s[33] = (uint8_t)(clt_ts >> 8);
    s[34] = (uint8_t)(clt_ts >> 16), s[35] = (uint8_t)(clt_ts >> 24);
    if (!v6)
        reversed4(s + 36, server->ip);
    s[40] = (uint8_t)client->port, s[41] = (uint8_t)(client->port >> 8);
    memcpy(s + 42, "CLIENT", 6);
    if (!v6)
        reversed4(s + 48, client->ip);
    s[52] = (uint8_t)server->port, s[53] = (uint8_t)(server->port >> 8);
    memcpy(s + 54, secret, secret_len);
    size_t n = 54 + secret_len;
    memcpy(s + n, nonce_srv, 16);
    n += 16;
    if (v6) {
        memcpy(s + n, client->ip, 16);
        memcpy(s + n + 16, server->ip, 16);
        n += 32;
    }
    memcpy(s + n, nonce_clt, 16);
    n += 16;

    uint8_t *c_key = am_client ? out->enc_key : out->dec_key;
    uint8_t *c_iv = am_client ? out->enc_iv : out->dec_iv;
    int r = one(s, n, c_key, c_iv);
    memcpy(s + 42, "SERVER", 6);
    if (r == 0)
        r = one(s, n, am_client ? out->dec_key : out->enc_key,
                am_client ? out->dec_iv : out->enc_iv);
    OPENSSL_cleanse(s, n);
    if (r != 0)
        OPENSSL_cleanse(out, sizeof *out);
    return r;
}

int mpcbc_init(struct mpcbc *c, const uint8_t key[32], const uint8_t iv[16], bool encrypt)
{
    mpcbc_cleanup(c);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    if (ctx == NULL)
        return -ENOMEM;
    if (EVP_CipherInit_ex(ctx, EVP_aes_256_cbc(), NULL, key, iv, encrypt ? 1 : 0) != 1 ||
        EVP_CIPHER_CTX_set_padding(ctx, 0) != 1) {
        EVP_CIPHER_CTX_free(ctx);
        return -EIO;
    }
    c->ctx = ctx;
    return 0;
}

int mpcbc_apply(struct mpcbc *c, const uint8_t *in, uint8_t *out, size_t n)
{
    if (c->ctx == NULL || n % 16 != 0)
        return -EINVAL;
    while (n > 0) {
        int chunk = n > (1u << 30) ? 1 << 30 : (int)n, got = 0;
        if (EVP_CipherUpdate(c->ctx, out, &got, in, chunk) != 1 || got != chunk)
            return -EIO;
        in += chunk, out += chunk, n -= (size_t)chunk;
    }
    return 0;
}

void mpcbc_cleanup(struct mpcbc *c)
{
    if (c == NULL)
        return;
    EVP_CIPHER_CTX_free(c->ctx); /* resets (and so wipes) the key schedule */
    c->ctx = NULL;
}

void mpcrypto_end_from(struct mpcrypto_end *e, const struct sockaddr_storage *ss)
{
    memset(e, 0, sizeof *e);
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)(const void *)ss;
        e->family = AF_INET6;
        memcpy(e->ip, &a->sin6_addr, 16);
        e->port = ntohs(a->sin6_port);
    } else {
        const struct sockaddr_in *a = (const struct sockaddr_in *)(const void *)ss;
        e->family = AF_INET;
        memcpy(e->ip, &a->sin_addr, 4);
        e->port = ntohs(a->sin_port);
    }
}
