/*
 * tgbot/jobs.h: scheduled jobs. Run a handler once (after a delay or at a time), every N
 * milliseconds, or daily at a local time in an IANA time zone; for one chat or for the
 * whole bot; list and cancel them. Jobs run on the dispatcher's workers with a tg_hctx like
 * an update's (its ctx for API calls, tg_send to the job's chat, chat data), and they are
 * kept in the dispatcher's storage, so with SQLite or Redis they survive a restart.
 *
 *   static tg_status remind(tg_hctx *h, void *user)
 *   {
 *       return tg_send(h, tg_hctx_job(h)->data);           the job's chat, its text
 *   }
 *   tg_jobs *q = tg_jobs_new(d, NULL);
 *   tg_jobs_register(q, "remind", remind, NULL);
 *   tg_jobs_start(q);                                       loads the stored jobs
 *   tg_jobs_add(q, NULL, 0, &(tg_job_spec){.name = "remind", .has_chat = true,
 *                                          .chat_id = chat, .delay_ms = 10 * 60000,
 *                                          .data = "Tea!"});
 *   tg_jobs_add(q, NULL, 0, &(tg_job_spec){.name = "digest", .daily_at = "08:30",
 *                                          .tz = "Europe/Berlin"});
 *   ...
 *   tg_jobs_free(q);                                        before tg_dispatcher_free(d)
 *
 * Handlers are found by name because a stored job must find its code again after a
 * restart: register every name before tg_jobs_start.
 *
 * Timing. A job is due at a wall-clock instant (milliseconds since the Unix epoch). The
 * queue's thread wakes when the next job is due (and at least once a second, so a changed
 * system clock is noticed) and hands due jobs to the workers. A per-chat job runs in its
 * chat's lane, in order with the chat's updates; other jobs run in a lane of their own, so
 * two runs of one job never overlap. "Daily at HH:MM" follows the zone's rules from the
 * system's tz database (TZif files under /usr/share/zoneinfo, or $TZDIR), read by libtgbot
 * itself, so no thread's TZ is touched: on the day clocks go forward, a time inside the gap
 * runs as far past the gap's start (02:30 in a 02:00->03:00 gap runs at 03:30); on the day
 * they go back, a time that happens twice runs once, the first time.
 *
 * Missed runs. A job can come due while the bot is down (or busy). TG_JOB_MISSED_RUN_ONCE
 * (the default) runs it once, as soon as possible, however many runs were missed; the
 * schedule then goes on at its regular times. TG_JOB_MISSED_SKIP drops a run that is more
 * than a minute late (a once-job is then deleted) and waits for the next regular time.
 *
 * Delivery. A run is at least once: a job's stored record moves on (or, for a once-job, is
 * deleted) only after its handler returned, so a crash during a run runs it again after the
 * restart. Every run of the job's handler is one run, whatever it returns; an error is logged.
 *
 * Processes. One queue per storage and prefix: two processes running queues over the same
 * records would both run every job.
 *
 * Time for tests. With clock_ms set, the queue has no thread and never sleeps: the test
 * moves its clock and calls tg_jobs_run_due, on the thread that called tg_jobs_start.
 *
 * Thread-safety: tg_jobs_add, _cancel, _list and tg_hctx_job may be called from any thread
 * (handlers included); _register before _start; _new, _start, _run_due and _free from one
 * controlling thread.
 *
 * On an event loop: over a dispatcher in loop mode (tg_dispatcher_options.async) the queue
 * starts no thread; a timer on the async handle (the same core timer heap) fires due jobs
 * on the loop thread, in their chats' lanes. The controlling thread is then the loop
 * thread; tg_jobs_add from a handler re-arms the timer at once, from another thread it is
 * noticed within a second. A run counts as done when its handler returns (the calls it
 * queued complete afterwards), and in a continuation (tg_hctx_call_then) tg_hctx_job is
 * NULL. Free the queue before the dispatcher.
 */
#ifndef TGBOT_JOBS_H
#define TGBOT_JOBS_H

#include "tgbot/common.h"
#include "tgbot/dispatch.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_jobs tg_jobs;

typedef enum tg_job_missed {
    TG_JOB_MISSED_RUN_ONCE = 0, /* missed runs become one run, as soon as possible */
    TG_JOB_MISSED_SKIP = 1,     /* a run more than a minute late is dropped */
} tg_job_missed;

typedef enum tg_job_kind { TG_JOB_ONCE = 1, TG_JOB_REPEAT = 2, TG_JOB_DAILY = 3 } tg_job_kind;

/*
 * What to run when. Exactly one of: nothing (once: after delay_ms, or at at_ms when set),
 * every_ms (repeat: first after delay_ms, or at at_ms, else after every_ms), daily_at
 * (daily at that local time of tz). Strings are copied.
 */
