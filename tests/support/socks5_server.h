/*
 * socks5_server: a small SOCKS5 proxy (RFC 1928) on 127.0.0.1 for tests.
 *
 * Method "no authentication", or username/password (RFC 1929) once socks5_server_require_auth
 * was called; command CONNECT only, address types IPv4 and domain name.
 * It never touches the network: a domain name is resolved only if it is "localhost" or an
 * IPv4 literal, and only targets in 127.0.0.0/8 are connected to. Anything else gets the
 * RFC's error reply: 0x07 command not supported, 0x08 address type not supported, 0x04 host
 * unreachable (a name it will not resolve), 0x02 not allowed (a non-loopback address), 0x05
 * connection refused; a greeting without method 0x00 gets method 0xFF.
 *
 * One thread accepts; each client connection gets its own thread, which runs the handshake
 * (each read bounded by SOCKS5_IO_TIMEOUT_MS) and then relays both ways (half-closes passed
 * on) until both sides have closed, an error, or socks5_server_stop. Every wait is a poll
 * with a timeout that also watches the stop event, so stop returns promptly.
 *
 * Records: one per request read (whatever its command or outcome), with the command, address
 * type, target host:port, the reply code sent, the bytes relayed each way and the first
 * SOCKS5_HEAD_KEEP bytes the client sent through the tunnel.
 *
 * Ownership: socks5_server_start returns a handle freed by socks5_server_stop (joins every
 * thread, closes every socket, frees every record). Thread-safety: every function may be
 * called from any thread while the server runs; records are copied out under a lock.
 */
#ifndef TGKIT_TEST_SOCKS5_SERVER_H
#define TGKIT_TEST_SOCKS5_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SOCKS5_IO_TIMEOUT_MS 2000 /* handshake reads and the outgoing connect, ms */
#define SOCKS5_HEAD_KEEP     512  /* bytes of the client's tunnelled stream kept per record */

/* RFC 1928 section 4 and 6 constants. */
enum {
    SOCKS5_CMD_CONNECT = 0x01,
    SOCKS5_CMD_BIND = 0x02,
    SOCKS5_CMD_UDP = 0x03,
    SOCKS5_ATYP_IPV4 = 0x01,
    SOCKS5_ATYP_DOMAIN = 0x03,
    SOCKS5_ATYP_IPV6 = 0x04,
    SOCKS5_REP_OK = 0x00,
    SOCKS5_REP_FAILURE = 0x01,
    SOCKS5_REP_NOT_ALLOWED = 0x02,
    SOCKS5_REP_NET_UNREACH = 0x03,
    SOCKS5_REP_HOST_UNREACH = 0x04,
    SOCKS5_REP_REFUSED = 0x05,
    SOCKS5_REP_BAD_CMD = 0x07,
    SOCKS5_REP_BAD_ATYP = 0x08,
};

typedef enum socks5_mode {
    SOCKS5_NORMAL = 0,           /* a working proxy */
    SOCKS5_CLOSE_AFTER_GREETING, /* read the greeting, then close without answering */
    SOCKS5_REFUSE_CONNECT,       /* answer every CONNECT with 0x05 connection refused */
    SOCKS5_HANG_AFTER_REQUEST    /* read the request, then answer nothing until the client
                                    closes or the server stops (at most SOCKS5_HANG_MS) */
} socks5_mode;

#define SOCKS5_HANG_MS 60000 /* longest a SOCKS5_HANG_AFTER_REQUEST client is kept */

typedef struct socks5_record {
    uint8_t cmd;                   /* CMD byte as received */
    uint8_t atyp;                  /* ATYP byte as received */
    char host[256];                /* dotted IPv4 or the domain name ("" for other address types) */
    uint16_t port;                 /* DST.PORT (0 if not read) */
    int reply;                     /* REP code sent, -1 if none was sent */
    uint64_t bytes_up, bytes_down; /* relayed client->target, target->client */
    unsigned char head[SOCKS5_HEAD_KEEP]; /* first bytes client->target */
    size_t head_len;
} socks5_record;

typedef struct socks5_server socks5_server;

/* Start on 127.0.0.1, ephemeral port. NULL on failure (message on stderr). */
socks5_server *socks5_server_start(socks5_mode mode);
void socks5_server_stop(socks5_server *s); /* NULL-safe */

/* From now on require method 0x02 with exactly this user name and password (RFC 1929): a
   greeting without 0x02 gets 0xFF, a wrong pair gets status 0x01 and is closed. Both 1..255
   bytes (longer ones are cut). */
void socks5_server_require_auth(socks5_server *s, const char *user, const char *pass);
/* Username/password sub-negotiations answered with failure so far. */
size_t socks5_server_auth_failures(socks5_server *s);

uint16_t socks5_server_port(const socks5_server *s);
/* "socks5://127.0.0.1:<port>" or "socks5h://..." into out (cap bytes). */
void socks5_server_url(const socks5_server *s, bool remote_dns, char *out, size_t cap);

/* TCP connections accepted so far. */
size_t socks5_server_connections(socks5_server *s);
/* Greetings answered with method 0x00 so far. */
size_t socks5_server_greetings(socks5_server *s);
size_t socks5_server_nrecords(socks5_server *s);
/* Copy record i (0-based, in arrival order) into *out; false if out of range. */
bool socks5_server_record(socks5_server *s, size_t i, socks5_record *out);

#endif
