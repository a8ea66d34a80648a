/*
 * broadcast.c: one message to many chats on an async handle (tgbot/broadcast.h).
 *
 * A pacing timer on the handle's heap fires every 1/rate seconds and submits the next chat
 * without an outcome while fewer than max_in_flight are out; each completion classifies the
 * answer (403 blocked / deactivated / other, 400 chat not found, else failed), records it in
 * the progress file and the counters, and calls the user. The progress file is an append-only
 * log: a header naming the list (count and a hash of the ids), "S i" before chat i is
 * submitted, "D i outcome" after; reading it back gives each chat's state (S without D =
 * uncertain: never resent).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bot/client/async_int.h"
#include "bot/client/broadcast_int.h"
#include "core/alloc.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/str.h"
#include "tgbot/api.h"
#include "tgbot/broadcast.h"

#define DEFAULT_RATE      28.0
#define DEFAULT_PAID_RATE 1000.0
#define DEFAULT_INFLIGHT  64
#define HEADER            "tgbot-broadcast 1"

struct tg_broadcast {
    tg_async *a;
    tg_broadcast_options o;
    char *text;
    char *parse_mode;
    int64_t *chats;
    uint8_t *state; /* tg_broadcast_outcome per entry; PENDING = not yet */
    uint8_t *submitted;
    size_t n, next; /* next index to look at */
    uint32_t in_flight, max_in_flight;
    uint64_t interval_ns, next_ns;
    tg__timer pace;
    int fd; /* progress file, -1 = none */
    bool stopped, done_called, freed, known_reported;
    tg_broadcast_progress p;
};

static _Thread_local char errbuf[256];

TG_API const char *tg_broadcast_errmsg(void)
{
    return errbuf;
}

/* "broadcast: <why>[: <path>]" for tg_broadcast_errmsg; returns NULL. */
static void *fail(const char *why, const char *path)
{
    snprintf(errbuf, sizeof errbuf, "broadcast: %s%s%s", why, path ? ": " : "", path ? path : "");
    return NULL;
}

TG_API const char *tg_broadcast_outcome_name(tg_broadcast_outcome o)
{
    static const char *const names[] = {"pending",     "sent",      "blocked",
                                        "not found",   "deactivated", "forbidden",
                                        "failed",      "uncertain", "duplicate"};
    return (unsigned)o < sizeof names / sizeof names[0] ? names[o] : "unknown";
}

static uint64_t list_hash(const int64_t *c, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a over the ids' bytes */
    for (size_t i = 0; i < n; i++)
        for (int b = 0; b < 8; b++)
            h = (h ^ (((uint64_t)c[i] >> (8 * b)) & 0xff)) * 0x100000001b3ull;
    return h;
}

static void log_line(tg_broadcast *b, const char *line, size_t len)
{
    if (b->fd >= 0 && write(b->fd, line, len) != (ssize_t)len)
        tg__log(&b->a->bot->log, TG__LOG_WARN, "broadcast: cannot write the progress file: %s",
                strerror(errno));
}

/* An outcome for entry i: counted, logged (unless it came from the file or is a duplicate,
 * which a resumed run works out again) and reported. */
static void record(tg_broadcast *b, size_t i, tg_broadcast_outcome o, const tg_async_result *r,
                   bool from_file)
{
    bool log = !from_file && o != TG_BCAST_DUPLICATE;
    b->state[i] = (uint8_t)o;
    b->p.done++;
    b->p.by_outcome[o]++;
    if (o == TG_BCAST_SENT)
        b->p.sent++;
    else
        b->p.failed++;
    if (from_file)
        b->p.resumed++;
    if (log) {
        char line[64];
        int k = snprintf(line, sizeof line, "D %zu %d\n", i, (int)o);
        log_line(b, line, (size_t)k);
    }
    b->p.finished = b->p.done == b->n;
    if (b->freed)
        return;
    if (b->o.on_chat)
        b->o.on_chat(b->o.user, i, b->chats[i], o, r);
    if (b->o.on_progress)
        b->o.on_progress(b->o.user, &b->p);
}

static void maybe_done(tg_broadcast *b)
{
    bool over = b->p.finished || (b->stopped && b->in_flight == 0);
    if (!over || b->done_called)
        return;
    b->done_called = true;
    tg__timer_cancel(&b->a->timers, &b->pace);
    if (!b->freed && b->o.on_done)
        b->o.on_done(b->o.user, &b->p);
}

