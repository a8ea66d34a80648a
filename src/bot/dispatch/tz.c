/*
 * tz: TZif parsing, POSIX TZ rules and local <-> UTC conversion (see tz.h).
 *
 * The file comes from disk (the system's tzdata, or $TZDIR), so every count and index is
 * checked against the bytes that are there before it is used.
 */
#include "bot/dispatch/tz.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/readfile.h"

#define HEADER_LEN   44
#define MAX_FILE_LEN (1 << 20)

/* ---- civil dates (days since 1970-01-01, proleptic Gregorian; eras of 400 years) ---- */

int64_t tg__days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;                                   /* [0, 399] */
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1; /* [0, 365] */
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;           /* [0, 146096] */
    return era * 146097 + doe - 719468;
}

void tg__civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static int64_t floor_div(int64_t a, int64_t b)
{
    return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

static bool leap_year(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int month_days(int64_t y, int m)
{
    static const int n[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && leap_year(y) ? 29 : n[m - 1];
}

/* ---- POSIX TZ rules ---- */

struct cur {
    const char *p, *end;
};

static bool more(const struct cur *c)
{
    return c->p < c->end;
}

static bool digit(const struct cur *c)
{
    return more(c) && *c->p >= '0' && *c->p <= '9';
}

static int number(struct cur *c, int max, int *out)
{
    if (!digit(c))
        return -1;
    int v = 0;
    while (digit(c)) {
        v = v * 10 + (*c->p++ - '0');
        if (v > max)
            return -1;
    }
    *out = v;
    return 0;
}

/* A zone abbreviation: three or more letters, or <...> of letters, digits, + and -. */
static int abbrev(struct cur *c)
{
    size_t n = 0;
    if (more(c) && *c->p == '<') {
        c->p++;
        while (more(c) && *c->p != '>' && n < 32)
            c->p++, n++;
        if (!more(c) || *c->p != '>')
            return -1;
        c->p++;
        return n >= 3 ? 0 : -1;
    }
    while (more(c) && ((*c->p >= 'A' && *c->p <= 'Z') || (*c->p >= 'a' && *c->p <= 'z')) && n < 32)
        c->p++, n++;
    return n >= 3 ? 0 : -1;
}

/* [+-]hh[:mm[:ss]]; hours up to max_h. */
static int hms(struct cur *c, int max_h, int32_t *out)
{
    int sign = 1, h, m = 0, s = 0;
    if (more(c) && (*c->p == '+' || *c->p == '-'))
        sign = *c->p++ == '-' ? -1 : 1;
    if (number(c, max_h, &h) != 0)
        return -1;
    if (more(c) && *c->p == ':') {
        c->p++;
        if (number(c, 59, &m) != 0)
            return -1;
        if (more(c) && *c->p == ':') {
            c->p++;
            if (number(c, 59, &s) != 0)
                return -1;
        }
    }
    *out = sign * (h * 3600 + m * 60 + s);
    return 0;
}

static int rule_date(struct cur *c, struct tg__tz_date *d)
{
    memset(d, 0, sizeof *d);
    if (more(c) && *c->p == 'M') {
        c->p++;
        d->kind = 'M';
        if (number(c, 12, &d->month) != 0 || d->month < 1 || !more(c) || *c->p++ != '.' ||
            number(c, 5, &d->week) != 0 || d->week < 1 || !more(c) || *c->p++ != '.' ||
            number(c, 6, &d->wday) != 0)
            return -1;
    } else if (more(c) && *c->p == 'J') {
        c->p++;
        d->kind = 'J';
        if (number(c, 365, &d->day) != 0 || d->day < 1)
            return -1;
    } else {
        d->kind = 'n';
        if (number(c, 365, &d->day) != 0)
            return -1;
    }
    d->secs = 7200; /* 02:00 unless given */
    if (more(c) && *c->p == '/') {
        c->p++;
        if (hms(c, 167, &d->secs) != 0) /* RFC 8536 3.3.1: -167..167 hours */
            return -1;
    }
    return 0;
}

int tg__tz_rule_parse(struct tg__tz_rule *r, const char *s, size_t len)
{
    struct cur c = {s, s + len};
    int32_t off;
    memset(r, 0, sizeof *r);
    if (abbrev(&c) != 0 || hms(&c, 24, &off) != 0)
        return -1;
    r->std_off = -off; /* POSIX counts west of UTC */
    r->dst_off = r->std_off;
    if (more(&c)) {
        if (abbrev(&c) != 0)
            return -1;
        r->has_dst = true;
        r->dst_off = r->std_off + 3600;
        if (more(&c) && *c.p != ',') {
            if (hms(&c, 24, &off) != 0)
                return -1;
            r->dst_off = -off;
        }
        /* Without a rule, POSIX's default (US rules since 2007). */
        r->start = (struct tg__tz_date){'M', 3, 2, 0, 0, 7200};
        r->end = (struct tg__tz_date){'M', 11, 1, 0, 0, 7200};
        if (more(&c)) {
            if (*c.p++ != ',' || rule_date(&c, &r->start) != 0 || !more(&c) || *c.p++ != ',' ||
                rule_date(&c, &r->end) != 0)
                return -1;
        }
    }
    if (more(&c))
        return -1;
    r->present = true;
    return 0;
}

/* Local seconds (midnight of the day plus secs) of a rule date in year y. */
static int64_t rule_local(const struct tg__tz_date *d, int64_t y)
{
    int64_t day;
    if (d->kind == 'M') {
        int64_t first = tg__days_from_civil(y, d->month, 1);
        int wd_first = (int)((first % 7 + 11) % 7); /* 1970-01-01 was a Thursday (4) */
        int dom = 1 + (d->wday - wd_first + 7) % 7 + (d->week - 1) * 7;
        while (dom > month_days(y, d->month))
            dom -= 7;
        day = first + dom - 1;
    } else if (d->kind == 'J') {
        day = tg__days_from_civil(y, 1, 1) + d->day - 1;
        if (leap_year(y) && d->day >= 60) /* J never counts February 29 */
            day++;
    } else {
        day = tg__days_from_civil(y, 1, 1) + d->day;
    }
    return day * 86400 + d->secs;
}

static int32_t rule_offset(const struct tg__tz_rule *r, int64_t t)
{
    if (!r->has_dst)
        return r->std_off;
    int64_t y;
    int m, d;
    tg__civil_from_days(floor_div(t + r->std_off, 86400), &y, &m, &d);
    /* Changes happen at local times: the start in standard time, the end in DST. */
    int64_t start = rule_local(&r->start, y) - r->std_off;
    int64_t end = rule_local(&r->end, y) - r->dst_off;
    bool dst = start < end ? t >= start && t < end : t < end || t >= start;
    return dst ? r->dst_off : r->std_off;
}

/* ---- TZif ---- */

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64(const unsigned char *p)
{
    return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

struct counts {
    uint32_t isut, isstd, leap, time, type, chr;
};

static int header(const unsigned char *p, size_t left, struct counts *k, char *err, size_t cap,
                  size_t at)
{
    if (left < HEADER_LEN || memcmp(p, "TZif", 4) != 0) {
        snprintf(err, cap, "byte %zu: not a TZif header", at);
        return -1;
    }
    k->isut = be32(p + 20);
    k->isstd = be32(p + 24);
    k->leap = be32(p + 28);
    k->time = be32(p + 32);
    k->type = be32(p + 36);
    k->chr = be32(p + 40);
    if (k->type == 0 || k->type > TG__TZ_MAX_TYPES || k->time > TG__TZ_MAX_TRANSITIONS ||
        (k->isut && k->isut != k->type) || (k->isstd && k->isstd != k->type) || k->chr == 0 ||
        k->leap > 10000 || k->chr > 65536) {
        snprintf(err, cap, "byte %zu: counts out of range (%u transitions, %u types)", at, k->time,
                 k->type);
        return -1;
    }
    return 0;
}

static size_t block_len(const struct counts *k, size_t tsize)
{
    return (size_t)k->time * tsize + k->time + (size_t)k->type * 6 + k->chr +
           (size_t)k->leap * (tsize + 4) + k->isstd + k->isut;
}

/* Read one data block (tsize 4 or 8 bytes per time) into z. */
static int block(tg__tz *z, const unsigned char *p, const struct counts *k, size_t tsize, char *err,
                 size_t cap, size_t at)
{
    z->ntrans = k->time;
    z->ntypes = k->type;
    z->trans = tg__calloc(k->time ? k->time : 1, sizeof *z->trans);
    z->trans_type = tg__calloc(k->time ? k->time : 1, 1);
    z->type_off = tg__calloc(k->type, sizeof *z->type_off);
    if (!z->trans || !z->trans_type || !z->type_off) {
        snprintf(err, cap, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < k->time; i++) {
        const unsigned char *q = p + i * tsize;
        z->trans[i] = tsize == 8 ? be64(q) : (int64_t)(int32_t)be32(q);
        if (i && z->trans[i] <= z->trans[i - 1]) {
            snprintf(err, cap, "byte %zu: transition %zu is not after the one before", at, i);
            return -1;
        }
    }
    const unsigned char *idx = p + k->time * tsize;
    for (size_t i = 0; i < k->time; i++) {
        if (idx[i] >= k->type) {
            snprintf(err, cap, "byte %zu: transition %zu names type %u of %u",
                     at + k->time * tsize + i, i, idx[i], k->type);
            return -1;
        }
        z->trans_type[i] = idx[i];
    }
    const unsigned char *ti = idx + k->time;
    for (size_t i = 0; i < k->type; i++) {
        int32_t off = (int32_t)be32(ti + i * 6);
        if (off < -89999 || off > 93599 || ti[i * 6 + 5] >= k->chr) { /* RFC 8536: -25h..26h */
            snprintf(err, cap, "byte %zu: time type %zu is out of range",
                     at + (size_t)(ti - p) + i * 6, i);
            return -1;
        }
        z->type_off[i] = off;
    }
    return 0;
}

int tg__tz_parse(tg__tz *z, const unsigned char *data, size_t len, char *err, size_t errcap)
{
    memset(z, 0, sizeof *z);
    struct counts k;
    if (header(data, len, &k, err, errcap, 0) != 0)
        return -1;
    size_t v1 = HEADER_LEN + block_len(&k, 4);
    if (v1 > len) {
        snprintf(err, errcap, "byte %zu: the version 1 data runs past the end (%zu bytes)", len,
                 len);
        return -1;
    }
    if (data[4] == 0) /* version 1: 32-bit times, no footer */
        return block(z, data + HEADER_LEN, &k, 4, err, errcap, HEADER_LEN) == 0
                   ? 0
                   : (tg__tz_cleanup(z), -1);
    if (header(data + v1, len - v1, &k, err, errcap, v1) != 0)
        return -1;
    size_t start = v1 + HEADER_LEN, end = start + block_len(&k, 8);
    if (end > len) {
        snprintf(err, errcap, "byte %zu: the version 2 data runs past the end", len);
        return -1;
    }
    if (block(z, data + start, &k, 8, err, errcap, start) != 0) {
        tg__tz_cleanup(z);
        return -1;
    }
    /* Footer: "\n" rule "\n"; an empty rule means none. */
    if (end < len) {
        const unsigned char *nl =
            end + 1 < len ? memchr(data + end + 1, '\n', len - end - 1) : NULL;
        if (data[end] != '\n' || !nl) {
            snprintf(err, errcap, "byte %zu: the footer is not a newline-framed TZ string", end);
            tg__tz_cleanup(z);
            return -1;
        }
        size_t rl = (size_t)(nl - (data + end + 1));
        if (rl && tg__tz_rule_parse(&z->rule, (const char *)data + end + 1, rl) != 0) {
            snprintf(err, errcap, "byte %zu: footer TZ string \"%.*s\" is not a POSIX rule",
                     end + 1, (int)(rl > 60 ? 60 : rl), (const char *)data + end + 1);
            tg__tz_cleanup(z);
            return -1;
        }
    }
    return 0;
}

void tg__tz_cleanup(tg__tz *z)
{
    if (!z)
        return;
    tg__free(z->trans);
    tg__free(z->trans_type);
    tg__free(z->type_off);
    z->trans = NULL;
    z->trans_type = NULL;
    z->type_off = NULL;
    z->ntrans = z->ntypes = 0;
}

static bool name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n >= 64 || name[0] == '/' || name[n - 1] == '/' || strstr(name, "..") ||
        strstr(name, "//"))
        return false;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              strchr("_+-/", *p)))
            return false;
    return true;
}

int tg__tz_load(tg__tz *z, const char *name, const char *dir, char *err, size_t errcap)
{
    memset(z, 0, sizeof *z);
    if (!name || !name_ok(name)) {
        snprintf(err, errcap, "time zone \"%.64s\" is not an IANA name like Europe/Berlin",
                 name ? name : "(null)");
        return -1;
    }
    if (!dir)
        dir = getenv("TZDIR") && *getenv("TZDIR") ? getenv("TZDIR") : "/usr/share/zoneinfo";
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *buf, ferr[400];
    size_t got;
    if (tg__read_file(path, MAX_FILE_LEN, 0, &buf, &got, NULL, ferr, sizeof ferr) != 0) {
        snprintf(err, errcap, "time zone %s: %s", name, ferr);
        return -1;
    }
    char perr[200];
    int rc;
    if ((rc = tg__tz_parse(z, (const unsigned char *)buf, got, perr, sizeof perr)) != 0)
        snprintf(err, errcap, "time zone %s: %s: %s", name, path, perr);
    tg__free(buf);
    if (rc == 0)
        snprintf(z->name, sizeof z->name, "%s", name);
    return rc;
}

int32_t tg__tz_offset(const tg__tz *z, int64_t t)
{
    if (z->ntrans == 0 || t < z->trans[0])
        return z->ntrans == 0 && z->rule.present ? rule_offset(&z->rule, t) : z->type_off[0];
    if (t >= z->trans[z->ntrans - 1] && z->rule.present)
        return rule_offset(&z->rule, t);
    size_t lo = 0, hi = z->ntrans; /* the last transition <= t */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (z->trans[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    return z->type_off[z->trans_type[lo]];
}

int64_t tg__tz_from_local(const tg__tz *z, int64_t local_s)
{
    /* Offsets in force a day either side bound the candidates (no zone changes twice a day). */
    int32_t before = tg__tz_offset(z, local_s - 86400 - 93600);
    int32_t after = tg__tz_offset(z, local_s + 86400 + 93600);
    int64_t a = local_s - before, b = local_s - after;
    bool a_ok = tg__tz_offset(z, a) == before, b_ok = tg__tz_offset(z, b) == after;
    if (a_ok && b_ok)
        return a < b ? a : b; /* a repeated hour: the first */
    if (a_ok || b_ok)
        return a_ok ? a : b;
    return a; /* a gap: as far past its start as the time was meant to be */
}
