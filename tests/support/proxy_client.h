/*
 * proxy_client: a test client of tgproxy speaking FakeTLS (ee), dd, classic (ef/ee tags) or
 * the direct DC header (no proxy; the harness floor), with blocking sockets on 127.0.0.1.
 *
 * pcli_connect() connects and performs the whole handshake: for FakeTLS it sends a
 * ClientHello (the classic 517-byte shape, digest per brief 4.3), reads the three-record
 * answer, checks the server random HMAC (4.7), then sends CCS and the first ApplicationData
 * record with the obfs2 header; otherwise it sends the 64-byte obfs2 header. After that
 * pcli_send / pcli_recv move plaintext, and pcli_echo / pcli_sink / pcli_source run a whole
 * verified transfer against the fake DC (see proxy_fakedc.h for its commands).
 *
 * pcli_hello() builds a ClientHello on its own, so fronting tests can send exact bytes.
 *
 * Ownership: struct pcli is caller storage; pcli_close releases it (NULL-safe, idempotent).
 * Thread-safety: one pcli per thread. Returns: 0 or -errno; -EPROTO for a protocol mismatch,
 * -EBADMSG for a payload that fails verification, -ETIMEDOUT when nothing moves for
 * opts.timeout_ms.
 */
#ifndef TGKIT_TEST_PROXY_CLIENT_H
#define TGKIT_TEST_PROXY_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proxy_util.h"

enum pcli_mode { PCLI_TLS, PCLI_DD, PCLI_CLASSIC, PCLI_DIRECT };

struct pcli_opts {
    enum pcli_mode mode;
    const uint8_t *key; /* 16 bytes; unused for PCLI_DIRECT */
    const char *sni;    /* FakeTLS SNI; NULL = no SNI extension */
    int16_t dc;
    uint8_t tag;         /* PCLI_CLASSIC: PTAG_ABRIDGED (default) or PTAG_INTERMEDIATE */
    int64_t time_skew_s; /* added to the FakeTLS timestamp */
    int timeout_ms;      /* socket timeouts; 0 = 10000 */
    size_t max_record;   /* FakeTLS payload per record sent; 0 = 2878 (tdlib) */
    const void *prefix;  /* bytes sent before the handshake (a PROXY header), or NULL */
    size_t prefix_len;
    const char *src_ip; /* local address to connect from ("127.0.0.2"; "::1": to [::1]) */
    size_t split;       /* dd / classic: the 64-byte header in two writes, the first `split`
                           bytes (1..63), between(fd, between_arg) after them; 0 = one write.
                           FakeTLS: the ClientHello in writes of `split` bytes each (the
                           last may be shorter), between() after each but the last */
    void (*between)(int fd, void *arg);
    void *between_arg;
    /* MTProto transport framing inside the stream, as a real client's (dd, FakeTLS, classic
       with PTAG_INTERMEDIATE): each pcli_send and each chunk of a transfer is one packet
       (its length a multiple of 4), and what comes back is read as packets (padding
       dropped). What a middle proxy needs; without it the bytes go unframed, as the fake
       DC takes them directly. */
    bool framed;
};

struct pcli {
    int fd;
    bool tls;
    size_t max_record;
    int timeout_ms;
    struct pctr enc, dec;
    uint8_t reply_keyiv[48]; /* key || IV of dec (pobfs_reply_keyiv of our header) */
    /* FakeTLS record reader */
    uint8_t rhdr[5];
    size_t rhdr_n, rleft;
    /* framed (pcli_opts.framed): the packet reader, over the decrypted stream */
    bool framed;
    uint8_t fhdr[4];
    size_t fhdr_n, fleft, fpad;
};

/*
 * FakeTLS ClientHello for key/sni at unix time ts into out (cap >= 517). Returns its length.
 * The session id and key share are random; the digest makes it valid for key.
 */
size_t pcli_hello(uint8_t *out, size_t cap, const uint8_t key[16], const char *sni, int64_t ts);
/* The same, padded to len bytes (517 .. 5 + 16384; cap >= len); sni may be NULL (no SNI
   extension). Returns len, or 0 on bad arguments. */
size_t pcli_hello_sized(uint8_t *out, size_t cap, const uint8_t key[16], const char *sni,
                        int64_t ts, size_t len);

int pcli_connect(struct pcli *c, uint16_t port, const struct pcli_opts *o);
int pcli_send(struct pcli *c, const void *p, size_t n);
/* Up to n plaintext bytes (> 0), 0 on EOF, or -errno. Blocks until at least one byte. */
ssize_t pcli_recv(struct pcli *c, void *p, size_t n);
int pcli_recv_all(struct pcli *c, void *p, size_t n);
void pcli_close(struct pcli *c);

/* Send "ECHO" then total bytes of pstream(seed), up to chunk bytes (0 = 64 KiB) per send()
   (with FakeTLS cut into records of at most max_record payload bytes, several per send),
   while reading and verifying the echo, interleaved (non-blocking + poll). */
int pcli_echo(struct pcli *c, uint32_t seed, uint64_t total, size_t chunk);
/* Upload total bytes; the fake DC verifies and answers "SINK-OK!". */
int pcli_sink(struct pcli *c, uint32_t seed, uint64_t total, size_t chunk);
/* Download total bytes from the fake DC and verify them. */
int pcli_source(struct pcli *c, uint32_t seed, uint64_t total);

/* The same two transfers with at most window bytes in flight: an upload never runs more
   than window bytes ahead of what the fake DC acknowledged ("SNKA"), and a download grants
   the DC credit for at most window bytes beyond what arrived ("SRCW"). */
int pcli_sink_window(struct pcli *c, uint32_t seed, uint64_t total, uint64_t window);
int pcli_source_window(struct pcli *c, uint32_t seed, uint64_t total, uint64_t window);

#endif
