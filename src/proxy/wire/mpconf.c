/* mpconf: Telegram's middle-proxy list (mpconf.h). */
#include "proxy/wire/mpconf.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct lex {
    const char *s;
    size_t n, at;
    unsigned line;
    char *err;
    size_t errlen;
};

static int fail(struct lex *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct lex *l, const char *fmt, ...)
{
    char why[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (l->errlen)
        snprintf(l->err, l->errlen, "line %u: %s", l->line, why);
    return -1;
}

static bool blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Skip blanks and comments. */
static void skip(struct lex *l)
{
    while (l->at < l->n) {
        char c = l->s[l->at];
        if (c == '#') {
            while (l->at < l->n && l->s[l->at] != '\n')
                l->at++;
        } else if (blank(c)) {
            if (c == '\n')
                l->line++;
            l->at++;
        } else {
            return;
        }
    }
}

/* The next word (up to a blank, ';' or '#'): at *w, *wn long. */
static void word(struct lex *l, const char **w, size_t *wn)
{
    skip(l);
    size_t start = l->at;
    while (l->at < l->n && !blank(l->s[l->at]) && l->s[l->at] != ';' && l->s[l->at] != '#')
        l->at++;
    *w = l->s + start;
    *wn = l->at - start;
}

static bool is(const char *w, size_t wn, const char *lit)
{
    return wn == strlen(lit) && memcmp(w, lit, wn) == 0;
}

static int number(struct lex *l, long lo, long hi, long *out, const char *what)
{
    const char *w;
    size_t wn;
    word(l, &w, &wn);
    size_t i = 0;
    bool neg = false;
    if (wn && (w[0] == '-' || w[0] == '+'))
        neg = w[0] == '-', i = 1;
    if (i == wn || wn - i > 9)
        return fail(l, "expected %s (an integer %ld..%ld)", what, lo, hi);
    long v = 0;
    for (; i < wn; i++) {
        if (w[i] < '0' || w[i] > '9')
            return fail(l, "expected %s (an integer %ld..%ld)", what, lo, hi);
        v = v * 10 + (w[i] - '0');
    }
    if (neg)
        v = -v;
    if (v < lo || v > hi)
        return fail(l, "%s %ld out of range, expected %ld..%ld", what, v, lo, hi);
    *out = v;
    return 0;
}

static int address(struct lex *l, struct mpconf_proxy *p)
{
    const char *w;
    size_t wn;
    word(l, &w, &wn);
    const char *colon = NULL;
    for (size_t i = 0; i < wn; i++)
        if (w[i] == ':')
            colon = w + i;
    if (wn == 0 || colon == NULL || colon == w + wn - 1)
        return fail(l, "expected ADDR:PORT");
    char host[64];
    size_t hn = (size_t)(colon - w);
    const char *h = w;
    bool bracket = hn >= 2 && w[0] == '[' && w[hn - 1] == ']';
    if (bracket)
        h++, hn -= 2;
    if (hn == 0 || hn >= sizeof host)
        return fail(l, "expected an IP address before the port");
    memcpy(host, h, hn);
    host[hn] = '\0';
    if (!bracket && inet_pton(AF_INET, host, p->ip) == 1)
        p->family = AF_INET;
    else if (bracket && inet_pton(AF_INET6, host, p->ip) == 1)
        p->family = AF_INET6;
    else {
        for (char *q = host; *q; q++)
            if ((unsigned char)*q < 0x20 || (unsigned char)*q > 0x7e)
                *q = '?';
        return fail(l, "'%s' is not an IPv4 address or an IPv6 address in brackets", host);
    }
    long port = 0;
    size_t pn = (size_t)(w + wn - colon - 1);
    if (pn > 5)
        return fail(l, "port out of range, expected 1..65535");
    for (size_t i = 0; i < pn; i++) {
        char c = colon[1 + i];
        if (c < '0' || c > '9')
            return fail(l, "bad port, expected 1..65535");
        port = port * 10 + (c - '0');
    }
    if (port < 1 || port > 65535)
        return fail(l, "port out of range, expected 1..65535");
    p->port = (uint16_t)port;
    return 0;
}

static int proxy(struct lex *l, struct mpconf *c, long dc)
{
    if (c->n == MPCONF_MAX)
        return fail(l, "more than %d middle proxies", MPCONF_MAX);
    struct mpconf_proxy *p = &c->proxies[c->n];
    memset(p, 0, sizeof *p);
    p->dc = (int16_t)dc;
    if (address(l, p) != 0)
        return -1;
    c->n++;
    return 0;
}

int mpconf_parse(const char *text, size_t n, struct mpconf *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    struct lex l = {.s = text, .n = n, .line = 1, .err = err, .errlen = errlen};
    if (errlen)
        err[0] = '\0';
    for (;;) {
        skip(&l);
        if (l.at == l.n)
            break;
        const char *w;
        size_t wn;
        word(&l, &w, &wn);
        long v = 0;
        int rc;
        if (is(w, wn, "proxy_for")) {
            rc = number(&l, -32768, 32767, &v, "a DC id");
            if (rc == 0)
                rc = proxy(&l, out, v);
        } else if (is(w, wn, "proxy")) {
            rc = proxy(&l, out, 0);
        } else if (is(w, wn, "default")) {
            rc = number(&l, -32768, 32767, &v, "a DC id");
            out->has_default = true;
            out->default_dc = (int16_t)v;
        } else if (is(w, wn, "timeout")) {
            rc = number(&l, 10, 30000, &v, "a timeout in ms");
            out->timeout_ms = (uint32_t)v;
        } else if (is(w, wn, "min_connections")) {
            rc = number(&l, 1, 1000, &v, "a connection count");
            out->min_connections = (uint32_t)v;
        } else if (is(w, wn, "max_connections")) {
            rc = number(&l, 1, 1000, &v, "a connection count");
            out->max_connections = (uint32_t)v;
        } else {
            char shown[24];
            snprintf(shown, sizeof shown, "%.*s", wn > 20 ? 20 : (int)wn, w);
            for (char *q = shown; *q; q++)
                if ((unsigned char)*q < 0x20 || (unsigned char)*q > 0x7e)
                    *q = '?';
            return fail(&l,
                        "unknown statement '%s', expected proxy_for, proxy, default, "
                        "timeout, min_connections or max_connections",
                        wn ? shown : ";");
        }
        if (rc != 0)
            return -1;
        skip(&l);
        if (l.at == l.n || l.s[l.at] != ';')
            return fail(&l, "expected ';'");
        l.at++;
    }
    if (out->n == 0)
        return fail(&l, "no middle proxy in the file (no proxy_for line)");
    return 0;
}

size_t mpconf_for(const struct mpconf *c, int16_t dc, size_t *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < c->n && k < cap; i++)
        if (c->proxies[i].dc == dc)
            out[k++] = i;
    return k;
}
