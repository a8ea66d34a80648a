/*
 * faketls: ClientHello parsing and validation, the ServerHello answer, and TLS record
 * framing after the handshake (see faketls.h, brief section 4).
 */
#include "proxy/wire/faketls.h"

#include <errno.h>
#include <string.h>

#include "core/str.h"
#include "proxy/wire/crypto.h"
#include "proxy/wire/keyshare.h"

enum { REC_HANDSHAKE = 0x16, REC_CCS = 0x14, REC_ALERT = 0x15, REC_DATA = 0x17 };

/* ---- bounded cursor over a byte range ---- */

struct cur {
    const uint8_t *p;
    size_t n;
};

static bool take(struct cur *c, size_t k, const uint8_t **out)
{
    if (c->n < k)
        return false;
    if (out)
        *out = c->p;
    c->p += k;
    c->n -= k;
    return true;
}

static bool take_u8(struct cur *c, size_t *v)
{
    const uint8_t *b;
    if (!take(c, 1, &b))
        return false;
    *v = b[0];
    return true;
}

static bool take_u16(struct cur *c, size_t *v)
{
    const uint8_t *b;
    if (!take(c, 2, &b))
        return false;
    *v = (size_t)b[0] << 8 | b[1];
    return true;
}

/* A length-prefixed sub-range (prefix of 1 or 2 bytes) that must fit inside c. */
static bool take_vec(struct cur *c, int prefix, struct cur *sub)
{
    size_t n;
    if (!(prefix == 1 ? take_u8(c, &n) : take_u16(c, &n)))
        return false;
    sub->p = c->p;
    sub->n = n;
    return take(c, n, NULL);
}

static bool is_grease(size_t v)
{
    return (v & 0x0f0f) == 0x0a0a && (v >> 8) == (v & 0xff);
}

const char *faketls_verdict_name(enum faketls_verdict v)
{
    switch (v) {
    case FAKETLS_ACCEPT:
        return "accept";
    case FAKETLS_BAD_DIGEST:
        return "bad-digest";
    case FAKETLS_BAD_TIME:
        return "timestamp-out-of-window";
    case FAKETLS_BAD_SNI:
        return "sni-mismatch";
    case FAKETLS_BAD_CIPHER:
        return "no-tls13-cipher";
    default:
        return "internal-error";
    }
}

enum faketls_status faketls_peek(const uint8_t *buf, size_t len, size_t *record_len)
{
    static const uint8_t lead[3] = {REC_HANDSHAKE, 0x03, 0x01};
    for (size_t i = 0; i < 3 && i < len; i++)
        if (buf[i] != lead[i])
            return FAKETLS_BAD;
    if (len < FAKETLS_HDR_LEN)
        return FAKETLS_NEED_MORE;
    size_t ll = (size_t)buf[3] << 8 | buf[4];
    if (ll < FAKETLS_HELLO_MIN || ll > FAKETLS_HELLO_MAX)
        return FAKETLS_BAD;
    if (record_len)
        *record_len = FAKETLS_HDR_LEN + ll;
    return FAKETLS_OK;
}

/* server_name extension body: list of (type, name) entries, host names kept. */
static bool parse_sni(struct cur ext, const uint8_t *rec, struct faketls_hello *h)
{
    struct cur list;
    if (h->has_sni || !take_vec(&ext, 2, &list) || ext.n != 0 || list.n == 0)
        return false;
    h->has_sni = true;
    while (list.n > 0) {
        size_t type;
        struct cur name;
        if (!take_u8(&list, &type) || !take_vec(&list, 2, &name))
            return false;
        if (type == 0 && name.n > 0 && h->nsni < FAKETLS_MAX_SNI) {
            h->sni[h->nsni].off = (size_t)(name.p - rec);
            h->sni[h->nsni].len = name.n;
            h->nsni++;
        }
    }
    return true;
}

