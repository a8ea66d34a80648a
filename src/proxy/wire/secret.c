/*
 * secret: parsing and formatting of proxy secrets (see secret.h, brief section 1).
 */
#include "proxy/wire/secret.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/str.h"

/* Longest binary secret: 0xee || K || 182-byte domain. */
#define SECRET_BIN_MAX (1 + SECRET_KEY_LEN + SECRET_DOMAIN_MAX)

static int fail(char *err, size_t errlen, const char *why)
{
    if (err && errlen)
        snprintf(err, errlen, "proxy secret: %s", why);
    return -EINVAL;
}

static bool is_hex_text(const char *s, size_t n)
{
    if (n == 0 || n % 2)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
            return false;
    }
    return true;
}

static bool is_alnum(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

const char *secret_domain_problem(const char *d, size_t n)
{
    if (n == 0)
        return "ee domain is empty";
    if (n > SECRET_DOMAIN_MAX)
        return "ee domain is longer than 182 bytes (clients reject it)";
    size_t label = 0;
    bool last_numeric = true;
    for (size_t i = 0; i < n; i++) {
        char c = d[i];
        if (c == '.') {
            if (label == 0 || d[i - 1] == '-')
                return "ee domain has an empty label or a label ending in '-'";
            label = 0;
            last_numeric = true;
            continue;
        }
        if (!is_alnum(c) && c != '-' && c != '_')
            return "ee domain has a character outside [A-Za-z0-9._-]";
        if (c == '-' && label == 0)
            return "ee domain has a label starting with '-'";
        if (++label > 63)
            return "ee domain has a label longer than 63 bytes";
        if (!(c >= '0' && c <= '9'))
            last_numeric = false;
    }
    if (label == 0 || d[n - 1] == '-')
        return "ee domain ends with '.' or '-'";
    if (last_numeric)
        return "ee domain looks like an IP address (SNI needs a host name)";
    return NULL;
}

static int classify(const uint8_t *b, size_t n, struct secret *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (n < SECRET_KEY_LEN)
        return fail(err, errlen, "decoded secret is shorter than 16 bytes");
    if (n == SECRET_KEY_LEN) {
        out->kind = SECRET_CLASSIC;
        memcpy(out->key, b, SECRET_KEY_LEN);
        return 0;
    }
    if (n == SECRET_KEY_LEN + 1 && b[0] == 0xdd) {
        out->kind = SECRET_DD;
        memcpy(out->key, b + 1, SECRET_KEY_LEN);
        return 0;
    }
    if (n >= SECRET_KEY_LEN + 2 && b[0] == 0xee) {
        const char *d = (const char *)b + 1 + SECRET_KEY_LEN;
        size_t dn = n - 1 - SECRET_KEY_LEN;
        const char *why = secret_domain_problem(d, dn);
        if (why)
            return fail(err, errlen, why);
        out->kind = SECRET_EE;
        memcpy(out->key, b + 1, SECRET_KEY_LEN);
        memcpy(out->domain, d, dn);
        out->domain[dn] = '\0';
        out->domain_len = (uint8_t)dn;
        return 0;
    }
    return fail(err, errlen,
                "unsupported form (want 16 bytes, 0xdd + 16 bytes, or 0xee + 16 bytes + domain)");
}

int secret_parse(const char *text, size_t len, struct secret *out, char *err, size_t errlen)
{
    uint8_t bin[SECRET_BIN_MAX];
    size_t n;
    int rc;

    if (!text || !out)
        return fail(err, errlen, "missing argument");
    if (len == 0)
        return fail(err, errlen, "empty");
    if (is_hex_text(text, len)) {
        /* Valid hex never falls back to base64 (brief 1.2 step 1). */
        if (len / 2 > sizeof(bin)) {
            rc = fail(err, errlen, "hex secret is too long (domain over 182 bytes?)");
            goto out;
        }
        n = tg__hex_decode(bin, sizeof(bin), text, len);
    } else {
        n = tg__b64_decode(bin, sizeof(bin), text, len);
        if (n == TG__BAD_LEN) {
            rc = fail(err, errlen, "neither hex nor base64/base64url, or too long");
            goto out;
        }
    }
    if (n == TG__BAD_LEN) {
        rc = fail(err, errlen, "hex decoding failed");
        goto out;
    }
    rc = classify(bin, n, out, err, errlen);
out:
    memset(bin, 0, sizeof(bin));
    return rc;
}

int secret_bytes(const struct secret *s, uint8_t *out, size_t cap)
{
    size_t n = 0;
    if (!s)
        return -1;
    size_t need =
        SECRET_KEY_LEN + (s->kind != SECRET_CLASSIC) + (s->kind == SECRET_EE ? s->domain_len : 0);
    if (need > cap)
        return -1;
    if (s->kind == SECRET_DD)
        out[n++] = 0xdd;
    else if (s->kind == SECRET_EE)
        out[n++] = 0xee;
    memcpy(out + n, s->key, SECRET_KEY_LEN);
    n += SECRET_KEY_LEN;
    if (s->kind == SECRET_EE) {
        memcpy(out + n, s->domain, s->domain_len);
        n += s->domain_len;
    }
    return (int)n;
}

int secret_format(const struct secret *s, bool base64, char *out, size_t cap)
{
    uint8_t bin[1 + SECRET_KEY_LEN + 255];
    int rc = -1;
    int n = secret_bytes(s, bin, sizeof(bin));
    if (n < 0 || !out)
        goto out;
    if (base64) {
        size_t w = tg__b64_encode(out, cap, bin, (size_t)n, TG__B64_URL | TG__B64_NOPAD);
        if (w != TG__BAD_LEN)
            rc = (int)w;
    } else if (cap >= (size_t)n * 2 + 1) {
        tg__hex_encode(out, bin, (size_t)n);
        rc = n * 2;
    }
out:
    memset(bin, 0, sizeof(bin));
    return rc;
}

size_t secret_scrub_forms(const struct secret *s, char out[SECRET_FORMS_MAX][SECRET_FORM_CAP])
{
    static const enum secret_kind kinds[] = {SECRET_CLASSIC, SECRET_DD, SECRET_EE};
    static const int alphabets[] = {TG__B64_URL | TG__B64_NOPAD, TG__B64_STD | TG__B64_NOPAD};
    uint8_t bin[1 + SECRET_KEY_LEN + 255];
    size_t k = 0;
    tg__hex_encode(out[k++], s->key, SECRET_KEY_LEN);
    tg__hex_encode(out[k], s->key, SECRET_KEY_LEN);
    for (char *c = out[k++]; *c; c++)
        if (*c >= 'a' && *c <= 'f')
            *c = (char)(*c - 'a' + 'A');
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (kinds[i] == SECRET_EE && s->kind != SECRET_EE)
            continue; /* an ee form needs the domain it was configured with */
        struct secret v = *s;
        v.kind = kinds[i];
        int n = secret_bytes(&v, bin, sizeof bin);
        memset(&v, 0, sizeof v);
        for (size_t a = 0; n > 0 && a < sizeof alphabets / sizeof alphabets[0]; a++)
            if (tg__b64_encode(out[k], SECRET_FORM_CAP, bin, (size_t)n, alphabets[a]) !=
                TG__BAD_LEN)
                k++;
    }
    memset(bin, 0, sizeof bin);
    return k;
}

