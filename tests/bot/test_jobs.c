/*
 * Scheduled jobs (tgbot/jobs.h) and the time zones under them (src/bot/dispatch/tz.c).
 *
 * Time zones: every offset and local-to-UTC vector of tests/vectors/tz.txt (computed by
 * Python's zoneinfo from the committed TZif files) must match; bad names and damaged files
 * are refused with their reason.
 * Jobs run in virtual time (clock_ms): once, repeating, per chat, cancelled, replaced; daily
 * at 08:30 and at 02:30 Europe/Berlin across both 2026 DST changes; a restart over SQLite
 * after three hours of downtime with both missed-run policies; the real-clock thread.
 */
#include "tgtest.h"

#include <pthread.h>
#include <unistd.h>

#include "bot/dispatch/tz.h"
#include "core/clock.h"
#include "tgbot/dispatch.h"
#include "tgbot/jobs.h"

/* ---- time zones ---- */

static const char *tzdir(void)
{
    static char p[512];
    snprintf(p, sizeof p, "%s", tgtest_data_path("fixtures/tz"));
    return p;
}

static void test_tz_vectors(void **state)
{
    (void)state;
    size_t len;
    char *text = tgtest_read_file(tgtest_data_path("vectors/tz.txt"), &len);
    assert_non_null(text);
    tg__tz z = {0};
    char loaded[64] = "", err[256];
    int offsets = 0, locals = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char kind[8], zone[64];
        long long a, b;
        assert_int_equal(sscanf(line, "%7s %63s %lld %lld", kind, zone, &a, &b), 4);
        if (strcmp(zone, loaded) != 0) {
            tg__tz_cleanup(&z);
            if (tg__tz_load(&z, zone, tzdir(), err, sizeof err) != 0)
                fail_msg("%s", err);
            snprintf(loaded, sizeof loaded, "%s", zone);
        }
        if (strcmp(kind, "offset") == 0) {
            if (tg__tz_offset(&z, a) != b)
                fail_msg("%s at %lld: offset %d, zoneinfo says %lld", zone, a,
                         (int)tg__tz_offset(&z, a), b);
            offsets++;
        } else {
            if (tg__tz_from_local(&z, a) != b)
                fail_msg("%s local %lld: %lld, zoneinfo says %lld", zone, a,
                         (long long)tg__tz_from_local(&z, a), b);
            locals++;
        }
    }
    tg__tz_cleanup(&z);
    free(text);
    assert_true(offsets > 300 && locals > 1500);
}

static void test_tz_refusals(void **state)
{
    (void)state;
    tg__tz z;
    char err[256];
    assert_int_equal(tg__tz_load(&z, "../../etc/passwd", tzdir(), err, sizeof err), -1);
    assert_non_null(strstr(err, "is not an IANA name"));
    assert_int_equal(tg__tz_load(&z, "Europe/Nowhere", tzdir(), err, sizeof err), -1);
    assert_non_null(strstr(err, "Europe/Nowhere"));
    assert_non_null(strstr(err, "No such file"));
    size_t len;
    char path[600];
    snprintf(path, sizeof path, "%s/Europe/Berlin", tzdir());
    unsigned char *berlin = (unsigned char *)tgtest_read_file(path, &len);
    assert_non_null(berlin);
    for (size_t cut = 0; cut < len; cut += 97) /* every truncation is refused, none crashes */
        if (cut < len - 28) {                  /* ...before the footer */
            int rc = tg__tz_parse(&z, berlin, cut, err, sizeof err);
            if (rc == 0)
                fail_msg("a TZif file cut at %zu of %zu bytes was accepted", cut, len);
        }
    berlin[4] = '2';
    berlin[36 + 3] = 0; /* no time types at all */
    assert_int_equal(tg__tz_parse(&z, berlin, len, err, sizeof err), -1);
    assert_non_null(strstr(err, "counts out of range"));
    free(berlin);
    struct tg__tz_rule r;
    assert_int_equal(tg__tz_rule_parse(&r, "CET-1CEST,M3.5.0,M10.5.0/3", 26), 0);
    assert_int_equal(r.std_off, 3600);
    assert_int_equal(r.dst_off, 7200);
    assert_int_equal(r.end.secs, 3 * 3600);
    assert_int_equal(tg__tz_rule_parse(&r, "<+0330>-3:30", 12), 0);
    assert_int_equal(r.std_off, 3 * 3600 + 1800);
    assert_int_equal(tg__tz_rule_parse(&r, "CET-1CEST,M13.5.0,M10.5.0", 25), -1);
    assert_int_equal(tg__tz_rule_parse(&r, "X-1", 3), -1);
}