typedef struct tg_job_spec {
    const char *name; /* a handler registered with tg_jobs_register; required */
    const char *id;   /* 1..64 of [A-Za-z0-9_.:-]; NULL = generated. An id in use: replaced */
    bool has_chat;    /* a per-chat job: runs in chat_id's lane; tg_send goes there */
    int64_t chat_id;
    const char *data;     /* text the handler reads (tg_hctx_job(h)->data); NULL = "" */
    uint64_t delay_ms;    /* from now */
    uint64_t at_ms;       /* wall clock, ms since the Unix epoch; 0 = not set */
    uint64_t every_ms;    /* repeat interval; at least 1000 */
    const char *daily_at; /* "HH:MM" or "HH:MM:SS", 24-hour local time */
    const char *tz;       /* IANA zone of daily_at ("Europe/Berlin"); NULL = "UTC" */
    tg_job_missed missed;
} tg_job_spec;

/* A job as the handler (tg_hctx_job) and tg_jobs_list see it; strings live as long as the
 * handler or the list callback runs. */
typedef struct tg_job_info {
    const char *id;
    const char *name;
    tg_job_kind kind;
    bool has_chat;
    int64_t chat_id;
    const char *data;
    uint64_t due_ms;           /* the run's due time (list: the next run) */
    uint64_t every_ms;         /* repeat jobs */
    const char *daily_at, *tz; /* daily jobs, else NULL */
} tg_job_info;

typedef struct tg_jobs_options {
    const char *prefix; /* storage key prefix; NULL = "job:" */
    /* Virtual time for tests: wall-clock ms since the epoch. Set: no thread, see above. */
    uint64_t (*clock_ms)(void *clock_user);
    void *clock_user;
    const char *tzdir; /* where TZif files are; NULL = $TZDIR, else /usr/share/zoneinfo */
} tg_jobs_options;

/* A queue whose jobs run on d's workers and are kept in d's storage. NULL on failure
 * (tg_jobs_errmsg() says why): e.g. a storage without scan. d must outlive it. */
TG_API tg_jobs *tg_jobs_new_sized(tg_dispatcher *d, const tg_jobs_options *opts, size_t opts_size);
#define tg_jobs_new(d, ...) tg_jobs_new_sized((d), (__VA_ARGS__), sizeof(tg_jobs_options))
/* A job handler: h is like an update's (no update: tg_hctx_update is NULL, the event's kind
 * is TG_UPDATE_UNKNOWN with kind_name "job"). */
TG_API tg_status tg_jobs_register(tg_jobs *q, const char *name, tg_handler_fn fn, void *user);
/* Load the stored jobs (a stored job whose name is not registered is kept and logged, not
 * run) and start the thread. TG_ERR_INVALID when called twice. */
TG_API tg_status tg_jobs_start(tg_jobs *q);
/* Add (or replace, by id) a job and store it before returning. id_out (cap bytes, 65 is
 * enough; may be NULL) gets its id. TG_ERR_INVALID for a bad spec (errmsg says which
 * field), TG_ERR_IO/TIMEOUT/... when the storage fails. */
TG_API tg_status tg_jobs_add_sized(tg_jobs *q, char *id_out, size_t cap, const tg_job_spec *spec,
                                   size_t spec_size);
#define tg_jobs_add(q, id_out, cap, ...)                                                           \
    tg_jobs_add_sized((q), (id_out), (cap), (__VA_ARGS__), sizeof(tg_job_spec))
/* Cancel job id (a run already started finishes). *found (optional) says whether it
 * existed. */
TG_API tg_status tg_jobs_cancel(tg_jobs *q, const char *id, bool *found);
/* Call fn for every job (of chat_id when has_chat; else all), in no particular order; fn
 * must not call the queue. Returns how many were listed. */
typedef void (*tg_jobs_list_fn)(void *user, const tg_job_info *job);
TG_API size_t tg_jobs_list(tg_jobs *q, bool has_chat, int64_t chat_id, tg_jobs_list_fn fn,
                           void *user);
/* Jobs known to the queue. */
TG_API size_t tg_jobs_count(tg_jobs *q);
/* The job this handler runs for; NULL in an update's handler. */
TG_API const tg_job_info *tg_hctx_job(const tg_hctx *h);
/* With clock_ms: hand every job due at the clock's now to the workers; returns how many.
 * Wait for them with tg_dispatcher_wait_idle. 0 without clock_ms. */
TG_API size_t tg_jobs_run_due(tg_jobs *q);
/* Stop the thread and wait for runs in progress. Stored jobs stay stored. NULL-safe. */
TG_API void tg_jobs_free(tg_jobs *q);
/* Why the last tg_jobs_* call on this thread failed (thread-local; "" after success). */
TG_API const char *tg_jobs_errmsg(void);

#ifdef __cplusplus
}
#endif

#endif
