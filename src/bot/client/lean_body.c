/*
 * lean_body.c: multipart/form-data request bodies of the lean transport.
 *
 * Fields first, then file parts, each introduced by its boundary and headers (names and
 * file names with '"', CR and LF percent-encoded, as browsers do). Sizes are known up front
 * for paths (stat), memory and read callbacks that give a size: the body then goes with a
 * Content-Length. A callback of unknown size (size < 0) makes the body chunked.
 *
 * Streaming: pieces collect in a per-ctx buffer that is sent whenever it holds LEAN_CHUNK
 * bytes; a file is read straight into that buffer, a callback fills it in place. Memory
 * sources larger than a chunk go out from the caller's memory without a copy. So a 50 MB file
 * costs 64 KiB of memory. A file or callback that yields a different number of bytes than it
 * announced fails the request with TG_ERR_IO (the connection is then closed).
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bot/client/lean_int.h"
#include "core/str.h"

void tg__lean_body_init(struct lean_body *w)
{
    tg__buf_init(&w->buf, 0);
    w->boundary[0] = '\0';
}

void tg__lean_body_cleanup(struct lean_body *w)
{
    tg__buf_cleanup(&w->buf);
}

static int put_quoted(tg__buf *b, const char *s)
{
    int rc = 0;
    for (; *s && rc == 0; s++)
        rc = *s == '"'    ? tg__buf_puts(b, "%22")
             : *s == '\r' ? tg__buf_puts(b, "%0D")
             : *s == '\n' ? tg__buf_puts(b, "%0A")
                          : tg__buf_putc(b, *s);
    return rc;
}

static const char *file_name(const tg_file_part *f)
{
    if (f->filename)
        return f->filename;
    if (f->path) {
        const char *slash = strrchr(f->path, '/');
        return slash ? slash + 1 : f->path;
    }
    return "file";
}

/* Append the boundary line and headers of one part (file = NULL for a plain field). */
static int part_head(tg__buf *b, const char *boundary, const char *name, const tg_file_part *f)
{
    int rc = tg__buf_puts(b, "--");
    rc |= tg__buf_puts(b, boundary);
    rc |= tg__buf_puts(b, "\r\nContent-Disposition: form-data; name=\"");
    rc |= put_quoted(b, name);
    if (f) {
        rc |= tg__buf_puts(b, "\"; filename=\"");
        rc |= put_quoted(b, file_name(f));
        rc |= tg__buf_puts(b, "\"\r\nContent-Type: ");
        rc |= tg__buf_puts(b, f->content_type ? f->content_type : "application/octet-stream");
    } else {
        rc |= tg__buf_putc(b, '"');
    }
    rc |= tg__buf_puts(b, "\r\n\r\n");
    return rc;
}

