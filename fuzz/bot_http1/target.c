/*
 * fuzz bot_http1: the lean transport's HTTP/1.1 response parser (src/bot/client/http1.c).
 * The first byte picks a read size, a head limit and whether body bytes bypass the parser
 * (tg__h1_body_skip, as the lean transport reads a large body); the rest is the answer. The
 * answer is parsed twice, whole and in slices as a socket would deliver it, through a bounded
 * buffer like the transport's: both runs must end the same way (event, status, keep-alive,
 * body length and checksum, bytes left over), every body span must lie inside the buffer
 * given, and nothing may crash, hang or read out of bounds.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bot/client/http1.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct run {
    int end, status, keep;
    uint64_t body_len, sum, left;
};

static void add_body(struct run *r, const char *b, size_t bl)
{
    r->body_len += bl;
    for (size_t i = 0; i < bl; i++)
        r->sum = r->sum * 31 + (unsigned char)b[i];
}

/* direct: body bytes the parser need not see bypass it (tg__h1_body_left / skip). */
static void parse(const char *in, size_t n, size_t slice, size_t max_head, bool direct,
                  struct run *r)
{
    static char buf[1 << 16];
    size_t have = 0, fed = 0;
    tg__h1 h;
    tg__h1_init(&h, max_head);
    memset(r, 0, sizeof *r);
    for (size_t guard = 0; guard < 4 * n + 64; guard++) {
        size_t used, bl = 0;
        const char *b = NULL;
        enum tg__h1_ev ev = tg__h1_feed(&h, buf, have, &used, &b, &bl);
        if (used > have)
            abort();
        if (ev == TG__H1_HEAD) {
            r->status = h.status;
            r->keep = h.keep_alive;
        } else if (ev == TG__H1_BODY) {
            if (!b || b < buf || b + bl > buf + have || bl == 0)
                abort();
            add_body(r, b, bl);
        }
        memmove(buf, buf + used, have - used);
        have -= used;
        if (ev == TG__H1_DONE || ev == TG__H1_ERROR) {
            r->end = ev;
            r->left = have + n - fed;
            return;
        }
        if (ev != TG__H1_MORE)
            continue;
        uint64_t left = tg__h1_body_left(&h);
        if (direct && have == 0 && fed < n && left > 0) {
            size_t k = n - fed < slice ? n - fed : slice;
            k = left < k ? (size_t)left : k;
            add_body(r, in + fed, k);
            tg__h1_body_skip(&h, k);
            fed += k;
            continue;
        }
        if (fed == n || have == sizeof buf) {
            r->end = fed == n ? (int)tg__h1_eof(&h) : -1;
            r->left = have + n - fed;
            return;
        }
        size_t k = n - fed < slice ? n - fed : slice;
        if (k > sizeof buf - have)
            k = sizeof buf - have;
        memcpy(buf + have, in + fed, k);
        have += k;
        fed += k;
    }
    abort(); /* the parser stopped making progress */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 60000)
        return 0;
    size_t slice = (size_t)(data[0] & 0x1f) + 1;
    size_t max_head = (data[0] & 0x20) ? 64 : 0;
    struct run whole, sliced;
    bool direct = (data[0] & 0x40) != 0;
    parse((const char *)data + 1, size - 1, 1 << 16, max_head, false, &whole);
    parse((const char *)data + 1, size - 1, slice, max_head, direct, &sliced);
    /* Where the bytes after an error stop differs with the slicing; everything else may not. */
    if (whole.end != sliced.end || whole.status != sliced.status || whole.keep != sliced.keep ||
        whole.body_len != sliced.body_len || whole.sum != sliced.sum ||
        (whole.end == TG__H1_DONE && whole.left != sliced.left))
        abort();
    return 0;
}
