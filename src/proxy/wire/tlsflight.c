/* tlsflight: see tlsflight.h. */
#include "proxy/wire/tlsflight.h"

#include "proxy/wire/faketls.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* RFC 8446 4.1.3: the random of a HelloRetryRequest (SHA-256 of "HelloRetryRequest"). */
static const uint8_t hrr_random[32] = {
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
    0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c};

static uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

static int fail(char *err, size_t errlen, int rc, size_t at, const char *what)
{
    if (err && errlen)
        snprintf(err, errlen, "server flight, offset %zu: %s", at, what);
    return rc;
}

/* The ServerHello message body h[0..n) (after the 4-byte handshake header), at offset base
   of the recording (for errors). */
static int parse_server_hello(const uint8_t *h, size_t n, size_t base, const uint8_t *csid,
                              size_t csid_len, struct tlsflight *f, char *err, size_t errlen)
{
    if (n < 2 + 32 + 1)
        return fail(err, errlen, -EBADMSG, base, "ServerHello shorter than version + random");
    f->legacy_version = rd16(h);
    f->hrr = memcmp(h + 2, hrr_random, 32) == 0;
    size_t at = 34;
    f->sid_len = h[at++];
    if (f->sid_len > 32 || at + f->sid_len + 3 > n)
        return fail(err, errlen, -EBADMSG, base + 34, "bad legacy_session_id_echo length");
    f->sid_echo = csid && csid_len == f->sid_len && memcmp(h + at, csid, csid_len) == 0;
    at += f->sid_len;
    f->cipher = rd16(h + at);
    f->compression = h[at + 2];
    at += 3;
    if (at == n)
        return 0; /* no extensions (TLS 1.2 allows it) */
    if (at + 2 > n)
        return fail(err, errlen, -EBADMSG, base + at, "extensions length cut short");
    size_t total = rd16(h + at);
    at += 2;
    if (at + total != n)
        return fail(err, errlen, -EBADMSG, base + at - 2,
                    "extensions length does not match the ServerHello length");
    while (at < n) {
        if (at + 4 > n)
            return fail(err, errlen, -EBADMSG, base + at, "extension header cut short");
        uint16_t type = rd16(h + at), len = rd16(h + at + 2);
        if (at + 4 + len > n)
            return fail(err, errlen, -EBADMSG, base + at, "extension overruns the ServerHello");
        if (f->next >= TLSFLIGHT_MAX_EXT)
            return fail(err, errlen, -E2BIG, base + at, "too many extensions");
        f->ext[f->next++] = (struct tlsflight_ext){type, len};
        const uint8_t *d = h + at + 4;
        if (type == TLSFLIGHT_EXT_SUPPORTED_VERSIONS && len == 2)
            f->version = rd16(d);
        if (type == TLSFLIGHT_EXT_KEY_SHARE && len >= 2) {
            f->group = rd16(d);
            /* a HelloRetryRequest names the group alone; a ServerHello adds the key */
            if (len >= 4) {
                f->key_len = rd16(d + 2);
                if ((size_t)f->key_len + 4 != len)
                    return fail(err, errlen, -EBADMSG, base + at, "key_share length mismatch");
            }
        }
        at += 4 + (size_t)len;
    }
    return 0;
}

