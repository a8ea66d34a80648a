/*
 * Long polling end to end against a stateful fake Bot API on 127.0.0.1:
 *  - 8 workers, 10,000 updates from 100 chats: replies per chat in order, none lost, none
 *    duplicated after a clean stop, every offset confirmed;
 *  - handlers that fail do not stop the bot;
 *  - 409 Conflict is reported clearly and polling recovers;
 *  - a bot killed (SIGKILL) with an unfinished update: a restarted bot gets it again, and
 *    updates confirmed before the kill are not redelivered.
 * The kill test re-executes this binary as the bot process (--child), so the fake server
 * stays in the parent.
 */
#include "tgtest.h"

#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "dispatch_fakeapi.h"
#include "tgbot/client.h"
#include "tgbot/dispatch.h"
#include "tgbot/updates.h"

#define TOKEN  "123456:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
#define NCHATS 100
#define NUPD   10000

static char upd_json[256];

static const char *mk_update(int64_t id, int64_t chat, const char *text)
{
    snprintf(upd_json, sizeof upd_json,
             "{\"update_id\":%lld,\"message\":{\"message_id\":%lld,\"date\":0,\"chat\":{\"id\":"
             "%lld,\"type\":\"private\"},\"from\":{\"id\":%lld,\"is_bot\":false,\"first_name\":"
             "\"U\"},\"text\":\"%s\"}}",
             (long long)id, (long long)id, (long long)chat, (long long)chat, text);
    return upd_json;
}

struct bot {
    tg_bot *bot;
    tg_router *r;
    tg_dispatcher *d;
    pthread_t t;
    tg_status st;
    tg_polling_options po;
};

static void *poll_thread(void *arg)
{
    struct bot *b = arg;
    b->st = tg_run_polling(b->d, &b->po);
    return NULL;
}

static char logbuf[16384];
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

static void log_sink(void *user, int level, const char *line)
{
    (void)user;
    (void)level;
    pthread_mutex_lock(&log_mu);
    strncat(logbuf, line, sizeof logbuf - strlen(logbuf) - 2);
    strcat(logbuf, "\n");
    pthread_mutex_unlock(&log_mu);
}

static void bot_start_opts(struct bot *b, fakeapi *f, tg_handler_fn fn, unsigned workers,
                           const tg_polling_options *po)
{
    tg_bot_options bo = {.base_url = fakeapi_url(f), .log = log_sink, .log_level = TG_LOG_WARN};
    b->bot = tg_bot_new(TOKEN, &bo);
    assert_non_null(b->bot);
    b->r = tg_router_new();
    tg_router_on_kind(b->r, TG_UPDATE_MESSAGE, fn, NULL);
    tg_dispatcher_options o = {.workers = workers, .queue_capacity = 256};
    b->d = tg_dispatcher_new(b->bot, b->r, &o);
    if (!b->d)
        fail_msg("dispatcher: %s", tg_dispatcher_errmsg(NULL));
    b->po =
        po ? *po : (tg_polling_options){.timeout_s = 1, .backoff_min_ms = 10, .backoff_max_ms = 50};
    assert_int_equal(pthread_create(&b->t, NULL, poll_thread, b), 0);
}

static void bot_start(struct bot *b, fakeapi *f, tg_handler_fn fn, unsigned workers)
{
    bot_start_opts(b, f, fn, workers, NULL);
}

static tg_status bot_stop(struct bot *b)
{
    tg_dispatcher_stop(b->d);
    pthread_join(b->t, NULL);
    tg_dispatcher_free(b->d);
    tg_router_free(b->r);
    tg_bot_free(b->bot);
    return b->st;
}

static bool wait_count(fakeapi *f, const char *method, size_t n)
{
    for (int i = 0; i < 12000 && fakeapi_count(f, method) < n; i++) /* <= ~120 s */
        tg__sleep_ms(10);
    return fakeapi_count(f, method) >= n;
}

/* ---- ordering under load ---- */

static pthread_mutex_t ord_mu = PTHREAD_MUTEX_INITIALIZER;
static int ord_next[NCHATS];
static int ord_errors;

