/*
 * socks5: SOCKS5 client negotiation (RFC 1928, RFC 1929) as a pure state machine, and the
 * socks5:// URL parser. See socks5.h.
 */
#include "proxy/wire/socks5.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

enum { ST_METHOD, ST_AUTH, ST_CONNECT, ST_DONE, ST_FAILED };

enum {
    VER = 0x05,
    AUTH_VER = 0x01,
    M_NONE = 0x00,
    M_USERPASS = 0x02,
    M_REFUSED = 0xff,
    CMD_CONNECT = 0x01,
    ATYP_V4 = 0x01,
    ATYP_NAME = 0x03,
    ATYP_V6 = 0x04,
};

/* ---- URL ---- */

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Percent-decode s[0..n) into out (cap SOCKS5_CRED_MAX + 1, NUL-terminated). */
static int pct_decode(const char *s, size_t n, char *out, size_t *out_len)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '%') {
            int hi = i + 2 < n ? hexval(s[i + 1]) : -1;
            int lo = i + 2 < n ? hexval(s[i + 2]) : -1;
            if (hi < 0 || lo < 0)
                return -1;
            ch = (char)(hi << 4 | lo);
            i += 2;
        }
        if (ch == '\0' || k >= SOCKS5_CRED_MAX)
            return -1;
        out[k++] = ch;
    }
    out[k] = '\0';
    *out_len = k;
    return 0;
}

static int url_err(char *err, size_t errlen, const char *why)
{
    if (err && errlen)
        snprintf(err, errlen, "%s", why);
    return -EINVAL;
}

static int parse_userinfo(const char *s, size_t n, struct socks5_upstream *out, char *err,
                          size_t errlen)
{
    const char *colon = memchr(s, ':', n);
    size_t ulen = colon ? (size_t)(colon - s) : n;
    if (pct_decode(s, ulen, out->user, &out->user_len) != 0 || out->user_len == 0)
        return url_err(err, errlen,
                       "bad user name, expected 1..255 bytes after %-decoding "
                       "(%XX escapes, no %00)");
    if (colon) {
        size_t plen = n - ulen - 1;
        if (pct_decode(colon + 1, plen, out->pass, &out->pass_len) != 0 || out->pass_len == 0)
            return url_err(err, errlen,
                           "bad password, expected 1..255 bytes after %-decoding "
                           "(%XX escapes, no %00)");
    }
    out->auth = true;
    return 0;
}

int socks5_url_parse(const char *url, size_t len, struct socks5_upstream *out, char *err,
                     size_t errlen)
{
    static const char scheme[] = "socks5://";
    memset(out, 0, sizeof *out);
    if (len < sizeof scheme - 1 || strncmp(url, scheme, sizeof scheme - 1) != 0)
        return url_err(err, errlen, "expected a URL starting with socks5://");
    const char *s = url + sizeof scheme - 1, *end = url + len;
    const char *slash = memchr(s, '/', (size_t)(end - s));
    if (slash) {
        if (slash + 1 != end)
            return url_err(err, errlen,
                           "a path, query or fragment after host:port, expected "
                           "socks5://[user:pass@]host:port");
        end = slash;
    }
    const char *at = NULL;
    for (const char *p = s; p < end; p++)
        if (*p == '@')
            at = p; /* the last one: '@' may appear in a percent-less password */
    if (at) {
        if (parse_userinfo(s, (size_t)(at - s), out, err, errlen) != 0)
            return -EINVAL;
        s = at + 1;
    }
    char why[160];
    if (s == end || value_hostport_parse(s, (size_t)(end - s), &out->addr, why, sizeof why) != 0)
        return url_err(err, errlen, "expected host:port (or [v6]:port) after socks5://");
    if (out->addr.port == 0)
        return url_err(err, errlen, "port 0, expected a port 1..65535");
    return 0;
}

