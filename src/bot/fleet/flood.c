/*
 * flood (fleet): the client's flood-control limits kept across every process of a fleet.
 *
 * The same GCRA as src/bot/client/flood.c (no burst: a message goes at the latest of the
 * global, chat and group theoretical arrival times, and moves each one interval past that),
 * computed by one script on Redis's clock, so every process reserves from the same buckets.
 * The script answers the wait in microseconds, which the caller adds to its own clock.
 * While Redis cannot be reached the bot's local buckets decide; the first failure of an
 * outage is logged and each check done locally is counted; checks skip Redis for a second
 * after a failure so a dead server does not cost every message a connect timeout.
 */
#include <stddef.h>
#include <stdio.h>

#include "bot/client/client_int.h"
#include "bot/fleet/fleet_int.h"
#include "core/clock.h"
#include "core/log.h"

#define RETRY_AFTER_MS 1000

/* KEYS: global, chat, group. ARGV: global_us, chat_us, group_us, max_wait_us, fail_fast,
 * group. Returns the wait in us, or -1 when refused. TATs expire once in the past. */
static const char gcra_lua[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
    "local grp = ARGV[6] == '1'\n"
    "local at = math.max(now, tonumber(redis.call('GET', KEYS[1]) or 0),\n"
    "                    tonumber(redis.call('GET', KEYS[2]) or 0))\n"
    "if grp then at = math.max(at, tonumber(redis.call('GET', KEYS[3]) or 0)) end\n"
    "local wait = at - now\n"
    "if (ARGV[5] == '1' and wait > 0) or wait > tonumber(ARGV[4]) then return -1 end\n"
    "local function put(k, v)\n"
    "  redis.call('SET', k, string.format('%.0f', v), 'PX', math.floor((v - now) / 1000) + 1000)\n"
    "end\n"
    "put(KEYS[1], at + tonumber(ARGV[1]))\n"
    "put(KEYS[2], at + tonumber(ARGV[2]))\n"
    "if grp then put(KEYS[3], at + tonumber(ARGV[3])) end\n"
    "return wait\n";

static struct tg__rscript gcra_script;
static pthread_once_t gcra_once = PTHREAD_ONCE_INIT;

static void gcra_make(void)
{
    tg__rscript_init(&gcra_script, gcra_lua);
}

static int64_t remote_reserve(void *user, const struct tg__flood *fl, int64_t key, bool group,
                              int64_t now_us)
{
    tg_fleet *f = user;
    /* the buckets live in a tg_bot: log through its logger (it scrubs the token) */
    tg__logger *log = &((tg_bot *)(void *)((char *)fl - offsetof(struct tg_bot, flood)))->log;
    if (tg__now_ms() < atomic_load(&f->flood_retry_at_ms)) {
        atomic_fetch_add(&f->st.flood_fallbacks, 1);
        return TG__FLOOD_UNAVAILABLE;
    }
    char g[TG__FLEET_KEY_MAX], c[TG__FLEET_KEY_MAX], gc[TG__FLEET_KEY_MAX];
    snprintf(g, sizeof g, "{%sflood}:g", f->prefix);
    snprintf(c, sizeof c, "{%sflood}:c:%lld", f->prefix, (long long)key);
    snprintf(gc, sizeof gc, "{%sflood}:gc:%lld", f->prefix, (long long)key);
    char a[4][24];
    const char *keys[] = {g, c, gc};
    const char *args[] = {tg__fleet_i64(fl->global_us, a[0], sizeof a[0]),
                          tg__fleet_i64(fl->chat_us, a[1], sizeof a[1]),
                          tg__fleet_i64(fl->group_us, a[2], sizeof a[2]),
                          tg__fleet_i64((int64_t)fl->opt.max_wait_ms * 1000, a[3], sizeof a[3]),
                          fl->opt.fail_fast ? "1" : "0",
                          group ? "1" : "0"};
    pthread_mutex_lock(&f->misc_mu);
    redisReply *r = tg__rconn_eval(f->misc, &gcra_script, 3, keys, 6, args, NULL);
    bool ok = r && r->type == REDIS_REPLY_INTEGER;
    int64_t wait = ok ? r->integer : 0;
    if (!ok) {
        if (r)
            tg__rconn_fail(f->misc, r, "flood check");
        if (!atomic_exchange(&f->flood_down, true))
            tg__log(log, TG__LOG_WARN,
                    "fleet: flood control falls back to this process's limits: %s",
                    tg__rconn_err(f->misc));
        atomic_store(&f->flood_retry_at_ms, tg__now_ms() + RETRY_AFTER_MS);
    } else if (r) {
        freeReplyObject(r);
    }
    pthread_mutex_unlock(&f->misc_mu);
    if (!ok) {
        atomic_fetch_add(&f->st.flood_fallbacks, 1);
        return TG__FLOOD_UNAVAILABLE;
    }
    if (atomic_exchange(&f->flood_down, false))
        tg__log(log, TG__LOG_INFO, "fleet: flood control is fleet-wide again");
    atomic_fetch_add(&f->st.flood_checks, 1);
    return wait < 0 ? -1 : now_us + wait;
}

tg_status tg_fleet_share_flood(tg_fleet *f, tg_bot *bot)
{
    if (!bot || !bot->flood.opt.enabled)
        return TG_ERR_INVALID;
    pthread_once(&gcra_once, gcra_make);
    tg__flood_set_remote(&bot->flood, f ? remote_reserve : NULL, f);
    return TG_OK;
}
