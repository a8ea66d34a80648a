/*
 * log: levelled logging to a user-settable sink, with secret scrubbing.
 *
 * A tg__logger holds a level threshold, a sink callback and a set of registered secrets (bot
 * tokens, proxy keys in each text form; up to TG__LOG_MAX_SECRETS). Every message is formatted
 * into a bounded stack buffer and every occurrence of a registered secret is replaced by
 * "[REDACTED]" before the sink sees it, so a secret passed as such never reaches a log,
 * whichever format string leaked it. Lines are cut to TG__LOG_LINE_MAX only after scrubbing,
 * so a cut never leaves the start of a secret. Passing NULL as the logger uses the process default
 * (stderr, level INFO).
 *
 * Secret store invariants: entries live in fixed-size chunks (TG__LOG_SECRET_CHUNK entries)
 * allocated on first use and never moved or freed before tg__logger_cleanup, so a reader
 * holding an entry index can always dereference it. Entries are chained per bucket of a
 * hash of their first 4 bytes (every secret has at least 4); an adder fills the entry, links
 * it in front of its bucket and then publishes it with a release store of the bucket head
 * (and of n_secrets); a scrubbing thread acquires the bucket head, so it sees whole entries
 * or none. A 64 Kibit filter over a finer cut of the same hash lets most line positions be
 * passed after one bit test. Scrubbing a line is one hash and filter probe per byte plus a
 * compare per candidate, so its cost barely grows with the number of secrets as long as they
 * differ in their first 4 bytes (random keys do; secrets sharing a 4-byte prefix share a
 * chain). bench/proxy/log_scrub.c measures it.
 *
 * Lines the network can trigger should go through a tg__ratelimit so a flood of bad
 * handshakes cannot flood the log.
 *
 * Ownership: the caller owns the tg__logger struct; secrets are copied in.
 * Thread-safety: configure (set_sink) before sharing; logging itself is thread-safe as long
 * as the sink is. tg__logger_set_level and tg__logger_add_secret may run while other threads
 * log, but only one thread may add secrets at a time (adders do not lock against each
 * other; tgproxy adds from its controlling thread, at start and on SIGHUP). Cleanup must
 * not race with logging. The default sink writes one line per fwrite.
 */
#ifndef TGKIT_CORE_LOG_H
#define TGKIT_CORE_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    TG__LOG_TRACE = 0,
    TG__LOG_DEBUG = 1,
    TG__LOG_INFO = 2,
    TG__LOG_WARN = 3,
    TG__LOG_ERROR = 4,
    TG__LOG_OFF = 5,
};

/* msg is NUL-terminated, already scrubbed, without a trailing newline. */
typedef void (*tg__log_sink_fn)(void *user, int level, const char *msg);

#define TG__LOG_SECRET_CHUNK   256 /* entries per lazily allocated chunk */
#define TG__LOG_SECRET_CHUNKS  256
#define TG__LOG_MAX_SECRETS    (TG__LOG_SECRET_CHUNK * TG__LOG_SECRET_CHUNKS) /* 65536 */
#define TG__LOG_SECRET_BUCKETS 1024  /* hash buckets over the first 4 bytes; a power of 2 */
#define TG__LOG_SECRET_FILTER  65536 /* bits of the prefilter over the same hash */
#define TG__LOG_LINE_MAX       1024  /* bytes; longer messages are truncated with "..." */
#define TG__LOG_FORMAT_MAX     4096  /* bytes formatted and scrubbed before that truncation */

struct tg__log_secret {
    char *p;       /* owned copy, wiped at cleanup */
    size_t n;      /* >= 4 */
    uint32_t next; /* 1-based index of the next entry in the same bucket; 0 ends the chain */
    uint32_t head; /* the first 4 bytes, compared before p is read */
};

typedef struct tg__logger {
    int level;
    tg__log_sink_fn sink; /* NULL = stderr */
    void *user;
    size_t n_secrets; /* entries published; release store by the adder */
    struct tg__log_secret *chunks[TG__LOG_SECRET_CHUNKS];
    uint32_t buckets[TG__LOG_SECRET_BUCKETS];    /* 1-based entry index of each chain's head */
    uint64_t filter[TG__LOG_SECRET_FILTER / 64]; /* bit set: some secret may start so */
} tg__logger;

void tg__logger_init(tg__logger *lg, int level, tg__log_sink_fn sink, void *user);
/* Change the level threshold; safe while other threads log (a relaxed atomic store). */
static inline void tg__logger_set_level(tg__logger *lg, int level)
{
    __atomic_store_n(&lg->level, level, __ATOMIC_RELAXED);
}
void tg__logger_cleanup(tg__logger *lg);
/* Register a secret to scrub (copied; at least 4 bytes; one already registered is not added
   again). Returns 0, -EINVAL (shorter than 4 bytes), -ENOSPC (TG__LOG_MAX_SECRETS reached)
   or -ENOMEM. One adding thread at a time; threads may log meanwhile. */
int tg__logger_add_secret(tg__logger *lg, const char *secret, size_t len);

/* The process default logger (stderr, INFO). Configure it before starting threads. */
tg__logger *tg__log_default(void);

static inline bool tg__log_enabled(const tg__logger *lg, int level)
{
    /* relaxed: a daemon may change its level while threads log (tgproxy's reload) */
    return level >= __atomic_load_n(lg ? &lg->level : &tg__log_default()->level, __ATOMIC_RELAXED);
}

void tg__log(tg__logger *lg, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void tg__vlog(tg__logger *lg, int level, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
/* Replace each registered secret in buf (NUL-terminated, capacity cap) by "[REDACTED]",
   the longest one where several start at the same byte. Where a replacement would not fit
   in cap, the line ends after it (the rest is dropped, never cut inside a secret). */
void tg__log_scrub(const tg__logger *lg, char *buf, size_t cap);
const char *tg__log_level_name(int level);
/* A hash of msg in which every run of digits counts as one digit: lines that differ only in
   their numbers ("after 0 ms" / "after 3 ms", "attempt 2") share it. Never 0. */
uint64_t tg__log_shape(const char *msg);
/* The default sink: "<UTC time> <level> <msg>\n" on stderr in one fwrite. For loggers whose
   own sink passes lines on to it (the bot's, after holding back repeats). */
void tg__log_stderr(int level, const char *msg);
/* Parse "trace|debug|info|warn|error|off" (case-insensitive). Returns the level or -1. */
int tg__log_level_parse(const char *s);

/* Token bucket for log lines: at most burst at once, then per_sec per second. One thread. */
typedef struct tg__ratelimit {
    double tokens;
    double per_sec;
    double burst;
    uint64_t last_ms;
    uint64_t dropped; /* lines suppressed since the last allowed one */
} tg__ratelimit;

void tg__ratelimit_init(tg__ratelimit *rl, double per_sec, double burst);
/* true if a line may be written now; otherwise counts it as dropped. */
bool tg__ratelimit_allow(tg__ratelimit *rl, uint64_t now_ms);

#endif