int socks5_url_format(const struct socks5_upstream *u, char *out, size_t cap)
{
    bool v6 = strchr(u->addr.host, ':') != NULL;
    return snprintf(out, cap, "socks5://%s%s%s:%u", v6 ? "[" : "", u->addr.host, v6 ? "]" : "",
                    (unsigned)u->addr.port);
}

/* ---- requests ---- */

static size_t build_connect(uint8_t *o, const struct socks5_target *t)
{
    size_t k = 0;
    o[k++] = VER;
    o[k++] = CMD_CONNECT;
    o[k++] = 0x00;
    uint16_t port_be;
    if (t->sa && t->sa->sa_family == AF_INET) {
        struct sockaddr_in a;
        memcpy(&a, t->sa, sizeof a);
        o[k++] = ATYP_V4;
        memcpy(o + k, &a.sin_addr, 4);
        k += 4;
        port_be = a.sin_port;
    } else if (t->sa && t->sa->sa_family == AF_INET6) {
        struct sockaddr_in6 a;
        memcpy(&a, t->sa, sizeof a);
        o[k++] = ATYP_V6;
        memcpy(o + k, &a.sin6_addr, 16);
        k += 16;
        port_be = a.sin6_port;
    } else if (!t->sa && t->host) {
        size_t n = strlen(t->host);
        if (n == 0 || n > 255)
            return 0;
        o[k++] = ATYP_NAME;
        o[k++] = (uint8_t)n;
        memcpy(o + k, t->host, n);
        k += n;
        port_be = htons(t->port);
    } else {
        return 0;
    }
    memcpy(o + k, &port_be, 2);
    return k + 2;
}

static void set_out(struct socks5_client *c, const uint8_t *b, size_t n)
{
    memcpy(c->out, b, n);
    c->out_len = n;
}

static void build_auth(struct socks5_client *c)
{
    const struct socks5_upstream *u = c->up;
    size_t k = 0;
    c->out[k++] = AUTH_VER;
    c->out[k++] = (uint8_t)u->user_len;
    memcpy(c->out + k, u->user, u->user_len);
    k += u->user_len;
    c->out[k++] = (uint8_t)u->pass_len;
    memcpy(c->out + k, u->pass, u->pass_len);
    c->out_len = k + u->pass_len;
}

int socks5_client_init(struct socks5_client *c, const struct socks5_upstream *up,
                       const struct socks5_target *t)
{
    memset(c, 0, sizeof *c);
    c->state = ST_FAILED;
    c->up = up;
    if (up->auth &&
        (up->user_len == 0 || up->user_len > SOCKS5_CRED_MAX || up->pass_len > SOCKS5_CRED_MAX))
        return SOCKS5_E_ARG;
    c->connect_len = build_connect(c->connect, t);
    if (c->connect_len == 0)
        return SOCKS5_E_ARG;
    const uint8_t greet[3] = {VER, 1, up->auth ? M_USERPASS : M_NONE};
    set_out(c, greet, sizeof greet);
    c->state = ST_METHOD;
    return SOCKS5_SEND;
}

const uint8_t *socks5_client_pending(const struct socks5_client *c, size_t *len)
{
    *len = c->out_len;
    return c->out;
}

/* ---- replies ---- */

/* Bytes the current reply needs in total, given what c->in holds (at least 2). */
static size_t reply_need(const struct socks5_client *c)
{
    if (c->state != ST_CONNECT || c->in_len < 4)
        return c->state == ST_CONNECT ? 4 : 2;
    switch (c->in[3]) {
    case ATYP_V4:
        return 4 + 4 + 2;
    case ATYP_V6:
        return 4 + 16 + 2;
    case ATYP_NAME:
        return c->in_len < 5 ? 5 : 5 + (size_t)c->in[4] + 2;
    default:
        return 4;
    }
}

static int fail(struct socks5_client *c, int status)
{
    c->state = ST_FAILED;
    return status;
}

