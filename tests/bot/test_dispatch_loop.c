/* test_dispatch_loop: the dispatcher in loop mode (tg_dispatcher_options.async): a whole bot
 * on one libuv thread, driven end to end through the in-process tgbot-emulator. Three chats
 * at once (replies in order per chat), a conversation with session data, a callback press
 * (answer + edit), a chained call (tg_hctx_call_then), a failing call reaching the error
 * handler, a call refused because it would block, and a scheduled job firing on the loop.
 * Every handler checks it runs on the loop thread. Fails when libuv was not found at build
 * time (make deps installs libuv1-dev). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tgtest.h"

#ifdef TGKIT_HAVE_LIBUV
#include "tgbot/async_uv.h"
#include "tgbot/jobs.h"
#include "tgbot/menu.h"
#include "tgbot/testing.h"
#include "tgbot/tgbot.h"

static struct {
    tg_test *t;
    pthread_t thread;      /* the loop thread (set by itself) */
    pthread_t th;          /* the same, for the join */
    atomic_int off_thread; /* handlers that ran elsewhere */
    atomic_int handlers;
    atomic_bool up, stopped_cb, failed_start;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    tg_dispatcher *d;
    tg_jobs *jobs;
    uv_loop_t loop;
    tg_dispatcher_stats st;
} B;

static void on_thread(void)
{
    atomic_fetch_add(&B.handlers, 1);
    if (!pthread_equal(pthread_self(), B.thread))
        atomic_fetch_add(&B.off_thread, 1);
}

/* "cK mI": three answers, through three different shortcuts, which must arrive in order. */
static tg_status on_burst(tg_hctx *h, void *user)
{
    (void)user;
    on_thread();
    const char *text = tg_hctx_event(h)->text;
    char line[96];
    snprintf(line, sizeof line, "%s #1", text);
    tg_status st = tg_reply(h, line);
    snprintf(line, sizeof line, "%s #2", text);
    if (st == TG_OK)
        st = tg_send(h, line);
    char json[160];
    snprintf(json, sizeof json, "{\"chat_id\":%lld,\"text\":\"%s #3\"}",
             (long long)tg_hctx_event(h)->chat_id, text);
    if (st == TG_OK) /* the raw call, queued the same way */
        st = tg_hctx_call(h, "sendMessage", json, NULL, NULL);
    return st;
}

static tg_status on_order(tg_hctx *h, void *user)
{
    (void)user;
    on_thread();
    tg_data *u = tg_hctx_user_data(h);
    tg_data_set_int(u, "visits", tg_data_get_int(u, "visits", 0) + 1);
    tg_status st = tg_conv_enter(h, "size");
    return st == TG_OK ? tg_reply(h, "Which size?") : st;
}

static tg_status on_size(tg_hctx *h, void *user)
{
    (void)user;
    on_thread();
    const char *size = tg_hctx_event(h)->text;
    tg_status st = tg_conv_set_str(h, "size", size);
    tg_data *u = tg_hctx_user_data(h);
    int64_t visits = tg_data_get_int(u, "visits", 0) + 1;
    tg_data_set_int(u, "visits", visits);
    char line[96];
    snprintf(line, sizeof line, "Ordered %s (visit %lld)", tg_conv_get_str(h, "size"),
             (long long)visits);
    if (st == TG_OK)
        st = tg_conv_end(h);
    return st == TG_OK ? tg_send(h, line) : st;
}

static tg_status on_menu(tg_hctx *h, void *user)
{
    (void)user;
    on_thread();
    return tg_send_ex(h, "Pick one",
                      "\"reply_markup\":{\"inline_keyboard\":[[{\"text\":\"One\","
                      "\"callback_data\":\"pick:1\"}]]}");
}

static tg_status on_pick(tg_hctx *h, void *user)
{
    (void)user;
    on_thread();
    tg_status st = tg_answer(h, "picked");
    return st == TG_OK ? tg_edit(h, "you picked 1", NULL) : st;
}