static tg_status h_ordered(tg_hctx *h, void *user)
{
    (void)user;
    const tg_event *ev = tg_hctx_event(h);
    int chat = (int)(ev->chat_id - 1000), seq = atoi(ev->text);
    pthread_mutex_lock(&ord_mu);
    if (chat < 0 || chat >= NCHATS || ord_next[chat] != seq)
        ord_errors++;
    else
        ord_next[chat]++;
    pthread_mutex_unlock(&ord_mu);
    return tg_reply(h, ev->text);
}

static void test_ordering_10k(void **state)
{
    (void)state;
    fakeapi *f = fakeapi_start(TOKEN);
    assert_non_null(f);
    int seq[NCHATS] = {0};
    uint32_t rnd = 12345, run_left = 0;
    int chat = 0;
    for (int64_t id = 1; id <= NUPD; id++) {
        /* runs of 1..16 updates of one chat back to back: a pool that ignored ordering
         * would run them side by side and reorder them */
        if (run_left == 0) {
            rnd = rnd * 1103515245u + 12345u;
            chat = (int)((rnd >> 8) % NCHATS);
            run_left = 1 + (rnd >> 20) % 16;
        }
        run_left--;
        char text[16];
        snprintf(text, sizeof text, "%d", seq[chat]++);
        fakeapi_add_update(f, id, mk_update(id, 1000 + chat, text));
    }
    struct bot b;
    bot_start(&b, f, h_ordered, 8);
    assert_true(wait_count(f, "sendMessage", NUPD));
    assert_int_equal(bot_stop(&b), TG_OK);
    assert_int_equal(ord_errors, 0);
    assert_int_equal((int)fakeapi_count(f, "sendMessage"), NUPD); /* nothing duplicated */
    assert_int_equal(fakeapi_offset(f), NUPD + 1);                /* all confirmed */
    /* The server saw each chat's replies in order too. */
    int last[NCHATS];
    memset(last, -1, sizeof last);
    for (size_t i = 0; i < NUPD; i++) {
        char *body = fakeapi_body(f, "sendMessage", i);
        json_t *j = json_loads(body, 0, NULL);
        int c = (int)json_integer_value(json_object_get(j, "chat_id")) - 1000;
        int s = atoi(json_string_value(json_object_get(j, "text")));
        assert_true(c >= 0 && c < NCHATS);
        assert_int_equal(s, last[c] + 1);
        last[c] = s;
        assert_non_null(json_object_get(j, "reply_parameters"));
        json_decref(j);
        free(body);
    }
    for (int c = 0; c < NCHATS; c++)
        assert_int_equal(last[c], seq[c] - 1);
    assert_null(strstr(logbuf, TOKEN));
    fakeapi_stop(f);
}

/* ---- failing handlers ---- */

static tg_status h_sometimes_fails(tg_hctx *h, void *user)
{
    (void)user;
    const tg_event *ev = tg_hctx_event(h);
    if (ev->update_id % 2)
        return tg_hctx_fail(h, TG_ERR_INVALID, "odd update %lld refused", (long long)ev->update_id);
    return tg_reply(h, "ok");
}

static void test_failing_handler_keeps_running(void **state)
{
    (void)state;
    fakeapi *f = fakeapi_start(TOKEN);
    for (int64_t id = 1; id <= 20; id++)
        fakeapi_add_update(f, id, mk_update(id, 5 + id % 3, "x"));
    struct bot b;
    logbuf[0] = '\0';
    bot_start(&b, f, h_sometimes_fails, 2);
    assert_true(wait_count(f, "sendMessage", 10));
    for (int i = 0; i < 1000 && fakeapi_offset(f) < 21; i++)
        tg__sleep_ms(10);
    tg_dispatcher_stats st;
    tg_dispatcher_wait_idle(b.d, 10000);
    tg_dispatcher_get_stats(b.d, &st);
    assert_int_equal(bot_stop(&b), TG_OK);
    assert_int_equal((int)st.failed, 10);
    assert_int_equal((int)st.handled, 20);
    assert_int_equal((int)fakeapi_count(f, "sendMessage"), 10);
    assert_int_equal(fakeapi_offset(f), 21);
    assert_non_null(strstr(logbuf, "odd update 1 refused"));
    fakeapi_stop(f);
}