static tg_broadcast_outcome classify(const tg_async_result *r)
{
    if (r->status == TG_OK)
        return TG_BCAST_SENT;
    const tg_error_info *e = tg_ctx_error(r->ctx);
    if (r->status != TG_ERR_API)
        return TG_BCAST_FAILED;
    const char *d = e->description ? e->description : "";
    if (e->error_code == 403 && strstr(d, "blocked"))
        return TG_BCAST_BLOCKED;
    if (e->error_code == 403 && strstr(d, "deactivated"))
        return TG_BCAST_DEACTIVATED;
    if (e->error_code == 403)
        return TG_BCAST_FORBIDDEN;
    if (e->error_code == 400 && strstr(d, "chat not found"))
        return TG_BCAST_NOT_FOUND;
    return TG_BCAST_FAILED;
}

static void free_now(tg_broadcast *b);

/* Completions carry the entry's index in the low bits of user... so pass a small record. */
struct sendrec {
    tg_broadcast *b;
    size_t i;
};

static void completed(tg_broadcast *b, size_t i, const tg_async_result *r)
{
    tg_ctx_stats st;
    tg_ctx_get_stats(r->ctx, &st);
    tg_broadcast_outcome o = classify(r);
    if (o == TG_BCAST_SENT && st.retries > 0)
        b->p.flood_retried++;
    b->in_flight--;
    b->submitted[i] = 0;
    record(b, i, o, r, false);
    maybe_done(b);
    if (b->freed && b->in_flight == 0)
        free_now(b);
}

static void on_sent(tg_async *a, const tg_async_result *r, tg_message *m, void *user)
{
    (void)a;
    (void)m;
    struct sendrec *s = user;
    completed(s->b, s->i, r);
}

static void on_copied(tg_async *a, const tg_async_result *r, tg_message_id *m, void *user)
{
    (void)a;
    (void)m;
    struct sendrec *s = user;
    completed(s->b, s->i, r);
}

/* The send records live in one array beside the chats (index-aligned). */
static struct sendrec *recs_of(tg_broadcast *b)
{
    return (struct sendrec *)(void *)(b->submitted + b->n + (8 - (2 * b->n) % 8) % 8);
}

static bool submit_one(tg_broadcast *b, size_t i)
{
    char line[48];
    int k = snprintf(line, sizeof line, "S %zu\n", i);
    log_line(b, line, (size_t)k);
    b->submitted[i] = 1;
    struct sendrec *s = &recs_of(b)[i];
    s->b = b;
    s->i = i;
    tg_opt_bool paid = {0};
    if (b->o.allow_paid_broadcast)
        paid = (tg_opt_bool)TG_SOME(true);
    uint64_t id;
    if (b->o.copy_message_id) {
        tg_copy_message_params p = {.chat_id = tg_chat_id_int(b->chats[i]),
                                    .from_chat_id = tg_chat_id_int(b->o.copy_from_chat_id),
                                    .message_id = b->o.copy_message_id,
                                    .allow_paid_broadcast = paid};
        if (b->parse_mode)
            p.parse_mode = (tg_parse_mode)TG_ENUM_STR(b->parse_mode);
        id = tg_async_copy_message(b->a, &p, on_copied, s);
    } else {
        tg_send_message_params p = {.chat_id = tg_chat_id_int(b->chats[i]),
                                    .text = b->text,
                                    .allow_paid_broadcast = paid};
        if (b->parse_mode)
            p.parse_mode = (tg_parse_mode)TG_ENUM_STR(b->parse_mode);
        id = tg_async_send_message(b->a, &p, on_sent, s);
    }
    if (id == 0)
        return false; /* the handle is full: try again on the next tick */
    b->in_flight++;
    return true;
}

/* Outcomes known before sending (from the progress file, duplicates) are reported from the
 * first tick, not inside tg_broadcast_new. */
static void report_known(tg_broadcast *b)
{
    b->known_reported = true;
    for (size_t i = 0; i < b->n && !b->freed; i++) {
        if (b->submitted[i] != 2)
            continue;
        tg_broadcast_outcome o = (tg_broadcast_outcome)b->state[i];
        b->submitted[i] = 0;
        b->state[i] = TG_BCAST_PENDING;
        record(b, i, o, NULL, o != TG_BCAST_DUPLICATE);
    }
}