static bool parse_suites(struct cur suites, struct faketls_hello *h)
{
    if (suites.n < 2 || suites.n % 2)
        return false;
    while (suites.n > 0) {
        size_t s = 0;
        take_u16(&suites, &s);
        if (is_grease(s))
            continue;
        if (!h->first_suite)
            h->first_suite = (uint16_t)s;
        if (!h->cipher && s >= 0x1301 && s <= 0x1303)
            h->cipher = (uint16_t)s;
    }
    return true;
}

static bool parse_extensions(struct cur exts, const uint8_t *rec, struct faketls_hello *h)
{
    while (exts.n > 0) {
        size_t type;
        struct cur body;
        if (!take_u16(&exts, &type) || !take_vec(&exts, 2, &body))
            return false;
        if (type == 0x0000 && !parse_sni(body, rec, h))
            return false;
    }
    return true;
}

/* The ClientHello handshake body (after the 4-byte handshake header). */
static const char *parse_body(struct cur b, const uint8_t *rec, struct faketls_hello *h)
{
    const uint8_t *rnd;
    struct cur sid, suites, comp, exts;
    if (!take(&b, 2, NULL) || !take(&b, 32, &rnd))
        return "ClientHello shorter than version + random";
    memcpy(h->random, rnd, 32);
    if (!take_vec(&b, 1, &sid) || sid.n > 32)
        return "bad session id length";
    memcpy(h->session_id, sid.p, sid.n);
    h->session_id_len = (uint8_t)sid.n;
    if (!take_vec(&b, 2, &suites) || !parse_suites(suites, h))
        return "bad cipher suite list";
    if (!take_vec(&b, 1, &comp) || comp.n == 0)
        return "bad compression methods";
    if (b.n == 0)
        return NULL; /* no extensions at all */
    if (!take_vec(&b, 2, &exts) || b.n != 0)
        return "extensions length does not match the ClientHello";
    if (!parse_extensions(exts, rec, h))
        return "malformed extension (or duplicate server_name)";
    return NULL;
}

enum faketls_status faketls_parse_hello(const uint8_t *buf, size_t len, struct faketls_hello *out,
                                        const char **why)
{
    size_t rec_len;
    const char *w = "not a ClientHello record of 512..16384 bytes";
    enum faketls_status st = faketls_peek(buf, len, &rec_len);
    memset(out, 0, sizeof(*out));
    if (st == FAKETLS_OK && len < rec_len)
        st = FAKETLS_NEED_MORE;
    if (st != FAKETLS_OK)
        goto out;
    st = FAKETLS_BAD;
    size_t hs_len = (size_t)buf[6] << 16 | (size_t)buf[7] << 8 | buf[8];
    if (buf[5] != 0x01) {
        w = "handshake type is not ClientHello";
        goto out;
    }
    if (hs_len != rec_len - FAKETLS_HDR_LEN - 4) {
        w = "handshake length does not fill the record (fragmented or padded)";
        goto out;
    }
    out->rec = buf;
    out->len = rec_len;
    w = parse_body((struct cur){buf + 9, hs_len}, buf, out);
    if (!w)
        st = FAKETLS_OK;
out:
    if (why)
        *why = st == FAKETLS_OK ? NULL : st == FAKETLS_NEED_MORE ? "incomplete record" : w;
    return st;
}

/* ---- validation ---- */

static bool ascii_ieq(const uint8_t *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t x = a[i], y = (uint8_t)b[i];
        if (x >= 'A' && x <= 'Z')
            x = (uint8_t)(x + 32);
        if (y >= 'A' && y <= 'Z')
            y = (uint8_t)(y + 32);
        if (x != y)
            return false;
    }
    return true;
}

uint32_t faketls_domain_hash(const void *domain, size_t len)
{
    const uint8_t *p = domain;
    uint32_t x = 2166136261u; /* FNV-1a over the lower-cased bytes */
    for (size_t i = 0; i < len; i++) {
        uint8_t c = p[i] >= 'A' && p[i] <= 'Z' ? (uint8_t)(p[i] + 32) : p[i];
        x = (x ^ c) * 16777619u;
    }
    return x | 1u;
}

