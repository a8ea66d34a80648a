/*
 * fuzz target: TZif files and POSIX TZ rules (src/bot/dispatch/tz.c), which the job queue
 * reads from the tz database on disk ($TZDIR may point anywhere). Any input must parse or be
 * refused without reading past its end; a parsed zone must answer offsets and local-to-UTC
 * conversions for any instant without crashing, with offsets inside RFC 8536's range.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bot/dispatch/tz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    tg__tz z;
    struct tg__tz_rule r;
    tg__tz_rule_parse(&r, (const char *)data, size < 200 ? size : 200);
    if (tg__tz_parse(&z, data, size, err, sizeof err) != 0)
        return 0;
    static const int64_t probes[] = {INT64_MIN / 4, -2208988800, 0, 1774746000, 2145916800,
                                     4102444800, INT64_MAX / 4};
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        int32_t off = tg__tz_offset(&z, probes[i]);
        if (off < -200000 || off > 200000)
            abort();
        (void)tg__tz_from_local(&z, probes[i]);
    }
    tg__tz_cleanup(&z);
    return 0;
}
