/* failstate: see failstate.h. */
#include "bot/updates/failstate.h"

#include "core/clock.h"
#include "core/log.h"

bool tg__failstate_fail(tg__failstate *fs, const char *err)
{
    if (fs->failures++ == 0)
        fs->since_ms = tg__now_ms();
    uint64_t shape = tg__log_shape(err);
    if (fs->warned == shape)
        return false;
    fs->warned = shape;
    return true;
}

bool tg__failstate_ok(tg__failstate *fs, uint64_t *failures, uint64_t *secs)
{
    if (!fs->failures)
        return false;
    if (failures)
        *failures = fs->failures;
    if (secs)
        *secs = (tg__now_ms() - fs->since_ms) / 1000;
    *fs = (tg__failstate){0};
    return true;
}
