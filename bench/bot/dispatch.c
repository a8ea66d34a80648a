/*
 * bench dispatch: route one already-decoded update (fixtures/botapi/dispatch_update.json,
 * "/cmd19") through 20 command handlers where the last one matches, next to the floor of
 * 20 string compares of the same command. Goal: within 2x of the floor, 0 allocations.
 *
 * Second scenario: the whole worker path for one update (tokenize, build the event, route,
 * reset), next to tokenizing the same bytes alone, and again (as dispatch_tokenize_route_20)
 * next to its like-for-like floor from raw bytes: a cJSON DOM parse of the update, reading
 * message.text's command, 20 string compares, cJSON_Delete.
 *
 * Then sessions (issue 27's goal: <= 20 us per update to load and skip an unchanged
 * record, <= 60 us with a write, on SQLite) on the memory store and on SQLite, and the
 * whole path again while a job queue holds 100,000 pending jobs (goal: <= 1 us more), each
 * next to dispatch_update_full.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "bot/dispatch/dispatch_int.h"
#include "bot/json/json.h"
#include "core/alloc.h"
#include "tgbot/dispatch.h"
#include "tgbot/jobs.h"
#include "tgbot/storage.h"

#define NCMD 20

static uint64_t hits;

static tg_status on_cmd(tg_hctx *h, void *user)
{
    (void)h;
    hits += (uintptr_t)user;
    return TG_OK;
}

struct route_ctx {
    tg_router *r;
    struct tg_hctx *h;
};

static void bench_route(void *p)
{
    struct route_ctx *c = p;
    bool handled;
    tg__router_run(c->r, c->h, &handled);
}

struct floor_ctx {
    char names[NCMD][16];
    const char *cmd; /* the update's command, NUL-terminated */
};

static void bench_floor(void *p)
{
    struct floor_ctx *c = p;
    for (int i = 0; i < NCMD; i++) {
        if (strcmp(c->names[i], c->cmd) == 0) {
            hits += (uintptr_t)(i + 1);
            break;
        }
    }
}

struct cjson_floor_ctx {
    const struct floor_ctx *fc;
    const char *json;
    size_t len;
};

/* The floor of tokenize + route: what a DOM-parsing router does with the same bytes. */
static void bench_cjson_floor(void *p)
{
    const struct cjson_floor_ctx *c = p;
    char cmd[64];
    cJSON *root = cJSON_ParseWithLength(c->json, c->len);
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(root, "message");
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(msg, "text");
    if (!cJSON_IsString(text) || text->valuestring[0] != '/') {
        fprintf(stderr, "bench: cJSON floor found no command\n");
        exit(1);
    }
    size_t n = strcspn(text->valuestring + 1, " @");
    snprintf(cmd, sizeof cmd, "%.*s", (int)(n < sizeof cmd ? n : sizeof cmd - 1),
             text->valuestring + 1);
    for (int i = 0; i < NCMD; i++) {
        if (strcmp(c->fc->names[i], cmd) == 0) {
            hits += (uintptr_t)(i + 1);
            break;
        }
    }
    cJSON_Delete(root);
}

struct full_ctx {
    tg_dispatcher *d;
    const char *json;
    size_t len;
    tg__jdoc doc;
};

static void bench_full(void *p)
{
    struct full_ctx *c = p;
    tg_dispatcher_run_one(c->d, c->json, c->len);
}

/* Sessions: the update's user data read (unchanged: no write-back), or a counter in it
 * incremented (one write per update), on a given storage. */
static tg_status on_session_read(tg_hctx *h, void *user)
{
    (void)user;
    hits += (uint64_t)tg_data_get_int(tg_hctx_user_data(h), "visits", 1);
    return TG_OK;
}

static tg_status on_session_write(tg_hctx *h, void *user)
{
    (void)user;
    tg_data *u = tg_hctx_user_data(h);
    int64_t n = tg_data_get_int(u, "visits", 0) + 1;
    hits += (uint64_t)n;
    return tg_data_set_int(u, "visits", n);
}

static void bench_session(const char *name, tg_storage *s, tg_handler_fn fn, const char *json,
                          size_t len, const tg__bench_result *floor)
{
    tg_router *r = tg_router_new();
    tg_router_on_command(r, "cmd19", fn, NULL);
    tg_dispatcher *d =
        tg_dispatcher_new(NULL, r, &(tg_dispatcher_options){.workers = 1, .storage = s});
    struct full_ctx c = {.d = d, .json = json, .len = len};
    tg__bench_result res;
    tg__bench_run(name, bench_full, &c, &res);
    tg__bench_report(&res, floor);
    tg_dispatcher_free(d);
    tg_router_free(r);
}

static tg_status on_job(tg_hctx *h, void *user)
{
    (void)h, (void)user;
    return TG_OK;
}