static tg_status on_me(tg_hctx *h, tg_status st, const char *json, size_t len, void *user)
{
    (void)user;
    on_thread();
    if (st != TG_OK)
        return st;
    char line[160];
    snprintf(line, sizeof line, "I am %.*s", (int)(len < 100 ? len : 100), json);
    return tg_send(h, line);
}

static tg_status on_then(tg_hctx *h, void *user)
{
    (void)user;
    on_thread();
    return tg_hctx_call_then(h, "getMe", NULL, on_me, NULL);
}

static tg_status on_fail(tg_hctx *h, void *user)
{
    (void)user;
    on_thread();
    /* queued (TG_OK), fails at the API; the send after it must never go out */
    tg_status st = tg_hctx_call(h, "sendMessage", "{\"chat_id\":987654321,\"text\":\"x\"}",
                                NULL, NULL);
    return st == TG_OK ? tg_send(h, "must not be sent") : st;
}

static void on_error(tg_hctx *h, tg_status st, const char *errmsg, void *user)
{
    (void)user, (void)st;
    on_thread();
    char line[300];
    snprintf(line, sizeof line, "error: %s", errmsg);
    tg_send(h, line);
}

static tg_status on_blocking(tg_hctx *h, void *user)
{
    (void)user;
    on_thread();
    const char *res = NULL;
    size_t len = 0;
    tg_status st = tg_hctx_call(h, "getMe", NULL, &res, &len);
    return tg_send(h, st == TG_ERR_INVALID && !res ? "refused" : "it blocked");
}

static tg_status on_remind(tg_hctx *h, void *user)
{
    (void)user;
    on_thread();
    const tg_event *ev = tg_hctx_event(h);
    tg_status st = tg_jobs_add(B.jobs, NULL, 0,
                               &(tg_job_spec){.name = "remind", .has_chat = true,
                                              .chat_id = ev->chat_id, .delay_ms = 50,
                                              .data = "reminder from a job"});
    return st == TG_OK ? tg_reply(h, "will remind") : st;
}

static tg_status job_remind(tg_hctx *h, void *user)
{
    (void)user;
    on_thread();
    return tg_send(h, tg_hctx_job(h)->data);
}

static tg_menu *same_menu;

static tg_status on_showmenu(tg_hctx *h, void *user)
{
    (void)user;
    on_thread();
    return tg_menu_send(h, same_menu);
}

static void on_stopped(tg_dispatcher *d, void *user)
{
    (void)d, (void)user;
    atomic_store(&B.stopped_cb, true);
    uv_stop(&B.loop);
}

static void signal_up(bool ok)
{
    pthread_mutex_lock(&B.mu);
    atomic_store(ok ? &B.up : &B.failed_start, true);
    pthread_cond_broadcast(&B.cv);
    pthread_mutex_unlock(&B.mu);
}

