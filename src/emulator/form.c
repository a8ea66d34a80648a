/*
 * form: x-www-form-urlencoded and multipart/form-data parsing (see form.h). Pure: the only
 * side effects are allocations in the form's arena.
 */
#include "emulator/form.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/str.h"

#define NAME_MAX_BYTES 255
#define BOUNDARY_MAX   70 /* RFC 2046 5.1.1 */

void emu_form_init(emu_form *f)
{
    memset(f, 0, sizeof *f);
    tg__arena_init(&f->arena, 0, 0);
}

void emu_form_cleanup(emu_form *f)
{
    if (!f)
        return;
    tg__arena_cleanup(&f->arena);
    memset(f, 0, sizeof *f);
}

static int fail(emu_form *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(emu_form *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->err, sizeof f->err, fmt, ap);
    va_end(ap);
    return -1;
}

static emu_field *new_field(emu_form *f)
{
    if (f->count == EMU_FORM_MAX_FIELDS) {
        fail(f, "too many fields (at most %d)", EMU_FORM_MAX_FIELDS);
        return NULL;
    }
    if (f->count == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        emu_field *n = tg__arena_alloc(&f->arena, cap * sizeof *n);
        if (!n) {
            fail(f, "out of memory");
            return NULL;
        }
        if (f->count)
            memcpy(n, f->fields, f->count * sizeof *n);
        f->fields = n;
        f->cap = cap;
    }
    emu_field *x = &f->fields[f->count++];
    memset(x, 0, sizeof *x);
    return x;
}

int emu_form_add(emu_form *f, const char *name, size_t name_len, const char *value,
                 size_t value_len)
{
    if (name_len == 0 || name_len > NAME_MAX_BYTES)
        return fail(f, "field name of %zu bytes (1 to %d allowed)", name_len, NAME_MAX_BYTES);
    if (memchr(name, '\0', name_len))
        return fail(f, "field name with a NUL byte");
    emu_field *x = new_field(f);
    if (!x)
        return -1;
    x->name = tg__arena_strndup(&f->arena, name, name_len);
    x->value = tg__arena_strndup(&f->arena, value ? value : "", value_len);
    x->value_len = value_len;
    if (!x->name || !x->value)
        return fail(f, "out of memory");
    return 0;
}

/* Percent-decode s[0..n) into out (n + 1 bytes). Returns the length or -1. */
static long pct_decode(const char *s, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '+') {
            out[o++] = ' ';
        } else if (s[i] == '%') {
            if (i + 2 >= n)
                return -1;
            int a = tg__hexval((unsigned char)s[i + 1]), b = tg__hexval((unsigned char)s[i + 2]);
            if (a < 0 || b < 0)
                return -1;
            out[o++] = (char)(a * 16 + b);
            i += 2;
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = '\0';
    return (long)o;
}

int emu_form_urlencoded(emu_form *f, const char *src, size_t len)
{
    size_t pos = 0;
    while (pos < len) {
        const char *amp = memchr(src + pos, '&', len - pos);
        size_t end = amp ? (size_t)(amp - src) : len;
        if (end > pos) {
            const char *eq = memchr(src + pos, '=', end - pos);
            size_t klen = eq ? (size_t)(eq - (src + pos)) : end - pos;
            size_t vstart = eq ? klen + 1 : klen;
            char *tmp = tg__arena_alloc(&f->arena, end - pos + 2);
            if (!tmp)
                return fail(f, "out of memory");
            char *vtmp = tmp + klen + 1;
            long kn = pct_decode(src + pos, klen, tmp);
            long vn = pct_decode(src + pos + vstart, end - pos - vstart, vtmp);
            if (kn < 0 || vn < 0)
                return fail(f, "urlencoded: bad %% escape in field at byte %zu", pos);
            if (emu_form_add(f, tmp, (size_t)kn, vtmp, (size_t)vn) != 0)
                return -1;
        }
        pos = end + 1;
    }
    return 0;
}

/* The boundary parameter of a multipart Content-Type into out (cap bytes). */
static int get_boundary(const char *ct, char *out, size_t cap)
{
    if (!ct || strncasecmp(ct, "multipart/form-data", 19) != 0)
        return -1;
    const char *p = ct + 19;
    while (*p) {
        while (*p == ';' || *p == ' ' || *p == '\t')
            p++;
        if (strncasecmp(p, "boundary=", 9) == 0) {
            p += 9;
            size_t n;
            if (*p == '"') {
                const char *q = strchr(++p, '"');
                if (!q)
                    return -1;
                n = (size_t)(q - p);
            } else {
                n = strcspn(p, "; \t");
            }
            if (n == 0 || n > BOUNDARY_MAX || n >= cap)
                return -1;
            memcpy(out, p, n);
            out[n] = '\0';
            return 0;
        }
        p += strcspn(p, ";");
    }
    return -1;
}

