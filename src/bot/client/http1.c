/*
 * http1.c: the HTTP/1.1 response parser of the lean transport (see http1.h). Pure: it reads
 * the bytes it is given and returns events; the fuzz target fuzz/bot_http1 feeds it.
 *
 * States: HEAD (status line + headers, parsed once the blank line is in view), then one of
 * LENGTH (Content-Length bytes), CLOSE (until EOF), CHUNK_SIZE / CHUNK_DATA / CHUNK_CRLF /
 * TRAILERS (chunked), then DONE. A state error is sticky: feeding again repeats it.
 */
#include "bot/client/http1.h"

#include <string.h>

#define MAX_CHUNK_LINE 1024
#define MAX_SIZE       ((uint64_t)1 << 60)

enum {
    ST_HEAD,
    ST_LENGTH,
    ST_CLOSE,
    ST_CHUNK_SIZE,
    ST_CHUNK_DATA,
    ST_CHUNK_CRLF,
    ST_TRAILERS,
    ST_DONE,
    ST_ERROR,
};

void tg__h1_init(tg__h1 *h, size_t max_head)
{
    memset(h, 0, sizeof *h);
    h->max_head = max_head ? max_head : TG__H1_DEFAULT_MAX_HEAD;
    h->state = ST_HEAD;
}

static enum tg__h1_ev fail(tg__h1 *h, const char *why, uint64_t at)
{
    h->state = ST_ERROR;
    h->err = why;
    h->err_at = at;
    return TG__H1_ERROR;
}

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
}

/* Case-insensitive equality of p[0..n) with the lower-case literal s. */
static bool ieq(const char *p, size_t n, const char *s)
{
    size_t m = strlen(s);
    if (n != m)
        return false;
    for (size_t i = 0; i < n; i++)
        if (lower(p[i]) != s[i])
            return false;
    return true;
}

static bool is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Offset just past the blank line ending the head in p[0..n), or 0 if not there yet. */
static size_t head_end(const char *p, size_t n)
{
    for (const char *q = p; (q = memchr(q, '\n', (size_t)(p + n - q))) != NULL; q++) {
        size_t i = (size_t)(q - p) + 1;
        if (i < n && p[i] == '\n')
            return i + 1;
        if (i + 1 < n && p[i] == '\r' && p[i + 1] == '\n')
            return i + 2;
    }
    return 0;
}

/* One line of p[0..n) ending at '\n' (CR stripped); returns its length incl. the LF. */
static size_t line_len(const char *p, size_t n, size_t *content)
{
    const char *lf = memchr(p, '\n', n);
    if (!lf)
        return 0;
    size_t c = (size_t)(lf - p);
    if (c > 0 && p[c - 1] == '\r')
        c--;
    *content = c;
    return (size_t)(lf - p) + 1;
}

static bool parse_u64(const char *p, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9' || v > MAX_SIZE / 10)
            return false;
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    if (v > MAX_SIZE)
        return false;
    *out = v;
    return true;
}

static bool parse_status(tg__h1 *h, const char *p, size_t n)
{
    /* "HTTP/1.x SSS[ reason]" */
    if (n < 12 || memcmp(p, "HTTP/1.", 7) != 0 || p[7] < '0' || p[7] > '9' || p[8] != ' ')
        return false;
    for (size_t i = 9; i < 12; i++)
        if (p[i] < '0' || p[i] > '9')
            return false;
    if (n > 12 && p[12] != ' ')
        return false;
    h->minor = p[7] - '0';
    h->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
    return h->status >= 100;
}

/* Comma-separated tokens of a Connection or Transfer-Encoding value, lower-cased compare. */
static bool has_token(const char *v, size_t n, const char *tok, bool *last_is)
{
    bool found = false;
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t s = i;
        while (i < n && v[i] != ',')
            i++;
        size_t e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
            e--;
        if (e == s)
            continue;
        bool is = ieq(v + s, e - s, tok);
        found |= is;
        if (last_is)
            *last_is = is;
    }
    return found;
}

struct head_flags {
    bool te, close, keep;
    uint64_t length;
    bool has_length;
};

