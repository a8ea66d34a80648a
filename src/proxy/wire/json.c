/*
 * json: strict recursive-descent reader and string writer. See json.h.
 * Invariant: every node and string lives in doc->blocks; the reader never reads past len.
 */
#include "proxy/wire/json.h"

#include "core/alloc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK_BYTES 8192

struct block {
    struct block *next;
    size_t used, cap;
    _Alignas(max_align_t) unsigned char data[];
};

struct reader {
    const char *p;
    size_t len, at;
    struct json_doc *doc;
    size_t nodes;
    char *err;
    size_t errlen;
    int rc; /* first failure */
};

static void *arena_alloc(struct json_doc *doc, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    struct block *b = doc->blocks;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > BLOCK_BYTES ? n : BLOCK_BYTES;
        struct block *nb = tg__malloc(sizeof *nb + cap);
        if (!nb)
            return NULL;
        nb->next = b;
        nb->used = 0;
        nb->cap = cap;
        doc->blocks = b = nb;
    }
    void *out = b->data + b->used;
    b->used += n;
    return out;
}

__attribute__((format(printf, 2, 3))) static int fail(struct reader *r, const char *fmt, ...)
{
    if (r->rc)
        return r->rc;
    r->rc = -EINVAL;
    if (r->err && r->errlen) {
        int n = snprintf(r->err, r->errlen, "offset %zu: ", r->at);
        va_list ap;
        va_start(ap, fmt);
        if (n >= 0 && (size_t)n < r->errlen)
            vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return r->rc;
}

static int nomem(struct reader *r)
{
    if (!r->rc) {
        r->rc = -ENOMEM;
        if (r->err && r->errlen)
            snprintf(r->err, r->errlen, "out of memory");
    }
    return r->rc;
}

static void skip_ws(struct reader *r)
{
    while (r->at < r->len && (r->p[r->at] == ' ' || r->p[r->at] == '\t' || r->p[r->at] == '\n' ||
                              r->p[r->at] == '\r'))
        r->at++;
}

static int hex4(struct reader *r, uint32_t *out)
{
    if (r->len - r->at < 4)
        return fail(r, "truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = r->p[r->at + (size_t)i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return fail(r, "bad hex digit in a \\u escape");
        v = v << 4 | (uint32_t)d;
    }
    r->at += 4;
    *out = v;
    return 0;
}

static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 (overlong, surrogate, > U+10FFFF).
 */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t k = c < 0x80             ? 1
               : (c & 0xE0) == 0xC0 ? 2
               : (c & 0xF0) == 0xE0 ? 3
               : (c & 0xF8) == 0xF0 ? 4
                                    : 0;
    if (k == 0 || k > n)
        return 0;
    uint32_t cp = k == 1 ? c : k == 2 ? c & 0x1Fu : k == 3 ? c & 0x0Fu : c & 0x07u;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3Fu);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return k;
}