int tlsflight_parse(const uint8_t *p, size_t n, const uint32_t *seg, size_t nseg,
                    const uint8_t *client_sid, size_t client_sid_len, struct tlsflight *out,
                    char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!out || (!p && n) || (nseg && !seg) || client_sid_len > 32)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    uint64_t sum = 0;
    for (size_t i = 0; i < nseg; i++)
        sum += seg[i];
    if (nseg && sum != n)
        return fail(err, errlen, -EINVAL, 0, "segment lengths do not add up to the bytes");
    if (nseg > TLSFLIGHT_MAX_SEG)
        return fail(err, errlen, -E2BIG, 0, "too many segments");
    size_t at = 0;
    size_t rec_start[TLSFLIGHT_MAX_REC + 1];
    while (at < n) {
        if (n - at < 5) {
            out->truncated = true;
            break;
        }
        uint8_t type = p[at];
        uint16_t ver = rd16(p + at + 1), len = rd16(p + at + 3);
        if (type < TLSFLIGHT_REC_CCS || type > TLSFLIGHT_REC_APPDATA || (ver >> 8) != 3)
            return fail(err, errlen, -EBADMSG, at, "not a TLS record header");
        if (out->nrec >= TLSFLIGHT_MAX_REC)
            return fail(err, errlen, -E2BIG, at, "too many records");
        if (out->nrec == 0 && type != TLSFLIGHT_REC_HANDSHAKE) {
            if (type == TLSFLIGHT_REC_ALERT) {
                out->alert = true;
                return fail(err, errlen, -EBADMSG, at, "the site answered with an alert");
            }
            return fail(err, errlen, -EBADMSG, at, "first record is not a handshake record");
        }
        rec_start[out->nrec] = at;
        out->rec[out->nrec++] = (struct tlsflight_rec){type, ver, len};
        bool whole = n - at - 5 >= len;
        const uint8_t *frag = p + at + 5;
        if (out->nrec == 1) {
            if (!whole || len < 4)
                return fail(err, errlen, -EBADMSG, at,
                            "the ServerHello record is cut short or empty");
            size_t hlen = ((size_t)frag[1] << 16) | ((size_t)frag[2] << 8) | frag[3];
            if (frag[0] != 2)
                return fail(err, errlen, -EBADMSG, at + 5, "first handshake message is not a "
                                                           "ServerHello");
            if (4 + hlen > len)
                return fail(err, errlen, -EBADMSG, at + 5,
                            "ServerHello spans records (not reproducible)");
            out->sh_record_len = len;
            out->sh_record_only = 4 + hlen == len;
            int rc = parse_server_hello(frag + 4, hlen, at + 9, client_sid, client_sid_len, out,
                                        err, errlen);
            if (rc < 0)
                return rc;
        } else if (type == TLSFLIGHT_REC_CCS) {
            if (out->nrec == 2 && whole && len == 1 && frag[0] == 1)
                out->ccs = true;
        } else if (type == TLSFLIGHT_REC_APPDATA) {
            out->nenc++;
            out->enc_total += len;
        } else if (type == TLSFLIGHT_REC_ALERT) {
            out->alert = true;
        }
        if (!whole) {
            out->truncated = true;
            at = n;
            break;
        }
        at += 5 + (size_t)len;
    }
    if (out->nrec == 0)
        return fail(err, errlen, -EBADMSG, n, "the recording ends before a ServerHello record");
    rec_start[out->nrec] = n;
    /* which record each read ended in */
    size_t end = 0;
    for (size_t i = 0; i < nseg; i++) {
        end += seg[i];
        out->seg_len[i] = seg[i];
        size_t r = 0;
        while (r + 1 < out->nrec && rec_start[r + 1] < end)
            r++;
        out->seg_end_rec[i] = (uint8_t)r;
        size_t rend = r < out->nrec ? rec_start[r] + 5 + out->rec[r].len : n;
        out->seg_cuts[i] = end < rend;
    }
    out->nseg = nseg;
    return 0;
}

void tlsflight_mark_merged(struct tlsflight *f, const uint32_t *wire, uint32_t mss)
{
    if (!wire || !mss)
        return;
    for (size_t i = 0; i < f->nseg; i++) {
        /* the records holding the read's first and last byte */
        size_t first = i == 0               ? 0
                       : f->seg_cuts[i - 1] ? f->seg_end_rec[i - 1]
                                            : f->seg_end_rec[i - 1] + 1u;
        size_t need = (f->seg_len[i] + (size_t)mss - 1) / mss;
        if (wire[i] > need && f->seg_end_rec[i] > first)
            f->seg_merged = true;
    }
}

static const char *rec_name(const struct tlsflight *f, size_t i)
{
    if (i == 0)
        return "SH";
    switch (f->rec[i].type) {
    case TLSFLIGHT_REC_CCS:
        return "CCS";
    case TLSFLIGHT_REC_APPDATA:
        return "AD";
    case TLSFLIGHT_REC_ALERT:
        return "AL";
    default:
        return "HS";
    }
}

