/* test_async_uv: the async client inside a libuv loop through tgbot/async_uv.h, against the
 * fake Bot API server and the emulator (cases in async_adapter_cases.h). Fails when libuv
 * was not found at build time (make deps installs libuv1-dev). */
#include "async_adapter_cases.h"

#ifdef TGKIT_HAVE_LIBUV
#include "tgbot/async_uv.h"

static uv_loop_t loop;
static tg_async_uv ad;

static tg_async *drv_make(tg_bot *bot, const tg_async_options *o)
{
    assert_int_equal(uv_loop_init(&loop), 0);
    return tg_async_uv_new(&ad, &loop, bot, o);
}

static void drv_once(void)
{
    uv_run(&loop, UV_RUN_ONCE);
}

static void drv_nowait(void)
{
    uv_run(&loop, UV_RUN_NOWAIT);
}

static void drv_destroy(void)
{
    tg_async_uv_free(&ad);
    uv_run(&loop, UV_RUN_DEFAULT); /* closes the adapter's handles */
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* examples/async_uv_echo: a whole bot single-threaded inside libuv, end to end. */
static void test_example_bot_in_libuv(void **state)
{
    (void)state;
    const char *path = TGKIT_BINARY_DIR "/examples/async_uv_echo/async_uv_echo";
#ifdef TGKIT_NO_EXAMPLES
    tgtest_skip("the example bots are not built here (TGKIT_BUILD_EXAMPLES=OFF)");
#endif
    if (access(path, X_OK) != 0) /* a build dependency (CMakeLists.txt) */
        fail_msg("%s: not built", path);
    tg_test *t = tg_test_start();
    assert_non_null(t);
    pid_t pid = tg_test_spawn(t, path, NULL);
    assert_true(pid > 0);
    for (int i = 0; i < 3; i++) {
        char text[32];
        snprintf(text, sizeof text, "hello libuv %d", i);
        assert_true(tg_test_send(t, 0, 0, text) > 0);
        char *m = tg_test_wait_message(t, 0, 0, text, 10000);
        if (!m)
            fail_msg("no echo: %s", tg_test_errmsg(t));
        free(m);
    }
    assert_int_equal(tg_test_stop_child(pid), 0); /* SIGTERM: a clean stop */
    tg_test_free(t);
}

int main(void)
{
    static const loop_driver d = {"libuv", drv_make, drv_once, drv_nowait, drv_destroy};
    return ad_run_cases(&d, "test_example_bot_in_libuv", test_example_bot_in_libuv);
}
#else
int main(void)
{
    fprintf(stderr, "test_async_uv: libuv was not found when this was built "
                    "(install libuv1-dev: make deps)\n");
    return 1;
}
#endif