/* ---- 409 ---- */

static tg_status h_reply(tg_hctx *h, void *user)
{
    (void)user;
    char text[32];
    snprintf(text, sizeof text, "%lld", (long long)tg_hctx_event(h)->update_id);
    return tg_reply(h, text);
}

static void test_conflict_reported(void **state)
{
    (void)state;
    fakeapi *f = fakeapi_start(TOKEN);
    fakeapi_conflict(f, 2);
    fakeapi_add_update(f, 1, mk_update(1, 9, "x"));
    struct bot b;
    logbuf[0] = '\0';
    bot_start(&b, f, h_reply, 2);
    assert_true(wait_count(f, "sendMessage", 1));
    assert_int_equal(bot_stop(&b), TG_OK);
    assert_true(fakeapi_getupdates_calls(f) >= 3);
    assert_non_null(strstr(logbuf, "409 Conflict: another instance is polling"));
    assert_null(strstr(logbuf, TOKEN));
    fakeapi_stop(f);
}

static void test_request_options(void **state)
{
    (void)state;
    fakeapi *f = fakeapi_start(TOKEN);
    fakeapi_add_update(f, 41, mk_update(41, 9, "x"));
    static const char *const allowed[] = {"message", "callback_query", NULL};
    tg_polling_options po = {.timeout_s = 1, .limit = 7, .allowed_updates = allowed};
    struct bot b;
    bot_start_opts(&b, f, h_reply, 2, &po);
    for (int i = 0; i < 2000 && fakeapi_offset(f) < 42; i++)
        tg__sleep_ms(10);
    assert_int_equal(bot_stop(&b), TG_OK);
    char *body = fakeapi_body(f, "getUpdates", 0);
    json_t *j = json_loads(body, 0, NULL);
    assert_null(json_object_get(j, "offset")); /* nothing confirmed yet */
    assert_int_equal(json_integer_value(json_object_get(j, "timeout")), 1);
    assert_int_equal(json_integer_value(json_object_get(j, "limit")), 7);
    json_t *au = json_object_get(j, "allowed_updates");
    assert_int_equal((int)json_array_size(au), 2);
    assert_string_equal(json_string_value(json_array_get(au, 0)), "message");
    json_decref(j);
    free(body);
    body = fakeapi_last_getupdates(f); /* the confirmation at stop */
    j = json_loads(body, 0, NULL);
    assert_int_equal(json_integer_value(json_object_get(j, "offset")), 42);
    assert_int_equal(json_integer_value(json_object_get(j, "timeout")), 0);
    json_decref(j);
    free(body);
    fakeapi_stop(f);
}

static void test_wrong_token_gives_up(void **state)
{
    (void)state;
    fakeapi *f = fakeapi_start("999:BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"); /* not our token */
    tg_bot *bot = tg_bot_new(TOKEN, &(tg_bot_options){.base_url = fakeapi_url(f), .log = log_sink});
    tg_router *r = tg_router_new();
    tg_router_on_kind(r, TG_UPDATE_MESSAGE, h_reply, NULL);
    assert_null(tg_dispatcher_new(bot, r, NULL)); /* getMe fails first */
    assert_non_null(strstr(tg_dispatcher_errmsg(NULL), "getMe"));
    tg_dispatcher *d = tg_dispatcher_new(bot, r, &(tg_dispatcher_options){.no_get_me = true});
    assert_non_null(d);
    logbuf[0] = '\0';
    assert_int_equal(tg_run_polling(d, &(tg_polling_options){.timeout_s = 1}), TG_ERR_API);
    assert_non_null(strstr(tg_dispatcher_errmsg(d), "401"));
    assert_non_null(strstr(tg_dispatcher_errmsg(d), "token is wrong"));
    assert_int_equal((int)fakeapi_getupdates_calls(f), 0); /* rejected before the method */
    assert_null(strstr(logbuf, TOKEN));
    tg_dispatcher_free(d);
    tg_router_free(r);
    tg_bot_free(bot);
    fakeapi_stop(f);
}