const char *tlsflight_segments(const struct tlsflight *f, char *out, size_t cap)
{
    size_t w = 0;
    out[0] = '\0';
#define PUT(...)                                                                                   \
    do {                                                                                           \
        int k_ = snprintf(out + w, cap - w, __VA_ARGS__);                                          \
        if (k_ < 0 || (size_t)k_ >= cap - w)                                                       \
            return out;                                                                            \
        w += (size_t)k_;                                                                           \
    } while (0)
    size_t next = 0; /* first record not yet named */
    for (size_t i = 0; i < f->nseg; i++) {
        if (i)
            PUT("|");
        size_t last = f->seg_end_rec[i];
        bool first = true;
        if (next > last) { /* the read lies inside one record already named */
            PUT("~");
            continue;
        }
        for (size_t r = next; r <= last && r < f->nrec; r++) {
            PUT("%s%s", first ? "" : "+", rec_name(f, r));
            first = false;
        }
        if (f->seg_cuts[i])
            PUT("~"); /* the rest of that record is in the next read(s) */
        next = last + 1;
    }
#undef PUT
    return out;
}

/* ---- the probe's ClientHello ---- */

struct wbuf {
    uint8_t *p;
    size_t n, cap;
    bool over;
};

static void w8(struct wbuf *w, unsigned v)
{
    if (w->n >= w->cap) {
        w->over = true;
        return;
    }
    w->p[w->n++] = (uint8_t)v;
}

static void w16(struct wbuf *w, unsigned v)
{
    w8(w, v >> 8);
    w8(w, v);
}

static void wbytes(struct wbuf *w, const void *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        w8(w, ((const uint8_t *)b)[i]);
}

/* Patch a 16-bit length at 'at' to cover everything written after it. */
static void wlen16(struct wbuf *w, size_t at)
{
    if (w->over)
        return;
    size_t len = w->n - at - 2;
    w->p[at] = (uint8_t)(len >> 8);
    w->p[at + 1] = (uint8_t)len;
}

/* A GREASE value 0x?A?A (RFC 8701) from a random byte. */
static unsigned grease(uint8_t r)
{
    unsigned g = (r & 0xf0u) | 0x0au;
    return (g << 8) | g;
}

size_t tlsflight_client_hello(uint8_t *out, size_t cap, const char *sni,
                              const uint8_t rnd[TLSFLIGHT_HELLO_RND])
{
    size_t sni_len = sni ? strlen(sni) : 0;
    if (sni_len > 200 || cap < TLSFLIGHT_HELLO_LEN)
        return 0;
    static const uint16_t suites[] = {0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f, 0xc02c, 0xc030,
                                      0xcca9, 0xcca8, 0xc013, 0xc014, 0x009c, 0x009d, 0x002f,
                                      0x0035};
    static const uint16_t sigalgs[] = {0x0403, 0x0804, 0x0401, 0x0503,
                                       0x0805, 0x0501, 0x0806, 0x0601};
    unsigned g[4] = {grease(rnd[96]), grease(rnd[97]), grease(rnd[98]), grease(rnd[99])};
    if (g[1] == g[0]) /* two GREASE extensions must differ */
        g[1] ^= 0x1010;
    struct wbuf w = {out, 0, cap, false};
    w8(&w, 22), w16(&w, 0x0301);
    size_t rec = w.n;
    w16(&w, 0);
    w8(&w, 1), w8(&w, 0);
    size_t hs = w.n;
    w16(&w, 0);
    w16(&w, 0x0303);
    wbytes(&w, rnd, 32);
    w8(&w, 32), wbytes(&w, rnd + 32, 32);
    w16(&w, 2 * (1 + sizeof suites / sizeof suites[0]));
    w16(&w, g[2]);
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++)
        w16(&w, suites[i]);
    w8(&w, 1), w8(&w, 0);
    size_t ext = w.n;
    w16(&w, 0);
    w16(&w, g[0]), w16(&w, 0);
    if (sni_len) {
        w16(&w, 0), w16(&w, sni_len + 5), w16(&w, sni_len + 3), w8(&w, 0), w16(&w, sni_len);
        wbytes(&w, sni, sni_len);
    }
    w16(&w, 0x0017), w16(&w, 0);                         /* extended_master_secret */
    w16(&w, 0xff01), w16(&w, 1), w8(&w, 0);              /* renegotiation_info */
    w16(&w, 0x000a), w16(&w, 10), w16(&w, 8), w16(&w, g[3]), w16(&w, 0x001d), w16(&w, 0x0017),
        w16(&w, 0x0018);                                 /* supported_groups */
    w16(&w, 0x000b), w16(&w, 2), w8(&w, 1), w8(&w, 0);   /* ec_point_formats */
    w16(&w, 0x0023), w16(&w, 0);                         /* session_ticket */
    w16(&w, 0x0010), w16(&w, 14), w16(&w, 12), w8(&w, 2), wbytes(&w, "h2", 2), w8(&w, 8),
        wbytes(&w, "http/1.1", 8);                       /* ALPN */
    w16(&w, 0x0005), w16(&w, 5), w8(&w, 1), w16(&w, 0), w16(&w, 0); /* status_request */
    w16(&w, 0x000d), w16(&w, 2 + 2 * sizeof sigalgs / sizeof sigalgs[0]);
    w16(&w, 2 * sizeof sigalgs / sizeof sigalgs[0]);
    for (size_t i = 0; i < sizeof sigalgs / sizeof sigalgs[0]; i++)
        w16(&w, sigalgs[i]);
    w16(&w, 0x0012), w16(&w, 0);                          /* signed_certificate_timestamp */
    w16(&w, 0x0033), w16(&w, 43), w16(&w, 41), w16(&w, g[3]), w16(&w, 1), w8(&w, 0),
        w16(&w, 0x001d), w16(&w, 32), wbytes(&w, rnd + 64, 32); /* key_share */
    w16(&w, 0x002d), w16(&w, 2), w8(&w, 1), w8(&w, 1);   /* psk_key_exchange_modes */
    w16(&w, 0x002b), w16(&w, 7), w8(&w, 6), w16(&w, g[2]), w16(&w, 0x0304),
        w16(&w, 0x0303);                                 /* supported_versions */
    w16(&w, 0x001b), w16(&w, 3), w8(&w, 2), w16(&w, 2); /* compress_certificate: brotli */
    w16(&w, g[1]), w16(&w, 1), w8(&w, 0);
    /* padding (21) up to 517 bytes in all */
    if (!w.over && w.n + 4 <= TLSFLIGHT_HELLO_LEN) {
        size_t pad = TLSFLIGHT_HELLO_LEN - w.n - 4;
        w16(&w, 0x0015), w16(&w, pad);
        for (size_t i = 0; i < pad; i++)
            w8(&w, 0);
    }
    wlen16(&w, ext);
    wlen16(&w, hs);
    wlen16(&w, rec);
    return w.over ? 0 : w.n;
}

