/*
 * fuzz target: the quota state file parser (src/proxy/config/quotafile.c). Any input must give
 * entries that hold the format's invariants (valid labels, each once) or -EINVAL with a
 * "fuzz.quota:LINE: ..." message; never a crash, a hang or a read past the input. Each entry
 * then goes through the period bound (a day's period at a fixed now): it passes only with a
 * PERIOD_END at most a day ahead, and refuses with the entry's own line.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/config/quotafile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct quotafile_entry e[QUOTAFILE_MAX_ENTRIES];
    char err[512];
    /* a copy of exactly size bytes, so a read past the end shows under ASan */
    char *text = malloc(size ? size : 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    int n = quotafile_parse("fuzz.quota", text, size, e, QUOTAFILE_MAX_ENTRIES, err, sizeof err);
    if (n < 0 && (n != -EINVAL || strncmp(err, "fuzz.quota:", 11) != 0))
        abort();
    for (int i = 0; i < n; i++) {
        size_t len = strnlen(e[i].label, sizeof e[i].label);
        if (len == 0 || len >= sizeof e[i].label || e[i].period_end < 0)
            abort();
        for (int k = 0; k < i; k++)
            if (strcmp(e[k].label, e[i].label) == 0)
                abort();
        enum { NOW = 1700000000, DAY = 86400 };
        char want[32];
        snprintf(want, sizeof want, "fuzz.quota:%u: ", (unsigned)e[i].line);
        int rc = quotafile_check_period("fuzz.quota", &e[i], NOW, DAY, err, sizeof err);
        if (rc == 0 ? e[i].period_end > NOW + DAY
                    : rc != -EINVAL || strncmp(err, want, strlen(want)) != 0)
            abort();
    }
    free(text);
    return 0;
}