/* ---- a virtual clock and a record of runs ---- */

static uint64_t vnow;

static uint64_t vclock(void *user)
{
    (void)user;
    return __atomic_load_n(&vnow, __ATOMIC_SEQ_CST);
}

static void vset(uint64_t ms)
{
    __atomic_store_n(&vnow, ms, __ATOMIC_SEQ_CST);
}

#define MAX_RUNS 512

struct run_rec {
    char name[32];
    uint64_t due, at;
    bool has_chat;
    int64_t chat;
    char data[32];
};

static pthread_mutex_t runs_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t runs_cv = PTHREAD_COND_INITIALIZER;
static struct run_rec runs[MAX_RUNS];
static int nruns;

static tg_status on_job(tg_hctx *h, void *user)
{
    (void)user;
    const tg_job_info *j = tg_hctx_job(h);
    assert_non_null(j);
    assert_null(tg_hctx_update(h));
    assert_string_equal(tg_hctx_event(h)->kind_name, "job");
    assert_int_equal(tg_hctx_event(h)->has_chat, j->has_chat);
    if (j->has_chat) /* a per-chat job reaches the chat's data */
        tg_data_set_int(tg_hctx_chat_data(h), "job_runs",
                        tg_data_get_int(tg_hctx_chat_data(h), "job_runs", 0) + 1);
    pthread_mutex_lock(&runs_mu);
    if (nruns < MAX_RUNS) {
        struct run_rec *r = &runs[nruns++];
        snprintf(r->name, sizeof r->name, "%s", j->name);
        snprintf(r->data, sizeof r->data, "%s", j->data);
        r->due = j->due_ms;
        r->at = vclock(NULL);
        r->has_chat = j->has_chat;
        r->chat = j->chat_id;
    }
    pthread_cond_broadcast(&runs_cv);
    pthread_mutex_unlock(&runs_mu);
    return TG_OK;
}

static void runs_reset(void)
{
    pthread_mutex_lock(&runs_mu);
    nruns = 0;
    pthread_mutex_unlock(&runs_mu);
}

/* Runs of name, in the order they happened; their due times into due[]. */
static int runs_of(const char *name, uint64_t *due, int cap)
{
    int n = 0;
    pthread_mutex_lock(&runs_mu);
    for (int i = 0; i < nruns; i++)
        if (strcmp(runs[i].name, name) == 0 && n < cap)
            due[n++] = runs[i].due;
    pthread_mutex_unlock(&runs_mu);
    return n;
}

struct env {
    tg_router *r;
    tg_storage *s;
    tg_dispatcher *d;
    tg_jobs *q;
};

static const char *const NAMES[] = {"a", "b", "c", "d", "daily", "night", NULL};

static void env_up(struct env *e, tg_storage *s)
{
    e->r = tg_router_new();
    e->s = s;
    e->d = tg_dispatcher_new(NULL, e->r, &(tg_dispatcher_options){.workers = 3, .storage = s});
    assert_non_null(e->d);
    e->q = tg_jobs_new(e->d, &(tg_jobs_options){.clock_ms = vclock, .tzdir = tzdir()});
    if (!e->q)
        fail_msg("%s", tg_jobs_errmsg());
    for (int i = 0; NAMES[i]; i++)
        assert_int_equal(tg_jobs_register(e->q, NAMES[i], on_job, NULL), TG_OK);
    assert_int_equal(tg_jobs_start(e->q), TG_OK);
}

static void env_down(struct env *e)
{
    tg_jobs_free(e->q);
    tg_dispatcher_free(e->d);
    tg_router_free(e->r);
}

/* Move the virtual clock from now to until in steps, running what comes due. */
static void advance(struct env *e, uint64_t until, uint64_t step)
{
    for (uint64_t t = vclock(NULL); t <= until; t += step) {
        vset(t);
        if (tg_jobs_run_due(e->q))
            assert_int_equal(tg_dispatcher_wait_idle(e->d, 10000), TG_OK);
    }
    vset(until);
}

#define MIN (60 * 1000ull)
#define T0  1780000000000ull /* 2026-05-28, a Thursday; no DST change near */

static void add(struct env *e, const tg_job_spec *sp)
{
    if (tg_jobs_add(e->q, NULL, 0, sp) != TG_OK)
        fail_msg("add %s: %s", sp->name, tg_jobs_errmsg());
}

