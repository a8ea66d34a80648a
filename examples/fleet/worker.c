/*
 * fleet worker: runs the bot's handlers for the partitions it owns. Start as many as you
 * like, on any machines that reach Redis; they share the partitions, and when one stops or
 * dies the others take its partitions (and its unfinished updates) within the lease time.
 *
 * The bot: /count counts the messages of this chat so far, kept in the chat's conversation
 * (in Redis, so it follows the chat from worker to worker); any other text is echoed.
 * Flood-control limits hold across all workers (tg_fleet_share_flood).
 *
 * Redis: REDIS_HOST, REDIS_PORT, REDIS_PASSWORD, FLEET_PARTITIONS (see fleet.h).
 */
#include "fleet.h"

static long bump(tg_hctx *h)
{
    size_t len = 0;
    const char *data = tg_conv_data(h, &len);
    char b[24] = "0";
    if (data && len < sizeof b) {
        memcpy(b, data, len);
        b[len] = '\0';
    }
    long n = atol(b) + 1;
    int k = snprintf(b, sizeof b, "%ld", n);
    tg_conv_set(h, "counting", b, (size_t)k);
    return n;
}

static tg_status on_message(tg_hctx *h, void *user)
{
    (void)user;
    const tg_event *ev = tg_hctx_event(h);
    long n = bump(h);
    if (!ev->text)
        return TG_OK;
    if (ev->command && ev->command_len == 5 && strncmp(ev->command, "count", 5) == 0) {
        char b[64];
        snprintf(b, sizeof b, "%ld messages in this chat so far", n);
        return tg_reply(h, b);
    }
    return tg_reply(h, ev->text);
}

int main(void)
{
    /* Telegram's limits (30 messages/s in all, 1/s per chat, 20/min per group), kept across
     * every worker of the fleet. */
    tg_bot *bot = example_bot_opts("worker", (tg_bot_options){.flood = {.enabled = true}});
    if (!bot)
        return EXAMPLE_EXIT_CONFIG;
    tg_fleet *f = example_fleet("worker");
    const char *port = example_env("REDIS_PORT");
    tg_storage *store =
        f ? tg_storage_redis_new(&(tg_redis_options){.host = example_env("REDIS_HOST"),
                                                     .port = (uint16_t)(port ? atoi(port) : 0),
                                                     .password = example_env("REDIS_PASSWORD")})
          : NULL;
    if (f && !store)
        fprintf(stderr, "worker: %s\n", tg_storage_errmsg());
    tg_router *r = tg_router_new();
    tg_router_on_kind(r, TG_UPDATE_MESSAGE, on_message, NULL);
    tg_dispatcher *d =
        store ? example_dispatcher("worker", bot, r, &(tg_dispatcher_options){.storage = store})
              : NULL;
    int rc = EXAMPLE_EXIT_CONFIG;
    if (d) {
        tg_fleet_share_flood(f, bot);
        fprintf(stderr, "worker: %s joins the fleet; Ctrl-C stops\n", tg_fleet_worker_id(f));
        tg_status st = tg_fleet_run_worker(f, d, NULL);
        fprintf(stderr, "worker: stopped: %s\n", tg_strerror(st));
        rc = st == TG_OK ? 0 : 1;
    }
    tg_dispatcher_free(d);
    tg_router_free(r);
    tg_storage_free(store);
    tg_fleet_free(f);
    tg_bot_free(bot);
    return rc;
}