static void new_boundary(struct lean_body *w)
{
    unsigned char r[12];
    static const char hex[] = "0123456789abcdef";
    if (RAND_bytes(r, sizeof r) != 1) {
        uint64_t x = (uint64_t)(uintptr_t)w ^ (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull;
        memcpy(r, &x, 8);
        memset(r + 8, 0x5a, 4);
    }
    memcpy(w->boundary, "------tgbot", 11);
    for (size_t i = 0; i < sizeof r; i++) {
        w->boundary[11 + 2 * i] = hex[r[i] >> 4];
        w->boundary[12 + 2 * i] = hex[r[i] & 15];
    }
    w->boundary[11 + 2 * sizeof r] = '\0';
}

/* Size of file part i's data, or -1 when unknown (a callback without a size). */
static int part_size(struct lean_io *io, const tg_file_part *f, size_t i, int64_t *size)
{
    struct stat st;
    if (f->path) {
        if (stat(f->path, &st) != 0 || !S_ISREG(st.st_mode))
            return tg__lean_fail(io, LEAN_E_READ, "files[%zu] (%s): cannot read %s", i, f->name,
                                 f->path);
        *size = (int64_t)st.st_size;
    } else {
        *size = f->data ? (int64_t)f->len : f->size;
    }
    return 0;
}

int tg__lean_form_head(struct lean_io *io, struct lean_body *w, const tg_http_request *req,
                       tg__buf *head, bool *chunked)
{
    new_boundary(w);
    uint64_t total = 0;
    int rc = 0;
    *chunked = false;
    for (size_t i = 0; i < req->nfields + req->nfiles && rc == 0; i++) {
        const tg_file_part *f = i < req->nfields ? NULL : &req->files[i - req->nfields];
        int64_t size = 0;
        tg__buf_reset(&w->buf);
        rc = part_head(&w->buf, w->boundary, f ? f->name : req->fields[i].name, f);
        if (rc == 0 && f && part_size(io, f, i - req->nfields, &size) != 0)
            return -1;
        if (size < 0)
            *chunked = true;
        total += w->buf.len + (f ? (uint64_t)(size < 0 ? 0 : size) : req->fields[i].len) + 2;
    }
    tg__buf_reset(&w->buf);
    total += 2 + strlen(w->boundary) + 4; /* "--" boundary "--\r\n" */
    rc |= tg__buf_puts(head, "Content-Type: multipart/form-data; boundary=");
    rc |= tg__buf_puts(head, w->boundary);
    if (*chunked) {
        rc |= tg__buf_puts(head, "\r\nTransfer-Encoding: chunked\r\n");
    } else {
        char len[48];
        snprintf(len, sizeof len, "\r\nContent-Length: %llu\r\n", (unsigned long long)total);
        rc |= tg__buf_puts(head, len);
    }
    return rc == 0 ? 0 : tg__lean_fail(io, LEAN_E_NOMEM, "no memory for the multipart head");
}

/* ---- streaming ---- */

struct writer {
    struct lean_io *io;
    struct lean_body *w;
    bool chunked;
};

static int send_piece(struct writer *x, const char *p, size_t n)
{
    char hdr[24];
    if (n == 0)
        return 0;
    if (!x->chunked)
        return tg__lean_send(x->io, p, n);
    int k = snprintf(hdr, sizeof hdr, "%zx\r\n", n);
    if (tg__lean_send(x->io, hdr, (size_t)k) != 0 || tg__lean_send(x->io, p, n) != 0)
        return -1;
    return tg__lean_send(x->io, "\r\n", 2);
}

static int flush(struct writer *x)
{
    tg__buf *b = &x->w->buf;
    int rc = send_piece(x, b->data, b->len);
    tg__buf_reset(b);
    return rc;
}

static int put(struct writer *x, const void *p, size_t n)
{
    tg__buf *b = &x->w->buf;
    if (b->len + n > LEAN_CHUNK && flush(x) != 0)
        return -1;
    if (n >= LEAN_CHUNK)
        return send_piece(x, p, n); /* large memory: straight from the caller's bytes */
    if (tg__buf_append(b, p, n) != 0)
        return tg__lean_fail(x->io, LEAN_E_NOMEM, "no memory for the upload buffer");
    return 0;
}

/* Room at the end of the buffer to read a piece into (flushing first when it is full). */
static char *room(struct writer *x, size_t *n)
{
    tg__buf *b = &x->w->buf;
    if (b->len >= LEAN_CHUNK / 2 && flush(x) != 0)
        return NULL;
    if (tg__buf_reserve(b, LEAN_CHUNK - b->len) != 0) {
        tg__lean_fail(x->io, LEAN_E_NOMEM, "no memory for the upload buffer");
        return NULL;
    }
    *n = LEAN_CHUNK - b->len;
    return b->data + b->len;
}

/* One read from a file part's source (the open path fd, else its callback) into p. Returns
 * the bytes read, 0 at the end, or -1 with the failure filled in. */
static ssize_t source_read(struct writer *x, const tg_file_part *f, int fd, char *p, size_t cap)
{
    if (fd >= 0) {
        ssize_t n;
        do
            n = read(fd, p, cap);
        while (n < 0 && errno == EINTR);
        if (n < 0)
            return tg__lean_fail(x->io, LEAN_E_READ, "%s: read failed: %s", f->path,
                                 strerror(errno));
        return n;
    }
    size_t n = f->read(f->read_user, p, cap);
    if (n == (size_t)-1)
        return tg__lean_fail(x->io, LEAN_E_READ, "%s: the read callback aborted the upload",
                             f->name);
    if (n > cap)
        return tg__lean_fail(x->io, LEAN_E_READ, "%s: the read callback overran its buffer",
                             f->name);
    return (ssize_t)n;
}

/* Stream a part read in pieces straight into the send buffer; size < 0 = unknown. A source
 * that yields more or fewer bytes than announced fails (the Content-Length would lie). */
static int stream(struct writer *x, const tg_file_part *f, int fd, int64_t size)
{
    uint64_t got = 0;
    for (;;) {
        size_t cap;
        char *p = room(x, &cap);
        if (!p)
            return -1;
        ssize_t n = source_read(x, f, fd, p, cap);
        if (n <= 0) {
            if (n < 0)
                return -1;
            break;
        }
        got += (uint64_t)n;
        if (size >= 0 && got > (uint64_t)size)
            break;
        x->w->buf.len += (size_t)n;
    }
    if (size >= 0 && got != (uint64_t)size)
        return tg__lean_fail(x->io, LEAN_E_READ, "%s: gave %llu bytes or more, announced %lld",
                             fd >= 0 ? f->path : f->name, (unsigned long long)got, (long long)size);
    return 0;
}

static int file_data(struct writer *x, const tg_file_part *f)
{
    if (f->data)
        return put(x, f->data, f->len);
    if (f->read)
        return stream(x, f, -1, f->size);
    int64_t size;
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0)
            close(fd);
        return tg__lean_fail(x->io, LEAN_E_READ, "%s (%s): cannot open %s", f->name, f->path,
                             strerror(errno));
    }
    size = (int64_t)st.st_size;
    int rc = stream(x, f, fd, size);
    close(fd);
    return rc;
}

int tg__lean_form_send(struct lean_io *io, struct lean_body *w, const tg_http_request *req,
                       bool chunked)
{
    struct writer x = {io, w, chunked};
    tg__buf_reset(&w->buf);
    for (size_t i = 0; i < req->nfields + req->nfiles; i++) {
        const tg_file_part *f = i < req->nfields ? NULL : &req->files[i - req->nfields];
        if (w->buf.len > LEAN_CHUNK / 2 && flush(&x) != 0)
            return -1;
        if (part_head(&w->buf, w->boundary, f ? f->name : req->fields[i].name, f) != 0)
            return tg__lean_fail(io, LEAN_E_NOMEM, "no memory for the upload buffer");
        int rc = f ? file_data(&x, f) : put(&x, req->fields[i].value, req->fields[i].len);
        if (rc != 0 || put(&x, "\r\n", 2) != 0)
            return -1;
    }
    if (put(&x, "--", 2) != 0 || put(&x, w->boundary, strlen(w->boundary)) != 0 ||
        put(&x, "--\r\n", 4) != 0 || flush(&x) != 0)
        return -1;
    return chunked ? tg__lean_send(io, "0\r\n\r\n", 5) : 0;
}
