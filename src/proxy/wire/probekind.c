/* probekind: see probekind.h. */
#include "proxy/wire/probekind.h"

#include "proxy/wire/crypto.h"
#include "proxy/wire/faketls.h"
#include "proxy/wire/tlsflight.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

enum build {
    B_NONE,
    B_BYTE,
    B_GET,
    B_H2,
    B_PUT,
    B_ALERT,
    B_APPDATA,
    B_SSLV2,
    B_TLS12,
    B_PREFIX,
    B_PARTIAL,
    B_LEN511,
    B_LEN16385,
    B_JUNK16K,
    B_HELLO,
    B_HELLO_NOSNI,
    B_JUNK40,
    B_ABRIDGED,
    B_DELETE,
    B_KEY_SNI,
    B_KEY_PAST,
    B_KEY_FUTURE,
    B_KEY_VALID,
};

struct kind {
    struct probekind k;
    enum build b;
};

#define T PROBEKIND_TLS
#define K PROBEKIND_KEY
#define S PROBEKIND_SILENT
static const struct kind kinds[] = {
    {{"silent", S, false, NULL}, B_NONE},
    {{"one byte 42", 0, false, NULL}, B_BYTE},
    {{"HTTP GET /", T, false, NULL}, B_GET},
    {{"HTTP GET, more after the close", T, false, "more"}, B_GET},
    {{"HTTP/2 preface", T, false, NULL}, B_H2},
    {{"PUT / HTTP/1.0", T, false, NULL}, B_PUT},
    {{"DELETE", T, false, NULL}, B_DELETE},
    {{"TLS alert first", T, false, NULL}, B_ALERT},
    {{"ApplicationData first", T, false, NULL}, B_APPDATA},
    {{"SSLv2-compatible hello", T, false, NULL}, B_SSLV2},
    {{"TLS 1.2 record hello", T, false, NULL}, B_TLS12},
    {{"header 16 03 01 02 00 only", T | S, false, NULL}, B_PREFIX},
    {{"partial hello, half-close", T, true, NULL}, B_PARTIAL},
    {{"hello record length 511", T, false, NULL}, B_LEN511},
    {{"hello record length 16385", T, false, NULL}, B_LEN16385},
    {{"16 KiB junk hello", T, false, NULL}, B_JUNK16K},
    {{"40 junk bytes", T, false, NULL}, B_JUNK40},
    {{"ef first (abridged)", T, false, NULL}, B_ABRIDGED},
    {{"ClientHello, unknown key", T, false, NULL}, B_HELLO},
    {{"ClientHello, no SNI", T, false, NULL}, B_HELLO_NOSNI},
    {{"right key, foreign SNI", T | K, false, NULL}, B_KEY_SNI},
    {{"right key, 1 h old", T | K, false, NULL}, B_KEY_PAST},
    {{"right key, 1 h ahead", T | K, false, NULL}, B_KEY_FUTURE},
    {{"replayed valid hello", T | K | PROBEKIND_REPLAY, false, NULL}, B_KEY_VALID},
};
#undef T
#undef K
#undef S

size_t probekind_count(void)
{
    return sizeof kinds / sizeof kinds[0];
}

const struct probekind *probekind_get(size_t i)
{
    return i < probekind_count() ? &kinds[i].k : NULL;
}

/* A ClientHello record of len bytes whose body is junk after the handshake header. */
static size_t bad_hello(uint8_t *out, size_t len)
{
    out[0] = 0x16, out[1] = 0x03, out[2] = 0x01;
    out[3] = (uint8_t)(len >> 8), out[4] = (uint8_t)len;
    out[5] = 0x01, out[6] = 0, out[7] = (uint8_t)((len - 4) >> 8), out[8] = (uint8_t)(len - 4);
    for (size_t i = 9; i < 5 + len; i++)
        out[i] = (uint8_t)(i * 131 + 7);
    return 5 + len;
}

static size_t put(uint8_t *out, const void *p, size_t n)
{
    memcpy(out, p, n);
    return n;
}