static const char *header(tg__h1 *h, const char *p, size_t n, struct head_flags *f)
{
    const char *colon = memchr(p, ':', n);
    if (n > 0 && (p[0] == ' ' || p[0] == '\t'))
        return "folded header lines are not allowed";
    if (!colon || colon == p)
        return "header line without a name and ':'";
    size_t nl = (size_t)(colon - p);
    for (size_t i = 0; i < nl; i++)
        if (!is_tchar((unsigned char)p[i]))
            return "invalid character in a header name";
    const char *v = colon + 1, *end = p + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    size_t vl = (size_t)(end - v);
    if (ieq(p, nl, "content-length")) {
        uint64_t len;
        if (!parse_u64(v, vl, &len))
            return "Content-Length is not a valid size";
        if (f->has_length && len != f->length)
            return "conflicting Content-Length headers";
        f->has_length = true;
        f->length = len;
    } else if (ieq(p, nl, "transfer-encoding")) {
        bool last = false;
        has_token(v, vl, "chunked", &last);
        if (!last)
            return "unsupported Transfer-Encoding (only chunked is accepted)";
        if (has_token(v, vl, "gzip", NULL) || has_token(v, vl, "deflate", NULL) ||
            has_token(v, vl, "compress", NULL))
            return "unsupported Transfer-Encoding (only chunked is accepted)";
        f->te = true;
    } else if (ieq(p, nl, "connection")) {
        f->close |= has_token(v, vl, "close", NULL);
        f->keep |= has_token(v, vl, "keep-alive", NULL);
    }
    (void)h;
    return NULL;
}

/* Set framing and keep-alive from the parsed head. */
static void framing(tg__h1 *h, const struct head_flags *f)
{
    h->keep_alive = h->minor >= 1 ? !f->close : f->keep && !f->close;
    h->has_length = f->has_length;
    h->length = f->length;
    if (h->status == 204 || h->status == 304) {
        h->state = ST_DONE;
    } else if (f->te) {
        h->chunked = true;
        h->has_length = false;
        if (f->has_length)
            h->keep_alive = false; /* smuggling-shaped answer: never reuse the connection */
        h->state = ST_CHUNK_SIZE;
    } else if (f->has_length) {
        h->left = f->length;
        h->state = f->length ? ST_LENGTH : ST_DONE;
    } else {
        h->until_close = true;
        h->keep_alive = false;
        h->state = ST_CLOSE;
    }
}