static void *bot_main(void *arg)
{
    (void)arg;
    B.thread = pthread_self();
    tg_bot *bot = tg_bot_new(tg_test_token(B.t), &(tg_bot_options){.base_url = tg_test_url(B.t),
                                                                   .log_level = TG_LOG_ERROR});
    tg_router *r = tg_router_new();
    tg_async_uv ad;
    uv_loop_init(&B.loop);
    tg_async *a = bot && r ? tg_async_uv_new(&ad, &B.loop, bot, NULL) : NULL;
    if (!a) {
        signal_up(false);
        return NULL;
    }
    tg_router_add(r, 0, tg_filter_and(tg_filter_state("size"), tg_filter_kind(TG_UPDATE_MESSAGE)),
                  on_size, NULL);
    tg_router_on_command(r, "order", on_order, NULL);
    tg_router_on_command(r, "menu", on_menu, NULL);
    tg_router_on_command(r, "then", on_then, NULL);
    tg_router_on_command(r, "fail", on_fail, NULL);
    tg_router_on_command(r, "blocking", on_blocking, NULL);
    tg_router_on_command(r, "remind", on_remind, NULL);
    tg_router_on_callback(r, "pick:", on_pick, NULL);
    tg_router_on_text(r, "^c[0-9]+ m[0-9]+$", on_burst, NULL);
    tg_router_on_error(r, on_error, NULL);
    same_menu = tg_menu_new("same", "A menu that stays the same");
    tg_menu_add_button(same_menu, "Same", NULL, NULL); /* its redraw changes nothing */
    tg_router_add_menu(r, same_menu);
    tg_router_on_command(r, "showmenu", on_showmenu, NULL);
    B.d = tg_dispatcher_new(bot, r,
                            &(tg_dispatcher_options){.async = a,
                                                     .on_stopped = on_stopped,
                                                     .queue_capacity = 4}); /* polling
                                                     pauses and resumes under the burst */
    B.jobs = B.d ? tg_jobs_new(B.d, NULL) : NULL;
    bool ok = B.jobs && tg_jobs_register(B.jobs, "remind", job_remind, NULL) == TG_OK &&
              tg_jobs_start(B.jobs) == TG_OK &&
              tg_dispatcher_poll_async(B.d, &(tg_async_poll_options){.timeout_s = 5}) == TG_OK;
    signal_up(ok);
    if (ok)
        uv_run(&B.loop, UV_RUN_DEFAULT); /* until on_stopped */
    tg_jobs_free(B.jobs);
    if (B.d)
        tg_dispatcher_get_stats(B.d, &B.st);
    tg_dispatcher_free(B.d);
    tg_async_uv_free(&ad);
    uv_run(&B.loop, UV_RUN_DEFAULT);
    uv_loop_close(&B.loop);
    tg_router_free(r);
    tg_bot_free(bot);
    return NULL;
}

static int64_t message_id_of(const char *json)
{
    const char *p = json ? strstr(json, "\"message_id\":") : NULL;
    return p ? strtoll(p + 13, NULL, 10) : -1;
}

/* Wait for the bot's message containing text in chat after after_id; returns its id. */
static int64_t expect(int64_t chat, int64_t after_id, const char *text)
{
    char *m = tg_test_wait_message(B.t, chat, after_id, text, 15000);
    if (!m)
        fail_msg("chat %lld: no \"%s\" after message %lld: %s", (long long)chat, text,
                 (long long)after_id, tg_test_errmsg(B.t));
    int64_t id = message_id_of(m);
    free(m);
    return id;
}

