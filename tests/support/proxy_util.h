/*
 * proxy_util: pieces shared by tgproxy's test client, fake DC, fronting server and the proxy
 * benchmarks. This is an independent, deliberately simple implementation of the protocol's
 * client side (brief sections 2, 3, 4) straight on OpenSSL, so the engine is checked against
 * code it does not share.
 *
 *  - pstream: a deterministic byte stream that can be generated or verified at any offset
 *    (8-byte blocks of splitmix64(block index ^ seed)), so any transfer is checked end to end;
 *  - pctr: AES-256-CTR stream (one EVP context);
 *  - obfs2 headers: the client's 64-byte header (with a secret, 2.2) and the direct one
 *    (no secret, 3.2), plus the DC-side parse of a direct header;
 *  - sockets: listen on 127.0.0.1:0 and connect, blocking, with timeouts.
 *
 * Thread-safety: all functions are reentrant; each struct is used by one thread.
 */
#ifndef TGKIT_TEST_PROXY_UTIL_H
#define TGKIT_TEST_PROXY_UTIL_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* ---- deterministic stream ---- */
void pstream_fill(uint64_t seed, uint64_t off, uint8_t *dst, size_t n);
/* Offset of the first differing byte relative to off, or -1 if all n bytes match. */
long long pstream_check(uint64_t seed, uint64_t off, const uint8_t *p, size_t n);

/* ---- AES-256-CTR ---- */
struct pctr {
    void *ctx; /* EVP_CIPHER_CTX */
};
int pctr_init(struct pctr *c, const uint8_t key[32], const uint8_t iv[16]);
void pctr_apply(struct pctr *c, uint8_t *p, size_t n); /* in place */
void pctr_cleanup(struct pctr *c);

/* ---- obfs2 ---- */
enum { PTAG_ABRIDGED = 0xef, PTAG_INTERMEDIATE = 0xee, PTAG_PADDED = 0xdd };

/*
 * Build a client header: tag byte repeated 4 times at 56, dc at 60 (int16 LE). With key
 * (16 bytes) the keys are SHA256(prekey || key) (client -> proxy); key NULL = direct (3.2,
 * the prekeys are the keys, and bytes 0..7 obey the forbidden-prefix rules).
 * wire receives the 64 bytes to send; enc continues after them, dec is the reply stream.
 */
int pobfs_client_header(uint8_t wire[64], const uint8_t *key, uint8_t tag, int16_t dc,
                        struct pctr *enc, struct pctr *dec);
/* Key (32 bytes) || IV (16 bytes) of the reply stream a header sets up (the stream its
   sender decrypts with); key as for pobfs_client_header. Lets a test compare the keys a
   client expects with the keys the DC was handed (fast mode, brief 3.3). */
void pobfs_reply_keyiv(const uint8_t wire[64], const uint8_t *key, uint8_t out[48]);
/* DC side of a direct header: decrypt, return tag byte and dc; dec continues at 64, enc is
   the reply cipher at 0. 0, or -1 if the tag is not one of the three. */
int pobfs_dc_accept(const uint8_t wire[64], uint8_t *tag, int16_t *dc, struct pctr *dec,
                    struct pctr *enc);

/* ---- sockets ---- */
/* Listening TCP socket on 127.0.0.1 with an ephemeral port (port returned in *port). */
int psock_listen(uint16_t *port, int backlog);
/* Blocking connect to 127.0.0.1:port; fd or -errno. Receive/send timeouts of timeout_ms. */
int psock_connect(uint16_t port, int timeout_ms);
/* A UDP socket bound to 127.0.0.1 on a free port (into *port); fd or -errno. */
int psock_udp_bind(uint16_t *port);
/* A port on 127.0.0.1 that refuses connections for as long as the returned fd stays open
   (bound, never listening): unlike a port bound and closed again, no other process can take
   it meanwhile. fd or -errno. */
int psock_refusing(uint16_t *port);
/* The same on ::1 (IPv6 only): a listener, and a connect to [::1]:port. */
int psock_listen6(uint16_t *port, int backlog);
int psock_connect6(uint16_t port, int timeout_ms);
/* The same from a chosen local address, port 0: an IPv4 one ("127.0.0.2"; NULL = any)
   connects to 127.0.0.1:port, an IPv6 one ("::1") to [::1]:port. */
int psock_connect_from(const char *src_ip, uint16_t port, int timeout_ms);
struct sockaddr_in psock_addr(uint16_t port);
/* ip (numeric IPv4 or IPv6) and port as a socket address; *len its size. 0 or -EINVAL. */
int psock_addr_parse(const char *ip, uint16_t port, struct sockaddr_storage *ss, socklen_t *len);
/* Write/read exactly n bytes (blocking). 0, or -errno / -EPIPE on early EOF. */
int psock_write_all(int fd, const void *p, size_t n);
int psock_read_all(int fd, void *p, size_t n);
int psock_set_nonblock(int fd, bool on);

#endif