/* Does the SNI policy admit key k for hello h? hash[i] = faketls_domain_hash(sni[i]). */
static bool sni_ok(const struct faketls_hello *h, const uint32_t *hash, const struct faketls_key *k,
                   const struct faketls_policy *pol)
{
    if (!h->has_sni)
        return !pol->reject_missing_sni;
    for (size_t i = 0; i < h->nsni; i++)
        if (h->sni[i].len == k->domain_len && (!k->domain_hash || k->domain_hash == hash[i]) &&
            ascii_ieq(h->rec + h->sni[i].off, k->domain, k->domain_len))
            return true;
    return pol->accept_sni_mismatch;
}

/* Digest check for one key: constant time over the 28 bytes; *ts from the last 4. */
static int digest_ok(const struct faketls_hello *h, const uint8_t key[16], bool *ok, uint32_t *ts)
{
    static const uint8_t zeros[32];
    uint8_t m[32], x[32];
    struct crypto_part parts[3] = {
        {h->rec, FAKETLS_RANDOM_OFF},
        {zeros, 32},
        {h->rec + FAKETLS_RANDOM_OFF + 32, h->len - FAKETLS_RANDOM_OFF - 32},
    };
    int rc = crypto_hmac_sha256(key, 16, parts, 3, m);
    for (int i = 0; i < 32; i++)
        x[i] = h->random[i] ^ m[i];
    *ok = rc == 0 && tg__ct_equal(x, zeros, 28);
    *ts = (uint32_t)x[28] | (uint32_t)x[29] << 8 | (uint32_t)x[30] << 16 | (uint32_t)x[31] << 24;
    crypto_wipe(m, sizeof m);
    return rc;
}

struct scan {
    const struct faketls_hello *h;
    const struct faketls_policy *pol;
    struct faketls_match *out;
    enum faketls_verdict best;
    bool done; /* a key accepted: later ones are still hashed, never chosen */
};

/* The HMAC of key i, and whether it is the best candidate so far. -1 on an OpenSSL failure. */
static int try_key(struct scan *s, const struct faketls_key *keys, size_t i)
{
    bool ok;
    uint32_t ts;
    if (digest_ok(s->h, keys[i].key, &ok, &ts) != 0)
        return -1;
    if (!ok || s->done)
        return 0;
    int64_t skew = (int64_t)ts - s->pol->now;
    enum faketls_verdict v = FAKETLS_ACCEPT;
    if (skew < -(int64_t)s->pol->past_s || skew > (int64_t)s->pol->future_s)
        v = FAKETLS_BAD_TIME;
    else if (!s->h->cipher)
        v = FAKETLS_BAD_CIPHER;
    /* Keep the candidate that got furthest through the checks (ACCEPT is best). */
    if (!s->out->matched || v == FAKETLS_ACCEPT || v > s->best) {
        s->best = v;
        *s->out = (struct faketls_match){.index = i, .timestamp = ts, .skew = skew, .matched = true};
    }
    s->done = v == FAKETLS_ACCEPT;
    return 0;
}

static void sni_hashes(const struct faketls_hello *h, uint32_t hash[FAKETLS_MAX_SNI])
{
    for (size_t i = 0; i < h->nsni; i++)
        hash[i] = faketls_domain_hash(h->rec + h->sni[i].off, h->sni[i].len);
}

