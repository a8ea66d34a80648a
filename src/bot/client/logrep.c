/*
 * logrep: the bot's logger holds back repeats of a warning, so a failure that recurs (a
 * server that is away, a chat that keeps refusing) shows as a few lines, not one per try.
 *
 * Which lines repeat: warnings and errors of the same level whose text is the same once
 * every run of digits counts as one digit ("attempt 2; retrying in 512 ms" repeats "attempt
 * 1; retrying in 250 ms"). Debug and info lines always pass.
 * What is shown: the first line of a run at once; then, while it keeps coming, only the
 * 10th, 100th, 1000th, ... with "[repeated N times in S s; ...]" (the latest text); and the
 * count held back since the last shown when the run ends: when the line comes back after
 * LOGREP_QUIET_MS without one (then it is shown again as a new run), when its slot is taken
 * by another line (LOGREP_SLOTS kinds of line are followed, the least recently seen goes),
 * or at tg_bot_free.
 * Thread-safety: one mutex over the slots; lines are handed to the sink after it is
 * released, so a sink may itself log.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bot/client/client_int.h"
#include "core/alloc.h"
#include "core/clock.h"

#define LOGREP_SLOTS    16
#define LOGREP_QUIET_MS (10ull * 60 * 1000) /* a run ends after this long without its line */
#define LOGREP_FIRST    10                  /* the first summary, then x10 each */
#define LOGREP_OUT_MAX  (TG__LOG_LINE_MAX + 128)

struct rep_slot {
    uint64_t key; /* 0 = free */
    int level;
    uint64_t seen; /* lines of this run */
    uint64_t held; /* held back since the last shown */
    uint64_t next; /* seen count of the next summary */
    uint64_t first_ms, last_ms, used;
    char line[TG__LOG_LINE_MAX]; /* the latest held line */
};

struct tg__logrep {
    pthread_mutex_t mu;
    uint64_t tick;
    uint64_t (*now_ms)(void *user);
    void *now_user;
    struct rep_slot s[LOGREP_SLOTS];
};

/* Up to two lines to hand on after the lock: a run's end, then the line itself. */
struct rep_out {
    int n;
    int level[2];
    char text[2][LOGREP_OUT_MAX];
};

static uint64_t real_now(void *user)
{
    (void)user;
    return tg__now_ms();
}

struct tg__logrep *tg__logrep_new(void)
{
    struct tg__logrep *r = tg__calloc(1, sizeof *r);
    if (!r)
        return NULL;
    pthread_mutex_init(&r->mu, NULL);
    r->now_ms = real_now;
    return r;
}

void tg__logrep_set_clock(struct tg__logrep *r, uint64_t (*now_ms)(void *user), void *user)
{
    pthread_mutex_lock(&r->mu);
    r->now_ms = now_ms ? now_ms : real_now;
    r->now_user = user;
    pthread_mutex_unlock(&r->mu);
}

/* The line's shape (tg__log_shape: its numbers do not count) and its level. Never 0. */
static uint64_t shape_key(int level, const char *msg)
{
    uint64_t h = (tg__log_shape(msg) ^ (uint64_t)(level + 1)) * 1099511628211ull;
    return h ? h : 1;
}

static void emit(struct rep_out *o, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void emit(struct rep_out *o, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->text[o->n], sizeof o->text[o->n], fmt, ap);
    va_end(ap);
    o->level[o->n++] = level;
}

/* The end of s's run, when it held lines back. */
static void end_run(struct rep_out *o, const struct rep_slot *s, uint64_t now)
{
    if (s->held)
        emit(o, s->level, "%s [repeated %" PRIu64 " more times, the last %" PRIu64 " s ago]",
             s->line, s->held, (now - s->last_ms) / 1000);
}

static void start_run(struct rep_slot *s, uint64_t key, int level, uint64_t now, uint64_t tick)
{
    *s = (struct rep_slot){.key = key,
                           .level = level,
                           .seen = 1,
                           .next = LOGREP_FIRST,
                           .first_ms = now,
                           .last_ms = now,
                           .used = tick};
}

static void decide(struct tg__logrep *r, int level, const char *msg, struct rep_out *o)
{
    uint64_t key = shape_key(level, msg), now = r->now_ms(r->now_user), tick = ++r->tick;
    struct rep_slot *s = NULL, *lru = &r->s[0];
    for (int i = 0; i < LOGREP_SLOTS; i++) {
        if (r->s[i].key == key) {
            s = &r->s[i];
            break;
        }
        if (!r->s[i].key || (lru->key && r->s[i].used < lru->used))
            lru = &r->s[i];
    }
    if (!s || now - s->last_ms > LOGREP_QUIET_MS) { /* a new run */
        s = s ? s : lru;
        if (s->key)
            end_run(o, s, now);
        start_run(s, key, level, now, tick);
        emit(o, level, "%s", msg);
        return;
    }
    s->seen++;
    s->last_ms = now;
    s->used = tick;
    if (s->seen < s->next) {
        s->held++;
        snprintf(s->line, sizeof s->line, "%s", msg);
        return;
    }
    emit(o, level,
         "%s [repeated %" PRIu64 " times in %" PRIu64 " s; the same line is now shown at the "
         "%" PRIu64 "th time]",
         msg, s->seen, (now - s->first_ms) / 1000, s->next * 10);
    s->held = 0;
    s->next *= 10;
}

void tg__logrep_line(struct tg__logrep *r, int level, const char *msg,
                     void (*out)(void *user, int level, const char *msg), void *user)
{
    if (!r || level < TG__LOG_WARN) {
        out(user, level, msg);
        return;
    }
    struct rep_out o = {.n = 0};
    pthread_mutex_lock(&r->mu);
    decide(r, level, msg, &o);
    pthread_mutex_unlock(&r->mu);
    for (int i = 0; i < o.n; i++)
        out(user, o.level[i], o.text[i]);
}

void tg__logrep_free(struct tg__logrep *r, void (*out)(void *user, int level, const char *msg),
                     void *user)
{
    if (!r)
        return;
    uint64_t now = r->now_ms(r->now_user);
    struct rep_out o;
    for (int i = 0; i < LOGREP_SLOTS; i++) {
        o.n = 0;
        if (r->s[i].key)
            end_run(&o, &r->s[i], now);
        if (o.n && out)
            out(user, o.level[0], o.text[0]);
    }
    pthread_mutex_destroy(&r->mu);
    tg__free(r);
}
