/*
 * jobs: the scheduled-job queue (tgbot/jobs.h) on the shared timer heap (core/timer.h).
 *
 * Threads and ownership. The heap belongs to one thread, the owner: the queue's own thread,
 * or, with a virtual clock, the thread that called tg_jobs_start (it drives the queue with
 * tg_jobs_run_due). Other threads never touch the heap: they change a job under q->mu and
 * put it on the pending list; the owner applies pending jobs to the heap (arm, move,
 * remove) before it looks for due ones. Everything else about a job (the map, its state,
 * its storage record) is guarded by q->mu, which the owner also holds while it runs the
 * heap's callbacks. Due jobs are collected there and handed to the dispatcher's workers
 * after q->mu is released, so a full worker queue never blocks an API call.
 *
 * A job's life: live (in the map) -> dead (cancelled, replaced, or a once-job that ran),
 * out of the map at once so its id can be reused; its memory is freed when it is dead, off
 * the heap, not pending and not running.
 *
 * Storage: one record per job under <prefix><id>, a typed-fields blob (fields.h) with the
 * spec and the next due time. It is written when a job is added, moved on after each run
 * finished (at least once: a crash during a run runs it again), deleted on cancel and after
 * a once-job's run. Heap deadlines are the clock's wall-clock ms in nanoseconds.
 */
#include <errno.h>
#include <inttypes.h>
#include <openssl/rand.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "bot/dispatch/dispatch_int.h"
#include "bot/dispatch/fields.h"
#include "bot/dispatch/tz.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "core/sized.h"
#include "core/str.h"
#include "core/timer.h"
#include "tgbot/jobs.h"

#define LATE_MS      60000 /* TG_JOB_MISSED_SKIP drops runs later than this */
#define MIN_EVERY_MS 1000
#define WAKE_MS      1000 /* the thread looks at the clock at least this often */
#define RECORD_MAX   8192

struct reg {
    char *name;
    tg_handler_fn fn;
    void *user;
};

struct zone {
    struct zone *next;
    tg__tz tz;
};

struct job {
    tg__timer timer; /* owner thread only */
    struct tg_jobs *q;
    struct job *hnext, *pnext;
    char id[TG__CONV_STATE_MAX + 1];
    const struct reg *reg;
    char *name, *data, *daily;
    const tg__tz *tz; /* daily jobs; owned by q->zones */
    tg_job_kind kind;
    tg_job_missed missed;
    bool has_chat;
    int64_t chat_id;
    uint64_t due_ms, every_ms;
    int32_t daily_secs;
    bool dead, in_heap, pending;
    int running;
};

/* One run handed to a worker. */
struct run {
    struct tg_jobs *q;
    struct job *j;
    tg_job_info info;
};

struct tg_jobs {
    tg_dispatcher *d;
    tg_storage *storage;
    char *prefix;
    char *tzdir;
    uint64_t (*clock_ms)(void *);
    void *clock_user;
    struct reg *regs;
    size_t nregs;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* the owner thread's wake-up; runs finishing (free waits) */
    tg__timers heap;   /* owner only */
    struct job **map;  /* by id */
    size_t nmap, count;
    struct job *pending; /* jobs whose heap entry must change */
    struct zone *zones;
    struct run **batch; /* owner only: due runs collected by the heap callbacks */
    size_t nbatch, batch_cap;
    int inflight;
    bool started, stop, threaded;
    bool on_loop; /* the dispatcher is in loop mode: its loop drives the heap */
    pthread_t th;
};

static _Thread_local char jerr[256];

