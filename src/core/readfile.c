#include "core/readfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"

const char *tg__file_kind(mode_t m)
{
    return S_ISFIFO(m)   ? "a FIFO"
           : S_ISDIR(m)  ? "a directory"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
           : S_ISLNK(m)  ? "a symbolic link"
                         : "not a regular file";
}

__attribute__((format(printf, 5, 6))) static int fail(int code, const char *path, char *err,
                                                      size_t errcap, const char *fmt, ...)
{
    if (err && errcap) {
        int n = snprintf(err, errcap, "%s: ", path);
        if (n >= 0 && (size_t)n < errcap) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(err + n, errcap - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return code;
}

int tg__read_file(const char *path, size_t max, unsigned flags, char **out, size_t *len,
                  struct stat *st, char *err, size_t errcap)
{
    *out = NULL;
    *len = 0;
    int oflags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    if (flags & TG__READ_NOFOLLOW)
        oflags |= O_NOFOLLOW;
    int fd = open(path, oflags);
    if (fd < 0) {
        int e = errno;
        if (e == ELOOP && (flags & TG__READ_NOFOLLOW))
            return fail(-e, path, err, errcap, "a symbolic link, expected a regular file");
        return fail(-e, path, err, errcap, "cannot open: %s", strerror(e));
    }
    struct stat sb;
    char *buf = NULL;
    size_t size_of_buf = 0;
    int rc = 0;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        rc = fail(-e, path, err, errcap, "cannot stat: %s", strerror(e));
        goto out;
    }
    if (!S_ISREG(sb.st_mode)) {
        rc = fail(-EINVAL, path, err, errcap, "%s, expected a regular file",
                  tg__file_kind(sb.st_mode));
        goto out;
    }
    if ((flags & TG__READ_PRIVATE) && (sb.st_mode & 077)) {
        rc = fail(-EPERM, path, err, errcap,
                  "readable by group or others (mode %04o), expected 0600",
                  (unsigned)(sb.st_mode & 07777));
        goto out;
    }
    if (sb.st_size < 0 || (unsigned long long)sb.st_size > max) {
        rc = fail(-EFBIG, path, err, errcap, "%lld bytes, expected at most %zu",
                  (long long)sb.st_size, max);
        goto out;
    }
    size_t size = (size_t)sb.st_size;
    buf = tg__malloc(size + 1);
    size_of_buf = size + 1;
    if (!buf) {
        rc = fail(-ENOMEM, path, err, errcap, "out of memory for %zu bytes", size);
        goto out;
    }
    size_t got = 0;
    for (;;) {
        /* one byte past the size: a file that grew is noticed, not cut */
        ssize_t r = read(fd, buf + got, size + 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            rc = fail(-e, path, err, errcap, "read failed: %s", strerror(e));
            goto out;
        }
        if (r == 0)
            break;
        got += (size_t)r;
        if (got > size)
            break;
    }
    if (got != size) {
        rc = fail(-EIO, path, err, errcap, "changed size while it was read (%zu bytes, then %zu)",
                  size, got);
        goto out;
    }
    buf[size] = '\0';
    *out = buf;
    *len = size;
    buf = NULL;
    if (st)
        *st = sb;
out:
    if (buf)
        explicit_bzero(buf, size_of_buf); /* it may hold a token or secrets */
    tg__free(buf);
    close(fd);
    return rc;
}