size_t faketls_candidates(const struct faketls_hello *h, const struct faketls_key *keys, size_t n,
                          const struct faketls_policy *pol)
{
    if (!h->has_sni)
        return pol->reject_missing_sni ? 0 : n;
    if (pol->accept_sni_mismatch)
        return n;
    uint32_t hash[FAKETLS_MAX_SNI];
    sni_hashes(h, hash);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const struct faketls_key *key = &keys[i];
        if (!key->domain_hash) {
            k += sni_ok(h, hash, key, pol);
            continue;
        }
        bool hit = false; /* hash and length: a collision only counts one key too many */
        for (size_t j = 0; j < h->nsni && !hit; j++)
            hit = h->sni[j].len == key->domain_len && hash[j] == key->domain_hash;
        k += hit;
    }
    return k;
}

enum faketls_verdict faketls_validate(const struct faketls_hello *h, const struct faketls_key *keys,
                                      size_t n, const struct faketls_policy *pol,
                                      struct faketls_match *out)
{
    struct scan s = {.h = h, .pol = pol, .out = out, .best = FAKETLS_BAD_DIGEST};
    bool admitted = false;
    size_t budget = h->len ? FAKETLS_DIGEST_BUDGET / h->len : 1, tried = 0;
    uint32_t hash[FAKETLS_MAX_SNI];
    sni_hashes(h, hash);
    memset(out, 0, sizeof(*out));
    if (budget == 0)
        budget = 1;
    /* The hinted key first: when it accepts, nothing else is hashed (the client is found),
       and with hint_only nothing else is hashed either way. */
    size_t hint = pol->hint && pol->hint <= n ? pol->hint - 1 : SIZE_MAX;
    if (hint != SIZE_MAX && sni_ok(h, hash, &keys[hint], pol)) {
        admitted = true;
        tried++;
        if (try_key(&s, keys, hint) != 0)
            return FAKETLS_INTERNAL;
        if (s.done) {
            out->digests = tried;
            return s.best;
        }
    }
    /* The SNI policy is the index: a key it refuses could at best give BAD_SNI, so its
       HMAC is skipped. Every admitted key is evaluated, whatever the earlier ones gave (no
       early exit on a match), up to the budget; with hint_only, none is. */
    for (size_t i = 0; i < n && (pol->hint_only || tried < budget); i++) {
        if (i == hint || !sni_ok(h, hash, &keys[i], pol))
            continue;
        admitted = true;
        if (pol->hint_only)
            break; /* admitted, not hashed: BAD_DIGEST rather than BAD_SNI */
        tried++;
        if (try_key(&s, keys, i) != 0)
            return FAKETLS_INTERNAL;
    }
    out->digests = tried;
    return n > 0 && !admitted ? FAKETLS_BAD_SNI : s.best;
}

/* ---- S3: the server's answer ---- */

static uint8_t *put_be16(uint8_t *p, size_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
    return p + 2;
}

static uint8_t *put(uint8_t *p, const void *src, size_t n)
{
    memcpy(p, src, n);
    return p + n;
}

/* ServerHello record with a zero random; returns the end. */
static uint8_t *put_server_hello(uint8_t *p, const struct faketls_hello *h,
                                 const struct faketls_answer *a, const uint8_t pub[32])
{
    static const uint8_t ks_head[8] = {0x00, 0x33, 0x00, 0x24, 0x00, 0x1d, 0x00, 0x20};
    static const uint8_t versions[6] = {0x00, 0x2b, 0x00, 0x02, 0x03, 0x04};
    size_t s = h->session_id_len;
    *p++ = REC_HANDSHAKE;
    *p++ = 0x03;
    *p++ = 0x03;
    p = put_be16(p, 90 + s);
    *p++ = 0x02;
    *p++ = 0x00;
    p = put_be16(p, 86 + s);
    *p++ = 0x03;
    *p++ = 0x03;
    memset(p, 0, 32);
    p += 32;
    *p++ = (uint8_t)s;
    p = put(p, h->session_id, s);
    p = put_be16(p, a->cipher);
    *p++ = 0x00;
    p = put_be16(p, 46);
    if (a->versions_first)
        p = put(p, versions, sizeof versions);
    p = put(put(p, ks_head, sizeof ks_head), pub, 32);
    if (!a->versions_first)
        p = put(p, versions, sizeof versions);
    return p;
}

