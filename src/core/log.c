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
        struct tg__log_secret *e = &lg->chunks[i / TG__LOG_SECRET_CHUNK][i % TG__LOG_SECRET_CHUNK];
        explicit_bzero(e->p, e->n);
        tg__free(e->p);
    }
    for (size_t c = 0; c < TG__LOG_SECRET_CHUNKS; c++) {
        tg__free(lg->chunks[c]);
        lg->chunks[c] = NULL;
    }
    memset(lg->buckets, 0, sizeof lg->buckets);
    memset(lg->filter, 0, sizeof lg->filter);
    lg->n_secrets = 0;
}

/* Hash of the first 4 bytes of a secret or a line position: its top bits pick the filter
   bit, the top 10 of those the bucket. */
static uint32_t hash4(const char *s, uint32_t *head)
{
    memcpy(head, s, sizeof *head);
    return *head * 2654435761u;
}

#define FILTER_BIT(h) ((h) >> 16)
#define BUCKET(h)     ((h) >> (32 - 10))
_Static_assert(TG__LOG_SECRET_BUCKETS == 1 << 10, "BUCKET takes the top 10 bits");
_Static_assert(TG__LOG_SECRET_FILTER == 1 << 16, "FILTER_BIT takes the top 16 bits");

static const struct tg__log_secret *entry_at(const tg__logger *lg, uint32_t idx1)
{
    uint32_t i = idx1 - 1;
    return &lg->chunks[i / TG__LOG_SECRET_CHUNK][i % TG__LOG_SECRET_CHUNK];
}

/* Length of the longest registered secret that s[0..avail) starts with, or 0. avail >= 4. */
static size_t longest_at(const tg__logger *lg, const char *s, size_t avail)
{
    uint32_t head, h = hash4(s, &head);
    uint64_t word = __atomic_load_n(&lg->filter[FILTER_BIT(h) / 64], __ATOMIC_ACQUIRE);
    if (!(word >> (FILTER_BIT(h) % 64) & 1))
        return 0;
    size_t best = 0;
    /* acquire: pairs with the adder's release, so the chain and its entries are complete */
    uint32_t idx = __atomic_load_n(&lg->buckets[BUCKET(h)], __ATOMIC_ACQUIRE);
    while (idx != 0) {
        const struct tg__log_secret *e = entry_at(lg, idx);
        if (e->head == head && e->n > best && e->n <= avail && memcmp(e->p, s, e->n) == 0)
            best = e->n;
        idx = e->next;
    }
    return best;
}

int tg__logger_add_secret(tg__logger *lg, const char *secret, size_t len)
{
    if (len < 4)
        return -EINVAL; /* scrubbing very short strings would mangle ordinary text */
    if (longest_at(lg, secret, len) == len)
        return 0;             /* already registered (a reload re-adds the keys it kept) */
    size_t k = lg->n_secrets; /* adders are one thread at a time */
    if (k == TG__LOG_MAX_SECRETS)
        return -ENOSPC;
    struct tg__log_secret **chunk = &lg->chunks[k / TG__LOG_SECRET_CHUNK];
    if (!*chunk) {
        struct tg__log_secret *c = tg__calloc(TG__LOG_SECRET_CHUNK, sizeof *c);
        if (!c)
            return -ENOMEM;
        /* readers only reach this chunk through an index published after this store */
        __atomic_store_n(chunk, c, __ATOMIC_RELAXED);
    }
    char *copy = tg__memdup(secret, len);
    if (!copy)
        return -ENOMEM;
    struct tg__log_secret *e = &(*chunk)[k % TG__LOG_SECRET_CHUNK];
    uint32_t h = hash4(secret, &e->head);
    uint32_t *bucket = &lg->buckets[BUCKET(h)];
    e->p = copy;
    e->n = len;
    e->next = *bucket;
    /* release: a thread scrubbing a line sees the entry complete once it sees the index */
    __atomic_store_n(bucket, (uint32_t)(k + 1), __ATOMIC_RELEASE);
    /* after the bucket: a reader passing the filter finds the entry in its chain */
    __atomic_fetch_or(&lg->filter[FILTER_BIT(h) / 64], (uint64_t)1 << (FILTER_BIT(h) % 64),
                      __ATOMIC_RELEASE);
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

/* Put "[REDACTED]" over buf[pos..pos+n) of a len-byte line; returns the new length. */
static size_t redact_at(char *buf, size_t cap, size_t len, size_t pos, size_t n)
{
    size_t rl = sizeof REDACTED - 1;
    size_t tail = len - pos - n;
    if (pos + rl >= cap) { /* not even the marker fits: end the line where the secret began */
        buf[pos] = '\0';
        return pos;
    }
    if (pos + rl + tail >= cap)
        tail = 0; /* drop the rest rather than cut it where a secret might start */
    memmove(buf + pos + rl, buf + pos + n, tail);
    memcpy(buf + pos, REDACTED, rl);
    buf[pos + rl + tail] = '\0';
    return pos + rl + tail;
}

/* Leftmost match first; overlapping matches merge into one marker, so no part of a secret
   that overlaps another is left visible. */
void tg__log_scrub(const tg__logger *lg, char *buf, size_t cap)
{
    if (!lg || cap == 0 || __atomic_load_n(&lg->n_secrets, __ATOMIC_ACQUIRE) == 0)
        return;
    size_t len = strnlen(buf, cap - 1);
    buf[len] = '\0';
    for (size_t pos = 0; pos + 4 <= len;) {
        size_t end = pos + longest_at(lg, buf + pos, len - pos);
        if (end == pos) {
            pos++;
            continue;
        }
        /* a secret starting inside this one and running past it is covered too */
        for (size_t p = pos + 1; p < end && p + 4 <= len; p++) {
            size_t m = longest_at(lg, buf + p, len - p);
            if (p + m > end)
                end = p + m;
        }
        len = redact_at(buf, cap, len, pos, end - pos);
        pos += sizeof REDACTED - 1;
    }
}

uint64_t tg__log_shape(const char *msg)
{
    uint64_t h = 14695981039346656037ull; /* FNV-1a */
    for (const char *p = msg; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c >= '0' && c <= '9') {
            while (p[1] >= '0' && p[1] <= '9')
                p++;
            c = '0';
        }
        h = (h ^ c) * 1099511628211ull;
    }
    return h ? h : 1;
}

void tg__log_stderr(int level, const char *msg)
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
    /* Scrub before truncating: a cut through a secret would leave its start unscrubbed.
       The extra room lets scrubbing grow a short secret into "[REDACTED]". */
    char msg[TG__LOG_FORMAT_MAX + 64];
    int n = vsnprintf(msg, TG__LOG_FORMAT_MAX, fmt, ap);
    if (n < 0)
        return;
    tg__log_scrub(lg, msg, sizeof msg);
    if (n >= TG__LOG_FORMAT_MAX || strlen(msg) >= TG__LOG_LINE_MAX)
        memcpy(msg + TG__LOG_LINE_MAX - 4, "...", 4);
    if (lg->sink)
        lg->sink(lg->user, level, msg);
    else
        tg__log_stderr(level, msg);
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
