/*
 * log: formatting, scrubbing, default sink, rate limiting. See log.h.
 */
#include "core/log.h"

#include "core/alloc.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static const char *const level_names[] = {"trace", "debug", "info", "warn", "error", "off"};
static const char REDACTED[] = "[REDACTED]";

static tg__logger default_logger = {.level = TG__LOG_INFO};

tg__logger *tg__log_default(void)
{
    return &default_logger;
}

void tg__logger_init(tg__logger *lg, int level, tg__log_sink_fn sink, void *user)
{
    memset(lg, 0, sizeof *lg);
    lg->level = level;
    lg->sink = sink;
    lg->user = user;
}

void tg__logger_cleanup(tg__logger *lg)
{
    if (!lg)
        return;
    for (size_t i = 0; i < lg->n_secrets; i++) {
        explicit_bzero(lg->secrets[i].p, lg->secrets[i].n);
        tg__free(lg->secrets[i].p);
    }
    lg->n_secrets = 0;
}

int tg__logger_add_secret(tg__logger *lg, const char *secret, size_t len)
{
    if (len < 4)
        return -EINVAL; /* scrubbing very short strings would mangle ordinary text */
    size_t k = lg->n_secrets; /* adders are one thread at a time */
    for (size_t i = 0; i < k; i++)
        if (lg->secrets[i].n == len && memcmp(lg->secrets[i].p, secret, len) == 0)
            return 0;
    if (k == TG__LOG_MAX_SECRETS)
        return -ENOSPC;
    char *copy = tg__memdup(secret, len);
    if (!copy)
        return -ENOMEM;
    lg->secrets[k].p = copy;
    lg->secrets[k].n = len;
    /* release: a thread scrubbing a line sees the entry complete once it sees the count */
    __atomic_store_n(&lg->n_secrets, k + 1, __ATOMIC_RELEASE);
    return 0;
}

const char *tg__log_level_name(int level)
{
    if (level < TG__LOG_TRACE || level > TG__LOG_OFF)
        return "?";
    return level_names[level];
}

int tg__log_level_parse(const char *s)
{
    for (int i = 0; i <= TG__LOG_OFF; i++)
        if (strcasecmp(s, level_names[i]) == 0)
            return i;
    if (strcasecmp(s, "warning") == 0)
        return TG__LOG_WARN;
    return -1;
}

void tg__log_scrub(const tg__logger *lg, char *buf, size_t cap)
{
    if (!lg)
        return;
    size_t rl = sizeof REDACTED - 1;
    size_t nsec = __atomic_load_n(&lg->n_secrets, __ATOMIC_ACQUIRE);
    for (size_t i = 0; i < nsec; i++) {
        const char *s = lg->secrets[i].p;
        size_t n = lg->secrets[i].n;
        char *hit = buf;
        while ((hit = memmem(hit, strlen(hit), s, n)) != NULL) {
            size_t tail = strlen(hit + n) + 1; /* with NUL */
            size_t pos = (size_t)(hit - buf);
            if (pos + rl + tail > cap) /* no room: truncate the line at the secret */
                tail = cap > pos + rl ? cap - pos - rl : 0;
            if (pos + rl >= cap) {
                *hit = '\0';
                break;
            }
            memmove(hit + rl, hit + n, tail);
            memcpy(hit, REDACTED, rl);
            buf[cap - 1] = '\0';
            hit += rl;
        }
    }
}

static void stderr_sink(int level, const char *msg)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char line[TG__LOG_LINE_MAX + 64];
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s\n",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000, tg__log_level_name(level), msg);
    if (n > 0)
        fwrite(line, 1, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1, stderr);
}

void tg__vlog(tg__logger *lg, int level, const char *fmt, va_list ap)
{
    if (!lg)
        lg = &default_logger;
    if (level < __atomic_load_n(&lg->level, __ATOMIC_RELAXED) || level >= TG__LOG_OFF)
        return;
    /* Room for scrubbing to grow a short secret into "[REDACTED]". */
    char msg[TG__LOG_LINE_MAX + 64];
    int n = vsnprintf(msg, TG__LOG_LINE_MAX, fmt, ap);
    if (n < 0)
        return;
    if (n >= TG__LOG_LINE_MAX)
        memcpy(msg + TG__LOG_LINE_MAX - 4, "...", 4);
    tg__log_scrub(lg, msg, sizeof msg);
    if (lg->sink)
        lg->sink(lg->user, level, msg);
    else
        stderr_sink(level, msg);
}

void tg__log(tg__logger *lg, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tg__vlog(lg, level, fmt, ap);
    va_end(ap);
}

void tg__ratelimit_init(tg__ratelimit *rl, double per_sec, double burst)
{
    rl->per_sec = per_sec;
    rl->burst = burst < 1 ? 1 : burst;
    rl->tokens = rl->burst;
    rl->last_ms = 0;
    rl->dropped = 0;
}

bool tg__ratelimit_allow(tg__ratelimit *rl, uint64_t now_ms)
{
    if (rl->last_ms && now_ms > rl->last_ms)
        rl->tokens += (double)(now_ms - rl->last_ms) * rl->per_sec / 1000.0;
    if (rl->tokens > rl->burst)
        rl->tokens = rl->burst;
    rl->last_ms = now_ms;
    if (rl->tokens >= 1.0) {
        rl->tokens -= 1.0;
        return true;
    }
    rl->dropped++;
    return false;
}
