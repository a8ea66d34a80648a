/* tlsprofile: see tlsprofile.h. */
#include "proxy/wire/tlsprofile.h"

#include "proxy/wire/crypto.h"
#include "proxy/wire/faketls.h"
#include "proxy/wire/keyshare.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int fail(char *err, size_t errlen, int rc, const char *what)
{
    if (err && errlen)
        snprintf(err, errlen, "%s", what);
    return rc;
}

/* ---- building a profile from a refresh's flights ---- */

static bool same_shape(const struct tlsflight *a, const struct tlsflight *b)
{
    if (a->cipher != b->cipher || a->next != b->next || a->group != b->group ||
        a->key_len != b->key_len || a->ccs != b->ccs || a->sid_echo != b->sid_echo)
        return false;
    for (size_t i = 0; i < a->next; i++)
        if (a->ext[i].type != b->ext[i].type || a->ext[i].len != b->ext[i].len)
            return false;
    return true;
}

static size_t count_segments(const char *pattern)
{
    size_t k = 1;
    for (; *pattern; pattern++)
        k += *pattern == '|';
    return k;
}

int tlsprofile_build(const char *domain, const struct tlsflight *f, size_t n, int64_t now,
                     struct tlsprofile *out, char *err, size_t errlen)
{
    if (!domain || !f || !n || !out || strlen(domain) >= TLSPROFILE_DOMAIN_MAX)
        return -EINVAL;
    const struct tlsflight *s = &f[0];
    if (s->hrr)
        return fail(err, errlen, -EBADMSG,
                    "the site answered with a HelloRetryRequest (it wants another key share)");
    if (s->next > TLSPROFILE_MAX_EXT)
        return fail(err, errlen, -EBADMSG, "more ServerHello extensions than a profile keeps");
    if (s->group && s->key_len > TLSPROFILE_KEY_MAX)
        return fail(err, errlen, -EBADMSG, "a key share larger than a profile copies");
    if (!s->nenc)
        return fail(err, errlen, -EBADMSG,
                    "no encrypted records after the ServerHello (not a TLS 1.3 flight)");
    memset(out, 0, sizeof *out);
    memcpy(out->domain, domain, strlen(domain) + 1);
    out->learned_s = now;
    out->legacy_version = s->legacy_version;
    out->cipher = s->cipher;
    out->sid_echo = s->sid_echo;
    out->ccs = s->ccs;
    out->next = s->next;
    memcpy(out->ext, s->ext, s->next * sizeof s->ext[0]);
    out->group = s->group;
    out->key_len = s->group ? s->key_len : 0;
    out->selected = s->version;
    out->nenc_min = 255;
    /* the segment pattern: the most common among the probes of this shape; a tie goes to
       the one with more segments (reads only ever merge segments, never split them) */
    char pat[TLSPROFILE_MAX_LENS][TLSPROFILE_PATTERN];
    size_t pat_of[TLSPROFILE_MAX_LENS];
    for (size_t i = 0; i < n; i++) {
        if (!same_shape(s, &f[i]) || f[i].hrr || out->nlens == TLSPROFILE_MAX_LENS)
            continue;
        uint64_t wire = (uint64_t)f[i].enc_total + 5u * f[i].nenc;
        out->lens[out->nlens] = wire > UINT32_MAX ? UINT32_MAX : (uint32_t)wire;
        tlsflight_segments(&f[i], pat[out->nlens], TLSPROFILE_PATTERN);
        pat_of[out->nlens] = i;
        out->nlens++;
        uint8_t ne = f[i].nenc > 255 ? 255 : (uint8_t)f[i].nenc;
        if (ne < out->nenc_min)
            out->nenc_min = ne;
        if (ne > out->nenc_max)
            out->nenc_max = ne;
    }
    out->probes = (uint32_t)out->nlens;
    /* a probe whose reads merged the site's segments (a busy host: tlsflight_mark_merged)
       may lack a cut: when some probes read every segment apart, only they vote */
    bool any_exact = false;
    for (size_t i = 0; i < out->nlens; i++)
        any_exact = any_exact || !f[pat_of[i]].seg_merged;
    size_t best = 0, best_votes = 0;
    for (size_t i = 0; i < out->nlens; i++) {
        if (any_exact && f[pat_of[i]].seg_merged)
            continue;
        size_t votes = 0;
        for (size_t j = 0; j < out->nlens; j++)
            votes += strcmp(pat[i], pat[j]) == 0 && !(any_exact && f[pat_of[j]].seg_merged);
        if (votes > best_votes ||
            (votes == best_votes && count_segments(pat[i]) > count_segments(pat[best]))) {
            best = i;
            best_votes = votes;
        }
    }
    memcpy(out->pattern, pat[best], TLSPROFILE_PATTERN);
    const struct tlsflight *b = &f[pat_of[best]];
    uint64_t end = 0;
    for (size_t i = 0; i + 1 < b->nseg && out->ncuts < TLSPROFILE_MAX_CUTS; i++) {
        end += b->seg_len[i];
        if (!b->seg_cuts[i]) /* a cut inside a record is the path's (MSS), not the site's */
            out->cuts[out->ncuts++] = (uint32_t)end;
    }
    return 0;
}

