/*
 * log: levelled logging to a user-settable sink, with secret scrubbing.
 *
 * A tg__logger holds a level threshold, a sink callback and a small set of registered
 * secrets (bot tokens, proxy keys). Every message is formatted into a bounded stack buffer
 * and every occurrence of a registered secret is replaced by "[REDACTED]" before the sink
 * sees it, so a secret passed as such never reaches a log, whichever format string leaked it.
 * Passing NULL as the logger uses the process default (stderr, level INFO).
 *
 * Lines the network can trigger should go through a tg__ratelimit so a flood of bad
 * handshakes cannot flood the log.
 *
 * Ownership: the caller owns the tg__logger struct; secrets are copied in.
 * Thread-safety: configure (set_sink) before sharing; logging itself is thread-safe as long
 * as the sink is. tg__logger_set_level and tg__logger_add_secret may run while other threads
 * log (one thread adding secrets at a time). The default sink writes one line per fwrite.
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

#define TG__LOG_MAX_SECRETS 8
#define TG__LOG_LINE_MAX    1024 /* bytes; longer messages are truncated with "..." */

typedef struct tg__logger {
    int level;
    tg__log_sink_fn sink; /* NULL = stderr */
    void *user;
    size_t n_secrets;
    struct {
        char *p;
        size_t n;
    } secrets[TG__LOG_MAX_SECRETS];
} tg__logger;

void tg__logger_init(tg__logger *lg, int level, tg__log_sink_fn sink, void *user);
/* Change the level threshold; safe while other threads log (a relaxed atomic store). */
static inline void tg__logger_set_level(tg__logger *lg, int level)
{
    __atomic_store_n(&lg->level, level, __ATOMIC_RELAXED);
}
void tg__logger_cleanup(tg__logger *lg);
/* Register a secret to scrub (copied; at least 4 bytes; one already registered is not added
   again). Returns 0, -ENOSPC or -ENOMEM. */
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
/* Replace each registered secret in buf (NUL-terminated, capacity cap) by "[REDACTED]". */
void tg__log_scrub(const tg__logger *lg, char *buf, size_t cap);
const char *tg__log_level_name(int level);
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