static void test_bot_on_the_loop(void **state)
{
    (void)state;
    B.t = tg_test_start();
    assert_non_null(B.t);
    pthread_mutex_init(&B.mu, NULL);
    pthread_cond_init(&B.cv, NULL);
    assert_int_equal(pthread_create(&B.th, NULL, bot_main, NULL), 0);
    pthread_mutex_lock(&B.mu);
    while (!atomic_load(&B.up) && !atomic_load(&B.failed_start))
        pthread_cond_wait(&B.cv, &B.mu);
    pthread_mutex_unlock(&B.mu);
    assert_true(atomic_load(&B.up));

    /* three chats: the default user's private chat, another user's, a group */
    int64_t u2 = tg_test_add_user(B.t, "Second");
    assert_true(u2 > 0);
    int64_t group = tg_test_add_chat(B.t, "group", "Loop group", 0);
    assert_true(group != 0);
    assert_int_equal(tg_test_join(B.t, group, tg_test_bot_id(B.t), false), 0);
    struct {
        int64_t user, chat, wait_chat;
    } chats[3] = {{0, 0, 0}, {u2, 0, u2}, {0, group, group}};
    enum { MSGS = 5 };
    for (int i = 0; i < MSGS; i++) /* interleaved, no waiting: all in flight together */
        for (int c = 0; c < 3; c++) {
            char text[32];
            snprintf(text, sizeof text, "c%d m%d", c, i);
            assert_true(tg_test_send(B.t, chats[c].user, chats[c].chat, text) > 0);
        }
    for (int c = 0; c < 3; c++) {
        int64_t after = 0;
        for (int i = 0; i < MSGS; i++)
            for (int k = 1; k <= 3; k++) {
                char text[32];
                snprintf(text, sizeof text, "c%d m%d #%d", c, i, k);
                after = expect(chats[c].wait_chat, after, text); /* order: each after the last */
            }
    }

    /* a conversation with session data, in the second user's chat */
    int64_t at = tg_test_last_message_id(B.t, u2);
    assert_true(tg_test_send(B.t, u2, 0, "/order") > 0);
    at = expect(u2, at, "Which size?");
    assert_true(tg_test_send(B.t, u2, 0, "large") > 0);
    expect(u2, at, "Ordered large (visit 2)");

    /* a callback press: answered, then the message edited */
    at = tg_test_last_message_id(B.t, 0);
    assert_true(tg_test_send(B.t, 0, 0, "/menu") > 0);
    int64_t menu = expect(0, at, "Pick one");
    char *ans = tg_test_press(B.t, 0, 0, menu, "pick:1", 15000);
    if (!ans)
        fail_msg("callback not answered: %s", tg_test_errmsg(B.t));
    assert_non_null(strstr(ans, "picked"));
    free(ans);
    char *ed = tg_test_wait_edit(B.t, 0, menu, "you picked 1", 15000);
    if (!ed)
        fail_msg("not edited: %s", tg_test_errmsg(B.t));
    free(ed);

    /* a result through a continuation; a failing call; a blocking call refused; a job */
    at = tg_test_last_message_id(B.t, 0);
    assert_true(tg_test_send(B.t, 0, 0, "/then") > 0);
    at = expect(0, at, "I am {");
    assert_true(tg_test_send(B.t, 0, 0, "/fail") > 0);
    at = expect(0, at, "error: sendMessage");
    assert_true(tg_test_send(B.t, 0, 0, "/blocking") > 0);
    at = expect(0, at, "refused");
    assert_true(tg_test_send(B.t, 0, 0, "/remind") > 0);
    at = expect(0, at, "will remind");
    at = expect(0, at, "reminder from a job");
    /* a menu redraw answered "message is not modified" is no error, on the loop too */
    assert_true(tg_test_send(B.t, 0, 0, "/showmenu") > 0);
    char *mm = tg_test_wait_message(B.t, 0, at, "stays the same", 15000);
    if (!mm)
        fail_msg("no menu: %s", tg_test_errmsg(B.t));
    int64_t mid = message_id_of(mm);
    const char *cd = strstr(mm, "\"callback_data\":\"");
    assert_non_null(cd);
    char data[65];
    snprintf(data, sizeof data, "%.*s", (int)strcspn(cd + 17, "\""), cd + 17);
    free(mm);
    char *pa = tg_test_press(B.t, 0, 0, mid, data, 15000);
    if (!pa)
        fail_msg("menu press not answered: %s", tg_test_errmsg(B.t));
    free(pa);
    assert_true(tg_test_send(B.t, 0, 0, "/blocking") > 0); /* the chat's next update: after */
    int64_t last = expect(0, mid, "refused");
    char *err = tg_test_wait_message(B.t, 0, mid, "error: ", 0);
    if (err && message_id_of(err) < last)
        fail_msg("the redraw failed the update: %s", err);
    free(err);
    at = last;
    /* the failed update's second call was cancelled, never sent */
    char *never = tg_test_wait_message(B.t, 0, 0, "must not be sent", 0);
    assert_null(never);

    tg_dispatcher_stop(B.d); /* from another thread: noticed by the loop */
    assert_int_equal(pthread_join(B.th, NULL), 0);
    assert_true(atomic_load(&B.stopped_cb));
    assert_int_equal(atomic_load(&B.off_thread), 0);
    assert_true(atomic_load(&B.handlers) >= 3 * MSGS + 8);
    assert_true(B.st.handled >= 3 * MSGS + 7);
    assert_true(B.st.failed >= 1);
    tg_test_free(B.t);
}

/* ---- the edges, on the handle's own epoll loop ---- */

static struct {
    int ran;             /* handlers run */
    int done_handled[4]; /* per update id 1..3: 1 = handled, 2 = dropped */
    tg_status upload_st; /* what a queued upload got */
    tg_status feed_other_thread;
    tg_dispatcher *d;
} E;

