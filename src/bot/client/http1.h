/*
 * http1.h: a pure HTTP/1.1 response parser for the lean transport: bytes in, events out.
 *
 * No I/O and no allocation. The caller reads into its own buffer and feeds what it has; each
 * call returns one event and how many bytes it consumed:
 *
 *   TG__H1_MORE   nothing can be decided without more bytes: keep p[used..n) and append to it
 *                 (the status line and headers are parsed only once the whole head is in the
 *                 buffer, so the buffer must hold max_head bytes; a chunk-size line likewise)
 *   TG__H1_HEAD   status line and headers done: status, keep_alive and the framing are set
 *                 (interim 1xx answers are skipped on the way)
 *   TG__H1_BODY   *body, *body_len: body bytes, pointing into p (de-chunked, in place)
 *   TG__H1_DONE   the response is complete; p[used..) belongs to the next response
 *   TG__H1_ERROR  malformed or unsupported: err says what (static string), err_at where
 *
 * Framing: Content-Length, chunked (extensions and trailers skipped), or, with neither, the
 * body runs until the server closes (tg__h1_eof then completes it). 204 and 304 have no body.
 * keep_alive is false for "Connection: close", for HTTP/1.0 without "keep-alive", for a body
 * delimited by close, and when both Transfer-Encoding and Content-Length came (RFC 9112 6.3).
 *
 * Limits: max_head bytes for the status line plus headers (and again for trailers), chunk-size
 * lines of 1 KiB, sizes below 2^60. Everything else is left to the sink's own cap.
 * Thread-safety: one tg__h1 per response, used by one thread.
 */
#ifndef TGKIT_BOT_CLIENT_HTTP1_H
#define TGKIT_BOT_CLIENT_HTTP1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG__H1_DEFAULT_MAX_HEAD 16384 /* bytes */

enum tg__h1_ev {
    TG__H1_MORE,
    TG__H1_HEAD,
    TG__H1_BODY,
    TG__H1_DONE,
    TG__H1_ERROR,
};

typedef struct tg__h1 {
    size_t max_head; /* bytes allowed for the head (and for the trailers) */
    /* results, valid after TG__H1_HEAD */
    int status;
    int minor; /* HTTP/1.<minor> */
    bool keep_alive;
    bool chunked;
    bool has_length;
    bool until_close;
    uint64_t length; /* Content-Length when has_length */
    /* error, after TG__H1_ERROR */
    const char *err;
    uint64_t err_at; /* offset in the response's byte stream */
    /* private */
    int state;
    uint64_t left; /* bytes left in the body or the current chunk */
    uint64_t pos;  /* bytes consumed so far */
    size_t trailer_bytes;
} tg__h1;

/* Ready for a new response. max_head 0 = TG__H1_DEFAULT_MAX_HEAD. */
void tg__h1_init(tg__h1 *h, size_t max_head);

/* Parse p[0..n). Returns one event; *used is the bytes consumed (0 for TG__H1_MORE when a
 * line or the head is incomplete). *body, *body_len are set for TG__H1_BODY only. */
enum tg__h1_ev tg__h1_feed(tg__h1 *h, const char *p, size_t n, size_t *used, const char **body,
                           size_t *body_len);

/*
 * Reading the body around the parser: once the head is parsed and the caller's buffer holds
 * no more unparsed bytes, tg__h1_body_left says how many body bytes come next that need no
 * parsing (the rest of a Content-Length body or of the current chunk; UINT64_MAX for a body
 * that runs until close; 0 anywhere else). The caller may receive up to that many straight
 * into their destination and report them with tg__h1_body_skip (n <= the value returned),
 * so a large body is never copied through the caller's read buffer.
 */
uint64_t tg__h1_body_left(const tg__h1 *h);
void tg__h1_body_skip(tg__h1 *h, size_t n);

/* The server closed the connection: TG__H1_DONE when the body runs until close (and the head
 * was complete), else TG__H1_ERROR saying what was cut short. */
enum tg__h1_ev tg__h1_eof(tg__h1 *h);

#endif
