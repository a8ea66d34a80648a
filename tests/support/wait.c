/* wait: bounded polling for a state. See wait.h. */
#include "wait.h"

#include <stdint.h>
#include <time.h>

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

bool tgtest_wait_until(bool (*cond)(void *arg), void *arg, int timeout_ms)
{
    uint64_t end = now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    long pause_ns = 1000000; /* 1 ms, doubling up to 10 ms */
    while (!cond(arg)) {
        if (now_ms() >= end)
            return cond(arg);
        struct timespec ts = {.tv_nsec = pause_ns};
        nanosleep(&ts, NULL);
        pause_ns = pause_ns * 2 > 10000000 ? 10000000 : pause_ns * 2;
    }
    return true;
}