unsigned tlsprofile_diff(const struct tlsprofile *p)
{
    unsigned diff = 0;
    if (p->cipher < 0x1301 || p->cipher > 0x1303)
        diff |= TLSFLIGHT_DIFF_CIPHER;
    for (size_t i = 0; i < p->next; i++)
        if (p->ext[i].type != TLSFLIGHT_EXT_KEY_SHARE &&
            p->ext[i].type != TLSFLIGHT_EXT_SUPPORTED_VERSIONS)
            diff |= TLSFLIGHT_DIFF_EXTS;
    if (p->group && (p->group != 0x001d || p->key_len != 32) &&
        keyshare_group_len(p->group) != p->key_len)
        diff |= TLSFLIGHT_DIFF_GROUP;
    if (!p->ccs)
        diff |= TLSFLIGHT_DIFF_NO_CCS;
    if (p->nenc_max > 1)
        diff |= TLSFLIGHT_DIFF_RECORDS;
    if (!p->sid_echo)
        diff |= TLSFLIGHT_DIFF_SESSION;
    return diff;
}

const char *tlsprofile_diff_text(unsigned diff, char *out, size_t cap)
{
    static const struct {
        unsigned bit;
        const char *text;
    } why[] = {
        {TLSFLIGHT_DIFF_CIPHER, "the site's cipher is not a TLS 1.3 suite: the answer names the "
                                "client's TLS 1.3 suite (Telegram clients speak nothing else)"},
        {TLSFLIGHT_DIFF_EXTS, "the site's ServerHello carries extensions other than key_share and "
                              "supported_versions: they are left out (their contents are not "
                              "recorded)"},
        {TLSFLIGHT_DIFF_GROUP, "the site's key share is of a group tgproxy makes no keys of "
                               "(it makes X25519, X448, secp256r1, secp384r1 and secp521r1): "
                               "the answer carries random bytes of the same length"},
        {TLSFLIGHT_DIFF_NO_CCS, "the site sends no ChangeCipherSpec; Telegram clients require one, "
                                "so the answer has it"},
        {TLSFLIGHT_DIFF_RECORDS,
         "the site spreads its encrypted handshake over several records; Telegram clients "
         "accept exactly one, so the answer sends the same bytes as one record (a front that "
         "packs its flight into one encrypted record, or a TLS terminator configured so, looks "
         "the same to an observer)"},
        {TLSFLIGHT_DIFF_SESSION, "the site does not echo the client's session id: the answer "
                                 "carries a random one"},
    };
    size_t w = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof why / sizeof why[0]; i++) {
        if (!(diff & why[i].bit))
            continue;
        int k = snprintf(out + w, cap - w, "%s%s", w ? "\n" : "", why[i].text);
        if (k < 0 || (size_t)k >= cap - w)
            break;
        w += (size_t)k;
    }
    return out;
}

size_t tlsprofile_draw_len(const struct tlsprofile *p, uint32_t r)
{
    if (!p->nlens)
        return 0;
    long len = (long)p->lens[(r >> 8) % p->nlens] - 5;
    len += (long)((r & 0xffu) % (2 * TLSPROFILE_JITTER + 1)) - TLSPROFILE_JITTER;
    if (len < 1)
        len = 1;
    if (len > FAKETLS_RECORD_MAX_OUT)
        len = FAKETLS_RECORD_MAX_OUT;
    return (size_t)len;
}

/* ---- the answer ---- */

static uint8_t *be16(uint8_t *p, size_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
    return p + 2;
}