static tg_status on_two(tg_hctx *h, void *user)
{
    (void)user;
    E.ran++;
    tg_send_document_params p = {.chat_id = tg_chat_id_int(tg_hctx_event(h)->chat_id),
                                 .document = tg_input_file_memory("x", 1, "x.txt")};
    E.upload_st = tg_send_document(tg_hctx_ctx(h), &p, NULL); /* refused: it would block */
    tg_status st = tg_reply(h, "first");
    return st == TG_OK ? tg_reply(h, "second") : st;
}

static void on_fed(void *user, int64_t update_id, bool handled)
{
    (void)user;
    if (update_id >= 1 && update_id <= 3)
        E.done_handled[update_id] = handled ? 1 : 2;
}

static void *feed_elsewhere(void *arg)
{
    const char *json = arg;
    E.feed_other_thread = tg_dispatcher_feed(E.d, json, strlen(json), 0, NULL, NULL);
    return NULL;
}

/* What cannot work on a loop is refused with a reason; freeing the dispatcher with a call
 * in flight and updates queued drops the queued ones (done: not handled), orphans the call
 * and leaves the handle to complete it (ASan: nothing touched after free). */
static void test_loop_edges(void **state)
{
    (void)state;
    tg_test *t = tg_test_start();
    assert_non_null(t);
    tg_bot *bot = tg_bot_new(tg_test_token(t), &(tg_bot_options){.base_url = tg_test_url(t),
                                                                 .log_level = TG_LOG_ERROR});
    tg_async *a = tg_async_new(bot, NULL);
    tg_router *r = tg_router_new();
    tg_router_on_kind(r, TG_UPDATE_MESSAGE, on_two, NULL);
    E.d = tg_dispatcher_new(bot, r, &(tg_dispatcher_options){.async = a, .no_get_me = true});
    assert_non_null(E.d);
    int64_t chat = tg_test_user_id(t); /* the default user's private chat */
    char json[3][256];
    for (int i = 0; i < 3; i++)
        snprintf(json[i], sizeof json[i],
                 "{\"update_id\":%d,\"message\":{\"message_id\":%d,\"date\":1,"
                 "\"chat\":{\"id\":%lld,\"type\":\"private\"},\"from\":{\"id\":%lld,"
                 "\"is_bot\":false,\"first_name\":\"D\"},\"text\":\"hi\"}}",
                 i + 1, i + 1, (long long)chat, (long long)chat);

    /* refused: blocking entry points, a feed from another thread, other receivers */
    assert_int_equal(tg_dispatcher_run_one(E.d, json[0], strlen(json[0])), TG_ERR_INVALID);
    assert_non_null(strstr(tg_dispatcher_errmsg(E.d), "loop mode"));
    assert_int_equal(tg_dispatcher_wait_idle(E.d, 10), TG_ERR_INVALID);
    assert_int_equal(tg_dispatcher_drain(E.d, 10), TG_ERR_INVALID);
    assert_int_equal(tg_run_polling(E.d, NULL), TG_ERR_INVALID);
    assert_null(tg_webhook_start(E.d, &(tg_webhook_options){.port = 0}));
    assert_non_null(strstr(tg_webhook_errmsg(), "loop mode"));
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, feed_elsewhere, json[0]), 0);
    pthread_join(th, NULL);
    assert_int_equal(E.feed_other_thread, TG_ERR_INVALID);
    assert_int_equal(tg_dispatcher_feed(E.d, "{\"update_id\":", 13, 0, NULL, NULL),
                     TG_ERR_DECODE);

    /* three updates of one chat: the first runs and its call goes out; free then */
    for (int i = 0; i < 3; i++)
        assert_int_equal(tg_dispatcher_feed(E.d, json[i], strlen(json[i]), 0, on_fed, NULL),
                         TG_OK);
    assert_int_equal(E.ran, 0); /* feed never runs handlers itself */
    for (int i = 0; i < 100 && E.ran == 0; i++)
        assert_true(tg_async_run_once(a, 1000) >= 0);
    assert_int_equal(E.ran, 1); /* the chat's next update waits for this one's calls */
    assert_int_equal(E.upload_st, TG_ERR_INVALID);
    assert_true(tg_async_pending(a) >= 1);
    tg_dispatcher_free(E.d);
    assert_int_equal(E.done_handled[1], 1);
    assert_int_equal(E.done_handled[2], 2);
    assert_int_equal(E.done_handled[3], 2);
    assert_int_equal(E.ran, 1);

    /* a full queue refuses a feed at once (backpressure: never a wait on the loop) */
    tg_dispatcher *d2 = tg_dispatcher_new(
        bot, r, &(tg_dispatcher_options){.async = a, .no_get_me = true, .queue_capacity = 2});
    assert_non_null(d2);
    assert_int_equal(tg_dispatcher_feed(d2, json[0], strlen(json[0]), -1, NULL, NULL), TG_OK);
    assert_int_equal(tg_dispatcher_feed(d2, json[1], strlen(json[1]), -1, NULL, NULL), TG_OK);
    assert_int_equal(tg_dispatcher_feed(d2, json[2], strlen(json[2]), -1, NULL, NULL),
                     TG_ERR_FLOOD);
    tg_dispatcher_free(d2);
    assert_int_equal(E.ran, 1);
    tg_async_free(a); /* completes the orphaned call */
    tg_router_free(r);
    tg_bot_free(bot);
    tg_test_free(t);
}

