/*
 * socks5: the client side of SOCKS5 (RFC 1928) with username/password authentication
 * (RFC 1929), for chaining DC connections through upstream proxies ([network] proxies), and
 * the parser of the socks5:// URLs that configure them.
 *
 * socks5_client is a pure state machine: socks5_client_init() builds the greeting,
 * socks5_client_feed() is given the bytes read from the upstream and answers "need more",
 * "send the next request" (the authentication or the CONNECT), "connected" or an exact
 * failure. It never reads past the end of the current reply, so bytes that follow the
 * CONNECT reply in the same read (the target's first bytes) stay with the caller.
 *
 * Pure computation over caller buffers: no I/O, no allocation. Thread-safety: a client is
 * used by one thread at a time; the functions are reentrant. Secrets: the password is kept
 * in the client and the upstream struct only; no message here ever contains it.
 * Fuzzed by fuzz/proxy_socks5 (the reply parser and the URL parser).
 */
#ifndef TGPROXY_SOCKS5_H
#define TGPROXY_SOCKS5_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "proxy/wire/value.h"

#define SOCKS5_CRED_MAX  255 /* RFC 1929: user name and password are 1..255 bytes */
#define SOCKS5_REQ_MAX   513 /* longest request: auth 1 + 1 + 255 + 1 + 255 */
#define SOCKS5_REPLY_MAX 262 /* longest CONNECT reply: 4 + 1 + 255 (domain) + 2 */

/* One upstream from the configuration: socks5://[user[:pass]@]host:port. */
struct socks5_upstream {
    struct value_hostport addr; /* the proxy itself; host names resolved by the engine */
    bool auth;                  /* user info present: offer method 0x02 only */
    char user[SOCKS5_CRED_MAX + 1], pass[SOCKS5_CRED_MAX + 1]; /* URL-decoded; pass: never log */
    size_t user_len, pass_len;
};

/*
 * Parse url[0..len) ("socks5://user:pass@host:port", as mtg accepts them; user and pass are
 * percent-decoded, "[v6]:port" for IPv6). Returns 0, or -EINVAL with a reason in err (err may
 * be NULL) that never quotes the user info.
 */
int socks5_url_parse(const char *url, size_t len, struct socks5_upstream *out, char *err,
                     size_t errlen);

/* "socks5://host:port" (no user info: safe to log) into out; snprintf's return. */
int socks5_url_format(const struct socks5_upstream *u, char *out, size_t cap);

/* Results of socks5_client_feed; failures are negative. */
enum socks5_status {
    SOCKS5_MORE = 0,         /* the reply is incomplete: read more */
    SOCKS5_SEND = 1,         /* a new request is pending: send socks5_client_pending() */
    SOCKS5_CONNECTED = 2,    /* the tunnel is open */
    SOCKS5_E_VERSION = -1,   /* a reply's version byte is not 5 (or 1 for the auth reply) */
    SOCKS5_E_NO_METHOD = -2, /* the server accepts none of the offered methods (0xFF) */
    SOCKS5_E_METHOD = -3,    /* the server chose a method that was not offered */
    SOCKS5_E_AUTH = -4,      /* the server refused the user name and password */
    SOCKS5_E_REPLY = -5,     /* CONNECT failed; the REP code is in socks5_client.rep */
    SOCKS5_E_ATYP = -6,      /* the CONNECT reply has an unknown address type */
    SOCKS5_E_STATE = -7,     /* fed after the end (connected or failed) */
    SOCKS5_E_ARG = -8,       /* init: bad target (family, name length) or credentials */
};

/* Where the upstream should connect: a numeric address, or a host name it resolves. */
struct socks5_target {
    const struct sockaddr *sa; /* AF_INET or AF_INET6 with the port; NULL when host is set */
    const char *host;          /* 1..255 bytes, used when sa is NULL */
    uint16_t port;             /* with host, host byte order */
};

struct socks5_client {
    int state;                   /* private */
    uint8_t out[SOCKS5_REQ_MAX]; /* the request to send next */
    size_t out_len;
    uint8_t in[SOCKS5_REPLY_MAX]; /* the reply read so far */
    size_t in_len;
    uint8_t connect[SOCKS5_REPLY_MAX]; /* the CONNECT request, built at init */
    size_t connect_len;
    const struct socks5_upstream *up; /* borrowed: credentials */
    uint8_t rep;                      /* REP of a failed CONNECT (SOCKS5_E_REPLY) */
};

/*
 * Start a negotiation with up (borrowed, must outlive c) for target t: builds the greeting,
 * which socks5_client_pending() returns. SOCKS5_SEND, or SOCKS5_E_ARG (nothing to send).
 */
int socks5_client_init(struct socks5_client *c, const struct socks5_upstream *up,
                       const struct socks5_target *t);

/* The request to send now (after init or a SOCKS5_SEND) and its length. */
const uint8_t *socks5_client_pending(const struct socks5_client *c, size_t *len);

/*
 * Bytes b[0..n) read from the upstream. *used receives how many were consumed: all of them
 * for SOCKS5_MORE, up to the end of the reply otherwise (with SOCKS5_CONNECTED, b[*used..n)
 * are the target's first bytes). Returns an enum socks5_status.
 */
int socks5_client_feed(struct socks5_client *c, const uint8_t *b, size_t n, size_t *used);

/* A short reason for a status, e.g. "upstream refused the user name or password";
   for SOCKS5_E_REPLY with c given, the RFC's name of c->rep. Never NULL. */
const char *socks5_strerror(int status, const struct socks5_client *c);

#endif
