/* test_async_event: the async client inside a libevent event_base through
 * tgbot/async_event.h, against the fake Bot API server and the emulator (cases in
 * async_adapter_cases.h). Fails when libevent was not found at build time (make deps
 * installs libevent-dev). */
#include "async_adapter_cases.h"

#ifdef TGKIT_HAVE_LIBEVENT
#include "tgbot/async_event.h"

static struct event_base *base;
static tg_async_event ad;

static tg_async *ev_make(tg_bot *bot, const tg_async_options *o)
{
    base = event_base_new();
    assert_non_null(base);
    return tg_async_event_new(&ad, base, bot, o);
}

static void ev_once(void)
{
    event_base_loop(base, EVLOOP_ONCE);
}

static void ev_nowait(void)
{
    event_base_loop(base, EVLOOP_NONBLOCK);
}

static void ev_destroy(void)
{
    tg_async_event_free(&ad);
    event_base_free(base);
    base = NULL;
}

int main(void)
{
    static const loop_driver d = {"libevent", ev_make, ev_once, ev_nowait, ev_destroy};
    return ad_run_cases(&d, NULL, NULL);
}
#else
int main(void)
{
    fprintf(stderr, "test_async_event: libevent was not found when this was built "
                    "(install libevent-dev: make deps)\n");
    return 1;
}
#endif