int faketls_server_hello(const struct faketls_hello *h, const uint8_t key[16],
                         const struct faketls_answer *a, uint8_t *out, size_t cap)
{
    static const uint8_t ccs[6] = {REC_CCS, 0x03, 0x03, 0x00, 0x01, 0x01};
    uint8_t pub[32], mac[32];
    int rc;
    if (!h || !a || !out || h->session_id_len > 32 || a->appdata_len > FAKETLS_RECORD_MAX_OUT)
        return -EINVAL;
    size_t n = a->appdata_len ? a->appdata_len
                              : crypto_random_range(FAKETLS_APPDATA_MIN, FAKETLS_APPDATA_MAX);
    size_t total = 106 + (size_t)h->session_id_len + n;
    if (total > cap)
        return -ENOSPC;
    if (a->x25519_pub)
        memcpy(pub, a->x25519_pub, 32);
    else if ((rc = keyshare_random(pub)) != 0)
        return rc;
    uint8_t *p = put_server_hello(out, h, a, pub);
    p = put(p, ccs, sizeof ccs);
    *p++ = REC_DATA;
    *p++ = 0x03;
    *p++ = 0x03;
    p = put_be16(p, n);
    if (a->appdata)
        memcpy(p, a->appdata, n);
    else if ((rc = crypto_random_public(p, n)) != 0)
        return rc;
    struct crypto_part parts[2] = {{h->random, 32}, {out, total}};
    if ((rc = crypto_hmac_sha256(key, 16, parts, 2, mac)) != 0)
        return rc;
    memcpy(out + FAKETLS_RANDOM_OFF, mac, 32);
    return (int)total;
}

/* ---- S4/S5: client -> proxy records ---- */

enum { RD_HDR = 0, RD_BODY, RD_CLOSED, RD_BAD };

/* The reasons a reader stops, by r->why (0 = none yet; 3 bits). */
enum {
    RD_WHY_NONE,
    RD_WHY_ALERT,
    RD_WHY_TYPE,
    RD_WHY_VERSION,
    RD_WHY_CCS_LEN,
    RD_WHY_LONG,
    RD_WHY_CCS_BYTE,
};
static const char *const rd_whys[] = {
    [RD_WHY_ALERT] = "client sent a TLS alert",
    [RD_WHY_TYPE] = "unexpected TLS record type after the handshake",
    [RD_WHY_VERSION] = "TLS record version is not 03 03",
    [RD_WHY_CCS_LEN] = "ChangeCipherSpec record is not 1 byte long",
    [RD_WHY_LONG] = "TLS record longer than the limit",
    [RD_WHY_CCS_BYTE] = "ChangeCipherSpec payload is not 01",
};
_Static_assert(sizeof rd_whys / sizeof *rd_whys <= 8, "a reason fits the reader's 3 bits");

void faketls_reader_init(struct faketls_reader *r, size_t max_len)
{
    memset(r, 0, sizeof(*r));
    max_len = max_len ? max_len : FAKETLS_RECORD_MAX_IN;
    r->max_len = max_len < 65535 ? (uint16_t)max_len : 65535; /* a 16-bit length field */
}

const char *faketls_reader_why(const struct faketls_reader *r)
{
    return r->state == RD_CLOSED || r->state == RD_BAD ? rd_whys[r->why] : NULL;
}

static enum faketls_rec reader_fail(struct faketls_reader *r, bool close, unsigned why)
{
    r->state = close ? RD_CLOSED : RD_BAD;
    r->why = why & 7;
    return close ? FAKETLS_REC_CLOSE : FAKETLS_REC_BAD;
}

/* A complete 5-byte header has been collected: decide what the record is (its type stays
   in hdr[0] while its payload is read). */