/* ---- redaction of secret-like text ---- */

/* The characters of every text form: hex, both base64 alphabets, padding. */
static bool form_char(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '+' ||
           c == '/' || c == '_' || c == '-' || c == '=';
}

static bool hex_char(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

enum { CL_DIGIT = 1, CL_LOWER = 2, CL_UPPER = 4 };

static unsigned char_class(unsigned char c)
{
    return c >= '0' && c <= '9'   ? CL_DIGIT
           : c >= 'a' && c <= 'z' ? CL_LOWER
           : c >= 'A' && c <= 'Z' ? CL_UPPER
                                  : 0;
}

/* Whether the word w[0..n) (form characters only) is a secret, or looks like part of one. */
static bool word_suspect(const char *w, size_t n)
{
    unsigned all = 0, hex_cl = 0, b64_cl = 0;
    size_t hex = 0, b64 = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)w[i];
        unsigned cl = char_class(c);
        all |= cl;
        hex = hex_char(c) ? hex + 1 : 0;
        hex_cl = hex ? hex_cl | cl : 0;
        if (hex >= 16 && (hex_cl & CL_DIGIT) && (hex_cl & (CL_LOWER | CL_UPPER)))
            return true; /* every hex form holds the key's 32 digits */
        b64 = cl || c == '_' || c == '-' ? b64 + 1 : 0;
        b64_cl = b64 ? b64_cl | cl : 0;
        if (b64 >= 20 && b64_cl == (CL_DIGIT | CL_LOWER | CL_UPPER))
            return true;
    }
    bool mixed = (all & (all - 1)) != 0; /* two classes or more */
    if (n < 22 || !mixed)                /* 22: base64 of a bare key, the shortest form */
        return false;
    struct secret s;
    bool ok = secret_parse(w, n, &s, NULL, 0) == 0;
    memset(&s, 0, sizeof s);
    return ok;
}

/* The next suspect word of s[0..n) at or after *at: its start, and its length in *len. */
static bool next_suspect(const char *s, size_t n, size_t *at, size_t *len)
{
    size_t i = *at;
    while (i < n) {
        while (i < n && !form_char((unsigned char)s[i]))
            i++;
        size_t start = i;
        while (i < n && form_char((unsigned char)s[i]))
            i++;
        if (i > start && word_suspect(s + start, i - start)) {
            *at = start;
            *len = i - start;
            return true;
        }
    }
    return false;
}

bool secret_lookalike(const char *s, size_t n)
{
    size_t at = 0, len = 0;
    return next_suspect(s, n, &at, &len);
}

size_t secret_redact(char *text)
{
    static const char mark[] = "[REDACTED]";
    size_t n = strlen(text), at = 0, len = 0, count = 0;
    while (next_suspect(text, n, &at, &len)) {
        /* a suspect word has at least 16 characters: the mark never makes the text longer */
        memset(text + at, 0, len);
        memcpy(text + at, mark, sizeof mark - 1);
        memmove(text + at + sizeof mark - 1, text + at + len, n - at - len + 1);
        n -= len - (sizeof mark - 1);
        at += sizeof mark - 1;
        count++;
    }
    return count;
}
