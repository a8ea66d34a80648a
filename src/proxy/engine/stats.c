/* stats: snapshot and names of the per-thread counters. See stats.h. */
#include "proxy/engine/stats.h"

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

static const uint64_t dc_le_ms[] = {1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000};
static const int32_t dc_ids[] = {1, 2, 3, 4, 5, 203, 10001, 10002, 10003};
static_assert(sizeof dc_le_ms / sizeof dc_le_ms[0] == STATS_DC_NLE, "histogram bounds");
static_assert(sizeof dc_ids / sizeof dc_ids[0] == STATS_DC_IDS, "DC slots");
#define STATS_DC_NAME(name, help) #name,
static const char *const dc_fail_names[] = {STATS_DC_FAIL_LIST(STATS_DC_NAME)};
static_assert(sizeof dc_fail_names / sizeof dc_fail_names[0] == STATS_DC_FAIL_COUNT,
              "DC failure names and counters agree");

size_t stats_dc_slot(int32_t dc)
{
    int64_t id = dc < 0 ? -(int64_t)dc : dc;
    for (size_t i = 0; i < STATS_DC_IDS; i++)
        if (dc_ids[i] == id)
            return i;
    return STATS_DC_OTHER;
}

void stats_dc_ok(struct stats_dc *d, uint64_t ms)
{
    size_t i = 0;
    while (i < STATS_DC_NLE && ms > dc_le_ms[i])
        i++;
    stats_add(d, le[i], 1);
    stats_add(d, sum_ms, ms);
}

void stats_dc_fail(struct stats_dc *d, size_t reason)
{
    if (reason < STATS_DC_FAIL_COUNT)
        stats_add(d, fail[reason], 1);
}

void stats_dc_sum(struct stats_dc *dst, const struct stats_dc *src)
{
    for (size_t i = 0; i <= STATS_DC_NLE; i++)
        dst->le[i] += __atomic_load_n(&src->le[i], __ATOMIC_RELAXED);
    dst->sum_ms += __atomic_load_n(&src->sum_ms, __ATOMIC_RELAXED);
    for (size_t i = 0; i < STATS_DC_FAIL_COUNT; i++)
        dst->fail[i] += __atomic_load_n(&src->fail[i], __ATOMIC_RELAXED);
    dst->mp_up += __atomic_load_n(&src->mp_up, __ATOMIC_RELAXED);
}

int32_t stats_dc_id(size_t slot)
{
    return slot < STATS_DC_IDS ? dc_ids[slot] : 0;
}

uint64_t stats_dc_le_ms(size_t i)
{
    return i < STATS_DC_NLE ? dc_le_ms[i] : UINT64_MAX;
}

const char *stats_dc_fail_name(size_t i)
{
    return i < STATS_DC_FAIL_COUNT ? dc_fail_names[i] : "";
}
