/*
 * fuzz target: the doppelganger's summary of a raid (src/proxy/wire/doppel.c). The records a
 * site sends are the network's to choose: any arrival times, lengths and indexes must give
 * a profile whose gap model is finite and positive and whose size draws stay within the
 * lengths seen. Input: 12 bytes per record, little-endian: time step (u64 microseconds),
 * length (u16), index within its connection (u16).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/wire/doppel.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = size / 12;
    if (n > DOPPEL_MAX_SAMPLES)
        n = DOPPEL_MAX_SAMPLES;
    struct doppel_sample *s = malloc((n ? n : 1) * sizeof *s);
    if (!s)
        return 0;
    uint64_t t = 0;
    uint16_t lo = UINT16_MAX, hi = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t step;
        memcpy(&step, data + 12 * i, 8);
        t += step >> 20; /* up to ~4.9 hours per step, and the clock never wraps */
        s[i].t_us = t;
        s[i].len = (uint16_t)(data[12 * i + 8] | data[12 * i + 9] << 8);
        s[i].idx = (uint16_t)(data[12 * i + 10] | data[12 * i + 11] << 8);
        lo = s[i].len < lo ? s[i].len : lo;
        hi = s[i].len > hi ? s[i].len : hi;
    }
    struct doppel_profile p;
    doppel_profile_default(&p);
    if (doppel_learn(s, n, &p) != 0)
        abort();
    if (!(p.gap.k > 0) || !(p.gap.lambda_ms > 0) || !isfinite(p.gap.k) ||
        !isfinite(p.gap.lambda_ms) || p.phases > DOPPEL_PHASES)
        abort();
    for (unsigned ph = 0; p.phases && ph <= DOPPEL_PHASES; ph++)
        for (int j = 0; j <= 8; j++) {
            uint32_t v = doppel_size(&p, ph, j / 8.0);
            if (v < lo || v > hi)
                abort();
        }
    for (int j = 0; j < 8; j++)
        if (!(doppel_draw(&p.gap, (j + 0.5) / 8) >= 0))
            abort();
    free(s);
    return 0;
}
