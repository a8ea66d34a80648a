/* probeshape: see probeshape.h. */
#include "proxy/wire/probeshape.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum feature { F_SH_LEN, F_CIPHER, F_SID, F_EXTS, F_KEY, F_CCS, F_NENC, F_READS, F_COUNT };

static const char *const feature_names[F_COUNT] = {
    "ServerHello length", "cipher",           "session id",        "extensions (type/len)",
    "key share",          "ChangeCipherSpec", "encrypted records", "reads up to data",
};

/* One flight's value of a discrete feature. */
static void value(const struct tlsflight *f, enum feature which, char *out, size_t cap)
{
    size_t w = 0;
    out[0] = '\0';
    switch (which) {
    case F_SH_LEN:
        snprintf(out, cap, "%u", (unsigned)f->sh_record_len);
        break;
    case F_CIPHER:
        snprintf(out, cap, "%04x", (unsigned)f->cipher);
        break;
    case F_SID:
        snprintf(out, cap, f->sid_echo ? "echoed" : "%u bytes, not echoed", (unsigned)f->sid_len);
        break;
    case F_EXTS:
        for (size_t i = 0; i < f->next && w + 12 < cap; i++)
            w += (size_t)snprintf(out + w, cap - w, "%s%u/%u", i ? " " : "",
                                  (unsigned)f->ext[i].type, (unsigned)f->ext[i].len);
        if (f->next == 0)
            snprintf(out, cap, "none");
        break;
    case F_KEY:
        if (f->group)
            snprintf(out, cap, "%04x/%u", (unsigned)f->group, (unsigned)f->key_len);
        else
            snprintf(out, cap, "none");
        break;
    case F_CCS:
        snprintf(out, cap, "%s", f->ccs ? "yes" : "no");
        break;
    case F_NENC:
        snprintf(out, cap, "%zu", f->nenc);
        break;
    case F_READS: {
        /* the segment pattern up to and including the first encrypted record, cuts dropped */
        char seg[256];
        tlsflight_segments(f, seg, sizeof seg);
        char *ad = strstr(seg, "AD");
        if (ad)
            ad[2] = '\0';
        for (const char *p = seg; *p && w + 1 < cap; p++)
            if (*p != '~')
                out[w++] = *p;
        out[w] = '\0';
        break;
    }
    default:
        break;
    }
}

/* Distinct values of flights f[0..n) joined by ", " into out; each also in vals. */
#define MAX_DISTINCT 8
struct set {
    char v[MAX_DISTINCT][PROBESHAPE_VALUE_MAX];
    size_t n;
    bool more; /* more distinct values than kept */
};

static void collect(const struct tlsflight *f, size_t n, enum feature which, struct set *s)
{
    s->n = 0;
    s->more = false;
    for (size_t i = 0; i < n; i++) {
        char v[PROBESHAPE_VALUE_MAX];
        value(&f[i], which, v, sizeof v);
        bool seen = false;
        for (size_t j = 0; j < s->n && !seen; j++)
            seen = strcmp(s->v[j], v) == 0;
        if (seen)
            continue;
        if (s->n == MAX_DISTINCT) {
            s->more = true;
            continue;
        }
        memcpy(s->v[s->n++], v, sizeof v);
    }
}

static void join(const struct set *s, char *out, size_t cap)
{
    size_t w = 0;
    out[0] = '\0';
    for (size_t i = 0; i < s->n; i++) {
        int k = snprintf(out + w, cap - w, "%s%s", i ? ", " : "", s->v[i]);
        if (k < 0 || (size_t)k >= cap - w) {
            if (cap > 4)
                memcpy(out + cap - 4, "...", 4);
            return;
        }
        w += (size_t)k;
    }
    if (s->more && w + 5 < cap)
        memcpy(out + w, ", ...", 6);
}

/* Is every proxy value one the site showed? */
static bool subset(const struct set *p, const struct set *s)
{
    if (p->more)
        return false;
    for (size_t i = 0; i < p->n; i++) {
        bool found = false;
        for (size_t j = 0; j < s->n && !found; j++)
            found = strcmp(p->v[i], s->v[j]) == 0;
        if (!found)
            return false;
    }
    return true;
}

static void range(const struct tlsflight *f, size_t n, uint32_t *lo, uint32_t *hi)
{
    *lo = UINT32_MAX;
    *hi = 0;
    for (size_t i = 0; i < n; i++) {
        if (f[i].enc_total < *lo)
            *lo = f[i].enc_total;
        if (f[i].enc_total > *hi)
            *hi = f[i].enc_total;
    }
}

static void range_text(uint32_t lo, uint32_t hi, char *out, size_t cap)
{
    if (lo == hi)
        snprintf(out, cap, "%u", (unsigned)lo);
    else
        snprintf(out, cap, "%u..%u", (unsigned)lo, (unsigned)hi);
}

static size_t min_nenc(const struct tlsflight *f, size_t n)
{
    size_t m = SIZE_MAX;
    for (size_t i = 0; i < n; i++)
        if (f[i].nenc < m)
            m = f[i].nenc;
    return m;
}

static bool all_nenc(const struct tlsflight *f, size_t n, size_t want)
{
    for (size_t i = 0; i < n; i++)
        if (f[i].nenc != want)
            return false;
    return true;
}

size_t probeshape_compare(const struct tlsflight *site, size_t ns, const struct tlsflight *proxy,
                          size_t np, struct probeshape_row rows[PROBESHAPE_ROWS])
{
    size_t diffs = 0, r = 0;
    for (int f = 0; f < F_COUNT; f++) {
        struct set s, p;
        collect(site, ns, (enum feature)f, &s);
        collect(proxy, np, (enum feature)f, &p);
        struct probeshape_row *row = &rows[r++];
        row->feature = feature_names[f];
        join(&s, row->site, sizeof row->site);
        join(&p, row->proxy, sizeof row->proxy);
        row->verdict = subset(&p, &s) ? PROBESHAPE_SAME : PROBESHAPE_DIFF;
        if (f == F_NENC && row->verdict == PROBESHAPE_DIFF && all_nenc(proxy, np, 1) &&
            min_nenc(site, ns) > 1)
            row->verdict = PROBESHAPE_LIMIT;
        if (f == F_NENC) { /* the encrypted bytes come right after their count */
            uint32_t slo, shi, plo, phi;
            range(site, ns, &slo, &shi);
            range(proxy, np, &plo, &phi);
            row = &rows[r++];
            row->feature = "encrypted bytes";
            range_text(slo, shi, row->site, sizeof row->site);
            range_text(plo, phi, row->proxy, sizeof row->proxy);
            bool inside = (uint64_t)plo + PROBESHAPE_ENC_SLACK >= slo &&
                          (uint64_t)phi <= (uint64_t)shi + PROBESHAPE_ENC_SLACK;
            bool site_varies = shi - slo > PROBESHAPE_ENC_SLACK;
            bool fixed = np >= 3 && plo == phi; /* a constant answer where the site varies */
            row->verdict = inside && !(site_varies && fixed) ? PROBESHAPE_SAME : PROBESHAPE_DIFF;
        }
    }
    for (size_t i = 0; i < r; i++)
        diffs += rows[i].verdict == PROBESHAPE_DIFF;
    return diffs;
}

const char *probeshape_verdict_name(enum probeshape_verdict v)
{
    return v == PROBESHAPE_SAME ? "same" : v == PROBESHAPE_LIMIT ? "limit" : "DIFFERS";
}
