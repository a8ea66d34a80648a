/*
 * quotafile: parse, read and atomically write the quota state file. See quotafile.h.
 * Invariant: quotafile_parse never reads past len and never writes past out[cap - 1]; every
 * failure names the line.
 */
#include "proxy/config/quotafile.h"

#include "core/alloc.h"
#include "core/atomicfile.h"
#include "core/buf.h"
#include "core/str.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int line_err(char *err, size_t errlen, const char *name, size_t line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int line_err(char *err, size_t errlen, const char *name, size_t line, const char *fmt, ...)
{
    if (!err || !errlen)
        return -EINVAL;
    int n = snprintf(err, errlen, "%.200s:%zu: ", name, line);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < errlen)
        vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

static bool label_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
}

/* The next space-separated field of p[0..n) from *at; its length, 0 when none. */
static size_t field(const char *p, size_t n, size_t *at, const char **f)
{
    size_t i = *at;
    *f = p + i;
    while (i < n && p[i] != ' ')
        i++;
    size_t len = i - *at;
    *at = i < n ? i + 1 : i; /* past one separator */
    return len;
}

/* One "LABEL USED PERIOD_END" line, p[0..n) without its '\n'. */
static int parse_entry(const char *name, size_t line, const char *p, size_t n,
                       struct quotafile_entry *e, char *err, size_t errlen)
{
    const char *f[3];
    size_t len[3], at = 0;
    for (int i = 0; i < 3; i++)
        len[i] = field(p, n, &at, &f[i]);
    if (!len[0] || !len[1] || !len[2] || at != n || p[n - 1] == ' ')
        return line_err(err, errlen, name, line,
                        "expected LABEL USED PERIOD_END (three fields, one space apart)");
    if (len[0] >= CONFIG_LABEL_MAX)
        return line_err(err, errlen, name, line, "label too long, expected at most %d bytes",
                        CONFIG_LABEL_MAX - 1);
    for (size_t i = 0; i < len[0]; i++)
        if (!label_char(f[0][i]))
            return line_err(err, errlen, name, line,
                            "bad label, expected letters, digits, '_', '-' or '.'");
    memcpy(e->label, f[0], len[0]);
    e->label[len[0]] = '\0';
    for (int i = 1; i < 3; i++)
        for (size_t k = 0; k < len[i]; k++)
            if (f[i][k] < '0' || f[i][k] > '9')
                return line_err(err, errlen, name, line, "%s: expected a decimal number",
                                i == 1 ? "USED" : "PERIOD_END");
    if (tg__parse_u64(f[1], len[1], &e->used) != 0)
        return line_err(err, errlen, name, line, "USED: out of range, expected bytes < 2^64");
    if (tg__parse_i64(f[2], len[2], &e->period_end) != 0 || e->period_end < 0)
        return line_err(err, errlen, name, line,
                        "PERIOD_END: out of range, expected Unix seconds < 2^63");
    return 0;
}

int quotafile_parse(const char *name, const char *text, size_t len, struct quotafile_entry *out,
                    size_t cap, char *err, size_t errlen)
{
    static const char hdr[] = QUOTAFILE_HEADER;
    size_t n = 0, line = 1, pos = 0;
    if (len > QUOTAFILE_MAX_BYTES)
        return line_err(err, errlen, name, 1, "file too large, expected at most %d bytes",
                        QUOTAFILE_MAX_BYTES);
    while (pos < len) {
        const char *p = text + pos, *nl = memchr(p, '\n', len - pos);
        if (!nl)
            return line_err(err, errlen, name, line, "last line not ended by a newline");
        size_t ll = (size_t)(nl - p);
        pos += ll + 1;
        if (line == 1 && (ll != sizeof hdr - 1 || memcmp(p, hdr, ll) != 0))
            return line_err(err, errlen, name, line, "expected the header \"%s\"", hdr);
        if (line++ == 1 || ll == 0 || p[0] == '#')
            continue;
        if (n >= cap || n >= QUOTAFILE_MAX_ENTRIES)
            return line_err(err, errlen, name, line - 1, "too many entries, expected at most %zu",
                            cap < QUOTAFILE_MAX_ENTRIES ? cap : (size_t)QUOTAFILE_MAX_ENTRIES);
        int rc = parse_entry(name, line - 1, p, ll, &out[n], err, errlen);
        if (rc < 0)
            return rc;
        out[n].line = (uint32_t)(line - 1);
        for (size_t i = 0; i < n; i++)
            if (strcmp(out[i].label, out[n].label) == 0)
                return line_err(err, errlen, name, line - 1,
                                "label listed twice, expected each label once");
        n++;
    }
    if (line == 1)
        return line_err(err, errlen, name, 1, "empty file, expected the header \"%s\"", hdr);
    return (int)n;
}

int quotafile_check_period(const char *name, const struct quotafile_entry *e, int64_t now_s,
                           uint32_t period_s, char *err, size_t errlen)
{
    if (period_s == 0 || e->period_end <= now_s || e->period_end - now_s <= (int64_t)period_s)
        return 0;
    return line_err(err, errlen, name, e->line,
                    "PERIOD_END %lld is %lld s from now, expected at most one quota-reset "
                    "period (%u s) ahead",
                    (long long)e->period_end, (long long)(e->period_end - now_s),
                    (unsigned)period_s);
}

int quotafile_load(const char *path, struct quotafile_entry *out, size_t cap, char *err,
                   size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "%.200s: cannot open: %s", path, strerror(e));
        return -e;
    }
    char *buf = tg__malloc(QUOTAFILE_MAX_BYTES + 1);
    size_t got = 0;
    int rc = buf ? 0 : -ENOMEM;
    while (rc == 0 && got <= QUOTAFILE_MAX_BYTES) {
        ssize_t r = read(fd, buf + got, QUOTAFILE_MAX_BYTES + 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            rc = -errno;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (rc < 0)
        snprintf(err, errlen, "%.200s: read failed: %s", path, strerror(-rc));
    else
        rc = quotafile_parse(path, buf, got, out, cap, err, errlen);
    tg__free(buf);
    return rc;
}

int quotafile_save(const char *path, const struct quotafile_entry *e, size_t n, char *err,
                   size_t errlen)
{
    char line[CONFIG_LABEL_MAX + 48];
    tg__buf b;
    tg__buf_init(&b, 0);
    int rc = tg__buf_puts(&b, QUOTAFILE_HEADER "\n") ? -ENOMEM : 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        int k = snprintf(line, sizeof line, "%s %llu %lld\n", e[i].label,
                         (unsigned long long)e[i].used, (long long)e[i].period_end);
        rc = tg__buf_append(&b, line, (size_t)k) ? -ENOMEM : 0;
    }
    if (rc < 0)
        snprintf(err, errlen, "%.200s: cannot write: out of memory", path);
    else
        rc = tg__atomic_write(path, b.data, b.len, 0600, err, errlen);
    tg__buf_cleanup(&b);
    return rc;
}
