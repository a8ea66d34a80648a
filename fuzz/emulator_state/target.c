/*
 * fuzz emulator_state: a saved world (--state FILE) loaded into a fresh emulator. Any input
 * must load or fail with a message naming where; a loaded world must save again.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "emulator/emu.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[300] = "";
    emu *e = emu_new(&(emu_options){.max_wait_ms = 1}, err, sizeof err);
    if (!e)
        return 0;
    err[0] = '\0';
    if (emu_state_load_json(e, (const char *)data, size, err, sizeof err) != 0 && !err[0])
        abort(); /* a failure always says why */
    emu_free(e);
    return 0;
}