static enum faketls_rec reader_header(struct faketls_reader *r)
{
    size_t len = (size_t)r->hdr[3] << 8 | r->hdr[4];
    uint8_t type = r->hdr[0];
    r->hdr_have = 0;
    if (type == REC_ALERT)
        return reader_fail(r, true, RD_WHY_ALERT);
    if (type != REC_DATA && type != REC_CCS)
        return reader_fail(r, false, RD_WHY_TYPE);
    if (r->hdr[1] != 0x03 || r->hdr[2] != 0x03)
        return reader_fail(r, false, RD_WHY_VERSION);
    if (type == REC_CCS && len != 1)
        return reader_fail(r, false, RD_WHY_CCS_LEN);
    if (len > r->max_len)
        return reader_fail(r, false, RD_WHY_LONG);
    r->remaining = (uint16_t)len;
    r->state = len ? RD_BODY : RD_HDR; /* empty ApplicationData records are skipped */
    return FAKETLS_REC_NEED_MORE;
}

enum faketls_rec faketls_reader_next(struct faketls_reader *r, const uint8_t *buf, size_t len,
                                     size_t *pos, size_t *off, size_t *n)
{
    while (*pos < len) {
        if (r->state == RD_CLOSED)
            return FAKETLS_REC_CLOSE;
        if (r->state == RD_BAD)
            return FAKETLS_REC_BAD;
        if (r->state == RD_HDR) {
            r->hdr[r->hdr_have++] = buf[(*pos)++];
            if (r->hdr_have == FAKETLS_HDR_LEN) {
                enum faketls_rec st = reader_header(r);
                if (st != FAKETLS_REC_NEED_MORE)
                    return st;
            }
            continue;
        }
        size_t take_n = len - *pos < r->remaining ? len - *pos : r->remaining;
        size_t at = *pos;
        *pos += take_n;
        r->remaining = (uint16_t)(r->remaining - take_n);
        if (r->remaining == 0)
            r->state = RD_HDR;
        if (r->hdr[0] == REC_CCS) {
            if (buf[at] != 0x01)
                return reader_fail(r, false, RD_WHY_CCS_BYTE);
            continue;
        }
        *off = at;
        *n = take_n;
        return FAKETLS_REC_DATA;
    }
    if (r->state == RD_CLOSED)
        return FAKETLS_REC_CLOSE;
    return r->state == RD_BAD ? FAKETLS_REC_BAD : FAKETLS_REC_NEED_MORE;
}

enum faketls_rec faketls_reader_strip(struct faketls_reader *r, uint8_t *buf, size_t len,
                                      size_t *out_len)
{
    size_t pos = 0, off, n, w = 0;
    enum faketls_rec st;
    while ((st = faketls_reader_next(r, buf, len, &pos, &off, &n)) == FAKETLS_REC_DATA) {
        if (off != w)
            memmove(buf + w, buf + off, n);
        w += n;
    }
    *out_len = w;
    return st;
}

/* ---- proxy -> client records ---- */

void faketls_record_header(uint8_t hdr[FAKETLS_HDR_LEN], size_t n)
{
    hdr[0] = REC_DATA;
    hdr[1] = 0x03;
    hdr[2] = 0x03;
    put_be16(hdr + 3, n);
}

size_t faketls_wrapped_len(size_t n)
{
    return n + FAKETLS_HDR_LEN * ((n + FAKETLS_RECORD_MAX_OUT - 1) / FAKETLS_RECORD_MAX_OUT);
}

size_t faketls_wrap(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
    size_t total = faketls_wrapped_len(n);
    if (total > cap)
        return (size_t)-1;
    while (n > 0) {
        size_t chunk = n < FAKETLS_RECORD_MAX_OUT ? n : FAKETLS_RECORD_MAX_OUT;
        faketls_record_header(out, chunk);
        memcpy(out + FAKETLS_HDR_LEN, in, chunk);
        out += FAKETLS_HDR_LEN + chunk;
        in += chunk;
        n -= chunk;
    }
    return total;
}