static const char *find_bytes(const char *h, size_t hn, const char *needle, size_t nn)
{
    if (nn == 0 || hn < nn)
        return NULL;
    for (const char *p = h; (p = memchr(p, needle[0], hn - (size_t)(p - h) - nn + 1)) != NULL;
         p++) {
        if (memcmp(p, needle, nn) == 0)
            return p;
        if ((size_t)(p - h) + nn >= hn)
            break;
    }
    return NULL;
}

/* Value of parameter key (name, filename) in a Content-Disposition line[0..n), copied into
 * the arena; NULL when absent. */
static char *disp_param(emu_form *f, const char *line, size_t n, const char *key)
{
    size_t kl = strlen(key);
    for (size_t i = 0; i + kl + 1 < n; i++) {
        bool at_start = i == 0 || line[i - 1] == ';' || line[i - 1] == ' ';
        if (!at_start || strncasecmp(line + i, key, kl) != 0 || line[i + kl] != '=')
            continue;
        const char *v = line + i + kl + 1;
        size_t left = n - (i + kl + 1), vn;
        if (left && *v == '"') {
            const char *q = memchr(v + 1, '"', left - 1);
            if (!q)
                return NULL;
            v++;
            vn = (size_t)(q - v);
        } else {
            for (vn = 0; vn < left && v[vn] != ';'; vn++)
                ;
        }
        return tg__arena_strndup(&f->arena, v, vn);
    }
    return NULL;
}

/* Headers of one part at h[0..n): fill name, filename, content type. */
static int part_headers(emu_form *f, const char *h, size_t n, emu_field *x, size_t at)
{
    size_t pos = 0;
    while (pos < n) {
        const char *eol = find_bytes(h + pos, n - pos, "\r\n", 2);
        size_t ln = eol ? (size_t)(eol - (h + pos)) : n - pos;
        const char *line = h + pos;
        if (ln > 20 && strncasecmp(line, "Content-Disposition:", 20) == 0) {
            x->name = disp_param(f, line + 20, ln - 20, "name");
            x->filename = disp_param(f, line + 20, ln - 20, "filename");
        } else if (ln > 13 && strncasecmp(line, "Content-Type:", 13) == 0) {
            size_t s = 13;
            while (s < ln && line[s] == ' ')
                s++;
            x->content_type = tg__arena_strndup(&f->arena, line + s, ln - s);
        }
        pos += ln + 2;
    }
    if (!x->name || !*x->name || strlen(x->name) > NAME_MAX_BYTES)
        return fail(f, "multipart: part without a valid name (at byte %zu)", at);
    x->is_file = x->filename != NULL;
    return 0;
}

/* One part: body[start..end) holds "headers CRLF CRLF data". */
static int one_part(emu_form *f, const char *body, size_t start, size_t end)
{
    const char *sep = find_bytes(body + start, end - start, "\r\n\r\n", 4);
    if (!sep)
        return fail(f, "multipart: part headers not terminated (at byte %zu)", start);
    emu_field *x = new_field(f);
    if (!x)
        return -1;
    size_t hlen = (size_t)(sep - (body + start));
    if (part_headers(f, body + start, hlen, x, start) != 0)
        return -1;
    size_t dstart = start + hlen + 4;
    x->value_len = end - dstart;
    x->value = tg__arena_strndup(&f->arena, body + dstart, x->value_len);
    if (!x->value)
        return fail(f, "out of memory");
    return 0;
}

int emu_form_multipart(emu_form *f, const char *content_type, const char *body, size_t len)
{
    char b[BOUNDARY_MAX + 8] = "\r\n--";
    if (get_boundary(content_type, b + 4, sizeof b - 4) != 0)
        return fail(f, "multipart: missing or bad boundary in Content-Type");
    size_t bl = strlen(b);
    /* The first delimiter may open the body without the leading CRLF. */
    size_t pos;
    if (len >= bl - 2 && memcmp(body, b + 2, bl - 2) == 0) {
        pos = bl - 2;
    } else {
        const char *first = find_bytes(body, len, b, bl);
        if (!first)
            return fail(f, "multipart: no boundary delimiter in the body");
        pos = (size_t)(first - body) + bl;
    }
    for (;;) {
        if (len - pos >= 2 && body[pos] == '-' && body[pos + 1] == '-')
            return 0; /* close delimiter */
        if (len - pos < 2 || body[pos] != '\r' || body[pos + 1] != '\n')
            return fail(f, "multipart: bad delimiter line (at byte %zu)", pos);
        pos += 2;
        const char *next = find_bytes(body + pos, len - pos, b, bl);
        if (!next)
            return fail(f, "multipart: body ends before the closing boundary (at byte %zu)", pos);
        size_t end = (size_t)(next - body);
        if (one_part(f, body, pos, end) != 0)
            return -1;
        pos = end + bl;
    }
}

const emu_field *emu_form_get(const emu_form *f, const char *name)
{
    for (size_t i = 0; i < f->count; i++)
        if (strcmp(f->fields[i].name, name) == 0)
            return &f->fields[i];
    return NULL;
}