static tg_status fail(tg_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static tg_status fail(tg_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(jerr, sizeof jerr, fmt, ap);
    va_end(ap);
    return st;
}

const char *tg_jobs_errmsg(void)
{
    return jerr;
}

static uint64_t now_ms(const struct tg_jobs *q)
{
    return q->clock_ms ? q->clock_ms(q->clock_user) : tg__wall_ms();
}

static uint64_t heap_clock(void *user)
{
    return now_ms(user) * 1000000u;
}

static void logw(struct tg_jobs *q, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void logw(struct tg_jobs *q, const char *fmt, ...)
{
    char line[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    tg__dispatcher_log(q->d, TG__LOG_WARN, "jobs: %s", line);
}

/* ---- the id map ---- */

static uint64_t hash_id(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static struct job **map_slot(struct tg_jobs *q, const char *id)
{
    struct job **pp = &q->map[hash_id(id) & (q->nmap - 1)];
    while (*pp && strcmp((*pp)->id, id) != 0)
        pp = &(*pp)->hnext;
    return pp;
}

static void map_grow(struct tg_jobs *q)
{
    size_t n = q->nmap * 2;
    struct job **nm = tg__calloc(n, sizeof *nm);
    if (!nm)
        return; /* longer chains; still correct */
    for (size_t i = 0; i < q->nmap; i++)
        for (struct job *j = q->map[i], *next; j; j = next) {
            next = j->hnext;
            struct job **b = &nm[hash_id(j->id) & (n - 1)];
            j->hnext = *b;
            *b = j;
        }
    tg__free(q->map);
    q->map = nm;
    q->nmap = n;
}

static void map_put(struct tg_jobs *q, struct job *j)
{
    if (q->count >= q->nmap)
        map_grow(q);
    struct job **b = &q->map[hash_id(j->id) & (q->nmap - 1)];
    j->hnext = *b;
    *b = j;
    q->count++;
}

static void job_free(struct job *j)
{
    tg__free(j->name);
    tg__free(j->data);
    tg__free(j->daily);
    tg__free(j);
}

static void maybe_free(struct job *j)
{
    if (j->dead && !j->in_heap && !j->pending && j->running == 0)
        job_free(j);
}

static void push_pending(struct tg_jobs *q, struct job *j)
{
    if (!j->pending) {
        j->pending = true;
        j->pnext = q->pending;
        q->pending = j;
    }
    pthread_cond_broadcast(&q->cv);
    if (q->on_loop) /* loop mode: the loop's jobs timer looks again now */
        tg__loop_jobs_wake(q->d->loop);
}

/* Take j out of the map (it stays alive until maybe_free). */
static void kill_job(struct tg_jobs *q, struct job *j)
{
    struct job **pp = map_slot(q, j->id);
    if (*pp == j) {
        *pp = j->hnext;
        q->count--;
    }
    j->dead = true;
    push_pending(q, j);
}

/* ---- schedules ---- */

static const struct reg *find_reg(const struct tg_jobs *q, const char *name)
{
    for (size_t i = 0; i < q->nregs; i++)
        if (strcmp(q->regs[i].name, name) == 0)
            return &q->regs[i];
    return NULL;
}

/* A loaded zone (cached for the queue's life); NULL with jerr set. */
static const tg__tz *zone(struct tg_jobs *q, const char *name)
{
    for (struct zone *z = q->zones; z; z = z->next)
        if (strcmp(z->tz.name, name) == 0)
            return &z->tz;
    struct zone *z = tg__calloc(1, sizeof *z);
    if (!z) {
        fail(TG_ERR_NOMEM, "jobs: out of memory");
        return NULL;
    }
    char err[256];
    if (tg__tz_load(&z->tz, name, q->tzdir, err, sizeof err) != 0) {
        fail(TG_ERR_INVALID, "jobs: %s", err);
        tg__free(z);
        return NULL;
    }
    z->next = q->zones;
    q->zones = z;
    return &z->tz;
}

/* "HH:MM" or "HH:MM:SS" -> seconds after midnight; -1 when malformed. */
static int32_t parse_daily(const char *s)
{
    unsigned h, m, sec = 0;
    char tail;
    int n = sscanf(s, "%2u:%2u:%2u%c", &h, &m, &sec, &tail);
    if (!(n == 2 || n == 3) || h > 23 || m > 59 || sec > 59)
        return -1;
    size_t len = strlen(s);
    if (!(len == 5 || (n == 3 && len == 8)) || s[2] != ':')
        return -1;
    return (int32_t)(h * 3600 + m * 60 + sec);
}

/* The first daily time of j strictly after after_ms. */
static uint64_t next_daily(const struct job *j, uint64_t after_ms)
{
    int64_t t = (int64_t)(after_ms / 1000);
    int64_t local = t + tg__tz_offset(j->tz, t);
    int64_t day = local / 86400 - (local % 86400 < 0);
    for (int k = -1; k <= 3; k++) {
        int64_t at = tg__tz_from_local(j->tz, (day + k) * 86400 + j->daily_secs);
        if (at >= 0 && (uint64_t)at * 1000 > after_ms)
            return (uint64_t)at * 1000;
    }
    return after_ms + 86400000; /* unreachable for sane zones */
}

/* The next due time of a repeating or daily job after a run due at due_ms, at now. */
static uint64_t next_due(const struct job *j, uint64_t due_ms, uint64_t now)
{
    if (j->kind == TG_JOB_DAILY)
        return next_daily(j, now > due_ms ? now : due_ms);
    uint64_t next = due_ms + j->every_ms;
    if (next <= now) /* missed runs coalesce; the phase stays */
        next = due_ms + j->every_ms * ((now - due_ms) / j->every_ms + 1);
    return next;
}

/* ---- records ---- */

struct rec_field {
    char type;
    const char *name;
    char buf[24];
    const char *value;
};

static void rec_int(struct rec_field *f, const char *name, int64_t v)
{
    f->type = 'i';
    f->name = name;
    snprintf(f->buf, sizeof f->buf, "%" PRId64, v);
    f->value = f->buf;
}

static void rec_str(struct rec_field *f, const char *name, const char *v)
{
    f->type = 's';
    f->name = name;
    f->value = v;
}

static tg_status store_job(struct tg_jobs *q, const struct job *j)
{
    struct rec_field f[10];
    size_t n = 0, total = TG__FIELDS_MAGIC_LEN;
    rec_str(&f[n++], "name", j->name);
    rec_int(&f[n++], "kind", j->kind);
    rec_int(&f[n++], "due", (int64_t)j->due_ms);
    rec_int(&f[n++], "missed", j->missed);
    rec_str(&f[n++], "data", j->data);
    if (j->has_chat)
        rec_int(&f[n++], "chat", j->chat_id);
    if (j->kind == TG_JOB_REPEAT)
        rec_int(&f[n++], "every", (int64_t)j->every_ms);
    if (j->kind == TG_JOB_DAILY) {
        rec_str(&f[n++], "daily", j->daily);
        rec_str(&f[n++], "tz", j->tz->name);
    }
    for (size_t i = 0; i < n; i++)
        total += tg__field_size(strlen(f[i].name), strlen(f[i].value));
    if (total > RECORD_MAX)
        return fail(TG_ERR_TOO_BIG, "jobs: job %s: %zu bytes of record, at most %d", j->id, total,
                    RECORD_MAX);
    unsigned char *buf = tg__malloc(total);
    if (!buf)
        return fail(TG_ERR_NOMEM, "jobs: out of memory");
    memcpy(buf, TG__FIELDS_MAGIC, TG__FIELDS_MAGIC_LEN);
    size_t o = TG__FIELDS_MAGIC_LEN;
    for (size_t i = 0; i < n; i++) {
        size_t vl = strlen(f[i].value);
        tg__field_write(buf + o, f[i].type, f[i].name, f[i].value, vl);
        o += tg__field_size(strlen(f[i].name), vl);
    }
    char key[160];
    snprintf(key, sizeof key, "%s%s", q->prefix, j->id);
    tg_status st = tg_storage_set(q->storage, key, buf, o, 0);
    tg__free(buf);
    if (st != TG_OK)
        return fail(st, "jobs: job %s: storage set failed: %s", j->id,
                    tg_storage_errmsg()[0] ? tg_storage_errmsg() : tg_strerror(st));
    return TG_OK;
}

static void unstore_job(struct tg_jobs *q, const struct job *j)
{
    char key[160];
    snprintf(key, sizeof key, "%s%s", q->prefix, j->id);
    tg_status st = tg_storage_del(q->storage, key);
    if (st != TG_OK)
        logw(q, "job %s: storage delete failed: %s", j->id, tg_storage_errmsg());
}

/* ---- building a job ---- */

static void on_due(tg__timer *t, uint64_t now_ns);

static tg_status random_id(char *out)
{
    unsigned char r[8];
    if (RAND_bytes(r, sizeof r) != 1)
        return fail(TG_ERR_IO, "jobs: no random bytes for an id");
    tg__hex_encode(out, r, sizeof r);
    return TG_OK;
}

/* A job from a spec (due time set from now); NULL with jerr set. Called with q->mu held. */
static struct job *job_from_spec(struct tg_jobs *q, const tg_job_spec *sp, uint64_t now)
{
    const struct reg *reg = sp->name ? find_reg(q, sp->name) : NULL;
    if (!reg) {
        fail(TG_ERR_INVALID, "jobs: no handler registered as \"%.64s\" (tg_jobs_register)",
             sp->name ? sp->name : "(null)");
        return NULL;
    }
    if (sp->id && !tg__conv_name_valid(sp->id)) {
        fail(TG_ERR_INVALID, "jobs: id \"%.64s\" is not 1..64 of [A-Za-z0-9_.:-]", sp->id);
        return NULL;
    }
    if (sp->daily_at && sp->every_ms) {
        fail(TG_ERR_INVALID, "jobs: a job is daily_at or every_ms, not both");
        return NULL;
    }
    if (sp->every_ms && sp->every_ms < MIN_EVERY_MS) {
        fail(TG_ERR_INVALID, "jobs: every_ms %" PRIu64 " is below %d", sp->every_ms, MIN_EVERY_MS);
        return NULL;
    }
    if (sp->missed != TG_JOB_MISSED_RUN_ONCE && sp->missed != TG_JOB_MISSED_SKIP) {
        fail(TG_ERR_INVALID, "jobs: missed %d is not a tg_job_missed", (int)sp->missed);
        return NULL;
    }
    struct job *j = tg__calloc(1, sizeof *j);
    if (!j || !(j->name = tg__strdup(sp->name)) ||
        !(j->data = tg__strdup(sp->data ? sp->data : ""))) {
        if (j)
            job_free(j);
        fail(TG_ERR_NOMEM, "jobs: out of memory");
        return NULL;
    }
    j->q = q;
    tg__timer_init(&j->timer, on_due, j);
    j->reg = reg;
    j->has_chat = sp->has_chat;
    j->chat_id = sp->chat_id;
    j->missed = sp->missed;
    if (sp->id)
        snprintf(j->id, sizeof j->id, "%s", sp->id);
    else if (random_id(j->id) != TG_OK) {
        job_free(j);
        return NULL;
    }
    if (sp->daily_at) {
        j->kind = TG_JOB_DAILY;
        j->daily_secs = parse_daily(sp->daily_at);
        if (j->daily_secs < 0) {
            fail(TG_ERR_INVALID, "jobs: daily_at \"%.16s\" is not HH:MM or HH:MM:SS", sp->daily_at);
            job_free(j);
            return NULL;
        }
        if (!(j->daily = tg__strdup(sp->daily_at)) || !(j->tz = zone(q, sp->tz ? sp->tz : "UTC"))) {
            if (!j->daily)
                fail(TG_ERR_NOMEM, "jobs: out of memory");
            job_free(j);
            return NULL;
        }
        j->due_ms = sp->at_ms ? sp->at_ms : next_daily(j, now + sp->delay_ms);
    } else if (sp->every_ms) {
        j->kind = TG_JOB_REPEAT;
        j->every_ms = sp->every_ms;
        j->due_ms = sp->at_ms ? sp->at_ms : now + (sp->delay_ms ? sp->delay_ms : sp->every_ms);
    } else {
        j->kind = TG_JOB_ONCE;
        j->due_ms = sp->at_ms ? sp->at_ms : now + sp->delay_ms;
    }
    return j;
}

/* Insert j (replacing a live job with its id) and arm it. Called with q->mu held. */
static void install(struct tg_jobs *q, struct job *j)
{
    struct job **slot = map_slot(q, j->id);
    if (*slot)
        kill_job(q, *slot);
    map_put(q, j);
    push_pending(q, j);
}

/* ---- running ---- */

static void run_on_worker(struct tg_hctx *h, void *arg)
{
    struct run *r = arg;
    const struct job *j = r->j;
    h->ev.kind = TG_UPDATE_UNKNOWN;
    h->ev.kind_name = "job";
    h->ev.has_chat = j->has_chat;
    h->ev.chat_id = j->chat_id;
    h->update_tried = true; /* no update to decode */
    h->job = &r->info;
    tg_status st = j->reg->fn(h, j->reg->user);
    if (st != TG_OK)
        logw(r->q, "job %s (%s): %s", j->id, j->name, h->err[0] ? h->err : tg_strerror(st));
    if (tg__session_flush(h) != TG_OK)
        logw(r->q, "job %s (%s): %s", j->id, j->name, h->err);
}

/* The run finished (ran) or was dropped: move the stored record on. */
static void run_done(void *arg, bool ran)
{
    struct run *r = arg;
    struct tg_jobs *q = r->q;
    struct job *j = r->j;
    pthread_mutex_lock(&q->mu);
    j->running--;
    if (ran && !j->dead) {
        if (j->kind == TG_JOB_ONCE) {
            kill_job(q, j);
            unstore_job(q, j);
        } else if (store_job(q, j) != TG_OK) {
            logw(q, "%s", jerr);
        }
    }
    maybe_free(j);
    q->inflight--;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    tg__free(r);
}

static void collect(struct tg_jobs *q, struct job *j, uint64_t due)
{
    struct run *r = tg__calloc(1, sizeof *r);
    if (q->nbatch == q->batch_cap) {
        size_t cap = q->batch_cap ? q->batch_cap * 2 : 16;
        struct run **nb = tg__realloc(q->batch, cap * sizeof *nb);
        if (nb) {
            q->batch = nb;
            q->batch_cap = cap;
        }
    }
    if (!r || q->nbatch == q->batch_cap) {
        tg__free(r);
        logw(q, "job %s: out of memory; this run is skipped", j->id);
        return;
    }
    r->q = q;
    r->j = j;
    r->info = (tg_job_info){.id = j->id,
                            .name = j->name,
                            .kind = j->kind,
                            .has_chat = j->has_chat,
                            .chat_id = j->chat_id,
                            .data = j->data,
                            .due_ms = due,
                            .every_ms = j->every_ms,
                            .daily_at = j->daily,
                            .tz = j->tz ? j->tz->name : NULL};
    j->running++;
    q->inflight++;
    q->batch[q->nbatch++] = r;
}

/* Heap callback (owner thread, q->mu held): j is due. Repeating jobs are armed for their
 * next time at once; the run itself is collected for the workers. */
static void on_due(tg__timer *t, uint64_t now_ns)
{
    struct job *j = t->user;
    struct tg_jobs *q = j->q;
    j->in_heap = false;
    if (j->dead) {
        maybe_free(j);
        return;
    }
    uint64_t now = now_ns / 1000000u, due = j->due_ms;
    bool skip = j->missed == TG_JOB_MISSED_SKIP && now > due + LATE_MS;
    if (j->kind == TG_JOB_ONCE) {
        if (!skip) {
            collect(q, j, due);
            return;
        }
        logw(q, "job %s (%s): %" PRIu64 " ms late, skipped (TG_JOB_MISSED_SKIP)", j->id, j->name,
             now - due);
        kill_job(q, j);
        unstore_job(q, j);
        return;
    }
    j->due_ms = next_due(j, due, now);
    tg__timer_add(&q->heap, &j->timer, j->due_ms * 1000000u);
    j->in_heap = true;
    if (!skip) {
        collect(q, j, due);
        return;
    }
    logw(q, "job %s (%s): %" PRIu64 " ms late, skipped to the next time (TG_JOB_MISSED_SKIP)",
         j->id, j->name, now - due);
    if (store_job(q, j) != TG_OK)
        logw(q, "%s", jerr);
}

/* ---- the owner ---- */

static void apply_pending(struct tg_jobs *q)
{
    struct job *j = q->pending;
    q->pending = NULL;
    while (j) {
        struct job *next = j->pnext;
        j->pending = false;
        if (j->dead) {
            tg__timer_cancel(&q->heap, &j->timer);
            j->in_heap = false;
            maybe_free(j);
        } else {
            tg__timer_add(&q->heap, &j->timer, j->due_ms * 1000000u);
            j->in_heap = true;
        }
        j = next;
    }
}

/* Hand the collected runs to the workers (q->mu released). Returns how many. */
static size_t submit_batch(struct tg_jobs *q, struct run **runs, size_t n)
{
    size_t ok = 0;
    for (size_t i = 0; i < n; i++) {
        struct run *r = runs[i];
        const struct job *j = r->j;
        /* A chat's jobs run in its lane; others in a lane of their own (bit 62: no chat id
         * comes near it), so two runs of one job never overlap. */
        int64_t key =
            j->has_chat
                ? j->chat_id
                : (int64_t)((hash_id(j->id) & 0x3fffffffffffffffull) | 0x4000000000000000ull);
        int rc = tg__dispatcher_submit_fn(q->d, key, true, run_on_worker, run_done, r, -1);
        if (rc != 0) {
            logw(q, "job %s (%s): not run: the dispatcher is %s", j->id, j->name,
                 rc == -ECANCELED ? "stopping" : "out of memory");
            run_done(r, false);
        } else {
            ok++;
        }
    }
    return ok;
}

/* One pass of the owner: apply pending changes, collect due runs, submit them. Called and
 * returns with q->mu held. */
static size_t owner_pass(struct tg_jobs *q)
{
    apply_pending(q);
    tg__timers_run_due(&q->heap, heap_clock(q));
    if (!q->nbatch)
        return 0;
    size_t n = q->nbatch; /* take the batch; the next collect starts a new one */
    struct run **runs = q->batch;
    q->batch = NULL;
    q->nbatch = q->batch_cap = 0;
    pthread_mutex_unlock(&q->mu);
    size_t ok = submit_batch(q, runs, n);
    tg__free(runs);
    pthread_mutex_lock(&q->mu);
    return ok;
}

static void *owner_thread(void *arg)
{
    struct tg_jobs *q = arg;
    pthread_mutex_lock(&q->mu);
    tg__timers_init(&q->heap, heap_clock, q);
    while (!q->stop) {
        owner_pass(q);
        if (q->stop || q->pending || q->nbatch)
            continue;
        uint64_t next = tg__timers_next_deadline(&q->heap), now = heap_clock(q);
        uint64_t wait_ms =
            next == UINT64_MAX || next <= now ? WAKE_MS : (next - now) / 1000000u + 1;
        if (next != UINT64_MAX && next <= now)
            continue;
        if (wait_ms > WAKE_MS)
            wait_ms = WAKE_MS;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += (time_t)(wait_ms / 1000);
        ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&q->cv, &q->mu, &ts);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* ---- loading stored jobs ---- */

static bool rec_get(const unsigned char *d, size_t len, const char *name, struct tg__field *f)
{
    return tg__fields_find(d, len, name, strlen(name), f);
}

static bool rec_int_get(const unsigned char *d, size_t len, const char *name, int64_t *out)
{
    struct tg__field f;
    return rec_get(d, len, name, &f) && f.type == 'i' &&
           tg__parse_i64(f.value, f.value_len, out) == 0;
}

static const char *rec_str_get(const unsigned char *d, size_t len, const char *name)
{
    struct tg__field f;
    return rec_get(d, len, name, &f) && f.type == 's' ? f.value : NULL;
}

struct load {
    struct tg_jobs *q;
    size_t loaded, kept, bad;
};

/* A stored record back into a spec and a job; keys whose record is unusable are logged. */
static bool load_one(void *user, const char *key, const void *val, size_t len)
{
    struct load *L = user;
    struct tg_jobs *q = L->q;
    const char *id = key + strlen(q->prefix);
    const unsigned char *d = val;
    int64_t kind = 0, due = 0, missed = 0, chat = 0, every = 0;
    const char *name = tg__fields_is(d, len) ? rec_str_get(d, len, "name") : NULL;
    bool has_chat = name && rec_int_get(d, len, "chat", &chat);
    if (!name || !rec_int_get(d, len, "kind", &kind) || !rec_int_get(d, len, "due", &due) ||
        !rec_int_get(d, len, "missed", &missed) || due < 0 || !tg__conv_name_valid(id) ||
        (kind == TG_JOB_REPEAT && !rec_int_get(d, len, "every", &every))) {
        logw(q, "stored job %.80s: the record is damaged; left alone", key);
        L->bad++;
        return true;
    }
    if (*map_slot(q, id))
        return true; /* a key seen twice (Redis SCAN may) */
    if (!find_reg(q, name)) {
        logw(q, "stored job %s: no handler registered as \"%.64s\"; kept, not run", id, name);
        L->kept++;
        return true;
    }
    tg_job_spec sp = {.name = name,
                      .id = id,
                      .has_chat = has_chat,
                      .chat_id = chat,
                      .data = rec_str_get(d, len, "data"),
                      .every_ms = kind == TG_JOB_REPEAT ? (uint64_t)every : 0,
                      .daily_at = kind == TG_JOB_DAILY ? rec_str_get(d, len, "daily") : NULL,
                      .tz = kind == TG_JOB_DAILY ? rec_str_get(d, len, "tz") : NULL,
                      .missed = (tg_job_missed)missed,
                      .at_ms = (uint64_t)due};
    if (kind == TG_JOB_DAILY && !sp.daily_at)
        sp.daily_at = "bad";
    struct job *j = job_from_spec(q, &sp, now_ms(q));
    if (!j) {
        logw(q, "stored job %s: %s; left alone", id, jerr);
        L->bad++;
        return true;
    }
    j->due_ms = (uint64_t)due; /* in the past: the missed-run policy decides at the first pass */
    install(q, j);
    L->loaded++;
    return true;
}

/* ---- the public side ---- */

tg_jobs *tg_jobs_new_sized(tg_dispatcher *d, const tg_jobs_options *opts, size_t opts_size)
{
    tg_jobs_options o;
    jerr[0] = '\0';
    if (!tg__sized_in(&o, sizeof o, opts, opts_size)) {
        fail(TG_ERR_INVALID, "jobs: options: " TG__SIZED_ERRMSG);
        return NULL;
    }
    if (!d) {
        fail(TG_ERR_INVALID, "jobs: the dispatcher is NULL");
        return NULL;
    }
    if (!d->storage->ops->scan) {
        fail(TG_ERR_INVALID, "jobs: the dispatcher's storage cannot list keys (no scan), so "
                             "stored jobs could not be found again");
        return NULL;
    }
    struct tg_jobs *q = tg__calloc(1, sizeof *q);
    if (!q)
        return fail(TG_ERR_NOMEM, "jobs: out of memory"), NULL;
    q->d = d;
    q->storage = d->storage;
    q->clock_ms = o.clock_ms;
    q->clock_user = o.clock_user;
    q->prefix = tg__strdup(o.prefix ? o.prefix : "job:");
    q->tzdir = o.tzdir ? tg__strdup(o.tzdir) : NULL;
    q->nmap = 64;
    q->map = tg__calloc(q->nmap, sizeof *q->map);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (!q->prefix || !q->map || (o.tzdir && !q->tzdir)) {
        tg_jobs_free(q);
        fail(TG_ERR_NOMEM, "jobs: out of memory");
        return NULL;
    }
    return q;
}

tg_status tg_jobs_register(tg_jobs *q, const char *name, tg_handler_fn fn, void *user)
{
    if (!q || !fn || !name || !tg__conv_name_valid(name))
        return fail(TG_ERR_INVALID, "jobs: register: need a name of 1..64 [A-Za-z0-9_.:-] and "
                                    "a handler");
    if (q->started)
        return fail(TG_ERR_INVALID, "jobs: register \"%s\" before tg_jobs_start", name);
    if (find_reg(q, name))
        return fail(TG_ERR_INVALID, "jobs: \"%s\" is registered already", name);
    struct reg *r = tg__realloc(q->regs, (q->nregs + 1) * sizeof *r);
    if (!r)
        return fail(TG_ERR_NOMEM, "jobs: out of memory");
    q->regs = r;
    if (!(r[q->nregs].name = tg__strdup(name)))
        return fail(TG_ERR_NOMEM, "jobs: out of memory");
    r[q->nregs].fn = fn;
    r[q->nregs].user = user;
    q->nregs++;
    return TG_OK;
}

/* Loop mode: one owner pass on the loop thread; the ms until the next job is due. */
static uint64_t loop_pass(struct tg_jobs *q)
{
    pthread_mutex_lock(&q->mu);
    owner_pass(q);
    uint64_t next = tg__timers_next_deadline(&q->heap), now = heap_clock(q);
    bool again = q->pending || q->nbatch;
    pthread_mutex_unlock(&q->mu);
    if (again || (next != UINT64_MAX && next <= now))
        return 0;
    return next == UINT64_MAX ? WAKE_MS : (next - now) / 1000000u + 1;
}

tg_status tg_jobs_start(tg_jobs *q)
{
    if (!q || q->started)
        return fail(TG_ERR_INVALID, "jobs: start: %s", q ? "started already" : "queue is NULL");
    struct load L = {.q = q};
    pthread_mutex_lock(&q->mu);
    q->started = true;
    tg_status st = tg_storage_scan(q->storage, q->prefix, load_one, &L);
    pthread_mutex_unlock(&q->mu);
    if (st != TG_OK)
        return fail(st, "jobs: loading the stored jobs failed: %s", tg_storage_errmsg());
    if (L.loaded || L.kept || L.bad)
        tg__dispatcher_log(q->d, TG__LOG_INFO,
                           "jobs: %zu stored jobs loaded, %zu kept for an "
                           "unregistered handler, %zu damaged",
                           L.loaded, L.kept, L.bad);
    if (q->clock_ms) {
        tg__timers_init(&q->heap, heap_clock, q);
        return TG_OK;
    }
    if (q->d->loop) { /* no thread: the loop's timer runs loop_pass */
        tg__timers_init(&q->heap, heap_clock, q);
        q->on_loop = true;
        tg__loop_set_jobs(q->d->loop, q, loop_pass);
        return TG_OK;
    }
    if (pthread_create(&q->th, NULL, owner_thread, q) != 0)
        return fail(TG_ERR_NOMEM, "jobs: cannot start the queue's thread");
    q->threaded = true;
    return TG_OK;
}

tg_status tg_jobs_add_sized(tg_jobs *q, char *id_out, size_t cap, const tg_job_spec *spec,
                            size_t spec_size)
{
    tg_job_spec sp;
    if (!q || !spec || !tg__sized_in(&sp, sizeof sp, spec, spec_size))
        return fail(TG_ERR_INVALID, "jobs: add: %s", q && spec ? TG__SIZED_ERRMSG : "NULL");
    pthread_mutex_lock(&q->mu);
    struct job *j = job_from_spec(q, &sp, now_ms(q));
    tg_status st = j ? store_job(q, j) : TG_ERR_INVALID;
    if (j && st == TG_OK) {
        install(q, j);
        if (id_out && cap)
            snprintf(id_out, cap, "%s", j->id);
    } else if (j) {
        job_free(j);
    } else {
        st = strstr(jerr, "out of memory") ? TG_ERR_NOMEM : TG_ERR_INVALID;
    }
    pthread_mutex_unlock(&q->mu);
    if (st == TG_OK)
        jerr[0] = '\0';
    return st;
}

tg_status tg_jobs_cancel(tg_jobs *q, const char *id, bool *found)
{
    if (found)
        *found = false;
    if (!q || !id)
        return fail(TG_ERR_INVALID, "jobs: cancel: NULL");
    pthread_mutex_lock(&q->mu);
    struct job *j = *map_slot(q, id);
    if (j) {
        kill_job(q, j);
        unstore_job(q, j);
        if (found)
            *found = true;
    }
    pthread_mutex_unlock(&q->mu);
    return TG_OK;
}

size_t tg_jobs_list(tg_jobs *q, bool has_chat, int64_t chat_id, tg_jobs_list_fn fn, void *user)
{
    size_t n = 0;
    if (!q || !fn)
        return 0;
    pthread_mutex_lock(&q->mu);
    for (size_t i = 0; i < q->nmap; i++)
        for (struct job *j = q->map[i]; j; j = j->hnext) {
            if (has_chat && !(j->has_chat && j->chat_id == chat_id))
                continue;
            tg_job_info info = {.id = j->id,
                                .name = j->name,
                                .kind = j->kind,
                                .has_chat = j->has_chat,
                                .chat_id = j->chat_id,
                                .data = j->data,
                                .due_ms = j->due_ms,
                                .every_ms = j->every_ms,
                                .daily_at = j->daily,
                                .tz = j->tz ? j->tz->name : NULL};
            fn(user, &info);
            n++;
        }
    pthread_mutex_unlock(&q->mu);
    return n;
}

size_t tg_jobs_count(tg_jobs *q)
{
    if (!q)
        return 0;
    pthread_mutex_lock(&q->mu);
    size_t n = q->count;
    pthread_mutex_unlock(&q->mu);
    return n;
}

const tg_job_info *tg_hctx_job(const tg_hctx *h)
{
    return h ? h->job : NULL;
}

size_t tg_jobs_run_due(tg_jobs *q)
{
    if (!q || !q->clock_ms || !q->started)
        return 0;
    pthread_mutex_lock(&q->mu);
    size_t n = owner_pass(q);
    pthread_mutex_unlock(&q->mu);
    return n;
}

void tg_jobs_free(tg_jobs *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->mu);
    q->stop = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    if (q->threaded)
        pthread_join(q->th, NULL);
    if (q->on_loop && q->d->loop) { /* runs still queued on the loop never will run now */
        tg__loop_set_jobs(q->d->loop, NULL, NULL);
        tg__loop_drop_fns(q->d->loop, run_done);
    }
    pthread_mutex_lock(&q->mu);
    while (q->inflight > 0) /* runs handed to the workers finish (or are dropped) */
        pthread_cond_wait(&q->cv, &q->mu);
    pthread_mutex_unlock(&q->mu);
    for (size_t i = 0; q->map && i < q->nmap; i++)
        for (struct job *j = q->map[i], *next; j; j = next) {
            next = j->hnext;
            job_free(j);
        }
    for (struct job *j = q->pending, *next; j; j = next) { /* dead ones still pending */
        next = j->pnext;
        if (j->dead)
            job_free(j);
    }
    for (struct zone *z = q->zones, *next; z; z = next) {
        next = z->next;
        tg__tz_cleanup(&z->tz);
        tg__free(z);
    }
    for (size_t i = 0; i < q->nregs; i++)
        tg__free(q->regs[i].name);
    tg__free(q->regs);
    tg__free(q->batch);
    tg__free(q->map);
    tg__free(q->prefix);
    tg__free(q->tzdir);
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    tg__free(q);
}