static void test_once_repeat_cancel(void **state)
{
    (void)state;
    struct env e;
    vset(T0);
    runs_reset();
    env_up(&e, tg_storage_memory_new());
    add(&e, &(tg_job_spec){.name = "a", .delay_ms = 5 * MIN, .data = "tea"});
    add(&e, &(tg_job_spec){.name = "b", .every_ms = 10 * MIN});
    add(&e, &(tg_job_spec){.name = "c",
                           .id = "chat-job",
                           .has_chat = true,
                           .chat_id = 77,
                           .every_ms = 15 * MIN,
                           .delay_ms = MIN});
    add(&e, &(tg_job_spec){.name = "d", .id = "doomed", .delay_ms = 20 * MIN});
    add(&e, &(tg_job_spec){.name = "a", .id = "replaced", .delay_ms = 7 * MIN});
    add(&e, &(tg_job_spec){.name = "a", .id = "replaced", .delay_ms = 9 * MIN, .data = "late"});
    assert_int_equal(tg_jobs_count(e.q), 5);
    bool found;
    assert_int_equal(tg_jobs_cancel(e.q, "doomed", &found), TG_OK);
    assert_true(found);
    assert_int_equal(tg_jobs_cancel(e.q, "doomed", &found), TG_OK);
    assert_false(found);
    advance(&e, T0 + 31 * MIN, MIN);
    uint64_t due[16];
    assert_int_equal(runs_of("a", due, 16), 2); /* "tea" at +5, the replacement at +9 */
    assert_int_equal(due[0], T0 + 5 * MIN);
    assert_int_equal(due[1], T0 + 9 * MIN);
    pthread_mutex_lock(&runs_mu);
    for (int i = 0, k = 0; i < nruns; i++) /* the first "a" run had the first job's text */
        if (strcmp(runs[i].name, "a") == 0)
            assert_string_equal(runs[i].data, k++ ? "late" : "tea");
    pthread_mutex_unlock(&runs_mu);
    assert_int_equal(runs_of("b", due, 16), 3);
    assert_true(due[0] == T0 + 10 * MIN && due[1] == T0 + 20 * MIN && due[2] == T0 + 30 * MIN);
    assert_int_equal(runs_of("c", due, 16), 3);
    assert_true(due[0] == T0 + MIN && due[1] == T0 + 16 * MIN && due[2] == T0 + 31 * MIN);
    assert_int_equal(runs_of("d", due, 16), 0);
    /* once-jobs that ran are gone; the repeating ones stay */
    assert_int_equal(tg_jobs_count(e.q), 2);
    char buf[128];
    size_t len;
    bool f;
    assert_int_equal(tg_storage_get(e.s, "sess:c77", buf, sizeof buf, &len, &f), TG_OK);
    assert_true(f); /* the chat job wrote the chat's data (3 runs) */
    /* cancel from the list */
    assert_int_equal(tg_jobs_cancel(e.q, "chat-job", NULL), TG_OK);
    advance(&e, T0 + 61 * MIN, MIN);
    assert_int_equal(runs_of("c", due, 16), 3);
    env_down(&e);
    tg_storage_free(e.s);
}