int tlsprofile_answer(const struct tlsprofile *p, const struct faketls_hello *h,
                      const uint8_t key[16], uint8_t *out, size_t cap, size_t *cuts,
                      size_t *ncuts)
{
    if (!p || !h || !key || !out || !cuts || !ncuts || p->next > TLSPROFILE_MAX_EXT ||
        h->session_id_len > 32 || (p->group && p->key_len > TLSPROFILE_KEY_MAX) || !p->nlens)
        return -EINVAL;
    *ncuts = 0;
    size_t ext_len = 0;
    for (size_t i = 0; i < p->next; i++) {
        uint16_t t = p->ext[i].type;
        if (t == TLSFLIGHT_EXT_KEY_SHARE && p->group)
            ext_len += 4 + 4 + (size_t)p->key_len;
        else if (t == TLSFLIGHT_EXT_SUPPORTED_VERSIONS && p->selected)
            ext_len += 4 + 2;
    }
    uint32_t r;
    if (crypto_random(&r, sizeof r) != 0)
        return -EIO;
    size_t sid = h->session_id_len;
    size_t body = 2 + 32 + 1 + sid + 3 + (ext_len ? 2 + ext_len : 0);
    size_t ad = tlsprofile_draw_len(p, r);
    size_t total = 5 + 4 + body + 6 + 5 + ad;
    if (total > cap)
        return -ENOSPC;
    uint8_t *q = out;
    *q++ = TLSFLIGHT_REC_HANDSHAKE, *q++ = 0x03, *q++ = 0x03;
    q = be16(q, 4 + body);
    *q++ = 0x02, *q++ = 0x00;
    q = be16(q, body);
    q = be16(q, p->legacy_version);
    memset(q, 0, 32); /* the HMAC goes here */
    q += 32;
    *q++ = (uint8_t)sid;
    if (p->sid_echo)
        memcpy(q, h->session_id, sid);
    else if (sid && crypto_random(q, sid) != 0)
        return -EIO;
    q += sid;
    q = be16(q, p->cipher >= 0x1301 && p->cipher <= 0x1303 ? p->cipher : h->cipher);
    *q++ = 0x00;
    if (ext_len)
        q = be16(q, ext_len);
    for (size_t i = 0; i < p->next; i++) {
        uint16_t t = p->ext[i].type;
        if (t == TLSFLIGHT_EXT_KEY_SHARE && p->group) {
            q = be16(be16(q, t), 4 + (size_t)p->key_len);
            q = be16(be16(q, p->group), p->key_len);
            /* x25519 and the groups keyshare makes genuine shares of (an observer can check a
               NIST point is on its curve); another group's bytes are random */
            int rc = p->group == 0x001d && p->key_len == 32 ? keyshare_random(q)
                     : keyshare_group_len(p->group) == p->key_len
                         ? keyshare_group_random(p->group, q, p->key_len)
                         : crypto_random(q, p->key_len);
            if (rc != 0)
                return -EIO;
            q += p->key_len;
        } else if (t == TLSFLIGHT_EXT_SUPPORTED_VERSIONS && p->selected) {
            q = be16(be16(be16(q, t), 2), p->selected);
        }
    }
    static const uint8_t ccs[6] = {TLSFLIGHT_REC_CCS, 0x03, 0x03, 0x00, 0x01, 0x01};
    memcpy(q, ccs, sizeof ccs);
    q += sizeof ccs;
    *q++ = TLSFLIGHT_REC_APPDATA, *q++ = 0x03, *q++ = 0x03;
    q = be16(q, ad);
    if (crypto_random_public(q, ad) != 0)
        return -EIO;
    uint8_t mac[32];
    struct crypto_part parts[2] = {{h->random, 32}, {out, total}};
    if (crypto_hmac_sha256(key, 16, parts, 2, mac) != 0)
        return -EIO;
    memcpy(out + FAKETLS_RANDOM_OFF, mac, 32);
    for (size_t i = 0; i < p->ncuts && *ncuts < TLSPROFILE_MAX_CUTS; i++)
        if (p->cuts[i] > 0 && p->cuts[i] < total && (*ncuts == 0 || cuts[*ncuts - 1] < p->cuts[i]))
            cuts[(*ncuts)++] = p->cuts[i];
    return (int)total;
}

/* ---- the stored form ---- */

struct sbuf {
    char *p;
    size_t n, cap;
    bool over;
};

static void put(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct sbuf *b, const char *fmt, ...)
{
    if (b->over)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= b->cap - b->n)
        b->over = true;
    else
        b->n += (size_t)k;
}