/* examples/async_uv_bot: the framework bot single-threaded in libuv, as a program. */
static void test_example_async_uv_bot(void **state)
{
    (void)state;
    const char *path = TGKIT_BINARY_DIR "/examples/async_uv_bot/async_uv_bot";
#ifdef TGKIT_NO_EXAMPLES
    tgtest_skip("the example bots are not built here (TGKIT_BUILD_EXAMPLES=OFF)");
#endif
    if (access(path, X_OK) != 0) /* a build dependency (tests/bot/extra.cmake) */
        fail_msg("%s: not built", path);
    B.t = tg_test_start();
    assert_non_null(B.t);
    pid_t pid = tg_test_spawn(B.t, path, NULL);
    assert_true(pid > 0);
    int64_t at = 0;
    assert_true(tg_test_send(B.t, 0, 0, "hello loop") > 0);
    at = expect(0, at, "hello loop");
    assert_true(tg_test_send(B.t, 0, 0, "/order") > 0);
    at = expect(0, at, "Which size");
    assert_true(tg_test_send(B.t, 0, 0, "medium") > 0);
    at = expect(0, at, "Ordered: medium");
    assert_true(tg_test_send(B.t, 0, 0, "/menu") > 0);
    int64_t menu = expect(0, at, "Press the button");
    char *ans = tg_test_press(B.t, 0, 0, menu, "press", 15000);
    if (!ans)
        fail_msg("callback not answered: %s", tg_test_errmsg(B.t));
    free(ans);
    char *ed = tg_test_wait_edit(B.t, 0, menu, "The button was pressed", 15000);
    assert_non_null(ed);
    free(ed);
    assert_true(tg_test_send(B.t, 0, 0, "/remind") > 0);
    at = expect(0, menu, "I will remind you");
    at = expect(0, at, "Reminder: one second");
    assert_true(tg_test_send(B.t, 0, 0, "/stats") > 0);
    expect(0, at, "You wrote 1 messages");
    assert_int_equal(tg_test_stop_child(pid), 0); /* SIGTERM: a clean stop, exit 0 */
    tg_test_free(B.t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_bot_on_the_loop),
                                       cmocka_unit_test(test_loop_edges),
                                       cmocka_unit_test(test_example_async_uv_bot)};
    return tgtest_result(cmocka_run_group_tests(tests, NULL, NULL));
}
#else
int main(void)
{
    fprintf(stderr, "test_dispatch_loop: libuv was not found when this was built "
                    "(install libuv1-dev: make deps)\n");
    return 1;
}
#endif
