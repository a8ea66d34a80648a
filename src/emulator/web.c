/*
 * web: the web chat's files, embedded in the binary at build time (CMake turns each file of
 * src/emulator/web/ into a byte array in web_assets.gen.c; nothing is loaded from outside).
 */
#include <string.h>

#include "emulator/server.h"

struct emu_asset {
    const char *path;
    const char *ctype;
    const unsigned char *data;
    size_t len;
};

extern const struct emu_asset emu_web_assets[];
extern const size_t emu_web_asset_count;

const char *emu_web_asset(const char *url, size_t *len, const char **ctype)
{
    if (!strcmp(url, "/"))
        url = "/index.html";
    for (size_t i = 0; i < emu_web_asset_count; i++)
        if (!strcmp(url + 1, emu_web_assets[i].path)) {
            *len = emu_web_assets[i].len;
            *ctype = emu_web_assets[i].ctype;
            return (const char *)emu_web_assets[i].data;
        }
    return NULL;
}