static enum tg__h1_ev feed_head(tg__h1 *h, const char *p, size_t n, size_t *used)
{
    size_t end = head_end(p, n);
    if (end == 0 || end > h->max_head) {
        if (end > h->max_head || n >= h->max_head)
            return fail(h, "the response head is larger than the limit", h->pos);
        return TG__H1_MORE;
    }
    size_t c = 0, off = line_len(p, end, &c);
    if (!parse_status(h, p, c))
        return fail(h, "malformed status line (expected \"HTTP/1.x NNN reason\")", h->pos);
    struct head_flags f = {0};
    for (;;) {
        size_t l = line_len(p + off, end - off, &c);
        if (c == 0) {
            off += l;
            break;
        }
        const char *why = header(h, p + off, c, &f);
        if (why)
            return fail(h, why, h->pos + off);
        off += l;
    }
    *used = off;
    h->pos += off;
    if (h->status == 101)
        return fail(h, "unexpected 101 Switching Protocols", h->pos);
    if (h->status < 200) { /* interim answer: the real one follows */
        h->status = 0;
        return TG__H1_MORE;
    }
    framing(h, &f);
    return TG__H1_HEAD;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = lower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static enum tg__h1_ev feed_chunk_size(tg__h1 *h, const char *p, size_t n, size_t *used)
{
    size_t c, l = line_len(p, n, &c);
    if (l == 0)
        return n > MAX_CHUNK_LINE ? fail(h, "chunk-size line too long", h->pos) : TG__H1_MORE;
    if (l > MAX_CHUNK_LINE)
        return fail(h, "chunk-size line too long", h->pos);
    uint64_t v = 0;
    size_t i = 0;
    for (; i < c && hexval(p[i]) >= 0; i++) {
        if (v > MAX_SIZE >> 4)
            return fail(h, "chunk size too large", h->pos);
        v = (v << 4) | (uint64_t)hexval(p[i]);
    }
    if (i == 0)
        return fail(h, "chunk size is not a hexadecimal number", h->pos);
    while (i < c && (p[i] == ' ' || p[i] == '\t'))
        i++;
    if (i < c && p[i] != ';')
        return fail(h, "garbage after the chunk size", h->pos + i);
    *used = l;
    h->pos += l;
    h->left = v;
    h->state = v ? ST_CHUNK_DATA : ST_TRAILERS;
    return TG__H1_MORE;
}

static enum tg__h1_ev feed_trailers(tg__h1 *h, const char *p, size_t n, size_t *used)
{
    size_t off = 0;
    for (;;) {
        size_t c, l = line_len(p + off, n - off, &c);
        if (l == 0) {
            *used = off;
            h->pos += off;
            if (h->trailer_bytes + (n - off) > h->max_head)
                return fail(h, "the trailers are larger than the limit", h->pos);
            return TG__H1_MORE;
        }
        h->trailer_bytes += l;
        if (h->trailer_bytes > h->max_head)
            return fail(h, "the trailers are larger than the limit", h->pos + off);
        off += l;
        if (c == 0)
            break;
    }
    *used = off;
    h->pos += off;
    h->state = ST_DONE;
    return TG__H1_MORE;
}

static enum tg__h1_ev feed_data(tg__h1 *h, const char *p, size_t n, size_t *used, const char **body,
                                size_t *body_len)
{
    size_t take = n;
    if (h->state != ST_CLOSE && h->left < take)
        take = (size_t)h->left;
    if (take == 0)
        return TG__H1_MORE;
    *body = p;
    *body_len = take;
    *used = take;
    h->pos += take;
    if (h->state != ST_CLOSE) {
        h->left -= take;
        if (h->left == 0)
            h->state = h->state == ST_LENGTH ? ST_DONE : ST_CHUNK_CRLF;
    }
    return TG__H1_BODY;
}

uint64_t tg__h1_body_left(const tg__h1 *h)
{
    if (h->state == ST_CLOSE)
        return UINT64_MAX;
    return h->state == ST_LENGTH || h->state == ST_CHUNK_DATA ? h->left : 0;
}

void tg__h1_body_skip(tg__h1 *h, size_t n)
{
    if (n == 0 || tg__h1_body_left(h) < n)
        return;
    h->pos += n;
    if (h->state == ST_CLOSE)
        return;
    h->left -= n;
    if (h->left == 0)
        h->state = h->state == ST_LENGTH ? ST_DONE : ST_CHUNK_CRLF;
}

static enum tg__h1_ev feed_chunk_crlf(tg__h1 *h, const char *p, size_t n, size_t *used)
{
    size_t k = 0;
    if (n >= 1 && p[0] == '\n')
        k = 1;
    else if (n >= 2 && p[0] == '\r' && p[1] == '\n')
        k = 2;
    else if (n < 2 && (n == 0 || p[0] == '\r'))
        return TG__H1_MORE;
    else
        return fail(h, "chunk data not followed by CRLF (bad chunk size?)", h->pos);
    *used = k;
    h->pos += k;
    h->state = ST_CHUNK_SIZE;
    return TG__H1_MORE;
}

/* One step; TG__H1_MORE with *used > 0 means "call again with the rest". */
static enum tg__h1_ev step(tg__h1 *h, const char *p, size_t n, size_t *used, const char **body,
                           size_t *body_len)
{
    switch (h->state) {
    case ST_HEAD:
        return feed_head(h, p, n, used);
    case ST_LENGTH:
    case ST_CLOSE:
    case ST_CHUNK_DATA:
        return feed_data(h, p, n, used, body, body_len);
    case ST_CHUNK_SIZE:
        return feed_chunk_size(h, p, n, used);
    case ST_CHUNK_CRLF:
        return feed_chunk_crlf(h, p, n, used);
    case ST_TRAILERS:
        return feed_trailers(h, p, n, used);
    case ST_DONE:
        return TG__H1_DONE;
    default:
        return TG__H1_ERROR;
    }
}

enum tg__h1_ev tg__h1_feed(tg__h1 *h, const char *p, size_t n, size_t *used, const char **body,
                           size_t *body_len)
{
    *used = 0;
    /* Framing steps consume bytes without an event: go on while they make progress (each
     * consumes at least one byte, so the loop ends within n + a few iterations). */
    for (size_t guard = 0; guard <= n + 8; guard++) {
        size_t u = 0;
        enum tg__h1_ev ev = step(h, p + *used, n - *used, &u, body, body_len);
        *used += u;
        if (ev != TG__H1_MORE || (u == 0 && h->state != ST_DONE))
            return ev;
        if (h->state == ST_DONE)
            return TG__H1_DONE;
    }
    return TG__H1_MORE;
}

enum tg__h1_ev tg__h1_eof(tg__h1 *h)
{
    switch (h->state) {
    case ST_CLOSE:
    case ST_DONE:
        h->state = ST_DONE;
        return TG__H1_DONE;
    case ST_HEAD:
        return fail(h, "connection closed before the response head was complete", h->pos);
    case ST_LENGTH:
        return fail(h, "connection closed before Content-Length bytes arrived", h->pos);
    case ST_ERROR:
        return TG__H1_ERROR;
    default:
        return fail(h, "connection closed in the middle of the chunked body", h->pos);
    }
}