size_t probekind_signed_hello(uint8_t *out, size_t cap, const char *sni, const uint8_t key[16],
                              int64_t ts, const uint8_t *rnd)
{
    size_t n = tlsflight_client_hello(out, cap, sni, rnd);
    if (n == 0)
        return 0;
    memset(out + FAKETLS_RANDOM_OFF, 0, 32);
    uint8_t mac[32];
    struct crypto_part part = {out, n};
    if (crypto_hmac_sha256(key, 16, &part, 1, mac) != 0)
        return 0;
    uint32_t t = (uint32_t)ts;
    for (int i = 0; i < 4; i++)
        mac[28 + i] ^= (uint8_t)(t >> (8 * i));
    memcpy(out + FAKETLS_RANDOM_OFF, mac, 32);
    crypto_wipe(mac, sizeof mac);
    return n;
}

size_t probekind_bytes(size_t i, const struct probekind_ctx *c, uint8_t *out, size_t cap)
{
    if (i >= probekind_count() || cap < PROBEKIND_BYTES_MAX)
        return (size_t)-1;
    const char *sni = c->sni ? c->sni : "";
    static const uint8_t alert[] = {0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x28};
    static const char h2[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    static const char put10[] = "PUT / HTTP/1.0\r\n\r\n";
    static const uint8_t appdata[5 + 32] = {0x17, 0x03, 0x03, 0x00, 0x20, 1, 2, 3};
    /* an SSLv2-compatible ClientHello offering TLS 1.0: 36 bytes */
    static const uint8_t v2[] = {0x80, 0x22, 0x01, 0x03, 0x01, 0x00, 0x09, 0x00, 0x00,
                                 0x00, 0x10, 0x00, 0x00, 0x2f, 0x00, 0x00, 0x35, 0x00,
                                 0x00, 0x0a, 1,    2,    3,    4,    5,    6,    7,
                                 8,    9,    10,   11,   12,   13,   14,   15,   16};
    /* a ClientHello in a TLS 1.2 record (16 03 03), no extensions: 50 bytes */
    static const uint8_t tls12[] = {0x16, 0x03, 0x03, 0x00, 0x2d, 0x01, 0x00, 0x00, 0x29, 0x03,
                                    0x03, 1,    2,    3,    4,    5,    6,    7,    8,    9,
                                    10,   11,   12,   13,   14,   15,   16,   17,   18,   19,
                                    20,   21,   22,   23,   24,   25,   26,   27,   28,   29,
                                    30,   31,   32,   0x00, 0x00, 0x02, 0xc0, 0x2b, 0x01, 0x00};
    static const uint8_t prefix[] = {0x16, 0x03, 0x01, 0x02, 0x00};
    static const uint8_t abridged[] = {0xef, 1, 2, 3};
    bool keyed = kinds[i].k.flags & PROBEKIND_KEY;
    if (keyed && !c->key)
        return (size_t)-1;
    int n;
    switch (kinds[i].b) {
    case B_NONE:
        return 0;
    case B_BYTE:
        out[0] = 0x42;
        return 1;
    case B_GET:
        n = snprintf((char *)out, cap, "GET / HTTP/1.1\r\nHost: %.200s\r\n\r\n", sni);
        return n > 0 ? (size_t)n : (size_t)-1;
    case B_H2:
        return put(out, h2, sizeof h2 - 1);
    case B_PUT:
        return put(out, put10, sizeof put10 - 1);
    case B_DELETE:
        return put(out, "DELETE", 6);
    case B_ALERT:
        return put(out, alert, sizeof alert);
    case B_APPDATA:
        return put(out, appdata, sizeof appdata);
    case B_SSLV2:
        return put(out, v2, sizeof v2);
    case B_TLS12:
        return put(out, tls12, sizeof tls12);
    case B_PREFIX:
        return put(out, prefix, sizeof prefix);
    case B_PARTIAL:
        bad_hello(out, 512);
        return 100;
    case B_LEN511:
        return bad_hello(out, 511);
    case B_LEN16385:
        return bad_hello(out, 16385);
    case B_JUNK16K:
        return bad_hello(out, 16384);
    case B_JUNK40:
        for (size_t j = 0; j < 40; j++)
            out[j] = (uint8_t)(j * 37 + 11);
        return 40;
    case B_ABRIDGED:
        return put(out, abridged, sizeof abridged);
    case B_HELLO:
    case B_HELLO_NOSNI: {
        size_t hl = tlsflight_client_hello(out, cap, kinds[i].b == B_HELLO ? sni : NULL, c->rnd);
        return hl ? hl : (size_t)-1;
    }
    case B_KEY_SNI:
    case B_KEY_PAST:
    case B_KEY_FUTURE:
    case B_KEY_VALID: {
        char foreign[256];
        snprintf(foreign, sizeof foreign, "www.other-%.180s", sni);
        int64_t ts = c->now + (kinds[i].b == B_KEY_PAST     ? -3600
                               : kinds[i].b == B_KEY_FUTURE ? 3600
                                                            : 0);
        size_t hl = probekind_signed_hello(out, cap, kinds[i].b == B_KEY_SNI ? foreign : sni,
                                           c->key, ts, c->rnd);
        return hl ? hl : (size_t)-1;
    }
    }
    return (size_t)-1;
}

bool probekind_answer_genuine(const uint8_t *hello, size_t hl, const uint8_t *a, size_t n,
                              const uint8_t key[16])
{
    /* ServerHello record, CCS record, one ApplicationData record */
    size_t at = 0, lens[3];
    static const uint8_t types[3] = {0x16, 0x14, 0x17};
    for (int r = 0; r < 3; r++) {
        if (at + 5 > n || a[at] != types[r] || a[at + 1] != 0x03)
            return false;
        lens[r] = (size_t)a[at + 3] << 8 | a[at + 4];
        at += 5 + lens[r];
        if (at > n)
            return false;
    }
    if (hl < FAKETLS_RANDOM_OFF + 32 || lens[0] < 6 + 32 || at > FAKETLS_SERVER_HELLO_MAX)
        return false;
    uint8_t buf[FAKETLS_SERVER_HELLO_MAX];
    memcpy(buf, a, at);
    memset(buf + FAKETLS_RANDOM_OFF, 0, 32);
    struct crypto_part parts[2] = {{hello + FAKETLS_RANDOM_OFF, 32}, {buf, at}};
    uint8_t mac[32];
    if (crypto_hmac_sha256(key, 16, parts, 2, mac) != 0)
        return false;
    bool ok = memcmp(mac, a + FAKETLS_RANDOM_OFF, 32) == 0;
    crypto_wipe(mac, sizeof mac);
    return ok;
}

/* ---- comparing ---- */

const char *probekind_end_name(enum probekind_end e)
{
    return e == PROBEKIND_FIN ? "FIN" : e == PROBEKIND_RST ? "RST" : "open";
}

enum probekind_tclass probekind_tclass(long ms, long now_ms)
{
    return ms < 0 ? PROBEKIND_T_OPEN : ms < now_ms ? PROBEKIND_T_NOW : PROBEKIND_T_LATER;
}

/* Does b start like TLS records (a known type, version 03 0x)? */
static bool tls_like(const uint8_t *b, size_t n)
{
    return n >= 3 && b[0] >= 0x14 && b[0] <= 0x17 && b[1] == 0x03 && b[2] <= 0x04;
}

static bool http_like(const uint8_t *b, size_t n)
{
    return n >= 9 && memcmp(b, "HTTP/", 5) == 0;
}

struct out {
    char *p;
    size_t w, cap;
};

__attribute__((format(printf, 2, 3))) static void say(struct out *o, const char *fmt, ...)
{
    if (o->w + 1 >= o->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(o->p + o->w, o->cap - o->w, fmt, ap);
    va_end(ap);
    if (k < 0)
        return;
    o->w += (size_t)k;
    if (o->w >= o->cap)
        o->w = o->cap - 1;
}

static size_t line_len(const uint8_t *b, size_t n)
{
    size_t i = 0;
    while (i < n && b[i] != '\n')
        i++;
    return i;
}

/* Headers whose values differ between two answers of one server. */
static bool volatile_header(const uint8_t *name, size_t n)
{
    static const char *const names[] = {"date",         "expires", "last-modified",
                                        "set-cookie",   "etag",    "age",
                                        "x-request-id", "cf-ray",  "report-to"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == n && strncasecmp(names[i], (const char *)name, n) == 0)
            return true;
    return false;
}

/* The end of the HTTP header block (past the blank line), or n. */
static size_t http_head_end(const uint8_t *b, size_t n)
{
    for (size_t at = 0; at < n;) {
        size_t l = line_len(b + at, n - at);
        if (l == 0 || (l == 1 && b[at] == '\r'))
            return at + l + (at + l < n);
        at += l + 1;
    }
    return n;
}

static void http_shape(const uint8_t *b, size_t n, struct out *o)
{
    size_t l = line_len(b, n);
    size_t shown = l > 0 && b[l - 1] == '\r' ? l - 1 : l;
    say(o, "%.*s;", (int)(shown > 60 ? 60 : shown), (const char *)b);
    size_t head = http_head_end(b, n);
    for (size_t at = l + 1; at < head;) {
        size_t ll = line_len(b + at, head - at);
        const uint8_t *colon = memchr(b + at, ':', ll);
        if (colon)
            say(o, " %.*s", (int)(colon - (b + at) > 32 ? 32 : colon - (b + at)),
                (const char *)(b + at));
        at += ll + 1;
    }
    say(o, "; body %zu", n - head);
}

const char *probekind_shape(const uint8_t *b, size_t n, bool tls, char *buf, size_t cap)
{
    struct out o = {buf, 0, cap};
    buf[0] = '\0';
    if (n == 0) {
        say(&o, "-");
        return buf;
    }
    if (tls && tls_like(b, n)) {
        size_t at = 0;
        while (at + 5 <= n) {
            size_t len = (size_t)b[at + 3] << 8 | b[at + 4];
            if (b[at] == 0x17)
                say(&o, "%s17/~%zu", at ? " " : "", len);
            else
                say(&o, "%s%02x/%zu", at ? " " : "", b[at], len);
            if (b[at] == 0x15 && at + 5 + len <= n && len <= 8) {
                say(&o, ":");
                for (size_t i = 0; i < len; i++)
                    say(&o, "%02x", b[at + 5 + i]);
            }
            at += 5 + len;
        }
        if (at < n)
            say(&o, " +%zu", n - at);
        else if (at > n)
            say(&o, " (cut)");
        return buf;
    }
    if (http_like(b, n)) {
        http_shape(b, n, &o);
        return buf;
    }
    say(&o, "%zu bytes ", n);
    for (size_t i = 0; i < n && i < 12; i++)
        say(&o, "%02x", b[i]);
    if (n > 12)
        say(&o, "..");
    return buf;
}

/* TLS answers: same record types, plaintext lengths, alerts; encrypted lengths close. */
static bool tls_same(const uint8_t *a, size_t an, const uint8_t *b, size_t bn)
{
    size_t i = 0, j = 0;
    while (i + 5 <= an && j + 5 <= bn) {
        size_t la = (size_t)a[i + 3] << 8 | a[i + 4], lb = (size_t)b[j + 3] << 8 | b[j + 4];
        if (a[i] != b[j] || a[i + 1] != b[j + 1] || a[i + 2] != b[j + 2])
            return false;
        if (a[i] == 0x17) {
            if ((la > lb ? la - lb : lb - la) > PROBEKIND_ENC_SLACK)
                return false;
        } else if (la != lb) {
            return false;
        }
        if (a[i] == 0x15 || a[i] == 0x14) { /* alerts and CCS: the bytes themselves (as
                                                   far as both were kept) */
            size_t ka = an - i - 5 < la ? an - i - 5 : la, kb = bn - j - 5 < lb ? bn - j - 5 : lb;
            if (ka != kb || memcmp(a + i + 5, b + j + 5, ka) != 0)
                return false;
        }
        i += 5 + la;
        j += 5 + lb;
    }
    /* both end at a record boundary or both are cut inside one (the kept bytes' end) */
    return (i + 5 > an) == (j + 5 > bn) && (i >= an) == (j >= bn);
}

/* HTTP answers: the same lines, a volatile header's value aside. */
static bool http_same(const uint8_t *a, size_t an, const uint8_t *b, size_t bn)
{
    size_t ha = http_head_end(a, an), hb = http_head_end(b, bn);
    if (an - ha != bn - hb || memcmp(a + ha, b + hb, an - ha) != 0)
        return false;
    size_t i = 0, j = 0;
    while (i < ha && j < hb) {
        size_t la = line_len(a + i, ha - i), lb = line_len(b + j, hb - j);
        const uint8_t *ca = memchr(a + i, ':', la), *cb = memchr(b + j, ':', lb);
        if (i > 0 && ca && cb && ca - (a + i) == cb - (b + j) &&
            strncasecmp((const char *)(a + i), (const char *)(b + j), (size_t)(ca - (a + i))) ==
                0 &&
            volatile_header(a + i, (size_t)(ca - (a + i)))) {
            /* same header, value free */
        } else if (la != lb || memcmp(a + i, b + j, la) != 0) {
            return false;
        }
        i += la + 1;
        j += lb + 1;
    }
    return i >= ha && j >= hb;
}

static bool bytes_same(const struct probekind *k, const struct probekind_obs *s,
                       const struct probekind_obs *p)
{
    if ((s->n == 0) != (p->n == 0))
        return false;
    if ((k->flags & PROBEKIND_TLS) && tls_like(s->bytes, s->n) && tls_like(p->bytes, p->n))
        return tls_same(s->bytes, s->n, p->bytes, p->n);
    if (http_like(s->bytes, s->n) && http_like(p->bytes, p->n))
        return http_same(s->bytes, s->n, p->bytes, p->n);
    return s->total == p->total && s->n == p->n &&
           (s->n == 0 || memcmp(s->bytes, p->bytes, s->n) == 0);
}

/* Two times: both none (open), or both at once, or within max(1000 ms, 25 %) of each other
   (what network and load jitter can explain: a close at once and one 0.9 s later are not
   told apart; one at once and one at a 10 s timer are). */
static bool time_same(long a, long b, long now_ms)
{
    enum probekind_tclass ca = probekind_tclass(a, now_ms), cb = probekind_tclass(b, now_ms);
    if (ca == PROBEKIND_T_OPEN || cb == PROBEKIND_T_OPEN)
        return ca == cb;
    if (ca == PROBEKIND_T_NOW && cb == PROBEKIND_T_NOW)
        return true;
    long d = a > b ? a - b : b - a, big = a > b ? a : b;
    return d <= 1000 || d * 4 <= big;
}

unsigned probekind_compare(const struct probekind *k, const struct probekind_obs *site,
                           const struct probekind_obs *proxy, long now_ms)
{
    unsigned diff = 0;
    if (!bytes_same(k, site, proxy))
        diff |= PROBEKIND_DIFF_BYTES;
    if (site->end != proxy->end)
        diff |= PROBEKIND_DIFF_END;
    long se = site->end == PROBEKIND_OPEN ? -1 : site->end_ms;
    long pe = proxy->end == PROBEKIND_OPEN ? -1 : proxy->end_ms;
    if (!(diff & PROBEKIND_DIFF_END) && !time_same(se, pe, now_ms))
        diff |= PROBEKIND_DIFF_TIME;
    if (site->first_ms >= 0 && proxy->first_ms >= 0 &&
        !time_same(site->first_ms, proxy->first_ms, now_ms))
        diff |= PROBEKIND_DIFF_FIRST;
    if (site->reset_after_eof != proxy->reset_after_eof)
        diff |= PROBEKIND_DIFF_RESET;
    return diff;
}
