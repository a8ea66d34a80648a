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

int main(void)
{
    static const loop_driver d = {"libuv", drv_make, drv_once, drv_nowait, drv_destroy};
    return ad_run_cases(&d);
}
#else
int main(void)
{
    fprintf(stderr, "test_async_uv: libuv was not found when this was built "
                    "(install libuv1-dev: make deps)\n");
    return 1;
}
#endif
