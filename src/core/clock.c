/* clock: thin wrappers over clock_gettime. See clock.h. */
#include "core/clock.h"

#include <errno.h>
#include <time.h>

static uint64_t read_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t tg__now_ns(void)
{
    return read_ns(CLOCK_MONOTONIC);
}

uint64_t tg__now_ms(void)
{
    return read_ns(CLOCK_MONOTONIC) / 1000000u;
}

uint64_t tg__wall_ms(void)
{
    return read_ns(CLOCK_REALTIME) / 1000000u;
}

int64_t tg__wall_s(void)
{
    return (int64_t)(read_ns(CLOCK_REALTIME) / 1000000000u);
}

uint64_t tg__thread_cpu_ns(void)
{
    return read_ns(CLOCK_THREAD_CPUTIME_ID);
}

uint64_t tg__process_cpu_ns(void)
{
    return read_ns(CLOCK_PROCESS_CPUTIME_ID);
}

void tg__sleep_ms(uint64_t ms)
{
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}