static void bench_tokenize(void *p)
{
    struct full_ctx *c = p;
    tg__jerr e;
    tg__json_parse(&c->doc, c->json, c->len, &e);
    tg__bench_sink(c->doc.ntok);
}

int main(void)
{
    size_t len;
    char *json = tg__bench_fixture("fixtures/botapi/dispatch_update.json", &len);
    tg_router *r = tg_router_new();
    struct floor_ctx fc;
    for (int i = 0; i < NCMD; i++) {
        snprintf(fc.names[i], sizeof fc.names[i], "cmd%d", i);
        if (tg_router_on_command(r, fc.names[i], on_cmd, (void *)(uintptr_t)(i + 1)) != TG_OK) {
            fprintf(stderr, "bench: %s\n", tg_router_errmsg(r));
            return 1;
        }
    }
    tg_dispatcher *d = tg_dispatcher_new(NULL, r, &(tg_dispatcher_options){.workers = 1});
    struct tg_hctx *h = &d->hctx[0];
    char err[256];
    if (tg__event_parse(&h->ev, &h->doc, &h->arena, json, len, NULL, err, sizeof err) != 0 ||
        !h->ev.command) {
        fprintf(stderr, "bench: fixture is not a command update: %s\n", err);
        return 1;
    }
    char cmd[32];
    snprintf(cmd, sizeof cmd, "%.*s", (int)h->ev.command_len, h->ev.command);
    fc.cmd = cmd;

    struct route_ctx rc = {r, h};
    tg__bench_result floor, route, full, tok;
    tg__bench_run("strcmp_20_commands", bench_floor, &fc, &floor);
    tg__bench_report(&floor, NULL);
    tg__bench_run("dispatch_20_commands", bench_route, &rc, &route);
    tg__bench_report(&route, &floor);

    struct full_ctx xc = {.d = d, .json = json, .len = len};
    tg__jdoc_init(&xc.doc, NULL);
    tg__bench_run("json_tokenize_dispatch_update", bench_tokenize, &xc, &tok);
    tg__bench_report(&tok, NULL);
    tg__bench_run("dispatch_update_full", bench_full, &xc, &full);
    tg__bench_report(&full, &tok);
    struct cjson_floor_ctx cf = {&fc, json, len};
    tg__bench_result cj, tr = full;
    tg__bench_run("cjson_parse_strcmp_20_commands", bench_cjson_floor, &cf, &cj);
    tg__bench_report(&cj, NULL);
    snprintf(tr.name, sizeof tr.name, "dispatch_tokenize_route_20");
    tg__bench_report(&tr, &cj);

    /* Sessions next to the same update without them, on memory and on SQLite. */
    char db[64];
    snprintf(db, sizeof db, "/tmp/tgkit-bench-sessions-%d.db", (int)getpid());
    tg_storage *mem = tg_storage_memory_new();
    tg_storage *sq = tg_storage_sqlite_new(&(tg_sqlite_options){.path = db});
    if (!mem || !sq) {
        fprintf(stderr, "bench: storage: %s\n", tg_storage_errmsg());
        return 1;
    }
    bench_session("dispatch_session_write_memory", mem, on_session_write, json, len, &full);
    bench_session("dispatch_session_write_sqlite", sq, on_session_write, json, len, &full);
    /* the record exists now: read it and skip the write-back */
    bench_session("dispatch_session_read_memory", mem, on_session_read, json, len, &full);
    bench_session("dispatch_session_read_sqlite", sq, on_session_read, json, len, &full);
    tg_storage_free(sq);
    tg_storage_free(mem);
    const char *sfx[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char p[80];
        snprintf(p, sizeof p, "%s%s", db, sfx[i]);
        unlink(p);
    }

    /* The same update while a job queue holds 100,000 pending jobs (due in a day). */
    tg_jobs *q = tg_jobs_new(d, NULL);
    if (!q || tg_jobs_register(q, "later", on_job, NULL) != TG_OK || tg_jobs_start(q) != TG_OK) {
        fprintf(stderr, "bench: jobs: %s\n", tg_jobs_errmsg());
        return 1;
    }
    for (int i = 0; i < 100000; i++)
        if (tg_jobs_add(q, NULL, 0,
                        &(tg_job_spec){.name = "later", .delay_ms = 86400000ull + (uint64_t)i}) !=
            TG_OK) {
            fprintf(stderr, "bench: jobs: %s\n", tg_jobs_errmsg());
            return 1;
        }
    tg__bench_result withjobs;
    tg__bench_run("dispatch_update_100k_jobs", bench_full, &xc, &withjobs);
    tg__bench_report(&withjobs, &full);
    tg_jobs_free(q);
    tg__bench_table();
    tg__bench_sink(hits);
    if (hits == 0) {
        fprintf(stderr, "bench: the command handler never ran\n");
        return 1;
    }
    tg__jdoc_cleanup(&xc.doc);
    tg_dispatcher_free(d);
    tg_router_free(r);
    tg__free(json);
    return 0;
}
