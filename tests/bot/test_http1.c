/*
 * test_http1: the lean transport's pure HTTP/1.1 response parser (src/bot/client/http1.c).
 * One table of answers, good and malformed (truncated, bad chunk sizes, huge heads, close
 * mid-body, Connection: close, ...), each fed three ways: whole, one byte at a time, and in
 * 7-byte slices, the way a socket may deliver it, and each of those again with body bytes
 * received around the parser (tg__h1_body_skip). All must agree on every outcome.
 */
#include "tgtest.h"

#include "bot/client/http1.h"

struct outcome {
    enum tg__h1_ev end; /* TG__H1_DONE or TG__H1_ERROR */
    int status;
    bool keep_alive;
    char body[256];
    size_t body_len;
    const char *err;
    size_t left; /* bytes after the response (pipelined or stray) */
};

static void take_event(tg__h1 *h, enum tg__h1_ev ev, const char *b, size_t bl, struct outcome *o)
{
    if (ev == TG__H1_HEAD) {
        o->status = h->status;
        o->keep_alive = h->keep_alive;
    } else if (ev == TG__H1_BODY) {
        assert_true(bl > 0);
        if (o->body_len + bl < sizeof o->body)
            memcpy(o->body + o->body_len, b, bl);
        o->body_len += bl;
    }
}

/* Feed input like a transport: a buffer that receives `slice` more bytes per "read", keeps
 * what the parser did not consume, and calls tg__h1_eof when the input is exhausted. With
 * direct, body bytes the parser does not need to see bypass it (tg__h1_body_left/skip), as
 * the lean transport receives a large body straight into the response buffer. */
static void run_mode(const char *in, size_t n, size_t slice, size_t max_head, bool direct,
                     struct outcome *o)
{
    static char buf[1 << 17];
    size_t have = 0, fed = 0;
    tg__h1 h;
    tg__h1_init(&h, max_head);
    memset(o, 0, sizeof *o);
    for (int guard = 0; guard < 1 << 20; guard++) {
        size_t used;
        const char *b = NULL;
        size_t bl = 0;
        enum tg__h1_ev ev = tg__h1_feed(&h, buf, have, &used, &b, &bl);
        assert_true(used <= have);
        take_event(&h, ev, b, bl, o);
        memmove(buf, buf + used, have - used);
        have -= used;
        if (ev == TG__H1_DONE || ev == TG__H1_ERROR) {
            o->end = ev;
            o->err = h.err;
            o->left = have + (n - fed);
            return;
        }
        if (ev != TG__H1_MORE)
            continue;
        uint64_t left = tg__h1_body_left(&h);
        if (direct && have == 0 && fed < n && left > 0) {
            size_t k = n - fed < slice ? n - fed : slice;
            k = left < k ? (size_t)left : k;
            take_event(&h, TG__H1_BODY, in + fed, k, o);
            tg__h1_body_skip(&h, k);
            fed += k;
            continue;
        }
        if (fed == n) {
            o->end = tg__h1_eof(&h);
            o->err = h.err;
            o->left = have;
            return;
        }
        size_t k = n - fed < slice ? n - fed : slice;
        memcpy(buf + have, in + fed, k);
        have += k;
        fed += k;
    }
    fail_msg("parser did not finish");
}

static void run(const char *in, size_t n, size_t slice, size_t max_head, struct outcome *o)
{
    run_mode(in, n, slice, max_head, false, o);
}

#define OK200 "HTTP/1.1 200 OK\r\n"