size_t tlsprofile_format(const struct tlsprofile *p, size_t n, char *out, size_t cap)
{
    if (!out || !cap)
        return 0;
    struct sbuf b = {out, 0, cap, false};
    put(&b, "tgproxy-tls-front 1\n");
    for (size_t i = 0; i < n; i++) {
        const struct tlsprofile *x = &p[i];
        put(&b, "domain %s\nlearned %lld\nprobes %u\nversion %04x\ncipher %04x\n", x->domain,
            (long long)x->learned_s, (unsigned)x->probes, x->legacy_version, x->cipher);
        put(&b, "sid-echo %d\nccs %d\n", x->sid_echo, x->ccs);
        for (size_t e = 0; e < x->next; e++)
            put(&b, "ext %04x %u\n", x->ext[e].type, x->ext[e].len);
        if (x->group)
            put(&b, "group %04x %u\n", x->group, x->key_len);
        if (x->selected)
            put(&b, "selected %04x\n", x->selected);
        put(&b, "records %u %u\nlens", x->nenc_min, x->nenc_max);
        for (size_t k = 0; k < x->nlens; k++)
            put(&b, " %u", (unsigned)x->lens[k]);
        put(&b, "\ncuts");
        for (size_t k = 0; k < x->ncuts; k++)
            put(&b, " %u", (unsigned)x->cuts[k]);
        put(&b, "\npattern %s\nend\n", x->pattern);
    }
    return b.over ? 0 : b.n;
}

/* A line cut into words (at most 72: "lens" and 64 numbers). */
#define MAX_WORDS 72
struct line {
    const char *w[MAX_WORDS];
    size_t len[MAX_WORDS];
    size_t n;
};

static bool is_word(const char *w, size_t n, const char *s)
{
    return strlen(s) == n && memcmp(w, s, n) == 0;
}

static bool hex16(const char *w, size_t n, uint16_t *out)
{
    if (n != 4)
        return false;
    unsigned v = 0;
    for (size_t i = 0; i < 4; i++) {
        char c = w[i];
        unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                            : 16;
        if (d == 16)
            return false;
        v = v << 4 | d;
    }
    *out = (uint16_t)v;
    return true;
}

