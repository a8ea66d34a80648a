/*
 * fleet.h: what the two programs of the fleet example share: the fleet from the REDIS_*
 * environment variables.
 */
#ifndef TGBOT_EXAMPLE_FLEET_H
#define TGBOT_EXAMPLE_FLEET_H

#include "example.h"

/* REDIS_HOST (default 127.0.0.1), REDIS_PORT (6379), REDIS_PASSWORD, FLEET_PARTITIONS (16):
 * every process of one fleet must use the same values. NULL after printing why. */
static inline tg_fleet *example_fleet(const char *prog)
{
    const char *port = example_env("REDIS_PORT");
    const char *parts = example_env("FLEET_PARTITIONS");
    tg_fleet_options o = {.redis_host = example_env("REDIS_HOST"),
                          .redis_port = (uint16_t)(port ? atoi(port) : 0),
                          .redis_password = example_env("REDIS_PASSWORD"),
                          .partitions = parts ? (unsigned)atoi(parts) : 0};
    tg_fleet *f = tg_fleet_new(&o);
    if (!f)
        fprintf(stderr, "%s: %s\n", prog, tg_fleet_errmsg());
    return f;
}

#endif