static const struct {
    const char *name;
    const char *in;
    bool done;        /* else an error */
    int status;       /* 0: no head reached */
    bool keep_alive;  /* when done */
    const char *body; /* when done */
    const char *err;  /* substring of the error, when not done */
} cases[] = {
    {"content-length", OK200 "Content-Length: 5\r\n\r\nhello", true, 200, true, "hello", NULL},
    {"length zero", OK200 "Content-Length: 0\r\n\r\n", true, 200, true, "", NULL},
    {"bare LF lines", "HTTP/1.1 200 OK\nContent-Length: 2\n\nhi", true, 200, true, "hi", NULL},
    {"chunked",
     OK200 "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=y\r\n world\r\n0\r\n\r\n", true,
     200, true, "hello world", NULL},
    {"chunked + trailers",
     OK200 "Transfer-Encoding: chunked\r\n\r\nA\r\n0123456789\r\n0\r\nX: 1\r\n\r\n", true, 200,
     true, "0123456789", NULL},
    {"connection close", OK200 "Connection: close\r\nContent-Length: 2\r\n\r\nok", true, 200, false,
     "ok", NULL},
    {"until close", OK200 "Content-Type: text/plain\r\n\r\nall of it", true, 200, false,
     "all of it", NULL},
    {"http/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", true, 200, false, "x", NULL},
    {"http/1.0 keep-alive",
     "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 1\r\n\r\nx", true, 200, true,
     "x", NULL},
    {"100 continue first", "HTTP/1.1 100 Continue\r\n\r\n" OK200 "Content-Length: 1\r\n\r\ny", true,
     200, true, "y", NULL},
    {"204 no body", "HTTP/1.1 204 No Content\r\n\r\n", true, 204, true, "", NULL},
    {"502 html", "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 6\r\n\r\n<html>", true, 502, true,
     "<html>", NULL},
    {"te and cl: no reuse",
     OK200 "Content-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nz\r\n0\r\n\r\n", true, 200,
     false, "z", NULL},
    {"case-insensitive names", OK200 "content-LENGTH: 3\r\nCONNECTION: CLOSE\r\n\r\nabc", true, 200,
     false, "abc", NULL},
    /* malformed */
    {"empty", "", false, 0, false, NULL, "before the response head"},
    {"truncated head", OK200 "Content-Len", false, 0, false, NULL, "before the response head"},
    {"truncated body", OK200 "Content-Length: 10\r\n\r\nhalf", false, 200, false, NULL,
     "before Content-Length"},
    {"close mid chunk", OK200 "Transfer-Encoding: chunked\r\n\r\n10\r\nabc", false, 200, false,
     NULL, "middle of the chunked body"},
    {"no last chunk", OK200 "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n", false, 200, false,
     NULL, "middle of the chunked body"},
    {"bad chunk size", OK200 "Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", false, 200,
     false, NULL, "not a hexadecimal"},
    {"chunk size garbage", OK200 "Transfer-Encoding: chunked\r\n\r\n3x\r\nabc\r\n0\r\n\r\n", false,
     200, false, NULL, "garbage after the chunk size"},
    {"chunk size too small", OK200 "Transfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n", false,
     200, false, NULL, "not followed by CRLF"},
    {"chunk size overflow", OK200 "Transfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFF\r\n", false,
     200, false, NULL, "too large"},
    {"negative length", OK200 "Content-Length: -1\r\n\r\n", false, 0, false, NULL,
     "Content-Length"},
    {"conflicting lengths", OK200 "Content-Length: 1\r\nContent-Length: 2\r\n\r\nab", false, 0,
     false, NULL, "conflicting"},
    {"gzip coding", OK200 "Transfer-Encoding: gzip, chunked\r\n\r\n", false, 0, false, NULL,
     "Transfer-Encoding"},
    {"not http", "SSH-2.0-OpenSSH\r\n\r\n", false, 0, false, NULL, "status line"},
    {"status letters", "HTTP/1.1 2x0 OK\r\n\r\n", false, 0, false, NULL, "status line"},
    {"folded header", OK200 "X: a\r\n  b\r\nContent-Length: 0\r\n\r\n", false, 0, false, NULL,
     "folded"},
    {"header without colon", OK200 "Nonsense\r\n\r\n", false, 0, false, NULL, "without a name"},
    {"bad header name", OK200 "Bad Name: 1\r\n\r\n", false, 0, false, NULL, "header name"},
    {"switching protocols", "HTTP/1.1 101 Switching Protocols\r\n\r\n", false, 0, false, NULL,
     "101"},
};