static bool dec(const char *w, size_t n, uint64_t max, uint64_t *out)
{
    if (n == 0 || n > 19)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (w[i] < '0' || w[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(w[i] - '0');
    }
    if (v > max)
        return false;
    *out = v;
    return true;
}

enum {
    F_LEARNED = 1 << 0,
    F_PROBES = 1 << 1,
    F_VERSION = 1 << 2,
    F_CIPHER = 1 << 3,
    F_SID = 1 << 4,
    F_CCS = 1 << 5,
    F_GROUP = 1 << 6,
    F_SELECTED = 1 << 7,
    F_RECORDS = 1 << 8,
    F_LENS = 1 << 9,
    F_CUTS = 1 << 10,
    F_PATTERN = 1 << 11,
};
#define F_REQUIRED                                                                                 \
    (F_LEARNED | F_PROBES | F_VERSION | F_CIPHER | F_SID | F_CCS | F_RECORDS | F_LENS | F_CUTS |    \
     F_PATTERN)

/* A finished block: its parts agree with each other. NULL or what is wrong. */
static const char *check_block(const struct tlsprofile *p, unsigned seen)
{
    if ((seen & F_REQUIRED) != F_REQUIRED)
        return "profile incomplete (learned, probes, version, cipher, sid-echo, ccs, records, "
               "lens, cuts and pattern are required)";
    int ks = -1, sv = -1;
    for (size_t i = 0; i < p->next; i++) {
        for (size_t j = 0; j < i; j++)
            if (p->ext[j].type == p->ext[i].type)
                return "an extension listed twice";
        if (p->ext[i].type == TLSFLIGHT_EXT_KEY_SHARE)
            ks = (int)i;
        if (p->ext[i].type == TLSFLIGHT_EXT_SUPPORTED_VERSIONS)
            sv = (int)i;
    }
    if ((ks >= 0) != (p->group != 0))
        return "group given without a key_share extension (0033), or the other way round";
    if (ks >= 0 && (size_t)p->key_len + 4 != p->ext[ks].len)
        return "group's key length does not match the key_share extension's length";
    if ((sv >= 0) != (p->selected != 0) || (sv >= 0 && p->ext[sv].len != 2))
        return "selected given without a 2-byte supported_versions extension (002b), or the "
               "other way round";
    if (p->nenc_min > p->nenc_max || p->nenc_min == 0)
        return "records: fewest must be 1 or more and at most the most";
    return NULL;
}

int tlsprofile_parse(const char *text, size_t len, struct tlsprofile *out, size_t cap, size_t *n,
                     char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!n || (!text && len) || (!out && cap))
        return -EINVAL;
    *n = 0;
    if (len > TLSPROFILE_FILE_MAX)
        return fail(err, errlen, -E2BIG, "file larger than 1 MiB");
    size_t at = 0, lineno = 0, got = 0;
    bool header = false, in_block = false;
    unsigned seen = 0;
    struct tlsprofile *cur = NULL;
    const char *why = NULL;
    int rc = -EBADMSG;
    while (at < len) {
        size_t end = at;
        while (end < len && text[end] != '\n')
            end++;
        lineno++;
        struct line l = {.n = 0};
        bool too_many = false;
        for (size_t i = at; i < end;) {
            while (i < end && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r'))
                i++;
            if (i == end)
                break;
            size_t s = i;
            while (i < end && text[i] != ' ' && text[i] != '\t' && text[i] != '\r')
                i++;
            if (l.n == MAX_WORDS) {
                too_many = true;
                break;
            }
            l.w[l.n] = text + s;
            l.len[l.n++] = i - s;
        }
        at = end < len ? end + 1 : end;
        if (too_many) {
            why = "too many words on the line";
            goto bad;
        }
        if (l.n == 0 || l.w[0][0] == '#')
            continue;
        const char *k = l.w[0];
        size_t kl = l.len[0], args = l.n - 1;
        uint64_t v = 0, v2 = 0;
        if (!header) {
            if (!is_word(k, kl, "tgproxy-tls-front") || args != 1 || !is_word(l.w[1], l.len[1], "1")) {
                why = "not a tgproxy tls-front file (the first line must be \"tgproxy-tls-front 1\")";
                goto bad;
            }
            header = true;
            continue;
        }
        if (!in_block) {
            if (!is_word(k, kl, "domain") || args != 1) {
                why = "expected \"domain NAME\" to start a profile";
                goto bad;
            }
            if (got == cap) {
                rc = -E2BIG;
                why = "more profiles than tgproxy keeps";
                goto bad;
            }
            cur = &out[got];
            memset(cur, 0, sizeof *cur);
            if (l.len[1] >= TLSPROFILE_DOMAIN_MAX) {
                why = "domain too long";
                goto bad;
            }
            for (size_t i = 0; i < l.len[1]; i++) {
                char c = l.w[1][i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '-' || c == '_')) {
                    why = "domain has a character outside [A-Za-z0-9._-]";
                    goto bad;
                }
            }
            for (size_t i = 0; i < got; i++)
                if (strlen(out[i].domain) == l.len[1] &&
                    memcmp(out[i].domain, l.w[1], l.len[1]) == 0) {
                    why = "a domain with two profiles";
                    goto bad;
                }
            memcpy(cur->domain, l.w[1], l.len[1]);
            cur->domain[l.len[1]] = '\0';
            in_block = true;
            seen = 0;
            continue;
        }
#define ONCE(flag)                                                                                 \
    do {                                                                                           \
        if (seen & (flag)) {                                                                       \
            why = "a line given twice in one profile";                                            \
            goto bad;                                                                              \
        }                                                                                          \
        seen |= (flag);                                                                            \
    } while (0)
        if (is_word(k, kl, "end") && args == 0) {
            if ((why = check_block(cur, seen)) != NULL)
                goto bad;
            got++;
            in_block = false;
        } else if (is_word(k, kl, "learned") && args == 1) {
            ONCE(F_LEARNED);
            if (!dec(l.w[1], l.len[1], (uint64_t)1 << 40, &v)) {
                why = "learned: Unix seconds expected";
                goto bad;
            }
            cur->learned_s = (int64_t)v;
        } else if (is_word(k, kl, "probes") && args == 1) {
            ONCE(F_PROBES);
            if (!dec(l.w[1], l.len[1], 1000, &v)) {
                why = "probes: a count of 0..1000 expected";
                goto bad;
            }
            cur->probes = (uint32_t)v;
        } else if ((is_word(k, kl, "version") || is_word(k, kl, "cipher") ||
                    is_word(k, kl, "selected")) &&
                   args == 1) {
            uint16_t x;
            if (!hex16(l.w[1], l.len[1], &x)) {
                why = "four hex digits expected";
                goto bad;
            }
            if (k[0] == 'v') {
                ONCE(F_VERSION);
                cur->legacy_version = x;
            } else if (k[0] == 'c') {
                ONCE(F_CIPHER);
                cur->cipher = x;
            } else {
                ONCE(F_SELECTED);
                if (!x) {
                    why = "selected: version 0000";
                    goto bad;
                }
                cur->selected = x;
            }
        } else if ((is_word(k, kl, "sid-echo") || is_word(k, kl, "ccs")) && args == 1) {
            if (!dec(l.w[1], l.len[1], 1, &v)) {
                why = "0 or 1 expected";
                goto bad;
            }
            if (k[0] == 's') {
                ONCE(F_SID);
                cur->sid_echo = v;
            } else {
                ONCE(F_CCS);
                cur->ccs = v;
            }
        } else if (is_word(k, kl, "ext") && args == 2) {
            uint16_t t;
            if (!hex16(l.w[1], l.len[1], &t) || !dec(l.w[2], l.len[2], 65535, &v)) {
                why = "ext: a type in four hex digits and a length expected";
                goto bad;
            }
            if (cur->next == TLSPROFILE_MAX_EXT) {
                why = "more extensions than a profile keeps";
                goto bad;
            }
            cur->ext[cur->next++] = (struct tlsflight_ext){t, (uint16_t)v};
        } else if (is_word(k, kl, "group") && args == 2) {
            ONCE(F_GROUP);
            uint16_t g;
            if (!hex16(l.w[1], l.len[1], &g) || !g || !dec(l.w[2], l.len[2], TLSPROFILE_KEY_MAX, &v)) {
                why = "group: a non-zero group in four hex digits and a key length of at most "
                      "256 expected";
                goto bad;
            }
            cur->group = g;
            cur->key_len = (uint16_t)v;
        } else if (is_word(k, kl, "records") && args == 2) {
            ONCE(F_RECORDS);
            if (!dec(l.w[1], l.len[1], 255, &v) || !dec(l.w[2], l.len[2], 255, &v2)) {
                why = "records: two counts of 1..255 expected";
                goto bad;
            }
            cur->nenc_min = (uint8_t)v;
            cur->nenc_max = (uint8_t)v2;
        } else if (is_word(k, kl, "lens")) {
            ONCE(F_LENS);
            if (args == 0 || args > TLSPROFILE_MAX_LENS) {
                why = "lens: 1 to 64 lengths expected";
                goto bad;
            }
            for (size_t i = 0; i < args; i++) {
                if (!dec(l.w[1 + i], l.len[1 + i], 1 << 20, &v) || v < 6) {
                    why = "lens: each a byte count of 6..1048576";
                    goto bad;
                }
                cur->lens[i] = (uint32_t)v;
            }
            cur->nlens = args;
        } else if (is_word(k, kl, "cuts")) {
            ONCE(F_CUTS);
            if (args > TLSPROFILE_MAX_CUTS) {
                why = "cuts: at most 8 offsets";
                goto bad;
            }
            for (size_t i = 0; i < args; i++) {
                if (!dec(l.w[1 + i], l.len[1 + i], 1 << 20, &v) || v == 0 ||
                    (i && v <= cur->cuts[i - 1])) {
                    why = "cuts: increasing byte offsets of 1..1048576";
                    goto bad;
                }
                cur->cuts[i] = (uint32_t)v;
            }
            cur->ncuts = args;
        } else if (is_word(k, kl, "pattern") && args == 1) {
            ONCE(F_PATTERN);
            if (l.len[1] >= TLSPROFILE_PATTERN) {
                why = "pattern too long";
                goto bad;
            }
            for (size_t i = 0; i < l.len[1]; i++)
                if (!l.w[1][i] || !strchr("SHCADL+|~", l.w[1][i])) {
                    why = "pattern: only SH, CCS, AD, HS, AL, '+', '|' and '~'";
                    goto bad;
                }
            memcpy(cur->pattern, l.w[1], l.len[1]);
            cur->pattern[l.len[1]] = '\0';
        } else {
            why = "unknown line, or a wrong number of values";
            goto bad;
        }
#undef ONCE
    }
    if (!header) {
        why = "empty file";
        lineno = 0;
        goto bad;
    }
    if (in_block) {
        why = "the last profile has no \"end\" line";
        goto bad;
    }
    *n = got;
    return 0;
bad:
    if (err && errlen)
        snprintf(err, errlen, "line %zu: %s", lineno, why);
    *n = 0;
    return rc;
}
