/*
 * tz: IANA time zones from the system's TZif files (RFC 8536), for jobs that run at a
 * local time. Pure functions over bytes (fuzzed by fuzz/bot_tzif) plus one loader.
 *
 * Why not localtime_r: it reads the zone from the TZ variable, which is process-wide; a
 * library that switches TZ per job races every other thread that reads the time. A parsed
 * zone here is an immutable value: any number of threads may read one.
 *
 * A zone is its transition table (the 64-bit one of a version 2+ file, else version 1's)
 * and, for instants after the last transition, the file's footer rule (a POSIX TZ string
 * such as "CET-1CEST,M3.5.0,M10.5.0/3"). Times are seconds since the Unix epoch (UTC);
 * "local seconds" are the same count on the local wall clock (UTC + offset).
 */
#ifndef TGKIT_BOT_DISPATCH_TZ_H
#define TGKIT_BOT_DISPATCH_TZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG__TZ_MAX_TRANSITIONS 4096
#define TG__TZ_MAX_TYPES       256

/* A POSIX TZ rule's change date: Mm.w.d, Jn (1..365, no Feb 29) or n (0..365). */
struct tg__tz_date {
    char kind; /* 'M', 'J' or 'n' */
    int month, week, wday, day;
    int32_t secs; /* local time of the change, seconds (may be < 0 or > 24 h) */
};

struct tg__tz_rule {
    bool present;
    int32_t std_off, dst_off; /* seconds east of UTC */
    bool has_dst;
    struct tg__tz_date start, end;
};

typedef struct tg__tz {
    size_t ntrans;
    int64_t *trans;      /* ascending UTC instants */
    uint8_t *trans_type; /* index into types */
    size_t ntypes;
    int32_t *type_off; /* seconds east of UTC */
    struct tg__tz_rule rule;
    char name[64];
} tg__tz;

/* Parse a TZif file (len bytes). 0, or -1 with err (what and at which byte). The zone owns
 * malloc'ed arrays: tg__tz_cleanup. */
int tg__tz_parse(tg__tz *z, const unsigned char *data, size_t len, char *err, size_t errcap);
/* Parse a POSIX TZ rule string (the footer); 0 or -1. */
int tg__tz_rule_parse(struct tg__tz_rule *r, const char *s, size_t len);
void tg__tz_cleanup(tg__tz *z);
/* Load zone name ("Europe/Berlin") from dir (NULL = $TZDIR, else /usr/share/zoneinfo).
 * Names are checked ([A-Za-z0-9_+-] parts joined by '/', no "..") before touching a file.
 * 0 or -1 with err. */
int tg__tz_load(tg__tz *z, const char *name, const char *dir, char *err, size_t errcap);

/* Offset of the zone at UTC instant t, seconds east of UTC. */
int32_t tg__tz_offset(const tg__tz *z, int64_t t);
/*
 * The UTC instant of local wall time local_s (local seconds). When the local time happens
 * twice (the hour a fall-back repeats) the first one; when it does not exist (skipped by a
 * spring-forward) the instant the same distance past the gap's start, i.e. 02:30 in a gap
 * from 02:00 to 03:00 gives 03:30 — the clock a person would read.
 */
int64_t tg__tz_from_local(const tg__tz *z, int64_t local_s);

/* Civil dates: days since 1970-01-01 of y-m-d (proleptic Gregorian), and back. */
int64_t tg__days_from_civil(int64_t y, int m, int d);
void tg__civil_from_days(int64_t days, int64_t *y, int *m, int *d);

#endif
