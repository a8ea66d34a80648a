/* stats: snapshot and names of the per-thread counters. See stats.h. */
#include "proxy/stats.h"

#include <assert.h>

#define STATS_NAME(name, help) #name,
#define STATS_HELP(name, help) help,
static const char *const names[] = {STATS_LIST(STATS_NAME)};
static const char *const helps[] = {STATS_LIST(STATS_HELP)};
static_assert(sizeof names / sizeof names[0] == STATS_COUNT, "stats names and fields agree");

void stats_sum(struct stats *dst, const struct stats *src)
{
#define STATS_SUM(name, help) dst->name += __atomic_load_n(&src->name, __ATOMIC_RELAXED);
    STATS_LIST(STATS_SUM)
#undef STATS_SUM
}

const char *stats_name(size_t i)
{
    return i < STATS_COUNT ? names[i] : "";
}

const char *stats_help(size_t i)
{
    return i < STATS_COUNT ? helps[i] : "";
}

void stats_secret_sum(struct stats_secret *dst, const struct stats_secret *src)
{
#define STATS_SUM(name, help) dst->name += __atomic_load_n(&src->name, __ATOMIC_RELAXED);
    STATS_SECRET_LIST(STATS_SUM)
#undef STATS_SUM
}