/* A string at r->at (the opening quote); decoded into the arena. */
static int read_string(struct reader *r, const char **out, size_t *outlen)
{
    r->at++; /* '"' */
    size_t start = r->at, end = start;
    while (end < r->len && r->p[end] != '"') /* upper bound of the decoded length */
        end += r->p[end] == '\\' ? 2 : 1;
    if (end >= r->len) {
        r->at = r->len;
        return fail(r, "unterminated string");
    }
    char *o = arena_alloc(r->doc, end - start + 1);
    if (!o)
        return nomem(r);
    size_t n = 0;
    while (r->p[r->at] != '"') {
        unsigned char c = (unsigned char)r->p[r->at];
        if (c < 0x20)
            return fail(r, "control character in a string (escape it)");
        if (c != '\\') {
            size_t k = utf8_len((const unsigned char *)r->p + r->at, r->len - r->at);
            if (!k)
                return fail(r, "invalid UTF-8 in a string");
            memcpy(o + n, r->p + r->at, k);
            n += k;
            r->at += k;
            continue;
        }
        if (++r->at >= r->len)
            return fail(r, "unterminated string");
        char e = r->p[r->at++];
        static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
        const char *hit = e ? strchr(from, e) : NULL;
        if (hit) {
            o[n++] = to[hit - from];
            continue;
        }
        if (e != 'u')
            return fail(r, "bad escape \\%c", e >= 0x20 && e < 0x7f ? e : '?');
        uint32_t cp;
        if (hex4(r, &cp) != 0)
            return r->rc;
        if (cp >= 0xDC00 && cp <= 0xDFFF)
            return fail(r, "lone low surrogate in a \\u escape");
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t lo;
            if (r->len - r->at < 2 || r->p[r->at] != '\\' || r->p[r->at + 1] != 'u')
                return fail(r, "high surrogate without its low half");
            r->at += 2;
            if (hex4(r, &lo) != 0)
                return r->rc;
            if (lo < 0xDC00 || lo > 0xDFFF)
                return fail(r, "high surrogate without its low half");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        if (cp == 0)
            return fail(r, "\\u0000 in a string");
        n += put_utf8(o + n, cp); /* an escape is >= 6 input bytes for <= 4 output bytes */
    }
    r->at++; /* '"' */
    o[n] = '\0';
    *out = o;
    *outlen = n;
    return 0;
}

static int read_number(struct reader *r, struct json_val *v)
{
    size_t s = r->at, i = s;
    bool frac = false;
    if (i < r->len && r->p[i] == '-')
        i++;
    if (i >= r->len || r->p[i] < '0' || r->p[i] > '9')
        return fail(r, "expected a digit");
    if (r->p[i] == '0')
        i++;
    else
        while (i < r->len && r->p[i] >= '0' && r->p[i] <= '9')
            i++;
    if (i < r->len && r->p[i] == '.') {
        frac = true;
        if (++i >= r->len || r->p[i] < '0' || r->p[i] > '9')
            return fail(r, "expected a digit after '.'");
        while (i < r->len && r->p[i] >= '0' && r->p[i] <= '9')
            i++;
    }
    if (i < r->len && (r->p[i] == 'e' || r->p[i] == 'E')) {
        frac = true;
        if (++i < r->len && (r->p[i] == '+' || r->p[i] == '-'))
            i++;
        if (i >= r->len || r->p[i] < '0' || r->p[i] > '9')
            return fail(r, "expected a digit in the exponent");
        while (i < r->len && r->p[i] >= '0' && r->p[i] <= '9')
            i++;
    }
    char buf[64];
    if (i - s >= sizeof buf)
        return fail(r, "number too long");
    memcpy(buf, r->p + s, i - s);
    buf[i - s] = '\0';
    v->type = JSON_NUMBER;
    v->num = strtod(buf, NULL);
    if (!frac) {
        errno = 0;
        long long ll = strtoll(buf, NULL, 10);
        v->is_int = errno == 0;
        v->i = (int64_t)ll;
    }
    r->at = i;
    return 0;
}

static int read_value(struct reader *r, struct json_val **out, int depth);

static struct json_val *node(struct reader *r)
{
    if (++r->nodes > JSON_NODES_MAX) {
        fail(r, "more than %d values", JSON_NODES_MAX);
        return NULL;
    }
    struct json_val *v = arena_alloc(r->doc, sizeof *v);
    if (!v) {
        nomem(r);
        return NULL;
    }
    memset(v, 0, sizeof *v);
    return v;
}

static bool literal(struct reader *r, const char *word)
{
    size_t n = strlen(word);
    if (r->len - r->at < n || memcmp(r->p + r->at, word, n) != 0)
        return false;
    r->at += n;
    return true;
}