static void test_bad_specs(void **state)
{
    (void)state;
    struct env e;
    vset(T0);
    env_up(&e, tg_storage_memory_new());
    const struct {
        tg_job_spec sp;
        const char *why;
    } bad[] = {
        {{.name = "nope"}, "no handler registered as \"nope\""},
        {{.name = "a", .daily_at = "25:00"}, "daily_at \"25:00\""},
        {{.name = "a", .daily_at = "8:30"}, "daily_at \"8:30\""},
        {{.name = "a", .daily_at = "08:30", .tz = "Mars/Olympus"}, "Mars/Olympus"},
        {{.name = "a", .every_ms = 10}, "every_ms 10 is below 1000"},
        {{.name = "a", .every_ms = 5000, .daily_at = "08:00"}, "not both"},
        {{.name = "a", .id = "has space"}, "id \"has space\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(tg_jobs_add(e.q, NULL, 0, &bad[i].sp), TG_ERR_INVALID);
        if (!strstr(tg_jobs_errmsg(), bad[i].why))
            fail_msg("case %zu: \"%s\" does not say \"%s\"", i, tg_jobs_errmsg(), bad[i].why);
    }
    assert_int_equal(tg_jobs_register(e.q, "late", on_job, NULL), TG_ERR_INVALID);
    assert_int_equal(tg_jobs_count(e.q), 0);
    env_down(&e);
    tg_storage_free(e.s);
}

/* A store with no scan cannot keep jobs. */
static tg_status ns_get(tg_storage *s, const char *k, void *b, size_t c, size_t *l, bool *f)
{
    (void)s, (void)k, (void)b, (void)c;
    *l = 0;
    *f = false;
    return TG_OK;
}
static tg_status ns_set(tg_storage *s, const char *k, const void *v, size_t l, uint64_t t)
{
    (void)s, (void)k, (void)v, (void)l, (void)t;
    return TG_OK;
}
static tg_status ns_del(tg_storage *s, const char *k)
{
    (void)s, (void)k;
    return TG_OK;
}
static void ns_free(tg_storage *s)
{
    (void)s;
}

static void test_storage_without_scan(void **state)
{
    (void)state;
    static const tg_storage_ops ops = {
        .get = ns_get, .set = ns_set, .del = ns_del, .free = ns_free};
    tg_storage s = {.ops = &ops};
    tg_router *r = tg_router_new();
    tg_dispatcher *d = tg_dispatcher_new(NULL, r, &(tg_dispatcher_options){.storage = &s});
    assert_null(tg_jobs_new(d, NULL));
    assert_non_null(strstr(tg_jobs_errmsg(), "cannot list keys"));
    tg_dispatcher_free(d);
    tg_router_free(r);
}

/* ---- daily jobs across DST changes ---- */

static uint64_t utc_ms(int y, int mo, int d, int h, int mi)
{
    return (uint64_t)(tg__days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60) * 1000;
}

static void test_daily_across_dst(void **state)
{
    (void)state;
    struct env e;
    runs_reset();
    vset(utc_ms(2026, 3, 27, 0, 0));
    env_up(&e, tg_storage_memory_new());
    add(&e, &(tg_job_spec){.name = "daily", .daily_at = "08:30", .tz = "Europe/Berlin"});
    add(&e, &(tg_job_spec){.name = "night", .daily_at = "02:30", .tz = "Europe/Berlin"});
    advance(&e, utc_ms(2026, 3, 31, 0, 0), 5 * MIN);
    uint64_t due[16];
    /* 08:30 is 07:30 UTC in winter time, 06:30 UTC from Sunday 29 March on */
    assert_int_equal(runs_of("daily", due, 16), 4);
    assert_int_equal(due[0], utc_ms(2026, 3, 27, 7, 30));
    assert_int_equal(due[1], utc_ms(2026, 3, 28, 7, 30));
    assert_int_equal(due[2], utc_ms(2026, 3, 29, 6, 30));
    assert_int_equal(due[3], utc_ms(2026, 3, 30, 6, 30));
    /* 02:30 does not exist on 29 March (02:00 -> 03:00): it runs at 03:30 CEST = 01:30 UTC */
    assert_int_equal(runs_of("night", due, 16), 4);
    assert_int_equal(due[0], utc_ms(2026, 3, 27, 1, 30));
    assert_int_equal(due[1], utc_ms(2026, 3, 28, 1, 30));
    assert_int_equal(due[2], utc_ms(2026, 3, 29, 1, 30));
    assert_int_equal(due[3], utc_ms(2026, 3, 30, 0, 30));
    /* autumn: 02:30 happens twice on 25 October (03:00 -> 02:00); it runs once, the first */
    vset(utc_ms(2026, 10, 23, 12, 0)); /* seven months on: each job catches up once first */
    if (tg_jobs_run_due(e.q))
        assert_int_equal(tg_dispatcher_wait_idle(e.d, 10000), TG_OK);
    runs_reset();
    advance(&e, utc_ms(2026, 10, 27, 0, 0), 5 * MIN);
    assert_int_equal(runs_of("night", due, 16), 3);
    assert_int_equal(due[0], utc_ms(2026, 10, 24, 0, 30));
    assert_int_equal(due[1], utc_ms(2026, 10, 25, 0, 30));
    assert_int_equal(due[2], utc_ms(2026, 10, 26, 1, 30));
    assert_int_equal(runs_of("daily", due, 16), 3);
    assert_int_equal(due[1], utc_ms(2026, 10, 25, 7, 30));
    env_down(&e);
    tg_storage_free(e.s);
}

/* ---- a restart over SQLite, after downtime ---- */

static void test_restart_missed_runs(void **state)
{
    (void)state;
    char db[64];
    snprintf(db, sizeof db, "/tmp/tgkit-jobs-%d.db", (int)getpid());
    unlink(db);
    struct env e;
    runs_reset();
    vset(T0);
    env_up(&e, tg_storage_sqlite_new(&(tg_sqlite_options){.path = db}));
    add(&e, &(tg_job_spec){.name = "a", .id = "catch-up", .every_ms = 10 * MIN});
    add(&e, &(tg_job_spec){
                .name = "b", .id = "skipper", .every_ms = 10 * MIN, .missed = TG_JOB_MISSED_SKIP});
    add(&e, &(tg_job_spec){.name = "c", .id = "once-late", .delay_ms = 60 * MIN, .data = "x"});
    add(&e,
        &(tg_job_spec){
            .name = "d", .id = "once-skip", .delay_ms = 60 * MIN, .missed = TG_JOB_MISSED_SKIP});
    advance(&e, T0 + 25 * MIN, MIN); /* a and b ran twice */
    env_down(&e);
    tg_storage_free(e.s);

    /* three hours down */
    runs_reset();
    vset(T0 + 205 * MIN);
    env_up(&e, tg_storage_sqlite_new(&(tg_sqlite_options){.path = db}));
    assert_int_equal(tg_jobs_count(e.q), 4);
    advance(&e, T0 + 225 * MIN, MIN);
    uint64_t due[16];
    /* a: the 18 missed runs become one at restart (due +30), then +210 and +220 */
    assert_int_equal(runs_of("a", due, 16), 3);
    assert_int_equal(due[0], T0 + 30 * MIN);
    assert_int_equal(due[1], T0 + 210 * MIN);
    assert_int_equal(due[2], T0 + 220 * MIN);
    /* b: skipped the late run, back on its times */
    assert_int_equal(runs_of("b", due, 16), 2);
    assert_int_equal(due[0], T0 + 210 * MIN);
    /* c ran once, late; d was dropped: both gone, from the file too */
    assert_int_equal(runs_of("c", due, 16), 1);
    assert_int_equal(due[0], T0 + 60 * MIN);
    assert_int_equal(runs_of("d", due, 16), 0);
    assert_int_equal(tg_jobs_count(e.q), 2);
    char buf[512];
    size_t len;
    bool f;
    assert_int_equal(tg_storage_get(e.s, "job:once-late", buf, sizeof buf, &len, &f), TG_OK);
    assert_false(f);
    assert_int_equal(tg_storage_get(e.s, "job:once-skip", buf, sizeof buf, &len, &f), TG_OK);
    assert_false(f);
    /* what is stored moved on with the runs */
    assert_int_equal(tg_storage_get(e.s, "job:catch-up", buf, sizeof buf, &len, &f), TG_OK);
    assert_true(f);
    env_down(&e);
    tg_storage_free(e.s);
    tgtest_remove_sqlite(db);
}

/* ---- the real clock: the queue's own thread ---- */

static void test_thread(void **state)
{
    (void)state;
    runs_reset();
    tg_router *r = tg_router_new();
    tg_dispatcher *d = tg_dispatcher_new(NULL, r, &(tg_dispatcher_options){.workers = 2});
    tg_jobs *q = tg_jobs_new(d, NULL);
    assert_non_null(q);
    assert_int_equal(tg_jobs_register(q, "a", on_job, NULL), TG_OK);
    assert_int_equal(tg_jobs_start(q), TG_OK);
    assert_int_equal(tg_jobs_add(q, NULL, 0, &(tg_job_spec){.name = "a", .delay_ms = 20}), TG_OK);
    assert_int_equal(tg_jobs_add(q, NULL, 0, &(tg_job_spec){.name = "a"}), TG_OK);
    pthread_mutex_lock(&runs_mu);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 10;
    while (nruns < 2 && pthread_cond_timedwait(&runs_cv, &runs_mu, &ts) == 0)
        ;
    int n = nruns;
    pthread_mutex_unlock(&runs_mu);
    assert_int_equal(n, 2);
    tg_jobs_free(q);
    tg_dispatcher_free(d);
    tg_router_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tz_vectors),           cmocka_unit_test(test_tz_refusals),
        cmocka_unit_test(test_once_repeat_cancel),   cmocka_unit_test(test_bad_specs),
        cmocka_unit_test(test_storage_without_scan), cmocka_unit_test(test_daily_across_dst),
        cmocka_unit_test(test_restart_missed_runs),  cmocka_unit_test(test_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
