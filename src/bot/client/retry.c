/*
 * retry.c: the retry decision, a pure function of the policy and what went wrong.
 *
 * 429 waits the server's retry_after (plus a little jitter so a fleet of ctxs does not come
 * back in lockstep), or backs off when the server gave none; everything else retried backs
 * off exponentially with "equal jitter" (half fixed, half random) under a cap. Every path is
 * bounded twice: by the number of attempts and by the total time of the call.
 */
#include "bot/client/client_int.h"

#define DEF_ATTEMPTS      5
#define DEF_TOTAL_MS      120000
#define DEF_RETRY_AFTER_S 60
#define DEF_BASE_MS       250
#define DEF_MAX_MS        10000
#define JITTER_429_MS     50 /* at most, added to retry_after */

void tg__retry_resolve(const tg_retry_policy *in, tg_retry_policy *out)
{
    *out = *in;
    if (!out->max_attempts)
        out->max_attempts = DEF_ATTEMPTS;
    if (!out->max_total_ms)
        out->max_total_ms = DEF_TOTAL_MS;
    if (!out->max_retry_after_s)
        out->max_retry_after_s = DEF_RETRY_AFTER_S;
    if (!out->backoff_base_ms)
        out->backoff_base_ms = DEF_BASE_MS;
    if (!out->backoff_max_ms)
        out->backoff_max_ms = DEF_MAX_MS;
    if (out->backoff_max_ms < out->backoff_base_ms)
        out->backoff_max_ms = out->backoff_base_ms;
}

static uint64_t backoff_ms(const tg_retry_policy *p, uint32_t attempt, uint32_t rnd)
{
    uint64_t d = p->backoff_base_ms;
    for (uint32_t i = 1; i < attempt && d < p->backoff_max_ms; i++)
        d *= 2;
    if (d > p->backoff_max_ms)
        d = p->backoff_max_ms;
    uint64_t half = d / 2;
    return half + (half ? rnd % (half + 1) : 0);
}

int64_t tg__retry_wait_ms(const tg_retry_policy *p, enum tg__outcome out, uint32_t attempt,
                          uint64_t elapsed_ms, int32_t retry_after_s, uint32_t rnd)
{
    uint64_t wait;
    if (attempt >= p->max_attempts)
        return -1;
    switch (out) {
    case TG__OUT_429:
        if (p->no_retry_429)
            return -1;
        if (retry_after_s < 0 || (uint32_t)retry_after_s > p->max_retry_after_s)
            return -1;
        wait = retry_after_s > 0 ? (uint64_t)retry_after_s * 1000 + rnd % (JITTER_429_MS + 1)
                                 : backoff_ms(p, attempt, rnd);
        break;
    case TG__OUT_CONNECT:
        if (p->no_retry_connect)
            return -1;
        wait = backoff_ms(p, attempt, rnd);
        break;
    case TG__OUT_LOST:
        if (!p->retry_after_send)
            return -1;
        wait = backoff_ms(p, attempt, rnd);
        break;
    case TG__OUT_5XX:
        if (!p->retry_5xx)
            return -1;
        wait = backoff_ms(p, attempt, rnd);
        break;
    default:
        return -1;
    }
    if (elapsed_ms >= p->max_total_ms || wait > p->max_total_ms - elapsed_ms)
        return -1;
    return (int64_t)wait;
}
