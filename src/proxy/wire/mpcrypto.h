/*
 * mpcrypto: the middle-proxy connection's keys and its AES-256-CBC streams
 * (docs/proxy-protocol-notes.md, "Middle-proxy mode", key derivation).
 *
 * After the RPC_NONCE exchange both sides derive one key and IV per direction from: the
 * server's and the client's nonce, the client's nonce timestamp, both endpoints' addresses
 * and ports (IPv4 as a byte-reversed word; IPv6: zero words there and both addresses
 * appended), a purpose string ("CLIENT" names client->server, "SERVER" the other way) and
 * the shared proxy secret (32..256 bytes). key = MD5(s[1..])[0..12) || SHA1(s);
 * iv = MD5(s[2..]). The stream is AES-256-CBC without padding, chained across frames: one
 * cipher state per direction for the connection's life.
 *
 * The addresses are those each side sees: the client names the middle proxy's address as
 * "server" and its own public address (the NAT's, not the socket's, when configured) as
 * "client"; the server does the same from its side.
 *
 * Thread-safety: reentrant; a struct mpcbc is used by one thread at a time.
 * Return convention: 0 or -errno (-EINVAL arguments, -ENOMEM, -EIO OpenSSL failure).
 */
#ifndef TGPROXY_MPCRYPTO_H
#define TGPROXY_MPCRYPTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MPCRYPTO_SECRET_MIN 32
#define MPCRYPTO_SECRET_MAX 256

/* One endpoint: family AF_INET (ip[0..4), network order) or AF_INET6; port in host order. */
struct mpcrypto_end {
    int family;
    uint8_t ip[16];
    uint16_t port;
};

struct sockaddr_storage;
/* An end from a socket address (AF_INET or AF_INET6; anything else is taken as AF_INET). */
void mpcrypto_end_from(struct mpcrypto_end *e, const struct sockaddr_storage *ss);

struct mpcrypto_keys {
    uint8_t enc_key[32], enc_iv[16]; /* what this side sends */
    uint8_t dec_key[32], dec_iv[16]; /* what it receives */
};

/*
 * Keys for one side of a connection. am_client: tgproxy's side (sends with "CLIENT"); else
 * the middle proxy's. server/client: the two endpoints as described above; both must be of
 * the same family. -EINVAL on mixed families, a secret outside 32..256 bytes; -EIO.
 */
int mpcrypto_derive(bool am_client, const uint8_t nonce_srv[16], const uint8_t nonce_clt[16],
                    uint32_t clt_ts, const struct mpcrypto_end *server,
                    const struct mpcrypto_end *client, const uint8_t *secret, size_t secret_len,
                    struct mpcrypto_keys *out);

/* An AES-256-CBC stream (no padding): encrypting or decrypting, state kept across calls. */
struct mpcbc {
    void *ctx; /* EVP_CIPHER_CTX */
};

/* Set up c (zeroed or cleaned up). 0, -ENOMEM or -EIO. */
int mpcbc_init(struct mpcbc *c, const uint8_t key[32], const uint8_t iv[16], bool encrypt);
/* n bytes (a multiple of 16) from in to out (the same buffer or apart). 0, -EINVAL or -EIO. */
int mpcbc_apply(struct mpcbc *c, const uint8_t *in, uint8_t *out, size_t n);
/* Free and wipe; c becomes zeroed. NULL-safe, idempotent. */
void mpcbc_cleanup(struct mpcbc *c);

#endif