static void on_pace(tg__timer *t, uint64_t now)
{
    tg_broadcast *b = t->user;
    if (!b->known_reported)
        report_known(b);
    if (b->stopped)
        return;
    if (b->in_flight < b->max_in_flight) {
        while (b->next < b->n && (b->state[b->next] != TG_BCAST_PENDING || b->submitted[b->next]))
            b->next++;
        if (b->next < b->n && submit_one(b, b->next))
            b->next++;
    }
    if (b->next >= b->n) {
        maybe_done(b);
        return; /* nothing left to submit: completions finish it */
    }
    /* evenly spaced: one interval after this slot, or after now when the loop was late (a
     * stall never turns into a burst to catch up) */
    b->next_ns = (b->next_ns > now ? b->next_ns : now) + b->interval_ns;
    tg__timer_add(&b->a->timers, &b->pace, b->next_ns);
}

/* One decimal index < n at p[0..len), or -1. */
static long long index_of(const char *p, size_t len, size_t n)
{
    int64_t v;
    if (len == 0 || len > 19 || tg__parse_i64(p, len, &v) != 0 || v < 0 || (uint64_t)v >= n)
        return -1;
    return v;
}

int tg__bcast_progress_parse(const char *text, size_t len, const char *header, size_t n,
                             uint8_t *state, bool *started)
{
    size_t hl = strlen(header);
    if (len < hl || memcmp(text, header, hl) != 0)
        return -1;
    for (size_t pos = hl; pos < len;) {
        const char *line = text + pos, *eol = memchr(line, '\n', len - pos);
        size_t ll = eol ? (size_t)(eol - line) : len - pos;
        pos += ll + (eol != NULL);
        if (!eol || ll < 3 || line[1] != ' ')
            continue; /* a torn last line (the process died mid-write) or garbage */
        const char *rest = line + 2;
        size_t rl = ll - 2;
        if (line[0] == 'S') {
            long long i = index_of(rest, rl, n);
            if (i >= 0)
                started[i] = true;
        } else if (line[0] == 'D') {
            const char *sp = memchr(rest, ' ', rl);
            if (!sp)
                continue;
            long long i = index_of(rest, (size_t)(sp - rest), n);
            long long o = index_of(sp + 1, rl - (size_t)(sp + 1 - rest), TG_BCAST_NOUTCOMES);
            if (i >= 0 && o > 0 && state[i] == TG_BCAST_PENDING)
                state[i] = (uint8_t)o;
        }
    }
    return 0;
}

#define PROGRESS_MAX ((size_t)1 << 30) /* bytes: a larger progress file is refused */

/* Read an existing progress file into b->state; write the header of a new one. */
static const char *progress_open(tg_broadcast *b, const char *path)
{
    char header[96];
    int hl = snprintf(header, sizeof header, "%s %zu %016llx\n", HEADER, b->n,
                      (unsigned long long)list_hash(b->chats, b->n));
    FILE *f = fopen(path, "r");
    if (f) {
        tg__buf text;
        tg__buf_init(&text, PROGRESS_MAX);
        char chunk[4096];
        size_t got;
        int rc = 0;
        while (rc == 0 && (got = fread(chunk, 1, sizeof chunk, f)) > 0)
            rc = tg__buf_append(&text, chunk, got);
        bool err = ferror(f) != 0;
        fclose(f);
        bool *started = tg__calloc(b->n ? b->n : 1, sizeof *started);
        const char *why = NULL;
        if (rc != 0 || err || !started)
            why = rc == -E2BIG ? "the progress file is too large" : "cannot read the progress file";
        else if (tg__bcast_progress_parse(text.data ? text.data : "", text.len, header, b->n,
                                          b->state, started) != 0)
            why = "the progress file belongs to another chat list (or is not one)";
        tg__buf_cleanup(&text);
        if (!why && (b->fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC)) < 0)
            why = "cannot append to the progress file";
        for (size_t i = 0; !why && i < b->n; i++) {
            if (b->state[i] == TG_BCAST_PENDING && started[i]) {
                char l[48];
                int k = snprintf(l, sizeof l, "D %zu %d\n", i, (int)TG_BCAST_UNCERTAIN);
                log_line(b, l, (size_t)k);
                b->state[i] = TG_BCAST_UNCERTAIN;
            }
        }
        tg__free(started);
        return why;
    }
    b->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
    if (b->fd < 0)
        return "cannot create the progress file";
    log_line(b, header, (size_t)hl);
    return NULL;
}

static void free_now(tg_broadcast *b)
{
    tg__timer_cancel(&b->a->timers, &b->pace);
    if (b->fd >= 0)
        close(b->fd);
    tg__free(b->chats);
    tg__free(b->text);
    tg__free(b->parse_mode);
    tg__free(b);
}