/* ---- the answer shaped like the site ---- */

unsigned tlsflight_answer(const struct tlsflight *site, int jitter, struct faketls_answer *a)
{
    unsigned diff = 0;
    if (site->cipher >= 0x1301 && site->cipher <= 0x1303)
        a->cipher = site->cipher;
    else
        diff |= TLSFLIGHT_DIFF_CIPHER;
    int ks = -1, sv = -1;
    for (size_t i = 0; i < site->next; i++) {
        if (site->ext[i].type == TLSFLIGHT_EXT_KEY_SHARE)
            ks = (int)i;
        else if (site->ext[i].type == TLSFLIGHT_EXT_SUPPORTED_VERSIONS)
            sv = (int)i;
    }
    if (site->next != 2 || ks < 0 || sv < 0 || site->ext[sv].len != 2)
        diff |= TLSFLIGHT_DIFF_EXTS;
    if (ks >= 0 && sv >= 0)
        a->versions_first = sv < ks;
    if (site->group != 0x001d || site->key_len != 32)
        diff |= TLSFLIGHT_DIFF_GROUP;
    if (!site->ccs)
        diff |= TLSFLIGHT_DIFF_NO_CCS;
    if (site->nenc > 1)
        diff |= TLSFLIGHT_DIFF_RECORDS;
    if (!site->sid_echo)
        diff |= TLSFLIGHT_DIFF_SESSION;
    if (site->nseg > 1)
        diff |= TLSFLIGHT_DIFF_SEGMENTS;
    if (jitter < -32)
        jitter = -32;
    if (jitter > 32)
        jitter = 32;
    long len = (long)site->enc_total + jitter;
    if (site->enc_total == 0)
        len = 0; /* nothing learned: faketls_server_hello's own range */
    else if (len < 1)
        len = 1;
    else if (len > FAKETLS_RECORD_MAX_OUT)
        len = FAKETLS_RECORD_MAX_OUT;
    a->appdata_len = (size_t)len;
    return diff;
}