static int read_members(struct reader *r, struct json_val *v, int depth, bool obj)
{
    char close = obj ? '}' : ']';
    r->at++;
    skip_ws(r);
    if (r->at < r->len && r->p[r->at] == close) {
        r->at++;
        return 0;
    }
    struct json_val **tail = &v->child;
    for (;;) {
        const char *key = NULL;
        size_t klen = 0;
        skip_ws(r);
        if (obj) {
            if (r->at >= r->len || r->p[r->at] != '"')
                return fail(r, "expected a member name string");
            if (read_string(r, &key, &klen) != 0)
                return r->rc;
            for (const struct json_val *m = v->child; m; m = m->next)
                if (strcmp(m->key, key) == 0)
                    return fail(r, "duplicate member name");
            skip_ws(r);
            if (r->at >= r->len || r->p[r->at] != ':')
                return fail(r, "expected ':'");
            r->at++;
        }
        struct json_val *m = NULL;
        if (read_value(r, &m, depth + 1) != 0)
            return r->rc;
        m->key = key;
        *tail = m;
        tail = &m->next;
        v->len++;
        skip_ws(r);
        if (r->at >= r->len)
            return fail(r, "unterminated %s", obj ? "object" : "array");
        if (r->p[r->at] == close) {
            r->at++;
            return 0;
        }
        if (r->p[r->at] != ',')
            return fail(r, "expected ',' or '%c'", close);
        r->at++;
    }
}

static int read_value(struct reader *r, struct json_val **out, int depth)
{
    if (depth > JSON_DEPTH_MAX)
        return fail(r, "nested deeper than %d", JSON_DEPTH_MAX);
    skip_ws(r);
    if (r->at >= r->len)
        return fail(r, "expected a value");
    struct json_val *v = node(r);
    if (!v)
        return r->rc;
    *out = v;
    char c = r->p[r->at];
    if (c == '{' || c == '[') {
        v->type = c == '{' ? JSON_OBJECT : JSON_ARRAY;
        return read_members(r, v, depth, c == '{');
    }
    if (c == '"') {
        v->type = JSON_STRING;
        return read_string(r, &v->str, &v->len);
    }
    if (c == '-' || (c >= '0' && c <= '9'))
        return read_number(r, v);
    if (literal(r, "true") || literal(r, "false")) {
        v->type = JSON_BOOL;
        v->b = c == 't';
        return 0;
    }
    if (literal(r, "null"))
        return 0;
    return fail(r, "unexpected character");
}

void json_doc_free(struct json_doc *doc)
{
    if (!doc)
        return;
    for (struct block *b = doc->blocks, *n; b; b = n) {
        n = b->next;
        tg__free(b);
    }
    doc->blocks = NULL;
    doc->root = NULL;
}

int json_parse(struct json_doc *doc, const char *text, size_t len, char *err, size_t errlen)
{
    doc->root = NULL;
    doc->blocks = NULL;
    struct reader r = {.p = text, .len = len, .doc = doc, .err = err, .errlen = errlen};
    struct json_val *root = NULL;
    if (read_value(&r, &root, 0) == 0) {
        skip_ws(&r);
        if (r.at != r.len)
            fail(&r, "text after the value");
    }
    if (r.rc) {
        json_doc_free(doc);
        return r.rc;
    }
    doc->root = root;
    return 0;
}

const struct json_val *json_get(const struct json_val *obj, const char *key)
{
    if (!obj || obj->type != JSON_OBJECT)
        return NULL;
    for (const struct json_val *m = obj->child; m; m = m->next)
        if (strcmp(m->key, key) == 0)
            return m;
    return NULL;
}

int json_put_str(tg__buf *b, const char *s, size_t n)
{
    int rc = tg__buf_putc(b, '"');
    for (size_t i = 0; i < n && rc == 0; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"')
            rc = tg__buf_puts(b, "\\\"");
        else if (c == '\\')
            rc = tg__buf_puts(b, "\\\\");
        else if (c == '\n')
            rc = tg__buf_puts(b, "\\n");
        else if (c < 0x20 || c == '<' || c == '>' || c == '&' || c == 0x7f)
            rc = tg__buf_printf(b, "\\u%04x", c);
        else
            rc = tg__buf_putc(b, (char)c);
    }
    return rc ? rc : tg__buf_putc(b, '"');
}