static int cmp_idx(const void *x, const void *y, void *chats);

TG_API tg_broadcast *tg_broadcast_new(tg_async *a, const int64_t *chat_ids, size_t n,
                                      const tg_broadcast_options *opts)
{
    errbuf[0] = '\0';
    if (!a || !opts || (n && !chat_ids))
        return fail("no async handle, options or chat list", NULL);
    if (!opts->text && !opts->copy_message_id)
        return fail("give text, or copy_from_chat_id and copy_message_id", NULL);
    tg_broadcast *b = tg__calloc(1, sizeof *b);
    if (!b)
        return fail("out of memory", NULL);
    b->a = a;
    b->o = *opts;
    b->fd = -1;
    b->n = n;
    /* one block: chats, state, submitted, padding, send records */
    size_t pad = (8 - (2 * n) % 8) % 8;
    size_t bytes = n * sizeof *b->chats + 2 * n + pad + n * sizeof(struct sendrec);
    b->chats = tg__malloc(bytes ? bytes : 1);
    b->text = opts->text ? tg__strdup(opts->text) : NULL;
    b->parse_mode = opts->parse_mode ? tg__strdup(opts->parse_mode) : NULL;
    if (!b->chats || (opts->text && !b->text) || (opts->parse_mode && !b->parse_mode)) {
        free_now(b);
        return fail("out of memory", NULL);
    }
    memcpy(b->chats, chat_ids, n * sizeof *b->chats);
    b->state = (uint8_t *)(b->chats + n);
    b->submitted = b->state + n;
    memset(b->state, 0, 2 * n);
    b->p.total = n;
    if (opts->progress_path) {
        const char *why = progress_open(b, opts->progress_path);
        if (why) {
            free_now(b);
            return fail(why, opts->progress_path);
        }
    }
    /* duplicates: every later entry of a chat id reports TG_BCAST_DUPLICATE */
    size_t *idx = tg__malloc((n ? n : 1) * sizeof *idx);
    if (!idx) {
        free_now(b);
        return fail("out of memory", NULL);
    }
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    qsort_r(idx, n, sizeof *idx, cmp_idx, b->chats);
    for (size_t k = 1; k < n; k++)
        if (b->chats[idx[k]] == b->chats[idx[k - 1]] && b->state[idx[k]] == TG_BCAST_PENDING)
            b->state[idx[k]] = TG_BCAST_DUPLICATE;
    tg__free(idx);
    /* outcomes known already (file, duplicates) are reported first, from the loop's first
     * tick; here only counted */
    double rate = opts->rate_per_sec > 0 ? opts->rate_per_sec
                  : opts->allow_paid_broadcast ? DEFAULT_PAID_RATE
                                               : DEFAULT_RATE;
    b->interval_ns = (uint64_t)(1e9 / rate);
    b->max_in_flight = opts->max_in_flight ? opts->max_in_flight : DEFAULT_INFLIGHT;
    tg__timer_init(&b->pace, on_pace, b);
    for (size_t i = 0; i < n; i++)
        if (b->state[i] != TG_BCAST_PENDING)
            b->submitted[i] = 2; /* known: reported from the first tick */
    b->p.finished = n == 0;
    b->next_ns = tg__timers_now(&a->timers);
    tg__timer_add(&a->timers, &b->pace, b->next_ns);
    tg__async_sync_timer(a); /* a foreign loop learns of the first tick */
    return b;
}

static int cmp_idx(const void *x, const void *y, void *chats)
{
    const int64_t *c = chats;
    int64_t a = c[*(const size_t *)x], b = c[*(const size_t *)y];
    if (a != b)
        return a < b ? -1 : 1;
    return *(const size_t *)x < *(const size_t *)y ? -1 : 1; /* the first entry stays first */
}

TG_API const tg_broadcast_progress *tg_broadcast_get_progress(const tg_broadcast *b)
{
    return b ? &b->p : NULL;
}

TG_API void tg_broadcast_stop(tg_broadcast *b)
{
    if (!b || b->stopped)
        return;
    b->stopped = true;
    tg__timer_cancel(&b->a->timers, &b->pace);
    maybe_done(b);
}

TG_API void tg_broadcast_free(tg_broadcast *b)
{
    if (!b)
        return;
    tg_broadcast_stop(b);
    if (b->in_flight > 0) {
        b->freed = true; /* the last completion frees it */
        return;
    }
    free_now(b);
}