static void test_table(void **state)
{
    (void)state;
    static const size_t slices[] = {1 << 16, 1, 7, 1 << 16, 1, 7};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct outcome o[6];
        for (size_t s = 0; s < 6; s++) {
            /* the last three read body bytes around the parser */
            run_mode(cases[i].in, strlen(cases[i].in), slices[s], 0, s >= 3, &o[s]);
            if ((o[s].end == TG__H1_DONE) != cases[i].done || o[s].status != cases[i].status)
                fail_msg("%s (slice %zu): end %d status %d err %s", cases[i].name, slices[s],
                         (int)o[s].end, o[s].status, o[s].err ? o[s].err : "-");
            if (cases[i].done) {
                assert_int_equal(o[s].keep_alive, cases[i].keep_alive);
                assert_int_equal(o[s].body_len, strlen(cases[i].body));
                assert_memory_equal(o[s].body, cases[i].body, o[s].body_len);
                assert_int_equal(o[s].left, 0);
            } else if (!o[s].err || !strstr(o[s].err, cases[i].err)) {
                fail_msg("%s (slice %zu): error \"%s\", expected \"%s\"", cases[i].name, slices[s],
                         o[s].err ? o[s].err : "(none)", cases[i].err);
            }
        }
    }
}

/* A head beyond the limit is refused, whether its end is in view or not. */
static void test_huge_head(void **state)
{
    (void)state;
    static char in[70000];
    size_t n = (size_t)snprintf(in, sizeof in, OK200 "X-Pad: ");
    memset(in + n, 'a', 40000);
    n += 40000;
    n += (size_t)snprintf(in + n, sizeof in - n, "\r\nContent-Length: 0\r\n\r\n");
    struct outcome o;
    run(in, n, 1 << 16, 0, &o); /* end in view, past 16 KiB */
    assert_int_equal(o.end, TG__H1_ERROR);
    assert_non_null(strstr(o.err, "larger than the limit"));
    run(in, n, 4096, 0, &o); /* end not yet in view when the limit is reached */
    assert_int_equal(o.end, TG__H1_ERROR);
    assert_non_null(strstr(o.err, "larger than the limit"));
    run(in, n, 4096, 60000, &o); /* a larger limit accepts it */
    assert_int_equal(o.end, TG__H1_DONE);
    /* endless trailers are bounded too */
    n = (size_t)snprintf(in, sizeof in, OK200 "Transfer-Encoding: chunked\r\n\r\n0\r\n");
    while (n + 8 < 40000)
        n += (size_t)snprintf(in + n, sizeof in - n, "T: 1\r\n");
    run(in, n, 1 << 16, 0, &o);
    assert_int_equal(o.end, TG__H1_ERROR);
    assert_non_null(strstr(o.err, "trailers"));
}

/* Two answers back to back (keep-alive): the first stops exactly at its end. */
static void test_stops_at_the_end(void **state)
{
    (void)state;
    const char *two = OK200 "Content-Length: 2\r\n\r\nab" OK200 "Content-Length: 1\r\n\r\nc";
    tg__h1 h;
    tg__h1_init(&h, 0);
    size_t used, off = 0, bl;
    const char *b;
    assert_int_equal(tg__h1_feed(&h, two, strlen(two), &used, &b, &bl), TG__H1_HEAD);
    off += used;
    assert_int_equal(tg__h1_feed(&h, two + off, strlen(two) - off, &used, &b, &bl), TG__H1_BODY);
    assert_int_equal(bl, 2);
    assert_ptr_equal(b, two + off); /* in place: no copy */
    off += used;
    assert_int_equal(tg__h1_feed(&h, two + off, strlen(two) - off, &used, &b, &bl), TG__H1_DONE);
    assert_int_equal(used, 0);
    assert_memory_equal(two + off, OK200, strlen(OK200));
    /* an error is sticky */
    tg__h1_init(&h, 0);
    assert_int_equal(tg__h1_feed(&h, "XTTP/1.1 200\r\n\r\n", 17, &used, &b, &bl), TG__H1_ERROR);
    assert_int_equal(tg__h1_feed(&h, two, strlen(two), &used, &b, &bl), TG__H1_ERROR);
    assert_int_equal(tg__h1_eof(&h), TG__H1_ERROR);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_huge_head),
        cmocka_unit_test(test_stops_at_the_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