/* ---- kill and restart ---- */

static tg_status h_child(tg_hctx *h, void *user)
{
    const char *mode = user;
    const tg_event *ev = tg_hctx_event(h);
    if (strcmp(mode, "block") == 0 && ev->update_id == 10) {
        for (int i = 0; i < 600; i++) /* until killed */
            tg__sleep_ms(1000);
    }
    char text[32];
    snprintf(text, sizeof text, "%lld", (long long)ev->update_id);
    return tg_reply(h, text);
}

static int child_main(const char *url, const char *mode)
{
    tg_bot *bot = tg_bot_new(TOKEN, &(tg_bot_options){.base_url = url});
    tg_router *r = tg_router_new();
    tg_router_on_kind(r, TG_UPDATE_MESSAGE, h_child, (void *)mode);
    tg_dispatcher *d = tg_dispatcher_new(bot, r, &(tg_dispatcher_options){.workers = 4});
    if (!d)
        return 2;
    tg_dispatcher_stop_on_signals(d);
    tg_status st = tg_run_polling(d, &(tg_polling_options){.timeout_s = 1, .drain_ms = 2000});
    tg_dispatcher_free(d);
    tg_router_free(r);
    tg_bot_free(bot);
    return st == TG_OK ? 0 : 1;
}

static pid_t spawn_child(fakeapi *f, const char *mode)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execl("/proc/self/exe", "test_updates_polling", "--child", fakeapi_url(f), mode,
              (char *)NULL);
        _exit(127);
    }
    return pid;
}

static int acks_of(fakeapi *f, int64_t id)
{
    int n = 0;
    char want[32];
    snprintf(want, sizeof want, "\"text\":\"%lld\"", (long long)id);
    char *b;
    for (size_t i = 0; (b = fakeapi_body(f, "sendMessage", i)) != NULL; i++) {
        n += strstr(b, want) != NULL;
        free(b);
    }
    return n;
}

static void test_kill_and_restart_redelivers(void **state)
{
    (void)state;
    fakeapi *f = fakeapi_start(TOKEN);
    for (int64_t id = 1; id <= 20; id++)
        fakeapi_add_update(f, id, mk_update(id, 100 + id % 4, "x"));
    /* Update 10 blocks; 14 and 18 share its chat and wait behind it. */
    pid_t a = spawn_child(f, "block");
    assert_true(wait_count(f, "sendMessage", 17));
    for (int i = 0; i < 3000 && fakeapi_offset(f) != 10; i++)
        tg__sleep_ms(10);
    assert_int_equal(fakeapi_offset(f), 10); /* never past the unfinished update */
    kill(a, SIGKILL);
    waitpid(a, NULL, 0);
    assert_int_equal(acks_of(f, 10), 0);
    assert_int_equal(acks_of(f, 14), 0);

    pid_t b = spawn_child(f, "normal");
    for (int i = 0; i < 3000 && fakeapi_offset(f) != 21; i++)
        tg__sleep_ms(10);
    kill(b, SIGTERM);
    int status;
    waitpid(b, &status, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(fakeapi_offset(f), 21);
    for (int64_t id = 1; id < 10; id++)
        assert_int_equal(acks_of(f, id), 1); /* confirmed before the kill: not redelivered */
    assert_int_equal(acks_of(f, 10), 1);
    assert_int_equal(acks_of(f, 14), 1);
    assert_int_equal(acks_of(f, 18), 1);
    for (int64_t id = 11; id <= 20; id++)
        assert_true(acks_of(f, id) >= 1); /* at least once */
    fakeapi_stop(f);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--child") == 0)
        return child_main(argv[2], argv[3]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ordering_10k),
        cmocka_unit_test(test_failing_handler_keeps_running),
        cmocka_unit_test(test_conflict_reported),
        cmocka_unit_test(test_wrong_token_gives_up),
        cmocka_unit_test(test_request_options),
        cmocka_unit_test(test_kill_and_restart_redelivers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