/* The early checks any prefix allows: version, method, auth status, REP, ATYP. */
static int check_prefix(struct socks5_client *c)
{
    const uint8_t *in = c->in;
    if (c->state == ST_AUTH) {
        if (in[0] != AUTH_VER)
            return fail(c, SOCKS5_E_VERSION);
        return c->in_len >= 2 && in[1] != 0x00 ? fail(c, SOCKS5_E_AUTH) : SOCKS5_MORE;
    }
    if (in[0] != VER)
        return fail(c, SOCKS5_E_VERSION);
    if (c->in_len < 2)
        return SOCKS5_MORE;
    if (c->state == ST_METHOD) {
        uint8_t want = c->up->auth ? M_USERPASS : M_NONE;
        if (in[1] == M_REFUSED)
            return fail(c, SOCKS5_E_NO_METHOD);
        return in[1] != want ? fail(c, SOCKS5_E_METHOD) : SOCKS5_MORE;
    }
    if (in[1] != 0x00) {
        c->rep = in[1];
        return fail(c, SOCKS5_E_REPLY);
    }
    if (c->in_len >= 4 && in[3] != ATYP_V4 && in[3] != ATYP_V6 && in[3] != ATYP_NAME)
        return fail(c, SOCKS5_E_ATYP);
    return SOCKS5_MORE;
}

/* A whole reply is in c->in: move to the next state. */
static int advance(struct socks5_client *c)
{
    c->in_len = 0;
    if (c->state == ST_METHOD && c->up->auth) {
        build_auth(c);
        c->state = ST_AUTH;
        return SOCKS5_SEND;
    }
    if (c->state == ST_METHOD || c->state == ST_AUTH) {
        set_out(c, c->connect, c->connect_len);
        c->state = ST_CONNECT;
        return SOCKS5_SEND;
    }
    c->out_len = 0;
    c->state = ST_DONE;
    return SOCKS5_CONNECTED;
}

int socks5_client_feed(struct socks5_client *c, const uint8_t *b, size_t n, size_t *used)
{
    *used = 0;
    if (c->state == ST_DONE || c->state == ST_FAILED)
        return SOCKS5_E_STATE;
    c->out_len = 0; /* the pending request was sent before its reply could arrive */
    while (*used < n) {
        c->in[c->in_len++] = b[(*used)++];
        int r = check_prefix(c);
        if (r != SOCKS5_MORE)
            return r;
        if (c->in_len == reply_need(c))
            return advance(c);
    }
    return SOCKS5_MORE;
}

static const char *rep_name(uint8_t rep)
{
    static const char *const names[] = {
        "succeeded",
        "general SOCKS server failure",
        "connection not allowed by ruleset",
        "network unreachable",
        "host unreachable",
        "connection refused",
        "TTL expired",
        "command not supported",
        "address type not supported",
    };
    return rep < sizeof names / sizeof names[0] ? names[rep] : "unassigned reply code";
}

const char *socks5_strerror(int status, const struct socks5_client *c)
{
    switch (status) {
    case SOCKS5_MORE:
        return "negotiation incomplete";
    case SOCKS5_SEND:
        return "request pending";
    case SOCKS5_CONNECTED:
        return "connected";
    case SOCKS5_E_VERSION:
        return "upstream is not a SOCKS5 server (bad version byte)";
    case SOCKS5_E_NO_METHOD:
        return "upstream accepts none of the offered authentication methods";
    case SOCKS5_E_METHOD:
        return "upstream chose an authentication method that was not offered";
    case SOCKS5_E_AUTH:
        return "upstream refused the user name or password";
    case SOCKS5_E_REPLY:
        return c ? rep_name(c->rep) : "upstream refused the CONNECT";
    case SOCKS5_E_ATYP:
        return "upstream's CONNECT reply has an unknown address type";
    case SOCKS5_E_STATE:
        return "negotiation already over";
    case SOCKS5_E_ARG:
        return "bad target or credentials";
    default:
        return "unknown SOCKS5 status";
    }
}
